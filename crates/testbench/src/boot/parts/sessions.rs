//! A boot case's `[[session]]`s, run beside its console: the host's `ssh` (see `ssh.rs`)
//! logging in to the guest's port 22 through the port `[net] forward` gives it, each
//! session driven by `testbench-session` through its steps.
//!
//! The sessions are one [`Part`] of the boot (attached with the network card,
//! which owns the forwarded port): they hold the verdict, start together once every
//! `expect` has matched, each on a thread of its own that spawns and reaps its ssh, and
//! share a board of marks. The first session that fails fails the boot at once (its
//! reason names the session and step) and stops the others; when all have passed, the
//! part releases the verdict. Each session's transcript is `sessions/<name>.log` in the
//! boot's directory, beside the private copy of its key and the pinned `known_hosts`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use testbench_case::{BootCase, HostKey, Session, Step as CaseStep};
use testbench_session::{Forbid, Marks, Pattern, SessionOutcome, SessionSpec, Step};

use crate::boot::{Broken, Ended, Event, Evidence, Live, Part, PartEvent, Phase};
use crate::process::Cmd;
use crate::ssh::{Client, HostKeys, Invocation, KeyCopyError, ProbeError, Route};

/// The folder of a boot's directory that holds each session's transcript, its key's
/// private copy and the pinned `known_hosts`.
pub const SESSIONS_DIR: &str = "sessions";

/// Why a boot's sessions could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The sessions' folder or the pinned `known_hosts` could not be written.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("ssh is not on the path")]
    NoSsh,
    #[error(transparent)]
    Key(#[from] KeyCopyError),
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// A session the engine cannot run as the case gives it.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A pattern the engine refuses (its own words).
    #[error("session {session}: {label}: {source}")]
    Pattern { session: String, label: String, source: testbench_session::PatternError },
    /// Steps that do not hold together (each problem the engine found).
    #[error("session {session}: {}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Check { session: String, problems: Vec<testbench_session::StepProblem> },
}

/// A case's sessions, planned once for all its boots.
pub struct Sessions {
    sessions: Vec<Session>,
    host_key: Option<HostKey>,
    root: PathBuf,
    client: Client,
}

impl Sessions {
    /// The case's sessions, if it has any, with the host's ssh asked what it takes. The
    /// error says why the host's ssh cannot serve them.
    pub fn for_case(boot: &BootCase, root: &Path) -> Result<Option<Sessions>, Arc<ProbeError>> {
        if boot.sessions.is_empty() {
            return Ok(None);
        }
        let client = Client::once()?;
        let host_key = boot.net.as_ref().and_then(|net| net.host_key.clone());
        Ok(Some(Sessions { sessions: boot.sessions.clone(), host_key, root: root.to_path_buf(), client }))
    }

    /// This boot's part: the sessions' folder made, each key copied private, the host key
    /// pinned for the forwarded port `host_port` (the guest's 22).
    pub fn attach(&self, dir: &Path, host_port: u16) -> Result<(Box<dyn Part>, Vec<String>), SessionsError> {
        let folder = dir.join(SESSIONS_DIR);
        std::fs::create_dir_all(&folder).map_err(|source| SessionsError::Io { path: folder.clone(), source })?;
        let route = Route::Port(host_port);
        let host_keys = match &self.host_key {
            Some(key) => {
                let known_hosts = folder.join("known_hosts");
                let line = crate::ssh::known_hosts_line(&route, &key.line());
                std::fs::write(&known_hosts, line)
                    .map_err(|source| SessionsError::Io { path: known_hosts.clone(), source })?;
                HostKeys::Pinned { known_hosts }
            }
            None => HostKeys::Any,
        };
        let ssh = crate::process::on_path("ssh").ok_or(SessionsError::NoSsh)?;
        let mut runs = Vec::new();
        let mut log = vec![format!(
            "sessions: {} through host port {host_port} (guest port 22); {}",
            self.sessions.len(),
            self.client.note()
        )];
        log.push(match &self.host_key {
            Some(key) => format!("host key pinned: {}", key.line()),
            None => "host key: any (the case pins none with net.host_key)".into(),
        });
        for session in &self.sessions {
            let key = crate::ssh::private_copy(&self.root.join(session.private_key()), &folder, &session.name)?;
            let invocation = Invocation {
                client: &self.client,
                user: &session.user,
                key: &key,
                route: route.clone(),
                host_keys: host_keys.clone(),
                pty: session.pty,
                ssh_args: &session.ssh_args,
                command: session.command.as_deref(),
            };
            let cmd = session_cmd(&ssh, &invocation, &session.name);
            log.push(format!("session {}: {}", session.name, cmd.display()));
            runs.push(Run { spec: spec_of(session)?, cmd, log: folder.join(format!("{}.log", session.name)) });
        }
        let part = SessionsPart { runs: Arc::new(runs), coordinator: None };
        Ok((Box::new(part), log))
    }
}

/// The wrapper's own deadline for one ssh: past any case's timeout (the case's
/// deadline, which the session engine enforces, comes first).
const BACKSTOP: Duration = Duration::from_secs(24 * 3600);

/// How long before the boot's deadline the sessions' comes.
const DEADLINE_LEAD: Duration = Duration::from_millis(500);

/// One session's ssh: the case's deadline bounds it (the engine kills ssh at it); the
/// wrapper's own is a backstop well past any case's. No agent, no askpass, no display.
pub(crate) fn session_cmd(ssh: &Path, invocation: &Invocation, name: &str) -> Cmd {
    Cmd::new(ssh, format!("session {name}'s ssh"), BACKSTOP)
        .args(invocation.args())
        .env_remove("SSH_AUTH_SOCK")
        .env_remove("SSH_ASKPASS")
        .env_remove("DISPLAY")
}

/// A case's session as the engine runs it.
pub(crate) fn spec_of(session: &Session) -> Result<SessionSpec, SpecError> {
    let pattern = |p: &testbench_case::Pattern| {
        Pattern::new(p.regex.as_str()).map_err(|source| SpecError::Pattern {
            session: session.name.clone(),
            label: p.label.clone(),
            source,
        })
    };
    let mut steps = Vec::new();
    for step in &session.steps {
        steps.push(match step {
            CaseStep::Expect(p) => Step::Expect(pattern(p)?),
            CaseStep::Send(text) => Step::Send(text.source.clone()),
            CaseStep::Mark(name) => Step::Mark(name.clone()),
            CaseStep::Wait(name) => Step::Wait(name.clone()),
            CaseStep::Resize { cols, rows } => Step::Resize(*cols, *rows),
            CaseStep::Within(d) => Step::Within(*d),
            CaseStep::Exit(code) => Step::Exit(i32::from(*code)),
            CaseStep::Ended(code) => Step::Ended(i32::from(*code)),
        });
    }
    let forbid = session
        .forbid
        .iter()
        .map(|p| Ok(Forbid { label: p.label.clone(), pattern: pattern(p)? }))
        .collect::<Result<Vec<_>, SpecError>>()?;
    let spec = SessionSpec { name: session.name.clone(), steps, forbid, pty: session.pty };
    spec.check().map_err(|problems| SpecError::Check { session: session.name.clone(), problems })?;
    Ok(spec)
}

/// One session ready to run: its steps, its ssh and its transcript's path.
pub(crate) struct Run {
    pub spec: SessionSpec,
    pub cmd: Cmd,
    pub log: PathBuf,
}

/// One boot's sessions beside its console.
struct SessionsPart {
    runs: Arc<Vec<Run>>,
    /// The thread that runs the sessions and reports, once started: each session's
    /// outcome, in the case's order.
    coordinator: Option<JoinHandle<Vec<SessionOutcome>>>,
}

impl Part for SessionsPart {
    /// The sessions start once every expect has matched, and hold the verdict until all
    /// have passed.
    fn holds_from(&self) -> Option<Phase> {
        Some(Phase::ExpectsMet)
    }

    fn on(&mut self, phase: Phase, at: &Live) {
        if phase != Phase::ExpectsMet {
            return;
        }
        let runs = self.runs.clone();
        // The sessions' deadline comes a moment before the boot's, so that a session still
        // waiting then fails naming its step before the boot's loop gives up on them all.
        let deadline = at.deadline.checked_sub(DEADLINE_LEAD).unwrap_or(at.deadline).max(Instant::now());
        let (events, stop) = (at.events.clone(), at.stop.clone());
        self.coordinator = Some(std::thread::spawn(move || {
            let fail = |message: String| {
                let _ = events.send(Event::Part(PartEvent::Failed(message)));
            };
            let outcomes = run_all(&runs, &stop, deadline, &fail);
            if outcomes.iter().all(|o| matches!(o, SessionOutcome::Pass { .. })) {
                let _ = events.send(Event::Part(PartEvent::Released));
            }
            outcomes
        }));
    }

    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        let Some(coordinator) = self.coordinator.take() else {
            // The console's expects never all matched: the console's verdict says why.
            return if ended.passed {
                Err(Broken("the sessions never started".into()))
            } else {
                Ok(Evidence::default())
            };
        };
        let outcomes = coordinator.join().map_err(|_| Broken("the sessions' thread panicked".into()))?;
        let (mut notes, failures) = notes_and_failures(&self.runs, &outcomes);
        if failures.is_empty() || !ended.passed {
            notes.extend(failures);
            Ok(Evidence::notes(notes))
        } else {
            Err(Broken(failures.join("; ")))
        }
    }
}

/// What the result prints of each session that passed, and how each that failed reads.
pub(crate) fn notes_and_failures(runs: &[Run], outcomes: &[SessionOutcome]) -> (Vec<String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut failures = Vec::new();
    for (run, outcome) in runs.iter().zip(outcomes) {
        match outcome {
            SessionOutcome::Pass { status, expects, first_prompt } => {
                notes.push(pass_note(&run.spec.name, status, expects, *first_prompt))
            }
            SessionOutcome::Fail { reason } => failures.push(failure(&run.spec.name, reason)),
        }
    }
    (notes, failures)
}

/// How a session's failure reads, in the verdict and among the notes alike.
fn failure(name: &str, reason: &str) -> String {
    format!("session {name}: {reason} (transcript: {SESSIONS_DIR}/{name}.log)")
}

/// What the result prints of a session that passed: its exit, the latency to its first
/// prompt, and when its expects matched (seconds after its ssh started).
fn pass_note(
    name: &str,
    status: &std::process::ExitStatus,
    expects: &[(usize, Duration)],
    first_prompt: Option<Duration>,
) -> String {
    let status = status.code().map_or_else(|| format!("{status}"), |code| format!("exit {code}"));
    let prompt =
        first_prompt.map_or_else(String::new, |d| format!(", first prompt {:.2}s after ssh started", d.as_secs_f64()));
    let expects = if expects.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = expects.iter().map(|(n, d)| format!("#{n} {:.2}s", d.as_secs_f64())).collect();
        format!(", expects {}", list.join(" "))
    };
    format!("session {name}: {status}{prompt}{expects} (host-clock times)")
}

/// Run every session, each on its own thread, and say the case's failure through `fail`
/// at once: the first session's that failed of itself (the others' stops are not), or,
/// when every failure was a stop nobody outside asked for, the first of those. Each
/// session's outcome, in the case's order.
pub(crate) fn run_all(
    runs: &Arc<Vec<Run>>,
    stop: &Arc<AtomicBool>,
    deadline: Instant,
    fail: &dyn Fn(String),
) -> Vec<SessionOutcome> {
    let marks = Arc::new(Marks::for_sessions(runs.iter().map(|run| run.spec.name.as_str())));
    let start = Instant::now();
    let (done, finished) = std::sync::mpsc::channel::<(usize, SessionOutcome)>();
    let mut threads = Vec::new();
    for index in 0..runs.len() {
        let (runs, marks, stop, done) = (runs.clone(), marks.clone(), stop.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let run = &runs[index];
            let outcome = testbench_session::run(&run.spec, &run.cmd, &marks, &stop, start, deadline, &run.log);
            let _ = done.send((index, outcome));
        }));
    }
    drop(done);
    let mut outcomes: Vec<Option<SessionOutcome>> = (0..runs.len()).map(|_| None).collect();
    let mut reported = None;
    for (index, outcome) in finished.iter() {
        if let SessionOutcome::Fail { reason } = &outcome {
            // The first failure is the boot's; the stops it causes in the others are not.
            if reported.is_none() && !reason.starts_with("stopped:") {
                reported = Some(index);
                fail(failure(&runs[index].spec.name, reason));
            }
        }
        outcomes[index] = Some(outcome);
    }
    for thread in threads {
        let _ = thread.join();
    }
    let outcomes: Vec<SessionOutcome> = outcomes
        .into_iter()
        .map(|o| o.unwrap_or(SessionOutcome::Fail { reason: "its thread panicked".into() }))
        .collect();
    if reported.is_none() {
        if let Some((index, SessionOutcome::Fail { reason })) =
            outcomes.iter().enumerate().find(|(_, o)| matches!(o, SessionOutcome::Fail { .. }))
        {
            // Every failure was a stop: the boot ended, or the bench stopped them.
            if !stop.load(Ordering::SeqCst) {
                fail(failure(&runs[index].spec.name, reason));
            }
        }
    }
    outcomes
}
