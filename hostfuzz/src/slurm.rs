//! `cargo hostfuzz --slurm --seeds A..B ...`: a campaign as a Slurm job array, one seed
//! per task (docs/scale.md).
//!
//! The campaign's directory (`target/hostfuzz/slurm-<secs>-<pid>/`, on storage every
//! node shares) holds a copy of this very binary (a rebuild while the array runs changes
//! nothing), the tasks' script, and per seed `seed-S/`: the task's findings (its
//! `HOSTFUZZ_OUT`) and its exit status, written last. The submitter follows the array
//! under a deadline and then prints, in seed order, what each seed came to, its findings
//! with their replay commands, and the line that runs that seed again alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testbench_process::shell_quote as quote;
use testbench_slurm::{Array, Followed};

use crate::runner::Budget;

/// Exit status of a campaign a task of which gave no result.
pub const EXIT_UNFINISHED: u8 = 4;
/// The most seeds one campaign may name.
const MAX_SEEDS: u64 = testbench_slurm::MAX_TASKS as u64;
/// What a task may take beyond its budget (the binary's start, shrinking findings).
const TASK_SLACK: Duration = Duration::from_secs(120);

/// A `--slurm` campaign as the command line gave it.
pub struct Campaign {
    pub seeds: (u64, u64),
    pub partition: Option<String>,
    pub queue: Duration,
    pub budget: Budget,
    /// The one target, or the gate's.
    pub target: Option<String>,
    pub targets: usize,
    pub in_process: bool,
}

/// `A..B` (both ends included).
pub fn parse_seeds(text: &str) -> Result<(u64, u64), String> {
    let accepted = "a range such as 1..20 (both ends included)";
    let (low, high) = text.split_once("..").ok_or_else(|| format!("--seeds {text:?}: accepted: {accepted}"))?;
    let parse = |t: &str| t.trim().parse::<u64>().map_err(|_| format!("--seeds {text:?}: {t:?} is not a seed"));
    let (low, high) = (parse(low)?, parse(high)?);
    if high < low {
        return Err(format!("--seeds {text:?}: the range is empty; accepted: {accepted}"));
    }
    if high - low >= MAX_SEEDS {
        return Err(format!("--seeds {text:?}: more than {MAX_SEEDS} seeds (one array task each)"));
    }
    Ok((low, high))
}

impl Campaign {
    fn tasks(&self) -> u32 {
        (self.seeds.1 - self.seeds.0 + 1) as u32
    }

    /// The arguments that run one seed's part, but the seed.
    fn budget_args(&self) -> Vec<String> {
        let mut args = match self.budget {
            Budget::Time(t) => vec!["--seconds".to_string(), t.as_secs().to_string()],
            Budget::Count(n) => vec!["--count".to_string(), n.to_string()],
        };
        if self.in_process {
            args.push("--in-process".into());
        }
        if let Some(target) = &self.target {
            args.extend(["--target".to_string(), target.clone()]);
        }
        args
    }

    /// Each task's limit: its budget for every target, shrinking, and the start.
    fn task_limit(&self) -> Duration {
        let per_target = match self.budget {
            Budget::Time(t) => t,
            // The slowest gate target runs a few hundred inputs a second with a fork each.
            Budget::Count(n) => Duration::from_secs(n / 200 + 10),
        };
        per_target * self.targets as u32 + TASK_SLACK * self.targets as u32
    }

    /// Submit, follow and join; the exit status.
    pub fn run(&self, root: &Path) -> Result<u8, String> {
        if let Some(missing) = testbench_slurm::missing_command() {
            return Err(format!(
                "--slurm: {missing} is not on the PATH: install Slurm's client commands (Debian: slurm-client)"
            ));
        }
        if let Some(partition) = &self.partition {
            let known =
                testbench_slurm::partitions().map_err(|e| format!("--slurm: asking for the partitions: {e}"))?;
            if !known.contains(partition) {
                return Err(format!(
                    "--slurm-partition {partition:?}: no such partition; Slurm has: {}",
                    known.join(", ")
                ));
            }
        }
        let campaigns = root.join("target/hostfuzz");
        let pruned = prune(&campaigns, KEEP);
        if !pruned.is_empty() {
            eprintln!(
                "hostfuzz: removed {} joined campaign directories of {} (the {KEEP} newest joined are kept)",
                pruned.len(),
                campaigns.display()
            );
        }
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let dir = campaigns.join(format!("slurm-{secs}-{}", std::process::id()));
        let io = |what: &str, path: &Path, e: std::io::Error| format!("--slurm: {what} {}: {e}", path.display());
        std::fs::create_dir_all(&dir).map_err(|e| io("creating", &dir, e))?;
        let exe = std::env::current_exe().map_err(|e| format!("--slurm: finding this binary: {e}"))?;
        let binary = dir.join("hostfuzz");
        std::fs::copy(&exe, &binary).map_err(|e| io("copying this binary to", &binary, e))?;
        let first = self.seeds.0;
        let args: Vec<String> = self.budget_args().iter().map(|a| quote(a)).collect();
        // The status is written last, through a rename: its presence says the seed is done.
        let script = format!(
            "#!/bin/sh\n# One seed of a `cargo hostfuzz --slurm` campaign.\n\
             seed=$(({first} + SLURM_ARRAY_TASK_ID))\n\
             out={dir}/seed-$seed\n\
             mkdir -p \"$out\"\n\
             HOSTFUZZ_OUT=\"$out\" {bin} --seed \"$seed\" {args}\n\
             echo $? > \"$out/status.tmp\" && mv \"$out/status.tmp\" \"$out/status\"\n",
            dir = quote(&dir.display().to_string()),
            bin = quote(&binary.display().to_string()),
            args = args.join(" "),
        );
        let script_path = dir.join("task.sh");
        std::fs::write(&script_path, script).map_err(|e| io("writing", &script_path, e))?;
        std::fs::set_permissions(&script_path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| io("making executable", &script_path, e))?;
        let array = Array {
            name: format!("hostfuzz-{first}-{}", self.seeds.1),
            partition: self.partition.clone(),
            tasks: self.tasks(),
            script: script_path,
            output_dir: dir.clone(),
            cwd: root.to_path_buf(),
            time_limit: self.task_limit(),
            cpus_per_task: 1,
        };
        let job = array.submit().map_err(|e| format!("--slurm: submitting the array: {e}"))?;
        eprintln!(
            "hostfuzz: slurm job {} runs seeds {first}..{} as {} array tasks; outputs in {}",
            job.id,
            self.seeds.1,
            self.tasks(),
            dir.display()
        );
        let seed_dir = |k: u32| dir.join(format!("seed-{}", first + k as u64));
        let deadline = self.queue + self.task_limit() * self.tasks();
        let started = Instant::now();
        // A first Ctrl-C (or SIGTERM) cancels the array and the seeds that finished are
        // reported; a second ends this process at once.
        let stop = testbench_slurm::watch_interrupts();
        let followed = job
            .follow(deadline, |k| seed_dir(k).join("status").is_file(), stop, |_| {})
            .map_err(|e| format!("--slurm: following job {}: {e}", job.id))?;
        eprintln!("hostfuzz: slurm job {} ended in {:.1}s", job.id, started.elapsed().as_secs_f64());
        let mut worst = 0u8;
        let (mut clean, mut found, mut unfinished) = (0, 0, 0);
        for k in 0..self.tasks() {
            let seed = first + k as u64;
            let status = std::fs::read_to_string(seed_dir(k).join("status")).ok();
            let code = status.as_deref().and_then(|s| s.trim().parse::<u8>().ok());
            let again = format!("cargo hostfuzz --seed {seed} {}", args.join(" "));
            match code {
                Some(0) => {
                    clean += 1;
                    println!("seed {seed}: nothing found");
                }
                Some(code @ (1 | 3)) => {
                    found += 1;
                    worst = worst.max(code);
                    let what = if code == 1 { "a finding" } else { "a hang" };
                    println!("seed {seed}: {what}");
                    for line in finding_lines(&array.output_of(k)) {
                        println!("  {line}");
                    }
                    println!("  again: {again}");
                }
                _ => {
                    unfinished += 1;
                    let why = match (&followed, code) {
                        (_, Some(code)) => format!("it exited {code}"),
                        (Followed::Deadline { waiting, after }, None) => format!(
                            "the job did not end within its deadline of {}s ({}); cancelled",
                            after.as_secs(),
                            waiting.get(&k).map_or("ended", String::as_str)
                        ),
                        (Followed::Interrupted { waiting }, None) => format!(
                            "interrupted while it was {}; the job was cancelled",
                            waiting.get(&k).map_or("unreported", String::as_str)
                        ),
                        (_, None) => "it ended without its status".to_string(),
                    };
                    println!("seed {seed}: no result: {why}; its output: {}", array.output_of(k).display());
                    for line in testbench_slurm::output_tail(&array.output_of(k), 5) {
                        println!("  | {line}");
                    }
                    println!("  again: {again}");
                }
            }
        }
        let summary = format!(
            "hostfuzz --slurm: {} seeds: {clean} clean, {found} with a finding or hang, {unfinished} without a result (in {})",
            self.tasks(),
            dir.display()
        );
        println!("{summary}");
        // Written last: the campaign is over and reported, and a later campaign may prune it.
        let _ = std::fs::write(dir.join(JOINED), format!("{summary}\n"));
        Ok(if unfinished > 0 { EXIT_UNFINISHED.max(worst) } else { worst })
    }
}

/// How many joined campaign directories a new campaign leaves in place.
const KEEP: usize = 10;
/// The file the submitter writes into a campaign's directory once it has joined and
/// reported it: only such a directory is ever pruned (one without it may still have an
/// array running, or a finding nobody has read).
const JOINED: &str = "joined";

/// Removes the joined campaign directories (`slurm-<secs>-<pid>` with a [`JOINED`]
/// file) under `campaigns` but the `keep` newest; returns those removed.
fn prune(campaigns: &Path, keep: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(campaigns) else {
        return Vec::new();
    };
    let mut joined: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (secs, pid) = name.strip_prefix("slurm-")?.split_once('-')?;
            pid.parse::<u32>().ok()?;
            let path = e.path();
            let real = e.file_type().ok()?.is_dir() && path.join(JOINED).is_file();
            real.then_some((secs.parse().ok()?, path))
        })
        .collect();
    joined.sort_by(|a, b| b.cmp(a));
    let mut removed = Vec::new();
    for (_, path) in joined.into_iter().skip(keep) {
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// A finding's lines in a task's output: the FINDING or HANG line and what follows it
/// (input, shrunk, replay), each path absolute already (the task's `HOSTFUZZ_OUT`).
fn finding_lines(output: &Path) -> Vec<String> {
    let text = std::fs::read(output).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.contains(": FINDING at seed ") || line.contains(": HANG at seed ") {
            inside = true;
            lines.push(line.to_string());
        } else if inside && line.starts_with("  ") {
            lines.push(line.trim_start().to_string());
        } else {
            inside = false;
        }
    }
    lines
}

/// The repository's root: the working directory `cargo hostfuzz` runs in.
pub fn root() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_a_bounded_range() {
        assert_eq!(parse_seeds("1..20"), Ok((1, 20)));
        assert_eq!(parse_seeds("7..7"), Ok((7, 7)));
        assert!(parse_seeds("5..1").unwrap_err().contains("empty"));
        assert!(parse_seeds("3,4").unwrap_err().contains("accepted"));
        assert!(parse_seeds("1..x").unwrap_err().contains("\"x\" is not a seed"));
        assert!(parse_seeds("0..1000").unwrap_err().contains("more than 1000"));
    }

    #[test]
    fn only_joined_campaigns_past_the_newest_are_pruned() {
        let root = std::env::temp_dir().join(format!("hostfuzz-slurm-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let make = |name: &str, joined: bool| {
            let dir = root.join(name);
            std::fs::create_dir_all(dir.join("seed-1")).unwrap();
            if joined {
                std::fs::write(dir.join(JOINED), "done\n").unwrap();
            }
        };
        make("slurm-100-7", true);
        make("slurm-200-7", true);
        make("slurm-300-8", true);
        make("slurm-150-9", false); // a campaign not joined: still running, or its submitter died
        make("findings", true); // not a campaign's
        std::fs::write(root.join("slurm-50-1"), "a file, not a campaign").unwrap();
        let removed = prune(&root, 2);
        assert_eq!(removed, vec![root.join("slurm-100-7")]);
        for kept in ["slurm-200-7", "slurm-300-8", "slurm-150-9", "findings", "slurm-50-1"] {
            assert!(root.join(kept).exists(), "{kept} was removed");
        }
        assert!(prune(&root, 2).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_tasks_findings_are_gathered_with_their_replay_lines() {
        let dir = std::env::temp_dir().join(format!("hostfuzz-slurm-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("task-0.out");
        std::fs::write(
            &out,
            "canary: FINDING at seed 3 iteration 12: oracle: the canary\n  input: /x/canary-3-12.hex (9 bytes, 9 read)\n  shrunk: /x/canary-3-12.min.hex (1 bytes, 4 tries)\n  replay: cargo hostfuzz --replay canary /x/canary-3-12.min.hex\ncanary: 13 inputs from seed 3: a finding\n  ended: ok 12\n",
        )
        .unwrap();
        let lines = finding_lines(&out);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[3], "replay: cargo hostfuzz --replay canary /x/canary-3-12.min.hex");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
