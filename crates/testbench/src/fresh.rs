//! A guest build known fresh without asking cargo: cargo takes about 40 ms to say a
//! build of the guest workspace has nothing to do, three of them for a reference boot,
//! which was most of `cargo testbench`'s start with nothing changed.
//!
//! After a build cargo ran, the bench writes a stamp beside its target directory: the
//! cargo command line, the environment cargo and rustc read (every `CARGO*`, `RUST*`
//! and `RUSTUP*` variable), the executable, and the size, modification time and inode
//! of every input that can change what cargo builds:
//!
//! - every file of the executable's dep-info (`<bin>.d`, cargo's own list of the
//!   sources, build scripts and linker scripts the build read);
//! - every manifest and the lock file of the guest workspace, the cargo configuration
//!   files cargo reads from the bench's working directory and the guest's, and any
//!   toolchain file there;
//! - rustup's settings and each installed toolchain's directory (an update or a new
//!   default moves them);
//! - the executable itself (another run rebuilding it differently changes it).
//!
//! The next build of the same command line takes the executable as it is when the
//! command line, the environment and every input are as the stamp says, and asks cargo
//! otherwise. A stamp is never written when an input changed while cargo ran (its time
//! is not before the build's start): the build may have read the old content.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// The stamps' file names, in the build's own target directory: `<PREFIX><key>.json`,
/// one per command line and environment, so a bench started by `cargo run` (whose
/// environment cargo fills) and the same binary started by hand each keep theirs.
pub const STAMP_PREFIX: &str = "testbench-fresh-";

fn stamp_path(target_dir: &Path, command: &str, env: &[(String, String)]) -> PathBuf {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(command.as_bytes());
    for (key, value) in env {
        hash.update([0]);
        hash.update(key.as_bytes());
        hash.update([0]);
        hash.update(value.as_bytes());
    }
    let key: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    target_dir.join(format!("{STAMP_PREFIX}{key}.json"))
}

/// One input as it was seen: a path and its size, modification time and inode.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone)]
pub struct Input {
    path: PathBuf,
    /// `None`: the file was absent (a configuration file that may appear).
    seen: Option<(u64, i64, i64, u64)>,
}

#[derive(Serialize, Deserialize, Debug)]
struct Stamp {
    command: String,
    env: Vec<(String, String)>,
    executable: PathBuf,
    inputs: Vec<Input>,
}

fn seen(path: &Path) -> Option<(u64, i64, i64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// Each path as it is now, or `None` when one of them changed at or after `started`
/// (what read it then may have read the old content).
pub fn snapshot(paths: Vec<PathBuf>, started: SystemTime, written_by_the_work: Option<&Path>) -> Option<Vec<Input>> {
    let start = started.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        let seen = seen(&path);
        if let Some((_, secs, nanos, _)) = seen {
            let changed = std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
            if changed >= start && Some(path.as_path()) != written_by_the_work {
                return None;
            }
        }
        inputs.push(Input { path, seen });
    }
    Some(inputs)
}

/// Whether every input is still as it was seen.
pub fn unchanged(inputs: &[Input]) -> bool {
    inputs.iter().all(|input| seen(&input.path) == input.seen)
}

/// The cargo configuration and toolchain files cargo reads from `dirs` (each may be
/// absent: one that appears is a change).
pub fn cargo_config_files(dirs: &[&Path]) -> Vec<PathBuf> {
    let names = [".cargo/config.toml", ".cargo/config", "rust-toolchain", "rust-toolchain.toml"];
    dirs.iter().flat_map(|dir| names.iter().map(move |name| dir.join(name))).collect()
}

/// The environment cargo and rustc read, sorted.
pub fn build_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .filter(|(k, _)| k.starts_with("CARGO") || k.starts_with("RUST"))
        .collect();
    env.sort();
    env
}

/// The files of a dep-info file's first rule (`target: dep dep ...`, `\ ` an escaped
/// space).
fn dep_info(text: &str) -> Vec<PathBuf> {
    let Some(line) = text.lines().next() else { return Vec::new() };
    let Some((_, deps)) = line.split_once(": ") else { return Vec::new() };
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        files.push(PathBuf::from(current));
    }
    files
}

/// Every path whose change can change the build (the module's list), or `None` when the
/// executable's dep-info cannot be read.
fn inputs(root: &Path, guest: &Path, executable: &Path) -> Option<Vec<PathBuf>> {
    let mut paths = dep_info(&std::fs::read_to_string(executable.with_extension("d")).ok()?);
    if paths.is_empty() {
        return None;
    }
    paths.push(executable.to_path_buf());
    paths.extend(cargo_config_files(&[root, guest]));
    paths.push(guest.join("Cargo.toml"));
    paths.push(guest.join("Cargo.lock"));
    // Every member's manifest: a new dependency or feature is a change there.
    for entry in std::fs::read_dir(guest).ok()?.flatten() {
        let manifest = entry.path().join("Cargo.toml");
        if manifest.is_file() {
            paths.push(manifest);
        }
    }
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".rustup")));
    if let Some(rustup) = rustup {
        paths.push(rustup.join("settings.toml"));
        let toolchains = rustup.join("toolchains");
        paths.push(toolchains.clone());
        if let Ok(entries) = std::fs::read_dir(&toolchains) {
            let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            dirs.sort();
            for dir in dirs {
                paths.push(dir.join("bin/rustc"));
                paths.push(dir);
            }
        }
    }
    Some(paths)
}

/// The executable a stamp in `target_dir` vouches for, if `command` in this environment
/// would find nothing to do by the stamp's account.
pub fn check(target_dir: &Path, command: &str, env: &[(String, String)]) -> Option<PathBuf> {
    let path = stamp_path(target_dir, command, env);
    let stamp: Stamp = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    if stamp.command != command || stamp.env != env {
        return None;
    }
    unchanged(&stamp.inputs).then_some(stamp.executable)
}

/// Write the stamp for a build cargo just made, unless an input changed after `started`
/// or cannot be listed; any earlier stamp is removed first, so a stale one never stands.
pub fn write(
    target_dir: &Path,
    root: &Path,
    guest: &Path,
    command: &str,
    env: &[(String, String)],
    executable: &Path,
    started: SystemTime,
) {
    let path = stamp_path(target_dir, command, env);
    let _ = std::fs::remove_file(&path);
    let Some(paths) = inputs(root, guest, executable) else { return };
    // The executable is written by the build itself.
    let Some(inputs) = snapshot(paths, started, Some(executable)) else { return };
    let stamp = Stamp { command: command.into(), env: env.to_vec(), executable: executable.into(), inputs };
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    if let Ok(text) = serde_json::to_string(&stamp) {
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake build: a guest workspace with one member, an executable and its dep-info.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let guest = root.join("guest");
        std::fs::create_dir_all(guest.join("k/src")).unwrap();
        std::fs::write(guest.join("Cargo.toml"), "[workspace]").unwrap();
        std::fs::write(guest.join("Cargo.lock"), "").unwrap();
        std::fs::write(guest.join("k/Cargo.toml"), "[package]").unwrap();
        std::fs::write(guest.join("k/src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(guest.join("k/src/a b.rs"), "").unwrap();
        let target = root.join("target/k");
        std::fs::create_dir_all(&target).unwrap();
        let exe = target.join("k");
        std::fs::write(&exe, "elf").unwrap();
        let main = guest.join("k/src/main.rs");
        let spaced = guest.join("k/src/a b.rs").display().to_string().replace(' ', "\\ ");
        std::fs::write(target.join("k.d"), format!("{}: {} {spaced}\n", exe.display(), main.display())).unwrap();
        (tmp, root, guest, exe)
    }

    /// A build start after every file the test wrote.
    fn after_the_writes() -> SystemTime {
        SystemTime::now() + std::time::Duration::from_secs(1)
    }

    #[test]
    fn a_stamp_vouches_until_a_source_a_manifest_the_command_or_the_environment_changes() {
        let (_tmp, root, guest, exe) = setup();
        let target = exe.parent().unwrap();
        let env = vec![("CARGO_X".to_string(), "1".to_string())];
        write(target, &root, &guest, "cargo build k", &env, &exe, after_the_writes());
        assert_eq!(check(target, "cargo build k", &env), Some(exe.clone()));
        assert_eq!(check(target, "cargo build k --features f", &env), None);
        assert_eq!(check(target, "cargo build k", &[]), None);
        for changed in
            [guest.join("k/src/main.rs"), guest.join("k/src/a b.rs"), guest.join("k/Cargo.toml"), exe.clone()]
        {
            write(target, &root, &guest, "cargo build k", &env, &exe, after_the_writes());
            assert!(check(target, "cargo build k", &env).is_some());
            std::fs::write(&changed, "changed, and longer than before").unwrap();
            assert_eq!(check(target, "cargo build k", &env), None, "{} changed", changed.display());
        }
        // A configuration file that appears is a change too.
        write(target, &root, &guest, "cargo build k", &env, &exe, after_the_writes());
        std::fs::create_dir_all(root.join(".cargo")).unwrap();
        std::fs::write(root.join(".cargo/config.toml"), "[build]").unwrap();
        assert_eq!(check(target, "cargo build k", &env), None);
    }

    #[test]
    fn no_stamp_is_written_for_a_build_an_input_changed_during() {
        let (_tmp, root, guest, exe) = setup();
        let target = exe.parent().unwrap();
        write(target, &root, &guest, "c", &[], &exe, after_the_writes());
        assert!(check(target, "c", &[]).is_some());
        // The sources were written after this build started: the old stamp goes too.
        let started = SystemTime::now() - std::time::Duration::from_secs(5);
        write(target, &root, &guest, "c", &[], &exe, started);
        assert!(!stamp_path(target, "c", &[]).exists());
        assert_eq!(check(target, "c", &[]), None);
    }

    #[test]
    fn dep_info_reads_escaped_spaces() {
        assert_eq!(
            dep_info("/t/k: /s/a.rs /s/b\\ c.rs\n\n/s/a.rs:\n"),
            [PathBuf::from("/s/a.rs"), PathBuf::from("/s/b c.rs")]
        );
    }
}
