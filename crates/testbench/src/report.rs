//! What a run tells the person (or the CI log, or a program) that started it.
//!
//! Human form: a line per boot with its verdict and duration, failures with their reason,
//! the replay command and where the logs are, and a summary line. On a terminal a live
//! progress line shows what is running; elsewhere only plain lines, so CI logs read well.
//! JSON form (`--message-format json`): one object per event on stdout, nothing else.
//! JUnit (`--junit PATH`): written at the end, one test case per boot.
//!
//! A reason is quoted the same way in all three: the judge has already cut any console
//! line it quotes to a few hundred bytes (`testbench_judge::quote`), and here every line
//! of a reason is cut at `REASON_LINE_LIMIT` bytes and a reason at `REASON_LINES` lines,
//! with a marker that says what was cut, whatever produced it.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::cli::MessageFormat;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// A must_fail case that failed as it must: the reason it failed with.
    ExpectedFailure(String),
    Fail(String),
    Skip(String),
}

#[derive(Clone, Debug)]
pub struct BootReport {
    pub case: String,
    pub kind: &'static str,
    /// The width, for a boot or a build case; none for a case run on the host alone.
    pub arch: Option<String>,
    /// The harts, for a boot.
    pub smp: Option<u32>,
    pub seed: Option<u64>,
    pub outcome: Outcome,
    pub duration: Duration,
    pub dir: PathBuf,
    pub replay: String,
}

impl BootReport {
    pub fn label(&self) -> String {
        match (&self.arch, self.smp) {
            (Some(arch), Some(smp)) => format!("{} {arch} smp{smp}", self.case),
            (Some(arch), None) => format!("{} {arch}", self.case),
            _ => format!("{} host", self.case),
        }
    }
}

#[derive(Default, Debug, Clone, Copy)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

pub struct Reporter {
    format: MessageFormat,
    progress: Option<ProgressBar>,
    reports: Vec<BootReport>,
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
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

impl Reporter {
    pub fn new(format: MessageFormat) -> Reporter {
        Reporter { format, progress: None, reports: Vec::new(), summary: Summary::default() }
    }

    fn emit_json(&self, value: serde_json::Value) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
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
    pub fn note(&self, event: &str, text: &str) {
        match self.format {
            MessageFormat::Human => self.line(text),
            MessageFormat::Json => self.emit_json(json!({ "event": event, "message": text })),
        }
    }

    pub fn run_started(&mut self, run_dir: &Path, boots: usize) {
        match self.format {
            MessageFormat::Human => {
                self.line(&format!("testbench: {boots} boots; logs in {}", run_dir.display()));
                if std::io::stderr().is_terminal() && boots > 0 {
                    let bar = ProgressBar::new(boots as u64);
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {wide_msg}").unwrap(),
                    );
                    bar.enable_steady_tick(Duration::from_millis(200));
                    self.progress = Some(bar);
                }
            }
            MessageFormat::Json => {
                self.emit_json(json!({ "event": "run-started", "run_dir": run_dir, "boots": boots }))
            }
        }
    }

    pub fn boot_started(&self, label: &str, seed: Option<u64>) {
        match self.format {
            MessageFormat::Human => {
                if let Some(bar) = &self.progress {
                    bar.set_message(format!("booting {label}"));
                }
            }
            MessageFormat::Json => self.emit_json(json!({ "event": "boot-started", "boot": label, "seed": seed })),
        }
    }

    pub fn boot_finished(&mut self, report: BootReport) {
        // Every form below (and JUnit, from `self.reports`) quotes the clipped reason.
        let report = BootReport { outcome: clip_outcome(report.outcome), ..report };
        match &report.outcome {
            Outcome::Pass | Outcome::ExpectedFailure(_) => self.summary.passed += 1,
            Outcome::Fail(_) => self.summary.failed += 1,
            Outcome::Skip(_) => self.summary.skipped += 1,
        }
        let seed = match (report.seed, report.smp) {
            (Some(seed), _) => format!("seed {seed}"),
            (None, Some(_)) => "seed none".to_string(),
            (None, None) => String::new(),
        };
        match self.format {
            MessageFormat::Human => {
                if let Some(bar) = &self.progress {
                    bar.inc(1);
                }
                let head = format!("{:<40} {seed:<10}", report.label());
                let text = match &report.outcome {
                    Outcome::Pass => format!("{head} PASS  {}", secs(report.duration)),
                    Outcome::ExpectedFailure(reason) => {
                        format!("{head} PASS  {} (failed as it must: {reason})", secs(report.duration))
                    }
                    Outcome::Skip(reason) => format!("{head} SKIP  {reason}"),
                    Outcome::Fail(reason) => {
                        let mut text = format!(
                            "{head} FAIL  {}\n    reason: {}",
                            secs(report.duration),
                            reason.replace('\n', "\n      ")
                        );
                        text.push_str(&format!(
                            "\n    replay: {}\n    logs:   {}",
                            report.replay,
                            report.dir.display()
                        ));
                        text
                    }
                };
                self.line(&text);
            }
            MessageFormat::Json => {
                let (verdict, reason) = match &report.outcome {
                    Outcome::Pass => ("pass", None),
                    Outcome::ExpectedFailure(reason) => ("pass", Some(reason.clone())),
                    Outcome::Fail(reason) => ("fail", Some(reason.clone())),
                    Outcome::Skip(reason) => ("skip", Some(reason.clone())),
                };
                self.emit_json(json!({
                    "event": "boot-finished", "case": report.case, "kind": report.kind, "arch": report.arch, "smp": report.smp,
                    "seed": report.seed, "verdict": verdict, "reason": reason,
                    "duration_secs": report.duration.as_secs_f64(), "dir": report.dir, "replay": report.replay,
                }));
            }
        }
        self.reports.push(report);
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
            MessageFormat::Json => {
                self.emit_json(json!({ "event": "sweep-finished", "case": case, "seeds": seeds, "failed": failed }))
            }
        }
    }

    pub fn run_finished(&mut self, took: Duration, run_dir: &Path) {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let s = self.summary;
        match self.format {
            MessageFormat::Human => self.line(&format!(
                "testbench: {} passed, {} failed, {} skipped in {} (logs: {})",
                s.passed,
                s.failed,
                s.skipped,
                secs(took),
                run_dir.display()
            )),
            MessageFormat::Json => self.emit_json(json!({
                "event": "run-finished", "passed": s.passed, "failed": s.failed, "skipped": s.skipped,
                "duration_secs": took.as_secs_f64(), "run_dir": run_dir,
            })),
        }
    }

    pub fn write_junit(&self, path: &Path) -> Result<(), String> {
        use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
        let mut report = Report::new("testbench");
        let mut suite = TestSuite::new("boot");
        for boot in &self.reports {
            let status = match &boot.outcome {
                Outcome::Pass | Outcome::ExpectedFailure(_) => TestCaseStatus::success(),
                Outcome::Fail(reason) => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(reason.clone());
                    status.set_description(format!("replay: {}\nlogs: {}", boot.replay, boot.dir.display()));
                    status
                }
                Outcome::Skip(reason) => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(reason.clone());
                    status
                }
            };
            let name = match boot.seed {
                Some(seed) => format!("{} seed{seed}", boot.label()),
                None => boot.label(),
            };
            let mut case = TestCase::new(name, status);
            case.set_classname(boot.case.clone());
            case.set_time(boot.duration);
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
        let xml = report.to_string().map_err(|e| format!("failed to write JUnit XML: {e}"))?;
        std::fs::write(path, xml).map_err(|e| format!("failed to write {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut reporter = Reporter::new(MessageFormat::Json);
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
