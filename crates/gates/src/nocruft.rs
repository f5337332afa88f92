//! The no-cruft gate: what a tree has dropped stays dropped.
//!
//! `no-cruft.toml` names what is searched and the rules that hold there:
//!
//! ```toml
//! paths = ["crates", "guest"]        # searched: directories or files, relative to the tree
//! exclude = ["crates/x/fixtures"]    # optional: not searched, though under `paths`
//!
//! [[forbid]]                         # a name the tree has dropped (a regex, matched per line)
//! pattern = 'old_interface_name'
//! reason = "dropped in favour of new_interface_name"
//! within = ["guest/smoke/src"]       # optional: the pattern holds only there
//!
//! [dead_code]                        # allow/expect of dead_code, unused, unused_* is a finding here
//! paths = ["guest"]
//!
//! [features]                         # a Cargo feature nothing reads is a finding here
//! paths = ["guest"]
//!
//! [[constant]]                       # a constant with one literal definition
//! name = "PAGE_SIZE"
//!
//! [[allow]]                          # the only exemptions
//! path = "guest/smoke/src/uart.rs"   # a file, or a directory: everything under it
//! rule = "dead-code"                 # forbid:<pattern as written> | dead-code | feature:<name> | constant:<NAME>
//! reason = "why this one stays"
//! ```
//!
//! What is searched: the files git tracks or has not ignored in the tree (`git ls-files
//! --cached --others --exclude-standard`, so a file about to be added counts), under
//! `paths` and not under `exclude`. The configuration file itself is never searched (it
//! names the patterns). A tree that is not in a git work tree, or sits in an ignored
//! directory of one, is walked whole instead, skipping every `target/` and `.git/`.
//!
//! The rules:
//!
//! - `forbidden`: a line of a searched text file (any kind: code, comments, docs) that a
//!   `[[forbid]]` pattern matches, within its `within` paths when it has them.
//! - `dead-code-allow`: an attribute in a `.rs` file under `dead_code.paths` that allows
//!   or expects `dead_code`, `unused` or any `unused_*` lint, written directly
//!   (`#[allow(..)]`, `#![allow(..)]`) or inside `cfg_attr`, also inside a macro's body.
//!   Rust is read with `syn`, not by lines, so a comment or a string holding the same
//!   text is no attribute and no finding.
//! - `unread-feature`: a feature of a package whose `Cargo.toml` is under
//!   `features.paths` that no `feature = "x"` in the package's sources reads (in `cfg`,
//!   `cfg_attr`, `cfg!` or any other macro's tokens; a build script's
//!   `CARGO_FEATURE_X` counts too) and that enables nothing with an effect. A feature has
//!   an effect when it is read, or when it enables an optional dependency, a
//!   dependency's feature, or another feature with an effect: `a = ["b"]` counts as read
//!   exactly when `b` does, so a chain that ends in nothing is reported whole. `default`
//!   is exempt. A package's sources are the searched `.rs` files under its directory
//!   and not under a nested package's.
//! - `second-definition`: a `const NAME: T = <literal expression>` (only literals,
//!   operators, parentheses and casts; a free, associated or trait-default const) when
//!   `NAME` already has a literal definition elsewhere; the first, in path order, is the
//!   definition and every other one is a finding. A constant defined in terms of another
//!   (`= mm::PAGE_SIZE`, `= 1 << PAGE_SHIFT`) is a use, not a definition. A rule whose
//!   constant is not defined anywhere passes: it guards the second definition.
//! - `unparsable`: a searched `.rs` file that `syn` cannot read while a Rust rule applies
//!   to it (it fails closed rather than pass unread).
//! - `missing-path`: an entry of `paths` or `exclude` that names no considered file.
//! - `missing-within`: a rule's scope (`forbid.within`, `dead_code.paths`,
//!   `features.paths`) that names no searched file: missing, outside `paths`, excluded
//!   or ignored. A rule scoped where nothing is searched would pass forever.
//! - `stale-allow`: an `[[allow]]` that covers nothing. A constant's allow covers a
//!   definition only while there is another one.
//! - `git-failed`: a git command listing the considered files was killed at its deadline
//!   (or could not be waited for); the finding names it, and nothing else is judged.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use regex::Regex;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, Meta, Token};
use testbench_process::{Cmd, CmdError};
use toml::Spanned;

use crate::{ConfigError, Finding};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    paths: Vec<Spanned<String>>,
    #[serde(default)]
    exclude: Vec<Spanned<String>>,
    #[serde(default)]
    forbid: Vec<RawForbid>,
    dead_code: Option<RawScope>,
    features: Option<RawScope>,
    #[serde(default)]
    constant: Vec<RawConstant>,
    #[serde(default)]
    allow: Vec<Spanned<RawAllow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForbid {
    pattern: String,
    reason: String,
    #[serde(default)]
    within: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    paths: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstant {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllow {
    path: String,
    rule: String,
    reason: String,
}

/// A path from a configuration, with the line it is written on.
struct Scoped {
    field: String,
    path: String,
    line: usize,
}

struct Forbid {
    pattern: String,
    regex: Regex,
    reason: String,
    within: Vec<Scoped>,
}

struct Allow {
    path: String,
    rule: String,
    line: usize,
}

struct Config {
    paths: Vec<Scoped>,
    exclude: Vec<Scoped>,
    forbid: Vec<Forbid>,
    dead_code: Vec<Scoped>,
    features: Vec<Scoped>,
    constants: Vec<String>,
    allows: Vec<Allow>,
}

/// Run the gate on `tree` with the configuration at `config` (relative to `tree` or
/// absolute). The findings' paths are relative to `tree`; none is a pass.
pub fn check(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let file = ConfigFile::locate(tree, config);
    let text = file.read()?;
    let config = parse(&file.shown, &text)?;

    let considered = match considered_files(tree) {
        Ok(files) => files,
        Err(error) => return Ok(vec![file.git_failed(error)]),
    };
    let mut findings = Vec::new();

    for scoped in config.paths.iter().chain(&config.exclude) {
        if !considered.iter().any(|f| is_under(f, &scoped.path)) {
            findings.push(file.finding(
                scoped.line,
                "missing-path",
                format!("{} = {:?} names no file git tracks or has not ignored", scoped.field, scoped.path),
            ));
        }
    }

    let searched: Vec<&String> = considered
        .iter()
        .filter(|f| Some(f.as_str()) != file.in_tree.as_deref())
        .filter(|f| config.paths.iter().any(|p| is_under(f, &p.path)))
        .filter(|f| !config.exclude.iter().any(|p| is_under(f, &p.path)))
        .collect();

    let scopes = config.forbid.iter().flat_map(|f| &f.within).chain(&config.dead_code).chain(&config.features);
    for scoped in scopes {
        if searched.iter().any(|f| is_under(f, &scoped.path)) {
            continue;
        }
        let why = if tree.join(&scoped.path).exists() {
            "holds no searched file: it is outside `paths`, excluded, or ignored by git"
        } else {
            "does not exist"
        };
        findings.push(file.finding(
            scoped.line,
            "missing-within",
            format!("{} = {:?} {why}", scoped.field, scoped.path),
        ));
    }

    let mut ruled = Vec::new();
    let mut used = vec![false; config.allows.len()];
    let mut constants: BTreeMap<&str, Vec<(String, usize)>> =
        config.constants.iter().map(|c| (c.as_str(), Vec::new())).collect();
    let mut packages = Vec::new();
    let mut sources: Vec<(&str, String, Option<Scan>)> = Vec::new();

    for path in &searched {
        let Ok(bytes) = fs::read(tree.join(path.as_str())) else { continue };
        let Ok(text) = String::from_utf8(bytes) else { continue };
        for forbid in &config.forbid {
            if !forbid.within.is_empty() && !forbid.within.iter().any(|w| is_under(path, &w.path)) {
                continue;
            }
            for (index, line) in text.lines().enumerate() {
                if forbid.regex.is_match(line) {
                    ruled.push(Ruled {
                        rule: format!("forbid:{}", forbid.pattern),
                        finding: Finding {
                            path: PathBuf::from(path.as_str()),
                            line: Some(index + 1),
                            code: "forbidden".into(),
                            message: format!("`{}` is forbidden here: {}", forbid.pattern, forbid.reason),
                        },
                    });
                }
            }
        }
        if path.ends_with(".rs") {
            let rust_rules_apply = !config.constants.is_empty()
                || config.dead_code.iter().chain(&config.features).any(|s| is_under(path, &s.path));
            let scan = match syn::parse_file(&text) {
                Ok(parsed) => {
                    let mut scan = Scan::default();
                    scan.visit_file(&parsed);
                    Some(scan)
                }
                Err(error) => {
                    if rust_rules_apply {
                        findings.push(Finding {
                            path: PathBuf::from(path.as_str()),
                            line: Some(error.span().start().line),
                            code: "unparsable".into(),
                            message: format!("syn cannot read this file ({error}), so its Rust rules were not checked"),
                        });
                    }
                    None
                }
            };
            sources.push((path.as_str(), text, scan));
        } else if path.rsplit('/').next() == Some("Cargo.toml") {
            packages.push((path.as_str(), text));
        }
    }

    for (path, _, scan) in &sources {
        let Some(scan) = scan else { continue };
        if config.dead_code.iter().any(|s| is_under(path, &s.path)) {
            for allow in &scan.allows {
                ruled.push(Ruled {
                    rule: "dead-code".into(),
                    finding: Finding {
                        path: PathBuf::from(path),
                        line: Some(allow.line),
                        code: "dead-code-allow".into(),
                        message: format!(
                            "`{}` is not accepted here: code under dead_code.paths that nothing uses is deleted, not allowed",
                            allow.shown
                        ),
                    },
                });
            }
        }
        for (name, line) in &scan.consts {
            if let Some(defs) = constants.get_mut(name.as_str()) {
                defs.push((path.to_string(), *line));
            }
        }
    }

    for (name, defs) in &constants {
        let rule = format!("constant:{name}");
        let covered =
            |path: &str, allows: &[Allow]| allows.iter().position(|a| a.rule == rule && is_under(path, &a.path));
        if defs.len() >= 2 {
            for (path, _) in defs {
                if let Some(index) = covered(path, &config.allows) {
                    used[index] = true;
                }
            }
        }
        let mut kept = defs.iter().filter(|(path, _)| covered(path, &config.allows).is_none());
        let Some((first_path, first_line)) = kept.next() else { continue };
        for (path, line) in kept {
            findings.push(Finding {
                path: PathBuf::from(path),
                line: Some(*line),
                code: "second-definition".into(),
                message: format!(
                    "`{name}` is defined with a literal value again; its definition is at {first_path}:{first_line}: use that one"
                ),
            });
        }
    }

    let package_dirs: Vec<&str> =
        packages.iter().filter(|(_, text)| is_package(text)).map(|(path, _)| parent_dir(path)).collect();
    for (manifest, text) in &packages {
        if !config.features.iter().any(|s| is_under(manifest, &s.path)) {
            continue;
        }
        let dir = parent_dir(manifest);
        let own = |path: &str| {
            is_under(path, dir)
                && !package_dirs.iter().any(|d| d.len() > dir.len() && is_under(d, dir) && is_under(path, d))
        };
        let package_sources: Vec<&(&str, String, Option<Scan>)> = sources.iter().filter(|(p, _, _)| own(p)).collect();
        ruled.extend(unread_features(manifest, text, &package_sources));
    }

    for ruled in ruled {
        let path = ruled.finding.path.to_string_lossy().into_owned();
        match config.allows.iter().position(|a| a.rule == ruled.rule && is_under(&path, &a.path)) {
            Some(index) => used[index] = true,
            None => findings.push(ruled.finding),
        }
    }

    for (index, allow) in config.allows.iter().enumerate() {
        if !used[index] {
            findings.push(file.finding(
                allow.line,
                "stale-allow",
                format!("allow[{index}] ({}, {}) covers nothing: delete it", allow.path, allow.rule),
            ));
        }
    }

    findings.sort_by(|a, b| (&a.path, a.line, &a.code).cmp(&(&b.path, b.line, &b.code)));
    findings.dedup();
    Ok(findings)
}

/// A finding an `[[allow]]` may exempt, with the rule it would name.
struct Ruled {
    rule: String,
    finding: Finding,
}

fn is_package(manifest: &str) -> bool {
    manifest.parse::<toml::Table>().map(|t| t.contains_key("package")).unwrap_or(false)
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or(".")
}

fn unread_features(manifest: &str, text: &str, sources: &[&(&str, String, Option<Scan>)]) -> Vec<Ruled> {
    let Ok(table) = text.parse::<toml::Table>() else { return Vec::new() };
    let Some(package) = table.get("package").and_then(|p| p.get("name")).and_then(|n| n.as_str()) else {
        return Vec::new();
    };
    let Some(declared) = table.get("features").and_then(|f| f.as_table()) else { return Vec::new() };
    let enables: BTreeMap<&str, Vec<&str>> = declared
        .iter()
        .map(|(name, list)| {
            let list = list.as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
            (name.as_str(), list)
        })
        .collect();

    let mut live: BTreeSet<&str> = BTreeSet::new();
    for name in enables.keys() {
        let env = format!("CARGO_FEATURE_{}", name.to_uppercase().replace('-', "_"));
        let read = sources
            .iter()
            .any(|(_, text, scan)| scan.as_ref().is_some_and(|s| s.features.contains(*name)) || text.contains(&env));
        if read {
            live.insert(name);
        }
    }
    loop {
        let before = live.len();
        for (name, list) in &enables {
            if *name == "default" || live.contains(name) {
                continue;
            }
            if list.iter().any(|e| !enables.contains_key(e) || live.contains(e)) {
                live.insert(name);
            }
        }
        if live.len() == before {
            break;
        }
    }

    let lines = feature_lines(text);
    enables
        .iter()
        .filter(|(name, _)| **name != "default" && !live.contains(**name))
        .map(|(name, list)| {
            let tail = if list.is_empty() {
                "and enables nothing".to_string()
            } else {
                format!("and what it enables ({}) has no effect either", list.join(", "))
            };
            Ruled {
                rule: format!("feature:{name}"),
                finding: Finding {
                    path: PathBuf::from(manifest),
                    line: lines.get(*name).copied(),
                    code: "unread-feature".into(),
                    message: format!(
                        "feature `{name}` of package `{package}` is read by no `feature = \"{name}\"` in the package's sources {tail}"
                    ),
                },
            }
        })
        .collect()
}

/// The line each key of a manifest's `[features]` table is declared on.
fn feature_lines(text: &str) -> BTreeMap<String, usize> {
    let mut lines = BTreeMap::new();
    let mut inside = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed.trim_start_matches('[').trim_end_matches(']').trim() == "features";
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((key, _)) = trimmed.split_once('=') {
            let key = key.trim().trim_matches('"').trim_matches('\'');
            lines.entry(key.to_string()).or_insert(index + 1);
        }
    }
    lines
}

fn parse(shown: &str, text: &str) -> Result<Config, ConfigError> {
    let err = |field: String, message: String| ConfigError { file: shown.to_string(), field, message };
    let raw: RawConfig = parse_config(shown, text)?;
    let scoped = |field: &str, list: &[Spanned<String>]| -> Result<Vec<Scoped>, ConfigError> {
        list.iter()
            .enumerate()
            .map(|(index, entry)| {
                let field = format!("{field}[{index}]");
                let path = tree_path(entry.get_ref()).map_err(|refused| err(field.clone(), refused.to_string()))?;
                Ok(Scoped { field, path, line: line_at(text, entry.span().start) })
            })
            .collect()
    };

    if raw.paths.is_empty() {
        return Err(err("paths".into(), "empty is not accepted: a list of at least one path to search".into()));
    }
    let paths = scoped("paths", &raw.paths)?;
    let exclude = scoped("exclude", &raw.exclude)?;

    let mut forbid = Vec::new();
    for (index, entry) in raw.forbid.into_iter().enumerate() {
        let field = format!("forbid[{index}]");
        if entry.pattern.is_empty() {
            return Err(err(format!("{field}.pattern"), "empty is not accepted: a regex (matched per line)".into()));
        }
        let regex = Regex::new(&entry.pattern).map_err(|error| {
            let detail = error.to_string().lines().map(str::trim).collect::<Vec<_>>().join(" ");
            err(format!("{field}.pattern"), format!("not a valid regex: {detail}"))
        })?;
        if entry.reason.trim().is_empty() {
            return Err(err(
                format!("{field}.reason"),
                "empty is not accepted: why the pattern is forbidden (shown in each finding)".into(),
            ));
        }
        if forbid.iter().any(|f: &Forbid| f.pattern == entry.pattern) {
            return Err(err(
                format!("{field}.pattern"),
                format!("{:?} is forbidden twice: one entry per pattern", entry.pattern),
            ));
        }
        let within = scoped(&format!("{field}.within"), &entry.within)?;
        forbid.push(Forbid { pattern: entry.pattern, regex, reason: entry.reason, within });
    }

    let scope = |table: &str, raw: Option<RawScope>| -> Result<Vec<Scoped>, ConfigError> {
        let Some(raw) = raw else { return Ok(Vec::new()) };
        if raw.paths.is_empty() {
            return Err(err(
                format!("{table}.paths"),
                format!("empty is not accepted: at least one path, or no [{table}] table"),
            ));
        }
        scoped(&format!("{table}.paths"), &raw.paths)
    };
    let dead_code = scope("dead_code", raw.dead_code)?;
    let features = scope("features", raw.features)?;

    let mut constants: Vec<String> = Vec::new();
    for (index, entry) in raw.constant.into_iter().enumerate() {
        let field = format!("constant[{index}].name");
        if syn::parse_str::<syn::Ident>(&entry.name).is_err() {
            return Err(err(field, format!("{:?} is not accepted: a Rust identifier", entry.name)));
        }
        if constants.contains(&entry.name) {
            return Err(err(field, format!("{:?} is named twice: one [[constant]] per name", entry.name)));
        }
        constants.push(entry.name);
    }

    let mut allows = Vec::new();
    for (index, entry) in raw.allow.into_iter().enumerate() {
        let field = format!("allow[{index}]");
        let line = line_at(text, entry.span().start);
        let entry = entry.into_inner();
        let path = tree_path(&entry.path).map_err(|refused| err(format!("{field}.path"), refused.to_string()))?;
        let known = match entry.rule.split_once(':') {
            None => entry.rule == "dead-code" && !dead_code.is_empty(),
            Some(("forbid", pattern)) => forbid.iter().any(|f| f.pattern == pattern),
            Some(("feature", name)) => !name.is_empty() && !features.is_empty(),
            Some(("constant", name)) => constants.iter().any(|c| c == name),
            Some(_) => false,
        };
        if !known {
            let mut accepted: Vec<String> = forbid.iter().map(|f| format!("forbid:{}", f.pattern)).collect();
            if !dead_code.is_empty() {
                accepted.push("dead-code".into());
            }
            if !features.is_empty() {
                accepted.push("feature:<name>".into());
            }
            accepted.extend(constants.iter().map(|c| format!("constant:{c}")));
            let accepted =
                if accepted.is_empty() { "none: this file has no rules".into() } else { accepted.join(", ") };
            return Err(err(
                format!("{field}.rule"),
                format!("{:?} is not accepted: one of this file's rules ({accepted})", entry.rule),
            ));
        }
        if entry.reason.trim().is_empty() {
            return Err(err(format!("{field}.reason"), "empty is not accepted: why this exemption stays".into()));
        }
        allows.push(Allow { path, rule: entry.rule, line });
    }

    Ok(Config { paths, exclude, forbid, dead_code, features, constants, allows })
}

/// A gate's configuration file as its raw serde form; a TOML or serde error is a
/// `ConfigError` on the line it points at (`toml` when it points nowhere), its message on
/// one line. Every gate with a `ConfigFile` reads its file through this.
pub(crate) fn parse_config<R: DeserializeOwned>(shown: &str, text: &str) -> Result<R, ConfigError> {
    toml::from_str(text).map_err(|error| {
        let field = match error.span() {
            Some(span) => format!("line {}", line_at(text, span.start)),
            None => "toml".to_string(),
        };
        ConfigError { file: shown.to_string(), field, message: one_line(error.message()) }
    })
}

/// A configured path [`tree_path`] refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?} is not accepted: a relative path inside the tree, '/'-separated, without '..' ('.' is the whole tree)"
)]
pub(crate) struct TreePathError {
    pub(crate) value: String,
}

/// A configuration's path to a place in the tree: relative, `/`-separated, no `..`;
/// `.` is the whole tree. Returned without a trailing `/` or `./`.
pub(crate) fn tree_path(value: &str) -> Result<String, TreePathError> {
    let refused = || TreePathError { value: value.to_string() };
    let trimmed = value.trim_end_matches('/');
    let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
    if value.is_empty() || value.starts_with('/') || value.contains('\\') || Path::new(value).is_absolute() {
        return Err(refused());
    }
    if trimmed.split('/').any(|part| part == ".." || part.is_empty() || (part == "." && trimmed != ".")) {
        return Err(refused());
    }
    Ok(if trimmed.is_empty() { ".".into() } else { trimmed.into() })
}

/// Whether the `/`-separated `path` is `dir` or under it (`.` holds everything).
pub(crate) fn is_under(path: &str, dir: &str) -> bool {
    dir == "." || path == dir || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// A message of several lines (as TOML's are) on one, so a finding stays one line.
pub(crate) fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

/// The 1-based line a byte offset of `text` is on.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    1 + text[..offset.min(text.len())].matches('\n').count()
}

/// A gate's configuration file: where it is read from, how errors name it, and where it
/// sits in the tree (findings about it are reported there).
pub(crate) struct ConfigFile {
    pub(crate) full: PathBuf,
    pub(crate) shown: String,
    pub(crate) in_tree: Option<String>,
}

impl ConfigFile {
    pub(crate) fn locate(tree: &Path, config: &Path) -> ConfigFile {
        let full = if config.is_absolute() { config.to_path_buf() } else { tree.join(config) };
        let in_tree = match (full.canonicalize(), tree.canonicalize()) {
            (Ok(file), Ok(root)) => file
                .strip_prefix(&root)
                .ok()
                .map(|rel| rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")),
            _ => None,
        };
        ConfigFile { full, shown: config.display().to_string(), in_tree }
    }

    pub(crate) fn read(&self) -> Result<String, ConfigError> {
        fs::read_to_string(&self.full).map_err(|error| ConfigError {
            file: self.shown.clone(),
            field: "(file)".into(),
            message: format!("cannot be read ({error}): a TOML file, relative to the tree or absolute"),
        })
    }

    pub(crate) fn finding(&self, line: usize, code: &str, message: String) -> Finding {
        let path = self.in_tree.clone().map(PathBuf::from).unwrap_or_else(|| self.full.clone());
        Finding { path, line: Some(line), code: code.into(), message }
    }

    /// The finding of a gate that could not list the files it considers: `git-failed`,
    /// on the configuration file, naming the git command it waited for.
    pub(crate) fn git_failed(&self, error: CmdError) -> Finding {
        let path = self.in_tree.clone().map(PathBuf::from).unwrap_or_else(|| self.full.clone());
        let message = format!("the files to consider could not be listed: {error}");
        Finding { path, line: None, code: "git-failed".into(), message }
    }
}

/// How long one git command listing the files a gate considers may take.
pub(crate) const GIT_DEADLINE: Duration = Duration::from_secs(120);

/// The files a gate considers in `tree`, relative and `/`-separated, sorted: those git
/// tracks or has not ignored, or, when `tree` is in no git work tree or in an ignored
/// directory of one, every file under it but those in `target/` and `.git/`. Git is
/// asked with the caller's `GIT_DIR` and the like removed, so only `tree` decides. A git
/// command killed at its deadline (or not waited for) is an error naming it: the list
/// would be a guess. A git that cannot be started reads as no work tree.
pub(crate) fn considered_files(tree: &Path) -> Result<Vec<String>, CmdError> {
    let git = |args: &[&str]| {
        let what = format!("git {} to list the files the gates consider", args.first().unwrap_or(&""));
        let out = Cmd::new("git", what, GIT_DEADLINE)
            .arg("-C")
            .arg(tree)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .output();
        match out {
            Err(CmdError::Spawn { source, .. }) => Ok(Err(source)),
            Err(error) => Err(error),
            Ok(out) => Ok(Ok(out)),
        }
    };
    let in_work_tree = git(&["rev-parse", "--is-inside-work-tree"])?
        .is_ok_and(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "true");
    let ignored = in_work_tree && git(&["check-ignore", "-q", "."])?.is_ok_and(|out| out.status.success());
    if in_work_tree && !ignored {
        if let Ok(out) = git(&["ls-files", "-z", "--cached", "--others", "--exclude-standard"])? {
            if out.status.success() {
                let mut files: Vec<String> = out
                    .stdout
                    .split(|b| *b == 0)
                    .filter(|name| !name.is_empty())
                    .map(|name| String::from_utf8_lossy(name).into_owned())
                    .filter(|name| tree.join(name).is_file())
                    .collect();
                files.sort();
                files.dedup();
                return Ok(files);
            }
        }
    }
    let mut files = Vec::new();
    walk(tree, "", &mut files);
    files.sort();
    Ok(files)
}

fn walk(dir: &Path, prefix: &str, files: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if name != "target" && name != ".git" {
                walk(&entry.path(), &rel, files);
            }
        } else if kind.is_file() {
            files.push(rel);
        }
    }
}

/// What one Rust file says, read by `syn`.
#[derive(Default)]
struct Scan {
    /// Attributes allowing dead code: line and how it is written.
    allows: Vec<LintAllow>,
    /// Every `feature = "x"` read in a cfg (or any macro's tokens).
    features: BTreeSet<String>,
    /// Literal const definitions: name and line.
    consts: Vec<(String, usize)>,
}

struct LintAllow {
    line: usize,
    shown: String,
}

fn is_dead_code_lint(name: &str) -> bool {
    name == "dead_code" || name == "unused" || name.starts_with("unused_")
}

impl Scan {
    /// An attribute's meta: `allow(..)`/`expect(..)` of a dead-code lint, `cfg(..)`, or
    /// `cfg_attr(pred, attrs..)`, whose attributes are read the same way.
    fn meta(&mut self, meta: &Meta, line: usize, inner: bool, through_cfg_attr: bool) {
        let Some(name) = meta.path().get_ident().map(|i| i.to_string()) else { return };
        let Meta::List(list) = meta else { return };
        match name.as_str() {
            "allow" | "expect" => {
                let Ok(lints) = list.parse_args_with(Punctuated::<syn::Path, Token![,]>::parse_terminated) else {
                    return;
                };
                for lint in lints {
                    let Some(lint) = lint.get_ident().map(|i| i.to_string()) else { continue };
                    if is_dead_code_lint(&lint) {
                        let bang = if inner { "#!" } else { "#" };
                        let shown = if through_cfg_attr {
                            format!("{bang}[cfg_attr(.., {name}({lint}))]")
                        } else {
                            format!("{bang}[{name}({lint})]")
                        };
                        self.allows.push(LintAllow { line, shown });
                    }
                }
            }
            "cfg" => self.features(&list.tokens),
            "cfg_attr" => {
                self.features(&list.tokens);
                if let Ok(metas) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
                    for meta in metas.iter().skip(1) {
                        self.meta(meta, line, inner, true);
                    }
                }
            }
            _ => {}
        }
    }

    /// Every `feature = "x"` in a token stream, at any depth.
    fn features(&mut self, tokens: &TokenStream) {
        let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
        for (index, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => self.features(&group.stream()),
                TokenTree::Ident(ident) if ident == "feature" => {
                    if let (Some(TokenTree::Punct(eq)), Some(TokenTree::Literal(lit))) =
                        (tokens.get(index + 1), tokens.get(index + 2))
                    {
                        if eq.as_char() == '=' {
                            if let Ok(lit) = syn::parse2::<syn::LitStr>(TokenTree::Literal(lit.clone()).into()) {
                                self.features.insert(lit.value());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Attributes written inside a macro's tokens (`macro_rules!` bodies and the like).
    fn attributes_in(&mut self, tokens: &TokenStream) {
        let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
        for (index, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Punct(pound) if pound.as_char() == '#' => {
                    let (inner, next) = match tokens.get(index + 1) {
                        Some(TokenTree::Punct(bang)) if bang.as_char() == '!' => (true, tokens.get(index + 2)),
                        next => (false, next),
                    };
                    if let Some(TokenTree::Group(group)) = next {
                        if group.delimiter() == Delimiter::Bracket {
                            if let Ok(meta) = syn::parse2::<Meta>(group.stream()) {
                                self.meta(&meta, pound.span().start().line, inner, false);
                            }
                        }
                    }
                }
                TokenTree::Group(group) => self.attributes_in(&group.stream()),
                _ => {}
            }
        }
    }

    fn constant(&mut self, ident: &syn::Ident, expr: &Expr) {
        if is_literal(expr) {
            self.consts.push((ident.to_string(), ident.span().start().line));
        }
    }
}

/// An expression of literals, operators, parentheses and casts only.
fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Lit(_) => true,
        Expr::Unary(unary) => is_literal(&unary.expr),
        Expr::Binary(binary) => is_literal(&binary.left) && is_literal(&binary.right),
        Expr::Paren(paren) => is_literal(&paren.expr),
        Expr::Group(group) => is_literal(&group.expr),
        Expr::Cast(cast) => is_literal(&cast.expr),
        _ => false,
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        let inner = matches!(attr.style, syn::AttrStyle::Inner(_));
        self.meta(&attr.meta, attr.pound_token.span.start().line, inner, false);
        visit::visit_attribute(self, attr);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.features(&mac.tokens);
        self.attributes_in(&mac.tokens);
        visit::visit_macro(self, mac);
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        self.constant(&item.ident, &item.expr);
        visit::visit_item_const(self, item);
    }

    fn visit_impl_item_const(&mut self, item: &'ast syn::ImplItemConst) {
        self.constant(&item.ident, &item.expr);
        visit::visit_impl_item_const(self, item);
    }

    fn visit_trait_item_const(&mut self, item: &'ast syn::TraitItemConst) {
        if let Some((_, expr)) = &item.default {
            self.constant(&item.ident, expr);
        }
        visit::visit_trait_item_const(self, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(source: &str) -> Scan {
        let mut scan = Scan::default();
        scan.visit_file(&syn::parse_file(source).unwrap());
        scan
    }

    #[test]
    fn an_allow_in_a_comment_or_a_string_is_no_attribute() {
        let found =
            scan("// #[allow(dead_code)]\nconst S: &str = \"#[allow(dead_code)]\";\n/// #[allow(unused)]\nfn f() {}\n");
        assert!(found.allows.is_empty());
    }

    #[test]
    fn allows_are_found_direct_inner_in_cfg_attr_and_in_macro_bodies() {
        let found = scan(
            "#![allow(unused_imports)]\n#[cfg_attr(not(feature = \"echo\"), allow(dead_code))]\nfn f() {}\n\
             macro_rules! m { () => { #[allow(unused)] fn g() {} } }\n#[expect(dead_code)]\nfn h() {}\n\
             #[allow(clippy::unused_self, non_snake_case)]\nfn k() {}\n",
        );
        let shown: Vec<(usize, &str)> = found.allows.iter().map(|a| (a.line, a.shown.as_str())).collect();
        assert_eq!(
            shown,
            [
                (1, "#![allow(unused_imports)]"),
                (2, "#[cfg_attr(.., allow(dead_code))]"),
                (4, "#[allow(unused)]"),
                (5, "#[expect(dead_code)]"),
            ]
        );
        assert!(found.features.contains("echo"));
    }

    #[test]
    fn only_literal_consts_are_definitions() {
        let found = scan(
            "const PAGE_SIZE: usize = 4096;\nconst B: usize = 1 << 12;\nconst C: usize = mm::PAGE_SIZE;\n\
             const D: usize = 1 << SHIFT;\nimpl X { const E: u64 = 4 * 1024 as u64; }\n",
        );
        let names: Vec<&str> = found.consts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PAGE_SIZE", "B", "E"]);
    }

    #[test]
    fn tree_paths_are_relative_and_stay_inside() {
        assert_eq!(tree_path("guest/").unwrap(), "guest");
        assert_eq!(tree_path("./guest").unwrap(), "guest");
        assert_eq!(tree_path(".").unwrap(), ".");
        for bad in ["", "/abs", "a/../b", "..", "a//b", "a\\b"] {
            let refused = tree_path(bad).unwrap_err();
            assert_eq!(refused, TreePathError { value: bad.to_string() });
            assert_eq!(
                refused.to_string(),
                format!("{bad:?} is not accepted: a relative path inside the tree, '/'-separated, without '..' ('.' is the whole tree)")
            );
        }
        assert!(is_under("guest/smoke/x.rs", "guest"));
        assert!(!is_under("guests/x", "guest"));
        assert!(is_under("anything", "."));
    }
}
