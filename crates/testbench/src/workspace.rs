//! The workspace a run works in: its root, its cases directory, `testbench.toml`.

use std::path::PathBuf;

use crate::config::Config;

pub struct Workspace {
    pub root: PathBuf,
    pub cases_dir: PathBuf,
    /// Whether `--cases` named another directory (replay lines must repeat it).
    pub cases_flag: Option<PathBuf>,
    pub config: Config,
}
