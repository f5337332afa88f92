//! `ram_forbid` (docs/ram.md): once a boot has passed, the guest paused, its RAM dumped
//! and scanned; a string found fails the boot, naming its physical address and quoting
//! the bytes around it. A dump that a find is about stays as evidence; any other is
//! deleted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use testbench_case::Arch;
use testbench_ram::Needle;

use super::ram::{dump, ram_base, DumpError, RAM_DUMP};
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
        let checked = check(qmp, passing.dir, self.arch, self.memory_mib, &self.needles);
        Ok(Evidence::note(checked.map_err(|e| Broken(e.to_string()))?))
    }

    fn finish(&mut self, _ended: &Ended) -> Result<Evidence, Broken> {
        Ok(Evidence::default())
    }
}

/// Why the RAM scan fails the boot: a needle found, or a dump that could not be taken or
/// read whole.
#[derive(Debug, thiserror::Error)]
pub enum RamForbidError {
    #[error(transparent)]
    Dump(#[from] DumpError),
    #[error("ram_forbid: {}: {source}", .path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("ram_forbid: reading {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// A needle (its label and text) at a physical address, with the bytes around it.
    #[error("{label} {text:?} is in the guest's RAM at physical address {address:#x}: {quote} (the dump: {RAM_DUMP})")]
    Found { label: String, text: String, address: u64, quote: String },
    #[error(
        "ram_forbid: the dump holds {bytes} bytes, not the {size} of the guest's {memory_mib} MiB (the dump: {RAM_DUMP})"
    )]
    Short { bytes: u64, size: u64, memory_mib: u32 },
}

/// Pause the guest, dump its RAM and scan it: the note for the result when no needle is
/// there, or the failure naming the first that is.
fn check(
    qmp: &QmpClient,
    dir: &Path,
    arch: testbench_case::Arch,
    memory_mib: u32,
    needles: &[Needle],
) -> Result<String, RamForbidError> {
    let started = Instant::now();
    let path = dir.join(RAM_DUMP);
    let size = u64::from(memory_mib) << 20;
    let base = ram_base(arch);
    dump(qmp, &path, base, memory_mib, "ram_forbid")?;
    let dumped = started.elapsed();
    let file = std::fs::File::open(&path).map_err(|source| RamForbidError::Open { path: path.clone(), source })?;
    let scanned = testbench_ram::scan(std::io::BufReader::with_capacity(0, file), base, needles)
        .map_err(|source| RamForbidError::Read { path: path.clone(), source })?;
    if let Some(found) = scanned.found.first() {
        let needle = &needles[found.needle];
        return Err(RamForbidError::Found {
            label: needle.label.clone(),
            text: String::from_utf8_lossy(&needle.bytes).into_owned(),
            address: found.address,
            quote: found.quote(&needle.bytes).to_string(),
        });
    }
    if scanned.bytes != size {
        return Err(RamForbidError::Short { bytes: scanned.bytes, size, memory_mib });
    }
    let _ = std::fs::remove_file(&path);
    Ok(format!(
        "ram: none of {} ram_forbid string(s) in the guest's {memory_mib} MiB (dumped in {:.2}s, scanned in {:.2}s)",
        needles.len(),
        dumped.as_secs_f64(),
        (started.elapsed() - dumped).as_secs_f64()
    ))
}
