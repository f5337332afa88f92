//! What a run tells the person (or the CI log, or a program) that started it.
//!
//! Human form: a line per boot with its verdict and duration, failures with their reason,
//! the replay command and where the logs are, and a summary line. On a terminal a live
//! progress line shows what is running; elsewhere only plain lines, so CI logs read well.
//! JSON form (`--message-format json`): one object per event on stdout, nothing else.
//! JUnit (`--junit PATH`): written at the end, one test case per boot, or one error
//! entry when the run was refused.
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

use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::events::{BootFinished, Note, RunEvent};

use crate::cli::{ColorChoice, MessageFormat};
use crate::error::BenchError;

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
    fn replay_shown(&self) -> String {
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
    format: MessageFormat,
    color: bool,
    progress: Option<ProgressBar>,
    reports: Vec<BootReport>,
    /// Why the run was refused, when it was (for JUnit).
    refusals: Vec<String>,
    label_width: usize,
    seed_width: usize,
    pub summary: Summary,
}

/// The narrowest the label and seed columns are, so short runs still line up as before.
const MIN_LABEL_WIDTH: usize = 40;
const MIN_SEED_WIDTH: usize = 10;

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

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

impl Reporter {
    pub fn new(format: MessageFormat, color: bool) -> Reporter {
        Reporter {
            format,
            color,
            progress: None,
            reports: Vec::new(),
            refusals: Vec::new(),
            label_width: MIN_LABEL_WIDTH,
            seed_width: MIN_SEED_WIDTH,
            summary: Summary::default(),
        }
    }

    /// A verdict word, padded to `width`, coloured when colour is on.
    fn verdict_word(&self, word: &str, width: usize) -> String {
        let padded = format!("{word:<width$}");
        if !self.color {
            return padded;
        }
        let code = match word {
            "PASS" => "32",
            "FAIL" => "31",
            "SKIP" => "33",
            _ => return padded,
        };
        // Only the word is coloured; the padding stays outside so columns line up.
        format!("\x1b[{code}m{word}\x1b[0m{}", &padded[word.len()..])
    }

    /// Why the run was refused: every refusal, together. Human: `error:` lines on stderr;
    /// JSON: one `refused` event on stdout (and the same lines on stderr). Kept for JUnit.
    pub fn refused(&mut self, errors: &[String]) {
        for error in errors {
            eprintln!("error: {error}");
        }
        if self.format == MessageFormat::Json {
            self.emit(RunEvent::Refused { errors });
        }
        self.refusals.extend(errors.iter().cloned());
    }

    /// `--list`: a line per case, or a `case` event per case in JSON.
    pub fn list(&self, cases: &[testbench_case::Case]) {
        let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let machine = machine_cores();
        for case in cases {
            let arch: Vec<&str> = case.arch().iter().map(|a| a.name()).collect();
            match self.format {
                MessageFormat::Human => {
                    let arch = if arch.is_empty() { "host".to_string() } else { arch.join(",") };
                    let mark = if case.whole_run { "" } else { " [by name only]" };
                    self.line(&format!(
                        "{:<width$}  {:<10}  {:<10}  {}{mark}",
                        case.name,
                        case.kind.name(),
                        arch,
                        case.description
                    ));
                }
                MessageFormat::Json => {
                    let class = job_class(case, machine);
                    self.emit(RunEvent::Case {
                        name: &case.name,
                        kind: case.kind.name(),
                        arch,
                        description: &case.description,
                        whole_run: case.whole_run,
                        file: &case.file,
                        cores: class.cores,
                        quiet: class.quiet,
                        ports: class.ports,
                    })
                }
            }
        }
    }

    /// One event's line on stdout (`--message-format json`; events.rs is the schema).
    fn emit(&self, event: RunEvent) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", crate::events::line(&event));
        let _ = out.flush();
    }

    fn line(&self, text: &str) {
        let print = || {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        };
        // The progress line lives on stderr; results stay on stdout, printed while the
        // bar is lifted so the two never interleave on one terminal.
        match &self.progress {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// Something the person should read that is not a verdict (a build, a probe).
    pub fn note(&self, note: Note, text: &str) {
        match self.format {
            MessageFormat::Human => self.line(text),
            MessageFormat::Json => self.emit(note.event(text)),
        }
    }

    pub fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        let boots = rows.len();
        self.label_width = rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).max(MIN_LABEL_WIDTH);
        self.seed_width = rows.iter().map(|r| r.seed.len()).max().unwrap_or(0).max(MIN_SEED_WIDTH);
        match self.format {
            MessageFormat::Human => {
                let noun = if boots == 1 { "boot" } else { "boots" };
                self.line(&format!("testbench: {boots} {noun}; logs in {}", run_dir.display()));
                if std::io::stderr().is_terminal() && boots > 0 {
                    let bar = ProgressBar::new(boots as u64);
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {wide_msg}").unwrap(),
                    );
                    bar.enable_steady_tick(Duration::from_millis(200));
                    self.progress = Some(bar);
                }
            }
            MessageFormat::Json => self.emit(RunEvent::RunStarted { run_dir, boots }),
        }
    }

    pub fn boot_started(&self, label: &str, seed: Option<u64>) {
        match self.format {
            MessageFormat::Human => {
                if let Some(bar) = &self.progress {
                    bar.set_message(format!("booting {label}"));
                }
            }
            MessageFormat::Json => self.emit(RunEvent::BootStarted { boot: label, seed }),
        }
    }

    pub fn boot_finished(&mut self, report: BootReport) {
        // Every form below (and JUnit, from `self.reports`) quotes the clipped reason.
        let report = BootReport { outcome: clip_outcome(report.outcome), ..report };
        match &report.outcome {
            Outcome::Pass | Outcome::ExpectedFailure(_) => self.summary.passed += 1,
            Outcome::Fail(_) => self.summary.failed += 1,
            Outcome::Skip(_) => self.summary.skipped += 1,
            Outcome::Trouble(_) => self.summary.trouble += 1,
        }
        let seed = seed_text(report.seed, report.smp.is_some());
        match self.format {
            MessageFormat::Human => {
                if let Some(bar) = &self.progress {
                    bar.inc(1);
                }
                let (label_width, seed_width) = (self.label_width, self.seed_width);
                let head = format!("{:<label_width$} {seed:<seed_width$}", report.label());
                let text = match &report.outcome {
                    Outcome::Pass => format!("{head} {} {}", self.verdict_word("PASS", 5), secs(report.duration)),
                    Outcome::ExpectedFailure(reason) => format!(
                        "{head} {} {} (failed as it must: {reason})",
                        self.verdict_word("PASS", 5),
                        secs(report.duration)
                    ),
                    Outcome::Skip(reason) => format!("{head} {} {reason}", self.verdict_word("SKIP", 5)),
                    Outcome::Trouble(reason) => format!(
                        "{head} {} {}\n    logs:   {}",
                        self.verdict_word("TROUBLE", 5),
                        reason.replace('\n', "\n      "),
                        report.dir.display()
                    ),
                    Outcome::Fail(reason) => {
                        let mut text = format!(
                            "{head} {} {}\n    reason: {}",
                            self.verdict_word("FAIL", 5),
                            secs(report.duration),
                            reason.replace('\n', "\n      ")
                        );
                        for note in &report.notes {
                            text.push_str(&format!("\n    note: {note}"));
                        }
                        if !report.console_tail.is_empty() {
                            text.push_str("\n    last console lines:");
                            for line in &report.console_tail {
                                text.push_str(&format!("\n      | {line}"));
                            }
                        }
                        text.push_str(&format!(
                            "\n    replay: {}\n    logs:   {}",
                            report.replay_shown(),
                            report.dir.display()
                        ));
                        text
                    }
                };
                let text = match &report.outcome {
                    Outcome::Fail(_) => text,
                    _ => report.notes.iter().fold(text, |text, note| format!("{text}\n    note: {note}")),
                };
                self.line(&text);
            }
            MessageFormat::Json => {
                let (verdict, reason) = match &report.outcome {
                    Outcome::Pass => ("pass", None),
                    Outcome::ExpectedFailure(reason) => ("pass", Some(reason.as_str())),
                    Outcome::Fail(reason) => ("fail", Some(reason.as_str())),
                    Outcome::Skip(reason) => ("skip", Some(reason.as_str())),
                    Outcome::Trouble(reason) => ("trouble", Some(reason.as_str())),
                };
                self.emit(RunEvent::BootFinished(&BootFinished {
                    case: &report.case,
                    kind: report.kind,
                    arch: report.arch.as_deref(),
                    smp: report.smp,
                    seed: report.seed,
                    verdict,
                    reason,
                    failed_as_it_must: matches!(report.outcome, Outcome::ExpectedFailure(_)),
                    failure_kind: report.failure.map(crate::verdict::FailKind::name),
                    console_tail: &report.console_tail,
                    notes: &report.notes,
                    duration_secs: report.duration.as_secs_f64(),
                    dir: &report.dir,
                    replay: &report.replay,
                    replay_note: report.replay_note.as_deref(),
                }));
            }
        }
        self.reports.push(report);
    }

    /// The reports so far, in the order they were finished (a --slurm task's saved
    /// results, the HTML report).
    pub fn reports(&self) -> &[BootReport] {
        &self.reports
    }

    /// What the run waits for now (a --slurm array's tasks), on the progress line only.
    pub fn waiting(&self, text: &str) {
        if let Some(bar) = &self.progress {
            bar.set_message(text.to_string());
        }
    }

    /// Seeds of one sweep, in seed order, then the sweep's own summary line.
    pub fn sweep_summary(&self, case: &str, seeds: &[u64]) {
        let failed: Vec<String> = self
            .reports
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fail(_)))
            .map(|r| {
                format!("{}/{}", r.arch.as_deref().unwrap_or("host"), r.seed.map(|s| s.to_string()).unwrap_or_default())
            })
            .collect();
        let text = format!(
            "sweep {case}: {} seeds, {} boots, {} failed{}",
            seeds.len(),
            self.reports.len(),
            failed.len(),
            if failed.is_empty() { String::new() } else { format!(" ({})", failed.join(", ")) }
        );
        match self.format {
            MessageFormat::Human => self.line(&text),
            MessageFormat::Json => self.emit(RunEvent::SweepFinished { case, seeds, failed: &failed }),
        }
    }

    /// The run's end: each failure again, then the summary, naming the run directory
    /// and the HTML report when one was written.
    pub fn run_finished(&mut self, took: Duration, run_dir: &Path, html: Option<&Path>) {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let s = self.summary;
        if self.format == MessageFormat::Human {
            // A long run's failures scroll away, and CI logs keep only the tail: the end
            // names each failure again, with the line that replays it.
            for report in &self.reports {
                if let Outcome::Fail(reason) = &report.outcome {
                    let first = reason.lines().next().unwrap_or_default();
                    let seed = seed_text(report.seed, report.smp.is_some());
                    self.line(&format!(
                        "failed: {} {seed}: {first}\n    replay: {}",
                        report.label(),
                        report.replay_shown()
                    ));
                }
            }
        }
        match self.format {
            MessageFormat::Human => self.line(&format!(
                "testbench: {} passed, {} failed, {} skipped{} in {} (logs: {}{})",
                s.passed,
                s.failed,
                s.skipped,
                if s.trouble > 0 { format!(", {} bench trouble", s.trouble) } else { String::new() },
                secs(took),
                run_dir.display(),
                html.map(|path| format!("; report: {}", path.display())).unwrap_or_default()
            )),
            MessageFormat::Json => self.emit(RunEvent::RunFinished {
                passed: s.passed,
                failed: s.failed,
                skipped: s.skipped,
                trouble: s.trouble,
                duration_secs: took.as_secs_f64(),
                run_dir,
                report: html,
            }),
        }
    }

    pub fn write_junit(&self, path: &Path) -> Result<(), BenchError> {
        use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
        let mut report = Report::new("testbench");
        let mut suite = TestSuite::new("boot");
        if !self.refusals.is_empty() {
            // A refused run ran nothing; CI still gets a report, and it says why.
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(format!("the run was refused ({} refusals)", self.refusals.len()));
            status.set_type("refused");
            status.set_description(self.refusals.join("\n"));
            let mut case = TestCase::new("testbench run refused", status);
            case.set_classname("testbench");
            suite.add_test_case(case);
        }
        for boot in &self.reports {
            let status = match &boot.outcome {
                Outcome::Pass | Outcome::ExpectedFailure(_) => TestCaseStatus::success(),
                Outcome::Fail(reason) => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(reason.clone());
                    let mut description = String::new();
                    if !boot.console_tail.is_empty() {
                        description.push_str("last console lines:\n");
                        for line in &boot.console_tail {
                            description.push_str(&format!("  | {line}\n"));
                        }
                    }
                    description.push_str(&format!("replay: {}\nlogs: {}", boot.replay_shown(), boot.dir.display()));
                    status.set_description(description);
                    status
                }
                Outcome::Skip(reason) => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(reason.clone());
                    status
                }
                Outcome::Trouble(reason) => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
                    status.set_message(reason.clone());
                    status.set_type("trouble");
                    status.set_description(format!("the bench could not run it\nlogs: {}", boot.dir.display()));
                    status
                }
            };
            // A test keeps its name whatever seed it ran with, so CI histories line up;
            // the seed is a property. A sweep's seeds are distinct tests of one case.
            let name = match (boot.seed, boot.sweep) {
                (Some(seed), true) => format!("{} seed{seed}", boot.label()),
                _ => boot.label(),
            };
            let mut case = TestCase::new(name, status);
            case.set_classname(boot.case.clone());
            case.set_time(boot.duration);
            if let Some(seed) = boot.seed {
                case.add_property(Property::new("seed", seed.to_string()));
            }
            if matches!(boot.outcome, Outcome::ExpectedFailure(_)) {
                case.add_property(Property::new("failed_as_it_must", "true"));
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
        let xml = report.to_string()?;
        std::fs::write(path, xml).map_err(|e| BenchError::at("write", path, e))
    }
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
        let reporter = Reporter::new(MessageFormat::Human, true);
        assert_eq!(reporter.verdict_word("PASS", 5), "\x1b[32mPASS\x1b[0m ");
        assert_eq!(reporter.verdict_word("FAIL", 5), "\x1b[31mFAIL\x1b[0m ");
        assert_eq!(reporter.verdict_word("SKIP", 5), "\x1b[33mSKIP\x1b[0m ");
        assert_eq!(Reporter::new(MessageFormat::Human, false).verdict_word("PASS", 5), "PASS ");
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
