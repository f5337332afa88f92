//! The parts of one running boot, and the phases they are told of: which phase the boot
//! is in, who holds the verdict, whose trigger fired, and every part's evidence at the
//! end.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use testbench_judge::{Failure, FailureKind, Verdict};

use super::part::{Ended, Live, Part, Phase};

/// The parts attached to one boot, with the judge's triggers mapped back to them.
pub struct LiveParts {
    pub parts: Vec<Box<dyn Part>>,
    /// For each of the judge's triggers past the case's own: (part, its trigger).
    triggers: Vec<(usize, usize)>,
    /// How many triggers are the case's own (they come first).
    own_triggers: usize,
    /// Set when the boot ends: the parts' threads stop waiting.
    pub stop: Arc<AtomicBool>,
    /// The last phase every part has been told of.
    told: Option<Phase>,
    /// How many holders have released the verdict.
    released: usize,
}

impl LiveParts {
    /// The parts of one boot; their triggers join the judge's, and the judge holds its
    /// verdict when any part holds it.
    pub fn new(parts: Vec<Box<dyn Part>>, judge: &mut testbench_judge::Config) -> LiveParts {
        let own_triggers = judge.triggers.len();
        let mut triggers = Vec::new();
        for (index, part) in parts.iter().enumerate() {
            for (which, pattern) in part.triggers().into_iter().enumerate() {
                judge.triggers.push(pattern);
                triggers.push((index, which));
            }
        }
        let parts = LiveParts { parts, triggers, own_triggers, stop: Arc::default(), told: None, released: 0 };
        judge.hold |= parts.holders_from(Phase::Released) > 0;
        parts
    }

    /// How many parts hold the verdict from `phase` or an earlier one.
    fn holders_from(&self, phase: Phase) -> usize {
        self.parts.iter().filter(|p| p.holds_from().is_some_and(|from| from <= phase)).count()
    }

    /// Tell every part of the phases the boot has reached since it was last asked: the
    /// guest started; every expect met (`expects_done`); the holders from the expects
    /// on all released.
    pub fn advance(&mut self, expects_done: bool, live: &Live) {
        let early_released = self.released >= self.holders_from(Phase::ExpectsMet);
        if let Some(phase) = next_phase(self.told, expects_done, early_released) {
            self.told = Some(phase);
            for part in &mut self.parts {
                part.on(phase, live);
            }
            // A phase reached may let the next one come at once (no holder waits).
            self.advance(expects_done, live);
        }
    }

    /// The judge's triggers that fired on a console chunk: each of the parts' own to its part.
    pub fn triggered(&mut self, fired: &[usize], live: &Live) {
        for fired in fired.iter().filter_map(|t| t.checked_sub(self.own_triggers)) {
            let (part, which) = self.triggers[fired];
            self.parts[part].triggered(which, live);
        }
    }

    /// A holder released the verdict: whether every holder now has.
    pub fn release(&mut self) -> bool {
        self.released += 1;
        self.released == self.holders_from(Phase::Released)
    }

    /// Every part's evidence once QEMU has ended, in order: a part's finding fails a boot
    /// that passed so far; the notes either way.
    pub fn finish(
        &mut self,
        verdict: Verdict,
        at: Duration,
        place: (&Path, &Path),
        notes: &mut Vec<String>,
    ) -> Verdict {
        self.stop.store(true, Ordering::SeqCst);
        let (dir, root) = place;
        let mut verdict = verdict;
        for part in &mut self.parts {
            let failure = match &verdict {
                Verdict::Pass => None,
                Verdict::Fail(failure) => Some(failure.message.as_str()),
            };
            let ended = Ended { dir, root, passed: failure.is_none(), failure };
            match part.finish(&ended) {
                Ok(evidence) => notes.extend(evidence.notes),
                Err(broken) => verdict = Verdict::Fail(Failure::new(FailureKind::Device, at, broken.0)),
            }
        }
        // A part's failure that is already the verdict (it reported it while the boot ran)
        // is not repeated among the notes.
        if let Verdict::Fail(failure) = &verdict {
            notes.retain(|note| *note != failure.message);
        }
        verdict
    }
}

/// The phase a boot reaches next, from the last one told: the guest's start first; every
/// expect met; then the release of every part that held the verdict from the expects on
/// (`early_released`). None: nothing new yet.
fn next_phase(told: Option<Phase>, expects_done: bool, early_released: bool) -> Option<Phase> {
    match told {
        None => Some(Phase::Started),
        Some(Phase::Started) if expects_done => Some(Phase::ExpectsMet),
        Some(Phase::ExpectsMet) if early_released => Some(Phase::Released),
        _ => None,
    }
}

impl Drop for LiveParts {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The phases come once each, in order, and each waits for what it names.
    #[test]
    fn phases_come_in_order_each_when_its_condition_holds() {
        assert_eq!(next_phase(None, false, false), Some(Phase::Started));
        assert_eq!(next_phase(Some(Phase::Started), false, true), None, "the expects first");
        assert_eq!(next_phase(Some(Phase::Started), true, false), Some(Phase::ExpectsMet));
        assert_eq!(next_phase(Some(Phase::ExpectsMet), true, false), None, "a session still holds");
        assert_eq!(next_phase(Some(Phase::ExpectsMet), true, true), Some(Phase::Released));
        assert_eq!(next_phase(Some(Phase::Released), true, true), None, "each phase once");
    }
}
