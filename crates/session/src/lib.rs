//! # testbench-session: one session's client driven through its steps
//!
//! A boot case's `[[session]]` (and each session of the ssh-loopback kind) drives a
//! client process, the host's `ssh` in practice, through a list of steps: wait for
//! some output, type something, tell the other sessions of the case where it got,
//! wait for theirs, and end with an exit status. This crate is that engine. It knows
//! nothing of ssh's arguments (the bench builds the command line and hands over a
//! [`testbench_process::Cmd`]) nor of case files (the bench hands over typed
//! [`Step`]s); it runs one session on the caller's thread, and shares a board of
//! [`Marks`] and a stop flag with the case's other sessions.
//!
//! ## The client
//!
//! The client is spawned through `testbench_process::Cmd`, so it gets the
//! parent-death signal (on the thread that calls [`run`], which also reaps it) and its
//! command line goes to the transcript. Its stdout and stderr are pipes, each read on a
//! thread of its own into one channel of chunks with their arrival times: each
//! stream's bytes stay in order, and the session's output is both streams interleaved
//! as the chunks arrived. Its stdin is a pipe, or with [`SessionSpec::pty`] the slave
//! side of a pseudo-terminal the engine opens at 80x24 (columns x rows): the child
//! gets the slave as its stdin only (its output stays on the pipes), the terminal is
//! no one's controlling terminal (the engine signals the client itself), and the
//! engine writes `send`s to the master and reads back and discards what the terminal
//! sends there (its echo): the terminal is the client's input, never a verdict.
//!
//! The client starts at the first step that needs it (`expect`, `send`, `resize`,
//! `exit`, `ended`), or when the steps end: the `wait`s (and `mark`s, `within`s) before
//! it run first, so a session whose first steps are waits logs in only once those
//! marks are set.
//!
//! ## The steps
//!
//! - [`Step::Expect`]: wait until the pattern matches the output received since the
//!   end of the previous match (the first: since the client started). The pattern
//!   sees the raw bytes of both streams as they arrived (escape sequences and `\r`
//!   included). `^` and `$` are line anchors, as in a console `expect` ([`Pattern::new`]:
//!   multi-line and CRLF mode): `^` matches at the start of a line (the session's first
//!   output, or after `\n`, `\r\n` or a lone `\r`; after a match, only where a line
//!   starts, not where the match ended), `$` at the end of a line and at the end of
//!   what has arrived so far (so `'\$ $'` matches a prompt that waits for input, and
//!   `'^ok$'` a line `ok` among others). `\A` matches only where the session's output
//!   starts, `\z` only at the end of what has arrived so far. The match is looked for
//!   as each chunk arrives, each byte stepped once by a lazy DFA; the output up to its
//!   end is consumed, and its groups kept for the `send`s after it.
//! - [`Step::Send`]: type the text into the client's input. `$1` to `$9` are the last
//!   expect's groups, `$$` is one `$`; any other `$` is itself. A `$N` the last expect
//!   has no group for, or whose group did not take part in the match, fails the
//!   session naming it ([`SessionSpec::check`] finds the first kind before the start).
//! - [`Step::Mark`]: set a mark on the case's board.
//! - [`Step::Wait`]: wait until the mark is set (by any session), the stop flag is
//!   raised, or the step's deadline passes; a miss names the mark. The client's output
//!   is read (and judged by `forbid`) meanwhile.
//! - [`Step::Resize`]: with a terminal only: set its size (TIOCSWINSZ on the master),
//!   then send the client SIGWINCH. Without `pty` the session is refused.
//! - [`Step::Within`]: the next step must end within this time; its deadline is the
//!   earlier of that and the case's.
//! - [`Step::Exit`]: close the input (the pipe, or the terminal's master: a hang-up),
//!   read until the client exits, require the status.
//! - [`Step::Ended`]: keep the input open, read until the client exits on its own,
//!   require the status.
//!
//! Only marks may follow `exit` or `ended`. Steps that end without either end as an
//! implied `exit = 0`: the input is closed and the client must exit with status 0, so
//! no session passes with its client still running or failed.
//!
//! A status is the client's exit code; a client killed by a signal matches no status
//! and the failure names the signal.
//!
//! ## Failing, stopping, deadlines
//!
//! Every wait has a deadline: the case's (`deadline` of [`run`]), or a `within`'s.
//! One that passes fails the session saying what the step waited for and quoting the
//! last output. A session that fails records its name on the board and raises the
//! stop flag; every other session then ends at its next look (within some 50 ms)
//! with `stopped: session X failed (this session was at step N (...))`, and its
//! client is killed. The bench may
//! raise the flag itself (then `stopped: the case stopped its sessions`), and should
//! call [`Marks::wake`] after.
//!
//! Every byte of output is checked against the session's `forbid` patterns until the
//! client exits, on each stream's lines: a line ends at `\n` (one `\r` before it is
//! not part of it), `^` and `$` match at its start and end (and, as in an expect, on
//! either side of a lone `\r` in it), and a match is found as soon as the byte after
//! it arrives, at the end of its line, or at the end of the stream, however the writes
//! cut it. A match fails the session quoting it.
//!
//! ## Bounds
//!
//! - Output waits for the engine in a channel of 8 chunks of 64 KiB at most: a client
//!   writing faster than the engine reads waits on its pipe.
//! - An expect keeps at most [`UNMATCHED_LIMIT`] (1 MiB) of unmatched output (and
//!   the chunk being read); past it the oldest is dropped, keeping the last 512 KiB,
//!   and the transcript says so. `^` does not match where the output was cut.
//! - A forbid pattern sees every byte of a line however long, but the engine keeps
//!   only the line's last 64 to 128 KiB, to quote a match.
//! - The transcript keeps the first [`TRANSCRIPT_LIMIT`] (8 MiB) of output and says
//!   how much it left out; notes are always written.
//! - Messages quote at most a few hundred bytes (`testbench_judge::quote`).
//!
//! ## The transcript
//!
//! The file at `log` holds each chunk of output as it came (both streams, as they
//! arrived) and the engine's notes, each on a line of its own:
//! `[+1.234s] expect 2 matched 0.722s after ssh started: '...'`, `[+2.000s] sent
//! '...'`, `[+2.100s] mark x`, `[+3.000s] ssh exited 0 (...)`. A note's time is since
//! the `start` given to [`run`] (the same for all the sessions of a case, so their
//! transcripts line up); an expect's time, in the note and in the outcome, is since
//! the client started.
//!
//! ## What the engine cannot see
//!
//! - What the client does with its input: a `send` is done once the bytes are in the
//!   pipe or the terminal, not once the client read them. With a terminal, closing it
//!   (`exit`) discards what the client has not read yet: a session the other side ends
//!   after a line it must act on ends with `ended`.
//! - Output that other processes write to the client's pipes after it exited (a
//!   process it started that keeps them open) is read for [`EXIT_GRACE`] at most.
//! - When the other side read, saw or did anything: only the client's output and exit.
//!   The server's own log (or a guest's console) is the bench's to judge.
//! - Times are those of the chunks' arrival on the host, read by threads: a match's
//!   time is the arrival of the chunk that completed it, or of the latest one when it
//!   was already buffered when its expect began.

mod client;
mod engine;
mod marks;
mod output;
mod pattern;
mod transcript;

use std::fmt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

pub use client::INITIAL_SIZE;
pub use engine::EXIT_GRACE;
pub use marks::{Marks, WaitEnd};
pub use output::{escape, LINE_KEEP, UNMATCHED_KEEP, UNMATCHED_LIMIT};
pub use pattern::{Pattern, PatternError};
pub use transcript::TRANSCRIPT_LIMIT;

/// One step of a session. See the crate's documentation for what each does.
#[derive(Clone, Debug)]
pub enum Step {
    /// Wait until the pattern matches the output since the previous match.
    Expect(Pattern),
    /// Type this text (`$1`..`$9`: the last expect's groups; `$$`: a `$`).
    Send(String),
    /// Set this mark on the case's board.
    Mark(String),
    /// Wait until this mark is set.
    Wait(String),
    /// Set the terminal's size (columns, rows) and send SIGWINCH; needs `pty`.
    Resize(u16, u16),
    /// The next step must end within this time (and before the case's deadline).
    Within(Duration),
    /// Close the input, read until the client exits, require this status.
    Exit(i32),
    /// Keep the input open, read until the client exits, require this status.
    Ended(i32),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use testbench_judge::quote;
        match self {
            Step::Expect(p) => write!(f, "expect '{}'", quote(p.as_str())),
            Step::Send(text) => write!(f, "send '{}'", quote(&escape(text.as_bytes()))),
            Step::Mark(name) => write!(f, "mark '{name}'"),
            Step::Wait(name) => write!(f, "wait '{name}'"),
            Step::Resize(cols, rows) => write!(f, "resize [{cols}, {rows}]"),
            Step::Within(d) => write!(f, "within {}s", d.as_secs_f64()),
            Step::Exit(code) => write!(f, "exit {code}"),
            Step::Ended(code) => write!(f, "ended {code}"),
        }
    }
}

/// A pattern the session's output must never match, and how messages name it.
#[derive(Clone, Debug)]
pub struct Forbid {
    /// How a failure names the rule: `'bob-secret'`, say.
    pub label: String,
    pub pattern: Pattern,
}

impl Forbid {
    /// A rule labelled by its pattern's source, quoted.
    pub fn new(pattern: Pattern) -> Forbid {
        Forbid { label: format!("'{}'", testbench_judge::quote(pattern.as_str())), pattern }
    }
}

/// One session: its name (unique in its case), its steps, its forbidden output, and
/// whether its client's stdin is a terminal.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    pub name: String,
    pub steps: Vec<Step>,
    pub forbid: Vec<Forbid>,
    pub pty: bool,
}

/// How a session ended.
#[derive(Clone, Debug)]
pub enum SessionOutcome {
    /// Every step passed and the client exited with the status asked for.
    Pass {
        status: ExitStatus,
        /// The expects matched before the session first typed (all of them if it never
        /// typed): (the expect's number among the session's expects, from 1; its time
        /// since the client started). What the case's result line prints.
        expects: Vec<(usize, Duration)>,
        /// The latency to the first prompt: the time of the last expect matched before
        /// the session first typed (the prompt it answered). `None` when it never typed
        /// or typed before any expect.
        first_prompt: Option<Duration>,
    },
    /// The session failed, or was stopped (`stopped: ...`), for this reason.
    Fail { reason: String },
}

impl SessionSpec {
    /// The problems a session has before it runs, each naming its step: a `resize`
    /// without `pty`, a step other than a mark after `exit` or `ended`, a `within` that
    /// bounds no step, a `$N` no expect before it can give, an empty mark name.
    pub fn check(&self) -> Result<(), Vec<StepProblem>> {
        let mut problems = Vec::new();
        let mut last_expect: Option<(usize, &Pattern)> = None;
        let mut ended_at: Option<usize> = None;
        for (i, step) in self.steps.iter().enumerate() {
            let mut problem =
                |problem: Problem| problems.push(StepProblem { index: i, step: step.to_string(), problem });
            if let Some(end) = ended_at {
                if !matches!(step, Step::Mark(_)) {
                    problem(Problem::AfterEnd { end });
                }
            }
            match step {
                Step::Expect(p) => last_expect = Some((i, p)),
                Step::Send(text) => {
                    for n in references(text) {
                        match last_expect {
                            None => problem(Problem::NoExpect { n }),
                            Some((expect, p)) if n > p.groups() => problem(Problem::TooFewGroups {
                                n,
                                expect,
                                pattern: p.as_str().to_string(),
                                groups: p.groups(),
                            }),
                            Some(_) => {}
                        }
                    }
                }
                Step::Mark(name) | Step::Wait(name) if name.is_empty() => problem(Problem::NoMarkName),
                Step::Resize(..) if !self.pty => problem(Problem::ResizeWithoutPty),
                Step::Within(_) => match self.steps.get(i + 1) {
                    None => problem(Problem::WithinLast),
                    Some(Step::Within(_)) => problem(Problem::WithinWithin),
                    Some(_) => {}
                },
                Step::Exit(_) | Step::Ended(_) => {
                    ended_at.get_or_insert(i);
                }
                _ => {}
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// A problem a session's steps have before it runs ([`SessionSpec::check`]): the step's
/// index (from 0), the step as its messages show it, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("step {} ({step}): {problem}", index + 1)]
pub struct StepProblem {
    pub index: usize,
    pub step: String,
    pub problem: Problem,
}

/// What is wrong with one step ([`StepProblem`]); step numbers are indices from 0.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A step other than a mark after the `exit` or `ended` at `end`.
    #[error("only marks may follow step {} (exit or ended)", end + 1)]
    AfterEnd { end: usize },
    #[error("${n}, but no expect comes before it")]
    NoExpect { n: usize },
    /// A `$n` beyond the groups of the expect at `expect`.
    #[error("${n}, but the expect before it (step {}, '{pattern}') has {groups} group(s)", expect + 1)]
    TooFewGroups { n: usize, expect: usize, pattern: String, groups: usize },
    #[error("a mark needs a name")]
    NoMarkName,
    #[error("resize needs pty = true")]
    ResizeWithoutPty,
    #[error("within bounds the next step, and there is none")]
    WithinLast,
    #[error("within is followed by another within")]
    WithinWithin,
}

/// The group numbers `$1`..`$9` that `text` names (`$$` is a `$`).
fn references(text: &str) -> Vec<usize> {
    let mut refs = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            continue;
        }
        match chars.peek() {
            Some('$') => {
                chars.next();
            }
            Some(d @ '1'..='9') => {
                refs.push(*d as usize - '0' as usize);
                chars.next();
            }
            _ => {}
        }
    }
    refs
}

/// A `$n` in a send that names no text ([`substitute`]); `pattern` is the last expect's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SubstituteError {
    #[error("${n}, but no expect has matched before it")]
    NoExpect { n: usize },
    #[error("${n}, but group {n} of the last expect ('{pattern}') took no part in its match")]
    Unmatched { n: usize, pattern: String },
    #[error("${n}, but the last expect ('{pattern}') has no group {n}")]
    NoGroup { n: usize, pattern: String },
}

/// `text` with `$1`..`$9` replaced by `groups` (the last expect's, and its pattern's
/// source for messages) and `$$` by `$`.
pub(crate) fn substitute(text: &str, groups: Option<(&[Option<Vec<u8>>], &str)>) -> Result<Vec<u8>, SubstituteError> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.peek().copied() {
            Some('$') => {
                chars.next();
                out.push(b'$');
            }
            Some(d @ '1'..='9') => {
                chars.next();
                let n = d as usize - '0' as usize;
                let Some((groups, source)) = groups else {
                    return Err(SubstituteError::NoExpect { n });
                };
                match groups.get(n) {
                    Some(Some(bytes)) => out.extend_from_slice(bytes),
                    Some(None) => return Err(SubstituteError::Unmatched { n, pattern: source.to_string() }),
                    None => return Err(SubstituteError::NoGroup { n, pattern: source.to_string() }),
                }
            }
            _ => out.push(b'$'),
        }
    }
    Ok(out)
}

/// Run one session on this thread: start its client with `cmd` when a step needs it,
/// drive it through `spec`'s steps, and write its transcript to `log`. `marks` and
/// `stop` are shared by the case's sessions; `start` is the origin of the transcript's
/// times (the same for every session of a case) and `deadline` the case's.
///
/// The client is spawned and reaped on this thread (its parent-death signal follows
/// this thread), and never outlives the call: it is killed if it still runs.
pub fn run(
    spec: &SessionSpec,
    cmd: &testbench_process::Cmd,
    marks: &Marks,
    stop: &AtomicBool,
    start: Instant,
    deadline: Instant,
    log: &Path,
) -> SessionOutcome {
    engine::run_measured(spec, cmd, marks, stop, start, deadline, log).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(steps: Vec<Step>, pty: bool) -> SessionSpec {
        SessionSpec { name: "s".into(), steps, forbid: Vec::new(), pty }
    }

    fn expect(p: &str) -> Step {
        Step::Expect(Pattern::new(p).unwrap())
    }

    #[test]
    fn substitution_takes_groups_and_dollars() {
        let groups = vec![Some(b"id 4f".to_vec()), Some(b"4f".to_vec()), None];
        let g = Some((groups.as_slice(), "id (..)(x)?"));
        assert_eq!(substitute("approve $1 for $$5 $x $", g).unwrap(), b"approve 4f for $5 $x $");
        let unmatched = substitute("$2", g).unwrap_err();
        assert!(matches!(unmatched, SubstituteError::Unmatched { n: 2, .. }), "{unmatched}");
        assert!(unmatched.to_string().contains("group 2"));
        let absent = substitute("$3", g).unwrap_err();
        assert!(matches!(absent, SubstituteError::NoGroup { n: 3, .. }), "{absent}");
        assert!(absent.to_string().contains("no group 3"));
        let first = substitute("$1", None).unwrap_err();
        assert_eq!(first, SubstituteError::NoExpect { n: 1 });
        assert!(first.to_string().contains("no expect"));
        assert_eq!(substitute("no dollars: é", None).unwrap(), "no dollars: é".as_bytes());
    }

    #[test]
    fn check_names_each_problem_by_its_step() {
        let s = spec(
            vec![
                Step::Send("$1".into()),
                expect("a(b)"),
                Step::Send("$1 $2 $$3".into()),
                Step::Resize(100, 30),
                Step::Exit(0),
                Step::Mark("gone".into()),
                Step::Send("x".into()),
                Step::Within(Duration::from_secs(1)),
            ],
            false,
        );
        let problems = s.check().unwrap_err();
        let kinds: Vec<(usize, &Problem)> = problems.iter().map(|p| (p.index, &p.problem)).collect();
        assert_eq!(
            kinds,
            [
                (0, &Problem::NoExpect { n: 1 }),
                (2, &Problem::TooFewGroups { n: 2, expect: 1, pattern: "a(b)".into(), groups: 1 }),
                (3, &Problem::ResizeWithoutPty),
                (6, &Problem::AfterEnd { end: 4 }),
                (7, &Problem::AfterEnd { end: 4 }),
                (7, &Problem::WithinLast),
            ]
        );
        let all = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(all.contains("step 1 (send '$1'): $1, but no expect"), "{all}");
        assert!(
            all.contains("step 3 (send '$1 $2 $$3'): $2, but the expect before it (step 2, 'a(b)') has 1 group"),
            "{all}"
        );
        assert!(all.contains("step 4 (resize [100, 30]): resize needs pty = true"), "{all}");
        assert!(all.contains("step 7 (send 'x'): only marks may follow step 5"), "{all}");
        assert!(all.contains("step 8 (within 1s)"), "{all}");
        assert_eq!(problems.len(), 6, "{all}");
        assert!(spec(vec![expect("x"), Step::Resize(1, 1), Step::Ended(0), Step::Mark("m".into())], true)
            .check()
            .is_ok());
    }
}
