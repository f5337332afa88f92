//! Run directories: `target/testbench/run-<pid>-<time>/`, one per invocation.
//!
//! Two runs at once in one worktree never share a file: each has its own directory, named
//! by its PID and start time, and writes only there (and to `last`, which it replaces
//! atomically). Pruning keeps the newest few and never removes the directory of a run
//! whose process is still alive.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How many run directories are kept (the newest ones; live runs are never removed).
pub const KEEP_RUNS: usize = 8;

pub fn create(root: &Path) -> std::io::Result<PathBuf> {
    let base = root.join("target/testbench");
    std::fs::create_dir_all(&base)?;
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let dir = base.join(format!("run-{}-{secs}", std::process::id()));
    std::fs::create_dir(&dir)?;
    // `last` names the newest run: a symlink made beside it and renamed over it, so a
    // reader sees the old run or the new one, never no link.
    let tmp = base.join(format!(".last-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(dir.file_name().unwrap(), &tmp)?;
    std::fs::rename(&tmp, base.join("last"))?;
    prune(&base, &dir);
    Ok(dir)
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

fn prune(base: &Path, own: &Path) {
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
    for (_, pid, path) in runs.into_iter().skip(KEEP_RUNS) {
        if path == own || pid_alive(pid) {
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
    }
}
