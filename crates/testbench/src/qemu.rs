//! Booting one guest under QEMU and feeding its console to the judge.
//!
//! One boot, step by step: write the full command line into the boot's directory;
//! listen for QEMU's QMP connection (how the guest ended) in the run's private socket
//! directory; start QEMU paused (`-S`) with the serial console on a pipe and the
//! parent-death signal set; accept QEMU's own QMP connection, negotiate and only then
//! start the guest (qmp.rs: no event can be lost); then read the console as it comes,
//! handing each chunk and its arrival time to the judge, typing what the judge says to
//! type, until the judge has a verdict, QEMU exits, or the case's deadline passes. A
//! verdict ends the boot at once (QEMU is killed): no boot waits out its deadline once
//! its verdict is known.
//!
//! The console's way to the judge is bounded (the `testbench-console` crate): a reader
//! thread, a channel of a few chunks (when the judge falls behind, the reader waits and so
//! does QEMU), and a console log that keeps the bytes exactly as they came, its first
//! 8 MiB and its last 1 MiB, saying what it dropped between them. QEMU's stderr has its
//! own file, bounded the same way; its last lines are appended to the console log when
//! the verdict is about QEMU's exit.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testbench_case::{Arch, Firmware};
use testbench_console::{Chunk, ConsoleLog, Ended};
use testbench_judge::{Ending, ExitStatus, Judge, Shutdown, Verdict};

use crate::command::{shell_quote, Cmd};
use crate::qmp::QmpDir;

/// QEMU prints its version at once; ten seconds is a QEMU that cannot run.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// QEMU has this long from its start to connect to the bench's QMP socket (the guest
/// does not run until it has, so this is QEMU's own start, however loaded the host).
const QMP_DEADLINE: Duration = Duration::from_secs(30);
/// A QEMU whose QMP connection failed has this long to exit on its own (it is judged by
/// its exit and stderr) before it is killed (the boot fails with the QMP trouble).
const QMP_EXIT_GRACE: Duration = Duration::from_secs(2);
/// After the console closes, QEMU has this long to exit before it is killed.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);
/// How many of QEMU's last stderr lines a verdict quotes.
const STDERR_TAIL_LINES: usize = 5;
/// `qemu-stderr.log` keeps this much of the start of QEMU's stderr, and of its end.
const STDERR_LOG_HEAD: u64 = 256 * 1024;
const STDERR_LOG_TAIL: usize = 64 * 1024;

/// The QEMU binary for a width: the environment's override, or the default name.
pub fn qemu_binary(arch: Arch) -> String {
    std::env::var(arch.qemu_env_var()).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| arch.default_qemu().to_string())
}

/// What a width's QEMU said of itself before its first boot.
pub struct Probe {
    /// `qemu -version`'s first line; the error is the complaint every boot of the width
    /// fails with.
    pub version: Result<String, String>,
    /// Where QEMU keeps its firmware images (`qemu -L help`), for checking `-bios default`.
    pub firmware_dirs: Result<Vec<PathBuf>, String>,
}

/// Run `qemu -version` and `qemu -L help` at the same time, the second on a thread that
/// starts and waits for it (crates/process): the two QEMU starts cost one start's wall
/// time instead of two.
pub fn probe(arch: Arch) -> Probe {
    let dirs = std::thread::spawn(move || list_firmware_dirs(arch));
    let version = probe_version(arch);
    let firmware_dirs = dirs.join().unwrap_or_else(|_| Err(format!("listing {arch}'s firmware directories panicked")));
    Probe { version, firmware_dirs }
}

fn probe_version(arch: Arch) -> Result<String, String> {
    let qemu = qemu_binary(arch);
    let cmd = Cmd::new(&qemu, format!("{qemu} -version"), PROBE_DEADLINE).arg("-version");
    match cmd.output() {
        Err(error) => Err(format!("{qemu} cannot run ({}): {error}", how_to_replace(arch))),
        Ok(out) if !out.status.success() => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "{qemu} -version failed ({}): {}",
                out.status,
                last_lines(&stderr, STDERR_TAIL_LINES).join(" | ")
            ))
        }
        Ok(out) => Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string()),
    }
}

fn how_to_replace(arch: Arch) -> String {
    format!("install it with scripts/setup, or name another build in {}", arch.qemu_env_var())
}

fn list_firmware_dirs(arch: Arch) -> Result<Vec<PathBuf>, String> {
    let qemu = qemu_binary(arch);
    let out = Cmd::new(&qemu, format!("{qemu} -L help"), PROBE_DEADLINE)
        .args(["-L", "help"])
        .output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| PathBuf::from(l.trim()))
        .filter(|p| p.is_absolute())
        .collect())
}

/// The image QEMU's `-bios default` loads on `virt` for this width.
pub fn default_firmware_name(arch: Arch) -> &'static str {
    match arch {
        Arch::Rv64 => "opensbi-riscv64-generic-fw_dynamic.bin",
        Arch::Rv32 => "opensbi-riscv32-generic-fw_dynamic.bin",
    }
}

/// Check the firmware a boot needs is there (`dirs`: the width's probe's firmware
/// directories); the error says what is missing.
pub fn check_firmware(
    arch: Arch,
    firmware: &Firmware,
    root: &Path,
    field: &str,
    dirs: &Result<Vec<PathBuf>, String>,
) -> Result<(), String> {
    match firmware {
        Firmware::None => Ok(()),
        Firmware::Path(path) => {
            let full = root.join(path);
            if full.is_file() {
                Ok(())
            } else {
                Err(format!("firmware not found: {} ({field}; \"default\" is QEMU's own OpenSBI)", path.display()))
            }
        }
        Firmware::Default => {
            let name = default_firmware_name(arch);
            let dirs = dirs.as_ref().map_err(Clone::clone)?;
            if dirs.iter().any(|dir| dir.join(name).is_file()) {
                Ok(())
            } else {
                let shown: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
                Err(format!(
                    "firmware not found: QEMU's {name} is in none of its data directories ({})",
                    shown.join(", ")
                ))
            }
        }
    }
}

/// Where the RTC starts under icount unless the case sets `rtc_base`: a fixed date, so
/// that a time the guest reads from it (and whatever it seeds from that time) repeats.
pub const PINNED_RTC_BASE: &str = "2020-01-01T00:00:00";

/// The file a recorded boot's recording goes to, in the boot's directory.
pub const RR_FILE: &str = "replay.rr";

/// QEMU's record/replay of a boot (`-icount ...,rr=record|replay,rrfile=PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rr {
    /// Record the boot's nondeterministic events (the typed input among them) to
    /// [`RR_FILE`] in the boot's directory.
    Record,
    /// Replay a recording: the console input comes from the file, not from the bench.
    Replay(PathBuf),
}

impl Rr {
    /// The `-icount` suboptions, the path's commas doubled as QEMU's option syntax wants.
    fn icount_suboptions(&self, dir: &Path) -> String {
        let (mode, path) = match self {
            Rr::Record => ("record", dir.join(RR_FILE)),
            Rr::Replay(path) => ("replay", path.clone()),
        };
        format!("rr={mode},rrfile={}", path.display().to_string().replace(',', ",,"))
    }
}

/// The `-rtc` argument: under icount the RTC follows the virtual clock and starts at the
/// case's base or the pinned one; without icount only a base the case sets is passed.
pub fn rtc_argument(icount: bool, rtc_base: Option<&str>) -> Option<String> {
    match (icount, rtc_base) {
        (true, base) => Some(format!("base={},clock=vm", base.unwrap_or(PINNED_RTC_BASE))),
        (false, Some(base)) => Some(format!("base={base}")),
        (false, None) => None,
    }
}

/// Everything one boot needs; built by the runner.
pub struct BootSpec {
    pub arch: Arch,
    pub machine: String,
    pub firmware: Firmware,
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    pub append: Option<String>,
    pub smp: u32,
    pub memory_mib: u32,
    pub icount: Option<String>,
    pub seed: Option<u64>,
    /// The case's `rtc_base`; under icount None is [`PINNED_RTC_BASE`].
    pub rtc_base: Option<String>,
    /// QEMU's record/replay of this boot (under icount only).
    pub rr: Option<Rr>,
    pub extra_args: Vec<String>,
    pub timeout: Duration,
    /// The boot's own directory: console.log, qemu-stderr.log, command-line.
    pub dir: PathBuf,
    pub judge: testbench_judge::Config,
    /// Edits of the device tree QEMU builds for this command line (then booted with -dtb).
    pub dt_edits: Vec<testbench_case::DtEdit>,
    /// The run's private directory for QMP sockets.
    pub qmp_dir: std::sync::Arc<QmpDir>,
}

/// How one boot went: the verdict, and what the judge's capture patterns took.
pub struct BootOutcome {
    pub verdict: Verdict,
    pub captures: Vec<Option<String>>,
}

/// Dumping the device tree is a QEMU start that exits at once.
const DUMP_DEADLINE: Duration = Duration::from_secs(30);

impl BootSpec {
    /// QEMU's tree for this command line, edited; the path to boot with -dtb.
    fn edited_tree(&self, root: &Path) -> Result<PathBuf, String> {
        let dumped = self.dir.join("qemu.dtb");
        let dump = self
            .command_with(root, &[], &format!("{},dumpdtb={}", self.machine, dumped.display()), None, None)
            .deadline(DUMP_DEADLINE, "QEMU to dump the device tree");
        let output = dump.output().map_err(|e| format!("failed to dump the device tree: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "QEMU could not dump the device tree ({}): {}",
                output.status,
                last_lines(&String::from_utf8_lossy(&output.stderr), STDERR_TAIL_LINES).join(" | ")
            ));
        }
        let mut tree = std::fs::read(&dumped).map_err(|e| format!("failed to read {}: {e}", dumped.display()))?;
        for (index, edit) in self.dt_edits.iter().enumerate() {
            crate::fdt_edit::apply(&mut tree, edit).map_err(|e| format!("device_tree[{index}]: {e}"))?;
        }
        let edited = self.dir.join("edited.dtb");
        std::fs::write(&edited, &tree).map_err(|e| format!("failed to write {}: {e}", edited.display()))?;
        Ok(edited)
    }

    fn command_with(
        &self,
        root: &Path,
        qmp_args: &[String],
        machine: &str,
        dtb: Option<&Path>,
        rr: Option<&Rr>,
    ) -> Cmd {
        let qemu = qemu_binary(self.arch);
        let bios = match &self.firmware {
            Firmware::Default => "default".to_string(),
            Firmware::None => "none".to_string(),
            Firmware::Path(path) => root.join(path).display().to_string(),
        };
        let mut cmd = Cmd::new(&qemu, format!("{qemu} to boot"), self.timeout)
            .cwd(root)
            .args(["-machine", machine, "-bios", &bios, "-kernel"])
            .arg(&self.kernel);
        if let Some(dtb) = dtb {
            cmd = cmd.arg("-dtb").arg(dtb);
        }
        if let Some(initrd) = &self.initrd {
            cmd = cmd.arg("-initrd").arg(initrd);
        }
        if let Some(append) = &self.append {
            cmd = cmd.args(["-append", append]);
        }
        cmd = cmd.args(["-smp", &self.smp.to_string(), "-m", &format!("{}M", self.memory_mib)]);
        if let Some(icount) = &self.icount {
            let icount = match rr {
                Some(rr) => format!("{icount},{}", rr.icount_suboptions(&self.dir)),
                None => icount.clone(),
            };
            cmd = cmd.args(["-icount", &icount]);
        }
        if let Some(rtc) = rtc_argument(self.icount.is_some(), self.rtc_base.as_deref()) {
            cmd = cmd.args(["-rtc", &rtc]);
        }
        if let Some(seed) = self.seed {
            cmd = cmd.args(["-seed", &seed.to_string()]);
        }
        cmd.args(["-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot"])
            .args(qmp_args)
            .args(&self.extra_args)
    }

    /// Boot once. Call from the thread that will wait for QEMU (see `command`).
    pub fn run(&self, root: &Path) -> Result<BootOutcome, String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("failed to create {}: {e}", self.dir.display()))?;
        let dtb = if self.dt_edits.is_empty() { None } else { Some(self.edited_tree(root)?) };
        let qmp = self.qmp_dir.listen().map_err(|e| format!("failed to listen for QMP: {e}"))?;
        let cmd = self.command_with(root, &qmp.qemu_args(), &self.machine, dtb.as_deref(), self.rr.as_ref());
        let command_line = cmd.display();
        std::fs::write(
            self.dir.join("command-line"),
            format!("cd {} && {command_line}\n", shell_quote(&root.display().to_string())),
        )
        .map_err(|e| format!("failed to write the command line: {e}"))?;
        let console_file = std::fs::File::create(self.dir.join("console.log"))
            .map_err(|e| format!("failed to create console.log: {e}"))?;
        // Unbuffered: each chunk (up to 64 KiB) is one write, and the log is there to be
        // read (tail -f) while the boot runs.
        let mut console = ConsoleLog::new(console_file);

        let mut child = cmd.spawn_piped().map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take();
        let receiver = testbench_console::spawn_reader(child.stdout.take().expect("stdout is piped"));
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let stderr_path = self.dir.join("qemu-stderr.log");
        let stderr_thread = std::thread::spawn(move || read_stderr(stderr_pipe, &stderr_path));

        // The guest starts only on the connection the bench holds. A QEMU that exited
        // first (bad arguments, say) is judged below by its exit and its stderr; one
        // that neither connects nor exits is killed, and the boot fails saying so. QEMU
        // connects before it builds the machine, so one that fails then (ROM regions
        // overlapping, say) closes the connection just before it exits: it is given a
        // moment to exit before the connection's end is called the bench's trouble.
        let watch = match qmp.start_guest(&mut child, Instant::now() + QMP_DEADLINE) {
            Ok(watch) => Some(watch),
            Err(error) => match crate::command::wait_deadline(&mut child, QMP_EXIT_GRACE) {
                Ok(Some(_)) => None,
                _ => return Err(error),
            },
        };
        let start = Instant::now();
        let mut judge = Judge::new(self.judge.clone());
        let deadline = start + self.timeout;
        let ended = testbench_console::judge_console(&receiver, &mut judge, &mut console, start, deadline, |text| {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(text).and_then(|_| stdin.flush());
            }
        });
        let (verdict, console_closed) = match ended {
            Ended::Verdict(verdict) => (Some(verdict), false),
            Ended::Closed => (None, true),
            Ended::Deadline => (None, false),
        };
        if !console_closed {
            // The verdict is known, or the deadline passed: nothing QEMU does now can
            // change the verdict. QEMU is stopped (a recorded one so that its recording
            // is whole) and what it still prints goes to the log.
            self.stop(&mut child, &receiver, &mut console);
        }
        drop(receiver);
        // The log's head is on disk; a tail that cannot be written is lost, not the verdict.
        let mut console = console.finish().ok();

        let verdict = match verdict {
            Some(verdict) => verdict,
            None if console_closed => {
                drop(stdin.take());
                let status = crate::command::wait_deadline(&mut child, EXIT_DEADLINE)
                    .map_err(|e| format!("failed to wait for QEMU: {e}"))?;
                let stderr_text = stderr_thread.join().unwrap_or_default();
                let status = match status {
                    Some(status) => status,
                    None => {
                        return Err(format!(
                            "QEMU closed the console but had not exited {EXIT_DEADLINE:?} later; killed it"
                        ))
                    }
                };
                let shutdown = match watch {
                    Some(watch) => {
                        let strangers = watch.strangers();
                        if !strangers.is_empty() {
                            let _ = std::fs::write(
                                self.dir.join("qmp.log"),
                                format!("refused QMP connections (not the bench's QEMU): {}\n", strangers.join(", ")),
                            );
                        }
                        watch.finish(Duration::from_secs(2))
                    }
                    None => Shutdown::NoEvent,
                };
                let status = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                    (Some(code), _) => ExitStatus::Code(code),
                    (None, Some(signal)) => ExitStatus::Signal(signal),
                    (None, None) => ExitStatus::Code(-1),
                };
                let tail = last_lines(&stderr_text, STDERR_TAIL_LINES);
                let verdict = judge.end(
                    Instant::now().duration_since(start),
                    Ending::Exited { status, shutdown, stderr_tail: tail.clone() },
                );
                if let Some(console) = console.as_mut().filter(|_| !tail.is_empty() && verdict != Verdict::Pass) {
                    let _ = writeln!(console, "\n--- testbench: the last lines of QEMU's stderr ---");
                    for line in &tail {
                        let _ = writeln!(console, "{line}");
                    }
                    let _ = console.flush();
                }
                return Ok(BootOutcome { verdict, captures: judge.captures().to_vec() });
            }
            None => judge.end(self.timeout, Ending::TimedOut { deadline: self.timeout }),
        };
        Ok(BootOutcome { verdict, captures: judge.captures().to_vec() })
    }
}

impl BootSpec {
    /// Ends QEMU once the verdict is known. A boot that is not recorded is killed. A
    /// recorded one is asked to stop (SIGTERM), since QEMU completes the recording only
    /// when it exits (a killed QEMU leaves one that cannot be replayed); a replayed one
    /// runs on to the recording's end by itself. Either way the console is read to its
    /// end, so that console.log holds what a replay of the recording shows.
    fn stop(
        &self,
        child: &mut std::process::Child,
        receiver: &std::sync::mpsc::Receiver<Chunk>,
        console: &mut ConsoleLog<std::fs::File>,
    ) {
        let grace = match &self.rr {
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Some(Rr::Record) => {
                let pid = rustix::process::Pid::from_child(child);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                EXIT_DEADLINE
            }
            Some(Rr::Replay(_)) => self.timeout + EXIT_DEADLINE,
        };
        let deadline = Instant::now() + grace;
        while let Ok(chunk) = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            let _ = console.write(&chunk.bytes);
        }
        if !matches!(crate::command::wait_deadline(child, EXIT_DEADLINE), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// QEMU's stderr into `path`, its head and tail kept (see `STDERR_LOG_HEAD`); returns
/// what the file kept, as text.
fn read_stderr(mut pipe: impl Read, path: &Path) -> String {
    let Ok(file) = std::fs::File::create(path) else {
        // Nowhere to keep it: drain the pipe so QEMU never waits on it.
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        return String::new();
    };
    let mut log = ConsoleLog::with_sizes(std::io::BufWriter::new(file), STDERR_LOG_HEAD, STDERR_LOG_TAIL);
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let _ = log.write(&buffer[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    drop(log.finish());
    std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
}

/// What a verdict quotes of QEMU's stderr: its first error line (QEMU's headline, such as
/// `qemu-system-riscv64: Some ROM regions are overlapping`, comes before its advice),
/// then `…` when lines were left out, then the last `count` lines; each line clipped.
pub fn last_lines(text: &str, count: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let first_tail = lines.len().saturating_sub(count);
    let mut quote = Vec::new();
    if let Some(headline) = headline(&lines).filter(|&h| h < first_tail) {
        quote.push(lines[headline]);
        if headline + 1 < first_tail {
            quote.push("…");
        }
    }
    quote.extend(&lines[first_tail..]);
    quote.into_iter().map(|l| testbench_judge::quote(l).into_owned()).collect()
}

/// QEMU's first error line: `<program>: <message>` that is not a warning; or the first
/// line when none looks like one.
fn headline(lines: &[&str]) -> Option<usize> {
    let is_error = |line: &&str| {
        line.split_once(": ").is_some_and(|(program, message)| {
            !program.is_empty() && !program.contains(char::is_whitespace) && !message.starts_with("warning:")
        })
    };
    lines.iter().position(is_error).or(if lines.is_empty() { None } else { Some(0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A boot of the reference guest at `/ws`, as the runner plans one.
    fn spec(tmp: &Path) -> BootSpec {
        BootSpec {
            arch: Arch::Rv64,
            machine: "virt".into(),
            firmware: Firmware::Default,
            kernel: "/ws/target/testbench/run-1-2/c/build/loader".into(),
            initrd: Some("/ws/target/testbench/run-1-2/c/rv64/bundle".into()),
            append: None,
            smp: 1,
            memory_mib: 256,
            icount: None,
            seed: None,
            rtc_base: None,
            rr: None,
            extra_args: Vec::new(),
            timeout: Duration::from_secs(30),
            dir: "/ws/target/testbench/run-1-2/c/rv64-smp1".into(),
            judge: testbench_judge::Config::default(),
            dt_edits: Vec::new(),
            qmp_dir: std::sync::Arc::new(QmpDir::create(tmp).unwrap()),
        }
    }

    /// The command line as the boot's `command-line` file holds it, with the QEMU binary
    /// (which `TESTBENCH_QEMU_RV64` may replace) named by its role.
    fn shown(spec: &BootSpec, dtb: Option<&Path>) -> String {
        let qmp = ["-S", "-chardev", "socket,id=testbench-qmp,path=[QMP],server=off"].map(String::from);
        let line = spec.command_with(Path::new("/ws"), &qmp, &spec.machine, dtb, spec.rr.as_ref()).display();
        let qemu = crate::command::shell_quote(&qemu_binary(spec.arch));
        // One option a line (no value here holds " -").
        line.replacen(&qemu, "[QEMU]", 1).replace(" -", "\n  -")
    }

    #[test]
    fn command_lines_are_what_they_were() {
        let tmp = tempfile::tempdir().unwrap();
        let plain = spec(tmp.path());
        insta::assert_snapshot!("reference-guest", shown(&plain, None));
        let pinned =
            BootSpec { icount: Some("shift=3".into()), seed: Some(7), rr: Some(Rr::Record), ..spec(tmp.path()) };
        insta::assert_snapshot!("icount-seed-pinned-rtc-recorded", shown(&pinned, None));
        let external = BootSpec {
            arch: Arch::Rv32,
            firmware: Firmware::Path("guests/fw.bin".into()),
            kernel: "/ws/images/Image".into(),
            initrd: None,
            append: Some("console=ttyS0 quiet".into()),
            rtc_base: Some("2021-06-30".into()),
            extra_args: vec!["-device".into(), "virtio-rng-device".into()],
            ..spec(tmp.path())
        };
        insta::assert_snapshot!("external-guest-dtb", shown(&external, Some(Path::new("/ws/edited.dtb"))));
    }

    const ROM_OVERLAP: &str = "qemu-system-riscv64: Some ROM regions are overlapping
These ROM regions might have been loaded by direct user request or by default.
They could be BIOS/firmware images, a guest kernel, initrd or some other file loaded into guest memory.
Check whether you intended to load all this guest code, and whether it has been built to load to the correct addresses.

The following two regions overlap (in the memory address space):
  /usr/share/qemu/opensbi-riscv64-generic-fw_dynamic.bin (addresses 0x0000000080000000 - 0x0000000080042868)
  kernel/kernel ELF program header segment 0 (addresses 0x0000000080000000 - 0x0000000080001000)
";

    #[test]
    fn the_stderr_quote_keeps_qemus_headline_and_its_last_lines() {
        let quote = last_lines(ROM_OVERLAP, 5);
        assert_eq!(quote[0], "qemu-system-riscv64: Some ROM regions are overlapping");
        assert_eq!(quote[1], "…");
        assert_eq!(quote.len(), 7, "{quote:#?}");
        assert!(quote[6].starts_with("  kernel/kernel ELF program header"), "{quote:#?}");
        // Short stderr: every line once, no marker.
        assert_eq!(last_lines("a: bad\nb\n", 5), ["a: bad", "b"]);
        // A warning is not the headline; the error after it is.
        let warned = "q: warning: old\nq: the error\n1\n2\n3\n";
        assert_eq!(last_lines(warned, 2), ["q: the error", "…", "2", "3"]);
        // A long line is clipped.
        let long = format!("q: {}\n", "x".repeat(5000));
        assert!(last_lines(&long, 5)[0].ends_with(" bytes cut]"));
    }
}
