//! The scheduler's trace (test-only feature `sched-trace`): every scheduling event the
//! kernel makes, on the console, for the bench's scheduler oracle (docs/oracles.md),
//! which checks each pick against the rule `pick` keeps and reads no kernel code.
//!
//! Printed under the kernel lock, so the lines are in the order the events happened:
//!
//! ```text
//! kernel: sched: slots N timebase T          once, before the first pick
//! kernel: sched: H woke S                    slot S became runnable (spawned, woken, a message)
//! kernel: sched: H requeued S                slot S, running, trapped and is runnable again
//! kernel: sched: H left S                    slot S, runnable or running, no longer is
//! kernel: sched: H picked S cost C           hart H took slot S; the pick took C ticks
//! kernel: sched: H idle cost C               hart H found nothing runnable
//! ```
//!
//! An idle hart looks again a thousand times a second; a look that finds what the one
//! before found (nothing printed since) is not printed again.
//!
//! The changes are found by comparing each slot's state with what the trace last said of
//! it, on the hart that picks next, before its pick: every change under the lock comes
//! before the pick that follows it.

#[cfg(all(feature = "sched-trace", not(debug_assertions)))]
compile_error!(
    "the kernel feature sched-trace is test-only: build it with debug assertions (debug_assertions = true in the case), never into a release kernel"
);

use abi::MAX_PROCS;

use crate::kprintln;

/// What the trace last said of a slot.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Out,
    Runnable,
    Running,
}

/// The trace's memory of every slot.
pub struct Trace {
    seen: [Seen; MAX_PROCS],
    started: bool,
    /// The harts (bit = hart id, below 64) whose idle look is the last thing printed
    /// about them, nothing else printed since.
    idle: u64,
}

impl Trace {
    pub const fn new() -> Trace {
        Trace { seen: [Seen::Out; MAX_PROCS], started: false, idle: 0 }
    }

    /// Say what changed since the trace last spoke, before hart `hart` picks. `now(i)`
    /// is slot i's state now.
    pub fn before_pick(&mut self, hart: usize, timebase: u64, now: impl Fn(usize) -> Seen) {
        if !self.started {
            self.started = true;
            kprintln!("sched: slots {} timebase {}", MAX_PROCS, timebase);
        }
        for slot in 0..MAX_PROCS {
            let (was, is) = (self.seen[slot], now(slot));
            match (was, is) {
                (Seen::Out, Seen::Runnable) => kprintln!("sched: {} woke {}", hart, slot),
                (Seen::Running, Seen::Runnable) => kprintln!("sched: {} requeued {}", hart, slot),
                (Seen::Runnable | Seen::Running, Seen::Out) => kprintln!("sched: {} left {}", hart, slot),
                // Running is only what a traced pick makes.
                _ => continue,
            }
            self.idle = 0;
            self.seen[slot] = is;
        }
    }

    /// Hart `hart` took `slot`; the pick took `cost` ticks.
    pub fn picked(&mut self, hart: usize, slot: usize, cost: u64) {
        self.seen[slot] = Seen::Running;
        self.idle = 0;
        kprintln!("sched: {} picked {} cost {}", hart, slot, cost);
    }

    /// Hart `hart` found nothing runnable (said once until something else is said).
    pub fn idle(&mut self, hart: usize, cost: u64) {
        let bit = 1u64 << (hart % 64);
        if self.idle & bit == 0 {
            self.idle |= bit;
            kprintln!("sched: {} idle cost {}", hart, cost);
        }
    }
}
