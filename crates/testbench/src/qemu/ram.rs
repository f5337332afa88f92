//! The guest's RAM at the verdict: `ram_forbid` (docs/ram.md). Once a boot has passed on
//! its console (and its sessions), and before QEMU is stopped for good, the bench pauses
//! the guest over QMP (`stop`), has QEMU write the machine's RAM into the boot's
//! directory (`pmemsave` from the virt machine's RAM base, `memory_mib` long) and scans
//! it with `testbench-ram`. A string found fails the boot, naming its physical address
//! and quoting the bytes around it, and the dump stays as evidence; a clean dump is
//! deleted.

use std::path::Path;
use std::time::{Duration, Instant};

use testbench_ram::Needle;

use super::qmp::QmpClient;

/// Where the `virt` machine's RAM starts, on both widths.
pub const VIRT_RAM_BASE: u64 = 0x8000_0000;
/// The dump's file in the boot's directory.
pub const RAM_DUMP: &str = "ram.bin";
/// `stop` answers at once.
const STOP_BOUND: Duration = Duration::from_secs(10);
/// Writing a few hundred MiB to a file: seconds; a minute is a QEMU that is stuck.
const DUMP_BOUND: Duration = Duration::from_secs(60);

/// Pause the guest, dump its RAM and scan it: the note for the result when no needle is
/// there, or the failure naming the first that is.
pub fn check(qmp: &QmpClient, dir: &Path, memory_mib: u32, needles: &[Needle]) -> Result<String, String> {
    let started = Instant::now();
    qmp.execute("stop", None, STOP_BOUND).map_err(|e| format!("ram_forbid: pausing the guest: {e}"))?;
    let path = dir.join(RAM_DUMP);
    let size = u64::from(memory_mib) << 20;
    let arguments = serde_json::json!({ "val": VIRT_RAM_BASE, "size": size, "filename": path.display().to_string() });
    qmp.execute("pmemsave", Some(arguments), DUMP_BOUND).map_err(|e| format!("ram_forbid: dumping the RAM: {e}"))?;
    let dumped = started.elapsed();
    let file = std::fs::File::open(&path).map_err(|e| format!("ram_forbid: {}: {e}", path.display()))?;
    let scanned = testbench_ram::scan(std::io::BufReader::with_capacity(0, file), VIRT_RAM_BASE, needles)
        .map_err(|e| format!("ram_forbid: reading {}: {e}", path.display()))?;
    if let Some(found) = scanned.found.first() {
        let needle = &needles[found.needle];
        return Err(format!(
            "{} {:?} is in the guest's RAM at physical address {:#x}: {} (the dump: {RAM_DUMP})",
            needle.label,
            String::from_utf8_lossy(&needle.bytes),
            found.address,
            found.quote(&needle.bytes)
        ));
    }
    if scanned.bytes != size {
        return Err(format!(
            "ram_forbid: the dump holds {} bytes, not the {size} of the guest's {memory_mib} MiB (the dump: {RAM_DUMP})",
            scanned.bytes
        ));
    }
    let _ = std::fs::remove_file(&path);
    Ok(format!(
        "ram: none of {} ram_forbid string(s) in the guest's {memory_mib} MiB (dumped in {:.2}s, scanned in {:.2}s)",
        needles.len(),
        dumped.as_secs_f64(),
        (started.elapsed() - dumped).as_secs_f64()
    ))
}
