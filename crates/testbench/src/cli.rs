//! The command line, in two stages: clap's flags, then a validated [`Options`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use clap::Parser;
use testbench_case::Arch;

use crate::error::BenchError;

#[derive(Parser, Debug)]
#[command(name = "testbench", about = "Build, boot under QEMU and judge the cases in tests/", version)]
pub struct Flags {
    /// Run every case whose name contains FILTER (a case with whole_run = false only when
    /// FILTER is its whole name).
    pub filter: Option<String>,
    /// Run the one case named NAME (refused when no case has that name).
    #[arg(long, value_name = "NAME", conflicts_with = "filter")]
    pub exact: Option<String>,
    /// Boot only this width: rv64, rv32, x86_64 or aarch64.
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// List the cases (names and descriptions) and exit.
    #[arg(long)]
    pub list: bool,
    /// Boot every case at N harts instead of its own counts (but those with keep_smp).
    #[arg(long, value_name = "N")]
    pub smp: Option<u32>,
    /// Run one case once per seed: a range `1..20` (inclusive) or a list `3,5,9`.
    #[arg(long, value_name = "SEEDS")]
    pub sweep: Option<String>,
    /// Boot up to J guests at once (default 1).
    #[arg(long, value_name = "J", default_value_t = 1)]
    pub jobs: usize,
    /// Report a case the host cannot run (no QEMU, no firmware) as skipped, not failed.
    #[arg(long)]
    pub allow_skip: bool,
    /// Copy a failing boot's logs to DIR/<arch>-<case>.smp<N>.log.
    #[arg(long, value_name = "DIR")]
    pub keep_failed: Option<PathBuf>,
    /// Load cases from DIR instead of tests/.
    #[arg(long, value_name = "DIR")]
    pub cases: Option<PathBuf>,
    /// Write a JUnit XML report to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Replay a failed boot's recording (QEMU record/replay; the path its replay line
    /// names) and compare the replayed console with the recorded one byte for byte.
    #[arg(long, value_name = "PATH")]
    pub rr_replay: Option<PathBuf>,
    /// Boot the one selected boot under QEMU's gdbstub (with --rr-replay: its recording,
    /// where reverse-stepi and reverse-continue work): the guest waits, paused, for
    /// gdb-multiarch, and the bench prints the command that attaches it (docs/debugging.md).
    #[arg(long, conflicts_with_all = ["list", "slurm", "prebuild"])]
    pub gdb: bool,
    /// How long a --gdb boot waits for the debugger to continue the guest, at its start
    /// and at each stop (default 300).
    #[arg(long, value_name = "SECS", requires = "gdb")]
    pub gdb_wait: Option<u64>,
    /// Build every selected boot case's pieces once per width into DIR (with the bench
    /// and an index of the tree they were built from), and boot nothing.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["prebuilt", "list", "sweep", "rr_replay"])]
    pub prebuild: Option<PathBuf>,
    /// Boot from DIR's prebuilt pieces (DIR/testbench --prebuilt DIR): no cargo, no
    /// packing; refused when DIR was made for another workspace or before a change.
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
    /// Run the boots as a Slurm job array (docs/scale.md): each task boots its slice from
    /// a prebuilt directory (--prebuilt DIR, or one made in the run's directory, which
    /// must be on storage every node shares), and this run joins their results.
    #[arg(long, conflicts_with_all = ["prebuild", "list", "rr_replay", "keep_failed"])]
    pub slurm: bool,
    /// The partition the array runs on (default: Slurm's default partition).
    #[arg(long, value_name = "NAME", requires = "slurm")]
    pub slurm_partition: Option<String>,
    /// How many array tasks share the boots (default: one per boot, at most 16).
    #[arg(long, value_name = "N", requires = "slurm")]
    pub slurm_tasks: Option<u32>,
    /// How long the array may wait in Slurm's queue, on top of its boots' deadlines
    /// (default 600).
    #[arg(long, value_name = "SECS", requires = "slurm")]
    pub slurm_queue_secs: Option<u64>,
    /// One task of a --slurm array: the submitting run's directory (set by the array's
    /// script, not by a person).
    #[arg(long, value_name = "RUN_DIR", hide = true, conflicts_with_all = ["slurm", "prebuild", "list"], requires = "prebuilt")]
    pub slurm_task: Option<PathBuf>,
    /// Record which lines of the kernel each boot reaches (a QEMU plugin; the reference
    /// kernel is built with line tables): lcov files per boot and for the run, a summary
    /// (docs/coverage.md); `cargo testbench coverage --which FILE:LINE` asks them after.
    #[arg(long, conflicts_with_all = ["prebuild", "prebuilt", "list", "slurm"])]
    pub coverage: bool,
    /// Keep every result in the history database at PATH (default
    /// target/testbench/history.sqlite; one file several trees may share).
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
    /// human (default) or json (one JSON object per event on stdout).
    #[arg(long, value_name = "FORMAT", default_value = "human")]
    pub message_format: String,
    /// Colour the verdicts: auto (a terminal only, unless NO_COLOR is set), always or never.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub color: String,
    /// When the filter, --arch or an empty --cases directory leaves nothing to run: fail
    /// (exit 4, the default), warn (say so and exit 0) or pass (exit 0).
    #[arg(long, value_name = "ACTION", default_value = "fail")]
    pub no_tests: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// What a run that selects nothing does (as nextest's `--no-tests`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTests {
    Fail,
    Warn,
    Pass,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageFormat {
    Human,
    Json,
}

#[derive(Debug)]
pub struct Options {
    pub filter: Filter,
    pub arch: Option<Arch>,
    pub list: bool,
    pub smp: Option<u32>,
    pub sweep: Option<Vec<u64>>,
    pub jobs: usize,
    pub allow_skip: bool,
    pub keep_failed: Option<KeepFailed>,
    pub cases: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub format: MessageFormat,
    pub color: ColorChoice,
    pub no_tests: NoTests,
    /// A recording to replay (`--rr-replay`).
    pub rr_replay: Option<PathBuf>,
    /// `--gdb`: how long the guest waits, stopped, for the debugger (`--gdb-wait`).
    pub gdb: Option<std::time::Duration>,
    /// `--prebuild DIR`.
    pub prebuild: Option<PathBuf>,
    /// `--prebuilt DIR`.
    pub prebuilt: Option<PathBuf>,
    /// `--slurm` and its options.
    pub slurm: Option<Slurm>,
    /// `--slurm-task RUN_DIR`: this run is one task of a --slurm array.
    pub slurm_task: Option<PathBuf>,
    /// `--history PATH`: the history database, when not the workspace's.
    pub history: Option<PathBuf>,
    /// `--coverage`: each boot's kernel lines recorded (coverage/).
    pub coverage: bool,
}

/// `--keep-failed DIR`: where a failing boot's logs are copied, and the copies that
/// failed. The directory is made and tried before anything builds ([`KeepFailed::check`]);
/// a copy that fails later is the bench's trouble, not the case's: the run says so when
/// it ends, and exits 3 ([`KeepFailed::trouble`]).
#[derive(Debug)]
pub struct KeepFailed {
    pub dir: PathBuf,
    /// Each copy that failed: where it went, and why.
    failed: Mutex<Vec<(PathBuf, std::io::Error)>>,
}

impl KeepFailed {
    pub fn new(dir: PathBuf) -> KeepFailed {
        KeepFailed { dir, failed: Mutex::new(Vec::new()) }
    }

    /// Make the directory, and refuse it unless a file can be made in it (a directory
    /// that exists is not always one the bench may write: `/proc`, a read-only mount).
    pub fn check(&self) -> Result<(), String> {
        let shown = self.dir.display();
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("--keep-failed {shown}: {e}"))?;
        writable(&self.dir).map_err(|e| {
            format!("--keep-failed {shown}: a file cannot be made in it ({e}); it takes a directory the bench may write failing boots' logs into")
        })
    }

    /// Copy `from` (when the boot left it) into the directory as `name`; a copy that
    /// fails is kept, to be said when the run ends.
    pub fn copy(&self, from: &Path, name: &str) {
        if !from.is_file() {
            return;
        }
        let to = self.dir.join(name);
        if let Err(error) = std::fs::copy(from, &to) {
            self.failed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((to, error));
        }
    }

    /// The copies that failed, as the bench's trouble (exit 3): how many, and the first.
    pub fn trouble(&self) -> Option<BenchError> {
        let failed = std::mem::take(&mut *self.failed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let count = failed.len();
        let (first, source) = failed.into_iter().next()?;
        let what = format!(
            "--keep-failed {}: {count} of the failing boots' logs could not be copied there; the first, {}",
            self.dir.display(),
            first.display()
        );
        Some(BenchError::Io { what, source })
    }
}

/// Whether a file can be made in `dir`: one is made (a name of this process's own) and
/// removed.
fn writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".testbench-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe)?;
    std::fs::remove_file(&probe)
}

/// `--junit PATH`, tried before anything builds: the report is written when the run ends,
/// and a path it cannot be written to is refused now rather than after every boot. An
/// existing file is opened for writing (and left as it is); otherwise the file is made
/// and removed.
pub fn check_junit(path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "--junit {shown}: a directory; it takes the path of the file to write the JUnit XML report to"
        ));
    }
    let tried = if path.exists() {
        std::fs::OpenOptions::new().write(true).open(path).map(drop)
    } else {
        std::fs::OpenOptions::new().write(true).create_new(true).open(path).and_then(|_| std::fs::remove_file(path))
    };
    tried.map_err(|e| {
        format!(
            "--junit {shown}: cannot be written ({e}); it takes the path of the file to write the JUnit XML report to"
        )
    })
}

/// A `--slurm` run's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slurm {
    pub partition: Option<String>,
    /// The array's task count, when given (else one per boot, at most `SLURM_DEFAULT_TASKS`).
    pub tasks: Option<u32>,
    pub queue_secs: u64,
}

/// The most tasks a --slurm run makes when it is not told how many.
pub const SLURM_DEFAULT_TASKS: u32 = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    Contains(String),
    Exact(String),
}

/// How long a `--gdb` boot waits for the debugger unless `--gdb-wait` says.
pub const GDB_WAIT_DEFAULT_SECS: u64 = 300;

/// The longest `--gdb-wait`: a day.
pub const GDB_WAIT_MAX_SECS: u64 = 86_400;

/// The most seeds one sweep may name: a typo such as `1..1000000` is refused, not run.
pub const SWEEP_MAX: usize = 10_000;

pub fn parse_sweep(text: &str) -> Result<Vec<u64>, String> {
    let accepted = "a range such as 1..20 (both ends included) or a list such as 3,5,9";
    let seeds: Vec<u64> = if let Some((low, high)) = text.split_once("..") {
        let low: u64 =
            low.trim().parse().map_err(|_| format!("--sweep {text:?}: {low:?} is not a seed; accepted: {accepted}"))?;
        let high: u64 = high
            .trim()
            .parse()
            .map_err(|_| format!("--sweep {text:?}: {high:?} is not a seed; accepted: {accepted}"))?;
        if high < low {
            return Err(format!("--sweep {text:?}: the range is empty; accepted: {accepted}"));
        }
        if high - low >= SWEEP_MAX as u64 {
            return Err(format!("--sweep {text:?}: more than {SWEEP_MAX} seeds"));
        }
        (low..=high).collect()
    } else {
        let mut seeds = Vec::new();
        for item in text.split(',') {
            let seed: u64 = item
                .trim()
                .parse()
                .map_err(|_| format!("--sweep {text:?}: {item:?} is not a seed; accepted: {accepted}"))?;
            if seeds.contains(&seed) {
                return Err(format!("--sweep {text:?}: seed {seed} is named twice"));
            }
            seeds.push(seed);
        }
        seeds.sort();
        seeds
    };
    if seeds.len() > SWEEP_MAX {
        return Err(format!("--sweep {text:?}: more than {SWEEP_MAX} seeds"));
    }
    Ok(seeds)
}

impl Flags {
    pub fn validate(self) -> Result<Options, OptionError> {
        let arch = match self.arch.as_deref() {
            None => None,
            Some(name) => Some(
                Arch::from_name(name)
                    .ok_or_else(|| OptionError::word("--arch", name, "rv64, rv32, x86_64 or aarch64"))?,
            ),
        };
        let (format, color, no_tests) = self.words()?;
        self.check_bounds()?;
        let slurm = self.slurm.then(|| Slurm {
            partition: self.slurm_partition.clone(),
            tasks: self.slurm_tasks,
            queue_secs: self.slurm_queue_secs.unwrap_or(600),
        });
        let filter = match (self.exact, self.filter) {
            (Some(name), _) => Filter::Exact(name),
            (None, Some(text)) if !text.is_empty() => Filter::Contains(text),
            _ => Filter::All,
        };
        Ok(Options {
            filter,
            arch,
            list: self.list,
            smp: self.smp,
            sweep: self.sweep.as_deref().map(parse_sweep).transpose().map_err(OptionError::Sweep)?,
            jobs: self.jobs,
            allow_skip: self.allow_skip,
            keep_failed: self.keep_failed.map(KeepFailed::new),
            cases: self.cases,
            junit: self.junit,
            format,
            color,
            no_tests,
            rr_replay: absolute("--rr-replay", self.rr_replay)?,
            gdb: self.gdb.then(|| std::time::Duration::from_secs(self.gdb_wait.unwrap_or(GDB_WAIT_DEFAULT_SECS))),
            prebuild: absolute("--prebuild", self.prebuild)?,
            prebuilt: absolute("--prebuilt", self.prebuilt)?,
            slurm,
            slurm_task: absolute("--slurm-task", self.slurm_task)?,
            history: absolute("--history", self.history)?,
            coverage: self.coverage,
        })
    }

    /// The options whose values are words: `--message-format`, `--color`, `--no-tests`.
    fn words(&self) -> Result<(MessageFormat, ColorChoice, NoTests), OptionError> {
        let format = match self.message_format.as_str() {
            "human" => MessageFormat::Human,
            "json" => MessageFormat::Json,
            other => return Err(OptionError::word("--message-format", other, "human or json")),
        };
        let color = match self.color.as_str() {
            "auto" => ColorChoice::Auto,
            "always" => ColorChoice::Always,
            "never" => ColorChoice::Never,
            other => return Err(OptionError::word("--color", other, "auto, always or never")),
        };
        let no_tests = match self.no_tests.as_str() {
            "fail" => NoTests::Fail,
            "warn" => NoTests::Warn,
            "pass" => NoTests::Pass,
            other => return Err(OptionError::word("--no-tests", other, "fail, warn or pass")),
        };
        Ok((format, color, no_tests))
    }

    /// The options whose numbers and names have bounds: `--smp`, `--jobs`,
    /// `--slurm-tasks`, `--slurm-partition`.
    fn check_bounds(&self) -> Result<(), OptionError> {
        if let Some(n) = self.smp {
            if !(1..=testbench_case::SMP_MAX).contains(&n) {
                return Err(OptionError::number("--smp", n, testbench_case::SMP_MAX));
            }
        }
        if self.jobs == 0 || self.jobs > 64 {
            return Err(OptionError::number("--jobs", self.jobs as u32, 64));
        }
        if let Some(secs) = self.gdb_wait {
            if !(1..=GDB_WAIT_MAX_SECS).contains(&secs) {
                return Err(OptionError::number(
                    "--gdb-wait",
                    secs.min(u32::MAX as u64) as u32,
                    GDB_WAIT_MAX_SECS as u32,
                ));
            }
        }
        if let Some(n) = self.slurm_tasks {
            if !(1..=testbench_slurm::MAX_TASKS).contains(&n) {
                return Err(OptionError::number("--slurm-tasks", n, testbench_slurm::MAX_TASKS));
            }
        }
        if let Some(name) = &self.slurm_partition {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                let takes = "a partition's name (letters, digits, '-', '_', '.')";
                return Err(OptionError::word("--slurm-partition", name, takes));
            }
        }
        Ok(())
    }
}

/// A path option made absolute (`flag` names it in the error).
fn absolute(flag: &'static str, path: Option<PathBuf>) -> Result<Option<PathBuf>, OptionError> {
    path.map(|path| std::path::absolute(&path).map_err(|source| OptionError::Path { flag, path, source })).transpose()
}

/// An option of the command line the bench does not take, in the words a refusal prints.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    /// A word (or name) not among those the option takes.
    #[error("{flag} {value:?} is not accepted: {takes}")]
    Word { flag: &'static str, value: String, takes: &'static str },
    /// A number out of the option's range (1 to `max`).
    #[error("{flag} {value} is not accepted: 1 to {max}")]
    Number { flag: &'static str, value: u32, max: u32 },
    /// A path that cannot be made absolute.
    #[error("{flag} {}: {source}", path.display())]
    Path {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--sweep`'s seeds.
    #[error("{0}")]
    Sweep(String),
}

impl OptionError {
    fn word(flag: &'static str, value: &str, takes: &'static str) -> OptionError {
        OptionError::Word { flag, value: value.to_string(), takes }
    }

    fn number(flag: &'static str, value: u32, max: u32) -> OptionError {
        OptionError::Number { flag, value, max }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_seeds_are_ranges_or_lists() {
        assert_eq!(parse_sweep("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_sweep("9,3,5").unwrap(), vec![3, 5, 9]);
        assert_eq!(parse_sweep("7").unwrap(), vec![7]);
        assert!(parse_sweep("5..1").unwrap_err().contains("empty"));
        assert!(parse_sweep("1,x").unwrap_err().contains("\"x\" is not a seed"));
        assert!(parse_sweep("3,3").unwrap_err().contains("named twice"));
        assert!(parse_sweep("0..99999999").unwrap_err().contains("more than"));
    }
}
