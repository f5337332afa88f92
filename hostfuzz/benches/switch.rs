//! The machine's cost per task switch, beside its baseline: the same hand-over of one
//! CPU between two host threads through a mutex and a condition variable each, without
//! the machine's bookkeeping. `cargo bench --manifest-path hostfuzz/Cargo.toml --bench
//! switch` prints both and their ratio (docs/performance.md). The process is pinned to
//! one CPU first: a hand-over is then a context switch on that CPU, not a wake-up
//! racing the other core's load, and the figures hold still from run to run.

use hostfuzz::machine::{self, Handlers, TaskFn};
use hostfuzz::Decisions;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

const YIELDS: usize = 20_000;

/// Two tasks yielding, every decision 0xffffffff: the other one runs each time.
fn machine_run() -> (f64, u64) {
    let input = vec![0xffu8; 4 * 4 * YIELDS];
    let mut d = Decisions::new(&input);
    let body = || {
        for _ in 0..YIELDS {
            machine::yield_now();
        }
    };
    let tasks: Vec<TaskFn<'_>> = vec![Box::new(body), Box::new(body)];
    let start = Instant::now();
    let report = machine::run(&mut d, tasks, Handlers::default()).expect("no finding");
    (start.elapsed().as_secs_f64(), report.switches)
}

/// The baseline: two threads handing a turn back and forth, `2 * YIELDS` hand-overs.
fn baseline_run() -> (f64, u64) {
    let turn = Mutex::new(0usize);
    let cv = [Condvar::new(), Condvar::new()];
    let start = Instant::now();
    std::thread::scope(|s| {
        for me in 0..2 {
            let (turn, cv) = (&turn, &cv);
            s.spawn(move || {
                for _ in 0..YIELDS {
                    let mut t = turn.lock().unwrap();
                    while *t != me {
                        t = cv[me].wait(t).unwrap();
                    }
                    *t = 1 - me;
                    cv[1 - me].notify_one();
                }
            });
        }
    });
    (start.elapsed().as_secs_f64(), 2 * YIELDS as u64)
}

/// Pins this process (and the threads it makes from now on) to the first CPU it may use.
fn pin_to_one_cpu() {
    // SAFETY: `set` is a zeroed cpu_set_t, filled and read only through libc's CPU_*
    // macros and passed with its own size; pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let Some(cpu) = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) else {
            return;
        };
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn main() {
    pin_to_one_cpu();
    // Best of five, each one after the other in this one process.
    let best = |f: fn() -> (f64, u64)| {
        (0..5).map(|_| f()).map(|(secs, n)| secs * 1e9 / n as f64).fold(f64::INFINITY, f64::min)
    };
    let machine = best(machine_run);
    let baseline = best(baseline_run);
    println!("machine task switch:        {machine:>8.0} ns");
    println!("condvar hand-over baseline: {baseline:>8.0} ns");
    println!("ratio (machine / baseline): {:>8.2}", machine / baseline);
}
