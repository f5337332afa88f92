//! `--slurm`: a run's boots as a Slurm job array (docs/scale.md), and one task of it.
//!
//! The submitting run plans the boots as any run does, prebuilds what they boot (or
//! takes `--prebuilt DIR`), writes the plan and the tasks' script into its run directory
//! (on storage every node shares), submits the array with `testbench_slurm`, runs the
//! host cases itself while the array runs, and follows the array under a deadline. Each
//! task runs the prebuilt bench with `--slurm-task RUN_DIR`: it plans the same boots,
//! checks they are the submitter's, boots its slice (every N-th in the planned order)
//! in `RUN_DIR/task-K/`, and saves each boot's report there as it finishes. The
//! submitter then reports every boot in the planned order (seed order in a sweep), one
//! summary, one JUnit, one exit status; a boot whose task gave no report fails, saying
//! which task, what Slurm last said of it and where its output is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use testbench_case::Case;
use testbench_slurm::{Array, Followed, Job, Place};

use super::plan::{self, PlannedBoot};
use crate::cli::{Filter, Options, Slurm, SLURM_DEFAULT_TASKS};
use crate::error::BenchError;
use crate::events::Note;
use crate::process::shell_quote;
use crate::report::{BootReport, Reporter};
use crate::verdict::{FailKind, Failed, Verdict};
use crate::workspace::Workspace;

/// The plan a --slurm run leaves for its tasks, in its run directory.
const PLAN: &str = "slurm/plan.json";
/// The script every task runs.
const SCRIPT: &str = "slurm/task.sh";
/// A task's reports so far, in its directory.
const RESULTS: &str = "results.json";
/// Written once a task has reported every boot of its slice.
const DONE: &str = "done";
/// What a task may take beyond its boots' deadlines (its bench's start, the QEMU probes).
const TASK_SLACK: Duration = Duration::from_secs(300);

#[derive(Serialize, Deserialize)]
struct PlanFile {
    tasks: u32,
    /// Each planned boot, as `case arch smpN seed S`, in the planned order.
    boots: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Results {
    /// The planned index of each report, in the order the task finished them.
    reports: Vec<(usize, BootReport)>,
}

fn boot_key(selected: &[&Case], boot: &PlannedBoot) -> String {
    format!("{} {} smp{} {}", selected[boot.case].name, boot.arch, boot.smp, crate::report::seed_text(boot.seed, true))
}

fn task_dir(run_dir: &Path, index: u32) -> PathBuf {
    run_dir.join(format!("task-{index}"))
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// One task of a --slurm array: its place, its directory, and the submitter's plan.
pub struct Task {
    pub place: Place,
    /// This task's own run directory, `RUN_DIR/task-K`.
    pub run_dir: PathBuf,
    plan: PlanFile,
    /// The planned index of each boot of the slice.
    indices: Vec<usize>,
}

impl Task {
    /// Find this task's place and the submitter's plan; make its directory and keep the
    /// submitting run's heartbeat.
    pub fn open(submitted: &Path) -> Result<Task, BenchError> {
        let refused = |why: String| BenchError::Refused(vec![format!("--slurm-task {}: {why}", submitted.display())]);
        let place = Place::from_env().ok_or_else(|| {
            refused("runs only as a task of a Slurm job array (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT unset or out of range)".into())
        })?;
        let path = submitted.join(PLAN);
        let text = std::fs::read_to_string(&path).map_err(|e| refused(format!("{}: {e}", path.display())))?;
        let plan: PlanFile =
            serde_json::from_str(&text).map_err(|e| refused(format!("{}: not a plan: {e}", path.display())))?;
        if plan.tasks != place.tasks {
            return Err(refused(format!("the plan is for {} tasks and this array has {}", plan.tasks, place.tasks)));
        }
        let run_dir = task_dir(submitted, place.index);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| BenchError::io(format!("--slurm-task: creating {}", run_dir.display()), e))?;
        crate::rundir::heartbeat(submitted);
        Ok(Task { place, run_dir, plan, indices: Vec::new() })
    }

    /// This task's slice of the boots, after checking they are the ones the submitter
    /// planned (the same cases, options and seeds): a task that would boot anything else
    /// is refused.
    pub fn take(&mut self, selected: &[&Case], boots: Vec<PlannedBoot>) -> Result<Vec<PlannedBoot>, BenchError> {
        let keys: Vec<String> = boots.iter().map(|boot| boot_key(selected, boot)).collect();
        if keys != self.plan.boots {
            let differ = keys.iter().zip(&self.plan.boots).find(|(a, b)| a != b);
            return Err(BenchError::Refused(vec![format!(
                "--slurm-task: this task plans {} boots and the submitter planned {}{}: the cases or the tree changed since the submission",
                keys.len(),
                self.plan.boots.len(),
                differ.map(|(a, b)| format!(" (here {a:?}, there {b:?})")).unwrap_or_default()
            )]));
        }
        self.indices = testbench_slurm::slice(boots.len(), self.place.index, self.place.tasks);
        let mut boots: Vec<Option<PlannedBoot>> = boots.into_iter().map(Some).collect();
        Ok(self.indices.iter().map(|&i| boots[i].take().expect("a slice names each boot once")).collect())
    }

    /// Save the reports so far (rewritten whole after each boot, so a task stopped by
    /// its time limit still leaves what it finished).
    pub fn save(&self, reports: &[BootReport]) -> Result<(), BenchError> {
        let results =
            Results { reports: self.indices.iter().copied().zip(reports.iter().cloned()).collect::<Vec<_>>() };
        let path = self.run_dir.join(RESULTS);
        let text = serde_json::to_string(&results).expect("reports serialize");
        write_atomically(&path, &text)
            .map_err(|e| BenchError::io(format!("--slurm-task: writing {}", path.display()), e))
    }

    /// Say the slice is whole.
    pub fn done(&self, reports: &[BootReport]) -> Result<(), BenchError> {
        self.save(reports)?;
        let path = self.run_dir.join(DONE);
        std::fs::write(&path, b"").map_err(|e| BenchError::io(format!("--slurm-task: writing {}", path.display()), e))
    }
}

/// A task is a sink of its own run: its reports saved after each boot (a save that fails
/// is said as a note, and the next one tries again), its slice said whole at the end.
impl crate::report::Sink for Task {
    fn boot_finished(&mut self, _report: &BootReport, all: &[BootReport]) -> Result<(), (Note, BenchError)> {
        self.save(all).map_err(|error| (Note::Slurm, error))
    }

    fn run_finished(&mut self, end: &mut crate::report::RunEnd) -> Result<(), BenchError> {
        self.done(end.reports)
    }
}

/// The arguments that make a task plan exactly the submitter's boots.
fn selection_args(options: &Options, ws: &Workspace) -> Vec<String> {
    let mut args = Vec::new();
    match &options.filter {
        Filter::All => {}
        Filter::Contains(text) => args.push(text.clone()),
        Filter::Exact(name) => args.extend(["--exact".to_string(), name.clone()]),
    }
    if let Some(arch) = options.arch {
        args.extend(["--arch".to_string(), arch.name().to_string()]);
    }
    if let Some(smp) = options.smp {
        args.extend(["--smp".to_string(), smp.to_string()]);
    }
    if let Some(seeds) = &options.sweep {
        let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
        args.extend(["--sweep".to_string(), list.join(",")]);
    }
    if let Some(dir) = &ws.cases_flag {
        args.extend(["--cases".to_string(), dir.display().to_string()]);
    }
    if options.allow_skip {
        args.push("--allow-skip".to_string());
    }
    args.extend(["--jobs".to_string(), options.jobs.to_string()]);
    args
}

/// Everything a --slurm run needs from the run that calls it.
pub struct Submission<'a> {
    pub ws: &'a Workspace,
    pub options: &'a Options,
    pub slurm: &'a Slurm,
    pub selected: &'a [&'a Case],
    pub boots: Vec<PlannedBoot>,
    pub run_dir: PathBuf,
}

/// What a --slurm run needs of the cluster, asked before anything is made or built:
/// Slurm's commands, and the partition when one is named.
pub fn check(slurm: &Slurm) -> Result<(), BenchError> {
    let refused = |why: String| BenchError::Refused(vec![format!("--slurm: {why}")]);
    if let Some(missing) = testbench_slurm::missing_command() {
        return Err(refused(format!(
            "{missing} is not on the PATH: install Slurm's client commands (Debian: slurm-client) or run without --slurm"
        )));
    }
    if let Some(partition) = &slurm.partition {
        match testbench_slurm::partitions() {
            Ok(known) if !known.contains(partition) => {
                return Err(refused(format!(
                    "--slurm-partition {partition:?}: no such partition; Slurm has: {}",
                    known.join(", ")
                )))
            }
            Ok(_) => {}
            Err(e) => return Err(refused(format!("asking Slurm for its partitions: {e}"))),
        }
    }
    Ok(())
}

/// Submit the boots as an array, run `host_cases` meanwhile, follow the array and join
/// its tasks' reports into this run's, in the planned order.
pub fn submit(
    sub: Submission<'_>,
    reporter: &mut Reporter,
    host_cases: impl FnOnce(&mut Reporter),
) -> Result<(), BenchError> {
    let Submission { ws, options, slurm, selected, boots, run_dir } = sub;
    let refused = |why: String| BenchError::Refused(vec![format!("--slurm: {why}")]);
    if boots.is_empty() {
        host_cases(reporter);
        return Ok(());
    }
    // What the tasks boot: the given prebuilt directory, or one made here, in the run's
    // directory, from this tree.
    let prebuilt = match &options.prebuilt {
        Some(dir) => dir.clone(),
        None => {
            let dir = run_dir.join("prebuilt");
            super::make_prebuilt::make(&dir, ws, selected, options, reporter, Some(&run_dir))?;
            dir
        }
    };
    let tasks = slurm.tasks.unwrap_or_else(|| (boots.len() as u32).min(SLURM_DEFAULT_TASKS)).max(1);
    let slurm_dir = run_dir.join("slurm");
    let script_path = write_task_files(ws, options, selected, &boots, &run_dir, &prebuilt, tasks)?;
    // Each task's limit: its slice's deadlines and some slack; the wait: the queue's
    // allowance and every task's limit end to end (the cluster may run one at a time).
    let limits: Vec<Duration> = (0..tasks)
        .map(|k| {
            testbench_slurm::slice(boots.len(), k, tasks).iter().map(|&i| boots[i].timeout).sum::<Duration>()
                + TASK_SLACK
        })
        .collect();
    let array = Array {
        name: format!("testbench-{}", run_dir.file_name().unwrap_or_default().to_string_lossy()),
        partition: slurm.partition.clone(),
        tasks,
        script: script_path,
        output_dir: slurm_dir.clone(),
        cwd: ws.root.clone(),
        time_limit: limits.iter().copied().max().unwrap_or(TASK_SLACK),
        cpus_per_task: options.jobs as u32,
    };
    let job = array.submit().map_err(|e| refused(format!("submitting the array: {e}")))?;
    reporter.note(
        crate::events::Note::Slurm,
        &format!(
            "slurm: job {} runs {} boots as {tasks} array tasks{}; their outputs in {}",
            job.id,
            boots.len(),
            slurm.partition.as_deref().map(|p| format!(" on partition {p}")).unwrap_or_default(),
            slurm_dir.display()
        ),
    );

    host_cases(reporter);

    let deadline = Duration::from_secs(slurm.queue_secs) + limits.iter().sum::<Duration>();
    let started = Instant::now();
    let reported = |k: u32| task_dir(&run_dir, k).join(DONE).is_file();
    // While the array runs, a first Ctrl-C (or SIGTERM) cancels it and the run reports
    // what the tasks finished; a second ends the bench at once.
    let stop = testbench_slurm::watch_interrupts();
    let followed = job
        .follow(deadline, reported, stop, |done| {
            reporter.waiting(&format!("slurm job {}: {done}/{tasks} tasks reported", job.id))
        })
        .map_err(|e| BenchError::Slurm(format!("--slurm: following job {}: {e}", job.id)))?;
    reporter.note(
        crate::events::Note::Slurm,
        &format!("slurm: job {} ended in {:.1}s ({})", job.id, started.elapsed().as_secs_f64(), describe(&followed)),
    );
    let joined = join(&run_dir, &job, &array, &followed, &boots);
    for (planned, report) in boots.iter().zip(joined) {
        let report = report.unwrap_or_else(|why| unjoined(ws, selected, planned, why));
        reporter.boot_finished(report);
    }
    Ok(())
}

/// The files an array's tasks read, in the run directory: the plan (every boot's key,
/// the task count) and the tasks' script (this bench's prebuilt copy, `--slurm-task`);
/// the script's path. The Slurm outputs' folder is made too.
fn write_task_files(
    ws: &Workspace,
    options: &Options,
    selected: &[&Case],
    boots: &[PlannedBoot],
    run_dir: &Path,
    prebuilt: &Path,
    tasks: u32,
) -> Result<PathBuf, BenchError> {
    let io = |what: &str, path: &Path, e| BenchError::io(format!("--slurm: {what} {}", path.display()), e);
    let slurm_dir = run_dir.join("slurm");
    std::fs::create_dir_all(&slurm_dir).map_err(|e| io("creating", &slurm_dir, e))?;
    let plan = PlanFile { tasks, boots: boots.iter().map(|boot| boot_key(selected, boot)).collect() };
    let plan_path = run_dir.join(PLAN);
    write_atomically(&plan_path, &serde_json::to_string_pretty(&plan).expect("a plan serializes"))
        .map_err(|e| io("writing", &plan_path, e))?;
    let mut line = vec![
        prebuilt.join(crate::prebuilt::BENCH).display().to_string(),
        "--prebuilt".into(),
        prebuilt.display().to_string(),
        "--slurm-task".into(),
        run_dir.display().to_string(),
        "--color".into(),
        "never".into(),
    ];
    line.extend(selection_args(options, ws));
    let quoted: Vec<String> = line.iter().map(|word| shell_quote(word)).collect();
    let script = format!(
        "#!/bin/sh\n# One task of a `cargo testbench --slurm` array: it boots its slice from the prebuilt directory.\nexport TESTBENCH_ROOT={} TESTBENCH_NO_SETUP=1\nexec {}\n",
        shell_quote(&ws.root.display().to_string()),
        quoted.join(" ")
    );
    let script_path = run_dir.join(SCRIPT);
    std::fs::write(&script_path, script).map_err(|e| io("writing", &script_path, e))?;
    std::fs::set_permissions(&script_path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| io("making executable", &script_path, e))?;
    Ok(script_path)
}

/// The report of a boot whose task said nothing of it: a failure saying why.
fn unjoined(ws: &Workspace, selected: &[&Case], planned: &PlannedBoot, why: String) -> BootReport {
    let case = selected[planned.case];
    let (replay, replay_note) = plan::replay_line(case, planned, ws);
    BootReport {
        case: case.name.clone(),
        kind: "boot",
        arch: Some(planned.arch.name().to_string()),
        smp: Some(planned.smp),
        seed: planned.seed,
        verdict: Verdict::Fail(Failed::new(FailKind::Unreported, why)),
        duration: Duration::ZERO,
        dir: planned.dir.clone(),
        replay,
        replay_note,
        sweep: planned.seed_from == plan::SeedFrom::Sweep,
        console_tail: Vec::new(),
        notes: Vec::new(),
        class: Some(crate::verdict::Class::BenchOrHost),
        quarantined: None,
    }
}

fn describe(followed: &Followed) -> String {
    match followed {
        Followed::Reported => "every task reported".into(),
        Followed::Ended { missing } => format!("tasks {missing:?} ended without reporting every boot"),
        Followed::Deadline { waiting, after } => {
            format!("its deadline of {}s passed with {} task(s) unreported: cancelled", after.as_secs(), waiting.len())
        }
        Followed::Interrupted { waiting } => {
            format!("interrupted with {} task(s) unreported: cancelled", waiting.len())
        }
    }
}

/// Each planned boot's report, or why its task gave none.
fn join(
    run_dir: &Path,
    job: &Job,
    array: &Array,
    followed: &Followed,
    boots: &[PlannedBoot],
) -> Vec<Result<BootReport, String>> {
    let tasks = job.tasks;
    let mut joined: Vec<Result<BootReport, String>> = (0..boots.len()).map(|_| Err(String::new())).collect();
    for k in 0..tasks {
        let dir = task_dir(run_dir, k);
        let results: Option<Results> =
            std::fs::read_to_string(dir.join(RESULTS)).ok().and_then(|text| serde_json::from_str(&text).ok());
        for (index, report) in results.map(|r| r.reports).unwrap_or_default() {
            if index < boots.len() && index % tasks as usize == k as usize {
                joined[index] = Ok(report);
            }
        }
        let why_none = |_: ()| {
            let output = array.output_of(k);
            let state = match followed {
                Followed::Deadline { waiting, after } => match waiting.get(&k) {
                    Some(state) => format!(
                        "the job did not end within its deadline of {}s and this task was {state}; the job was cancelled (scancel {})",
                        after.as_secs(),
                        job.id
                    ),
                    None => "the task ended without reporting this boot".to_string(),
                },
                Followed::Interrupted { waiting } => format!(
                    "the run was interrupted while this task was {}; the job was cancelled (scancel {})",
                    waiting.get(&k).map_or("unreported", String::as_str),
                    job.id
                ),
                _ => "the task ended without reporting this boot".to_string(),
            };
            let mut why = format!(
                "Slurm task {k} of job {} gave no result for this boot: {state}; its output: {}",
                job.id,
                output.display()
            );
            for line in testbench_slurm::output_tail(&output, 5) {
                why.push_str(&format!("\n| {line}"));
            }
            why
        };
        for index in testbench_slurm::slice(boots.len(), k, tasks) {
            if joined[index].is_err() {
                joined[index] = Err(why_none(()));
            }
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_task_fails_its_boots_by_name_and_the_others_are_joined_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path();
        let report = |seed: u64| BootReport {
            case: "c".into(),
            kind: "boot",
            arch: Some("rv64".into()),
            smp: Some(1),
            seed: Some(seed),
            verdict: Verdict::Pass,
            duration: Duration::from_millis(1500),
            dir: run_dir.join(format!("task-x/seed-{seed}")),
            replay: format!("cargo testbench --exact c --sweep {seed}"),
            replay_note: None,
            sweep: true,
            console_tail: Vec::new(),
            notes: vec!["a note".into()],
            class: None,
            quarantined: None,
        };
        // Two tasks of five boots: task 0 has 0, 2, 4 and reported all; task 1 (1, 3)
        // reported boot 1 only, then stopped.
        for (k, indices) in [(0u32, vec![0usize, 2, 4]), (1, vec![1])] {
            let dir = task_dir(run_dir, k);
            std::fs::create_dir_all(&dir).unwrap();
            let results = Results { reports: indices.iter().map(|&i| (i, report(100 + i as u64))).collect() };
            std::fs::write(dir.join(RESULTS), serde_json::to_string(&results).unwrap()).unwrap();
        }
        std::fs::create_dir_all(run_dir.join("slurm")).unwrap();
        std::fs::write(run_dir.join("slurm/task-1.out"), "booting\nkilled by the time limit\n").unwrap();
        let job = Job { id: "77".into(), tasks: 2 };
        let array = Array {
            name: "t".into(),
            partition: None,
            tasks: 2,
            script: run_dir.join(SCRIPT),
            output_dir: run_dir.join("slurm"),
            cwd: run_dir.to_path_buf(),
            time_limit: Duration::from_secs(60),
            cpus_per_task: 1,
        };
        let boots: Vec<PlannedBoot> = (0..5)
            .map(|i| PlannedBoot {
                case: 0,
                arch: testbench_case::Arch::Rv64,
                smp: 1,
                seed: Some(100 + i),
                seed_from: plan::SeedFrom::Sweep,
                timeout: Duration::from_secs(10),
                dir: run_dir.join(format!("seed-{i}")),
                rr: Ok(None),
            })
            .collect();
        let followed = Followed::Ended { missing: vec![1] };
        let joined = join(run_dir, &job, &array, &followed, &boots);
        let seeds: Vec<Option<u64>> = joined.iter().map(|r| r.as_ref().ok().and_then(|r| r.seed)).collect();
        assert_eq!(seeds, vec![Some(100), Some(101), Some(102), None, Some(104)]);
        let why = joined[3].as_ref().unwrap_err();
        assert!(why.starts_with("Slurm task 1 of job 77 gave no result for this boot"), "{why}");
        assert!(why.contains("task-1.out") && why.contains("| killed by the time limit"), "{why}");
        assert_eq!(joined[2].as_ref().unwrap().duration, Duration::from_millis(1500));
        assert_eq!(joined[2].as_ref().unwrap().notes, vec!["a note".to_string()]);
        // A report a task claims for another task's boot is not taken.
        let dir = task_dir(run_dir, 0);
        let results = Results { reports: vec![(3, report(999))] };
        std::fs::write(dir.join(RESULTS), serde_json::to_string(&results).unwrap()).unwrap();
        let followed = Followed::Deadline {
            waiting: [(1, "RUNNING".to_string())].into_iter().collect(),
            after: Duration::from_secs(30),
        };
        let joined = join(run_dir, &job, &array, &followed, &boots);
        assert!(joined[3].is_err(), "task 0's report for boot 3 was taken");
        let why = joined[3].as_ref().unwrap_err();
        assert!(why.contains("deadline of 30s and this task was RUNNING") && why.contains("scancel 77"), "{why}");
        assert!(joined[0].as_ref().unwrap_err().contains("task 0 of job 77"), "{:?}", joined[0]);
    }

    #[test]
    fn a_task_that_plans_other_boots_than_the_submitter_is_refused() {
        let case = testbench_case::parse(
            "tests/c.toml",
            "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [{ package = \"smoke\", bin = \"smoke\" }]\nexpect = [\"x\"]\n",
        );
        let Ok(case) = case else { panic!("the fixture case parses: {case:?}") };
        let selected = [&case];
        let boots = |seeds: std::ops::RangeInclusive<u64>| -> Vec<PlannedBoot> {
            seeds
                .map(|seed| PlannedBoot {
                    case: 0,
                    arch: testbench_case::Arch::Rv64,
                    smp: 1,
                    seed: Some(seed),
                    seed_from: plan::SeedFrom::Sweep,
                    timeout: Duration::from_secs(10),
                    dir: PathBuf::from(format!("seed-{seed}")),
                    rr: Ok(None),
                })
                .collect()
        };
        let planned = PlanFile { tasks: 2, boots: boots(1..=5).iter().map(|b| boot_key(&selected, b)).collect() };
        let mut task = Task {
            place: Place { job: "1".into(), index: 1, tasks: 2 },
            run_dir: PathBuf::from("task-1"),
            plan: planned,
            indices: Vec::new(),
        };
        let error = task.take(&selected, boots(1..=6)).err().expect("six boots against five planned");
        assert!(error.to_string().contains("plans 6 boots and the submitter planned 5"), "{error}");
        let error = task.take(&selected, boots(2..=6)).err().expect("other seeds");
        assert!(error.to_string().contains("seed 2") && error.to_string().contains("seed 1"), "{error}");
        let slice = task.take(&selected, boots(1..=5)).unwrap();
        let seeds: Vec<Option<u64>> = slice.iter().map(|b| b.seed).collect();
        assert_eq!(seeds, vec![Some(2), Some(4)]);
    }
}
