//! The `report.html` sink: the page (`crate::report_html`) written in the run directory
//! when the run ends, or when it stops on the way (with why). A page that cannot be
//! written is said on stderr and fails nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{BootReport, RunEnd, Sink, Summary};
use crate::error::BenchError;

pub struct Html {
    run_dir: PathBuf,
    started: Instant,
    /// A sweep's case and seeds.
    sweep: Option<(String, Vec<u64>)>,
}

impl Html {
    pub fn new(run_dir: &Path, started: Instant, sweep: Option<(&str, &[u64])>) -> Html {
        let sweep = sweep.map(|(case, seeds)| (case.to_string(), seeds.to_vec()));
        Html { run_dir: run_dir.to_path_buf(), started, sweep }
    }

    fn write(&self, all: &[BootReport], stopped: Option<String>) -> Option<PathBuf> {
        let info = crate::report_html::RunInfo {
            run_dir: &self.run_dir,
            took: self.started.elapsed(),
            summary: Summary::of(all),
            sweep: self.sweep.as_ref().map(|(case, seeds)| (case.as_str(), seeds.as_slice())),
            stopped,
        };
        match crate::report_html::write(&info, all) {
            Ok(path) => Some(path),
            Err(error) => {
                let path = self.run_dir.join(crate::report_html::REPORT_FILE);
                eprintln!("warning: could not write {}: {error}", path.display());
                None
            }
        }
    }
}

impl Sink for Html {
    /// The run stopped on the way: the boots reported so far are on the page, with why.
    fn refused(&mut self, errors: &[String], all: &[BootReport]) -> Result<(), BenchError> {
        self.write(all, Some(errors.join("\n")));
        Ok(())
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        end.html = self.write(end.reports, None);
        Ok(())
    }
}
