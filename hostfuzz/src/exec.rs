//! Running one input: in this process (for the tests and the shrinker's unit tests), or in
//! a fresh child forked for it, so that no input's statics reach the next and a child
//! stuck past its bound can be killed. Three ways to get that child:
//!
//! - `zygote::served`, the runner's: the fork server's zygote (src/zygote.rs, built on
//!   this module's pipes, [`in_process`] and [`forked`]), a process forked once from the
//!   loaded runner that forks a child per input and reports how it ended.
//! - [`spared`], the fork server before the zygote (`--fork-spare`, kept to measure the
//!   zygote against): the runner keeps one child forked ahead of need ([`ForkServer`]),
//!   blocked on a pipe for its input; a run hands the input to that spare and forks the
//!   next spare while the input runs, so the fork overlaps the run. Each input still runs
//!   in a child of its own, forked from the runner, which never runs a target itself: no
//!   input's state can reach another child.
//! - [`forked`], a fork per input made when the input is known and waited for to its exit
//!   (`--fork-each`, kept to measure the fork server against).
//!
//! The fork is `libc::fork` in a process with one thread (the runner never starts
//! another), so the child may run any code: no lock is held by a thread the child lacks.
//! The child runs the target under `catch_unwind`, writes its [`Outcome`] down a pipe and
//! leaves with `_exit` (no destructors, no flushing of the parent's buffers). A child that
//! dies by a signal is a `crash` finding; one that has not answered within the bound is
//! killed and reported as a hang. A served child dies with the runner
//! (`PR_SET_PDEATHSIG`), and a spare also leaves when its input pipe closes.

use crate::{panics, Decisions, Finding, RunFn};
use std::cell::RefCell;
use std::collections::VecDeque;
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

/// Runs `input` through `run` in this process.
pub fn in_process(run: RunFn, input: &[u8]) -> Outcome {
    panics::quiet_panics();
    crate::targets::prepare();
    let mut d = Decisions::new(input);
    let verdict = match panics::catch(|| run(&mut d)) {
        Ok(Ok(())) => Verdict::Pass(d.end_reason().to_owned()),
        Ok(Err(finding)) => Verdict::Found(finding),
        Err((location, message)) => Verdict::Found(Finding::new("panic", &location, message)),
    };
    Outcome { verdict, consumed: d.consumed() as u64, trace: d.trace() }
}

fn put_field(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(&(field.len() as u64).to_le_bytes());
    out.extend_from_slice(field);
}

/// The outcome as bytes for the pipe: length-prefixed fields.
pub(crate) fn encode(outcome: &Outcome) -> Vec<u8> {
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

pub(crate) fn decode(mut bytes: &[u8]) -> Option<Outcome> {
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
    panics::quiet_panics();
    crate::targets::prepare();
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
        match readable_by(read_fd, deadline) {
            Readable::Yes => {}
            Readable::Late => {
                hung = true;
                break;
            }
            Readable::Failed => break,
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

/// Whether a pipe can be read (data, or its other end closed) by a deadline.
pub(crate) enum Readable {
    Yes,
    Late,
    /// `poll` failed for another reason than a signal.
    Failed,
}

/// Waits in `poll` until `fd` can be read or `deadline` passes.
pub(crate) fn readable_by(fd: i32, deadline: Instant) -> Readable {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Readable::Late;
        }
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `pfd` is one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready > 0 {
            return Readable::Yes;
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Readable::Failed;
        }
    }
}

/// Writes all of `bytes` to `fd`; false if the other end is gone first.
pub(crate) fn write_all(fd: i32, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length name the unwritten rest of `bytes`.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// Fills `buf` from `fd`, blocking; false if the pipe ends first.
pub(crate) fn read_exact(fd: i32, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length name the unfilled rest of `buf`.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// A new pipe: (read end, write end).
pub(crate) fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        panic!("pipe: {}", std::io::Error::last_os_error());
    }
    (fds[0], fds[1])
}

pub(crate) fn close(fd: i32) {
    // SAFETY: every caller closes an end of a pipe it made and owns, once.
    unsafe { libc::close(fd) };
}

/// `waitpid` on our child `pid` with `flags` (0, or `WNOHANG` not to block): its wait
/// status once it has ended, `None` while it runs (with `WNOHANG`), 0 if it is no child
/// to wait for.
pub(crate) fn wait(pid: libc::pid_t, flags: i32) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid int to fill.
        let got = unsafe { libc::waitpid(pid, &mut status, flags) };
        if got == pid {
            return Some(status);
        }
        if got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // 0: still running. -1 (ECHILD): not ours, or reaped already: nothing to wait for.
        return if got == 0 { None } else { Some(0) };
    }
}

/// Waits for our child `pid` to end, until `deadline`; past it the child is killed (and
/// then waited for: a killed child's end does not depend on it).
pub(crate) fn wait_until(pid: libc::pid_t, deadline: Instant) -> i32 {
    loop {
        if let Some(status) = wait(pid, libc::WNOHANG) {
            return status;
        }
        if Instant::now() >= deadline {
            kill(pid);
            return wait(pid, 0).unwrap_or(0);
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

pub(crate) fn kill(pid: libc::pid_t) {
    // SAFETY: `pid` is our child, not yet waited for, so the id is still its own.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// The outcome of a child that gave no answer, from its wait status.
pub(crate) fn crashed(status: i32) -> Outcome {
    let what = if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exited with status {} without an answer", libc::WEXITSTATUS(status))
    };
    Outcome { verdict: Verdict::Found(Finding::new("crash", &what, "")), consumed: 0, trace: 0 }
}

/// A child forked ahead of need, blocked on its input pipe.
struct Spare {
    pid: libc::pid_t,
    /// The target it runs, as an address (compared only to reuse the spare).
    run: usize,
    /// The write end of its input pipe.
    input: i32,
    /// The read end of its answer pipe.
    answer: i32,
}

/// What a served child's answer pipe gave.
pub(crate) enum Answer {
    /// A whole answer: its length prefix said so.
    Whole(Vec<u8>),
    /// The pipe ended before a whole answer (the child died, or left without one).
    Ended,
    /// Nothing whole within the bound.
    Late,
}

/// The fork server: the runner's children, forked ahead of need.
///
/// The protocol, per input: the runner writes the input (a `u64` length, little-endian,
/// then the bytes) down the spare's input pipe and closes it, then forks the next spare
/// while this one runs. The child reads its input, runs it under [`in_process`] and
/// writes its answer (a `u64` length, then the [`Outcome`]'s encoding) down its answer
/// pipe, then leaves by `_exit`. The runner waits for the whole answer until the bound
/// (past it: `SIGKILL`, a hang); an end of the pipe before a whole answer is a crash,
/// with the child's wait status. A child that answered is reaped later, while the runner
/// goes on (its exit costs the runner nothing).
#[derive(Default)]
pub struct ForkServer {
    /// The next input's child.
    spare: Option<Spare>,
    /// Children that answered or were dismissed, to reap once they have ended.
    leaving: VecDeque<libc::pid_t>,
}

/// The children a [`ForkServer`] lets end on their own before it waits for the oldest.
const LEAVING_MAX: usize = 8;

impl ForkServer {
    /// A server with no child yet.
    pub fn new() -> ForkServer {
        ForkServer::default()
    }

    /// Forks a spare for `run`: it waits for its input, runs it, answers and leaves.
    fn fork_spare(run: RunFn) -> Spare {
        // Once, in the runner: no child installs the hook or reserves its heap again.
        panics::quiet_panics();
        crate::targets::prepare();
        crate::arena::reserve();
        let (input_read, input_write) = pipe();
        let (answer_read, answer_write) = pipe();
        // SAFETY: getpid has no preconditions.
        let runner = unsafe { libc::getpid() };
        // SAFETY: the runner has one thread, so the child inherits no lock held elsewhere
        // and may allocate and unwind; it leaves only through `_exit` in `serve`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            panic!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number; getppid has no
            // preconditions. If the runner died before the prctl, the parent is no longer
            // it: leave at once.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != runner {
                    libc::_exit(0);
                }
            }
            close(input_write);
            close(answer_read);
            crate::arena::start();
            serve(run, input_read, answer_write);
        }
        close(input_read);
        close(answer_write);
        Spare { pid, run: run as usize, input: input_write, answer: answer_read }
    }

    /// Runs `input` through `run` in a fresh child, killed past `bound`.
    pub fn run(&mut self, run: RunFn, input: &[u8], bound: Duration) -> Outcome {
        self.reap(false);
        let child = match self.spare.take() {
            Some(spare) if spare.run == run as usize => spare,
            other => {
                if let Some(spare) = other {
                    self.dismiss(spare);
                }
                ForkServer::fork_spare(run)
            }
        };
        let deadline = Instant::now() + bound;
        let handed = write_all(child.input, &(input.len() as u64).to_le_bytes()) && write_all(child.input, input);
        close(child.input);
        if !handed {
            // The spare died before its input (killed from outside): this input gets a
            // child of its own, as with `--fork-each`.
            close(child.answer);
            kill(child.pid);
            wait(child.pid, 0);
            return forked(run, input, bound);
        }
        // The next input's child, forked while this one runs.
        self.spare = Some(ForkServer::fork_spare(run));
        let answer = read_answer(child.answer, deadline);
        close(child.answer);
        match answer {
            Answer::Whole(bytes) => {
                if let Some(outcome) = decode(&bytes) {
                    self.leaving.push_back(child.pid);
                    return outcome;
                }
                crashed(wait_until(child.pid, Instant::now() + bound))
            }
            Answer::Ended => crashed(wait_until(child.pid, Instant::now() + bound)),
            Answer::Late => {
                // A killed child ends without anything of its own to run: this wait is short.
                kill(child.pid);
                wait(child.pid, 0);
                Outcome { verdict: Verdict::Hang, consumed: 0, trace: 0 }
            }
        }
    }

    /// Lets a spare go: its input pipe closes, so it leaves without running anything.
    fn dismiss(&mut self, spare: Spare) {
        close(spare.input);
        close(spare.answer);
        self.leaving.push_back(spare.pid);
    }

    /// Reaps the children that have ended; with `all`, waits for every one (each within
    /// the bound of 5 s, past which it is killed).
    fn reap(&mut self, all: bool) {
        let must = if all { 0 } else { LEAVING_MAX };
        while self.leaving.len() > must {
            let oldest = self.leaving.pop_front().expect("a child");
            wait_until(oldest, Instant::now() + Duration::from_secs(5));
        }
        // They leave about in the order they answered: the oldest first.
        while let Some(&oldest) = self.leaving.front() {
            if wait(oldest, libc::WNOHANG).is_none() {
                break;
            }
            self.leaving.pop_front();
        }
    }

    /// Dismisses the spare and reaps every child: none is left running.
    pub fn stop(&mut self) {
        if let Some(spare) = self.spare.take() {
            self.dismiss(spare);
        }
        self.reap(true);
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A served child: reads its input, runs it, answers, leaves.
fn serve(run: RunFn, input: i32, answer: i32) -> ! {
    let mut len = [0u8; 8];
    let mut bytes = Vec::new();
    let given = read_exact(input, &mut len) && {
        // Zeros from the arena's fresh pages: nothing written before the read fills them.
        bytes = vec![0; u64::from_le_bytes(len) as usize];
        read_exact(input, &mut bytes)
    };
    if given {
        let outcome = encode(&in_process(run, &bytes));
        let mut framed = Vec::with_capacity(8 + outcome.len());
        framed.extend_from_slice(&(outcome.len() as u64).to_le_bytes());
        framed.extend_from_slice(&outcome);
        write_all(answer, &framed);
    }
    // SAFETY: ends the child at once, running no destructor and flushing no buffer it
    // shares with the runner.
    unsafe { libc::_exit(0) }
}

/// Reads a served child's answer from `fd` until it is whole, the pipe ends, or `deadline`.
pub(crate) fn read_answer(fd: i32, deadline: Instant) -> Answer {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(len) = answer.get(..8).map(|l| u64::from_le_bytes(l.try_into().expect("8 bytes")) as usize) {
            if answer.len() - 8 >= len {
                answer.drain(..8);
                return Answer::Whole(answer);
            }
        }
        match readable_by(fd, deadline) {
            Readable::Yes => {}
            Readable::Late => return Answer::Late,
            Readable::Failed => return Answer::Ended,
        }
        // SAFETY: `buf` is valid for `buf.len()` bytes of writing.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return Answer::Ended;
        }
        answer.extend_from_slice(&buf[..n as usize]);
    }
}

thread_local! {
    /// The runner's spares (it has one thread).
    static SPARES: RefCell<ForkServer> = RefCell::new(ForkServer::new());
}

/// Runs `input` through `run` in a spare the runner forked ahead of need
/// (`--fork-spare`, the fork server before the zygote), killed past `bound`.
pub fn spared(run: RunFn, input: &[u8], bound: Duration) -> Outcome {
    SPARES.with(|server| server.borrow_mut().run(run, input, bound))
}

/// Stops the runner's spares: none waits and every child is reaped.
pub fn stop_spares() {
    SPARES.with(|server| server.borrow_mut().stop());
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
