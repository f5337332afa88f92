//! `--gdb`: one boot under QEMU's gdbstub (docs/debugging.md).
//!
//! - The gdbstub listens on a Unix socket beside the boot's QMP socket, in the run's
//!   private directory (`qemu/qmp.rs`, `QmpDir`: 0700, named at random). QEMU accepts
//!   whoever connects to its gdbstub, so the directory is the only guard: it is checked
//!   again before QEMU starts ([`check_private_dir`]: ours, a directory, no access for
//!   group or others), and a directory that fails the check is refused, never used.
//!   Never a TCP port, which anyone on the host could reach.
//! - The guest starts paused (QEMU's `-S`, as every boot) and the bench does not start
//!   it: it prints the command that attaches `gdb-multiarch` ([`attach_command`]) and
//!   waits for the debugger to continue the guest (QMP's `RESUME`). The boot's deadline
//!   counts only while the guest runs; while it is stopped (before the first `continue`
//!   and at each stop in the debugger) the wait has its own deadline, `--gdb-wait`, and
//!   a wait that passes it ends the boot saying so (`stages.rs`).
//! - Under `--rr-replay` the boot replays its recording; QEMU takes a snapshot when the
//!   debugger attaches, on a qcow2 overlay the bench makes in the boot's directory (a
//!   drive with no device: the guest never sees it), and `reverse-stepi` and
//!   `reverse-continue` replay forward from that snapshot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_case::Arch;

use crate::process::{shell_quote, Cmd};

/// The gdbstub socket's extension beside the boot's QMP socket (`boot-N.gdb`).
pub const SOCKET_EXTENSION: &str = "gdb";

/// The qcow2 overlay QEMU's replay keeps its snapshot on, in the boot's directory.
pub const SNAPSHOTS_FILE: &str = "rr-snapshots.qcow2";

/// The file in the boot's directory that keeps what the bench printed for the debugger.
pub const ATTACH_FILE: &str = "gdb-attach";

/// How long `qemu-img` may take to make the overlay.
const QEMU_IMG_DEADLINE: Duration = Duration::from_secs(30);

/// Why a boot cannot be put under the debugger.
#[derive(Debug, thiserror::Error)]
pub enum GdbError {
    #[error("--gdb: the gdbstub's socket directory {}: {source}", .dir.display())]
    Stat { dir: PathBuf, source: std::io::Error },
    #[error(
        "--gdb: the gdbstub's socket directory {} is not a directory (a symbolic link or another file): refused, \
         the gdbstub listens only in a directory of the bench's own that no other user can enter",
        .dir.display()
    )]
    NotDirectory { dir: PathBuf },
    #[error(
        "--gdb: the gdbstub's socket directory {} belongs to uid {owner}, not to the bench's uid {own}: refused, \
         the gdbstub listens only in a directory of the bench's own",
        .dir.display()
    )]
    Owner { dir: PathBuf, owner: u32, own: u32 },
    #[error(
        "--gdb: the gdbstub's socket directory {} has mode {mode:04o}, and it must give group and others no \
         access (0700): refused, QEMU's gdbstub accepts whoever can reach its socket",
        .dir.display()
    )]
    Mode { dir: PathBuf, mode: u32 },
    #[error("--gdb: failed to make {} (the snapshot overlay reverse debugging needs): {source}", .path.display())]
    Overlay { path: PathBuf, source: crate::process::CmdError },
    #[error("--gdb: qemu-img could not make {} ({status}): {stderr}", .path.display())]
    OverlayFailed { path: PathBuf, status: std::process::ExitStatus, stderr: String },
}

/// The directory the gdbstub's socket goes in: a directory (not a link to one), ours,
/// with no access for group or others.
pub fn check_private_dir(dir: &Path) -> Result<(), GdbError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = dir.symlink_metadata().map_err(|source| GdbError::Stat { dir: dir.to_owned(), source })?;
    if !meta.is_dir() {
        return Err(GdbError::NotDirectory { dir: dir.to_owned() });
    }
    let own = rustix::process::getuid().as_raw();
    if meta.uid() != own {
        return Err(GdbError::Owner { dir: dir.to_owned(), owner: meta.uid(), own });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(GdbError::Mode { dir: dir.to_owned(), mode });
    }
    Ok(())
}

/// gdb's name for the width (`set architecture`).
pub fn gdb_architecture(arch: Arch) -> &'static str {
    match arch {
        Arch::Rv64 => "riscv:rv64",
        Arch::Rv32 => "riscv:rv32",
        Arch::X86_64 => "i386:x86-64",
        Arch::Aarch64 => "aarch64",
    }
}

/// The one command that attaches Debian's `gdb-multiarch` to the boot: the kernel's
/// ELF with its symbols (when the bench knows it), the architecture, the socket.
pub fn attach_command(arch: Arch, elf: Option<&Path>, socket: &Path) -> String {
    let mut line = "gdb-multiarch".to_string();
    if let Some(elf) = elf {
        line.push(' ');
        line.push_str(&shell_quote(&elf.display().to_string()));
    }
    line.push_str(" -ex ");
    line.push_str(&shell_quote(&format!("set architecture {}", gdb_architecture(arch))));
    line.push_str(" -ex ");
    line.push_str(&shell_quote(&format!("target remote {}", socket.display())));
    line
}

/// The function a panic goes through and its first instruction's address, from the
/// ELF's symbol table: a Rust kernel's panic handler (`rust_begin_unwind`, the reference
/// guest's, whatever its mangling), else a C kernel's `panic` (Linux, xv6). None when
/// the ELF cannot be read or names neither. The address, not the name, is what the
/// breakpoint takes: without DWARF gdb guesses where the prologue ends, and on the
/// reference kernel it guessed a place the panic never passes.
pub fn panic_function(elf: &Path) -> Option<(String, u64)> {
    let symbols = testbench_symbols::Symbols::open(elf).ok()?;
    let rust = symbols.functions().iter().find(|s| s.name.ends_with("rust_begin_unwind"));
    let found = rust.or_else(|| symbols.functions().iter().find(|s| s.name == "panic"))?;
    Some((found.name.clone(), found.address))
}

/// One boot's debugger session: QEMU's arguments and what the person is told.
pub struct Session {
    /// `-chardev` and `-gdb` (and the overlay's `-drive` under a replay).
    pub args: Vec<String>,
    /// The command that attaches the debugger.
    pub attach: String,
    /// What the bench prints (and keeps in [`ATTACH_FILE`]).
    pub told: String,
}

/// What a boot under the debugger adds: the gdbstub on `socket` (its directory checked
/// first), under a replay the snapshot overlay made in `boot_dir`, and the words that
/// tell the person how to attach and, under a replay, how to go back from the failure.
pub fn prepare(
    arch: Arch,
    socket: &Path,
    boot_dir: &Path,
    elf: Option<&Path>,
    replay: bool,
    wait: Duration,
) -> Result<Session, GdbError> {
    let dir = socket.parent().unwrap_or(Path::new("/"));
    check_private_dir(dir)?;
    let mut args = vec![
        "-chardev".to_string(),
        format!("socket,id=testbench-gdb,path={},server=on,wait=off", socket.display()),
        "-gdb".to_string(),
        "chardev:testbench-gdb".to_string(),
    ];
    if replay {
        let overlay = boot_dir.join(SNAPSHOTS_FILE);
        make_overlay(&overlay)?;
        args.push("-drive".into());
        args.push(format!(
            "file={},if=none,format=qcow2,id=testbench-rr-snapshots",
            overlay.display().to_string().replace(',', ",,")
        ));
    }
    let attach = attach_command(arch, elf, socket);
    let told = told(&attach, elf, replay, wait);
    Ok(Session { args, attach, told })
}

/// An empty qcow2 image for QEMU's snapshots (replaced when a run before left one).
fn make_overlay(path: &Path) -> Result<(), GdbError> {
    let _ = std::fs::remove_file(path);
    let cmd = Cmd::new("qemu-img", "qemu-img to make the snapshot overlay", QEMU_IMG_DEADLINE)
        .args(["create", "-q", "-f", "qcow2"])
        .arg(path)
        .arg("1M");
    let output = cmd.output().map_err(|source| GdbError::Overlay { path: path.to_owned(), source })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        return Err(GdbError::OverlayFailed { path: path.to_owned(), status: output.status, stderr });
    }
    Ok(())
}

/// The words printed for the person at the debugger.
fn told(attach: &str, elf: Option<&Path>, replay: bool, wait: Duration) -> String {
    let secs = wait.as_secs();
    let mut text = format!(
        "gdb: the guest waits, stopped, for a debugger to continue it (up to {secs}s, --gdb-wait); attach with:\n    {attach}\n"
    );
    if elf.is_none() {
        text.push_str("gdb: the bench knows no ELF with symbols for this kernel (for a guest it did not build, name one in [guest] symbols): gdb shows addresses only\n");
    }
    text.push_str("gdb: the boot's deadline counts only while the guest runs; stopped in the debugger, it waits up to --gdb-wait again\n");
    let stop = match (elf, elf.and_then(panic_function)) {
        (_, Some((name, address))) => format!("break *{address:#x}` ({name}'s first instruction), then `continue`"),
        (Some(_), None) => {
            "break` on the function that prints the failure (its symbols name no panic function), then `continue`"
                .to_string()
        }
        (None, None) => "break *ADDRESS` on the function that prints the failure, then `continue`".to_string(),
    };
    text.push_str(&format!("gdb: to stop at the crash: `{stop}\n"));
    if replay {
        text.push_str("gdb: this boot replays its recording: from there go back with `reverse-stepi` or `reverse-continue` (QEMU replays forward from a snapshot it takes when the debugger attaches)\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attach command names the ELF, the width's gdb architecture and the socket,
    /// quoted for a shell; the architecture names are gdb's own for each width.
    #[test]
    fn the_attach_command_names_the_elf_the_architecture_and_the_socket() {
        let line = attach_command(Arch::Rv64, Some(Path::new("/k/kernel")), Path::new("/tmp/d/boot-0.gdb"));
        assert_eq!(
            line,
            "gdb-multiarch /k/kernel -ex 'set architecture riscv:rv64' -ex 'target remote /tmp/d/boot-0.gdb'"
        );
        let names: Vec<&str> = [Arch::Rv64, Arch::Rv32, Arch::X86_64, Arch::Aarch64].map(gdb_architecture).to_vec();
        assert_eq!(names, ["riscv:rv64", "riscv:rv32", "i386:x86-64", "aarch64"]);
        let bare = attach_command(Arch::Aarch64, None, Path::new("/s"));
        assert_eq!(bare, "gdb-multiarch -ex 'set architecture aarch64' -ex 'target remote /s'");
    }

    /// `--gdb` waits 300 s at each stop unless `--gdb-wait` says, from 1 s to a day;
    /// `--gdb-wait` alone is refused (it means nothing without `--gdb`).
    #[test]
    fn gdb_wait_has_a_default_and_bounds_and_needs_gdb() {
        use clap::Parser;
        let options = |args: &[&str]| crate::cli::Flags::try_parse_from([&["testbench"], args].concat());
        let wait = |args: &[&str]| options(args).unwrap().validate().map(|o| o.gdb).map_err(|e| e.to_string());
        assert_eq!(wait(&[]).unwrap(), None);
        assert_eq!(wait(&["--gdb"]).unwrap(), Some(Duration::from_secs(300)));
        assert_eq!(wait(&["--gdb", "--gdb-wait", "5"]).unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(wait(&["--gdb", "--gdb-wait", "0"]).unwrap_err(), "--gdb-wait 0 is not accepted: 1 to 86400");
        assert!(options(&["--gdb-wait", "5"]).is_err());
        assert!(options(&["--gdb", "--slurm"]).is_err());
    }

    /// Self-check: a socket directory group or others may enter, or a link to one, is
    /// refused naming it and the mode; the run's own 0700 directory is taken.
    #[test]
    fn a_socket_directory_others_can_reach_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let why = check_private_dir(&open).unwrap_err().to_string();
        assert!(why.contains("has mode 0755, and it must give group and others no access (0700): refused"), "{why}");
        let err = prepare(Arch::Rv64, &open.join("boot-0.gdb"), tmp.path(), None, false, Duration::from_secs(1));
        assert!(matches!(err, Err(GdbError::Mode { mode: 0o755, .. })), "prepare checks the directory first");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o700)).unwrap();
        check_private_dir(&open).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        assert!(matches!(check_private_dir(&link), Err(GdbError::NotDirectory { .. })));
        // The run's own QMP directory passes, and the gdbstub's socket goes there.
        let qmp = crate::qemu::qmp::QmpDir::create(tmp.path()).unwrap();
        check_private_dir(qmp.path()).unwrap();
    }
}
