//! `cargo testbench coverage --which FILE:LINE [--run DIR]`: the boots of a `--coverage`
//! run (the last run by default: `target/testbench/last`) that reach a line of the
//! kernel's source. FILE is matched against the end of each source path the run's lcov
//! files name, on whole path components (`mm.rs`, `kernel/src/mm.rs` or the whole path);
//! a FILE that matches two paths is refused, naming them.
//!
//! Exit status: 0 with the boots listed (none reach it: said, still 0), 2 for a command
//! line it cannot take or a FILE no run file names, 3 for a run it cannot read.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;

/// The word that makes the command line this one.
pub const WORD: &str = "coverage";
/// The most lcov files read from one run, and the most bytes of each.
const MAX_FILES: usize = 100_000;
const MAX_LCOV: u64 = 256 << 20;

#[derive(Parser, Debug)]
#[command(name = "testbench coverage", about = "Which boots of a --coverage run reach a line of the kernel's source")]
struct Flags {
    /// The line: a source file (its path, or the end of it) and a line number.
    #[arg(long, value_name = "FILE:LINE")]
    which: String,
    /// The run's directory (default: the last run, target/testbench/last).
    #[arg(long, value_name = "DIR")]
    run: Option<PathBuf>,
}

/// Why the question cannot be answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WhichError {
    #[error("--which {0:?}: not FILE:LINE (a source file and a line number from 1)")]
    Spec(String),
    #[error("{}: no lcov file in it (not a run made with --coverage, or none of its boots was covered)", .0.display())]
    NoRun(PathBuf),
    #[error("{}: {why}", .path.display())]
    Read { path: PathBuf, why: String },
    #[error("--which {file}: no source file of the run ends with it; the run's files include: {known}")]
    NoFile { file: String, known: String },
    #[error("--which {file}: names {count} files of the run: {paths} (give more of its path)")]
    Ambiguous { file: String, count: usize, paths: String },
    #[error("--which {file}:{line}: {path} has no code at line {line} (the lines it has: {nearest})")]
    NoLine { file: String, line: u32, path: String, nearest: String },
}

impl WhichError {
    fn status(&self) -> i32 {
        match self {
            WhichError::Read { .. } => crate::error::EXIT_TROUBLE,
            _ => crate::error::EXIT_REFUSED,
        }
    }
}

/// One boot's tracefile: where its directory is in the run, and its lines per file.
#[derive(Debug)]
pub struct Traced {
    pub boot: String,
    pub files: Vec<(String, Vec<(u32, u64)>)>,
}

/// The boots (as `case/leaf`) that reach `file`:`line`, from the tracefiles of `run`.
pub fn which(run: &Path, spec: &str) -> Result<(String, Vec<String>), WhichError> {
    let (file, line) = spec
        .rsplit_once(':')
        .and_then(|(f, l)| Some((f, l.parse::<u32>().ok().filter(|&l| l > 0)?)))
        .filter(|(f, _)| !f.is_empty())
        .ok_or_else(|| WhichError::Spec(spec.to_string()))?;
    let traced = read_run(run)?;
    let paths: BTreeSet<&str> = traced.iter().flat_map(|t| t.files.iter().map(|(f, _)| f.as_str())).collect();
    let matching: Vec<&str> = paths.iter().copied().filter(|p| ends_with_components(p, file)).collect();
    let path = match matching.as_slice() {
        [] => {
            let known: Vec<&str> = paths.iter().copied().filter(|p| crate::coverage::own_source(p)).take(8).collect();
            return Err(WhichError::NoFile { file: file.to_string(), known: known.join(", ") });
        }
        [one] => *one,
        many => {
            return Err(WhichError::Ambiguous {
                file: file.to_string(),
                count: many.len(),
                paths: many.iter().take(8).copied().collect::<Vec<_>>().join(", "),
            })
        }
    };
    let mut has_line = false;
    let mut lines: BTreeSet<u32> = BTreeSet::new();
    let mut reaching = Vec::new();
    for boot in &traced {
        for (_, rows) in boot.files.iter().filter(|(f, _)| f == path) {
            lines.extend(rows.iter().map(|(l, _)| *l));
            if let Some((_, count)) = rows.iter().find(|(l, _)| *l == line) {
                has_line = true;
                if *count > 0 {
                    reaching.push(boot.boot.clone());
                }
            }
        }
    }
    if !has_line {
        let below = lines.range(..line).next_back().map(|l| l.to_string());
        let above = lines.range(line..).next().map(|l| l.to_string());
        let nearest = [below, above].into_iter().flatten().collect::<Vec<_>>().join(" and ");
        return Err(WhichError::NoLine { file: file.to_string(), line, path: path.to_string(), nearest });
    }
    reaching.sort();
    reaching.dedup();
    Ok((path.to_string(), reaching))
}

/// Whether `path` ends with `tail` on whole components.
fn ends_with_components(path: &str, tail: &str) -> bool {
    let tail = tail.trim_start_matches("./");
    path == tail || path.ends_with(&format!("/{tail}"))
}

/// Every boot's tracefile under `run` (`case/leaf/coverage.info`), bounded.
pub fn read_run(run: &Path) -> Result<Vec<Traced>, WhichError> {
    let read_dir =
        |dir: &Path| std::fs::read_dir(dir).map_err(|e| WhichError::Read { path: dir.to_owned(), why: e.to_string() });
    let mut traced = Vec::new();
    let mut cases: Vec<PathBuf> = read_dir(run)?.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    for case in cases {
        let mut boots: Vec<PathBuf> = read_dir(&case)?.flatten().map(|e| e.path()).collect();
        boots.sort();
        for boot in boots {
            let lcov = boot.join(super::LCOV);
            if !lcov.is_file() {
                continue;
            }
            if traced.len() >= MAX_FILES {
                return Err(WhichError::Read {
                    path: run.to_owned(),
                    why: format!("more than {MAX_FILES} lcov files"),
                });
            }
            let text = read_bounded(&lcov)?;
            let name = boot.strip_prefix(run).unwrap_or(&boot).display().to_string();
            traced.push(Traced { boot: name, files: parse(&text) });
        }
    }
    if traced.is_empty() {
        return Err(WhichError::NoRun(run.to_owned()));
    }
    Ok(traced)
}

fn read_bounded(path: &Path) -> Result<String, WhichError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| WhichError::Read { path: path.to_owned(), why: e.to_string() })?;
    let mut text = String::new();
    file.take(MAX_LCOV + 1)
        .read_to_string(&mut text)
        .map_err(|e| WhichError::Read { path: path.to_owned(), why: e.to_string() })?;
    if text.len() as u64 > MAX_LCOV {
        return Err(WhichError::Read { path: path.to_owned(), why: format!("larger than {MAX_LCOV} bytes") });
    }
    Ok(text)
}

/// An lcov tracefile's `SF` and `DA` records (the rest is skipped).
pub fn parse(text: &str) -> Vec<(String, Vec<(u32, u64)>)> {
    let mut files: Vec<(String, Vec<(u32, u64)>)> = Vec::new();
    for line in text.lines() {
        if let Some(file) = line.strip_prefix("SF:") {
            files.push((file.to_string(), Vec::new()));
        } else if let Some(da) = line.strip_prefix("DA:") {
            let mut fields = da.split(',');
            let parsed = fields.next().and_then(|l| l.parse().ok()).zip(fields.next().and_then(|c| c.parse().ok()));
            if let (Some(entry), Some((_, rows))) = (parsed, files.last_mut()) {
                rows.push(entry);
            }
        }
    }
    files
}

/// Run the command on `args` (the words after `coverage`); never returns.
pub fn main(root: &Path, args: &[OsString]) -> ! {
    let words = std::iter::once(OsString::from("testbench coverage")).chain(args.iter().cloned());
    let flags = Flags::try_parse_from(words).unwrap_or_else(|e| e.exit());
    let run = flags.run.unwrap_or_else(|| root.join("target/testbench/last"));
    match which(&run, &flags.which) {
        Ok((path, boots)) if boots.is_empty() => {
            println!(
                "{path}:{}: reached by no boot of {}",
                flags.which.rsplit(':').next().unwrap_or(""),
                run.display()
            );
            std::process::exit(crate::error::EXIT_PASSED)
        }
        Ok((path, boots)) => {
            let line = flags.which.rsplit(':').next().unwrap_or("");
            println!("{path}:{line}: reached by {} boot(s) of {}:", boots.len(), run.display());
            for boot in boots {
                println!("  {boot}");
            }
            std::process::exit(crate::error::EXIT_PASSED)
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(error.status())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(boots: &[(&str, &str)]) -> tempfile::TempDir {
        let run = tempfile::tempdir().unwrap();
        for (boot, lcov) in boots {
            let dir = run.path().join(boot);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(super::super::LCOV), lcov).unwrap();
        }
        run
    }

    #[test]
    fn the_boots_that_reach_a_line_are_named_and_the_others_not() {
        let a = "TN:a\nSF:/w/guest/kernel/src/mm.rs\nDA:10,1\nDA:12,0\nLF:2\nLH:1\nend_of_record\n";
        let b = "TN:b\nSF:/w/guest/kernel/src/mm.rs\nDA:10,0\nDA:12,1\nLF:2\nLH:1\nend_of_record\nSF:/w/guest/loader/src/mm.rs\nDA:3,1\nend_of_record\n";
        let run = run_with(&[("case-a/rv64-smp1", a), ("case-b/rv64-smp2", b)]);
        let (path, boots) = which(run.path(), "kernel/src/mm.rs:10").unwrap();
        assert_eq!((path.as_str(), boots), ("/w/guest/kernel/src/mm.rs", vec!["case-a/rv64-smp1".to_string()]));
        assert_eq!(which(run.path(), "kernel/src/mm.rs:12").unwrap().1, vec!["case-b/rv64-smp2".to_string()]);
        let ambiguous = which(run.path(), "mm.rs:10").unwrap_err();
        assert!(matches!(ambiguous, WhichError::Ambiguous { count: 2, .. }), "{ambiguous}");
        let no_line = which(run.path(), "kernel/src/mm.rs:11").unwrap_err().to_string();
        assert!(no_line.contains("no code at line 11") && no_line.contains("10 and 12"), "{no_line}");
        assert!(matches!(which(run.path(), "proc.rs:1"), Err(WhichError::NoFile { .. })));
        assert!(matches!(which(run.path(), "src/m.rs:1"), Err(WhichError::NoFile { .. })), "whole components only");
        assert!(matches!(which(run.path(), "mm.rs"), Err(WhichError::Spec(_))));
        assert!(matches!(which(run.path(), "mm.rs:0"), Err(WhichError::Spec(_))));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(which(empty.path(), "mm.rs:1"), Err(WhichError::NoRun(_))));
    }
}
