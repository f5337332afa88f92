//! `ram_forbid` (docs/ram.md): once a boot has passed, the guest paused, its RAM dumped
//! and scanned; a string found fails the boot, naming its physical address and quoting
//! the bytes around it. A dump that a find is about stays as evidence; any other is
//! deleted.

use std::path::Path;
use std::time::Instant;

use testbench_case::Arch;
use testbench_ram::Needle;

use super::ram::{dump, ram_base, RAM_DUMP};
use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec, Passing};
use crate::qemu::qmp::QmpClient;

/// `ram_forbid`, planned once: the strings, the width (where its RAM starts), its size.
pub struct RamForbid {
    needles: Vec<Needle>,
    arch: Arch,
    memory_mib: u32,
}

impl RamForbid {
    /// The case's `ram_forbid` strings (label, bytes) on `arch` with `memory_mib` of RAM.
    pub fn new(strings: &[(String, Vec<u8>)], arch: Arch, memory_mib: u32) -> RamForbid {
        let needles =
            strings.iter().map(|(label, bytes)| Needle { label: label.clone(), bytes: bytes.clone() }).collect();
        RamForbid { needles, arch, memory_mib }
    }
}

impl PartSpec for RamForbid {
    fn name(&self) -> String {
        "ram_forbid".into()
    }

    fn attach(&self, _place: &BootPlace) -> Result<Attached, AttachError> {
        let part = Scan { needles: self.needles.clone(), arch: self.arch, memory_mib: self.memory_mib };
        Ok(Attached { parts: vec![Box::new(part)], ..Attached::default() })
    }
}

/// `ram_forbid` in one boot.
struct Scan {
    needles: Vec<Needle>,
    arch: Arch,
    memory_mib: u32,
}

impl Part for Scan {
    fn on_pass(&mut self, passing: &Passing) -> Result<Evidence, Broken> {
        let qmp =
            passing.qmp.ok_or_else(|| Broken("ram_forbid: no QMP connection to read the guest's RAM over".into()))?;
        Ok(Evidence::note(check(qmp, passing.dir, self.arch, self.memory_mib, &self.needles)?))
    }

    fn finish(&mut self, _ended: &Ended) -> Result<Evidence, Broken> {
        Ok(Evidence::default())
    }
}

/// Pause the guest, dump its RAM and scan it: the note for the result when no needle is
/// there, or the failure naming the first that is.
fn check(
    qmp: &QmpClient,
    dir: &Path,
    arch: testbench_case::Arch,
    memory_mib: u32,
    needles: &[Needle],
) -> Result<String, String> {
    let started = Instant::now();
    let path = dir.join(RAM_DUMP);
    let size = u64::from(memory_mib) << 20;
    let base = ram_base(arch);
    dump(qmp, &path, base, memory_mib, "ram_forbid")?;
    let dumped = started.elapsed();
    let file = std::fs::File::open(&path).map_err(|e| format!("ram_forbid: {}: {e}", path.display()))?;
    let scanned = testbench_ram::scan(std::io::BufReader::with_capacity(0, file), base, needles)
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
