//! The board of marks the sessions of one case share, and who failed first.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The marks set so far by the sessions of one case. Cloning shares the board.
///
/// It also keeps the name of the first session that failed, so the sessions it stops
/// can say which one it was.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    inner: Arc<(Mutex<Board>, Condvar)>,
}

#[derive(Debug, Default)]
struct Board {
    set: HashSet<String>,
    first_failure: Option<String>,
}

/// Why a [`Marks::wait_for`] returned without its mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The deadline passed first.
    Deadline,
    /// The stop flag was raised first.
    Stopped,
}

/// The longest a waiter sleeps before it looks at the stop flag again, for a stop
/// raised by someone who did not call [`Marks::wake`].
const STOP_POLL: Duration = Duration::from_millis(50);

impl Marks {
    pub fn new() -> Marks {
        Marks::default()
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        // A session that panicked holding the lock left the set consistent (each update
        // is one insert): go on with it.
        self.inner.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Set the mark `name` and wake every session waiting for it.
    pub fn set(&self, name: &str) {
        self.board().set.insert(name.to_string());
        self.inner.1.notify_all();
    }

    pub fn is_set(&self, name: &str) -> bool {
        self.board().set.contains(name)
    }

    /// Wait until `name` is set, `stop` is raised, or `deadline` passes, whichever is
    /// first.
    pub fn wait_for(&self, name: &str, deadline: Instant, stop: &AtomicBool) -> Result<(), WaitEnd> {
        let mut board = self.board();
        loop {
            if board.set.contains(name) {
                return Ok(());
            }
            if stop.load(Ordering::SeqCst) {
                return Err(WaitEnd::Stopped);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(WaitEnd::Deadline);
            }
            let nap = (deadline - now).min(STOP_POLL);
            board = self.inner.1.wait_timeout(board, nap).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
    }

    /// Record that `session` failed (the first such call is kept) and wake every waiter.
    pub fn fail(&self, session: &str) {
        let mut board = self.board();
        if board.first_failure.is_none() {
            board.first_failure = Some(session.to_string());
        }
        drop(board);
        self.inner.1.notify_all();
    }

    /// The first session recorded as failed, if any.
    pub fn first_failure(&self) -> Option<String> {
        self.board().first_failure.clone()
    }

    /// Wake every waiter, to look at the stop flag now (after raising it).
    pub fn wake(&self) {
        self.inner.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_set_on_another_thread_wakes_the_waiter() {
        let marks = Marks::new();
        let stop = AtomicBool::new(false);
        let setter = marks.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            setter.set("ready");
        });
        assert_eq!(marks.wait_for("ready", Instant::now() + Duration::from_secs(30), &stop), Ok(()));
        thread.join().unwrap();
        assert!(marks.is_set("ready"));
        assert!(!marks.is_set("other"));
    }

    #[test]
    fn a_wait_ends_at_its_deadline_or_at_a_stop() {
        let marks = Marks::new();
        let stop = AtomicBool::new(false);
        assert_eq!(marks.wait_for("never", Instant::now() + Duration::from_millis(20), &stop), Err(WaitEnd::Deadline));
        stop.store(true, Ordering::SeqCst);
        assert_eq!(marks.wait_for("never", Instant::now() + Duration::from_secs(60), &stop), Err(WaitEnd::Stopped));
    }

    #[test]
    fn the_first_failure_is_kept() {
        let marks = Marks::new();
        assert_eq!(marks.first_failure(), None);
        marks.fail("a");
        marks.fail("b");
        assert_eq!(marks.first_failure().as_deref(), Some("a"));
    }
}
