//! The machine's side of the lock (host only): a lock asks the installed [`Hooks`] before
//! it takes its flag and tells them after it drops it. Without hooks installed, or on a
//! thread the machine does not run, a lock is the plain spin lock.

use core::panic::Location;
use core::sync::atomic::{AtomicPtr, Ordering};

/// What the machine does at a lock's operations. `lock` is the lock's address (its
/// identity while it lives), `name` its class, `at` the caller's line.
pub trait Hooks: Sync {
    /// Before the flag is taken: the machine may run other tasks first, and returns only
    /// when the lock is free for the caller.
    fn acquire(&self, lock: usize, name: &'static str, at: &'static Location<'static>);
    /// After the flag is dropped.
    fn release(&self, lock: usize, name: &'static str);
}

/// The installed hooks: a pointer to a `&'static dyn Hooks` (a thin pointer to the fat
/// one, so it fits an atomic).
static HOOKS: AtomicPtr<&'static dyn Hooks> = AtomicPtr::new(core::ptr::null_mut());

/// Installs `hooks` for every lock from now on (the first call wins).
pub fn install(hooks: &'static &'static dyn Hooks) {
    let ptr = hooks as *const &'static dyn Hooks as *mut &'static dyn Hooks;
    let _ = HOOKS.compare_exchange(core::ptr::null_mut(), ptr, Ordering::AcqRel, Ordering::Acquire);
}

pub(crate) fn hooks() -> Option<&'static dyn Hooks> {
    let ptr = HOOKS.load(Ordering::Acquire);
    // SAFETY: a non-null HOOKS came from `install`, which only stores a pointer made from
    // a `&'static &'static dyn Hooks`: valid, aligned and never freed.
    (!ptr.is_null()).then(|| unsafe { *ptr })
}
