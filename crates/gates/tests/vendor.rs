//! The vendor check on small good and bad trees under tests/fixtures/vendor/.

use std::path::{Path, PathBuf};

use testbench_gates::vendor;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vendor").join(name)
}

fn findings(name: &str) -> Vec<String> {
    vendor::check(&fixture(name)).iter().map(ToString::to_string).collect()
}

/// `(path, line, code)` of each finding.
fn where_(tree: &Path) -> Vec<(String, Option<usize>, String)> {
    vendor::check(tree).into_iter().map(|f| (f.path.display().to_string(), f.line, f.code)).collect()
}

fn at(path: &str, line: Option<usize>, code: &str) -> (String, Option<usize>, String) {
    (path.to_owned(), line, code.to_owned())
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_project_vendors_nothing_and_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(!root.join("vendor").exists(), "the project vendors a crate now: this test's name is out of date");
    assert_eq!(vendor::check(&root), vec![]);
}

#[test]
fn crates_as_published_and_built_from_vendor_pass() {
    assert_eq!(findings("good"), Vec::<String>::new());
}

#[test]
fn a_patched_crate_whose_patch_is_the_whole_difference_passes() {
    assert_eq!(findings("good-patched"), Vec::<String>::new());
}

#[test]
fn a_changed_file_fails() {
    assert_eq!(
        findings("changed"),
        vec![
            "vendor/tiny/src/lib.rs: changed: sha256 is \
             df9820370551229d8d7394935e92425162a96e10706e4c7b3f2be7ca30585d4c, vendor/SHA256SUMS:2 records \
             64e3e9b801c349df8cdee39dd83488e3a0c57b615ff6ea0036fa7925cd0cfe21"
        ]
    );
}

#[test]
fn an_added_file_fails() {
    assert_eq!(
        where_(&fixture("added")),
        vec![at("vendor/NOTES", None, "added"), at("vendor/tiny/src/more.rs", None, "added")]
    );
}

#[test]
fn a_removed_file_fails() {
    assert_eq!(
        findings("removed"),
        vec!["vendor/SHA256SUMS:2: removed: vendor/tiny/src/lib.rs is listed but not there"]
    );
}

#[test]
fn sums_that_cannot_be_read_fail() {
    assert_eq!(
        where_(&fixture("bad-sums")),
        vec![
            at("vendor/SHA256SUMS", Some(2), "bad-sums"),
            at("vendor/SHA256SUMS", Some(4), "bad-sums"),
            at("vendor/SHA256SUMS", Some(5), "bad-sums"),
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("good"), dir.path());
    std::fs::remove_file(dir.path().join("vendor/SHA256SUMS")).unwrap();
    assert_eq!(
        where_(dir.path()),
        vec![
            at("vendor/SHA256SUMS", None, "bad-sums"),
            at("vendor/tiny/Cargo.toml", None, "added"),
            at("vendor/tiny/src/lib.rs", None, "added"),
        ]
    );
}

#[test]
fn a_crate_the_build_does_not_take_from_vendor_fails() {
    assert_eq!(
        findings("not-patched-in"),
        vec![
            "Cargo.toml:4: not-patched-in: vendor/tiny is not patched in: [patch.crates-io] needs \
             tiny = { path = \"vendor/tiny\" }, or the build takes tiny from the registry",
            "Cargo.toml:4: not-patched-in: [patch.crates-io] right points at vendor/wrong, whose package is wrong: \
             the build takes wrong from the registry",
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("good"), dir.path());
    std::fs::remove_file(dir.path().join("Cargo.toml")).unwrap();
    assert_eq!(where_(dir.path()), vec![at("Cargo.toml", None, "not-patched-in")]);
}

#[test]
fn a_patch_for_no_crate_fails() {
    assert_eq!(
        where_(&fixture("stray-patch")),
        vec![at("vendor/patches/bent.patch", None, "stray-patch"), at("vendor/patches/notes.txt", None, "stray-patch")]
    );
}

#[test]
fn a_patch_that_does_not_reverse_fails() {
    assert_eq!(
        findings("patch-does-not-reverse"),
        vec![
            "vendor/patches/bent.patch: patch-does-not-reverse: reversed on a copy of vendor/bent, \
             src/extra.rs hunk 1, src/lib.rs hunk 1 do not apply"
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("good-patched"), dir.path());
    std::fs::write(dir.path().join("vendor/patches/bent.patch"), "width is 32 now\n").unwrap();
    assert_eq!(
        findings_in(dir.path()),
        vec![
            "vendor/patches/bent.patch: patch-does-not-reverse: not a unified diff (no `--- `, `+++ ` and `@@ ` lines)"
        ]
    );
}

#[test]
fn a_change_outside_the_patch_fails() {
    assert_eq!(
        where_(&fixture("patched-differs")),
        vec![
            at("vendor/SHA256SUMS", Some(3), "patched-differs"),
            at("vendor/bent/src/lib.rs", None, "patched-differs"),
            at("vendor/bent/src/stray.rs", None, "patched-differs"),
        ]
    );
}

#[test]
fn the_check_writes_nothing_into_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("patch-does-not-reverse"), dir.path());
    let before = listing(dir.path());
    assert_eq!(vendor::check(dir.path()).len(), 1);
    assert_eq!(listing(dir.path()), before);
}

fn findings_in(tree: &Path) -> Vec<String> {
    vendor::check(tree).iter().map(ToString::to_string).collect()
}

/// Every file under `dir` with its bytes.
fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(listing(&entry.path()));
        } else {
            out.push((entry.path(), std::fs::read(entry.path()).unwrap()));
        }
    }
    out.sort();
    out
}
