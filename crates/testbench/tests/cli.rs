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
    let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
    command
        .args(args)
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .env_remove("TESTBENCH_QEMU_SEED")
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let shown =
        format!("{} testbench {}", env.iter().map(|(k, v)| format!("{k}={v} ")).collect::<String>(), args.join(" "));
    eprintln!("running: {shown}");
    let output = command.output().expect("the testbench binary starts");
    Run {
        command: shown,
        status: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn cases_dir(cases: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in cases {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
    }
    dir
}

const SMOKE_DONE: &str = "description = \"smoke\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [{ package = \"smoke\", bin = \"smoke\" }]\ntimeout_secs = 30\nexpect = ['^smoke: done$']\npoweroff = true\n";

/// The smoke program in init's place, built with these features.
fn smoke_with(features: &str) -> String {
    SMOKE_DONE.replace("bin = \"smoke\" }", &format!("bin = \"smoke\", features = [{features}] }}"))
}

#[test]
fn the_list_marks_cases_run_only_by_name() {
    let slow = SMOKE_DONE.replace("kind = \"boot\"", "kind = \"boot\"\nwhole_run = false");
    let dir = cases_dir(&[("quick", SMOKE_DONE), ("slow", &slow)]);
    let run = bench(&["--list", "--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.explain());
    assert!(lines[0].starts_with("quick ") && !lines[0].contains("[by name only]"), "{}", run.explain());
    assert!(lines[1].starts_with("slow ") && lines[1].ends_with("[by name only]"), "{}", run.explain());
}

#[test]
fn bad_cases_are_all_refused_before_anything_builds() {
    let dir = cases_dir(&[
        ("good", SMOKE_DONE),
        ("bad-smp", &SMOKE_DONE.replace("timeout_secs = 30", "smp = { rv32 = [2] }")),
        ("bad-regex", &SMOKE_DONE.replace("'^smoke: done$'", "'ok', '(unclosed'")),
    ]);
    let run = bench(&["--cases", dir.path().to_str().unwrap()], &[]);
    run.expect_status(2);
    assert!(run.stderr.contains("bad-smp.toml: smp.rv32: not one of the case's arch"), "{}", run.explain());
    assert!(run.stderr.contains("bad-regex.toml: expect[1]: not a valid regex"), "{}", run.explain());
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
        run.stderr.contains("--exact \"missing\": no case has that name (names like it: missing-kernel)"),
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
    let builds = events
        .iter()
        .filter(|e| e["event"] == "build" && e["message"].as_str().unwrap().starts_with("build: "))
        .count();
    assert_eq!(builds, 3, "one build serves every seed\n{}", run.explain());
    assert!(events.iter().any(|e| e["event"] == "sweep-finished"), "{}", run.explain());
    let run_dir = run.run_dir();
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
        run.stdout.contains(&format!("replay: cargo testbench --exact doomed --arch rv64 --smp 1 --cases {cases}")),
        "{}",
        run.explain()
    );
    let kept = std::fs::read_to_string(keep.path().join("rv64-doomed.smp1.log")).unwrap();
    assert!(kept.contains("smoke: done"), "{kept}");
    assert!(keep.path().join("rv64-doomed.smp1.command-line").exists());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase name=\"doomed rv64 smp1\"") && xml.contains("<failure"), "{xml}");
}

#[test]
fn a_build_asked_for_again_in_a_run_is_not_run_again_and_a_build_error_shows_cargos_message() {
    let same = smoke_with("\"status-3\"").replace("poweroff = true", "poweroff = true\npoweroff_status = 3");
    let broken = smoke_with("\"no-such-feature\"").replace("poweroff = true", "poweroff = true\nmust_fail = '.*'");
    let dir = cases_dir(&[("one", &same), ("two", &same), ("three-broken", &broken)]);
    let run = bench(&["--cases", dir.path().to_str().unwrap(), "--message-format", "json"], &[]);
    run.expect_status(1);
    let events = run.events();
    let builds: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "build")
        .filter_map(|e| e["message"].as_str())
        .filter(|m| m.starts_with("build: "))
        .collect();
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
    assert!(reason.contains("cargo failed to build smoke") && reason.contains("no-such-feature"), "{reason}");
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
