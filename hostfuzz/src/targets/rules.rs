//! The machine's demonstration: each run breaks one kernel rule on purpose, as a kernel
//! bug would, and must be a finding naming that rule. Not in the gate (it always finds);
//! its tests prove every rule is caught, and `cargo hostfuzz --target machine-rules`
//! shows one.
//!
//! The first decision picks the rule: 0 a sleep inside a spin lock (the temporary guard
//! of a `match` scrutinee lives to the end of the `match`), 1 a lock-order inversion on
//! an input whose schedule never deadlocks, 2 an allocation with interrupts off, 3 a task
//! that ends holding a lock, 4 a clock-polling loop (a hang), 5 a wait in an interrupt
//! handler, 6 a lost wake-up, 7 a park in a soft-IRQ handler, 8 a park with preemption
//! off.

use crate::machine::{self, Handlers, TaskFn};
use crate::{Decisions, Finding};
use ksync::Lock;

/// How many rules the target breaks.
pub const RULES: usize = 9;

struct Log {
    nic: Option<u32>,
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let rule = d.below(RULES);
    let log = Lock::new("log", Log { nic: None });
    let table = Lock::new("table", 0u32);
    let log = &log;
    let table = &table;
    let mut bodies: Vec<TaskFn<'_>> = Vec::new();
    let sleep_in_irq = || machine::sleep_until(machine::now() + 1);
    let raise = machine::raise_softirq;
    let park_in_softirq = machine::park;
    let mut handlers = Handlers::default();
    match rule {
        0 => {
            // Polls until the device has an address: the guard taken in the scrutinee is
            // held through the sleep in the arm.
            bodies.push(Box::new(move || {
                for _ in 0..3 {
                    let nic = match log.lock().nic {
                        Some(nic) if nic != 0 => nic,
                        _ => {
                            machine::sleep_until(machine::now() + 200);
                            continue;
                        }
                    };
                    *table.lock() = nic;
                }
            }));
            bodies.push(Box::new(move || {
                machine::sleep_until(100);
                log.lock().nic = Some(7);
            }));
        }
        1 => {
            bodies.push(Box::new(move || {
                let _log = log.lock();
                *table.lock() += 1;
            }));
            bodies.push(Box::new(move || {
                let _table = table.lock();
                log.lock().nic = None;
            }));
        }
        2 => bodies.push(Box::new(|| {
            machine::irq_save();
            let line = vec![0u8; 64];
            drop(line);
            machine::irq_restore();
        })),
        3 => bodies.push(Box::new(move || std::mem::forget(table.lock()))),
        4 => bodies.push(Box::new(|| {
            let until = machine::now() + 10;
            while machine::now() < until {}
        })),
        5 => {
            handlers.irq = Some(&sleep_in_irq);
            bodies.push(Box::new(|| {
                machine::set_timer(Some(5));
                machine::park();
            }));
        }
        6 => bodies.push(Box::new(machine::park)),
        7 => {
            handlers.irq = Some(&raise);
            handlers.softirq = Some(&park_in_softirq);
            bodies.push(Box::new(|| {
                machine::set_timer(Some(5));
                machine::park();
            }));
        }
        _ => bodies.push(Box::new(|| {
            machine::preempt_disable();
            machine::park();
            machine::preempt_enable();
        })),
    }
    machine::run(d, bodies, handlers)?;
    d.end("a rule was broken and nothing found it");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;

    /// The input whose first decision picks `rule`.
    fn input(rule: usize) -> Vec<u8> {
        let x = ((rule as u64) << 32).div_ceil(RULES as u64) as u32;
        x.to_le_bytes().to_vec()
    }

    #[test]
    fn every_rule_is_a_finding_naming_it() {
        let expected = [
            "a wait with a spin lock held or interrupts off",
            "two locks taken in opposite orders (a lock-order inversion)",
            "an allocation with interrupts off",
            "a task that ends holding a lock",
            "a loop that reads the clock without blocking (a hang)",
            "a wait in an interrupt handler",
            "every task waits and no deadline is left (a deadlock or a lost wake-up)",
            "a wait in a soft-IRQ handler",
            "a wait with a spin lock held or interrupts off",
        ];
        for (rule, what) in expected.iter().enumerate() {
            let outcome = in_process(run, &input(rule));
            let finding = outcome.finding().unwrap_or_else(|| panic!("rule {rule}: {outcome:?}"));
            assert_eq!((finding.kind.as_str(), finding.what.as_str()), ("invariant", *what), "rule {rule}: {finding}");
        }
    }

    #[test]
    fn the_sleep_in_a_spin_lock_names_the_lock_and_the_line() {
        let finding = in_process(run, &input(0)).finding().cloned().expect("a finding");
        assert!(finding.detail.contains("task 0 sleeps at src/targets/rules.rs:"), "{finding}");
        assert!(finding.detail.contains("holding `log` (taken at src/targets/rules.rs:"), "{finding}");
    }

    #[test]
    fn the_inversion_is_found_on_a_schedule_that_does_not_deadlock() {
        // All-zero decisions past the first: task 0 runs to its end before task 1 starts.
        let finding = in_process(run, &input(1)).finding().cloned().expect("a finding");
        assert!(finding.detail.starts_with("task 1 takes `log`"), "{finding}");
        assert!(finding.detail.contains("`table` taken holding `log`"), "{finding}");
    }
}
