//! The machine target: the guest kernel's lock (`ksync::Lock`) and timer queue
//! (`ksync::TimerQueue`, the kernel's sleeping processes) run by two to four tasks — the
//! harts — on the machine (src/machine.rs). Each task sleeps on the queue (the ordinary
//! step), yields, wakes the due sleepers as a hart's scheduler loop does, wakes a sleeper
//! early (cancel, as a signal would), moves a sleeper to another tick, or idles; the
//! timer's interrupt raises a soft IRQ that wakes the due sleepers and re-arms the timer
//! for the next, as the kernel re-arms its timer for the next wake-up.
//!
//! Findings: the machine's (a rule broken, a deadlock or lost wake-up, a hang) and the
//! oracle's, a model of the queue kept beside it: a sleeper woken before its tick, or not
//! by an expiry; an expiry that wakes other sleepers than the due ones, earliest first
//! and in the order added for equal ticks; a queue that reads back otherwise than the
//! model, names the wrong next tick, or says it is full when it is not.

use crate::machine::{self, Handlers, TaskFn};
use crate::{Decisions, Finding};
use ksync::{Full, Lock, TimerQueue};

/// Room in the queue: fewer than the most tasks, so it fills now and then.
const ROOM: usize = 3;
const MAX_TASKS: usize = 4;

/// The kernel's state as this target has it: the queue, and the oracle's model beside it.
struct World {
    sleepers: TimerQueue<ROOM>,
    /// The model: (tick, order added, task), in no particular order.
    model: Vec<(u64, u64, usize)>,
    added: u64,
    /// Tasks an expiry (or an interruption) has woken and that have not looked yet.
    woken: [bool; MAX_TASKS],
    /// Each sleeper's tick, as [`retime`] may have moved it.
    tick: [u64; MAX_TASKS],
    /// Tasks woken before their tick on purpose, by [`interrupt`].
    interrupted: [bool; MAX_TASKS],
    full: bool,
}

fn oracle(what: &str, detail: String) -> ! {
    std::panic::panic_any(Finding::oracle(what, detail))
}

/// The model's view of the queue: earliest first, equal ticks in the order added.
fn sorted(model: &[(u64, u64, usize)]) -> Vec<(u64, usize)> {
    let mut m = model.to_vec();
    m.sort_unstable();
    m.into_iter().map(|(tick, _, id)| (tick, id)).collect()
}

fn check_reads_back(w: &World) {
    let queue: Vec<(u64, usize)> = w.sleepers.iter().collect();
    let model = sorted(&w.model);
    if queue != model || w.sleepers.len() != model.len() {
        oracle("the queue reads back otherwise than the model", format!("queue {queue:?}, model {model:?}"));
    }
    if w.sleepers.next() != model.first().map(|&(t, _)| t) {
        oracle("the next tick is not the earliest", format!("next {:?}, model {model:?}", w.sleepers.next()));
    }
}

/// Wakes the due sleepers, as the kernel's scheduler loop and the soft IRQ do.
fn expire(kernel: &Lock<World>) {
    let mut w = kernel.lock();
    let now = machine::now();
    let mut woken = Vec::new();
    let next = w.sleepers.expire(now, |id| woken.push(id));
    let (due, left): (Vec<_>, Vec<_>) = w.model.iter().partition(|&&(tick, _, _)| tick <= now);
    let due = sorted(&due);
    if woken != due.iter().map(|&(_, id)| id).collect::<Vec<_>>() {
        oracle(
            "an expiry woke other sleepers than the due ones, in order",
            format!("at {now}: woke {woken:?}, due {due:?}"),
        );
    }
    w.model = left;
    if next != w.sleepers.next() {
        oracle("expire's next tick is not the queue's", format!("{next:?} vs {:?}", w.sleepers.next()));
    }
    check_reads_back(&w);
    for &id in &woken {
        w.woken[id] = true;
    }
    machine::set_timer(next);
    drop(w);
    for id in woken {
        machine::unpark(id);
    }
}

/// Task `me` sleeps `ticks` on the queue.
fn sleep(kernel: &Lock<World>, me: usize, ticks: u64) {
    let mut w = kernel.lock();
    let tick = machine::now() + ticks;
    match w.sleepers.add(me, tick) {
        Ok(()) => {
            let order = w.added;
            w.added += 1;
            w.model.push((tick, order, me));
            w.tick[me] = tick;
            check_reads_back(&w);
            machine::set_timer(w.sleepers.next());
        }
        Err(Full) => {
            if w.model.len() < ROOM {
                oracle("add says full with room left", format!("{} of {ROOM} asleep", w.model.len()));
            }
            w.full = true;
            return;
        }
    }
    drop(w);
    machine::park();
    let now = machine::now();
    let mut w = kernel.lock();
    if !std::mem::take(&mut w.woken[me]) {
        oracle("a sleeper ran on without an expiry waking it", format!("task {me} at {now}, tick {tick}"));
    }
    let interrupted = std::mem::take(&mut w.interrupted[me]);
    let tick = w.tick[me];
    if now < tick && !interrupted {
        oracle("a sleeper woke before its tick", format!("task {me} at {now}, tick {tick}"));
    }
}

/// Wakes a sleeper of the input's choosing before its tick, as a signal would; asks the
/// queue to cancel `me`, who is not asleep, too.
fn interrupt(kernel: &Lock<World>, me: usize) {
    let mut w = kernel.lock();
    if w.sleepers.cancel(me) {
        oracle("cancel found a task that is not asleep", format!("task {me}"));
    }
    if w.model.is_empty() {
        return;
    }
    let k = machine::decide(|d| d.below(w.model.len()));
    let (_, _, id) = w.model.remove(k);
    if !w.sleepers.cancel(id) {
        oracle("cancel did not find a sleeper", format!("task {id}"));
    }
    check_reads_back(&w);
    w.woken[id] = true;
    w.interrupted[id] = true;
    machine::set_timer(w.sleepers.next());
    drop(w);
    machine::unpark(id);
}

/// Moves a sleeper of the input's choosing to another tick: it goes after everyone
/// already due then, even with the queue full.
fn retime(kernel: &Lock<World>) {
    let mut w = kernel.lock();
    if w.model.is_empty() {
        return;
    }
    let k = machine::decide(|d| d.below(w.model.len()));
    let tick = machine::now() + 1 + machine::decide(|d| d.below(100)) as u64;
    let id = w.model[k].2;
    if w.sleepers.add(id, tick).is_err() {
        oracle("moving a sleeper says full", format!("task {id}, {} asleep", w.model.len()));
    }
    let order = w.added;
    w.added += 1;
    w.model[k] = (tick, order, id);
    w.tick[id] = tick;
    check_reads_back(&w);
    machine::set_timer(w.sleepers.next());
}

fn task(kernel: &Lock<World>, me: usize) {
    let steps = 1 + machine::decide(|d| d.below(6));
    for _ in 0..steps {
        match machine::decide(|d| d.below(6)) {
            0 => {
                let ticks = 1 + machine::decide(|d| d.below(100)) as u64;
                sleep(kernel, me, ticks);
            }
            1 => machine::yield_now(),
            2 => expire(kernel),
            3 => interrupt(kernel, me),
            4 => retime(kernel),
            _ => {
                let idle = 1 + machine::decide(|d| d.below(50)) as u64;
                machine::sleep_until(machine::now() + idle);
            }
        }
    }
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let tasks = 2 + d.below(MAX_TASKS - 1);
    let kernel = Lock::new(
        "kernel",
        World {
            sleepers: TimerQueue::new(),
            model: Vec::new(),
            added: 0,
            woken: [false; MAX_TASKS],
            interrupted: [false; MAX_TASKS],
            tick: [0; MAX_TASKS],
            full: false,
        },
    );
    let kernel = &kernel;
    let softirq = move || expire(kernel);
    let irq = machine::raise_softirq;
    let bodies: Vec<TaskFn<'_>> = (0..tasks).map(|me| Box::new(move || task(kernel, me)) as TaskFn<'_>).collect();
    let report = machine::run(d, bodies, Handlers { irq: Some(&irq), softirq: Some(&softirq) })?;
    let w = kernel.lock();
    d.end(match (w.full, report.irqs) {
        (true, _) => "the queue was full once",
        (false, 0) => "the tasks woke every sleeper",
        (false, _) => "the timer's interrupt woke sleepers",
    });
    Ok(())
}
