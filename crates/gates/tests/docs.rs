//! The docs checker on small good and bad books, and on the project's own book.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testbench_gates::docs::{self, TestIndex};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn the_projects_own_book_passes() {
    let tree = root();
    let packages = docs::host_packages(&tree.join("docs"));
    assert!(packages.contains("testbench"), "the book names no host test of testbench: {packages:?}");
    let deadline = Instant::now() + Duration::from_secs(1200);
    let index = TestIndex::from_cargo(&tree, &packages, deadline).unwrap_or_else(|e| panic!("{e}"));
    let findings = docs::check(&tree, Path::new("docs"), &index);
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(shown.is_empty(), "the book breaks its rules:\n{}", shown.join("\n"));
}
