//! Run directories: `target/testbench/run-<pid>-<time>/`, one per invocation.
//!
//! Two runs at once in one worktree never share a file: each has its own directory, named
//! by its PID and start time, and writes only there (and to `last`, which it replaces
//! atomically). Pruning keeps the newest few, and never removes the directory of a run
//! whose process is still alive nor of one younger than `MIN_AGE`, so the `logs:` path a
//! run printed stays good for at least that long whatever else runs in the worktree.
//!
//! `last` is whoever started last: each run directory holds `invocation.json` (the
//! command line, PID, host, start time and working directory) saying whose run it is.
//!
//! Several machines may share one worktree (a `--slurm` run's tasks write into its
//! directory from other nodes; two nodes may each start a run). A PID says nothing about
//! another machine, so a run also keeps a heartbeat: its `alive` file, touched every
//! `HEARTBEAT` by the run and by each of its Slurm tasks. A run is live when its heartbeat
//! is fresher than `HEARTBEAT_STALE`, or it is this host's and its PID runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::BenchError;

/// How many run directories are kept beyond the young and the live ones (the newest).
pub const KEEP_RUNS: usize = 8;
/// A run directory younger than this is never pruned.
pub const MIN_AGE: Duration = Duration::from_secs(3600);
/// How often a run (and each of its Slurm tasks) touches its `alive` file.
pub const HEARTBEAT: Duration = Duration::from_secs(60);
/// A heartbeat older than this no longer keeps a run from being pruned.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(600);
/// The heartbeat file in a run directory.
pub const ALIVE: &str = "alive";

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
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // Another machine's run may hold this PID and second: the next free second is ours.
    let mut secs = now;
    let dir = loop {
        let dir = base.join(format!("run-{}-{secs}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && secs < now + 100 => secs += 1,
            Err(e) => return Err(e),
        }
    };
    let host = hostname();
    let invocation = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>(),
        "pid": std::process::id(),
        "host": host,
        "started_unix_secs": secs,
        "cwd": std::env::current_dir().ok(),
    });
    std::fs::write(dir.join("invocation.json"), format!("{invocation:#}\n"))?;
    heartbeat(&dir);
    // `last` names the newest run: a symlink made beside it and renamed over it, so a
    // reader sees the old run or the new one, never no link.
    let tmp = base.join(format!(".last-{host}-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(dir.file_name().unwrap(), &tmp)?;
    std::fs::rename(&tmp, base.join("last"))?;
    let own = dir.clone();
    let prune = std::thread::spawn(move || prune(&base, &own, secs));
    Ok((dir, prune))
}

/// This machine's name, as the kernel has it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|name| name.trim().to_string()).unwrap_or_default()
}

/// Keep `dir`'s heartbeat for as long as this process lives: its `alive` file touched
/// now and every [`HEARTBEAT`] on a thread of its own.
pub fn heartbeat(dir: &Path) {
    let alive = dir.join(ALIVE);
    let touch = move || std::fs::File::create(&alive).and_then(|file| file.set_modified(SystemTime::now()));
    let _ = touch();
    let _ = std::thread::Builder::new().name("heartbeat".into()).spawn(move || loop {
        std::thread::sleep(HEARTBEAT);
        let _ = touch();
    });
}

/// Whether a run directory is live: a fresh heartbeat, or a PID that runs here.
fn live(path: &Path, pid: i32, host: &str) -> bool {
    let fresh = std::fs::metadata(path.join(ALIVE))
        .and_then(|m| m.modified())
        .is_ok_and(|touched| touched.elapsed().unwrap_or_default() < HEARTBEAT_STALE);
    if fresh {
        return true;
    }
    // A run from before the host was written down is taken for this host's.
    let runs_here = std::fs::read_to_string(path.join("invocation.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|invocation| invocation["host"].as_str().map(|h| h == host))
        .unwrap_or(true);
    runs_here && pid_alive(pid)
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
    let host = hostname();
    for (secs, pid, path) in runs.into_iter().skip(KEEP_RUNS) {
        let young = now_secs.saturating_sub(secs) < MIN_AGE.as_secs();
        if path == own || young || live(&path, pid, &host) {
            continue;
        }
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// Where a rerun boot's first attempt is kept: beside its directory, `.beside-others`
/// appended.
pub fn first_attempt_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".beside-others");
    dir.with_file_name(name)
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

    #[test]
    fn another_hosts_run_lives_by_its_heartbeat_not_by_a_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("target/testbench");
        std::fs::create_dir_all(&base).unwrap();
        let old = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - MIN_AGE.as_secs() - 60;
        let stale = SystemTime::now() - HEARTBEAT_STALE - Duration::from_secs(60);
        let run = |name: &str, host: &str, beat: Option<SystemTime>| {
            let dir = base.join(name);
            std::fs::create_dir(&dir).unwrap();
            let invocation = serde_json::json!({ "host": host, "pid": 1 });
            std::fs::write(dir.join("invocation.json"), invocation.to_string()).unwrap();
            if let Some(when) = beat {
                std::fs::File::create(dir.join(ALIVE)).unwrap().set_modified(when).unwrap();
            }
        };
        let me = std::process::id();
        // Another node's run whose PID is dead here, beating: kept.
        run(&format!("run-4999999-{old}"), "another-node", Some(SystemTime::now()));
        // Another node's run whose PID happens to run here (ours), its heartbeat stale: pruned.
        run(&format!("run-{me}-{}", old - 1), "another-node", Some(stale));
        // This host's run, PID ours, no heartbeat: kept.
        run(&format!("run-{me}-{}", old - 2), &hostname(), None);
        // Enough newer dead runs that all three are past the count.
        for i in 0..KEEP_RUNS as u64 {
            std::fs::create_dir(base.join(format!("run-4999998-{}", old + 1 + i))).unwrap();
        }
        create(tmp.path()).unwrap();
        assert!(base.join(format!("run-4999999-{old}")).exists(), "a beating run of another node was pruned");
        assert!(!base.join(format!("run-{me}-{}", old - 1)).exists(), "another node's PID was taken for this one's");
        assert!(base.join(format!("run-{me}-{}", old - 2)).exists(), "this host's live run was pruned");
        let last = base.join("last");
        assert!(last.join(ALIVE).is_file(), "the new run has no heartbeat");
        let invocation: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(last.join("invocation.json")).unwrap()).unwrap();
        assert_eq!(invocation["host"], hostname());
    }

    #[test]
    fn a_taken_name_moves_the_run_to_the_next_second() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("target/testbench");
        std::fs::create_dir_all(&base).unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        // Another node's run with our PID, this second and the next few.
        for secs in now..now + 3 {
            std::fs::create_dir(base.join(format!("run-{}-{secs}", std::process::id()))).unwrap();
        }
        let dir = create(tmp.path()).unwrap();
        let (pid, secs) = parse_name(&dir.file_name().unwrap().to_string_lossy()).unwrap();
        assert_eq!(pid as u32, std::process::id());
        assert!(secs >= now + 3, "{}", dir.display());
    }
}
