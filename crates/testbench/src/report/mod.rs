//! What a run tells the person (or the CI log, or a program) that started it: the
//! [`Reporter`] keeps the reports and the summary and hands each event to its [`Sink`]s:
//! the form `--message-format` chose, and the files the run writes.
//!
//! - `human.rs`: a line per boot with its verdict and duration, failures with their
//!   reason, the replay command and where the logs are, and a summary line. On a terminal
//!   a live progress line shows what is running; elsewhere only plain lines.
//! - `json.rs` (`--message-format json`): one object per event on stdout, nothing else
//!   (`events.rs` is the schema).
//! - `junit.rs` (`--junit PATH`): written at the end, one test case per boot, or one
//!   error entry when the run was refused.
//! - `html.rs`: `report.html` in the run directory (`report_html/`), at the end or when
//!   the run stops on the way.
//! - a `--slurm-task`'s save (`runner/slurm.rs`): its reports so far after each boot, and
//!   its slice said whole at the end.
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

mod html;
mod human;
mod json;
mod junit;

pub use html::Html;
pub use junit::Junit;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{ColorChoice, MessageFormat};
use crate::error::BenchError;
use crate::events::Note;
use crate::verdict::Verdict;

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
    pub verdict: Verdict,
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
    /// What the evidence says of a failure's cause (or of a pass whose first boot failed).
    #[serde(default)]
    pub class: Option<crate::verdict::Class>,
    /// The case's quarantine at this width (`quarantine.toml`), when it is in one: its
    /// result is reported apart, and its failure does not fail the run.
    #[serde(default)]
    pub quarantined: Option<crate::quarantine::Quarantined>,
}

fn boot_kind() -> &'static str {
    "boot"
}

impl BootReport {
    pub fn label(&self) -> String {
        label_of(&self.case, self.arch.as_deref(), self.smp)
    }

    /// A boot's replay command under the debugger (`--gdb`, docs/debugging.md): the
    /// replay line names one boot, so its `--gdb` form is the line and the flag. None
    /// for a case that boots nothing.
    pub(crate) fn gdb_line(&self) -> Option<String> {
        (self.kind == "boot").then(|| format!("{} --gdb", self.replay))
    }

    /// The replay command with its note, as a person reads it.
    pub(crate) fn replay_shown(&self) -> String {
        match &self.replay_note {
            Some(note) => format!("{}  # {note}", self.replay),
            None => self.replay.clone(),
        }
    }
}

/// A failing boot whose crash has a symbolized trace (one frame inlined into the next),
/// for the sinks' tests.
#[cfg(test)]
pub(super) fn a_crashed_boot() -> BootReport {
    let frame = |function: &str, line, inlined| crate::verdict::SymFrame {
        frame: 0,
        address: Some(0xffff_ffff_8149_a2b6),
        function: Some(function.into()),
        file: Some("drivers/tty/sysrq.c".into()),
        line: Some(line),
        inlined,
    };
    let crash = crate::verdict::Crash {
        kind: "page-fault".into(),
        title: "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash".into(),
        frame: Some("sysrq_handle_crash".into()),
        line: 3,
        lines: 9,
        corrupted: None,
        trace: vec![frame("crash_write", 154, true), frame("sysrq_handle_crash", 160, false)],
        trace_error: Some("vmlinux: a second reason, for the test".into()),
    };
    let mut failed = crate::verdict::Failed::new(crate::verdict::FailKind::TimedOut, "timed out after 5s");
    failed.crash = Some(Box::new(crash));
    BootReport {
        case: "crashes".into(),
        kind: "boot",
        arch: Some("rv64".into()),
        smp: Some(1),
        seed: None,
        verdict: Verdict::Fail(failed),
        duration: Duration::from_secs(5),
        dir: PathBuf::from("/ws/target/testbench/run-1-2/crashes/rv64-smp1"),
        replay: "cargo testbench --exact crashes".into(),
        replay_note: None,
        sweep: false,
        console_tail: Vec::new(),
        notes: Vec::new(),
        class: None,
        quarantined: None,
    }
}

/// What a scheduler (q, through scripts/jobs) leases for one run of a case by name.
pub struct JobClass {
    /// A core per guest hart (the most any of its boots takes); two for host tests,
    /// whose harness runs tests on threads; one for the rest. Never more than the machine
    /// has (a lease q could never grant is refused).
    pub cores: u32,
    /// Why it runs on q's quiet set, when it does: what it measures on the host's clock
    /// ([`host_clock_measure`]).
    pub quiet: Option<&'static str>,
    /// Host ports one boot forwards (its lease's size).
    pub ports: usize,
}

/// What a case measures on the host's clock, the one rule of the quiet class: a verdict
/// that other work on the machine can change. An idle window (its trap counts and host
/// CPU are read over host seconds, whatever the guest's clock); and, for a boot not in
/// guest time (no icount), a post-check bound in host time (an oracle argument in `_us`,
/// `_ms` or `_ns`), a session's `within`; and for any case on the host's clock, a
/// self-check whose evidence is a deadline (its `must_fail` kind `timed-out` or
/// `no-power-off`, or its pattern speaking of one).
pub fn host_clock_measure(case: &testbench_case::Case) -> Option<&'static str> {
    use testbench_case::{Kind, Step};
    let deadline_is_evidence = testbench_gates::deadlines::deadline_is_evidence(case);
    let Kind::Boot(boot) = &case.kind else {
        return deadline_is_evidence.then_some("a self-check whose evidence is a deadline");
    };
    if boot.idle.is_some() {
        return Some("an idle window: trap counts and host CPU over host seconds");
    }
    if boot.icount.is_some() {
        return None;
    }
    if boot.host_clock.as_ref().is_some_and(|host| host.reason == "host-time") {
        return Some("a measurement of the host's time (clock_reason = \"host-time\")");
    }
    let time_bound = |arg: &String| {
        arg.split_once('=').is_some_and(|(name, _)| ["_us", "_ms", "_ns"].iter().any(|unit| name.ends_with(unit)))
    };
    if boot.post_check.as_ref().is_some_and(|check| check.oracle.is_some() && check.args.iter().any(time_bound)) {
        return Some("a post-check bound in host time");
    }
    if boot.sessions.iter().any(|s| s.steps.iter().any(|step| matches!(step, Step::Within(_)))) {
        return Some("a session's within on the host's clock");
    }
    deadline_is_evidence.then_some("a self-check whose evidence is a deadline")
}

/// A boot case's clock, for `--list`: "guest" under icount (its time is the guest's
/// instructions), "host" otherwise; None for a case that boots nothing.
pub fn clock(case: &testbench_case::Case) -> Option<&'static str> {
    match &case.kind {
        testbench_case::Kind::Boot(boot) => Some(if boot.icount.is_some() { "guest" } else { "host" }),
        _ => None,
    }
}

/// Why a boot case runs on the host's clock: its `clock_reason`; None in guest time and
/// for a case that boots nothing.
pub fn clock_reason(case: &testbench_case::Case) -> Option<&str> {
    match &case.kind {
        testbench_case::Kind::Boot(boot) => boot.host_clock.as_ref().map(|host| host.reason.as_str()),
        _ => None,
    }
}

/// A case's class on a machine of `machine_cores` cores ([`machine_cores`]).
pub fn job_class(case: &testbench_case::Case, machine_cores: u32) -> JobClass {
    use testbench_case::Kind;
    let quiet = host_clock_measure(case);
    let (cores, ports) = match &case.kind {
        Kind::Boot(boot) => (
            boot.smp.iter().flat_map(|(_, counts)| counts.iter().copied()).max().unwrap_or(1),
            crate::boot::parts::host_ports(boot),
        ),
        Kind::HostTests(_) => (2, 0),
        Kind::SshLoopback(_) | Kind::Build(_) | Kind::Scripts(_) | Kind::Gate(_) => (1, 0),
    };
    JobClass { cores: cores.clamp(1, machine_cores.max(1)), quiet, ports }
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
    /// The form `--message-format` chose: where the events go as they happen.
    form: Box<dyn Sink>,
    /// The files the run writes (JUnit, `report.html`, a `--slurm-task`'s save): each is
    /// told an event before the form, so the form's last line can name them.
    files: Vec<Box<dyn Sink>>,
    reports: Vec<BootReport>,
    /// The cases directory's quarantine, marked on each report of a case in it.
    quarantine: Option<crate::quarantine::Quarantine>,
    /// `--coverage`'s summary, once the boots are read (for `report.html`).
    coverage: Option<crate::coverage::Summary>,
}

impl Summary {
    /// The counts of `reports`.
    pub fn of(reports: &[BootReport]) -> Summary {
        let mut summary = Summary::default();
        for report in reports.iter().filter(|r| r.quarantined.is_none()) {
            match &report.verdict {
                Verdict::Pass | Verdict::ExpectedFailure(_) => summary.passed += 1,
                Verdict::Fail(_) | Verdict::Unfailed(_) => summary.failed += 1,
                Verdict::Skip(_) => summary.skipped += 1,
                Verdict::Trouble(_) => summary.trouble += 1,
            }
        }
        summary
    }
}

/// The quarantined results (`quarantine.toml`), reported apart: how many passed and
/// how many failed.
pub fn quarantined(reports: &[BootReport]) -> (usize, usize) {
    let quarantined = reports.iter().filter(|r| r.quarantined.is_some());
    let (failed, rest): (Vec<&BootReport>, Vec<&BootReport>) = quarantined.partition(|r| r.verdict.is_failure());
    let passed = rest.iter().filter(|r| matches!(r.verdict, Verdict::Pass | Verdict::ExpectedFailure(_))).count();
    (passed, failed.len())
}

/// The failures (not the self-checks that failed as they must) grouped by their crash's
/// title, the most boots first (then the first to finish). A failure whose console shows
/// no crash is in no group.
pub fn crash_groups(reports: &[BootReport]) -> Vec<CrashGroup> {
    let mut groups: Vec<CrashGroup> = Vec::new();
    for report in reports {
        let Verdict::Fail(failed) = &report.verdict else { continue };
        let Some(crash) = failed.crash.as_deref() else { continue };
        let index = match groups.iter().position(|g| g.title == crash.title) {
            Some(index) => index,
            None => {
                groups.push(CrashGroup {
                    title: crash.title.clone(),
                    kind: crash.kind.clone(),
                    boots: Vec::new(),
                    seeds: Vec::new(),
                    first_replay: report.replay_shown(),
                });
                groups.len() - 1
            }
        };
        groups[index].boots.push(report.label());
        groups[index].seeds.extend(report.seed);
    }
    // A stable sort: among equal counts, the first to finish stays first.
    groups.sort_by_key(|g| std::cmp::Reverse(g.boots.len()));
    groups
}

/// The heading of a run's crash groups: `2 distinct crashes:`.
pub fn crash_groups_heading(groups: &[CrashGroup]) -> String {
    format!("{} distinct crash{}:", groups.len(), if groups.len() == 1 { "" } else { "es" })
}

pub use crate::verdict::CrashGroup;

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

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

impl Reporter {
    pub fn new(format: MessageFormat, color: bool) -> Reporter {
        let form: Box<dyn Sink> = match format {
            MessageFormat::Human => Box::new(human::Human::new(color)),
            MessageFormat::Json => Box::new(json::Json),
        };
        Reporter { form, files: Vec::new(), reports: Vec::new(), quarantine: None, coverage: None }
    }

    /// The cases directory's quarantine: each report of a case in it is marked so.
    /// `--coverage`'s summary: said as a note now, and on `report.html` at the run's end.
    pub fn coverage(&mut self, summary: crate::coverage::Summary) {
        self.note(Note::Coverage, &summary.line());
        self.coverage = Some(summary);
    }

    pub fn set_quarantine(&mut self, quarantine: Option<crate::quarantine::Quarantine>) {
        self.quarantine = quarantine;
    }

    /// One more file the run writes, told every event from now on.
    pub fn add(&mut self, sink: Box<dyn Sink>) {
        self.files.push(sink);
    }

    /// Why the run was refused (or stopped on the way): every refusal, together, as
    /// `error:` lines on stderr whatever the form (and in the form's own way). A file
    /// that cannot say it is said on stderr too.
    pub fn refused(&mut self, errors: &[String]) {
        for error in errors {
            eprintln!("error: {error}");
        }
        for file in &mut self.files {
            if let Err(error) = file.refused(errors, &self.reports) {
                eprintln!("error: {error}");
            }
        }
        self.form.refused(errors, &self.reports).expect("the form's sink writes no file");
    }

    /// `--list`: every case, each with the lease a scheduler gives one run of it.
    pub fn list(&self, cases: &[testbench_case::Case]) {
        self.form.list(cases, machine_cores());
    }

    /// Something the person should read that is not a verdict (a build, a probe).
    pub fn note(&self, note: Note, text: &str) {
        self.form.note(note, text);
    }

    /// No live progress line on the terminal (`--gdb`).
    pub fn no_progress(&mut self) {
        self.form.no_progress();
    }

    pub fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        self.form.run_started(run_dir, rows);
    }

    pub fn boot_started(&self, label: &str, seed: Option<u64>) {
        self.form.boot_started(label, seed);
    }

    /// A boot's or host run's report: counted, kept, and told to every sink. A file that
    /// cannot keep it (a `--slurm-task`'s save) says so as a note, and the run goes on.
    pub fn boot_finished(&mut self, report: BootReport) {
        // Every sink (and JUnit, from the reports) quotes the clipped reason.
        let quarantined = self.quarantine.as_ref().and_then(|q| q.of(&report.case, report.arch.as_deref()));
        let quarantined = quarantined.or(report.quarantined);
        let report = BootReport { verdict: report.verdict.map_reason(clip_reason), quarantined, ..report };
        self.reports.push(report);
        let report = self.reports.last().expect("just pushed");
        let mut troubles = Vec::new();
        for file in &mut self.files {
            if let Err(error) = file.boot_finished(report, &self.reports) {
                troubles.push(error);
            }
        }
        self.form.boot_finished(report, &self.reports).expect("the form's sink writes no file");
        for (note, error) in troubles {
            self.note(note, &format!("error: {error}"));
        }
    }

    /// The counts of the reports so far.
    pub fn summary(&self) -> Summary {
        Summary::of(&self.reports)
    }

    /// The reports so far, in the order they were finished.
    pub fn reports(&self) -> &[BootReport] {
        &self.reports
    }

    /// What the run waits for now (a --slurm array's tasks), on the progress line only.
    pub fn waiting(&self, text: &str) {
        self.form.waiting(text);
    }

    /// Seeds of one sweep, in seed order: the sweep's own summary.
    pub fn sweep_summary(&self, case: &str, seeds: &[u64]) {
        let failed: Vec<String> = self
            .reports
            .iter()
            .filter(|r| r.verdict.is_failure())
            .map(|r| {
                format!("{}/{}", r.arch.as_deref().unwrap_or("host"), r.seed.map(|s| s.to_string()).unwrap_or_default())
            })
            .collect();
        self.form.sweep_finished(case, seeds, self.reports.len(), &failed);
    }

    /// The run's end: each file written (the HTML report's path for the form's last
    /// line), then the form's summary. The first file that could not be written is the
    /// run's error (a `report.html` that cannot be written is said and fails nothing).
    pub fn run_finished(&mut self, took: Duration, run_dir: &Path) -> Result<(), BenchError> {
        let crashes = crash_groups(&self.reports);
        let mut end = RunEnd {
            took,
            run_dir,
            html: None,
            summary: self.summary(),
            crashes,
            reports: &self.reports,
            coverage: self.coverage.as_ref(),
        };
        let mut first_error = None;
        for file in &mut self.files {
            if let Err(error) = file.run_finished(&mut end) {
                first_error.get_or_insert(error);
            }
        }
        self.form.run_finished(&mut end).expect("the form's sink writes no file");
        first_error.map_or(Ok(()), Err)
    }
}

/// What a sink is told at the run's end.
pub struct RunEnd<'a> {
    pub took: Duration,
    /// The run's failures grouped by their crash ([`crash_groups`]).
    pub crashes: Vec<CrashGroup>,
    pub run_dir: &'a Path,
    /// `report.html`, once its sink wrote it.
    pub html: Option<PathBuf>,
    pub summary: Summary,
    /// Every report, in the order they were finished.
    pub reports: &'a [BootReport],
    /// `--coverage`'s summary.
    pub coverage: Option<&'a crate::coverage::Summary>,
}

/// Where a run's events go: the terminal's lines ([`human::Human`]), JSON lines
/// ([`json::Json`]), JUnit ([`Junit`]), `report.html` ([`Html`]), a `--slurm-task`'s save
/// (`runner/slurm.rs`). Each takes the events it needs; the rest do nothing. `all` is
/// every report so far, the one just finished last.
pub trait Sink {
    fn refused(&mut self, errors: &[String], all: &[BootReport]) -> Result<(), BenchError> {
        let _ = (errors, all);
        Ok(())
    }
    fn list(&self, cases: &[testbench_case::Case], machine_cores: u32) {
        let _ = (cases, machine_cores);
    }
    fn note(&self, note: Note, text: &str) {
        let _ = (note, text);
    }
    /// No live progress line: `--gdb`'s words for the person at the debugger go to
    /// stderr, which a redrawn line would overwrite.
    fn no_progress(&mut self) {}
    fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        let _ = (run_dir, rows);
    }
    fn boot_started(&self, label: &str, seed: Option<u64>) {
        let _ = (label, seed);
    }
    /// A file that cannot keep the report says it as this kind of note (the run goes on).
    fn boot_finished(&mut self, report: &BootReport, all: &[BootReport]) -> Result<(), (Note, BenchError)> {
        let _ = (report, all);
        Ok(())
    }
    fn waiting(&self, text: &str) {
        let _ = text;
    }
    fn sweep_finished(&self, case: &str, seeds: &[u64], boots: usize, failed: &[String]) {
        let _ = (case, seeds, boots, failed);
    }
    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        let _ = end;
        Ok(())
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
        assert_eq!((plain.cores, plain.quiet, plain.ports), (4, None, 0));
        let host = "clock = \"host\"\nclock_reason = \"typed-input\"\n";
        let deadline = format!("{boot}must_fail = '^timed out after'\n");
        assert!(
            class(&format!("{deadline}{host}")).quiet.is_some(),
            "a host-clock self-check whose evidence is its deadline"
        );
        let by_kind = format!("{boot}must_fail = {{ kind = \"timed-out\" }}\n{host}");
        assert!(class(&by_kind).quiet.is_some(), "a deadline named by the failure's kind");
        assert!(class(&deadline).quiet.is_none(), "in guest time (the default) it measures guest time");
        assert!(
            class(&format!("{boot}clock = \"host\"\nclock_reason = \"host-time\"\n")).quiet.is_some(),
            "a case that says it measures the host's time"
        );
        let host = class("description = \"d\"\nkind = \"host-tests\"\nworkspace = \"tests/fixtures/hostfix\"\n");
        assert_eq!((host.cores, host.quiet), (2, None));
        // On a machine of fewer cores, never more than it has.
        let small = |text: &str, cores| job_class(&testbench_case::parse("tests/c.toml", text).unwrap(), cores).cores;
        assert_eq!(small(&format!("{boot}smp = {{ rv64 = [1, 4], rv32 = [2] }}\n"), 3), 3);
        assert_eq!(small("description = \"d\"\nkind = \"host-tests\"\nworkspace = \"tests/fixtures/hostfix\"\n", 1), 1);
    }

    /// The cases that measure the host's clock are each in the quiet class, for what they
    /// measure: idle windows (on Linux and the reference guest, under icount or not); the
    /// scheduler oracle's case runs in guest time, where its p99 bound is in the guest's
    /// microseconds, and the same case on the host's clock would be quiet.
    #[test]
    fn every_case_that_measures_the_hosts_clock_is_quiet() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let case = |name: &str| {
            let file = format!("tests/{name}.toml");
            testbench_case::parse(&file, &std::fs::read_to_string(root.join(&file)).unwrap()).unwrap()
        };
        for (name, why) in [
            ("linux-idle", "an idle window: trap counts and host CPU over host seconds"),
            ("bench-idle", "an idle window: trap counts and host CPU over host seconds"),
        ] {
            assert_eq!(job_class(&case(name), 64).quiet, Some(why), "{name}");
        }
        let mut sched = case("reference-sched-oracle");
        assert_eq!(job_class(&sched, 64).quiet, None, "under icount its microseconds are the guest's");
        if let testbench_case::Kind::Boot(boot) = &mut sched.kind {
            boot.icount = None;
        }
        assert_eq!(job_class(&sched, 64).quiet, Some("a post-check bound in host time"), "on the host's clock");
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
            verdict: Verdict::Fail(crate::verdict::Failed::new(crate::verdict::FailKind::Forbidden, reason)),
            duration: Duration::from_secs(1),
            dir: PathBuf::from("target/testbench/run-1/flood"),
            replay: "cargo testbench --exact flood".into(),
            replay_note: None,
            sweep: false,
            console_tail: Vec::new(),
            notes: Vec::new(),
            class: None,
            quarantined: None,
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        reporter.add(Box::new(Junit::new(path.clone())));
        let reason = format!("forbidden line at 0.10s matched forbid[0] 'PANIC': PANIC {}", "y".repeat(1 << 20));
        reporter.boot_finished(failed(reason));
        reporter.run_finished(Duration::from_secs(1), dir.path()).unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        assert!(xml.len() < 4096, "JUnit of {} bytes", xml.len());
        assert!(xml.contains(" bytes cut]"), "{xml}");
        match &reporter.reports[0].verdict {
            Verdict::Fail(failed) => assert!(failed.reason.len() < REASON_LINE_LIMIT + 64),
            other => panic!("{other:?}"),
        }
    }
}
