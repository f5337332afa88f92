//! The fork server: a zygote. The runner forks one process from itself, loaded (the panic
//! hook installed, the targets' keys read, the children's heap reserved), that does nothing but fork a child per
//! input on request and report how it ended. The runner then never forks: its own
//! writes (the next input, its books) no longer copy a page that a child still shares,
//! and the zygote touches only a few pages of its own between two forks.
//!
//! The protocol, per input `n` (a sequence number):
//!
//! 1. The runner copies the input into a shared region ([`INPUT_MAX`] bytes of
//!    `MAP_SHARED` memory it mapped before the zygote's fork, read-only in the zygote and
//!    its children) and writes `n` and the input's length down the zygote's request pipe.
//! 2. The zygote forks a child, which runs the input from the shared region under
//!    [`exec::in_process`], writes its answer (a frame: a `u64` length, `n`, [`ANSWER`],
//!    the [`Outcome`]'s encoding) down the zygote's answer pipe and leaves by `_exit`.
//! 3. The zygote waits for the child's end (`SIGCHLD`, blocked in the zygote and taken
//!    with `sigtimedwait` until the bound), reaps it, and reports down the report pipe, in
//!    one frame: the child's answer if a whole one for `n` is in the answer pipe; else
//!    [`ENDED`] and its wait status (it died, or left without an answer: the `crash`
//!    finding); past the bound, [`HANG`] once it has killed and reaped it. Only then does
//!    it read the next request: one child at a time, one report per request, the runner
//!    woken once per input.
//!
//! Between two forks the zygote writes only its stack and the answer it relays: the
//! input is never copied into it.
//!
//! Every wait has a deadline: the zygote's for the child's end (the bound, then
//! `SIGKILL`); the runner's for the report (the bound and [`GRACE`]: past it the zygote
//! is killed, with its child, and the input is a hang); the runner's for a zygote told to
//! leave ([`LEAVE`], then `SIGKILL`). The zygote dies with the runner and each child with
//! the zygote (`PR_SET_PDEATHSIG`, `SIGKILL`), so no child outlives the runner. A zygote
//! serves one target's `run`: the next target gets a new one, and the old one leaves when
//! its request pipe closes.

use crate::exec::{self, Outcome, Verdict};
use crate::RunFn;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Frame tag: a child's answer, its [`Outcome`] encoded.
const ANSWER: u8 = b'a';
/// Frame tag: the child ended without a whole answer; its wait status follows (`i32` LE).
const ENDED: u8 = b'e';
/// Frame tag: the child did not end within the bound; the zygote killed and reaped it.
const HANG: u8 = b'h';

/// The longest input the shared region holds; a longer one (a replayed file) runs in a
/// child of its own, as with `--fork-each`. Address space only until written.
pub const INPUT_MAX: usize = 16 << 20;
/// What the runner gives the zygote past the bound before it stops waiting.
const GRACE: Duration = Duration::from_secs(5);
/// How long a zygote told to leave may take to go.
const LEAVE: Duration = Duration::from_secs(10);
/// The answer pipe's capacity the zygote asks for: a child's whole answer must fit, as
/// nothing reads it before the child ends (a longer finding's detail is cut to fit).
const ANSWER_PIPE: i32 = 1 << 20;

/// A zygote of the runner's.
struct Zygote {
    pid: libc::pid_t,
    /// The target it runs, as an address (compared only to reuse the zygote).
    run: usize,
    /// The write end of its request pipe.
    request: i32,
    /// The read end of its report pipe.
    report: i32,
}

/// The runner's side of the fork server.
#[derive(Default)]
pub struct ForkServer {
    zygote: Option<Zygote>,
    /// The shared region's address (0: not mapped yet).
    region: usize,
    /// The last input's sequence number.
    seq: u64,
    /// Bytes read from the report pipe and not yet taken as frames.
    report: Vec<u8>,
}

impl ForkServer {
    /// A server with no zygote yet.
    pub fn new() -> ForkServer {
        ForkServer::default()
    }

    /// Forks the zygote for `run` from the runner (mapping the shared region first).
    fn start(&mut self, run: RunFn, bound: Duration) -> Zygote {
        // Once, in the runner: no child installs the hook or reserves its heap again.
        crate::panics::quiet_panics();
        crate::targets::prepare();
        crate::arena::reserve();
        if self.region == 0 {
            // SAFETY: a shared anonymous mapping at an address of the kernel's choosing;
            // it overlaps nothing of ours.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    INPUT_MAX,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if at == libc::MAP_FAILED {
                panic!("mmap of the fork server's input region: {}", std::io::Error::last_os_error());
            }
            self.region = at as usize;
        }
        self.report.clear();
        let (request_read, request_write) = exec::pipe();
        let (report_read, report_write) = exec::pipe();
        // SAFETY: getpid has no preconditions.
        let runner = unsafe { libc::getpid() };
        // SAFETY: the runner has one thread, so the zygote inherits no lock held
        // elsewhere and may allocate; it leaves only through `_exit` in `zygote`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            panic!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            die_with(runner);
            exec::close(request_write);
            exec::close(report_read);
            // SAFETY: the region is ours, mapped above; read-only from here on, for the
            // zygote and the children it forks.
            unsafe { libc::mprotect(self.region as *mut libc::c_void, INPUT_MAX, libc::PROT_READ) };
            zygote(run, bound, self.region as *const u8, request_read, report_write);
        }
        exec::close(request_read);
        exec::close(report_write);
        Zygote { pid, run: run as usize, request: request_write, report: report_read }
    }

    /// Runs `input` through `run` in a fresh child of the zygote, killed past `bound`.
    pub fn run(&mut self, run: RunFn, input: &[u8], bound: Duration) -> Outcome {
        if input.len() > INPUT_MAX {
            return exec::forked(run, input, bound);
        }
        let zygote = match self.zygote.take() {
            Some(zygote) if zygote.run == run as usize => zygote,
            other => {
                if let Some(zygote) = other {
                    ForkServer::dismiss(zygote);
                }
                self.start(run, bound)
            }
        };
        // SAFETY: the region holds INPUT_MAX bytes, at least `input.len()`; no child
        // reads it now (the last one answered, and the zygote forks the next only on the
        // request below).
        unsafe { std::ptr::copy_nonoverlapping(input.as_ptr(), self.region as *mut u8, input.len()) };
        self.seq += 1;
        let mut request = [0u8; 16];
        request[..8].copy_from_slice(&self.seq.to_le_bytes());
        request[8..].copy_from_slice(&(input.len() as u64).to_le_bytes());
        if !exec::write_all(zygote.request, &request) {
            // The zygote died (killed from outside): this input gets a child of its own,
            // as with `--fork-each`, and the next a new zygote.
            eprintln!("hostfuzz: the fork server's zygote {} is gone; this input runs in a child of its own, the next in a new zygote's", zygote.pid);
            ForkServer::end(zygote);
            return exec::forked(run, input, bound);
        }
        match self.outcome(zygote.report, Instant::now() + bound + GRACE) {
            Ok(outcome) => {
                self.zygote = Some(zygote);
                outcome
            }
            Err(late) => {
                // The zygote missed its own deadline, died or garbled a frame: it goes,
                // its child with it; the input is a hang, or runs again in a child of its
                // own.
                let what = if late { "did not report within the bound" } else { "is gone or garbled its report" };
                eprintln!(
                    "hostfuzz: the fork server's zygote {} {what}; the next input runs in a new zygote's child",
                    zygote.pid
                );
                ForkServer::end(zygote);
                if late {
                    hang()
                } else {
                    exec::forked(run, input, bound)
                }
            }
        }
    }

    /// Reads the zygote's report on the current input: its child's answer, its end
    /// without one (a crash), or its hang. `Err(true)` past the deadline, `Err(false)` if
    /// the pipe ends or a frame is garbled.
    fn outcome(&mut self, fd: i32, deadline: Instant) -> Result<Outcome, bool> {
        let mut chunk = [0u8; 4096];
        loop {
            while let Some(len) = self.report.get(..8).map(|l| u64::from_le_bytes(l.try_into().expect("8 bytes"))) {
                let Some(end) = usize::try_from(len).ok().and_then(|l| l.checked_add(8)) else {
                    return Err(false);
                };
                if self.report.len() < end {
                    break;
                }
                let frame: Vec<u8> = self.report.drain(..end).skip(8).collect();
                let (Some(seq), Some(&tag), Some(payload)) = (frame.get(..8), frame.get(8), frame.get(9..)) else {
                    return Err(false);
                };
                if u64::from_le_bytes(seq.try_into().expect("8 bytes")) != self.seq {
                    continue; // not this input's: none should come, but none is taken for it
                }
                return match (tag, payload) {
                    (ANSWER, answer) => exec::decode(answer).ok_or(false),
                    (ENDED, status) => {
                        let status = status.try_into().map_err(|_| false)?;
                        Ok(exec::crashed(i32::from_le_bytes(status)))
                    }
                    (HANG, []) => Ok(hang()),
                    _ => Err(false),
                };
            }
            match exec::readable_by(fd, deadline) {
                exec::Readable::Yes => {}
                exec::Readable::Late => return Err(true),
                exec::Readable::Failed => return Err(false),
            }
            // SAFETY: `chunk` is valid for `chunk.len()` bytes of writing.
            let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                return Err(false);
            }
            self.report.extend_from_slice(&chunk[..n as usize]);
        }
    }

    /// Tells a zygote to leave (its request pipe closes) and waits for it, within
    /// [`LEAVE`] (past it: killed, and its child with it).
    fn dismiss(zygote: Zygote) {
        exec::close(zygote.request);
        exec::close(zygote.report);
        exec::wait_until(zygote.pid, Instant::now() + LEAVE);
    }

    /// Kills a zygote (its child dies with it) and reaps it.
    fn end(zygote: Zygote) {
        exec::close(zygote.request);
        exec::close(zygote.report);
        exec::kill(zygote.pid);
        exec::wait(zygote.pid, 0);
    }

    /// Dismisses the zygote: none is left running, nor any child of it.
    pub fn stop(&mut self) {
        if let Some(zygote) = self.zygote.take() {
            ForkServer::dismiss(zygote);
        }
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        self.stop();
    }
}

thread_local! {
    /// The runner's fork server, its zygote (it has one thread).
    static SERVER: RefCell<ForkServer> = RefCell::new(ForkServer::new());
}

/// Runs `input` through `run` in a fresh child of the runner's fork server (its zygote),
/// killed past `bound`.
pub fn served(run: RunFn, input: &[u8], bound: Duration) -> Outcome {
    SERVER.with(|server| server.borrow_mut().run(run, input, bound))
}

/// Stops the runner's fork server: no zygote waits and every child is reaped.
pub fn stop_serving() {
    SERVER.with(|server| server.borrow_mut().stop());
}

fn hang() -> Outcome {
    Outcome { verdict: Verdict::Hang, consumed: 0, trace: 0 }
}

/// In a forked process: dies with `parent` (`SIGKILL`), or leaves at once if the parent
/// is already gone.
fn die_with(parent: libc::pid_t) {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number; getppid and _exit have
    // no preconditions. If the parent died before the prctl, it is no longer ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

/// The zygote: a child per request, one at a time, each reaped and reported, until the
/// request pipe closes.
fn zygote(run: RunFn, bound: Duration, region: *const u8, request: i32, report: i32) -> ! {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let (answers, answer_write) = exec::pipe();
    // SAFETY: fcntl on a pipe end of ours: a bigger capacity (best effort: what it got is
    // read back, and each child fits its answer in that), and reads that never block.
    let capacity = unsafe {
        libc::fcntl(answers, libc::F_SETPIPE_SZ, ANSWER_PIPE);
        libc::fcntl(answers, libc::F_SETFL, libc::O_NONBLOCK);
        libc::fcntl(answers, libc::F_GETPIPE_SZ).max(4096) as usize
    };
    // SAFETY: blocks SIGCHLD in the zygote, for `sigtimedwait` in `ended_within`. Its
    // children inherit the mask and keep it (restoring it would cost each two page
    // faults): they fork no child of their own, so SIGCHLD never concerns them.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &sigchld(), std::ptr::null_mut()) };
    let mut answer: Vec<u8> = Vec::with_capacity(capacity);
    loop {
        let mut header = [0u8; 16];
        if !exec::read_exact(request, &mut header) {
            break;
        }
        let seq = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let len = (u64::from_le_bytes(header[8..].try_into().expect("8 bytes")) as usize).min(INPUT_MAX);
        let pid = bare_fork();
        if pid < 0 {
            panic!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            die_with(me);
            crate::arena::start();
            // SAFETY: the region holds INPUT_MAX bytes, mapped for the zygote's life; the
            // runner wrote `len` of them before the request and writes again only after
            // this child's report.
            let input = unsafe { std::slice::from_raw_parts(region, len) };
            let mut outcome = exec::in_process(run, input);
            let mut out = Vec::new();
            frame(&mut out, seq, ANSWER, &exec::encode(&outcome));
            if out.len() > capacity {
                // Nothing reads the pipe before this child ends: the answer must fit.
                if let Verdict::Found(finding) = &mut outcome.verdict {
                    let detail = &finding.detail;
                    let keep = (0..=capacity / 2).rev().find(|&i| detail.is_char_boundary(i)).unwrap_or(0);
                    finding.detail.truncate(keep);
                    finding.detail.push_str(" [cut to fit the fork server's answer pipe]");
                }
                out.clear();
                frame(&mut out, seq, ANSWER, &exec::encode(&outcome));
            }
            exec::write_all(answer_write, &out);
            // SAFETY: ends the child at once, running no destructor and flushing no
            // buffer it shares with the zygote.
            unsafe { libc::_exit(0) }
        }
        let ended = ended_within(pid, bound);
        if ended.is_none() {
            exec::kill(pid);
            exec::wait(pid, 0);
        }
        // Whatever the child wrote is in the pipe now: it has ended.
        answer.clear();
        drain(answers, &mut answer);
        let whole = answer.get(..8).map(|l| u64::from_le_bytes(l.try_into().expect("8 bytes")) as usize)
            == Some(answer.len().wrapping_sub(8))
            && answer.get(8..16) == Some(&seq.to_le_bytes()[..])
            && answer.get(16) == Some(&ANSWER);
        let mut end = [0u8; 8 + 8 + 1 + 4];
        let own = match ended {
            _ if whole => 0,
            Some(status) => {
                end[16] = ENDED;
                end[17..].copy_from_slice(&status.to_le_bytes());
                end.len()
            }
            None => {
                end[16] = HANG;
                17
            }
        };
        let sent = if own == 0 {
            exec::write_all(report, &answer)
        } else {
            end[..8].copy_from_slice(&(own as u64 - 8).to_le_bytes());
            end[8..16].copy_from_slice(&seq.to_le_bytes());
            exec::write_all(report, &end[..own])
        };
        if !sent {
            break;
        }
    }
    // SAFETY: ends the zygote at once, running no destructor and flushing no buffer it
    // shares with the runner; it has no child left (each is reaped before the next).
    unsafe { libc::_exit(0) }
}

/// `fork` as the bare system call (`clone` with `SIGCHLD` and nothing shared), without
/// glibc's wrapper: its fork handlers lock and reset malloc's arenas, stdio's list and
/// more in the parent and again in the child, writes that cost the zygote and each child
/// copy-on-write faults (3 of an `isolation` input's 20, and 12% of its CPU time,
/// measured). What they guard is not there: the zygote has one thread and forks from
/// its loop, never from inside malloc or stdio, and registers no fork handler. What the
/// child keeps stale is the zygote's thread id in its thread descriptor: glibc (2.34 and
/// later) asks the kernel for the thread id when a thread signals itself (`raise`,
/// `abort`: `a_child_s_panic_abort_and_hang_are_reported_by_both_forks`), the threads a
/// child makes get their own (the `timers` target), and nothing here takes a
/// recursive or error-checking pthread mutex. Returns as `fork` does. (On an
/// architecture whose `clone` takes its arguments in another order, glibc's `fork`.)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
fn bare_fork() -> libc::pid_t {
    // SAFETY: clone(SIGCHLD, no new stack, no tid pointers, no TLS) is fork: the child
    // gets a copy of the address space and continues here on its copy of the stack.
    // The zygote is single-threaded and holds no lock (see above).
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0usize, 0usize, 0usize, 0usize) };
    pid as libc::pid_t
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
fn bare_fork() -> libc::pid_t {
    // SAFETY: the zygote is single-threaded and holds no lock.
    unsafe { libc::fork() }
}

/// A frame: length, sequence number, tag, payload.
fn frame(out: &mut Vec<u8>, seq: u64, tag: u8, payload: &[u8]) {
    out.extend_from_slice(&(9 + payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(tag);
    out.extend_from_slice(payload);
}

/// Everything in the non-blocking pipe `fd`, appended to `buf`.
fn drain(fd: i32, buf: &mut Vec<u8>) {
    loop {
        buf.reserve(4096);
        let room = buf.capacity() - buf.len();
        // SAFETY: the pointer and length name the reserved, unfilled end of `buf`.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().add(buf.len()).cast(), room) };
        if n <= 0 {
            return;
        }
        // SAFETY: `read` filled `n` bytes of that room.
        unsafe { buf.set_len(buf.len() + n as usize) };
    }
}

/// The signal set of `SIGCHLD` alone.
fn sigchld() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

/// Waits for the zygote's child `pid` to end, until `bound`: its wait status, or `None`
/// if it still runs then. `SIGCHLD` is blocked in the zygote: `sigtimedwait` takes it
/// (one left pending by an earlier child only makes one more turn of the loop).
fn ended_within(pid: libc::pid_t, bound: Duration) -> Option<i32> {
    let deadline = Instant::now() + bound;
    let children = sigchld();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = libc::timespec { tv_sec: left.as_secs() as _, tv_nsec: left.subsec_nanos() as _ };
        // SAFETY: a valid signal set and timespec; no siginfo is asked for.
        unsafe { libc::sigtimedwait(&children, std::ptr::null_mut(), &timeout) };
        if let Some(status) = exec::wait(pid, libc::WNOHANG) {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
    }
}
