//! `testbench bisect` through the real binary, on a git repository each test makes: a
//! tiny "kernel" (a text file the build copies; scripts/fake-qemu-console, behind a
//! wrapper, prints the booted file as the console) over 40 commits, with regressions
//! injected at chosen commits. Each bisection must name the commit that was injected,
//! within ceil(log2 N) + 2 boot steps, and its check must reject a culprit that is not
//! the whole cause.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

fn explain(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", explain(&output));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The commits of the synthetic repository: 0 the first (good), 40 the last.
const COMMITS: usize = 40;
/// The deterministic regression: `kernel` panics from here on.
const CULPRIT: usize = 23;
/// The build fails for these, around the culprit (the commit before it builds: a
/// culprit whose parent never builds can only be told as a range).
const BROKEN: [usize; 5] = [20, 21, 24, 25, 26];
/// The regression on the host's clock: `flaky` panics in one boot of three from here on.
const FLAKY: usize = 31;
/// `twice` panics from here on, and again, independently, from `TWICE_AGAIN`: reverting
/// the first does not cure the bad end.
const TWICE: usize = 12;
const TWICE_AGAIN: usize = 16;

/// The repository (its commits' ids, oldest first) and the tools beside it.
struct Fixture {
    dir: tempfile::TempDir,
    repo: PathBuf,
    commits: Vec<String>,
    qemu: PathBuf,
    cases: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("kernel");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    let twice_base = ["one", "two", "three", "four", "five"];
    let mut commits = Vec::new();
    for i in 0..=COMMITS {
        let mut kernel = String::from("booting\n");
        if i >= CULPRIT {
            kernel.push_str("panic: bad block in bget\n");
        }
        let flaky = if i >= FLAKY { "booting\nFLAKY\n" } else { "booting\n" };
        let mut twice: Vec<&str> = twice_base.to_vec();
        if i >= TWICE_AGAIN {
            twice.push("panic: twice over");
        }
        if i >= TWICE {
            twice.insert(1, "panic: twice over");
        }
        let build = if BROKEN.contains(&i) { "echo 'syntax error' >&2; exit 1\n" } else { "" };
        std::fs::write(repo.join("kernel.txt"), kernel).unwrap();
        std::fs::write(repo.join("flaky.txt"), flaky).unwrap();
        std::fs::write(repo.join("twice.txt"), twice.join("\n") + "\n").unwrap();
        // Each commit's own change besides: a file of its own (so that a revert applies).
        std::fs::create_dir_all(repo.join("notes")).unwrap();
        std::fs::write(repo.join(format!("notes/{i}.txt")), format!("change {i}\n")).unwrap();
        std::fs::write(
            repo.join("build.sh"),
            format!("set -e\n{build}mkdir -p out\ncp kernel.txt out/kernel\ncp flaky.txt out/flaky\ncp twice.txt out/twice\n"),
        )
        .unwrap();
        std::fs::write(repo.join(".gitignore"), "out/\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "--quiet", "-m", &format!("change {i}")]);
        commits.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    // The wrapper: the fake QEMU prints the -kernel file as the console; a kernel that
    // says FLAKY panics in one boot of three (a count beside the wrapper), as a race
    // on the host's clock would.
    let qemu = dir.path().join("qemu");
    let fake = root().join("scripts/fake-qemu-console");
    std::fs::write(
        &qemu,
        format!(
            r#"#!/bin/sh
k=""; prev=""
for a in "$@"; do [ "$prev" = "-kernel" ] && k="$a"; prev="$a"; done
FAKE_QEMU_CONSOLE="file:$k"
if [ -n "$k" ] && grep -q FLAKY "$k"; then
    n=$(cat "{count}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{count}"
    if [ $((n % 3)) = 0 ]; then printf 'booting\npanic: flaky race\n' > "{race}"; FAKE_QEMU_CONSOLE="file:{race}"; fi
fi
export FAKE_QEMU_CONSOLE
exec '{fake}' "$@"
"#,
            count = dir.path().join("count").display(),
            race = dir.path().join("race").display(),
            fake = fake.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&qemu, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    let case = |name: &str, artifact: &str, clock: &str| {
        let text = format!(
            "description = \"boots the synthetic kernel\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\n{clock}expect = ['^fake-qemu-console: done$']\n[guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
            repo.join(artifact).display()
        );
        std::fs::write(cases.join(format!("{name}.toml")), text).unwrap();
    };
    case("synthetic", "out/kernel", "qemu_seed = 5\n");
    case("synthetic-flaky", "out/flaky", "clock = \"host\"\nclock_reason = \"host-time\"\n");
    case("synthetic-twice", "out/twice", "qemu_seed = 5\n");
    Fixture { dir, repo, commits, qemu, cases }
}

impl Fixture {
    fn bisect(&self, case: &str, good: usize, bad: usize, extra: &[&str]) -> Output {
        let history = self.dir.path().join("history.sqlite");
        let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
        command
            .args(["bisect", case, "--good", &self.commits[good], "--bad", &self.commits[bad]])
            .args(["--repo", self.repo.to_str().unwrap(), "--build", "sh build.sh"])
            .args(["--artifact", &format!("out/{}", case.strip_prefix("synthetic-").unwrap_or("kernel"))])
            .args(["--cases", self.cases.to_str().unwrap(), "--history", history.to_str().unwrap()])
            .args(extra)
            .current_dir(root())
            .env("TESTBENCH_NO_SETUP", "1")
            .env("TESTBENCH_QEMU_RV64", &self.qemu)
            .stdin(Stdio::null());
        command.output().unwrap()
    }

    /// How many worktrees the repository has besides its own checkout.
    fn worktrees(&self) -> usize {
        git(&self.repo, &["worktree", "list", "--porcelain"]).lines().filter(|l| l.starts_with("worktree ")).count() - 1
    }
}

/// The number of boot steps the bisection printed.
fn boot_steps(stdout: &str) -> usize {
    let line = stdout.lines().find(|l| l.contains(" boot steps (bound ")).unwrap_or_else(|| panic!("{stdout}"));
    line.trim().split(' ').next().unwrap().parse().unwrap()
}

/// The bound: ceil(log2 40) + 2.
const BOUND: usize = 8;

#[test]
fn a_bisection_finds_the_injected_culprit_beside_a_broken_build_and_a_flake_within_the_bound() {
    let fixture = fixture();
    let head_before = git(&fixture.repo, &["rev-parse", "HEAD"]);

    // The deterministic panic, the build broken for the four commits before it: one boot
    // a step (guest time, a pinned seed), the broken commits skipped.
    let out = fixture.bisect("synthetic", 0, COMMITS, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    assert!(stdout.contains(&format!("first bad commit: {} change {CULPRIT}\n", fixture.commits[CULPRIT])), "{stdout}");
    assert!(stdout.contains("one boot decides a step"), "{stdout}");
    assert!(
        stdout.contains("verified: the culprit's parent passes, it fails, and its revert on the bad end passes"),
        "{stdout}"
    );
    assert!(boot_steps(&stdout) <= BOUND, "{stdout}");
    assert!(
        stdout.contains("skip") && stdout.contains("the build failed"),
        "a broken build was met and skipped: {stdout}"
    );
    // The evidence table names each commit booted with its verdict, title and seed.
    let culprit_row = format!("{} ", &fixture.commits[CULPRIT][..12]);
    let row = stdout.lines().find(|l| l.starts_with(&culprit_row)).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("fail 1/1") && row.contains("panic: bad block in bget") && row.contains(" 5 "), "{row}");
    assert_eq!(fixture.worktrees(), 0, "the worktree is removed at the end");
    assert_eq!(git(&fixture.repo, &["rev-parse", "HEAD"]), head_before, "the user's checkout is untouched");

    // Every boot landed in the history with the commit it booted.
    let history = fixture.dir.path().join("history.sqlite");
    let series = Command::new(env!("CARGO_BIN_EXE_testbench"))
        .args(["history", "synthetic", "--history", history.to_str().unwrap(), "--message-format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&series.stdout);
    let one: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or("{}")).unwrap();
    assert_eq!(one["case"], "synthetic", "{text}");
    assert!(one["failed"].as_u64().unwrap() >= 2 && one["passed"].as_u64().unwrap() >= 2, "{text}");
    // The last boot kept is the check's: the culprit reverted on the bad end, a commit
    // the bisection made in its worktree, whose parent is the bad end.
    let revert = &one["last_pass"];
    assert!(revert["run"].as_str().is_some_and(|r| r.starts_with("bisect-") && r.ends_with("/revert")), "{text}");
    let parent = git(&fixture.repo, &["rev-parse", &format!("{}^", revert["commit"].as_str().unwrap())]);
    assert_eq!(parent, fixture.commits[COMMITS], "{text}");
    assert_eq!(one["crash_titles"][0]["title"], "panic: bad block in bget", "{text}");

    // On the host's clock the panic shows in one boot of three: three boots a step, any
    // failure bad, and the culprit is still the injected one.
    let out = fixture.bisect("synthetic-flaky", 0, COMMITS, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    assert!(stdout.contains("3 boots a step, any failure bad"), "{stdout}");
    assert!(stdout.contains(&format!("first bad commit: {} change {FLAKY}\n", fixture.commits[FLAKY])), "{stdout}");
    assert!(boot_steps(&stdout) <= BOUND, "{stdout}");
    let good_row = stdout.lines().find(|l| l.contains("  good end ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(good_row.contains(" pass ") && good_row.contains("-,-,-"), "three boots passed: {good_row}");
}

/// Must fail: the first commit with the panic is found, but it is not the whole cause
/// (a later commit brings the same panic on its own), so its revert on the bad end still
/// fails: the check rejects the culprit, and says so, exit status 1.
#[test]
fn a_culprit_whose_revert_still_fails_is_reported_rejected() {
    let fixture = fixture();
    let out = fixture.bisect("synthetic-twice", 0, 18, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(stdout.contains(&format!("first bad commit: {} change {TWICE}\n", fixture.commits[TWICE])), "{stdout}");
    assert!(stdout.contains("the bad end with the culprit reverted still fails"), "{stdout}");
    assert!(
        stdout.contains(&format!("REJECTED: the check does not confirm {}", &fixture.commits[TWICE][..12])),
        "{stdout}"
    );
    assert!(!stdout.contains("verified:"), "{stdout}");
    assert_eq!(fixture.worktrees(), 0);
}

/// Bad input is refused before anything builds, naming the flag (exit 2).
#[test]
fn a_bisection_refuses_unknown_revisions_a_wrong_order_and_a_missing_case_by_name() {
    let fixture = fixture();
    let refused = |case: &str, good: &str, bad: &str, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
        command
            .args(["bisect", case, "--good", good, "--bad", bad, "--repo", fixture.repo.to_str().unwrap()])
            .args(["--cases", fixture.cases.to_str().unwrap()])
            .args(extra)
            .current_dir(root())
            .env("TESTBENCH_NO_SETUP", "1");
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", explain(&out));
        assert!(!fixture.repo.join("out").exists(), "nothing was built");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let build = ["--build", "sh build.sh", "--artifact", "out/kernel"];
    let (first, last) = (fixture.commits[0].as_str(), fixture.commits[COMMITS].as_str());
    let error = refused("synthetic", "no-such-rev", last, &build);
    assert!(error.contains("--good \"no-such-rev\": no such commit"), "{error}");
    let error = refused("synthetic", first, "v9", &build);
    assert!(error.contains("--bad \"v9\": no such commit"), "{error}");
    let error = refused("synthetic", last, first, &build);
    assert!(error.contains("is not an ancestor of --bad"), "{error}");
    let error = refused("no-such-case", first, last, &build);
    assert!(error.contains("CASE \"no-such-case\": no case file"), "{error}");
    let error = refused("synthetic", first, last, &["--build", "sh build.sh"]);
    assert!(error.contains("--artifact"), "--repo and --build without --artifact: {error}");
    let error = refused("synthetic", first, last, &["--build", "sh build.sh", "--artifact", "/abs/kernel"]);
    assert!(error.contains("--artifact /abs/kernel: it takes a path inside the repository"), "{error}");

    // A build that makes no --artifact: the bad end says so, naming the flag, and the
    // bisection stops there (exit 1), its worktree removed.
    let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
    command
        .args(["bisect", "synthetic", "--good", first, "--bad", last, "--repo", fixture.repo.to_str().unwrap()])
        .args(["--cases", fixture.cases.to_str().unwrap(), "--build", "true", "--artifact", "out/nothing"])
        .args(["--history", fixture.dir.path().join("h.sqlite").to_str().unwrap()])
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1");
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
    assert!(stderr.contains("the bad end") && stderr.contains("the build made no --artifact out/nothing"), "{stderr}");
    assert_eq!(fixture.worktrees(), 0);
}

/// Without --repo the bisected repository is the bench's own workspace (here a small one
/// `TESTBENCH_ROOT` names): each step is the bench run with the step's worktree as its
/// root, so a case's relative `[guest] kernel` is the worktree's file. A panic injected
/// at commit 9 of 16 is found within ceil(log2 16) + 2 boot steps, and the workspace's
/// checkout is left as it was.
#[test]
fn a_bisection_of_the_workspace_boots_each_steps_own_tree() {
    let fixture = fixture();
    let workspace = fixture.dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    git(&workspace, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(workspace.join(".gitignore"), "target/\n").unwrap();
    let mut commits = Vec::new();
    for i in 0..=16 {
        let console = if i >= 9 { "booting\npanic: workspace regression\n" } else { "booting\n" };
        std::fs::write(workspace.join("kernel.txt"), console).unwrap();
        std::fs::write(workspace.join(format!("note-{i}.txt")), "x\n").unwrap();
        git(&workspace, &["add", "-A"]);
        git(&workspace, &["commit", "--quiet", "-m", &format!("workspace change {i}")]);
        commits.push(git(&workspace, &["rev-parse", "HEAD"]));
    }
    let cases = fixture.dir.path().join("workspace-cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(
        cases.join("in-tree.toml"),
        "description = \"boots the tree's kernel.txt\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 30\nqemu_seed = 3\nexpect = ['^fake-qemu-console: done$']\n[guest]\nkernel = \"kernel.txt\"\nfirmware = \"none\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_testbench"))
        .args(["bisect", "in-tree", "--good", &commits[0], "--bad", "main", "--cases", cases.to_str().unwrap()])
        .current_dir(&workspace)
        .env("TESTBENCH_ROOT", &workspace)
        .env("TESTBENCH_NO_SETUP", "1")
        .env("TESTBENCH_QEMU_RV64", &fixture.qemu)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
    assert!(stdout.contains(&format!("first bad commit: {} workspace change 9\n", commits[9])), "{stdout}");
    assert!(boot_steps(&stdout) <= 6, "{stdout}");
    assert!(stdout.contains("verified:"), "{stdout}");
    assert_eq!(git(&workspace, &["rev-parse", "HEAD"]), commits[16]);
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "", "the checkout is as it was");
    assert!(workspace.join("target/testbench/history.sqlite").is_file(), "the workspace's own history");
}
