//! The real `testbench` binary on real QEMU boots of the reference guest (the smoke
//! program in init's place for most).
//!
//! Each test runs the binary with stdin closed, in the workspace, with its own cases
//! directory where it needs one, and on failure prints the command, its status, stdout
//! and stderr, so a failure explains itself. `scripts/setup` has run before (./test runs
//! it first), so the binary is told to skip it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

struct Run {
    command: String,
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn explain(&self) -> String {
        format!(
            "command: {}\nstatus: {:?}\n--- stdout\n{}--- stderr\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }

    fn expect_status(&self, status: i32) -> &Run {
        assert_eq!(self.status, Some(status), "{}", self.explain());
        self
    }

    /// The run directory, from the first line (human) or the run-started event (json).
    fn run_dir(&self) -> PathBuf {
        for line in self.stdout.lines() {
            if let Some(rest) = line.split_once("logs in ").map(|(_, r)| r) {
                return PathBuf::from(rest.trim());
            }
            if let Ok(event) = serde_json::from_str::<serde_json::Value>(line) {
                if event["event"] == "run-started" {
                    return PathBuf::from(event["run_dir"].as_str().unwrap());
                }
            }
        }
        panic!("no run directory in the output\n{}", self.explain());
    }

    fn events(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{}", self.explain())))
            .collect()
    }
}

fn bench(args: &[&str], env: &[(&str, &str)]) -> Run {
    bench_within(&root(), args, env, Duration::from_secs(900))
}

/// The binary run from `cwd` (the workspace is still the one it was built from).
fn bench_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    bench_within(cwd, args, env, Duration::from_secs(900))
}

/// Run the bench from `cwd`, killing it if it has not ended by `deadline` (the run's
/// status is then `None` and its stderr says so), so a bench that blocks fails its test,
/// never hangs it.
fn bench_within(cwd: &Path, args: &[&str], env: &[(&str, &str)], deadline: Duration) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
    command
        .args(args)
        .current_dir(cwd)
        .env("TESTBENCH_NO_SETUP", "1")
        .env_remove("TESTBENCH_QEMU_SEED")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let shown =
        format!("{} testbench {}", env.iter().map(|(k, v)| format!("{k}={v} ")).collect::<String>(), args.join(" "));
    eprintln!("running: {shown}");
    let mut child = command.spawn().expect("the testbench binary starts");
    let drain = |stream: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>));
    let stderr = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = stderr.join().unwrap();
    if status.is_none() && start.elapsed() > deadline {
        stderr.push_str(&format!("\n[the test killed the bench: no end after {deadline:?}]\n"));
    }
    Run { command: shown, status, stdout: stdout.join().unwrap(), stderr }
}

/// A cargo for the bench (through `CARGO`) that logs every command line to `log` and runs
/// the real cargo, but first runs `before` (shell), which may end it.
fn logging_cargo(dir: &Path, log: &Path, before: &str) -> PathBuf {
    let real = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let script = dir.join("cargo");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$*\" >> '{}'\n{before}\nexec '{real}' \"$@\"\n", log.display()))
        .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

fn cases_dir(cases: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in cases {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
    }
    dir
}

/// The cargo command lines a run's build.log holds, one per cargo run.
fn build_commands(run_dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(run_dir.join("build.log")).unwrap_or_default();
    log.lines().filter(|l| l.starts_with("build: ")).map(str::to_string).collect()
}

const SMOKE_DONE: &str = "description = \"smoke\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [{ package = \"smoke\", bin = \"smoke\" }]\ntimeout_secs = 30\nexpect = ['^smoke: done$']\npoweroff = true\n";

/// The smoke program in init's place, built with these features.
fn smoke_with(features: &str) -> String {
    SMOKE_DONE.replace("bin = \"smoke\" }", &format!("bin = \"smoke\", features = [{features}] }}"))
}

#[test]
fn the_list_marks_cases_run_only_by_name() {
    let slow = SMOKE_DONE.replace("kind = \"boot\"", "kind = \"boot\"\nwhole_run = false");
    let quick =
        SMOKE_DONE.replace("kind = \"boot\"", "kind = \"boot\"\nclock = \"host\"\nclock_reason = \"host-sockets\"");
    let dir = cases_dir(&[("quick", &quick), ("slow", &slow)]);
    let run = bench(&["--list", "--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.explain());
    assert!(lines[0].starts_with("quick ") && !lines[0].contains("[by name only]"), "{}", run.explain());
    assert!(lines[1].starts_with("slow ") && lines[1].ends_with("[by name only]"), "{}", run.explain());
    // Each boot case's clock, and the totals.
    assert!(lines[0].contains("  host   smoke") && lines[1].contains("  guest  smoke"), "{}", run.explain());
    assert_eq!(
        lines[2],
        "2 boot cases: 1 in guest time (icount), 1 on the host's clock (1 host-sockets)",
        "{}",
        run.explain()
    );
    // In JSON: the clock, and on the host's clock its reason.
    let run = bench(&["--list", "--message-format", "json", "--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(0);
    assert!(run.stdout.contains("\"clock\":\"host\",\"clock_reason\":\"host-sockets\""), "{}", run.explain());
    assert!(run.stdout.contains("\"clock\":\"guest\",\"clock_reason\":null"), "{}", run.explain());
    // A FILTER lists the cases whose names hold it, those run by name only too.
    let run = bench(&["--list", "--cases", dir.path().to_str().unwrap(), "slo"], &[]);
    run.expect_status(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.explain());
    assert!(lines[0].starts_with("slow ") && lines[1].starts_with("1 boot case: 1 in guest time"), "{}", run.explain());
    let run = bench(&["--list", "--cases", dir.path().to_str().unwrap(), "--exact", "quik"], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("--exact \"quik\": none of the 2 cases"), "{}", run.explain());
}

#[test]
fn bad_cases_are_all_refused_before_anything_builds() {
    let missing_kernel = "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n[guest]\nkernel = \"no/such/kernel\"\n";
    let dir = cases_dir(&[
        ("good", SMOKE_DONE),
        ("bad-smp", &SMOKE_DONE.replace("timeout_secs = 30", "smp = { rv32 = [2] }")),
        ("bad-regex", &SMOKE_DONE.replace("'^smoke: done$'", "'ok', 'fine (unclosed'")),
        ("bad-type", &SMOKE_DONE.replace("timeout_secs = 30", "timeout_secs = \"30\"")),
        ("misspelt", &SMOKE_DONE.replace("expect =", "expext =")),
        ("missing-kernel", missing_kernel),
        ("unknown-program", &SMOKE_DONE.replace("{ package = \"smoke\", bin = \"smoke\" }", "\"no-such-bin\"")),
    ]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("bad-smp.toml: smp.rv32: not one of the case's arch"), "{}", run.explain());
    assert!(run.stderr.contains("bad-regex.toml: expect[1]: not a valid regex:\n"), "{}", run.explain());
    // The regex crate's caret stays under the column at fault: the pattern and the caret
    // are printed on lines of their own, indented alike.
    let lines: Vec<&str> = run.stderr.lines().collect();
    let at = lines.iter().position(|l| l.trim() == "fine (unclosed").expect("the pattern on a line of its own");
    let column = lines[at].find('(').unwrap();
    assert_eq!(lines[at + 1].find('^'), Some(column), "the caret is not under '(':\n{}", run.stderr);
    // A type error says what is accepted, in words; a misspelt field, the nearest.
    assert!(
        run.stderr
            .contains("bad-type.toml: timeout_secs: \"30\" is not accepted: a number of seconds, such as 30 or 2.5\n"),
        "{}",
        run.explain()
    );
    assert!(run.stderr.contains("misspelt.toml: expext: not a field of kind \"boot\"; did you mean `expect`?"));
    assert!(!run.stderr.contains("expected f64") && !run.stderr.contains("launch"), "{}", run.explain());
    // The path and name checks of the cases that parsed come in the same run as the
    // parse errors of the others, not after they are fixed.
    assert!(
        run.stderr.contains("missing-kernel.toml: guest.kernel: no/such/kernel does not exist"),
        "{}",
        run.explain()
    );
    assert!(
        run.stderr.contains("unknown-program.toml: programs[0]: \"no-such-bin\" is not a binary"),
        "{}",
        run.explain()
    );
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

/// A file that is almost a case (`b.tml`, `C.TOML`) is refused with its name rather
/// than left out in silence; a symbolic link loop is said in words; an editor's backup
/// and a file of another kind pass. Nothing builds.
#[test]
fn a_file_almost_a_case_and_a_link_loop_are_refused_in_words() {
    let dir = cases_dir(&[("a", SMOKE_DONE)]);
    for (name, text) in [("b.tml", SMOKE_DONE), ("C.TOML", SMOKE_DONE), ("a.toml~", ""), ("notes.md", "")] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    std::os::unix::fs::symlink("loop.toml", dir.path().join("loop.toml")).unwrap();
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    for name in ["b", "C"] {
        let said = format!(
            "{}: not read as a case, and not accepted beside them: its name is almost a case's; a case file is named <name>.toml (rename it {name}.toml, or move it out of the cases directory)",
            dir.path().join(if name == "b" { "b.tml" } else { "C.TOML" }).display()
        );
        assert!(run.stderr.contains(&said), "{said}\n{}", run.explain());
    }
    assert!(
        run.stderr.contains("loop.toml: a symbolic link that never reaches a file (a loop of links, or one over 40 links long) is not accepted"),
        "{}",
        run.explain()
    );
    assert!(
        !run.stderr.contains("os error") && !run.stderr.contains("notes.md") && !run.stderr.contains("toml~"),
        "{}",
        run.explain()
    );
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

/// Every refusal of one file is reported, in the file's order (not only the first, nor
/// the first by name), as the refusals of different files are: those of the fields'
/// names and shapes, and those of what the fields mean (three here, written in the
/// reverse of the order they are checked).
#[test]
fn every_refusal_of_a_file_comes_in_its_order() {
    let two = SMOKE_DONE.replace("kind = \"boot\"\n", "kind = \"boot\"\nzzz = 1\n") + "aaa = 2\n";
    let three = SMOKE_DONE
        .replace("arch =", "expect_after = ['(unclosed']\narch =")
        .replace("timeout_secs = 30\n", "qemu_seed = -1\n")
        + "memory_mib = 1\n";
    let dir = cases_dir(&[("two", &two), ("three", &three)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    let zzz = run.stderr.find("two.toml: zzz: not a field of kind \"boot\"");
    let aaa = run.stderr.find("two.toml: aaa: not a field of kind \"boot\"");
    assert!(zzz.is_some() && aaa.is_some() && zzz < aaa, "{}", run.explain());
    let said: Vec<&str> = run.stderr.lines().filter(|l| l.contains("three.toml: ")).collect();
    assert_eq!(said.len(), 3, "{}", run.explain());
    assert!(said[0].ends_with("three.toml: expect_after[0]: not a valid regex:"), "{}", run.explain());
    assert!(said[1].ends_with("three.toml: qemu_seed: -1 is not accepted: a number from 0"), "{}", run.explain());
    assert!(said[2].ends_with("three.toml: memory_mib: 1 is not accepted: 16 to 16384"), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

/// `--exact` without `--cases` says where it looked, as a filter does.
#[test]
fn exact_without_cases_says_where_it_looked() {
    let run = bench(&["--exact", "no-such-case-here"], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("--exact \"no-such-case-here\": none of the "), "{}", run.explain());
    assert!(
        run.stderr.contains(&format!(" cases in {} has that name", root().join("tests").display())),
        "{}",
        run.explain()
    );
}

/// The case crate takes `accel = "kvm"` on any width (it asks no host); the bench asks
/// the host, and refuses a width KVM cannot run here before anything builds.
#[test]
fn kvm_on_a_width_not_the_hosts_is_refused_before_anything_builds() {
    let kvm = SMOKE_DONE
        .replace("arch = [\"rv64\"]", "arch = [\"rv32\"]\naccel = \"kvm\"\nclock = \"host\"\nclock_reason = \"kvm\"");
    let dir = cases_dir(&[("kvm", &kvm)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    let file = dir.path().join("kvm.toml");
    let said = format!(
        "{}: accel: \"kvm\" runs only guests of the host's width ({}), and arch names rv32: use \"tcg\" or \"auto\"\n",
        file.display(),
        std::env::consts::ARCH
    );
    assert!(run.stderr.contains(&said), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

#[test]
fn a_missing_path_and_an_unknown_exact_name_are_refused() {
    let guest = "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n[guest]\nkernel = \"no/such/kernel\"\n";
    let dir = cases_dir(&[("missing-kernel", guest)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases], &[]);
    run.expect_status(2);
    assert!(
        run.stderr.contains("missing-kernel.toml: guest.kernel: no/such/kernel does not exist"),
        "{}",
        run.explain()
    );
    let run = bench(&["--cases", cases, "--exact", "missing"], &[]);
    run.expect_status(2);
    assert!(
        run.stderr.contains(&format!(
            "--exact \"missing\": none of the 1 cases in {cases} has that name (names like it: missing-kernel)"
        )),
        "{}",
        run.explain()
    );
}

#[test]
fn sweep_boots_have_their_own_files_and_print_in_seed_order() {
    let case =
        SMOKE_DONE.replace("timeout_secs = 30", "timeout_secs = 30\nicount = \"shift=3,sleep=off\"\nqemu_seed = 1");
    let dir = cases_dir(&[("sweepy", &case), ("other", SMOKE_DONE)]);
    let cases = dir.path().to_str().unwrap();
    let refused = bench(&["--cases", cases, "--sweep", "1..3"], &[]);
    refused.expect_status(2);
    assert!(
        refused.stderr.contains("--sweep runs one case; the filter took 2: other, sweepy"),
        "{}",
        refused.explain()
    );

    let run = bench(
        &["--cases", cases, "--exact", "sweepy", "--sweep", "5,1,3", "--jobs", "2", "--message-format", "json"],
        &[],
    );
    run.expect_status(0);
    let events = run.events();
    let seeds: Vec<u64> =
        events.iter().filter(|e| e["event"] == "boot-finished").map(|e| e["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [1, 3, 5], "{}", run.explain());
    // One build of each piece (the kernel, the smoke program, the loader) serves every seed.
    let run_dir = run.run_dir();
    let builds = build_commands(&run_dir).len();
    assert_eq!(builds, 3, "one build serves every seed\n{}", run.explain());
    assert!(events.iter().any(|e| e["event"] == "sweep-finished"), "{}", run.explain());
    let mut rng_lines = Vec::new();
    for seed in [1, 3, 5] {
        let log = std::fs::read_to_string(run_dir.join(format!("sweepy/seed-{seed}-rv64/console.log"))).unwrap();
        rng_lines.push(log.lines().find(|l| l.starts_with("smoke: rng ")).unwrap().to_string());
    }
    rng_lines.dedup();
    assert_eq!(rng_lines.len(), 3, "each seed fills rng-seed, and so the draws, differently: {rng_lines:?}");
}

#[test]
fn a_pinned_seed_under_icount_repeats_byte_for_byte() {
    let first = bench(&["--exact", "bench-seed-pinned"], &[]);
    first.expect_status(0);
    let second = bench(&["--exact", "bench-seed-pinned"], &[]);
    second.expect_status(0);
    for arch in ["rv64", "rv32"] {
        let log = |run: &Run| {
            std::fs::read(run.run_dir().join(format!("bench-seed-pinned/{arch}-smp1/console.log"))).unwrap()
        };
        let (a, b) = (log(&first), log(&second));
        assert!(String::from_utf8_lossy(&a).contains("smoke: ticks "), "{arch}: no ticks line");
        assert!(
            a == b,
            "{arch}: two boots differ\n--- first\n{}\n--- second\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
    assert!(first.stdout.contains("seed 7"), "the seed is printed with the result\n{}", first.explain());
    // Under icount the RTC starts at a pinned date, never at the host's wall clock.
    let command = std::fs::read_to_string(first.run_dir().join("bench-seed-pinned/rv64-smp1/command-line")).unwrap();
    assert!(command.contains(" -rtc base=2020-01-01T00:00:00,clock=vm "), "{command}");
}

/// One of the bench's QEMU plugins (`testbench-stamp-plugin`, `testbench-cover-plugin`)
/// beside the bench: the launcher builds them beside the release bench; these tests'
/// bench is cargo's test build, beside which `cargo test -p testbench` alone does not.
fn build_plugin(package: &str) {
    let built = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", package])
        .status()
        .expect("cargo runs");
    assert!(built.success(), "{package} did not build");
}

fn build_stamp_plugin() {
    build_plugin("testbench-stamp-plugin");
}

/// A boot in guest time that never powers off ends its settle time in the guest's time:
/// QEMU loads the stamp plugin, `console.log` is the stamped bytes up to the settle time's
/// end, the same on two runs of a pinned seed, and `serial.log` keeps QEMU's serial output
/// whole, of which the log is the start.
#[test]
fn a_boot_that_never_powers_off_settles_in_guest_time_and_repeats_byte_for_byte() {
    let rester = "description = \"x\"\narch = [\"rv64\", \"rv32\"]\nkind = \"boot\"\nprograms = [\"rester\"]\nqemu_seed = 3\ntimeout_secs = 30\nexpect = ['^rester: at rest$']\n";
    build_stamp_plugin();
    let dir = cases_dir(&[("rester", rester)]);
    let cases = dir.path().to_str().unwrap();
    let runs = [bench(&["--cases", cases], &[]), bench(&["--cases", cases], &[])];
    for arch in ["rv64", "rv32"] {
        let boot = |run: &Run, file: &str| std::fs::read(run.run_dir().join(format!("rester/{arch}-smp1/{file}")));
        runs[0].expect_status(0);
        runs[1].expect_status(0);
        let command = String::from_utf8(boot(&runs[0], "command-line").unwrap()).unwrap();
        assert!(command.contains("libtestbench_stamp_plugin.so,socket="), "{command}");
        assert!(command.contains(",uart=0x10000000,model=16550"), "{command}");
        let (first, second) = (boot(&runs[0], "console.log").unwrap(), boot(&runs[1], "console.log").unwrap());
        assert!(String::from_utf8_lossy(&first).contains("rester: at rest"), "{arch}");
        assert_eq!(String::from_utf8_lossy(&first), String::from_utf8_lossy(&second), "{arch}: two runs differ");
        let serial = boot(&runs[0], "serial.log").unwrap();
        assert!(serial.starts_with(&first), "{arch}: console.log is not the start of serial.log");
    }
}

/// Self-check: a QEMU that does not load the stamp plugin (the fake told to ignore
/// `-plugin`) leaves a boot in guest time without its console; the boot fails naming the
/// plugin, never judged on nothing.
#[test]
fn a_qemu_that_never_loads_the_stamp_plugin_fails_the_boot_naming_it() {
    build_stamp_plugin();
    let image = tempfile::tempdir().unwrap();
    std::fs::write(image.path().join("kernel"), b"not a kernel: the fake boots nothing").unwrap();
    let case = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\nexpect = ['^fake-qemu-console: done$']\n[guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
        image.path().join("kernel").display()
    );
    let dir = cases_dir(&[("unstamped", &case)]);
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fake-qemu-console");
    let env = [("TESTBENCH_QEMU_RV64", fake.to_str().unwrap()), ("FAKE_QEMU_NO_PLUGIN", "1")];
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &env);
    run.expect_status(1);
    assert!(run.stdout.contains("the stamp plugin never connected: QEMU did not load "), "{}", run.explain());
    // The same fake playing the plugin's part passes: the console came through the stamps.
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &env[..1]);
    run.expect_status(0);
}

#[test]
fn each_width_boots_its_own_hart_count() {
    let run = bench(&["--exact", "bench-smp-per-width"], &[]);
    run.expect_status(0);
    let dir = run.run_dir();
    for (arch, harts) in [("rv64", 3), ("rv32", 2)] {
        let log =
            std::fs::read_to_string(dir.join(format!("bench-smp-per-width/{arch}-smp{harts}/console.log"))).unwrap();
        assert!(log.contains(&format!("kernel: harts {harts}\r\n")), "{arch} did not boot {harts} harts:\n{log}");
    }
    // --smp replaces every case's counts.
    let run = bench(&["--exact", "bench-smp-per-width", "--smp", "2", "--arch", "rv64"], &[]);
    run.expect_status(0);
    let log = std::fs::read_to_string(run.run_dir().join("bench-smp-per-width/rv64-smp2/console.log")).unwrap();
    assert!(log.contains("kernel: harts 2\r\n"), "{log}");
}

#[test]
fn programs_reach_the_guest_whole() {
    let run = bench(&["--exact", "reference-boot", "--arch", "rv64"], &[]);
    run.expect_status(0);
    let dir = run.run_dir();
    // The bundle the bench packed verifies with the loader's own code, and holds what
    // cargo built, byte for byte, in the case's order.
    let signed = std::fs::read(dir.join("build/rv64/reference-boot-bundle.bin")).unwrap();
    let verified = bundle::verify(&signed, &bundle::DEV_PUBLIC_KEY).expect("the bench's bundle verifies");
    let names: Vec<&str> = verified.entries().map(|e| e.name).collect();
    assert_eq!(names, ["kernel", "logsrv", "checker", "programs"]);
    for (name, built) in [
        ("kernel", "build/rv64/kernel-release-default/kernel"),
        ("logsrv", "build/rv64/programs-release-default/logsrv"),
        ("checker", "build/rv64/programs-release-default/checker"),
    ] {
        let bytes = std::fs::read(dir.join(built)).unwrap();
        assert!(verified.entry(name).unwrap().data == bytes.as_slice(), "{name} is not what cargo built");
    }
    assert_eq!(verified.entry("programs").unwrap().data, b"checker system\n");
    // The guest read it: the log server started the checker from it.
    let log = std::fs::read_to_string(dir.join("reference-boot/rv64-smp1/console.log")).unwrap();
    assert!(log.contains("[server] started checker place 2 pid "), "{log}");
}

#[test]
fn a_failing_boots_logs_are_kept_under_its_jobs_name() {
    let failing = SMOKE_DONE
        .replace("'^smoke: done$'", "'^smoke: never printed$'")
        .replace("timeout_secs = 30", "timeout_secs = 20");
    let dir = cases_dir(&[("doomed", &failing)]);
    let cases = dir.path().to_str().unwrap();
    let keep = tempfile::tempdir().unwrap();
    let junit = keep.path().join("report.xml");
    let run = bench(
        &["--cases", cases, "--keep-failed", keep.path().to_str().unwrap(), "--junit", junit.to_str().unwrap()],
        &[],
    );
    run.expect_status(1);
    assert!(
        run.stdout.contains(
            "reason: guest ended (powered off, status 0) while waiting for expect[0] '^smoke: never printed$'"
        ),
        "{}",
        run.explain()
    );
    assert!(
        run.stdout.contains(&format!(
            "replay: cd {} && cargo testbench --exact doomed --arch rv64 --smp 1 --cases {cases}",
            root().display()
        )),
        "{}",
        run.explain()
    );
    let kept = std::fs::read_to_string(keep.path().join("rv64-doomed.smp1.log")).unwrap();
    assert!(kept.contains("smoke: done"), "{kept}");
    assert!(keep.path().join("rv64-doomed.smp1.command-line").exists());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase name=\"doomed rv64 smp1\"") && xml.contains("<failure"), "{xml}");
}

/// A case booted twice that fails keeps both boots' logs: the second as
/// `<stem>.second-boot.<file>`.
#[test]
fn a_failing_case_booted_twice_keeps_both_boots_logs() {
    // The same line captured in both boots: a failure only the second boot can show.
    let twice = SMOKE_DONE.replace("poweroff = true", "poweroff = true\ndistinct_across_boots = ['^smoke: (done)$']");
    let dir = cases_dir(&[("twice", &twice)]);
    let keep = tempfile::tempdir().unwrap();
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--keep-failed", keep.path().to_str().unwrap()], &[]);
    run.expect_status(1);
    assert!(run.stdout.contains("captured 'done' in both boots"), "{}", run.explain());
    for name in ["rv64-twice.smp1.log", "rv64-twice.smp1.second-boot.log", "rv64-twice.smp1.second-boot.command-line"] {
        let kept = std::fs::read_to_string(keep.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(name.ends_with("command-line") || kept.contains("smoke: done"), "{name}: {kept}");
    }
}

#[test]
fn a_build_asked_for_again_in_a_run_is_not_run_again_and_a_build_error_shows_cargos_message() {
    let same = smoke_with("\"status-3\"").replace("poweroff = true", "poweroff = true\npoweroff_status = 3");
    // Every name is the guest workspace's (an unknown one is refused before building), so
    // the build error comes from a cargo that fails to build the smoke program with echo.
    let broken = smoke_with("\"echo\"").replace("poweroff = true", "poweroff = true\nmust_fail = '.*'");
    let dir = cases_dir(&[("one", &same), ("two", &same), ("three-broken", &broken)]);
    let tools = tempfile::tempdir().unwrap();
    let failing = "case \"$*\" in *build*--features\\ echo*) echo 'error: the feature echo cannot build here' >&2; exit 101;; esac";
    let cargo = logging_cargo(tools.path(), &tools.path().join("cargo.log"), failing);
    let cargo = cargo.to_str().unwrap();
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--message-format", "json"], &[("CARGO", cargo)]);
    run.expect_status(1);
    let events = run.events();
    let builds = build_commands(&run.run_dir());
    let mut distinct = builds.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), builds.len(), "a build ran twice: {builds:#?}");
    assert_eq!(builds.iter().filter(|b| b.contains("--features status-3")).count(), 1, "{builds:#?}");
    let verdicts: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["event"] == "boot-finished")
        .map(|e| (e["case"].as_str().unwrap(), e["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(verdicts, [("one", "pass"), ("three-broken", "fail"), ("two", "pass")], "{}", run.explain());
    let reason = events.iter().find(|e| e["case"] == "three-broken").unwrap()["reason"].as_str().unwrap().to_string();
    // A build error is a failure even for a must_fail case, and it is cargo's own words.
    assert!(
        reason.contains("cargo failed to build smoke") && reason.contains("the feature echo cannot build here"),
        "{reason}"
    );
}

#[test]
fn a_guest_the_bench_did_not_build_boots_from_an_absolute_path() {
    let run = bench(&["--exact", "bench-boot", "--arch", "rv64"], &[]);
    run.expect_status(0);
    // The reference guest's loader and the bundle the bench signed, as images of its own.
    let image = tempfile::tempdir().unwrap();
    let kernel = image.path().join("loader.elf");
    let initrd = image.path().join("bundle.bin");
    std::fs::copy(run.run_dir().join("build/rv64/loader-release-default/loader"), &kernel).unwrap();
    std::fs::copy(run.run_dir().join("build/rv64/bench-boot-bundle.bin"), &initrd).unwrap();
    let case = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\nexpect = ['^kernel: harts 2$', '^smoke: hello from rv64$']\npoweroff = true\nsmp = [2]\n[guest]\nkernel = \"{}\"\ninitrd = \"{}\"\nfirmware = \"default\"\nqemu_args = [\"-device\", \"virtio-rng-device\"]\n",
        kernel.display(),
        initrd.display()
    );
    let dir = cases_dir(&[("external", &case)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(0);
    let command_line = std::fs::read_to_string(run.run_dir().join("external/rv64-smp2/command-line")).unwrap();
    assert!(
        command_line.contains(&format!("-kernel {}", kernel.display()))
            && command_line.contains(&format!("-initrd {}", initrd.display()))
            && command_line.contains("-device virtio-rng-device"),
        "{command_line}"
    );
}

#[test]
fn a_qemu_that_cannot_run_fails_every_boot_of_its_width_or_is_skipped() {
    let dir = cases_dir(&[("both", &SMOKE_DONE.replace("arch = [\"rv64\"]", "arch = [\"rv64\", \"rv32\"]"))]);
    let cases = dir.path().to_str().unwrap();
    let broken = [("TESTBENCH_QEMU_RV32", "/nonexistent/qemu-rv32")];
    let run = bench(&["--cases", cases, "--message-format", "json"], &broken);
    run.expect_status(1);
    let verdicts: Vec<(String, String, String)> = run
        .events()
        .iter()
        .filter(|e| e["event"] == "boot-finished")
        .map(|e| {
            (
                e["arch"].as_str().unwrap().into(),
                e["verdict"].as_str().unwrap().into(),
                e["reason"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(verdicts[0].0, "rv64");
    assert_eq!(verdicts[0].1, "pass");
    assert_eq!(verdicts[1].1, "fail");
    assert!(verdicts[1].2.starts_with("/nonexistent/qemu-rv32 cannot run"), "{verdicts:?}");
    let run = bench(&["--cases", cases, "--allow-skip"], &broken);
    run.expect_status(0);
    assert!(run.stdout.contains("SKIP  /nonexistent/qemu-rv32 cannot run"), "{}", run.explain());
    assert!(run.stdout.contains("1 passed, 0 failed, 1 skipped"), "{}", run.explain());
}

fn qemu_pids_with(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.starts_with("qemu-system") && cmdline.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_bench_killed_outright_takes_its_qemu_with_it() {
    let hang = smoke_with("\"no-poweroff\"").replace("timeout_secs = 30", "timeout_secs = 300");
    let dir = cases_dir(&[("hangs", &hang)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_testbench"))
        .args(["--cases", dir.path().to_str().unwrap(), "--message-format", "json"])
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let first = std::io::BufRead::lines(std::io::BufReader::new(stdout)).next().unwrap().unwrap();
    let event: serde_json::Value = serde_json::from_str(&first).unwrap();
    let run_dir = event["run_dir"].as_str().unwrap().to_string();
    // Wait until the guest runs (QEMU has connected to the bench and booted), so QEMU
    // cannot end on its own for want of the bench's QMP socket.
    let console = Path::new(&run_dir).join("hangs/rv64-smp1/console.log");
    let start = Instant::now();
    while !std::fs::read_to_string(&console).unwrap_or_default().contains("smoke: done") {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the guest did not reach done within 120 s: {}",
            console.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The kernel QEMU boots is the run's own copy, so the run directory names its QEMU.
    let pids = qemu_pids_with(&run_dir);
    assert!(!pids.is_empty(), "no QEMU runs for {run_dir}");
    child.kill().unwrap(); // SIGKILL: no handler of the bench runs
    child.wait().unwrap();
    let start = Instant::now();
    while !qemu_pids_with(&run_dir).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "QEMU {pids:?} outlived its bench by 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A RISC-V ELF whose one segment loads at 0x80000000, where QEMU's OpenSBI goes: QEMU
/// refuses it at once with "Some ROM regions are overlapping" and its advice after.
fn overlapping_elf(dir: &Path) -> PathBuf {
    let code: Vec<u8> = [0x6fu8, 0, 0, 0].repeat(4); // j .
    let (ehsize, phsize) = (64u16, 56u16);
    let offset = u64::from(ehsize + phsize);
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend([0u8; 8]);
    elf.extend(2u16.to_le_bytes()); // executable
    elf.extend(243u16.to_le_bytes()); // RISC-V
    elf.extend(1u32.to_le_bytes());
    elf.extend(0x8000_0000u64.to_le_bytes()); // entry
    elf.extend(u64::from(ehsize).to_le_bytes()); // program headers
    elf.extend(0u64.to_le_bytes()); // no section headers
    elf.extend(0u32.to_le_bytes());
    for half in [ehsize, phsize, 1, 0, 0, 0] {
        elf.extend(half.to_le_bytes());
    }
    elf.extend(1u32.to_le_bytes()); // PT_LOAD
    elf.extend(5u32.to_le_bytes()); // r-x
    for word in [offset, 0x8000_0000, 0x8000_0000, code.len() as u64, code.len() as u64, 4] {
        elf.extend(word.to_le_bytes());
    }
    elf.extend(&code);
    let path = dir.join("overlap.elf");
    std::fs::write(&path, elf).unwrap();
    path
}

/// A case booting the overlapping ELF on QEMU's OpenSBI: QEMU refuses it at once.
fn overlap_case(kernel: &Path, extra: &str) -> String {
    format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 20\nexpect = ['never']\n{extra}\n[guest]\nkernel = \"{}\"\nfirmware = \"default\"\n",
        kernel.display()
    )
}

#[test]
fn qemus_headline_is_quoted_and_a_must_fail_pass_and_the_seed_have_fields_of_their_own() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[
        ("overlap", &overlap_case(&kernel, "")),
        ("overlap-must-fail", &overlap_case(&kernel, "qemu_seed = 1\nmust_fail = 'Some ROM regions are overlapping'")),
    ]);
    let cases = dir.path().to_str().unwrap();
    let junit = image.path().join("report.xml");
    let run = bench(
        &["--cases", cases, "--message-format", "json", "--junit", junit.to_str().unwrap()],
        &[("TESTBENCH_QEMU_SEED", "5")],
    );
    run.expect_status(1);
    let events = run.events();
    let finished = |case: &str| events.iter().find(|e| e["event"] == "boot-finished" && e["case"] == case).unwrap();
    let failed = finished("overlap");
    let reason = failed["reason"].as_str().unwrap();
    // QEMU's headline, then its last lines (the regions that overlap).
    assert!(reason.contains("qemu-system-riscv64: Some ROM regions are overlapping | … |"), "{reason}");
    assert!(reason.contains("overlap.elf ELF program header segment 0"), "{reason}");
    assert_eq!(failed["failed_as_it_must"], false);
    // QEMU drew the seed: the replay is a command, the note a field of its own.
    let replay = failed["replay"].as_str().unwrap();
    assert!(!replay.contains('#') && replay.starts_with(&format!("cd {} && cargo testbench", root().display())));
    assert!(failed["replay_note"].as_str().unwrap().contains("host entropy"), "{failed}");
    let passed = finished("overlap-must-fail");
    assert_eq!((passed["verdict"].as_str(), passed["failed_as_it_must"].as_bool()), (Some("pass"), Some(true)));
    assert!(passed["replay"].as_str().unwrap().starts_with("cd "), "{passed}");
    assert!(passed["replay"].as_str().unwrap().contains("TESTBENCH_QEMU_SEED=5 cargo testbench"), "{passed}");
    assert!(passed["replay_note"].is_null(), "{passed}");
    // The seed from the environment is a property; the test keeps its name.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase name=\"overlap-must-fail rv64 smp1\""), "{xml}");
    assert!(xml.contains("<property name=\"seed\" value=\"5\"/>"), "{xml}");
    assert!(!xml.contains("seed5"), "{xml}");
}

/// `--keep-failed` to a directory that exists and cannot be written, and `--junit` to a
/// path that cannot be written, are refused before anything boots, each naming its flag
/// (and a refused `--junit` is not tried again for the refusal's own report).
#[test]
fn an_unwritable_keep_failed_directory_or_junit_path_is_refused_before_anything_boots() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[("quick-fail", &overlap_case(&kernel, ""))]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--keep-failed", "/proc"], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("--keep-failed /proc: a file cannot be made in it ("), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran:\n{}", run.explain());
    let file = image.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("report.xml");
    let image_dir = image.path().to_str().unwrap();
    for (path, said) in [
        ("/proc/report.xml", "cannot be written ("),
        (under_file.to_str().unwrap(), "cannot be written ("),
        (image_dir, "a directory; it takes the path of the file"),
    ] {
        let run = bench(&["--cases", cases, "--junit", path], &[]);
        run.expect_status(2);
        assert!(run.stderr.contains(&format!("--junit {path}: {said}")), "{}", run.explain());
        assert!(!run.stderr.contains("failed to write"), "said once, as a refusal\n{}", run.explain());
        assert!(run.stdout.is_empty(), "something ran:\n{}", run.explain());
    }
}

/// A failing boot's log that `--keep-failed` cannot copy when the boot ends (here a
/// directory holds the name it is copied to) is the bench's trouble: the run reports every
/// verdict and its JUnit, keeps what it can, then says what it could not keep and exits 3.
#[test]
fn a_failing_boots_log_that_cannot_be_kept_is_bench_trouble() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[("quick-fail", &overlap_case(&kernel, ""))]);
    let keep = tempfile::tempdir().unwrap();
    let blocked = keep.path().join("rv64-quick-fail.smp1.command-line");
    std::fs::create_dir(&blocked).unwrap();
    let junit = image.path().join("report.xml");
    let keep_dir = keep.path().to_str().unwrap();
    let run = bench(
        &["--cases", dir.path().to_str().unwrap(), "--keep-failed", keep_dir, "--junit", junit.to_str().unwrap()],
        &[],
    );
    run.expect_status(3);
    assert!(run.stdout.contains("quick-fail rv64 smp1") && run.stdout.contains("FAIL"), "{}", run.explain());
    assert!(
        run.stderr.contains(&format!(
            "error: --keep-failed {keep_dir}: 1 of the failing boots' logs could not be copied there; the first, {}: ",
            blocked.display()
        )),
        "{}",
        run.explain()
    );
    assert!(keep.path().join("rv64-quick-fail.smp1.qemu-stderr.log").is_file(), "the rest is kept");
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<failure"), "the JUnit report is written");
}

/// `--list --message-format json` states each case's class, and never more cores than
/// this machine has (q refuses an ask bigger than its cores): a boot of 64 harts asks for
/// the machine's cores.
#[test]
fn the_listed_class_asks_no_more_cores_than_the_machine_has() {
    let dir = cases_dir(&[("wide", &SMOKE_DONE.replace("timeout_secs = 30", "timeout_secs = 30\nsmp = [64]"))]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--list", "--message-format", "json"], &[]);
    run.expect_status(0);
    let machine = std::thread::available_parallelism().unwrap().get();
    let events = run.events();
    assert_eq!(events[0]["cores"].as_u64(), Some(machine.min(64) as u64), "{}", run.explain());
}

/// The replay note (what a replay cannot repeat: here the seed QEMU drew) is for a boot
/// that failed: on it in the human output, the JSON event and report.html alike, and on
/// no passing boot in any of them.
#[test]
fn the_replay_note_is_on_failing_boots_only_in_every_report() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[
        ("overlap", &overlap_case(&kernel, "")),
        ("overlap-must-fail", &overlap_case(&kernel, "must_fail = 'Some ROM regions are overlapping'")),
    ]);
    let cases = dir.path().to_str().unwrap();
    let note = "QEMU drew it from host entropy";
    let run = bench(&["--cases", cases, "--message-format", "json"], &[]);
    run.expect_status(1);
    let events = run.events();
    let finished = |case: &str| events.iter().find(|e| e["event"] == "boot-finished" && e["case"] == case).unwrap();
    assert!(finished("overlap")["replay_note"].as_str().unwrap_or("").contains(note), "{}", run.explain());
    assert!(finished("overlap-must-fail")["replay_note"].is_null(), "{}", run.explain());
    let html = std::fs::read_to_string(run.run_dir().join("report.html")).unwrap();
    assert_eq!(html.matches(note).count(), 1, "on the failing boot alone:\n{html}");
    let human = bench(&["--cases", cases], &[]);
    human.expect_status(1);
    let noted: Vec<&str> = human.stdout.lines().filter(|line| line.contains(note)).collect();
    assert!(!noted.is_empty(), "{}", human.explain());
    assert!(noted.iter().all(|line| line.contains("--exact overlap --arch")), "{}", human.explain());
}

/// `--sweep` boots a case with the sweep's seeds, whatever seed it pins, and says so.
#[test]
fn a_sweep_says_it_replaces_a_pinned_seed() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[("pinned", &overlap_case(&kernel, "qemu_seed = 7"))]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--sweep", "1,2"], &[]);
    run.expect_status(1);
    assert!(
        run.stdout.contains(
            "note: --sweep replaces pinned's pinned qemu_seed = 7: its boots take the sweep's seeds instead\n"
        ),
        "{}",
        run.explain()
    );
    assert!(run.stdout.contains("--sweep 1") && run.stdout.contains("--sweep 2"), "{}", run.explain());
}

#[test]
fn a_timeout_quotes_the_console_and_the_replay_works_from_anywhere() {
    let hang = smoke_with("\"no-poweroff\"")
        .replace("timeout_secs = 30", "timeout_secs = 4")
        .replace("'^smoke: done$'", "'^never printed$'")
        .replace("poweroff = true", "");
    let parent = tempfile::tempdir().unwrap();
    let cases = parent.path().join("my-cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("hangs.toml"), hang).unwrap();
    // Run from elsewhere with a relative --cases.
    let run = bench_in(parent.path(), &["--cases", "my-cases"], &[]);
    run.expect_status(1);
    let out = &run.stdout;
    let reason_at =
        out.find("reason: timed out after 4s waiting for expect[0]").unwrap_or_else(|| panic!("{}", run.explain()));
    let tail_at = out.find("last console lines:").unwrap_or_else(|| panic!("{}", run.explain()));
    assert!(reason_at < tail_at, "{}", run.explain());
    assert!(out.contains("      | smoke: done\n"), "the guest's last line is quoted\n{}", run.explain());
    let replay = format!(
        "replay: cd {} && cargo testbench --exact hangs --arch rv64 --smp 1 --cases {}  # seed: QEMU drew it",
        root().display(),
        cases.display()
    );
    assert!(out.contains(&replay), "{}", run.explain());
}

#[test]
fn a_refused_run_is_a_json_event_and_a_junit_error_and_the_list_is_json() {
    let dir = cases_dir(&[("quick", SMOKE_DONE)]);
    let cases = dir.path().to_str().unwrap();
    let junit = dir.path().join("report.xml");
    let run = bench(
        &["--cases", cases, "--exact", "quik", "--message-format", "json", "--junit", junit.to_str().unwrap()],
        &[],
    );
    run.expect_status(2);
    let events = run.events();
    assert_eq!(events.len(), 1, "{}", run.explain());
    assert_eq!(events[0]["event"], "refused");
    assert!(events[0]["errors"][0].as_str().unwrap().contains("--exact \"quik\""), "{}", run.explain());
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("no JUnit for a refused run: {e}"));
    assert!(xml.contains("<testcase name=\"testbench run refused\"") && xml.contains("<error "), "{xml}");
    assert!(xml.contains("--exact &quot;quik&quot;"), "{xml}");

    let run = bench(&["--cases", cases, "--list", "--message-format", "json"], &[]);
    run.expect_status(0);
    let events = run.events();
    assert_eq!(events.len(), 1, "{}", run.explain());
    assert_eq!(events[0]["event"], "case");
    assert_eq!(events[0]["name"], "quick");
    assert_eq!(events[0]["arch"], serde_json::json!(["rv64"]));
    assert_eq!(events[0]["whole_run"], true);
    assert_eq!(events[0]["clock"], "guest", "a boot case that names no clock runs in guest time");
    assert_eq!(events[0]["clock_reason"], serde_json::Value::Null);
}

#[test]
fn a_runs_printed_logs_path_outlives_the_next_run() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let dir = cases_dir(&[("quick-fail", &overlap_case(&kernel, ""))]);
    let cases = dir.path().to_str().unwrap();
    let first = bench(&["--cases", cases], &[]);
    first.expect_status(1);
    let logs = first.run_dir();
    // Other runs in this worktree since: more than the count pruning keeps, all newer.
    let base = root().join("target/testbench");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let others: Vec<PathBuf> = (1..=12).map(|i| base.join(format!("run-4999999-{}", now + i))).collect();
    for other in &others {
        std::fs::create_dir_all(other).unwrap();
    }
    let second = bench(&["--cases", cases], &[]);
    for other in &others {
        let _ = std::fs::remove_dir_all(other);
    }
    second.expect_status(1);
    assert!(logs.join("quick-fail/rv64-smp1/console.log").exists(), "{} was pruned", logs.display());
    // Each run directory says whose run it is.
    let invocation: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(logs.join("invocation.json")).unwrap()).unwrap();
    assert!(invocation["command"].as_array().unwrap().iter().any(|a| a == cases), "{invocation}");
}

#[test]
fn a_build_with_nothing_to_do_prints_no_command_line() {
    let dir = cases_dir(&[("quick", SMOKE_DONE)]);
    let cases = dir.path().to_str().unwrap();
    bench(&["--cases", cases], &[]).expect_status(0);
    let run = bench(&["--cases", cases], &[]);
    run.expect_status(0);
    assert!(!run.stdout.contains("--manifest-path") && !run.stdout.contains("built "), "{}", run.explain());
    let commands = build_commands(&run.run_dir());
    assert_eq!(commands.len(), 3, "the kernel, the smoke program and the loader\n{commands:#?}");
    assert!(commands.iter().all(|c| c.contains("--manifest-path")), "{commands:#?}");
    // Nothing changed since cargo's builds: the bench's stamps vouch, and cargo runs not.
    let log = std::fs::read_to_string(run.run_dir().join("build.log")).unwrap();
    assert_eq!(log.matches("fresh by the bench's stamp").count(), 3, "{log}");
    // With the stamps gone, cargo is asked, and says there is nothing to do.
    for entry in std::fs::read_dir(root().join("target/guest")).unwrap().flatten() {
        for stamp in std::fs::read_dir(entry.path()).unwrap().flatten() {
            if stamp.file_name().to_string_lossy().starts_with("testbench-fresh-") {
                let _ = std::fs::remove_file(stamp.path());
            }
        }
    }
    let run = bench(&["--cases", cases], &[]);
    run.expect_status(0);
    assert!(!run.stdout.contains("built "), "{}", run.explain());
    let log = std::fs::read_to_string(run.run_dir().join("build.log")).unwrap();
    assert_eq!(log.matches("fresh (nothing to compile)").count(), 3, "{log}");
}

#[test]
fn verdicts_are_coloured_only_when_asked_and_a_long_name_keeps_the_columns() {
    let image = tempfile::tempdir().unwrap();
    let kernel = overlapping_elf(image.path());
    let long = "a-case-with-a-name-much-longer-than-the-forty-columns-of-old";
    let dir = cases_dir(&[
        (long, &overlap_case(&kernel, "")),
        ("short", &overlap_case(&kernel, "must_fail = 'Some ROM regions'")),
    ]);
    let cases = dir.path().to_str().unwrap();
    let plain = bench(&["--cases", cases], &[]);
    plain.expect_status(1);
    assert!(!plain.stdout.contains('\x1b'), "colour on a pipe\n{}", plain.explain());
    let verdict_column = |run: &Run, case: &str| {
        let line = run.stdout.lines().find(|l| l.starts_with(case)).unwrap_or_else(|| panic!("{}", run.explain()));
        line.find(" seed none ").unwrap_or_else(|| panic!("{line}"))
    };
    assert_eq!(verdict_column(&plain, long), verdict_column(&plain, "short"), "{}", plain.explain());

    let coloured = bench(&["--cases", cases, "--color", "always"], &[("NO_COLOR", "1")]);
    coloured.expect_status(1);
    assert!(coloured.stdout.contains("\x1b[31mFAIL\x1b[0m"), "{}", coloured.explain());
    assert!(coloured.stdout.contains("\x1b[32mPASS\x1b[0m"), "{}", coloured.explain());
    let auto = bench(&["--cases", cases, "--color", "auto"], &[]);
    assert!(!auto.stdout.contains('\x1b'), "{}", auto.explain());
    // A refused command line is a JSON event and a JUnit error entry too.
    let junit = image.path().join("refused.xml");
    let refused = bench(
        &["--cases", cases, "--color", "sometimes", "--message-format", "json", "--junit", junit.to_str().unwrap()],
        &[],
    );
    refused.expect_status(2);
    let accepted = "--color \"sometimes\" is not accepted: auto, always or never";
    assert!(refused.stderr.contains(accepted), "{}", refused.explain());
    assert_eq!(refused.events()[0]["errors"][0], accepted, "{}", refused.explain());
    assert!(std::fs::read_to_string(&junit).unwrap().contains("testbench run refused"));
}

#[test]
fn only_regular_files_are_read_as_cases_and_a_fifo_never_blocks() {
    let dir = cases_dir(&[("good", SMOKE_DONE)]);
    let fifo = dir.path().join("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("socket.toml")).unwrap();
    std::fs::create_dir(dir.path().join("dir.toml")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("good.toml"), dir.path().join("linked.toml")).unwrap();
    // Today's bench opened the FIFO for reading and waited for a writer forever.
    let run = bench_within(&root(), &["--cases", dir.path().to_str().unwrap()], &[], Duration::from_secs(60));
    run.expect_status(2);
    let accepted = "is not accepted: a case is a regular file <name>.toml (or a symbolic link to one)";
    for (name, what) in [("fifo", "a FIFO"), ("socket", "a socket"), ("dir", "a directory")] {
        let line = format!("{}: {what} {accepted}", dir.path().join(format!("{name}.toml")).display());
        assert!(run.stderr.contains(&line), "no refusal {line:?}\n{}", run.explain());
    }
    assert!(!run.stderr.contains("linked.toml") && !run.stderr.contains("good.toml"), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

#[test]
fn a_directory_named_as_a_kernel_initrd_firmware_or_program_is_refused_before_anything_builds() {
    let image = tempfile::tempdir().unwrap();
    let not_a_file = image.path().display().to_string();
    let external = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n[guest]\nkernel = \"{not_a_file}\"\ninitrd = \"{not_a_file}\"\nfirmware = \"{not_a_file}\"\nsymbols = \"{not_a_file}\"\n"
    );
    let built = SMOKE_DONE
        .replace("{ package = \"smoke\", bin = \"smoke\" }", &format!("{{ path = \"{not_a_file}\" }}"))
        .replace("poweroff = true", &format!("poweroff = true\nfirmware = \"{not_a_file}\""));
    let dir = cases_dir(&[("external", &external), ("built", &built)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    for (file, field, what) in [
        ("external", "guest.kernel", "a kernel image"),
        ("external", "guest.initrd", "an initrd image"),
        ("external", "guest.firmware", "a firmware image"),
        ("external", "guest.symbols", "the kernel's ELF with DWARF"),
        ("built", "programs[0].path", "a program's ELF file"),
        ("built", "firmware", "a firmware image"),
    ] {
        let line = format!("{file}.toml: {field}: {not_a_file} is a directory: {what} must be a regular file");
        assert!(run.stderr.contains(&line), "no refusal {line:?}\n{}", run.explain());
    }
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

/// `guest.image` and `guest.cdrom` are checked as every `[guest]` path is (a directory
/// refused), and read for their formats: a VMDK image, an empty one and a CD without ISO
/// 9660's volume descriptor are refused before anything boots, naming the field.
#[test]
fn an_image_or_cd_the_firmware_cannot_boot_is_refused_before_anything_boots() {
    let files = tempfile::tempdir().unwrap();
    let not_a_file = files.path().display().to_string();
    let write = |name: &str, bytes: &[u8]| {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let vmdk = write("disk.vmdk", b"KDMV\x01\0\0\0 and the rest of a VMDK header");
    let empty = write("empty.img", b"");
    let not_iso = write("not.iso", &[0u8; 40 * 1024]);
    let case = |image: &str, cdrom: &str| {
        format!(
            "description = \"x\"\narch = [\"x86_64\"]\nkind = \"boot\"\npoweroff = true\n[guest]\nimage = \"{image}\"\ncdrom = \"{cdrom}\"\n"
        )
    };
    let dir = cases_dir(&[
        ("dirs", &case(&not_a_file, &not_a_file)),
        ("vmdk", &case(&vmdk, &not_iso)),
        ("empty", &case(&empty, &not_iso)),
    ]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    for line in [
        format!("dirs.toml: guest.image: {not_a_file} is a directory: a disk image must be a regular file"),
        format!("dirs.toml: guest.cdrom: {not_a_file} is a directory: an ISO image must be a regular file"),
        format!("vmdk.toml: guest.image: {vmdk} is a VMDK image, which the bench does not boot: a raw or qcow2 image"),
        format!("vmdk.toml: guest.cdrom: {not_iso} is not an ISO 9660 image"),
        format!("empty.toml: guest.image: {empty} is empty: a disk image holds at least a boot sector"),
    ] {
        assert!(run.stderr.contains(&line), "no refusal {line:?}\n{}", run.explain());
    }
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

#[test]
fn unknown_guest_binaries_packages_and_features_are_refused_from_one_metadata_read() {
    let dir = cases_dir(&[
        ("no-bin", &SMOKE_DONE.replace("{ package = \"smoke\", bin = \"smoke\" }", "\"no-such-bin\"")),
        ("typo-bin", &SMOKE_DONE.replace("{ package = \"smoke\", bin = \"smoke\" }", "\"chekcer\"")),
        ("no-package", &SMOKE_DONE.replace("package = \"smoke\"", "package = \"smoek\"")),
        ("no-feature", &smoke_with("\"ecoh\"")),
        ("kernel-feature", &SMOKE_DONE.replace("poweroff = true", "poweroff = true\nkernel_features = [\"fast\"]")),
        (
            "build-kind",
            "description = \"x\"\nkind = \"build\"\narch = [\"rv64\"]\npackage = \"smoke\"\nbin = \"smoek\"\n",
        ),
    ]);
    let tools = tempfile::tempdir().unwrap();
    let log = tools.path().join("cargo.log");
    let cargo = logging_cargo(tools.path(), &log, "");
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[("CARGO", cargo.to_str().unwrap())]);
    run.expect_status(2);
    for line in [
        // A name far from every binary gets no suggestion, only the list.
        "no-bin.toml: programs[0]: \"no-such-bin\" is not a binary of the guest workspace's package \"programs\". Its binaries: ",
        "typo-bin.toml: programs[0]: \"chekcer\" is not a binary of the guest workspace's package \"programs\"; the nearest is `checker`.",
        "no-package.toml: programs[0].package: \"smoek\" is not a package of the guest workspace (guest/Cargo.toml); did you mean `smoke`?",
        "no-feature.toml: programs[0].features[0]: \"ecoh\" is not a feature of the guest workspace's package \"smoke\"; did you mean `echo`?",
        "kernel-feature.toml: kernel_features[0]: \"fast\" is not a feature of the guest workspace's package \"kernel\"",
        "build-kind.toml: bin: \"smoek\" is not a binary of the guest workspace's package \"smoke\"; the nearest is `smoke`.",
    ] {
        assert!(run.stderr.contains(line), "no refusal {line:?}\n{}", run.explain());
    }
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
    // cargo ran once, for the metadata, and built nothing.
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert!(
        calls[0].starts_with("metadata --manifest-path ")
            && calls[0].ends_with(" --no-deps --format-version 1 --offline")
    );
}

#[test]
fn a_run_with_nothing_to_run_fails_with_its_own_status_unless_asked_otherwise() {
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().to_str().unwrap();
    let run = bench(&["--cases", empty], &[]);
    run.expect_status(4);
    assert!(
        run.stderr.contains(&format!("error: nothing to run: {empty} holds no case (no *.toml file)")),
        "{}",
        run.explain()
    );
    assert!(run.stdout.is_empty(), "{}", run.explain());

    let by_name = SMOKE_DONE.replace("kind = \"boot\"", "kind = \"boot\"\nwhole_run = false");
    let dir = cases_dir(&[("quick", SMOKE_DONE), ("quick-slow", &by_name)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "qiuck"], &[]);
    run.expect_status(4);
    assert!(run.stderr.contains("the filter \"qiuck\" takes none of the 2 cases in"), "{}", run.explain());
    assert!(run.stderr.contains("did you mean `quick`?"), "{}", run.explain());
    let run = bench(&["--cases", cases, "slow"], &[]);
    run.expect_status(4);
    assert!(run.stderr.contains("run only by their whole name (whole_run = false): quick-slow"), "{}", run.explain());
    let run = bench(&["--cases", cases, "--arch", "rv32"], &[]);
    run.expect_status(4);
    assert!(run.stderr.contains("--arch rv32: no case taken boots rv32: quick (rv64)"), "{}", run.explain());
    assert!(run.stdout.is_empty(), "{}", run.explain());

    // As nextest's --no-tests: warn says so and passes, pass passes quietly.
    let run = bench(&["--cases", cases, "--arch", "rv32", "--no-tests", "warn"], &[]);
    run.expect_status(0);
    assert!(run.stderr.contains("warning: nothing to run: --arch rv32"), "{}", run.explain());
    let run = bench(&["--cases", empty, "--no-tests", "pass"], &[]);
    run.expect_status(0);
    assert!(run.stderr.is_empty() && run.stdout.is_empty(), "{}", run.explain());
    let run = bench(&["--cases", empty, "--no-tests", "maybe"], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("--no-tests \"maybe\" is not accepted: fail, warn or pass"), "{}", run.explain());
}

#[test]
fn exact_suggests_the_nearest_name_by_edit_distance() {
    let dir = cases_dir(&[("bench-boot", SMOKE_DONE), ("bench-reset", SMOKE_DONE)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--exact", "bench-bot"], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("has that name; did you mean `bench-boot`?"), "{}", run.explain());
}

/// The smoke guest's prompt (`$` then ` `) answered by a typed line under icount, failed
/// on purpose by a forbid on the echoed line, so the bench stops QEMU at the verdict.
const PROMPT_RECORDED: &str = "description = \"rr\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [{ package = \"smoke\", bin = \"smoke\", features = [\"prompt\"] }]\nicount = \"shift=3\"\ntimeout_secs = 30\nexpect = ['^smoke: done$']\nforbid = ['^smoke: got ls -l$']\npoweroff = true\n[[input]]\nafter = '^\\$ $'\nsend = \"ls -l\\r\"\n";

/// The recording a failed boot's replay line names (the word after `--rr-replay`).
fn recording_named(run: &Run) -> PathBuf {
    let event = run.events().into_iter().find(|e| e["event"] == "boot-finished").expect("a boot finished");
    let replay = event["replay"].as_str().unwrap().to_string();
    let path = replay
        .split_once(" --rr-replay ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no --rr-replay in the replay line: {replay}\n{}", run.explain()));
    PathBuf::from(path.trim_matches('\''))
}

#[test]
fn a_failed_boot_with_typed_input_is_recorded_and_its_replay_line_replays_it_byte_for_byte() {
    let dir = cases_dir(&[("recorded", PROMPT_RECORDED)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--message-format", "json"], &[]);
    run.expect_status(1);
    let recording = recording_named(&run);
    assert!(recording.is_file() && recording.ends_with("recorded/rv64-smp1/replay.rr"), "{}", run.explain());
    let recorded_log = std::fs::read(recording.with_file_name("console.log")).unwrap();
    assert!(String::from_utf8_lossy(&recorded_log).contains("smoke: got ls -l"), "{}", run.explain());

    // The replay types nothing: the line comes from the recording, and the console is
    // the recorded one byte for byte.
    let replay_args = [
        "--cases",
        cases,
        "--exact",
        "recorded",
        "--arch",
        "rv64",
        "--smp",
        "1",
        "--rr-replay",
        recording.to_str().unwrap(),
    ];
    let replay = bench(&replay_args, &[]);
    replay.expect_status(1);
    assert!(
        replay.stdout.contains(&format!(
            "reason: replayed {} byte for byte ({} console bytes as recorded); the verdict again: forbidden line at ",
            recording.display(),
            recorded_log.len()
        )),
        "{}",
        replay.explain()
    );
    let replayed_log = std::fs::read(replay.run_dir().join("recorded/rv64-smp1/console.log")).unwrap();
    assert_eq!(replayed_log, recorded_log, "{}", replay.explain());
    assert!(replay.stdout.contains(" --rr-replay "), "a replay's own replay line replays again\n{}", replay.explain());

    // A console that is not what the recording gives is caught, at its first line.
    let text = String::from_utf8(recorded_log).unwrap();
    let ticks = text.lines().position(|l| l.starts_with("smoke: ticks ")).unwrap() + 1;
    std::fs::write(recording.with_file_name("console.log"), text.replace("smoke: ticks ", "smoke: ticks 1")).unwrap();
    let diverged = bench(&replay_args, &[]);
    diverged.expect_status(1);
    assert!(
        diverged.stdout.contains(&format!(
            "reason: --rr-replay: the replay differs from the recording from console line {ticks}: recorded: \"smoke: ticks 1"
        )),
        "{}",
        diverged.explain()
    );
}

#[test]
fn typed_input_record_replay_cannot_serve_is_said_not_pretended() {
    let two_harts = PROMPT_RECORDED.replace("timeout_secs = 30", "timeout_secs = 30\nsmp = [2]");
    let host_clock =
        PROMPT_RECORDED.replace("icount = \"shift=3\"\n", "clock = \"host\"\nclock_reason = \"typed-input\"\n");
    let sleep_off = PROMPT_RECORDED.replace("icount = \"shift=3\"", "icount = \"shift=3,sleep=off\"");
    let dir = cases_dir(&[("two-harts", &two_harts), ("host-clock", &host_clock), ("sleep-off", &sleep_off)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--message-format", "json"], &[]);
    run.expect_status(1);
    let finished: Vec<serde_json::Value> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    assert_eq!(finished.len(), 3, "{}", run.explain());
    assert!(finished.iter().all(|e| !e["replay"].as_str().unwrap().contains("--rr-replay")), "{finished:?}");
    // Why the boot was not recorded is a note beside the command, not part of it.
    let replays: Vec<String> = finished.iter().map(|e| e["replay_note"].as_str().unwrap_or("").to_string()).collect();
    assert!(
        replays[0].contains("typed input not recorded: QEMU's record/replay runs only under icount"),
        "{replays:?}"
    );
    assert!(
        replays[1].contains("typed input not recorded: under icount sleep=off QEMU's record/replay does not deliver"),
        "{replays:?}"
    );
    assert!(replays[2].contains("typed input not recorded: QEMU's record/replay takes one hart only"), "{replays:?}");
    let refused = bench(&["--cases", cases, "--exact", "two-harts", "--rr-replay", "/no/such/replay.rr"], &[]);
    refused.expect_status(2);
    assert!(refused.stderr.contains("--rr-replay /no/such/replay.rr: not a file"), "{}", refused.explain());
}

#[test]
fn a_hostile_console_is_logged_and_quoted_within_bounds() {
    // scripts/fake-qemu-console stands in for QEMU: minimal QMP, then one line of 20 MB
    // with a forbidden word at its end, then a power-off.
    let image = tempfile::tempdir().unwrap();
    let kernel = image.path().join("kernel");
    std::fs::write(&kernel, "not a kernel: the fake QEMU never reads it\n").unwrap();
    let case = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 120\nexpect = ['^fake-qemu-console: done$']\nforbid = ['Kernel panic']\npoweroff = true\n[guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
        kernel.display()
    );
    let dir = cases_dir(&[("flood", &case)]);
    let fake = root().join("scripts/fake-qemu-console");
    let env = [("TESTBENCH_QEMU_RV64", fake.to_str().unwrap()), ("FAKE_QEMU_CONSOLE", "forbidden:20000000")];
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--message-format", "json"], &env);
    run.expect_status(1);
    // The verdict quotes a few hundred bytes of the line, around the word, marked as cut.
    let finished: Vec<serde_json::Value> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    let reason = finished[0]["reason"].as_str().unwrap_or("");
    assert!(reason.starts_with("forbidden line at ") && reason.contains("Kernel panic"), "{}", run.explain());
    assert!(reason.contains(" bytes cut]") && reason.len() < 1024, "a reason of {} bytes", reason.len());
    assert!(run.stdout.len() < 16 * 1024, "{} bytes on stdout", run.stdout.len());
    // console.log keeps its head and its tail, and says what it dropped between them.
    let log = walk(&run.run_dir()).into_iter().find(|p| p.ends_with("console.log")).expect("a console.log");
    let bytes = std::fs::read(&log).unwrap();
    assert!(bytes.len() < 10 * 1024 * 1024, "console.log of {} bytes", bytes.len());
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains(" bytes (0 lines) of the console dropped here"), "no cut marker in {}", log.display());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// What a person sees, as a snapshot: the exit status, stdout and stderr, with what moves
/// from run to run named by its role (the workspace, the cases directory, the run
/// directory, durations, QEMU's version) and the build lines (which depend on what was
/// already built) left out.
fn seen(run: &Run, cases: &Path) -> String {
    let root = root().display().to_string();
    let run_dir = regex::Regex::new(r"target/testbench/run-[0-9]+-[0-9]+").unwrap();
    let duration = regex::Regex::new(r"\b[0-9]+\.[0-9]+s\b").unwrap();
    let redact = |text: &str| {
        let text = text.replace(&cases.display().to_string(), "[CASES]").replace(&root, "[ROOT]");
        let text = run_dir.replace_all(&text, "target/testbench/[RUN]");
        let text = duration.replace_all(&text, "[T]");
        text.lines()
            .filter(|line| !line.starts_with("built "))
            .map(|line| if line.starts_with("qemu rv64: ") { "qemu rv64: [VERSION]" } else { line })
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!("status: {:?}\n--- stdout\n{}\n--- stderr\n{}\n", run.status, redact(&run.stdout), redact(&run.stderr))
}

#[test]
fn what_a_person_sees_is_what_it_was() {
    // Every refusal of a run together, before anything builds.
    let misspelt = SMOKE_DONE.replace("expect =", "expext =");
    let bad_regex = SMOKE_DONE.replace("'^smoke: done$'", "'a{2,1}b'");
    let no_kernel = "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n[guest]\nkernel = \"no/such/kernel\"\n";
    let wrong_type = SMOKE_DONE.replace("timeout_secs = 30", "timeout_secs = \"30\"");
    let dir = cases_dir(&[
        ("misspelt", &misspelt),
        ("bad-regex", &bad_regex),
        ("no-kernel", no_kernel),
        ("wrong-type", &wrong_type),
    ]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    insta::assert_snapshot!("refusals", seen(&run, dir.path()));

    // A name that is not there, and a selection that takes nothing.
    let dir = cases_dir(&[("bench-boot", SMOKE_DONE), ("bench-reset", SMOKE_DONE)]);
    let cases = dir.path().to_str().unwrap();
    insta::assert_snapshot!(
        "exact-nearest",
        seen(&bench(&["--cases", cases, "--exact", "bench-bot"], &[]), dir.path())
    );
    insta::assert_snapshot!("nothing-to-run", seen(&bench(&["--cases", cases, "--arch", "rv32"], &[]), dir.path()));
    insta::assert_snapshot!(
        "list-json",
        seen(&bench(&["--cases", cases, "--list", "--message-format", "json"], &[]), dir.path())
    );

    // A boot that times out, under icount with a pinned seed so its console is the same
    // every time: the verdict, the console's last lines, the replay line, and the failure
    // named again just before the summary.
    let hangs = smoke_with("\"no-poweroff\"")
        .replace("timeout_secs = 30", "timeout_secs = 2\nicount = \"shift=3,sleep=off\"\nqemu_seed = 7");
    let dir = cases_dir(&[("hangs", &hangs)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--color", "never"], &[]);
    // The smoke program's tick count moves whenever the guest's bytes do (a count of
    // timer ticks under icount): the snapshot holds the rest, and that there is a number.
    insta::with_settings!({ filters => vec![(r"smoke: ticks [0-9]+\b", "smoke: ticks [TICKS]")] }, {
        insta::assert_snapshot!("a-timeout", seen(&run, dir.path()));
    });
}

#[test]
fn a_bench_that_cannot_make_its_run_directory_says_so_with_its_own_status() {
    // A workspace whose target/ is a file: the run directory cannot be made. Not a
    // case's failure (1) nor a refusal (2): the bench could not run.
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("target"), "not a directory").unwrap();
    let kernel = workspace.path().join("kernel.elf");
    std::fs::write(&kernel, "never booted").unwrap();
    let case = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n[guest]\nkernel = \"{}\"\nfirmware = \"default\"\n",
        kernel.display()
    );
    let dir = cases_dir(&[("external", &case)]);
    let root = workspace.path().to_str().unwrap();
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[("TESTBENCH_ROOT", root)]);
    run.expect_status(3);
    assert!(
        run.stderr.starts_with(&format!("error: failed to create a run directory under {root}/target/testbench: ")),
        "{}",
        run.explain()
    );
    assert!(run.stdout.is_empty(), "{}", run.explain());
}

/// A port lease too short for --jobs boots of the most demanding case, a malformed one,
/// and a disk recipe that names a partition it does not have are refused before anything
/// builds, each naming what it takes.
#[test]
fn a_short_port_lease_and_a_bad_disk_recipe_are_refused_before_anything_builds() {
    let net = "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n\
               [net]\nforward = [7, 8]\n[net.poke]\nport = 9\npayload = \"p\"\nafter = 'x'\n\
               [guest]\nkernel = \"Cargo.toml\"\n";
    let dir = cases_dir(&[("three-ports", net)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--jobs", "2"], &[("TESTBENCH_PORTS", "40000-40004")]);
    run.expect_status(2);
    assert!(run.stderr.contains("TESTBENCH_PORTS=40000-40004 holds 5 ports"), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
    let run = bench(&["--cases", cases], &[("TESTBENCH_PORTS", "40000-")]);
    run.expect_status(2);
    assert!(run.stderr.contains("TESTBENCH_PORTS"), "{}", run.explain());

    let recipe_dir = tempfile::tempdir().unwrap();
    let recipe = recipe_dir.path().join("disk.toml");
    std::fs::write(&recipe, "size_kib = 1024\n[[partition]]\nname = \"data\"\nfs = \"raw\"\n").unwrap();
    let disk = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n\
         [disk]\nrecipe = {:?}\nflip_header = \"dta\"\n[guest]\nkernel = \"Cargo.toml\"\n",
        recipe.display().to_string()
    );
    let dir = cases_dir(&[("bad-flip", &disk)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    assert!(
        run.stderr.contains("bad-flip.toml: disk.flip_header: \"dta\" is not a partition of")
            && run.stderr.contains("one of \"data\""),
        "{}",
        run.explain()
    );
    assert!(run.stdout.is_empty(), "something ran or built:\n{}", run.explain());
}

const LOOPBACK: &str = "description = \"d\"\nkind = \"ssh-loopback\"\nserver = \"openssh\"\n\
    authorized_keys = [\"alice\"]\n[[session]]\nuser = \"root\"\nkey = \"alice\"\ncommand = \"exit 0\"\n\
    steps = [{ ended = 0 }]\n";

/// Without a QEMU the loopback server cannot run: every ssh-loopback case fails with that
/// reason, or is skipped under --allow-skip.
#[test]
fn a_loopback_case_without_qemu_fails_naming_it_or_is_skipped() {
    let dir = cases_dir(&[("lb-one", LOOPBACK), ("lb-two", LOOPBACK)]);
    let cases = dir.path().to_str().unwrap();
    let broken = [("TESTBENCH_QEMU_RV64", "/nonexistent/qemu-rv64")];
    let run = bench(&["--cases", cases], &broken);
    run.expect_status(1);
    let lack = "reason: ssh-loopback: /nonexistent/qemu-rv64 cannot run";
    assert_eq!(run.stdout.matches(lack).count(), 2, "{}", run.explain());
    let run = bench(&["--cases", cases, "--allow-skip"], &broken);
    run.expect_status(0);
    assert!(run.stdout.contains("0 passed, 0 failed, 2 skipped"), "{}", run.explain());
}

/// A QEMU that answers its probe but boots nothing fails the loopback probe, and a
/// failed probe fails every ssh-loopback case, --allow-skip or not: it is not a lack.
#[test]
fn a_failed_loopback_probe_fails_every_loopback_case() {
    let dir = cases_dir(&[("lb-one", LOOPBACK), ("lb-two", LOOPBACK)]);
    let cases = dir.path().to_str().unwrap();
    let fake = dir.path().join("qemu-fake");
    let real = std::env::var("TESTBENCH_QEMU_RV64").unwrap_or_else(|_| "qemu-system-riscv64".into());
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncase \"$1\" in -version|-L) exec {real} \"$@\" ;; esac\necho boot >> '{}'\nexit 1\n",
            dir.path().join("boots").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = bench(&["--cases", cases, "--allow-skip"], &[("TESTBENCH_QEMU_RV64", fake.to_str().unwrap())]);
    run.expect_status(1);
    let failed = "reason: ssh-loopback probe (one login running `exit 0`";
    assert_eq!(run.stdout.matches(failed).count(), 2, "{}", run.explain());
    assert!(run.stdout.contains("0 passed, 2 failed, 0 skipped"), "{}", run.explain());
    // The probe ran once for the run: one guest started, none for the cases.
    assert_eq!(std::fs::read_to_string(dir.path().join("boots")).unwrap(), "boot\n");
}

/// A failed ssh-loopback case's server log and each session's transcript, guest console
/// and QEMU stderr are kept by --keep-failed; the reason names the session and its step.
/// The QEMU stderr holds the trace of the session's ports, each line stamped: the input
/// QEMU read from ssh and the output that left the guest (docs/sessions.md).
#[test]
fn a_failed_loopback_cases_logs_are_kept() {
    let case = LOOPBACK
        .replace("command = \"exit 0\"", "command = \"echo one; exit 0\"")
        .replace("steps = [{ ended = 0 }]", "steps = [{ expect = 'two' }, { ended = 0 }]");
    let dir = cases_dir(&[("lb", &case)]);
    let keep = tempfile::tempdir().unwrap();
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--keep-failed", keep.path().to_str().unwrap()], &[]);
    run.expect_status(1);
    assert!(run.stdout.contains("reason: session root: step 1 (expect 'two'): "), "{}", run.explain());
    let mut kept: Vec<String> =
        std::fs::read_dir(keep.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            "rv64-lb.server.log",
            "rv64-lb.session-root.guest.log",
            "rv64-lb.session-root.log",
            "rv64-lb.session-root.qemu-stderr.log"
        ],
        "{}",
        run.explain()
    );
    let server_log = std::fs::read_to_string(keep.path().join("rv64-lb.server.log")).unwrap();
    assert!(server_log.contains("Accepted publickey for root"), "{server_log}");
    let transcript = std::fs::read_to_string(keep.path().join("rv64-lb.session-root.log")).unwrap();
    assert!(transcript.contains("one"), "{transcript}");
    let stderr = std::fs::read_to_string(keep.path().join("rv64-lb.session-root.qemu-stderr.log")).unwrap();
    let stamped = regex::Regex::new(r"(?m)^\d+@\d+\.\d{6}:virtio_console_chr_read port 1, size \d+$").unwrap();
    assert!(stamped.is_match(&stderr), "no stamped trace of the ssh port's input: {stderr}");
    // The session's output leaves on port 2, `ssh-out` (one port each way: loopback.rs).
    assert!(stderr.contains(":virtio_console_flush_buf port 2, "), "no trace of the ssh-out port's output: {stderr}");
}

/// A post-check program that is not there is refused before anything builds: a name not
/// on the path, a path not in the workspace.
#[test]
fn a_post_check_program_that_is_not_there_is_refused() {
    let case = |command: &str| {
        format!(
            "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\n\
             post_check = {{ command = [\"{command}\"] }}\n[guest]\nkernel = \"Cargo.toml\"\n"
        )
    };
    let dir = cases_dir(&[("by-name", &case("no-such-oracle-here")), ("by-path", &case("scripts/oracles/no-such"))]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    assert!(
        run.stderr.contains("by-name.toml: post_check.command[0]: no program \"no-such-oracle-here\" on the path"),
        "{}",
        run.explain()
    );
    assert!(
        run.stderr.contains("by-path.toml: post_check.command[0]: scripts/oracles/no-such does not exist"),
        "{}",
        run.explain()
    );
}

/// A sweep of Debian's Linux on each width the bench boots but does not build: one case,
/// three seeds, two boots at once, results in seed order, each seed's files apart. On
/// aarch64 the seed reaches the guest's random pool (the rng line differs per seed); on
/// x86_64's q35 it does not (the line is the same for every seed: docs/guests.md).
#[test]
fn a_sweep_of_debian_linux_runs_on_x86_64_and_aarch64() {
    for (arch, console, seeds_differ) in [("aarch64", "ttyAMA0", true), ("x86_64", "ttyS0", false)] {
        let case = format!(
            r#"description = "rng under icount, swept"
arch = ["{arch}"]
kind = "boot"
memory_mib = 512
icount = "shift=3,sleep=off"
timeout_secs = 120
expect = ['^testbench-guest: rng: [0-9a-f]{{32}}$', '^testbench-guest: done rng$']
poweroff = true

[guest]
recipe = "guests/debian-devices-{arch}.toml"
append = "console={console} panic=-1 quiet tb.do=rng"
"#
        );
        let dir = cases_dir(&[("swept", &case)]);
        let cases = dir.path().to_str().unwrap();
        let run = bench(
            &["--cases", cases, "--exact", "swept", "--sweep", "7,2,4", "--jobs", "2", "--message-format", "json"],
            &[],
        );
        run.expect_status(0);
        let events = run.events();
        let seeds: Vec<u64> =
            events.iter().filter(|e| e["event"] == "boot-finished").map(|e| e["seed"].as_u64().unwrap()).collect();
        assert_eq!(seeds, [2, 4, 7], "{}", run.explain());
        let run_dir = run.run_dir();
        let mut rng_lines = Vec::new();
        for seed in [2, 4, 7] {
            let log = std::fs::read_to_string(run_dir.join(format!("swept/seed-{seed}-{arch}/console.log"))).unwrap();
            rng_lines.push(log.lines().find(|l| l.starts_with("testbench-guest: rng: ")).unwrap().to_string());
        }
        rng_lines.dedup();
        let expected = if seeds_differ { 3 } else { 1 };
        assert_eq!(rng_lines.len(), expected, "{arch}: {rng_lines:?}");
    }
}

/// accel = "auto" on x86_64: the run's output says what the KVM probe found and which
/// accelerator the boot got, and the boot's command line is that one. On this project's
/// machines /dev/kvm hangs the probe guest, so the run falls back to TCG and says why; on
/// a host whose KVM works the same test sees KVM chosen.
#[test]
fn auto_says_which_accelerator_it_chose_and_why_and_boots_with_it() {
    let run = bench(&["--exact", "linux-x86_64-accel-auto"], &[]);
    run.expect_status(0);
    let said: Vec<&str> =
        run.stdout.lines().chain(run.stderr.lines()).filter(|l| l.starts_with("accel x86_64: ")).collect();
    assert_eq!(said.len(), 1, "one line for the width's one choice\n{}", run.explain());
    let chosen = if said[0].starts_with("accel x86_64: kvm (auto: the probe booted under KVM in ") {
        "kvm"
    } else {
        assert!(
            said[0].starts_with("accel x86_64: tcg (auto: KVM is not usable (")
                || said[0] == "accel x86_64: tcg (auto: no KVM probe ran for x86_64)",
            "{}",
            run.explain()
        );
        "tcg"
    };
    let command_line =
        std::fs::read_to_string(run.run_dir().join("linux-x86_64-accel-auto/x86_64-smp1/command-line")).unwrap();
    assert!(command_line.contains(&format!("-accel {chosen} ")), "{command_line}");
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        assert_eq!(chosen, "tcg", "no usable /dev/kvm, yet KVM was chosen");
    }
}

/// Rerun alone (scripts/fake-qemu-console in its "crowd" mode stands in for QEMU: a boot
/// hangs when another runs at the same time). Two boots at once both run out of their
/// deadline; the one whose failure is only that is booted again alone and passes, with
/// both results said; the self-check whose expected failure is its deadline is not
/// booted again. One at a time, nothing times out and nothing is rerun.
#[test]
fn a_boot_that_timed_out_beside_another_is_rerun_alone_and_both_results_are_said() {
    let crowd = Crowd::new();
    let evidence = crowd.case("must_fail = '^timed out after 3s waiting for expect'\n", "tb.hang");
    let starved = crowd.case("", "x");
    let dir = cases_dir(&[("a-deadline-is-evidence", &evidence), ("b-starved", &starved)]);
    let cases = dir.path().to_str().unwrap();
    let env = crowd.env();

    let run = bench(&["--cases", cases, "--jobs", "2", "--message-format", "json"], &env);
    run.expect_status(0);
    let finished: Vec<serde_json::Value> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    assert_eq!(finished.len(), 2, "{}", run.explain());
    let notes = |e: &serde_json::Value| e["notes"].as_array().cloned().unwrap_or_default();
    assert_eq!(finished[0]["case"], "a-deadline-is-evidence");
    assert!(notes(&finished[0]).is_empty(), "the deadline is the self-check's evidence: no rerun\n{}", run.explain());
    assert_eq!(finished[1]["case"], "b-starved");
    assert_eq!(finished[1]["verdict"], "pass", "{}", run.explain());
    assert_eq!(finished[1]["failure_class"], "host-dependent", "it failed beside others and passed alone");
    let said = notes(&finished[1]).first().and_then(|n| n.as_str().map(String::from)).unwrap_or_default();
    assert!(
        said.starts_with(
            "timed out beside other work; passed alone (the first boot: timed out after 3s waiting for expect[0]"
        ),
        "{}",
        run.explain()
    );
    let first = run.run_dir().join("b-starved/rv64-smp1.beside-others/console.log");
    let first = std::fs::read_to_string(&first).unwrap();
    assert!(first.contains("fake-qemu-console: starved"), "the first boot's files are kept: {first}");
    let alone = std::fs::read_to_string(run.run_dir().join("b-starved/rv64-smp1/console.log")).unwrap();
    assert!(alone.contains("fake-qemu-console: done"), "{alone}");

    // One at a time: the starved case is never beside another, so it passes at once.
    let single = bench(&["--cases", cases, "--jobs", "1", "--message-format", "json"], &env);
    single.expect_status(0);
    let finished: Vec<serde_json::Value> =
        single.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    assert!(finished.iter().all(|e| notes(e).is_empty()), "{}", single.explain());
    assert!(!single.run_dir().join("b-starved/rv64-smp1.beside-others").exists());
}

/// The fake QEMU of the rerun-alone tests, in its "crowd" mode, and the cases it boots.
struct Crowd {
    image: tempfile::TempDir,
    _dir: tempfile::TempDir,
    /// The fake's path, and its mode naming the crowd's directory.
    fake: String,
    mode: String,
}

impl Crowd {
    fn new() -> Crowd {
        let image = tempfile::tempdir().unwrap();
        std::fs::write(image.path().join("kernel"), "not a kernel: the fake QEMU never reads it\n").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fake = root().join("scripts/fake-qemu-console").to_str().unwrap().to_string();
        let mode = format!("crowd:{}", dir.path().display());
        Crowd { image, _dir: dir, fake, mode }
    }

    /// A case of a 3 s deadline that expects the fake's `done`, with `extra` lines.
    fn case(&self, extra: &str, append: &str) -> String {
        format!(
            "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 3\nexpect = ['^fake-qemu-console: done$']\npoweroff = true\n{extra}[guest]\nkernel = \"{}\"\nfirmware = \"none\"\nappend = \"{append}\"\n",
            self.image.path().join("kernel").display()
        )
    }

    /// The environment that makes the bench boot the fake in this crowd.
    fn env(&self) -> [(&str, &str); 2] {
        [("TESTBENCH_QEMU_RV64", &self.fake), ("FAKE_QEMU_CONSOLE", &self.mode)]
    }
}

/// A boot on the host's clock (no icount) whose failure beside another boot is not a
/// deadline (here a forbidden line the starved fake prints) has no verdict either: it is
/// rerun alone and passes. The same failure under icount is a verdict, never rerun.
#[test]
fn a_host_clock_boot_that_failed_beside_another_is_rerun_alone_and_an_icount_one_is_not() {
    let crowd = Crowd::new();
    let host_clock = crowd.case("forbid = ['starved']\nclock = \"host\"\nclock_reason = \"host-time\"\n", "x");
    let guest_clock = crowd.case("forbid = ['starved']\nicount = \"shift=3\"\n", "x");
    let dir = cases_dir(&[("a-host-clock", &host_clock), ("b-guest-clock", &guest_clock)]);
    let env = crowd.env();
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--jobs", "2", "--message-format", "json"], &env);
    run.expect_status(1);
    let finished: Vec<serde_json::Value> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    assert_eq!(finished.len(), 2, "{}", run.explain());
    let notes = |e: &serde_json::Value| e["notes"].as_array().cloned().unwrap_or_default();
    assert_eq!((&finished[0]["case"], &finished[0]["verdict"]), (&"a-host-clock".into(), &"pass".into()));
    let said = notes(&finished[0]).first().and_then(|n| n.as_str().map(String::from)).unwrap_or_default();
    assert!(
        said.starts_with("failed beside other work on the host's clock; passed alone (the first boot: forbidden line"),
        "{}",
        run.explain()
    );
    assert_eq!((&finished[1]["case"], &finished[1]["verdict"]), (&"b-guest-clock".into(), &"fail".into()));
    // Its failure stands; booted once more alone only to class it (classify.rs), where
    // it passes: the load beside it made it fail.
    let said = notes(&finished[1]);
    assert!(
        said.len() == 1 && said[0].as_str().is_some_and(|n| n.starts_with("booted again alone (")),
        "an icount boot's failure is a verdict, not rerun alone\n{}",
        run.explain()
    );
    assert_eq!(finished[1]["failure_class"], "host-dependent", "{}", run.explain());
    assert!(!run.run_dir().join("b-guest-clock/rv64-smp1.beside-others").exists());

    // A self-check that passed beside another boot fails as a case, which on the host's
    // clock is no verdict either: here it sees the starved line only beside another, and
    // alone fails as it must.
    let host = "clock = \"host\"\nclock_reason = \"host-time\"\n";
    let self_check = crowd
        .case(&format!("must_fail = 'waiting for expect.0. .\\^fake-qemu-console: starved'\n{host}"), "x")
        .replace(
            "expect = ['^fake-qemu-console: done$']\npoweroff = true\n",
            "expect = ['^fake-qemu-console: starved$']\n",
        );
    let dir = cases_dir(&[("c-self-check", &self_check), ("d-starved", &crowd.case(host, "x"))]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--jobs", "2", "--message-format", "json"], &env);
    run.expect_status(0);
    let finished: Vec<serde_json::Value> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
    let said = notes(&finished[0]).first().and_then(|n| n.as_str().map(String::from)).unwrap_or_default();
    assert!(
        said.starts_with(
            "failed beside other work on the host's clock; failed alone, as it must (the first boot: it passed, and must fail"
        ),
        "{}",
        run.explain()
    );
}

/// `--prebuild DIR` builds every case once per width into DIR; `DIR/testbench --prebuilt
/// DIR` boots from it running no cargo, keeps a failed build as its case's result, and
/// refuses a DIR made for another workspace or before a change, saying why.
#[test]
fn a_prebuilt_directory_boots_without_cargo_and_is_refused_when_it_is_not_this_trees() {
    // The broken case's build fails in a cargo that refuses the smoke program with echo
    // (an unknown feature is refused before anything builds).
    let broken = smoke_with("\"echo\"");
    let two_widths = SMOKE_DONE.replace("arch = [\"rv64\"]", "arch = [\"rv64\", \"rv32\"]");
    let dir = cases_dir(&[("good", &two_widths), ("broken", &broken)]);
    let cases = dir.path().to_str().unwrap();
    let pre = tempfile::tempdir().unwrap();
    let pre_dir = pre.path().join("pre");
    let tools = tempfile::tempdir().unwrap();
    let failing = "case \"$*\" in *build*--features\\ echo*) echo 'error: the feature echo cannot build here' >&2; exit 101;; esac";
    let cargo = logging_cargo(tools.path(), &tools.path().join("cargo.log"), failing);
    let made =
        bench(&["--cases", cases, "--prebuild", pre_dir.to_str().unwrap()], &[("CARGO", cargo.to_str().unwrap())]);
    made.expect_status(0);
    assert!(made.stdout.contains("prebuilt 2 (case, width) pair(s), 1 failed"), "{}", made.explain());
    for piece in ["index.json", "testbench", "rv64/files", "rv32/files"] {
        assert!(pre_dir.join(piece).exists(), "{piece}\n{}", made.explain());
    }

    // From the directory: the bench copy, no cargo at all (the one it is given logs every
    // call), the failed build reported.
    let copy = pre_dir.join("testbench");
    let watched = tempfile::tempdir().unwrap();
    let calls = watched.path().join("cargo.log");
    let watching = logging_cargo(watched.path(), &calls, "exit 101");
    let run = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(&copy);
        cmd.args(["--cases", cases, "--prebuilt", pre_dir.to_str().unwrap()]).args(extra);
        cmd.env("CARGO", &watching).env("TESTBENCH_NO_SETUP", "1");
        cmd.output().unwrap()
    };
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("good rv64 smp1") && stdout.contains("good rv32 smp1"), "{stdout}");
    assert_eq!(stdout.matches(" PASS ").count(), 2, "{stdout}");
    assert!(stdout.contains("the feature echo cannot build here") && stdout.contains("failed when"), "{stdout}");
    assert!(!calls.exists(), "a prebuilt run ran cargo: {:?}", std::fs::read_to_string(&calls));

    // Another workspace's directory, and one made before a change, are refused in words.
    let index_path = pre_dir.join("index.json");
    let original = std::fs::read_to_string(&index_path).unwrap();
    let mut index: serde_json::Value = serde_json::from_str(&original).unwrap();
    index["workspace"] = "/some/other/checkout".into();
    std::fs::write(&index_path, index.to_string()).unwrap();
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("made from the workspace /some/other/checkout, not this one"), "{said}");
    let mut index: serde_json::Value = serde_json::from_str(&original).unwrap();
    index["fingerprint"]["commit"] = "0000000000000000000000000000000000000000".into();
    std::fs::write(&index_path, index.to_string()).unwrap();
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("made from commit 000000000000")
            && said.contains("the commit moved from 0000000000000000000000000000000000000000 to "),
        "{said}"
    );
    // The check runs beside the first boots: whatever they did, no verdict of old pieces
    // is reported.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(" PASS ") && !stdout.contains(" FAIL "), "{stdout}");
    // An edited case file (outside the tree here) boots nothing old.
    std::fs::write(&index_path, &original).unwrap();
    std::fs::write(dir.path().join("good.toml"), two_widths.replace("smoke\"\narch", "smoke, edited\"\narch")).unwrap();
    let out = run(&["--exact", "good"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("was edited since"), "{stdout}");
}

/// The fake QEMU (scripts/fake-qemu-console) behind a shell wrapper a test writes, and a
/// case of a 30 s deadline that boots it and expects its `done`: the probe, QMP and
/// stderr tests below each put their own lines in the wrapper.
struct Wrapped {
    _image: tempfile::TempDir,
    /// Holds the wrapper; a test may put its own files beside it.
    tools: tempfile::TempDir,
    /// The wrapper's path, the QEMU the bench is given.
    wrapper: PathBuf,
    case: String,
}

impl Wrapped {
    fn new() -> Wrapped {
        let image = tempfile::tempdir().unwrap();
        let kernel = image.path().join("kernel");
        std::fs::write(&kernel, "not a kernel: the fake QEMU never reads it\n").unwrap();
        let case = format!(
            "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\nexpect = ['^fake-qemu-console: done$']\n[guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
            kernel.display()
        );
        let tools = tempfile::tempdir().unwrap();
        let wrapper = tools.path().join("qemu");
        Wrapped { _image: image, tools, wrapper, case }
    }

    /// (Re)writes the wrapper: a shell script of `lines`, then the fake QEMU with the
    /// wrapper's arguments.
    fn wrap(&self, lines: &str) {
        let fake = root().join("scripts/fake-qemu-console");
        std::fs::write(&self.wrapper, format!("#!/bin/sh\n{lines}exec '{}' \"$@\"\n", fake.display())).unwrap();
        std::fs::set_permissions(&self.wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
}

/// QEMU's probe (`-version`, `-L help`) is kept per width, keyed by the binary's path,
/// size, time and inode: the next run starts no QEMU to ask again, and a changed binary
/// is asked again.
#[test]
fn the_qemu_probe_is_kept_until_the_binary_changes() {
    let fake = Wrapped::new();
    let dir = cases_dir(&[("probed", &fake.case)]);
    let calls = fake.tools.path().join("calls");
    let write_wrapper = |marker: &str| fake.wrap(&format!("# {marker}\necho \"$1\" >> '{}'\n", calls.display()));
    let probes = || std::fs::read_to_string(&calls).unwrap_or_default().lines().filter(|l| *l == "-version").count();
    write_wrapper("first");
    let wrapper = &fake.wrapper;
    let env = [("TESTBENCH_QEMU_RV64", wrapper.to_str().unwrap())];
    let cases = dir.path().to_str().unwrap();
    bench(&["--cases", cases], &env).expect_status(0);
    assert_eq!(probes(), 1);
    bench(&["--cases", cases], &env).expect_status(0);
    assert_eq!(probes(), 1, "the second run asked QEMU again");
    write_wrapper("a changed binary, one byte longer");
    bench(&["--cases", cases], &env).expect_status(0);
    assert_eq!(probes(), 2, "a changed binary must be asked again");
    // A second binary of the width, the two used in turn: each is kept apart, so
    // neither is asked again (one file per width once made them ask each other's turn).
    let other = fake.tools.path().join("qemu-other");
    std::fs::copy(wrapper, &other).unwrap();
    let env_other = [("TESTBENCH_QEMU_RV64", other.to_str().unwrap())];
    bench(&["--cases", cases], &env_other).expect_status(0);
    assert_eq!(probes(), 3, "another binary is asked once");
    bench(&["--cases", cases], &env).expect_status(0);
    bench(&["--cases", cases], &env_other).expect_status(0);
    assert_eq!(probes(), 3, "two binaries used in turn are each asked once");
}

/// Two benches at once, each with one boot, in the fake QEMU's crowd mode: each boot
/// starves the other's. Alone, neither bench knows the other ran: both time out and
/// fail. Under q, sharing the lock `qemu` (Q_DIR, Q_JOB, Q_SHARE as `q run --share qemu`
/// sets them), every boot counts as beside other work: each is rerun with every bench's
/// boots shut out (q's lock files), one after the other, and both pass, saying so.
#[test]
fn under_a_shared_q_lease_a_boot_that_timed_out_is_rerun_alone_of_every_bench() {
    let crowd = Crowd::new();
    let dir = cases_dir(&[("starved", &crowd.case("", "x"))]);
    let cases = dir.path().to_str().unwrap();
    let q_dir = tempfile::tempdir().unwrap();
    let q = q_dir.path().to_str().unwrap();
    let env = crowd.env();
    let two_at_once = |under_q: bool| -> Vec<Run> {
        let mut env = env.to_vec();
        if under_q {
            env.extend([("Q_DIR", q), ("Q_JOB", "1"), ("Q_SHARE", "qemu")]);
        }
        std::thread::scope(|scope| {
            let runs: Vec<_> = (0..2)
                .map(|_| {
                    let env = env.clone();
                    scope.spawn(move || bench(&["--cases", cases, "--message-format", "json"], &env))
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        })
    };
    for run in two_at_once(false) {
        run.expect_status(1);
    }
    for run in two_at_once(true) {
        run.expect_status(0);
        let finished: Vec<serde_json::Value> =
            run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
        let said = finished[0]["notes"][0].as_str().unwrap_or_default().to_string();
        assert!(said.starts_with("timed out beside other work; passed alone"), "{}", run.explain());
    }
    assert!(q_dir.path().join("boots.lock").exists() && q_dir.path().join("turnstile.lock").exists());
}

/// The bench's own trouble during a boot is not the guest's failure: the run's private
/// QMP socket directory is taken away after the run made it (by the QEMU probe, which
/// runs after it and before any boot), so no boot can listen for QEMU. Each boot says
/// the bench could not boot it, and the run exits 3 (the bench could not run), not 1,
/// in human and JSON form alike.
#[test]
fn a_qmp_directory_taken_away_mid_run_is_the_benchs_trouble_and_exits_3() {
    for (format, json) in [("human", false), ("json", true)] {
        // A wrapper of its own each time: a rewritten one could be taken for the same
        // binary, whose kept probe would run no -version.
        let fake = Wrapped::new();
        let dir = cases_dir(&[("troubled", &fake.case)]);
        let cases = dir.path().to_str().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        fake.wrap(&format!(
            "if [ \"$1\" = -version ]; then\n  for d in '{tmp}'/testbench-qmp-*; do rm -rf \"$d\" && : > \"$d\"; done\nfi\n",
            tmp = tmp.path().display()
        ));
        let env = [("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap()), ("TMPDIR", tmp.path().to_str().unwrap())];
        let run = bench(&["--cases", cases, "--message-format", format], &env);
        run.expect_status(3);
        assert!(
            run.stderr.contains("error: the bench could not run 1 boot (troubled rv64 smp1): the bench could not boot it: failed to listen for QMP: "),
            "{}",
            run.explain()
        );
        if json {
            let finished: Vec<_> = run.events().into_iter().filter(|e| e["event"] == "boot-finished").collect();
            assert_eq!(finished.len(), 1, "{}", run.explain());
            assert_eq!(finished[0]["verdict"], "trouble", "{}", run.explain());
        } else {
            assert!(
                run.stdout.contains("TROUBLE the bench could not boot it: failed to listen for QMP"),
                "{}",
                run.explain()
            );
            assert!(run.stdout.contains("0 passed, 0 failed, 0 skipped, 1 bench trouble"), "{}", run.explain());
        }
    }
}

/// QEMU's own words on a failing boot: a QEMU that says something on stderr and runs on
/// (here a wrapper around the fake QEMU, whose console never shows what the case waits for) gets
/// its last stderr line noted under the failure, which the reason alone does not say;
/// the same boot's pass would carry no such note.
#[test]
fn qemus_last_stderr_line_is_noted_on_a_failure_that_does_not_quote_it() {
    let fake = Wrapped::new();
    let waits =
        fake.case.replace("timeout_secs = 30", "timeout_secs = 3").replace("fake-qemu-console: done", "never printed");
    let dir = cases_dir(&[("stderr", &fake.case), ("stderr-waits", &waits)]);
    fake.wrap("case \"$1\" in -version|-L) ;; *) echo 'qemu-wrapper: a word the test said on stderr' >&2 ;; esac\n");
    let cases = dir.path().to_str().unwrap();
    let qemu = ("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap());
    let run = bench(&["--cases", cases, "--exact", "stderr-waits"], &[qemu]);
    run.expect_status(1);
    // The fake QEMU may add its own lines after the wrapper's (a thread's traceback when
    // the bench closes QMP under it): the note names the last, whichever it is.
    let note = run.stdout.lines().find(|l| l.starts_with("    note: QEMU said on stderr (")).unwrap_or_else(|| {
        panic!("no note of QEMU's stderr\n{}", run.explain());
    });
    assert!(note.contains(" qemu-stderr.log), last: "), "{}", run.explain());
    let kept = std::fs::read_to_string(run.run_dir().join("stderr-waits/rv64-smp1/qemu-stderr.log")).unwrap();
    let last = kept.lines().rfind(|l| !l.trim().is_empty()).unwrap();
    assert!(note.ends_with(last.trim_end()), "{note:?} names another line than the log's last, {last:?}");
    assert!(kept.starts_with("qemu-wrapper: a word the test said on stderr\n"), "{kept}");
    let run = bench(&["--cases", cases, "--exact", "stderr"], &[qemu]);
    run.expect_status(0);
    assert!(!run.stdout.contains("QEMU said on stderr"), "{}", run.explain());
}

/// A failure made by one console line names it in the JSON events: its kind, its number
/// in `console.log` (counted here from the log itself) and its text as quoted.
#[test]
fn a_forbidden_lines_place_in_the_console_is_in_the_json_verdict() {
    let fake = Wrapped::new();
    let forbids = fake.case.replace("[guest]", "forbid = ['Kernel panic']\n[guest]");
    let dir = cases_dir(&[("forbids", &forbids)]);
    fake.wrap("");
    let cases = dir.path().to_str().unwrap();
    let env = [("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap()), ("FAKE_QEMU_CONSOLE", "forbidden:300")];
    let run = bench(&["--cases", cases, "--message-format", "json"], &env);
    run.expect_status(1);
    let finished = run.events().into_iter().find(|e| e["event"] == "boot-finished").expect("a boot-finished event");
    assert_eq!(finished["failure_kind"], "forbidden", "{}", run.explain());
    let log = std::fs::read(run.run_dir().join("forbids/rv64-smp1/console.log")).unwrap();
    let at = log.split(|&b| b == b'\n').position(|line| line.ends_with(b"Kernel panic here")).unwrap() + 1;
    assert_eq!(finished["failure_line"], at as u64, "{}", run.explain());
    let quote = finished["failure_quote"].as_str().unwrap();
    assert!(quote.contains("Kernel panic here") && quote.len() < 400, "{quote:?}");
}

/// `--oracle NAME LOG [LIMIT=VALUE...]` judges a kept console by hand: a trace that keeps
/// the rule exits 0 with its summary, a limit it breaks exits 1 saying which, a pick
/// against the rule exits 1 naming its line, a log that cannot be read exits 2.
#[test]
fn an_oracle_judges_a_kept_console_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("kernel: harts 1\nkernel: sched: slots 4 timebase 10000000\n");
    for _ in 0..20 {
        text.push_str("kernel: sched: 0 woke 1\r\nkernel: sched: 0 picked 1 cost 20\r\nkernel: sched: 0 left 1\r\n");
    }
    let good = dir.path().join("good.log");
    std::fs::write(&good, &text).unwrap();
    let oracle = |log: &Path, limits: &[&str]| {
        let mut args = vec!["--oracle", "sched", log.to_str().unwrap()];
        args.extend(limits);
        bench(&args, &[])
    };
    let run = oracle(&good, &["min_picks=20"]);
    run.expect_status(0);
    assert!(run.stdout.starts_with("sched oracle: 20 picks"), "{}", run.explain());
    let run = oracle(&good, &["min_picks=21"]);
    run.expect_status(1);
    assert!(run.stdout.contains("min_picks"), "{}", run.explain());
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, "kernel: harts 1\nkernel: sched: slots 4 timebase 10000000\nkernel: sched: 0 woke 0\nkernel: sched: 0 woke 2\nkernel: sched: 0 picked 0 cost 1\nkernel: sched: 0 requeued 0\nkernel: sched: 0 picked 0 cost 1\n").unwrap();
    let run = oracle(&bad, &[]);
    run.expect_status(1);
    assert!(run.stdout.contains("line 7") && run.stdout.contains("the rule picks slot 2"), "{}", run.explain());
    oracle(&dir.path().join("missing.log"), &[]).expect_status(2);
}

/// A failing boot whose console shows a crash names it: its title, guilty frame and
/// first line under the reason, in the JSON event (`crash`), and first in JUnit's
/// failure message; the guest is a kernel the bench did not build, read by the generic
/// rules (a panic line; Linux's own rules, for a recipe's guest, read its frames too).
/// Linux's panic when init dies, whole (riscv64's trace shape): the crash the fake QEMU
/// prints in the crash tests below.
const KILLED_INIT_PANIC: &str = "\
[    2.000000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n\
[    2.000001] CPU: 0 UID: 0 PID: 1 Comm: init Not tainted 6.12.0 #1\n\
[    2.000002] Call Trace:\n\
[    2.000003] [<ffffffff80007020>] dump_backtrace+0x28/0x30\n\
[    2.000004] [<ffffffff80a66214>] panic+0x11a/0x35a\n\
[    2.000005] [<ffffffff80017e2e>] do_exit+0x7d6/0x8a0\n\
[    2.000006] [<ffffffff80018010>] do_group_exit+0x30/0x80\n\
[    2.000007] ---[ end Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b ]---\n";

#[test]
fn a_failing_boot_names_the_crash_its_console_shows() {
    let fake = Wrapped::new();
    let waits =
        fake.case.replace("fake-qemu-console: done", "never printed").replace("timeout_secs = 30", "timeout_secs = 5");
    let dir = cases_dir(&[("crashes", &waits)]);
    fake.wrap("");
    let console = fake.tools.path().join("console");
    std::fs::write(&console, format!("booting\n{KILLED_INIT_PANIC}")).unwrap();
    let file = format!("file:{}", console.display());
    let env = [("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap()), ("FAKE_QEMU_CONSOLE", file.as_str())];
    let cases = dir.path().to_str().unwrap();
    let junit = fake.tools.path().join("junit.xml");
    let run = bench(&["--cases", cases, "--junit", junit.to_str().unwrap()], &env);
    run.expect_status(1);
    let line =
        run.stdout.lines().find(|l| l.starts_with("    crash:  ")).unwrap_or_else(|| panic!("{}", run.explain()));
    assert!(line.contains("kernel panic: Attempted to kill init!") && line.ends_with("console.log line 2"), "{line}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("message=\"kernel panic: Attempted to kill init!"), "{xml}");
    let run = bench(&["--cases", cases, "--message-format", "json"], &env);
    let finished = run.events().into_iter().find(|e| e["event"] == "boot-finished").expect("boot-finished");
    assert_eq!(finished["crash"]["kind"], "panic", "{}", run.explain());
    assert!(finished["crash"]["title"].as_str().unwrap().starts_with("kernel panic: Attempted to kill init!"));
    assert_eq!(finished["crash"]["line"], 2, "{}", run.explain());
}

/// A crash ends the boot at once (the report's end marker, not the case's deadline), and
/// a sweep whose seeds hit two different crashes ends with them grouped by title: the
/// most boots first, their seeds, the first one's replay; the same in JSON.
#[test]
fn a_sweep_groups_its_failures_by_the_crash_they_hit() {
    let fake = Wrapped::new();
    let waits =
        fake.case.replace("fake-qemu-console: done", "never printed").replace("timeout_secs = 30", "timeout_secs = 60");
    let dir = cases_dir(&[("crashes", &waits)]);
    let panic = |message: &str| {
        format!(
            "booting\n\
[    2.000000] Kernel panic - not syncing: {message}\n\
[    2.000001] CPU: 0 UID: 0 PID: 1 Comm: init Not tainted 6.12.0 #1\n\
[    2.000002] Call Trace:\n\
[    2.000003] [<ffffffff80007020>] dump_backtrace+0x28/0x30\n\
[    2.000004] [<ffffffff80a66214>] panic+0x11a/0x35a\n\
[    2.000005] [<ffffffff80017e2e>] mount_root_generic+0x1d6/0x2a0\n\
[    2.000007] ---[ end Kernel panic - not syncing: {message} ]---\n"
        )
    };
    let tools = fake.tools.path();
    std::fs::write(tools.join("console-0"), panic("VFS: Unable to mount root fs on unknown-block(0,0)")).unwrap();
    std::fs::write(tools.join("console-1"), panic("No working init found.")).unwrap();
    // Odd seeds hit one crash, even seeds the other.
    fake.wrap(&format!(
        "S=0; prev=; for a; do [ \"$prev\" = -seed ] && S=$a; prev=$a; done\nexport FAKE_QEMU_CONSOLE=file:'{}'/console-$((S % 2))\n",
        tools.display()
    ));
    let env = [("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap())];
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--sweep", "1..5", "--color", "never"], &env);
    run.expect_status(1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let at = lines.iter().position(|l| *l == "2 distinct crashes:").unwrap_or_else(|| panic!("{}", run.explain()));
    assert!(
        lines[at + 1].starts_with("    kernel panic: No working init found — 3 boots (seeds 1, 3, 5), first replay: "),
        "{}",
        run.explain()
    );
    assert!(lines[at + 1].contains("--exact crashes --arch rv64 --smp 1 --sweep 1 "), "{}", lines[at + 1]);
    assert!(
        lines[at + 2].starts_with(
            "    kernel panic: VFS: Unable to mount root fs on unknown-block(NUM,NUM) — 2 boots (seeds 2, 4)"
        ),
        "{}",
        run.explain()
    );
    // Each boot ended at its crash, not at the 60 s deadline, and says so.
    assert!(run.stdout.contains("crash at "), "{}", run.explain());
    assert!(!run.stdout.contains("timed out"), "{}", run.explain());
    let run = bench(&["--cases", cases, "--sweep", "1..5", "--message-format", "json"], &env);
    let finished = run.events().into_iter().find(|e| e["event"] == "run-finished").expect("run-finished");
    let crashes = finished["crashes"].as_array().unwrap_or_else(|| panic!("{}", run.explain()));
    assert_eq!(crashes.len(), 2, "{}", run.explain());
    assert_eq!(crashes[0]["seeds"], serde_json::json!([1, 3, 5]));
    assert_eq!(crashes[0]["kind"], "panic");
    assert_eq!(crashes[1]["boots"].as_array().unwrap().len(), 2);
    let boot = run.events().into_iter().find(|e| e["event"] == "boot-finished").expect("boot-finished");
    assert_eq!(boot["failure_kind"], "crash", "{}", run.explain());
}

/// A kernel panic printed right after the case's last expect matched fails the boot: the
/// pass the judge reached waits for the report being printed (or the report ends in the
/// same chunk), and the crash is the verdict.
#[test]
fn a_crash_right_after_the_last_expect_fails_the_boot() {
    let fake = Wrapped::new();
    let dir = cases_dir(&[("late-crash", &fake.case)]);
    fake.wrap("");
    let console = fake.tools.path().join("console");
    std::fs::write(&console, format!("booting\nfake-qemu-console: done\n{KILLED_INIT_PANIC}")).unwrap();
    let file = format!("file:{}", console.display());
    let env = [("TESTBENCH_QEMU_RV64", fake.wrapper.to_str().unwrap()), ("FAKE_QEMU_CONSOLE", file.as_str())];
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--message-format", "json"], &env);
    run.expect_status(1);
    let finished = run.events().into_iter().find(|e| e["event"] == "boot-finished").expect("boot-finished");
    assert_eq!(finished["failure_kind"], "crash", "{}", run.explain());
    assert!(
        finished["reason"].as_str().unwrap().contains("s: kernel panic: Attempted to kill init! (panic"),
        "{}",
        run.explain()
    );
}

/// A guest recipe whose pinned .deb the mirror no longer holds (a local server that
/// answers 404 to everything): the case fails naming the recipe, the package, the pinned
/// version and `scripts/repin RECIPE`, and the download went to the shared cache that
/// TESTBENCH_CACHE names (its `debs/` made, nothing kept), not into the checkout.
#[test]
fn a_pin_the_mirror_no_longer_holds_names_the_repin_command() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("gone.toml");
    std::fs::write(
        &recipe,
        format!(
            r##"description = "a pin gone from the mirror"
arch = "rv64"
append = "console=ttyS0"
mirror = "http://{addr}/debian"
[[package]]
name = "linux-image-6.1.5+deb13-riscv64"
version = "6.1.5-1"
arch = "riscv64"
sha256 = "{}"
pool = "pool/main/l/linux/linux-image-6.1.5+deb13-riscv64_6.1.5-1_riscv64.deb"
files = [{{ from = "boot/vmlinux", to = "kernel" }}]
[init]
script = "#!/bin/sh\n"
"##,
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let case = format!(
        "description = \"gone\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\nexpect = ['x']\n[guest]\nrecipe = {:?}\n",
        recipe.display().to_string()
    );
    let cases = cases_dir(&[("gone", &case)]);
    let cache = dir.path().join("cache");
    let run = bench(
        &["--cases", cases.path().to_str().unwrap(), "--exact", "gone"],
        &[("TESTBENCH_CACHE", cache.to_str().unwrap())],
    );
    run.expect_status(1);
    let said = format!(
        "recipe {0}: package linux-image-6.1.5+deb13-riscv64 version 6.1.5-1 is no longer on the mirror (http://{addr}/debian/pool/main/l/linux/linux-image-6.1.5+deb13-riscv64_6.1.5-1_riscv64.deb answered HTTP 404); re-pin the recipe to the suite's current versions with `scripts/repin {0}`",
        recipe.display()
    );
    assert!(run.stdout.contains(&said) || run.stderr.contains(&said), "{}", run.explain());
    assert_eq!(std::fs::read_dir(cache.join("debs")).unwrap().count(), 0, "{}", run.explain());
}

/// `--coverage` on a real boot of the reference kernel (rv64): QEMU loads the plugin,
/// the boot's executed code is mapped to the kernel's own source lines (some reached,
/// some not: a boot that does not panic never runs the panic path), the same file on two
/// runs of a boot in guest time, an lcov file that `genhtml` (Debian's lcov, installed by
/// scripts/setup) reads, the summary on the run's output and page, and `coverage --which`
/// naming the boot for a reached line and no boot for an unreached one.
#[test]
fn coverage_maps_a_boots_executed_code_to_the_kernels_lines() {
    build_plugin("testbench-cover-plugin");
    let args = ["--coverage", "--exact", "reference-boot", "--arch", "rv64"];
    let (first, second) = (bench(&args, &[]), bench(&args, &[]));
    first.expect_status(0);
    second.expect_status(0);
    let boot = |run: &Run| run.run_dir().join("reference-boot/rv64-smp1");
    let command = std::fs::read_to_string(boot(&first).join("command-line")).unwrap();
    assert!(command.contains("libtestbench_cover_plugin.so,out="), "{command}");
    let (a, b) = (
        std::fs::read(boot(&first).join("coverage.bin")).unwrap(),
        std::fs::read(boot(&second).join("coverage.bin")).unwrap(),
    );
    assert!(a.len() > 24 && a == b, "two boots in guest time ran different code ({} and {} bytes)", a.len(), b.len());
    let line =
        first.stdout.lines().find(|l| l.starts_with("coverage: ")).unwrap_or_else(|| panic!("{}", first.explain()));
    assert!(line.contains("kernel source lines reached") && line.contains("over 1 boot(s)"), "{line}");
    let lcov = std::fs::read_to_string(boot(&first).join("coverage.info")).unwrap();
    let main_rs = lcov
        .split("end_of_record")
        .find(|record| record.contains("guest/kernel/src/main.rs\n"))
        .unwrap_or_else(|| panic!("no record of the kernel's main.rs:\n{lcov}"));
    let da: Vec<(u32, u64)> = main_rs
        .lines()
        .filter_map(|l| l.strip_prefix("DA:"))
        .map(|d| {
            let (line, count) = d.split_once(',').unwrap();
            (line.parse().unwrap(), count.parse().unwrap())
        })
        .collect();
    let reached = da.iter().find(|(_, count)| *count > 0).expect("a line of main.rs reached").0;
    let unreached = da.iter().find(|(_, count)| *count == 0).expect("a line of main.rs not reached").0;
    assert!(!lcov.contains("SF:/rustc/"), "the toolchain's library is left out of the lcov file");
    let html = std::fs::read_to_string(first.run_dir().join("report.html")).unwrap();
    assert!(html.contains("id=\"coverage\"") && html.contains("guest/kernel/src/main.rs"), "no coverage on the page");
    let out = tempfile::tempdir().unwrap();
    let genhtml = Command::new("genhtml")
        .args(["-q", "-o"])
        .arg(out.path())
        .arg(first.run_dir().join("coverage.info"))
        .output()
        .expect("genhtml runs (Debian's lcov: scripts/setup installs it)");
    assert!(genhtml.status.success(), "genhtml refused the run's lcov: {}", String::from_utf8_lossy(&genhtml.stderr));
    assert!(out.path().join("index.html").is_file());
    let run_dir = first.run_dir();
    let which = |line: u32| {
        let spec = format!("kernel/src/main.rs:{line}");
        bench(&["coverage", "--which", &spec, "--run", run_dir.to_str().unwrap()], &[])
    };
    let hit = which(reached);
    hit.expect_status(0);
    assert!(
        hit.stdout.contains("reached by 1 boot(s)") && hit.stdout.contains("reference-boot/rv64-smp1"),
        "{}",
        hit.explain()
    );
    let missed = which(unreached);
    missed.expect_status(0);
    assert!(missed.stdout.contains("reached by no boot"), "{}", missed.explain());
    let nowhere = bench(&["coverage", "--which", "no/such/file.rs:1", "--run", run_dir.to_str().unwrap()], &[]);
    nowhere.expect_status(2);
    assert!(nowhere.stderr.contains("no source file of the run ends with it"), "{}", nowhere.explain());
}

/// `--coverage` with no plugin beside the bench is refused before anything builds,
/// naming the file and how to build it.
#[test]
fn coverage_without_its_plugin_is_refused_naming_it() {
    let alone = tempfile::tempdir().unwrap();
    let exe = alone.path().join("testbench");
    // Copied by `cp`, not here: a file this process held open for writing could be
    // inherited by another test's child as it forks, and exec would fail (ETXTBSY).
    let copied = Command::new("cp").arg(env!("CARGO_BIN_EXE_testbench")).arg(&exe).status().unwrap();
    assert!(copied.success());
    let out = Command::new(&exe)
        .args(["--coverage", "--exact", "reference-boot"])
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .env("TESTBENCH_ROOT", root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("libtestbench_cover_plugin.so is not there"), "{said}");
    assert!(!said.contains("PASS") && !said.contains("built "), "nothing boots or builds: {said}");
}

/// Debian's Linux (rv64) with the bench's packed ext4 disk and typed input, failing on a
/// forbidden line (the sha256 of a file it read from the disk): QEMU records the disk
/// through `blkreplay`, and the replay line replays the failure byte for byte, with the
/// same verdict. A guest nobody here wrote, which waits for its disk's interrupts.
#[test]
fn a_recorded_linux_boot_with_the_benchs_disk_replays_byte_for_byte() {
    let case = "description = \"rr\"\narch = [\"rv64\"]\nkind = \"boot\"\nmemory_mib = 512\ntimeout_secs = 60\nexpect = ['^testbench-guest: done ext4-read$']\nforbid = ['^testbench-guest: ext4-read: sha256 e0cc924235b687466dbb3f49ff49f3ff9518da1e801f6eddcd2f8ba3cc94d838 hello.txt$']\n[[input]]\nafter = '^testbench-guest: ext4-read: mounted vda1'\nsend = \"\\r\"\n[disk]\nrecipe = \"tests/data/disks/parts.toml\"\n[guest]\nrecipe = \"guests/debian-devices.toml\"\nappend = \"console=ttyS0 panic=-1 quiet tb.do=ext4-read tb.part=data tb.file=hello.txt\"\n";
    let dir = cases_dir(&[("linux-disk-recorded", case)]);
    let cases = dir.path().to_str().unwrap();
    let run = bench(&["--cases", cases, "--message-format", "json"], &[]);
    run.expect_status(1);
    let recording = recording_named(&run);
    let command = std::fs::read_to_string(recording.with_file_name("command-line")).unwrap();
    assert!(command.contains("-drive driver=blkreplay,if=none,image=disk0-file,id=disk0 "), "{command}");
    let recorded_log = std::fs::read(recording.with_file_name("console.log")).unwrap();
    let replay_args = [
        "--cases",
        cases,
        "--exact",
        "linux-disk-recorded",
        "--arch",
        "rv64",
        "--smp",
        "1",
        "--rr-replay",
        recording.to_str().unwrap(),
    ];
    let replay = bench(&replay_args, &[]);
    replay.expect_status(1);
    let said = format!(
        "byte for byte ({} console bytes as recorded); the verdict again: forbidden line at ",
        recorded_log.len()
    );
    assert!(replay.stdout.contains(&said), "{}", replay.explain());
    assert!(replay.stdout.contains("hello.txt$'"), "{}", replay.explain());
}

/// A reference-guest case with a `[disk] image` and typed input is not recorded (the
/// reference kernel polls its disk; under record its requests never completed), its
/// replay line says why, and the case's image is never written.
#[test]
fn a_reference_case_with_a_disk_image_is_not_recorded_and_its_image_is_never_written() {
    let image_dir = tempfile::tempdir().unwrap();
    let image = image_dir.path().join("fs.img");
    let bytes: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&image, &bytes).unwrap();
    let case = format!("{PROMPT_RECORDED}[disk]\nimage = \"{}\"\n", image.display());
    let dir = cases_dir(&[("unrecorded-disk", &case)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(1);
    assert!(
        run.stdout.contains("typed input not recorded: the reference kernel polls its devices"),
        "{}",
        run.explain()
    );
    let boot = run.run_dir().join("unrecorded-disk/rv64-smp1");
    assert!(std::fs::read_to_string(boot.join("devices.log")).unwrap().contains("copied from "), "{}", run.explain());
    assert_eq!(std::fs::read(&image).unwrap(), bytes, "the case's image was written");
}

/// A `[disk] image` is checked before anything builds: missing, a format its first bytes
/// contradict (either way), a foreign format, a raw one that is not whole sectors: each
/// refused naming the field.
#[test]
fn a_disk_image_that_cannot_be_booted_is_refused_naming_the_field() {
    let images = tempfile::tempdir().unwrap();
    let qcow2 = images.path().join("a.qcow2");
    std::fs::write(&qcow2, b"QFI\xfb\0\0\0\x03 and the rest of a header").unwrap();
    let ragged = images.path().join("ragged.img");
    std::fs::write(&ragged, vec![0u8; 1000]).unwrap();
    let vmdk = images.path().join("a.vmdk");
    std::fs::write(&vmdk, b"KDMV and the rest").unwrap();
    let case =
        |image: &Path, format: &str| format!("{PROMPT_RECORDED}[disk]\nimage = \"{}\"\n{format}", image.display());
    let cases = [
        ("missing", case(&images.path().join("none.img"), "")),
        ("qcow2-as-raw", case(&qcow2, "format = \"raw\"\n")),
        ("raw-as-qcow2", case(&ragged, "format = \"qcow2\"\n")),
        ("ragged", case(&ragged, "")),
        ("foreign", case(&vmdk, "")),
    ];
    let refs: Vec<(&str, &str)> = cases.iter().map(|(n, c)| (*n, c.as_str())).collect();
    let dir = cases_dir(&refs);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("missing.toml: disk.image:"), "{}", run.explain());
    assert!(said.contains("qcow2 image by its first bytes, and disk.format says raw"), "{}", run.explain());
    assert!(said.contains("raw image by its first bytes, and disk.format says qcow2"), "{}", run.explain());
    assert!(said.contains("1000 bytes: a raw disk image is whole 512-byte sectors"), "{}", run.explain());
    assert!(said.contains("foreign.toml: disk.image:") && said.contains("VMDK"), "{}", run.explain());
    assert!(!said.contains("built "), "refused before anything builds: {said}");
}
