//! Run directories: `target/testbench/run-<pid>-<time>/`, one per invocation.
//!
//! Two runs at once in one worktree never share a file: each has its own directory, named
//! by its PID and start time, and writes only there (and to `last`, which it replaces
//! atomically). Pruning keeps the newest few, and never removes the directory of a run
//! whose process is still alive nor of one younger than `MIN_AGE`, so the `logs:` path a
//! run printed stays good for at least that long whatever else runs in the worktree.
//!
//! `last` is whoever started last: each run directory holds `invocation.json` (the
//! command line, PID, start time and working directory) saying whose run it is.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::BenchError;

/// How many run directories are kept beyond the young and the live ones (the newest).
pub const KEEP_RUNS: usize = 8;
/// A run directory younger than this is never pruned.
pub const MIN_AGE: Duration = Duration::from_secs(3600);

/// Make this run's directory, its `invocation.json` and `last`, and prune the old ones.
pub fn create(root: &Path) -> Result<PathBuf, BenchError> {
    let (dir, prune) = create_pruning_aside(root)?;
    let _ = prune.join();
    Ok(dir)
}

/// [`create`], pruning the old runs on a thread of its own, which the run joins before
/// it ends: removing a run's files (its builds' copies among them) is work a boot need
/// not wait for.
pub fn create_pruning_aside(root: &Path) -> Result<(PathBuf, std::thread::JoinHandle<()>), BenchError> {
    make(root).map_err(|error| {
        BenchError::io(format!("failed to create a run directory under {}/target/testbench", root.display()), error)
    })
}

fn make(root: &Path) -> std::io::Result<(PathBuf, std::thread::JoinHandle<()>)> {
    let base = root.join("target/testbench");
    std::fs::create_dir_all(&base)?;
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let dir = base.join(format!("run-{}-{secs}", std::process::id()));
    std::fs::create_dir(&dir)?;
    let invocation = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>(),
        "pid": std::process::id(),
        "started_unix_secs": secs,
        "cwd": std::env::current_dir().ok(),
    });
    std::fs::write(dir.join("invocation.json"), format!("{invocation:#}\n"))?;
    // `last` names the newest run: a symlink made beside it and renamed over it, so a
    // reader sees the old run or the new one, never no link.
    let tmp = base.join(format!(".last-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(dir.file_name().unwrap(), &tmp)?;
    std::fs::rename(&tmp, base.join("last"))?;
    let own = dir.clone();
    let prune = std::thread::spawn(move || prune(&base, &own, secs));
    Ok((dir, prune))
}

pub fn pid_alive(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid).is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

/// Parse `run-<pid>-<secs>`.
pub fn parse_name(name: &str) -> Option<(i32, u64)> {
    let rest = name.strip_prefix("run-")?;
    let (pid, secs) = rest.split_once('-')?;
    Some((pid.parse().ok()?, secs.parse().ok()?))
}

fn prune(base: &Path, own: &Path, now_secs: u64) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let mut runs: Vec<(u64, i32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (pid, secs) = parse_name(&name)?;
            Some((secs, pid, e.path()))
        })
        .collect();
    runs.sort_by(|a, b| b.0.cmp(&a.0).then(b.2.cmp(&a.2)));
    for (secs, pid, path) in runs.into_iter().skip(KEEP_RUNS) {
        let young = now_secs.saturating_sub(secs) < MIN_AGE.as_secs();
        if path == own || young || pid_alive(pid) {
            continue;
        }
        let _ = std::fs::remove_dir_all(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_runs_are_pruned_but_live_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("target/testbench");
        std::fs::create_dir_all(&base).unwrap();
        // Dead PIDs are above the kernel's pid_max (4194304 at most).
        for secs in 0..12 {
            std::fs::create_dir(base.join(format!("run-4999999-{secs}"))).unwrap();
        }
        // A live run, older than all: our own PID.
        std::fs::create_dir(base.join(format!("run-{}-0", std::process::id()))).unwrap();
        let dir = create(tmp.path()).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("run-"))
            .collect();
        left.sort();
        assert!(left.contains(&format!("run-{}-0", std::process::id())), "a live run was pruned: {left:?}");
        assert!(left.contains(&dir.file_name().unwrap().to_string_lossy().into_owned()));
        assert_eq!(left.len(), KEEP_RUNS + 1, "{left:?}");
        assert_eq!(std::fs::read_link(base.join("last")).unwrap(), PathBuf::from(dir.file_name().unwrap()));
        // `last` says whose run it is.
        let invocation: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(base.join("last/invocation.json")).unwrap()).unwrap();
        assert_eq!(invocation["pid"], std::process::id());
        assert!(invocation["command"].as_array().is_some_and(|c| !c.is_empty()), "{invocation}");
        assert!(invocation["cwd"].is_string() && invocation["started_unix_secs"].is_u64(), "{invocation}");
    }

    #[test]
    fn a_run_younger_than_the_minimum_age_is_never_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("target/testbench");
        std::fs::create_dir_all(&base).unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let young = now - MIN_AGE.as_secs() + 60;
        let old = now - MIN_AGE.as_secs() - 60;
        // Dead runs, more than KEEP_RUNS of them: the oldest young one must stay.
        std::fs::create_dir(base.join(format!("run-4999999-{young}"))).unwrap();
        for i in 0..(KEEP_RUNS as u64 + 2) {
            std::fs::create_dir(base.join(format!("run-4999998-{}", young + 1 + i))).unwrap();
        }
        std::fs::create_dir(base.join(format!("run-4999997-{old}"))).unwrap();
        create(tmp.path()).unwrap();
        assert!(base.join(format!("run-4999999-{young}")).exists(), "a run {}s old was pruned", now - young);
        assert!(!base.join(format!("run-4999997-{old}")).exists(), "a dead run past the age and the count stayed");
    }
}
