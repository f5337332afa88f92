//! The `report.html` sink: the page (`crate::report_html`) written in the run directory
//! when the run ends, or when it stops on the way (with why). A page that cannot be
//! written is said on stderr and fails nothing. With the run's history, each result's
//! strip (its last results there, this run's among them: the history's sink is told the
//! run's end first) is on the page; a history that cannot be read is said and left out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{BootReport, RunEnd, Sink, Summary};
use crate::error::BenchError;

pub struct Html {
    run_dir: PathBuf,
    started: Instant,
    /// A sweep's case and seeds.
    sweep: Option<(String, Vec<u64>)>,
    /// The run's history, whose strips the page shows.
    history: Option<PathBuf>,
}

/// How many of a result's last results its strip shows.
pub const STRIP: usize = 20;

impl Html {
    pub fn new(run_dir: &Path, started: Instant, sweep: Option<(&str, &[u64])>) -> Html {
        let sweep = sweep.map(|(case, seeds)| (case.to_string(), seeds.to_vec()));
        Html { run_dir: run_dir.to_path_buf(), started, sweep, history: None }
    }

    /// The page shows each result's strip from the history at `path`.
    pub fn with_history(self, path: PathBuf) -> Html {
        Html { history: Some(path), ..self }
    }

    /// Each result's strip, by its label; none without a history to read.
    fn strips(&self, all: &[BootReport]) -> Option<HashMap<String, Vec<testbench_history::Cell>>> {
        let path = self.history.as_ref().filter(|path| path.is_file())?;
        let read = || -> Result<HashMap<String, Vec<testbench_history::Cell>>, testbench_history::HistoryError> {
            let history = testbench_history::History::open(path)?;
            let mut strips = HashMap::new();
            for report in all {
                if let std::collections::hash_map::Entry::Vacant(entry) = strips.entry(report.label()) {
                    let width = report.arch.as_deref().unwrap_or("host");
                    entry.insert(history.strip(&report.case, width, report.smp, STRIP)?);
                }
            }
            Ok(strips)
        };
        read().map_err(|error| eprintln!("warning: report.html without the history's strips: {error}")).ok()
    }

    fn write(
        &self,
        all: &[BootReport],
        stopped: Option<String>,
        coverage: Option<&crate::coverage::Summary>,
    ) -> Option<PathBuf> {
        let strips = self.strips(all);
        let info = crate::report_html::RunInfo {
            run_dir: &self.run_dir,
            took: self.started.elapsed(),
            summary: Summary::of(all),
            sweep: self.sweep.as_ref().map(|(case, seeds)| (case.as_str(), seeds.as_slice())),
            stopped,
            strips: strips.as_ref(),
            coverage,
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
        self.write(all, Some(errors.join("\n")), None);
        Ok(())
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        end.html = self.write(end.reports, None, end.coverage);
        Ok(())
    }
}
