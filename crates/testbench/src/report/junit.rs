//! `--junit PATH`: the run's reports as JUnit XML (quick-junit), written at the end: one
//! test case per boot or host run, or one error entry when the run was refused.

use std::path::Path;

use super::{BootReport, Outcome};
use crate::error::BenchError;

/// The reports (or the refusals of a refused run) into `path`.
pub fn write(reports: &[BootReport], refusals: &[String], path: &Path) -> Result<(), BenchError> {
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
