//! QEMU itself: the probe, the firmware check, the accelerator, QMP. One boot is
//! `crate::boot`.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the probe (a value per width: version, firmware directories), the firmware check, the RTC's pinned base, record/replay, the quote of QEMU's stderr |
//! | `accel.rs` | `accel = tcg \| kvm \| auto`: KVM's probe boot and the choice per case and width |
//! | `qmp.rs` | QEMU's QMP connection: the run's private socket directory, the peer check, the negotiation before the guest runs, the client that sends commands and hears events |

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use testbench_case::{Arch, Firmware};

use crate::process::Cmd;

pub mod accel;
pub mod qmp;

/// QEMU prints its version at once; ten seconds is a QEMU that cannot run.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// QEMU has this long from its start to connect to the bench's QMP socket (the guest
/// does not run until it has, so this is QEMU's own start, however loaded the host).
pub const QMP_DEADLINE: Duration = Duration::from_secs(30);
/// A QEMU whose QMP connection failed has this long to exit on its own (it is judged by
/// its exit and stderr) before it is killed (the boot fails with the QMP trouble).
pub const QMP_EXIT_GRACE: Duration = Duration::from_secs(2);
/// Once QEMU has exited, how long its QMP reader has to read what QEMU sent before the
/// connection closed (the SHUTDOWN event among it): it ends as soon as it runs, so this
/// bounds only a reader starved of CPU on a loaded host.
pub const QMP_READER_BOUND: Duration = Duration::from_secs(15);
/// After the console closes, QEMU has this long to exit before it is killed.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(10);
/// How many of QEMU's last stderr lines a verdict quotes.
pub const STDERR_TAIL_LINES: usize = 5;
/// `qemu-stderr.log` keeps this much of the start of QEMU's stderr, and of its end.
pub const STDERR_LOG_HEAD: u64 = 256 * 1024;
pub const STDERR_LOG_TAIL: usize = 64 * 1024;

/// A value inside one of QEMU's comma-separated options (`file=...`, `cmd:...`): its
/// commas doubled, as QEMU's option syntax wants.
pub fn option_value(value: &str) -> String {
    value.replace(',', ",,")
}

/// A QEMU option value's comma-separated parts, `,,` read as a comma inside a part (the
/// reverse of [`option_value`]).
pub fn option_parts(value: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ',' if chars.peek() == Some(&',') => {
                chars.next();
                parts.last_mut().expect("never empty").push(',');
            }
            ',' => parts.push(String::new()),
            c => parts.last_mut().expect("never empty").push(c),
        }
    }
    parts
}

/// The QEMU binary for a width: the environment's override, or the default name.
pub fn qemu_binary(arch: Arch) -> String {
    std::env::var(arch.qemu_env_var()).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| arch.default_qemu().to_string())
}

/// Why a width's QEMU cannot boot anything: the complaint every boot of the width fails
/// with.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// The binary did not start or did not end (`how`: how to install or name another).
    #[error("{qemu} cannot run ({how}): {source}")]
    CannotRun { qemu: String, how: String, source: crate::process::CmdError },
    /// `-version` ran and failed: the last lines of its stderr.
    #[error("{qemu} -version failed ({status}): {tail}")]
    Failed { qemu: String, status: std::process::ExitStatus, tail: String },
    #[error("the probe of {0}'s QEMU panicked")]
    Panicked(Arch),
}

/// Why QEMU's firmware directories could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareDirsError {
    #[error(transparent)]
    List(#[from] crate::process::CmdError),
    #[error("listing {0}'s firmware directories panicked")]
    Panicked(Arch),
}

/// The firmware a boot needs that is not there.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareError {
    /// The case's firmware file (in `field`).
    #[error("firmware not found: {} ({field}; \"default\" is QEMU's own firmware)", .path.display())]
    NotFound { path: PathBuf, field: String },
    /// QEMU's firmware directories are not known.
    #[error(transparent)]
    Dirs(Arc<FirmwareDirsError>),
    /// QEMU's own image for the width is in none of its directories.
    #[error(
        "firmware not found: QEMU's {name} is in none of its data directories ({})",
        .dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotInDirs { name: &'static str, dirs: Vec<PathBuf> },
    /// UEFI's code or variables template from Debian's package is not installed.
    #[error("firmware not found: {path} ({field} = \"uefi\" on {arch} takes it from Debian's package {package}, which scripts/setup installs)")]
    Uefi { arch: Arch, path: &'static str, field: String, package: &'static str },
}

/// What a width's QEMU said of itself before its first boot.
pub struct Probe {
    /// `qemu -version`'s first line; the error is the complaint every boot of the width
    /// fails with.
    pub version: Result<String, VersionError>,
    /// Where QEMU keeps its firmware images (`qemu -L help`), for checking `-bios default`
    /// (the error shared by every check that needs them).
    pub firmware_dirs: Result<Vec<PathBuf>, Arc<FirmwareDirsError>>,
    /// KVM's probe boot (`accel.rs`), when a boot of the width may run under KVM.
    pub kvm: Option<accel::KvmProbe>,
}

/// Run `qemu -version` and `qemu -L help` at the same time, the second on a thread that
/// starts and waits for it (crates/process): the two QEMU starts cost one start's wall
/// time instead of two.
pub fn probe(arch: Arch) -> Probe {
    let dirs = std::thread::spawn(move || list_firmware_dirs(arch));
    let version = probe_version(arch);
    let firmware_dirs = dirs.join().unwrap_or(Err(FirmwareDirsError::Panicked(arch))).map_err(Arc::new);
    Probe { version, firmware_dirs, kvm: None }
}

/// What a probe that succeeded is kept as, in `cache/<arch>-<path hash>.json`: one file
/// per binary, so a run that alternates two QEMUs of a width (`TESTBENCH_QEMU_*` set for
/// some runs) finds both kept.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
struct CachedProbe {
    /// The binary the answers are of: its resolved path, size, modification time and
    /// inode. Any change (an upgrade, another `TESTBENCH_QEMU_*`) misses the cache.
    key: String,
    version: String,
    firmware_dirs: Vec<PathBuf>,
}

/// The probe's key: the width's QEMU binary as resolved now, with what tells one build
/// of a file from another.
fn probe_key(arch: Arch) -> Option<(PathBuf, String)> {
    use std::os::unix::fs::MetadataExt;
    let qemu = qemu_binary(arch);
    let path = if qemu.contains('/') { PathBuf::from(&qemu) } else { crate::process::on_path(&qemu)? };
    let real = path.canonicalize().ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let key = format!("{} {} {} {} {}", real.display(), meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
    Some((real, key))
}

/// [`probe`], answered from `cache` (a directory) when the width's QEMU binary is the one
/// a successful probe saw: a run from a prebuilt directory then starts no QEMU before
/// its boot's. A failed probe is never kept.
pub fn probe_cached(arch: Arch, cache: &Path) -> Probe {
    let Some((real, key)) = probe_key(arch) else { return probe(arch) };
    let named = {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(real.as_os_str().as_encoded_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect::<String>()
    };
    let file = cache.join(format!("{arch}-{named}.json"));
    let cached: Option<CachedProbe> =
        std::fs::read_to_string(&file).ok().and_then(|text| serde_json::from_str(&text).ok());
    if let Some(cached) = cached.filter(|c| c.key == key) {
        return Probe { version: Ok(cached.version), firmware_dirs: Ok(cached.firmware_dirs), kvm: None };
    }
    let probe = probe(arch);
    if let (Ok(version), Ok(firmware_dirs)) = (&probe.version, &probe.firmware_dirs) {
        let kept = CachedProbe { key, version: version.clone(), firmware_dirs: firmware_dirs.clone() };
        let tmp = cache.join(format!(".{arch}-{named}.json.{}", std::process::id()));
        let written = std::fs::create_dir_all(cache)
            .and_then(|()| std::fs::write(&tmp, serde_json::to_string(&kept).expect("a probe serializes")))
            .and_then(|()| std::fs::rename(&tmp, &file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    probe
}

fn probe_version(arch: Arch) -> Result<String, VersionError> {
    let qemu = qemu_binary(arch);
    let cmd = Cmd::new(&qemu, format!("{qemu} -version"), PROBE_DEADLINE).arg("-version");
    match cmd.output() {
        Err(source) => Err(VersionError::CannotRun { qemu, how: how_to_replace(arch), source }),
        Ok(out) if !out.status.success() => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail = last_lines(&stderr, STDERR_TAIL_LINES).join(" | ");
            Err(VersionError::Failed { qemu, status: out.status, tail })
        }
        Ok(out) => Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string()),
    }
}

fn how_to_replace(arch: Arch) -> String {
    format!("install it with scripts/setup, or name another build in {}", arch.qemu_env_var())
}

fn list_firmware_dirs(arch: Arch) -> Result<Vec<PathBuf>, FirmwareDirsError> {
    let qemu = qemu_binary(arch);
    let out = Cmd::new(&qemu, format!("{qemu} -L help"), PROBE_DEADLINE).args(["-L", "help"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| PathBuf::from(l.trim()))
        .filter(|p| p.is_absolute())
        .collect())
}

/// The image QEMU loads for this width's default machine when the case names no firmware:
/// OpenSBI on riscv `virt` (`-bios default`), SeaBIOS on x86_64's `q35`; aarch64's `virt`
/// needs none (QEMU boots the kernel and answers PSCI itself).
pub fn default_firmware_name(arch: Arch) -> Option<&'static str> {
    match arch {
        Arch::Rv64 => Some("opensbi-riscv64-generic-fw_dynamic.bin"),
        Arch::Rv32 => Some("opensbi-riscv32-generic-fw_dynamic.bin"),
        Arch::X86_64 => Some("bios-256k.bin"),
        Arch::Aarch64 => None,
    }
}

/// Check the firmware a boot needs is there (`dirs`: the width's probe's firmware
/// directories); the error says what is missing.
pub fn check_firmware(
    arch: Arch,
    firmware: &Firmware,
    root: &Path,
    field: &str,
    dirs: &Result<Vec<PathBuf>, Arc<FirmwareDirsError>>,
) -> Result<(), FirmwareError> {
    match firmware {
        Firmware::None => Ok(()),
        Firmware::Path(path) => {
            let full = root.join(path);
            if full.is_file() {
                Ok(())
            } else {
                Err(FirmwareError::NotFound { path: path.clone(), field: field.into() })
            }
        }
        Firmware::Uefi => {
            let Some((code, vars, package)) = crate::boot::media::uefi_files(arch) else { return Ok(()) };
            match [code, vars].into_iter().find(|path| !Path::new(path).is_file()) {
                Some(path) => Err(FirmwareError::Uefi { arch, path, field: field.into(), package }),
                None => Ok(()),
            }
        }
        Firmware::Default | Firmware::Bios => {
            let Some(name) = default_firmware_name(arch) else { return Ok(()) };
            let dirs = dirs.as_ref().map_err(|e| FirmwareError::Dirs(e.clone()))?;
            if dirs.iter().any(|dir| dir.join(name).is_file()) {
                Ok(())
            } else {
                Err(FirmwareError::NotInDirs { name, dirs: dirs.clone() })
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
pub enum RecordReplay {
    /// Record the boot's nondeterministic events (the typed input among them) to
    /// [`RR_FILE`] in the boot's directory.
    Record,
    /// Replay a recording: the console input comes from the file, not from the bench.
    Replay(PathBuf),
}

impl RecordReplay {
    /// The `-icount` suboptions, the path's commas doubled as QEMU's option syntax wants.
    pub fn icount_suboptions(&self, dir: &Path) -> String {
        let (mode, path) = match self {
            RecordReplay::Record => ("record", dir.join(RR_FILE)),
            RecordReplay::Replay(path) => ("replay", path.clone()),
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

    #[test]
    fn option_parts_read_back_what_option_value_wrote() {
        let path = "/a,b/disk.img";
        let option = format!("if=none,id=disk0,file={}", option_value(path));
        assert_eq!(option_parts(&option), ["if=none", "id=disk0", "file=/a,b/disk.img"]);
        assert_eq!(option_parts(""), [""]);
    }

    #[test]
    fn missing_firmware_is_refused_naming_the_file_or_the_directories_looked_in() {
        let tmp = tempfile::tempdir().unwrap();
        let firmware = Firmware::Path("fw/absent.bin".into());
        let error = check_firmware(Arch::Rv64, &firmware, tmp.path(), "firmware", &Ok(Vec::new())).unwrap_err();
        assert!(matches!(error, FirmwareError::NotFound { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "firmware not found: fw/absent.bin (firmware; \"default\" is QEMU's own firmware)"
        );
        let dirs = Ok(vec![tmp.path().to_path_buf()]);
        let error = check_firmware(Arch::Rv64, &Firmware::Default, tmp.path(), "firmware", &dirs).unwrap_err();
        assert!(matches!(&error, FirmwareError::NotInDirs { dirs, .. } if dirs.len() == 1), "{error:?}");
        assert!(error.to_string().ends_with(&format!("data directories ({})", tmp.path().display())), "{error}");
        let unknown = Err(Arc::new(FirmwareDirsError::Panicked(Arch::Rv64)));
        let error = check_firmware(Arch::Rv64, &Firmware::Default, tmp.path(), "firmware", &unknown).unwrap_err();
        assert_eq!(error.to_string(), "listing rv64's firmware directories panicked");
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
