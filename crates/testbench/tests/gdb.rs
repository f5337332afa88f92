//! `--gdb` on real QEMU boots of the reference guest, with Debian's `gdb-multiarch`
//! driven in batch mode (docs/debugging.md): the command the bench prints attaches, a
//! breakpoint stops the kernel, a register is read; a recorded failure replays under the
//! debugger and steps back from its panic; a debugger that never comes ends the boot at
//! `--gdb-wait`, saying so. `scripts/setup` installed gdb-multiarch (./test runs it first).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The reference kernel built with panic-test: it panics three calls deep
/// (`first` → `second` → `third`) right after its boot's checks.
const PANICS: &str = "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\ntimeout_secs = 30\ndebug_assertions = true\nkernel_features = [\"panic-test\"]\nexpect = ['^kernel: KMAIN$', '^kernel: harts \\d+$']\npoweroff = true\n";

/// A bench started with its stderr read line by line as it comes (the words for the
/// debugger are there), its stdout kept whole.
struct Bench {
    child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
    stdout: std::thread::JoinHandle<String>,
}

fn start(args: &[&str]) -> Bench {
    let mut child = Command::new(env!("CARGO_BIN_EXE_testbench"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap())
        .env("TESTBENCH_NO_SETUP", "1")
        .env_remove("TESTBENCH_QEMU_SEED")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the testbench binary starts");
    let (lines_in, stderr) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = lines_in.send(line);
        }
    });
    let mut out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut text);
        text
    });
    Bench { child, stderr, seen: Vec::new(), stdout }
}

impl Bench {
    /// The stderr line that starts with `prefix` (trimmed), waited for up to `bound`
    /// (the bench builds the kernel first).
    fn line(&mut self, prefix: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(line) = self.seen.iter().find(|l| l.trim_start().starts_with(prefix)) {
                return line.trim().to_string();
            }
            match self.stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => self.seen.push(line),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no stderr line starting {prefix:?} within {bound:?}; stderr:\n{}", self.seen.join("\n"));
                }
            }
        }
    }

    /// The bench's exit status and stdout, once it ends (killed after `bound`).
    fn end(mut self, bound: Duration) -> (Option<i32>, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code();
            }
            if start.elapsed() > bound {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(line) = self.stderr.try_recv() {
            self.seen.push(line);
        }
        let stdout = self.stdout.join().unwrap();
        (status, format!("{stdout}\n--- stderr\n{}", self.seen.join("\n")))
    }
}

/// `gdb-multiarch` run in batch mode: the attach command the bench printed, then
/// `commands`; its stdout and stderr together.
fn gdb(attach: &str, commands: &[&str]) -> String {
    let mut line = format!("{attach} -batch");
    for command in commands {
        line.push_str(&format!(" -ex '{command}'"));
    }
    let output = Command::new("timeout")
        .args(["120", "sh", "-c", &line])
        .stdin(Stdio::null())
        .output()
        .expect("gdb-multiarch runs (scripts/setup installs it)");
    format!("$ {line}\n{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The kernel's ELF the attach command names (its first word after `gdb-multiarch`).
fn elf_of(attach: &str) -> PathBuf {
    PathBuf::from(attach.split_whitespace().nth(1).unwrap().trim_matches('\''))
}

/// The address of the kernel's function whose symbol contains `part`.
fn address_of(elf: &Path, part: &str) -> u64 {
    let symbols = testbench_symbols::Symbols::open(elf).unwrap();
    symbols.functions().iter().find(|s| s.name.contains(part)).unwrap_or_else(|| panic!("no {part} in the ELF")).address
}

fn cases(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("panics.toml"), text).unwrap();
    dir
}

/// The printed command attaches gdb-multiarch to the paused guest: a breakpoint on the
/// kernel's `third` stops it there, where `a0` holds the depth the two calls before
/// passed (2); detached, the guest runs on to its panic and the boot is judged as ever.
#[test]
fn the_printed_command_attaches_gdb_which_stops_the_kernel_and_reads_a_register() {
    let dir = cases(&format!("{PANICS}must_fail = 'PANIC panic-test: three calls deep'\n"));
    let mut bench = start(&["--cases", dir.path().to_str().unwrap(), "--gdb", "--gdb-wait", "120"]);
    let attach = bench.line("gdb-multiarch ", Duration::from_secs(600));
    assert!(attach.contains(" -ex 'set architecture riscv:rv64' -ex 'target remote /"), "{attach}");
    assert!(
        attach.contains("/testbench-qmp-") && attach.ends_with(".gdb'"),
        "the socket is in the private directory: {attach}"
    );
    let third = address_of(&elf_of(&attach), "panic_test5third");
    let out = gdb(&attach, &[&format!("break *{third:#x}"), "continue", "info symbol $pc", "p $a0", "detach"]);
    assert!(out.contains("kernel::panic_test::third"), "{out}");
    assert!(out.contains("$1 = 2\n"), "a0 at third is the depth 2\n{out}");
    let (status, shown) = bench.end(Duration::from_secs(120));
    assert_eq!(status, Some(0), "{shown}");
    assert!(shown.contains("failed as it must"), "{shown}");
}

/// A failure recorded (typed input under icount) replays under the debugger: stopped at
/// the panic function the bench names, `reverse-stepi` goes back one instruction, into
/// the code that called it, and `reverse-continue` back to the kernel's `third`, where
/// `a0` holds the depth the calls before it passed (2): values only the past explains.
/// The failure's own report printed its `--gdb` line. gdb kills the replay at the end:
/// on Debian's QEMU 10.0 a replay does not run forwards again after a reverse step
/// (docs/debugging.md).
#[test]
fn a_recorded_failure_replays_under_gdb_which_steps_back_from_the_panic() {
    let recorded = format!("{PANICS}icount = \"shift=3\"\n[[input]]\nafter = '^kernel: KMAIN$'\nsend = \"x\\r\"\n");
    let dir = cases(&recorded);
    let cases = dir.path().to_str().unwrap();
    let (status, first) = start(&["--cases", cases]).end(Duration::from_secs(600));
    assert_eq!(status, Some(1), "{first}");
    let debug = first.lines().find_map(|l| l.trim().strip_prefix("debug:")).unwrap_or_else(|| panic!("{first}")).trim();
    assert!(debug.ends_with(" --gdb") && debug.contains(" --rr-replay "), "{debug}");
    let recording = debug.split_once(" --rr-replay ").unwrap().1.split_whitespace().next().unwrap().trim_matches('\'');
    let args = ["--cases", cases, "--exact", "panics", "--arch", "rv64", "--smp", "1", "--rr-replay", recording];
    let mut bench = start(&[&args[..], &["--gdb", "--gdb-wait", "120"]].concat());
    let attach = bench.line("gdb-multiarch ", Duration::from_secs(600));
    let stop = bench.line("gdb: to stop at the crash: `break *0x", Duration::from_secs(10));
    let address = stop.split("break *").nth(1).unwrap().split('`').next().unwrap().to_string();
    let third = address_of(&elf_of(&attach), "panic_test5third");
    let out = gdb(
        &attach,
        &[
            &format!("break *{address}"),
            "continue",
            "info symbol $pc",
            "reverse-stepi",
            "info symbol $pc",
            &format!("break *{third:#x}"),
            "reverse-continue",
            "info symbol $pc",
            "p $a0",
            "kill",
        ],
    );
    let symbols: Vec<&str> = out.lines().filter(|l| l.contains(" in section .text")).collect();
    assert_eq!(symbols.len(), 3, "{out}");
    assert!(symbols[0].contains("rust_begin_unwind"), "stopped at the panic\n{out}");
    assert!(symbols[1].contains("::panicking::panic_fmt"), "one instruction back, in its caller\n{out}");
    assert!(symbols[2].contains("kernel::panic_test::third"), "back to third\n{out}");
    assert!(out.contains("$1 = 2\n"), "a0 at third is the depth 2\n{out}");
    // The replay killed from the debugger ends the boot at once, its console cut short.
    let (status, shown) = bench.end(Duration::from_secs(60));
    assert_eq!(status, Some(1), "{shown}");
    assert!(shown.contains("reason: --rr-replay: the replay differs from the recording"), "{shown}");
    // A recording that does not match the kernel the replay boots is refused, named.
    let guest = Path::new(recording).with_file_name("replay.guest");
    let kept = std::fs::read_to_string(&guest).unwrap();
    assert!(kept.starts_with("kernel ") && kept.contains("\ninitrd "), "{kept}");
    let forged: String = kept
        .lines()
        .map(|l| if l.starts_with("kernel ") { format!("kernel {}\n", "0".repeat(64)) } else { format!("{l}\n") })
        .collect();
    std::fs::write(&guest, forged).unwrap();
    let (status, shown) = start(&[&args[..], &["--gdb"]].concat()).end(Duration::from_secs(120));
    assert_eq!(status, Some(2), "{shown}");
    assert!(shown.contains("recorded with another kernel than the replay would boot"), "{shown}");
}

/// Self-check: a debugger that never attaches ends the boot at `--gdb-wait`, naming it;
/// and `--gdb` refuses a selection of more than one boot, naming how to name one.
#[test]
fn a_debugger_that_never_comes_ends_the_boot_at_its_wait_and_two_boots_are_refused() {
    let dir = cases(PANICS);
    let cases = dir.path().to_str().unwrap();
    let (status, shown) = start(&["--cases", cases, "--gdb", "--gdb-wait", "2"]).end(Duration::from_secs(600));
    assert_eq!(status, Some(1), "{shown}");
    assert!(
        shown.contains("reason: --gdb: no debugger continued the guest within --gdb-wait (2s): none attached"),
        "{shown}"
    );
    let two = cases_two();
    let (status, shown) = start(&["--cases", two.path().to_str().unwrap(), "--gdb"]).end(Duration::from_secs(120));
    assert_eq!(status, Some(2), "{shown}");
    assert!(shown.contains("--gdb boots one guest under the debugger, and the selection plans 2 boots: name it as its replay line does (--exact, --arch, --smp)"), "{shown}");
}

fn cases_two() -> tempfile::TempDir {
    cases(&PANICS.replace("arch = [\"rv64\"]", "arch = [\"rv64\", \"rv32\"]"))
}
