//! The no-cruft gate on its fixture trees (tests/fixtures/nocruft/), on trees built here
//! (git and config errors), and on this repository.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use testbench_gates::{nocruft, ConfigError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nocruft").join(name)
}

/// The findings on a tree, as displayed (`path:line: code: message`).
fn shown(tree: &Path) -> Vec<String> {
    match nocruft::check(tree, Path::new("no-cruft.toml")) {
        Ok(findings) => findings.iter().map(ToString::to_string).collect(),
        Err(error) => panic!("config refused: {error}"),
    }
}

fn codes(tree: &Path) -> Vec<String> {
    nocruft::check(tree, Path::new("no-cruft.toml")).unwrap().into_iter().map(|f| f.code).collect()
}

/// A tree of `files` (path, text) in a fresh temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

fn refused(config: &str) -> ConfigError {
    let dir = tree(&[("no-cruft.toml", config), ("src/lib.rs", "")]);
    match nocruft::check(dir.path(), Path::new("no-cruft.toml")) {
        Ok(findings) => panic!("accepted, with findings {findings:?}"),
        Err(error) => error,
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

const DEAD: &str = "is not accepted here: code under dead_code.paths that nothing uses is deleted, not allowed";

#[test]
fn a_forbidden_pattern_fires_on_every_line_that_names_it_comments_and_docs_included() {
    let found = shown(&fixture("forbid-bad"));
    let forbidden: Vec<&String> = found.iter().filter(|f| f.contains(": forbidden: ")).collect();
    assert_eq!(
        forbidden,
        [
            "docs/notes.md:1: forbidden: `\\bboot_legacy\\b` is forbidden here: dropped in favour of boot_image",
            "src/lib.rs:2: forbidden: `\\bboot_legacy\\b` is forbidden here: dropped in favour of boot_image",
            "src/rt/mod.rs:1: forbidden: `raw_syscall` is forbidden here: the runtime hands out typed calls only",
        ]
    );
}

#[test]
fn a_within_that_is_missing_or_outside_the_searched_paths_fails() {
    let found = shown(&fixture("forbid-bad"));
    let missing: Vec<&String> = found.iter().filter(|f| f.contains(": missing-within: ")).collect();
    assert_eq!(
        missing,
        [
            "no-cruft.toml:15: missing-within: forbid[2].within[0] = \"src/gone\" does not exist",
            "no-cruft.toml:20: missing-within: forbid[3].within[0] = \"elsewhere\" holds no searched file: \
             it is outside `paths`, excluded, or ignored by git",
        ]
    );
}

#[test]
fn a_forbidden_pattern_passes_where_it_is_not_named_or_outside_its_within() {
    assert_eq!(shown(&fixture("forbid-good")), Vec::<String>::new());
}

#[test]
fn dead_code_allows_fire_direct_inner_through_cfg_attr_as_expect_and_in_macro_bodies() {
    assert_eq!(
        shown(&fixture("dead-code-bad")),
        [
            format!("guest/src/lib.rs:1: dead-code-allow: `#![allow(unused_imports)]` {DEAD}"),
            format!("guest/src/lib.rs:3: dead-code-allow: `#[allow(dead_code)]` {DEAD}"),
            format!("guest/src/lib.rs:6: dead-code-allow: `#[cfg_attr(.., allow(dead_code))]` {DEAD}"),
            format!("guest/src/lib.rs:12: dead-code-allow: `#[expect(unused)]` {DEAD}"),
            format!("guest/src/lib.rs:18: dead-code-allow: `#[allow(unused_variables)]` {DEAD}"),
        ]
    );
}

#[test]
fn dead_code_allow_text_in_comments_strings_or_outside_the_dead_code_paths_passes() {
    assert_eq!(shown(&fixture("dead-code-good")), Vec::<String>::new());
}

#[test]
fn an_allow_entry_exempts_every_finding_it_covers() {
    assert_eq!(shown(&fixture("dead-code-allowed")), Vec::<String>::new());
}

#[test]
fn a_feature_nothing_reads_fails_and_so_does_a_chain_that_ends_in_nothing() {
    let found = shown(&fixture("features-bad"));
    let unread = |line: usize, name: &str, tail: &str| {
        format!(
            "guest/kernel/Cargo.toml:{line}: unread-feature: feature `{name}` of package `kernel` is read by no \
             `feature = \"{name}\"` in the package's sources {tail}"
        )
    };
    assert_eq!(
        found,
        [
            unread(8, "verbose", "and enables nothing"),
            unread(10, "trace", "and what it enables (trace-inner) has no effect either"),
            unread(11, "trace-inner", "and enables nothing"),
            unread(13, "nested-only", "and enables nothing"),
        ]
    );
}

#[test]
fn features_read_by_cfg_cfg_attr_cfg_macro_macro_bodies_build_scripts_or_enabling_dependencies_pass() {
    assert_eq!(shown(&fixture("features-good")), Vec::<String>::new());
}

#[test]
fn a_second_literal_definition_of_a_constant_fails_at_each_extra_one() {
    assert_eq!(
        shown(&fixture("constant-bad")),
        [
            "b/src/lib.rs:1: second-definition: `PAGE_SIZE` is defined with a literal value again; \
             its definition is at a/src/lib.rs:1: use that one",
            "c/src/lib.rs:4: second-definition: `PAGE_SIZE` is defined with a literal value again; \
             its definition is at a/src/lib.rs:1: use that one",
        ]
    );
}

#[test]
fn one_literal_definition_with_uses_an_allowed_oracle_and_an_undefined_constant_pass() {
    assert_eq!(shown(&fixture("constant-good")), Vec::<String>::new());
}

#[test]
fn an_allow_that_covers_nothing_fails_as_stale() {
    assert_eq!(
        shown(&fixture("stale-allow")),
        [
            "no-cruft.toml:13: stale-allow: allow[0] (src/lib.rs, forbid:old_name) covers nothing: delete it",
            "no-cruft.toml:18: stale-allow: allow[1] (src, dead-code) covers nothing: delete it",
            "no-cruft.toml:23: stale-allow: allow[2] (src/lib.rs, constant:PAGE_SIZE) covers nothing: delete it",
        ]
    );
}

#[test]
fn a_search_path_or_exclude_that_names_nothing_fails() {
    let dir =
        tree(&[("no-cruft.toml", "paths = [\"src\", \"gone\"]\nexclude = [\"src/nothing\"]\n"), ("src/lib.rs", "")]);
    assert_eq!(
        shown(dir.path()),
        [
            "no-cruft.toml:1: missing-path: paths[1] = \"gone\" names no file git tracks or has not ignored",
            "no-cruft.toml:2: missing-path: exclude[0] = \"src/nothing\" names no file git tracks or has not ignored",
        ]
    );
}

#[test]
fn a_rule_scoped_where_nothing_is_searched_fails() {
    let config = "paths = [\"src\"]\nexclude = [\"src/fixtures\"]\n[dead_code]\npaths = [\"src/fixtures\"]\n\
                  [features]\npaths = [\"guest\"]\n";
    let dir =
        tree(&[("no-cruft.toml", config), ("src/lib.rs", ""), ("src/fixtures/a.rs", ""), ("guest/Cargo.toml", "")]);
    assert_eq!(
        shown(dir.path()),
        [
            "no-cruft.toml:4: missing-within: dead_code.paths[0] = \"src/fixtures\" holds no searched file: \
             it is outside `paths`, excluded, or ignored by git",
            "no-cruft.toml:6: missing-within: features.paths[0] = \"guest\" holds no searched file: \
             it is outside `paths`, excluded, or ignored by git",
        ]
    );
}

#[test]
fn a_rust_file_syn_cannot_read_fails_where_a_rust_rule_applies() {
    let dir = tree(&[
        ("no-cruft.toml", "paths = [\"src\", \"other\"]\n[dead_code]\npaths = [\"src\"]\n"),
        ("src/lib.rs", "fn broken( {\n"),
        ("other/lib.rs", "fn broken( {\n"),
    ]);
    assert_eq!(codes(dir.path()), ["unparsable"]);
    assert!(shown(dir.path())[0].starts_with("src/lib.rs:1: unparsable: syn cannot read this file"));
}

#[test]
fn only_files_git_tracks_or_has_not_ignored_are_searched() {
    let config = "paths = [\".\"]\n[[forbid]]\npattern = 'old_name'\nreason = \"renamed\"\n";
    let dir = tree(&[
        ("no-cruft.toml", config),
        (".gitignore", "scratch/\n"),
        ("tracked.rs", "old_name();\n"),
        ("untracked.rs", "fn f() { old_name() }\n"),
        ("scratch/ignored.rs", "old_name();\n"),
    ]);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", ".gitignore", "tracked.rs", "no-cruft.toml"]);
    git(dir.path(), &["commit", "-qm", "t"]);
    assert_eq!(
        shown(dir.path()),
        [
            "tracked.rs:1: forbidden: `old_name` is forbidden here: renamed",
            "untracked.rs:1: forbidden: `old_name` is forbidden here: renamed",
        ]
    );
    // A tree in an ignored directory of a work tree is walked whole.
    let ignored = nocruft::check(&dir.path().join("scratch"), &dir.path().join("no-cruft.toml")).unwrap();
    let ignored: Vec<String> = ignored.iter().map(ToString::to_string).collect();
    assert_eq!(ignored, ["ignored.rs:1: forbidden: `old_name` is forbidden here: renamed"]);
}

#[test]
fn a_tree_outside_git_is_walked_whole_but_for_target_and_dot_git() {
    let config = "paths = [\".\"]\n[[forbid]]\npattern = 'old_name'\nreason = \"renamed\"\n";
    let dir = tree(&[
        ("no-cruft.toml", config),
        ("src/a.rs", "old_name();\n"),
        ("target/debug/b.rs", "old_name();\n"),
        ("crate/target/c.rs", "old_name();\n"),
        (".git/d", "old_name\n"),
    ]);
    assert_eq!(shown(dir.path()), ["src/a.rs:1: forbidden: `old_name` is forbidden here: renamed"]);
}

#[test]
fn the_configuration_file_is_never_searched_and_may_be_given_absolute() {
    let config = "paths = [\".\"]\n[[forbid]]\npattern = 'old_name'\nreason = \"renamed\"\n";
    let dir = tree(&[("gates/no-cruft.toml", config), ("src/a.rs", "new_name();\n")]);
    let absolute = dir.path().join("gates/no-cruft.toml");
    assert_eq!(nocruft::check(dir.path(), &absolute).unwrap(), []);
    assert_eq!(nocruft::check(dir.path(), Path::new("gates/no-cruft.toml")).unwrap(), []);
}

#[test]
fn an_unknown_field_is_refused_naming_the_file_and_line() {
    let error = refused("paths = [\"src\"]\n[dead_code]\npath = [\"src\"]\n");
    assert_eq!(error.file, "no-cruft.toml");
    assert_eq!(error.field, "line 3");
    assert!(error.message.starts_with("unknown field `path`, expected `paths`"), "{}", error.message);
}

#[test]
fn an_empty_search_list_is_refused() {
    let error = refused("paths = []\n");
    assert_eq!(error.to_string(), "no-cruft.toml: paths: empty is not accepted: a list of at least one path to search");
}

#[test]
fn a_path_leaving_the_tree_is_refused() {
    let error = refused("paths = [\"src\", \"../elsewhere\"]\n");
    assert_eq!(error.field, "paths[1]");
    assert_eq!(
        error.message,
        "\"../elsewhere\" is not accepted: a relative path inside the tree, '/'-separated, without '..' \
         ('.' is the whole tree)"
    );
}

#[test]
fn an_invalid_regex_is_refused_naming_the_field() {
    let error = refused("paths = [\"src\"]\n[[forbid]]\npattern = 'a('\nreason = \"x\"\n");
    assert_eq!(error.field, "forbid[0].pattern");
    assert!(error.message.starts_with("not a valid regex: "), "{}", error.message);
}

#[test]
fn a_forbid_or_an_allow_without_a_reason_is_refused() {
    let error = refused("paths = [\"src\"]\n[[forbid]]\npattern = 'a'\nreason = \" \"\n");
    assert_eq!(error.field, "forbid[0].reason");
    let error = refused("paths = [\"src\"]\n[dead_code]\npaths = [\"src\"]\n[[allow]]\npath = \"src\"\nrule = \"dead-code\"\nreason = \"\"\n");
    assert_eq!(error.to_string(), "no-cruft.toml: allow[0].reason: empty is not accepted: why this exemption stays");
}

#[test]
fn an_allow_naming_no_rule_of_the_file_is_refused_with_the_rules_it_has() {
    let config = "paths = [\"src\"]\n[[forbid]]\npattern = 'old'\nreason = \"r\"\n[[constant]]\nname = \"PAGE_SIZE\"\n\
                  [[allow]]\npath = \"src\"\nrule = \"dead-code\"\nreason = \"r\"\n";
    let error = refused(config);
    assert_eq!(error.field, "allow[0].rule");
    assert_eq!(
        error.message,
        "\"dead-code\" is not accepted: one of this file's rules (forbid:old, constant:PAGE_SIZE)"
    );
}

#[test]
fn a_constant_that_is_no_identifier_or_named_twice_is_refused() {
    let error = refused("paths = [\"src\"]\n[[constant]]\nname = \"PAGE SIZE\"\n");
    assert_eq!(error.to_string(), "no-cruft.toml: constant[0].name: \"PAGE SIZE\" is not accepted: a Rust identifier");
    let error = refused("paths = [\"src\"]\n[[constant]]\nname = \"A\"\n[[constant]]\nname = \"A\"\n");
    assert_eq!(error.field, "constant[1].name");
}

#[test]
fn a_missing_configuration_file_is_refused() {
    let dir = tree(&[("src/lib.rs", "")]);
    let error = nocruft::check(dir.path(), Path::new("no-cruft.toml")).unwrap_err();
    assert_eq!((error.file.as_str(), error.field.as_str()), ("no-cruft.toml", "(file)"));
    assert!(error.message.starts_with("cannot be read ("), "{}", error.message);
}

#[test]
fn the_projects_own_no_cruft_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let findings = nocruft::check(&root, Path::new("no-cruft.toml")).unwrap();
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(shown.is_empty(), "no-cruft findings on the project:\n{}", shown.join("\n"));
}
