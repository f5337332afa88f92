//! The guest's RAM at the verdict: `memory = true` and `ram_forbid` (docs/ram.md). Once
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

use std::path::Path;
use std::time::{Duration, Instant};

use testbench_ram::Needle;

use super::qmp::QmpClient;

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
const STOP_BOUND: Duration = Duration::from_secs(10);
/// Writing a few hundred MiB to a file: seconds; a minute is a QEMU that is stuck.
const DUMP_BOUND: Duration = Duration::from_secs(60);

/// `memory = true` for one boot: the programs whose stacks and heaps are measured.
#[derive(Clone, Debug)]
pub struct MemoryCheck {
    /// Each program of the bundle, by its entry name and tag.
    pub declared: Vec<testbench_ram::footprint::Declared>,
    /// `heap_fits = true`.
    pub heap_fits: bool,
}

impl MemoryCheck {
    /// The check of a bundle's programs (their entry names).
    pub fn new(names: impl IntoIterator<Item = String>, heap_fits: bool) -> MemoryCheck {
        let declared = names.into_iter().map(|name| testbench_ram::footprint::Declared::new(&name)).collect();
        MemoryCheck { declared, heap_fits }
    }
}

/// How long the guest runs on between two dumps that miss a program.
const RETAKE_PAUSE: Duration = Duration::from_millis(500);

/// Pause the guest and dump its RAM (from `base`) into `path`. The file is made first,
/// readable by the bench's user alone: QEMU keeps the mode of a file that exists, and
/// would otherwise create it under the umask, where another local user could read the
/// guest's secrets.
fn dump(qmp: &QmpClient, path: &Path, base: u64, memory_mib: u32, what: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    qmp.execute("stop", None, STOP_BOUND).map_err(|e| format!("{what}: pausing the guest: {e}"))?;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{what}: creating {}: {e}", path.display()))?;
    let size = u64::from(memory_mib) << 20;
    let arguments = serde_json::json!({ "val": base, "size": size, "filename": path.display().to_string() });
    qmp.execute("pmemsave", Some(arguments), DUMP_BOUND).map_err(|e| format!("{what}: dumping the RAM: {e}"))?;
    Ok(())
}

/// Measure every declared program's stack and heap in the guest's RAM: the notes for the
/// result (a line per stack and heap), or the failure. A dump missing a program is taken
/// again, the guest running on between, until every program is there or `deadline`.
pub fn memory(
    qmp: &QmpClient,
    dir: &Path,
    memory_mib: u32,
    check: &MemoryCheck,
    deadline: Instant,
) -> Result<Vec<String>, String> {
    use testbench_ram::footprint::{heap_fits, measure, stack_fits};
    let started = Instant::now();
    let path = dir.join(RAM_DUMP);
    let size = u64::from(memory_mib) << 20;
    let mut dumps = 0;
    let measured = loop {
        dump(qmp, &path, VIRT_RAM_BASE, memory_mib, "memory")?;
        dumps += 1;
        let file = std::fs::File::open(&path).map_err(|e| format!("memory: {}: {e}", path.display()))?;
        let measured = measure(std::io::BufReader::with_capacity(0, file), VIRT_RAM_BASE, &check.declared)
            .map_err(|e| format!("memory: reading {} (kept): {e}", path.display()))?;
        if measured.bytes != size {
            return Err(format!(
                "memory: the dump holds {} bytes, not the {size} of the guest's {memory_mib} MiB (the dump: {RAM_DUMP})",
                measured.bytes
            ));
        }
        if let Some(refusal) = measured.refusals.first() {
            return Err(format!("memory: {refusal} (the dump: {RAM_DUMP})"));
        }
        let missing: Vec<String> = measured
            .programs
            .iter()
            .filter_map(|p| match (&p.stack, &p.heap) {
                (Some(_), Some(_)) => None,
                (None, None) => Some(format!("{} (no stack, no heap record: never started?)", p.name)),
                (None, Some(_)) => Some(format!("{} (no painted stack)", p.name)),
                (Some(_), None) => Some(format!("{} (no heap record)", p.name)),
            })
            .collect();
        if missing.is_empty() {
            break measured;
        }
        if Instant::now() + RETAKE_PAUSE >= deadline {
            return Err(format!(
                "memory: dumped {dumps} time(s) over {:.1}s to the deadline; still missing {} (the dump: {RAM_DUMP})",
                started.elapsed().as_secs_f64(),
                missing.join(", ")
            ));
        }
        let _ = std::fs::remove_file(&path);
        qmp.execute("cont", None, STOP_BOUND).map_err(|e| format!("memory: resuming the guest: {e}"))?;
        std::thread::sleep(RETAKE_PAUSE);
    };
    let _ = std::fs::remove_file(&path);
    let mut notes = Vec::new();
    if dumps > 1 {
        notes.push(format!(
            "memory: dumped {dumps} times, waited {:.1}s for every program",
            started.elapsed().as_secs_f64()
        ));
    }
    let mut failures = Vec::new();
    for program in &measured.programs {
        let (Some(stack), Some(heap)) = (&program.stack, &program.heap) else { continue };
        let line = format!("stack {} {} bytes of {} pages", program.name, stack.peak_bytes, stack.pages);
        if !stack_fits(stack) {
            failures.push(format!("{line}: {} pages are less than twice the peak", stack.pages));
        }
        notes.push(line);
        let line = if heap.cap == 0 {
            format!("heap {} none", program.name)
        } else {
            format!("heap {} {} of {} pages", program.name, heap.peak, heap.cap)
        };
        if !heap_fits(heap.cap, heap.peak, check.heap_fits) {
            failures.push(if check.heap_fits {
                format!("{line}: the peak leaves less than an eighth of the cap unused (heap_fits)")
            } else {
                format!("{line}: a cap of {} pages is less than twice the peak", heap.cap)
            });
        }
        notes.push(line);
    }
    if !failures.is_empty() {
        return Err(format!("memory: {}", failures.join("; ")));
    }
    Ok(notes)
}

/// Pause the guest, dump its RAM and scan it: the note for the result when no needle is
/// there, or the failure naming the first that is.
pub fn check(
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
