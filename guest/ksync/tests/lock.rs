//! The spin lock from outside the crate, as the kernel uses it; run under Miri by the
//! case `ksync-miri` (tests/ksync-miri.toml), where every access through a guard is
//! checked for aliasing and for data races between threads.

use std::sync::Arc;

use ksync::Lock;

#[test]
fn a_guard_reads_and_writes_the_value_and_frees_the_lock_when_dropped() {
    let lock = Lock::new("test", [1u32, 2, 3]);
    {
        let mut guard = lock.lock();
        guard[1] = 20;
        assert_eq!(*guard, [1, 20, 3]);
    }
    // Taken again at once: the first guard freed it.
    let guard = lock.lock();
    assert_eq!(guard.iter().sum::<u32>(), 24);
    assert_eq!(lock.name(), "test");
}

#[test]
fn threads_taking_turns_under_the_lock_lose_no_increment() {
    const THREADS: usize = 3;
    const EACH: u64 = 40;
    let lock = Arc::new(Lock::new("counter", (0u64, Vec::new())));
    let workers: Vec<_> = (0..THREADS)
        .map(|id| {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    let mut guard = lock.lock();
                    guard.0 += 1;
                    guard.1.push(id);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let guard = lock.lock();
    assert_eq!(guard.0, THREADS as u64 * EACH);
    assert_eq!(guard.1.len(), THREADS * EACH as usize);
}
