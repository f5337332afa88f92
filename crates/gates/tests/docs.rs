//! The docs checker on small good and bad books, and on the project's own book.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_gates::docs::{self, TestIndex};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn the_projects_own_book_passes() {
    let tree = root();
    let packages = docs::packages_named(&tree, Path::new("docs"));
    assert!(packages.iter().any(|p| p == "testbench"), "the book names no host test of testbench: {packages:?}");
    let index = TestIndex::from_cargo(&tree, &packages, Duration::from_secs(1800)).unwrap_or_else(|e| panic!("{e}"));
    let findings = docs::check(&tree, Path::new("docs"), &index);
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(shown.is_empty(), "the book breaks its rules:\n{}", shown.join("\n"));
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/docs").join(name)
}

fn fake_index() -> TestIndex {
    TestIndex::from_lists([(
        "testbench-gates",
        ["a_good_book_passes", "docs::tests::heading_ids_follow_mdbook", "docs::tests::fenced_code_is_not_read"],
    )])
}

fn findings(name: &str, index: &TestIndex) -> Vec<String> {
    docs::check(&fixture(name), Path::new("docs"), index).iter().map(ToString::to_string).collect()
}

/// `(path, line, code)` of each finding, in the checker's order.
fn where_(name: &str, index: &TestIndex) -> Vec<(String, Option<usize>, String)> {
    docs::check(&fixture(name), Path::new("docs"), index)
        .into_iter()
        .map(|f| (f.path.display().to_string(), f.line, f.code))
        .collect()
}

fn at(path: &str, line: Option<usize>, code: &str) -> (String, Option<usize>, String) {
    (path.to_owned(), line, code.to_owned())
}

#[test]
fn a_good_book_passes() {
    assert_eq!(findings("good", &fake_index()), Vec::<String>::new());
}

#[test]
fn a_good_book_passes_with_the_index_cargo_lists() {
    let tree = fixture("good");
    let packages = docs::packages_named(&tree, Path::new("docs"));
    let index = TestIndex::from_cargo(&tree, &packages, Duration::from_secs(1800)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(docs::check(&tree, Path::new("docs"), &index), vec![]);
}

#[test]
fn listing_the_tests_past_its_deadline_fails_and_says_what_it_waited_for() {
    let tree = fixture("good");
    let packages = docs::packages_named(&tree, Path::new("docs"));
    let error =
        TestIndex::from_cargo(&tree, &packages, Duration::from_millis(1)).expect_err("cargo cannot build in 1 ms");
    let message = error.to_string();
    assert!(
        message.starts_with("cargo test --workspace --no-run to build the tests the book names: no end after"),
        "{message}"
    );
}

#[test]
fn c1_a_feature_without_a_status_line_a_second_one_or_a_malformed_one_fails() {
    assert_eq!(
        where_("c1", &fake_index()),
        vec![
            at("docs/a.md", Some(3), "C1"),
            at("docs/a.md", Some(11), "C1"),
            at("docs/b.md", Some(5), "C1"),
            at("docs/b.md", Some(9), "C1"),
            at("docs/b.md", Some(13), "C1"),
            at("docs/b.md", Some(17), "C1"),
            at("docs/c.md", Some(1), "C1"),
            at("docs/d.md", Some(7), "C1"),
        ]
    );
    let shown = findings("c1", &fake_index());
    assert!(shown.contains(&"docs/a.md:11: C1: a second status line in \"Two\" (the first is on line 9)".to_owned()));
    assert!(shown.contains(
        &"docs/b.md:9: C1: \"./test\" is not a test reference: write bench:<case> or host:<package>::<test>".to_owned()
    ));
}

#[test]
fn c2_a_case_or_host_test_that_does_not_exist_fails() {
    let index = TestIndex::from_lists([("fake", ["boots", "one::tests::dup", "two::tests::dup"])]);
    assert_eq!(
        findings("c2", &index),
        vec![
            "docs/refs.md:5: C2: bench:absent: no such case: tests/absent.toml does not exist",
            "docs/refs.md:9: C2: host:fake::nope: no test nope in fake's test binaries",
            "docs/refs.md:9: C2: host:fake::dup: dup names 2 tests (one::tests::dup, two::tests::dup); write the full path",
            "docs/refs.md:9: C2: host:fake::tests::boots: no test tests::boots in fake's test binaries",
            "docs/refs.md:9: C2: host:other::x: no package other in the test index (it holds: fake)",
        ]
    );
}

#[test]
fn c3_a_relative_link_to_no_file_or_no_heading_fails() {
    assert_eq!(
        where_("c3", &fake_index()),
        [6, 7, 8, 9, 10, 11, 15].into_iter().map(|line| at("docs/links.md", Some(line), "C3")).collect::<Vec<_>>()
    );
    let shown = findings("c3", &fake_index());
    assert_eq!(shown[0], "docs/links.md:6: C3: missing.md: no such file (docs/missing.md)");
    assert_eq!(shown[2], "docs/links.md:8: C3: #nowhere: no heading with the id \"nowhere\" in docs/links.md");
}

#[test]
fn c4_a_page_not_in_the_table_of_contents_or_an_entry_with_no_page_fails() {
    assert_eq!(
        where_("c4", &fake_index()),
        vec![
            at("docs/SUMMARY.md", Some(4), "C4"),
            at("docs/SUMMARY.md", Some(5), "C4"),
            at("docs/orphan.md", None, "C4"),
            at("docs/sub/orphan.md", None, "C4"),
        ]
    );
}

#[test]
fn c4_a_book_without_a_table_of_contents_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/page.md"), "# Page\n\nStatus: planned\n").unwrap();
    let shown: Vec<String> =
        docs::check(dir.path(), Path::new("docs"), &fake_index()).iter().map(ToString::to_string).collect();
    assert_eq!(shown, vec!["docs/SUMMARY.md: C4: no table of contents: docs/SUMMARY.md does not exist"]);
}

#[test]
fn c5_a_binary_file_under_docs_fails() {
    assert_eq!(
        findings("c5", &fake_index()),
        vec![
            "docs/empty.jpg: C5: a binary file (.jpg) under docs/",
            "docs/latin1.txt: C5: a binary file under docs/: not UTF-8 at offset 3",
            "docs/logo.png: C5: a binary file (.png) under docs/",
            "docs/nul.md: C5: a binary file under docs/: a NUL byte at offset 22",
        ]
    );
}

#[test]
fn the_book_names_the_packages_its_host_tests_are_in() {
    assert_eq!(docs::packages_named(&fixture("good"), Path::new("docs")), vec!["testbench-gates"]);
}
