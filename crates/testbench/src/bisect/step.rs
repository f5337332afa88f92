//! One step of a bisection: a commit checked out in the worktree, built (with `--repo`,
//! the repository's build; else the bench builds the guest as it boots), then booted by
//! this bench run as a subprocess on the case, once or `--runs` times; what it found,
//! kept in the history with the commit it booted.
//!
//! The bench that boots is this one, not the one of the bisected tree: what changes from
//! step to step is the guest under test, and the judge stays the same (an old tree's
//! bench could judge by other rules, or not know the case's fields). For the bench's own
//! workspace the subprocess runs with `TESTBENCH_ROOT` set to the worktree, so it builds
//! the worktree's guest; the case is the user's, from the cases directory as it is now.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::Digest;
use testbench_history::{History, Record, Verdict};

use super::git::{short, Worktree};
use super::search::Mark;
use super::{BisectError, Plan, Subject};
use crate::process::Cmd;

/// What one step found.
#[derive(Clone, Debug)]
pub enum Outcome {
    Pass,
    /// The case failed with this failure (its crash title, or its failure kind).
    Fail {
        signature: String,
    },
    /// It failed otherwise than the bad end: not this bug (a skip).
    NotThisBug {
        signature: String,
    },
    /// No verdict: the build failed, the host lacked something, the bench could not run.
    Skip {
        why: String,
    },
}

impl Outcome {
    pub fn words(&self) -> String {
        match self {
            Outcome::Pass => "pass".into(),
            Outcome::Fail { signature } => format!("fail: {signature}"),
            Outcome::NotThisBug { signature } => format!("not this bug (skipped): {signature}"),
            Outcome::Skip { why } => format!("skipped: {why}"),
        }
    }
}

/// One boot of a step, as its JSON event said.
#[derive(Clone, Debug)]
pub struct Boot {
    pub verdict: String,
    pub fail_kind: Option<String>,
    pub title: Option<String>,
    pub class: Option<String>,
    pub arch: String,
    pub smp: Option<u32>,
    pub seed: Option<u64>,
    pub secs: f64,
}

/// One step: the commit, what it was for, and what it found.
#[derive(Clone, Debug)]
pub struct Step {
    pub commit: String,
    pub label: &'static str,
    pub outcome: Outcome,
    pub boots: Vec<Boot>,
    pub elapsed: Duration,
}

impl Step {
    pub fn mark(&self) -> Mark {
        match self.outcome {
            Outcome::Pass => Mark::Good,
            Outcome::Fail { .. } => Mark::Bad,
            Outcome::NotThisBug { .. } | Outcome::Skip { .. } => Mark::Skip,
        }
    }
}

/// The steps of one bisection, and where they keep what they found.
pub struct Steps<'a> {
    plan: &'a Plan,
    tree: &'a Worktree,
    dir: &'a Path,
    done: Vec<Step>,
    history: History,
    host: String,
}

/// The running binary, as Linux names it (a file replaced since still runs as itself).
const SELF: &str = "/proc/self/exe";

/// What a boot's subprocess may take on top of the build's deadline.
const BOOT_DEADLINE: Duration = Duration::from_secs(3600);

impl<'a> Steps<'a> {
    pub fn new(plan: &'a Plan, tree: &'a Worktree, dir: &'a Path) -> Result<Steps<'a>, BisectError> {
        let history = History::open(&plan.history)?;
        Ok(Steps { plan, tree, dir, done: Vec::new(), history, host: crate::rundir::hostname() })
    }

    /// Check `commit` out and run its step.
    pub fn run(&mut self, commit: &str, label: &'static str, signature: Option<&str>) -> Result<Step, BisectError> {
        self.tree.checkout(commit)?;
        self.run_here(commit, label, signature)
    }

    /// Run a step on the tree as it is checked out (`commit` is its HEAD).
    pub fn run_here(
        &mut self,
        commit: &str,
        label: &'static str,
        signature: Option<&str>,
    ) -> Result<Step, BisectError> {
        let started = Instant::now();
        let step_dir = self.dir.join(format!("step-{:02}-{}", self.done.len(), short(commit)));
        std::fs::create_dir_all(&step_dir).map_err(|source| BisectError::Io {
            what: "making a step's directory",
            path: step_dir.clone(),
            source,
        })?;
        print!("bisect: {label} {} {} ... ", short(commit), super::git::subject(&self.tree.dir, commit));
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let (boots, outcome, kernel) = match self.prepare(&step_dir)? {
            Err(why) => (Vec::new(), Outcome::Skip { why }, None),
            Ok((cases, kernel)) => {
                let (boots, outcome) = self.boot(&step_dir, &cases, signature)?;
                (boots, outcome, kernel)
            }
        };
        println!("{}", outcome.words());
        let step = Step { commit: commit.into(), label, outcome, boots, elapsed: started.elapsed() };
        self.keep(&step, kernel)?;
        self.done.push(step.clone());
        Ok(step)
    }

    /// Build the step's tree (with `--repo`) and write the case it boots: the cases
    /// directory to give the bench, and the artifact's sha256; `Err(why)` for a build
    /// that failed or made no artifact (the commit is skipped).
    #[allow(clippy::type_complexity)]
    fn prepare(&self, step_dir: &Path) -> Result<Result<(PathBuf, Option<String>), String>, BisectError> {
        let Subject::Repo { dir, build, artifact } = &self.plan.subject else {
            return Ok(Ok((self.plan.case_file.parent().map(Path::to_path_buf).unwrap_or_default(), None)));
        };
        let log_path = step_dir.join("build.log");
        let log = std::fs::File::create(&log_path).map_err(|source| BisectError::Io {
            what: "making a step's build log",
            path: log_path.clone(),
            source,
        })?;
        let built = Cmd::new("sh", "--build, a step's build", self.plan.build_timeout)
            .args(["-c", build])
            .cwd(&self.tree.dir)
            .process_group()
            .status_to(log);
        match built {
            Ok(status) if status.success() => {}
            Ok(status) => return Ok(Err(format!("the build failed ({status}; its log: {})", log_path.display()))),
            Err(error) => return Ok(Err(format!("the build: {error}"))),
        }
        let made = self.tree.dir.join(artifact);
        let Ok(bytes) = std::fs::read(&made) else {
            return Ok(Err(format!(
                "the build made no --artifact {} (no file {})",
                artifact.display(),
                made.display()
            )));
        };
        let sha = format!("{:x}", sha2::Sha256::digest(&bytes));
        // The case as the user wrote it for their checkout: every path under the
        // repository now under the step's tree, and [guest] kernel the built artifact.
        let text =
            self.plan.case_text.replace(&format!("{}/", dir.display()), &format!("{}/", self.tree.dir.display()));
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| BisectError::Case { name: self.plan.case.clone(), why: e.to_string() })?;
        let guest = table.entry("guest").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(guest) = guest.as_table_mut() {
            guest.insert("kernel".into(), toml::Value::String(made.to_string_lossy().into_owned()));
        }
        let cases = step_dir.join("cases");
        std::fs::create_dir_all(&cases).map_err(|source| BisectError::Io {
            what: "making a step's cases",
            path: cases.clone(),
            source,
        })?;
        let file = cases.join(format!("{}.toml", self.plan.case));
        let written = toml::to_string(&table)
            .map_err(|e| BisectError::Case { name: self.plan.case.clone(), why: e.to_string() })?;
        std::fs::write(&file, written).map_err(|source| BisectError::Io {
            what: "writing a step's case",
            path: file.clone(),
            source,
        })?;
        Ok(Ok((cases, Some(sha))))
    }

    /// Boot the case once, or up to `--runs` times until one fails.
    fn boot(
        &self,
        step_dir: &Path,
        cases: &Path,
        signature: Option<&str>,
    ) -> Result<(Vec<Boot>, Outcome), BisectError> {
        let plan = self.plan;
        let mut boots = Vec::new();
        let mut skipped = None;
        for _ in 0..plan.runs {
            let mut args: Vec<String> = vec![
                "--cases".into(),
                cases.to_string_lossy().into_owned(),
                "--exact".into(),
                plan.case.clone(),
                "--message-format".into(),
                "json".into(),
                "--color".into(),
                "never".into(),
                "--allow-skip".into(),
                // The bench's own keeping goes to the step's directory: the bisection
                // keeps each boot with the commit it booted.
                "--history".into(),
                step_dir.join("bench-history.sqlite").to_string_lossy().into_owned(),
            ];
            if let Some(arch) = &plan.arch {
                args.extend(["--arch".into(), arch.clone()]);
            }
            if let Some(smp) = plan.smp {
                args.extend(["--smp".into(), smp.to_string()]);
            }
            if let Some(seed) = plan.seed {
                args.extend(["--sweep".into(), seed.to_string()]);
            }
            let root = match plan.subject {
                Subject::Workspace => self.tree.dir.clone(),
                Subject::Repo { .. } => plan.root.clone(),
            };
            // This very binary, even when a rebuild replaced its file during the bisection.
            let exe = match Path::new(SELF).exists() {
                true => PathBuf::from(SELF),
                false => std::env::current_exe().map_err(|source| BisectError::Io {
                    what: "finding the bench's own binary",
                    path: PathBuf::new(),
                    source,
                })?,
            };
            let output = Cmd::new(exe, "a bisection step's boot of the case", BOOT_DEADLINE + plan.build_timeout)
                .args(&args)
                .cwd(&root)
                .env("TESTBENCH_ROOT", &root)
                .env("TESTBENCH_NO_SETUP", "1")
                .output()
                .map_err(|source| BisectError::Git { dir: root.clone(), source })?;
            let log = step_dir.join("bench.log");
            let mut kept = output.stdout.clone();
            kept.extend_from_slice(&output.stderr);
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &kept));
            let found = parse_events(&String::from_utf8_lossy(&output.stdout));
            if found.is_empty() {
                let said = String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                skipped =
                    Some(format!("the bench booted nothing (exit {}: {said})", output.status.code().unwrap_or(-1)));
                break;
            }
            let failed = found.iter().any(|b| matches!(b.verdict.as_str(), "fail" | "unfailed"));
            boots.extend(found);
            if failed {
                break;
            }
        }
        let fail = boots.iter().find(|b| matches!(b.verdict.as_str(), "fail" | "unfailed"));
        let outcome = match (fail, skipped) {
            (Some(boot), _) if matches!(boot.fail_kind.as_deref(), Some("build" | "host-lack")) => Outcome::Skip {
                why: format!(
                    "{}: {}",
                    boot.fail_kind.as_deref().unwrap_or(""),
                    boot.title.as_deref().unwrap_or("no verdict")
                ),
            },
            (Some(boot), _) => {
                let mine = boot.title.clone().or_else(|| boot.fail_kind.clone()).unwrap_or_else(|| "failed".into());
                match signature {
                    Some(bad) if !plan.any_failure && bad != mine => Outcome::NotThisBug { signature: mine },
                    _ => Outcome::Fail { signature: mine },
                }
            }
            (None, Some(why)) => Outcome::Skip { why },
            (None, None) if boots.iter().all(|b| matches!(b.verdict.as_str(), "pass" | "expected-failure")) => {
                Outcome::Pass
            }
            (None, None) => Outcome::Skip { why: "a boot had no verdict (skipped or the bench's trouble)".into() },
        };
        Ok((boots, outcome))
    }

    /// Keep the step's boots in the history, each with the commit it booted.
    fn keep(&mut self, step: &Step, kernel: Option<String>) -> Result<(), BisectError> {
        let finished = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
        let run = format!(
            "{}/{}",
            self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            step.label
        );
        let records: Vec<Record> = step
            .boots
            .iter()
            .map(|boot| Record {
                run: run.clone(),
                finished,
                case: self.plan.case.clone(),
                width: boot.arch.clone(),
                harts: boot.smp,
                seed: boot.seed,
                verdict: Verdict::from_name(&boot.verdict).unwrap_or(Verdict::Trouble),
                fail_kind: boot.fail_kind.clone(),
                crash_title: boot.title.clone(),
                class: boot.class.clone(),
                duration: Duration::from_secs_f64(boot.secs.max(0.0)),
                commit: Some(step.commit.clone()),
                dirty: Some(false),
                kernel_sha256: kernel.clone(),
                qemu_version: None,
                host: self.host.clone(),
                clock: Some(if self.plan.guest_time { "icount" } else { "host" }.into()),
                rerun_alone: false,
                quarantined: false,
            })
            .collect();
        self.history.append(&records)?;
        Ok(())
    }

    /// What the last step on `commit` found.
    pub fn outcome_of(&self, commit: &str) -> Option<&Outcome> {
        self.done.iter().rev().find(|s| s.commit == commit).map(|s| &s.outcome)
    }

    /// How many steps of the search (the ends included, the check not) booted the case.
    pub fn search_boot_steps(&self) -> usize {
        self.done.iter().filter(|s| s.label != "revert" && !s.boots.is_empty()).count()
    }

    /// The evidence table: one row per step.
    pub fn table(&self) -> String {
        let mut text = String::from("commit        step      verdict                 title                                     seed        time\n");
        for step in &self.done {
            let (verdict, title) = match &step.outcome {
                Outcome::Pass => ("pass".to_string(), String::new()),
                Outcome::Fail { signature } => (
                    format!(
                        "fail {}/{}",
                        step.boots.iter().filter(|b| b.verdict == "fail" || b.verdict == "unfailed").count(),
                        step.boots.len()
                    ),
                    signature.clone(),
                ),
                Outcome::NotThisBug { signature } => ("not this bug".into(), signature.clone()),
                Outcome::Skip { why } => ("skip".into(), why.clone()),
            };
            let seeds: Vec<String> = step.boots.iter().map(|b| b.seed.map_or("-".into(), |s| s.to_string())).collect();
            let seeds = if seeds.is_empty() { "-".into() } else { seeds.join(",") };
            let title: String = title.chars().take(40).collect();
            text.push_str(&format!(
                "{:<13} {:<9} {:<23} {:<41} {:<11} {:.1}s\n",
                short(&step.commit),
                step.label,
                verdict,
                title,
                seeds,
                step.elapsed.as_secs_f64()
            ));
        }
        text
    }
}

/// The boots a run of the bench reported on stdout (`--message-format json`).
fn parse_events(stdout: &str) -> Vec<Boot> {
    let mut boots = Vec::new();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event["event"] != "boot-finished" {
            continue;
        }
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        boots.push(Boot {
            verdict: text(&event["verdict"]).unwrap_or_else(|| "trouble".into()),
            fail_kind: text(&event["failure_kind"]),
            title: text(&event["crash"]["title"]),
            class: text(&event["failure_class"]),
            arch: text(&event["arch"]).unwrap_or_else(|| "host".into()),
            smp: event["smp"].as_u64().map(|n| n as u32),
            seed: event["seed"].as_u64(),
            secs: event["duration_secs"].as_f64().unwrap_or(0.0),
        });
    }
    boots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_boots_are_read_from_its_json_events() {
        let stdout = r#"{"schema":1,"event":"run-started","boots":1}
{"schema":1,"event":"boot-finished","case":"tiny","arch":"rv64","smp":1,"seed":7,"verdict":"fail","failure_kind":"crash","failure_class":null,"crash":{"title":"panic: bad block"},"duration_secs":0.25}
not json
{"schema":1,"event":"boot-finished","case":"tiny","arch":"rv64","smp":2,"seed":null,"verdict":"pass","failure_kind":null,"crash":null,"duration_secs":1.5}"#;
        let boots = parse_events(stdout);
        assert_eq!(boots.len(), 2);
        assert_eq!(
            (boots[0].verdict.as_str(), boots[0].title.as_deref(), boots[0].seed),
            ("fail", Some("panic: bad block"), Some(7))
        );
        assert_eq!((boots[1].verdict.as_str(), boots[1].title.as_deref(), boots[1].smp), ("pass", None, Some(2)));
    }
}
