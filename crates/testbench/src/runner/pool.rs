//! The worker pool: jobs run up to `workers` at once, each on a worker thread, and their
//! results come back in the jobs' order, each as soon as every earlier one is back.

use std::collections::BTreeMap;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// Run `work` on every job, up to `workers` at once; `done` takes each result (with the
/// job's index and how long it took) in the jobs' order. Each job runs on the thread
/// that took it, to its end: a boot's thread starts QEMU and waits for it, and QEMU's
/// exit is what the parent-death signal follows (see crates/process).
pub fn run_in_order<J, R>(
    jobs: Vec<J>,
    workers: usize,
    work: impl Fn(J) -> R + Sync,
    mut done: impl FnMut(usize, R, Duration),
) where
    J: Send,
    R: Send,
{
    let workers = workers.min(jobs.len()).max(1);
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let (sender, receiver) = mpsc::channel::<(usize, R, Duration)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let sender = sender.clone();
            let (queue, work) = (&queue, &work);
            scope.spawn(move || loop {
                let next = queue.lock().unwrap().next();
                let Some((index, job)) = next else { break };
                let started = Instant::now();
                let result = work(job);
                if sender.send((index, result, started.elapsed())).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        let mut waiting: BTreeMap<usize, (R, Duration)> = BTreeMap::new();
        let mut next = 0;
        for (index, result, took) in receiver {
            waiting.insert(index, (result, took));
            while let Some((result, took)) = waiting.remove(&next) {
                done(next, result, took);
                next += 1;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_jobs_order_whatever_order_they_finish_in() {
        // The first job finishes last: every later result waits for it.
        let jobs: Vec<u64> = vec![60, 0, 20, 0, 10];
        let mut seen = Vec::new();
        run_in_order(
            jobs,
            3,
            |ms| {
                std::thread::sleep(Duration::from_millis(ms));
                ms * 2
            },
            |index, result, _| seen.push((index, result)),
        );
        assert_eq!(seen, [(0, 120), (1, 0), (2, 40), (3, 0), (4, 20)]);
        let mut none = Vec::new();
        run_in_order(Vec::<u64>::new(), 4, |x| x, |index, result, _| none.push((index, result)));
        assert!(none.is_empty());
    }
}
