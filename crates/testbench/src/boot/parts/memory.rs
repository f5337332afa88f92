//! `memory = true` (docs/ram.md): once a boot has passed, every program's painted stack
//! and heap record measured in the guest's RAM, the dump taken again (the guest let run
//! on between) while a program's record is not there yet, up to the boot's deadline;
//! each size judged against twice its peak.

use std::path::Path;
use std::time::{Duration, Instant};

use super::ram::{dump, RAM_DUMP, STOP_BOUND, VIRT_RAM_BASE};
use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec, Passing};
use crate::qemu::qmp::QmpClient;

/// `memory = true` for one boot: the programs whose stacks and heaps are measured.
#[derive(Clone, Debug)]
struct MemoryCheck {
    /// Each program of the bundle, by its entry name and tag.
    pub declared: Vec<testbench_ram::footprint::Declared>,
    /// `heap_fits = true`.
    pub heap_fits: bool,
}

impl MemoryCheck {
    /// The check of a bundle's programs (their entry names).
    fn new(names: impl IntoIterator<Item = String>, heap_fits: bool) -> MemoryCheck {
        let declared = names.into_iter().map(|name| testbench_ram::footprint::Declared::new(&name)).collect();
        MemoryCheck { declared, heap_fits }
    }
}

/// `memory = true`, planned once: the bundle's programs, the guest's RAM size.
pub struct Memory {
    check: MemoryCheck,
    memory_mib: u32,
}

impl Memory {
    /// The check of a bundle's programs (their entry names) in a guest of `memory_mib`.
    pub fn new(names: impl IntoIterator<Item = String>, heap_fits: bool, memory_mib: u32) -> Memory {
        Memory { check: MemoryCheck::new(names, heap_fits), memory_mib }
    }
}

impl PartSpec for Memory {
    fn name(&self) -> String {
        "memory".into()
    }

    fn attach(&self, _place: &BootPlace) -> Result<Attached, AttachError> {
        let part = Measure { check: self.check.clone(), memory_mib: self.memory_mib };
        Ok(Attached { parts: vec![Box::new(part)], ..Attached::default() })
    }
}

/// `memory = true` in one boot.
struct Measure {
    check: MemoryCheck,
    memory_mib: u32,
}

impl Part for Measure {
    fn on_pass(&mut self, passing: &Passing) -> Result<Evidence, Broken> {
        let qmp = passing.qmp.ok_or_else(|| Broken("memory: no QMP connection to read the guest's RAM over".into()))?;
        let notes = measure_all(qmp, passing.dir, self.memory_mib, &self.check, passing.deadline)?;
        Ok(Evidence::notes(notes))
    }

    fn finish(&mut self, _ended: &Ended) -> Result<Evidence, Broken> {
        Ok(Evidence::default())
    }
}

/// How long the guest runs on between two dumps that miss a program.
const RETAKE_PAUSE: Duration = Duration::from_millis(500);

/// Measure every declared program's stack and heap in the guest's RAM: the notes for the
/// result (a line per stack and heap), or the failure. A dump missing a program is taken
/// again, the guest running on between, until every program is there or `deadline`.
fn measure_all(
    qmp: &QmpClient,
    dir: &Path,
    memory_mib: u32,
    check: &MemoryCheck,
    deadline: Instant,
) -> Result<Vec<String>, String> {
    use testbench_ram::footprint::measure;
    let started = Instant::now();
    let path = dir.join(RAM_DUMP);
    let size = u64::from(memory_mib) << 20;
    let mut dumps = 0;
    let measured = loop {
        dump(qmp, &path, VIRT_RAM_BASE, memory_mib, "memory").map_err(|e| e.to_string())?;
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
    judge_sizes(&measured, check, &mut notes)?;
    Ok(notes)
}

/// Each program's stack and heap judged against twice its peak (or `heap_fits`): a note
/// a size, or the failures together.
fn judge_sizes(
    measured: &testbench_ram::footprint::Measured,
    check: &MemoryCheck,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    use testbench_ram::footprint::{heap_fits, stack_fits};
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
    Ok(())
}
