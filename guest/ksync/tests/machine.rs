//! The machine's hooks (feature `machine`): a lock reports every acquisition, with the
//! caller's line, and every release to the installed hooks; run under Miri by the case
//! `ksync-miri`, which checks the hooks' pointer read (the crate's other unsafe).
#![cfg(feature = "machine")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ksync::machine::{install, Hooks};
use ksync::Lock;

struct Counting {
    acquired: AtomicUsize,
    released: AtomicUsize,
    lines: Mutex<Vec<u32>>,
}

impl Hooks for Counting {
    fn acquire(&self, _lock: usize, name: &'static str, at: &'static core::panic::Location<'static>) {
        assert_eq!(name, "hooked");
        self.acquired.fetch_add(1, Ordering::SeqCst);
        self.lines.lock().unwrap().push(at.line());
    }
    fn release(&self, _lock: usize, name: &'static str) {
        assert_eq!(name, "hooked");
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

static COUNTING: Counting =
    Counting { acquired: AtomicUsize::new(0), released: AtomicUsize::new(0), lines: Mutex::new(Vec::new()) };
static HOOKS: &dyn Hooks = &COUNTING;

#[test]
fn every_acquisition_and_release_reaches_the_installed_hooks_with_the_callers_line() {
    install(&HOOKS);
    let lock = Lock::new("hooked", 5u8);
    let line = line!() + 1;
    let mut guard = lock.lock();
    *guard += 1;
    drop(guard);
    assert_eq!(*lock.lock(), 6);
    assert_eq!(COUNTING.acquired.load(Ordering::SeqCst), 2);
    assert_eq!(COUNTING.released.load(Ordering::SeqCst), 2);
    assert_eq!(COUNTING.lines.lock().unwrap()[0], line, "the line of the first lock() call");
}
