//! The kernel's spin lock.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// A spin lock; interrupts are off in the kernel, so it never has to turn them off.
pub struct Lock<T> {
    held: AtomicBool,
    /// The lock's class, for the machine's reports and its lock-order graph.
    name: &'static str,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a Guard, and at most one Guard exists at a
// time (the atomic flag), so sharing the lock between harts hands T to one at a time.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    /// A free lock of class `name` around `value`.
    pub const fn new(name: &'static str, value: T) -> Lock<T> {
        Lock { held: AtomicBool::new(false), name, value: UnsafeCell::new(value) }
    }

    /// The lock's class.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Spins until the lock is free, then holds it.
    #[cfg_attr(feature = "machine", track_caller)]
    pub fn lock(&self) -> Guard<'_, T> {
        #[cfg(feature = "machine")]
        if let Some(hooks) = crate::machine::hooks() {
            hooks.acquire(self as *const Self as usize, self.name, core::panic::Location::caller());
        }
        while self.held.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            core::hint::spin_loop();
        }
        Guard { lock: self }
    }
}

/// Proof the lock is held; frees it when dropped.
pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; the guard is borrowed mutably, so this is the only one.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // The test-only feature `relaxed-release` breaks this on purpose (Miri's self-check).
        let order = if cfg!(feature = "relaxed-release") { Ordering::Relaxed } else { Ordering::Release };
        self.lock.held.store(false, order);
        #[cfg(feature = "machine")]
        if let Some(hooks) = crate::machine::hooks() {
            hooks.release(self.lock as *const Lock<T> as usize, self.lock.name);
        }
    }
}
