//! One run, start to end: load and check every case, choose the boots, build what they
//! boot (each distinct build once), probe QEMU and the firmware per width, boot (up to
//! `--jobs` at once), and report in the planned order.
//!
//! Everything a user can get wrong is refused before the first build: the case files,
//! the paths they name, the command line.
//!
//! The steps, each in its module: `intake` (the cases, the selection, every refusal),
//! `plan` (the boots and host runs, their replay lines), `prepare` (builds, probes,
//! firmware, each boot's `BootSpec`), `pool` (boots at once, results in order),
//! `alone` (a boot that timed out beside others, booted again alone), `outcome` (a
//! verdict's worth and its report).

mod alone;
mod company;
mod intake;
mod outcome;
mod plan;
mod pool;
mod prebuild;
mod prepare;
mod slurm;

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
/// `error:` line each, one JSON event, and a JUnit report that says so when one was asked
/// for); any other trouble on one `error:` line.
pub fn report_error(reporter: &mut Reporter, junit: Option<&Path>, error: BenchError) -> i32 {
    match &error {
        BenchError::Refused(errors) => {
            reporter.refused(errors);
            // Not to a path that was itself refused (said among the refusals).
            if let Some(path) = junit.filter(|path| crate::cli::check_junit(path).is_ok()) {
                if let Err(junit_error) = reporter.write_junit(path) {
                    eprintln!("error: {junit_error}");
                }
            }
        }
        _ => eprintln!("error: {error}"),
    }
    error.exit_status()
}

/// The run proper: every case's verdict reported, or why the bench stopped.
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
        reporter.list(&loaded.cases);
        return Ok(Finished::Passed);
    }
    // A prebuilt directory is checked before anything else: another workspace's is
    // refused saying why. Whether the tree changed since it was made is asked on a
    // thread of its own (`tree`), and answered before any result is reported.
    let (prebuilt, tree) = match &options.prebuilt {
        Some(dir) => {
            let (index, tree) = crate::prebuilt::open(dir, &ws.root).map_err(|why| BenchError::Refused(vec![why]))?;
            (Some(index), Some(tree))
        }
        None => (None, None),
    };
    let tree_ok = || tree.as_ref().map_or(Ok(()), |tree| tree.result());
    let intake::Taken { selected, env_seed } = intake::take(&loaded, ws, options)?;
    if let Some(why) = why_empty(&loaded, &selected, options, &ws.cases_dir) {
        return match options.no_tests {
            NoTests::Fail => Err(BenchError::NoCases(why)),
            NoTests::Warn => {
                eprintln!("warning: nothing to run: {why}");
                Ok(Finished::Passed)
            }
            NoTests::Pass => Ok(Finished::Passed),
        };
    }

    if let Some(dir) = &options.prebuild {
        return prebuild::prebuild(dir, ws, &selected, options, reporter, None);
    }
    if let Some(slurm) = &options.slurm {
        slurm::check(slurm)?;
    }
    // One task of a --slurm array: its place, and the submitter's plan.
    let mut task = options.slurm_task.as_deref().map(slurm::Task::open).transpose()?;

    // The run's private directory for QMP sockets (qmp.rs), made before anything builds
    // so that a temporary directory too deep for a socket's path is refused first.
    let tmp = std::env::temp_dir();
    crate::qemu::qmp::sweep_stale(&tmp);
    let qmp_dir = if options.slurm.is_none() && selected.iter().any(|c| c.as_boot().is_some()) {
        Some(Arc::new(crate::qemu::qmp::QmpDir::create(&tmp).map_err(|error| BenchError::Refused(vec![error]))?))
    } else {
        None
    };

    // The host ports the boots' forwards take: a lease too short for --jobs boots of the
    // most demanding case is refused before anything builds.
    let per_boot = selected.iter().filter_map(|c| c.as_boot()).map(crate::devices::host_ports).max().unwrap_or(0);
    let ports = crate::devices::net::Ports::from_env(options.jobs, per_boot)
        .map_err(|error| BenchError::Refused(vec![error]))?;
    // Under q beside other benches: their boots count as beside this run's.
    let company = company::Company::from_env().map_err(|error| BenchError::Refused(vec![error]))?;

    // A task's run directory is its place in the submitting run's; it prunes nothing.
    let (run_dir, pruning) = match &task {
        Some(task) => (task.run_dir.clone(), None),
        None => crate::rundir::create_pruning_aside(&ws.root).map(|(dir, pruning)| (dir, Some(pruning)))?,
    };
    let boots = plan::plan(&selected, options, &run_dir, env_seed);
    if let Some(recording) = &options.rr_replay {
        plan::check_rr_replay(recording, &boots)?;
    }
    // A task boots its slice and runs no host case (the submitter runs those).
    let (boots, host_runs) = match &mut task {
        Some(task) => (task.take(&selected, boots)?, Vec::new()),
        None => (boots, plan::plan_host(&selected, options)),
    };
    reporter.run_started(&run_dir, &plan::rows(&selected, &host_runs, &boots));
    if let (Some(note), None) = (plan::sweep_note(&selected, options), &options.slurm_task) {
        reporter.note("sweep", &note);
    }
    let mut builder = Builder::new(&ws.root, &run_dir);
    if let Some(slurm) = &options.slurm {
        tree_ok().map_err(|why| BenchError::Refused(vec![why]))?;
        let submission = slurm::Submission { ws, options, slurm, selected: &selected, boots, run_dir: run_dir.clone() };
        slurm::submit(submission, reporter, |reporter| {
            let mut loopback = crate::loopback::Loopback::default();
            run_host_cases(ws, options, reporter, &selected, &host_runs, &run_dir, &mut builder, &mut loopback);
        })?;
        return finish(options, reporter, &selected, started, &run_dir, pruning);
    }
    let probes = prepare::start_probes(&boots, &selected, &run_dir);
    // The host's ssh, asked once for the run's sessions: the run's output says what it
    // is and whether the sessions pass WarnWeakCrypto (why not, when they do not).
    let sessions = |case: &&Case| match &case.kind {
        Kind::Boot(boot) => !boot.sessions.is_empty(),
        Kind::SshLoopback(_) => true,
        _ => false,
    };
    if selected.iter().any(sessions) {
        match crate::ssh::Client::once() {
            Ok(client) => reporter.note("ssh", &client.note()),
            Err(lack) => reporter.note("ssh", &format!("ssh: {lack}")),
        }
    }

    // The cases that boot nothing run first, one after another, in name order; the
    // ssh-loopback cases among them share the run's loopback server (its probe, once).
    let mut loopback = crate::loopback::Loopback::default();
    if !host_runs.is_empty() {
        tree_ok().map_err(|why| BenchError::Refused(vec![why]))?;
    }
    run_host_cases(ws, options, reporter, &selected, &host_runs, &run_dir, &mut builder, &mut loopback);

    // Build what the boots need, each distinct build once, while the probes run; then a
    // width whose QEMU cannot run, or a missing firmware, blocks the boot whatever it built.
    let mut prepared = match (&prebuilt, &options.prebuilt) {
        (Some(index), Some(dir)) => prepare::from_index(&boots, &selected, index, dir),
        _ => prepare::prepare_all(&boots, &selected, ws, &run_dir, &mut builder, reporter),
    };
    prepare::block_on_host_lacks(&mut prepared, probes, &selected, ws, reporter);

    // Boot, up to --jobs at once; report in the planned order.
    let jobs = prepare::jobs(&boots, &selected, &prepared, ws, qmp_dir.as_ref(), &ports);
    let starting = |boot: &PlannedBoot| format!("{} {} smp{}", selected[boot.case].name, boot.arch, boot.smp);
    if let Some(first) = boots.first() {
        reporter.boot_started(&starting(first), first.seed);
    }
    let crowd = alone::Crowd::new(company);
    let boot = |(index, job): (usize, _)| {
        // The first --jobs boots start beside the tree's check; no later one starts once
        // it has refused the run.
        if index >= options.jobs {
            if let Err(why) = tree_ok() {
                return outcome::Booted::blocked(crate::case_result::Blocked::Build(why));
            }
        }
        let must_fail = selected[boots[index].case].must_fail.as_ref().map(|p| &p.regex);
        alone::boot(&crowd, index, job, &ws.root, must_fail)
    };
    let jobs: Vec<_> = jobs.into_iter().enumerate().collect();
    let mut refused = None;
    pool::run_in_order(jobs, options.jobs, boot, |index, result, took| {
        if let Err(why) = tree_ok() {
            refused.get_or_insert(why);
            return;
        }
        let planned = &boots[index];
        reporter.boot_finished(outcome::boot_report(selected[planned.case], planned, result, took, ws, options));
        if let Some(task) = &task {
            if let Err(error) = task.save(reporter.reports()) {
                reporter.note("slurm", &format!("error: {error}"));
            }
        }
        if let Some(next) = boots.get(index + 1) {
            reporter.boot_started(&starting(next), next.seed);
        }
    });
    let sweep = options.sweep.as_deref().zip(selected.first().map(|case| case.name.as_str()));
    if let Some(why) = refused {
        // The boots reported so far are on the page, with why the run stopped.
        write_html(reporter, &run_dir, started, sweep, Some(why.clone()));
        return Err(BenchError::Refused(vec![why]));
    }
    if let Some(task) = &task {
        task.done(reporter.reports())?;
    }
    finish(options, reporter, &selected, started, &run_dir, pruning)
}

/// The run's end: the sweep's line, the summary, `report.html`, JUnit, and the verdict.
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
    let html = write_html(reporter, run_dir, started, sweep, None);
    reporter.run_finished(started.elapsed(), run_dir, html.as_deref());
    if let Some(pruning) = pruning {
        let _ = pruning.join();
    }
    if let Some(path) = &options.junit {
        reporter.write_junit(path)?;
    }
    // A failing boot's logs that --keep-failed could not copy: the bench's trouble.
    if let Some(trouble) = options.keep_failed.as_ref().and_then(crate::cli::KeepFailed::trouble) {
        return Err(trouble);
    }
    Ok(if reporter.summary.failed > 0 { Finished::Failed } else { Finished::Passed })
}

/// The cases that boot nothing, one after another, in name order.
#[allow(clippy::too_many_arguments)]
fn run_host_cases(
    ws: &Workspace,
    options: &Options,
    reporter: &mut Reporter,
    selected: &[&Case],
    host_runs: &[(usize, Option<testbench_case::Arch>)],
    run_dir: &Path,
    builder: &mut Builder,
    loopback: &mut crate::loopback::Loopback,
) {
    for &(index, arch) in host_runs {
        let case = selected[index];
        let label = match arch {
            Some(arch) => format!("{} {arch}", case.name),
            None => format!("{} host", case.name),
        };
        reporter.boot_started(&label, None);
        let started_case = Instant::now();
        let ctx = crate::host::HostContext { root: &ws.root, dir: run_dir.join(&case.name) };
        let mut log = |line: &str| reporter.note("host", line);
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
        let mut report = outcome::host_report(case, arch, result, started_case.elapsed(), ctx.dir, ws, options);
        report.notes = notes;
        reporter.boot_finished(report);
    }
}

/// `report.html` in the run directory (crate::report_html); a page that cannot be
/// written is said on stderr and fails nothing.
fn write_html(
    reporter: &Reporter,
    run_dir: &Path,
    started: Instant,
    sweep: Option<(&[u64], &str)>,
    stopped: Option<String>,
) -> Option<std::path::PathBuf> {
    let info = crate::report_html::RunInfo {
        run_dir,
        took: started.elapsed(),
        summary: reporter.summary,
        sweep: sweep.map(|(seeds, case)| (case, seeds)),
        stopped,
    };
    match crate::report_html::write(&info, reporter.reports()) {
        Ok(path) => Some(path),
        Err(error) => {
            eprintln!("warning: could not write {}: {error}", run_dir.join(crate::report_html::REPORT_FILE).display());
            None
        }
    }
}
