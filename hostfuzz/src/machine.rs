//! The machine: kernel tasks as host threads, exactly one running at a time, the input
//! deciding who runs next wherever a task takes or releases a lock, blocks, wakes
//! another, yields or ends. Nothing sleeps on the real clock: when every task waits, the
//! virtual clock jumps to the nearest deadline (a sleeper's or the armed timer's), and a
//! timer that comes due interrupts a waiting task of the input's choosing.
//!
//! The guest's lock (`ksync::Lock`) reports every acquisition and release to the
//! machine through `ksync::machine::Hooks`, so kernel code written against it runs here
//! unchanged. The kernel's rules are checked at the line that breaks them, as a panic
//! whose payload is a [`Violation`] (the run's finding, kind "invariant"):
//!
//! - a wait (park, sleep) in an IRQ or soft-IRQ handler, or with a spin lock held or
//!   interrupts off ([`check_may_wait`]);
//! - two lock classes ever taken in opposite orders, directly or through others: the
//!   lock-order graph reports the inversion at the acquisition that closes the cycle,
//!   whether or not this schedule deadlocks;
//! - a lock taken again by the task (or an interrupt on its CPU) that holds it;
//! - an allocation with interrupts off (the global allocator [`Watch`]; an allocator
//!   must not unwind, so it is reported at the task's next machine operation, naming
//!   where interrupts went off);
//! - a task that ends holding a lock;
//! - a task that reads the clock [`HANG_READS`] times without blocking (a hang);
//! - every task waiting with no deadline left: a deadlock or a lost wake-up.
//!
//! Each run makes its task threads itself, so with the runner's fork per input they are
//! made in the child, after the fork (docs/host-fuzzing.md).

use crate::{arena, Decisions, Finding};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{self, AssertUnwindSafe, Location};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Clock reads without blocking that make a hang.
pub const HANG_READS: u64 = 1_000_000;

/// What a task's CPU is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctx {
    /// The task itself.
    Task,
    /// A soft-IRQ handler, run as an interrupt handler returns.
    SoftIrq,
    /// An interrupt handler.
    Irq,
}

/// A broken kernel rule: the panic payload the machine's checks raise.
#[derive(Debug)]
pub struct Violation {
    /// The rule ("a wait with a spin lock held or interrupts off", ...): the finding's
    /// `what`, so that shrinking keeps the same rule.
    pub rule: &'static str,
    /// Which task, where, holding what.
    pub detail: String,
}

/// The payload that unwinds the other tasks once a run has its finding.
struct Stop;

/// What a run did, for the stats and the switch-cost figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Times the CPU went from one task to another.
    pub switches: u64,
    /// Times the input was asked who runs next.
    pub decisions: u64,
    /// Interrupts delivered.
    pub irqs: u64,
    /// The virtual clock at the end.
    pub clock: u64,
}

/// The interrupt handlers: `irq` runs in IRQ context with interrupts off; `softirq`
/// runs after it, with interrupts on, if the handler called [`raise_softirq`].
#[derive(Clone, Copy, Default)]
pub struct Handlers<'env> {
    /// The timer interrupt's handler.
    pub irq: Option<&'env (dyn Fn() + Sync)>,
    /// The soft IRQ.
    pub softirq: Option<&'env (dyn Fn() + Sync)>,
}

/// A task's body.
pub type TaskFn<'env> = Box<dyn FnOnce() + Send + 'env>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// May run (the running task is Ready too).
    Ready,
    /// Waiting for the lock at this address to be free.
    Spinning(usize),
    /// Waiting for [`unpark`].
    Parked,
    /// Waiting for the clock to reach this tick.
    Sleeping(u64),
    /// Ended.
    Done,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    lock: usize,
    name: &'static str,
    at: &'static Location<'static>,
}

#[derive(Debug)]
struct Task {
    state: State,
    /// An unpark came while the task was not parked: its next park returns at once.
    token: bool,
    held: Vec<Held>,
    irq_off: u32,
    irq_off_at: Option<&'static Location<'static>>,
    preempt_off: u32,
    ctx: Ctx,
    clock_reads: u64,
    irq_pending: bool,
    softirq_pending: bool,
}

impl Task {
    fn new() -> Task {
        Task {
            state: State::Ready,
            token: false,
            held: Vec::new(),
            irq_off: 0,
            irq_off_at: None,
            preempt_off: 0,
            ctx: Ctx::Task,
            clock_reads: 0,
            irq_pending: false,
            softirq_pending: false,
        }
    }

    fn holding(&self) -> String {
        let held: Vec<String> = self.held.iter().map(|h| format!("`{}` (taken at {})", h.name, h.at)).collect();
        if held.is_empty() {
            "no lock".to_owned()
        } else {
            held.join(", ")
        }
    }
}

struct Sched<'d, 'a> {
    d: &'d mut Decisions<'a>,
    running: usize,
    tasks: Vec<Task>,
    /// Lock address -> the task holding it.
    owners: BTreeMap<usize, usize>,
    /// The lock-order graph: (held class, class taken while holding it) -> where first.
    order: BTreeMap<(&'static str, &'static str), &'static Location<'static>>,
    clock: u64,
    timer: Option<u64>,
    stopped: bool,
    finding: Option<Finding>,
    report: Report,
}

/// One run's shared state: the scheduler behind a mutex, a condition variable a task.
struct Shared<'d, 'a, 'env> {
    sched: Mutex<Sched<'d, 'a>>,
    wake: Vec<Condvar>,
    handlers: Handlers<'env>,
}

type Guard<'s, 'd, 'a> = MutexGuard<'s, Sched<'d, 'a>>;

thread_local! {
    /// The machine this thread is a task of, and the task's index.
    static CURRENT: Cell<Option<(*const (), usize)>> = const { Cell::new(None) };
    /// This thread's interrupts-off count, for the allocator (which may not lock).
    static IRQ_OFF: Cell<u32> = const { Cell::new(0) };
    /// Bytes allocated with interrupts off and not yet reported.
    static ALLOC_WITH_IRQ_OFF: Cell<usize> = const { Cell::new(0) };
    /// Whether the machine's own code runs on this thread: its allocations are not the
    /// kernel's.
    static IN_MACHINE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the machine's own code on this thread until dropped (unwinding included).
struct InMachine(bool);

impl InMachine {
    fn enter(on: bool) -> InMachine {
        InMachine(IN_MACHINE.with(|c| c.replace(on)))
    }
}

impl Drop for InMachine {
    fn drop(&mut self) {
        IN_MACHINE.with(|c| c.set(self.0));
    }
}

/// Runs `f` with this thread's machine and task, if it is a task's thread.
fn with_current<R>(f: impl FnOnce(&Shared<'_, '_, '_>, usize) -> R) -> Option<R> {
    let (ptr, me) = CURRENT.with(Cell::get)?;
    let _machine = InMachine::enter(true);
    // SAFETY: CURRENT is set only by a task thread of `run`, to the `Shared` that `run`
    // keeps on its stack until every task thread has been joined, and is cleared before
    // that thread ends; so the pointer is live here. The lifetimes are erased only for
    // the thread-local's sake: nothing borrowed outlives `run`.
    let shared = unsafe { &*(ptr as *const Shared<'_, '_, '_>) };
    Some(f(shared, me))
}

fn violation<T>(s: Guard<'_, '_, '_>, rule: &'static str, detail: String) -> T {
    drop(s);
    panic::panic_any(Violation { rule, detail })
}

impl<'d, 'a, 'env> Shared<'d, 'a, 'env> {
    fn lock(&self) -> Guard<'_, 'd, 'a> {
        self.sched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the run with `finding` (the first one wins) and wakes every task to unwind.
    fn stop(&self, mut s: Guard<'_, 'd, 'a>, finding: Option<Finding>) {
        if s.finding.is_none() {
            s.finding = finding;
        }
        s.stopped = true;
        drop(s);
        for cv in &self.wake {
            cv.notify_all();
        }
    }

    /// The checks every machine operation makes first: a stopped run unwinds the task,
    /// and an allocation made with interrupts off is reported.
    fn enter(&self, me: usize) -> Guard<'_, 'd, 'a> {
        let s = self.lock();
        if s.stopped {
            drop(s);
            panic::resume_unwind(Box::new(Stop));
        }
        let bytes = ALLOC_WITH_IRQ_OFF.with(|c| c.replace(0));
        if bytes != 0 {
            let at = s.tasks[me].irq_off_at.map_or_else(|| "?".to_owned(), |l| l.to_string());
            return violation(
                s,
                "an allocation with interrupts off",
                format!("task {me} allocated {bytes} bytes with interrupts off (turned off at {at})"),
            );
        }
        s
    }

    /// A switch point of the running task `me`: the input picks who runs next (zero:
    /// `me`, if it may go on). Returns when `me` runs again and may go on: Ready, or
    /// Spinning on a lock that is now free.
    fn reschedule<'s>(&'s self, mut s: Guard<'s, 'd, 'a>, me: usize) -> Guard<'s, 'd, 'a> {
        let mut asked = false;
        loop {
            if s.tasks[me].irq_pending {
                s = self.take_irq(s, me);
            }
            if asked && self.may_go_on(&s, me) {
                return s;
            }
            asked = true;
            match self.pick(&mut s, me) {
                Some(next) if next == me => {}
                Some(next) => s = self.hand_over(s, me, next),
                None => {
                    let finding = deadlock(&s);
                    self.stop(s, Some(finding));
                    panic::resume_unwind(Box::new(Stop));
                }
            }
        }
    }

    fn may_go_on(&self, s: &Sched<'_, '_>, me: usize) -> bool {
        match s.tasks[me].state {
            State::Ready => true,
            State::Spinning(lock) => !s.owners.contains_key(&lock),
            _ => false,
        }
    }

    /// Gives the CPU to `next` and waits for it to come back.
    fn hand_over<'s>(&'s self, mut s: Guard<'s, 'd, 'a>, me: usize, next: usize) -> Guard<'s, 'd, 'a> {
        s.running = next;
        s.report.switches += 1;
        self.wake[next].notify_one();
        self.wait_turn(s, me)
    }

    fn wait_turn<'s>(&'s self, mut s: Guard<'s, 'd, 'a>, me: usize) -> Guard<'s, 'd, 'a> {
        while s.running != me && !s.stopped {
            s = self.wake[me].wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.stopped {
            drop(s);
            panic::resume_unwind(Box::new(Stop));
        }
        s
    }

    /// Who runs next, asked of `me`: the ready tasks in turn from `me`, the input picking
    /// (zero: `me` if it is ready, else the next in turn). With none ready the clock jumps
    /// to the nearest deadline, waking sleepers or delivering the timer's interrupt.
    /// None when every task waits and no deadline is left (or every task has ended).
    fn pick(&self, s: &mut Sched<'_, '_>, me: usize) -> Option<usize> {
        loop {
            let clock = s.clock;
            for t in &mut s.tasks {
                if matches!(t.state, State::Sleeping(at) if at <= clock) {
                    t.state = State::Ready;
                    t.clock_reads = 0;
                }
            }
            let n = s.tasks.len();
            let ready: Vec<usize> = (0..n)
                .map(|k| (me + k) % n)
                .filter(|&i| match s.tasks[i].state {
                    State::Ready => true,
                    State::Spinning(lock) => !s.owners.contains_key(&lock),
                    _ => false,
                })
                .collect();
            if ready.len() == 1 {
                return Some(ready[0]);
            }
            if !ready.is_empty() {
                s.report.decisions += 1;
                return Some(ready[s.d.below(ready.len())]);
            }
            let sleeper = s.tasks.iter().filter_map(|t| match t.state {
                State::Sleeping(at) => Some(at),
                _ => None,
            });
            let next = sleeper.chain(s.timer).min()?;
            s.clock = s.clock.max(next);
            if s.timer.is_some_and(|t| t <= s.clock) {
                // The interrupt lands on a CPU whose task waits with interrupts on.
                let takers: Vec<usize> = (0..n)
                    .map(|k| (me + k) % n)
                    .filter(|&i| {
                        matches!(s.tasks[i].state, State::Parked | State::Sleeping(_)) && s.tasks[i].irq_off == 0
                    })
                    .collect();
                if takers.is_empty() {
                    s.timer = None;
                    continue;
                }
                let taker = if takers.len() == 1 { takers[0] } else { takers[s.d.below(takers.len())] };
                s.timer = None;
                s.tasks[taker].irq_pending = true;
                return Some(taker);
            }
        }
    }

    /// Runs the timer's interrupt (then the soft IRQ, if raised) on `me`'s CPU.
    fn take_irq<'s>(&'s self, mut s: Guard<'s, 'd, 'a>, me: usize) -> Guard<'s, 'd, 'a> {
        s.tasks[me].irq_pending = false;
        s.report.irqs += 1;
        let saved = (s.tasks[me].ctx, s.tasks[me].clock_reads, s.tasks[me].state);
        // The CPU runs the handler: it may take locks and be switched like any other.
        s.tasks[me].state = State::Ready;
        s.tasks[me].ctx = Ctx::Irq;
        s.tasks[me].irq_off += 1;
        IRQ_OFF.with(|c| c.set(c.get() + 1));
        drop(s);
        if let Some(irq) = self.handlers.irq {
            // The handler is the kernel's code, not the machine's.
            let _kernel = InMachine::enter(false);
            irq();
        }
        let mut s = self.enter(me);
        s.tasks[me].irq_off -= 1;
        IRQ_OFF.with(|c| c.set(c.get() - 1));
        if std::mem::take(&mut s.tasks[me].softirq_pending) {
            s.tasks[me].ctx = Ctx::SoftIrq;
            drop(s);
            if let Some(softirq) = self.handlers.softirq {
                let _kernel = InMachine::enter(false);
                softirq();
            }
            s = self.enter(me);
        }
        let t = &mut s.tasks[me];
        t.ctx = saved.0;
        t.clock_reads = saved.1;
        // Back to waiting, unless the handlers woke this very task.
        t.state = match saved.2 {
            State::Parked if std::mem::take(&mut t.token) => State::Ready,
            other => other,
        };
        s
    }

    /// A switch point: the input may let another task run first.
    fn switch_point(&self, me: usize) {
        let s = self.enter(me);
        drop(self.reschedule(s, me));
    }

    fn check_may_wait<'s>(&self, s: Guard<'s, 'd, 'a>, me: usize, what: &str) -> Guard<'s, 'd, 'a> {
        let t = &s.tasks[me];
        match t.ctx {
            Ctx::Irq => return violation(s, "a wait in an interrupt handler", format!("task {me}'s CPU {what}")),
            Ctx::SoftIrq => {
                return violation(s, "a wait in a soft-IRQ handler", format!("task {me}'s CPU {what}"));
            }
            Ctx::Task => {}
        }
        if t.irq_off != 0 || t.preempt_off != 0 {
            let detail = format!(
                "task {me} {what} holding {} (interrupts off {}, preemption off {})",
                t.holding(),
                t.irq_off,
                t.preempt_off
            );
            return violation(s, "a wait with a spin lock held or interrupts off", detail);
        }
        s
    }

    fn acquire(&self, me: usize, lock: usize, name: &'static str, at: &'static Location<'static>) {
        let mut s = self.enter(me);
        if s.owners.get(&lock) == Some(&me) {
            let detail = format!("task {me} takes `{name}` at {at} while it holds it: {}", s.tasks[me].holding());
            return violation(s, "a lock taken again by the CPU that holds it (a deadlock)", detail);
        }
        let held: Vec<Held> = s.tasks[me].held.clone();
        for h in held.iter().filter(|h| h.name != name) {
            if let Some(path) = order_path(&s.order, name, h.name) {
                let detail = format!(
                    "task {me} takes `{name}` at {at} holding `{}` (taken at {}), but `{}` was taken while \
                     holding `{name}` before: {path}",
                    h.name, h.at, h.name
                );
                return violation(s, "two locks taken in opposite orders (a lock-order inversion)", detail);
            }
            s.order.entry((h.name, name)).or_insert(at);
        }
        s = self.reschedule(s, me);
        while s.owners.contains_key(&lock) {
            s.tasks[me].state = State::Spinning(lock);
            s = self.reschedule(s, me);
        }
        s.tasks[me].state = State::Ready;
        s.owners.insert(lock, me);
        let t = &mut s.tasks[me];
        t.held.push(Held { lock, name, at });
        t.preempt_off += 1;
    }

    fn release(&self, me: usize, lock: usize) {
        let mut s = self.lock();
        if s.stopped {
            return;
        }
        s.owners.remove(&lock);
        let t = &mut s.tasks[me];
        if let Some(k) = t.held.iter().rposition(|h| h.lock == lock) {
            t.held.remove(k);
            t.preempt_off -= 1;
        }
        if std::thread::panicking() {
            return;
        }
        drop(s);
        self.switch_point(me);
    }

    /// The body of task `me`'s thread.
    fn task(&self, me: usize, body: TaskFn<'_>) {
        CURRENT.with(|c| c.set(Some((self as *const Self as *const (), me))));
        let started = {
            let s = self.lock();
            let s = self.wake_turn_or_stop(s, me);
            s.is_some()
        };
        if started {
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                body();
                let s = self.enter(me);
                if !s.tasks[me].held.is_empty() {
                    let detail = format!("task {me} ended holding {}", s.tasks[me].holding());
                    return violation(s, "a task that ends holding a lock", detail);
                }
                let mut s = s;
                s.tasks[me].state = State::Done;
                self.finish(s, me);
            }));
            if let Err(payload) = result {
                if !payload.is::<Stop>() {
                    let finding = match payload.downcast::<Violation>() {
                        Ok(v) => Finding::new("invariant", v.rule, v.detail),
                        // A harness's oracle, failing inside a task.
                        Err(payload) if payload.is::<Finding>() => *payload.downcast::<Finding>().expect("a Finding"),
                        Err(_) => {
                            let (at, message) = crate::panics::take_panic().unwrap_or_default();
                            Finding::new("panic", &at, format!("task {me}: {message}"))
                        }
                    };
                    self.stop(self.lock(), Some(finding));
                }
            }
        }
        CURRENT.with(|c| c.set(None));
    }

    fn wake_turn_or_stop<'s>(&'s self, mut s: Guard<'s, 'd, 'a>, me: usize) -> Option<Guard<'s, 'd, 'a>> {
        while s.running != me && !s.stopped {
            s = self.wake[me].wait(s).unwrap_or_else(|e| e.into_inner());
        }
        (!s.stopped).then_some(s)
    }

    /// `me` has ended: the CPU goes to the next task, or the run is over.
    fn finish(&self, mut s: Guard<'_, 'd, 'a>, me: usize) {
        if s.tasks.iter().all(|t| t.state == State::Done) {
            return;
        }
        match self.pick(&mut s, me) {
            Some(next) => {
                s.running = next;
                s.report.switches += 1;
                drop(s);
                self.wake[next].notify_one();
            }
            None => {
                let finding = deadlock(&s);
                self.stop(s, Some(finding));
            }
        }
    }
}

/// The finding for a run where every task waits and no deadline is left.
fn deadlock(s: &Sched<'_, '_>) -> Finding {
    let states: Vec<String> = s
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.state != State::Done)
        .map(|(i, t)| format!("task {i} {:?} holding {}", t.state, t.holding()))
        .collect();
    Finding::new(
        "invariant",
        "every task waits and no deadline is left (a deadlock or a lost wake-up)",
        states.join("; "),
    )
}

/// A path `from` -> ... -> `to` in the lock-order graph, as text, if there is one.
fn order_path(
    order: &BTreeMap<(&'static str, &'static str), &'static Location<'static>>,
    from: &'static str,
    to: &'static str,
) -> Option<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![(from, Vec::new())];
    while let Some((at, path)) = stack.pop() {
        if !seen.insert(at) {
            continue;
        }
        for (&(a, b), &where_) in order.range((at, "")..) {
            if a != at {
                break;
            }
            let mut path = path.clone();
            path.push(format!("`{b}` taken holding `{a}` at {where_}"));
            if b == to {
                return Some(path.join(", then "));
            }
            stack.push((b, path));
        }
    }
    None
}

/// The machine's side of `ksync::Lock`.
struct Hooks;

impl ksync::machine::Hooks for Hooks {
    fn acquire(&self, lock: usize, name: &'static str, at: &'static Location<'static>) {
        with_current(|m, me| m.acquire(me, lock, name, at));
    }

    fn release(&self, lock: usize, _name: &'static str) {
        with_current(|m, me| m.release(me, lock));
    }
}

static HOOKS: &dyn ksync::machine::Hooks = &Hooks;

/// The calling thread kept on the core it runs on, and so the task threads it starts
/// (they inherit its CPU mask), until dropped, when its mask is what it was. The
/// machine runs one task at a time, handing over through condition variables: on one
/// core a hand-over is a switch on that core, across cores a wake-up of another.
struct OneCore {
    /// The mask before, to put back; `None` if it could not be read or set.
    before: Option<libc::cpu_set_t>,
}

impl OneCore {
    fn here() -> OneCore {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        let Ok(before) = crate::cpu::mask() else {
            return OneCore { before: None };
        };
        if cpu < 0 {
            return OneCore { before: None };
        }
        let set = crate::cpu::set_mask(&crate::cpu::only(cpu as usize));
        OneCore { before: set.is_ok().then_some(before) }
    }
}

impl Drop for OneCore {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            let _ = crate::cpu::set_mask(before);
        }
    }
}

/// Runs `tasks` on the machine, the input deciding every choice; returns what the run
/// did, or its finding. Its task threads run on the core the caller runs on ([`OneCore`]).
pub fn run<'env>(d: &mut Decisions<'_>, tasks: Vec<TaskFn<'env>>, handlers: Handlers<'env>) -> Result<Report, Finding> {
    ksync::machine::install(&HOOKS);
    let n = tasks.len();
    let shared = Shared {
        sched: Mutex::new(Sched {
            d,
            running: 0,
            tasks: (0..n).map(|_| Task::new()).collect(),
            owners: BTreeMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            timer: None,
            stopped: false,
            finding: None,
            report: Report::default(),
        }),
        wake: (0..n).map(|_| Condvar::new()).collect(),
        handlers,
    };
    let _core = OneCore::here();
    std::thread::scope(|scope| {
        for (me, body) in tasks.into_iter().enumerate() {
            let shared = &shared;
            std::thread::Builder::new()
                .name(format!("task {me}"))
                .spawn_scoped(scope, move || shared.task(me, body))
                .expect("a task thread starts");
        }
    });
    let s = shared.sched.into_inner().unwrap_or_else(|e| e.into_inner());
    match s.finding {
        Some(finding) => Err(finding),
        None => Ok(Report { clock: s.clock, ..s.report }),
    }
}

/// The calling task's machine; panics outside one (a harness bug).
fn current<R>(f: impl FnOnce(&Shared<'_, '_, '_>, usize) -> R) -> R {
    with_current(f).expect("a machine operation outside a machine's task")
}

/// Reads decisions from the input inside a task.
pub fn decide<R>(f: impl FnOnce(&mut Decisions<'_>) -> R) -> R {
    // `f` reads decisions; what it allocates is the harness's, as the machine's is.
    current(|m, me| {
        let mut s = m.enter(me);
        f(&mut *s.d)
    })
}

/// The virtual clock. Reading it a million times without blocking is a hang.
#[track_caller]
pub fn now() -> u64 {
    let at = Location::caller();
    current(|m, me| {
        let mut s = m.enter(me);
        s.tasks[me].clock_reads += 1;
        if s.tasks[me].clock_reads >= HANG_READS {
            let detail = format!("task {me} read the clock {HANG_READS} times without blocking, at {at}");
            return violation(s, "a loop that reads the clock without blocking (a hang)", detail);
        }
        s.clock
    })
}

/// Lets the input pick another task to run first.
pub fn yield_now() {
    current(|m, me| m.switch_point(me));
}

/// Waits until [`unpark`]ed (at once if an unpark came since the last park).
#[track_caller]
pub fn park() {
    let at = Location::caller();
    current(|m, me| {
        let s = m.enter(me);
        let mut s = m.check_may_wait(s, me, &format!("parks at {at}"));
        if std::mem::take(&mut s.tasks[me].token) {
            drop(m.reschedule(s, me));
            return;
        }
        s.tasks[me].state = State::Parked;
        s.tasks[me].clock_reads = 0;
        drop(m.reschedule(s, me));
    });
}

/// Wakes task `task` (or lets its next park return at once).
pub fn unpark(task: usize) {
    current(|m, me| {
        let mut s = m.enter(me);
        let t = &mut s.tasks[task];
        match t.state {
            State::Parked => t.state = State::Ready,
            State::Done => {}
            _ => t.token = true,
        }
        drop(m.reschedule(s, me));
    });
}

/// Sleeps until the virtual clock reaches `tick`.
#[track_caller]
pub fn sleep_until(tick: u64) {
    let at = Location::caller();
    current(|m, me| {
        let s = m.enter(me);
        let mut s = m.check_may_wait(s, me, &format!("sleeps at {at}"));
        if tick > s.clock {
            s.tasks[me].state = State::Sleeping(tick);
        }
        drop(m.reschedule(s, me));
    });
}

/// Arms the timer for `tick` (None disarms it): when every task waits and the clock
/// reaches it, the interrupt handler runs.
pub fn set_timer(tick: Option<u64>) {
    current(|m, me| m.enter(me).timer = tick);
}

/// Asks for the soft IRQ to run when the current interrupt handler returns.
pub fn raise_softirq() {
    current(|m, me| m.enter(me).tasks[me].softirq_pending = true);
}

/// Turns interrupts off on this task's CPU (counted: each needs its [`irq_restore`]).
#[track_caller]
pub fn irq_save() {
    let at = Location::caller();
    current(|m, me| {
        let mut s = m.enter(me);
        let t = &mut s.tasks[me];
        if t.irq_off == 0 {
            t.irq_off_at = Some(at);
        }
        t.irq_off += 1;
        IRQ_OFF.with(|c| c.set(c.get() + 1));
    });
}

/// Turns preemption off for this task (counted: each needs its [`preempt_enable`]); a
/// held spin lock counts as one too.
pub fn preempt_disable() {
    current(|m, me| m.enter(me).tasks[me].preempt_off += 1);
}

/// Undoes one [`preempt_disable`].
pub fn preempt_enable() {
    current(|m, me| {
        let mut s = m.enter(me);
        let t = &mut s.tasks[me];
        t.preempt_off = t.preempt_off.checked_sub(1).expect("preempt_enable without preempt_disable");
    });
}

/// Undoes one [`irq_save`].
pub fn irq_restore() {
    current(|m, me| {
        let mut s = m.enter(me);
        let t = &mut s.tasks[me];
        t.irq_off = t.irq_off.checked_sub(1).expect("irq_restore without irq_save");
        IRQ_OFF.with(|c| c.set(c.get() - 1));
    });
    // An allocation made while they were off is reported here at the latest.
    current(|m, me| drop(m.enter(me)));
}

/// Fails unless the caller may wait here: task context, no spin lock held, interrupts on.
pub fn check_may_wait(what: &str) {
    current(|m, me| {
        let s = m.enter(me);
        drop(m.check_may_wait(s, me, what));
    });
}

/// The current task's index.
pub fn me() -> usize {
    current(|_, me| me)
}

/// The global allocator: the system's, noting an allocation made with interrupts off on
/// a machine task's CPU for the task's next machine operation to report.
pub struct Watch;

fn note_allocation(size: usize) {
    // try_with: a thread being torn down has no thread-locals left, and no task on it.
    let off = IRQ_OFF.try_with(Cell::get).unwrap_or(0);
    if off != 0 && !IN_MACHINE.try_with(Cell::get).unwrap_or(true) {
        let _ = ALLOC_WITH_IRQ_OFF.try_with(|c| {
            if c.get() == 0 {
                c.set(size.max(1));
            }
        });
    }
}

// SAFETY: in a served child, every allocation comes from the arena while it has room:
// fresh bytes (zeros) of the requested size and alignment, never handed out twice, and
// freed by nothing; the rest goes to the system allocator with the caller's arguments.
// The bookkeeping before it touches only const-initialised thread-locals and atomics,
// which never allocate.
unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        if let Some(ptr) = arena::alloc(layout.size(), layout.align()) {
            return ptr;
        }
        // SAFETY: the caller's contract for `alloc`, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        if let Some(ptr) = arena::alloc(layout.size(), layout.align()) {
            return ptr;
        }
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        if !arena::owns(ptr) {
            // SAFETY: the caller's contract for `realloc`, passed on unchanged.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if new_size <= layout.size() || arena::grow_in_place(ptr, layout.size(), new_size) {
            return ptr;
        }
        // SAFETY: the caller's contract for `realloc` makes `new_size` with the old
        // alignment a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as in `alloc`, with that layout.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: the old block holds `layout.size()` bytes, the new one more, and the
            // two do not overlap (the new one is fresh).
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if arena::owns(ptr) {
            return;
        }
        // SAFETY: the caller's contract for `dealloc`, passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one task parked on a timer whose interrupt runs `irq`; the finding, if any.
    fn park_under(irq: &(dyn Fn() + Sync)) -> Option<Finding> {
        let mut d = Decisions::new(&[]);
        let task: TaskFn<'_> = Box::new(|| {
            set_timer(Some(3));
            park();
        });
        let handlers = Handlers { irq: Some(irq), softirq: None };
        run(&mut d, vec![task], handlers).err()
    }

    #[test]
    fn an_interrupt_handler_that_takes_a_lock_is_no_finding_but_one_that_allocates_is() {
        let lock = ksync::Lock::new("irq-data", 0u32);
        let wake = || {
            *lock.lock() += 1;
            unpark(0);
        };
        assert_eq!(park_under(&wake), None);
        assert_eq!(*lock.lock(), 1);
        let allocate = || {
            let line = format!("tick {}", 1);
            drop(line);
            unpark(0);
        };
        let finding = park_under(&allocate).expect("a finding");
        assert_eq!(finding.what, "an allocation with interrupts off", "{finding}");
    }

    #[test]
    fn the_clock_jumps_to_the_nearest_deadline_and_sleepers_wake_in_order() {
        let mut d = Decisions::new(&[]);
        let order = Mutex::new(Vec::new());
        let order = &order;
        let tasks: Vec<TaskFn<'_>> = [30u64, 10, 20]
            .into_iter()
            .map(|tick| {
                Box::new(move || {
                    sleep_until(tick);
                    order.lock().unwrap().push((tick, now()));
                }) as TaskFn<'_>
            })
            .collect();
        let report = run(&mut d, tasks, Handlers::default()).expect("no finding");
        assert_eq!(*order.lock().unwrap(), [(10, 10), (20, 20), (30, 30)]);
        assert_eq!(report.clock, 30);
    }
}
