//! What the two budget gates share: reading a budget file, walking Rust sources, and the
//! ratchet ([`check_history`]), which reads the budget file's history in git. Each gate
//! says what its file is ([`BudgetFile`]: how it parses, its entries, their limits and
//! paths); what a loosening is ([`loosenings`]) and how the history is judged are here,
//! once.
//!
//! # The ratchet
//!
//! A budget only falls. Loosening it (a raised limit, a dropped entry, an entry's paths
//! narrowed) needs a line `<Label>: <entry>: <reason>` in the commit that does it. The
//! branch checked out in the tree is judged on its own commits:
//!
//! 1. The main branch is `refs/heads/main`, else `refs/remotes/origin/HEAD`. With neither,
//!    or no merge-base of HEAD with it (a shallow clone), the finding is `no-merge-base`:
//!    the history is never passed unchecked.
//! 2. Every commit on HEAD's first-parent chain since the merge-base whose budget file
//!    differs from its first parent's is judged against that parent's version. Where the
//!    parent lacks the file, against the last version before it on the first-parent chain;
//!    where there is none (a file new on the branch), every entry needs its line.
//! 3. The line may be in the commit's message or, for a merge, in the message of any commit
//!    the merge brings in (`<first parent>..<merge>`).
//! 4. A commit whose file is gone while its first parent had it is `deleted-config`, so
//!    deleting the file and adding it back loosened cannot escape.
//! 5. The working tree's file is judged against HEAD's: any loosening not yet committed is
//!    `uncommitted-raise`. This is the only rule that bites on the main branch itself,
//!    where the range since the merge-base is empty.
//!
//! A budget file given by an absolute path outside the tree is `outside-tree`: its history
//! is not the tree's. A committed version that does not parse is `unreadable-version`.
//!
//! Git is run read-only (`--no-optional-locks`, only `rev-parse`, `rev-list`, `merge-base`,
//! `cat-file` and `log`), with the tree as its working directory, each command under
//! [`GIT_DEADLINE`]. One killed at its deadline (or not waited for) is `git-failed`,
//! naming the command it waited for: a history half read is never passed.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use testbench_process::{Cmd, CmdError};

use crate::finding::{ConfigError, Finding};

/// One way a version of a budget file is looser than the one before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loosening {
    /// The budget entry (a budget's or a crate's name) whose line the commit needs.
    pub entry: String,
    /// What changed, as a phrase naming the entry: "raises the ceiling of `smoke` from 10
    /// to 12".
    pub what: String,
}

/// A budget file the ratchet guards: entries, each with a name, limits that only fall
/// and paths that only grow. `size-budget.toml` and `unsafe-budget.toml` are two.
pub trait BudgetFile: Sized {
    /// The line prefix a loosening's commit needs: `Size budget`, `Unsafe budget`.
    const LABEL: &'static str;
    /// What one entry is called in a message: `crate`, `budget` ("drops the crate `j`").
    const ENTRY: &'static str;
    /// Parses and validates one version of the file; `file` names it in errors.
    fn parse(file: &str, text: &str) -> Result<Self, ConfigError>;
    /// Its entries, in the file's order.
    fn entries(&self) -> Vec<Entry<'_>>;
}

/// One entry of a budget file, as the ratchet compares it.
pub struct Entry<'a> {
    pub name: &'a str,
    /// Its limits, each compared with the same field of the entry's earlier version.
    pub limits: Vec<Limit>,
    /// Relative to the tree, normalized.
    pub paths: &'a [PathBuf],
}

/// One limit of an entry.
pub struct Limit {
    /// Its field in the file: `ceiling`, `max_unsafe`.
    pub field: &'static str,
    /// How a message names it: "raises the ceiling of `k`", "raises max_unsafe of `k`".
    pub said: &'static str,
    pub value: u64,
}

/// What makes `new` looser than `old`: a raised limit, a dropped entry, a removed path;
/// with no `old` (no earlier version of the file), every entry.
pub fn loosenings<B: BudgetFile>(old: Option<&B>, new: &B) -> Vec<Loosening> {
    let loosening = |entry: &str, what: String| Loosening { entry: entry.to_string(), what };
    let Some(old) = old else {
        return new
            .entries()
            .iter()
            .map(|e| {
                let limits: Vec<String> = e.limits.iter().map(|l| format!("{} {}", l.field, l.value)).collect();
                let what = format!("adds `{}` ({}) with no earlier version of the file", e.name, limits.join(", "));
                loosening(e.name, what)
            })
            .collect();
    };
    let new_entries = new.entries();
    let mut out = Vec::new();
    for o in old.entries() {
        let Some(n) = new_entries.iter().find(|n| n.name == o.name) else {
            out.push(loosening(o.name, format!("drops the {} `{}`", B::ENTRY, o.name)));
            continue;
        };
        for was in &o.limits {
            let is = n.limits.iter().find(|l| l.field == was.field).map_or(u64::MAX, |l| l.value);
            if is > was.value {
                out.push(loosening(o.name, format!("raises {} of `{}` from {} to {is}", was.said, o.name, was.value)));
            }
        }
        let removed: Vec<String> =
            o.paths.iter().filter(|p| !n.paths.contains(p)).map(|p| format!("`{}`", p.display())).collect();
        if !removed.is_empty() {
            out.push(loosening(o.name, format!("narrows the paths of `{}` (drops {})", o.name, removed.join(", "))));
        }
    }
    out
}

/// The ratchet of the budget file `config` (relative to `tree`, or absolute):
/// `raise-without-reason`, `deleted-config`, `uncommitted-raise`, `no-merge-base` (and
/// `unreadable-version` for a committed version that does not parse). The file as it is
/// in the tree must parse: else the error.
pub fn check_history<B: BudgetFile>(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let (rel, current) = load::<B>(tree, config)?;
    Ok(judge(tree, &rel, &current))
}

/// Judges the history of the budget file `config` (relative to `tree`) and the
/// uncommitted `current` version of it. Returns the findings, each on the budget file.
///
/// A git command that does not end by [`GIT_DEADLINE`] is killed, and the history is
/// then not trusted: a `git-failed` finding says which command it waited for.
pub fn judge<B: BudgetFile>(tree: &Path, config: &Path, current: &B) -> Vec<Finding> {
    let git = Git { tree, trouble: RefCell::new(Vec::new()) };
    let name = config.display().to_string();
    let parse = |text: &str| B::parse(&name, text);
    let ratchet = Ratchet { label: B::LABEL, parse: &parse, loosenings: &loosenings::<B> };
    let mut findings = judge_with(&git, config, current, &ratchet);
    for message in git.trouble.into_inner() {
        findings.push(Finding { path: config.to_path_buf(), line: None, code: "git-failed".to_string(), message });
    }
    findings
}

/// How [`judge`] reads and compares versions of one budget file.
struct Ratchet<'a, C> {
    /// The line prefix: `Size budget` or `Unsafe budget`.
    label: &'a str,
    /// Parses one version of the file.
    parse: &'a dyn Fn(&str) -> Result<C, ConfigError>,
    /// What makes `new` looser than `old` (`None`: no earlier version).
    loosenings: &'a dyn Fn(Option<&C>, &C) -> Vec<Loosening>,
}

fn judge_with<C>(git: &Git<'_>, config: &Path, current: &C, ratchet: &Ratchet<'_, C>) -> Vec<Finding> {
    let tree = git.tree;
    let mut findings = Vec::new();
    let finding = |code: &str, message: String| Finding {
        path: config.to_path_buf(),
        line: None,
        code: code.to_string(),
        message,
    };
    if config.is_absolute() {
        findings.push(finding(
            "outside-tree",
            format!("the budget file is outside {}, so its history cannot be read from the tree's git", tree.display()),
        ));
        return findings;
    }
    let Some(head) = rev_parse(git, "HEAD^{commit}") else {
        findings.push(finding(
            "no-merge-base",
            format!("{} is not in a git repository with a commit, so its history cannot be judged", tree.display()),
        ));
        return findings;
    };
    let file = config_spec(config);

    // Uncommitted: the working tree's version against HEAD's.
    if let Some(text) = blob_text(git, &head, &file) {
        match (ratchet.parse)(&text) {
            Ok(committed) => {
                for l in (ratchet.loosenings)(Some(&committed), current) {
                    findings.push(finding(
                        "uncommitted-raise",
                        format!(
                            "an uncommitted change {}; commit it with a line `{}: {}: <reason>`",
                            l.what, ratchet.label, l.entry
                        ),
                    ));
                }
            }
            Err(e) => findings.push(finding("unreadable-version", format!("the version in HEAD does not parse: {e}"))),
        }
    }

    // Committed: the branch's own commits since the merge-base.
    let main = ["refs/heads/main", "refs/remotes/origin/HEAD"]
        .iter()
        .find_map(|r| rev_parse(git, &format!("{r}^{{commit}}")).map(|c| (*r, c)));
    let Some((main_ref, main_commit)) = main else {
        findings.push(finding(
            "no-merge-base",
            "neither `main` nor `origin/HEAD` exists, so the branch's commits cannot be told from the main \
             branch's: the history is not judged"
                .to_string(),
        ));
        return findings;
    };
    let Some(base) = git.run(&["merge-base", &head, &main_commit]).map(|s| s.trim().to_string()) else {
        findings.push(finding(
            "no-merge-base",
            format!(
                "HEAD has no merge-base with {main_ref} (a shallow clone?), so the branch's commits cannot be \
                 found: the history is not judged"
            ),
        ));
        return findings;
    };
    let Some(list) = git.run(&["rev-list", "--first-parent", "--reverse", &format!("{base}..{head}")]) else {
        findings.push(finding("no-merge-base", format!("git rev-list {base}..HEAD failed")));
        return findings;
    };
    for commit in list.lines().map(str::trim).filter(|c| !c.is_empty()) {
        judge_commit(git, &file, commit, ratchet, &mut |code, message| findings.push(finding(code, message)));
    }
    findings
}

fn judge_commit<C>(
    git: &Git<'_>,
    file: &str,
    commit: &str,
    ratchet: &Ratchet<'_, C>,
    push: &mut dyn FnMut(&str, String),
) {
    let parents: Vec<String> = git
        .run(&["rev-list", "--parents", "-n", "1", commit])
        .map(|s| s.split_whitespace().skip(1).map(str::to_string).collect())
        .unwrap_or_default();
    let first_parent = parents.first().cloned();
    let short = &commit[..commit.len().min(10)];
    let subject = git.run(&["log", "-1", "--format=%s", commit]).unwrap_or_default().trim().to_string();
    let blob_new = blob_id(git, commit, file);
    let blob_old = first_parent.as_deref().and_then(|p| blob_id(git, p, file));
    if blob_new == blob_old {
        return;
    }
    let Some(_) = blob_new else {
        push(
            "deleted-config",
            format!(
                "commit {short} ({subject}) deletes {}; a budget file is never deleted",
                file.trim_start_matches("./")
            ),
        );
        return;
    };
    let Some(new_text) = blob_text(git, commit, file) else { return };
    let new = match (ratchet.parse)(&new_text) {
        Ok(c) => c,
        Err(e) => {
            push("unreadable-version", format!("the version in commit {short} ({subject}) does not parse: {e}"));
            return;
        }
    };
    let old_text = match (&blob_old, &first_parent) {
        (Some(_), Some(p)) => blob_text(git, p, file),
        (None, Some(p)) => last_version_before(git, p, file),
        _ => None,
    };
    let old = match old_text.map(|t| (ratchet.parse)(&t)) {
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            push("unreadable-version", format!("the version before commit {short} ({subject}) does not parse: {e}"));
            return;
        }
        None => None,
    };
    let loosenings = (ratchet.loosenings)(old.as_ref(), &new);
    if loosenings.is_empty() {
        return;
    }
    let messages = if parents.len() > 1 {
        let range = format!("{}..{commit}", parents[0]);
        git.run(&["log", "--format=%B%x00", &range]).unwrap_or_default()
    } else {
        git.run(&["log", "-1", "--format=%B", commit]).unwrap_or_default()
    };
    for l in loosenings {
        if !has_reason_line(&messages, ratchet.label, &l.entry) {
            let where_ = if parents.len() > 1 { " or in a commit it merges" } else { "" };
            push(
                "raise-without-reason",
                format!(
                    "commit {short} ({subject}) {} without a line `{}: {}: <reason>` in its message{where_}",
                    l.what, ratchet.label, l.entry
                ),
            );
        }
    }
}

/// Whether `messages` holds a line `<label>: <entry>: <reason>` with a reason that is not
/// empty (leading and trailing white space ignored).
pub fn has_reason_line(messages: &str, label: &str, entry: &str) -> bool {
    let prefix = format!("{label}: {entry}:");
    messages.lines().any(|line| line.trim().strip_prefix(&prefix).is_some_and(|reason| !reason.trim().is_empty()))
}

/// The newest version of `file` on `from`'s first-parent chain (`from` included).
fn last_version_before(git: &Git<'_>, from: &str, file: &str) -> Option<String> {
    let touching = git.run(&["rev-list", "--first-parent", from, "--", file])?;
    touching.lines().map(str::trim).filter(|c| !c.is_empty()).find_map(|c| blob_text(git, c, file))
}

/// `file` as a `<rev>:<path>` path relative to git's working directory (the tree).
fn config_spec(config: &Path) -> String {
    let mut s = String::from(".");
    for c in config.components() {
        if let Component::Normal(part) = c {
            s.push('/');
            s.push_str(&part.to_string_lossy());
        }
    }
    s
}

fn rev_parse(git: &Git<'_>, rev: &str) -> Option<String> {
    git.run(&["rev-parse", "--verify", "-q", rev]).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn blob_id(git: &Git<'_>, commit: &str, file: &str) -> Option<String> {
    rev_parse(git, &format!("{commit}:{file}"))
}

fn blob_text(git: &Git<'_>, commit: &str, file: &str) -> Option<String> {
    git.run(&["cat-file", "blob", &format!("{commit}:{file}")])
}

/// How long one git command of the ratchet may take (each reads one object or one log).
pub const GIT_DEADLINE: Duration = Duration::from_secs(120);

/// Git, read-only, in one tree; what went wrong running it, for the findings.
struct Git<'a> {
    tree: &'a Path,
    /// Each git command killed at its deadline or not waited for (a git that cannot be
    /// started reads as no repository, as a tree outside git does).
    trouble: RefCell<Vec<String>>,
}

impl Git<'_> {
    /// Runs git read-only in the tree; its standard output when it succeeded.
    fn run(&self, args: &[&str]) -> Option<String> {
        let what = format!("git {} to read the budget file's history", args.first().unwrap_or(&""));
        let out = Cmd::new("git", what, GIT_DEADLINE)
            .arg("--no-optional-locks")
            .arg("-C")
            .arg(self.tree)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .output();
        match out {
            Ok(out) => out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned()),
            Err(CmdError::Spawn { .. }) => None,
            Err(error) => {
                self.trouble.borrow_mut().push(error.to_string());
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading a budget file

/// The budget file's path relative to `tree` (as findings name it), and its full path.
/// `config` may be relative to the tree or absolute.
pub fn locate(tree: &Path, config: &Path) -> (PathBuf, PathBuf) {
    if config.is_absolute() {
        let rel = config
            .strip_prefix(tree)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| {
                let t = tree.canonicalize().ok()?;
                let c = config.canonicalize().ok()?;
                c.strip_prefix(t).ok().map(Path::to_path_buf)
            })
            .unwrap_or_else(|| config.to_path_buf());
        (rel, config.to_path_buf())
    } else {
        (normalize(config), tree.join(config))
    }
}

/// Reads and validates the budget file `config` (relative to `tree`, or absolute): its path
/// relative to the tree (as findings name it) and its contents. An unreadable file is a
/// `ConfigError` naming the file; a TOML, serde or validation error names the field too.
pub fn load<B: BudgetFile>(tree: &Path, config: &Path) -> Result<(PathBuf, B), ConfigError> {
    let (rel, full) = locate(tree, config);
    let file_name = rel.display().to_string();
    let text = fs::read_to_string(&full).map_err(|e| ConfigError {
        file: file_name.clone(),
        field: "(file)".to_string(),
        message: format!("cannot read it ({e}); expected a TOML budget file"),
    })?;
    let parsed = B::parse(&file_name, &text)?;
    Ok((rel, parsed))
}

/// Parses one version of a budget file into its raw serde form.
pub fn parse_toml<R: DeserializeOwned>(file_name: &str, text: &str) -> Result<R, ConfigError> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        let message = e.message().trim().to_string();
        let field = message
            .split('`')
            .nth(1)
            .filter(|_| message.contains("field"))
            .map(str::to_string)
            .or_else(|| e.span().map(|s| format!("line {}", text[..s.start].lines().count().max(1))))
            .unwrap_or_else(|| "(syntax)".to_string());
        ConfigError { file: file_name.to_string(), field, message }
    })
}

/// A configured path, checked: relative, without `..`, not empty. Returns it normalized.
pub fn checked_path(file_name: &str, field: &str, path: &str) -> Result<PathBuf, ConfigError> {
    let p = Path::new(path);
    let bad = path.trim().is_empty()
        || p.is_absolute()
        || p.components().any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)));
    if bad {
        return Err(ConfigError {
            file: file_name.to_string(),
            field: field.to_string(),
            message: format!("`{path}` is not accepted; expected a path relative to the tree, without `..`"),
        });
    }
    Ok(normalize(p))
}

/// `p` without `.` components or a trailing slash.
pub fn normalize(p: &Path) -> PathBuf {
    p.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

/// Every `.rs` file under `dir` (relative to `tree`), relative to `tree`, sorted. Skips
/// `target` directories and hidden ones. A file given instead of a directory is itself.
pub fn rust_files(tree: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    let full = tree.join(dir);
    if full.is_file() {
        if dir.extension().is_some_and(|e| e == "rs") {
            out.insert(dir.to_path_buf());
        }
    } else {
        walk(&full, dir, &mut out);
    }
    out.into_iter().collect()
}

fn walk(full: &Path, rel: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = fs::read_dir(full) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name_s = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if name_s.starts_with('.') || name_s == "target" {
                continue;
            }
            walk(&entry.path(), &rel.join(&name), out);
        } else if kind.is_file() && name_s.ends_with(".rs") {
            out.insert(rel.join(&name));
        }
    }
}

/// Whether `file` is `dir` or under it (both relative to the tree, normalized).
pub fn is_under(file: &Path, dir: &Path) -> bool {
    file.starts_with(dir)
}
