//! The import-cycles gate: no two modules of a crate import each other, directly or
//! through others.
//!
//! `import-cycles.toml`:
//!
//! ```toml
//! [[skip]]
//! root = "crates/gates/tests/fixtures"   # a directory: every crate at or under it is skipped
//! reason = "gate fixtures: ..."
//! ```
//!
//! (A file with no `[[skip]]`, even an empty one, checks every crate.)
//!
//! # The crates
//!
//! Every crate root among the files git tracks or has not ignored (or every file but those
//! under `target/` and `.git/` when the tree is in no git work tree, as the other gates
//! list them): `src/lib.rs`, `src/main.rs`, `src/bin/*.rs` and `src/bin/*/main.rs`. Each
//! root is its own crate, so a binary beside a library has its own graph.
//!
//! # The modules
//!
//! Followed from the root as rustc finds them: `mod x;` is `x.rs` or `x/mod.rs` in the
//! directory of the declaring module (a non-`mod.rs` file `a.rs` owns `a/`), an inline
//! `mod x { .. }` adds a module and a directory, `#[path = "..."]` is relative to the
//! declaring file's directory (or the inline modules' directory). A module marked
//! `#[cfg(test)]` (or `#[cfg(all(test, ..))]`) is not followed, and neither is any other
//! item so marked: test code may import what it tests from anywhere.
//!
//! # The edges
//!
//! Rust is read with `syn` (a full parse, not a tokenizer), so comments, doc comments and
//! their links, and string literals are never paths. A module imports another when it
//! names a path that starts with `crate`, `super` or `self` (also `$crate`): in a `use`
//! tree (brace groups flattened: `use super::{a, b::c}` is `super::a` and `super::b::c`),
//! in an expression, a type or a pattern (`crate::a::b::f()`), or in a macro's tokens
//! (`format!("{}", crate::a::X)`). The path is resolved to the longest prefix that is a
//! module of the crate; an edge to the module itself, to an ancestor or to a descendant
//! does not count (a parent declares its children and a child sees its parent's items).
//! Visibility paths (`pub(crate)`, `pub(in crate::a)`) are no imports.
//!
//! Codes:
//!
//! - `import-cycle`: a strongly connected component of two or more modules, reported
//!   once, at the first edge of the shortest cycle through its first module (in name
//!   order): `modules a, b form a cycle (a -> b at path:line; b -> a at path:line)`.
//!   The root module is named `crate`.
//! - `unparsable`: a module file `syn` cannot read (the gate fails closed rather than
//!   pass a crate it did not read).
//! - `missing-module`: a `mod x;` whose file is not there.
//! - `stale-skip`: a `[[skip]]` with no crate root at or under it.
//! - `skip-without-reason`: a `[[skip]]` whose reason is missing or blank.
//! - `git-failed`: listing the considered files failed; nothing else is judged.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use serde::Deserialize;
use syn::ext::IdentExt;
use syn::visit::{self, Visit};
use toml::Spanned;

use crate::nocruft::{self, considered_files, is_under, ConfigFile};
use crate::size_budget::{is_cfg_test, item_attrs};
use crate::skip::{parse_skips, skip_findings, RawSkip, Skip};
use crate::{ConfigError, Finding};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    skip: Vec<Spanned<RawSkip>>,
}

fn parse_config(shown: &str, text: &str) -> Result<Vec<Skip>, ConfigError> {
    let raw: RawConfig = nocruft::parse_config(shown, text)?;
    parse_skips(shown, text, raw.skip, |_| None)
}

/// Run the gate on `tree` with the configuration at `config` (relative to `tree` or
/// absolute). The findings' paths are relative to `tree`; none is a pass.
pub fn check(tree: &Path, config: &Path) -> Result<Vec<Finding>, ConfigError> {
    let file = ConfigFile::locate(tree, config);
    let text = file.read()?;
    let skips = parse_config(&file.shown, &text)?;
    let considered = match considered_files(tree) {
        Ok(files) => files,
        Err(error) => return Ok(vec![file.git_failed(error)]),
    };
    let roots: Vec<String> = considered.into_iter().filter(|f| is_crate_root(f)).collect();

    let mut findings = skip_findings(
        &file,
        &skips,
        &roots,
        "its crates are not checked",
        "crate root (src/lib.rs, src/main.rs, src/bin/*)",
    );
    let mut seen = BTreeSet::new();
    for root in roots.iter().filter(|r| !skips.iter().any(|s| is_under(r, &s.root))) {
        for finding in check_crate(tree, Path::new(root)) {
            // A binary and a library declaring the same files find the same cycle once.
            if seen.insert(finding.to_string()) {
                findings.push(finding);
            }
        }
    }
    Ok(findings)
}

/// `src/lib.rs`, `src/main.rs`, `src/bin/x.rs`, `src/bin/x/main.rs`, at any depth.
fn is_crate_root(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        [.., "src", "lib.rs" | "main.rs"] => true,
        [.., "src", "bin", file] => file.ends_with(".rs"),
        [.., "src", "bin", _, "main.rs"] => true,
        _ => false,
    }
}

/// A module's name inside its crate: `["qemu", "boot"]`; the root is empty.
type ModPath = Vec<String>;

fn shown(module: &[String]) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

/// A path of the source naming `crate`, `super` or `self` first.
struct Reference {
    from: ModPath,
    segments: Vec<String>,
    line: usize,
}

/// Where an import was seen: the file (relative to the tree) and its line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    file: PathBuf,
    line: usize,
}

/// The findings of one crate, given its root file relative to the tree.
fn check_crate(tree: &Path, root: &Path) -> Vec<Finding> {
    let mut crate_read = read_crate(tree, root);
    let edges = edges(&crate_read.modules, crate_read.references);
    crate_read.findings.extend(cycles(&crate_read.modules, &edges));
    crate_read.findings
}

/// A crate as read: its modules, the references its files make, what could not be read.
struct CrateRead {
    modules: BTreeSet<ModPath>,
    references: Vec<(PathBuf, Reference)>,
    findings: Vec<Finding>,
}

/// Follows the modules from `root`, reading each file once.
fn read_crate(tree: &Path, root: &Path) -> CrateRead {
    let mut findings = Vec::new();
    let mut modules: BTreeSet<ModPath> = BTreeSet::new();
    let mut references: Vec<(PathBuf, Reference)> = Vec::new();
    // (file, its module, whether it was loaded through `#[path]`)
    let mut queue: VecDeque<(PathBuf, ModPath, bool)> = VecDeque::from([(root.to_path_buf(), Vec::new(), false)]);
    let mut read = BTreeSet::new();
    while let Some((file, module, by_path)) = queue.pop_front() {
        if !read.insert(file.clone()) {
            continue;
        }
        let parsed = match parse(tree, &file) {
            Ok(parsed) => parsed,
            Err(unparsable) => {
                findings.push(unparsable);
                continue;
            }
        };
        // A root, a `mod.rs` or a `#[path]` file owns its directory; `a.rs` owns `a/`.
        let owns_dir = by_path
            || matches!(file.file_name().and_then(|n| n.to_str()), Some("mod.rs" | "lib.rs" | "main.rs"))
            || file.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "bin");
        let file_dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let child_dir = if owns_dir { file_dir.clone() } else { file_dir.join(file.file_stem().unwrap_or_default()) };
        let mut collector = Collector {
            module: module.clone(),
            file_dir,
            dir: child_dir,
            inline: 0,
            modules: vec![module],
            references: Vec::new(),
            declarations: Vec::new(),
        };
        collector.visit_file(&parsed);
        modules.extend(collector.modules);
        references.extend(collector.references.into_iter().map(|r| (file.clone(), r)));
        for declaration in collector.declarations {
            match declaration.candidates.iter().find(|c| tree.join(c).is_file()) {
                Some(found) => queue.push_back((found.clone(), declaration.module, declaration.by_path)),
                None => findings.push(finding(
                    &file,
                    Some(declaration.line),
                    "missing-module",
                    format!(
                        "`mod {}` has no file: looked for {}",
                        declaration.module.last().map(String::as_str).unwrap_or_default(),
                        declaration.candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ")
                    ),
                )),
            }
        }
    }
    CrateRead { modules, references, findings }
}

/// A module file read whole by syn, or the `unparsable` finding saying why not.
fn parse(tree: &Path, file: &Path) -> Result<syn::File, Finding> {
    let src = fs::read_to_string(tree.join(file))
        .map_err(|error| finding(file, None, "unparsable", format!("cannot be read: {error}")))?;
    syn::parse_file(&src).map_err(|error| {
        finding(file, Some(error.span().start().line), "unparsable", format!("syn cannot read it: {error}"))
    })
}

type Edges = BTreeMap<ModPath, BTreeMap<ModPath, Place>>;

/// Each module's imports of other modules (not itself, an ancestor or a descendant), each
/// at its first place.
fn edges(modules: &BTreeSet<ModPath>, references: Vec<(PathBuf, Reference)>) -> Edges {
    let mut edges = Edges::new();
    for (file, reference) in references {
        let Some(target) = resolve(modules, &reference.from, &reference.segments) else { continue };
        if target.starts_with(&reference.from) || reference.from.starts_with(&target) {
            continue;
        }
        let place = Place { file, line: reference.line };
        let slot = edges.entry(reference.from).or_default().entry(target).or_insert_with(|| place.clone());
        if place < *slot {
            *slot = place;
        }
    }
    edges
}

/// One `import-cycle` finding per strongly connected component of two or more modules.
fn cycles(modules: &BTreeSet<ModPath>, edges: &Edges) -> Vec<Finding> {
    let mut findings = Vec::new();
    for component in components(modules, edges) {
        let cycle = shortest_cycle(&component, edges);
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let place = &edges[&w[0]][&w[1]];
                format!("{} -> {} at {}:{}", shown(&w[0]), shown(&w[1]), place.file.display(), place.line)
            })
            .collect();
        let first = &edges[&cycle[0]][&cycle[1]];
        let names: Vec<String> = component.iter().map(|m| shown(m)).collect();
        findings.push(finding(
            &first.file,
            Some(first.line),
            "import-cycle",
            format!("modules {} form a cycle ({})", names.join(", "), steps.join("; ")),
        ));
    }
    findings
}

fn finding(file: &Path, line: Option<usize>, code: &str, message: String) -> Finding {
    Finding { path: file.to_path_buf(), line, code: code.into(), message }
}

/// The module a path names: its `crate`/`super`/`self` start applied to `from`, then the
/// longest prefix of the rest that is a module. `None` when it leaves the crate.
fn resolve(modules: &BTreeSet<ModPath>, from: &[String], segments: &[String]) -> Option<ModPath> {
    let mut base: ModPath = from.to_vec();
    let mut rest = segments;
    let mut first = true;
    while let Some((head, tail)) = rest.split_first() {
        match head.as_str() {
            "crate" if first => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        first = false;
        rest = tail;
    }
    (0..=rest.len()).rev().map(|k| [base.as_slice(), &rest[..k]].concat()).find(|m| modules.contains(m))
}

/// Strongly connected components of two or more modules (Tarjan), each sorted, in order.
fn components(modules: &BTreeSet<ModPath>, edges: &Edges) -> Vec<Vec<ModPath>> {
    struct Tarjan<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flat_map(|e| e.keys()) {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in modules {
        if !tarjan.index.contains_key(m) {
            tarjan.visit(m);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

/// The shortest cycle through the component's first module, staying inside it, as the
/// modules in order with the first repeated at the end.
fn shortest_cycle(component: &[ModPath], edges: &Edges) -> Vec<ModPath> {
    let start = &component[0];
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in edges.get(v).into_iter().flat_map(|e| e.keys()).filter(|w| component.contains(w)) {
            if w == start {
                let mut cycle = vec![start.clone()];
                let mut at = v;
                while at != start {
                    cycle.push(at.clone());
                    at = came_from[at];
                }
                cycle.push(start.clone());
                cycle.reverse();
                return cycle;
            }
            if !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected component has a cycle through each of its modules")
}

/// A `mod x;` to follow: the module it makes and the files that may hold it, in order.
struct Declaration {
    module: ModPath,
    candidates: Vec<PathBuf>,
    by_path: bool,
    line: usize,
}

/// Reads one file: its inline modules, its `mod x;` declarations, its references.
struct Collector {
    /// The module being read (the file's, plus the inline modules entered).
    module: ModPath,
    /// The directory of the file, for a top-level `#[path]`.
    file_dir: PathBuf,
    /// The directory `mod x;` is looked up in, inside the inline modules entered.
    dir: PathBuf,
    /// How many inline modules deep.
    inline: usize,
    modules: Vec<ModPath>,
    references: Vec<Reference>,
    declarations: Vec<Declaration>,
}

impl Collector {
    fn reference(&mut self, segments: Vec<String>, line: usize) {
        if segments.first().is_some_and(|s| matches!(s.as_str(), "crate" | "super" | "self")) {
            self.references.push(Reference { from: self.module.clone(), segments, line });
        }
    }

    /// The flattened paths of a `use` tree, each with the line of its last name.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.unraw().to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, &r.ident),
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                self.reference(prefix.clone(), line);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut segments = prefix.to_vec();
        // `use a::{self}` names `a`.
        if ident != "self" || prefix.is_empty() {
            segments.push(ident.unraw().to_string());
        }
        self.reference(segments, ident.span().start().line);
    }

    /// `crate :: a :: b`, `super :: a`, `$crate :: a` in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(first) if matches!(first.to_string().as_str(), "crate" | "super" | "self") => {
                    let preceded_by_colons =
                        i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
                    let mut segments = vec![first.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                        (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.unraw().to_string());
                        j += 3;
                    }
                    if !preceded_by_colons && segments.len() > 1 {
                        self.reference(segments, first.span().start().line);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn module(&mut self, m: &syn::ItemMod) {
        let name = m.ident.unraw().to_string();
        let mut module = self.module.clone();
        module.push(name.clone());
        self.modules.push(module.clone());
        let path_attr = m.attrs.iter().find_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        });
        match &m.content {
            Some((_, items)) => {
                let outer = (self.module.clone(), self.dir.clone());
                self.module = module;
                self.dir = match path_attr {
                    Some(p) => self.dir.join(p),
                    None => self.dir.join(&name),
                };
                self.inline += 1;
                for item in items {
                    self.visit_item(item);
                }
                self.inline -= 1;
                (self.module, self.dir) = outer;
            }
            None => {
                let candidates = match &path_attr {
                    Some(p) if self.inline == 0 => vec![self.file_dir.join(p)],
                    Some(p) => vec![self.dir.join(p)],
                    None => vec![self.dir.join(format!("{name}.rs")), self.dir.join(&name).join("mod.rs")],
                };
                let by_path = path_attr.is_some();
                self.declarations.push(Declaration { module, candidates, by_path, line: m.ident.span().start().line });
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        match item {
            syn::Item::Mod(m) => self.module(m),
            syn::Item::Use(u) => self.use_tree(&mut Vec::new(), &u.tree),
            _ => visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            if let Some(first) = path.segments.first() {
                let segments = path.segments.iter().map(|s| s.ident.unraw().to_string()).collect();
                self.reference(segments, first.ident.span().start().line);
            }
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    /// `pub(crate)`, `pub(in crate::a)`: who may see an item, not an import.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    /// Doc comments and other attributes name no imports.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (path, text) under a fresh directory with an empty configuration.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("import-cycles.toml"), "").unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, text).unwrap();
        }
        dir
    }

    fn run(files: &[(&str, &str)]) -> Vec<String> {
        let dir = tree(files);
        check(dir.path(), Path::new("import-cycles.toml")).unwrap().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn two_modules_using_each_other_are_one_finding_with_both_places() {
        let found = run(&[
            ("k/src/lib.rs", "mod fat;\nmod pack;\n"),
            ("k/src/fat.rs", "use crate::pack::Packer;\npub struct Fat;\n"),
            ("k/src/pack.rs", "pub struct Packer;\n\nfn f() -> super::fat::Fat { todo!() }\n"),
        ]);
        assert_eq!(
            found,
            ["k/src/fat.rs:1: import-cycle: modules fat, pack form a cycle \
              (fat -> pack at k/src/fat.rs:1; pack -> fat at k/src/pack.rs:3)"]
        );
    }

    #[test]
    fn brace_groups_are_flattened_and_each_name_resolved() {
        let found = run(&[
            ("k/src/lib.rs", "mod a;\nmod b;\n"),
            ("k/src/a.rs", "use super::{b::{X as Y}, self as _};\n"),
            ("k/src/b.rs", "pub struct X;\nuse crate::{\n    a,\n};\n"),
        ]);
        assert_eq!(
            found,
            ["k/src/a.rs:1: import-cycle: modules a, b form a cycle (a -> b at k/src/a.rs:1; b -> a at k/src/b.rs:3)"]
        );
    }

    #[test]
    fn a_cycle_through_three_modules_names_all_three_in_cycle_order() {
        let found = run(&[
            ("k/src/main.rs", "mod a;\nmod b;\nmod c;\nfn main() {}\n"),
            ("k/src/a.rs", "pub fn f() { crate::b::g() }\n"),
            ("k/src/b.rs", "pub fn g() { crate::c::h() }\n"),
            ("k/src/c.rs", "pub fn h() { println!(\"{}\", crate::a::f()) }\n"),
        ]);
        assert_eq!(
            found,
            ["k/src/a.rs:1: import-cycle: modules a, b, c form a cycle \
              (a -> b at k/src/a.rs:1; b -> c at k/src/b.rs:1; c -> a at k/src/c.rs:1)"]
        );
    }

    #[test]
    fn nested_file_modules_resolve_super_to_their_parent() {
        // qemu/boot.rs and qemu/devices.rs, as in the bench before the cycle was cut.
        let found = run(&[
            ("k/src/lib.rs", "mod qemu;\n"),
            ("k/src/qemu/mod.rs", "mod boot;\nmod devices;\n"),
            ("k/src/qemu/boot.rs", "use super::devices::Device;\npub enum Event {}\n"),
            ("k/src/qemu/devices.rs", "pub trait Device { fn on(&self, e: &crate::qemu::boot::Event); }\n"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("modules qemu::boot, qemu::devices form a cycle"), "{found:?}");
    }

    #[test]
    fn edges_to_ancestors_and_descendants_do_not_count() {
        let found = run(&[
            ("k/src/lib.rs", "mod a;\npub use a::b::X;\npub fn top() { crate::a::b::f() }\n"),
            ("k/src/a/mod.rs", "pub mod b;\nuse self::b::X as _;\npub fn g() { super::top() }\n"),
            ("k/src/a/b.rs", "pub struct X;\npub fn f() { super::g(); crate::top() }\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn comments_doc_links_strings_and_visibility_are_no_imports() {
        let found = run(&[
            ("k/src/lib.rs", "mod a;\nmod b;\n"),
            ("k/src/a.rs", "use crate::b::X;\n"),
            (
                "k/src/b.rs",
                "pub struct X;\n// use crate::a::Y;\n/// See [`crate::a::Y`].\n/* crate::a::Y */\n\
                 pub(in crate::a) fn f() { let _ = \"crate::a::Y\"; }\n",
            ),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn test_modules_and_test_items_are_not_read() {
        let found = run(&[
            ("k/src/lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n"),
            ("k/src/a.rs", "use crate::b::X;\n"),
            (
                "k/src/b.rs",
                "pub struct X;\n#[cfg(test)]\nmod tests { use crate::a::*; }\n\
                 #[cfg(all(test, unix))]\nfn helper() { crate::a::f() }\n",
            ),
            ("k/src/tests.rs", "this is not rust and is never read"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_cycle_inside_a_macro_call_is_found() {
        let found = run(&[
            ("k/src/lib.rs", "mod a;\nmod b;\n"),
            ("k/src/a.rs", "pub fn f() { assert!(crate::b::ok()) }\n"),
            ("k/src/b.rs", "pub fn ok() -> bool { true }\npub fn g() { vec![$crate::a::f()]; }\n"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("modules a, b form a cycle"), "{found:?}");
    }

    #[test]
    fn inline_modules_are_modules_of_their_own() {
        let found = run(&[(
            "k/src/lib.rs",
            "mod x { pub fn f() { super::y::g() } }\nmod y { pub fn g() {} pub fn h() { super::x::f() } }\n",
        )]);
        assert_eq!(found, ["k/src/lib.rs:1: import-cycle: modules x, y form a cycle (x -> y at k/src/lib.rs:1; y -> x at k/src/lib.rs:2)"]);
    }

    #[test]
    fn each_binary_is_its_own_crate() {
        // The library's `crate::b` and the binary's `crate::a` name no module of their own
        // crate; read as one crate they would be a cycle.
        let found = run(&[
            ("k/src/lib.rs", "mod a;\n"),
            ("k/src/main.rs", "mod b;\nfn main() {}\n"),
            ("k/src/a.rs", "pub use crate::b::X;\n"),
            ("k/src/b.rs", "pub use crate::a::Y;\n"),
            ("k/src/bin/tool/main.rs", "mod c;\nfn main() {}\n"),
            ("k/src/bin/tool/c.rs", "pub fn h() {}\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn path_attributes_and_raw_names_are_followed_as_rustc_does() {
        let found = run(&[
            ("k/src/lib.rs", "#[path = \"arch/riscv.rs\"]\nmod riscv;\nmod r#async;\n"),
            // Loaded through #[path]: it owns its directory, as a mod.rs does.
            ("k/src/arch/riscv.rs", "mod csr;\npub fn f() { crate::r#async::g() }\n"),
            ("k/src/arch/csr.rs", "pub fn h() {}\n"),
            ("k/src/async.rs", "pub fn g() {}\npub fn i() { crate::riscv::f() }\n"),
        ]);
        assert_eq!(
            found,
            ["k/src/async.rs:2: import-cycle: modules async, riscv form a cycle \
              (async -> riscv at k/src/async.rs:2; riscv -> async at k/src/arch/riscv.rs:2)"]
        );
    }

    #[test]
    fn a_missing_or_unreadable_module_fails_closed() {
        let found = run(&[("k/src/lib.rs", "mod gone;\nmod broken;\n"), ("k/src/broken.rs", "fn (\n")]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("k/src/lib.rs:1: missing-module: `mod gone` has no file"), "{found:?}");
        assert!(found[1].starts_with("k/src/broken.rs:1: unparsable: "), "{found:?}");
    }

    #[test]
    fn skips_need_a_reason_and_a_crate() {
        let dir = tree(&[
            ("fixtures/k/src/lib.rs", "mod a;\nmod b;\n"),
            ("fixtures/k/src/a.rs", "use crate::b::X;\n"),
            ("fixtures/k/src/b.rs", "use crate::a::Y;\n"),
        ]);
        fs::write(
            dir.path().join("import-cycles.toml"),
            "[[skip]]\nroot = \"fixtures\"\nreason = \"on purpose\"\n\n[[skip]]\nroot = \"nowhere\"\n",
        )
        .unwrap();
        let found: Vec<String> =
            check(dir.path(), Path::new("import-cycles.toml")).unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "import-cycles.toml:5: skip-without-reason: skip[1] (nowhere) gives no reason: say why its crates are not checked",
                "import-cycles.toml:5: stale-skip: skip[1] (nowhere) holds no crate root (src/lib.rs, src/main.rs, src/bin/*): delete it",
            ]
        );
    }

    #[test]
    fn a_configuration_it_cannot_use_names_the_field() {
        let dir = tree(&[]);
        fs::write(dir.path().join("import-cycles.toml"), "[[skip]]\nroot = \"../up\"\nreason = \"x\"\n").unwrap();
        let error = check(dir.path(), Path::new("import-cycles.toml")).unwrap_err();
        assert_eq!(error.field, "skip[0].root");
        assert!(error.message.contains("\"../up\" is not accepted"), "{error}");
        let error = check(dir.path(), Path::new("absent.toml")).unwrap_err();
        assert_eq!(error.field, "(file)");
        fs::write(dir.path().join("import-cycles.toml"), "paths = []\n").unwrap();
        let error = check(dir.path(), Path::new("import-cycles.toml")).unwrap_err();
        assert_eq!(error.field, "line 1");
    }

    #[test]
    fn crate_roots_are_lib_main_and_bins_under_src() {
        for root in ["src/lib.rs", "a/b/src/main.rs", "x/src/bin/t.rs", "x/src/bin/t/main.rs"] {
            assert!(is_crate_root(root), "{root}");
        }
        for other in ["src/a.rs", "tests/lib.rs", "x/src/bin/t/other.rs", "lib.rs"] {
            assert!(!is_crate_root(other), "{other}");
        }
    }
}
