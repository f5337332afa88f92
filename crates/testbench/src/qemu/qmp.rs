//! How a guest ended, learnt from QEMU itself over QMP, on a channel no other process
//! can speak on.
//!
//! Under `-no-reboot` QEMU exits with status 0 both when the guest powers off and when it
//! resets, so the exit status cannot tell the two apart; QEMU's `SHUTDOWN` event can
//! (`reason` "guest-shutdown" or "guest-reset"). The evidence is positive, never assumed:
//!
//! - QEMU starts paused (`-S`) and connects, as a client, to a socket the bench listens
//!   on. The bench accepts only a peer whose PID (`SO_PEERCRED`) is its own QEMU child;
//!   any other connection is closed unread and noted.
//! - The bench negotiates (`qmp_capabilities`) and only then starts the guest (`cont`):
//!   QEMU sends events only on a negotiated connection, so no event can be lost to a
//!   bench that was slow to connect.
//! - The sockets live in a directory of the run's own, made 0700 under a name drawn at
//!   random in the temporary directory ([`QmpDir`]); it goes when the run ends, and a
//!   later run removes the ones a killed bench left ([`sweep_stale`]).
//! - The judge passes a power-off only on a `SHUTDOWN` event with reason
//!   "guest-shutdown"; no event, or another reason, fails the case naming what it saw.
//!
//! Every line read is bounded ([`LINE_MAX`]) and every wait has a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testbench_judge::Shutdown;

/// A Unix socket's path must fit `sun_path`: 108 bytes with its terminating NUL.
pub const SUN_PATH_MAX: usize = 108;

/// The longest QMP message the bench reads; QEMU's greeting and events are a few
/// hundred bytes. A longer line is refused (the connection is dropped).
const LINE_MAX: usize = 64 * 1024;

/// The prefix of a run's socket directory in the temporary directory:
/// `testbench-qmp-<pid>-<random>`. The PID lets a later run tell a dead run's directory.
const DIR_PREFIX: &str = "testbench-qmp-";

/// The socket file of the boot numbered `n` in the run's directory.
fn socket_name(n: u64) -> String {
    format!("boot-{n}.qmp")
}

/// The longest socket name a run uses ([`socket_name`] of the largest number).
fn longest_socket_name() -> String {
    socket_name(u64::MAX)
}

/// A run's own directory for its QMP sockets: 0700, named at random, removed on drop.
pub struct QmpDir {
    dir: tempfile::TempDir,
    next: std::sync::atomic::AtomicU64,
}

/// Why the run's QMP socket directory could not be made.
#[derive(Debug, thiserror::Error)]
pub enum QmpDirError {
    #[error("failed to make the QMP socket directory in {}: {source}", .tmp.display())]
    Make { tmp: PathBuf, source: std::io::Error },
    #[error(
        "the QMP socket path {} would be {length} bytes, and a Unix socket's path must be under \
         {SUN_PATH_MAX} bytes: set TMPDIR to a shorter directory (it is {})",
        .longest.display(),
        .tmp.display()
    )]
    TooLong { longest: PathBuf, length: usize, tmp: PathBuf },
}

/// Why QEMU's QMP connection did not start the guest, or a command got no answer.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    /// QEMU exited before it connected (the refused strangers' note after).
    #[error("QEMU exited ({status}) before it connected to the bench's QMP socket{strangers}")]
    Exited { status: std::process::ExitStatus, strangers: String },
    #[error(
        "QEMU did not connect to the bench's QMP socket by the deadline (the guest starts only once it has){strangers}"
    )]
    NoConnection { strangers: String },
    #[error("failed to accept QEMU's QMP connection: {0}")]
    Accept(#[source] std::io::Error),
    /// The accepted connection could not be set up.
    #[error("QMP: {0}")]
    Socket(#[source] std::io::Error),
    #[error("QEMU's QMP greeting: {0}")]
    Greeting(#[source] std::io::Error),
    /// QEMU's first message (clipped), which is not its greeting.
    #[error("QEMU's first QMP message is not its greeting: {0}")]
    NotGreeting(String),
    /// A command could not be sent.
    #[error("QMP {command}: {source}")]
    Send { command: String, source: std::io::Error },
    /// A negotiation command's reply could not be read.
    #[error("QMP {command}: waiting for its reply: {source}")]
    Reply { command: String, source: std::io::Error },
    #[error("QMP {command}: no reply from QEMU within {bound:?}")]
    NoReply { command: String, bound: Duration },
    #[error("QMP {command}: QEMU closed the connection before it replied")]
    Closed { command: String },
    /// QEMU's error reply (clipped).
    #[error("QMP {command} failed: {error}")]
    Failed { command: String, error: String },
}

impl QmpDir {
    /// Make the directory in `tmp`, refusing one whose sockets' paths would not fit a
    /// Unix socket address.
    pub fn create(tmp: &Path) -> Result<QmpDir, QmpDirError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(tmp)
            .map_err(|source| QmpDirError::Make { tmp: tmp.to_owned(), source })?;
        let longest = dir.path().join(longest_socket_name());
        let length = longest.as_os_str().len();
        if length >= SUN_PATH_MAX {
            return Err(QmpDirError::TooLong { longest, length, tmp: tmp.to_owned() });
        }
        Ok(QmpDir { dir, next: std::sync::atomic::AtomicU64::new(0) })
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A listening socket for one boot.
    pub fn listen(&self) -> std::io::Result<QmpListener> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.dir.path().join(socket_name(n));
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        Ok(QmpListener { listener, path })
    }
}

/// Remove the socket directories in `tmp` that runs killed outright left behind: ours
/// (same owner), of a PID that no longer runs, holding nothing but sockets.
pub fn sweep_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    let uid = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(DIR_PREFIX).and_then(|rest| rest.split_once('-')).map(|(pid, _)| pid) else {
            continue;
        };
        let Ok(pid) = pid.parse::<i32>() else { continue };
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if !meta.is_dir() || std::os::unix::fs::MetadataExt::uid(&meta) != uid || crate::rundir::pid_alive(pid) {
            continue;
        }
        remove_if_only_sockets(&entry.path());
    }
}

fn remove_if_only_sockets(dir: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let entries: Vec<_> = entries.flatten().collect();
    if !entries.iter().all(|e| e.file_type().is_ok_and(|t| t.is_socket())) {
        return;
    }
    for entry in &entries {
        let _ = std::fs::remove_file(entry.path());
    }
    let _ = std::fs::remove_dir(dir);
}

/// One boot's listening socket.
pub struct QmpListener {
    listener: UnixListener,
    path: PathBuf,
}

impl QmpListener {
    /// A path beside this boot's QMP socket, in the run's private directory, for another
    /// socket of the same boot (`boot-N.st` for the stamp plugin's: no longer than the
    /// QMP socket's, which the directory was checked to fit).
    pub fn sibling(&self, extension: &str) -> PathBuf {
        debug_assert!(extension.len() <= "qmp".len());
        self.path.with_extension(extension)
    }
}

impl Drop for QmpListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What the QMP channel saw, for the judge and the boot's log.
#[derive(Debug, Default)]
struct Seen {
    /// The first SHUTDOWN event's reason (QEMU exits after it under -no-reboot).
    shutdown: Option<String>,
    /// Connections refused because their peer was not the bench's QEMU.
    strangers: Vec<String>,
}

impl QmpListener {
    /// QEMU's arguments: start paused, and connect the QMP monitor to this socket.
    pub fn qemu_args(&self) -> Vec<String> {
        vec![
            "-S".into(),
            "-chardev".into(),
            format!("socket,id=testbench-qmp,path={},server=off", self.path.display()),
            "-mon".into(),
            "chardev=testbench-qmp,mode=control".into(),
        ]
    }

    /// Accept QEMU's connection (its PID checked), negotiate, and start the guest (unless
    /// `start` is false: `--gdb`'s debugger starts it). Until `deadline`; an error says
    /// what was missing. What follows is read on a
    /// thread of its own until QEMU closes the connection: each event goes to `sink`
    /// (the boot's loop), each reply to the command [`QmpClient::execute`] waits on.
    pub fn start_guest(
        self,
        child: &mut Child,
        deadline: Instant,
        start: bool,
        sink: impl Fn(QmpEvent) + Send + 'static,
    ) -> Result<QmpClient, QmpError> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stream = self.accept_own(child, deadline, &seen)?;
        let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_nonblocking(false).map_err(QmpError::Socket)?;
        stream.set_read_timeout(Some(remaining)).map_err(QmpError::Socket)?;
        let mut writer = stream.try_clone().map_err(QmpError::Socket)?;
        let mut reader = BufReader::new(stream);
        let greeting = read_message(&mut reader).map_err(QmpError::Greeting)?;
        if greeting.get("QMP").is_none() {
            return Err(QmpError::NotGreeting(clip(&greeting.to_string())));
        }
        negotiate(&mut reader, &mut writer, "qmp_capabilities", &seen)?;
        if start {
            negotiate(&mut reader, &mut writer, "cont", &seen)?;
        }
        // From here the guest runs: messages are read without a deadline of their own;
        // the connection ends when QEMU exits, and QEMU's life has the boot's deadline.
        let _ = reader.get_ref().set_read_timeout(None);
        let events = seen.clone();
        let (replies_in, replies) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            while let Ok(message) = read_message(&mut reader) {
                if message.get("event").is_some() {
                    note_event(&message, &events);
                    let name = message["event"].as_str().unwrap_or("").to_string();
                    sink(QmpEvent::Event { name, data: message["data"].clone() });
                } else if replies_in.send(message).is_err() {
                    break;
                }
            }
            sink(QmpEvent::Closed);
        });
        Ok(QmpClient {
            seen,
            handle: Mutex::new(Some(handle)),
            writer: Mutex::new(writer),
            replies: Mutex::new(replies),
            next_id: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The first connection whose peer is `child`; others are closed unread.
    fn accept_own(&self, child: &mut Child, deadline: Instant, seen: &Mutex<Seen>) -> Result<UnixStream, QmpError> {
        let own = child.id() as i32;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => match rustix::net::sockopt::socket_peercred(&stream) {
                    Ok(cred) if cred.pid.as_raw_nonzero().get() == own => return Ok(stream),
                    Ok(cred) => {
                        let what = format!("PID {} (uid {})", cred.pid.as_raw_nonzero(), cred.uid.as_raw());
                        lock(seen).strangers.push(what);
                    }
                    Err(error) => lock(seen).strangers.push(format!("a peer of unknown PID ({error})")),
                },
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Ok(Some(status)) = child.try_wait() {
                        return Err(QmpError::Exited { status, strangers: strangers_note(seen) });
                    }
                    if Instant::now() >= deadline {
                        return Err(QmpError::NoConnection { strangers: strangers_note(seen) });
                    }
                    // Woken at once by a connection (the guest waits for it), else
                    // every 10 ms to look at QEMU and the deadline again.
                    let mut fds = [rustix::event::PollFd::new(&self.listener, rustix::event::PollFlags::IN)];
                    let nap = rustix::event::Timespec { tv_sec: 0, tv_nsec: 10_000_000 };
                    let _ = rustix::event::poll(&mut fds, Some(&nap));
                }
                Err(error) => return Err(QmpError::Accept(error)),
            }
        }
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|e| e.into_inner())
}

fn strangers_note(seen: &Mutex<Seen>) -> String {
    let seen = lock(seen);
    if seen.strangers.is_empty() {
        String::new()
    } else {
        format!("; refused connections from {}", seen.strangers.join(", "))
    }
}

/// Before the guest runs: send one command and read up to its reply, noting the events
/// on the way.
fn negotiate<R: BufRead>(
    reader: &mut R,
    writer: &mut impl Write,
    command: &str,
    seen: &Mutex<Seen>,
) -> Result<(), QmpError> {
    writeln!(writer, "{{\"execute\":\"{command}\"}}")
        .and_then(|_| writer.flush())
        .map_err(|source| QmpError::Send { command: command.into(), source })?;
    loop {
        let message = read_message(reader).map_err(|source| QmpError::Reply { command: command.into(), source })?;
        if message.get("return").is_some() {
            return Ok(());
        }
        if let Some(error) = message.get("error") {
            return Err(QmpError::Failed { command: command.into(), error: clip(&error.to_string()) });
        }
        note_event(&message, seen);
    }
}

fn note_event(message: &serde_json::Value, seen: &Mutex<Seen>) {
    if message["event"] == "SHUTDOWN" {
        let reason = message["data"]["reason"].as_str().unwrap_or("(no reason)");
        let mut seen = lock(seen);
        if seen.shutdown.is_none() {
            seen.shutdown = Some(clip(reason));
        }
    }
}

/// One QMP message: a line of JSON of at most [`LINE_MAX`] bytes.
fn read_message<R: BufRead>(reader: &mut R) -> std::io::Result<serde_json::Value> {
    let mut line = Vec::new();
    let n = reader.by_ref().take(LINE_MAX as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "QEMU closed the connection"));
    }
    if line.last() != Some(&b'\n') {
        let why = if line.len() > LINE_MAX {
            format!("a message longer than {LINE_MAX} bytes")
        } else {
            "the connection closed inside a message".to_string()
        };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    }
    serde_json::from_slice(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn clip(text: &str) -> String {
    testbench_judge::quote(text).into_owned()
}

/// QEMU's SHUTDOWN reason, as the judge takes it: "guest-shutdown" is a power-off, and
/// "guest-panic" the test finisher's power-off with a failure status (riscv `virt`);
/// "guest-reset" (a reset under -no-reboot), "subsystem-reset" and "snapshot-load" are
/// resets; any other reason (the host-side ones) is named as it came.
pub fn shutdown_from_reason(reason: Option<&str>) -> Shutdown {
    match reason {
        None => Shutdown::NoEvent,
        Some("guest-shutdown") => Shutdown::PowerOff,
        Some("guest-panic") => Shutdown::PowerOffFailure,
        Some("guest-reset") | Some("subsystem-reset") | Some("snapshot-load") => Shutdown::Reset,
        Some(other) => Shutdown::Other(other.to_string()),
    }
}

/// What QEMU said on its own, for the boot's loop.
#[derive(Debug, Clone, PartialEq)]
pub enum QmpEvent {
    /// An event: its name (`SHUTDOWN`, `STOP`, ...) and its data.
    Event { name: String, data: serde_json::Value },
    /// QEMU closed the connection (it exits).
    Closed,
}

/// The bench's side of QEMU's QMP connection once the guest runs: commands sent and
/// their replies awaited ([`QmpClient::execute`]), events noted for the judge.
pub struct QmpClient {
    seen: Arc<Mutex<Seen>>,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
    writer: Mutex<UnixStream>,
    replies: Mutex<std::sync::mpsc::Receiver<serde_json::Value>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl QmpClient {
    /// Send `command` (with its `arguments`) and wait up to `bound` for its reply: the
    /// value of its `return`, or an error naming the command and what QEMU said, or what
    /// the bench waited for when the bound passed.
    pub fn execute(
        &self,
        command: &str,
        arguments: Option<serde_json::Value>,
        bound: Duration,
    ) -> Result<serde_json::Value, QmpError> {
        let id = format!("testbench-{}", self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let mut message = serde_json::json!({ "execute": command, "id": id });
        if let Some(arguments) = arguments {
            message["arguments"] = arguments;
        }
        {
            let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            writeln!(writer, "{message}")
                .and_then(|_| writer.flush())
                .map_err(|source| QmpError::Send { command: command.into(), source })?;
        }
        let replies = self.replies.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = match replies.recv_timeout(left) {
                Ok(reply) => reply,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    return Err(QmpError::NoReply { command: command.into(), bound })
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(QmpError::Closed { command: command.into() })
                }
            };
            if reply["id"] != id {
                continue; // the reply to an earlier command whose wait gave up
            }
            if let Some(error) = reply.get("error") {
                return Err(QmpError::Failed { command: command.into(), error: clip(&error.to_string()) });
            }
            return Ok(reply["return"].clone());
        }
    }

    /// How the guest ended, once QEMU has exited (waits at most `bound` for the reader
    /// to reach the end of the connection).
    pub fn finish(&self, bound: Duration) -> Shutdown {
        if let Some(handle) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // The reader ends within microseconds of QEMU's exit: look often at first
            // (a boot's end waits for this), then every 2 ms.
            let start = Instant::now();
            let mut nap = Duration::from_micros(50);
            while !handle.is_finished() && start.elapsed() < bound {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(2));
            }
        }
        shutdown_from_reason(lock(&self.seen).shutdown.as_deref())
    }

    /// The connections refused because their peer was not the bench's QEMU.
    pub fn strangers(&self) -> Vec<String> {
        lock(&self.seen).strangers.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_reasons_map_to_power_off_reset_and_the_rest_by_name() {
        assert_eq!(shutdown_from_reason(Some("guest-shutdown")), Shutdown::PowerOff);
        assert_eq!(shutdown_from_reason(Some("guest-reset")), Shutdown::Reset);
        assert_eq!(shutdown_from_reason(Some("guest-panic")), Shutdown::PowerOffFailure);
        assert_eq!(shutdown_from_reason(Some("host-signal")), Shutdown::Other("host-signal".into()));
        assert_eq!(shutdown_from_reason(None), Shutdown::NoEvent);
    }

    #[test]
    fn the_socket_directory_is_private_random_and_goes_with_the_run() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let a = QmpDir::create(tmp.path()).unwrap();
        let b = QmpDir::create(tmp.path()).unwrap();
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{mode:o}");
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        let random = name.strip_prefix(&format!("{DIR_PREFIX}{}-", std::process::id())).unwrap();
        assert!(random.len() >= 6, "{name}");
        let listener = a.listen().unwrap();
        let socket = listener.path.clone();
        assert!(socket.exists());
        drop(listener);
        assert!(!socket.exists());
        let dir = a.path().to_path_buf();
        drop(a);
        assert!(!dir.exists());
    }

    #[test]
    fn a_socket_path_that_would_not_fit_is_refused_naming_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(100));
        std::fs::create_dir(&deep).unwrap();
        let error = QmpDir::create(&deep).err().expect("a 100-byte directory leaves no room for a socket");
        assert!(matches!(error, QmpDirError::TooLong { .. }), "{error:?}");
        let error = error.to_string();
        assert!(error.contains("must be under 108 bytes"), "{error}");
        assert!(error.contains("TMPDIR"), "{error}");
    }

    #[test]
    fn a_dead_runs_socket_directory_is_swept_and_a_live_ones_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        // PIDs above the kernel's pid_max (4194304 at most) are dead.
        let dead = tmp.path().join(format!("{DIR_PREFIX}4999999-abcdef"));
        std::fs::create_dir(&dead).unwrap();
        let _left = UnixListener::bind(dead.join("boot-0.qmp")).unwrap();
        let dead_with_file = tmp.path().join(format!("{DIR_PREFIX}4999998-abcdef"));
        std::fs::create_dir(&dead_with_file).unwrap();
        std::fs::write(dead_with_file.join("not-a-socket"), "x").unwrap();
        let live = QmpDir::create(tmp.path()).unwrap();
        let _socket = live.listen().unwrap();
        sweep_stale(tmp.path());
        assert!(!dead.exists(), "a dead run's directory of sockets stayed");
        assert!(dead_with_file.exists(), "a directory holding more than sockets was removed");
        assert!(live.path().exists(), "a live run's directory was removed");
    }

    /// A process that is not the bench's QEMU child connects first and forges a
    /// power-off: it is refused unread, and the child's own connection is the one used.
    #[test]
    fn a_stranger_connecting_first_is_refused_and_the_child_is_heard() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = QmpDir::create(tmp.path()).unwrap();
        let listener = dir.listen().unwrap();
        let path = listener.path.clone();
        // The stranger: this test process itself, connecting before the child.
        let mut stranger = UnixStream::connect(&path).unwrap();
        let _ = stranger.write_all(
            b"{\"QMP\":{}}\n{\"return\":{}}\n{\"return\":{}}\n{\"event\":\"SHUTDOWN\",\"data\":{\"reason\":\"guest-shutdown\"}}\n",
        );
        // The child: a QMP peer that reports a reset once it is told to run.
        let script = format!(
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({path:?})\nf=s.makefile('rwb')\n\
             f.write(b'{{\"QMP\":{{}}}}\\n');f.flush()\n\
             for line in f:\n  f.write(b'{{\"return\":{{}}}}\\n');f.flush()\n  \
             if b'cont' in line:\n    f.write(b'{{\"event\":\"SHUTDOWN\",\"data\":{{\"reason\":\"guest-reset\"}}}}\\n');f.flush();break\n",
            path = path.display().to_string()
        );
        let mut child = std::process::Command::new("python3").args(["-c", &script]).spawn().unwrap();
        let watch = listener.start_guest(&mut child, Instant::now() + Duration::from_secs(20), true, |_| ()).unwrap();
        child.wait().unwrap();
        assert_eq!(watch.strangers().len(), 1, "{:?}", watch.strangers());
        assert_eq!(watch.finish(Duration::from_secs(5)), Shutdown::Reset);
    }

    /// Once the guest runs, the client sends commands and waits for the reply that
    /// carries their id; events on the way go to the boot's loop, in order.
    #[test]
    fn the_client_sends_commands_and_hears_events() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = QmpDir::create(tmp.path()).unwrap();
        let listener = dir.listen().unwrap();
        let path = listener.path.clone();
        // A QMP peer: replies to the negotiation; to query-status it first sends an event,
        // a reply with another id, then the reply with the command's id; to "bad", an error.
        let script = format!(
            "import socket,json\ns=socket.socket(socket.AF_UNIX)\ns.connect({path:?})\nf=s.makefile('rwb')\n\
             f.write(b'{{\"QMP\":{{}}}}\\n');f.flush()\n\
             for line in f:\n  m=json.loads(line)\n  i=m.get('id')\n  \
             if m['execute']=='query-status':\n    \
             f.write(b'{{\"event\":\"STOP\",\"data\":{{}}}}\\n')\n    \
             f.write(json.dumps({{'return':{{}},'id':'stale'}}).encode()+b'\\n')\n    \
             f.write(json.dumps({{'return':{{'status':'running'}},'id':i}}).encode()+b'\\n')\n  \
             elif m['execute']=='bad':\n    f.write(json.dumps({{'error':{{'class':'CommandNotFound','desc':'no'}},'id':i}}).encode()+b'\\n')\n  \
             elif m['execute']=='quit':\n    break\n  \
             else:\n    f.write(json.dumps({{'return':{{}},'id':i}}).encode()+b'\\n')\n  f.flush()\n",
            path = path.display().to_string()
        );
        let mut child = std::process::Command::new("python3").args(["-c", &script]).spawn().unwrap();
        let (events_in, events) = std::sync::mpsc::channel();
        let client = listener
            .start_guest(&mut child, Instant::now() + Duration::from_secs(20), true, move |e| {
                let _ = events_in.send(e);
            })
            .unwrap();
        let status = client.execute("query-status", None, Duration::from_secs(10)).unwrap();
        assert_eq!(status["status"], "running");
        let error = client.execute("bad", Some(serde_json::json!({"x": 1})), Duration::from_secs(10)).unwrap_err();
        assert!(matches!(&error, QmpError::Failed { command, .. } if command == "bad"), "{error:?}");
        let error = error.to_string();
        assert!(error.starts_with("QMP bad failed: ") && error.contains("CommandNotFound"), "{error}");
        let first = events.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first, QmpEvent::Event { name: "STOP".into(), data: serde_json::json!({}) });
        let _ = client.execute("quit", None, Duration::from_millis(300));
        child.wait().unwrap();
        assert_eq!(events.recv_timeout(Duration::from_secs(10)).unwrap(), QmpEvent::Closed);
        let error = client.execute("query-status", None, Duration::from_secs(10)).unwrap_err().to_string();
        assert!(error.contains("closed the connection") || error.contains("Broken pipe"), "{error}");
    }

    #[test]
    fn a_child_that_never_speaks_qmp_gets_no_guest_started() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = QmpDir::create(tmp.path()).unwrap();
        let listener = dir.listen().unwrap();
        let mut child = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
        let error =
            listener.start_guest(&mut child, Instant::now() + Duration::from_secs(20), true, |_| ()).err().unwrap();
        assert!(matches!(error, QmpError::Exited { .. }), "{error:?}");
        assert!(error.to_string().starts_with("QEMU exited (exit status: 0) before it connected"), "{error}");
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let listener = dir.listen().unwrap();
        let error =
            listener.start_guest(&mut child, Instant::now() + Duration::from_millis(200), true, |_| ()).err().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(matches!(error, QmpError::NoConnection { .. }), "{error:?}");
        assert!(error.to_string().contains("did not connect to the bench's QMP socket by the deadline"), "{error}");
    }

    #[test]
    fn an_endless_qmp_line_is_refused() {
        let long = vec![b'x'; LINE_MAX + 10];
        let mut reader = BufReader::new(&long[..]);
        let error = read_message(&mut reader).unwrap_err();
        assert!(error.to_string().contains("longer than"), "{error}");
    }
}
