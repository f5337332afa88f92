//! Where the daemon lives and who may talk to it.
//!
//! The daemon's directory is `$Q_DIR`, else `$XDG_RUNTIME_DIR/testbench-q`, else
//! `/tmp/testbench-q-<uid>`. It holds the socket, the lock that keeps one daemon per
//! directory, and the saved state. It must be a real directory (not a link) owned by
//! the user and closed to everyone else (no group or other bits): another local user
//! could otherwise plant a socket of their own there and answer for the daemon. The
//! daemon checks each peer's user too (SO_PEERCRED), so a socket reached some other
//! way still answers its owner alone.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The daemon's directory, as the environment names it.
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("Q_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&runtime).join("testbench-q");
    }
    PathBuf::from(format!("/tmp/testbench-q-{}", rustix::process::getuid().as_raw()))
}

/// Make `dir` if it is missing (0700), and refuse it unless it is a directory of this
/// user's that nobody else may enter.
pub fn private(dir: &Path) -> Result<(), PlaceError> {
    let at = || dir.to_path_buf();
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(PlaceError::Make { dir: at(), source }),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|source| PlaceError::Read { dir: at(), source })?;
    let me = rustix::process::getuid().as_raw();
    if !meta.is_dir() {
        return Err(PlaceError::NotADirectory { dir: at() });
    }
    if meta.uid() != me {
        return Err(PlaceError::NotYours { dir: at(), owner: meta.uid(), me });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(PlaceError::Open { dir: at(), mode: meta.mode() & 0o777 });
    }
    Ok(())
}

/// q's directory that is not private to this user ([`private`]).
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error("cannot make q's directory {}: {source}", dir.display())]
    Make { dir: PathBuf, source: std::io::Error },
    #[error("cannot read q's directory {}: {source}", dir.display())]
    Read { dir: PathBuf, source: std::io::Error },
    #[error("q's directory {} is not a directory (a link or a file is never followed)", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("q's directory {} belongs to uid {owner}, not to you (uid {me})", dir.display())]
    NotYours { dir: PathBuf, owner: u32, me: u32 },
    #[error("q's directory {} has mode {mode:o}: others may enter it; it must be 0700 (chmod 700 {})", dir.display(), dir.display())]
    Open { dir: PathBuf, mode: u32 },
}

pub fn socket(dir: &Path) -> PathBuf {
    dir.join("sock")
}

/// A process's state (field 3 of /proc/PID/stat) and start time in clock ticks after
/// boot (field 22), or `None` when it no longer runs.
fn state_and_start(pid: i32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count from
    // the last ')'. Field 3 is the first after it; field 22 is the 20th.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.to_string();
    Some((state, fields.nth(18)?.parse().ok()?))
}

/// A process's start time in clock ticks after boot, or `None` when it no longer runs.
/// With the PID it names one process for good.
pub fn start_time(pid: i32) -> Option<u64> {
    state_and_start(pid).map(|(_, start)| start)
}

/// Whether the process `pid` that started at `start` still runs (a zombie counts as
/// ended: it holds nothing any more), from one read of its stat.
pub fn alive(pid: i32, start: u64) -> bool {
    state_and_start(pid).is_some_and(|(state, at)| at == start && state != "Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_others_may_enter_or_a_link_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("q");
        private(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = private(&dir).unwrap_err();
        assert!(matches!(open, PlaceError::Open { mode: 0o755, .. }), "{open}");
        assert!(open.to_string().contains("has mode 755: others may enter it"));
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let linked = private(&link).unwrap_err();
        assert!(matches!(&linked, PlaceError::NotADirectory { dir } if *dir == link), "{linked}");
        assert!(linked.to_string().contains("is not a directory"));
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id() as i32;
        let start = start_time(me).expect("this process has a start time");
        assert!(alive(me, start));
        assert!(!alive(me, start + 1));
        assert_eq!(start_time(i32::MAX), None);
    }
}
