//! Running one input: in this process (for the tests and the shrinker's unit tests), or in
//! a child forked for it (the runner), so that no input's statics reach the next and a
//! child stuck past its bound can be killed.
//!
//! The fork is `libc::fork` in a process with one thread (the runner never starts
//! another), so the child may run any code: no lock is held by a thread the child lacks.
//! The child runs the target under `catch_unwind`, writes its [`Outcome`] down a pipe and
//! leaves with `_exit` (no destructors, no flushing of the parent's buffers). A child that
//! dies by a signal is a `crash` finding; one that has not answered within the bound is
//! killed and reported as a hang.

use crate::{Decisions, Finding, RunFn};
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing found; the end reason the target gave.
    Pass(String),
    /// A finding (a panic is one, kind "panic").
    Found(Finding),
    /// Killed past the bound.
    Hang,
}

/// A run's result: its verdict, how many bytes of decisions it read and their hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub verdict: Verdict,
    /// Bytes of decisions read (zeros past the end included).
    pub consumed: u64,
    /// The hash of the decisions read ([`Decisions::trace`]).
    pub trace: u64,
}

impl Outcome {
    /// The finding, if there was one.
    pub fn finding(&self) -> Option<&Finding> {
        match &self.verdict {
            Verdict::Found(f) => Some(f),
            _ => None,
        }
    }
}

thread_local! {
    /// The last panic's location and message, kept by the hook.
    static PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Replaces the panic hook by one that keeps the panic's location and message for the
/// run's finding instead of printing them.
fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        panic::set_hook(Box::new(|info| {
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

/// Runs `input` through `run` in this process.
pub fn in_process(run: RunFn, input: &[u8]) -> Outcome {
    quiet_panics();
    let mut d = Decisions::new(input);
    let result = panic::catch_unwind(AssertUnwindSafe(|| run(&mut d)));
    let verdict = match result {
        Ok(Ok(())) => Verdict::Pass(d.end_reason().to_owned()),
        Ok(Err(finding)) => Verdict::Found(finding),
        Err(_) => {
            let (location, message) = PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
            Verdict::Found(Finding::new("panic", &location, message))
        }
    };
    Outcome { verdict, consumed: d.consumed() as u64, trace: d.trace() }
}

fn put_field(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(&(field.len() as u64).to_le_bytes());
    out.extend_from_slice(field);
}

/// The outcome as bytes for the pipe: length-prefixed fields.
fn encode(outcome: &Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    let fields: Vec<&[u8]> = match &outcome.verdict {
        Verdict::Pass(reason) => vec![b"pass", reason.as_bytes()],
        Verdict::Found(f) => vec![b"found", f.kind.as_bytes(), f.what.as_bytes(), f.detail.as_bytes()],
        Verdict::Hang => vec![b"hang"],
    };
    put_field(&mut out, &outcome.consumed.to_le_bytes());
    put_field(&mut out, &outcome.trace.to_le_bytes());
    for field in fields {
        put_field(&mut out, field);
    }
    out
}

fn decode(mut bytes: &[u8]) -> Option<Outcome> {
    let mut fields = Vec::new();
    while !bytes.is_empty() {
        let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
        fields.push(bytes.get(8..8usize.checked_add(len)?)?);
        bytes = &bytes[8 + len..];
    }
    let number = |f: &[u8]| Some(u64::from_le_bytes(f.try_into().ok()?));
    let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let (consumed, trace) = (number(fields.first()?)?, number(fields.get(1)?)?);
    let verdict = match (*fields.get(2)?, &fields[3..]) {
        (b"pass", [reason]) => Verdict::Pass(text(reason)),
        (b"found", [kind, what, detail]) => {
            Verdict::Found(Finding { kind: text(kind), what: text(what), detail: text(detail) })
        }
        (b"hang", []) => Verdict::Hang,
        _ => return None,
    };
    Some(Outcome { verdict, consumed, trace })
}

/// Runs `input` through `run` in a forked child, killed past `bound`.
pub fn forked(run: RunFn, input: &[u8], bound: Duration) -> Outcome {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        panic!("pipe: {}", std::io::Error::last_os_error());
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // SAFETY: the runner has one thread, so the child inherits no lock held elsewhere
    // and may allocate and unwind; it leaves only through `_exit` below.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        panic!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        let bytes = encode(&in_process(run, input));
        let mut done = 0;
        while done < bytes.len() {
            // SAFETY: the pointer and length name the unwritten rest of `bytes`.
            let n = unsafe { libc::write(write_fd, bytes[done..].as_ptr().cast(), bytes.len() - done) };
            if n <= 0 {
                break;
            }
            done += n as usize;
        }
        // SAFETY: ends the child at once, running no destructor and flushing no buffer it
        // shares with the parent.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: the write end is the parent's to close; the child keeps its own copy.
    unsafe { libc::close(write_fd) };
    let deadline = Instant::now() + bound;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut hung = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            hung = true;
            break;
        }
        let mut pfd = libc::pollfd { fd: read_fd, events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `pfd` is one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready == 0 {
            continue;
        }
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        // SAFETY: `buf` is valid for `buf.len()` bytes of writing.
        let n = unsafe { libc::read(read_fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: the read end is ours; nothing reads it after this.
    unsafe { libc::close(read_fd) };
    if hung {
        // SAFETY: `pid` is our child, not yet waited for, so the id is still its own.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid int to fill.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if hung {
        return Outcome { verdict: Verdict::Hang, consumed: 0, trace: 0 };
    }
    if let Some(outcome) = decode(&answer) {
        return outcome;
    }
    let what = if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exited with status {} without an answer", libc::WEXITSTATUS(status))
    };
    Outcome { verdict: Verdict::Found(Finding::new("crash", &what, "")), consumed: 0, trace: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_round_trips_through_the_pipe_encoding() {
        for verdict in [
            Verdict::Pass("accepted".into()),
            Verdict::Found(Finding::new("panic", "src/x.rs:3", "boom\nline two")),
            Verdict::Hang,
        ] {
            let outcome = Outcome { verdict, consumed: 77, trace: 0xdead_beef };
            assert_eq!(decode(&encode(&outcome)), Some(outcome));
        }
        assert_eq!(decode(b"\x01"), None);
    }

    #[test]
    fn in_process_turns_a_panic_into_a_finding() {
        fn boom(d: &mut Decisions) -> Result<(), Finding> {
            let n = d.u8();
            let _ = 255u8 + n.max(1);
            Ok(())
        }
        let outcome = in_process(boom, &[3]);
        let finding = outcome.finding().expect("a finding");
        assert_eq!(finding.kind, "panic");
        assert!(finding.what.contains("exec.rs:"), "{finding}");
        assert!(finding.detail.contains("overflow"), "{finding}");
    }
}
