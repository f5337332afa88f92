//! A failure's class (docs/history.md), from a second boot of it: a boot that failed
//! (and whose failure is not what its `must_fail` wants) is booted once more, alone, with
//! the same seed, into `<its directory>.again`; its result stays the first boot's (a
//! rerun never hides a failure), and the second boot says what kind of failure it was:
//!
//! - *deterministic*: under icount with a pinned seed, the second boot failed too, and
//!   its console is the first's byte for byte;
//! - *host-dependent*: the second boot passed (on either clock);
//! - no class: it failed again on the host's clock (that proves no determinism), or
//!   with other console bytes, or could not boot; a note says which.
//!
//! A boot already booted again alone (`alone.rs`) is classed from that second boot: it
//! passed alone (host-dependent), or, under icount with a pinned seed, it failed alone
//! with the first one's console bytes (deterministic). The third class, the bench's or
//! the host's, comes from the verdict itself (`Class::of_verdict`): no boot decides it.

use std::path::{Path, PathBuf};

use super::verdicts::Booted;
use crate::boot::BootSpec;
use crate::verdict::Class;

/// Where a failure's second boot is kept: beside its directory, `.again` appended.
pub fn again_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".again");
    dir.with_file_name(name)
}

/// Whether a boot's console repeats: under icount, with a seed the bench pinned.
fn repeats(spec: &BootSpec) -> bool {
    spec.machine.icount.is_some() && spec.machine.seed.is_some()
}

/// Whether two boots' consoles are the same bytes: whole, or through line `through`
/// (from 1) when the failure is that line's (the bench ends a boot at a forbidden line,
/// and how much more it read by then is the host's timing).
fn same_console(a: &Path, b: &Path, through: Option<u64>) -> bool {
    let read = |dir: &Path| {
        let bytes = std::fs::read(dir.join("console.log")).ok()?;
        let Some(lines) = through else { return Some(bytes) };
        let end = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(lines.saturating_sub(1) as usize);
        Some(end.map_or(bytes.clone(), |(i, _)| bytes[..=i].to_vec()))
    };
    matches!((read(a), read(b)), (Some(a), Some(b)) if a == b)
}

/// The console line a failure is (a forbidden line, a `FAIL` line), when one line is it.
fn failure_line(booted: &Booted) -> Option<u64> {
    match &booted.result {
        Ok(Err(failed)) => failed.place.as_ref().map(|place| place.line),
        _ => None,
    }
}

/// `first`, classed by a second boot of it when it failed in a way its `must_fail` does
/// not take (the module's docs), which `boot_alone` boots with nothing beside it (or says
/// why it could not). A replay or a recording is never booted again.
pub fn again(
    spec: BootSpec,
    boot_alone: impl FnOnce(BootSpec) -> Result<Booted, String>,
    mut first: Booted,
    must_fail: Option<&regex::Regex>,
) -> Booted {
    let Ok(Err(failed)) = &first.result else { return first };
    if must_fail.is_some_and(|pattern| pattern.is_match(&failed.reason)) || spec.machine.rr.is_some() {
        return first;
    }
    let (dir, repeats, seed) = (spec.dir.clone(), repeats(&spec), spec.machine.seed);
    let (kind, through) = (failed.kind, failure_line(&first));
    let again = BootSpec { dir: again_dir(&spec.dir), first_boot: None, ..spec };
    let again_dir = again.dir.clone();
    let _ = std::fs::remove_dir_all(&again_dir);
    let second = match boot_alone(again) {
        Ok(second) => second,
        Err(why) => {
            first.notes.push(format!("not booted again to class the failure: {why}"));
            return first;
        }
    };
    let seed = seed.map_or("no seed: QEMU seeded itself".to_string(), |s| format!("the same seed, {s}"));
    let (class, how) = match &second.result {
        Ok(Ok(())) => (Some(Class::HostDependent), "passed"),
        Ok(Err(again)) if repeats && again.kind == kind && same_console(&dir, &again_dir, through) => {
            (Some(Class::Deterministic), "failed with the same console bytes under icount")
        }
        Ok(Err(_)) if repeats => (None, "failed with other console bytes under icount: not classed"),
        Ok(Err(_)) => (None, "failed on the host's clock too: not classed (the host's clock proves no determinism)"),
        Err(_) => (None, "could not boot: not classed"),
    };
    let class_word = class.map(|c| format!(": {}", c.name())).unwrap_or_default();
    first.notes.push(format!("booted again alone ({seed}): it {how}{class_word} (its files: {})", again_dir.display()));
    first.class = class;
    first
}

/// The class of a boot booted again alone after it failed beside other work (`alone`,
/// the second boot, now in `dir`; the first's files in `aside`).
pub fn after_alone(alone: &Booted, dir: &Path, aside: &Path, repeats: bool, must_fail: bool) -> Option<Class> {
    match &alone.result {
        Ok(Ok(())) if !must_fail => Some(Class::HostDependent),
        Ok(Err(_)) if repeats && same_console(aside, dir, failure_line(alone)) => Some(Class::Deterministic),
        _ => None,
    }
}

/// Whether `spec`'s console repeats, for `after_alone`.
pub fn console_repeats(spec: &BootSpec) -> bool {
    repeats(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_boot_is_kept_beside_the_first_and_consoles_compare_by_bytes() {
        assert_eq!(again_dir(Path::new("/r/c/rv64-smp1")), PathBuf::from("/r/c/rv64-smp1.again"));
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
        for (dir, text) in [(&a, "boot\npanic: x\n"), (&b, "boot\npanic: x\n"), (&c, "boot\npanic: y\n")] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("console.log"), text).unwrap();
        }
        assert!(same_console(&a, &b, None));
        assert!(!same_console(&a, &c, None));
        assert!(same_console(&a, &c, Some(1)), "the same through the failure's line");
        assert!(!same_console(&a, &c, Some(2)));
        assert!(!same_console(&a, &tmp.path().join("missing"), None), "a console that is not there is not the same");
        let failed = Booted {
            result: Ok(Err(crate::verdict::Failed::new(crate::verdict::FailKind::TimedOut, "timed out"))),
            console: None,
            notes: Vec::new(),
            deadline: true,
            class: None,
        };
        assert_eq!(after_alone(&failed, &a, &b, true, false), Some(Class::Deterministic));
        assert_eq!(after_alone(&failed, &a, &c, true, false), None);
        assert_eq!(after_alone(&failed, &a, &b, false, false), None, "on the host's clock: no class");
        let passed = Booted { result: Ok(Ok(())), ..failed };
        assert_eq!(after_alone(&passed, &a, &c, false, false), Some(Class::HostDependent));
        assert_eq!(after_alone(&passed, &a, &c, false, true), None, "a self-check that passed alone failed");
    }
}
