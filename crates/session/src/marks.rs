//! The board of marks the sessions of one case share, and who failed first.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The marks set so far by the sessions of one case. Cloning shares the board.
///
/// It also keeps the name of the first session that failed, so the sessions it stops
/// can say which one it was.
///
/// A board made with [`Marks::for_sessions`] also knows which sessions still run and
/// what each waits for, and so finds a deadlock at once: when every session still
/// running waits for a mark that is not set, none of them can ever set one, and each
/// wait ends with [`WaitEnd::Deadlock`] instead of at its deadline.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    inner: Arc<(Mutex<Board>, Condvar)>,
}

#[derive(Debug, Default)]
struct Board {
    set: HashSet<String>,
    first_failure: Option<String>,
    /// The sessions that have not ended, when the board knows them.
    running: Option<BTreeSet<String>>,
    /// What each session in a `wait` waits for.
    waiting: BTreeMap<String, String>,
    /// The deadlock once found: it stays, for every waiter to see it, even after the
    /// first to see it has left its wait.
    deadlock: Option<String>,
}

impl Board {
    /// Every running session waits for a mark that is not set: say who waits for what.
    fn deadlock(&mut self) -> Option<String> {
        if self.deadlock.is_none() {
            self.deadlock = self.find_deadlock();
        }
        self.deadlock.clone()
    }

    fn find_deadlock(&self) -> Option<String> {
        let running = self.running.as_ref().filter(|r| !r.is_empty())?;
        let mut waits = Vec::new();
        for session in running {
            match self.waiting.get(session) {
                Some(mark) if !self.set.contains(mark) => waits.push(format!("{session} for '{mark}'")),
                _ => return None,
            }
        }
        Some(format!(
            "deadlock: every session still running waits for a mark none of them can set ({})",
            waits.join(", ")
        ))
    }
}

/// Why a [`Marks::wait_for`] or [`Marks::wait_as`] returned without its mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The deadline passed first.
    Deadline,
    /// The stop flag was raised first.
    Stopped,
    /// Every session still running waits for a mark that is not set; the text says
    /// who waits for what.
    Deadlock(String),
}

/// The longest a waiter sleeps before it looks at the stop flag again, for a stop
/// raised by someone who did not call [`Marks::wake`].
const STOP_POLL: Duration = Duration::from_millis(50);

impl Marks {
    /// A board that does not know the case's sessions: it finds no deadlock, and a
    /// wait ends only with its mark, a stop or its deadline.
    pub fn new() -> Marks {
        Marks::default()
    }

    /// A board for the sessions named, all running until each calls [`Marks::ended`]:
    /// it finds a deadlock among them at once.
    pub fn for_sessions<'a>(names: impl IntoIterator<Item = &'a str>) -> Marks {
        let marks = Marks::default();
        marks.board().running = Some(names.into_iter().map(str::to_string).collect());
        marks
    }

    /// The session `session` has ended (passed, failed or stopped): it will set no
    /// more marks. Wakes every waiter, to look for a deadlock again.
    pub fn ended(&self, session: &str) {
        let mut board = self.board();
        if let Some(running) = board.running.as_mut() {
            running.remove(session);
        }
        board.waiting.remove(session);
        drop(board);
        self.inner.1.notify_all();
    }

    /// Session `session` is in a `wait` for `mark` (`Some`) or no longer (`None`).
    /// Returns the deadlock that this wait completes, or one already there.
    pub fn waiting(&self, session: &str, mark: Option<&str>) -> Option<String> {
        let mut board = self.board();
        match mark {
            Some(mark) => board.waiting.insert(session.to_string(), mark.to_string()),
            None => board.waiting.remove(session),
        };
        let deadlock = board.deadlock();
        drop(board);
        if deadlock.is_some() {
            self.inner.1.notify_all();
        }
        deadlock
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
        self.wait(None, name, deadline, stop)
    }

    /// [`Marks::wait_for`], by the session `session`, which sets no mark while it waits:
    /// ends with [`WaitEnd::Deadlock`] as soon as every running session waits so.
    pub fn wait_as(&self, session: &str, name: &str, deadline: Instant, stop: &AtomicBool) -> Result<(), WaitEnd> {
        let result = self.wait(Some(session), name, deadline, stop);
        self.waiting(session, None);
        result
    }

    fn wait(&self, session: Option<&str>, name: &str, deadline: Instant, stop: &AtomicBool) -> Result<(), WaitEnd> {
        if let Some(session) = session {
            self.waiting(session, Some(name));
        }
        let mut board = self.board();
        loop {
            if board.set.contains(name) {
                return Ok(());
            }
            if stop.load(Ordering::SeqCst) {
                return Err(WaitEnd::Stopped);
            }
            if session.is_some() {
                if let Some(deadlock) = board.deadlock() {
                    return Err(WaitEnd::Deadlock(deadlock));
                }
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
    fn two_sessions_waiting_for_each_other_are_a_deadlock_found_at_once() {
        let marks = Marks::for_sessions(["left", "right"]);
        let stop = AtomicBool::new(false);
        let far = Instant::now() + Duration::from_secs(60);
        let other = marks.clone();
        let right = std::thread::spawn(move || other.wait_as("right", "left-ready", far, &AtomicBool::new(false)));
        let started = Instant::now();
        let left = marks.wait_as("left", "right-ready", far, &stop);
        let expected = "deadlock: every session still running waits for a mark none of them can set \
                        (left for 'right-ready', right for 'left-ready')";
        assert_eq!(left, Err(WaitEnd::Deadlock(expected.into())));
        assert_eq!(right.join().unwrap(), Err(WaitEnd::Deadlock(expected.into())));
        assert!(started.elapsed() < Duration::from_secs(30), "found by the deadline, not at once");
    }

    #[test]
    fn a_wait_is_no_deadlock_while_another_session_runs_and_is_one_once_it_ends() {
        let marks = Marks::for_sessions(["waiter", "worker"]);
        assert_eq!(marks.waiting("waiter", Some("done")), None);
        // The worker ends without setting the mark: nobody is left to set it.
        marks.ended("worker");
        let stop = AtomicBool::new(false);
        let end = marks.wait_as("waiter", "done", Instant::now() + Duration::from_secs(60), &stop);
        assert_eq!(
            end,
            Err(WaitEnd::Deadlock(
                "deadlock: every session still running waits for a mark none of them can set (waiter for 'done')"
                    .into()
            ))
        );
        // A mark already set is no deadlock, and a board that does not know its
        // sessions never finds one.
        marks.set("done");
        assert_eq!(marks.wait_as("waiter", "done", Instant::now(), &stop), Ok(()));
        let blind = Marks::new();
        assert_eq!(
            blind.wait_as("a", "never", Instant::now() + Duration::from_millis(20), &stop),
            Err(WaitEnd::Deadline)
        );
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
