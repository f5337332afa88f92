//! Booting one guest under QEMU and feeding its console to the judge.
//!
//! One boot, step by step: write the full command line into the boot's directory;
//! listen for QEMU's QMP connection (how the guest ended); start QEMU with the serial
//! console on a pipe and the parent-death signal set; then read the console as it comes,
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
use std::sync::Mutex;
use std::time::{Duration, Instant};

use testbench_case::{Arch, Firmware};
use testbench_console::{ConsoleLog, Ended};
use testbench_judge::{Ending, ExitStatus, Judge, Verdict};

use crate::command::{shell_quote, Cmd};
use crate::qmp::QmpListener;

/// QEMU prints its version at once; ten seconds is a QEMU that cannot run.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
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

/// `qemu -L help`'s answer per width, asked beside the `-version` probe (see `probe`).
static FIRMWARE_DIRS: Mutex<Vec<(Arch, FirmwareDirs)>> = Mutex::new(Vec::new());
type FirmwareDirs = Result<Vec<PathBuf>, String>;

/// Run `qemu -version`; the error is the complaint every boot of the width fails with.
///
/// `qemu -L help` (for the firmware check) runs at the same time, on a thread that
/// starts and waits for it (command.rs); its answer is kept for `firmware_dirs`. The two
/// QEMU starts cost one start's wall time instead of two.
pub fn probe(arch: Arch) -> Result<String, String> {
    let dirs = std::thread::spawn(move || list_firmware_dirs(arch));
    let version = probe_version(arch);
    if let Ok(dirs) = dirs.join() {
        FIRMWARE_DIRS.lock().unwrap_or_else(|e| e.into_inner()).push((arch, dirs));
    }
    version
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

/// Where QEMU keeps its firmware images (`qemu -L help`), for checking `-bios default`.
pub fn firmware_dirs(arch: Arch) -> Result<Vec<PathBuf>, String> {
    if let Some((_, dirs)) = FIRMWARE_DIRS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(a, _)| *a == arch) {
        return dirs.clone();
    }
    list_firmware_dirs(arch)
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

/// Check the firmware a boot needs is there; the error says what is missing.
pub fn check_firmware(arch: Arch, firmware: &Firmware, root: &Path, field: &str) -> Result<(), String> {
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
            let dirs = firmware_dirs(arch)?;
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
    pub extra_args: Vec<String>,
    pub timeout: Duration,
    /// The boot's own directory: console.log, qemu-stderr.log, command-line.
    pub dir: PathBuf,
    pub judge: testbench_judge::Config,
    /// Edits of the device tree QEMU builds for this command line (then booted with -dtb).
    pub dt_edits: Vec<testbench_case::DtEdit>,
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
            .command_with(root, &[], &format!("{},dumpdtb={}", self.machine, dumped.display()), None)
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

    fn command_with(&self, root: &Path, qmp_args: &[String], machine: &str, dtb: Option<&Path>) -> Cmd {
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
            // The RTC follows the virtual clock too, so a time the guest reads repeats.
            cmd = cmd.args(["-icount", icount, "-rtc", "clock=vm"]);
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
        let qmp = QmpListener::new().map_err(|e| format!("failed to listen for QMP: {e}"))?;
        let cmd = self.command_with(root, &qmp.qemu_args(), &self.machine, dtb.as_deref());
        let command_line = cmd.display();
        std::fs::write(
            self.dir.join("command-line"),
            format!("cd {} && {command_line}\n", shell_quote(&root.display().to_string())),
        )
        .map_err(|e| format!("failed to write the command line: {e}"))?;
        let console_file = std::fs::File::create(self.dir.join("console.log"))
            .map_err(|e| format!("failed to create console.log: {e}"))?;
        let mut console = ConsoleLog::new(std::io::BufWriter::new(console_file));

        let start = Instant::now();
        let mut child = cmd.spawn_piped().map_err(|e| e.to_string())?;
        let watch = qmp.watch(self.timeout + EXIT_DEADLINE);
        let mut stdin = child.stdin.take();
        let receiver = testbench_console::spawn_reader(child.stdout.take().expect("stdout is piped"));
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let stderr_path = self.dir.join("qemu-stderr.log");
        let stderr_thread = std::thread::spawn(move || read_stderr(stderr_pipe, &stderr_path));

        let mut judge = Judge::new(self.judge.clone());
        let deadline = start + self.timeout;
        let ended = testbench_console::judge_console(&receiver, &mut judge, &mut console, start, deadline, |text| {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(text).and_then(|_| stdin.flush());
            }
        });
        drop(receiver);
        let (verdict, console_closed) = match ended {
            Ended::Verdict(verdict) => (Some(verdict), false),
            Ended::Closed => (None, true),
            Ended::Deadline => (None, false),
        };
        // The log's head is on disk; a tail that cannot be written is lost, not the verdict.
        let mut console = console.finish().ok();

        let verdict = match verdict {
            Some(verdict) => {
                // The verdict is known: nothing QEMU does now can change it.
                let _ = child.kill();
                let _ = child.wait();
                verdict
            }
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
                let shutdown = watch.finish(Duration::from_secs(2));
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
            None => {
                let _ = child.kill();
                let _ = child.wait();
                judge.end(self.timeout, Ending::TimedOut { deadline: self.timeout })
            }
        };
        Ok(BootOutcome { verdict, captures: judge.captures().to_vec() })
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

/// The last `count` lines of `text` that are not blank, each quoted in at most a few
/// hundred bytes (`testbench_judge::quote`).
pub fn last_lines(text: &str, count: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(count)..].iter().map(|l| testbench_judge::quote(l).into_owned()).collect()
}
