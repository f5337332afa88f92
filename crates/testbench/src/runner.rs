//! One run, start to end: load and check every case, choose the boots, build what they
//! boot (each distinct build once), probe QEMU and the firmware per width, boot (up to
//! `--jobs` at once), and report in the planned order.
//!
//! Everything a user can get wrong is refused before the first build: the case files,
//! the paths they name, the command line.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use testbench_case::{Arch, BootCase, Case, Firmware, Guest, GuestImage, Kind, ProgramEntry};
use testbench_judge::{Config as JudgeConfig, Input as JudgeInput, Pattern as JudgePattern, ServerDone, Verdict};

use crate::build::{BuildKey, Builder, Profile, LOADER_PACKAGE};
use crate::cli::{Filter, Options};
use crate::config::Config;
use crate::qemu::{BootSpec, Rr, RR_FILE};
use crate::report::{BootReport, Outcome, Reporter};

/// After the last expect the bench keeps reading this long (a checked build: `SETTLE_CHECKED`).
pub const SETTLE: Duration = Duration::from_millis(50);
pub const SETTLE_CHECKED: Duration = Duration::from_secs(1);

/// Exit statuses of the bench.
pub const EXIT_PASSED: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
/// Bad input: a case file, a path it names, or the command line.
pub const EXIT_BAD_INPUT: i32 = 2;

pub struct Workspace {
    pub root: PathBuf,
    pub cases_dir: PathBuf,
    /// Whether `--cases` named another directory (replay lines must repeat it).
    pub cases_flag: Option<PathBuf>,
    pub config: Config,
}

/// Read every `*.toml` in the cases directory; all refusals are collected.
pub fn load_cases(dir: &Path) -> Result<Vec<Case>, Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => return Err(vec![format!("{}: cannot read the cases directory: {error}", dir.display())]),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let shown = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Err(error) => errors.push(format!("{shown}: {error}")),
            Ok(text) => match testbench_case::parse(&shown, &text) {
                Ok(case) => cases.push(case),
                Err(error) => errors.push(error.to_string()),
            },
        }
    }
    if errors.is_empty() {
        cases.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(cases)
    } else {
        Err(errors)
    }
}

/// The cases a filter takes, in name order.
pub fn select<'a>(cases: &'a [Case], filter: &Filter) -> Result<Vec<&'a Case>, String> {
    match filter {
        Filter::All => Ok(cases.iter().filter(|c| c.whole_run).collect()),
        Filter::Contains(text) => {
            Ok(cases.iter().filter(|c| c.name == *text || (c.whole_run && c.name.contains(text.as_str()))).collect())
        }
        Filter::Exact(name) => match cases.iter().find(|c| c.name == *name) {
            Some(case) => Ok(vec![case]),
            None => {
                let mut near: Vec<&str> = cases
                    .iter()
                    .map(|c| c.name.as_str())
                    .filter(|n| n.contains(name.as_str()) || name.contains(n))
                    .collect();
                near.truncate(5);
                let hint =
                    if near.is_empty() { String::new() } else { format!(" (names like it: {})", near.join(", ")) };
                Err(format!("--exact {name:?}: no case has that name{hint}"))
            }
        },
    }
}

/// Check what a case names exists and agrees with itself, before anything builds.
pub fn check_inputs(case: &Case, root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    for named in case.paths() {
        if !root.join(&named.path).exists() {
            errors.push(format!(
                "{}: {}: {} does not exist (paths are relative to the workspace root {})",
                case.file.display(),
                named.field,
                named.path.display(),
                root.display()
            ));
        }
    }
    let Some(boot) = case.as_boot() else { return errors };
    match &boot.guest {
        Guest::External(guest) => {
            if let GuestImage::Recipe(recipe) = &guest.image {
                let full = root.join(recipe);
                if full.exists() {
                    match testbench_recipe::load(&full) {
                        Err(error) => errors.push(format!("{}: guest.recipe: {error}", case.file.display())),
                        Ok(recipe) => {
                            for arch in &boot.arch {
                                if arch.name() != recipe.arch.to_string() {
                                    errors.push(format!(
                                        "{}: arch: the recipe {} boots {} only, not {arch}",
                                        case.file.display(),
                                        full.display(),
                                        recipe.arch
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        // Entry names are checked by the case parser (one entry per name).
        Guest::Built { .. } => {}
    }
    errors
}

/// Where a boot's seed came from (the replay line depends on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SeedFrom {
    None,
    Case,
    Environment,
    Sweep,
}

struct PlannedBoot {
    case: usize,
    arch: Arch,
    smp: u32,
    seed: Option<u64>,
    seed_from: SeedFrom,
    timeout: Duration,
    dir: PathBuf,
    /// QEMU's record/replay for this boot, or why it cannot serve it (a boot with typed
    /// input is recorded where it can be).
    rr: Result<Option<Rr>, String>,
}

/// Whether QEMU's record/replay can serve a boot: it runs under icount only, with sleep
/// on (under sleep=off a recorded boot's typed input never reached the guest), on one
/// hart only (QEMU refuses it with several CPUs), and the bench does not promise it
/// for devices a case adds itself (a disk needs QEMU's blkreplay driver, a network card
/// its filter-replay object). The reference guest and a recipe's guest use the serial
/// console, the RTC and the QMP monitor, which QEMU records and replays (or, the QMP
/// socket, leaves out of the recording).
fn rr_for(boot: &BootCase, smp: u32, replay: Option<&Path>) -> Result<Option<Rr>, String> {
    if replay.is_none() && boot.inputs.is_empty() {
        return Ok(None);
    }
    if boot.icount.is_none() {
        return Err("QEMU's record/replay runs only under icount, and the case runs on the host's clock".into());
    }
    if smp > 1 {
        return Err(format!("QEMU's record/replay takes one hart only, and this boot has {smp}"));
    }
    let sleep_off = |o: &str| ["sleep=off", "sleep=no", "sleep=false", "sleep=n"].contains(&o);
    if boot.icount.as_deref().is_some_and(|icount| icount.split(',').any(sleep_off)) {
        // Found by experiment on QEMU 10.0: a recorded boot under sleep=off never got the
        // typed line to the guest, which then waited out its deadline.
        return Err("under icount sleep=off QEMU's record/replay does not deliver typed input to the guest".into());
    }
    if let Guest::External(guest) = &boot.guest {
        if !guest.qemu_args.is_empty() {
            return Err("the bench does not record devices a case adds in guest.qemu_args (a disk needs QEMU's blkreplay driver, a network card its filter-replay object)".into());
        }
    }
    Ok(Some(match replay {
        Some(path) => Rr::Replay(path.to_path_buf()),
        None => Rr::Record,
    }))
}

fn plan(cases: &[&Case], options: &Options, run_dir: &Path, env_seed: Option<u64>) -> Vec<PlannedBoot> {
    let mut boots = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let Some(boot) = case.as_boot() else { continue };
        for &arch in &boot.arch {
            if options.arch.is_some_and(|only| only != arch) {
                continue;
            }
            let (counts, timeout) = match options.smp {
                Some(n) if !boot.keep_smp => (vec![n], boot.timeout_smp.unwrap_or(boot.timeout)),
                _ => (boot.smp_for(arch).to_vec(), boot.timeout),
            };
            let several = counts.len() > 1;
            for &smp in &counts {
                let seeds: Vec<(Option<u64>, SeedFrom)> = match &options.sweep {
                    Some(seeds) => seeds.iter().map(|s| (Some(*s), SeedFrom::Sweep)).collect(),
                    None => match (boot.qemu_seed, env_seed) {
                        (Some(_), Some(env)) => vec![(Some(env), SeedFrom::Environment)],
                        (Some(seed), None) => vec![(Some(seed), SeedFrom::Case)],
                        (None, _) => vec![(None, SeedFrom::None)],
                    },
                };
                for (seed, seed_from) in seeds {
                    let leaf = match (seed_from, several) {
                        (SeedFrom::Sweep, false) => format!("seed-{}-{arch}", seed.unwrap_or(0)),
                        (SeedFrom::Sweep, true) => format!("seed-{}-{arch}-smp{smp}", seed.unwrap_or(0)),
                        _ => format!("{arch}-smp{smp}"),
                    };
                    boots.push(PlannedBoot {
                        case: index,
                        arch,
                        smp,
                        seed,
                        seed_from,
                        timeout,
                        dir: run_dir.join(&case.name).join(leaf),
                        rr: rr_for(boot, smp, options.rr_replay.as_deref()),
                    });
                }
            }
        }
    }
    boots
}

/// The host-side runs: each host-tests, scripts and gate case once, a build case once per
/// width. `--arch` leaves out a build case's other width; it does not leave out a case
/// that runs on no width.
fn plan_host(cases: &[&Case], options: &Options) -> Vec<(usize, Option<Arch>)> {
    let mut runs = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        match &case.kind {
            Kind::Boot(_) => {}
            Kind::Build(build) => {
                for &arch in &build.arch {
                    if options.arch.is_none_or(|only| only == arch) {
                        runs.push((index, Some(arch)));
                    }
                }
            }
            _ => runs.push((index, None)),
        }
    }
    runs
}

fn replay_line(case: &Case, boot: &PlannedBoot, ws: &Workspace) -> String {
    let mut line = String::new();
    if boot.seed_from == SeedFrom::Environment {
        line.push_str(&format!("TESTBENCH_QEMU_SEED={} ", boot.seed.unwrap_or(0)));
    }
    line.push_str(&format!("cargo testbench --exact {} --arch {} --smp {}", case.name, boot.arch, boot.smp));
    if boot.seed_from == SeedFrom::Sweep {
        line.push_str(&format!(" --sweep {}", boot.seed.unwrap_or(0)));
    }
    if let Some(dir) = &ws.cases_flag {
        line.push_str(&format!(" --cases {}", crate::command::shell_quote(&dir.display().to_string())));
    }
    // A recording replays the boot whatever its seed: QEMU records its random draws too.
    let recording = match &boot.rr {
        Ok(Some(Rr::Record)) => Some(boot.dir.join(RR_FILE)).filter(|path| path.is_file()),
        Ok(Some(Rr::Replay(path))) => Some(path.clone()),
        _ => None,
    };
    if let Some(path) = &recording {
        line.push_str(&format!(" --rr-replay {}", crate::command::shell_quote(&path.display().to_string())));
    }
    if boot.seed_from == SeedFrom::None && recording.is_none() {
        line.push_str("  # seed: QEMU drew it from host entropy; pin qemu_seed or use --sweep to repeat it exactly");
    }
    if let Err(why) = &boot.rr {
        let typed = case.as_boot().is_some_and(|b| !b.inputs.is_empty());
        if typed {
            line.push_str(if line.contains("  # ") { "; " } else { "  # " });
            line.push_str(&format!("typed input not recorded: {why}"));
        }
    }
    line
}

/// What each (case, width) boots, once built.
#[derive(Clone)]
struct Prepared {
    kernel: PathBuf,
    initrd: Option<PathBuf>,
    append: Option<String>,
    firmware: Firmware,
    machine: String,
    extra_args: Vec<String>,
}

/// What running a case gave: its verdict (pass, or the reason it failed), or why it
/// could not run.
pub type CaseResult = Result<Result<(), String>, Blocked>;

/// Why a case cannot run; decides between fail and skip.
#[derive(Clone, Debug)]
pub enum Blocked {
    /// The host lacks something (QEMU, firmware): fails, or skips under --allow-skip.
    HostLack(String),
    /// A build failed: always a failure.
    Build(String),
}

/// The place the log server gives a program: 2 for the first it starts, and so on.
fn place_of(programs: &[ProgramEntry], name: &str) -> Option<u32> {
    programs.iter().skip(1).position(|p| p.program.entry_name() == name).map(|i| i as u32 + 2)
}

fn judge_config(boot: &BootCase, config: &Config) -> JudgeConfig {
    let pattern = |p: &testbench_case::Pattern| JudgePattern { label: p.label.clone(), regex: p.regex.clone() };
    let mut expect: Vec<JudgePattern> = boot.expect.iter().map(pattern).collect();
    let mut server_done = None;
    if let Guest::Built { programs, .. } = &boot.guest {
        if !programs.is_empty() {
            // Rule F: the log server's one done line, naming the reporter's place, is the
            // verdict; the bench waits for it as the last expect.
            let reporter_place = boot.reporter.as_deref().and_then(|name| place_of(programs, name));
            if let Some(place) = reporter_place {
                expect.push(JudgePattern {
                    label: "reporter".into(),
                    regex: regex::Regex::new(&format!(r"^\[server\] done: {place}$")).expect("a fixed pattern"),
                });
            }
            server_done = Some(ServerDone { reporter_place });
        }
    }
    JudgeConfig {
        expect,
        forbid: boot.forbid.iter().map(pattern).collect(),
        always_forbidden: config
            .always_forbidden
            .iter()
            .filter(|text| !(boot.allow_panic && text.as_str() == "PANIC"))
            .map(|text| JudgePattern {
                label: "always-forbidden".into(),
                regex: regex::Regex::new(&regex::escape(text)).expect("an escaped literal is a regex"),
            })
            .collect(),
        inputs: boot
            .inputs
            .iter()
            .map(|i| JudgeInput { after: pattern(&i.after), send: i.send.as_bytes().to_vec() })
            .collect(),
        poweroff: boot.poweroff,
        poweroff_status: boot.poweroff_status,
        settle: if is_checked(boot) { SETTLE_CHECKED } else { SETTLE },
        server_done,
        distinct: boot.distinct.iter().map(pattern).collect(),
        capture: boot.distinct_across_boots.iter().map(pattern).collect(),
    }
}

fn is_checked(boot: &BootCase) -> bool {
    boot.debug_assertions
}

/// Whether a must_fail pattern takes a failure: the whole reason, or any one of its
/// lines (a gate's reason is one finding per line).
fn must_fail_takes(pattern: &testbench_case::Pattern, message: &str) -> bool {
    pattern.regex.is_match(message) || message.lines().any(|line| pattern.regex.is_match(line))
}

/// What a passing self-check quotes: the one line its pattern took, or the whole reason.
fn evidence(pattern: &testbench_case::Pattern, message: String) -> String {
    if pattern.regex.is_match(&message) && !message.contains('\n') {
        return message;
    }
    message.lines().find(|line| pattern.regex.is_match(line)).map(str::to_string).unwrap_or(message)
}

fn outcome_of(case: &Case, verdict: CaseResult, allow_skip: bool) -> Outcome {
    let must_fail = case.must_fail.as_ref();
    match (verdict, must_fail) {
        (Err(Blocked::Build(message)), _) => Outcome::Fail(message),
        (Err(Blocked::HostLack(message)), Some(pattern)) if must_fail_takes(pattern, &message) => {
            Outcome::ExpectedFailure(evidence(pattern, message))
        }
        (Err(Blocked::HostLack(message)), _) if allow_skip => Outcome::Skip(message),
        (Err(Blocked::HostLack(message)), _) => Outcome::Fail(message),
        (Ok(Ok(())), None) => Outcome::Pass,
        (Ok(Err(message)), None) => Outcome::Fail(message),
        (Ok(Ok(())), Some(pattern)) => {
            Outcome::Fail(format!("passed, but must_fail wanted a failure matching '{}'", pattern.source()))
        }
        (Ok(Err(message)), Some(pattern)) => {
            if must_fail_takes(pattern, &message) {
                Outcome::ExpectedFailure(evidence(pattern, message))
            } else {
                Outcome::Fail(format!("{message}\n(must_fail wanted a failure matching '{}')", pattern.source()))
            }
        }
    }
}

/// One boot, or two when the case asks for captures that differ across boots or for
/// two consoles the same byte for byte (`repeat_exactly`). A replayed boot
/// (`--rr-replay`) is compared byte for byte with the console it was recorded with.
fn boot_once_or_twice(spec: BootSpec, root: &Path, repeat_exactly: bool) -> CaseResult {
    let trouble = |e: String| Blocked::Build(format!("the bench could not boot: {e}"));
    let first = spec.run(root).map_err(trouble)?;
    forget_passing_recording(&spec, &first.verdict);
    if let Some(Rr::Replay(recording)) = &spec.rr {
        return Ok(replayed(recording, &spec.dir, first.verdict));
    }
    if (spec.judge.capture.is_empty() && !repeat_exactly) || first.verdict != Verdict::Pass {
        return Ok(verdict_result(first.verdict));
    }
    let first_dir = spec.dir.clone();
    let second_spec = BootSpec { dir: spec.dir.join("second-boot"), ..spec };
    let second = second_spec.run(root).map_err(trouble)?;
    forget_passing_recording(&second_spec, &second.verdict);
    if second.verdict != Verdict::Pass {
        return Ok(verdict_result(second.verdict).map_err(|m| format!("second boot: {m}")));
    }
    if repeat_exactly {
        let read = |dir: &Path| std::fs::read(dir.join("console.log")).unwrap_or_default();
        let (a, b) = (read(&first_dir), read(&second_spec.dir));
        return Ok(match first_difference(&a, &b) {
            None => Ok(()),
            Some(at) => Err(format!(
                "repeat_exactly: the two boots' consoles differ from line {}: first boot: {}; second boot: {}",
                at.line, at.a, at.b
            )),
        });
    }
    for ((pattern, a), b) in second_spec.judge.capture.iter().zip(&first.captures).zip(&second.captures) {
        if a == b {
            return Ok(Err(format!(
                "{} '{}' captured '{}' in both boots",
                pattern.label,
                pattern.regex.as_str(),
                a.as_deref().unwrap_or("")
            )));
        }
    }
    Ok(Ok(()))
}

/// A passing boot's recording is of no use: only a failure's replay line names one.
fn forget_passing_recording(spec: &BootSpec, verdict: &Verdict) {
    if spec.rr == Some(Rr::Record) && *verdict == Verdict::Pass {
        let _ = std::fs::remove_file(spec.dir.join(RR_FILE));
    }
}

/// The verdict on a replayed boot: the replayed console must be the recorded one byte
/// for byte; then the boot's own verdict stands, said to be a replay.
fn replayed(recording: &Path, dir: &Path, verdict: Verdict) -> Result<(), String> {
    let recorded_log = recording.with_file_name("console.log");
    let recorded = match std::fs::read(&recorded_log) {
        Ok(bytes) => bytes,
        Err(error) => return Err(format!("--rr-replay: cannot read {}: {error}", recorded_log.display())),
    };
    let replayed = std::fs::read(dir.join("console.log")).unwrap_or_default();
    let (recorded, replayed) = (console_only(&recorded), console_only(&replayed));
    if let Some(at) = first_difference(recorded, replayed) {
        return Err(format!(
            "--rr-replay: the replay differs from the recording from console line {}: recorded: {}; replayed: {}",
            at.line, at.a, at.b
        ));
    }
    let same = format!("replayed {} byte for byte ({} console bytes as recorded)", recording.display(), recorded.len());
    match verdict {
        Verdict::Pass => Ok(()),
        Verdict::Fail(failure) => Err(format!("{same}; the verdict again: {failure}")),
    }
}

/// The console's bytes without the bench's own note of QEMU's stderr at its end (which
/// names QEMU's pid and is not the guest's).
fn console_only(log: &[u8]) -> &[u8] {
    const NOTE: &[u8] = b"\n--- testbench: the last lines of QEMU's stderr ---\n";
    match log.windows(NOTE.len()).rposition(|w| w == NOTE) {
        Some(at) => &log[..at],
        None => log,
    }
}

/// Where two consoles first differ: the line's number (from 1) and each console's line
/// there, quoted (a few hundred bytes at most), or "(the console ended)".
struct Difference {
    line: usize,
    a: String,
    b: String,
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<Difference> {
    if a == b {
        return None;
    }
    let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let line = 1 + a[..at].iter().filter(|&&c| c == b'\n').count();
    let start = a[..at].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    let quote = |text: &[u8]| -> String {
        if start >= text.len() {
            return "(the console ended)".into();
        }
        let rest = &text[start..];
        let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        const QUOTE_MAX: usize = 200;
        let shown = String::from_utf8_lossy(&rest[..end.min(QUOTE_MAX)]);
        let shown = shown.trim_end_matches('\r');
        if end > QUOTE_MAX {
            format!("{shown:?}... (cut at {QUOTE_MAX} bytes)")
        } else {
            format!("{shown:?}")
        }
    };
    Some(Difference { line, a: quote(a), b: quote(b) })
}

fn verdict_result(verdict: Verdict) -> Result<(), String> {
    match verdict {
        Verdict::Pass => Ok(()),
        Verdict::Fail(failure) => Err(failure.to_string()),
    }
}

fn parse_env_seed() -> Result<Option<u64>, String> {
    match std::env::var("TESTBENCH_QEMU_SEED") {
        Err(_) => Ok(None),
        Ok(text) if text.is_empty() => Ok(None),
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("TESTBENCH_QEMU_SEED={text:?} is not accepted: a number from 0")),
    }
}

pub fn list(cases: &[Case]) {
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for case in cases {
        let arch: Vec<&str> = case.arch().iter().map(|a| a.name()).collect();
        let arch = if arch.is_empty() { "host".to_string() } else { arch.join(",") };
        let mark = if case.whole_run { "" } else { " [by name only]" };
        println!("{:<width$}  {:<10}  {:<10}  {}{mark}", case.name, case.kind.name(), arch, case.description);
    }
}

/// The run proper; returns the exit status.
pub fn run(ws: &Workspace, options: &Options, reporter: &mut Reporter) -> i32 {
    let started = Instant::now();
    let cases = match load_cases(&ws.cases_dir) {
        Ok(cases) => cases,
        Err(errors) => {
            for error in errors {
                eprintln!("error: {error}");
            }
            return EXIT_BAD_INPUT;
        }
    };
    if options.list {
        list(&cases);
        return EXIT_PASSED;
    }
    let selected = match select(&cases, &options.filter) {
        Ok(selected) => selected,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let errors: Vec<String> = selected.iter().flat_map(|c| check_inputs(c, &ws.root)).collect();
    if !errors.is_empty() {
        for error in errors {
            eprintln!("error: {error}");
        }
        return EXIT_BAD_INPUT;
    }
    if options.sweep.is_some() && selected.len() != 1 {
        let names: Vec<&str> = selected.iter().map(|c| c.name.as_str()).collect();
        eprintln!(
            "error: --sweep runs one case; the filter took {}: {} (name one with --exact)",
            names.len(),
            names.join(", ")
        );
        return EXIT_BAD_INPUT;
    }
    let env_seed = match parse_env_seed() {
        Ok(seed) => seed,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    if let Some(dir) = &options.keep_failed {
        if let Err(error) = std::fs::create_dir_all(dir) {
            eprintln!("error: --keep-failed {}: {error}", dir.display());
            return EXIT_BAD_INPUT;
        }
    }

    let run_dir = match crate::rundir::create(&ws.root) {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("error: failed to create a run directory under {}/target/testbench: {error}", ws.root.display());
            return EXIT_FAILED;
        }
    };
    let boots = plan(&selected, options, &run_dir, env_seed);
    if let Some(recording) = &options.rr_replay {
        if let Err(error) = check_rr_replay(recording, &boots) {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    }
    let host_runs = plan_host(&selected, options);
    reporter.run_started(&run_dir, boots.len() + host_runs.len());
    let mut builder = Builder::new(&ws.root, &run_dir);

    // Probe each width's QEMU once, before its first boot, on threads of their own while
    // the host cases run and the guests build.
    let mut probe_threads = Vec::new();
    for boot in &boots {
        if !probe_threads.iter().any(|(arch, _)| *arch == boot.arch) {
            let arch = boot.arch;
            probe_threads.push((arch, std::thread::spawn(move || crate::qemu::probe(arch))));
        }
    }

    // The cases that boot nothing run first, one after another, in name order.
    for (index, arch) in &host_runs {
        let case = selected[*index];
        let label = match arch {
            Some(arch) => format!("{} {arch}", case.name),
            None => format!("{} host", case.name),
        };
        reporter.boot_started(&label, None);
        let started_case = Instant::now();
        let ctx = crate::host::HostContext { root: &ws.root, dir: run_dir.join(&case.name) };
        let mut log = |line: &str| reporter.note("host", line);
        let result = match (&case.kind, arch) {
            (Kind::HostTests(host), _) => crate::host::run_host_tests(&case.name, host, &ctx, &mut log),
            (Kind::Build(build), Some(arch)) => crate::host::run_build(build, *arch, &mut builder, &mut log),
            (Kind::Scripts(scripts), _) => crate::host::run_scripts(scripts, &ctx, &mut log),
            (Kind::Gate(gate), _) => crate::host::run_gate(gate, &ctx, &mut log),
            _ => unreachable!("plan_host plans host kinds only, a build case with its width"),
        };
        let outcome = outcome_of(case, result, options.allow_skip);
        let mut replay = format!("cargo testbench --exact {}", case.name);
        if let Some(arch) = arch {
            replay.push_str(&format!(" --arch {arch}"));
        }
        if let Some(dir) = &ws.cases_flag {
            replay.push_str(&format!(" --cases {}", crate::command::shell_quote(&dir.display().to_string())));
        }
        reporter.boot_finished(BootReport {
            case: case.name.clone(),
            kind: case.kind.name(),
            arch: arch.map(|a| a.name().to_string()),
            smp: None,
            seed: None,
            outcome,
            duration: started_case.elapsed(),
            dir: ctx.dir.clone(),
            replay,
        });
    }

    // Build what the boots need, each distinct build once, while the probes run.
    let mut prepared: HashMap<(usize, Arch), Result<Prepared, Blocked>> = HashMap::new();
    let mut recipes: HashMap<PathBuf, Result<testbench_recipe::Image, String>> = HashMap::new();
    for boot in &boots {
        let key = (boot.case, boot.arch);
        if let std::collections::hash_map::Entry::Vacant(slot) = prepared.entry(key) {
            let case = selected[boot.case];
            slot.insert(prepare(case, boot.arch, ws, &run_dir, &mut builder, &mut recipes, reporter));
        }
    }

    // A width whose QEMU cannot run, or a missing firmware, blocks the boot whatever it built.
    let mut probes: HashMap<Arch, Result<(), String>> = HashMap::new();
    for (arch, thread) in probe_threads {
        let result = thread.join().unwrap_or_else(|_| Err(format!("the probe of {arch}'s QEMU panicked")));
        if let Ok(version) = &result {
            reporter.note("qemu-probed", &format!("qemu {arch}: {version}"));
        }
        probes.insert(arch, result.map(|_| ()));
    }
    let mut firmware_checks: HashMap<(Arch, Firmware), Result<(), String>> = HashMap::new();
    for ((index, arch), result) in prepared.iter_mut() {
        let case = selected[*index];
        let lack = match &probes[arch] {
            Err(complaint) => Some(complaint.clone()),
            Ok(()) => {
                let (firmware, field) = case.firmware().expect("a planned boot's case is a boot case");
                firmware_checks
                    .entry((*arch, firmware.clone()))
                    .or_insert_with(|| crate::qemu::check_firmware(*arch, firmware, &ws.root, field))
                    .clone()
                    .err()
            }
        };
        // A failed build stays the verdict: a host lack must not hide a broken build.
        if let (Some(lack), Ok(_)) = (lack, &*result) {
            *result = Err(Blocked::HostLack(lack));
        }
    }

    // Boot, up to --jobs at once; report in the planned order.
    let jobs: Vec<(usize, Result<BootJob, Blocked>)> = boots
        .iter()
        .enumerate()
        .map(|(index, boot)| {
            let case = selected[boot.case];
            let spec = prepared[&(boot.case, boot.arch)].clone().map(|p| BootSpec {
                arch: boot.arch,
                machine: p.machine,
                firmware: p.firmware,
                kernel: p.kernel,
                initrd: p.initrd,
                append: p.append,
                smp: boot.smp,
                memory_mib: boot_of(case).memory_mib,
                icount: boot_of(case).icount.clone(),
                seed: boot.seed,
                rtc_base: boot_of(case).rtc_base.clone(),
                rr: boot.rr.clone().ok().flatten(),
                extra_args: p.extra_args,
                timeout: boot.timeout,
                dir: boot.dir.clone(),
                judge: {
                    let mut judge = judge_config(boot_of(case), &ws.config);
                    if matches!(boot.rr, Ok(Some(Rr::Replay(_)))) {
                        // The recording types the input; QEMU takes none from the bench.
                        judge.inputs.clear();
                    }
                    judge
                },
                dt_edits: boot_of(case).device_tree.clone(),
            });
            (index, spec.map(|spec| (spec, boot_of(case).repeat_exactly)))
        })
        .collect();
    let queue = Arc::new(Mutex::new(jobs.into_iter()));
    let (sender, receiver) = mpsc::channel::<(usize, CaseResult, Duration)>();
    let workers = options.jobs.min(boots.len()).max(1);
    let mut handles = Vec::new();
    for _ in 0..workers {
        let queue = queue.clone();
        let sender = sender.clone();
        let root = ws.root.clone();
        handles.push(std::thread::spawn(move || loop {
            let next = queue.lock().unwrap().next();
            let Some((index, spec)) = next else { break };
            let started = Instant::now();
            // The spawning thread waits for QEMU: its exit is what the parent-death
            // signal follows (see command.rs).
            let result = match spec {
                Err(blocked) => Err(blocked),
                Ok((spec, repeat_exactly)) => boot_once_or_twice(spec, &root, repeat_exactly),
            };
            if sender.send((index, result, started.elapsed())).is_err() {
                break;
            }
        }));
    }
    drop(sender);
    let mut waiting: BTreeMap<usize, (CaseResult, Duration)> = BTreeMap::new();
    let mut next_to_print = 0;
    if let Some(first) = boots.first() {
        reporter.boot_started(&format!("{} {} smp{}", selected[first.case].name, first.arch, first.smp), first.seed);
    }
    for (index, result, took) in receiver {
        waiting.insert(index, (result, took));
        while let Some((result, took)) = waiting.remove(&next_to_print) {
            let boot = &boots[next_to_print];
            let case = selected[boot.case];
            let outcome = outcome_of(case, result, options.allow_skip);
            if let (Outcome::Fail(_), Some(keep)) = (&outcome, &options.keep_failed) {
                keep_failed(keep, case, boot);
            }
            reporter.boot_finished(BootReport {
                case: case.name.clone(),
                kind: "boot",
                arch: Some(boot.arch.name().into()),
                smp: Some(boot.smp),
                seed: boot.seed,
                outcome,
                duration: took,
                dir: boot.dir.clone(),
                replay: replay_line(case, boot, ws),
            });
            next_to_print += 1;
            if let Some(next) = boots.get(next_to_print) {
                reporter
                    .boot_started(&format!("{} {} smp{}", selected[next.case].name, next.arch, next.smp), next.seed);
            }
        }
    }
    for handle in handles {
        let _ = handle.join();
    }
    if let (Some(seeds), Some(case)) = (&options.sweep, selected.first()) {
        reporter.sweep_summary(&case.name, seeds);
    }
    reporter.run_finished(started.elapsed(), &run_dir);
    if let Some(path) = &options.junit {
        if let Err(error) = reporter.write_junit(path) {
            eprintln!("error: {error}");
            return EXIT_FAILED;
        }
    }
    if reporter.summary.failed > 0 {
        EXIT_FAILED
    } else {
        EXIT_PASSED
    }
}

/// `--rr-replay PATH` replays one recorded boot: the recording and the console it was
/// recorded with must be there, and the selection must plan exactly one boot that QEMU's
/// record/replay can serve.
fn check_rr_replay(recording: &Path, boots: &[PlannedBoot]) -> Result<(), String> {
    let shown = recording.display();
    if !recording.is_file() {
        return Err(format!("--rr-replay {shown}: not a file (the path a failed boot's replay line names)"));
    }
    if !recording.with_file_name("console.log").is_file() {
        return Err(format!("--rr-replay {shown}: no console.log beside it to compare the replay with"));
    }
    match boots {
        [boot] => match &boot.rr {
            Err(why) => Err(format!("--rr-replay {shown}: {why}")),
            Ok(_) => Ok(()),
        },
        _ => Err(format!(
            "--rr-replay {shown} replays one boot, and the selection plans {}: name it as its replay line does (--exact, --arch, --smp)",
            boots.len()
        )),
    }
}

/// A boot to run, and whether its case asks for two boots the same byte for byte.
type BootJob = (BootSpec, bool);

/// A planned boot's case is a boot case: `plan` takes no other.
fn boot_of(case: &Case) -> &BootCase {
    case.as_boot().expect("only boot cases are planned as boots")
}

fn keep_failed(dir: &Path, case: &Case, boot: &PlannedBoot) {
    let mut stem = format!("{}-{}.smp{}", boot.arch, case.name, boot.smp);
    if boot.seed_from == SeedFrom::Sweep {
        stem.push_str(&format!(".seed{}", boot.seed.unwrap_or(0)));
    }
    let _ = std::fs::copy(boot.dir.join("console.log"), dir.join(format!("{stem}.log")));
    let _ = std::fs::copy(boot.dir.join("qemu-stderr.log"), dir.join(format!("{stem}.qemu-stderr.log")));
    let _ = std::fs::copy(boot.dir.join("command-line"), dir.join(format!("{stem}.command-line")));
}

fn prepare(
    case: &Case,
    arch: Arch,
    ws: &Workspace,
    run_dir: &Path,
    builder: &mut Builder,
    recipes: &mut HashMap<PathBuf, Result<testbench_recipe::Image, String>>,
    reporter: &Reporter,
) -> Result<Prepared, Blocked> {
    let boot = boot_of(case);
    let mut log = |line: &str| reporter.note("build", line);
    match &boot.guest {
        Guest::Built { programs, firmware } => {
            let bundle = crate::pack::reference_bundle(case, programs, arch, ws, run_dir, builder, &mut log)
                .map_err(Blocked::Build)?;
            let profile = if boot.debug_assertions { Profile::Checked } else { Profile::Release };
            let loader = builder
                .get(&BuildKey::new(arch, LOADER_PACKAGE, LOADER_PACKAGE, profile, &[]), &mut log)
                .map_err(Blocked::Build)?;
            Ok(Prepared {
                kernel: loader.path,
                initrd: Some(bundle),
                append: None,
                firmware: firmware.clone(),
                machine: "virt".into(),
                extra_args: Vec::new(),
            })
        }
        Guest::External(guest) => {
            let (kernel, initrd, recipe_append) = match &guest.image {
                GuestImage::Files { kernel, initrd } => {
                    (ws.root.join(kernel), initrd.as_ref().map(|i| ws.root.join(i)), None)
                }
                GuestImage::Recipe(recipe) => {
                    let full = ws.root.join(recipe);
                    let image = recipes
                        .entry(full.clone())
                        .or_insert_with(|| {
                            let recipe = testbench_recipe::load(&full).map_err(|e| e.to_string())?;
                            let mut recipe_log = |line: &str| reporter.note("guest-image", line);
                            testbench_recipe::build(&recipe, &ws.root.join("target/testbench/guests"), &mut recipe_log)
                                .map_err(|e| format!("guest recipe {}: {e}", full.display()))
                        })
                        .clone()
                        .map_err(Blocked::Build)?;
                    (image.kernel, Some(image.initrd), Some(image.append))
                }
            };
            Ok(Prepared {
                kernel,
                initrd,
                append: guest.append.clone().or(recipe_append),
                firmware: guest.firmware.clone(),
                machine: guest.machine.clone(),
                extra_args: guest.qemu_args.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, whole_run: bool) -> Case {
        let text = format!(
            "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\nexpect = ['x']\nwhole_run = {whole_run}\n"
        );
        testbench_case::parse(&format!("tests/{name}.toml"), &text).unwrap()
    }

    #[test]
    fn two_consoles_differ_at_their_first_differing_line() {
        assert!(first_difference(b"a\nb\n", b"a\nb\n").is_none());
        let at = first_difference(b"one\r\ntwo 1\r\nthree\r\n", b"one\r\ntwo 2\r\nthree\r\n").unwrap();
        assert_eq!((at.line, at.a.as_str(), at.b.as_str()), (2, "\"two 1\"", "\"two 2\""));
        let at = first_difference(b"one\ntwo\n", b"one\n").unwrap();
        assert_eq!((at.line, at.a.as_str(), at.b.as_str()), (2, "\"two\"", "(the console ended)"));
        let long = [b'x'; 300];
        let at = first_difference(&long, b"y").unwrap();
        assert!(at.a.ends_with("... (cut at 200 bytes)") && at.a.len() < 240, "{}", at.a);
        let noted =
            b"out\n\n--- testbench: the last lines of QEMU's stderr ---\nqemu: terminating on signal 15 from pid 9\n";
        assert_eq!(console_only(noted), b"out\n");
    }

    #[test]
    fn a_case_out_of_the_whole_run_runs_only_by_name() {
        let cases = vec![case("timer", true), case("timer-long", false), case("other", true)];
        let names =
            |filter: Filter| select(&cases, &filter).unwrap().iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(Filter::All), ["timer", "other"]);
        assert_eq!(names(Filter::Contains("timer".into())), ["timer"]);
        assert_eq!(names(Filter::Contains("timer-long".into())), ["timer-long"]);
        assert_eq!(names(Filter::Exact("timer-long".into())), ["timer-long"]);
        assert_eq!(names(Filter::Exact("timer".into())), ["timer"]);
        let refused = select(&cases, &Filter::Exact("time".into())).unwrap_err();
        assert!(refused.contains("no case has that name") && refused.contains("timer"), "{refused}");
    }
}
