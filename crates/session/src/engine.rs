//! The step loop: one session's client driven through its steps.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use testbench_judge::quote;
use testbench_process::Cmd;

use crate::client::{Client, Event, Source, INITIAL_SIZE};
use crate::marks::{Marks, WaitEnd};
use crate::output::{escape, Last, LineCheck, Unmatched, UNMATCHED_KEEP, UNMATCHED_LIMIT};
use crate::transcript::Transcript;
use crate::{substitute, SessionOutcome, SessionSpec, Step};

/// The longest the engine waits for output before it looks at the marks, the stop
/// flag, the deadline and the client's exit again.
const SLICE: Duration = Duration::from_millis(20);
/// How long the engine still reads a client's output after the client exited, when
/// something else (a process the client started) holds its pipes open.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What the engine held at most, for the tests of its bounds.
#[derive(Debug, Default)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Stats {
    pub unmatched_peak: usize,
    pub line_peak: usize,
    pub transcript: u64,
}

enum End {
    Failed(String),
    Stopped(String),
}

/// The bound of one step: the case's deadline, or its `within` (when that comes first).
#[derive(Clone, Copy)]
enum Bound {
    Case(Instant),
    Within(Instant, Duration),
}

impl Bound {
    fn at(self) -> Instant {
        match self {
            Bound::Case(at) | Bound::Within(at, _) => at,
        }
    }

    fn passed(self) -> bool {
        Instant::now() >= self.at()
    }

    /// `"<what> by the case's deadline"` or `"<what> within 2s (its within)"`.
    fn missed(self, what: &str) -> String {
        match self {
            Bound::Case(_) => format!("{what} by the case's deadline"),
            Bound::Within(_, d) => format!("{what} within {} (its within)", secs(d)),
        }
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// `exited 3`, `was killed by signal 9 (SIGKILL)`.
pub(crate) fn status_text(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited {code}");
    }
    match status.signal() {
        Some(signal) => {
            let name = match signal {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                3 => " (SIGQUIT)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                13 => " (SIGPIPE)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("was killed by signal {signal}{name}")
        }
        None => format!("ended ({status})"),
    }
}

struct Engine<'a> {
    spec: &'a SessionSpec,
    cmd: &'a Cmd,
    marks: &'a Marks,
    stop: &'a AtomicBool,
    deadline: Instant,
    /// The program's file name, for messages.
    program: String,
    log: Transcript,
    client: Option<Client>,
    unmatched: Unmatched,
    forbid: [Vec<LineCheck>; 2],
    last: Last,
    last_arrival: Option<Instant>,
    /// Where the session is, for messages: `step 3 (expect '\$ $')`.
    at: String,
    /// The last expect's groups and its pattern's source.
    groups: Option<(Vec<Option<Vec<u8>>>, String)>,
    expects_seen: usize,
    expects: Vec<(usize, Duration)>,
    first_prompt: Option<Duration>,
    typed: bool,
    cut_noted: bool,
    grace_noted: bool,
}

pub(crate) fn run_measured(
    spec: &SessionSpec,
    cmd: &Cmd,
    marks: &Marks,
    stop: &AtomicBool,
    start: Instant,
    deadline: Instant,
    log: &Path,
) -> (SessionOutcome, Stats) {
    let program = Path::new(cmd.program()).file_name().unwrap_or(cmd.program()).to_string_lossy().into_owned();
    let mut transcript = match Transcript::create(log, start) {
        Ok(t) => t,
        Err(e) => {
            let reason = format!("cannot create the session's transcript {}: {e}", log.display());
            fail_the_case(marks, stop, &spec.name);
            marks.ended(&spec.name);
            return (SessionOutcome::Fail { reason }, Stats::default());
        }
    };
    transcript.note(Instant::now(), &format!("session {}", spec.name));
    if let Err(problems) = spec.check() {
        let reason = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        transcript.note(Instant::now(), &format!("FAILED: {reason}"));
        transcript.close(Instant::now());
        fail_the_case(marks, stop, &spec.name);
        marks.ended(&spec.name);
        return (SessionOutcome::Fail { reason }, Stats::default());
    }
    let forbid = |_| spec.forbid.iter().map(|f| LineCheck::new(&f.pattern)).collect::<Vec<_>>();
    let mut engine = Engine {
        spec,
        cmd,
        marks,
        stop,
        deadline,
        program,
        log: transcript,
        client: None,
        unmatched: Unmatched::new(),
        forbid: [forbid(0), forbid(1)],
        last: Last::new(),
        last_arrival: None,
        at: String::new(),
        groups: None,
        expects_seen: 0,
        expects: Vec::new(),
        first_prompt: None,
        typed: false,
        cut_noted: false,
        grace_noted: false,
    };
    let result = engine.steps();
    let outcome = match result {
        Ok(status) => {
            engine.note(&format!("passed: {} {}", engine.program, status_text(status)));
            SessionOutcome::Pass {
                status,
                expects: std::mem::take(&mut engine.expects),
                first_prompt: engine.first_prompt,
            }
        }
        Err(End::Failed(reason)) => {
            // The others stop first; then this session's client goes.
            fail_the_case(marks, stop, &spec.name);
            engine.note(&format!("FAILED: {reason}"));
            SessionOutcome::Fail { reason }
        }
        Err(End::Stopped(reason)) => {
            engine.note(&reason);
            SessionOutcome::Fail { reason }
        }
    };
    let stats = engine.finish();
    // It sets no more marks: a session still waiting on it may now be in a deadlock.
    marks.ended(&spec.name);
    (outcome, stats)
}

fn fail_the_case(marks: &Marks, stop: &AtomicBool, name: &str) {
    marks.fail(name);
    stop.store(true, Ordering::SeqCst);
    marks.wake();
}

impl Engine<'_> {
    fn note(&mut self, text: &str) {
        self.log.note(Instant::now(), text);
    }

    fn steps(&mut self) -> Result<ExitStatus, End> {
        let steps = &self.spec.steps;
        let mut within: Option<(Instant, Duration)> = None;
        let mut ended = None;
        for (i, step) in steps.iter().enumerate() {
            self.at = format!("step {} ({step})", i + 1);
            let bound = match within.take() {
                Some((at, d)) if at < self.deadline => Bound::Within(at, d),
                _ => Bound::Case(self.deadline),
            };
            self.check_stop()?;
            match step {
                Step::Within(d) => within = Some((Instant::now() + *d, *d)),
                Step::Mark(name) => {
                    self.marks.set(name);
                    self.note(&format!("mark {name}"));
                }
                Step::Wait(name) => self.wait(name, bound)?,
                Step::Expect(pattern) => {
                    self.start()?;
                    self.expect(pattern, bound)?;
                }
                Step::Send(text) => {
                    self.start()?;
                    self.send(text, bound)?;
                }
                Step::Resize(cols, rows) => {
                    self.start()?;
                    self.resize(*cols, *rows)?;
                }
                Step::Exit(code) => {
                    self.start()?;
                    ended = Some(self.end(true, *code, bound)?);
                }
                Step::Ended(code) => {
                    self.start()?;
                    ended = Some(self.end(false, *code, bound)?);
                }
            }
        }
        match ended {
            Some(status) => Ok(status),
            None => {
                self.at = "the end of the steps (an implied exit 0)".to_string();
                self.start()?;
                self.end(true, 0, Bound::Case(self.deadline))
            }
        }
    }

    fn check_stop(&self) -> Result<(), End> {
        if self.stop.load(Ordering::SeqCst) {
            Err(self.stopped())
        } else {
            Ok(())
        }
    }

    fn stopped(&self) -> End {
        End::Stopped(match self.marks.first_failure() {
            Some(name) => format!("stopped: session {name} failed (this session was at {})", self.at),
            None => format!("stopped: the case stopped its sessions (this session was at {})", self.at),
        })
    }

    fn fail(&self, what: String) -> End {
        End::Failed(format!("{}: {what}", self.at))
    }

    /// Start the client, once: at the first step that needs it.
    fn start(&mut self) -> Result<(), End> {
        if self.client.is_some() {
            return Ok(());
        }
        let client = Client::spawn(self.cmd, self.spec.pty)
            .map_err(|e| self.fail(format!("cannot start {}: {e}", self.program)))?;
        let input = if self.spec.pty {
            format!("its stdin a terminal at {}x{}", INITIAL_SIZE.0, INITIAL_SIZE.1)
        } else {
            "its stdin a pipe".to_string()
        };
        let text = format!("started {} (pid {}, {input}): {}", self.program, client.pid(), self.cmd.display());
        self.client = Some(client);
        self.note(&text);
        Ok(())
    }

    fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("the client was started")
    }

    /// Take the client's next event (waiting until `until`, a slice at most), drain
    /// the terminal, and see whether the client exited.
    fn pump(&mut self, until: Instant) -> Result<(), End> {
        let slice_end = until.min(Instant::now() + SLICE);
        if let Some(event) = self.client().next(slice_end) {
            self.take(event)?;
        }
        self.client().drain_terminal();
        if let Some(status) = self.client().poll_exit() {
            let after = self.client().spawned.elapsed();
            let text = format!("{} {} ({} after it started)", self.program, status_text(status), secs(after));
            self.note(&text);
        }
        Ok(())
    }

    fn take(&mut self, event: Event) -> Result<(), End> {
        match event {
            Event::Data(source, bytes, at) => {
                self.log.output(at, &bytes);
                self.last.push(&bytes);
                self.last_arrival = Some(at);
                let spec = self.spec;
                let found = self.forbid[source as usize]
                    .iter_mut()
                    .zip(&spec.forbid)
                    .find_map(|(check, forbid)| check.push(&bytes).map(|text| (text, &forbid.label)));
                if let Some((text, label)) = found {
                    return Err(self.forbidden(source, label, &text));
                }
                if self.unmatched.push(&bytes) > 0 && !self.cut_noted {
                    self.cut_noted = true;
                    self.note(&format!(
                        "more than {} KiB of output since the last match: the oldest is dropped, the last {} KiB kept",
                        UNMATCHED_LIMIT >> 10,
                        UNMATCHED_KEEP >> 10
                    ));
                }
            }
            Event::End(source, error) => {
                self.stream_ended(source)?;
                if let Some(error) = error {
                    self.note(&format!("reading {}'s {} failed: {error}", self.program, source.name()));
                }
            }
        }
        Ok(())
    }

    fn stream_ended(&mut self, source: Source) -> Result<(), End> {
        self.client().open[source as usize] = false;
        let spec = self.spec;
        let found = self.forbid[source as usize]
            .iter_mut()
            .zip(&spec.forbid)
            .find_map(|(check, forbid)| check.finish().map(|text| (text, &forbid.label)));
        match found {
            Some((text, label)) => Err(self.forbidden(source, label, &text)),
            None => Ok(()),
        }
    }

    fn forbidden(&self, source: Source, label: &str, text: &str) -> End {
        self.fail(format!("forbidden output on {} (forbid {label}): '{}'", source.name(), quote(text)))
    }

    /// The client exited and its output is all read (or, held open by something else,
    /// no longer waited for).
    fn done(&mut self) -> Result<bool, End> {
        let client = self.client();
        let Some((_, exited)) = client.status else { return Ok(false) };
        if client.open == [false, false] {
            return Ok(true);
        }
        if exited.elapsed() < EXIT_GRACE {
            return Ok(false);
        }
        if !self.grace_noted {
            self.grace_noted = true;
            let text = format!(
                "{} exited, and its output is still open {} later (held by a process it started?): no longer read",
                self.program,
                secs(EXIT_GRACE)
            );
            self.note(&text);
            for source in [Source::Stdout, Source::Stderr] {
                if self.client().open[source as usize] {
                    self.stream_ended(source)?;
                }
            }
        }
        Ok(true)
    }

    fn exit_text(&self) -> String {
        match self.client.as_ref().and_then(|c| c.status) {
            Some((status, _)) => format!("{} {}", self.program, status_text(status)),
            None => format!("{} is still running", self.program),
        }
    }

    fn wait(&mut self, name: &str, bound: Bound) -> Result<(), End> {
        if self.client.is_none() {
            return self.wait_without_client(name, bound);
        }
        let session = &self.spec.name;
        while !self.marks.is_set(name) {
            self.check_stop()?;
            if let Some(deadlock) = self.marks.waiting(session, Some(name)) {
                let last = self.last.quoted();
                self.marks.waiting(session, None);
                return Err(self.fail(format!("{deadlock}; {last}")));
            }
            if bound.passed() {
                let last = self.last.quoted();
                self.marks.waiting(session, None);
                return Err(self.fail(format!("{}; {last}", bound.missed(&format!("the mark '{name}' was never set")))));
            }
            if self.done()? {
                // Nothing more will come from the client: wait on the marks alone.
                self.marks.waiting(session, None);
                return self.wait_without_client(name, bound);
            }
            self.pump(bound.at())?;
        }
        self.marks.waiting(session, None);
        self.note(&format!("mark {name} seen"));
        Ok(())
    }

    fn wait_without_client(&mut self, name: &str, bound: Bound) -> Result<(), End> {
        match self.marks.wait_as(&self.spec.name, name, bound.at(), self.stop) {
            Ok(()) => {
                self.note(&format!("mark {name} seen"));
                Ok(())
            }
            Err(WaitEnd::Stopped) => Err(self.stopped()),
            Err(WaitEnd::Deadline) => Err(self.fail(bound.missed(&format!("the mark '{name}' was never set")))),
            Err(WaitEnd::Deadlock(deadlock)) => Err(self.fail(deadlock)),
        }
    }

    fn expect(&mut self, pattern: &crate::Pattern, bound: Bound) -> Result<(), End> {
        self.expects_seen += 1;
        let n = self.expects_seen;
        self.unmatched.begin_expect(pattern);
        loop {
            if let Some(found) = self.unmatched.check() {
                let at = self.last_arrival.unwrap_or_else(Instant::now);
                let since = at.saturating_duration_since(self.client().spawned);
                let text = format!(
                    "expect {n} matched {} after {} started: '{}'",
                    secs(since),
                    self.program,
                    quote(&escape(&found.text))
                );
                self.log.note(at, &text);
                if !self.typed {
                    self.expects.push((n, since));
                }
                self.groups = Some((found.groups, pattern.as_str().to_string()));
                return Ok(());
            }
            let failure = if self.done()? {
                Some(format!("{} before a match", self.exit_text()))
            } else if bound.passed() {
                Some(bound.missed("no match"))
            } else {
                None
            };
            if let Some(what) = failure {
                self.unmatched.end_expect();
                let last = self.last.quoted();
                return Err(self.fail(format!("{what}; {last}")));
            }
            if let Err(stop) = self.check_stop() {
                self.unmatched.end_expect();
                return Err(stop);
            }
            self.pump(bound.at())?;
        }
    }

    fn send(&mut self, text: &str, bound: Bound) -> Result<(), End> {
        let groups = self.groups.as_ref().map(|(g, source)| (g.as_slice(), source.as_str()));
        let bytes = substitute(text, groups).map_err(|e| self.fail(e.to_string()))?;
        if !self.typed {
            self.typed = true;
            self.first_prompt = self.expects.last().map(|&(_, since)| since);
        }
        let mut written = 0;
        while written < bytes.len() {
            match self.client().write_some(&bytes[written..]) {
                Ok(0) => {
                    self.check_stop()?;
                    if bound.passed() {
                        let what = bound.missed(&format!("{} did not take its input", self.program));
                        let last = self.last.quoted();
                        return Err(self.fail(format!("{what}; {last}")));
                    }
                    self.client().wait_writable(Duration::from_millis(10));
                    // Keep reading while the client is slow to read: it may be waiting
                    // for its own output to be read.
                    self.pump(Instant::now())?;
                }
                Ok(n) => written += n,
                Err(e) => {
                    let _ = self.client().poll_exit();
                    let what = format!("cannot type into {}: {e} ({})", self.program, self.exit_text());
                    return Err(self.fail(what));
                }
            }
        }
        self.note(&format!("sent '{}'", quote(&escape(&bytes))));
        Ok(())
    }

    fn resize(&mut self, cols: u16, rows: u16) -> Result<(), End> {
        if !self.spec.pty {
            return Err(self.fail("resize needs pty = true: without a terminal there is no size".to_string()));
        }
        self.client().resize(cols, rows).map_err(|e| self.fail(e.to_string()))?;
        self.note(&format!("resized the terminal to {cols}x{rows} and sent SIGWINCH"));
        Ok(())
    }

    /// `exit` (close the input first) or `ended`: read until the client exits, and
    /// require `code`.
    fn end(&mut self, close: bool, code: i32, bound: Bound) -> Result<ExitStatus, End> {
        if close {
            self.client().close_input();
            let what = if self.spec.pty { "terminal (a hang-up)" } else { "stdin" };
            self.note(&format!("closed {}'s {what}", self.program));
        }
        while !self.done()? {
            self.check_stop()?;
            if bound.passed() {
                let what = bound.missed(&format!("{} did not exit", self.program));
                let last = self.last.quoted();
                return Err(self.fail(format!("{what}; {last}")));
            }
            self.pump(bound.at())?;
        }
        let (status, _) = self.client().status.expect("done means exited");
        if status.code() == Some(code) {
            return Ok(status);
        }
        let last = self.last.quoted();
        let exit = self.exit_text();
        Err(self.fail(format!("{exit}, not exit status {code}; {last}")))
    }

    /// The client goes (killed if still running); the transcript says what was left.
    fn finish(mut self) -> Stats {
        if let Some(mut client) = self.client.take() {
            if client.status.is_none() {
                let status = client.kill();
                let text = match status {
                    Some(status) => format!("killed {}: it {}", self.program, status_text(status)),
                    None => format!("killed {}, which still did not end within 10s", self.program),
                };
                self.note(&text);
            }
            client.finish();
        }
        self.log.close(Instant::now());
        Stats {
            unmatched_peak: self.unmatched.peak,
            line_peak: self.forbid.iter().flatten().map(|c| c.peak).max().unwrap_or(0),
            transcript: self.log.written(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::LINE_KEEP;
    use crate::transcript::TRANSCRIPT_LIMIT;
    use crate::{Forbid, Pattern};

    #[test]
    fn fifty_mib_without_a_newline_stays_within_the_bounds() {
        let dir = std::env::temp_dir().join(format!("testbench-session-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("session.log");
        let client = Cmd::new("python3", "the flood", Duration::from_secs(300))
            .args(["-c", "import sys\nchunk = b'x' * 65536\nfor _ in range(800): sys.stdout.buffer.write(chunk)\n"]);
        let spec = SessionSpec {
            name: "flood".into(),
            steps: vec![Step::Expect(Pattern::new("never").unwrap()), Step::Exit(0)],
            forbid: vec![Forbid::new(Pattern::new("y").unwrap())],
            pty: false,
        };
        let start = Instant::now();
        let stop = AtomicBool::new(false);
        let (outcome, stats) =
            run_measured(&spec, &client, &Marks::new(), &stop, start, start + Duration::from_secs(300), &log);
        let transcript = std::fs::read(&log).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let SessionOutcome::Fail { reason } = outcome else { panic!("passed") };
        assert!(
            reason.starts_with("step 1 (expect 'never'): python3 exited 0 before a match; last output: '[... "),
            "{reason}"
        );
        assert!(reason.len() < 400, "{reason}");
        // What the engine held: the unmatched output and one chunk; a line's kept part
        // and one chunk; the transcript's first 8 MiB and its notes.
        assert!(stats.unmatched_peak <= UNMATCHED_LIMIT + crate::client::READ_CHUNK + 1, "{stats:?}");
        assert!(stats.line_peak <= 2 * LINE_KEEP + crate::client::READ_CHUNK, "{stats:?}");
        assert_eq!(stats.transcript, TRANSCRIPT_LIMIT);
        assert!(transcript.len() < TRANSCRIPT_LIMIT as usize + 4096);
        let notes = String::from_utf8_lossy(&transcript[TRANSCRIPT_LIMIT as usize..]);
        assert!(notes.contains("output past the first 8 MiB is not kept"), "{notes}");
        assert!(notes.contains(&format!("{} bytes of output were not kept", (50 << 20) - TRANSCRIPT_LIMIT)), "{notes}");
        let head = String::from_utf8_lossy(&transcript[..TRANSCRIPT_LIMIT as usize]);
        assert!(head.contains("more than 1024 KiB of output since the last match"));
    }
}
