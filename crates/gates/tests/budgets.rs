//! The unsafe and size budgets: each rule fires on a bad tree and not on a good one. The
//! tree rules read fixtures under `tests/fixtures/budgets/`; the ratchet's rules read git
//! repositories built in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use testbench_gates::history::has_reason_line;
use testbench_gates::size_budget::{self, scan_lines};
use testbench_gates::{unsafe_budget, Finding};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/budgets").join(name)
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn codes(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.code.as_str()).collect()
}

fn with_code<'a>(findings: &'a [Finding], code: &str) -> Vec<&'a Finding> {
    findings.iter().filter(|f| f.code == code).collect()
}

fn unsafe_tree(name: &str) -> Vec<Finding> {
    unsafe_budget::check_tree(&fixture(name), Path::new("unsafe-budget.toml")).unwrap()
}

fn size_tree(name: &str) -> Vec<Finding> {
    size_budget::check_tree(&fixture(name), Path::new("size-budget.toml")).unwrap()
}

// ---------------------------------------------------------------------------------------
// The project itself

#[test]
fn the_projects_own_budgets_pass() {
    let root = repo_root();
    let u = unsafe_budget::check(&root, Path::new("unsafe-budget.toml")).unwrap();
    assert!(u.is_empty(), "{u:#?}");
    let s = size_budget::check(&root, Path::new("size-budget.toml")).unwrap();
    assert!(s.is_empty(), "{s:#?}");
}

#[test]
fn the_projects_budgets_are_at_exactly_the_current_counts() {
    let root = repo_root();
    let (counts, _) = unsafe_budget::counts(&root, Path::new("unsafe-budget.toml")).unwrap();
    for c in &counts {
        assert_eq!(c.unsafe_count() as u64, c.max_unsafe, "budget {}", c.name);
        assert_eq!(c.unjustified_count() as u64, c.max_unjustified, "budget {}", c.name);
    }
    for s in size_budget::sizes(&root, Path::new("size-budget.toml")).unwrap() {
        assert_eq!(s.lines as u64, s.ceiling, "crate {}", s.name);
    }
}

// ---------------------------------------------------------------------------------------
// The unsafe budget: counting and justification

#[test]
fn the_good_unsafe_tree_passes() {
    assert_eq!(unsafe_tree("unsafe_good"), Vec::<Finding>::new());
}

#[test]
fn every_kind_of_unsafe_is_counted_and_each_justification_form_is_read() {
    let (counts, parse) = unsafe_budget::counts(&fixture("unsafe_good"), Path::new("unsafe-budget.toml")).unwrap();
    assert!(parse.is_empty());
    let kernel = &counts[0];
    let kinds: Vec<(String, usize, String)> = kernel
        .sites
        .iter()
        .map(|s| (s.path.file_name().unwrap().to_string_lossy().into_owned(), s.line, s.kind.clone()))
        .collect();
    let expect = [
        ("cell.rs", 6, "unsafe impl"),
        ("cell.rs", 13, "unsafe fn `get`"),
        ("cell.rs", 15, "unsafe block"),
        ("cell.rs", 25, "unsafe in a macro's tokens"),
        ("lib.rs", 10, "unsafe fn `read`"),
        ("lib.rs", 12, "unsafe block"),
        ("lib.rs", 19, "unsafe block"),
        ("lib.rs", 20, "unsafe block"),
        ("lib.rs", 22, "unsafe block"),
        ("lib.rs", 30, "unsafe block"),
        ("lib.rs", 38, "unsafe in a macro's tokens"),
        ("lib.rs", 47, "unsafe extern block"),
        ("lib.rs", 52, "unsafe attribute"),
        ("lib.rs", 59, "unsafe trait `Pod`"),
        ("lib.rs", 62, "unsafe impl"),
        ("lib.rs", 68, "unsafe impl"),
    ];
    let expect: Vec<(String, usize, String)> =
        expect.iter().map(|(f, l, k)| (f.to_string(), *l, k.to_string())).collect();
    assert_eq!(kinds, expect);
    assert!(kernel.sites.iter().all(|s| s.justified), "{:#?}", kernel.sites);
}

#[test]
fn unsafe_in_comments_strings_and_fn_pointer_types_is_not_counted() {
    let src = "// unsafe { }\nconst S: &str = \"unsafe { }\";\ntype F = unsafe fn();\n";
    assert_eq!(unsafe_budget::count_source(Path::new("x.rs"), src).unwrap(), vec![]);
}

#[test]
fn a_safety_comment_after_a_blank_line_or_after_the_block_does_not_justify_it() {
    let src = "fn f() {\n    // SAFETY: too far.\n\n    unsafe { g() };\n    unsafe { g() }; // SAFETY: after.\n}\n";
    let sites = unsafe_budget::count_source(Path::new("x.rs"), src).unwrap();
    assert_eq!(sites.iter().map(|s| (s.line, s.justified)).collect::<Vec<_>>(), vec![(4, false), (5, false)]);
}

#[test]
fn a_safety_comment_justifies_only_the_block_right_below_it() {
    let src = "fn f() {\n    // SAFETY: the first.\n    unsafe { g() };\n    unsafe { h() };\n}\n";
    let sites = unsafe_budget::count_source(Path::new("x.rs"), src).unwrap();
    assert_eq!(sites.iter().map(|s| (s.line, s.justified)).collect::<Vec<_>>(), vec![(3, true), (4, false)]);
}

#[test]
fn over_either_limit_fails_naming_the_budget_the_count_and_the_limit() {
    let f = unsafe_tree("unsafe_bad");
    let over = with_code(&f, "over-unsafe");
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].path, Path::new("unsafe-budget.toml"));
    assert_eq!(over[0].message, "budget `kernel` holds 6 uses of unsafe, over its max_unsafe of 4");
    let over = with_code(&f, "over-unjustified");
    assert_eq!(
        over[0].message,
        "budget `kernel` holds 5 uses of unsafe without a justification, over its max_unjustified of 1"
    );
}

#[test]
fn each_unjustified_use_is_its_own_finding_with_its_line() {
    let f = unsafe_tree("unsafe_bad");
    let sites: Vec<String> = with_code(&f, "unjustified").iter().map(|f| f.to_string()).collect();
    assert_eq!(
        sites,
        [
            "kernel/src/lib.rs:9: unjustified: unsafe block without a `// SAFETY:` comment directly above it or its \
             statement (budget `kernel`)",
            "kernel/src/lib.rs:13: unjustified: unsafe block without a `// SAFETY:` comment directly above it or its \
             statement (budget `kernel`)",
            "kernel/src/lib.rs:18: unjustified: unsafe fn `read` without a `# Safety` section in its doc comment \
             (budget `kernel`)",
            "kernel/src/lib.rs:25: unjustified: unsafe in a macro's tokens without a `// SAFETY:` comment directly \
             above it (budget `kernel`)",
            "kernel/src/lib.rs:31: unjustified: unsafe impl without a `# Safety` section in its doc comment or a \
             `// SAFETY:` comment directly above it (budget `kernel`)",
        ]
    );
}

#[test]
fn unjustified_uses_within_the_limit_are_not_findings() {
    let dir = copy_fixture("unsafe_bad");
    let cfg = dir.path().join("unsafe-budget.toml");
    let text = fs::read_to_string(&cfg).unwrap().replace("max_unsafe = 4", "max_unsafe = 6");
    fs::write(&cfg, text.replace("max_unjustified = 1", "max_unjustified = 5")).unwrap();
    let f = unsafe_budget::check_tree(dir.path(), Path::new("unsafe-budget.toml")).unwrap();
    assert!(!codes(&f).iter().any(|c| c.contains("unjustified") || *c == "over-unsafe"), "{f:#?}");
}

#[test]
fn a_budget_path_without_rust_fails() {
    let f = unsafe_tree("unsafe_bad");
    let empty = with_code(&f, "empty-path");
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0].message, "budget `kernel`: path `kernel/asm` holds no Rust source");
}

#[test]
fn a_no_std_member_in_no_budget_fails_and_a_host_member_does_not() {
    let f = unsafe_tree("unsafe_bad");
    let un = with_code(&f, "uncovered");
    assert_eq!(un.len(), 1, "{un:#?}");
    assert_eq!(un[0].path, Path::new("drivers/uart"));
    assert_eq!(
        un[0].message,
        "the no_std workspace member `drivers/uart` has 1 Rust source in no budget (drivers/uart/src/lib.rs) and is \
         not [[uncounted]]"
    );
}

#[test]
fn an_uncounted_entry_naming_no_no_std_member_fails() {
    let f = unsafe_tree("unsafe_bad");
    let stale: Vec<&str> = with_code(&f, "stale-uncounted").iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        stale,
        [
            "[[uncounted]] names `progs`, a member whose crate root is not no_std (it needs no budget)",
            "[[uncounted]] names `drivers/gone`, which is no member of the workspace `.`",
        ]
    );
}

#[test]
fn a_file_that_does_not_parse_fails() {
    let f = unsafe_tree("unsafe_bad");
    let p = with_code(&f, "parse");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].path, Path::new("kernel/src/broken.rs"));
    assert!(p[0].message.starts_with("does not parse as Rust"), "{}", p[0].message);
}

#[test]
fn the_bad_unsafe_tree_fires_every_rule_and_nothing_else() {
    let mut c = codes(&unsafe_tree("unsafe_bad")).into_iter().map(str::to_string).collect::<Vec<_>>();
    c.sort();
    c.dedup();
    assert_eq!(
        c,
        ["empty-path", "over-unjustified", "over-unsafe", "parse", "stale-uncounted", "uncovered", "unjustified"]
    );
}

#[test]
fn an_unsafe_config_with_an_unknown_field_is_refused_naming_the_field() {
    let e = unsafe_budget::parse_config(
        "u.toml",
        "workspace = \".\"\n[[budget]]\nname = \"k\"\npaths = [\"k\"]\nmax_unsafe = 1\nmax_unjustified = 0\nmax_unsafes \
         = 3\n",
    )
    .unwrap_err();
    assert_eq!(e.file, "u.toml");
    assert_eq!(e.field, "max_unsafes");
    assert!(e.message.contains("expected one of"), "{}", e.message);
}

#[test]
fn an_unsafe_config_with_impossible_values_is_refused_saying_what_is_accepted() {
    let base = "workspace = \".\"\n[[budget]]\nname = \"k\"\n";
    let e =
        unsafe_budget::parse_config("u.toml", &format!("{base}paths = [\"k\"]\nmax_unsafe = 1\nmax_unjustified = 2\n"))
            .unwrap_err();
    assert_eq!(e.field, "budget[0].max_unjustified");
    assert_eq!(e.message, "2 is more than max_unsafe (1); expected at most max_unsafe");
    let e = unsafe_budget::parse_config(
        "u.toml",
        &format!("{base}paths = [\"../k\"]\nmax_unsafe = 1\nmax_unjustified = 0\n"),
    )
    .unwrap_err();
    assert_eq!(e.field, "budget[0].paths[0]");
    assert!(e.message.contains("expected a path relative to the tree"), "{}", e.message);
    let e = unsafe_budget::parse_config("u.toml", "[[uncounted]]\nmember = \"p\"\nreason = \"r\"\n").unwrap_err();
    assert_eq!(e.field, "workspace");
    assert!(e.message.contains("missing field `workspace`"), "{}", e.message);
}

#[test]
fn a_workspace_that_is_not_one_is_a_config_error() {
    let dir = copy_fixture("unsafe_good");
    fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    let e = unsafe_budget::check_tree(dir.path(), Path::new("unsafe-budget.toml")).unwrap_err();
    assert_eq!(e.field, "workspace");
    assert!(e.message.contains("has no [workspace] table"), "{}", e.message);
}

#[test]
fn an_absolute_config_path_is_accepted_and_findings_stay_relative_to_the_tree() {
    let tree = fixture("unsafe_bad");
    let f = unsafe_budget::check_tree(&tree, &tree.join("unsafe-budget.toml")).unwrap();
    assert_eq!(f, unsafe_tree("unsafe_bad"));
}

// ---------------------------------------------------------------------------------------
// The size budget: counting and module resolution

#[test]
fn the_good_size_tree_passes() {
    assert_eq!(size_tree("size_good"), Vec::<Finding>::new());
}

#[test]
fn lines_of_code_leave_out_comments_blanks_and_test_only_code() {
    let count = size_budget::count_crate(&fixture("size_good"), &[PathBuf::from("kernel/src")]);
    let files: Vec<(String, Option<usize>)> =
        count.files.iter().map(|(p, n)| (p.strip_prefix("kernel/src").unwrap().display().to_string(), *n)).collect();
    let expect = [
        ("a/b.rs", Some(1)),
        ("a.rs", Some(2)),
        ("arch/csr.rs", Some(1)),
        ("arch/riscv.rs", Some(1)),
        ("clock.rs", Some(1)),
        ("clock_test.rs", None),
        ("lib.rs", Some(21)),
        ("net/mod.rs", Some(1)),
        ("net/tcp.rs", Some(2)),
        ("outer/inner.rs", Some(1)),
        ("tests/helpers.rs", None),
        ("tests.rs", None),
        ("unit/fixtures.rs", None),
    ];
    let expect: Vec<(String, Option<usize>)> = expect.iter().map(|(p, n)| (p.to_string(), *n)).collect();
    assert_eq!(files, expect);
    assert_eq!(count.lines, 31);
    assert!(count.findings.is_empty(), "{:#?}", count.findings);
}

#[test]
fn a_crate_over_its_ceiling_fails_naming_it_its_lines_and_its_ceiling() {
    let f = size_tree("size_bad");
    let over = with_code(&f, "over-ceiling");
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].path, Path::new("size-budget.toml"));
    assert_eq!(over[0].message, "crate `over` has 3 lines of code, over its ceiling of 2");
}

#[test]
fn a_size_path_without_rust_fails() {
    let f = size_tree("size_bad");
    let m: Vec<&str> = with_code(&f, "empty-path").iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        m,
        ["crate `empty`: path `empty/asm` holds no Rust source", "crate `empty`: path `empty/missing` does not exist"]
    );
}

#[test]
fn include_raw_identifiers_macro_modules_and_missing_files_are_unfollowable() {
    let f = size_tree("size_bad");
    let m: Vec<String> = with_code(&f, "unfollowable").iter().map(|f| f.to_string()).collect();
    assert_eq!(
        m,
        [
            "inc/src/lib.rs:1: unfollowable: `include_str!` brings in a file the gate cannot count or follow",
            "inc/src/lib.rs:3: unfollowable: `include!` brings in a file the gate cannot count or follow",
            "raw/src/lib.rs:1: unfollowable: `mod r#async`: a module named by a raw identifier",
            "raw/src/lib.rs:5: unfollowable: `mod` inside a macro: a module the gate cannot follow",
            "raw/src/lib.rs:9: unfollowable: `mod gone;` has no file (`raw/src/gone.rs` or `raw/src/gone/mod.rs`)",
        ]
    );
}

#[test]
fn a_module_file_outside_the_crates_paths_fails_unless_only_tests_reach_it() {
    let f = size_tree("size_bad");
    let o = with_code(&f, "outside-paths");
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].path, Path::new("shared/util.rs"));
    assert_eq!(o[0].message, "a module file of the crate is under none of its paths in the size budget");
}

#[test]
fn a_file_that_does_not_parse_fails_the_size_budget() {
    let f = size_tree("size_bad");
    let p = with_code(&f, "parse");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].path, Path::new("broken/src/lib.rs"));
}

#[test]
fn a_size_config_with_an_unknown_field_or_a_twice_listed_crate_is_refused() {
    let e =
        size_budget::parse_config("s.toml", "[[crate]]\nname = \"k\"\npaths = [\"k\"]\nceilling = 3\n").unwrap_err();
    assert_eq!((e.file.as_str(), e.field.as_str()), ("s.toml", "ceilling"));
    let one = "[[crate]]\nname = \"k\"\npaths = [\"k\"]\nceiling = 3\n";
    let e = size_budget::parse_config("s.toml", &format!("{one}{one}")).unwrap_err();
    assert_eq!(e.field, "crate[1].name");
    assert_eq!(e.message, "`k` is listed twice; expected each crate once");
    let e = size_budget::check_tree(&fixture("size_good"), Path::new("missing.toml")).unwrap_err();
    assert_eq!((e.file.as_str(), e.field.as_str()), ("missing.toml", "(file)"));
}

#[test]
fn the_line_scanner_tells_code_from_comments_strings_and_lifetimes() {
    let src = "fn f<'a>(x: &'a str) {} // c\n/* a\n b */ let c = '/';\nlet s = \"/* no\";\n/// doc\n\n";
    let code: Vec<bool> = scan_lines(src).iter().map(|l| l.code).collect();
    assert_eq!(code, [true, false, true, true, false, false, false]);
}

// ---------------------------------------------------------------------------------------
// The ratchet, on git repositories built here

/// A git repository in a temporary directory, on `main`, with a crate `k` and a size
/// budget for it.
struct Repo {
    dir: tempfile::TempDir,
}

fn size_toml(crates: &[(&str, &[&str], u64)]) -> String {
    let mut s = String::from("# a size budget\n");
    for (name, paths, ceiling) in crates {
        let paths: Vec<String> = paths.iter().map(|p| format!("\"{p}\"")).collect();
        s.push_str(&format!("\n[[crate]]\nname = \"{name}\"\npaths = [{}]\nceiling = {ceiling}\n", paths.join(", ")));
    }
    s
}

fn unsafe_toml(max_unsafe: u64, max_unjustified: u64) -> String {
    format!(
        "workspace = \".\"\n[[budget]]\nname = \"k\"\npaths = [\"k/src\"]\nmax_unsafe = \
         {max_unsafe}\nmax_unjustified = {max_unjustified}\n"
    )
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Repo {
    fn new() -> Repo {
        Repo::start(true)
    }

    /// A repository on `main` whose first commit has a size budget or none.
    fn start(with_size_budget: bool) -> Repo {
        let r = Repo { dir: tempfile::tempdir().unwrap() };
        r.git(&["init", "-q", "-b", "main"]);
        r.write("Cargo.toml", "[workspace]\nmembers = [\"k\"]\n");
        r.write("k/Cargo.toml", "[package]\nname = \"k\"\nversion = \"0.1.0\"\n");
        r.write("k/src/lib.rs", "#![no_std]\npub fn f() {}\n");
        if with_size_budget {
            r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 10)]));
        }
        r.write("unsafe-budget.toml", &unsafe_toml(4, 0));
        r.commit("Start");
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(self.path(), args)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    fn size_history(&self) -> Vec<Finding> {
        size_budget::check_history(self.path(), Path::new("size-budget.toml")).unwrap()
    }

    fn unsafe_history(&self) -> Vec<Finding> {
        unsafe_budget::check_history(self.path(), Path::new("unsafe-budget.toml")).unwrap()
    }
}

#[test]
fn a_raise_without_a_reason_line_fails() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k\n\nSize budget: other: a line for another crate does not count");
    let f = r.size_history();
    assert_eq!(codes(&f), ["raise-without-reason"]);
    assert!(
        f[0].message.ends_with(
            "(Grow k) raises the ceiling of `k` from 10 to 12 without a line `Size budget: k: <reason>` in its message"
        ),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].path, Path::new("size-budget.toml"));
}

#[test]
fn a_raise_with_its_reason_line_passes() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k\n\nSize budget: k: the UART driver moved in");
    assert_eq!(r.size_history(), vec![]);
}

#[test]
fn a_reason_line_with_an_empty_reason_does_not_count() {
    assert!(!has_reason_line("x\nSize budget: k:   \n", "Size budget", "k"));
    assert!(has_reason_line("x\n  Size budget: k: why\n", "Size budget", "k"));
    assert!(!has_reason_line("Size budget: kk: why\n", "Size budget", "k"));
}

#[test]
fn a_lowered_ceiling_and_a_new_crate_need_no_reason() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 8), ("n", &["k/src"], 100)]));
    r.commit("Shrink k, budget n");
    assert_eq!(r.size_history(), vec![]);
}

#[test]
fn dropping_a_crate_or_narrowing_its_paths_needs_a_reason() {
    let r = Repo::new();
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src", "k/more"], 10), ("j", &["j"], 5)]));
    r.commit("Two crates");
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 10)]));
    r.commit("Narrow k, drop j\n\nSize budget: k: k/more moved out of the TCB");
    let f = r.size_history();
    assert_eq!(codes(&f), ["raise-without-reason"]);
    assert!(f[0].message.contains("drops the crate `j` without a line `Size budget: j: <reason>`"), "{}", f[0].message);
}

#[test]
fn deleting_the_budget_file_fails_even_when_it_comes_back() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.git(&["rm", "-q", "size-budget.toml"]);
    r.commit("Delete the budget");
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 50)]));
    r.commit("Bring it back, raised");
    let f = r.size_history();
    assert_eq!(codes(&f), ["deleted-config", "raise-without-reason"]);
    assert!(f[0].message.ends_with("(Delete the budget) deletes size-budget.toml; a budget file is never deleted"));
    assert!(f[1].message.contains("raises the ceiling of `k` from 10 to 50"), "{}", f[1].message);
}

#[test]
fn a_file_new_on_the_branch_needs_a_line_for_every_entry() {
    let r = Repo::start(false);
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 10), ("j", &["k/src"], 10)]));
    r.commit("Budget k and j\n\nSize budget: k: starts at its size");
    let f = r.size_history();
    assert_eq!(codes(&f), ["raise-without-reason"]);
    assert!(f[0].message.contains("adds `j` (ceiling 10) with no earlier version of the file"), "{}", f[0].message);
}

#[test]
fn a_merge_may_bring_in_its_reason_line() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k\n\nSize budget: k: the driver");
    r.git(&["checkout", "-q", "feature"]);
    r.write("k/src/other.rs", "pub fn g() {}\n");
    r.commit("Something else");
    r.git(&["merge", "-q", "--no-ff", "side", "-m", "Merge side"]);
    assert_eq!(r.size_history(), vec![]);
}

#[test]
fn a_merge_whose_commits_lack_the_reason_line_fails() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.git(&["checkout", "-q", "-b", "side"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k");
    r.git(&["checkout", "-q", "feature"]);
    r.write("k/src/other.rs", "pub fn g() {}\n");
    r.commit("Something else");
    r.git(&["merge", "-q", "--no-ff", "side", "-m", "Merge side"]);
    let f = r.size_history();
    assert_eq!(codes(&f), ["raise-without-reason"]);
    assert!(
        f[0].message.contains("(Merge side) raises the ceiling of `k` from 10 to 12")
            && f[0].message.ends_with("in its message or in a commit it merges"),
        "{}",
        f[0].message
    );
}

#[test]
fn an_uncommitted_raise_fails() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 11)]));
    let f = r.size_history();
    assert_eq!(codes(&f), ["uncommitted-raise"]);
    assert_eq!(
        f[0].message,
        "an uncommitted change raises the ceiling of `k` from 10 to 11; commit it with a line `Size budget: k: <reason>`"
    );
}

#[test]
fn on_the_main_branch_only_an_uncommitted_raise_is_judged() {
    let r = Repo::new();
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 20)]));
    r.commit("Raise on main without a line");
    assert_eq!(r.size_history(), vec![]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 21)]));
    assert_eq!(codes(&r.size_history()), ["uncommitted-raise"]);
}

#[test]
fn uncommitted_changes_do_not_stop_the_committed_ones_being_judged() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k");
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 5)]));
    assert_eq!(codes(&r.size_history()), ["raise-without-reason"]);
}

#[test]
fn a_shallow_clone_without_the_merge_base_fails() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 12)]));
    r.commit("Grow k");
    r.commit("Another");
    r.git(&["checkout", "-q", "main"]);
    r.commit("Main moves on");
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", r.path().display());
    git_in(clone.path(), &["clone", "-q", "--depth", "1", "--no-single-branch", "--branch", "feature", &url, "c"]);
    let c = clone.path().join("c");
    let f = size_budget::check_history(&c, Path::new("size-budget.toml")).unwrap();
    assert_eq!(codes(&f), ["no-merge-base"]);
    assert!(f[0].message.starts_with("HEAD has no merge-base with refs/remotes/origin/HEAD"), "{}", f[0].message);
}

#[test]
fn a_clone_of_one_branch_with_no_main_fails() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.commit("On feature");
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", r.path().display());
    git_in(clone.path(), &["clone", "-q", "--depth", "1", "--branch", "feature", &url, "c"]);
    let c = clone.path().join("c");
    // A clone of one branch has no `main`; whether it has `origin/HEAD` depends on the
    // remote, so make sure it has none.
    let _ = Command::new("git").args(["remote", "set-head", "origin", "-d"]).current_dir(&c).output();
    let f = size_budget::check_history(&c, Path::new("size-budget.toml")).unwrap();
    assert_eq!(codes(&f), ["no-merge-base"]);
    assert!(f[0].message.starts_with("neither `main` nor `origin/HEAD` exists"), "{}", f[0].message);
}

#[test]
fn an_unsafe_budget_raise_needs_its_own_line() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("unsafe-budget.toml", &unsafe_toml(4, 1));
    r.commit("Allow one\n\nSize budget: k: the wrong budget's line");
    let f = r.unsafe_history();
    assert_eq!(codes(&f), ["raise-without-reason"]);
    assert!(
        f[0].message.contains("raises max_unjustified of `k` from 0 to 1 without a line `Unsafe budget: k: <reason>`"),
        "{}",
        f[0].message
    );
    r.write("unsafe-budget.toml", &unsafe_toml(5, 1));
    r.commit("More\n\nUnsafe budget: k: the new trap handler");
    assert_eq!(codes(&r.unsafe_history()), ["raise-without-reason"], "the first commit is still judged");
    r.write("unsafe-budget.toml", &unsafe_toml(6, 1));
    assert_eq!(codes(&r.unsafe_history()), ["uncommitted-raise", "raise-without-reason"]);
}

#[test]
fn check_runs_the_tree_rules_and_the_history_together() {
    let r = Repo::new();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("size-budget.toml", &size_toml(&[("k", &["k/src"], 1)]));
    r.commit("Tighten");
    let f = size_budget::check(r.path(), Path::new("size-budget.toml")).unwrap();
    assert_eq!(codes(&f), ["over-ceiling"]);
    assert_eq!(unsafe_budget::check(r.path(), Path::new("unsafe-budget.toml")).unwrap(), vec![]);
}

#[test]
fn a_budget_file_outside_the_tree_cannot_pass_the_ratchet_unchecked() {
    let r = Repo::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let cfg = elsewhere.path().join("size-budget.toml");
    fs::write(&cfg, size_toml(&[("k", &["k/src"], 10)])).unwrap();
    let f = size_budget::check_history(r.path(), &cfg).unwrap();
    assert_eq!(codes(&f), ["outside-tree"]);
}

/// A copy of a fixture tree, to change.
fn copy_fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(name), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), target).unwrap();
        }
    }
}
