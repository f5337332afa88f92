//! The judge's state machine, the per-line rules and the block fast path.

use std::fmt;
use std::time::Duration;

use crate::fast::{self, Engine};
use crate::head::{HeadRule, Heads, Sources};
use crate::normalize::{self, has_ctrl, strip_cr};

/// A labelled regular expression. Build the regex with [`regex::Regex::new`] and put
/// any flags inline (`(?i)`): the fast path re-reads the pattern text, so options set
/// on a `RegexBuilder` would be lost there.
#[derive(Clone, Debug)]
pub struct Pattern {
    /// How messages name the pattern: `expect[1]`, `forbid[0]`, `always-forbidden`, ...
    pub label: String,
    pub regex: regex::Regex,
}

impl Pattern {
    pub fn new(label: impl Into<String>, regex: &str) -> Result<Pattern, regex::Error> {
        Ok(Pattern { label: label.into(), regex: regex::Regex::new(regex)? })
    }
}

/// Bytes to type into the guest once a shown line matches `after`.
#[derive(Clone, Debug)]
pub struct Input {
    pub after: Pattern,
    pub send: Vec<u8>,
}

/// What the judge looks for. See the crate doc for the rules.
#[derive(Clone, Debug)]
pub struct Config {
    /// Must match shown lines, in order; one line satisfies at most one expect.
    pub expect: Vec<Pattern>,
    /// Must never match the raw text or the shown form of any line.
    pub forbid: Vec<Pattern>,
    /// As `forbid`, for the patterns the bench forbids in every case.
    pub always_forbidden: Vec<Pattern>,
    /// Fired in order, each once, each on a later line than the one before.
    pub inputs: Vec<Input>,
    /// After the last expect, wait for QEMU to exit by a power-off with `poweroff_status`.
    pub poweroff: bool,
    pub poweroff_status: i32,
    /// Without `poweroff`: how long to keep reading after the last expect matched.
    pub settle: Duration,
    /// The boot runs the reference guest's log server, whose `[server] done:` line is
    /// a verdict: Some, with the reporter's place when the case names one.
    pub server_done: Option<ServerDone>,
    /// Within one boot: two or more shown lines must match each, and no capture (group
    /// 1, or the whole match) may repeat.
    pub distinct: Vec<Pattern>,
    /// Each must match a shown line; the first capture of each is kept for the bench
    /// (`distinct_across_boots`), read with [`Judge::captures`].
    pub capture: Vec<Pattern>,
    /// Each fires once, on the first shown line it matches, for the bench's devices
    /// (a poke, a dial that waits for a line): read from [`Step::triggered`].
    pub triggers: Vec<Pattern>,
    /// Must match shown lines after the last expect, in order (what the guest says of
    /// the sessions the bench runs once every expect has matched).
    pub expect_after: Vec<Pattern>,
    /// The verdict waits for [`Judge::release`] (the bench's sessions ending) as well as
    /// for the expects: no pass before it.
    pub hold: bool,
    /// How many guest resets the boot must see ([`Judge::guest_reset`]): one more fails
    /// at once, fewer fail its end, and no pass comes before the last.
    pub reboots: u32,
    /// Per expect, the resets that must have come before it may match (empty: none).
    /// Non-decreasing; a reset while an expect of an earlier boot is pending fails.
    pub expect_resets: Vec<u32>,
}

/// The log server's done rule: exactly one line starting `[server] done:` (as it came
/// or as shown), and it names the reporter's place; none in a case with no reporter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerDone {
    pub reporter_place: Option<u32>,
}

impl Config {
    /// Rules that keep state across lines run on the per-line path only: the consoles
    /// that use them are the reference guest's, a few kilobytes each.
    fn needs_every_line(&self) -> bool {
        self.server_done.is_some()
            || !self.distinct.is_empty()
            || !self.capture.is_empty()
            || !self.triggers.is_empty()
            || !self.expect_after.is_empty()
            || self.hold
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            expect: Vec::new(),
            forbid: Vec::new(),
            always_forbidden: Vec::new(),
            inputs: Vec::new(),
            poweroff: false,
            poweroff_status: 0,
            settle: Duration::from_millis(50),
            server_done: None,
            distinct: Vec::new(),
            capture: Vec::new(),
            triggers: Vec::new(),
            expect_after: Vec::new(),
            hold: false,
            reboots: 0,
            expect_resets: Vec::new(),
        }
    }
}

/// How QEMU's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Code(n) => write!(f, "status {n}"),
            ExitStatus::Signal(n) => write!(f, "signal {n}"),
        }
    }
}

/// How the guest ended, as QEMU's QMP SHUTDOWN event told the runner. A power-off is
/// only ever [`Shutdown::PowerOff`]: no event is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// SHUTDOWN with reason "guest-shutdown".
    PowerOff,
    /// SHUTDOWN with reason "guest-panic": on riscv `virt` this is how QEMU reports a
    /// power-off through the test finisher with a failure status (an SBI system failure
    /// exits 255), so it is a power-off when QEMU's exit status is not 0.
    PowerOffFailure,
    /// SHUTDOWN with a reset's reason ("guest-reset" under -no-reboot).
    Reset,
    /// No SHUTDOWN event came before QEMU closed its QMP connection.
    NoEvent,
    /// SHUTDOWN with another reason ("guest-panic", "host-signal", ...), as QEMU named it.
    Other(String),
}

/// How the boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Exited {
        status: ExitStatus,
        shutdown: Shutdown,
        /// The last lines of QEMU's stderr.
        stderr_tail: Vec<String>,
    },
    TimedOut {
        deadline: Duration,
    },
}

/// Which rule failed the boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A line matched a forbid or always-forbidden pattern.
    Forbidden,
    /// The deadline passed while an expect was pending.
    TimedOut,
    /// A program printed a `[name] FAIL` line, then the boot timed out or ended
    /// while an expect was pending.
    ProgramFailed,
    /// QEMU exited before the guest printed anything.
    NoOutput,
    /// The guest powered off, reset or QEMU exited while an expect was pending.
    GuestEnded,
    /// All expects matched but the guest did not power off before the deadline.
    NoPowerOff,
    /// The guest reset where it should have powered off.
    Reset,
    /// QEMU exited without reporting a power-off (no SHUTDOWN event, or another reason).
    PowerOffUnproven,
    /// The guest powered off with another status than the expected one.
    WrongStatus,
    /// QEMU was killed by a signal after all expects matched.
    Killed,
    /// Without power-off: QEMU exited with a non-zero status during the settle time.
    ExitStatus,
    /// A `[server] done:` line that is not the reporter's one verdict.
    Reporter,
    /// A `distinct` pattern captured the same text twice, or matched fewer than two lines;
    /// or a `capture` pattern matched no line.
    Distinct,
    /// A device's check, judged from outside the guest (a dial never echoed, a peer
    /// connected another number of times than the case says, a capture that breaks a
    /// rule or cannot be read).
    Device,
    /// A crash report on the console (read by testbench-triage) of a kind the case lets
    /// fail the boot: the boot ends at the report's end, or at its start when the guest
    /// then says nothing more.
    Crash,
}

/// Why the boot failed, when (time since the boot started), the message, and the
/// console line that failed it, when one did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub at: Duration,
    pub message: String,
    /// The line that failed the boot (a forbidden line, a `[name] FAIL` line, a second
    /// `[server] done:` line, a capture seen twice); none for a failure no one line made
    /// (a deadline with no FAIL line, an ending, a device's check).
    pub place: Option<Place>,
}

impl Failure {
    /// A failure no console line made.
    pub fn new(kind: FailureKind, at: Duration, message: String) -> Failure {
        Failure { kind, at, message, place: None }
    }
}

/// A console line a failure points at: its number in `console.log` (from 1, as
/// [`Mark`]s count) and its shown form, quoted ([`crate::quote`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub line: u64,
    pub quote: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The judge's verdict on a boot. Once given, it never changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(Failure),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => f.write_str("pass"),
            Verdict::Fail(failure) => failure.fmt(f),
        }
    }
}

/// What the runner must do after [`Judge::feed`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Bytes to type into the guest, in order.
    pub send: Vec<Vec<u8>>,
    /// The verdict, once it is known.
    pub verdict: Option<Verdict>,
    /// The triggers (indices into [`Config::triggers`]) that fired in these bytes.
    pub triggered: Vec<usize>,
}

/// Which rule took a console line ([`Mark`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Expect,
    ExpectAfter,
    /// A forbid or always-forbidden pattern: the line that failed the boot.
    Forbid,
    /// An input's `after`: the line that made the judge type its `send`.
    Input,
    Trigger,
    /// The first `[name] FAIL` line (rule 4).
    ProgramFail,
}

impl Rule {
    /// The rule's name in a word (`expect`, `expect-after`, `forbid`, `input`, `trigger`, `fail`).
    pub fn name(self) -> &'static str {
        match self {
            Rule::Expect => "expect",
            Rule::ExpectAfter => "expect-after",
            Rule::Forbid => "forbid",
            Rule::Input => "input",
            Rule::Trigger => "trigger",
            Rule::ProgramFail => "fail",
        }
    }
}

/// A console line a rule took: its number (from 1, a line per '\n' as the judge splits
/// them: an over-long line is one line, a partial line the one after the last whole
/// one), the rule, and the pattern's label and text. A judge keeps at most one mark per
/// expect, input, trigger and `expect_after`, one forbidden line and one FAIL line:
/// their number is bounded by the configuration, not the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub line: u64,
    pub rule: Rule,
    pub label: String,
    pub pattern: String,
}

/// A duration in seconds, trimmed: `3s`, `2.5s`, `0.05s`.
pub fn secs(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}s")
}

/// Lines of a partial line longer than this are not checked for inputs until they
/// end (a prompt is short; this keeps a long line fed in small pieces linear).
const PARTIAL_INPUT_LIMIT: usize = 64 * 1024;

/// The longest line the judge holds whole: a longer line is judged in pieces of this
/// many bytes (see [`Judge::with_line_limit`]).
pub const LINE_LIMIT: usize = 64 * 1024;

/// How many bytes consecutive pieces of an over-long line share: a forbid match of up
/// to this many bytes always lies whole in one piece.
pub const LINE_OVERLAP: usize = 4 * 1024;

/// The fast path works on blocks of about this many bytes of whole lines.
const BLOCK: usize = 256 * 1024;

/// Judges one boot's console. See the crate doc.
///
/// A clone shares the compiled patterns but not their search caches; to judge many
/// consoles with one configuration cheaply, [`Judge::reset`] one judge between them.
#[derive(Clone)]
pub struct Judge {
    cfg: Config,
    engine: Option<Engine>,
    fail_finder: memchr::memmem::Finder<'static>,
    verdict: Option<Verdict>,
    next_expect: usize,
    /// When the last expect matched (time 0 when there are none); None while one is pending.
    last_expect_at: Option<Duration>,
    next_input: usize,
    /// The line being received (the partial line) has already fired an input.
    line_fired: bool,
    /// The shown form of the first `[name] FAIL` line.
    /// The first `[name] FAIL` line: its number and its quoted form.
    fail_line: Option<(u64, String)>,
    /// The line being received: the whole of it, or for an over-long line the piece
    /// being filled (the previous piece's last `line_overlap` bytes, then new ones).
    /// Never longer than `line_limit`.
    partial: Vec<u8>,
    partial_at: Duration,
    line_limit: usize,
    line_overlap: usize,
    /// Pieces of the current line judged so far: 0 while it is not over-long.
    pieces: u64,
    /// Where `partial` starts in the current line, in bytes.
    piece_start: u64,
    bytes_seen: u64,
    lines_seen: u64,
    // Scratch buffers of the fast path.
    shown_buf: Vec<u8>,
    raw_buf: Vec<u8>,
    /// For each line of a block whose raw text differs from its shown form: the start
    /// of its shown form in `shown_buf` and of its raw text in `raw_buf`.
    dirty: Vec<(usize, usize)>,
    /// The reporter's `[server] done:` line has been seen.
    done_seen: bool,
    /// What each `distinct` pattern captured, in order.
    distinct_seen: Vec<Vec<String>>,
    /// The first capture of each `capture` pattern.
    captured: Vec<Option<String>>,
    /// Which triggers have fired, and those fired since the last [`Step`].
    fired_triggers: Vec<bool>,
    triggered: Vec<usize>,
    /// The next `expect_after` pattern, and when the last one matched.
    next_after: usize,
    after_done_at: Option<Duration>,
    /// When the bench released a held verdict ([`Judge::release`]).
    released_at: Option<Duration>,
    /// The lines the rules took, in the order they took them.
    marks: Vec<Mark>,
    /// The patterns as an over-long line's head sees them (no line end at its cut),
    /// made at the first head, kept across [`Judge::reset`].
    heads: Option<Box<Heads>>,
    /// The line being judged is an over-long line's head.
    at_head: bool,
    /// Guest resets seen ([`Judge::guest_reset`]), and the console's length at the last.
    resets: u32,
    bytes_at_reset: u64,
}

impl Judge {
    pub fn new(config: Config) -> Judge {
        let engine = if config.needs_every_line() { None } else { Engine::new(&config) };
        Judge::with_engine(config, engine)
    }

    /// A judge that checks every line on its own with the original patterns: the
    /// reference the fast path is tested against. Same verdicts, only slower.
    #[doc(hidden)]
    pub fn reference(config: Config) -> Judge {
        Judge::with_engine(config, None)
    }

    fn with_engine(cfg: Config, engine: Option<Engine>) -> Judge {
        let last_expect_at = cfg.expect.is_empty().then_some(Duration::ZERO);
        let distinct_seen = vec![Vec::new(); cfg.distinct.len()];
        let captured = vec![None; cfg.capture.len()];
        let fired_triggers = vec![false; cfg.triggers.len()];
        Judge {
            fired_triggers,
            triggered: Vec::new(),
            next_after: 0,
            after_done_at: None,
            released_at: None,
            marks: Vec::new(),
            heads: None,
            at_head: false,
            resets: 0,
            bytes_at_reset: 0,
            done_seen: false,
            distinct_seen,
            captured,
            cfg,
            engine,
            // The fast path's way to the candidates for `fail_re`.
            fail_finder: memchr::memmem::Finder::new(b"] FAIL").into_owned(),
            verdict: None,
            next_expect: 0,
            last_expect_at,
            next_input: 0,
            line_fired: false,
            fail_line: None,
            partial: Vec::new(),
            partial_at: Duration::ZERO,
            line_limit: LINE_LIMIT,
            line_overlap: LINE_OVERLAP,
            pieces: 0,
            piece_start: 0,
            bytes_seen: 0,
            lines_seen: 0,
            shown_buf: Vec::new(),
            raw_buf: Vec::new(),
            dirty: Vec::new(),
        }
    }

    /// The same judge with another line limit and overlap (the defaults are
    /// [`LINE_LIMIT`] and [`LINE_OVERLAP`]). `limit` is at least 2 and `overlap` at most
    /// half of it: every piece after the first then brings new bytes. Call it before the
    /// first [`Judge::feed`].
    pub fn with_line_limit(mut self, limit: usize, overlap: usize) -> Judge {
        self.set_line_limit(limit, overlap);
        self
    }

    /// As [`Judge::with_line_limit`], in place.
    pub fn set_line_limit(&mut self, limit: usize, overlap: usize) {
        self.line_limit = limit.max(2);
        self.line_overlap = overlap.min(self.line_limit / 2);
        if self.partial.capacity() > self.line_limit {
            self.partial = Vec::new();
        }
    }

    /// Forgets the console judged so far: the judge is as new, with the same
    /// configuration, line limit, compiled patterns and their search caches.
    pub fn reset(&mut self) {
        let cfg = std::mem::take(&mut self.cfg);
        let engine = self.engine.take();
        let heads = self.heads.take();
        let mut partial = std::mem::take(&mut self.partial);
        partial.clear();
        let (limit, overlap) = (self.line_limit, self.line_overlap);
        *self = Judge::with_engine(cfg, engine).with_line_limit(limit, overlap);
        self.partial = partial;
        self.heads = heads;
    }

    /// The bytes the judge holds for the line being received (what it allocated for
    /// it): at most the line limit, however long the line.
    #[doc(hidden)]
    pub fn line_bytes_held(&self) -> usize {
        self.partial.capacity()
    }

    /// Lines judged so far (a partial line is not counted until it ends).
    pub fn lines_seen(&self) -> u64 {
        self.lines_seen
    }

    /// The console lines the rules took so far: each expect's, input's, trigger's and
    /// `expect_after`'s line, the forbidden line, the first `[name] FAIL` line.
    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    fn mark(&mut self, line: u64, rule: Rule, index: usize) {
        let pattern = match rule {
            Rule::Expect => self.cfg.expect.get(index),
            Rule::ExpectAfter => self.cfg.expect_after.get(index),
            Rule::Forbid => self.cfg.forbid.iter().chain(&self.cfg.always_forbidden).nth(index),
            Rule::Input => self.cfg.inputs.get(index).map(|i| &i.after),
            Rule::Trigger => self.cfg.triggers.get(index),
            Rule::ProgramFail => None,
        };
        let (label, pattern) = match pattern {
            Some(p) => (p.label.clone(), p.regex.as_str().to_string()),
            None => ("FAIL line".to_string(), fail_re().as_str().to_string()),
        };
        self.push_mark(Mark { line, rule, label, pattern });
    }

    /// Keeps the marks in line order (the fast path finds a block's FAIL line before
    /// its expects), the rules of one line in the order they took it.
    fn push_mark(&mut self, mark: Mark) {
        let at = self.marks.partition_point(|m| m.line <= mark.line);
        self.marks.insert(at, mark);
    }

    /// The end of the settle time, when it is running.
    fn settle_end(&self) -> Option<Duration> {
        if self.cfg.poweroff || self.resets < self.cfg.reboots {
            return None;
        }
        let last = self.last_expect_at?;
        if !self.cfg.hold && self.cfg.expect_after.is_empty() {
            return Some(last.saturating_add(self.cfg.settle));
        }
        // With sessions: the settle time starts once they have ended and every
        // expect_after has matched, whichever came last.
        let released = if self.cfg.hold { self.released_at? } else { Duration::ZERO };
        let after = if self.cfg.expect_after.is_empty() { Duration::ZERO } else { self.after_done_at? };
        Some(last.max(released).max(after).saturating_add(self.cfg.settle))
    }

    /// The pending expect may match: the resets it waits for have come.
    fn expect_open(&self) -> bool {
        self.cfg.expect_resets.get(self.next_expect).is_none_or(|&need| self.resets >= need)
    }

    /// The guest reset (QMP's RESET event with `guest: true`), at `now`. The boot fails
    /// at once on a reset more than the case expects, and on one that comes while an
    /// expect of the boot before it is pending. A reset with no console byte since the
    /// one before is that same reset: x86's Linux asks for one by several means in a
    /// row (the ACPI register, then the keyboard controller), and QEMU reports each.
    pub fn guest_reset(&mut self, now: Duration) -> Option<Verdict> {
        if self.verdict.is_some() {
            return self.verdict.clone();
        }
        if self.resets > 0 && self.bytes_seen == self.bytes_at_reset {
            return None;
        }
        self.bytes_at_reset = self.bytes_seen;
        self.resets = self.resets.saturating_add(1);
        let fail = |message: String| Verdict::Fail(Failure::new(FailureKind::Reset, now, message));
        let n = self.resets;
        if n > self.cfg.reboots {
            let expects = match self.cfg.reboots {
                0 => "none (no reboots)".to_string(),
                r => format!("{r} (reboots = {r})"),
            };
            self.verdict = Some(fail(format!("guest reset a {} time; the case expects {expects}", ordinal(n))));
        } else if let Some(p) = self.cfg.expect.get(self.next_expect) {
            if self.cfg.expect_resets.get(self.next_expect).is_none_or(|&need| need < n) {
                self.verdict = Some(fail(format!(
                    "guest reset (the {} of {}) while waiting for {} '{}', a line of the boot before it",
                    ordinal(n),
                    self.cfg.reboots,
                    p.label,
                    p.regex.as_str()
                )));
            }
        }
        self.verdict.clone()
    }

    /// Resets seen so far.
    pub fn resets(&self) -> u32 {
        self.resets
    }

    /// Every expect has matched (the bench starts its sessions then).
    pub fn expects_done(&self) -> bool {
        self.next_expect == self.cfg.expect.len()
    }

    /// The bench's sessions have ended well: a held verdict may now pass (after
    /// `expect_after` and the settle time).
    pub fn release(&mut self, now: Duration) {
        if self.released_at.is_none() {
            self.released_at = Some(now);
        }
    }

    /// When the runner should call [`Judge::poll`] even if no bytes arrive, or None.
    pub fn wake_at(&self) -> Option<Duration> {
        if self.verdict.is_some() {
            return None;
        }
        self.settle_end()
    }

    /// Pass once the settle time after the last expect has passed (without power-off).
    pub fn poll(&mut self, now: Duration) -> Option<Verdict> {
        if self.verdict.is_none() && self.settle_end().is_some_and(|end| now >= end) {
            self.verdict = Some(self.passing(now));
        }
        self.verdict.clone()
    }

    /// Feeds console bytes that arrived at `now` (time since the boot started).
    pub fn feed(&mut self, now: Duration, bytes: &[u8]) -> Step {
        let mut send = Vec::new();
        if self.verdict.is_none() {
            // Bytes that come after the settle time ended are not judged. Bytes that
            // come at the very instant of the last expect are, even with no settle time,
            // so that how the bytes were cut into calls does not matter.
            if let (Some(end), Some(last)) = (self.settle_end(), self.last_expect_at) {
                if now >= end && now > last {
                    self.verdict = Some(self.passing(now));
                }
            }
        }
        if self.verdict.is_none() {
            self.take(now, bytes, &mut send);
        }
        Step { send, verdict: self.verdict.clone(), triggered: std::mem::take(&mut self.triggered) }
    }

    fn take(&mut self, now: Duration, bytes: &[u8], send: &mut Vec<Vec<u8>>) {
        self.bytes_seen = self.bytes_seen.saturating_add(bytes.len() as u64);
        let mut rest = bytes;
        while !rest.is_empty() && self.verdict.is_none() {
            if self.partial.is_empty() && self.pieces == 0 {
                // Between lines: the whole lines that fit the limit go a block at a time.
                let run = short_lines(rest, self.line_limit);
                if run > 0 {
                    let block = &rest[..run];
                    if self.engine.is_some() {
                        self.blocks(block, now, send);
                    } else {
                        self.lines(block, now, send);
                    }
                    rest = &rest[run..];
                    continue;
                }
            }
            rest = self.grow(rest, now, send);
        }
        if self.verdict.is_some() {
            return;
        }
        if !self.partial.is_empty() || self.pieces > 0 {
            self.partial_at = now;
            if self.pieces == 0
                && !self.line_fired
                && self.partial.len() <= PARTIAL_INPUT_LIMIT
                && self.next_input < self.cfg.inputs.len()
            {
                // A prompt is a line still being written: its trailing blanks are kept.
                let shown = normalize::shown_partial(&self.partial);
                if self.cfg.inputs[self.next_input].after.regex.is_match(&shown) {
                    self.mark(self.lines_seen + 1, Rule::Input, self.next_input);
                    self.fire(send);
                }
            }
        }
    }

    /// Adds the start of `rest` to the line being received: up to its '\n' (the line
    /// is then judged), or until the piece being filled holds `line_limit` bytes and
    /// more follow (the piece is then judged). Returns what is left.
    fn grow<'a>(&mut self, rest: &'a [u8], now: Duration, send: &mut Vec<Vec<u8>>) -> &'a [u8] {
        if self.partial.capacity() < self.line_limit {
            // One allocation of the limit, never more (not the doubling of a growing Vec).
            self.partial.reserve_exact(self.line_limit - self.partial.len());
        }
        let room = self.line_limit.saturating_sub(self.partial.len());
        if let Some(nl) = memchr::memchr(b'\n', &rest[..rest.len().min(room + 1)]) {
            self.partial.extend_from_slice(&rest[..nl]);
            self.finish_line(now, send);
            return &rest[nl + 1..];
        }
        if rest.len() <= room {
            self.partial.extend_from_slice(rest);
            return &[];
        }
        // More than the limit, and no '\n' yet: the piece is full.
        self.partial.extend_from_slice(&rest[..room]);
        let mut piece = std::mem::take(&mut self.partial);
        self.pieces += 1;
        if self.pieces == 1 {
            // The line's head: every rule, as a line that goes on (no line end at the cut).
            if self.heads.is_none() {
                self.heads = Some(Box::new(Heads::new(&head_sources(&self.cfg))));
            }
            self.at_head = true;
            self.line(&piece, now, send);
            self.at_head = false;
        } else {
            self.piece(&piece, now, false);
        }
        let keep = self.line_overlap.min(piece.len());
        let dropped = piece.len() - keep;
        piece.copy_within(dropped.., 0);
        piece.truncate(keep);
        self.piece_start += dropped as u64;
        self.partial = piece; // keep the allocation
        &rest[room..]
    }

    /// The line being received ended (its '\n' came, or the boot ended): judge it, or
    /// its last piece when it is over-long.
    fn finish_line(&mut self, at: Duration, send: &mut Vec<Vec<u8>>) {
        let mut line = std::mem::take(&mut self.partial);
        if self.pieces == 0 {
            self.line(&line, at, send);
        } else {
            // Its head was judged (and counted) as a line; the rest only for forbids.
            self.line_fired = false;
            self.piece(&line, at, true);
        }
        self.pieces = 0;
        self.piece_start = 0;
        line.clear();
        self.partial = line; // keep the allocation
    }

    /// Judges a piece of an over-long line after its head: the forbid rules only, on
    /// its raw text and its shown form.
    fn piece(&mut self, bytes: &[u8], at: Duration, last: bool) {
        // A '\r' ends the raw text only at the line's end.
        let raw = if last { normalize::raw_text(bytes) } else { String::from_utf8_lossy(bytes).into_owned() };
        let shown = normalize::shown(bytes);
        if let Some(which) = self.forbidden(&raw, &shown) {
            let from = self.piece_start;
            // The line's head was counted when it was judged.
            self.mark(self.lines_seen, Rule::Forbid, which);
            self.fail_forbidden(which, at, &shown, Some(from));
        }
    }

    fn fire(&mut self, send: &mut Vec<Vec<u8>>) {
        send.push(self.cfg.inputs[self.next_input].send.clone());
        self.next_input += 1;
        self.line_fired = true;
    }

    fn expect_matched(&mut self, at: Duration) {
        self.next_expect += 1;
        if self.next_expect == self.cfg.expect.len() {
            self.last_expect_at = Some(at);
        }
    }

    /// The index (forbid, then always-forbidden) of the first pattern that matches the
    /// line's raw text or shown form.
    fn forbidden(&self, raw: &str, shown: &str) -> Option<usize> {
        self.cfg
            .forbid
            .iter()
            .chain(&self.cfg.always_forbidden)
            .position(|p| p.regex.is_match(raw) || p.regex.is_match(shown))
    }

    /// Fails the boot on a forbidden line (or piece of an over-long line, starting at
    /// byte `piece` of it), quoting at most [`QUOTE_LIMIT`](crate::QUOTE_LIMIT) bytes
    /// of its shown form, around the match when the shown form has one.
    fn fail_forbidden(&mut self, which: usize, at: Duration, shown: &str, piece: Option<u64>) {
        let n = self.cfg.forbid.len();
        let p = if which < n { &self.cfg.forbid[which] } else { &self.cfg.always_forbidden[which - n] };
        let quoted = match p.regex.find(shown) {
            Some(m) => crate::quote::quote_around(shown, m.range(), crate::QUOTE_LIMIT),
            None => crate::quote::quote_with(shown, crate::QUOTE_LIMIT),
        };
        let mut message = format!(
            "forbidden line at {:.2}s matched {} '{}': {}",
            at.as_secs_f64(),
            p.label,
            p.regex.as_str(),
            quoted
        );
        if let Some(start) = piece {
            message.push_str(&format!(
                " (a line over {} bytes, judged in pieces; this piece starts at its byte {start})",
                self.line_limit
            ));
        }
        // Every caller has counted the line (or the over-long line whose piece this is).
        let place = Some(Place { line: self.lines_seen, quote: quoted.into_owned() });
        self.verdict = Some(Verdict::Fail(Failure { kind: FailureKind::Forbidden, at, message, place }));
    }

    /// The regex `rule`'s pattern `index` matches the line being judged with: its own, or
    /// on an over-long line's head the one that sees no line end at the cut.
    fn rule_regex(&self, rule: HeadRule, index: usize) -> &regex::Regex {
        if let (true, Some(heads)) = (self.at_head, &self.heads) {
            return heads.get(rule, index);
        }
        match rule {
            HeadRule::Expect => &self.cfg.expect[index].regex,
            HeadRule::ExpectAfter => &self.cfg.expect_after[index].regex,
            HeadRule::Input => &self.cfg.inputs[index].after.regex,
            HeadRule::Trigger => &self.cfg.triggers[index].regex,
            HeadRule::Distinct => &self.cfg.distinct[index].regex,
            HeadRule::Capture => &self.cfg.capture[index].regex,
        }
    }

    /// Whether `rule`'s pattern `index` is there and matches `shown`.
    fn rule_matches(&self, rule: HeadRule, index: usize, len: usize, shown: &str) -> bool {
        index < len && self.rule_regex(rule, index).is_match(shown)
    }

    /// Judges one whole line (without its '\n') that ended at `at`: the reference rules.
    fn line(&mut self, raw: &[u8], at: Duration, send: &mut Vec<Vec<u8>>) {
        let raw_s = normalize::raw_text(raw);
        let shown = normalize::shown(raw);
        self.lines_seen += 1;
        let fired = std::mem::take(&mut self.line_fired);
        let number = self.lines_seen;
        if let Some(which) = self.forbidden(&raw_s, &shown) {
            self.mark(number, Rule::Forbid, which);
            let piece = (self.pieces > 0).then_some(self.piece_start);
            self.fail_forbidden(which, at, &shown, piece);
            return;
        }
        if self.stateful_rules(&raw_s, &shown, at) {
            return;
        }
        if self.fail_line.is_none() && fail_re().is_match(&shown) {
            self.fail_line = Some((number, crate::quote(&shown).into_owned()));
            self.mark(number, Rule::ProgramFail, 0);
        }
        if self.expect_open() && self.rule_matches(HeadRule::Expect, self.next_expect, self.cfg.expect.len(), &shown) {
            self.mark(number, Rule::Expect, self.next_expect);
            self.expect_matched(at);
        } else if self.expects_done()
            && self.rule_matches(HeadRule::ExpectAfter, self.next_after, self.cfg.expect_after.len(), &shown)
        {
            self.mark(number, Rule::ExpectAfter, self.next_after);
            self.next_after += 1;
            if self.next_after == self.cfg.expect_after.len() {
                self.after_done_at = Some(at);
            }
        }
        if !fired && self.rule_matches(HeadRule::Input, self.next_input, self.cfg.inputs.len(), &shown) {
            self.mark(number, Rule::Input, self.next_input);
            self.fire(send);
            self.line_fired = false;
        }
        for index in 0..self.cfg.triggers.len() {
            if !self.fired_triggers[index] && self.rule_regex(HeadRule::Trigger, index).is_match(&shown) {
                self.fired_triggers[index] = true;
                self.triggered.push(index);
                let trigger = &self.cfg.triggers[index];
                let mark = Mark {
                    line: number,
                    rule: Rule::Trigger,
                    label: trigger.label.clone(),
                    pattern: trigger.regex.as_str().to_string(),
                };
                // The per-line path takes lines in order: this one is the last yet.
                self.marks.push(mark);
            }
        }
    }

    /// The log server's done rule on one line (or the first piece of an over-long one).
    /// True when the line failed the boot.
    fn done_rule(&mut self, raw: &str, shown: &str, at: Duration) -> bool {
        const DONE: &str = "[server] done:";
        let Some(rule) = self.cfg.server_done else { return false };
        if !(raw.starts_with(DONE) || shown.starts_with(DONE)) {
            return false;
        }
        let line = crate::quote(shown);
        let place = Place { line: self.lines_seen, quote: line.clone().into_owned() };
        let fail = |kind, message: String| Some(Verdict::Fail(Failure { kind, at, message, place: Some(place) }));
        let secs = at.as_secs_f64();
        self.verdict = match rule.reporter_place {
            None => fail(
                FailureKind::Reporter,
                format!("a [server] done: line at {secs:.2}s in a case with no reporter: {line}"),
            ),
            Some(_) if self.done_seen => {
                fail(FailureKind::Reporter, format!("a second [server] done: line at {secs:.2}s: {line}"))
            }
            // The head of an over-long line is never the reporter's line.
            Some(place) if self.pieces > 0 || shown != format!("{DONE} {place}") => fail(
                FailureKind::Reporter,
                format!("a [server] done: line at {secs:.2}s that is not the reporter's (place {place}): {line}"),
            ),
            Some(_) => {
                self.done_seen = true;
                None
            }
        };
        self.verdict.is_some()
    }

    /// The log server's done rule, `distinct` and `capture`, on one line. True when the
    /// line failed the boot.
    fn stateful_rules(&mut self, raw: &str, shown: &str, at: Duration) -> bool {
        if self.done_rule(raw, shown, at) {
            return true;
        }
        let line = crate::quote(shown);
        let place = Place { line: self.lines_seen, quote: line.clone().into_owned() };
        let fail = |kind, message: String| Some(Verdict::Fail(Failure { kind, at, message, place: Some(place) }));
        for i in 0..self.cfg.distinct.len() {
            let Some(caps) = self.rule_regex(HeadRule::Distinct, i).captures(shown) else { continue };
            let key = caps.get(1).or_else(|| caps.get(0)).map_or("", |m| m.as_str()).to_string();
            let p = &self.cfg.distinct[i];
            if self.distinct_seen[i].contains(&key) {
                self.verdict = fail(
                    FailureKind::Distinct,
                    format!(
                        "{} '{}' captured '{}' twice, again at {:.2}s: {line}",
                        p.label,
                        p.regex.as_str(),
                        crate::quote(&key),
                        at.as_secs_f64()
                    ),
                );
                return true;
            }
            self.distinct_seen[i].push(key);
        }
        for i in 0..self.cfg.capture.len() {
            if self.captured[i].is_none() {
                if let Some(caps) = self.rule_regex(HeadRule::Capture, i).captures(shown) {
                    self.captured[i] = caps.get(1).or_else(|| caps.get(0)).map(|m| m.as_str().to_string());
                }
            }
        }
        false
    }

    /// The verdict when every other rule has passed: the rules that can only be judged
    /// once the boot is over.
    fn passing(&self, at: Duration) -> Verdict {
        let fail = |message: String| Verdict::Fail(Failure::new(FailureKind::Distinct, at, message));
        for (p, seen) in self.cfg.distinct.iter().zip(&self.distinct_seen) {
            if seen.len() < 2 {
                return fail(format!(
                    "{} '{}' matched {} lines, two or more wanted",
                    p.label,
                    p.regex.as_str(),
                    seen.len()
                ));
            }
        }
        for (p, captured) in self.cfg.capture.iter().zip(&self.captured) {
            if captured.is_none() {
                return fail(format!("{} '{}' matched no line", p.label, p.regex.as_str()));
            }
        }
        Verdict::Pass
    }

    /// The first capture of each `capture` pattern (None where none matched yet).
    pub fn captures(&self) -> &[Option<String>] {
        &self.captured
    }

    /// Judges whole lines, each ending with '\n', one by one.
    fn lines(&mut self, block: &[u8], at: Duration, send: &mut Vec<Vec<u8>>) {
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', block) {
            self.line(&block[start..nl], at, send);
            if self.verdict.is_some() {
                return;
            }
            start = nl + 1;
        }
    }

    /// Judges whole lines, each ending with '\n', with the fast path, in blocks.
    fn blocks(&mut self, mut block: &[u8], at: Duration, send: &mut Vec<Vec<u8>>) {
        while !block.is_empty() && self.verdict.is_none() {
            let cut = if block.len() <= BLOCK {
                block.len()
            } else {
                memchr::memchr(b'\n', &block[BLOCK..]).map_or(block.len(), |i| BLOCK + i + 1)
            };
            let (now, rest) = block.split_at(cut);
            self.block(now, at, send);
            block = rest;
        }
    }

    fn block(&mut self, block: &[u8], at: Duration, send: &mut Vec<Vec<u8>>) {
        if std::str::from_utf8(block).is_err() {
            // Lossy decoding is left to the per-line path.
            return self.lines(block, at, send);
        }
        let Some(engine) = self.engine.take() else {
            return self.lines(block, at, send);
        };
        let mut shown_buf = std::mem::take(&mut self.shown_buf);
        let mut raw_buf = std::mem::take(&mut self.raw_buf);
        let mut dirty = std::mem::take(&mut self.dirty);
        let shown: &[u8] = if build_shown(block, &mut shown_buf, &mut raw_buf, &mut dirty) {
            // Every line's raw text and shown form are the line itself.
            block
        } else {
            &shown_buf
        };
        self.scan(&engine, shown, &raw_buf, &dirty, at, send);
        self.engine = Some(engine);
        self.shown_buf = shown_buf;
        self.raw_buf = raw_buf;
        self.dirty = dirty;
    }

    /// The raw text of the line whose shown form starts at `ls` in `shown`.
    fn raw_of<'a>(shown: &'a [u8], raw: &'a [u8], dirty: &[(usize, usize)], ls: usize, le: usize) -> &'a [u8] {
        match dirty.binary_search_by_key(&ls, |d| d.0) {
            Ok(d) => {
                let rs = dirty[d].1;
                &raw[rs..fast::line_end(raw, rs)]
            }
            Err(_) => &shown[ls..le],
        }
    }

    /// The fast path over one block: `shown` holds the block's shown lines, each ending
    /// with '\n'; `raw` the raw texts of the `dirty` lines (those whose raw text differs).
    fn scan(
        &mut self,
        engine: &Engine,
        shown: &[u8],
        raw: &[u8],
        dirty: &[(usize, usize)],
        at: Duration,
        send: &mut Vec<Vec<u8>>,
    ) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        // A line's number, by its start in `shown` (asked only for the bounded marks).
        let first = self.lines_seen + 1;
        let number = |ls: usize| first + memchr::memchr_iter(b'\n', &shown[..ls]).count() as u64;
        // 1. The first forbidden line, by its start in `shown`.
        let mut forbidden: Option<(usize, usize, usize)> = None; // (start, end, pattern)
        if let Some(re) = &engine.forbid {
            let mut from = 0;
            let mut scan = fast::Scan::default();
            while let Some((ls, le)) = scan.next(re, shown, from, shown.len()) {
                let r = Self::raw_of(shown, raw, dirty, ls, le);
                if let Some(which) = self.forbidden(&text(r), &text(&shown[ls..le])) {
                    forbidden = Some((ls, le, which));
                    break;
                }
                from = le + 1;
            }
            // The dirty lines' raw texts, only those before the forbidden line found.
            let upto = forbidden.map_or(dirty.len(), |f| dirty.partition_point(|d| d.0 < f.0));
            let raw_end = dirty.get(upto).map_or(raw.len(), |d| d.1);
            let mut from = 0;
            let mut scan = fast::Scan::default();
            while let Some((rs, re_)) = scan.next(re, raw, from, raw_end) {
                let d = dirty.partition_point(|d| d.1 <= rs).saturating_sub(1);
                let ls = dirty[d].0;
                let le = fast::line_end(shown, ls);
                if let Some(which) = self.forbidden(&text(&raw[rs..re_]), &text(&shown[ls..le])) {
                    forbidden = Some((ls, le, which));
                    break;
                }
                from = re_ + 1;
            }
        }
        let limit = forbidden.map_or(shown.len(), |f| f.0);
        // 2. The first `[name] FAIL` line.
        if self.fail_line.is_none() {
            for hit in self.fail_finder.find_iter(&shown[..limit]) {
                let ls = fast::line_start(shown, hit);
                let line = text(&shown[ls..fast::line_end(shown, hit)]);
                if fail_re().is_match(&line) {
                    self.fail_line = Some((number(ls), crate::quote(&line).into_owned()));
                    self.mark(number(ls), Rule::ProgramFail, 0);
                    break;
                }
            }
        }
        // 3. Expects, in order, one per line.
        let mut from = 0;
        let mut scan = fast::Scan::default();
        while self.next_expect < engine.expects.len() && self.expect_open() {
            let Some((ls, le)) = scan.next(&engine.expects[self.next_expect], shown, from, limit) else {
                break;
            };
            if self.cfg.expect[self.next_expect].regex.is_match(&text(&shown[ls..le])) {
                self.mark(number(ls), Rule::Expect, self.next_expect);
                self.expect_matched(at);
                scan = fast::Scan::default();
            }
            from = le + 1;
        }
        // 4. Inputs, in order, one per line.
        let mut from = 0;
        let mut scan = fast::Scan::default();
        while self.next_input < engine.inputs.len() {
            let Some((ls, le)) = scan.next(&engine.inputs[self.next_input], shown, from, limit) else {
                break;
            };
            if self.cfg.inputs[self.next_input].after.regex.is_match(&text(&shown[ls..le])) {
                self.mark(number(ls), Rule::Input, self.next_input);
                self.fire(send);
                self.line_fired = false;
                scan = fast::Scan::default();
            }
            from = le + 1;
        }
        // 5. Count the lines, and fail on the forbidden one.
        match forbidden {
            None => {
                self.lines_seen += memchr::memchr_iter(b'\n', shown).count() as u64;
            }
            Some((ls, le, which)) => {
                self.mark(number(ls), Rule::Forbid, which);
                self.lines_seen += memchr::memchr_iter(b'\n', &shown[..ls]).count() as u64 + 1;
                let line = text(&shown[ls..le]);
                self.fail_forbidden(which, at, &line, None);
            }
        }
    }

    /// The boot ended. The partial line, if any, is judged first as a line.
    pub fn end(&mut self, now: Duration, ending: Ending) -> Verdict {
        if let Some(v) = &self.verdict {
            return v.clone();
        }
        if !self.partial.is_empty() || self.pieces > 0 {
            let at = self.partial_at;
            self.finish_line(at, &mut Vec::new());
        }
        if let Some(v) = &self.verdict {
            return v.clone();
        }
        let verdict = self.ending(now, ending);
        self.verdict = Some(verdict.clone());
        verdict
    }

    fn ending(&self, now: Duration, ending: Ending) -> Verdict {
        let fail = |kind, message: String| Verdict::Fail(Failure::new(kind, now, message));
        if let Some(p) = self.cfg.expect.get(self.next_expect) {
            let waiting = format!("waiting for {} '{}'", p.label, p.regex.as_str());
            let what = match ending {
                Ending::TimedOut { deadline } => {
                    (FailureKind::TimedOut, format!("timed out after {} {waiting}", secs(deadline)))
                }
                Ending::Exited { status, shutdown, stderr_tail } => {
                    let stderr = if stderr_tail.is_empty() {
                        "(none)".to_string()
                    } else {
                        stderr_tail.iter().map(|l| crate::quote(l)).collect::<Vec<_>>().join(" | ")
                    };
                    if self.bytes_seen == 0 {
                        return fail(
                            FailureKind::NoOutput,
                            format!("qemu exited with {status} before the guest printed a line; stderr: {stderr}"),
                        );
                    }
                    let how = match (&shutdown, status) {
                        (Shutdown::Reset, _) => "reset".to_string(),
                        (Shutdown::PowerOff, ExitStatus::Code(n)) => {
                            format!("powered off, status {n}")
                        }
                        (Shutdown::PowerOffFailure, ExitStatus::Code(n)) if n != 0 => {
                            format!("powered off, status {n}")
                        }
                        (Shutdown::Other(reason), status) => format!("qemu exited, {status}, shutdown reason {reason}"),
                        (_, status) => format!("qemu exited, {status}"),
                    };
                    let mut message = format!("guest ended ({how}) while {waiting}");
                    if status != ExitStatus::Code(0) && !stderr_tail.is_empty() {
                        message.push_str("; stderr: ");
                        message.push_str(&stderr);
                    }
                    (FailureKind::GuestEnded, message)
                }
            };
            return match &self.fail_line {
                Some((number, line)) => Verdict::Fail(Failure {
                    place: Some(Place { line: *number, quote: line.clone() }),
                    ..Failure::new(FailureKind::ProgramFailed, now, format!("{line}; then {}", what.1))
                }),
                None => fail(what.0, what.1),
            };
        }
        if let Some(p) = self.cfg.expect_after.get(self.next_after) {
            let waiting = format!("waiting for {} '{}'", p.label, p.regex.as_str());
            return match ending {
                Ending::TimedOut { deadline } => {
                    fail(FailureKind::TimedOut, format!("timed out after {} {waiting}", secs(deadline)))
                }
                Ending::Exited { status, .. } => {
                    fail(FailureKind::GuestEnded, format!("guest ended (qemu exited, {status}) while {waiting}"))
                }
            };
        }
        if self.cfg.hold && self.released_at.is_none() {
            let what = "waiting for the sessions to end";
            return match ending {
                Ending::TimedOut { deadline } => {
                    fail(FailureKind::TimedOut, format!("timed out after {} {what}", secs(deadline)))
                }
                Ending::Exited { status, .. } => {
                    fail(FailureKind::GuestEnded, format!("guest ended (qemu exited, {status}) while {what}"))
                }
            };
        }
        if self.resets < self.cfg.reboots {
            let want = format!("the case expects {} (reboots = {})", self.cfg.reboots, self.cfg.reboots);
            let seen = match self.resets {
                1 => "1 reset".to_string(),
                n => format!("{n} resets"),
            };
            return match ending {
                Ending::TimedOut { deadline } => fail(
                    FailureKind::Reset,
                    format!(
                        "timed out after {} waiting for the {} reset; {want}",
                        secs(deadline),
                        ordinal(self.resets + 1)
                    ),
                ),
                Ending::Exited { .. } => fail(FailureKind::Reset, format!("guest ended after {seen}; {want}")),
            };
        }
        if self.cfg.poweroff {
            return match ending {
                Ending::TimedOut { deadline } => {
                    fail(FailureKind::NoPowerOff, format!("timed out after {} waiting for power-off", secs(deadline)))
                }
                Ending::Exited { shutdown: Shutdown::Reset, .. } => {
                    fail(FailureKind::Reset, "guest reset instead of powering off".into())
                }
                Ending::Exited { status: ExitStatus::Signal(n), .. } => {
                    fail(FailureKind::Killed, format!("qemu killed by signal {n}"))
                }
                Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOffFailure, .. } => fail(
                    FailureKind::PowerOffUnproven,
                    "qemu exited (status 0) after SHUTDOWN with reason guest-panic, which is a power-off only \
                     with a failure status"
                        .into(),
                ),
                Ending::Exited { status, shutdown: Shutdown::NoEvent, .. } => fail(
                    FailureKind::PowerOffUnproven,
                    format!(
                        "qemu exited ({status}) with no SHUTDOWN event on QMP: no power-off was seen \
                         (wanted SHUTDOWN with reason guest-shutdown)"
                    ),
                ),
                Ending::Exited { status, shutdown: Shutdown::Other(reason), .. } => fail(
                    FailureKind::PowerOffUnproven,
                    format!("qemu exited ({status}) after SHUTDOWN with reason {reason}, not guest-shutdown"),
                ),
                Ending::Exited { status: ExitStatus::Code(n), .. } if n != self.cfg.poweroff_status => fail(
                    FailureKind::WrongStatus,
                    format!("powered off with status {n}, expected {}", self.cfg.poweroff_status),
                ),
                Ending::Exited { .. } => self.passing(now),
            };
        }
        if self.settle_end().is_some_and(|end| now >= end) {
            return self.passing(now);
        }
        match ending {
            Ending::TimedOut { .. } => self.passing(now),
            Ending::Exited { status: ExitStatus::Code(0), .. } => self.passing(now),
            Ending::Exited { status, .. } => {
                fail(FailureKind::ExitStatus, format!("qemu exited with {status} after the last expect"))
            }
        }
    }
}

/// "1st", "2nd", "3rd", "4th", ... "11th", "12th", "13th", "21st".
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A program's own `[name] FAIL` line's pattern, bare (a program that owns the
/// console) or behind the log server's `[pid N] ` prefix; compiled once per process.
fn fail_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"^(\[pid [0-9]+\] )?\[[^\]\s]+\] FAIL").expect("a valid pattern"))
}

/// The length of the longest start of `bytes` made of whole lines ('\n' included) of at
/// most `limit` bytes each, without their '\n'.
fn short_lines(bytes: &[u8], limit: usize) -> usize {
    let mut pos: usize = 0;
    loop {
        let end = bytes.len().min(pos.saturating_add(limit).saturating_add(1));
        match memchr::memrchr(b'\n', &bytes[pos..end]) {
            Some(i) => pos += i + 1,
            None => return pos,
        }
    }
}

/// The first byte at or after `from` that [`normalize::shown`] would not keep as it is:
/// an ASCII control other than TAB and '\n', or DEL.
fn find_ctrl(buf: &[u8], from: usize) -> Option<usize> {
    let is_ctrl = |b: &u8| (*b < 0x20 && *b != b'\t' && *b != b'\n') || *b == 0x7f;
    let mut i = from;
    while i + 64 <= buf.len() {
        let chunk = &buf[i..i + 64];
        if has_ctrl(chunk) {
            return chunk.iter().position(is_ctrl).map(|p| i + p);
        }
        i += 64;
    }
    buf.get(i..)?.iter().position(is_ctrl).map(|p| i + p)
}

/// Builds the shown forms of a block's lines into `shown` (each followed by '\n'), and
/// the raw texts of the lines where they differ into `raw`, listed in `dirty`.
/// Returns true, leaving `shown` empty, when every line is its own shown form and raw
/// text (no controls, no trailing blanks): the block itself can then be searched.
///
/// Only the lines that hold a control byte or end with a blank are looked at one by
/// one; the runs of lines between them are copied whole.
fn build_shown(block: &[u8], shown: &mut Vec<u8>, raw: &mut Vec<u8>, dirty: &mut Vec<(usize, usize)>) -> bool {
    shown.clear();
    raw.clear();
    dirty.clear();
    let space = memchr::memmem::Finder::new(b" \n");
    let tab = memchr::memmem::Finder::new(b"\t\n");
    // Next hits, cached: (searched from, hit or usize::MAX).
    let mut next_space = (0, space.find(block).unwrap_or(usize::MAX));
    let mut next_tab = (0, tab.find(block).unwrap_or(usize::MAX));
    let mut next_ctrl = (0, find_ctrl(block, 0).unwrap_or(usize::MAX));
    if next_space.1 == usize::MAX && next_tab.1 == usize::MAX && next_ctrl.1 == usize::MAX {
        return true;
    }
    shown.reserve(block.len() + block.len() / 8);
    let mut copied = 0; // block[..copied] is in `shown`
    loop {
        let refresh = |cache: &mut (usize, usize), f: &dyn Fn(usize) -> Option<usize>| {
            if cache.1 < copied {
                *cache = (copied, f(copied).unwrap_or(usize::MAX));
            }
            cache.1
        };
        let a = refresh(&mut next_space, &|from| space.find(&block[from..]).map(|p| from + p));
        let b = refresh(&mut next_tab, &|from| tab.find(&block[from..]).map(|p| from + p));
        let c = refresh(&mut next_ctrl, &|from| find_ctrl(block, from));
        let hit = a.min(b).min(c);
        if hit >= block.len() {
            break;
        }
        let ls = fast::line_start(block, hit).max(copied);
        let le = fast::line_end(block, hit);
        shown.extend_from_slice(&block[copied..ls]);
        let line = &block[ls..le];
        let s0 = shown.len();
        normalize::shown_into(line, shown);
        let r = strip_cr(line);
        if r != &shown[s0..] {
            dirty.push((s0, raw.len()));
            raw.extend_from_slice(r);
            raw.push(b'\n');
        }
        shown.push(b'\n');
        copied = le + 1;
        if copied >= block.len() {
            break;
        }
    }
    shown.extend_from_slice(&block[copied.min(block.len())..]);
    false
}

/// The configuration's patterns each head rule rewrites (head.rs).
fn head_sources(cfg: &Config) -> Sources<'_> {
    fn all(patterns: &[Pattern]) -> Vec<&regex::Regex> {
        patterns.iter().map(|p| &p.regex).collect()
    }
    Sources {
        expect: all(&cfg.expect),
        expect_after: all(&cfg.expect_after),
        inputs: cfg.inputs.iter().map(|i| &i.after.regex).collect(),
        triggers: all(&cfg.triggers),
        distinct: all(&cfg.distinct),
        capture: all(&cfg.capture),
    }
}
