//! The run's history (crates/history, docs/history.md): every result of the run appended
//! to the history database at the run's end ([`keep::Keeper`], a report sink), and
//! `cargo testbench history [FILTER]`, which reads it ([`show`]).
//!
//! The database is `target/testbench/history.sqlite` under the workspace, or `--history
//! PATH` (a file several trees share). A `--slurm-task` keeps nothing: the run that joins
//! the array's results writes them, once.

pub mod keep;
pub mod show;

use std::path::{Path, PathBuf};

/// Where a run keeps its history unless `--history` says otherwise, under the workspace.
pub const DEFAULT: &str = "target/testbench/history.sqlite";

/// The history's path: `--history PATH` (relative to the current directory), or the
/// workspace's default.
pub fn path(root: &Path, flag: Option<&Path>) -> PathBuf {
    match flag {
        Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        None => root.join(DEFAULT),
    }
}
