//! The runner as `cargo hostfuzz` runs it: the gate, the canary, replay.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn runner(out: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hostfuzz"));
    command.args(args).env("HOSTFUZZ_OUT", out).env_remove("HOSTFUZZ_STATS").env_remove("HOSTFUZZ_BOUND_MS");
    command
}

fn hostfuzz(out: &Path, args: &[&str]) -> Output {
    runner(out, args).output().expect("the runner starts")
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The path on the stdout line starting with `label` (`  input: PATH (...`).
fn saved(stdout: &str, label: &str) -> PathBuf {
    let line = stdout.lines().find_map(|l| l.trim_start().strip_prefix(label)).expect(label);
    PathBuf::from(line.split(" (").next().unwrap())
}

#[test]
fn gate_exits_0_and_prints_the_same_twice() {
    let out = out_dir("gate");
    let first = hostfuzz(&out, &[]);
    let second = hostfuzz(&out, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stdout(&first));
    assert_eq!(stdout(&first), stdout(&second));
    let gate = [
        "fdt",
        "bundle",
        "bundle-format",
        "elf",
        "programs",
        "timers",
        "virtio",
        "net",
        "store",
        "kernel-mm",
        "kernel-syscalls",
    ];
    for target in gate {
        assert!(stdout(&first).contains(&format!("{target}: 3000 inputs from seed 1")), "{}", stdout(&first));
    }
    // The kept inputs of the findings fixed in the kernel (hostfuzz/regressions/), first.
    let kept = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("kernel-mm-"))
        .count();
    assert!(kept >= 3, "{kept} kept kernel-mm inputs");
    assert!(stdout(&first).contains(&format!("kernel-mm: {kept} kept regression inputs pass")), "{}", stdout(&first));
    assert!(!stdout(&first).contains("canary"));
    assert!(!stdout(&first).contains("machine-rules"));
}

#[test]
fn canary_finds_and_its_hex_replays_and_shrinks() {
    let out = out_dir("canary");
    let run = hostfuzz(&out, &["--target", "canary"]);
    let text = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(text.contains("canary: FINDING at seed 1 iteration "), "{text}");
    let (input, shrunk) = (saved(&text, "input: "), saved(&text, "shrunk: "));
    assert!(input.starts_with(out.join("findings")), "{}", input.display());
    for file in [&input, &shrunk] {
        let replay = hostfuzz(&out, &["--replay", "canary", file.to_str().unwrap()]);
        assert_eq!(replay.status.code(), Some(1), "{}", stdout(&replay));
        assert!(stdout(&replay).contains("canary: FINDING: canary: rare() came true"), "{}", stdout(&replay));
    }
    let len = |p: &Path| std::fs::read_to_string(p).unwrap().split_whitespace().map(str::len).sum::<usize>();
    assert!(len(&shrunk) <= len(&input));
    assert_eq!(std::fs::read_to_string(&shrunk).unwrap(), "f0ff\n");
}

#[test]
fn an_ordinary_input_replays_clean_and_the_list_names_every_target() {
    let out = out_dir("replay");
    std::fs::create_dir_all(&out).unwrap();
    let zeros = out.join("zeros.hex");
    std::fs::write(&zeros, "00000000\n").unwrap();
    for target in hostfuzz::targets::TARGETS.iter().filter(|t| t.name != "machine-rules") {
        let replay = hostfuzz(&out, &["--replay", target.name, zeros.to_str().unwrap()]);
        assert_eq!(replay.status.code(), Some(0), "{}: {}", target.name, stdout(&replay));
    }
    let list = stdout(&hostfuzz(&out, &["--list"]));
    assert_eq!(list.lines().count(), hostfuzz::targets::TARGETS.len(), "{list}");
    for target in hostfuzz::targets::TARGETS {
        assert!(list.lines().any(|l| l.split_whitespace().next() == Some(target.name)), "{list}");
    }
    let bad = hostfuzz(&out, &["--target", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_machine_rules_target_finds_a_broken_rule_and_its_input_replays() {
    let out = out_dir("machine-rules");
    let run = hostfuzz(&out, &["--target", "machine-rules"]);
    let text = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(text.contains("machine-rules: FINDING at seed 1 iteration 0: invariant: "), "{text}");
    let replay = hostfuzz(&out, &["--replay", "machine-rules", saved(&text, "shrunk: ").to_str().unwrap()]);
    assert_eq!(replay.status.code(), Some(1), "{}", stdout(&replay));
    assert!(stdout(&replay).contains("machine-rules: FINDING: invariant: "), "{}", stdout(&replay));
}

#[test]
fn the_fork_server_fork_each_and_in_process_print_the_same() {
    let out = out_dir("modes");
    for args in [&["--count", "300"][..], &["--target", "canary"]] {
        let served = hostfuzz(&out, args);
        assert!(String::from_utf8_lossy(&served.stderr).contains("inputs/s, fork server"), "{args:?}");
        for (mode, rate) in [
            ("--fork-spare", "inputs/s, spares forked by the runner"),
            ("--fork-each", "inputs/s, a fork each"),
            ("--in-process", "inputs/s, in process"),
        ] {
            let other = hostfuzz(&out, &[&[mode][..], args].concat());
            assert_eq!(served.status.code(), other.status.code(), "{mode} {args:?}: {}", stdout(&other));
            assert_eq!(stdout(&served), stdout(&other), "{mode} {args:?}");
            assert!(String::from_utf8_lossy(&other.stderr).contains(rate), "{mode} {args:?}");
        }
    }
}

/// A saved input for the `isolation` target whose first decision is `magic`.
fn isolation_input(out: &Path, name: &str, magic: u32) -> String {
    std::fs::create_dir_all(out).unwrap();
    let path = out.join(name);
    let hex: String = magic.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, hex + "\n").unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn no_input_s_static_reaches_the_next_unless_in_process() {
    let out = out_dir("isolation");
    for mode in [&[][..], &["--fork-spare"], &["--fork-each"]] {
        let run = hostfuzz(&out, &[mode, &["--target", "isolation", "--count", "200"]].concat());
        assert_eq!(run.status.code(), Some(0), "{mode:?}: {}", stdout(&run));
        assert!(stdout(&run).contains("isolation: 200 inputs from seed 1"), "{}", stdout(&run));
    }
    // The check bites: in one process the first input's static reaches its own second
    // run (the self-check's), which then differs from the first.
    let inline = runner(&out, &["--in-process", "--target", "isolation", "--count", "200"])
        .env("HOSTFUZZ_SHRINK_SECS", "1")
        .output()
        .expect("the runner starts");
    assert_eq!(inline.status.code(), Some(1), "{}", stdout(&inline));
    let text = stdout(&inline);
    assert!(text.contains("isolation: FINDING at seed 1 iteration 0: nondeterminism: two runs differ"), "{text}");
    assert!(text.contains("a static set by an earlier run reached this one"), "{text}");
}

#[test]
fn a_child_s_panic_abort_and_hang_are_reported_by_both_forks() {
    let out = out_dir("endings");
    let panic = isolation_input(&out, "panic.hex", hostfuzz::targets::isolation::PANIC);
    let abort = isolation_input(&out, "abort.hex", hostfuzz::targets::isolation::ABORT);
    let hang = isolation_input(&out, "hang.hex", hostfuzz::targets::isolation::HANG);
    for mode in [&[][..], &["--fork-spare"], &["--fork-each"]] {
        let replay = |file: &str| {
            runner(&out, &[mode, &["--replay", "isolation", file]].concat())
                .env("HOSTFUZZ_BOUND_MS", "300")
                .output()
                .expect("the runner starts")
        };
        let panicked = replay(&panic);
        assert_eq!(panicked.status.code(), Some(1), "{mode:?}: {}", stdout(&panicked));
        let text = stdout(&panicked);
        assert!(text.contains("isolation: FINDING: panic: src/targets/isolation.rs:"), "{mode:?}: {text}");
        assert!(text.contains(": asked to panic"), "{mode:?}: {text}");
        let aborted = replay(&abort);
        assert_eq!(aborted.status.code(), Some(1), "{mode:?}: {}", stdout(&aborted));
        // The child's own SIGABRT, not its zygote's: the zygote reported it and lives on.
        assert!(!String::from_utf8_lossy(&aborted.stderr).contains("zygote"), "{mode:?}: {aborted:?}");
        assert!(
            stdout(&aborted).contains("isolation: FINDING: crash: killed by signal 6 (0 bytes read)"),
            "{mode:?}: {}",
            stdout(&aborted)
        );
        let hung = replay(&hang);
        assert_eq!(hung.status.code(), Some(3), "{mode:?}: {}", stdout(&hung));
        assert!(stdout(&hung).contains("isolation: HANG: killed after 300ms"), "{mode:?}: {}", stdout(&hung));
    }
}

/// The pids of `pid`'s children (Linux: /proc/PID/task/PID/children).
fn children(pid: u32) -> Vec<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    list.split_whitespace().map(|p| p.parse().unwrap()).collect()
}

/// Whether `pid` runs: it exists and is not a zombie.
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
    state.is_some_and(|s| s != "Z" && s != "X")
}

/// `pid`'s children and their children.
fn descendants(pid: u32) -> Vec<u32> {
    let mut all = children(pid);
    let grandchildren: Vec<u32> = all.iter().flat_map(|&c| children(c)).collect();
    all.extend(grandchildren);
    all
}

#[test]
fn the_fork_server_s_children_die_with_the_runner() {
    let out = out_dir("orphans");
    let hang = isolation_input(&out, "hang.hex", hostfuzz::targets::isolation::HANG);
    // The zygote and its hanging child; the spare forked ahead of need and the hanging
    // child with `--fork-spare`.
    for mode in [&[][..], &["--fork-spare"]] {
        let mut run = runner(&out, &[mode, &["--replay", "isolation", &hang]].concat())
            .env("HOSTFUZZ_BOUND_MS", "60000")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("the runner starts");
        let start = std::time::Instant::now();
        let mut kids = descendants(run.id());
        while kids.len() < 2 && start.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            kids = descendants(run.id());
        }
        assert_eq!(kids.len(), 2, "{mode:?}: the runner's children and theirs: {kids:?}");
        run.kill().unwrap();
        run.wait().unwrap();
        let start = std::time::Instant::now();
        while kids.iter().any(|&k| alive(k)) && start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!kids.iter().any(|&k| alive(k)), "{mode:?}: children outlived the runner: {kids:?}");
    }
}

#[test]
fn a_zygote_killed_from_outside_is_replaced_and_the_run_goes_on() {
    let out = out_dir("zygote-killed");
    let args = ["--count", "20000", "elf"];
    let run = runner(&out, &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the runner starts");
    let start = std::time::Instant::now();
    let mut zygote = children(run.id());
    while zygote.is_empty() && start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        zygote = children(run.id());
    }
    assert_eq!(zygote.len(), 1, "the runner's one child, its zygote: {zygote:?}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let killed = Command::new("kill").args(["-KILL", &zygote[0].to_string()]).status().expect("kill runs");
    assert!(killed.success());
    let served = run.wait_with_output().expect("the runner ends");
    assert_eq!(served.status.code(), Some(0), "{}", stdout(&served));
    let said = String::from_utf8_lossy(&served.stderr);
    assert!(said.contains(&format!("hostfuzz: the fork server's zygote {} ", zygote[0])), "{said}");
    let inline = hostfuzz(&out, &[&["--in-process"][..], &args].concat());
    assert_eq!(stdout(&served), stdout(&inline));
    let now = children(std::process::id());
    assert!(!zygote.iter().any(|z| now.contains(z)));
}

#[test]
fn an_answer_longer_than_the_zygote_s_pipe_is_cut_and_still_reported() {
    let out = out_dir("long");
    let long = isolation_input(&out, "long.hex", hostfuzz::targets::isolation::LONG);
    let replay = |mode: &[&str]| hostfuzz(&out, &[mode, &["--replay", "isolation", &long]].concat());
    let served = replay(&[]);
    assert_eq!(served.status.code(), Some(1), "{}", stdout(&served));
    let text = stdout(&served);
    assert!(text.contains("isolation: FINDING: isolation: asked for a long finding"), "{}", &text[..200]);
    assert!(text.contains("[cut to fit the fork server's answer pipe]"), "{}", &text[text.len() - 200..]);
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
    // A fork each answers through a pipe it reads as the child writes: nothing is cut.
    let each = replay(&["--fork-each"]);
    assert_eq!(each.status.code(), Some(1));
    assert!(stdout(&each).contains(&"x".repeat(2 << 20)));
}

/// Whether this kernel gives transparent huge pages to memory that asks (`madvise`).
fn huge_pages_offered() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
}

#[test]
fn the_code_on_huge_pages_changes_no_outcome() {
    let out = out_dir("huge-text");
    let args = ["--count", "300"];
    let moved = runner(&out, &args).env("HOSTFUZZ_HUGE_TEXT", "report").output().expect("the runner starts");
    let stayed = runner(&out, &args).env("HOSTFUZZ_HUGE_TEXT", "0").output().expect("the runner starts");
    assert_eq!(moved.status.code(), Some(0), "{}", stdout(&moved));
    assert_eq!(stdout(&moved), stdout(&stayed));
    let said = String::from_utf8_lossy(&moved.stderr);
    let line = said.lines().find(|l| l.starts_with("hostfuzz: code on huge pages: ")).expect("the report line");
    let count: usize = line["hostfuzz: code on huge pages: ".len()..].split(' ').next().unwrap().parse().unwrap();
    if huge_pages_offered() {
        assert!(count >= 1, "{line}");
    }
    assert!(!String::from_utf8_lossy(&stayed.stderr).contains("code on huge pages"));
}

/// The first CPU this process may run on, from its `/proc/self/status`.
fn first_allowed_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned();
    list.split([',', '-']).next().unwrap().to_owned()
}

/// The rate line's end: how the run was placed.
fn placement(output: &Output) -> String {
    let err = String::from_utf8_lossy(&output.stderr);
    let line = err.lines().find(|l| l.contains("inputs/s, fork server")).expect("the rate line").to_owned();
    line.split("fork server").nth(1).unwrap().to_owned()
}

#[test]
fn a_run_pins_itself_to_one_cpu_unless_told_not_to_and_a_cpu_it_may_not_use_is_refused() {
    let out = out_dir("cpu");
    let args = ["--count", "100", "fdt"];
    let chosen = runner(&out, &args).env_remove("HOSTFUZZ_CPU").output().expect("the runner starts");
    let said = placement(&chosen);
    // Other tests' runners may hold every CPU meanwhile: then it says so and runs unpinned.
    assert!(said.starts_with(", on CPU ") || said.contains("are each taken"), "{said}");
    let cpu = first_allowed_cpu();
    let named = runner(&out, &args).env("HOSTFUZZ_CPU", &cpu).output().expect("the runner starts");
    assert_eq!(placement(&named), format!(", on CPU {cpu})"));
    let unpinned = runner(&out, &args).env("HOSTFUZZ_CPU", "none").output().expect("the runner starts");
    assert_eq!(placement(&unpinned), ", unpinned: HOSTFUZZ_CPU=none)");
    assert_eq!(stdout(&chosen), stdout(&named));
    assert_eq!(stdout(&chosen), stdout(&unpinned));
    let refused = runner(&out, &args).env("HOSTFUZZ_CPU", "100000").output().expect("the runner starts");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("HOSTFUZZ_CPU=100000: this process may run on CPUs "));
}
