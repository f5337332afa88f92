//! Building once: `--prebuild DIR` builds every selected case's pieces for each width
//! into DIR, and `DIR/testbench --prebuilt DIR` boots from them, running no cargo and
//! packing nothing for its boots.
//!
//! DIR holds one directory per width (each built in `.<width>.tmp` and renamed into
//! place when done, so a width is there whole or not at all), the bench binary, and
//! `index.json`: the workspace it was made from, the tree's fingerprint, and for every
//! (width, case) what its boots take (the kernel, the initramfs, the command line) or
//! the build's failure, which every run from DIR reports as that case's result.
//!
//! The fingerprint is the commit, every change git sees against it (staged or not) and
//! every untracked file git does not ignore, each with its content's hash. It is taken
//! at the start and again before each width is put in place: a tree that changed during
//! the build fails the build, naming what changed. A run from DIR takes it again and
//! refuses DIR when it differs, or when DIR was made for another workspace, saying why:
//! never a silent test of old code.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::process::Cmd;

/// The index's file name in DIR.
pub const INDEX: &str = "index.json";
/// The bench's copy in DIR.
pub const BENCH: &str = "testbench";
/// The content-addressed store of a width's files, inside its directory.
const FILES: &str = "files";
/// git answers at once; a minute is a git that is stuck.
const GIT_DEADLINE: Duration = Duration::from_secs(60);

/// What the tree was when a prebuilt directory was made.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// `git rev-parse HEAD`.
    pub commit: String,
    /// Paths git reports changed against the commit (staged or not, deleted included).
    pub changed: Vec<String>,
    /// Untracked paths git does not ignore.
    pub untracked: Vec<String>,
    /// Each of those paths' content hash (sha256; a word for a deleted path or a symlink).
    pub contents: BTreeMap<String, String>,
    /// sha256 over the commit and every path above with its content.
    pub digest: String,
}

impl Fingerprint {
    /// In words, for messages: `commit 1a2b3c4 with 2 changed and 1 untracked files`.
    pub fn describe(&self) -> String {
        let short: String = self.commit.chars().take(12).collect();
        format!(
            "commit {short} with {} changed and {} untracked file(s){}",
            self.changed.len(),
            self.untracked.len(),
            if self.changed.is_empty() && self.untracked.is_empty() { " (clean)".to_string() } else { String::new() }
        )
    }

    /// What differs between an earlier fingerprint and this one, in words.
    pub fn difference(&self, earlier: &Fingerprint) -> String {
        let mut said = Vec::new();
        if self.commit != earlier.commit {
            said.push(format!("the commit moved from {} to {}", earlier.commit, self.commit));
        }
        let listed = |now: &[String], then: &[String], what: &str, said: &mut Vec<String>| {
            let new: Vec<&String> = now.iter().filter(|p| !then.contains(p)).collect();
            let gone: Vec<&String> = then.iter().filter(|p| !now.contains(p)).collect();
            if !new.is_empty() {
                said.push(format!("{what} now: {}", shown(&new)));
            }
            if !gone.is_empty() {
                said.push(format!("no longer {what}: {}", shown(&gone)));
            }
        };
        listed(&self.changed, &earlier.changed, "changed", &mut said);
        listed(&self.untracked, &earlier.untracked, "untracked", &mut said);
        let again: Vec<&String> = self
            .contents
            .iter()
            .filter(|(path, hash)| earlier.contents.get(*path).is_some_and(|then| then != *hash))
            .map(|(path, _)| path)
            .collect();
        if !again.is_empty() {
            said.push(format!("changed again: {}", shown(&again)));
        }
        said.join("; ")
    }
}

fn shown(paths: &[&String]) -> String {
    let mut words: Vec<&str> = paths.iter().take(5).map(|p| p.as_str()).collect();
    let more = paths.len().saturating_sub(5);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    words.sort_unstable();
    format!("{}{more}", words.join(", "))
}

/// The tree's fingerprint at `root`, leaving out `exclude` (the prebuilt directory, when
/// it is inside the tree and not ignored).
/// Why the tree's fingerprint could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// git did not start or did not end.
    #[error("the tree's fingerprint needs git: {0}")]
    Git(#[source] crate::process::CmdError),
    /// git ran and failed: its words.
    #[error("git {args} failed in {} ({status}): {stderr}", .root.display())]
    Failed { args: String, root: PathBuf, status: std::process::ExitStatus, stderr: String },
}

/// A file of a build that could not be stored in a prebuilt directory.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("copying {} to {}: {source}", .from.display(), .to.display())]
    Copy { from: PathBuf, to: PathBuf, source: std::io::Error },
}

/// Why `--prebuilt DIR` is refused (its index), or its tree check failed.
#[derive(Debug, thiserror::Error)]
pub enum PrebuiltError {
    #[error(
        "--prebuilt {}: no index ({}: {source}); make one with --prebuild {}",
        .dir.display(),
        .path.display(),
        .dir.display()
    )]
    NoIndex { dir: PathBuf, path: PathBuf, source: std::io::Error },
    #[error("--prebuilt {}: {} is not an index: {source}", .dir.display(), .path.display())]
    NotIndex { dir: PathBuf, path: PathBuf, source: serde_json::Error },
    #[error(
        "--prebuilt {}: made from the workspace {}, not this one ({}): prebuild it here",
        .dir.display(),
        .made.display(),
        .here.display()
    )]
    OtherWorkspace { dir: PathBuf, made: PathBuf, here: PathBuf },
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    /// The tree now is not the one the directory was made from (`made`: its description).
    #[error(
        "--prebuilt {}: made from {made}, and the tree has changed since ({difference}): run --prebuild {} again",
        .dir.display(),
        .dir.display()
    )]
    Changed { dir: PathBuf, made: String, difference: String },
    #[error("the check of the tree's fingerprint did not finish")]
    Unfinished,
}

pub fn fingerprint(root: &Path, exclude: Option<&Path>) -> Result<Fingerprint, FingerprintError> {
    let git = |args: &[&str]| -> Result<Vec<u8>, FingerprintError> {
        let out = Cmd::new("git", format!("git {}", args.join(" ")), GIT_DEADLINE)
            .cwd(root)
            .args(args)
            .output()
            .map_err(FingerprintError::Git)?;
        if !out.status.success() {
            return Err(FingerprintError::Failed {
                args: args.join(" "),
                root: root.to_owned(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    };
    let commit = String::from_utf8_lossy(&git(&["rev-parse", "HEAD"])?).trim().to_string();
    let status = git(&["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"])?;
    let excluded = exclude.and_then(|dir| dir.canonicalize().ok());
    let (mut changed, mut untracked) = (Vec::new(), Vec::new());
    for entry in status.split(|&b| b == 0).filter(|e| e.len() > 3) {
        let code = &entry[..2];
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        let full = root.join(&path);
        if let Some(dir) = &excluded {
            if full.canonicalize().is_ok_and(|p| p.starts_with(dir)) || full.starts_with(dir) {
                continue;
            }
        }
        if code == b"??" {
            untracked.push(path);
        } else {
            changed.push(path);
        }
    }
    changed.sort();
    untracked.sort();
    let mut hash = Sha256::new();
    hash.update(commit.as_bytes());
    let mut contents = BTreeMap::new();
    for (kind, paths) in [("changed", &changed), ("untracked", &untracked)] {
        for path in paths {
            let mut one = Sha256::new();
            hash_content(&mut one, &root.join(path));
            let content = hex(&one.finalize());
            for part in [kind, path, &content] {
                hash.update([0]);
                hash.update(part.as_bytes());
            }
            contents.insert(path.clone(), content);
        }
    }
    Ok(Fingerprint { commit, changed, untracked, contents, digest: hex(&hash.finalize()) })
}

/// A path's content into the hash: a file's bytes, a symlink's target, or a word for
/// what is not there.
fn hash_content(hash: &mut Sha256, path: &Path) {
    match std::fs::symlink_metadata(path) {
        Err(_) => hash.update(b"<deleted>"),
        Ok(meta) if meta.file_type().is_symlink() => {
            hash.update(b"<symlink>");
            hash.update(std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default().as_bytes());
        }
        Ok(meta) if meta.is_file() => {
            if let Ok(mut file) = std::fs::File::open(path) {
                let mut buffer = vec![0u8; 1 << 16];
                while let Ok(n @ 1..) = file.read(&mut buffer) {
                    hash.update(&buffer[..n]);
                }
            }
        }
        Ok(_) => hash.update(b"<other>"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one (width, case) boots from a prebuilt directory, or why it cannot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    Ready {
        /// Paths relative to DIR; no kernel for a guest the firmware boots from `media`.
        kernel: Option<String>,
        /// The disk image and CD (workspace paths, not copied into DIR).
        #[serde(default)]
        media: Option<crate::boot::media::Media>,
        initrd: Option<String>,
        append: Option<String>,
        /// `default`, `none`, `bios`, `uefi`, or `path:<path>`.
        firmware: String,
        machine: String,
        extra_args: Vec<String>,
    },
    /// The build failed (or the host lacked a tool for it): every run reports this.
    Failed { why: String },
}

/// `index.json`.
#[derive(Serialize, Deserialize, Debug)]
pub struct Index {
    /// The workspace root it was made from (canonical).
    pub workspace: PathBuf,
    pub fingerprint: Fingerprint,
    /// Each prebuilt case file's content hash: a case file outside the tree (`--cases`)
    /// is not in the fingerprint, and an edit of it must not boot old pieces either.
    pub cases: BTreeMap<String, String>,
    /// Width name, then case name.
    pub widths: BTreeMap<String, BTreeMap<String, Entry>>,
}

/// A case file's content hash, for [`Index::cases`].
pub fn case_digest(path: &Path) -> String {
    let mut hash = Sha256::new();
    hash_content(&mut hash, path);
    hex(&hash.finalize())
}

/// Store `source` in a width's content-addressed store (`<width dir>/files/<sha256>`,
/// hard-linked when it can be, copied otherwise): its path relative to DIR.
pub fn store(width_dir: &Path, width_name: &str, source: &Path) -> Result<String, StoreError> {
    let mut hash = Sha256::new();
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| StoreError::Io { path, source }
    };
    let mut file = std::fs::File::open(source).map_err(io(source))?;
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).map_err(io(source))?;
        if n == 0 {
            break;
        }
        hash.update(&buffer[..n]);
    }
    let name = hex(&hash.finalize());
    let files = width_dir.join(FILES);
    std::fs::create_dir_all(&files).map_err(io(&files))?;
    let target = files.join(&name);
    if !target.exists() && std::fs::hard_link(source, &target).is_err() {
        std::fs::copy(source, &target).map_err(|e| StoreError::Copy {
            from: source.to_owned(),
            to: target.clone(),
            source: e,
        })?;
    }
    Ok(format!("{width_name}/{FILES}/{name}"))
}

/// Read DIR's index and check it is this workspace's and this tree's: the index, or the
/// refusal naming why.
pub fn open(dir: &Path, root: &Path) -> Result<(Index, TreeCheck), PrebuiltError> {
    let path = dir.join(INDEX);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(PrebuiltError::NoIndex { dir: dir.to_owned(), path, source }),
    };
    let index: Index = match serde_json::from_str(&text) {
        Ok(index) => index,
        Err(source) => return Err(PrebuiltError::NotIndex { dir: dir.to_owned(), path, source }),
    };
    let here = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if index.workspace != here {
        return Err(PrebuiltError::OtherWorkspace { dir: dir.to_owned(), made: index.workspace, here });
    }
    let (root, dir, made) = (root.to_path_buf(), dir.to_path_buf(), index.fingerprint.clone());
    let handle = std::thread::spawn(move || {
        let now = fingerprint(&root, Some(&dir))?;
        if now != made {
            return Err(PrebuiltError::Changed { dir, made: made.describe(), difference: now.difference(&made) });
        }
        Ok(())
    });
    Ok((index, TreeCheck { pending: std::sync::Mutex::new(Some(handle)), result: std::sync::OnceLock::new() }))
}

/// Whether the tree is still the one a prebuilt directory was made from: its
/// fingerprint, taken on a thread of its own while the run starts, since git's two
/// processes are most of a prebuilt run's start (about 9 ms of 11 before QEMU's exec).
/// The run asks for the answer before it reports any result and before it starts any
/// boot past the first `--jobs`; a changed tree refuses the run then, and nothing booted
/// from the old pieces is reported.
pub struct TreeCheck {
    pending: std::sync::Mutex<Option<std::thread::JoinHandle<Result<(), PrebuiltError>>>>,
    /// The check's answer, shared by every boot that asks.
    result: std::sync::OnceLock<Result<(), std::sync::Arc<PrebuiltError>>>,
}

impl TreeCheck {
    /// The answer, waiting for git if it has not come yet (the fingerprint's own
    /// deadline bounds the wait).
    pub fn result(&self) -> Result<(), std::sync::Arc<PrebuiltError>> {
        self.result
            .get_or_init(|| {
                let handle = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
                match handle.map(|h| h.join()) {
                    Some(Ok(answer)) => answer.map_err(std::sync::Arc::new),
                    Some(Err(_)) | None => Err(std::sync::Arc::new(PrebuiltError::Unfinished)),
                }
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn the_fingerprint_sees_changes_and_untracked_files_but_not_ignored_ones_or_the_prebuilt_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.rs"), "one").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "first"]);
        let clean = fingerprint(root, None).unwrap();
        assert!(clean.describe().ends_with("(clean)"), "{}", clean.describe());

        std::fs::create_dir(root.join("target")).unwrap();
        std::fs::write(root.join("target/x"), "ignored").unwrap();
        std::fs::create_dir(root.join("pre")).unwrap();
        std::fs::write(root.join("pre/index.json"), "{}").unwrap();
        assert_eq!(fingerprint(root, Some(&root.join("pre"))).unwrap(), clean, "ignored files and DIR do not count");
        std::fs::remove_dir_all(root.join("pre")).unwrap();

        std::fs::write(root.join("a.rs"), "two").unwrap();
        let edited = fingerprint(root, None).unwrap();
        assert_eq!(edited.changed, ["a.rs"]);
        assert!(edited.difference(&clean).contains("changed now: a.rs"), "{}", edited.difference(&clean));
        std::fs::write(root.join("a.rs"), "three").unwrap();
        let again = fingerprint(root, None).unwrap();
        assert_ne!(again.digest, edited.digest, "the same file changed again is another tree");
        assert_eq!(again.difference(&edited), "changed again: a.rs");

        std::fs::write(root.join("a.rs"), "one").unwrap();
        std::fs::write(root.join("new.rs"), "n").unwrap();
        let untracked = fingerprint(root, None).unwrap();
        assert_eq!(untracked.untracked, ["new.rs"]);
        assert_ne!(untracked, clean);

        std::fs::remove_file(root.join("new.rs")).unwrap();
        git(root, &["commit", "-qm", "second", "--allow-empty"]);
        let moved = fingerprint(root, None).unwrap();
        assert!(moved.difference(&clean).starts_with("the commit moved from "), "{}", moved.difference(&clean));
    }

    #[test]
    fn a_directory_without_an_index_or_with_a_bad_one_is_refused_saying_which() {
        let tmp = tempfile::tempdir().unwrap();
        let error = open(tmp.path(), tmp.path()).err().unwrap();
        assert!(matches!(error, PrebuiltError::NoIndex { .. }), "{error:?}");
        assert!(
            error.to_string().ends_with(&format!("; make one with --prebuild {}", tmp.path().display())),
            "{error}"
        );
        std::fs::write(tmp.path().join(INDEX), "{}").unwrap();
        let error = open(tmp.path(), tmp.path()).err().unwrap();
        assert!(matches!(error, PrebuiltError::NotIndex { .. }), "{error:?}");
        assert!(error.to_string().contains("index.json is not an index: "), "{error}");
        let missing = store(tmp.path(), "rv64", &tmp.path().join("absent")).unwrap_err();
        assert!(matches!(&missing, StoreError::Io { path, .. } if path.ends_with("absent")), "{missing:?}");
    }

    #[test]
    fn stored_files_are_kept_once_by_content() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::write(&a, "same").unwrap();
        std::fs::write(&b, "same").unwrap();
        let width = tmp.path().join("rv64");
        let first = store(&width, "rv64", &a).unwrap();
        assert_eq!(first, store(&width, "rv64", &b).unwrap());
        assert!(first.starts_with("rv64/files/"));
        assert_eq!(std::fs::read_dir(width.join(FILES)).unwrap().count(), 1);
    }
}
