//! The vendor check: third-party crates under `vendor/` are the bytes crates.io
//! published, plus at most one recorded patch each, and the build takes them from there.
//!
//! The project vendors nothing today: with no `vendor/` directory the check has nothing
//! to hold and passes. Once it does, the layout is
//!
//! - `vendor/<crate>/`: one crate, as published (or as published with its patch applied:
//!   that is what Cargo builds);
//! - `vendor/SHA256SUMS`: `sha256sum` output, `<hex>  <path>` with the path relative to
//!   `vendor/`, for every vendored file as published;
//! - `vendor/patches/<crate>.patch`: the one patch of a crate that must change, a unified
//!   diff with `a/` and `b/` prefixes relative to the crate's directory (`diff -ruN
//!   published/ <crate>/`, applied with `patch -p1` inside `vendor/<crate>/`);
//! - `vendor/README.md`: each crate's version, license and checksum, and what each patch
//!   changes and why. Neither it nor `patches/` is in the sums.
//!
//! What this proves is integrity since vendoring: the sums were taken from the tree, so
//! they show that nothing changed since, not that the bytes are what crates.io serves (a
//! provenance check that downloads the crates is a separate, reviewed step). That git
//! tracks every vendored file is not checked here: a crate's own `.gitignore` can hide
//! one (many name `Cargo.lock`), so vendoring must add with `git add -f`.
//!
//! # Findings
//!
//! - `changed`: a file's bytes are not what the sums record
//!   (`vendor/foo/src/lib.rs: changed: sha256 is 5e3a…, vendor/SHA256SUMS:2 records 9f1c…`).
//! - `added`: a file under `vendor/` that the sums do not list.
//! - `removed`: a file the sums list that is not there (at the line of the sums).
//! - `bad-sums`: `vendor/SHA256SUMS` is missing, or a line of it is not `<64 hex>  <path>`
//!   with a relative path, or lists a path twice.
//! - `not-patched-in`: a crate directory with no `[patch.crates-io]` entry in the root
//!   `Cargo.toml` whose `path` is `vendor/<crate>` and whose name (or `package`) is the
//!   crate's package name, so the build could take a registry copy instead.
//! - `stray-patch`: a file under `vendor/patches/` that is not `<crate>.patch` for a
//!   crate directory under `vendor/`.
//! - `patch-does-not-reverse`: `patch -R -p1` (no fuzz) fails on a copy of the patched
//!   crate, so the patch is not the change the vendored copy holds.
//! - `patched-differs`: with its patch reversed, a patched crate's copy is not the
//!   published bytes the sums record: a file differs, is extra or is missing, so some
//!   change is outside the patch.
//!
//! A patched crate's files are held only through the reversed copy; every other file is
//! compared directly. The copy goes to a directory under the system's temporary
//! directory, removed afterwards: the check never writes into the tree. Reversing needs
//! GNU `patch` on the PATH; without it every patched crate is `patch-does-not-reverse`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use testbench_process::{Cmd, CmdError};

use crate::Finding;

/// How long reversing one crate's patch may take (a patch of a vendored crate is small).
const PATCH_DEADLINE: Duration = Duration::from_secs(60);

const SUMS: &str = "SHA256SUMS";
const PATCHES: &str = "patches";
const README: &str = "README.md";

/// One line of `vendor/SHA256SUMS`.
struct Sum {
    hex: String,
    line: usize,
}

fn finding(path: impl Into<PathBuf>, line: Option<usize>, code: &str, message: String) -> Finding {
    Finding { path: path.into(), line, code: code.to_owned(), message }
}

/// Checks `tree/vendor/` (the module documentation); finding paths are relative to `tree`.
/// No `vendor/` directory is a pass.
pub fn check(tree: &Path) -> Vec<Finding> {
    let vendor = tree.join("vendor");
    if !vendor.is_dir() {
        return Vec::new();
    }
    let in_vendor = |rel: &Path| Path::new("vendor").join(rel);
    let sums_path = in_vendor(Path::new(SUMS));
    let mut findings = Vec::new();
    let sums = read_sums(&vendor, &mut findings);

    let crates: BTreeSet<String> = fs::read_dir(&vendor)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name != PATCHES)
        .collect();

    // The patches, and which crates they patch.
    let mut patched: BTreeMap<String, PathBuf> = BTreeMap::new();
    for rel in files_under(&vendor.join(PATCHES)) {
        let path = Path::new(PATCHES).join(&rel);
        let name = rel.to_str().and_then(|name| name.strip_suffix(".patch"));
        match name {
            Some(name) if crates.contains(name) => {
                patched.insert(name.to_owned(), path);
            }
            _ => {
                let message = format!(
                    "a patch for no vendored crate: patches are vendor/patches/<crate>.patch, one per crate under vendor/ ({})",
                    if crates.is_empty() { "none".to_owned() } else { crates.iter().cloned().collect::<Vec<_>>().join(", ") }
                );
                findings.push(finding(in_vendor(&path), None, "stray-patch", message));
            }
        }
    }
    let under_patched = |rel: &Path| {
        rel.components().next().and_then(|c| c.as_os_str().to_str()).is_some_and(|c| patched.contains_key(c))
    };

    // Every file that is not a patched crate's, against the sums.
    let files: BTreeSet<PathBuf> = files_under(&vendor)
        .into_iter()
        .filter(|rel| rel != Path::new(SUMS) && rel != Path::new(README) && !rel.starts_with(PATCHES))
        .collect();
    for rel in files.iter().filter(|rel| !under_patched(rel)) {
        match sums.get(rel) {
            None => findings.push(finding(
                in_vendor(rel),
                None,
                "added",
                format!("a file {} does not list", sums_path.display()),
            )),
            Some(sum) => {
                if let Some(message) = differs(&vendor.join(rel), sum, &sums_path) {
                    findings.push(finding(in_vendor(rel), None, "changed", message));
                }
            }
        }
    }
    for (rel, sum) in sums.iter().filter(|(rel, _)| !under_patched(rel) && !files.contains(*rel)) {
        // The README and the patches are not walked, but a line may still list them.
        if vendor.join(rel).is_file() {
            if let Some(message) = differs(&vendor.join(rel), sum, &sums_path) {
                findings.push(finding(in_vendor(rel), None, "changed", message));
            }
        } else {
            let message = format!("{} is listed but not there", in_vendor(rel).display());
            findings.push(finding(sums_path.clone(), Some(sum.line), "removed", message));
        }
    }

    // Each patched crate, reversed on a copy, against the sums.
    for (name, patch) in &patched {
        findings.extend(check_patched(&vendor, name, patch, &sums, &sums_path));
    }

    findings.extend(check_patched_in(tree, &vendor, &crates));
    findings.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    findings
}

/// Reads `vendor/SHA256SUMS` into path → sum, reporting what it cannot read.
fn read_sums(vendor: &Path, findings: &mut Vec<Finding>) -> BTreeMap<PathBuf, Sum> {
    let path = Path::new("vendor").join(SUMS);
    let mut sums = BTreeMap::new();
    let text = match fs::read_to_string(vendor.join(SUMS)) {
        Ok(text) => text,
        Err(error) => {
            let message = format!("cannot read {}: {error}; it records every vendored file", path.display());
            findings.push(finding(path, None, "bad-sums", message));
            return sums;
        }
    };
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let parsed = line.split_once(' ').and_then(|(hex, rest)| {
            let file = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*'))?;
            let good_hex = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            let rel = Path::new(file);
            let relative = !file.is_empty()
                && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)))
                && !file.ends_with('/');
            (good_hex && relative).then(|| (hex.to_owned(), rel.to_path_buf()))
        });
        match parsed {
            None => findings.push(finding(
                path.clone(),
                Some(number),
                "bad-sums",
                "expected `<64 lowercase hex digits>  <path relative to vendor/>`".to_owned(),
            )),
            Some((_, rel)) if sums.contains_key(&rel) => {
                let message = format!("{} is listed twice", rel.display());
                findings.push(finding(path.clone(), Some(number), "bad-sums", message));
            }
            Some((hex, rel)) => {
                sums.insert(rel, Sum { hex, line: number });
            }
        }
    }
    sums
}

fn sha256(path: &Path) -> std::io::Result<String> {
    let bytes = fs::read(path)?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// What is wrong with a file against its sum, if anything.
fn differs(path: &Path, sum: &Sum, sums_path: &Path) -> Option<String> {
    match sha256(path) {
        Ok(hex) if hex == sum.hex => None,
        Ok(hex) => Some(format!("sha256 is {hex}, {}:{} records {}", sums_path.display(), sum.line, sum.hex)),
        Err(error) => Some(format!("cannot be read: {error}")),
    }
}

/// A patched crate: a copy with its patch reversed must be the published bytes.
fn check_patched(
    vendor: &Path,
    name: &str,
    patch: &Path,
    sums: &BTreeMap<PathBuf, Sum>,
    sums_path: &Path,
) -> Vec<Finding> {
    let patch_shown = Path::new("vendor").join(patch);
    let mut findings = Vec::new();
    let scratch = match Scratch::new() {
        Ok(scratch) => scratch,
        Err(error) => {
            let message = format!("cannot make a copy to reverse it on: {error}");
            return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
        }
    };
    let copy = scratch.0.join(name);
    if let Err(error) = copy_dir(&vendor.join(name), &copy) {
        let message = format!("cannot copy vendor/{name} to reverse it on: {error}");
        return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
    }
    let patch_file = match vendor.join(patch).canonicalize() {
        Ok(file) => file,
        Err(error) => return vec![finding(patch_shown, None, "patch-does-not-reverse", error.to_string())],
    };
    let text = fs::read_to_string(&patch_file).unwrap_or_default();
    let unified = text.lines().any(|l| l.starts_with("--- "))
        && text.lines().any(|l| l.starts_with("+++ "))
        && text.lines().any(|l| l.starts_with("@@ "));
    if !unified {
        let message = "not a unified diff (no `--- `, `+++ ` and `@@ ` lines)".to_owned();
        return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
    }
    let what = format!("`patch -R` to reverse {} on a copy of vendor/{name}", patch_shown.display());
    let output = Cmd::new("patch", what, PATCH_DEADLINE)
        .args(["-R", "-p1", "--fuzz=0", "--force", "--no-backup-if-mismatch", "--reject-file=-"])
        .arg("--directory")
        .arg(&copy)
        .arg("--input")
        .arg(&patch_file)
        .env("LC_ALL", "C")
        .env_remove("POSIXLY_CORRECT")
        .output();
    match output {
        Err(CmdError::Spawn { source, .. }) => {
            let message = format!("cannot run patch: {source}");
            return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
        }
        Err(error) => {
            let message = error.to_string();
            return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
        }
        Ok(output) if !output.status.success() => {
            let said = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
            let message = match failed_hunks(&said) {
                Some(hunks) => format!("reversed on a copy of vendor/{name}, {hunks} do not apply"),
                None => {
                    let said: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
                    format!("`patch -R -p1` on a copy of vendor/{name} fails ({}): {}", output.status, said.join(" "))
                }
            };
            return vec![finding(patch_shown, None, "patch-does-not-reverse", message)];
        }
        Ok(_) => {}
    }
    let reversed: BTreeSet<PathBuf> = files_under(&copy).into_iter().map(|rel| Path::new(name).join(rel)).collect();
    let listed = sums.iter().filter(|(rel, _)| rel.starts_with(name));
    let shown = |rel: &Path| Path::new("vendor").join(rel);
    for rel in &reversed {
        let on_copy = scratch.0.join(rel);
        let message = match sums.get(rel) {
            None => format!(
                "with {} reversed, this file is there but {} does not list it: a change outside the patch",
                patch_shown.display(),
                sums_path.display()
            ),
            Some(sum) => match differs(&on_copy, sum, sums_path) {
                None => continue,
                Some(why) => format!("with {} reversed, {why}: a change outside the patch", patch_shown.display()),
            },
        };
        findings.push(finding(shown(rel), None, "patched-differs", message));
    }
    for (rel, sum) in listed.filter(|(rel, _)| !reversed.contains(*rel)) {
        let message = format!(
            "with {} reversed, {} is missing: a change outside the patch",
            patch_shown.display(),
            shown(rel).display()
        );
        findings.push(finding(sums_path.to_path_buf(), Some(sum.line), "patched-differs", message));
    }
    findings
}

/// The hunks GNU patch says failed, as `src/lib.rs hunk 1, src/x.rs hunk 2`.
fn failed_hunks(said: &str) -> Option<String> {
    let mut file = "";
    let mut failed = Vec::new();
    for line in said.lines() {
        if let Some(name) = line.strip_prefix("patching file ") {
            file = name.trim().trim_matches(['\'', '"']);
        } else if let Some((number, _)) = line.strip_prefix("Hunk #").and_then(|rest| rest.split_once(" FAILED")) {
            failed.push(format!("{file} hunk {number}"));
        }
    }
    (!failed.is_empty()).then(|| failed.join(", "))
}

/// Every crate directory must be the one the build takes: a `[patch.crates-io]` entry.
fn check_patched_in(tree: &Path, vendor: &Path, crates: &BTreeSet<String>) -> Vec<Finding> {
    if crates.is_empty() {
        return Vec::new();
    }
    let manifest = Path::new("Cargo.toml");
    let text = fs::read_to_string(tree.join(manifest));
    let parsed = text
        .as_ref()
        .map_err(ToString::to_string)
        .and_then(|text| toml::from_str::<toml::Value>(text).map_err(|e| e.message().to_owned()));
    let header_line =
        text.as_ref().ok().and_then(|text| text.lines().position(|l| l.trim() == "[patch.crates-io]")).map(|i| i + 1);
    let entries: Vec<(String, Option<String>, Option<String>)> = match &parsed {
        Ok(value) => value
            .get("patch")
            .and_then(|patch| patch.get("crates-io"))
            .and_then(toml::Value::as_table)
            .map(|table| {
                table
                    .iter()
                    .map(|(key, entry)| {
                        let path = entry.get("path").and_then(toml::Value::as_str).map(normal_path);
                        let package = entry.get("package").and_then(toml::Value::as_str).map(str::to_owned);
                        (key.clone(), path, package)
                    })
                    .collect()
            })
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let mut findings = Vec::new();
    for name in crates {
        let package = package_name(&vendor.join(name).join("Cargo.toml")).unwrap_or_else(|| name.clone());
        let wanted = format!("vendor/{name}");
        let message = match &parsed {
            Err(error) => {
                format!("cannot read the root Cargo.toml ({error}), so nothing says the build takes {wanted}")
            }
            Ok(_) => {
                let pointing: Vec<&(String, Option<String>, Option<String>)> =
                    entries.iter().filter(|(_, path, _)| path.as_deref() == Some(wanted.as_str())).collect();
                let right = pointing.iter().any(|(key, _, renamed)| renamed.as_ref().unwrap_or(key) == &package);
                if right {
                    continue;
                }
                match pointing.first() {
                    Some((key, ..)) => format!(
                        "[patch.crates-io] {key} points at {wanted}, whose package is {package}: the build takes {package} from the registry"
                    ),
                    None => format!(
                        "{wanted} is not patched in: [patch.crates-io] needs {package} = {{ path = \"{wanted}\" }}, or the build takes {package} from the registry"
                    ),
                }
            }
        };
        findings.push(finding(manifest, header_line, "not-patched-in", message));
    }
    findings
}

fn normal_path(path: &str) -> String {
    let path = path.strip_prefix("./").unwrap_or(path);
    path.trim_end_matches('/').to_owned()
}

fn package_name(manifest: &Path) -> Option<String> {
    let value: toml::Value = toml::from_str(&fs::read_to_string(manifest).ok()?).ok()?;
    value.get("package")?.get("name")?.as_str().map(str::to_owned)
}

/// Every file under `dir`, relative to it, sorted (symlinks are not followed).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(root.join(rel)) else { return };
        for entry in entries.flatten() {
            let rel = rel.join(entry.file_name());
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => walk(root, &rel, out),
                Ok(_) => out.push(rel),
                Err(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, Path::new(""), &mut out);
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for rel in files_under(from) {
        let target = to.join(&rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(from.join(&rel), target)?;
    }
    Ok(())
}

/// A directory of its own under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Self> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("testbench-vendor-{}-{}-{nanos}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(name);
        fs::create_dir(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
