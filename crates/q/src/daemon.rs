//! The daemon: one thread per connection, one scheduler behind a lock.
//!
//! A lease lives as long as its client's connection: the client process ends by any
//! exit (a kill included), the kernel closes its socket, the daemon reads the end and
//! frees the cores, ports and locks. Every change is saved (`state.json`, written whole
//! and renamed into place); a daemon started again reads it and adopts each running job
//! whose client still runs (the same PID and start time), with its cores, ports and
//! locks, and frees them when that process ends (checked every 100 ms). Jobs that were
//! still waiting are not adopted: their clients saw the old daemon go and said so.
//!
//! `q stop`, SIGTERM, SIGINT and SIGHUP end the daemon the same way: its state saved, its
//! socket removed, then the process exits (running jobs' leases are then as after a kill:
//! kept in `state.json` for a daemon started again to adopt).

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sched::{cores_text, Job, JobId, Machine, Owner, Sched};
use crate::{now_ms, place, read_line, Answer, Report, Request};

/// How many ended jobs `q log` keeps.
const LOG_KEPT: usize = 200;

/// A job that ended, for `q log`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ended {
    pub id: JobId,
    pub name: String,
    pub cores: String,
    pub ports: Option<(u16, u16)>,
    pub waited_ms: u64,
    pub ran_ms: u64,
    /// Its command's exit code, when its client said it.
    pub exit: Option<i32>,
    pub ended_ms: u64,
}

/// What the daemon saves after every change, and reads again on start.
#[derive(Default, Serialize, Deserialize)]
struct Saved {
    sched: Sched,
    log: VecDeque<Ended>,
}

struct State {
    machine: Machine,
    saved: Saved,
    /// Each connected job's socket, to send it its grant and what it waits for.
    clients: BTreeMap<JobId, UnixStream>,
    /// Exit codes clients reported, until their job ends.
    exits: BTreeMap<JobId, i32>,
    path: PathBuf,
    /// The socket it listens on, removed when it ends.
    socket: PathBuf,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a host port is free now: both a TCP and a UDP socket can bind it on
/// 127.0.0.1, where the bench's forwards listen.
fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
}

impl State {
    fn save(&self) {
        let tmp = self.path.with_extension("json.tmp");
        let Ok(text) = serde_json::to_string(&self.saved) else { return };
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &self.path);
        }
    }

    /// Start what may start, tell every client its news, save.
    fn reschedule(&mut self) {
        let before: BTreeMap<JobId, String> =
            self.saved.sched.jobs.values().map(|j| (j.id, j.waits_for.clone())).collect();
        let started = self.saved.sched.schedule(&self.machine, now_ms(), &port_free);
        let mut gone = Vec::new();
        for job in self.saved.sched.jobs.values() {
            let answer = if started.contains(&job.id) {
                let (grant, at) = job.running.clone().expect("a started job runs");
                Answer::Granted { job: job.id, grant, waited_ms: at.saturating_sub(job.asked_ms) }
            } else if job.running.is_none() && before.get(&job.id) != Some(&job.waits_for) {
                Answer::Wait(job.waits_for.clone())
            } else {
                continue;
            };
            if let Some(stream) = self.clients.get_mut(&job.id) {
                if send(stream, &answer).is_err() {
                    gone.push(job.id);
                }
            }
        }
        for id in gone {
            self.end(id);
        }
        self.save();
    }

    /// End a job (its client went): free what it held, log it, start what may start.
    fn end(&mut self, id: JobId) {
        self.clients.remove(&id);
        let exit = self.exits.remove(&id);
        if let Some(job) = self.saved.sched.end(id) {
            if let Some((grant, at)) = &job.running {
                let now = now_ms();
                self.saved.log.push_back(Ended {
                    id,
                    name: job.name.clone(),
                    cores: cores_text(&grant.cores),
                    ports: grant.ports,
                    waited_ms: at.saturating_sub(job.asked_ms),
                    ran_ms: now.saturating_sub(*at),
                    exit,
                    ended_ms: now,
                });
                while self.saved.log.len() > LOG_KEPT {
                    self.saved.log.pop_front();
                }
            }
            self.reschedule();
        }
    }
}

fn send(stream: &mut UnixStream, answer: &Answer) -> std::io::Result<()> {
    let mut line = serde_json::to_string(answer).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Place(#[from] place::PlaceError),
    #[error("cannot open {}: {source}", path.display())]
    OpenLock { path: PathBuf, source: std::io::Error },
    /// Another daemon holds the directory's lock.
    #[error("a q daemon already runs on {} (it holds {})", dir.display(), lock.display())]
    Running { dir: PathBuf, lock: PathBuf },
    #[error("cannot listen on {}: {source}", socket.display())]
    Listen { socket: PathBuf, source: std::io::Error },
    #[error("cannot catch SIGTERM, SIGINT and SIGHUP: {0}")]
    Signals(#[source] std::io::Error),
}

/// Run the daemon on `dir` for `machine` until killed. Returns only when it cannot
/// start, saying why.
pub fn serve(dir: &Path, machine: Machine) -> Result<(), DaemonError> {
    place::private(dir)?;
    let lock_path = dir.join("daemon.lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| DaemonError::OpenLock { path: lock_path.clone(), source })?;
    rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(|_| DaemonError::Running { dir: dir.to_path_buf(), lock: lock_path.clone() })?;
    let path = dir.join("state.json");
    let mut saved: Saved =
        std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    // Adopt the running jobs whose clients still run; forget the rest.
    saved.sched.jobs.retain(|_, job| job.running.is_some() && place::alive(job.owner.pid, job.owner.start));
    for job in saved.sched.jobs.values() {
        let (grant, _) = job.running.as_ref().expect("only running jobs are kept");
        eprintln!(
            "q: adopted job {} ({}): cores {}{}, client pid {}",
            job.id,
            job.name,
            cores_text(&grant.cores),
            grant.ports.map(|(lo, hi)| format!(", ports {lo}-{hi}")).unwrap_or_default(),
            job.owner.pid
        );
    }
    let socket = place::socket(dir);
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(|source| DaemonError::Listen { socket: socket.clone(), source })?;
    let shared: Shared = Arc::new(Mutex::new(State {
        machine,
        saved,
        clients: BTreeMap::new(),
        exits: BTreeMap::new(),
        path,
        socket: socket.clone(),
    }));
    lock(&shared).reschedule();
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(DaemonError::Signals)?;
    let on_signal = shared.clone();
    std::thread::spawn(move || on_signals(on_signal, signals));
    {
        let m = &lock(&shared).machine;
        eprintln!(
            "q: daemon pid {} serving {} with general cores {}, quiet cores {}, ports {}-{}",
            std::process::id(),
            socket.display(),
            cores_text(&m.general),
            cores_text(&m.quiet),
            m.ports.0,
            m.ports.1
        );
    }
    let watcher = shared.clone();
    std::thread::spawn(move || watch_adopted(watcher));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || {
            let _ = connection(&shared, stream);
        });
    }
    drop(lock_file);
    Ok(())
}

/// What ending the daemon leaves: its running jobs' leases (for a daemon started again to
/// adopt) and its waiting jobs (whose clients see it go and say so).
fn leaving(state: &State) -> String {
    let running = state.saved.sched.jobs.values().filter(|j| j.running.is_some()).count();
    let waiting = state.saved.sched.jobs.len() - running;
    format!(
        "{running} running job(s) left in {} for a daemon started again to adopt, {waiting} waiting job(s) told it went away",
        state.path.display()
    )
}

/// The daemon's end, with its state's lock held to the exit so no other thread changes
/// the state after its last save: save, remove the socket, answer `q stop` (when it was
/// that), exit.
fn end_daemon(state: std::sync::MutexGuard<'_, State>, why: &str, asker: Option<&mut UnixStream>) -> ! {
    state.save();
    let _ = std::fs::remove_file(&state.socket);
    let said = format!("daemon pid {} stopped ({why}): {}", std::process::id(), leaving(&state));
    if let Some(stream) = asker {
        let _ = send(stream, &Answer::Text(format!("q: {said}\n")));
    }
    eprintln!("q: {said}; socket {} removed", state.socket.display());
    std::process::exit(0)
}

/// SIGTERM, SIGINT or SIGHUP end the daemon as `q stop` does.
fn on_signals(shared: Shared, mut signals: signal_hook::iterator::Signals) {
    if let Some(signal) = signals.forever().next() {
        let name = match signal {
            signal_hook::consts::SIGTERM => "SIGTERM",
            signal_hook::consts::SIGINT => "SIGINT",
            _ => "SIGHUP",
        };
        end_daemon(lock(&shared), name, None);
    }
}

/// End each job no connection stands for (adopted after a restart) once its client
/// process has ended.
fn watch_adopted(shared: Shared) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut state = lock(&shared);
        let ended: Vec<JobId> = state
            .saved
            .sched
            .jobs
            .values()
            .filter(|job| !state.clients.contains_key(&job.id) && !place::alive(job.owner.pid, job.owner.start))
            .map(|job| job.id)
            .collect();
        for id in ended {
            state.end(id);
        }
    }
}

fn connection(shared: &Shared, mut stream: UnixStream) -> std::io::Result<()> {
    let me = rustix::process::getuid();
    let peer = rustix::net::sockopt::socket_peercred(&stream)?;
    if peer.uid != me {
        let refusal = format!("uid {} may not use the q daemon of uid {}", peer.uid.as_raw(), me.as_raw());
        return send(&mut stream, &Answer::Refused(refusal));
    }
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some(line) = read_line(&mut reader)? else { return Ok(()) };
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(e) => return send(&mut stream, &Answer::Refused(format!("not a q request: {e}"))),
    };
    let (name, cwd, ask) = match request {
        Request::Ls => return send(&mut stream, &Answer::Text(ls(&lock(shared)))),
        Request::Log => return send(&mut stream, &Answer::Text(log(&lock(shared)))),
        Request::Stop => end_daemon(lock(shared), "q stop", Some(&mut stream)),
        Request::Run { name, cwd, ask } => (name, cwd, ask),
    };
    let pid = peer.pid.as_raw_nonzero().get();
    let Some(start) = place::start_time(pid) else { return Ok(()) };
    let id = {
        let mut state = lock(shared);
        if let Err(why) = state.machine.check(&ask) {
            return send(&mut stream, &Answer::Refused(why.to_string()));
        }
        let job = Job {
            id: 0,
            name: name.chars().take(200).collect(),
            cwd: cwd.chars().take(1000).collect(),
            ask,
            owner: Owner { pid, start },
            asked_ms: now_ms(),
            running: None,
            child: None,
            waits_for: String::new(),
        };
        let id = state.saved.sched.submit(job);
        state.clients.insert(id, stream.try_clone()?);
        state.reschedule();
        id
    };
    // The client speaks again only to report; its silence while it waits or runs is
    // not an end, its socket's end is.
    stream.set_read_timeout(None)?;
    while let Ok(Some(line)) = read_line(&mut reader) {
        let mut state = lock(shared);
        match serde_json::from_str::<Report>(&line) {
            Ok(Report::Started(child)) => {
                if let Some(job) = state.saved.sched.jobs.get_mut(&id) {
                    job.child = Some(child);
                }
                state.save();
            }
            Ok(Report::Exit(code)) => {
                state.exits.insert(id, code);
            }
            Err(_) => break,
        }
    }
    lock(shared).end(id);
    Ok(())
}

/// A time of day in UTC, from milliseconds since the epoch.
fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!("{:02}:{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60, secs % 60)
}

/// `q ls`: the core map, the locks, the ports, the queue.
fn ls(state: &State) -> String {
    let sched = &state.saved.sched;
    let m = &state.machine;
    let now = now_ms();
    let mut text = format!(
        "cores: general {}, quiet {}; ports {}-{}\n",
        cores_text(&m.general),
        cores_text(&m.quiet),
        m.ports.0,
        m.ports.1
    );
    let running: Vec<&Job> = sched.jobs.values().filter(|j| j.running.is_some()).collect();
    for core in m.general.iter().chain(&m.quiet) {
        let set = if m.quiet.contains(core) { "quiet" } else { "general" };
        let holder = running.iter().find(|j| j.running.as_ref().is_some_and(|(g, _)| g.cores.contains(core)));
        let who = match holder {
            Some(job) => format!("job {} ({})", job.id, job.name),
            None => "free".to_string(),
        };
        text.push_str(&format!("  core {core:<3} {set:<8} {who}\n"));
    }
    let mut locks: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for job in &running {
        for name in &job.ask.locks {
            locks.entry(name).or_default().push(format!("exclusively by job {}", job.id));
        }
        for name in &job.ask.shares {
            locks.entry(name).or_default().push(format!("shared by job {}", job.id));
        }
    }
    for (name, holders) in locks {
        text.push_str(&format!("  lock {name}: held {}\n", holders.join(", ")));
    }
    text.push_str(&format!("running: {}\n", running.len()));
    for job in &running {
        let (grant, at) = job.running.as_ref().expect("running");
        text.push_str(&format!(
            "  job {} ({}, in {}): cores {}{}; since {} UTC ({}s); client pid {}{}\n",
            job.id,
            job.name,
            job.cwd,
            cores_text(&grant.cores),
            grant.ports.map(|(lo, hi)| format!(", ports {lo}-{hi}")).unwrap_or_default(),
            clock(*at),
            now.saturating_sub(*at) / 1000,
            job.owner.pid,
            if state.clients.contains_key(&job.id) { "" } else { " (adopted)" }
        ));
    }
    let waiting: Vec<&Job> = sched.jobs.values().filter(|j| j.running.is_none()).collect();
    text.push_str(&format!("waiting: {}\n", waiting.len()));
    for job in waiting {
        text.push_str(&format!(
            "  job {} ({}, in {}) for {}s: {}\n",
            job.id,
            job.name,
            job.cwd,
            now.saturating_sub(job.asked_ms) / 1000,
            job.waits_for
        ));
    }
    text
}

/// `q log`: the jobs that ended, newest last, with their waits and run times.
fn log(state: &State) -> String {
    let mut text = String::new();
    for e in &state.saved.log {
        text.push_str(&format!(
            "ended {} UTC  job {:<5} cores {:<7} waited {:>7.1}s  ran {:>8.1}s  exit {}  {}\n",
            clock(e.ended_ms),
            e.id,
            e.cores,
            e.waited_ms as f64 / 1000.0,
            e.ran_ms as f64 / 1000.0,
            e.exit.map(|c| c.to_string()).unwrap_or_else(|| "?".into()),
            e.name
        ));
    }
    if text.is_empty() {
        text.push_str("no job has ended yet\n");
    }
    text
}
