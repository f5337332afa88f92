//! What a run tells the person (or the CI log, or a program) that started it: the
//! [`Reporter`] keeps the reports and the summary and hands each event to its [`Sink`].
//!
//! - `human.rs`: a line per boot with its verdict and duration, failures with their
//!   reason, the replay command and where the logs are, and a summary line. On a terminal
//!   a live progress line shows what is running; elsewhere only plain lines.
//! - `json.rs` (`--message-format json`): one object per event on stdout, nothing else
//!   (`events.rs` is the schema).
//! - `junit.rs` (`--junit PATH`): written at the end, one test case per boot, or one
//!   error entry when the run was refused.
//!
//! A reason is quoted the same way in all three: the judge has already cut any console
//! line it quotes to a few hundred bytes (`testbench_judge::quote`), and here every line
//! of a reason is cut at `REASON_LINE_LIMIT` bytes and a reason at `REASON_LINES` lines,
//! with a marker that says what was cut, whatever produced it.
//!
//! Verdicts are coloured (PASS green, FAIL red, SKIP yellow) only when `--color` says so:
//! `auto` colours a terminal and never a pipe or a file, and `NO_COLOR` turns it off.
//! The result columns are as wide as the run's longest label, so a long case name never
//! breaks them.

mod human;
mod json;
mod junit;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{ColorChoice, MessageFormat};
use crate::error::BenchError;
use crate::events::Note;

/// How many console lines a failure that timed out quotes, and how much of the end of
/// `console.log` is read to find them (the file itself may be large).
pub const CONSOLE_TAIL_LINES: usize = 10;
const CONSOLE_TAIL_WINDOW: u64 = 32 * 1024;

/// The last `count` non-empty lines of a console log as a terminal shows them, each
/// quoted as the judge quotes (`testbench_judge::quote`), read from the file's last few KiB only. A line cut by the start of that
/// window is left out, unless it is all there is (then it is marked as cut).
pub fn console_tail(path: &Path, count: usize) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(CONSOLE_TAIL_WINDOW);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file.take(CONSOLE_TAIL_WINDOW).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let mut pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let mut cut_first = false;
    if start > 0 {
        if pieces.len() > 1 {
            pieces.remove(0);
        } else {
            cut_first = true;
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        let shown = testbench_judge::shown(piece);
        if shown.trim().is_empty() {
            continue;
        }
        let shown = if index == 0 && cut_first { format!("[…] {shown}") } else { shown };
        lines.push(shown);
    }
    let skip = lines.len().saturating_sub(count);
    lines.into_iter().skip(skip).map(|l| testbench_judge::quote(&l).into_owned()).collect()
}

/// Whether verdicts are coloured: `always` and `never` are obeyed; `auto` colours only a
/// terminal, and only when `NO_COLOR` is unset or empty.
pub fn use_color(choice: ColorChoice, stdout_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// A boot's label: `<case> <arch> smp<N>`, `<case> <arch>` (a build case) or `<case> host`.
pub fn label_of(case: &str, arch: Option<&str>, smp: Option<u32>) -> String {
    match (arch, smp) {
        (Some(arch), Some(smp)) => format!("{case} {arch} smp{smp}"),
        (Some(arch), None) => format!("{case} {arch}"),
        _ => format!("{case} host"),
    }
}

/// The seed column: `seed <S>`, `seed none` for a boot QEMU seeded itself, empty for a
/// case that boots nothing.
pub fn seed_text(seed: Option<u64>, boots: bool) -> String {
    match (seed, boots) {
        (Some(seed), _) => format!("seed {seed}"),
        (None, true) => "seed none".to_string(),
        (None, false) => String::new(),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    Pass,
    /// A must_fail case that failed as it must: the reason it failed with.
    ExpectedFailure(String),
    Fail(String),
    Skip(String),
    /// The bench itself could not run it: why. Not a failure of the case; the run exits 3.
    Trouble(String),
}

/// A boot's report travels from a --slurm task to the run that joins it as JSON (only a
/// boot's: its kind is "boot").
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BootReport {
    pub case: String,
    #[serde(skip, default = "boot_kind")]
    pub kind: &'static str,
    /// The width, for a boot or a build case; none for a case run on the host alone.
    pub arch: Option<String>,
    /// The harts, for a boot.
    pub smp: Option<u32>,
    pub seed: Option<u64>,
    pub outcome: Outcome,
    pub duration: Duration,
    pub dir: PathBuf,
    /// The one command that replays this boot, from any directory.
    pub replay: String,
    /// What the replay cannot repeat, for a person (never part of the command).
    pub replay_note: Option<String>,
    /// Whether the seed names the test (a sweep's seeds are distinct tests; a pinned or
    /// environment seed is a property of the one test).
    pub sweep: bool,
    /// The last console lines, for a failure that timed out.
    pub console_tail: Vec<String>,
    /// What the boot's devices noted (a dial's echo and its host-clock wait, the poke,
    /// the capture), printed under the result.
    pub notes: Vec<String>,
    /// The kind of its failure, when it failed or failed as it must.
    #[serde(default)]
    pub failure: Option<crate::verdict::FailKind>,
}

fn boot_kind() -> &'static str {
    "boot"
}

impl BootReport {
    pub fn label(&self) -> String {
        label_of(&self.case, self.arch.as_deref(), self.smp)
    }

    /// The replay command with its note, as a person reads it.
    pub(crate) fn replay_shown(&self) -> String {
        match &self.replay_note {
            Some(note) => format!("{}  # {note}", self.replay),
            None => self.replay.clone(),
        }
    }
}

/// What a scheduler (q, through scripts/jobs) leases for one run of a case by name.
pub struct JobClass {
    /// A core per guest hart (the most any of its boots takes); two for host tests,
    /// whose harness runs tests on threads; one for the rest. Never more than the machine
    /// has (a lease q could never grant is refused).
    pub cores: u32,
    /// Host-clock work, run on q's quiet set: a boot without icount held to a bound on a
    /// time (a session's `within`), or a self-check whose evidence is a deadline.
    pub quiet: bool,
    /// Host ports one boot forwards (its lease's size).
    pub ports: usize,
}

/// A case's class on a machine of `machine_cores` cores ([`machine_cores`]).
pub fn job_class(case: &testbench_case::Case, machine_cores: u32) -> JobClass {
    use testbench_case::{Kind, Step};
    let deadline_is_evidence = case.must_fail.as_ref().is_some_and(|p| {
        let text = p.source();
        text.contains("timed out") || text.contains("deadline") || text.contains("within")
    });
    let class = match &case.kind {
        Kind::Boot(boot) => {
            let bounded = boot.sessions.iter().any(|s| s.steps.iter().any(|step| matches!(step, Step::Within(_))));
            JobClass {
                cores: boot.smp.iter().flat_map(|(_, counts)| counts.iter().copied()).max().unwrap_or(1),
                quiet: boot.icount.is_none() && (bounded || deadline_is_evidence),
                ports: crate::boot::parts::host_ports(boot),
            }
        }
        Kind::HostTests(_) => JobClass { cores: 2, quiet: deadline_is_evidence, ports: 0 },
        Kind::SshLoopback(_) => JobClass { cores: 1, quiet: deadline_is_evidence, ports: 0 },
        Kind::Build(_) | Kind::Scripts(_) | Kind::Gate(_) => JobClass { cores: 1, quiet: false, ports: 0 },
    };
    JobClass { cores: class.cores.clamp(1, machine_cores.max(1)), ..class }
}

/// The cores this process may run on (its affinity and its cgroup's quota, as
/// `std::thread::available_parallelism` reads them): the most a class asks, since q's
/// daemon hands out the cores it may run on, and a bigger ask is refused.
pub fn machine_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// One row the run will print, known before it starts (to size the columns).
pub struct Row {
    pub label: String,
    pub seed: String,
}

#[derive(Default, Debug, Clone, Copy)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Boots and host runs the bench itself could not run.
    pub trouble: usize,
}

pub struct Reporter {
    /// Where the events go as they happen (the form `--message-format` chose).
    sink: Box<dyn Sink>,
    reports: Vec<BootReport>,
    /// Why the run was refused, when it was (for JUnit).
    refusals: Vec<String>,
    pub summary: Summary,
}

/// The longest line of a reason a report quotes, in bytes: a verdict's message with its
/// pattern and its quoted console line fits; a line of a megabyte does not.
const REASON_LINE_LIMIT: usize = 1024;
/// The most lines of a reason a report quotes.
const REASON_LINES: usize = 100;

/// A reason as the reports quote it: each line cut at `REASON_LINE_LIMIT` bytes, and
/// at most `REASON_LINES` lines, each cut marked.
fn clip_reason(reason: &str) -> String {
    let lines: Vec<&str> = reason.split('\n').collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(REASON_LINES)
        .map(|line| testbench_judge::quote_with(line, REASON_LINE_LIMIT).into_owned())
        .collect();
    if lines.len() > REASON_LINES {
        out.push(format!("[... {} more lines cut]", lines.len() - REASON_LINES));
    }
    out.join("\n")
}

fn clip_outcome(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Pass => Outcome::Pass,
        Outcome::ExpectedFailure(reason) => Outcome::ExpectedFailure(clip_reason(&reason)),
        Outcome::Fail(reason) => Outcome::Fail(clip_reason(&reason)),
        Outcome::Skip(reason) => Outcome::Skip(clip_reason(&reason)),
        Outcome::Trouble(reason) => Outcome::Trouble(clip_reason(&reason)),
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

impl Reporter {
    pub fn new(format: MessageFormat, color: bool) -> Reporter {
        let sink: Box<dyn Sink> = match format {
            MessageFormat::Human => Box::new(human::Human::new(color)),
            MessageFormat::Json => Box::new(json::Json),
        };
        Reporter { sink, reports: Vec::new(), refusals: Vec::new(), summary: Summary::default() }
    }

    /// Why the run was refused: every refusal, together, as `error:` lines on stderr
    /// whatever the form (and in the form's own way). Kept for JUnit.
    pub fn refused(&mut self, errors: &[String]) {
        for error in errors {
            eprintln!("error: {error}");
        }
        self.sink.refused(errors);
        self.refusals.extend(errors.iter().cloned());
    }

    /// `--list`: every case, each with the lease a scheduler gives one run of it.
    pub fn list(&self, cases: &[testbench_case::Case]) {
        self.sink.list(cases, machine_cores());
    }

    /// Something the person should read that is not a verdict (a build, a probe).
    pub fn note(&self, note: Note, text: &str) {
        self.sink.note(note, text);
    }

    pub fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        self.sink.run_started(run_dir, rows);
    }

    pub fn boot_started(&self, label: &str, seed: Option<u64>) {
        self.sink.boot_started(label, seed);
    }

    pub fn boot_finished(&mut self, report: BootReport) {
        // Every sink (and JUnit, from `self.reports`) quotes the clipped reason.
        let report = BootReport { outcome: clip_outcome(report.outcome), ..report };
        match &report.outcome {
            Outcome::Pass | Outcome::ExpectedFailure(_) => self.summary.passed += 1,
            Outcome::Fail(_) => self.summary.failed += 1,
            Outcome::Skip(_) => self.summary.skipped += 1,
            Outcome::Trouble(_) => self.summary.trouble += 1,
        }
        self.sink.boot_finished(&report);
        self.reports.push(report);
    }

    /// The reports so far, in the order they were finished (a --slurm task's saved
    /// results, the HTML report, JUnit).
    pub fn reports(&self) -> &[BootReport] {
        &self.reports
    }

    /// What the run waits for now (a --slurm array's tasks), on the progress line only.
    pub fn waiting(&self, text: &str) {
        self.sink.waiting(text);
    }

    /// Seeds of one sweep, in seed order: the sweep's own summary.
    pub fn sweep_summary(&self, case: &str, seeds: &[u64]) {
        let failed: Vec<String> = self
            .reports
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fail(_)))
            .map(|r| {
                format!("{}/{}", r.arch.as_deref().unwrap_or("host"), r.seed.map(|s| s.to_string()).unwrap_or_default())
            })
            .collect();
        self.sink.sweep_finished(case, seeds, self.reports.len(), &failed);
    }

    /// The run's end, naming the run directory and the HTML report when one was written.
    pub fn run_finished(&mut self, took: Duration, run_dir: &Path, html: Option<&Path>) {
        let end = RunEnd { took, run_dir, html, summary: self.summary, reports: &self.reports };
        self.sink.run_finished(&end);
    }

    /// `--junit PATH`: the run's reports (or its refusals) as JUnit XML.
    pub fn write_junit(&self, path: &Path) -> Result<(), BenchError> {
        junit::write(&self.reports, &self.refusals, path)
    }
}

/// What a sink is told at the run's end.
pub struct RunEnd<'a> {
    pub took: Duration,
    pub run_dir: &'a Path,
    pub html: Option<&'a Path>,
    pub summary: Summary,
    /// Every report, in the order they were finished.
    pub reports: &'a [BootReport],
}

/// Where a run's events go as they happen: the terminal's lines ([`human::Human`]) or
/// JSON lines ([`json::Json`]). JUnit and `report.html` are written from the reports at
/// the end (`junit.rs`, `report_html/`), a `--slurm` task's save from them after each
/// boot (`runner/slurm.rs`).
pub trait Sink {
    fn refused(&mut self, errors: &[String]);
    fn list(&self, cases: &[testbench_case::Case], machine_cores: u32);
    fn note(&self, note: Note, text: &str);
    fn run_started(&mut self, run_dir: &Path, rows: &[Row]);
    fn boot_started(&self, label: &str, seed: Option<u64>);
    fn boot_finished(&mut self, report: &BootReport);
    fn waiting(&self, text: &str) {
        let _ = text;
    }
    fn sweep_finished(&self, case: &str, seeds: &[u64], boots: usize, failed: &[String]);
    fn run_finished(&mut self, end: &RunEnd);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cases_job_class_is_a_core_per_hart_and_the_quiet_set_for_host_clock_evidence() {
        let class = |text: &str| job_class(&testbench_case::parse("tests/c.toml", text).unwrap(), 64);
        let boot = "description = \"d\"\narch = [\"rv64\", \"rv32\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\nexpect = ['x']\n";
        let plain = class(&format!("{boot}smp = {{ rv64 = [1, 4], rv32 = [2] }}\nicount = \"shift=3\"\n"));
        assert_eq!((plain.cores, plain.quiet, plain.ports), (4, false, 0));
        let deadline = format!("{boot}must_fail = '^timed out after'\n");
        assert!(class(&deadline).quiet, "a host-clock self-check whose evidence is its deadline");
        assert!(!class(&format!("{deadline}icount = \"shift=3\"\n")).quiet, "under icount it measures guest time");
        let host = class("description = \"d\"\nkind = \"host-tests\"\nworkspace = \"tests/fixtures/hostfix\"\n");
        assert_eq!((host.cores, host.quiet), (2, false));
        // On a machine of fewer cores, never more than it has.
        let small = |text: &str, cores| job_class(&testbench_case::parse("tests/c.toml", text).unwrap(), cores).cores;
        assert_eq!(small(&format!("{boot}smp = {{ rv64 = [1, 4], rv32 = [2] }}\n"), 3), 3);
        assert_eq!(small("description = \"d\"\nkind = \"host-tests\"\nworkspace = \"tests/fixtures/hostfix\"\n", 1), 1);
    }

    #[test]
    fn the_console_tail_is_the_last_shown_lines_read_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        let mut text = Vec::new();
        // A large file: only its end is read, and the line the window cuts is left out.
        for i in 0..100_000 {
            text.extend_from_slice(format!("line {i}\r\n").as_bytes());
        }
        text.extend_from_slice(b"\x1b[1mbold\x1b[0m\r\n\r\n");
        text.extend_from_slice(&vec![b'x'; 1000]);
        std::fs::write(&path, &text).unwrap();
        let tail = console_tail(&path, 3);
        assert_eq!(tail.len(), 3, "{tail:?}");
        assert_eq!(tail[0], "line 99999");
        assert_eq!(tail[1], "bold");
        let kept = testbench_judge::QUOTE_LIMIT;
        assert!(
            tail[2].starts_with(&"x".repeat(kept)) && tail[2].ends_with(&format!("[... {} bytes cut]", 1000 - kept))
        );

        // One line longer than the window: its end, marked as cut at both ends.
        std::fs::write(&path, vec![b'y'; 100_000]).unwrap();
        let tail = console_tail(&path, 3);
        assert_eq!(tail.len(), 1);
        assert!(tail[0].starts_with("[…] yyy") && tail[0].contains(" bytes cut]"), "{}", &tail[0][..40]);
        assert!(console_tail(&dir.path().join("absent"), 3).is_empty());
    }

    #[test]
    fn the_console_tail_never_reads_the_whole_file() {
        // A sparse 64 GiB log (no disk, no memory): reading it whole could not end well,
        // reading its end is instant.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        let file = std::fs::File::create(&path).unwrap();
        let size = 64u64 << 30;
        file.set_len(size).unwrap();
        let end = b"\nsecond to last\nthe last line\r\n";
        std::os::unix::fs::FileExt::write_at(&file, end, size).unwrap();
        assert_eq!(console_tail(&path, 2), ["second to last", "the last line"]);
    }

    #[test]
    fn colour_follows_the_flag_the_terminal_and_no_color() {
        use std::ffi::OsStr;
        assert!(use_color(ColorChoice::Auto, true, None));
        assert!(use_color(ColorChoice::Auto, true, Some(OsStr::new(""))));
        assert!(!use_color(ColorChoice::Auto, true, Some(OsStr::new("1"))));
        assert!(!use_color(ColorChoice::Auto, false, None));
        assert!(use_color(ColorChoice::Always, false, Some(OsStr::new("1"))));
        assert!(!use_color(ColorChoice::Never, true, None));
        let human = human::Human::new(true);
        assert_eq!(human.verdict_word("PASS", 5), "\x1b[32mPASS\x1b[0m ");
        assert_eq!(human.verdict_word("FAIL", 5), "\x1b[31mFAIL\x1b[0m ");
        assert_eq!(human.verdict_word("SKIP", 5), "\x1b[33mSKIP\x1b[0m ");
        assert_eq!(human::Human::new(false).verdict_word("PASS", 5), "PASS ");
    }

    fn failed(reason: String) -> BootReport {
        BootReport {
            case: "flood".into(),
            kind: "boot",
            arch: Some("rv64".into()),
            smp: Some(1),
            seed: None,
            outcome: Outcome::Fail(reason),
            duration: Duration::from_secs(1),
            dir: PathBuf::from("target/testbench/run-1/flood"),
            replay: "cargo testbench --exact flood".into(),
            replay_note: None,
            sweep: false,
            console_tail: Vec::new(),
            notes: Vec::new(),
            failure: None,
        }
    }

    #[test]
    fn a_reason_is_kept_whole_when_short() {
        let reason = "forbidden line at 0.10s matched forbid[0] 'PANIC': PANIC\n(must_fail wanted ...)";
        assert_eq!(clip_reason(reason), reason);
    }

    #[test]
    fn a_long_line_and_many_lines_are_cut_with_markers() {
        let reason = format!("head\n{}\ntail", "x".repeat(1 << 20));
        let clipped = clip_reason(&reason);
        assert!(clipped.len() < REASON_LINE_LIMIT + 100, "{} bytes", clipped.len());
        assert!(
            clipped.starts_with("head\nxxx")
                && clipped.ends_with(&format!("[... {} bytes cut]\ntail", (1 << 20) - REASON_LINE_LIMIT))
        );
        let many = vec!["finding"; 1000].join("\n");
        let clipped = clip_reason(&many);
        assert_eq!(clipped.lines().count(), REASON_LINES + 1);
        assert!(clipped.ends_with("[... 900 more lines cut]"));
    }

    #[test]
    fn junit_quotes_a_megabyte_reason_in_a_few_kilobytes() {
        let mut reporter = Reporter::new(MessageFormat::Json, false);
        let reason = format!("forbidden line at 0.10s matched forbid[0] 'PANIC': PANIC {}", "y".repeat(1 << 20));
        reporter.boot_finished(failed(reason));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        reporter.write_junit(&path).unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        assert!(xml.len() < 4096, "JUnit of {} bytes", xml.len());
        assert!(xml.contains(" bytes cut]"), "{xml}");
        match &reporter.reports[0].outcome {
            Outcome::Fail(reason) => assert!(reason.len() < REASON_LINE_LIMIT + 64),
            other => panic!("{other:?}"),
        }
    }
}
