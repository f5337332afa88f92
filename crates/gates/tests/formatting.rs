//! The formatting gate on its fixture trees (tests/fixtures/formatting/), on trees built
//! here (git and config errors), and on this repository. These run `cargo fmt`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use testbench_gates::{formatting, ConfigError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formatting").join(name)
}

/// The findings on a tree, as displayed (`path:line: code: message`).
fn shown(tree: &Path) -> Vec<String> {
    match formatting::check(tree, Path::new("formatting.toml")) {
        Ok(findings) => findings.iter().map(ToString::to_string).collect(),
        Err(error) => panic!("config refused: {error}"),
    }
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
    let dir = tree(&[("formatting.toml", config), ("Cargo.toml", WORKSPACE)]);
    match formatting::check(dir.path(), Path::new("formatting.toml")) {
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

const WORKSPACE: &str = "[workspace]\nresolver = \"2\"\n";

/// A package that is its own workspace, with its one formatted file.
const PACKAGE: [(&str, &str); 2] = [
    ("Cargo.toml", "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
    ("src/lib.rs", "pub fn f() {}\n"),
];

/// Every file under `dir` with its bytes, to see that the gate wrote nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                files.push((entry.path(), fs::read(entry.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn an_unformatted_file_fails_at_its_first_changed_line_in_each_workspace_and_nothing_is_written() {
    let before = snapshot(&fixture("unformatted"));
    assert_eq!(
        shown(&fixture("unformatted")),
        [
            "src/lib.rs:6: unformatted: not formatted as rustfmt would format it (first difference here); \
             run `cargo fmt --all --manifest-path Cargo.toml`",
            "tool/src/main.rs:1: unformatted: not formatted as rustfmt would format it (first difference here); \
             run `cargo fmt --all --manifest-path tool/Cargo.toml`",
        ]
    );
    assert_eq!(snapshot(&fixture("unformatted")), before, "the gate wrote into the tree it checked");
}

#[test]
fn a_formatted_workspace_passes_and_a_skipped_directory_is_not_checked() {
    assert_eq!(shown(&fixture("formatted")), Vec::<String>::new());
}

#[test]
fn an_unlisted_workspace_a_missing_root_a_stale_skip_and_a_skip_without_reason_each_fail() {
    assert_eq!(
        shown(&fixture("listing")),
        [
            "formatting.toml:4: missing-root: workspace[1] (noworkspace) has no Cargo.toml with a [workspace] \
             table that git tracks or has not ignored",
            "formatting.toml:7: missing-root: workspace[2] (gone) has no Cargo.toml with a [workspace] table \
             that git tracks or has not ignored",
            "formatting.toml:10: stale-skip: skip[0] (empty) holds no Cargo.toml with a [workspace] table: delete it",
            "formatting.toml:14: skip-without-reason: skip[1] (extra) gives no reason: say why its workspaces \
             are not formatted",
            "unlisted/Cargo.toml: unlisted-workspace: a [workspace] that formatting.toml neither checks nor skips: \
             add a [[workspace]] root = \"unlisted\", or a [[skip]] with its reason",
        ]
    );
}

#[test]
fn only_workspaces_git_tracks_or_has_not_ignored_are_reported() {
    let config = "[[workspace]]\nroot = \".\"\n";
    let dir = tree(&[
        ("formatting.toml", config),
        (".gitignore", "scratch/\ntarget/\n"),
        PACKAGE[0],
        PACKAGE[1],
        ("tracked/Cargo.toml", WORKSPACE),
        ("untracked/Cargo.toml", WORKSPACE),
        ("scratch/Cargo.toml", WORKSPACE),
        ("target/package/x/Cargo.toml", WORKSPACE),
    ]);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", ".gitignore", "Cargo.toml", "src/lib.rs", "tracked/Cargo.toml", "formatting.toml"]);
    git(dir.path(), &["commit", "-qm", "t"]);
    let codes: Vec<(String, String)> = formatting::check(dir.path(), Path::new("formatting.toml"))
        .unwrap()
        .into_iter()
        .map(|f| (f.path.display().to_string(), f.code))
        .collect();
    assert_eq!(
        codes,
        [
            ("tracked/Cargo.toml".to_string(), "unlisted-workspace".to_string()),
            ("untracked/Cargo.toml".to_string(), "unlisted-workspace".to_string()),
        ]
    );
}

#[test]
fn a_cargo_toml_that_is_not_toml_fails_unless_skipped() {
    let config = "[[workspace]]\nroot = \".\"\n[[skip]]\nroot = \"fixtures\"\nreason = \"input\"\n";
    let dir = tree(&[
        ("formatting.toml", config),
        PACKAGE[0],
        PACKAGE[1],
        ("broken/Cargo.toml", "[package\n"),
        ("fixtures/ws/Cargo.toml", WORKSPACE),
        ("fixtures/broken/Cargo.toml", "[package\n"),
    ]);
    let found = shown(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("broken/Cargo.toml:1: unparsable-manifest: not TOML (invalid table header; expected"),
        "{}",
        found[0]
    );
}

#[test]
fn a_workspace_cargo_refuses_fails_with_its_error() {
    let dir = tree(&[
        ("formatting.toml", "[[workspace]]\nroot = \".\"\n"),
        ("Cargo.toml", "[workspace]\nmembers = [\"nope\"]\n"),
    ]);
    let found = formatting::check(dir.path(), Path::new("formatting.toml")).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].path.to_str(), found[0].code.as_str()), (Some("Cargo.toml"), "fmt-failed"));
    let message = &found[0].message;
    assert!(message.starts_with("`cargo fmt --all --check --manifest-path Cargo.toml` failed ("), "{message}");
    assert!(message.contains("nope"), "{message}");
}

#[test]
fn an_unknown_field_is_refused_naming_the_file_and_line() {
    let error = refused("[[workspace]]\nroot = \".\"\n[[skip]]\nroot = \"x\"\nwhy = \"y\"\n");
    assert_eq!((error.file.as_str(), error.field.as_str()), ("formatting.toml", "line 5"));
    assert!(error.message.starts_with("unknown field `why`, expected `root` or `reason`"), "{}", error.message);
}

#[test]
fn a_file_with_no_workspace_is_refused() {
    assert_eq!(
        refused("[[skip]]\nroot = \"x\"\nreason = \"y\"\n").to_string(),
        "formatting.toml: workspace: none is not accepted: at least one [[workspace]] root = \"<dir>\" to format"
    );
}

#[test]
fn a_workspace_under_a_skip_is_refused() {
    let error = refused("[[workspace]]\nroot = \"a/b\"\n[[skip]]\nroot = \"a\"\nreason = \"y\"\n");
    assert_eq!(error.field, "skip[0].root");
    assert_eq!(error.message, "\"a\" holds workspace[0] (\"a/b\"): a directory is either checked or skipped, not both");
}

#[test]
fn a_root_leaving_the_tree_or_named_twice_is_refused() {
    let error = refused("[[workspace]]\nroot = \"../x\"\n");
    assert_eq!(error.field, "workspace[0].root");
    let error = refused("[[workspace]]\nroot = \".\"\n[[workspace]]\nroot = \"./\"\n");
    assert_eq!(
        error.to_string(),
        "formatting.toml: workspace[1].root: \".\" is named twice: one [[workspace]] per root"
    );
}

#[test]
fn a_deadline_of_zero_is_refused() {
    let error = refused("timeout_secs = 0\n[[workspace]]\nroot = \".\"\n");
    assert_eq!(
        error.to_string(),
        "formatting.toml: timeout_secs: 0 is not accepted: whole seconds from 1 to 86400 (default 300)"
    );
}

#[test]
fn the_projects_own_formatting_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let findings = formatting::check(&root, Path::new("formatting.toml")).unwrap();
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(shown.is_empty(), "formatting findings on the project:\n{}", shown.join("\n"));
}
