//! The unsafe budget: every use of `unsafe` in the trusted code is counted and justified,
//! and the counts only fall.
//!
//! `unsafe-budget.toml`:
//!
//! ```toml
//! workspace = "guest"              # the cargo workspace whose members must be covered
//! [[budget]]
//! name = "smoke"
//! paths = ["guest/smoke/src"]      # source directories (or files), relative to the tree
//! max_unsafe = 12                  # most uses of `unsafe`
//! max_unjustified = 0              # most uses without a justification
//! [[uncounted]]
//! member = "guest/programs"        # a workspace member's directory, relative to the tree
//! reason = "test programs, not trusted code"
//! ```
//!
//! # What is counted
//!
//! Every `.rs` file under a budget's paths is parsed with `syn` (test modules included:
//! the budget is over the source directories). One use is one `unsafe` keyword written:
//!
//! | use | justified by |
//! |-----|--------------|
//! | an `unsafe { }` block | a `SAFETY:` comment (below) |
//! | an `unsafe fn` (free, inherent, trait or trait impl method, foreign) | a `# Safety` section in its doc comment |
//! | an `unsafe trait` | a `# Safety` section in its doc comment |
//! | an `unsafe impl` | a `# Safety` section in its doc comment, or a `SAFETY:` comment |
//! | an `unsafe extern` block | a `SAFETY:` comment |
//! | an `#[unsafe(...)]` attribute | a `SAFETY:` comment |
//! | the token `unsafe` inside any macro's tokens (a `macro_rules!` body, an invocation such as `println!(.., unsafe { .. })`), which `syn` does not parse | a `SAFETY:` comment |
//!
//! Not counted: an `unsafe fn(..)` pointer type (a type, not a use), `#[no_mangle]` and
//! other attributes an older edition lets through without the keyword, and `unsafe`
//! inside comments or strings.
//!
//! # How a justification is read
//!
//! `syn` drops comments, so the source lines are read around the keyword's line. A
//! `SAFETY:` comment (`// SAFETY:`, `/* SAFETY: */`, or in a doc comment) justifies a use
//! when it is:
//!
//! - in the comment block directly above the keyword's line: the run of lines holding only
//!   comments or attributes (`#[..]`) right above it. A blank line or a line of code ends
//!   the block, so a comment separated from its `unsafe` by a blank line does not count;
//! - in the comment block directly above the first line of the innermost statement, match
//!   arm or item holding the keyword (`let x = f(unsafe { .. });` with the comment above
//!   the `let`). Not for a keyword inside a macro's tokens, whose only anchor is its line;
//! - in a block comment on the keyword's own line, before it: `/* SAFETY: .. */ unsafe { }`.
//!
//! A `# Safety` section is a line of the item's doc comment (`///`, `/** */` or
//! `#[doc = ".."]`) reading `# Safety` (any number of `#`).
//!
//! # Findings
//!
//! `over-unsafe` and `over-unjustified` when a budget is over a limit (with one
//! `unjustified` finding per site when the unjustified are over), `empty-path` for a
//! budget path with no Rust, `uncovered` for a `no_std` member of the workspace with
//! sources in no budget and not `[[uncounted]]`, `stale-uncounted`, `parse`. The ratchet
//! (raising a limit, dropping a budget, removing a path needs `Unsafe budget: <name>:
//! <reason>` in the commit) is [`crate::history`]'s.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use serde::Deserialize;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Meta};

use crate::finding::{ConfigError, Finding};
use crate::history::{self, BudgetFile, Entry, Limit};
use crate::size_budget::{scan_lines, LineInfo};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    workspace: String,
    #[serde(default)]
    budget: Vec<RawBudget>,
    #[serde(default)]
    uncounted: Vec<RawUncounted>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    name: String,
    paths: Vec<String>,
    max_unsafe: u64,
    max_unjustified: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUncounted {
    member: String,
    reason: String,
}

/// A validated `unsafe-budget.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The cargo workspace's directory, relative to the tree.
    pub workspace: PathBuf,
    pub budgets: Vec<Budget>,
    pub uncounted: Vec<Uncounted>,
}

/// One `[[budget]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub name: String,
    pub paths: Vec<PathBuf>,
    pub max_unsafe: u64,
    pub max_unjustified: u64,
}

/// One `[[uncounted]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncounted {
    pub member: PathBuf,
    pub reason: String,
}

/// Parses and validates one version of `unsafe-budget.toml`; `file` names it in errors.
pub fn parse_config(file: &str, text: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = history::parse_toml(file, text)?;
    let err = |field: String, message: String| ConfigError { file: file.to_string(), field, message };
    let workspace = history::checked_path(file, "workspace", &raw.workspace)?;
    let mut budgets = Vec::new();
    let mut names = BTreeSet::new();
    for (i, b) in raw.budget.into_iter().enumerate() {
        if b.name.trim().is_empty() {
            return Err(err(format!("budget[{i}].name"), "is empty; expected the budget's name".into()));
        }
        if !names.insert(b.name.clone()) {
            return Err(err(
                format!("budget[{i}].name"),
                format!("`{}` is used twice; expected each budget name once", b.name),
            ));
        }
        if b.paths.is_empty() {
            return Err(err(format!("budget[{i}].paths"), "is empty; expected at least one source directory".into()));
        }
        let mut paths = Vec::new();
        for (j, p) in b.paths.iter().enumerate() {
            let p = history::checked_path(file, &format!("budget[{i}].paths[{j}]"), p)?;
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        if b.max_unjustified > b.max_unsafe {
            return Err(err(
                format!("budget[{i}].max_unjustified"),
                format!(
                    "{} is more than max_unsafe ({}); expected at most max_unsafe",
                    b.max_unjustified, b.max_unsafe
                ),
            ));
        }
        budgets.push(Budget { name: b.name, paths, max_unsafe: b.max_unsafe, max_unjustified: b.max_unjustified });
    }
    let mut uncounted = Vec::new();
    for (i, u) in raw.uncounted.into_iter().enumerate() {
        let member = history::checked_path(file, &format!("uncounted[{i}].member"), &u.member)?;
        if u.reason.trim().is_empty() {
            return Err(err(
                format!("uncounted[{i}].reason"),
                "is empty; expected why this member is not trusted code".into(),
            ));
        }
        uncounted.push(Uncounted { member, reason: u.reason });
    }
    Ok(Config { workspace, budgets, uncounted })
}

impl BudgetFile for Config {
    const LABEL: &'static str = "Unsafe budget";
    const ENTRY: &'static str = "budget";

    fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        parse_config(file, text)
    }

    fn entries(&self) -> Vec<Entry<'_>> {
        self.budgets
            .iter()
            .map(|b| Entry {
                name: &b.name,
                limits: vec![
                    Limit { field: "max_unsafe", said: "max_unsafe", value: b.max_unsafe },
                    Limit { field: "max_unjustified", said: "max_unjustified", value: b.max_unjustified },
                ],
                paths: &b.paths,
            })
            .collect()
    }
}

/// Reads and validates the budget file `config` (relative to `tree`, or absolute).
pub fn load(tree: &Path, config: &Path) -> Result<(PathBuf, Config), ConfigError> {
    history::load(tree, config)
}

/// The gate: [`check_tree`] and [`check_history`] together. An empty list is a pass.
pub fn check(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let mut findings = check_tree(tree, config)?;
    findings.extend(check_history(tree, config)?);
    Ok(findings)
}

/// The ratchet ([`history::check_history`]): `raise-without-reason`, `deleted-config`,
/// `uncommitted-raise`, `no-merge-base` (and `unreadable-version`).
pub fn check_history(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    history::check_history::<Config>(tree, config)
}

/// One use of `unsafe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Relative to the tree.
    pub path: PathBuf,
    pub line: usize,
    /// "unsafe block", "unsafe fn `f`", ...
    pub kind: String,
    pub justified: bool,
    /// What would justify it: "a `// SAFETY:` comment directly above it or its statement".
    pub wants: &'static str,
}

/// A budget's counts, for printing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetCount {
    pub name: String,
    pub sites: Vec<Site>,
    pub max_unsafe: u64,
    pub max_unjustified: u64,
}

impl BudgetCount {
    pub fn unsafe_count(&self) -> usize {
        self.sites.len()
    }
    pub fn unjustified_count(&self) -> usize {
        self.sites.iter().filter(|s| !s.justified).count()
    }
}

/// Every use of `unsafe` in the file `path` (relative to `tree`), or why it does not parse
/// (the line and the message).
pub fn count_file(tree: &Path, path: &Path) -> Result<Vec<Site>, (usize, String)> {
    let src = fs::read_to_string(tree.join(path)).map_err(|e| (0, format!("cannot read it: {e}")))?;
    count_source(path, &src)
}

/// Every use of `unsafe` in `src`, the text of the file `path`.
pub fn count_source(path: &Path, src: &str) -> Result<Vec<Site>, (usize, String)> {
    let file = syn::parse_file(src).map_err(|e| (e.span().start().line, e.to_string()))?;
    let mut v = UnsafeVisitor {
        path: path.to_path_buf(),
        lines: scan_lines(src),
        text: src.lines().collect(),
        anchors: Vec::new(),
        sites: Vec::new(),
    };
    v.visit_file(&file);
    v.sites.sort_by_key(|s| s.line);
    Ok(v.sites)
}

/// Counts every budget of the budget file; the `parse` findings for files that do not
/// parse come with it.
pub fn counts(tree: &Path, config: &Path) -> Result<(Vec<BudgetCount>, Vec<Finding>), ConfigError> {
    let (_, cfg) = load(tree, config)?;
    Ok(count_budgets(tree, &cfg))
}

fn count_budgets(tree: &Path, cfg: &Config) -> (Vec<BudgetCount>, Vec<Finding>) {
    let mut parse_findings = Vec::new();
    let mut failed = BTreeSet::new();
    let mut out = Vec::new();
    for b in &cfg.budgets {
        let mut files = BTreeSet::new();
        for p in &b.paths {
            files.extend(history::rust_files(tree, p));
        }
        let mut sites = Vec::new();
        for f in files {
            match count_file(tree, &f) {
                Ok(s) => sites.extend(s),
                Err((line, message)) => {
                    if failed.insert(f.clone()) {
                        parse_findings.push(Finding {
                            path: f.clone(),
                            line: (line > 0).then_some(line),
                            code: "parse".into(),
                            message: format!("does not parse as Rust, so its unsafe cannot be counted: {message}"),
                        });
                    }
                }
            }
        }
        out.push(BudgetCount {
            name: b.name.clone(),
            sites,
            max_unsafe: b.max_unsafe,
            max_unjustified: b.max_unjustified,
        });
    }
    (out, parse_findings)
}

/// The rules that read the tree alone: `over-unsafe`, `over-unjustified`, `unjustified`,
/// `empty-path`, `uncovered`, `stale-uncounted`, `parse`.
pub fn check_tree(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let (rel, cfg) = load(tree, config)?;
    let mut findings = Vec::new();
    let on_config = |code: &str, message: String| Finding { path: rel.clone(), line: None, code: code.into(), message };

    for b in &cfg.budgets {
        for p in &b.paths {
            let message = if !tree.join(p).exists() {
                Some("does not exist")
            } else if history::rust_files(tree, p).is_empty() {
                Some("holds no Rust source")
            } else {
                None
            };
            if let Some(m) = message {
                findings.push(on_config("empty-path", format!("budget `{}`: path `{}` {m}", b.name, p.display())));
            }
        }
    }

    let (counts, parse_findings) = count_budgets(tree, &cfg);
    findings.extend(parse_findings);
    for c in &counts {
        let n = c.unsafe_count();
        if n as u64 > c.max_unsafe {
            findings.push(on_config(
                "over-unsafe",
                format!("budget `{}` holds {n} uses of unsafe, over its max_unsafe of {}", c.name, c.max_unsafe),
            ));
        }
        let u = c.unjustified_count();
        if u as u64 > c.max_unjustified {
            findings.push(on_config(
                "over-unjustified",
                format!(
                    "budget `{}` holds {u} uses of unsafe without a justification, over its max_unjustified of {}",
                    c.name, c.max_unjustified
                ),
            ));
            for s in c.sites.iter().filter(|s| !s.justified) {
                findings.push(Finding {
                    path: s.path.clone(),
                    line: Some(s.line),
                    code: "unjustified".into(),
                    message: format!("{} without {} (budget `{}`)", s.kind, s.wants, c.name),
                });
            }
        }
    }

    let ws = workspace_members(tree, &cfg.workspace).map_err(|error| ConfigError {
        file: rel.display().to_string(),
        field: "workspace".into(),
        message: error.to_string(),
    })?;
    for m in &ws {
        if !m.no_std || cfg.uncounted.iter().any(|u| u.member == m.dir) {
            continue;
        }
        let missing: Vec<&PathBuf> = m
            .sources
            .iter()
            .filter(|f| !cfg.budgets.iter().any(|b| b.paths.iter().any(|p| history::is_under(f, p))))
            .collect();
        if !missing.is_empty() {
            let mut list: Vec<String> = missing.iter().take(5).map(|f| f.display().to_string()).collect();
            if missing.len() > 5 {
                list.push(format!("and {} more", missing.len() - 5));
            }
            findings.push(Finding {
                path: m.dir.clone(),
                line: None,
                code: "uncovered".into(),
                message: format!(
                    "the no_std workspace member `{}` has {} Rust source{} in no budget ({}) and is not [[uncounted]]",
                    m.dir.display(),
                    missing.len(),
                    if missing.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            });
        }
    }
    for u in &cfg.uncounted {
        match ws.iter().find(|m| m.dir == u.member) {
            None => findings.push(on_config(
                "stale-uncounted",
                format!(
                    "[[uncounted]] names `{}`, which is no member of the workspace `{}`",
                    u.member.display(),
                    shown(&cfg.workspace)
                ),
            )),
            Some(m) if !m.no_std => findings.push(on_config(
                "stale-uncounted",
                format!(
                    "[[uncounted]] names `{}`, a member whose crate root is not no_std (it needs no budget)",
                    u.member.display()
                ),
            )),
            Some(_) => {}
        }
    }
    Ok(findings)
}

/// A path for a message: `.` for the tree itself.
fn shown(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        ".".into()
    } else {
        p.display().to_string()
    }
}

/// A member of the cargo workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Relative to the tree.
    pub dir: PathBuf,
    /// Whether a crate root (`[lib]`/`[[bin]]` paths, `src/lib.rs`, `src/main.rs`,
    /// `src/bin/*.rs`) has `#![no_std]` (also under `cfg_attr`).
    pub no_std: bool,
    /// Its `.rs` files under `src/` and its crate roots, relative to the tree. A build
    /// script, `tests/`, `benches/` and `examples/` run on the host and are not included.
    pub sources: Vec<PathBuf>,
}

/// Why the cargo workspace a budget file names cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot read `{}` ({source}); expected a cargo workspace's directory", manifest.display())]
    Unreadable { manifest: PathBuf, source: std::io::Error },
    #[error("`{}` is not TOML: {}", manifest.display(), source.message())]
    NotToml { manifest: PathBuf, source: toml::de::Error },
    #[error("`{}` has no [workspace] table; expected a cargo workspace's directory", manifest.display())]
    NoWorkspace { manifest: PathBuf },
}

/// The members of the cargo workspace at `workspace` (relative to `tree`): `members`
/// (globs `*`, `?` in a component), less `exclude`, plus the root package if there is one.
pub fn workspace_members(tree: &Path, workspace: &Path) -> Result<Vec<Member>, WorkspaceError> {
    let manifest = workspace.join("Cargo.toml");
    let text = fs::read_to_string(tree.join(&manifest))
        .map_err(|source| WorkspaceError::Unreadable { manifest: manifest.clone(), source })?;
    let value: toml::Value =
        toml::from_str(&text).map_err(|source| WorkspaceError::NotToml { manifest: manifest.clone(), source })?;
    let ws = value
        .get("workspace")
        .and_then(|w| w.as_table())
        .ok_or_else(|| WorkspaceError::NoWorkspace { manifest: manifest.clone() })?;
    let strings = |key: &str| -> Vec<String> {
        ws.get(key)
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let excluded: Vec<PathBuf> = strings("exclude").iter().map(|e| history::normalize(&workspace.join(e))).collect();
    let mut dirs = BTreeSet::new();
    if value.get("package").is_some() {
        dirs.insert(history::normalize(workspace));
    }
    for pattern in strings("members") {
        for d in expand_glob(tree, workspace, &pattern) {
            if tree.join(&d).join("Cargo.toml").is_file() && !excluded.contains(&d) {
                dirs.insert(d);
            }
        }
    }
    Ok(dirs.into_iter().map(|d| member(tree, d)).collect())
}

fn member(tree: &Path, dir: PathBuf) -> Member {
    let mut roots = BTreeSet::new();
    for name in ["src/lib.rs", "src/main.rs"] {
        if tree.join(&dir).join(name).is_file() {
            roots.insert(dir.join(name));
        }
    }
    for f in history::rust_files(tree, &dir.join("src/bin")) {
        if f.parent() == Some(&dir.join("src/bin")) || f.file_name().is_some_and(|n| n == "main.rs") {
            roots.insert(f);
        }
    }
    if let Some(manifest) =
        fs::read_to_string(tree.join(&dir).join("Cargo.toml")).ok().and_then(|t| toml::from_str::<toml::Value>(&t).ok())
    {
        let lib = manifest.get("lib").and_then(|l| l.get("path")).and_then(|p| p.as_str());
        let bins = manifest
            .get("bin")
            .and_then(|b| b.as_array())
            .map(|a| a.iter().filter_map(|b| b.get("path").and_then(|p| p.as_str())).collect::<Vec<_>>())
            .unwrap_or_default();
        for p in lib.into_iter().chain(bins) {
            let f = history::normalize(&dir.join(p));
            if tree.join(&f).is_file() {
                roots.insert(f);
            }
        }
    }
    let no_std = roots.iter().any(|r| fs::read_to_string(tree.join(r)).is_ok_and(|src| is_no_std(&src)));
    let mut sources: BTreeSet<PathBuf> = history::rust_files(tree, &dir.join("src")).into_iter().collect();
    sources.extend(roots);
    Member { dir, no_std, sources: sources.into_iter().collect() }
}

/// Whether a crate root declares `#![no_std]`, directly or in a `cfg_attr`.
fn is_no_std(src: &str) -> bool {
    match syn::parse_file(src) {
        Ok(f) => f.attrs.iter().any(|a| {
            a.path().is_ident("no_std")
                || (a.path().is_ident("cfg_attr")
                    && matches!(&a.meta, Meta::List(l) if l.tokens.clone().into_iter().any(|t| matches!(&t, TokenTree::Ident(i) if i == "no_std"))))
        }),
        Err(_) => src.contains("#![no_std]"),
    }
}

/// The directories (relative to the tree) a workspace `members` pattern names.
fn expand_glob(tree: &Path, workspace: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![history::normalize(workspace)];
    for part in Path::new(pattern).components() {
        let part = part.as_os_str().to_string_lossy().to_string();
        if part == "." {
            continue;
        }
        let mut next = Vec::new();
        for base in &current {
            if part.contains(['*', '?']) {
                let Ok(entries) = fs::read_dir(tree.join(base)) else { continue };
                let mut found: Vec<PathBuf> = entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .filter(|e| glob_match(&part, &e.file_name().to_string_lossy()))
                    .map(|e| base.join(e.file_name()))
                    .collect();
                found.sort();
                next.extend(found);
            } else if part == ".." {
                let mut b = base.clone();
                b.pop();
                next.push(b);
            } else {
                next.push(base.join(&part));
            }
        }
        current = next;
    }
    current
}

fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|k| go(&p[1..], &n[k..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(&p, &n)
}

const SAFETY_COMMENT: &str = "a `// SAFETY:` comment directly above it or its statement";
const SAFETY_DOC: &str = "a `# Safety` section in its doc comment";
const SAFETY_EITHER: &str = "a `# Safety` section in its doc comment or a `// SAFETY:` comment directly above it";
const SAFETY_MACRO: &str = "a `// SAFETY:` comment directly above it";

struct UnsafeVisitor<'a> {
    path: PathBuf,
    lines: Vec<LineInfo>,
    text: Vec<&'a str>,
    /// First lines of the enclosing statements, match arms and items, innermost last.
    anchors: Vec<usize>,
    sites: Vec<Site>,
}

impl UnsafeVisitor<'_> {
    fn site(&mut self, line: usize, kind: String, justified: bool, wants: &'static str) {
        self.sites.push(Site { path: self.path.clone(), line, kind, justified, wants });
    }

    /// A `SAFETY:` comment in the comment block directly above `line` (1-based): the lines
    /// right above holding only comments or attributes.
    fn comment_above(&self, line: usize) -> bool {
        let mut l = line;
        while l > 1 {
            l -= 1;
            let info = &self.lines[l - 1];
            let text = self.text.get(l - 1).map_or("", |t| t.trim());
            if info.is_comment_only() {
                if info.comments.iter().any(|(_, t)| t.contains("SAFETY:")) {
                    return true;
                }
            } else if !(text.starts_with("#[") || text.starts_with("#![")) {
                return false;
            }
        }
        false
    }

    /// A `SAFETY:` block comment on `line` before column `col`.
    fn comment_before(&self, line: usize, col: usize) -> bool {
        self.lines.get(line - 1).is_some_and(|l| l.comments.iter().any(|(c, t)| *c < col && t.contains("SAFETY:")))
    }

    fn comment_justifies(&self, span: proc_macro2::Span, use_anchor: bool) -> bool {
        let start = span.start();
        self.comment_before(start.line, start.column)
            || self.comment_above(start.line)
            || (use_anchor && self.anchors.last().is_some_and(|&a| a < start.line && self.comment_above(a)))
    }

    fn unsafe_fn(&mut self, attrs: &[Attribute], sig: &syn::Signature) {
        if let Some(u) = &sig.unsafety {
            let line = u.span.start().line;
            self.site(line, format!("unsafe fn `{}`", sig.ident), has_safety_section(attrs), SAFETY_DOC);
        }
    }

    fn macro_tokens(&mut self, tokens: TokenStream) {
        for tt in tokens {
            match tt {
                TokenTree::Group(g) => self.macro_tokens(g.stream()),
                TokenTree::Ident(i) if i == "unsafe" => {
                    let justified = self.comment_justifies(i.span(), false);
                    self.site(i.span().start().line, "unsafe in a macro's tokens".into(), justified, SAFETY_MACRO);
                }
                _ => {}
            }
        }
    }

    fn anchored<T: Spanned>(&mut self, node: &T, f: impl FnOnce(&mut Self)) {
        self.anchors.push(node.span().start().line);
        f(self);
        self.anchors.pop();
    }
}

/// A line of the doc comment reading `# Safety`.
fn has_safety_section(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => s.value().lines().any(|l| {
                let l = l.trim();
                l.starts_with('#') && l.trim_start_matches('#').trim() == "Safety"
            }),
            _ => false,
        },
        _ => false,
    })
}

impl<'ast> Visit<'ast> for UnsafeVisitor<'_> {
    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        self.anchored(s, |v| visit::visit_stmt(v, s));
    }
    fn visit_arm(&mut self, a: &'ast syn::Arm) {
        self.anchored(a, |v| visit::visit_arm(v, a));
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        self.anchored(i, |v| visit::visit_item(v, i));
    }
    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        let justified = self.comment_justifies(e.unsafe_token.span, true);
        self.site(e.unsafe_token.span.start().line, "unsafe block".into(), justified, SAFETY_COMMENT);
        visit::visit_expr_unsafe(self, e);
    }
    fn visit_item_fn(&mut self, i: &'ast syn::ItemFn) {
        self.unsafe_fn(&i.attrs, &i.sig);
        visit::visit_item_fn(self, i);
    }
    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        self.unsafe_fn(&i.attrs, &i.sig);
        visit::visit_impl_item_fn(self, i);
    }
    fn visit_trait_item_fn(&mut self, i: &'ast syn::TraitItemFn) {
        self.unsafe_fn(&i.attrs, &i.sig);
        visit::visit_trait_item_fn(self, i);
    }
    fn visit_foreign_item_fn(&mut self, i: &'ast syn::ForeignItemFn) {
        self.unsafe_fn(&i.attrs, &i.sig);
        visit::visit_foreign_item_fn(self, i);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            let justified = has_safety_section(&i.attrs) || self.comment_justifies(u.span, false);
            self.site(u.span.start().line, "unsafe impl".into(), justified, SAFETY_EITHER);
        }
        visit::visit_item_impl(self, i);
    }
    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        if let Some(u) = &i.unsafety {
            let kind = format!("unsafe trait `{}`", i.ident);
            self.site(u.span.start().line, kind, has_safety_section(&i.attrs), SAFETY_DOC);
        }
        visit::visit_item_trait(self, i);
    }
    fn visit_item_foreign_mod(&mut self, i: &'ast syn::ItemForeignMod) {
        if let Some(u) = &i.unsafety {
            let justified = self.comment_justifies(u.span, false);
            self.site(u.span.start().line, "unsafe extern block".into(), justified, SAFETY_MACRO);
        }
        visit::visit_item_foreign_mod(self, i);
    }
    fn visit_attribute(&mut self, a: &'ast Attribute) {
        if a.path().is_ident("unsafe") {
            let span = a.path().span();
            let justified = self.comment_justifies(span, false);
            self.site(span.start().line, "unsafe attribute".into(), justified, SAFETY_MACRO);
        }
        visit::visit_attribute(self, a);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.macro_tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}
