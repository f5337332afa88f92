//! The one wrapper for every child process the repository starts: the bench's (setup,
//! cargo, QEMU), the gates' (git, `cargo fmt`, `patch`, the docs checker's test listing),
//! the recipes' (`dpkg-deb`), hostfuzz's (the mutants' builds and runs) and q's (the
//! command a lease runs).
//!
//! Every child gets a printed command line, an explicit working directory, and a
//! deadline that says what it waited for when it passes. Every child also asks Linux for
//! the parent-death signal (SIGKILL) between fork and exec, so a bench killed at any
//! moment, even by SIGKILL, takes its children with it. Linux delivers that signal when
//! the *thread* that forked the child exits, so a child must be spawned from the thread
//! that waits for it (the boot's own thread does, for QEMU).
//!
//! Nothing else in the repository spawns processes (tests may run the binaries they
//! test; hostfuzz forks, without exec, once per input, in its own `exec` module).

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;

const KILL: Signal = Signal::KILL;

#[derive(Clone, Debug)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    timeout: Duration,
    /// What the deadline waits for, for the message when it passes.
    what: String,
    /// The child leads a process group of its own, killed whole at the deadline.
    group: bool,
    /// Descriptors of the caller's given to the child under other numbers ([`Cmd::pass_fd`]).
    fds: Vec<(RawFd, RawFd)>,
}

/// The most descriptors [`Cmd::pass_fd`] gives one child.
pub const PASSED_FDS: usize = 4;
/// Passed descriptors are staged at or above this number in the child before they take
/// their own numbers (below it), so that none overwrites another still to be passed.
const STAGE_FD: RawFd = 64;

#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    #[error("failed to start `{command}`: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("{what}: no end after {after:?} (deadline) of `{command}`; killed it")]
    Deadline { what: String, after: Duration, command: String },
    #[error("failed to wait for `{command}`: {source}")]
    Wait { command: String, source: std::io::Error },
}

pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>, what: impl Into<String>, timeout: Duration) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout,
            what: what.into(),
            group: false,
            fds: Vec::new(),
        }
    }

    /// Give the child the caller's descriptor `fd` as its descriptor `as_fd` (3 to 63;
    /// at most [`PASSED_FDS`] of them), for a program that talks over descriptors it is
    /// given (chromium's `--remote-debugging-pipe` reads 3 and writes 4). The caller
    /// keeps `fd` open until the child has started.
    ///
    /// # Panics
    ///
    /// When `as_fd` is out of that range or more than [`PASSED_FDS`] are passed.
    pub fn pass_fd(mut self, fd: BorrowedFd<'_>, as_fd: RawFd) -> Cmd {
        assert!((3..STAGE_FD).contains(&as_fd), "pass_fd: descriptor {as_fd} is not in 3..{STAGE_FD}");
        assert!(self.fds.len() < PASSED_FDS, "pass_fd: more than {PASSED_FDS} descriptors");
        self.fds.push((fd.as_raw_fd(), as_fd));
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Replace the deadline, and what it waits for.
    pub fn deadline(mut self, timeout: Duration, what: impl Into<String>) -> Cmd {
        self.timeout = timeout;
        self.what = what.into();
        self
    }

    /// Start the child as the leader of a process group of its own, and at the deadline
    /// kill the whole group: the child's own children too (`cargo fmt`'s rustfmt), which
    /// the parent-death signal, sent to the child alone, would not reach.
    pub fn process_group(mut self) -> Cmd {
        self.group = true;
        self
    }

    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.env_remove.push(key.as_ref().to_owned());
        self
    }

    /// The command line as a shell would take it back (for logs and replay lines).
    pub fn display(&self) -> String {
        let mut words = Vec::new();
        for (key, value) in &self.env {
            words.push(format!("{}={}", key.to_string_lossy(), shell_quote(&value.to_string_lossy())));
        }
        words.push(shell_quote(&self.program.to_string_lossy()));
        words.extend(self.args.iter().map(|a| shell_quote(&a.to_string_lossy())));
        words.join(" ")
    }

    fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        for key in &self.env_remove {
            command.env_remove(key);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        if self.group {
            command.process_group(0);
        }
        let bench = rustix::process::getpid();
        let mut fds = [(-1, -1); PASSED_FDS];
        fds[..self.fds.len()].copy_from_slice(&self.fds);
        let passed = self.fds.len();
        // SAFETY: the closure runs in the child between fork and exec and calls only
        // prctl(PR_SET_PDEATHSIG), getppid, fcntl(F_DUPFD_CLOEXEC) and dup2, which are
        // async-signal-safe and allocate nothing (the error for a lost parent is made
        // without allocating; the descriptors are in a fixed array). A passed
        // descriptor is open in the parent when it forks (`pass_fd`'s contract), so it
        // is in the child; each target number is taken over by dup2 and kept open.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(KILL)).map_err(std::io::Error::from)?;
                let mut staged = [-1; PASSED_FDS];
                for (slot, &(from, _)) in staged.iter_mut().zip(&fds[..passed]) {
                    *slot = rustix::io::fcntl_dupfd_cloexec(BorrowedFd::borrow_raw(from), STAGE_FD)?.into_raw_fd();
                }
                for (&stage, &(_, to)) in staged.iter().zip(&fds[..passed]) {
                    let mut target = OwnedFd::from_raw_fd(to);
                    rustix::io::dup2(BorrowedFd::borrow_raw(stage), &mut target)?;
                    let _ = target.into_raw_fd();
                }
                still_child_of(bench)
            });
        }
        command
    }

    /// Start the child with all three standard streams piped. The caller owns the
    /// deadline (it has the child) and must wait for it from this same thread.
    pub fn spawn_piped(&self) -> Result<Child, CmdError> {
        self.command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CmdError::Spawn { command: self.display(), source })
    }

    /// Start the child with `stdin` as its standard input (the slave side of a
    /// pseudo-terminal, say) and its stdout and stderr piped. As with [`Cmd::spawn_piped`],
    /// the caller owns the deadline and waits from this same thread.
    pub fn spawn_with_stdin(&self, stdin: impl Into<Stdio>) -> Result<Child, CmdError> {
        self.command()
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CmdError::Spawn { command: self.display(), source })
    }

    /// The program the command line starts, as given (for messages: `ssh exited 255`).
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// Run to the end with stdin closed, capturing both streams, under the deadline.
    pub fn output(&self) -> Result<Output, CmdError> {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CmdError::Spawn { command: self.display(), source })?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = self.finish(&mut child)?;
        Ok(Output { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() })
    }

    /// Run to the end with stdin closed and the child's streams on the bench's own
    /// (for the setup script, whose messages are for the person at the terminal).
    pub fn status_inherit(&self) -> Result<ExitStatus, CmdError> {
        self.status_inherit_told(|_| ())
    }

    /// [`Cmd::status_inherit`], telling `started` the child's PID once it runs (q tells
    /// its daemon which process holds the lease).
    pub fn status_inherit_told(&self, started: impl FnOnce(u32)) -> Result<ExitStatus, CmdError> {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .spawn()
            .map_err(|source| CmdError::Spawn { command: self.display(), source })?;
        started(child.id());
        self.finish(&mut child)
    }

    /// Run to the end with stdin closed and both of the child's streams written to `log`
    /// (a build's or a run's log file), under the deadline.
    pub fn status_to(&self, log: std::fs::File) -> Result<ExitStatus, CmdError> {
        let command = self.display();
        let stderr = log.try_clone().map_err(|source| CmdError::Spawn { command: command.clone(), source })?;
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .map_err(|source| CmdError::Spawn { command, source })?;
        self.finish(&mut child)
    }

    /// Wait for the child under the deadline; past it, kill the child (its whole group
    /// when it leads one) and say what was waited for.
    fn finish(&self, child: &mut Child) -> Result<ExitStatus, CmdError> {
        let status = wait_until(child, self.timeout, self.group)
            .map_err(|source| CmdError::Wait { command: self.display(), source })?;
        status.ok_or_else(|| CmdError::Deadline {
            what: self.what.clone(),
            after: self.timeout,
            command: self.display(),
        })
    }
}

fn drain<R: Read + Send + 'static>(stream: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut stream) = stream {
            let _ = stream.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// The check after the parent-death signal is set: a bench that died between the fork
/// and the prctl sent no signal, and its child now has another parent. Such a child must
/// not exec (its exec fails with this error and the child exits).
fn still_child_of(bench: rustix::process::Pid) -> std::io::Result<()> {
    if rustix::process::getppid() == Some(bench) {
        Ok(())
    } else {
        Err(std::io::Error::from(rustix::io::Errno::SRCH))
    }
}

/// Become `program` (exec, no fork) with the parent-death signal set first: the child of
/// a process that spawns without the wrapper (ssh's `ProxyCommand`) still dies with its
/// parent. Returns only when it cannot: the parent is gone already, or the exec failed.
pub fn exec_bound_to_parent(program: &OsStr, args: &[OsString]) -> std::io::Error {
    let parent = rustix::process::getppid();
    if let Err(error) = rustix::process::set_parent_process_death_signal(Some(KILL)) {
        return error.into();
    }
    // A parent that died before the prctl sent nothing: this process has another now.
    if rustix::process::getppid() != parent || parent.is_none() {
        return std::io::Error::from(rustix::io::Errno::SRCH);
    }
    std::process::Command::new(program).args(args).exec()
}

/// Wait for `child` until `timeout`; on the deadline kill it and return `None`.
pub fn wait_deadline(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    wait_until(child, timeout, false)
}

/// [`wait_deadline`], killing the child's whole process group at the deadline when
/// `group` (the child leads it: [`Cmd::process_group`]).
fn wait_until(child: &mut Child, timeout: Duration, group: bool) -> std::io::Result<Option<ExitStatus>> {
    let start = Instant::now();
    // Polling keeps this free of signal handlers. A quick child (a QEMU probe, a fresh
    // cargo check, the setup script: tens of ms) is seen within 1 ms of its exit, not up
    // to 5 ms later; after the first second 5 ms is well below anything measured.
    let mut nap = Duration::from_micros(100);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if start.elapsed() >= timeout {
            if group {
                let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(child), KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(nap);
        let cap =
            if start.elapsed() < Duration::from_secs(1) { Duration::from_millis(1) } else { Duration::from_millis(5) };
        nap = (nap * 2).min(cap);
    }
}

/// Where `name` is an executable file on the path, if it is.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
    })
}

pub fn shell_quote(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_kills_the_child_and_names_what_it_waited_for() {
        let cmd = Cmd::new("sleep", "the sleeper to finish", Duration::from_millis(100)).arg("5");
        let start = Instant::now();
        let error = cmd.output().err().expect("sleep 5 cannot finish in 100 ms");
        assert!(start.elapsed() < Duration::from_secs(4));
        let message = error.to_string();
        assert!(message.starts_with("the sleeper to finish: no end after 100ms"), "{message}");
    }

    #[test]
    fn a_child_whose_parent_is_not_the_bench_does_not_run() {
        // A child spawned through the wrapper has the bench as its parent: it runs.
        let out = Cmd::new("true", "true", Duration::from_secs(10)).output().unwrap();
        assert!(out.status.success());
        // The check itself, from this process: its parent passes, any other PID (here
        // its own, as for a child reparented after the bench died) stops the exec.
        assert!(still_child_of(rustix::process::getppid().unwrap()).is_ok());
        let error = still_child_of(rustix::process::getpid()).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(rustix::io::Errno::SRCH.raw_os_error()));
    }

    #[test]
    fn passed_descriptors_are_the_childs_under_their_new_numbers() {
        use std::io::Write;
        let (from_child, to_parent) = std::io::pipe().unwrap();
        let (from_parent, mut to_child) = std::io::pipe().unwrap();
        to_child.write_all(b"over fd 3\n").unwrap();
        drop(to_child);
        // Passed in the order that would overwrite the second's source with a naive dup2
        // when the pipes' own numbers are 3 and 4.
        let out = Cmd::new("sh", "cat between the passed descriptors", Duration::from_secs(10))
            .args(["-c", "cat <&3 >&4; echo done >&4"])
            .pass_fd(std::os::fd::AsFd::as_fd(&from_parent), 3)
            .pass_fd(std::os::fd::AsFd::as_fd(&to_parent), 4)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        drop(to_parent);
        let mut got = String::new();
        std::io::Read::read_to_string(&mut &from_child, &mut got).unwrap();
        assert_eq!(got, "over fd 3\ndone\n");
    }

    /// The state letter of `pid` in /proc (`None`: no such process).
    fn state(pid: &str) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(") ").next()?.chars().next()
    }

    #[test]
    fn a_group_leader_past_its_deadline_takes_its_own_children_along() {
        let dir = std::env::temp_dir().join(format!("testbench-process-group-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        // The shell starts a grandchild and waits for it: only a kill of the whole group
        // reaches the grandchild (the parent-death signal goes to the shell alone).
        let error = Cmd::new("sh", "the shell and its sleeper", Duration::from_millis(300))
            .args(["-c", "sleep 30 & echo $! > pid; wait"])
            .cwd(&dir)
            .process_group()
            .status_to(log)
            .expect_err("sleep 30 cannot finish in 300 ms");
        assert!(error.to_string().starts_with("the shell and its sleeper: no end after 300ms"), "{error}");
        let pid = std::fs::read_to_string(dir.join("pid")).unwrap().trim().to_string();
        let start = Instant::now();
        while state(&pid).is_some_and(|s| s != 'Z') && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let left = state(&pid);
        if left.is_some_and(|s| s != 'Z') {
            let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(pid.parse().unwrap()).unwrap(), KILL);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(left.is_none_or(|s| s == 'Z'), "the grandchild {pid} outlived the deadline (state {left:?})");
    }

    #[test]
    fn status_to_writes_both_streams_to_the_log() {
        let path = std::env::temp_dir().join(format!("testbench-process-log-{}", std::process::id()));
        let log = std::fs::File::create(&path).unwrap();
        let status = Cmd::new("sh", "sh", Duration::from_secs(10))
            .args(["-c", "echo out; echo err >&2; exit 4"])
            .status_to(log)
            .unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(status.code(), Some(4));
        assert_eq!(written, "out\nerr\n");
    }

    #[test]
    fn a_given_stdin_reaches_the_child() {
        let path = std::env::temp_dir().join(format!("testbench-process-stdin-{}", std::process::id()));
        std::fs::write(&path, "from the file\n").unwrap();
        let cmd = Cmd::new("cat", "cat", Duration::from_secs(10));
        assert_eq!(cmd.program(), "cat");
        let mut child = cmd.spawn_with_stdin(std::fs::File::open(&path).unwrap()).unwrap();
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let status = wait_deadline(&mut child, Duration::from_secs(10)).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(out, "from the file\n");
        assert!(status.is_some_and(|s| s.success()));
    }

    #[test]
    fn output_captures_both_streams() {
        let out = Cmd::new("sh", "sh", Duration::from_secs(10))
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn quoting_round_trips_through_a_shell() {
        let words = ["plain", "with space", "it's", "", "a=b"];
        let line = words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ");
        let out = Cmd::new("sh", "sh", Duration::from_secs(10))
            .args(["-c", &format!("for w in {line}; do printf '<%s>' \"$w\"; done")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "<plain><with space><it's><><a=b>");
    }
}
