//! A guest build known fresh without asking cargo (the checks are `crates/fresh`'s): cargo takes about 40 ms to say a
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

use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use testbench_fresh::build_env;

/// The stamps' file names, in the build's own target directory: `<PREFIX><key>.stamp`,
/// one per command line and environment, so a bench started by `cargo run` (whose
/// environment cargo fills) and the same binary started by hand each keep theirs.
pub const STAMP_PREFIX: &str = "testbench-fresh-";

fn key_lines(command: &str, env: &[(String, String)]) -> Vec<String> {
    std::iter::once(command.to_string()).chain(env.iter().map(|(k, v)| format!("{k}={v}"))).collect()
}

fn stamp_path(target_dir: &Path, key: &[String]) -> PathBuf {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    for line in key {
        hash.update(line.as_bytes());
        hash.update([0]);
    }
    let name: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    target_dir.join(format!("{STAMP_PREFIX}{name}.stamp"))
}

/// Every path whose change can change the build (the module's list), the executable
/// first, or `None` when the executable's dep-info cannot be read.
fn inputs(root: &Path, guest: &Path, executable: &Path) -> Option<Vec<PathBuf>> {
    let mut paths = testbench_fresh::build_inputs(executable, guest, &[root, guest])?;
    // Every member's manifest: a new dependency or feature is a change there.
    paths.extend(testbench_fresh::members(guest).into_iter().map(|member| member.join("Cargo.toml")));
    Some(paths)
}

/// The executable a stamp in `target_dir` vouches for, if `command` in this environment
/// would find nothing to do by the stamp's account.
pub fn check(target_dir: &Path, command: &str, env: &[(String, String)]) -> Option<PathBuf> {
    let key = key_lines(command, env);
    let text = std::fs::read_to_string(stamp_path(target_dir, &key)).ok()?;
    let (kept, seen) = testbench_fresh::parse_stamp(&text)?;
    if kept != key || !testbench_fresh::unchanged(seen.iter().map(|(p, s)| (p.as_path(), s))) {
        return None;
    }
    seen.first().map(|(executable, _)| executable.clone())
}

/// Write the stamp for a build cargo just made, unless an input changed after `started`
/// or cannot be listed; its earlier stamp is removed first, so a stale one never stands.
pub fn write(
    target_dir: &Path,
    root: &Path,
    guest: &Path,
    command: &str,
    env: &[(String, String)],
    executable: &Path,
    started: SystemTime,
) {
    let key = key_lines(command, env);
    let path = stamp_path(target_dir, &key);
    let _ = std::fs::remove_file(&path);
    let Some(paths) = inputs(root, guest, executable) else { return };
    // The executable is written by the build itself.
    let Some(seen) = testbench_fresh::snapshot(paths, started, Some(executable)) else { return };
    testbench_fresh::write_atomically(&path, &testbench_fresh::stamp_text(&key, &seen));
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
        SystemTime::now() + testbench_fresh::CLOCK_SLACK + std::time::Duration::from_secs(1)
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
        assert!(!stamp_path(target, &key_lines("c", &[])).exists());
        assert_eq!(check(target, "c", &[]), None);
    }
}
