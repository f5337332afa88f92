//! Other benches' boots beside this run's, under q (docs/q.md).
//!
//! A bench under a q lease that shares the lock `qemu` (`q run --share qemu`, or a
//! target of a whole set, whose lease inherited it: `Q_INHERITED`) may have another
//! bench booting beside any of its boots, and cannot know it did not. So there, every
//! boot counts as beside other work ([`super::alone`]), and a rerun alone must shut out
//! the other benches' boots too, not only this run's. Two lock files in q's directory
//! do that, one per user as q's directory is:
//!
//! - `boots.lock`: each boot holds it shared while it runs; a rerun alone holds it
//!   exclusively, so it waits for every bench's running boots and none starts beside it.
//! - `turnstile.lock`: a boot passes through it (takes it shared and lets go) before it
//!   takes `boots.lock`; a rerun alone holds it exclusively while it waits. A stream of
//!   other benches' boots then cannot starve the rerun: flock(2) alone prefers nobody.
//!
//! Each take opens the file anew (flock belongs to the open file) and polls a
//! non-blocking flock, under a deadline that names what it waited for.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;

/// The lock every boot of a bench under q holds.
pub const QEMU_LOCK: &str = "qemu";

/// The longest a boot or a rerun waits for the other benches' boots: longer than any
/// one case's deadline.
const WAIT: Duration = Duration::from_secs(3600);

pub struct OtherBenches {
    boots: PathBuf,
    turnstile: PathBuf,
}

/// A lock file held until dropped.
pub struct HeldLock(#[allow(dead_code)] File);

fn names(var: &str) -> Vec<String> {
    std::env::var(var).unwrap_or_default().split(',').map(String::from).collect()
}

impl OtherBenches {
    /// From q's environment: `Some` when this bench runs in a q lease that shares
    /// `qemu` with other benches. A q directory the lock files cannot be made in is
    /// refused, in words.
    pub fn from_env() -> Result<Option<OtherBenches>, LockError> {
        let (Some(dir), Some(_)) = (std::env::var_os("Q_DIR"), std::env::var_os("Q_JOB")) else { return Ok(None) };
        let shared = names("Q_SHARE").iter().chain(&names("Q_INHERITED")).any(|l| l == QEMU_LOCK);
        if !shared {
            return Ok(None);
        }
        let dir = PathBuf::from(dir);
        let others = OtherBenches { boots: dir.join("boots.lock"), turnstile: dir.join("turnstile.lock") };
        for path in [&others.boots, &others.turnstile] {
            open(path).map_err(|source| LockError::UnderQ { dir: dir.clone(), path: path.clone(), source })?;
        }
        Ok(Some(others))
    }

    /// Hold the boots' lock shared for one boot, once no rerun alone waits.
    pub fn boot(&self) -> Result<HeldLock, LockError> {
        drop(take(&self.turnstile, FlockOperation::NonBlockingLockShared, "a rerun alone of another bench under q")?);
        take(&self.boots, FlockOperation::NonBlockingLockShared, "a rerun alone of another bench under q").map(HeldLock)
    }

    /// Hold both locks exclusively: no other bench's boot runs until they are dropped.
    pub fn alone(&self) -> Result<(HeldLock, HeldLock), LockError> {
        let turnstile = take(&self.turnstile, FlockOperation::NonBlockingLockExclusive, "another rerun alone under q")?;
        let boots = take(&self.boots, FlockOperation::NonBlockingLockExclusive, "the other benches' boots under q")?;
        Ok((HeldLock(turnstile), HeldLock(boots)))
    }
}

fn open(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path)
}

/// A lock file of q's directory that could not be opened, locked, or taken in time.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("under q (Q_DIR={}): cannot open {}: {source}", dir.display(), path.display())]
    UnderQ {
        dir: PathBuf,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: rustix::io::Errno },
    #[error("waited {} s for {what} to end ({}); gave up", WAIT.as_secs(), path.display())]
    Waited { what: &'static str, path: PathBuf },
}

fn take(path: &std::path::Path, op: FlockOperation, what: &'static str) -> Result<File, LockError> {
    let file = open(path).map_err(|source| LockError::Open { path: path.to_path_buf(), source })?;
    let start = Instant::now();
    loop {
        match rustix::fs::flock(&file, op) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
            Err(source) => return Err(LockError::Lock { path: path.to_path_buf(), source }),
        }
        if start.elapsed() >= WAIT {
            return Err(LockError::Waited { what, path: path.to_path_buf() });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rerun_alone_waits_for_the_boots_and_holds_new_ones_off() {
        let dir = tempfile::tempdir().unwrap();
        let others =
            OtherBenches { boots: dir.path().join("boots.lock"), turnstile: dir.path().join("turnstile.lock") };
        let one = others.boot().unwrap();
        let two = others.boot().unwrap();
        let order = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            let alone = scope.spawn(|| {
                let held = others.alone().unwrap();
                order.lock().unwrap().push("alone");
                std::thread::sleep(Duration::from_millis(50));
                order.lock().unwrap().push("alone ends");
                drop(held);
            });
            // Once the rerun holds the turnstile, a boot that comes waits for it.
            let probe = open(&others.turnstile).unwrap();
            while rustix::fs::flock(&probe, FlockOperation::NonBlockingLockShared).is_ok() {
                rustix::fs::flock(&probe, FlockOperation::Unlock).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            let late = scope.spawn(|| {
                let held = others.boot().unwrap();
                order.lock().unwrap().push("late boot");
                drop(held);
            });
            std::thread::sleep(Duration::from_millis(50));
            order.lock().unwrap().push("boots end");
            drop((one, two));
            alone.join().unwrap();
            late.join().unwrap();
        });
        assert_eq!(*order.lock().unwrap(), ["boots end", "alone", "alone ends", "late boot"]);
    }
}
