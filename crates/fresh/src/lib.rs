//! A cargo build known fresh without asking cargo, for the bench's guest builds
//! (`crates/testbench/src/fresh.rs`) and for the bench itself (`crates/launch`, what
//! `cargo testbench` runs). Cargo takes 40 ms to say a guest build has nothing to do,
//! and `cargo run` 110 ms to say so of the bench; a stat of every input takes about one.
//!
//! What can change a build, each seen as its size, modification time (to the
//! nanosecond) and inode, or as absent: every file of its dep-info (cargo's own list of
//! the sources, build scripts and linker scripts it read), the manifests and lock files,
//! the cargo configuration and toolchain files cargo reads, rustup's settings and each
//! installed toolchain, and the artifact itself; and the environment cargo and rustc
//! read (every `CARGO*` and `RUST*` variable). A snapshot taken after a build is refused
//! when an input changed at or after the build's start (less two seconds: a file's time
//! is the kernel's coarse clock): the build may have read the old content, and a stamp
//! made then would vouch for it.
//!
//! std alone: the launcher must build in no time on a fresh machine.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file as seen: size, modification time (seconds, nanoseconds) and inode; `None`
/// for a file that was absent.
pub type Stat = Option<(u64, i64, i64, u64)>;

/// Paths as they were seen.
pub type Seen = Vec<(PathBuf, Stat)>;

pub fn stat(path: &Path) -> Stat {
    std::fs::metadata(path).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// How far before a build's start a change still counts as during it. A file's time comes
/// from the kernel's coarse clock, which lags the fine one by up to a tick (a file
/// written 1 ms after the start was stamped 3 ms before it here), and some file systems
/// keep whole seconds or two.
pub const CLOCK_SLACK: std::time::Duration = std::time::Duration::from_secs(2);

/// Each path as it is now, or `None` when one changed at or after `started` (less
/// [`CLOCK_SLACK`]), other than `written_by_the_work`, the artifact the build wrote.
pub fn snapshot(
    paths: Vec<PathBuf>,
    started: SystemTime,
    written_by_the_work: Option<&Path>,
) -> Option<Vec<(PathBuf, Stat)>> {
    let start = started.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().saturating_sub(CLOCK_SLACK);
    let mut seen = Vec::with_capacity(paths.len());
    for path in paths {
        let now = stat(&path);
        if let Some((_, secs, nanos, _)) = now {
            let changed = std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
            if changed >= start && Some(path.as_path()) != written_by_the_work {
                return None;
            }
        }
        seen.push((path, now));
    }
    Some(seen)
}

/// Whether every path is still as it was seen.
pub fn unchanged<'a>(seen: impl IntoIterator<Item = (&'a Path, &'a Stat)>) -> bool {
    seen.into_iter().all(|(path, was)| stat(path) == *was)
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
pub fn dep_info(text: &str) -> Vec<PathBuf> {
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

/// The cargo configuration and toolchain files cargo reads from each of `dirs` (each
/// may be absent: one that appears is a change).
pub fn cargo_config_files(dirs: &[&Path]) -> Vec<PathBuf> {
    let names = [".cargo/config.toml", ".cargo/config", "rust-toolchain", "rust-toolchain.toml"];
    dirs.iter().flat_map(|dir| names.iter().map(move |name| dir.join(name))).collect()
}

/// rustup's settings, its toolchains directory, and each toolchain's directory and
/// `rustc` (an update or a new default moves them).
pub fn toolchain_files() -> Vec<PathBuf> {
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".rustup")));
    let Some(rustup) = rustup else { return Vec::new() };
    let toolchains = rustup.join("toolchains");
    let mut paths = vec![rustup.join("settings.toml"), toolchains.clone()];
    if let Ok(entries) = std::fs::read_dir(&toolchains) {
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            paths.push(dir.join("bin/rustc"));
            paths.push(dir);
        }
    }
    paths
}

/// The manifest of each package a dep-info's files belong to: the nearest
/// `Cargo.toml` above each file, once.
pub fn manifests_of(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut manifests: Vec<PathBuf> = Vec::new();
    for file in files {
        if let Some(manifest) = file.ancestors().skip(1).map(|d| d.join("Cargo.toml")).find(|m| m.is_file()) {
            if !manifests.contains(&manifest) {
                manifests.push(manifest);
            }
        }
    }
    manifests
}

/// The members of the workspace at `workspace`: each directory in it holding a
/// `Cargo.toml`, sorted.
pub fn members(workspace: &Path) -> Vec<PathBuf> {
    let mut members: Vec<PathBuf> = std::fs::read_dir(workspace)
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.join("Cargo.toml").is_file()).collect())
        .unwrap_or_default();
    members.sort();
    members
}

/// Everything a cargo build of `artifact` in the workspace at `workspace` read that can
/// change it, the artifact first: its dep-info's files and the manifest of each
/// package they belong to, the workspace's manifest and lock file, the cargo
/// configuration and toolchain files of `config_dirs`, and the toolchains. `None` when
/// the dep-info (`<artifact>.d`) cannot be read or names nothing.
pub fn build_inputs(artifact: &Path, workspace: &Path, config_dirs: &[&Path]) -> Option<Vec<PathBuf>> {
    let sources = dep_info(&std::fs::read_to_string(artifact.with_extension("d")).ok()?);
    if sources.is_empty() {
        return None;
    }
    let mut paths = vec![artifact.to_path_buf(), workspace.join("Cargo.toml"), workspace.join("Cargo.lock")];
    paths.extend(manifests_of(&sources));
    paths.extend(sources);
    paths.extend(cargo_config_files(config_dirs));
    paths.extend(toolchain_files());
    Some(paths)
}

/// A stamp as text: `key` lines (what must be equal: a command line, the environment),
/// then one line per input, every field escaped so that no path can forge a line.
pub fn stamp_text(key: &[String], seen: &[(PathBuf, Stat)]) -> String {
    let mut text = String::from("testbench-fresh 1\n");
    for line in key {
        text.push_str(&format!("key {}\n", escape(line)));
    }
    for (path, stat) in seen {
        let path = escape(&path.to_string_lossy());
        match stat {
            Some((len, secs, nanos, ino)) => text.push_str(&format!("file {len} {secs} {nanos} {ino} {path}\n")),
            None => text.push_str(&format!("absent {path}\n")),
        }
    }
    text
}

/// The key lines and the inputs of a stamp's text, if it is one.
pub fn parse_stamp(text: &str) -> Option<(Vec<String>, Seen)> {
    let mut lines = text.lines();
    if lines.next()? != "testbench-fresh 1" {
        return None;
    }
    let (mut key, mut seen) = (Vec::new(), Vec::new());
    for line in lines {
        let (kind, rest) = line.split_once(' ')?;
        match kind {
            "key" => key.push(unescape(rest)?),
            "absent" => seen.push((PathBuf::from(unescape(rest)?), None)),
            "file" => {
                let mut fields = rest.splitn(5, ' ');
                let mut number = || fields.next();
                let (len, secs, nanos, ino) = (number()?, number()?, number()?, number()?);
                let path = unescape(fields.next()?)?;
                let stat = (len.parse().ok()?, secs.parse().ok()?, nanos.parse().ok()?, ino.parse().ok()?);
                seen.push((PathBuf::from(path), Some(stat)));
            }
            _ => return None,
        }
    }
    Some((key, seen))
}

fn escape(text: &str) -> String {
    text.replace('%', "%25").replace('\n', "%0A").replace('\r', "%0D")
}

fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "25" => '%',
            "0A" => '\n',
            "0D" => '\r',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// Write `text` to `path` whole or not at all (a file beside it, renamed over it).
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dep_info_reads_escaped_spaces() {
        assert_eq!(
            dep_info("/t/k: /s/a.rs /s/b\\ c.rs\n\n/s/a.rs:\n"),
            [PathBuf::from("/s/a.rs"), PathBuf::from("/s/b c.rs")]
        );
    }

    #[test]
    fn a_stamp_reads_back_as_written_and_no_path_forges_a_line() {
        let key = vec!["cargo build\nfile 1 2 3 4 /etc/passwd".to_string(), "CARGO=x%y".to_string()];
        let seen = vec![(PathBuf::from("/a b/c\nkey forged"), Some((1, 2, 3, 4))), (PathBuf::from("/absent"), None)];
        let text = stamp_text(&key, &seen);
        assert_eq!(text.lines().count(), 5, "{text}");
        assert_eq!(parse_stamp(&text), Some((key, seen)));
        assert_eq!(parse_stamp("not a stamp\n"), None);
        assert_eq!(parse_stamp("testbench-fresh 1\nfile 1 2 x 4 /p\n"), None);
    }

    #[test]
    fn a_change_after_the_start_refuses_the_snapshot_and_a_later_change_is_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.rs");
        std::fs::write(&file, "one").unwrap();
        let before = SystemTime::now() - std::time::Duration::from_secs(5);
        assert!(snapshot(vec![file.clone()], before, None).is_none());
        let after = SystemTime::now() + CLOCK_SLACK + std::time::Duration::from_secs(1);
        let seen = snapshot(vec![file.clone(), tmp.path().join("absent")], after, None).unwrap();
        assert!(unchanged(seen.iter().map(|(p, s)| (p.as_path(), s))));
        std::fs::write(tmp.path().join("absent"), "").unwrap();
        assert!(!unchanged(seen.iter().map(|(p, s)| (p.as_path(), s))));
    }

    #[test]
    fn each_source_belongs_to_its_nearest_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("k/src/bin")).unwrap();
        std::fs::write(tmp.path().join("k/Cargo.toml"), "").unwrap();
        let files = [tmp.path().join("k/src/main.rs"), tmp.path().join("k/src/bin/x.rs")];
        assert_eq!(manifests_of(&files), [tmp.path().join("k/Cargo.toml")]);
    }
}
