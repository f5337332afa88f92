//! A panic inside a run, kept instead of printed: its location and message become the
//! run's finding. A leaf that the run (src/exec.rs, [`catch`]) and the task machine
//! (src/machine.rs, a task's panic on its own thread, [`take_panic`]) both use.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

thread_local! {
    /// The last panic's location and message, kept by the hook.
    static PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Runs under way in this process ([`catch`]): the panic hook keeps a panic for its
/// run's finding only while one is, and leaves any other panic (the runner's own) to the
/// hook it replaced.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Replaces the panic hook by one that keeps the panic's location and message for the
/// run's finding instead of printing them. Done once: the fork server does it before its
/// first fork, so no child does it again.
pub(crate) fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let before = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if RUNNING.load(Ordering::SeqCst) == 0 {
                return before(info);
            }
            let location =
                info.location().map_or_else(|| "unknown".to_owned(), |l| format!("{}:{}", l.file(), l.line()));
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            PANIC.with(|p| *p.borrow_mut() = Some((location, message)));
        }));
    });
}

/// Takes the last panic's location and message that the hook kept on this thread.
pub(crate) fn take_panic() -> Option<(String, String)> {
    PANIC.with(|p| p.borrow_mut().take())
}

/// Runs `f` as a run under way: its panic, if any, is caught and given back as its
/// location and message (empty if the hook kept none), not printed.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, (String, String)> {
    RUNNING.fetch_add(1, Ordering::SeqCst);
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    result.map_err(|_| take_panic().unwrap_or_default())
}
