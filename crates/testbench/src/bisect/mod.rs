//! `cargo testbench bisect --good REV --bad REV CASE`: the first bad commit (docs/bisect.md).
//!
//! Of the bench's own workspace (a change in the guest), or with `--repo DIR --build CMD
//! --artifact PATH` of another repository whose built artifact the case boots as its
//! `[guest] kernel`. Always in a worktree of its own under
//! `target/testbench/bisect-<pid>-<time>/tree`, detached, removed at the end: the
//! user's checkout is never touched. Each step checks one commit out, builds (a build
//! that fails or a host that lacks something skips the commit), and boots the case by
//! running this bench as a subprocess (`--exact CASE --message-format json`): once under
//! icount with a pinned seed, else `--runs` times (any failure is bad). A failure whose
//! crash title (or failure kind, when it has none) is not the bad end's is "not this
//! bug" and skips the commit, unless `--any-failure`. The culprit is then checked: its
//! parent passed, it failed, and its revert on the bad revision (where it applies
//! cleanly) passes. Every boot is kept in the history with the commit it booted.

mod git;
mod search;
mod step;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;

use search::{Found, Mark, Search};
use step::{Outcome, Step, Steps};

/// The word that makes the command line this one.
pub const WORD: &str = "bisect";

#[derive(Parser, Debug)]
#[command(
    name = "testbench bisect",
    about = "The first bad commit: boots CASE at each step of a bisection from --good to --bad"
)]
struct Flags {
    /// The case to boot at each step (its name, a file of the cases directory).
    case: String,
    /// A commit where the case passes.
    #[arg(long, value_name = "REV")]
    good: String,
    /// A commit where the case fails, after --good.
    #[arg(long, value_name = "REV")]
    bad: String,
    /// Bisect this repository instead of the bench's own workspace (its artifact is the
    /// case's [guest] kernel).
    #[arg(long, value_name = "DIR", requires_all = ["build", "artifact"])]
    repo: Option<PathBuf>,
    /// With --repo: the shell command that builds a step's tree (run in it).
    #[arg(long, value_name = "CMD", requires = "repo")]
    build: Option<String>,
    /// With --repo: the file the build makes, relative to the tree; the case boots it as
    /// its [guest] kernel.
    #[arg(long, value_name = "PATH", requires = "repo")]
    artifact: Option<PathBuf>,
    /// Load the case from DIR instead of tests/.
    #[arg(long, value_name = "DIR")]
    cases: Option<PathBuf>,
    /// Boot only this width: rv64, rv32, x86_64 or aarch64.
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
    /// Boot at N harts.
    #[arg(long, value_name = "N")]
    smp: Option<u32>,
    /// Pin QEMU's seed for every boot (as --sweep SEED): under icount one boot decides.
    #[arg(long, value_name = "SEED")]
    seed: Option<u64>,
    /// Boots per step when one does not decide (the host's clock, or no pinned seed);
    /// any failure makes the commit bad.
    #[arg(long, value_name = "N", default_value_t = 3)]
    runs: u32,
    /// Any failure makes a commit bad, whatever its crash title.
    #[arg(long)]
    any_failure: bool,
    /// How long one step's build may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    build_timeout: u64,
    /// Keep every boot in the history database at PATH (default
    /// target/testbench/history.sqlite).
    #[arg(long, value_name = "PATH")]
    history: Option<PathBuf>,
}

/// Why a bisection could not start or go on. A refusal of the command line (exit 2)
/// names the flag; the rest are the bench's trouble (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    #[error("{flag} {rev:?}: no such commit in {}", repo.display())]
    Rev { flag: &'static str, rev: String, repo: PathBuf },
    #[error("{why}")]
    Order { why: String },
    #[error("{flag} {}: {why}", path.display())]
    Path { flag: &'static str, path: PathBuf, why: String },
    #[error("CASE {name:?}: {why}")]
    Case { name: String, why: String },
    #[error("{flag} {value}: {why}")]
    Value { flag: &'static str, value: String, why: String },
    #[error("git in {}: {source}", dir.display())]
    Git { dir: PathBuf, source: crate::process::CmdError },
    #[error("the bisection's worktree {}: {what}", dir.display())]
    Worktree { dir: PathBuf, what: &'static str },
    #[error("{what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("the history: {0}")]
    History(#[from] testbench_history::HistoryError),
    #[error("the bad end {commit}: {why}")]
    BadEnd { commit: String, why: String },
    #[error("the good end {commit}: {why}")]
    GoodEnd { commit: String, why: String },
}

impl BisectError {
    fn exit_status(&self) -> i32 {
        match self {
            BisectError::Rev { .. }
            | BisectError::Order { .. }
            | BisectError::Path { .. }
            | BisectError::Case { .. }
            | BisectError::Value { .. } => crate::error::EXIT_REFUSED,
            BisectError::BadEnd { .. } | BisectError::GoodEnd { .. } => crate::error::EXIT_FAILED,
            _ => crate::error::EXIT_TROUBLE,
        }
    }
}

/// What is bisected: the bench's workspace, or another repository and its build.
pub enum Subject {
    /// The bench's own workspace: each step runs this bench with the worktree as its root.
    Workspace,
    /// Another repository: `build` run in the step's tree makes `artifact` (relative to it).
    Repo { dir: PathBuf, build: String, artifact: PathBuf },
}

/// A bisection's settings, validated.
pub struct Plan {
    pub root: PathBuf,
    pub repo: PathBuf,
    pub subject: Subject,
    pub case: String,
    /// The case file as the user has it.
    pub case_file: PathBuf,
    pub case_text: String,
    pub arch: Option<String>,
    pub smp: Option<u32>,
    pub seed: Option<u64>,
    pub runs: u32,
    /// One boot decides: guest time (icount) and a pinned seed.
    pub deterministic: bool,
    /// The case runs in guest time (icount), not on the host's clock.
    pub guest_time: bool,
    pub any_failure: bool,
    pub build_timeout: Duration,
    pub history: PathBuf,
}

/// Run the command on `args` (the words after `bisect`); never returns.
pub fn main(root: &Path, args: &[OsString]) -> ! {
    let words = std::iter::once(OsString::from("testbench bisect")).chain(args.iter().cloned());
    let flags = Flags::try_parse_from(words).unwrap_or_else(|e| e.exit());
    let status = match plan(root, flags).and_then(|(plan, commits)| bisect(&plan, &commits)) {
        Ok(status) => status,
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_status()
        }
    };
    std::process::exit(status)
}

/// The command line checked before anything builds: the revisions, their order, the
/// case, the flags' values. The commits from good to bad, too.
fn plan(root: &Path, flags: Flags) -> Result<(Plan, Vec<String>), BisectError> {
    let (repo, subject) = match (&flags.repo, &flags.build, &flags.artifact) {
        (Some(dir), Some(build), Some(artifact)) => {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            if !dir.join(".git").exists() {
                let why = "not a git repository (no .git in it): --repo takes the checkout of the repository to bisect"
                    .into();
                return Err(BisectError::Path { flag: "--repo", path: dir, why });
            }
            if artifact.is_absolute() || artifact.components().any(|c| c == std::path::Component::ParentDir) {
                let why =
                    "it takes a path inside the repository's tree, relative to its top (the file the build makes)"
                        .into();
                return Err(BisectError::Path { flag: "--artifact", path: artifact.clone(), why });
            }
            if build.trim().is_empty() {
                return Err(BisectError::Value {
                    flag: "--build",
                    value: "\"\"".into(),
                    why: "it takes the shell command that builds a step's tree".into(),
                });
            }
            (dir.clone(), Subject::Repo { dir, build: build.clone(), artifact: artifact.clone() })
        }
        _ => (root.to_path_buf(), Subject::Workspace),
    };
    if flags.runs == 0 || flags.runs > 100 {
        return Err(BisectError::Value {
            flag: "--runs",
            value: flags.runs.to_string(),
            why: "accepted: 1 to 100".into(),
        });
    }
    if let Some(arch) = &flags.arch {
        if testbench_case::Arch::from_name(arch).is_none() {
            return Err(BisectError::Value {
                flag: "--arch",
                value: arch.clone(),
                why: "accepted: rv64, rv32, x86_64 or aarch64".into(),
            });
        }
    }
    if let Some(n) = flags.smp {
        if !(1..=testbench_case::SMP_MAX).contains(&n) {
            let why = format!("accepted: 1 to {}", testbench_case::SMP_MAX);
            return Err(BisectError::Value { flag: "--smp", value: n.to_string(), why });
        }
    }
    let cases = match &flags.cases {
        Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
        None => root.join("tests"),
    };
    let case_file = cases.join(format!("{}.toml", flags.case));
    let case_text = std::fs::read_to_string(&case_file).map_err(|e| BisectError::Case {
        name: flags.case.clone(),
        why: format!("no case file {} ({e}); CASE takes a case's name in {}", case_file.display(), cases.display()),
    })?;
    let case = testbench_case::parse(&case_file.to_string_lossy(), &case_text)
        .map_err(|e| BisectError::Case { name: flags.case.clone(), why: e.to_string() })?;
    let testbench_case::Kind::Boot(boot) = &case.kind else {
        return Err(BisectError::Case {
            name: flags.case.clone(),
            why: format!("a {} case; a bisection boots a boot case", case.kind.name()),
        });
    };
    if matches!(subject, Subject::Repo { .. }) && !matches!(boot.guest, testbench_case::Guest::External(_)) {
        let why = "it builds the reference guest; with --repo the case boots the repository's artifact through [guest] kernel".into();
        return Err(BisectError::Case { name: flags.case.clone(), why });
    }
    let deterministic = boot.host_clock.is_none() && (flags.seed.is_some() || boot.qemu_seed.is_some());
    let good = git::resolve(&repo, "--good", &flags.good)?;
    let bad = git::resolve(&repo, "--bad", &flags.bad)?;
    let commits = git::path(&repo, &good, &bad)?;
    let plan = Plan {
        root: root.to_path_buf(),
        repo,
        subject,
        case: flags.case,
        case_file,
        case_text,
        arch: flags.arch,
        smp: flags.smp,
        seed: flags.seed,
        runs: if deterministic { 1 } else { flags.runs },
        deterministic,
        guest_time: boot.host_clock.is_none(),
        any_failure: flags.any_failure,
        build_timeout: Duration::from_secs(flags.build_timeout),
        history: crate::history::path(root, flags.history.as_deref()),
    };
    Ok((plan, commits))
}

/// The bisection, from the two ends to the culprit's check; its exit status: 0 for a
/// culprit the check kept, 1 for one it rejected or a range of skipped commits.
fn bisect(plan: &Plan, commits: &[String]) -> Result<i32, BisectError> {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let bench_dir = plan.root.join("target/testbench");
    git::remove_stale(&plan.repo, &bench_dir);
    let dir = bench_dir.join(format!("bisect-{}-{}", std::process::id(), since.as_secs()));
    std::fs::create_dir_all(&dir).map_err(|source| BisectError::Io {
        what: "making the bisection's directory",
        path: dir.clone(),
        source,
    })?;
    let tree = git::Worktree::add(&plan.repo, &dir.join("tree"), commits.last().expect("the bad end"))?;
    let n = commits.len() - 1;
    println!(
        "bisect: {} commits from {} (good) to {} (bad); at most {} boot steps; {}",
        n,
        git::short(&commits[0]),
        git::short(&commits[n]),
        search::step_bound(n),
        match plan.deterministic {
            true => "one boot decides a step (guest time, a pinned seed)".to_string(),
            false => format!(
                "{} boots a step, any failure bad (no pinned seed under guest time, or the host's clock)",
                plan.runs
            ),
        }
    );
    let mut steps = Steps::new(plan, &tree, &dir)?;
    let bad_end = steps.run(&commits[n], "bad end", None)?;
    let signature = match &bad_end.outcome {
        Outcome::Fail { signature, .. } => signature.clone(),
        other => {
            return Err(BisectError::BadEnd {
                commit: git::short(&commits[n]).into(),
                why: format!("{}: a bisection starts from a commit where the case fails", other.words()),
            })
        }
    };
    println!(
        "bisect: the bad end fails with {signature:?}{}",
        if plan.any_failure { " (--any-failure: any failure is bad)" } else { "" }
    );
    let good_end = steps.run(&commits[0], "good end", Some(&signature))?;
    if !matches!(good_end.outcome, Outcome::Pass) {
        return Err(BisectError::GoodEnd {
            commit: git::short(&commits[0]).into(),
            why: match &good_end.outcome {
                Outcome::Fail { signature } | Outcome::NotThisBug { signature } => {
                    format!("it fails too ({signature}): a bisection starts from a commit where the case passes")
                }
                other => format!("{}: a bisection starts from a commit where the case passes", other.words()),
            },
        });
    }
    let mut search = Search::new(commits.len());
    search.mark(0, Mark::Good);
    search.mark(n, Mark::Bad);
    let found = loop {
        match search.next() {
            Ok(index) => {
                let step = steps.run(&commits[index], "step", Some(&signature))?;
                search.mark(index, step.mark());
            }
            Err(found) => break found,
        }
    };
    let boots = steps.search_boot_steps();
    let status = match found {
        Found::Culprit(index) => {
            let check = verify(plan, &mut steps, &tree, commits, index, &signature)?;
            print!("{}", steps.table());
            println!(
                "first bad commit: {} {}\n  {} boot steps (bound {}: ceil(log2 {n}) + 2)",
                commits[index],
                git::subject(&plan.repo, &commits[index]),
                boots,
                search::step_bound(n),
            );
            for line in &check.lines {
                println!("  {line}");
            }
            match check.rejected {
                false => {
                    println!(
                        "verified: the culprit's parent passes, it fails{}",
                        if check.reverted { ", and its revert on the bad end passes" } else { "" }
                    );
                    crate::error::EXIT_PASSED
                }
                true => {
                    println!("REJECTED: the check does not confirm {} as the culprit", git::short(&commits[index]));
                    crate::error::EXIT_FAILED
                }
            }
        }
        Found::Range { first, last } => {
            print!("{}", steps.table());
            println!("the first bad commit is one of these {} (every one between the last good and the first bad commit was skipped):", last - first + 1);
            for id in &commits[first..=last] {
                println!("  {} {}", id, git::subject(&plan.repo, id));
            }
            println!("  {boots} boot steps");
            crate::error::EXIT_FAILED
        }
    };
    drop(tree);
    Ok(status)
}

/// The culprit's check's findings.
struct Check {
    rejected: bool,
    reverted: bool,
    lines: Vec<String>,
}

/// Check the culprit at `index`: its parent passed (the search marked it good), it
/// failed with the bad end's failure, and its revert on the bad end, where it applies
/// cleanly, builds and passes.
fn verify(
    plan: &Plan,
    steps: &mut Steps,
    tree: &git::Worktree,
    commits: &[String],
    index: usize,
    signature: &str,
) -> Result<Check, BisectError> {
    let mut check = Check { rejected: false, reverted: false, lines: Vec::new() };
    let parent = steps.outcome_of(&commits[index - 1]);
    let culprit = steps.outcome_of(&commits[index]);
    check.lines.push(format!(
        "parent {}: {}",
        git::short(&commits[index - 1]),
        parent.map_or("not booted".into(), Outcome::words)
    ));
    check.lines.push(format!(
        "culprit {}: {}",
        git::short(&commits[index]),
        culprit.map_or("not booted".into(), Outcome::words)
    ));
    if !matches!(parent, Some(Outcome::Pass)) || !matches!(culprit, Some(Outcome::Fail { .. })) {
        check.rejected = true;
    }
    tree.checkout(commits.last().expect("the bad end"))?;
    match tree.revert(&commits[index])? {
        false => check.lines.push("revert: does not apply cleanly on the bad end: not checked".into()),
        true => {
            let reverted = tree.head().unwrap_or_default();
            let step: Step = steps.run_here(&reverted, "revert", Some(signature))?;
            check.lines.push(format!("revert on the bad end ({}): {}", git::short(&reverted), step.outcome.words()));
            match step.outcome {
                Outcome::Pass => check.reverted = true,
                Outcome::Fail { .. } => {
                    check.rejected = true;
                    check.lines.push(
                        "the bad end with the culprit reverted still fails: the bug is not this commit's alone".into(),
                    );
                }
                _ => check.lines.push("the revert could not be booted: not checked".into()),
            }
        }
    }
    let _ = plan;
    Ok(check)
}
