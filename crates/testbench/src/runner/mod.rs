//! One run, start to end: load and check every case, choose the boots, build what they
//! boot (each distinct build once), probe QEMU and the firmware per width, boot (up to
//! `--jobs` at once), and report in the planned order.
//!
//! Everything a user can get wrong is refused before the first build: the case files,
//! the paths they name, the command line.
//!
//! [`run`] is the chain: the cases read; `--list`; [`Intake`] (the selection, every
//! refusal, the prebuilt directory); then one executor per mode: `--prebuild`
//! (`make_prebuilt.rs`), a `--slurm` submission (`slurm.rs`: the array submitted, the host
//! cases run [`Here`]), or [`Here`], this machine (the host cases, the builds, the boots
//! of the whole plan or of a `--slurm-task`'s slice). Each reports through the one
//! [`Reporter`]. What the run holds meanwhile (its directory, QMP's, ports) is [`Ground`].
//!
//! The steps, each in its module: `intake` (the cases, the selection, every refusal),
//! `plan` (the boots and host runs, their replay lines), `prepare` (builds, probes,
//! firmware, each boot's `BootSpec`), `pool` (boots at once, results in order),
//! `alone` (a boot that timed out beside others, booted again alone), `classify` (a
//! failure booted once more to class it: deterministic, host-dependent), `verdicts` (a
//! result's worth as a `Verdict`, and its report), `other_benches` (q's other benches),
//! `make_prebuilt` (the `--prebuild` executor), `slurm` (the submission and a task).

mod alone;
mod classify;
mod intake;
mod make_prebuilt;
mod other_benches;
mod plan;
mod pool;
mod prepare;
mod slurm;
mod verdicts;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use testbench_case::{Case, Kind};

use crate::build::Builder;
use crate::cli::{NoTests, Options};
use crate::error::{BenchError, Finished};
use crate::report::Reporter;
use crate::workspace::Workspace;

use intake::why_empty;
use plan::PlannedBoot;

/// Say why the bench stopped and give its exit status: refusals all together (one
/// `error:` line each, one JSON event, a JUnit report that says so when one was asked
/// for, and `report.html` with the boots so far once the run had a directory); any other
/// trouble on one `error:` line.
pub fn report_error(reporter: &mut Reporter, error: BenchError) -> i32 {
    match &error {
        BenchError::Refused(errors) => reporter.refused(errors),
        _ => eprintln!("error: {error}"),
    }
    error.exit_status()
}

/// The cases directory's quarantine (quarantine.rs), refused when it cannot be used or
/// when an entry of a selected case has expired.
fn quarantine_of(ws: &Workspace, selected: &[&Case]) -> Result<Option<crate::quarantine::Quarantine>, BenchError> {
    let quarantine = crate::quarantine::load(&ws.cases_dir).map_err(|e| BenchError::Refused(vec![e.to_string()]))?;
    if let Some(quarantine) = &quarantine {
        let names: Vec<&str> = selected.iter().map(|c| c.name.as_str()).collect();
        let expired = quarantine.expired(&names, crate::quarantine::today());
        if !expired.is_empty() {
            return Err(BenchError::Refused(expired.iter().map(ToString::to_string).collect()));
        }
    }
    Ok(quarantine)
}

/// The run proper: every case's verdict reported, or why the bench stopped. Intake (the
/// cases read, the selection and every refusal), then one executor for the mode: the
/// list, `--prebuild`, a `--slurm` submission, or the boots here (a `--slurm-task`'s
/// slice, or the whole plan).
pub fn run(ws: &Workspace, options: &Options, reporter: &mut Reporter) -> Result<Finished, BenchError> {
    let started = Instant::now();
    let loaded = match (&options.prebuilt, &options.filter) {
        (Some(_), crate::cli::Filter::Exact(name)) if ws.cases_dir.join(format!("{name}.toml")).is_file() => {
            intake::load_cases_named(&ws.cases_dir, Some(name))
        }
        _ => intake::load_cases(&ws.cases_dir),
    };
    if options.list {
        if !loaded.refusals.is_empty() {
            return Err(BenchError::Refused(loaded.refusals.clone()));
        }
        // With a FILTER, the cases whose names hold it (those run by name only too, still
        // marked); with --exact, that one case (or the refusal a run would give).
        let listed: Vec<testbench_case::Case> = match &options.filter {
            crate::cli::Filter::All => loaded.cases.clone(),
            crate::cli::Filter::Contains(text) => {
                loaded.cases.iter().filter(|c| c.name.contains(text.as_str())).cloned().collect()
            }
            exact @ crate::cli::Filter::Exact(_) => intake::select(&loaded.cases, exact, &ws.cases_dir)
                .map_err(|why| BenchError::Refused(vec![why]))?
                .into_iter()
                .cloned()
                .collect(),
        };
        reporter.list(&listed);
        return Ok(Finished::Passed);
    }
    let Some(intake) = Intake::take(&loaded, ws, options)? else {
        // Nothing to run, and --no-tests allows it.
        return Ok(Finished::Passed);
    };
    if let Some(dir) = &options.prebuild {
        return make_prebuilt::make(dir, ws, &intake.selected, options, reporter, None);
    }
    // --coverage without its plugin is a host lack, said before anything builds.
    let cover_plugin = match options.coverage {
        true => Some(crate::coverage::plugin().map_err(|why| BenchError::Refused(vec![why]))?),
        false => None,
    };
    let quarantine = quarantine_of(ws, &intake.selected)?;
    reporter.set_quarantine(quarantine.clone());
    if let Some(slurm) = &options.slurm {
        slurm::check(slurm)?;
    }
    // One task of a --slurm array: its place, and the submitter's plan.
    let task = options.slurm_task.as_deref().map(slurm::Task::open).transpose()?;
    let ground = Ground::make(ws, options, &intake.selected, task.as_ref())?;
    // Every result kept in the history; a task's by the run that joins the array's.
    if options.slurm_task.is_none() {
        reporter.add(Box::new(crate::history::keep::Keeper::for_run(ws, options, quarantine.as_ref())?));
    }
    let boots = plan::plan(&intake.selected, options, &ground.run_dir, intake.env_seed);
    if let Some(recording) = &options.rr_replay {
        plan::check_rr_replay(recording, &boots)?;
    }
    if options.gdb.is_some() {
        plan::check_gdb(&boots)?;
        reporter.no_progress();
    }
    // A task boots its slice and runs no host case (the submitter runs those); it saves
    // its reports as they come.
    let (boots, host_runs) = match task {
        Some(mut task) => {
            let slice = task.take(&intake.selected, boots)?;
            reporter.add(Box::new(task));
            (slice, Vec::new())
        }
        None => (boots, plan::plan_host(&intake.selected, options)),
    };
    let sweep = options.sweep.as_deref().zip(intake.selected.first().map(|case| case.name.as_str()));
    let html = crate::report::Html::new(&ground.run_dir, started, sweep.map(|(s, c)| (c, s)));
    let html = match &options.slurm_task {
        None => html.with_history(crate::history::path(&ws.root, options.history.as_deref())),
        Some(_) => html,
    };
    reporter.add(Box::new(html));
    reporter.run_started(&ground.run_dir, &plan::rows(&intake.selected, &host_runs, &boots));
    if let (Some(note), None) = (plan::sweep_note(&intake.selected, options), &options.slurm_task) {
        reporter.note(crate::events::Note::Sweep, &note);
    }
    let mut builder = Builder::new(&ws.root, &ground.run_dir);
    builder.line_tables = options.coverage;
    let cover_plugin = cover_plugin.as_deref();
    let here = Here { ws, options, intake: &intake, ground: &ground, host_runs: &host_runs, cover_plugin };
    if let Some(slurm) = &options.slurm {
        intake.tree_ok().map_err(|why| BenchError::Refused(vec![why]))?;
        let run_dir = ground.run_dir.clone();
        let submission = slurm::Submission { ws, options, slurm, selected: &intake.selected, boots, run_dir };
        slurm::submit(submission, reporter, |reporter| here.run_host_cases(reporter, &mut builder))?;
    } else {
        here.run_local(reporter, &mut builder, &boots)?;
    }
    finish(options, reporter, &intake.selected, started, &ground.run_dir, ground.pruning)
}

/// What intake gave the run: the selected cases, the environment's seed, and the
/// prebuilt directory the run boots from (with the check that it is this tree's).
struct Intake<'a> {
    selected: Vec<&'a Case>,
    env_seed: Option<u64>,
    prebuilt: Option<crate::prebuilt::Index>,
    /// Whether the tree changed since the prebuilt directory was made: asked on a thread
    /// of its own, and answered before any result is reported.
    tree: Option<crate::prebuilt::TreeCheck>,
}

impl<'a> Intake<'a> {
    /// The prebuilt directory checked first (another workspace's is refused saying why),
    /// then the selection with every refusal together; nothing to run is refused unless
    /// `--no-tests` allows it (then there is no intake: the run ends).
    fn take(loaded: &'a intake::Loaded, ws: &Workspace, options: &Options) -> Result<Option<Intake<'a>>, BenchError> {
        let (prebuilt, tree) = match &options.prebuilt {
            Some(dir) => {
                let (index, tree) =
                    crate::prebuilt::open(dir, &ws.root).map_err(|why| BenchError::Refused(vec![why.to_string()]))?;
                (Some(index), Some(tree))
            }
            None => (None, None),
        };
        let intake::Selection { selected, env_seed } = intake::take(loaded, ws, options)?;
        if let Some(why) = why_empty(loaded, &selected, options, &ws.cases_dir) {
            return match options.no_tests {
                NoTests::Fail => Err(BenchError::NoCases(why)),
                NoTests::Warn => {
                    eprintln!("warning: nothing to run: {why}");
                    Ok(None)
                }
                NoTests::Pass => Ok(None),
            };
        }
        Ok(Some(Intake { selected, env_seed, prebuilt, tree }))
    }

    /// Whether the prebuilt directory is this tree's (always, without one).
    fn tree_ok(&self) -> Result<(), String> {
        self.tree.as_ref().map_or(Ok(()), |tree| tree.result().map_err(|e| e.to_string()))
    }
}

/// What the run holds while it runs: its directory, the QMP socket directory, the host
/// ports and the other benches beside it under q.
struct Ground {
    run_dir: std::path::PathBuf,
    pruning: Option<std::thread::JoinHandle<()>>,
    qmp_dir: Option<Arc<crate::qemu::qmp::QmpDir>>,
    ports: crate::boot::parts::net::Ports,
    /// Which boots ran beside others (and, under q, beside other benches' boots).
    overlap: alone::Overlap,
}

impl Ground {
    /// Everything the run holds, each refused in words before anything builds: the QMP
    /// socket directory (a temporary directory too deep for a socket's path), a port
    /// lease too short for `--jobs` boots of the most demanding case, q's environment;
    /// then the run directory (a task's is its place in the submitting run's, and it
    /// prunes nothing).
    fn make(
        ws: &Workspace,
        options: &Options,
        selected: &[&Case],
        task: Option<&slurm::Task>,
    ) -> Result<Ground, BenchError> {
        let refused = |error: String| BenchError::Refused(vec![error]);
        let tmp = std::env::temp_dir();
        crate::qemu::qmp::sweep_stale(&tmp);
        let qmp_dir = if options.slurm.is_none() && selected.iter().any(|c| c.as_boot().is_some()) {
            Some(Arc::new(crate::qemu::qmp::QmpDir::create(&tmp).map_err(|e| refused(e.to_string()))?))
        } else {
            None
        };
        let per_boot =
            selected.iter().filter_map(|c| c.as_boot()).map(crate::boot::parts::host_ports).max().unwrap_or(0);
        let ports =
            crate::boot::parts::net::Ports::from_env(options.jobs, per_boot).map_err(|e| refused(e.to_string()))?;
        // Under q beside other benches: their boots count as beside this run's.
        let others = other_benches::OtherBenches::from_env().map_err(|e| refused(e.to_string()))?;
        let (run_dir, pruning) = match task {
            Some(task) => (task.run_dir.clone(), None),
            None => crate::rundir::create_pruning_aside(&ws.root).map(|(dir, pruning)| (dir, Some(pruning)))?,
        };
        Ok(Ground { run_dir, pruning, qmp_dir, ports, overlap: alone::Overlap::new(others) })
    }
}

/// The executor that runs on this machine: the host cases, then the builds and the boots.
struct Here<'a> {
    ws: &'a Workspace,
    options: &'a Options,
    intake: &'a Intake<'a>,
    ground: &'a Ground,
    host_runs: &'a [(usize, Option<testbench_case::Arch>)],
    /// `--coverage`'s plugin.
    cover_plugin: Option<&'a Path>,
}

impl Here<'_> {
    /// The host cases, then every boot of `boots` (a task's slice, or the whole plan),
    /// each reported in the planned order.
    fn run_local(
        &self,
        reporter: &mut Reporter,
        builder: &mut Builder,
        boots: &[PlannedBoot],
    ) -> Result<(), BenchError> {
        let selected = &self.intake.selected;
        let probes = prepare::start_probes(boots, selected, &self.ground.run_dir);
        self.say_ssh(reporter);
        if !self.host_runs.is_empty() {
            self.intake.tree_ok().map_err(|why| BenchError::Refused(vec![why]))?;
        }
        self.run_host_cases(reporter, builder);
        // Build what the boots need, each distinct build once, while the probes run; then
        // a width whose QEMU cannot run, or a missing firmware, blocks the boot whatever
        // it built.
        let mut prepared = match (&self.intake.prebuilt, &self.options.prebuilt) {
            (Some(index), Some(dir)) => prepare::from_index(boots, selected, index, dir),
            _ => prepare::prepare_all(boots, selected, self.ws, &self.ground.run_dir, builder, reporter),
        };
        prepare::block_on_host_lacks(&mut prepared, probes, selected, self.ws, reporter);
        let mut jobs =
            prepare::jobs(boots, selected, &prepared, self.ws, self.ground.qmp_dir.as_ref(), &self.ground.ports);
        let coverage = self.cover_plugin.map(|plugin| prepare::coverage(&mut jobs, plugin));
        if let Some(recording) = &self.options.rr_replay {
            // A recording replays only the files it was made of (boot/recording.rs).
            for (spec, _) in jobs.iter().flatten() {
                crate::boot::recording::check(recording, &spec.machine, &self.ws.root)
                    .map_err(|e| BenchError::Replay(e.to_string()))?;
            }
        }
        if let Some(wait) = self.options.gdb {
            // The one boot (plan::check_gdb) waits for the debugger, and is booted once: a
            // session at the debugger is not a repeat.
            for (spec, repeat) in jobs.iter_mut().flatten() {
                spec.gdb = Some(wait);
                *repeat = false;
            }
        }
        if let Some(why) = self.boot_all(reporter, boots, jobs) {
            // Said as a refusal: the boots reported so far are on the page, with why.
            return Err(BenchError::Refused(vec![why]));
        }
        if let Some(coverage) = coverage {
            let boots = reporter.reports().iter().map(|r| (r.dir.as_path(), r.label()));
            let summary = coverage.finish(boots, &self.ground.run_dir);
            reporter.coverage(summary);
        }
        Ok(())
    }

    /// The host's ssh, asked once for the run's sessions: the run's output says what it
    /// is and whether the sessions pass WarnWeakCrypto (why not, when they do not).
    fn say_ssh(&self, reporter: &mut Reporter) {
        let sessions = |case: &&Case| match &case.kind {
            Kind::Boot(boot) => !boot.sessions.is_empty(),
            Kind::SshLoopback(_) => true,
            _ => false,
        };
        if self.intake.selected.iter().any(sessions) {
            match crate::ssh::Client::once() {
                Ok(client) => reporter.note(crate::events::Note::Ssh, &client.note()),
                Err(lack) => reporter.note(crate::events::Note::Ssh, &format!("ssh: {lack}")),
            }
        }
    }

    /// Boot up to `--jobs` at once; report in the planned order. Why the run stopped,
    /// when the tree's check refused it on the way.
    fn boot_all(
        &self,
        reporter: &mut Reporter,
        boots: &[PlannedBoot],
        jobs: Vec<Result<prepare::BootJob, crate::case_result::Blocked>>,
    ) -> Option<String> {
        let (selected, options) = (&self.intake.selected, self.options);
        let starting = |boot: &PlannedBoot| format!("{} {} smp{}", selected[boot.case].name, boot.arch, boot.smp);
        if let Some(first) = boots.first() {
            reporter.boot_started(&starting(first), first.seed);
        }
        let boot = |(index, job): (usize, _)| {
            // The first --jobs boots start beside the tree's check; no later one starts
            // once it has refused the run.
            if index >= options.jobs {
                if let Err(why) = self.intake.tree_ok() {
                    return verdicts::Booted::blocked(crate::case_result::Blocked::Build(why));
                }
            }
            let must_fail = selected[boots[index].case].must_fail.as_ref().map(|p| &p.regex);
            alone::boot(&self.ground.overlap, index, job, &self.ws.root, must_fail)
        };
        let mut refused = None;
        pool::run_in_order(jobs.into_iter().enumerate().collect(), options.jobs, boot, |index, result, took| {
            if let Err(why) = self.intake.tree_ok() {
                refused.get_or_insert(why);
                return;
            }
            let planned = &boots[index];
            let report = verdicts::boot_report(selected[planned.case], planned, result, took, self.ws, options);
            reporter.boot_finished(report);
            if let Some(next) = boots.get(index + 1) {
                reporter.boot_started(&starting(next), next.seed);
            }
        });
        refused
    }

    /// The cases that boot nothing, one after another, in name order; the ssh-loopback
    /// cases among them share the run's loopback server (its probe, once).
    fn run_host_cases(&self, reporter: &mut Reporter, builder: &mut Builder) {
        let mut loopback = crate::loopback::Loopback::default();
        for &(index, arch) in self.host_runs {
            let case = self.intake.selected[index];
            let report = run_host_case(
                self.ws,
                self.options,
                reporter,
                &self.ground.run_dir,
                builder,
                &mut loopback,
                case,
                arch,
            );
            reporter.boot_finished(report);
        }
    }
}

/// The run's end: the sweep's line, every sink's end (`report.html`, JUnit, a task's
/// save, the summary), and the verdict.
fn finish(
    options: &Options,
    reporter: &mut Reporter,
    selected: &[&Case],
    started: Instant,
    run_dir: &Path,
    pruning: Option<std::thread::JoinHandle<()>>,
) -> Result<Finished, BenchError> {
    let sweep = options.sweep.as_deref().zip(selected.first().map(|case| case.name.as_str()));
    // A task's sweep line would speak of its slice alone; the submitter says the sweep's.
    if let (Some((seeds, case)), None) = (sweep, &options.slurm_task) {
        reporter.sweep_summary(case, seeds);
    }
    let written = reporter.run_finished(started.elapsed(), run_dir);
    if let Some(pruning) = pruning {
        let _ = pruning.join();
    }
    written?;
    // A failing boot's logs that --keep-failed could not copy: the bench's trouble.
    if let Some(trouble) = options.keep_failed.as_ref().and_then(crate::cli::KeepFailed::trouble) {
        return Err(trouble);
    }
    // The bench's own trouble outranks any verdict: the run could not say them all.
    let troubled: Vec<_> = reporter
        .reports()
        .iter()
        .filter_map(|r| match &r.verdict {
            crate::verdict::Verdict::Trouble(why) => Some((r.label(), why.lines().next().unwrap_or_default())),
            _ => None,
        })
        .collect();
    if let Some((_, first)) = troubled.first() {
        let first = first.to_string();
        return Err(BenchError::Ran { labels: troubled.into_iter().map(|(label, _)| label).collect(), first });
    }
    Ok(if reporter.summary().failed > 0 { Finished::Failed } else { Finished::Passed })
}

/// One case that boots nothing, run on this machine: its report.
#[allow(clippy::too_many_arguments)]
fn run_host_case(
    ws: &Workspace,
    options: &Options,
    reporter: &mut Reporter,
    run_dir: &Path,
    builder: &mut Builder,
    loopback: &mut crate::loopback::Loopback,
    case: &Case,
    arch: Option<testbench_case::Arch>,
) -> crate::report::BootReport {
    let label = match arch {
        Some(arch) => format!("{} {arch}", case.name),
        None => format!("{} host", case.name),
    };
    reporter.boot_started(&label, None);
    let started_case = Instant::now();
    let ctx = crate::host::HostContext { root: &ws.root, dir: run_dir.join(&case.name) };
    let mut log = |line: &str| reporter.note(crate::events::Note::Host, line);
    let mut notes = Vec::new();
    let result = match (&case.kind, arch) {
        (Kind::HostTests(host), _) => crate::host::run_host_tests(&case.name, host, &ctx, &mut log),
        (Kind::Build(build), Some(arch)) => crate::host::run_build(build, arch, builder, &mut log),
        (Kind::Scripts(scripts), _) => crate::host::run_scripts(scripts, &ctx, &mut log),
        (Kind::Gate(gate), _) => crate::host::run_gate(gate, &ctx, &mut log),
        (Kind::SshLoopback(case), Some(_)) => {
            let (result, case_notes) = loopback.run(case, &ws.root, run_dir, &ctx.dir, &mut log);
            notes = case_notes;
            result
        }
        _ => unreachable!("plan_host plans host kinds only, a build or ssh-loopback case with its width"),
    };
    let mut report = verdicts::host_report(case, arch, result, started_case.elapsed(), ctx.dir, ws, options);
    report.notes = notes;
    report
}
