//! The guest's RAM at the verdict, as the two RAM parts (`memory.rs`, `ram_forbid.rs`)
//! read it (docs/ram.md). Once
//! a boot has passed on its console (and its sessions), and before QEMU is stopped for
//! good, the bench pauses the guest over QMP (`stop`), has QEMU write the machine's RAM
//! into the boot's directory (`pmemsave` from the virt machine's RAM base, `memory_mib`
//! long) and reads it with `testbench-ram`.
//!
//! `memory`: every program's painted stack and heap record measured, the dump taken
//! again (the guest let run on between) while a program's record is not there yet, up
//! to the boot's deadline; each size judged against twice its peak. `ram_forbid`: a
//! string found fails the boot, naming its physical address and quoting the bytes
//! around it. A dump that a refusal or a find is about stays as evidence; any other is
//! deleted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::qemu::qmp::{QmpClient, QmpError};

/// Why the guest's RAM could not be dumped (`what`: the part that asked).
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("{what}: pausing the guest: {source}")]
    Pause { what: String, source: QmpError },
    /// The dump's file could not be made (readable by the bench's user alone).
    #[error("{what}: creating {}: {source}", .path.display())]
    Create { what: String, path: PathBuf, source: std::io::Error },
    #[error("{what}: dumping the RAM: {source}")]
    Dump { what: String, source: QmpError },
}

/// Where the riscv `virt` machine's RAM starts, on both riscv widths.
pub const VIRT_RAM_BASE: u64 = 0x8000_0000;

/// Where the RAM of `arch`'s default machine starts: 0x80000000 on riscv `virt`,
/// 0x40000000 on aarch64 `virt`, 0 on x86_64's `q35` (whose RAM is one piece below 4 GiB
/// up to 2.75 GiB; the dump reads the legacy hole at 640 KiB as the machine shows it).
pub fn ram_base(arch: testbench_case::Arch) -> u64 {
    match arch {
        testbench_case::Arch::Rv64 | testbench_case::Arch::Rv32 => VIRT_RAM_BASE,
        testbench_case::Arch::Aarch64 => 0x4000_0000,
        testbench_case::Arch::X86_64 => 0,
    }
}
/// The dump's file in the boot's directory.
pub const RAM_DUMP: &str = "ram.bin";
/// `stop` answers at once.
pub const STOP_BOUND: Duration = Duration::from_secs(10);
/// Writing a few hundred MiB to a file: seconds; a minute is a QEMU that is stuck.
const DUMP_BOUND: Duration = Duration::from_secs(60);

/// Pause the guest and dump its RAM (from `base`) into `path`. The file is made first,
/// readable by the bench's user alone: QEMU keeps the mode of a file that exists, and
/// would otherwise create it under the umask, where another local user could read the
/// guest's secrets.
pub fn dump(qmp: &QmpClient, path: &Path, base: u64, memory_mib: u32, what: &str) -> Result<(), DumpError> {
    use std::os::unix::fs::OpenOptionsExt;
    qmp.execute("stop", None, STOP_BOUND).map_err(|source| DumpError::Pause { what: what.into(), source })?;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| DumpError::Create { what: what.into(), path: path.to_owned(), source })?;
    let size = u64::from(memory_mib) << 20;
    let arguments = serde_json::json!({ "val": base, "size": size, "filename": path.display().to_string() });
    qmp.execute("pmemsave", Some(arguments), DUMP_BOUND)
        .map_err(|source| DumpError::Dump { what: what.into(), source })?;
    Ok(())
}
