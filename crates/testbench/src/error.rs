//! The bench's own trouble, and the exit statuses of a run.
//!
//! Each error says its exit status ([`BenchError::exit_status`]); a run that ran says
//! its own ([`Finished`]): 0 passed, 1 a case failed, 2 input refused, 3 the bench could
//! not run, 4 nothing to run. The table a person reads, with what each covers, is in
//! docs/running.md ("Exit status"); README.md says it in a sentence.
//!
//! A case's verdict is not a `BenchError`: a failing boot is the run's result (a
//! `verdict::Verdict`, with its typed failure), and the run goes on. The
//! bench's own trouble while it makes what one case boots (a build's directory, cargo
//! that did not start) is that case's failure too: its text is the case's reason.

use std::path::Path;
use std::process::ExitStatus;

/// The run ran, and every case passed.
pub const EXIT_PASSED: i32 = 0;
/// The run ran, and a case failed.
pub const EXIT_FAILED: i32 = 1;
/// Input refused: a case file, a path or name it gives, the command line.
pub const EXIT_REFUSED: i32 = 2;
/// The bench could not run: not a case's failure, so CI can tell the two apart.
pub const EXIT_TROUBLE: i32 = 3;
/// Nothing to run (unless `--no-tests warn` or `pass`).
pub const EXIT_NO_CASES: i32 = 4;

/// How a run that ran ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Every case passed (or there was nothing to run, and that was allowed).
    Passed,
    /// At least one case failed.
    Failed,
}

impl Finished {
    pub fn exit_status(self) -> i32 {
        match self {
            Finished::Passed => EXIT_PASSED,
            Finished::Failed => EXIT_FAILED,
        }
    }
}

/// Why the bench stopped without a result for every case: its input refused, nothing to
/// run, or its own trouble. Each has its exit status (the module's table).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Input refused: every refusal of the run, together (each names the file, the field
    /// and what is accepted), printed one per line, as one JSON event, and in JUnit.
    #[error("{}", .0.join("\n"))]
    Refused(Vec<String>),
    /// `--rr-replay` cannot replay what the selection plans (input refused: said on
    /// stderr only, after the run directory was made).
    #[error("{0}")]
    Replay(String),
    /// Nothing to run, and `--no-tests fail` (the default): which filter or width left
    /// every case out.
    #[error("nothing to run: {0} (exit status {EXIT_NO_CASES}; --no-tests warn or pass exits 0)")]
    NoCases(String),
    /// A file or directory of the bench's own could not be made or written.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A command the bench runs for itself did not start, or ran past its deadline.
    #[error(transparent)]
    Command(#[from] testbench_process::CmdError),
    /// A tool the bench runs for itself ran and failed (`scripts/setup`, whose own message
    /// above says what to run).
    #[error("{tool} failed ({status}); its message above names the command to run")]
    Tool { tool: String, status: ExitStatus },
    /// cargo could not build what a case boots: its own message.
    #[error("cargo failed to build {what} ({status}):\n{stderr}")]
    Build { what: String, status: ExitStatus, stderr: String },
    /// cargo built, but its messages name no executable for the binary asked for.
    #[error("cargo built {what} but its messages name no executable for bin {bin:?}")]
    NoExecutable { what: String, bin: String },
    /// Slurm's commands failed while a --slurm run followed its array.
    #[error("{0}")]
    Slurm(String),
    /// The bench itself could not run some boots or host runs (each reported with why).
    #[error("the bench could not run {} ({}): {first}", count(.labels.len()), .labels.join(", "))]
    Ran { labels: Vec<String>, first: String },
    /// The history could not keep the run's results (crates/history).
    #[error(transparent)]
    History(#[from] testbench_history::HistoryError),
    /// The JUnit report could not be made.
    #[error("failed to write JUnit XML: {0}")]
    Junit(#[from] quick_junit::SerializeError),
}

impl BenchError {
    /// The bench's exit status for this error (the module's table).
    pub fn exit_status(&self) -> i32 {
        match self {
            BenchError::Refused(_) | BenchError::Replay(_) => EXIT_REFUSED,
            BenchError::NoCases(_) => EXIT_NO_CASES,
            BenchError::Io { .. }
            | BenchError::Command(_)
            | BenchError::Tool { .. }
            | BenchError::Build { .. }
            | BenchError::NoExecutable { .. }
            | BenchError::Slurm(_)
            | BenchError::Ran { .. }
            | BenchError::Junit(_)
            | BenchError::History(_) => EXIT_TROUBLE,
        }
    }

    /// An I/O error, with what the bench was doing.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Io { what: what.into(), source }
    }

    /// An I/O error on one path: "failed to `doing` `path`: error".
    pub fn at(doing: &str, path: &Path, source: std::io::Error) -> BenchError {
        BenchError::io(format!("failed to {doing} {}", path.display()), source)
    }
}

/// "1 boot", "2 boots".
fn count(n: usize) -> String {
    if n == 1 {
        "1 boot".into()
    } else {
        format!("{n} boots")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_trouble_has_its_exit_status_and_its_words() {
        let refused = BenchError::Refused(vec!["a.toml: x".into(), "b.toml: y".into()]);
        assert_eq!((refused.exit_status(), refused.to_string()), (2, "a.toml: x\nb.toml: y".to_string()));
        let none = BenchError::NoCases("the filter \"x\" takes none".into());
        assert_eq!(none.exit_status(), 4);
        assert_eq!(
            none.to_string(),
            "nothing to run: the filter \"x\" takes none (exit status 4; --no-tests warn or pass exits 0)"
        );
        let io = BenchError::at("create", Path::new("/t/x"), std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(io.exit_status(), 3);
        assert!(io.to_string().starts_with("failed to create /t/x: "), "{io}");
        assert_eq!(BenchError::Replay("--rr-replay x: not a file".into()).exit_status(), 2);
        assert_eq!((Finished::Passed.exit_status(), Finished::Failed.exit_status()), (0, 1));
    }
}
