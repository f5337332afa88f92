//! Slurm job arrays, as the bench and hostfuzz use them (docs/scale.md).
//!
//! The scheduler is Slurm's own: this crate only runs its commands (`sbatch`, `squeue`,
//! `scancel`) through the repository's process wrapper. A job array is submitted with
//! one script; each task finds its place from the environment Slurm gives it
//! ([`Place::from_env`]); the submitter follows the array with `squeue` until every task
//! has reported (the caller's test, a file per task on shared storage) or none is left,
//! under a deadline that cancels the job and says which tasks it waited for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbench_process::Cmd;

/// The most tasks one array may have: a typo such as `--slurm-tasks 40000` is refused.
pub const MAX_TASKS: u32 = 1000;

/// How long one of Slurm's commands may take before the bench gives up on it.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

/// How often the array is asked about while it runs.
const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Command(#[from] testbench_process::CmdError),
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed { command: String, status: std::process::ExitStatus, stderr: String },
    #[error("`{command}` answered {answer:?}, not {wanted}")]
    Answer { command: String, answer: String, wanted: &'static str },
}

/// A job array to submit: `tasks` tasks of one script, each writing Slurm's own output
/// (the script's stdout and stderr) to `<output_dir>/task-<index>.out`.
#[derive(Clone, Debug)]
pub struct Array {
    pub name: String,
    /// The partition, or Slurm's default.
    pub partition: Option<String>,
    pub tasks: u32,
    /// The script every task runs (`#!` first line).
    pub script: PathBuf,
    /// Where Slurm writes each task's output; on storage every node shares.
    pub output_dir: PathBuf,
    /// Each task's working directory.
    pub cwd: PathBuf,
    /// Each task's time limit (rounded up to whole minutes, Slurm's unit): past it Slurm
    /// ends the task.
    pub time_limit: Duration,
    /// CPUs each task asks for.
    pub cpus_per_task: u32,
}

impl Array {
    /// Where task `index` writes its output.
    pub fn output_of(&self, index: u32) -> PathBuf {
        self.output_dir.join(format!("task-{index}.out"))
    }

    /// The `sbatch` command line that submits the array.
    pub fn command(&self) -> Cmd {
        let minutes = self.time_limit.as_secs().div_ceil(60).max(1);
        let mut cmd = Cmd::new("sbatch", format!("sbatch submitting the job array {}", self.name), COMMAND_DEADLINE)
            .arg("--parsable")
            .arg(format!("--job-name={}", self.name))
            .arg(format!("--array=0-{}", self.tasks.saturating_sub(1)))
            .arg(format!("--time={minutes}"))
            .arg(format!("--cpus-per-task={}", self.cpus_per_task))
            .arg("--ntasks=1")
            .arg(format!("--chdir={}", self.cwd.display()))
            .arg(format!("--output={}", self.output_dir.join("task-%a.out").display()))
            .arg("--export=ALL");
        if let Some(partition) = &self.partition {
            cmd = cmd.arg(format!("--partition={partition}"));
        }
        cmd.arg(&self.script)
    }

    /// Submit the array; its job ID.
    pub fn submit(&self) -> Result<Job, Error> {
        if self.tasks == 0 || self.tasks > MAX_TASKS {
            return Err(Error::Answer {
                command: "sbatch".into(),
                answer: self.tasks.to_string(),
                wanted: "1 to 1000 tasks",
            });
        }
        let cmd = self.command();
        let out = run(&cmd)?;
        // --parsable prints `<jobid>` or `<jobid>;<cluster>`.
        let id = out.trim().split(';').next().unwrap_or_default().to_string();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::Answer { command: cmd.display(), answer: out, wanted: "a job ID" });
        }
        Ok(Job { id, tasks: self.tasks })
    }
}

/// A submitted array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: String,
    pub tasks: u32,
}

/// What following an array came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Followed {
    /// Every task reported.
    Reported,
    /// Slurm has no task of the job left, and these did not report.
    Ended { missing: Vec<u32> },
    /// The deadline passed with these tasks still queued or running, in these states;
    /// the job was cancelled.
    Deadline { waiting: BTreeMap<u32, String>, after: Duration },
    /// The caller was interrupted (Ctrl-C) with these tasks unreported, in these
    /// states; the job was cancelled.
    Interrupted { waiting: BTreeMap<u32, String> },
}

impl Job {
    /// The states of the array's tasks Slurm still holds (pending, running, completing):
    /// task index to state, with the reason for a pending one.
    pub fn states(&self) -> Result<BTreeMap<u32, String>, Error> {
        let cmd = Cmd::new("squeue", format!("squeue asking about job {}", self.id), COMMAND_DEADLINE)
            .args(["--noheader", "--array", "--format=%K %T %r", "--jobs"])
            .arg(&self.id);
        let output = cmd.output()?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            // A job Slurm has forgotten already (MinJobAge) is a job with nothing left.
            if stderr.contains("Invalid job id") {
                return Ok(BTreeMap::new());
            }
            return Err(Error::Failed { command: cmd.display(), status: output.status, stderr });
        }
        Ok(parse_states(&stdout, self.tasks))
    }

    /// Follow the array until `reported(index)` holds for every task, or Slurm holds no
    /// task of it any more, or `deadline` passes, or `interrupted()` holds (then cancel
    /// the job). `progress` hears the count of tasks reported whenever it changes.
    pub fn follow(
        &self,
        deadline: Duration,
        reported: impl Fn(u32) -> bool,
        interrupted: impl Fn() -> bool,
        mut progress: impl FnMut(u32),
    ) -> Result<Followed, Error> {
        let started = Instant::now();
        let mut told = None;
        let mut last_states = BTreeMap::new();
        loop {
            let unreported = |states: BTreeMap<u32, String>| -> BTreeMap<u32, String> {
                states.into_iter().filter(|(i, _)| !reported(*i)).collect()
            };
            if interrupted() {
                // What the tasks are doing now, not at the last look (half a second ago).
                let now = self.states().unwrap_or(last_states);
                self.cancel()?;
                return Ok(Followed::Interrupted { waiting: unreported(now) });
            }
            // Asked before the reports: a task that reports and then leaves the queue
            // between the two looks is seen as reported, never as missing.
            let states = match self.states() {
                Ok(states) => states,
                // Ctrl-C reaches squeue too (the terminal's whole process group).
                Err(_) if interrupted() => continue,
                Err(error) => return Err(error),
            };
            last_states = states.clone();
            let missing: Vec<u32> = (0..self.tasks).filter(|&i| !reported(i)).collect();
            let done = self.tasks - missing.len() as u32;
            if told != Some(done) {
                progress(done);
                told = Some(done);
            }
            if missing.is_empty() {
                return Ok(Followed::Reported);
            }
            if states.is_empty() {
                // One more look: a report renamed into place just as the queue emptied.
                let missing: Vec<u32> = missing.into_iter().filter(|&i| !reported(i)).collect();
                return Ok(if missing.is_empty() { Followed::Reported } else { Followed::Ended { missing } });
            }
            if started.elapsed() >= deadline {
                let waiting = states.into_iter().filter(|(i, _)| missing.contains(i)).collect();
                self.cancel()?;
                return Ok(Followed::Deadline { waiting, after: deadline });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Cancel the whole array.
    pub fn cancel(&self) -> Result<(), Error> {
        run(&Cmd::new("scancel", format!("scancel cancelling job {}", self.id), COMMAND_DEADLINE).arg(&self.id))
            .map(drop)
    }
}

/// `squeue --array --format="%K %T %r"` lines: the array index, the state and the
/// reason. A pending array not yet split shows its indices as a range (`0-3`, `4-7%2`,
/// `1,3,5`); each index of it gets the line's state.
pub fn parse_states(text: &str, tasks: u32) -> BTreeMap<u32, String> {
    let mut states = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(indices), Some(state)) = (words.next(), words.next()) else { continue };
        let reason: Vec<&str> = words.collect();
        let state = match reason.as_slice() {
            [] | ["None"] => state.to_string(),
            reason => format!("{state} ({})", reason.join(" ")),
        };
        let indices = indices.trim_start_matches('[').trim_end_matches(']');
        let indices = indices.split('%').next().unwrap_or_default();
        for part in indices.split(',') {
            let range = match part.split_once('-') {
                Some((low, high)) => low.parse::<u32>().ok().zip(high.parse::<u32>().ok()),
                None => part.parse::<u32>().ok().map(|i| (i, i)),
            };
            if let Some((low, high)) = range {
                for index in low..=high.min(tasks.saturating_sub(1)) {
                    states.insert(index, state.clone());
                }
            }
        }
    }
    states
}

/// Where this process is in a job array, from the environment Slurm gives a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub job: String,
    pub index: u32,
    pub tasks: u32,
}

impl Place {
    /// `SLURM_ARRAY_JOB_ID`, `SLURM_ARRAY_TASK_ID` and `SLURM_ARRAY_TASK_COUNT`; `None`
    /// outside an array task, or when they do not make sense together.
    pub fn from_env() -> Option<Place> {
        let var = |name: &str| std::env::var(name).ok();
        Place::from_values(
            var("SLURM_ARRAY_JOB_ID").as_deref(),
            var("SLURM_ARRAY_TASK_ID").as_deref(),
            var("SLURM_ARRAY_TASK_COUNT").as_deref(),
        )
    }

    pub fn from_values(job: Option<&str>, index: Option<&str>, tasks: Option<&str>) -> Option<Place> {
        let index: u32 = index?.trim().parse().ok()?;
        let tasks: u32 = tasks?.trim().parse().ok()?;
        (index < tasks).then(|| Place { job: job.unwrap_or_default().to_string(), index, tasks })
    }
}

/// Which of `count` items (in their planned order) task `index` of `tasks` takes: every
/// `tasks`-th from its own index, so a slice mixes early and late seeds, cheap and dear
/// cases, and the slices differ in length by one at most.
pub fn slice(count: usize, index: u32, tasks: u32) -> Vec<usize> {
    (index as usize..count).step_by(tasks.max(1) as usize).collect()
}

/// The last `lines` lines of a task's output, for a failure that names it.
pub fn output_tail(path: &Path, lines: usize) -> Vec<String> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    let tail = &bytes[bytes.len().saturating_sub(64 * 1024)..];
    let text = String::from_utf8_lossy(tail);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].iter().map(|line| line.to_string()).collect()
}

fn run(cmd: &Cmd) -> Result<String, Error> {
    let output = cmd.output()?;
    if !output.status.success() {
        return Err(Error::Failed {
            command: cmd.display(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// SIGINT and SIGTERM while an array is followed: the first sets the flag this returns
/// (give it to [`Job::follow`], which then cancels the job), a second ends the process
/// at once, as if nothing were watching.
pub fn watch_interrupts() -> impl Fn() -> bool {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_default(signal, Arc::clone(&interrupted));
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupted));
    }
    move || interrupted.load(Ordering::SeqCst)
}

/// The cluster's partitions, by name (`sinfo`).
pub fn partitions() -> Result<Vec<String>, Error> {
    let out =
        run(&Cmd::new("sinfo", "sinfo listing the partitions", COMMAND_DEADLINE).args(["--noheader", "--format=%R"]))?;
    Ok(out.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
}

/// Whether Slurm's commands are here at all: the first that is not, for a refusal.
pub fn missing_command() -> Option<&'static str> {
    ["sbatch", "squeue", "scancel", "sinfo"].into_iter().find(|name| testbench_process::on_path(name).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_give_each_index_its_state() {
        let text = "[4-6%2] PENDING JobArrayTaskLimit\n0 RUNNING None\n1 COMPLETING None\n[8,9] PENDING Resources\n";
        let states = parse_states(text, 10);
        assert_eq!(states[&0], "RUNNING");
        assert_eq!(states[&1], "COMPLETING");
        assert_eq!(states[&4], "PENDING (JobArrayTaskLimit)");
        assert_eq!(states[&6], "PENDING (JobArrayTaskLimit)");
        assert_eq!(states[&9], "PENDING (Resources)");
        assert!(!states.contains_key(&2) && !states.contains_key(&7), "{states:?}");
        // An index past the array is not invented.
        assert!(parse_states("[0-99] PENDING None", 3).keys().eq([0, 1, 2].iter()));
        assert!(parse_states("garbage\n\n", 3).is_empty());
    }

    #[test]
    fn slices_cover_every_item_once() {
        for (count, tasks) in [(20, 4), (7, 3), (2, 5), (0, 2), (21, 4)] {
            let mut seen: Vec<usize> = (0..tasks).flat_map(|i| slice(count, i, tasks)).collect();
            let lengths: Vec<usize> = (0..tasks).map(|i| slice(count, i, tasks).len()).collect();
            seen.sort();
            assert_eq!(seen, (0..count).collect::<Vec<_>>(), "count {count} tasks {tasks}");
            let (min, max) = (lengths.iter().min().unwrap(), lengths.iter().max().unwrap());
            assert!(max - min <= 1, "{lengths:?}");
        }
        assert_eq!(slice(20, 1, 4), vec![1, 5, 9, 13, 17]);
    }

    #[test]
    fn a_place_needs_an_index_inside_its_count() {
        assert_eq!(
            Place::from_values(Some("12"), Some("3"), Some("4")),
            Some(Place { job: "12".into(), index: 3, tasks: 4 })
        );
        assert_eq!(Place::from_values(Some("12"), Some("4"), Some("4")), None);
        assert_eq!(Place::from_values(Some("12"), None, Some("4")), None);
        assert_eq!(Place::from_values(None, Some("x"), Some("4")), None);
    }

    #[test]
    fn the_submission_names_the_array_its_limit_and_its_outputs() {
        let array = Array {
            name: "testbench".into(),
            partition: Some("tb".into()),
            tasks: 4,
            script: "/shared/run/slurm/task.sh".into(),
            output_dir: "/shared/run/slurm".into(),
            cwd: "/shared/ws".into(),
            time_limit: Duration::from_secs(61),
            cpus_per_task: 1,
        };
        let line = array.command().display();
        for part in [
            "--array=0-3",
            "--time=2",
            "--partition=tb",
            "--output=/shared/run/slurm/task-%a.out",
            "--chdir=/shared/ws",
            "/shared/run/slurm/task.sh",
        ] {
            assert!(line.contains(part), "{part} missing from {line}");
        }
        assert_eq!(array.output_of(2), PathBuf::from("/shared/run/slurm/task-2.out"));
    }
}
