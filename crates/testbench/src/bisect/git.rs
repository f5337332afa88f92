//! The git a bisection needs: revisions resolved and ordered, a worktree of its own (made
//! detached under the bench's target/, removed at the end), each step's checkout, and
//! the culprit's revert on the bad revision.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::Cmd;

use super::BisectError;

const GIT_DEADLINE: Duration = Duration::from_secs(300);

/// Run git in `dir`; its trimmed stdout, or None when it failed.
fn git(dir: &Path, args: &[&str]) -> Result<Option<String>, BisectError> {
    let what = format!("git {}", args.first().copied().unwrap_or(""));
    let output = Cmd::new("git", what, GIT_DEADLINE)
        .args(args)
        .cwd(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|source| BisectError::Git { dir: dir.into(), source })?;
    Ok(output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string()))
}

/// `REV` of `flag` in `repo` as a full commit id, refused naming the flag when git knows
/// no such commit.
pub fn resolve(repo: &Path, flag: &'static str, rev: &str) -> Result<String, BisectError> {
    if rev.starts_with('-') {
        return Err(BisectError::Rev { flag, rev: rev.into(), repo: repo.into() });
    }
    git(repo, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")])?
        .filter(|id| !id.is_empty())
        .ok_or_else(|| BisectError::Rev { flag, rev: rev.into(), repo: repo.into() })
}

/// The commits from `good` to `bad` along `bad`'s first parents, `good` first: refused
/// when `good` is not an ancestor of `bad`.
pub fn path(repo: &Path, good: &str, bad: &str) -> Result<Vec<String>, BisectError> {
    if good == bad {
        return Err(BisectError::Order { why: "--good and --bad name the same commit".into() });
    }
    let ancestor = Cmd::new("git", "git merge-base --is-ancestor", GIT_DEADLINE)
        .args(["merge-base", "--is-ancestor", good, bad])
        .cwd(repo)
        .output()
        .map_err(|source| BisectError::Git { dir: repo.into(), source })?;
    if !ancestor.status.success() {
        return Err(BisectError::Order {
            why: format!(
                "--good {} is not an ancestor of --bad {}: a bisection goes from a good commit forward to a bad one",
                short(good),
                short(bad)
            ),
        });
    }
    let range = format!("{good}..{bad}");
    let listed =
        git(repo, &["rev-list", "--reverse", "--first-parent", "--ancestry-path", &range])?.unwrap_or_default();
    let mut commits = vec![good.to_string()];
    commits.extend(listed.lines().map(str::to_string));
    if commits.last().map(String::as_str) != Some(bad) {
        return Err(BisectError::Order {
            why: format!("--bad {} is not reached from --good {} along first parents", short(bad), short(good)),
        });
    }
    Ok(commits)
}

/// A commit's short id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// A commit's subject line.
pub fn subject(repo: &Path, id: &str) -> String {
    git(repo, &["log", "-1", "--format=%s", id]).ok().flatten().unwrap_or_default()
}

/// A worktree of `repo`, detached at `at`, in `dir`; removed (with `git worktree remove
/// --force`) when dropped, on an error's way out too.
pub struct Worktree {
    repo: PathBuf,
    pub dir: PathBuf,
}

impl Worktree {
    pub fn add(repo: &Path, dir: &Path, at: &str) -> Result<Worktree, BisectError> {
        let dir_text = dir.to_string_lossy().into_owned();
        match git(repo, &["worktree", "add", "--detach", "--force", &dir_text, at])? {
            Some(_) => Ok(Worktree { repo: repo.into(), dir: dir.into() }),
            None => Err(BisectError::Worktree { dir: dir.into(), what: "git worktree add --detach failed" }),
        }
    }

    /// Check out `id`, dropping what the last step changed (tracked and untracked files;
    /// ignored ones, the build's output, are kept for the next build).
    pub fn checkout(&self, id: &str) -> Result<(), BisectError> {
        let _ = git(&self.dir, &["revert", "--abort"])?;
        let _ = git(&self.dir, &["reset", "--hard", "--quiet"])?;
        let _ = git(&self.dir, &["clean", "-fdq"])?;
        match git(&self.dir, &["checkout", "--detach", "--force", "--quiet", id])? {
            Some(_) => Ok(()),
            None => {
                Err(BisectError::Worktree { dir: self.dir.clone(), what: "git checkout of a step's commit failed" })
            }
        }
    }

    /// Revert `culprit` on the commit checked out, committing it: whether it applied
    /// cleanly (when not, the worktree is left as it was).
    pub fn revert(&self, culprit: &str) -> Result<bool, BisectError> {
        let applied = git(
            &self.dir,
            &[
                "-c",
                "user.name=testbench bisect",
                "-c",
                "user.email=bisect@testbench.invalid",
                "revert",
                "--no-edit",
                culprit,
            ],
        )?;
        if applied.is_none() {
            let _ = git(&self.dir, &["revert", "--abort"])?;
        }
        Ok(applied.is_some())
    }

    /// The commit checked out.
    pub fn head(&self) -> Option<String> {
        git(&self.dir, &["rev-parse", "HEAD"]).ok().flatten()
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let dir = self.dir.to_string_lossy().into_owned();
        let _ = git(&self.repo, &["worktree", "remove", "--force", &dir]);
        if self.dir.exists() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = git(&self.repo, &["worktree", "prune"]);
        }
    }
}

/// Worktrees an earlier bisection left (one killed by Ctrl-C or SIGKILL, which no drop
/// runs for) under `parent`: the tree of each `bisect-<pid>-...` whose process is gone is
/// removed (its steps' logs are kept).
pub fn remove_stale(repo: &Path, parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("bisect-").and_then(|rest| rest.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let tree = entry.path().join("tree");
            if tree.exists() {
                let _ = git(repo, &["worktree", "remove", "--force", &tree.to_string_lossy()]);
                let _ = std::fs::remove_dir_all(&tree);
            }
        }
    }
    let _ = git(repo, &["worktree", "prune"]);
}
