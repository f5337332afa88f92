//! What a recording was made of: the files QEMU booted (the kernel, the initrd, a
//! firmware the case names), each by its role and sha256, kept beside the recording
//! (`replay.guest`). A replay boots what the run built or names now; QEMU replays a
//! recording against whatever it is given, and against another kernel the replay
//! diverges, or stops, with nothing that says why. So `--rr-replay` refuses a recording
//! whose files are not the ones the replay would boot, naming the first that differs
//! (docs/reproducibility.md, docs/debugging.md).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use testbench_case::Firmware;

use super::Machine;

/// The file beside a recording that says what it was made of.
pub const GUEST_FILE: &str = "replay.guest";

/// Why a recording cannot be replayed with this boot's files.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("--rr-replay {}: cannot read {}: {source} (a recording is kept with what it booted since the bench records it; record the failure again)", .recording.display(), .guest.display())]
    Unread { recording: PathBuf, guest: PathBuf, source: std::io::Error },
    #[error("--rr-replay {}: cannot read the {role} the replay would boot, {}: {source}", .recording.display(), .path.display())]
    Unreadable { recording: PathBuf, role: &'static str, path: PathBuf, source: std::io::Error },
    #[error("--rr-replay {}: recorded with another {role} than the replay would boot ({}: sha256 {now}, recorded {then}): the recording replays only the {role} it was made with", .recording.display(), .path.display())]
    Differs { recording: PathBuf, role: &'static str, path: PathBuf, now: String, then: String },
    #[error("--rr-replay {}: recorded with {what}, and the replay boots {now}", .recording.display())]
    Shape { recording: PathBuf, what: String, now: String },
}

/// The files QEMU boots for `machine`, by role (paths below `root` when relative).
fn files(machine: &Machine, root: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut files = Vec::new();
    if let Some(kernel) = &machine.kernel {
        files.push(("kernel", root.join(kernel)));
    }
    if let Some(media) = &machine.media {
        if let Some((image, _)) = &media.image {
            files.push(("image", root.join(image)));
        }
        if let Some(cdrom) = &media.cdrom {
            files.push(("cdrom", root.join(cdrom)));
        }
    }
    if let Some(initrd) = &machine.initrd {
        files.push(("initrd", root.join(initrd)));
    }
    if let Firmware::Path(path) = &machine.firmware {
        files.push(("firmware", root.join(path)));
    }
    files
}

fn sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// The lines `<role> <sha256>` of the files QEMU boots for `machine`.
fn describe(machine: &Machine, root: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    for (role, path) in files(machine, root) {
        text.push_str(&format!("{role} {}\n", sha256(&path)?));
    }
    Ok(text)
}

/// Keep, beside a recording about to be made in `dir`, what it is made of.
pub fn keep(machine: &Machine, root: &Path, dir: &Path) -> Result<(), super::Trouble> {
    let path = dir.join(GUEST_FILE);
    let text = describe(machine, root).map_err(|e| super::Trouble::file("read a file QEMU boots for", &path, e))?;
    std::fs::write(&path, text).map_err(|e| super::Trouble::file("write", &path, e))
}

/// Whether `recording` was made of the files the replay of `machine` would boot.
pub fn check(recording: &Path, machine: &Machine, root: &Path) -> Result<(), RecordingError> {
    let guest = recording.with_file_name(GUEST_FILE);
    let kept = std::fs::read_to_string(&guest).map_err(|source| RecordingError::Unread {
        recording: recording.to_owned(),
        guest: guest.clone(),
        source,
    })?;
    let then: Vec<(&str, &str)> = kept.lines().filter_map(|line| line.split_once(' ')).collect();
    let now = files(machine, root);
    let roles = |list: Vec<&str>| list.join(", ");
    if then.iter().map(|(role, _)| *role).ne(now.iter().map(|(role, _)| *role)) {
        return Err(RecordingError::Shape {
            recording: recording.to_owned(),
            what: roles(then.iter().map(|(role, _)| *role).collect()),
            now: roles(now.iter().map(|(role, _)| *role).collect()),
        });
    }
    for ((role, path), (_, recorded)) in now.into_iter().zip(then) {
        let hash = sha256(&path).map_err(|source| RecordingError::Unreadable {
            recording: recording.to_owned(),
            role,
            path: path.clone(),
            source,
        })?;
        if hash != recorded {
            return Err(RecordingError::Differs {
                recording: recording.to_owned(),
                role,
                path,
                now: hash,
                then: recorded.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(kernel: &Path, initrd: &Path) -> Machine {
        Machine {
            kernel: Some(kernel.to_owned()),
            initrd: Some(initrd.to_owned()),
            icount: Some("shift=3".into()),
            ..crate::boot::machine::tests::spec()
        }
    }

    /// Self-check: a recording replays with the files it was made of, and is refused
    /// with another kernel (naming it and both hashes), with a guest of another shape,
    /// and when what it was made of was not kept.
    #[test]
    fn a_recording_that_does_not_match_its_kernel_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (kernel, initrd) = (tmp.path().join("kernel"), tmp.path().join("initrd"));
        std::fs::write(&kernel, b"kernel one").unwrap();
        std::fs::write(&initrd, b"initrd").unwrap();
        let recorded = machine(&kernel, &initrd);
        keep(&recorded, tmp.path(), tmp.path()).unwrap();
        let recording = tmp.path().join(crate::qemu::RR_FILE);
        check(&recording, &recorded, tmp.path()).unwrap();
        std::fs::write(&kernel, b"kernel two").unwrap();
        let why = check(&recording, &recorded, tmp.path()).unwrap_err().to_string();
        assert!(why.contains("recorded with another kernel than the replay would boot"), "{why}");
        assert!(why.contains(&kernel.display().to_string()), "{why}");
        let bare = Machine { initrd: None, ..recorded };
        let why = check(&recording, &bare, tmp.path()).unwrap_err().to_string();
        assert!(why.ends_with("recorded with kernel, initrd, and the replay boots kernel"), "{why}");
        std::fs::remove_file(tmp.path().join(GUEST_FILE)).unwrap();
        let why = check(&recording, &bare, tmp.path()).unwrap_err().to_string();
        assert!(why.contains("cannot read") && why.contains("record the failure again"), "{why}");
    }
}
