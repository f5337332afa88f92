//! The power-off verdict stands on QEMU's own word, on a channel nothing else on the
//! host can speak on (qmp.rs). Each test attacks it as the issue found it attacked: a
//! bench stalled at QEMU's start, another local process connecting first with a forged
//! SHUTDOWN, a fake QEMU that never speaks QMP, and a temporary directory too deep for a
//! socket. QEMU is replaced through `TESTBENCH_QEMU_RV64` by a small shell script that
//! does its part and then `exec`s the real QEMU (so QEMU keeps the PID the bench forked).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

/// A reference-guest case whose program resets the machine instead of powering off.
const RESETS: &str = "description = \"resets\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [{ package = \"smoke\", bin = \"smoke\", features = [\"reset\"] }]\ntimeout_secs = 30\nexpect = ['^smoke: done$']\npoweroff = true\n";

struct Bench {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Bench {
    fn explain(&self) -> String {
        format!("status: {:?}\n--- stdout\n{}--- stderr\n{}", self.status, self.stdout, self.stderr)
    }
}

fn bench(cases: &Path, env: &[(&str, &str)]) -> Bench {
    let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
    command
        .args(["--cases", cases.to_str().unwrap()])
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .env_remove("TESTBENCH_QEMU_SEED")
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("the testbench binary starts");
    Bench {
        status: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn cases(name: &str, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
    dir
}

/// A script standing in for QEMU. `on_boot` runs before the real QEMU is exec'd for a
/// boot (a command line with `-chardev`); the probes (`-version`, `-L help`) go straight
/// through. `$qmp` holds the QMP socket's path.
fn wrapper(dir: &Path, on_boot: &str) -> PathBuf {
    let path = dir.join("qemu-wrapper");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *-chardev*) ;; *) exec qemu-system-riscv64 \"$@\";; esac\n\
         for a in \"$@\"; do case \"$a\" in *path=*) qmp=${{a#*path=}}; qmp=${{qmp%%,*}};; esac; done\n\
         {on_boot}\nexec qemu-system-riscv64 \"$@\"\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The bench is stopped for 0.3 s as QEMU starts (SIGSTOP from the wrapper, SIGCONT
/// from a helper it leaves behind). Before QEMU started paused, the guest reset while
/// the bench slept, QEMU's events were lost before the bench negotiated, and the reset
/// passed as a power-off.
#[test]
fn a_reset_fails_a_poweroff_case_however_late_the_bench_connects() {
    let scratch = tempfile::tempdir().unwrap();
    let qemu = wrapper(scratch.path(), "(sleep 0.3; kill -CONT $PPID) &\nkill -STOP $PPID");
    let dir = cases("resets", RESETS);
    for round in 0..3 {
        let run = bench(dir.path(), &[("TESTBENCH_QEMU_RV64", qemu.to_str().unwrap())]);
        assert_eq!(run.status, Some(1), "round {round}: {}", run.explain());
        assert!(run.stdout.contains("reason: guest reset instead of powering off"), "round {round}: {}", run.explain());
    }
}

/// Another local process finds the socket and connects before QEMU, playing QEMU with a
/// forged power-off. Its peer PID is not the bench's QEMU: it is refused unread (and
/// named in the boot's qmp.log), and QEMU's own account, a reset, is the verdict.
#[test]
fn a_forged_shutdown_from_another_process_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let told = scratch.path().join("qmp-path");
    let qemu = wrapper(scratch.path(), &format!("echo \"$qmp\" > {}.tmp && mv {0}.tmp {0}\nsleep 1", told.display()));
    let dir = cases("resets", RESETS);
    let forger = std::thread::spawn(move || {
        let start = Instant::now();
        let path = loop {
            if let Ok(text) = std::fs::read_to_string(&told) {
                break text.trim().to_string();
            }
            assert!(start.elapsed() < Duration::from_secs(300), "the wrapper never named the QMP socket");
            std::thread::sleep(Duration::from_millis(5));
        };
        let Ok(stream) = UnixStream::connect(&path) else { return false };
        let mut writer = stream.try_clone().unwrap();
        let _ = writer.write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n");
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        // Whatever the bench sends, answer it and forge the power-off.
        let mut heard = false;
        for line in BufReader::new(stream).lines() {
            let Ok(_) = line else { break };
            heard = true;
            let _ = writer.write_all(b"{\"return\": {}}\n");
            let _ = writer
                .write_all(b"{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true, \"reason\": \"guest-shutdown\"}}\n");
        }
        heard
    });
    let run = bench(dir.path(), &[("TESTBENCH_QEMU_RV64", qemu.to_str().unwrap())]);
    let heard = forger.join().unwrap();
    assert!(!heard, "the bench spoke to a process that is not its QEMU\n{}", run.explain());
    assert_eq!(run.status, Some(1), "{}", run.explain());
    assert!(run.stdout.contains("reason: guest reset instead of powering off"), "{}", run.explain());
    let run_dir = run.stdout.lines().find_map(|l| l.split_once("logs in ").map(|(_, d)| d.trim().to_string())).unwrap();
    let log = std::fs::read_to_string(Path::new(&run_dir).join("resets/rv64-smp1/qmp.log")).unwrap_or_default();
    assert!(log.contains(&format!("PID {}", std::process::id())), "qmp.log does not name the refused peer: {log:?}");
}

/// A script that prints what the case expects and exits 0 without ever speaking QMP.
fn fake_qemu(dir: &Path) -> PathBuf {
    let path = dir.join("fake-qemu");
    std::fs::write(
        &path,
        "#!/bin/sh\ncase \"$1\" in -version) echo 'QEMU emulator version 10.0.0 (fake)'; exit 0;; -L) exit 0;; esac\nprintf 'smoke: done\\n'\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A case that boots a file (never looked at by the fake QEMU) and wants a power-off.
const FAKE_POWEROFF: &str = "description = \"fake\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 20\nexpect = ['^smoke: done$']\npoweroff = true\n[guest]\nkernel = \"Cargo.toml\"\nfirmware = \"none\"\n";

#[test]
fn a_fake_qemu_that_never_speaks_qmp_cannot_pass_a_poweroff_case() {
    let scratch = tempfile::tempdir().unwrap();
    let qemu = fake_qemu(scratch.path());
    let dir = cases("fake", FAKE_POWEROFF);
    let run = bench(dir.path(), &[("TESTBENCH_QEMU_RV64", qemu.to_str().unwrap())]);
    assert_eq!(run.status, Some(1), "{}", run.explain());
    assert!(run.stdout.contains("with no SHUTDOWN event on QMP: no power-off was seen"), "{}", run.explain());
}

/// The sockets' directory is the run's own and goes with it; one a killed bench left
/// (a dead PID's, holding only sockets) goes with the next run; a temporary directory
/// too deep for a socket's path is refused before anything boots, naming the limit.
#[test]
fn the_socket_directory_goes_with_the_run_and_a_deep_tmpdir_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let qemu = fake_qemu(scratch.path());
    let tmp = scratch.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let stale = tmp.join("testbench-qmp-4999999-abcdef");
    std::fs::create_dir(&stale).unwrap();
    drop(std::os::unix::net::UnixListener::bind(stale.join("boot-0.qmp")).unwrap());
    let dir = cases("fake", FAKE_POWEROFF);
    let env = [("TESTBENCH_QEMU_RV64", qemu.to_str().unwrap()), ("TMPDIR", tmp.to_str().unwrap())];
    let run = bench(dir.path(), &env);
    assert_eq!(run.status, Some(1), "{}", run.explain());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "the run left {left:?} in its TMPDIR\n{}", run.explain());

    let deep = scratch.path().join("d".repeat(100));
    std::fs::create_dir(&deep).unwrap();
    let env = [("TESTBENCH_QEMU_RV64", qemu.to_str().unwrap()), ("TMPDIR", deep.to_str().unwrap())];
    let run = bench(dir.path(), &env);
    assert_eq!(run.status, Some(2), "{}", run.explain());
    assert!(run.stderr.contains("a Unix socket's path must be under 108 bytes"), "{}", run.explain());
    assert!(run.stdout.is_empty(), "something ran:\n{}", run.explain());
}
