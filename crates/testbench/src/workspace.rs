//! The workspace a run works in: its root, its cases directory, `testbench.toml`.

use std::path::PathBuf;

use crate::config::Config;

/// Where guest recipes' images are cached, by the recipe's hash, under the workspace
/// root: boot cases with a `[guest] recipe` and the ssh-loopback kind share it.
pub const GUEST_IMAGES: &str = "target/testbench/guests";

pub struct Workspace {
    pub root: PathBuf,
    pub cases_dir: PathBuf,
    /// Whether `--cases` named another directory (replay lines must repeat it).
    pub cases_flag: Option<PathBuf>,
    pub config: Config,
}
