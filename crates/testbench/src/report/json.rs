//! The JSON sink (`--message-format json`): every event one line on stdout, as
//! `events.rs` types it, and nothing else.

use std::io::Write;
use std::path::Path;

use super::{job_class, BootReport, Row, RunEnd, Sink};
use crate::error::BenchError;
use crate::events::{BootFinished, Note, RunEvent};
use crate::verdict::Verdict;

pub struct Json;

/// One event's line on stdout.
fn emit(event: RunEvent) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", crate::events::line(&event));
    let _ = out.flush();
}

impl Sink for Json {
    fn refused(&mut self, errors: &[String], _all: &[BootReport]) -> Result<(), BenchError> {
        emit(RunEvent::Refused { errors });
        Ok(())
    }

    fn list(&self, cases: &[testbench_case::Case], machine_cores: u32) {
        for case in cases {
            let class = job_class(case, machine_cores);
            emit(RunEvent::Case {
                name: &case.name,
                kind: case.kind.name(),
                arch: case.arch().iter().map(|a| a.name()).collect(),
                description: &case.description,
                whole_run: case.whole_run,
                file: &case.file,
                cores: class.cores,
                quiet: class.quiet.is_some(),
                quiet_because: class.quiet,
                ports: class.ports,
                clock: super::clock(case),
                clock_reason: super::clock_reason(case),
            })
        }
    }

    fn note(&self, note: Note, text: &str) {
        emit(note.event(text));
    }

    fn run_started(&mut self, run_dir: &Path, rows: &[Row]) {
        emit(RunEvent::RunStarted { run_dir, boots: rows.len() });
    }

    fn boot_started(&self, label: &str, seed: Option<u64>) {
        emit(RunEvent::BootStarted { boot: label, seed });
    }

    fn boot_finished(&mut self, report: &BootReport, _all: &[BootReport]) -> Result<(), (Note, BenchError)> {
        let verdict = match &report.verdict {
            Verdict::Pass | Verdict::ExpectedFailure(_) => "pass",
            Verdict::Fail(_) | Verdict::Unfailed(_) => "fail",
            Verdict::Skip(_) => "skip",
            Verdict::Trouble(_) => "trouble",
        };
        let reason = report.verdict.reason();
        let failed = report.verdict.failed();
        emit(RunEvent::BootFinished(&BootFinished {
            case: &report.case,
            kind: report.kind,
            arch: report.arch.as_deref(),
            smp: report.smp,
            seed: report.seed,
            verdict,
            reason: reason.as_deref(),
            failed_as_it_must: matches!(report.verdict, Verdict::ExpectedFailure(_)),
            failure_kind: failed.map(|f| f.kind.name()),
            failure_class: report.class.map(crate::verdict::Class::name),
            quarantined_until: report.quarantined.as_ref().map(|q| q.until.as_str()),
            failure_line: failed.and_then(|f| f.place.as_ref()).map(|p| p.line),
            failure_quote: failed.and_then(|f| f.place.as_ref()).map(|p| p.quote.as_str()),
            crash: failed.and_then(|f| f.crash.as_deref()),
            console_tail: &report.console_tail,
            notes: &report.notes,
            duration_secs: report.duration.as_secs_f64(),
            dir: &report.dir,
            replay: &report.replay,
            replay_note: report.replay_note.as_deref(),
        }));
        Ok(())
    }

    fn sweep_finished(&self, case: &str, seeds: &[u64], _boots: usize, failed: &[String]) {
        emit(RunEvent::SweepFinished { case, seeds, failed });
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        let s = end.summary;
        emit(RunEvent::RunFinished {
            passed: s.passed,
            failed: s.failed,
            skipped: s.skipped,
            trouble: s.trouble,
            quarantined_passed: super::quarantined(end.reports).0,
            quarantined_failed: super::quarantined(end.reports).1,
            duration_secs: end.took.as_secs_f64(),
            run_dir: end.run_dir,
            report: end.html.as_deref(),
            crashes: &end.crashes,
        });
        Ok(())
    }
}
