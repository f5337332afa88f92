//! The client process: spawned through `testbench_process::Cmd`, its stdout and stderr
//! read on threads into one channel of chunks with their arrival times, its stdin a pipe
//! or the slave side of a pseudo-terminal whose master the engine writes to.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use testbench_process::Cmd;

/// How much one read of the client's output takes at most.
pub const READ_CHUNK: usize = 64 << 10;
/// How many chunks wait for the engine at most: a client that writes faster than the
/// engine reads waits on its pipe, and the engine's memory does not grow.
const CHANNEL_CHUNKS: usize = 8;
/// The terminal's size when the client starts (columns, rows).
pub const INITIAL_SIZE: (u16, u16) = (80, 24);

/// What went wrong with the client process, as a session's failure says it after
/// "cannot start ssh: ", "cannot type into ssh: " or the step's place.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("cannot open a pseudo-terminal: {0}")]
    Terminal(#[source] Errno),
    #[error("{0}")]
    Spawn(#[source] testbench_process::CmdError),
    #[error("cannot make the client's input non-blocking: {0}")]
    NonBlocking(#[source] Errno),
    /// The engine closed the input already.
    #[error("its input is closed")]
    InputClosed,
    /// The client closed its end (EPIPE).
    #[error("it closed its input")]
    InputGone,
    #[error("writing its input failed: {0}")]
    Write(#[source] Errno),
    #[error("the client has no terminal open")]
    NoTerminal,
    #[error("TIOCSWINSZ failed: {0}")]
    SetSize(#[source] Errno),
    /// Reaped: its pid may be another process's, so it is never signalled.
    #[error("the client has already exited")]
    Exited,
    #[error("SIGWINCH failed: {0}")]
    Winch(#[source] Errno),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Stdout = 0,
    Stderr = 1,
}

impl Source {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Stdout => "stdout",
            Source::Stderr => "stderr",
        }
    }
}

pub(crate) enum Event {
    Data(Source, Vec<u8>, Instant),
    /// The stream ended (with the read error, if one ended it).
    End(Source, Option<String>),
}

pub(crate) struct Client {
    child: Child,
    /// The client's input: the pipe to its stdin, or the terminal's master. Non-blocking.
    input: Option<OwnedFd>,
    pty: bool,
    events: Receiver<Event>,
    readers: Vec<JoinHandle<()>>,
    /// Which of stdout and stderr are still open.
    pub open: [bool; 2],
    /// The exit status once reaped, and when it was seen.
    pub status: Option<(ExitStatus, Instant)>,
    pub spawned: Instant,
}

impl Client {
    pub(crate) fn spawn(cmd: &Cmd, pty: bool) -> Result<Client, ClientError> {
        let (mut child, input) = if pty {
            let (master, slave) = open_terminal().map_err(ClientError::Terminal)?;
            // The slave is the child's stdin only; the engine's copy closes with the
            // Command inside spawn_with_stdin, so the master alone keeps the terminal.
            let child = cmd.spawn_with_stdin(Stdio::from(slave)).map_err(ClientError::Spawn)?;
            (child, master)
        } else {
            let mut child = cmd.spawn_with_stdin(Stdio::piped()).map_err(ClientError::Spawn)?;
            let stdin = child.stdin.take().expect("stdin was piped");
            (child, OwnedFd::from(stdin))
        };
        let spawned = Instant::now();
        if let Err(e) = rustix::io::ioctl_fionbio(&input, true) {
            let _ = child.kill();
            let _ = testbench_process::wait_deadline(&mut child, Duration::from_secs(10));
            return Err(ClientError::NonBlocking(e));
        }
        let (tx, events) = sync_channel(CHANNEL_CHUNKS);
        let stdout = child.stdout.take().expect("stdout was piped");
        let stderr = child.stderr.take().expect("stderr was piped");
        let readers = vec![reader(stdout, Source::Stdout, tx.clone()), reader(stderr, Source::Stderr, tx)];
        Ok(Client { child, input: Some(input), pty, events, readers, open: [true, true], status: None, spawned })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next event, waiting until `until` at most.
    pub(crate) fn next(&mut self, until: Instant) -> Option<Event> {
        let wait = until.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(wait) {
            Ok(event) => Some(event),
            Err(RecvTimeoutError::Timeout) => None,
            // Both readers are gone: they sent their ends first.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                None
            }
        }
    }

    /// Reap the client if it exited; its status, newly seen.
    pub(crate) fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.status.is_some() {
            return None;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.status = Some((status, Instant::now()));
                Some(status)
            }
            _ => None,
        }
    }

    /// Read and discard what the terminal sends back (its echo of the input: the
    /// terminal is the client's input and never a verdict), so it never fills.
    pub(crate) fn drain_terminal(&mut self) {
        let (true, Some(master)) = (self.pty, self.input.as_ref()) else { return };
        let mut buf = [0u8; 4096];
        for _ in 0..256 {
            match rustix::io::read(master, &mut buf) {
                Ok(n) if n > 0 => continue,
                _ => return,
            }
        }
    }

    /// Write what the input takes now: `Ok(0)` when it takes nothing yet.
    pub(crate) fn write_some(&mut self, bytes: &[u8]) -> Result<usize, ClientError> {
        let Some(input) = self.input.as_ref() else { return Err(ClientError::InputClosed) };
        match rustix::io::write(input, bytes) {
            Ok(n) => Ok(n),
            Err(Errno::AGAIN | Errno::INTR) => Ok(0),
            Err(Errno::PIPE) => Err(ClientError::InputGone),
            Err(e) => Err(ClientError::Write(e)),
        }
    }

    /// Wait until the input takes more, `timeout` at most.
    pub(crate) fn wait_writable(&self, timeout: Duration) {
        let Some(input) = self.input.as_ref() else { return };
        let timeout = rustix::event::Timespec::try_from(timeout).ok();
        let mut fds = [rustix::event::PollFd::new(input, rustix::event::PollFlags::OUT)];
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
    }

    /// Close the input: the pipe's end (the client reads end of file), or the
    /// terminal's master (the terminal hangs up).
    pub(crate) fn close_input(&mut self) {
        self.input = None;
    }

    /// Set the terminal's size and tell the client (SIGWINCH).
    pub(crate) fn resize(&mut self, cols: u16, rows: u16) -> Result<(), ClientError> {
        let (true, Some(master)) = (self.pty, self.input.as_ref()) else {
            return Err(ClientError::NoTerminal);
        };
        rustix::termios::tcsetwinsize(master, winsize(cols, rows)).map_err(ClientError::SetSize)?;
        self.signal_winch()
    }

    fn signal_winch(&mut self) -> Result<(), ClientError> {
        // A reaped child's pid may be another process's by now: never signal it.
        if self.status.is_some() || self.poll_exit().is_some() {
            return Err(ClientError::Exited);
        }
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), rustix::process::Signal::WINCH)
            .map_err(ClientError::Winch)
    }

    /// Kill the client if it still runs, and reap it (10 s at most).
    pub(crate) fn kill(&mut self) -> Option<ExitStatus> {
        self.input = None;
        if self.status.is_none() {
            let _ = self.child.kill();
            if let Ok(Some(status)) = testbench_process::wait_deadline(&mut self.child, Duration::from_secs(10)) {
                self.status = Some((status, Instant::now()));
            }
        }
        self.status.map(|(s, _)| s)
    }

    /// Join the readers whose streams ended; the others (a stream some other process
    /// still holds open) end on their own once it closes or their channel is gone.
    pub(crate) fn finish(self) {
        let Client { readers, events, open, .. } = self;
        drop(events);
        if open == [false, false] {
            for reader in readers {
                let _ = reader.join();
            }
        }
    }
}

fn winsize(cols: u16, rows: u16) -> rustix::termios::Winsize {
    rustix::termios::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 }
}

/// A new pseudo-terminal at [`INITIAL_SIZE`]: (master, slave). Neither end is inherited
/// by exec (the slave becomes the child's stdin by dup2), and the slave becomes no
/// one's controlling terminal.
fn open_terminal() -> rustix::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pty::OpenptFlags;
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let flags = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC;
    let slave = rustix::fs::open(name.as_c_str(), flags, rustix::fs::Mode::empty())?;
    let (cols, rows) = INITIAL_SIZE;
    rustix::termios::tcsetwinsize(master.as_fd(), winsize(cols, rows))?;
    Ok((master, slave))
}

fn reader<R: Read + Send + 'static>(mut stream: R, source: Source, tx: SyncSender<Event>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => {
                    let _ = tx.send(Event::End(source, None));
                    return;
                }
                Ok(n) => {
                    if tx.send(Event::Data(source, buf[..n].to_vec(), Instant::now())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Event::End(source, Some(e.to_string())));
                    return;
                }
            }
        }
    })
}
