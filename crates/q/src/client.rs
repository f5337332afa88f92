//! The client side: `q run` asks for a lease, waits for it (printing what it waits
//! for), pins itself to the granted cores so the command inherits them, runs the
//! command with the lease in its environment, and exits with its status. The lease
//! ends when this process does, by any exit.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sched::{cores_text, Ask, Grant, JobId};
use crate::{place, read_line, Answer, Report, Request};

/// Why `q run`, `q ls`, `q log` or `q stop` could not do what it was asked, in the words
/// `q` prints after `q: `.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Place(#[from] place::PlaceError),
    #[error("no q daemon answers at {} ({source}): start one with `q daemon &` (same Q_DIR)", socket.display())]
    NoDaemon { socket: PathBuf, source: std::io::Error },
    /// The daemon's socket could not be set up (a read deadline, a second handle).
    #[error("{0}")]
    Socket(#[source] std::io::Error),
    #[error("cannot ask the daemon: {0}")]
    Ask(#[source] std::io::Error),
    /// The daemon refused a question, in its words.
    #[error("{0}")]
    Refused(String),
    /// The daemon refused the lease, in its words.
    #[error("refused: {0}")]
    LeaseRefused(String),
    #[error("the daemon answered what q does not read: {0}")]
    Unreadable(String),
    #[error("the daemon closed the connection without an answer")]
    Closed,
    #[error("no answer from the daemon within 10 s: {0}")]
    NoAnswer(#[source] std::io::Error),
    #[error("cannot learn the daemon's pid from its socket: {0}")]
    PeerPid(#[source] rustix::io::Errno),
    #[error("the daemon (pid {pid}) said it stopped, and still runs after {}s", STOP_DEADLINE.as_secs())]
    StillRuns { pid: i32 },
    /// An exclusive lock the enclosing lease holds only shared ([`inherit_locks`]).
    #[error("--lock {0}: this job runs under a lease that holds {0} shared, so it can never take it exclusively")]
    SharedOnly(String),
    #[error("no lease within {secs}s (--wait); it waited for {waited_for}")]
    NoLease { secs: u64, waited_for: String },
    #[error("the daemon went away before granting the lease; run again")]
    WentAway,
    #[error("reading the daemon's answer: {0}")]
    Reading(#[source] std::io::Error),
    #[error("cannot pin to cores {}: {source}", cores_text(cores))]
    Pin { cores: Vec<usize>, source: rustix::io::Errno },
    #[error("no command to run")]
    NoCommand,
    /// This process's working directory, for the command.
    #[error("{0}")]
    Cwd(#[source] std::io::Error),
    #[error("{0}")]
    Command(#[source] testbench_process::CmdError),
    #[error("cannot make the job's scratch directory {} (set Q_SCRATCH_ROOT to another folder): {source}", path.display())]
    Scratch { path: PathBuf, source: std::io::Error },
}

/// The locks of a lease, as its job sees them: its own and those it inherited from an
/// enclosing lease ([`inherit_locks`]), exclusive and shared.
pub struct HeldLocks<'a> {
    pub locks: &'a [String],
    pub shares: &'a [String],
    pub inherited: &'a [String],
}

/// The environment a job gets, beside its own: `Q_LOCK` and `Q_SHARE` name every lock it
/// holds, `Q_INHERITED` those an enclosing lease took for it (a whole set's `qemu`, which
/// tells the bench that other targets of the set boot beside it).
pub fn lease_env(job: JobId, grant: &Grant, held: HeldLocks, dir: &Path) -> Vec<(String, String)> {
    let mut env = vec![("Q_JOB".to_string(), job.to_string()), ("Q_DIR".to_string(), dir.display().to_string())];
    if !grant.cores.is_empty() {
        let n = grant.cores.len().to_string();
        env.push(("Q_CORES".into(), cores_text(&grant.cores)));
        env.push(("CARGO_BUILD_JOBS".into(), n.clone()));
        env.push(("RUST_TEST_THREADS".into(), n));
    }
    if let Some((lo, hi)) = grant.ports {
        env.push(("TESTBENCH_PORTS".into(), format!("{lo}-{hi}")));
    }
    env.push(("Q_LOCK".into(), held.locks.join(",")));
    env.push(("Q_SHARE".into(), held.shares.join(",")));
    env.push(("Q_INHERITED".into(), held.inherited.join(",")));
    env
}

/// The locks this process's own lease holds (a job running `q run` again), from its
/// environment: exclusive, shared.
fn held_locks() -> (Vec<String>, Vec<String>) {
    let list = |var: &str| -> Vec<String> {
        std::env::var(var).unwrap_or_default().split(',').filter(|s| !s.is_empty()).map(String::from).collect()
    };
    (list("Q_LOCK"), list("Q_SHARE"))
}

/// Drop from `ask` the locks the enclosing lease already holds: a whole bench holding
/// `qemu` runs its cases under it, and they must not wait for their own holder. An
/// exclusive ask of a lock the enclosing lease only shares can never be granted.
pub fn inherit_locks(ask: &mut Ask, held: (&[String], &[String])) -> Result<(), ClientError> {
    let (held_excl, held_shared) = held;
    if let Some(name) = ask.locks.iter().find(|l| held_shared.contains(l) && !held_excl.contains(l)) {
        return Err(ClientError::SharedOnly(name.clone()));
    }
    ask.locks.retain(|l| !held_excl.contains(l));
    ask.shares.retain(|l| !held_excl.contains(l) && !held_shared.contains(l));
    Ok(())
}

fn connect(dir: &Path) -> Result<UnixStream, ClientError> {
    place::private(dir)?;
    let socket = place::socket(dir);
    UnixStream::connect(&socket).map_err(|source| ClientError::NoDaemon { socket, source })
}

fn say(stream: &mut UnixStream, line: &impl serde::Serialize) -> std::io::Result<()> {
    let mut text = serde_json::to_string(line).map_err(std::io::Error::other)?;
    text.push('\n');
    stream.write_all(text.as_bytes())
}

/// `q ls` and `q log`: the daemon's text.
pub fn ask_text(dir: &Path, request: Request) -> Result<String, ClientError> {
    ask_on(connect(dir)?, request)
}

/// How long `q stop` waits for the daemon's process to end once it said it stopped.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// `q stop`: the daemon saves its state, removes its socket, says what it leaves and
/// exits; this waits (up to [`STOP_DEADLINE`]) until its process has ended, so that a
/// daemon started next finds its lock free.
pub fn stop(dir: &Path) -> Result<String, ClientError> {
    let stream = connect(dir)?;
    let pid = rustix::net::sockopt::socket_peercred(&stream).map_err(ClientError::PeerPid)?.pid.as_raw_nonzero().get();
    let start = place::start_time(pid);
    let text = ask_on(stream, Request::Stop)?;
    let asked = Instant::now();
    while start.is_some_and(|start| place::alive(pid, start)) {
        if asked.elapsed() > STOP_DEADLINE {
            return Err(ClientError::StillRuns { pid });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(text)
}

fn ask_on(mut stream: UnixStream, request: Request) -> Result<String, ClientError> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(ClientError::Socket)?;
    say(&mut stream, &request).map_err(ClientError::Ask)?;
    let mut reader = BufReader::new(stream);
    match read_line(&mut reader) {
        Ok(Some(line)) => match serde_json::from_str(&line) {
            Ok(Answer::Text(text)) => Ok(text),
            Ok(Answer::Refused(why)) => Err(ClientError::Refused(why)),
            _ => Err(ClientError::Unreadable(line)),
        },
        Ok(None) => Err(ClientError::Closed),
        Err(e) => Err(ClientError::NoAnswer(e)),
    }
}

pub struct RunArgs {
    pub name: String,
    pub ask: Ask,
    pub command: Vec<String>,
    /// How long to wait for the lease.
    pub wait: Duration,
    /// How long the command may run.
    pub timeout: Duration,
    /// Keep the job's scratch directory after it ends ([`Scratch`]).
    pub keep_scratch: bool,
}

/// The variable that names where jobs' scratch directories go (default: [`scratch_root`]).
pub const SCRATCH_ROOT_ENV: &str = "Q_SCRATCH_ROOT";

/// Where the scratch directories of jobs started in `cwd` go: `$Q_SCRATCH_ROOT`, else
/// `target/q-scratch` at the top of the git checkout `cwd` is in (on the checkout's
/// disk, which git ignores), else `q-scratch` in `cwd`. Never the system's temporary
/// directory: a sweep's files could fill a RAM-backed `/tmp` that other jobs share.
pub fn scratch_root(cwd: &Path, env_root: Option<std::ffi::OsString>) -> PathBuf {
    if let Some(root) = env_root.filter(|r| !r.is_empty()) {
        return PathBuf::from(root);
    }
    match cwd.ancestors().find(|dir| dir.join(".git").exists()) {
        Some(top) => top.join("target").join("q-scratch"),
        None => cwd.join("q-scratch"),
    }
}

/// A job's own scratch directory (`<root>/job-<id>-<q's pid>`, mode 0700: unique while
/// q runs, whichever daemon numbered the job), its `TMPDIR` and `Q_SCRATCH`; removed
/// when the job ends unless kept. A killed q leaves its directory behind.
pub struct Scratch {
    pub path: PathBuf,
    keep: bool,
}

impl Scratch {
    pub fn make(root: &Path, job: JobId, keep: bool) -> Result<Scratch, ClientError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = root.join(format!("job-{job}-{}", std::process::id()));
        let made = std::fs::create_dir_all(root).and_then(|()| std::fs::DirBuilder::new().mode(0o700).create(&path));
        made.map_err(|source| ClientError::Scratch { path: path.clone(), source })?;
        Ok(Scratch { path, keep })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("q: kept the job's scratch directory {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `q run`: the command's exit code, or why there is none.
pub fn run(dir: &Path, mut args: RunArgs) -> Result<i32, ClientError> {
    let (held_excl, held_shared) = held_locks();
    inherit_locks(&mut args.ask, (&held_excl, &held_shared))?;
    let mut stream = connect(dir)?;
    let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
    let request = Request::Run { name: args.name.clone(), cwd, ask: args.ask.clone() };
    say(&mut stream, &request).map_err(ClientError::Ask)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(ClientError::Socket)?);
    let asked = Instant::now();
    let mut last_wait = String::new();
    let (job, grant) = loop {
        let left = args.wait.checked_sub(asked.elapsed()).unwrap_or_default();
        if left.is_zero() {
            return Err(ClientError::NoLease { secs: args.wait.as_secs(), waited_for: last_wait });
        }
        stream.set_read_timeout(Some(left)).map_err(ClientError::Socket)?;
        let line = match read_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => return Err(ClientError::WentAway),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(ClientError::Reading(e)),
        };
        match serde_json::from_str(&line) {
            Ok(Answer::Wait(why)) => {
                eprintln!("q: waiting for {why}");
                last_wait = why;
            }
            Ok(Answer::Granted { job, grant, waited_ms }) => {
                if waited_ms >= 1000 {
                    eprintln!("q: job {job} waited {:.1}s", waited_ms as f64 / 1000.0);
                }
                break (job, grant);
            }
            Ok(Answer::Refused(why)) => return Err(ClientError::LeaseRefused(why)),
            _ => return Err(ClientError::Unreadable(line)),
        }
    };
    if !grant.cores.is_empty() {
        let mut set = rustix::thread::CpuSet::new();
        for &core in &grant.cores {
            set.set(core);
        }
        rustix::thread::sched_setaffinity(None, &set)
            .map_err(|source| ClientError::Pin { cores: grant.cores.clone(), source })?;
    }
    let locks: Vec<String> = args.ask.locks.iter().chain(&held_excl).cloned().collect();
    let shares: Vec<String> = args.ask.shares.iter().chain(&held_shared).cloned().collect();
    let inherited: Vec<String> = held_excl.iter().chain(&held_shared).cloned().collect();
    let (program, rest) = args.command.split_first().ok_or(ClientError::NoCommand)?;
    let cwd = std::env::current_dir().map_err(ClientError::Cwd)?;
    let scratch = Scratch::make(&scratch_root(&cwd, std::env::var_os(SCRATCH_ROOT_ENV)), job, args.keep_scratch)?;
    let mut cmd = testbench_process::Cmd::new(program, format!("the command of q's job {job}"), args.timeout)
        .args(rest)
        .cwd(cwd)
        .env("TMPDIR", scratch.path.display().to_string())
        .env("Q_SCRATCH", scratch.path.display().to_string())
        .process_group();
    let held = HeldLocks { locks: &locks, shares: &shares, inherited: &inherited };
    for (key, value) in lease_env(job, &grant, held, dir) {
        cmd = cmd.env(key, value);
    }
    let status = cmd
        .status_inherit_told(|pid| {
            let _ = say(&mut stream, &Report::Started(pid as i32));
        })
        .map_err(ClientError::Command)?;
    let code =
        status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
    let _ = say(&mut stream, &Report::Exit(code));
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_goes_to_the_checkouts_target_else_the_cwd_unless_the_environment_names_a_root() {
        let top = tempfile::tempdir().unwrap();
        let deep = top.path().join("crates/x");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(scratch_root(&deep, None), deep.join("q-scratch"), "no checkout: beside the job");
        std::fs::create_dir(top.path().join(".git")).unwrap();
        assert_eq!(scratch_root(&deep, None), top.path().join("target/q-scratch"));
        assert_eq!(scratch_root(&deep, Some("".into())), top.path().join("target/q-scratch"), "empty is unset");
        assert_eq!(scratch_root(&deep, Some("/big/disk".into())), PathBuf::from("/big/disk"));
    }

    #[test]
    fn a_job_inside_a_lease_takes_none_of_the_locks_its_lease_holds() {
        let held = (vec!["qemu".to_string()], vec!["net".to_string()]);
        let mut ask = Ask {
            locks: vec!["qemu".into(), "disk".into()],
            shares: vec!["qemu".into(), "net".into(), "x".into()],
            ..Ask::default()
        };
        inherit_locks(&mut ask, (&held.0, &held.1)).unwrap();
        assert_eq!((ask.locks, ask.shares), (vec!["disk".to_string()], vec!["x".to_string()]));
        let mut exclusive = Ask { locks: vec!["net".into()], ..Ask::default() };
        let refused = inherit_locks(&mut exclusive, (&held.0, &held.1)).unwrap_err();
        assert!(matches!(&refused, ClientError::SharedOnly(name) if name == "net"), "{refused}");
        assert!(refused.to_string().contains("can never take it exclusively"));
    }

    #[test]
    fn the_lease_reaches_the_job_as_its_environment() {
        let grant = Grant { cores: vec![2, 3], ports: Some((23000, 23003)) };
        let held = HeldLocks { locks: &["qemu".into()], shares: &[], inherited: &["net".into()] };
        let env = lease_env(7, &grant, held, Path::new("/q"));
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("Q_CORES"), Some("2-3"));
        assert_eq!(get("CARGO_BUILD_JOBS"), Some("2"));
        assert_eq!(get("RUST_TEST_THREADS"), Some("2"));
        assert_eq!(get("TESTBENCH_PORTS"), Some("23000-23003"));
        assert_eq!(get("Q_LOCK"), Some("qemu"));
        assert_eq!(get("Q_INHERITED"), Some("net"));
        assert_eq!(get("Q_JOB"), Some("7"));
    }
}
