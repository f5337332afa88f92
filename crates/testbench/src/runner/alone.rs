//! Rerun alone: a boot that failed while another boot of the run ran beside it
//! (`--jobs` above 1) may have failed for the other work, and has no verdict yet when
//! its failure is one the host's load can cause:
//!
//! - a deadline that passed (an expect or the power-off never came), on any clock: the
//!   bench's `timeout_secs` is always the host's;
//! - any failure of a boot on the host's clock (no `icount`): the guest's every wait,
//!   and every bound the case holds a session or a dial to, stretch with the load. A
//!   self-check (`must_fail`) that passed there is such a failure too.
//!
//! A boot under icount measures in guest time, so its other failures are verdicts
//! wherever it ran. The bench boots such a boot again with nothing else running, and its
//! result is that second boot's, with a note that says what happened to the first
//! ("timed out beside other work; passed alone", "failed beside other work on the
//! host's clock; failed alone too") and where the first one's files are. A boot that
//! failed with the machine to itself is not rerun; nor is a self-check whose expected
//! failure is what it got (`must_fail` matching the reason): that is its evidence.
//!
//! Every boot holds the run's gate shared while it runs; a rerun takes it exclusively,
//! so it waits for the boots running then and holds back the ones not started (a
//! waiting writer blocks new readers in std's lock on Linux, so a stream of boots does
//! not starve it). Whether another boot ran beside one is known exactly: each boot
//! joins the set of running boots when it starts, and marks itself and every boot in
//! the set as having run beside another.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use super::other_benches::{LockError, OtherBenches};
use super::prepare::BootJob;
use super::verdicts::{boot_once_or_twice, Booted};
use crate::case_result::Blocked;
use crate::rundir::first_attempt_dir;

/// The boots of one run, as far as running beside each other goes.
#[derive(Default)]
pub struct Overlap {
    state: Mutex<State>,
    gate: RwLock<()>,
    /// Other benches' boots under q, when this run shares `qemu` with them.
    others: Option<OtherBenches>,
}

#[derive(Default)]
struct State {
    running: BTreeSet<usize>,
    beside: BTreeSet<usize>,
}

impl Overlap {
    /// The boots of a run; with `others`, beside other benches' boots too.
    pub fn new(others: Option<OtherBenches>) -> Overlap {
        Overlap { others, ..Overlap::default() }
    }

    /// Run boot `index` among the others: the result, and whether another boot ran at
    /// any moment while it did (always, under q beside other benches: no bench can know
    /// that none did). A lock file that cannot be taken is said in the result.
    fn shared<R>(&self, index: usize, work: impl FnOnce() -> R) -> (Result<R, LockError>, bool) {
        let _shared = self.gate.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _others = match self.others.as_ref().map(OtherBenches::boot).transpose() {
            Ok(held) => held,
            Err(why) => return (Err(why), false),
        };
        {
            let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if !state.running.is_empty() {
                let others: Vec<usize> = state.running.iter().copied().collect();
                state.beside.extend(others);
                state.beside.insert(index);
            }
            state.running.insert(index);
        }
        let result = work();
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.running.remove(&index);
        (Ok(result), state.beside.remove(&index) || self.others.is_some())
    }

    /// Run `work` with no boot running beside it, of this run or, under q, of another
    /// bench.
    fn alone<R>(&self, work: impl FnOnce() -> R) -> Result<R, LockError> {
        let _alone = self.gate.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _others = self.others.as_ref().map(OtherBenches::alone).transpose()?;
        Ok(work())
    }
}

/// Boot planned boot `index`, and boot it again alone when it failed beside other boots
/// in a way the load can cause (the module's docs) and its failure is not what its
/// `must_fail` wants.
pub fn boot(
    overlap: &Overlap,
    index: usize,
    job: Result<BootJob, Blocked>,
    root: &Path,
    must_fail: Option<&regex::Regex>,
) -> Booted {
    let (spec, repeat_exactly) = match job {
        Err(blocked) => return Booted::blocked(blocked),
        Ok(job) => job,
    };
    let host_clock = spec.machine.icount.is_none();
    let (first, beside) = overlap.shared(index, || boot_once_or_twice(spec.clone(), root, repeat_exactly));
    let first = match first {
        Ok(first) => first,
        Err(why) => return Booted::blocked(Blocked::Trouble(format!("the bench could not boot it: {why}"))),
    };
    let reason = match &first.result {
        Ok(Err(reason)) if beside && (first.deadline || host_clock) => reason.reason.clone(),
        // A self-check that passed fails as a case; on the host's clock the load may
        // have kept from it what it must see, like any other failure.
        Ok(Ok(())) if beside && host_clock && must_fail.is_some() => "it passed, and must fail".to_string(),
        // Not a failure the load can cause: booted again only to class it.
        _ => {
            let boot_alone =
                |spec| overlap.alone(|| boot_once_or_twice(spec, root, repeat_exactly)).map_err(|why| why.to_string());
            return super::classify::again(spec, boot_alone, first, must_fail);
        }
    };
    let what =
        if first.deadline { "timed out beside other work" } else { "failed beside other work on the host's clock" };
    if must_fail.is_some_and(|pattern| pattern.is_match(&reason)) {
        return first;
    }
    let aside = first_attempt_dir(&spec.dir);
    let (dir, repeats) = (spec.dir.clone(), super::classify::console_repeats(&spec));
    let _ = std::fs::remove_dir_all(&aside);
    if let Err(error) = std::fs::rename(&spec.dir, &aside) {
        let mut first = first;
        first.notes.push(format!(
            "{what}, and not rerun alone: keeping its files ({} to {}) failed: {error}",
            spec.dir.display(),
            aside.display()
        ));
        return first;
    }
    let mut alone = match overlap.alone(|| boot_once_or_twice(spec, root, repeat_exactly)) {
        Ok(alone) => alone,
        Err(why) => {
            let mut first = first;
            first.notes.push(format!("{what}, and not rerun alone: {why} (its files: {})", aside.display()));
            return first;
        }
    };
    let how = match (&alone.result, must_fail) {
        (Ok(Ok(())), None) => "passed alone",
        (Ok(Ok(())), Some(_)) => "passed alone too, and must fail",
        (Ok(Err(reason)), Some(pattern)) if pattern.is_match(&reason.reason) => "failed alone, as it must",
        (Ok(Err(_)), _) if alone.deadline => "timed out alone too",
        (Ok(Err(_)), _) => "failed alone too",
        (Err(_), _) => "could not boot alone",
    };
    let mut notes = vec![format!("{what}; {how} (the first boot: {reason}; its files: {})", aside.display())];
    notes.extend(first.notes.into_iter().map(|note| format!("beside other work: {note}")));
    notes.append(&mut alone.notes);
    alone.notes = notes;
    alone.class = super::classify::after_alone(&alone, &dir, &aside, repeats, must_fail.is_some());
    alone
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn a_boot_knows_whether_another_ran_beside_it_and_alone_runs_with_none() {
        let overlap = Overlap::default();
        // One after another: never beside.
        assert!(!overlap.shared(0, || ()).1);
        assert!(!overlap.shared(1, || ()).1);
        // Two at once: both beside, whichever ends first.
        let running = AtomicUsize::new(0);
        let most_alone = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let a = scope.spawn(|| overlap.shared(2, || std::thread::sleep(Duration::from_millis(100))).1);
            std::thread::sleep(Duration::from_millis(20));
            let b = scope.spawn(|| overlap.shared(3, || std::thread::sleep(Duration::from_millis(10))).1);
            assert!(b.join().unwrap(), "the second saw the first running");
            assert!(a.join().unwrap(), "the first was marked by the second");
            // A rerun alone waits for the running boot and holds the next back.
            let long = scope.spawn(|| {
                overlap.shared(4, || {
                    running.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(80));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            });
            std::thread::sleep(Duration::from_millis(20));
            overlap
                .alone(|| {
                    most_alone.fetch_max(running.load(Ordering::SeqCst), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                    most_alone.fetch_max(running.load(Ordering::SeqCst), Ordering::SeqCst);
                })
                .expect("no others: nothing to lock");
            long.join().unwrap().0.expect("no others: nothing to lock");
        });
        assert_eq!(most_alone.load(Ordering::SeqCst), 0, "nothing ran beside the boot run alone");
    }

    #[test]
    fn the_first_attempt_is_kept_beside_the_boots_directory() {
        assert_eq!(first_attempt_dir(Path::new("/r/case/rv64-smp1")), PathBuf::from("/r/case/rv64-smp1.beside-others"));
    }
}
