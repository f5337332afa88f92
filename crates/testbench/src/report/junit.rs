//! `--junit PATH`: the run's reports as JUnit XML (quick-junit), written at the end: one
//! test case per boot or host run, or one error entry when the run was refused.

use std::path::{Path, PathBuf};

use super::{BootReport, RunEnd, Sink};
use crate::error::BenchError;
use crate::verdict::Verdict;

/// The JUnit sink: the file, written when the run ends or is refused.
pub struct Junit {
    path: PathBuf,
}

impl Junit {
    pub fn new(path: PathBuf) -> Junit {
        Junit { path }
    }
}

impl Sink for Junit {
    /// A refused run's report says why (not into a path that was itself refused: that
    /// is said among the refusals).
    fn refused(&mut self, errors: &[String], all: &[BootReport]) -> Result<(), BenchError> {
        match crate::cli::check_junit(&self.path) {
            Ok(()) => write(all, errors, &self.path),
            Err(_) => Ok(()),
        }
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        write(end.reports, &[], &self.path)
    }
}

/// The reports (or the refusals of a refused run) into `path`.
fn write(reports: &[BootReport], refusals: &[String], path: &Path) -> Result<(), BenchError> {
    use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("testbench");
    let mut suite = TestSuite::new("boot");
    if !refusals.is_empty() {
        // A refused run ran nothing; CI still gets a report, and it says why.
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status.set_message(format!("the run was refused ({} refusals)", refusals.len()));
        status.set_type("refused");
        status.set_description(refusals.join("\n"));
        let mut case = TestCase::new("testbench run refused", status);
        case.set_classname("testbench");
        suite.add_test_case(case);
    }
    for boot in reports {
        let status = match &boot.verdict {
            Verdict::Pass | Verdict::ExpectedFailure(_) => TestCaseStatus::success(),
            failure @ (Verdict::Fail(_) | Verdict::Unfailed(_)) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(failure.reason().unwrap_or_default().into_owned());
                if let Some(failed) = failure.failed() {
                    status.set_type(failed.kind.name());
                    // The crash first: what CI's list of failures shows.
                    if let Some(crash) = &failed.crash {
                        status.set_message(format!("{}: {}", crash.shown(), failed.reason));
                    }
                }
                let description = failure_text(boot, failure);
                status.set_description(description);
                status
            }
            Verdict::Skip(reason) => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(reason.clone());
                status
            }
            Verdict::Trouble(reason) => {
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
        if let Some(quarantined) = &boot.quarantined {
            case.add_property(Property::new("quarantined_until", quarantined.until.as_str()));
        }
        if let Some(class) = boot.class {
            case.add_property(Property::new("failure_class", class.name()));
        }
        if matches!(boot.verdict, Verdict::ExpectedFailure(_)) {
            case.add_property(Property::new("failed_as_it_must", "true"));
        }
        suite.add_test_case(case);
    }
    report.add_test_suite(suite);
    let xml = report.to_string()?;
    std::fs::write(path, xml).map_err(|e| BenchError::at("write", path, e))
}

/// A failure's text: the crash's symbolized trace, the console's last lines, the replay
/// line and where the logs are.
fn failure_text(boot: &BootReport, failure: &Verdict) -> String {
    let mut description = String::new();
    if let Some(crash) = failure.failed().and_then(|f| f.crash.as_ref()) {
        if !crash.trace.is_empty() {
            description.push_str("symbolized trace:\n");
            for frame in &crash.trace {
                description.push_str(&format!("  {}\n", frame.shown()));
            }
        }
        if let Some(why) = &crash.trace_error {
            description.push_str(&format!("trace not symbolized: {why}\n"));
        }
    }
    if !boot.console_tail.is_empty() {
        description.push_str("last console lines:\n");
        for line in &boot.console_tail {
            description.push_str(&format!("  | {line}\n"));
        }
    }
    description.push_str(&format!("replay: {}\nlogs: {}", boot.replay_shown(), boot.dir.display()));
    description
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JUnit's failure text holds the symbolized trace, a frame a line.
    #[test]
    fn a_crashs_trace_is_in_the_failure_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        write(&[super::super::a_crashed_boot()], &[], &path).unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        assert!(
            xml.contains("symbolized trace:\n  #0 0xffffffff8149a2b6 crash_write at drivers/tty/sysrq.c:154 (inlined)\n  #0 0xffffffff8149a2b6 sysrq_handle_crash at drivers/tty/sysrq.c:160\ntrace not symbolized: vmlinux: a second reason, for the test\n"),
            "{xml}"
        );
    }
}
