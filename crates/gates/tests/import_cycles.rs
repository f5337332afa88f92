//! The import-cycles gate on its good and bad trees under tests/fixtures/import-cycles/,
//! and on the project's own tree.

use std::path::{Path, PathBuf};

use testbench_gates::import_cycles;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import-cycles").join(name)
}

fn findings(tree: &Path) -> Vec<String> {
    import_cycles::check(tree, Path::new("import-cycles.toml")).unwrap().iter().map(ToString::to_string).collect()
}

#[test]
fn the_bad_tree_fires_once_naming_both_imports() {
    assert_eq!(
        findings(&fixture("bad")),
        ["disk/src/fat.rs:3: import-cycle: modules fat, pack form a cycle \
          (fat -> pack at disk/src/fat.rs:3; pack -> fat at disk/src/pack.rs:10)"]
    );
}

#[test]
fn the_good_tree_passes() {
    assert_eq!(findings(&fixture("good")), Vec::<String>::new());
}

#[test]
fn the_project_has_no_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert_eq!(findings(&root), Vec::<String>::new());
}

#[test]
fn without_its_skip_the_project_tree_finds_the_bad_fixture() {
    // The skip in import-cycles.toml is what keeps the fixture out; the gate does see it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let empty = tempfile::NamedTempFile::new().unwrap();
    let found: Vec<String> =
        import_cycles::check(&root, empty.path()).unwrap().iter().map(ToString::to_string).collect();
    assert!(
        found.iter().any(|f| f.starts_with(
            "crates/gates/tests/fixtures/import-cycles/bad/disk/src/fat.rs:3: import-cycle: modules fat, pack"
        )),
        "{found:?}"
    );
}
