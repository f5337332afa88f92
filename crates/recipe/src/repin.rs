//! Re-pinning a recipe to its suite's current packages: read the mirror's `Packages`
//! index, take each pinned package's current `Version`, `SHA256` and `Filename`, and
//! rewrite the recipe's TOML in place with `toml_edit`, so comments and layout stay.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Value};

use crate::fetch::{Fetch, FetchError};
use crate::recipe::{parse, Arch, Recipe};
use crate::RecipeError;

/// What can stop a re-pin. Nothing is written when one happens.
#[derive(Debug, thiserror::Error)]
pub enum RepinError {
    #[error(transparent)]
    Recipe(Box<RecipeError>),
    #[error("index {url}: {source}")]
    Index { url: String, source: FetchError },
    #[error("index {url}: not gzip data, or truncated: {source}")]
    Gunzip { url: String, source: std::io::Error },
    #[error("index {url}: not UTF-8 text: {source}")]
    IndexText { url: String, source: std::string::FromUtf8Error },
    #[error("recipe {}: no `dists/{suite}/main/binary-<arch>/` index for arch {arch:?}: give each [[package]] a Debian arch other than \"all\", or a recipe arch of rv64, x86_64 or aarch64", path.display())]
    NoIndexArch { path: PathBuf, suite: String, arch: String },
    #[error("recipe {}: package[{index}] {package} ({arch}) is not in {url}, neither by its name nor renamed with a new upstream version (as a kernel's ABI is); edit it by hand", path.display())]
    NotInIndex { path: PathBuf, index: usize, package: String, arch: String, url: String },
    #[error("recipe {}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    /// The rewritten text does not validate (the re-pinned recipe names a file the new
    /// package name moved, for instance); nothing is written.
    #[error("recipe {}: the re-pinned text does not validate, nothing written: {source}", path.display())]
    Invalid { path: PathBuf, source: Box<RecipeError> },
    #[error("recipe {}: writing it: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl From<RecipeError> for RepinError {
    fn from(e: RecipeError) -> Self {
        RepinError::Recipe(Box::new(e))
    }
}

/// One package's entry in a `Packages` index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub package: String,
    pub version: String,
    pub arch: String,
    pub filename: String,
    pub sha256: String,
}

/// The entries of a `Packages` index's text that have every field a pin needs.
pub fn parse_index(text: &str) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    for para in text.split("\n\n") {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in para.lines() {
            if line.starts_with([' ', '\t']) {
                continue; // a continuation line (Description's body)
            }
            if let Some((k, v)) = line.split_once(':') {
                fields.insert(k.trim(), v.trim());
            }
        }
        let field = |k: &str| fields.get(k).map(|v| v.to_string());
        if let (Some(package), Some(version), Some(arch), Some(filename), Some(sha256)) =
            (field("Package"), field("Version"), field("Architecture"), field("Filename"), field("SHA256"))
        {
            out.push(IndexEntry { package, version, arch, filename, sha256 });
        }
    }
    out
}

/// Debian's version order (deb-version(7)): epoch numerically, then upstream version and
/// revision each compared part by part, non-digit runs by a character order where `~`
/// sorts before everything (even the end) and letters before other characters, digit
/// runs numerically. Written here because the rule is short and a crate for it would be
/// a dependency for 40 lines.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) => (e.parse().unwrap_or(0), r),
            None => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((up, rev)) => (epoch, up, rev),
            None => (epoch, rest, ""),
        }
    }
    fn order(c: Option<u8>) -> i32 {
        match c {
            Some(b'~') => -1,
            None => 0,
            Some(c) if c.is_ascii_alphabetic() => c as i32,
            Some(c) => c as i32 + 256,
        }
    }
    fn part(mut a: &[u8], mut b: &[u8]) -> Ordering {
        while !a.is_empty() || !b.is_empty() {
            // The non-digit run.
            loop {
                let (ca, cb) = (
                    a.first().copied().filter(|c| !c.is_ascii_digit()),
                    b.first().copied().filter(|c| !c.is_ascii_digit()),
                );
                if ca.is_none() && cb.is_none() {
                    break;
                }
                match order(ca).cmp(&order(cb)) {
                    Ordering::Equal => {}
                    o => return o,
                }
                a = &a[ca.is_some() as usize..];
                b = &b[cb.is_some() as usize..];
            }
            // The digit run, numerically (leading zeros do not count).
            let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
            let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let na = std::str::from_utf8(&a[..da]).unwrap_or("").trim_start_matches('0');
            let nb = std::str::from_utf8(&b[..db]).unwrap_or("").trim_start_matches('0');
            match na.len().cmp(&nb.len()).then_with(|| na.cmp(nb)) {
                Ordering::Equal => {}
                o => return o,
            }
            a = &a[da..];
            b = &b[db..];
        }
        Ordering::Equal
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb).then_with(|| part(ua.as_bytes(), ub.as_bytes())).then_with(|| part(ra.as_bytes(), rb.as_bytes()))
}

/// The upstream part of a Debian version: no epoch, no revision.
fn upstream(version: &str) -> &str {
    let v = version.split_once(':').map_or(version, |(_, v)| v);
    v.rsplit_once('-').map_or(v, |(u, _)| u)
}

/// The Debian architecture whose index holds a recipe's `arch = "all"` packages when no
/// package names another.
fn debian_arch(arch: Arch) -> Option<&'static str> {
    match arch {
        Arch::Rv64 => Some("riscv64"),
        Arch::X86_64 => Some("amd64"),
        Arch::Aarch64 => Some("arm64"),
        Arch::Rv32 => None,
    }
}

/// The index URL tried first (gzip'd; `Packages.gz` is what flate2, already a
/// dependency, reads), then the uncompressed one.
pub fn index_urls(mirror: &str, suite: &str, arch: &str) -> [String; 2] {
    let base = format!("{mirror}/dists/{suite}/main/binary-{arch}/Packages");
    [format!("{base}.gz"), base]
}

/// Downloads and reads one index: `Packages.gz`, or `Packages` when that answers 404.
/// Gives the URL read and its entries.
pub fn fetch_index(
    fetch: &mut dyn Fetch,
    mirror: &str,
    suite: &str,
    arch: &str,
) -> Result<(String, Vec<IndexEntry>), RepinError> {
    let [gz, plain] = index_urls(mirror, suite, arch);
    let mut body = Vec::new();
    let (url, bytes) = match fetch.fetch(&gz, &mut body) {
        Ok(_) => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&body[..])
                .read_to_end(&mut out)
                .map_err(|source| RepinError::Gunzip { url: gz.clone(), source })?;
            (gz, out)
        }
        Err(FetchError::Status { code: 404, .. }) => {
            let mut out = Vec::new();
            fetch.fetch(&plain, &mut out).map_err(|source| RepinError::Index { url: plain.clone(), source })?;
            (plain, out)
        }
        Err(source) => return Err(RepinError::Index { url: gz, source }),
    };
    let text = String::from_utf8(bytes).map_err(|source| RepinError::IndexText { url: url.clone(), source })?;
    Ok((url.clone(), parse_index(&text)))
}

/// One pin that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub old_name: String,
    pub new_name: String,
    pub old_version: String,
    pub new_version: String,
}

/// A re-pinned recipe, not yet written.
#[derive(Debug, Clone)]
pub struct Repinned {
    pub path: PathBuf,
    pub old_text: String,
    pub new_text: String,
    pub changes: Vec<Change>,
}

impl Repinned {
    /// A unified diff of the recipe's text, old to new (empty when nothing changed).
    pub fn diff(&self) -> String {
        if self.old_text == self.new_text {
            return String::new();
        }
        let name = self.path.display().to_string();
        similar::TextDiff::from_lines(&self.old_text, &self.new_text)
            .unified_diff()
            .context_radius(3)
            .header(&name, &name)
            .to_string()
    }

    /// Writes the new text over the recipe (a temporary file beside it, renamed), when
    /// anything changed.
    pub fn write(&self) -> Result<(), RepinError> {
        if self.old_text == self.new_text {
            return Ok(());
        }
        let err = |source| RepinError::Write { path: self.path.clone(), source };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.repin-{}", crate::fetch::unique_suffix()));
        std::fs::write(&tmp, &self.new_text).map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }
}

/// Re-pins the recipe at `path` against its mirror's current index for its suite.
pub fn repin(fetch: &mut dyn Fetch, path: &Path) -> Result<Repinned, RepinError> {
    let bytes = std::fs::read(path).map_err(|source| RecipeError::Read { path: path.to_path_buf(), source })?;
    let recipe = parse(path, &bytes)?;
    let mut arches: Vec<String> =
        recipe.packages.iter().map(|p| p.arch.clone()).filter(|a| a != "all").collect::<Vec<_>>();
    arches.sort();
    arches.dedup();
    if arches.is_empty() {
        match debian_arch(recipe.arch) {
            Some(a) => arches.push(a.to_string()),
            None => {
                return Err(RepinError::NoIndexArch {
                    path: path.to_path_buf(),
                    suite: recipe.suite.clone(),
                    arch: recipe.arch.to_string(),
                })
            }
        }
    }
    let mut indexes = BTreeMap::new();
    for arch in &arches {
        indexes.insert(arch.clone(), fetch_index(fetch, &recipe.mirror, &recipe.suite, arch)?);
    }
    let old_text = String::from_utf8(bytes).expect("parse checked UTF-8");
    let (new_text, changes) = rewrite(&recipe, &old_text, &indexes)?;
    if new_text != old_text {
        parse(path, new_text.as_bytes())
            .map_err(|source| RepinError::Invalid { path: path.to_path_buf(), source: Box::new(source) })?;
    }
    Ok(Repinned { path: path.to_path_buf(), old_text, new_text, changes })
}

/// The newest index entry for a pinned package: under its own name, or (for a kernel,
/// whose package name carries the ABI) under the name with its upstream version replaced
/// by the entry's, whichever is newer: the suite may list the old ABI beside the new for
/// a while, and the old one is what leaves the pool next. `true` when renamed.
fn current<'a>(name: &str, version: &str, arch: &str, entries: &'a [IndexEntry]) -> Option<(&'a IndexEntry, bool)> {
    let old = upstream(version);
    let renames = !old.is_empty() && name.contains(old);
    entries
        .iter()
        .filter(|e| e.arch == arch)
        .filter_map(|e| {
            if e.package == name {
                Some((e, false))
            } else if renames && e.package == name.replacen(old, upstream(&e.version), 1) {
                Some((e, true))
            } else {
                None
            }
        })
        .max_by(|(a, _), (b, _)| compare_versions(&a.version, &b.version))
}

fn rewrite(
    recipe: &Recipe,
    text: &str,
    indexes: &BTreeMap<String, (String, Vec<IndexEntry>)>,
) -> Result<(String, Vec<Change>), RepinError> {
    let toml_err = |message: String| RepinError::Toml { path: recipe.path.clone(), message };
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| toml_err(e.to_string()))?;
    let tables = doc
        .get_mut("package")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| toml_err("`package` is not an array of [[package]] tables".into()))?;
    let mut changes = Vec::new();
    for (i, (table, pkg)) in tables.iter_mut().zip(&recipe.packages).enumerate() {
        let found = if pkg.arch == "all" {
            indexes.values().find_map(|(_, entries)| current(&pkg.name, &pkg.version, &pkg.arch, entries))
        } else {
            current(&pkg.name, &pkg.version, &pkg.arch, &indexes[&pkg.arch].1)
        };
        let Some((entry, renamed)) = found else {
            let url =
                indexes.get(&pkg.arch).or_else(|| indexes.values().next()).map(|(u, _)| u.clone()).unwrap_or_default();
            return Err(RepinError::NotInIndex {
                path: recipe.path.clone(),
                index: i,
                package: pkg.name.clone(),
                arch: pkg.arch.clone(),
                url,
            });
        };
        if entry.version == pkg.version && entry.sha256 == pkg.sha256 && entry.filename == pkg.pool && !renamed {
            continue;
        }
        set_str(&mut table["version"], &entry.version);
        set_str(&mut table["sha256"], &entry.sha256);
        set_str(&mut table["pool"], &entry.filename);
        if renamed {
            set_str(&mut table["name"], &entry.package);
            // The kernel's files sit under folders named after its ABI, as its name is.
            let (old, new) = (upstream(&pkg.version), upstream(&entry.version));
            rename_froms(&mut table["files"], old, new);
        }
        changes.push(Change {
            old_name: pkg.name.clone(),
            new_name: entry.package.clone(),
            old_version: pkg.version.clone(),
            new_version: entry.version.clone(),
        });
    }
    Ok((doc.to_string(), changes))
}

/// Replaces a string value, keeping the spaces and any comment around it.
fn set_str(item: &mut Item, s: &str) {
    if let Some(v) = item.as_value_mut() {
        let decor = v.decor().clone();
        *v = Value::from(s);
        *v.decor_mut() = decor;
    }
}

/// In every `files` entry's `from`, `old` becomes `new` (inline tables or [[package.files]]).
fn rename_froms(files: &mut Item, old: &str, new: &str) {
    let fix = |v: Option<&mut Value>| {
        if let Some(v) = v {
            if let Some(s) = v.as_str().filter(|s| s.contains(old)).map(|s| s.replace(old, new)) {
                let decor = v.decor().clone();
                *v = Value::from(s);
                *v.decor_mut() = decor;
            }
        }
    };
    if let Some(array) = files.as_array_mut() {
        for entry in array.iter_mut() {
            if let Some(t) = entry.as_inline_table_mut() {
                fix(t.get_mut("from"));
            }
        }
    } else if let Some(tables) = files.as_array_of_tables_mut() {
        for t in tables.iter_mut() {
            fix(t.get_mut("from").and_then(Item::as_value_mut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_version_order() {
        use Ordering::*;
        for (a, b, o) in [
            ("6.12.117-1", "6.12.120-1", Less),
            ("6.12.9-1", "6.12.10-1", Less),
            ("1:1.0-1", "2.0-1", Greater),
            ("1.0~rc1-1", "1.0-1", Less),
            ("1.0-1", "1.0-1+b1", Less),
            ("1.37.0-6+b9", "1.37.0-6+b10", Less),
            ("1.0a-1", "1.0+-1", Less),
            ("1.0-1", "1.0-01", Equal),
            ("2.41-12", "2.41-12+deb13u1", Less),
        ] {
            assert_eq!(compare_versions(a, b), o, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), o.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn index_paragraphs_with_every_field_are_read() {
        let text = "Package: a\nVersion: 1-1\nArchitecture: riscv64\nDescription: x\n more\nFilename: pool/main/a/a_1-1_riscv64.deb\nSHA256: 00\n\nPackage: b\nVersion: 2\n";
        let e = parse_index(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].package, "a");
        assert_eq!(e[0].filename, "pool/main/a/a_1-1_riscv64.deb");
        assert_eq!(upstream("1:1.37.0-6+b9"), "1.37.0");
    }
}
