//! The formatting gate: every cargo workspace in the tree is formatted, or skipped for a
//! stated reason.
//!
//! `formatting.toml`:
//!
//! ```toml
//! timeout_secs = 300            # optional: the deadline of each `cargo fmt` (default 300)
//!
//! [[workspace]]
//! root = "."                    # a directory whose Cargo.toml has a [workspace] table
//! [[workspace]]
//! root = "guest"
//!
//! [[skip]]
//! root = "crates/gates/tests/fixtures"   # a workspace root, or a directory: every
//! reason = "gate fixtures: ..."          # workspace at or under it is skipped
//! ```
//!
//! For each `[[workspace]]` it runs `cargo fmt --all --check --manifest-path
//! <root>/Cargo.toml` (rustfmt reads the repository's `rustfmt.toml` above each file)
//! and reports each file rustfmt would change. `--all` takes the workspace's local path
//! dependencies along, so a file may be reported from a neighbouring directory; each file
//! is reported once.
//!
//! The workspaces it knows of are the `Cargo.toml` files with a `[workspace]` table among
//! the files git tracks or has not ignored (`git ls-files --cached --others
//! --exclude-standard`, so one about to be added counts), or every file but those under
//! `target/` and `.git/` when the tree is in no git work tree or in an ignored directory
//! of one.
//!
//! Codes:
//!
//! - `unformatted`: a file rustfmt would change, at the first line it would change, read
//!   from rustfmt's `Diff in <file>:<line>:` or `Diff in <file> at line <line>:` headers.
//! - `fmt-failed`: `cargo fmt` exited non-zero without a diff (a file it cannot parse, a
//!   manifest cargo refuses), or could not be started; its error lines are the message.
//! - `fmt-timeout`: `cargo fmt` did not finish by the deadline; it is killed, and the
//!   finding says which command it waited for and how long.
//! - `unlisted-workspace`: a workspace `Cargo.toml` that is neither a `[[workspace]]`
//!   nor under a `[[skip]]`, so a new workspace cannot drift unchecked.
//! - `missing-root`: a `[[workspace]]` whose directory holds no workspace `Cargo.toml`.
//! - `stale-skip`: a `[[skip]]` with no workspace `Cargo.toml` at or under it.
//! - `skip-without-reason`: a `[[skip]]` whose reason is missing or blank.
//! - `unparsable-manifest`: a `Cargo.toml` outside every skip that is not TOML, so
//!   whether it is a workspace cannot be told.
//! - `git-failed`: a git command listing the considered files was killed at its deadline
//!   (or could not be waited for); the finding names it, and nothing else is judged.
//!
//! A `[[workspace]]` at or under a `[[skip]]` is refused as a configuration error: the
//! file would say both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use testbench_process::{Cmd, CmdError};
use toml::Spanned;

use crate::nocruft::{considered_files, is_under, line_at, one_line, parse_config, tree_path, ConfigFile};
use crate::skip::{parse_skips, skip_findings, RawSkip, Skip};
use crate::{ConfigError, Finding};

/// How long one `cargo fmt` may take when the file does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    timeout_secs: Option<u64>,
    #[serde(default)]
    workspace: Vec<Spanned<RawWorkspace>>,
    #[serde(default)]
    skip: Vec<Spanned<RawSkip>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    root: String,
}

/// One `[[workspace]]`, its root checked.
struct Workspace {
    root: String,
    line: usize,
}

/// Run the gate on `tree` with the configuration at `config` (relative to `tree` or
/// absolute). The findings' paths are relative to `tree`; none is a pass.
pub fn check(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let file = ConfigFile::locate(tree, config);
    let text = file.read()?;
    let (timeout, roots, skips) = parse(&file.shown, &text)?;

    let mut findings = Vec::new();
    let mut workspaces = Vec::new();
    let considered = match considered_files(tree) {
        Ok(files) => files,
        Err(error) => return Ok(vec![file.git_failed(error)]),
    };
    for path in considered {
        if path != "Cargo.toml" && !path.ends_with("/Cargo.toml") {
            continue;
        }
        let dir = path.strip_suffix("/Cargo.toml").unwrap_or(".").to_string();
        let skipped = skips.iter().any(|s| is_under(&dir, &s.root));
        let manifest = std::fs::read_to_string(tree.join(&path)).unwrap_or_default();
        match manifest.parse::<toml::Table>() {
            Ok(table) if table.contains_key("workspace") => workspaces.push(dir),
            Ok(_) => {}
            Err(error) if !skipped => findings.push(Finding {
                path: PathBuf::from(&path),
                line: error.span().map(|s| line_at(&manifest, s.start)),
                code: "unparsable-manifest".into(),
                message: format!(
                    "not TOML ({}), so whether it is a workspace cannot be told",
                    one_line(error.message())
                ),
            }),
            Err(_) => {}
        }
    }

    findings.extend(skip_findings(
        &file,
        &skips,
        &workspaces,
        "its workspaces are not formatted",
        "Cargo.toml with a [workspace] table",
    ));
    for (index, root) in roots.iter().enumerate() {
        if !workspaces.contains(&root.root) {
            findings.push(file.finding(
                root.line,
                "missing-root",
                format!(
                    "workspace[{index}] ({}) has no Cargo.toml with a [workspace] table that git tracks or has not ignored",
                    root.root
                ),
            ));
        }
    }
    for dir in &workspaces {
        if !roots.iter().any(|r| &r.root == dir) && !skips.iter().any(|s| is_under(dir, &s.root)) {
            let manifest = manifest_of(dir);
            findings.push(Finding {
                path: PathBuf::from(&manifest),
                line: None,
                code: "unlisted-workspace".into(),
                message: format!(
                    "a [workspace] that formatting.toml neither checks nor skips: add a [[workspace]] root = {dir:?}, \
                     or a [[skip]] with its reason"
                ),
            });
        }
    }

    let canonical_tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
    let mut unformatted: Vec<Finding> = Vec::new();
    for root in roots.iter().filter(|r| workspaces.contains(&r.root)) {
        let manifest = manifest_of(&root.root);
        for finding in run_cargo_fmt(&canonical_tree, &manifest, timeout) {
            if !unformatted.iter().any(|f| f.path == finding.path && f.code == finding.code) {
                unformatted.push(finding);
            }
        }
    }
    findings.extend(unformatted);
    findings.sort_by(|a, b| (&a.path, a.line, &a.code).cmp(&(&b.path, b.line, &b.code)));
    Ok(findings)
}

fn manifest_of(dir: &str) -> String {
    if dir == "." {
        "Cargo.toml".into()
    } else {
        format!("{dir}/Cargo.toml")
    }
}

fn parse(shown: &str, text: &str) -> Result<(Duration, Vec<Workspace>, Vec<Skip>), ConfigError> {
    let err = |field: String, message: String| ConfigError { file: shown.to_string(), field, message };
    let raw: RawConfig = parse_config(shown, text)?;
    let timeout = match raw.timeout_secs {
        None => DEFAULT_TIMEOUT_SECS,
        Some(secs @ 1..=86_400) => secs,
        Some(secs) => {
            return Err(err(
                "timeout_secs".into(),
                format!("{secs} is not accepted: whole seconds from 1 to 86400 (default {DEFAULT_TIMEOUT_SECS})"),
            ))
        }
    };
    if raw.workspace.is_empty() {
        return Err(err(
            "workspace".into(),
            "none is not accepted: at least one [[workspace]] root = \"<dir>\" to format".into(),
        ));
    }
    let mut roots: Vec<Workspace> = Vec::new();
    for (index, entry) in raw.workspace.into_iter().enumerate() {
        let line = line_at(text, entry.span().start);
        let field = format!("workspace[{index}].root");
        let root = tree_path(&entry.into_inner().root).map_err(|refused| err(field.clone(), refused.to_string()))?;
        if roots.iter().any(|r| r.root == root) {
            return Err(err(field, format!("{root:?} is named twice: one [[workspace]] per root")));
        }
        roots.push(Workspace { root, line });
    }
    let skips = parse_skips(shown, text, raw.skip, |root| {
        let checked = roots.iter().position(|r| is_under(&r.root, root))?;
        Some(format!(
            "{root:?} holds workspace[{checked}] ({:?}): a directory is either checked or skipped, not both",
            roots[checked].root
        ))
    })?;
    Ok((Duration::from_secs(timeout), roots, skips))
}

/// `cargo fmt --all --check` on one workspace, as findings.
fn run_cargo_fmt(tree: &Path, manifest: &str, timeout: Duration) -> Vec<Finding> {
    let shown = format!("cargo fmt --all --check --manifest-path {manifest}");
    let failed =
        |message: String| Finding { path: PathBuf::from(manifest), line: None, code: "fmt-failed".into(), message };
    // Its own process group, so the deadline kills rustfmt along with cargo.
    let output = Cmd::new("cargo", format!("`{shown}` to report whether the workspace is formatted"), timeout)
        .args(["fmt", "--all", "--check", "--manifest-path"])
        .arg(tree.join(manifest))
        .cwd(tree)
        .process_group()
        .output();
    let output = match output {
        Ok(output) => output,
        Err(CmdError::Spawn { source, .. }) => return vec![failed(format!("`{shown}` could not be started: {source}"))],
        Err(CmdError::Wait { source, .. }) => {
            return vec![failed(format!("`{shown}` could not be waited for: {source}"))]
        }
        Err(CmdError::Deadline { .. }) => {
            return vec![Finding {
                path: PathBuf::from(manifest),
                line: None,
                code: "fmt-timeout".into(),
                message: format!(
                    "`{shown}` did not finish within {} s; waited for it to report whether the workspace is formatted, then killed it",
                    timeout.as_secs()
                ),
            }]
        }
    };
    let status = output.status;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();

    let mut findings: Vec<Finding> = Vec::new();
    for (file, line) in diff_headers(&stdout) {
        let path = relative_to(tree, &file);
        if !findings.iter().any(|f| f.path == path) {
            findings.push(Finding {
                path,
                line: Some(line),
                code: "unformatted".into(),
                message: format!(
                    "not formatted as rustfmt would format it (first difference here); run `cargo fmt --all --manifest-path {manifest}`"
                ),
            });
        }
    }
    if !status.success() {
        // rustfmt's and cargo's errors; else the first line it wrote (cargo-fmt follows
        // some failures with its whole usage text).
        let mut detail: Vec<&str> =
            stderr.lines().map(str::trim).filter(|l| l.starts_with("error") || l.starts_with("-->")).collect();
        if findings.is_empty() || !detail.is_empty() {
            if detail.is_empty() {
                detail.extend(stderr.lines().map(str::trim).find(|l| !l.is_empty()));
            }
            let detail = if detail.is_empty() { "it wrote nothing on stderr".into() } else { detail.join(" | ") };
            findings.push(failed(format!("`{shown}` failed ({status}): {detail}")));
        }
    }
    findings
}

/// The files rustfmt's check output names, in either header form (`Diff in
/// /abs/file.rs:12:` or `Diff in /abs/file.rs at line 12:`), each with the first line
/// that would change: the header's line is where the hunk starts, context included.
/// Colour escape sequences (rustfmt writes them even into a pipe) are removed first.
pub fn diff_headers(output: &str) -> Vec<(PathBuf, usize)> {
    let mut headers: Vec<(PathBuf, usize)> = Vec::new();
    // Context lines (` `) open a hunk before its first change; they move the line on
    // until a change (`-` or `+`) is seen.
    let mut in_context = false;
    for line in output.lines() {
        let line = strip_escapes(line);
        if let Some(header) = diff_header(&line) {
            headers.push(header);
            in_context = true;
            continue;
        }
        if in_context {
            match line.chars().next() {
                Some(' ') | None => {
                    if let Some((_, number)) = headers.last_mut() {
                        *number += 1;
                    }
                }
                _ => in_context = false,
            }
        }
    }
    headers
}

fn diff_header(line: &str) -> Option<(PathBuf, usize)> {
    let rest = line.trim_end().strip_prefix("Diff in ")?.strip_suffix(':')?;
    let (file, number) = match rest.rsplit_once(" at line ") {
        Some(split) => split,
        None => rest.rsplit_once(':')?,
    };
    Some((PathBuf::from(file), number.parse().ok()?))
}

fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some('(' | ')') => {
                chars.next();
            }
            Some(_) | None => {}
        }
    }
    out
}

fn relative_to(tree: &Path, file: &Path) -> PathBuf {
    let file = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    match file.strip_prefix(tree) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => file,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_headers_of_both_rustfmt_forms_name_the_file() {
        let output =
            "Diff in /t/src/main.rs:7:\n-a\n+b\n\u{1b}[31mDiff in /t/my dir/lib.rs at line 12:\u{1b}(B\u{1b}[m\n\
                      \u{1b}(B\u{1b}[m context\n \n\u{1b}[31m-x\n \nDiff in C:/x:y.rs:3:\nnot a header:\n";
        assert_eq!(
            diff_headers(output),
            [
                (PathBuf::from("/t/src/main.rs"), 7),
                (PathBuf::from("/t/my dir/lib.rs"), 14),
                (PathBuf::from("C:/x:y.rs"), 3)
            ]
        );
    }
}
