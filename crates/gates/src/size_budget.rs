//! The size budget: each trusted crate's lines of code under a ceiling that only falls.
//!
//! `size-budget.toml` lists crates:
//!
//! ```toml
//! [[crate]]
//! name = "smoke"
//! paths = ["guest/smoke/src"]   # directories (or files) relative to the tree
//! ceiling = 420                 # most lines of code
//! ```
//!
//! # What counts
//!
//! Every `.rs` file under a crate's paths counts, line by line, unless only test modules
//! reach it. A line counts when it holds code: not blank, not only a comment (`//`, `///`,
//! `//!`, or inside `/* */`, nested ones included), and not inside an item (an item, an
//! impl's item or a trait's item) marked `#[cfg(test)]` or `#[cfg(all(test, ...))]`. A
//! line inside a string literal counts as code when it is not blank.
//!
//! # Which files only tests reach
//!
//! Modules are followed from each crate root found under a path (`lib.rs`, `main.rs`,
//! `bin/*.rs`, `bin/*/main.rs`, also under `src/`), then from every file under the paths
//! that nothing reached yet (such a file counts; it may be reached in a way the gate does
//! not see). `mod x;` is found as rustc finds it: `x.rs` or `x/mod.rs` in the directory of
//! the declaring module (a non-`mod.rs` file `a.rs` owns `a/`), enclosing inline modules
//! adding directories, `#[path = "..."]` relative to the declaring file's directory (or to
//! the inline modules' directory). A file loaded through `#[path]` owns its directory, as
//! a `mod.rs` does. A declaration under `#[cfg(test)]` (on it, or on an enclosing inline
//! module, or in a file only tests reach) reaches its file only for tests. A file any other
//! declaration reaches counts.
//!
//! `#[cfg_attr(<pred>, path = "...")]` is followed: both the file it names and the default
//! file are reached (the named one only for tests when `<pred>` is `test`). A `cfg_attr`
//! nested in another one that names a path is not followed.
//!
//! # Forms the gate does not follow (`unfollowable`)
//!
//! In counted code (outside test items): any macro whose name is `include` or starts with
//! `include_` (`include!`, `include_str!`, `include_bytes!`, by any path, in attributes and
//! macro bodies too: the token `include…` followed by `!`); a `mod` whose name is a raw
//! identifier (`mod r#x;`); the token `mod` inside any macro's tokens (a `macro_rules!`
//! body or an invocation), since a macro can declare a module the gate cannot see; a
//! nested `cfg_attr` naming a path; a `mod x;` with no file. A module file a non-test
//! declaration reaches outside the crate's paths is `outside-paths`; test-only files are
//! not counted wherever they are.
//!
//! The residual: a macro defined outside the paths (a dependency's) can emit `mod x;` or
//! `include!` at a call site, and the gate reads only the call.
//!
//! # The ratchet
//!
//! Raising a ceiling, dropping a crate (a rename drops the old name) or removing one of
//! its paths needs a line `Size budget: <crate>: <reason>` in the commit; see
//! [`crate::history`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{TokenStream, TokenTree};
use serde::Deserialize;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Meta, Token};

use crate::finding::{ConfigError, Finding};
use crate::history::{self, BudgetFile, Entry, Limit};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(rename = "crate", default)]
    crates: Vec<RawCrate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCrate {
    name: String,
    paths: Vec<String>,
    ceiling: u64,
}

/// A validated `size-budget.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub crates: Vec<CrateBudget>,
}

/// One `[[crate]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrateBudget {
    pub name: String,
    /// Relative to the tree, normalized.
    pub paths: Vec<PathBuf>,
    pub ceiling: u64,
}

/// Parses and validates one version of `size-budget.toml`; `file` names it in errors.
pub fn parse_config(file: &str, text: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = history::parse_toml(file, text)?;
    let err = |field: String, message: String| ConfigError { file: file.to_string(), field, message };
    let mut crates = Vec::new();
    let mut names = BTreeSet::new();
    for (i, c) in raw.crates.into_iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(err(format!("crate[{i}].name"), "is empty; expected the crate's name".into()));
        }
        if !names.insert(c.name.clone()) {
            return Err(err(
                format!("crate[{i}].name"),
                format!("`{}` is listed twice; expected each crate once", c.name),
            ));
        }
        if c.paths.is_empty() {
            return Err(err(
                format!("crate[{i}].paths"),
                "is empty; expected at least one directory of the crate's sources".into(),
            ));
        }
        let mut paths = Vec::new();
        for (j, p) in c.paths.iter().enumerate() {
            let p = history::checked_path(file, &format!("crate[{i}].paths[{j}]"), p)?;
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        crates.push(CrateBudget { name: c.name, paths, ceiling: c.ceiling });
    }
    Ok(Config { crates })
}

impl BudgetFile for Config {
    const LABEL: &'static str = "Size budget";
    const ENTRY: &'static str = "crate";

    fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        parse_config(file, text)
    }

    fn entries(&self) -> Vec<Entry<'_>> {
        self.crates
            .iter()
            .map(|c| Entry {
                name: &c.name,
                limits: vec![Limit { field: "ceiling", said: "the ceiling", value: c.ceiling }],
                paths: &c.paths,
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

/// The rules that read the tree alone: `over-ceiling`, `empty-path`, `unfollowable`,
/// `outside-paths`, `parse`.
pub fn check_tree(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let (rel, cfg) = load(tree, config)?;
    let mut findings = Vec::new();
    for c in &cfg.crates {
        for p in &c.paths {
            if let Some(message) = empty_path_message(tree, p) {
                findings.push(Finding {
                    path: rel.clone(),
                    line: None,
                    code: "empty-path".into(),
                    message: format!("crate `{}`: path `{}` {message}", c.name, p.display()),
                });
            }
        }
        let count = count_crate(tree, &c.paths);
        findings.extend(count.findings);
        if count.lines as u64 > c.ceiling {
            findings.push(Finding {
                path: rel.clone(),
                line: None,
                code: "over-ceiling".into(),
                message: format!(
                    "crate `{}` has {} lines of code, over its ceiling of {}",
                    c.name, count.lines, c.ceiling
                ),
            });
        }
    }
    Ok(findings)
}

/// The ratchet ([`history::check_history`]): `raise-without-reason`, `deleted-config`,
/// `uncommitted-raise`, `no-merge-base` (and `unreadable-version`).
pub fn check_history(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    history::check_history::<Config>(tree, config)
}

/// One crate's size, for printing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrateSize {
    pub name: String,
    pub lines: usize,
    pub ceiling: u64,
}

/// Every crate's size and ceiling, in the budget file's order.
pub fn sizes(tree: &Path, config: &Path) -> Result<Vec<CrateSize>, ConfigError> {
    let (_, cfg) = load(tree, config)?;
    Ok(cfg
        .crates
        .iter()
        .map(|c| CrateSize { name: c.name.clone(), lines: count_crate(tree, &c.paths).lines, ceiling: c.ceiling })
        .collect())
}

/// What [`count_crate`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrateCount {
    /// Lines of code in the counted files.
    pub lines: usize,
    /// Each file under the paths: its lines of code, or `None` when only tests reach it.
    pub files: BTreeMap<PathBuf, Option<usize>>,
    /// `unfollowable`, `outside-paths` and `parse` findings.
    pub findings: Vec<Finding>,
}

/// Counts the lines of code of the crate whose sources are under `paths` (relative to
/// `tree`); see the module's documentation for what counts.
pub fn count_crate(tree: &Path, paths: &[PathBuf]) -> CrateCount {
    let mut r = Resolver { tree, paths, parsed: HashMap::new(), reach: BTreeMap::new(), findings: Vec::new() };
    let mut all = BTreeSet::new();
    for p in paths {
        all.extend(history::rust_files(tree, p));
    }
    for root in crate_roots(tree, paths) {
        r.follow(root);
    }
    // Files nothing reached count as roots of their own.
    while let Some(next) = all.iter().find(|f| !r.reach.contains_key(*f)).cloned() {
        let mod_rs = is_mod_rs_name(&next);
        r.follow(Job { file: next, mod_rs, test: false });
    }
    let mut count = CrateCount::default();
    for f in &all {
        let test_only = r.reach.get(f).copied().unwrap_or(true);
        if test_only {
            count.files.insert(f.clone(), None);
            continue;
        }
        let n = r.parsed(f).map(|p| p.lines).unwrap_or(0);
        count.lines += n;
        count.files.insert(f.clone(), Some(n));
    }
    for f in &all {
        if r.reach.get(f) == Some(&false) {
            if let Some(found) = r.parsed(f).map(|p| p.findings.clone()) {
                r.findings.extend(found);
            }
        }
    }
    r.findings.sort_by(|a, b| (&a.path, a.line, &a.code).cmp(&(&b.path, b.line, &b.code)));
    let mut seen = BTreeSet::new();
    r.findings.retain(|f| seen.insert((f.path.clone(), f.line, f.code.clone(), f.message.clone())));
    count.findings = r.findings;
    count
}

fn empty_path_message(tree: &Path, p: &Path) -> Option<&'static str> {
    if !tree.join(p).exists() {
        Some("does not exist")
    } else if history::rust_files(tree, p).is_empty() {
        Some("holds no Rust source")
    } else {
        None
    }
}

struct Job {
    file: PathBuf,
    /// Whether the file owns its directory (a root, a `mod.rs`, a `#[path]` file).
    mod_rs: bool,
    test: bool,
}

fn is_mod_rs_name(f: &Path) -> bool {
    matches!(f.file_name().and_then(|n| n.to_str()), Some("mod.rs" | "lib.rs" | "main.rs"))
}

fn crate_roots(tree: &Path, paths: &[PathBuf]) -> Vec<Job> {
    let mut roots = Vec::new();
    let root = |file: PathBuf| Job { file, mod_rs: true, test: false };
    for p in paths {
        if p.extension().is_some_and(|e| e == "rs") {
            roots.push(root(p.clone()));
            continue;
        }
        for dir in [p.clone(), p.join("src")] {
            for name in ["lib.rs", "main.rs"] {
                if tree.join(&dir).join(name).is_file() {
                    roots.push(root(dir.join(name)));
                }
            }
            let bin = dir.join("bin");
            let Ok(entries) = fs::read_dir(tree.join(&bin)) else { continue };
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name();
                    let f = bin.join(&name);
                    if name.to_string_lossy().ends_with(".rs") && tree.join(&f).is_file() {
                        Some(f)
                    } else if tree.join(&f).join("main.rs").is_file() {
                        Some(f.join("main.rs"))
                    } else {
                        None
                    }
                })
                .collect();
            found.sort();
            roots.extend(found.into_iter().map(root));
        }
    }
    roots
}

/// A parsed file: its counted lines, its module declarations and its own findings.
struct Parsed {
    lines: usize,
    decls: Vec<Decl>,
    findings: Vec<Finding>,
}

/// One `mod x;` (or a file a `cfg_attr` path names).
struct Decl {
    line: usize,
    /// Candidate files, relative to the tree, with whether each owns its directory and
    /// whether it is reached only for tests. The first that exists of a default pair wins.
    target: Target,
    test: bool,
}

enum Target {
    /// `x.rs` or `x/mod.rs`.
    Default { dir: PathBuf, name: String },
    /// A `#[path]` file, relative to the declaring file's directory.
    Path(PathBuf),
    /// A `#[path]` file inside inline modules, relative to the module's own directory.
    OwnDir(PathBuf),
}

struct Resolver<'a> {
    tree: &'a Path,
    paths: &'a [PathBuf],
    parsed: HashMap<PathBuf, Option<Parsed>>,
    /// Every file reached: `true` when only tests reach it.
    reach: BTreeMap<PathBuf, bool>,
    findings: Vec<Finding>,
}

impl Resolver<'_> {
    fn parsed(&mut self, file: &Path) -> Option<&Parsed> {
        if !self.parsed.contains_key(file) {
            let p = fs::read_to_string(self.tree.join(file)).ok().map(|src| parse_file(file, &src));
            self.parsed.insert(file.to_path_buf(), p);
        }
        self.parsed.get(file).and_then(Option::as_ref)
    }

    fn follow(&mut self, first: Job) {
        let mut queue = vec![first];
        while let Some(job) = queue.pop() {
            let under = self.paths.iter().any(|p| history::is_under(&job.file, p));
            if !under {
                if !job.test && self.reach.insert(job.file.clone(), false).is_none() {
                    self.findings.push(Finding {
                        path: job.file.clone(),
                        line: None,
                        code: "outside-paths".into(),
                        message: "a module file of the crate is under none of its paths in the size budget".into(),
                    });
                }
                continue;
            }
            match self.reach.get(&job.file) {
                Some(false) => continue,
                Some(true) if job.test => continue,
                _ => {}
            }
            self.reach.insert(job.file.clone(), job.test);
            let file = job.file.clone();
            let parent = file.parent().map(Path::to_path_buf).unwrap_or_default();
            let own_dir = if job.mod_rs {
                parent.clone()
            } else {
                parent.join(file.file_stem().map(|s| s.to_os_string()).unwrap_or_default())
            };
            let tree = self.tree;
            let Some(parsed) = self.parsed(&file) else { continue };
            let mut next = Vec::new();
            let mut missing = Vec::new();
            for d in &parsed.decls {
                let test = job.test || d.test;
                match &d.target {
                    Target::Path(p) | Target::OwnDir(p) => {
                        let base = if matches!(d.target, Target::OwnDir(_)) { &own_dir } else { &parent };
                        let f = lexical(&base.join(p));
                        if tree.join(&f).is_file() {
                            next.push(Job { file: f, mod_rs: true, test });
                        } else if !test {
                            missing.push((d.line, format!("`#[path]` names `{}`, which is not a file", f.display())));
                        }
                    }
                    Target::Default { dir, name } => {
                        let base = lexical(&own_dir.join(dir));
                        let flat = base.join(format!("{name}.rs"));
                        let nested = base.join(name).join("mod.rs");
                        if tree.join(&flat).is_file() {
                            next.push(Job { file: flat, mod_rs: false, test });
                        } else if tree.join(&nested).is_file() {
                            next.push(Job { file: nested, mod_rs: true, test });
                        } else if !test {
                            missing.push((
                                d.line,
                                format!("`mod {name};` has no file (`{}` or `{}`)", flat.display(), nested.display()),
                            ));
                        }
                    }
                }
            }
            for (line, message) in missing {
                self.findings.push(Finding {
                    path: file.clone(),
                    line: Some(line),
                    code: "unfollowable".into(),
                    message,
                });
            }
            queue.extend(next);
        }
    }
}

/// `p` with `..` and `.` resolved lexically.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn parse_file(path: &Path, src: &str) -> Parsed {
    let lines = scan_lines(src);
    let mut findings = Vec::new();
    let file = match syn::parse_file(src) {
        Ok(f) => f,
        Err(e) => {
            findings.push(Finding {
                path: path.to_path_buf(),
                line: Some(e.span().start().line),
                code: "parse".into(),
                message: format!("does not parse as Rust ({e}); every line with code is counted"),
            });
            return Parsed { lines: lines.iter().filter(|l| l.code).count(), decls: Vec::new(), findings };
        }
    };
    let mut v = SizeVisitor { test_ranges: Vec::new(), decls: Vec::new(), unfollowable: Vec::new(), dir: Vec::new() };
    v.items(&file.items, false);
    let in_test = |line: usize| v.test_ranges.iter().any(|&(a, b)| a <= line && line <= b);
    let counted = lines.iter().enumerate().filter(|(i, l)| l.code && !in_test(i + 1)).count();
    if let Ok(tokens) = TokenStream::from_str(src) {
        include_sites(tokens, &mut v.unfollowable);
    }
    let mut sites = v.unfollowable.clone();
    sites.retain(|(line, _)| !in_test(*line));
    sites.sort();
    sites.dedup();
    for (line, message) in sites {
        findings.push(Finding { path: path.to_path_buf(), line: Some(line), code: "unfollowable".into(), message });
    }
    Parsed { lines: counted, decls: v.decls, findings }
}

/// Walks items for `#[cfg(test)]` ranges, module declarations and unfollowable forms.
struct SizeVisitor {
    test_ranges: Vec<(usize, usize)>,
    decls: Vec<Decl>,
    unfollowable: Vec<(usize, String)>,
    /// The enclosing inline modules' directories, relative to the file's own directory.
    dir: Vec<PathBuf>,
}

impl SizeVisitor {
    fn items(&mut self, items: &[syn::Item], test: bool) {
        for item in items {
            if let syn::Item::Mod(m) = item {
                self.module(m, test);
            } else if is_cfg_test(item_attrs(item)) {
                self.test_range(item.span());
            } else {
                self.visit_item(item);
            }
        }
    }

    /// A top-level `#[path]` is relative to the file's directory; inside inline modules,
    /// to their directories under the module's own directory.
    fn path_target(&self, inline: PathBuf, p: String) -> Target {
        if self.dir.is_empty() {
            Target::Path(PathBuf::from(p))
        } else {
            Target::OwnDir(inline.join(p))
        }
    }

    fn test_range(&mut self, span: proc_macro2::Span) {
        self.test_ranges.push((span.start().line, span.end().line));
    }

    fn module(&mut self, m: &syn::ItemMod, outer_test: bool) {
        let line = m.mod_token.span.start().line;
        let test = outer_test || is_cfg_test(&m.attrs);
        if test && !outer_test {
            self.test_range(m.span());
        }
        let name = m.ident.to_string();
        if name.starts_with("r#") {
            if !test {
                self.unfollowable.push((line, format!("`mod {name}`: a module named by a raw identifier")));
            }
            return;
        }
        let path = path_attr(&m.attrs);
        let (cfg_paths, nested) = cfg_attr_paths(&m.attrs);
        if nested && !test {
            self.unfollowable.push((line, format!("`mod {name}`: a path in a nested `cfg_attr`")));
        }
        let inline_dir = || self.dir.iter().collect::<PathBuf>();
        match &m.content {
            Some((_, items)) => {
                let sub = match &path {
                    Some(p) => PathBuf::from(p),
                    None => PathBuf::from(&name),
                };
                self.dir.push(sub);
                self.items(items, test);
                self.dir.pop();
            }
            None => {
                let base = inline_dir();
                match path {
                    Some(p) => {
                        // A top-level `#[path]` is relative to the file's directory; inside
                        // inline modules, to their directory under the module's own one.
                        self.decls.push(Decl { line, target: self.path_target(base, p), test });
                    }
                    None => {
                        self.decls.push(Decl { line, target: Target::Default { dir: base.clone(), name }, test });
                        for (pred_test, p) in cfg_paths {
                            let target = self.path_target(base.clone(), p);
                            self.decls.push(Decl { line, target, test: test || pred_test });
                        }
                    }
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for SizeVisitor {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        match item {
            syn::Item::Mod(m) => self.module(m, false),
            _ if is_cfg_test(item_attrs(item)) => self.test_range(item.span()),
            _ => visit::visit_item(self, item),
        }
    }
    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if is_cfg_test(attrs) {
            self.test_range(item.span());
        } else {
            visit::visit_impl_item(self, item);
        }
    }
    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs = match item {
            syn::TraitItem::Const(i) => &i.attrs,
            syn::TraitItem::Fn(i) => &i.attrs,
            syn::TraitItem::Type(i) => &i.attrs,
            syn::TraitItem::Macro(i) => &i.attrs,
            _ => return visit::visit_trait_item(self, item),
        };
        if is_cfg_test(attrs) {
            self.test_range(item.span());
        } else {
            visit::visit_trait_item(self, item);
        }
    }
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        mod_tokens(mac.tokens.clone(), &mut self.unfollowable);
    }
}

fn mod_tokens(tokens: TokenStream, out: &mut Vec<(usize, String)>) {
    for tt in tokens {
        match tt {
            TokenTree::Group(g) => mod_tokens(g.stream(), out),
            TokenTree::Ident(i) if i == "mod" => {
                out.push((i.span().start().line, "`mod` inside a macro: a module the gate cannot follow".into()))
            }
            _ => {}
        }
    }
}

/// Every `include…!` in `tokens`: the word `include` or `include_*` followed by `!`.
fn include_sites(tokens: TokenStream, out: &mut Vec<(usize, String)>) {
    let mut prev: Option<proc_macro2::Ident> = None;
    for tt in tokens {
        match tt {
            TokenTree::Group(g) => {
                include_sites(g.stream(), out);
                prev = None;
            }
            TokenTree::Punct(p) if p.as_char() == '!' => {
                if let Some(i) = prev.take() {
                    let s = i.to_string();
                    if s == "include" || s.starts_with("include_") {
                        out.push((
                            i.span().start().line,
                            format!("`{s}!` brings in a file the gate cannot count or follow"),
                        ));
                    }
                }
            }
            TokenTree::Ident(i) => prev = Some(i),
            _ => prev = None,
        }
    }
}

/// An item's attributes, whatever kind of item it is (also the import-cycles gate's).
pub(crate) fn item_attrs(item: &syn::Item) -> &[Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` or `#[cfg(all(test, ...))]`.
pub fn is_cfg_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<Meta>().is_ok_and(|m| pred_is_test(&m)))
}

fn pred_is_test(m: &Meta) -> bool {
    match m {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(l) if l.path.is_ident("all") => l
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .is_ok_and(|ms| ms.iter().any(pred_is_test)),
        _ => false,
    }
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The paths `cfg_attr`s give, each with whether its predicate is `test`; and whether a
/// nested `cfg_attr` names a path.
fn cfg_attr_paths(attrs: &[Attribute]) -> (Vec<(bool, String)>, bool) {
    let mut out = Vec::new();
    let mut nested = false;
    for a in attrs.iter().filter(|a| a.path().is_ident("cfg_attr")) {
        let Ok(metas) = a.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) else { continue };
        let mut it = metas.iter();
        let pred_test = it.next().is_some_and(pred_is_test);
        for m in it {
            match m {
                Meta::NameValue(nv) if nv.path.is_ident("path") => {
                    if let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value {
                        out.push((pred_test, s.value()));
                    }
                }
                Meta::List(l) if l.path.is_ident("cfg_attr") => {
                    nested |= l.tokens.clone().into_iter().any(|t| matches!(&t, TokenTree::Ident(i) if i == "path"));
                }
                _ => {}
            }
        }
    }
    (out, nested)
}

// ---------------------------------------------------------------------------------------
// Lines: code, comments, blanks

/// One source line as the budgets see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineInfo {
    /// Holds something other than white space and comments.
    pub code: bool,
    /// The comments on the line: the column (in characters) where each starts on this
    /// line (0 for a block comment continued from an earlier line) and its text.
    pub comments: Vec<(usize, String)>,
}

impl LineInfo {
    pub fn is_blank(&self) -> bool {
        !self.code && self.comments.is_empty()
    }
    pub fn is_comment_only(&self) -> bool {
        !self.code && !self.comments.is_empty()
    }
}

/// Splits Rust source into lines and tells code from comments: line comments, nested
/// block comments, strings (with escapes), raw strings, char literals and lifetimes.
pub fn scan_lines(src: &str) -> Vec<LineInfo> {
    #[derive(Clone, Copy)]
    enum St {
        Code,
        Block(u32),
        Str,
        Raw(usize),
        Char,
    }
    let c: Vec<char> = src.chars().collect();
    let mut lines = vec![LineInfo::default()];
    let mut st = St::Code;
    let mut i = 0;
    let mut col = 0;
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            lines.push(LineInfo::default());
            col = 0;
            i += 1;
            if let St::Block(_) = st {
                lines.last_mut().unwrap().comments.push((0, String::new()));
            }
            continue;
        }
        let line = lines.last_mut().unwrap();
        let mut step = 1;
        match st {
            St::Code => {
                if ch == '/' && at(i + 1) == '/' {
                    let end = c[i..].iter().position(|&x| x == '\n').map_or(c.len(), |p| i + p);
                    line.comments.push((col, c[i..end].iter().collect()));
                    step = end - i;
                } else if ch == '/' && at(i + 1) == '*' {
                    line.comments.push((col, "/*".into()));
                    st = St::Block(1);
                    step = 2;
                } else if ch == '"' {
                    line.code = true;
                    st = St::Str;
                } else if ch == '\'' {
                    line.code = true;
                    if at(i + 1) == '\\' {
                        st = St::Char;
                    } else if at(i + 2) == '\'' {
                        step = 3;
                    }
                } else if (ch == 'r' || ch == 'b' || ch == 'c')
                    && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
                {
                    line.code = true;
                    let j = if ch == 'r' {
                        i + 1
                    } else if at(i + 1) == 'r' {
                        i + 2
                    } else {
                        usize::MAX
                    };
                    if j != usize::MAX {
                        let hashes = c[j.min(c.len())..].iter().take_while(|&&x| x == '#').count();
                        if at(j + hashes) == '"' {
                            st = St::Raw(hashes);
                            step = j + hashes + 1 - i;
                        }
                    }
                } else if !ch.is_whitespace() {
                    line.code = true;
                }
            }
            St::Block(depth) => {
                let text = &mut line.comments.last_mut().unwrap().1;
                if ch == '/' && at(i + 1) == '*' {
                    text.push_str("/*");
                    st = St::Block(depth + 1);
                    step = 2;
                } else if ch == '*' && at(i + 1) == '/' {
                    text.push_str("*/");
                    st = if depth == 1 { St::Code } else { St::Block(depth - 1) };
                    step = 2;
                } else {
                    text.push(ch);
                }
            }
            St::Str | St::Char => {
                let close = if let St::Str = st { '"' } else { '\'' };
                if ch == '\\' {
                    // An escaped newline is handled by the newline branch next turn.
                    step = if at(i + 1) == '\n' { 1 } else { 2 };
                    line.code = true;
                } else if ch == close {
                    line.code = true;
                    st = St::Code;
                } else if !ch.is_whitespace() {
                    line.code = true;
                }
            }
            St::Raw(hashes) => {
                if ch == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    st = St::Code;
                    step = 1 + hashes;
                }
                if !ch.is_whitespace() {
                    line.code = true;
                }
            }
        }
        for _ in 0..step {
            i += 1;
            col += 1;
        }
    }
    lines
}
