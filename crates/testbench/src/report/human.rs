//! The human sink: a line per boot with its verdict and duration, failures with their
//! reason, notes, last console lines, the replay command and where the logs are; each
//! failure again at the end, then the summary. On a terminal a live progress line (on
//! stderr) shows what is running; elsewhere only plain lines, so CI logs read well.
//!
//! Verdicts are coloured (PASS green, FAIL red, SKIP yellow) only when `--color` says so.
//! The result columns are as wide as the run's longest label, so a long case name never
//! breaks them.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::{crash_groups_heading, secs, seed_text, BootReport, Row, RunEnd, Sink};
use crate::error::BenchError;
use crate::events::Note;
use crate::verdict::{Failed, Verdict};

/// The narrowest the label and seed columns are, so short runs still line up as before.
const MIN_LABEL_WIDTH: usize = 40;
const MIN_SEED_WIDTH: usize = 10;

pub struct Human {
    color: bool,
    /// Whether a terminal gets the live progress line (not under `--gdb`).
    show_progress: bool,
    progress: Option<ProgressBar>,
    label_width: usize,
    seed_width: usize,
}

impl Human {
    pub fn new(color: bool) -> Human {
        Human { color, show_progress: true, progress: None, label_width: MIN_LABEL_WIDTH, seed_width: MIN_SEED_WIDTH }
    }

    /// A verdict word, padded to `width`, coloured when colour is on.
    pub(super) fn verdict_word(&self, word: &str, width: usize) -> String {
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

    /// A failure's lines: the reason, the notes, the console's last lines, the replay
    /// line and the logs.
    fn failure(&self, head: &str, report: &BootReport, reason: &str) -> String {
        let mut text = format!(
            "{head} {} {}{}\n    reason: {}",
            self.verdict_word("FAIL", 5),
            secs(report.duration),
            class_shown(report),
            reason.replace('\n', "\n      ")
        );
        if let Some(crash) = report.verdict.failed().and_then(|f| f.crash.as_ref()) {
            text.push_str(&format!("\n    crash:  {}", crash.shown()));
            for frame in &crash.trace {
                text.push_str(&format!("\n            {}", frame.shown()));
            }
            if let Some(why) = &crash.trace_error {
                text.push_str(&format!("\n    trace:  not symbolized: {why}"));
            }
        }
        for note in &report.notes {
            text.push_str(&format!("\n    note: {note}"));
        }
        if !report.console_tail.is_empty() {
            text.push_str("\n    last console lines:");
            for line in &report.console_tail {
                text.push_str(&format!("\n      | {line}"));
            }
        }
        text.push_str(&format!("\n    replay: {}", report.replay_shown()));
        if let Some(line) = report.gdb_line() {
            text.push_str(&format!("\n    debug:  {line}"));
        }
        text.push_str(&format!("\n    logs:   {}", report.dir.display()));
        text
    }
}

/// A result's class and quarantine on its verdict line: ` [deterministic]`,
/// ` [quarantined until 2026-12-31]`, or nothing.
fn class_shown(report: &BootReport) -> String {
    let mut text = report.class.map(|class| format!(" [{}]", class.name())).unwrap_or_default();
    if let Some(quarantined) = &report.quarantined {
        text.push_str(&format!(" [quarantined until {}]", quarantined.until));
    }
    text
}

impl Sink for Human {
    /// The `error:` lines on stderr say it all (the reporter prints them).
    fn refused(&mut self, _errors: &[String], _all: &[BootReport]) -> Result<(), BenchError> {
        Ok(())
    }

    fn list(&self, cases: &[testbench_case::Case], _machine_cores: u32) {
        let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for case in cases {
            let arch: Vec<&str> = case.arch().iter().map(|a| a.name()).collect();
            let arch = if arch.is_empty() { "host".to_string() } else { arch.join(",") };
            let mark = if case.whole_run { "" } else { " [by name only]" };
            self.line(&format!(
                "{:<width$}  {:<10}  {:<10}  {:<5}  {}{mark}",
                case.name,
                case.kind.name(),
                arch,
                super::clock(case).unwrap_or("-"),
                case.description
            ));
        }
        let clocks: Vec<&str> = cases.iter().filter_map(super::clock).collect();
        if !clocks.is_empty() {
            let guest = clocks.iter().filter(|c| **c == "guest").count();
            let noun = if clocks.len() == 1 { "boot case" } else { "boot cases" };
            let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
            for reason in cases.iter().filter_map(super::clock_reason) {
                *reasons.entry(reason).or_default() += 1;
            }
            let why: Vec<String> = reasons.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
            let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
            self.line(&format!(
                "{} {noun}: {guest} in guest time (icount), {} on the host's clock{why}",
                clocks.len(),
                clocks.len() - guest
            ));
        }
    }

    fn note(&self, _note: Note, text: &str) {
        self.line(text);
    }

    fn no_progress(&mut self) {
        self.show_progress = false;
    }

    fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        let boots = rows.len();
        self.label_width = rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).max(MIN_LABEL_WIDTH);
        self.seed_width = rows.iter().map(|r| r.seed.len()).max().unwrap_or(0).max(MIN_SEED_WIDTH);
        let noun = if boots == 1 { "boot" } else { "boots" };
        self.line(&format!("testbench: {boots} {noun}; logs in {}", run_dir.display()));
        if self.show_progress && std::io::stderr().is_terminal() && boots > 0 {
            let bar = ProgressBar::new(boots as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {wide_msg}").unwrap(),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            self.progress = Some(bar);
        }
    }

    fn boot_started(&self, label: &str, _seed: Option<u64>) {
        if let Some(bar) = &self.progress {
            bar.set_message(format!("booting {label}"));
        }
    }

    fn boot_finished(&mut self, report: &BootReport, _all: &[BootReport]) -> Result<(), (Note, BenchError)> {
        if let Some(bar) = &self.progress {
            bar.inc(1);
        }
        let seed = seed_text(report.seed, report.smp.is_some());
        let (label_width, seed_width) = (self.label_width, self.seed_width);
        let head = format!("{:<label_width$} {seed:<seed_width$}", report.label());
        let text = match &report.verdict {
            Verdict::Pass => {
                format!("{head} {} {}{}", self.verdict_word("PASS", 5), secs(report.duration), class_shown(report))
            }
            Verdict::ExpectedFailure(Failed { reason, .. }) => format!(
                "{head} {} {}{} (failed as it must: {reason})",
                self.verdict_word("PASS", 5),
                secs(report.duration),
                class_shown(report)
            ),
            Verdict::Skip(reason) => format!("{head} {} {reason}", self.verdict_word("SKIP", 5)),
            Verdict::Trouble(reason) => format!(
                "{head} {} {}\n    logs:   {}",
                self.verdict_word("TROUBLE", 5),
                reason.replace('\n', "\n      "),
                report.dir.display()
            ),
            // A failure says its notes among its own lines.
            failure @ (Verdict::Fail(_) | Verdict::Unfailed(_)) => {
                let reason = failure.reason().unwrap_or_default();
                self.line(&self.failure(&head, report, &reason));
                return Ok(());
            }
        };
        self.line(&report.notes.iter().fold(text, |text, note| format!("{text}\n    note: {note}")));
        Ok(())
    }

    fn waiting(&self, text: &str) {
        if let Some(bar) = &self.progress {
            bar.set_message(text.to_string());
        }
    }

    fn sweep_finished(&self, case: &str, seeds: &[u64], boots: usize, failed: &[String]) {
        self.line(&format!(
            "sweep {case}: {} seeds, {boots} boots, {} failed{}",
            seeds.len(),
            failed.len(),
            if failed.is_empty() { String::new() } else { format!(" ({})", failed.join(", ")) }
        ));
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        // A long run's failures scroll away, and CI logs keep only the tail: the end
        // names each failure again, with the line that replays it.
        for report in end.reports {
            if let Some(reason) = report.verdict.reason().filter(|_| report.verdict.is_failure()) {
                let first = reason.lines().next().unwrap_or_default();
                let seed = seed_text(report.seed, report.smp.is_some());
                self.line(&format!(
                    "failed: {} {seed}: {first}\n    replay: {}",
                    report.label(),
                    report.replay_shown()
                ));
            }
        }
        if !end.crashes.is_empty() {
            self.line(&crash_groups_heading(&end.crashes));
            for group in &end.crashes {
                self.line(&format!("    {}", group.shown()));
            }
        }
        let (q_passed, q_failed) = super::quarantined(end.reports);
        if q_passed + q_failed > 0 {
            self.line(&format!("quarantined: {q_failed} failed, {q_passed} passed (their failures fail no run)"));
        }
        let s = end.summary;
        self.line(&format!(
            "testbench: {} passed, {} failed, {} skipped{} in {} (logs: {}{})",
            s.passed,
            s.failed,
            s.skipped,
            if s.trouble > 0 { format!(", {} bench trouble", s.trouble) } else { String::new() },
            secs(end.took),
            end.run_dir.display(),
            end.html.as_ref().map(|path| format!("; report: {}", path.display())).unwrap_or_default()
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The symbolized trace is under the crash's line, a frame a line, and why it could
    /// not be symbolized, when it could not.
    #[test]
    fn a_crashs_trace_is_shown_under_its_line() {
        let text =
            Human::new(false).failure("crashes rv64 smp1", &super::super::a_crashed_boot(), "timed out after 5s");
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("    crash:  BUG: unable to handle")).expect(&text);
        assert_eq!(
            lines[at + 1..at + 4],
            [
                "            #0 0xffffffff8149a2b6 crash_write at drivers/tty/sysrq.c:154 (inlined)",
                "            #0 0xffffffff8149a2b6 sysrq_handle_crash at drivers/tty/sysrq.c:160",
                "    trace:  not symbolized: vmlinux: a second reason, for the test",
            ],
            "{text}"
        );
    }

    /// A failing boot's lines carry its replay line with `--gdb` under the replay line
    /// (docs/debugging.md); a failing case that boots nothing has no such line.
    #[test]
    fn a_failing_boot_names_its_gdb_line_and_a_host_case_does_not() {
        let boot = super::super::a_crashed_boot();
        let text = Human::new(false).failure("crashes rv64 smp1", &boot, "timed out after 5s");
        let debug = format!("\n    debug:  {} --gdb\n    logs:   ", boot.replay);
        assert!(text.contains(&format!("\n    replay: {}{debug}", boot.replay_shown())), "{text}");
        let host = BootReport { kind: "host-tests", ..boot };
        let text = Human::new(false).failure("unit", &host, "failed");
        assert!(!text.contains("debug:"), "{text}");
    }
}
