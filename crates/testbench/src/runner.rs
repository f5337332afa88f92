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

use testbench_case::{Arch, BootCase, Case, Firmware, Guest, GuestImage, Kind, PathKind, ProgramEntry};
use testbench_judge::{
    Config as JudgeConfig, FailureKind, Input as JudgeInput, Pattern as JudgePattern, ServerDone, Verdict,
};

use crate::build::{BuildKey, Builder, Profile, LOADER_PACKAGE};
use crate::cli::{Filter, NoTests, Options};
use crate::command::shell_quote;
use crate::config::Config;
use crate::qemu::{BootSpec, Rr, RR_FILE};
use crate::report::{BootReport, Outcome, Reporter, Row};

/// After the last expect the bench keeps reading this long (a checked build: `SETTLE_CHECKED`).
pub const SETTLE: Duration = Duration::from_millis(50);
pub const SETTLE_CHECKED: Duration = Duration::from_secs(1);

/// Exit statuses of the bench.
pub const EXIT_PASSED: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
/// Bad input: a case file, a path it names, or the command line.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Nothing to run: the cases directory is empty, or the filter or `--arch` took no case
/// (unless `--no-tests pass` or `warn`). Four, as nextest's "no tests to run".
pub const EXIT_NO_CASES: i32 = 4;

pub struct Workspace {
    pub root: PathBuf,
    pub cases_dir: PathBuf,
    /// Whether `--cases` named another directory (replay lines must repeat it).
    pub cases_flag: Option<PathBuf>,
    pub config: Config,
}

/// The most bytes of one case file: a case is a page of TOML, never a data set.
pub const CASE_FILE_MAX: u64 = 1 << 20;

/// What the cases directory gave: the cases that parsed, and a refusal for each file
/// that did not.
#[derive(Debug, Default)]
pub struct Loaded {
    pub cases: Vec<Case>,
    pub refusals: Vec<String>,
    /// The stems of the files refused, so `--exact` does not also say no case has that name.
    pub refused_names: Vec<String>,
    /// How many `*.toml` entries the directory holds, refused ones included.
    pub files: usize,
}

/// What a file type is, in words, for a refusal.
pub fn file_type_words(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// One case file's text. Only a regular file (or a symbolic link to one) is read: its
/// type is asked first, without opening it, so a FIFO, a socket or a device named
/// `x.toml` is refused and never blocks the bench. It is then opened without blocking
/// and asked again (it could have been replaced in between), and read to a bound.
fn read_case_file(file: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let accepted = "a case is a regular file <name>.toml (or a symbolic link to one)";
    let metadata = std::fs::metadata(file).map_err(|error| format!("cannot be read: {error}"))?;
    if !metadata.is_file() {
        return Err(format!("{} is not accepted: {accepted}", file_type_words(metadata.file_type())));
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(file)
        .map_err(|error| format!("cannot be read: {error}"))?;
    let metadata = opened.metadata().map_err(|error| format!("cannot be read: {error}"))?;
    if !metadata.is_file() {
        return Err(format!("{} is not accepted: {accepted}", file_type_words(metadata.file_type())));
    }
    let mut bytes = Vec::new();
    opened.take(CASE_FILE_MAX + 1).read_to_end(&mut bytes).map_err(|error| format!("cannot be read: {error}"))?;
    if bytes.len() as u64 > CASE_FILE_MAX {
        return Err(format!("more than {CASE_FILE_MAX} bytes is not accepted: a case file is at most 1 MiB"));
    }
    String::from_utf8(bytes).map_err(|error| format!("not UTF-8 text ({error}): a case file is TOML"))
}

/// Read every `*.toml` in the cases directory; every refusal is collected, one per file.
pub fn load_cases(dir: &Path) -> Loaded {
    let mut loaded = Loaded::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            loaded.refusals.push(format!("{}: cannot read the cases directory: {error}", dir.display()));
            return loaded;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    loaded.files = files.len();
    for file in files {
        let shown = file.display().to_string();
        let parsed = read_case_file(&file)
            .map_err(|error| format!("{shown}: {error}"))
            .and_then(|text| testbench_case::parse(&shown, &text).map_err(|error| error.to_string()));
        match parsed {
            Ok(case) => loaded.cases.push(case),
            Err(error) => {
                loaded.refusals.push(error);
                if let Some(stem) = file.file_stem() {
                    loaded.refused_names.push(stem.to_string_lossy().into_owned());
                }
            }
        }
    }
    loaded.cases.sort_by(|a, b| a.name.cmp(&b.name));
    loaded
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
                let names = || cases.iter().map(|c| c.name.as_str());
                let mut like: Vec<&str> = names().filter(|n| n.contains(name.as_str()) || name.contains(n)).collect();
                like.truncate(5);
                let mut message = format!("--exact {name:?}: no case has that name");
                if !like.is_empty() {
                    message.push_str(&format!(" (names like it: {})", like.join(", ")));
                }
                let near = testbench_case::did_you_mean(&testbench_case::nearest(name, names()));
                if !near.is_empty() {
                    message.push_str(&format!("; {near}"));
                }
                Err(message)
            }
        },
    }
}

/// Whether a case runs at all under `--arch` (a case of the host runs on every width).
fn runs_on(case: &Case, only: Option<Arch>) -> bool {
    case.arch().is_empty() || only.is_none_or(|only| case.arch().contains(&only))
}

/// Why a run would run nothing, if it would: which filter or width left every case out.
pub fn why_empty(loaded: &Loaded, selected: &[&Case], options: &Options, dir: &Path) -> Option<String> {
    if selected.iter().any(|case| runs_on(case, options.arch)) {
        return None;
    }
    let dir = dir.display();
    if loaded.files == 0 {
        return Some(format!("{dir} holds no case (no *.toml file)"));
    }
    if !selected.is_empty() {
        let arch = options.arch.map(|a| a.name()).unwrap_or("");
        let mut shown: Vec<String> = selected
            .iter()
            .map(|c| format!("{} ({})", c.name, c.arch().iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")))
            .collect();
        let more = shown.len().saturating_sub(5);
        shown.truncate(5);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        return Some(format!("--arch {arch}: no case taken boots {arch}: {}{more}", shown.join(", ")));
    }
    let by_name_only: Vec<&str> = loaded.cases.iter().filter(|c| !c.whole_run).map(|c| c.name.as_str()).collect();
    Some(match &options.filter {
        Filter::All => {
            format!("every case in {dir} runs only by its whole name (whole_run = false): {}", by_name_only.join(", "))
        }
        Filter::Contains(text) => {
            let mut message = format!("the filter {text:?} takes none of the {} cases in {dir}", loaded.cases.len());
            let partial: Vec<&str> = by_name_only.iter().copied().filter(|n| n.contains(text.as_str())).collect();
            if !partial.is_empty() {
                message.push_str(&format!(
                    "; the cases whose names hold it run only by their whole name (whole_run = false): {}",
                    partial.join(", ")
                ));
            }
            let near = testbench_case::did_you_mean(&testbench_case::nearest(
                text,
                loaded.cases.iter().map(|c| c.name.as_str()),
            ));
            if !near.is_empty() {
                message.push_str(&format!("; {near}"));
            }
            message
        }
        Filter::Exact(name) => format!("--exact {name:?} takes nothing"),
    })
}

/// Check what a case names is there, is what it must be, and agrees with itself, before
/// anything builds. A kernel, an initrd, a program or a firmware image must be a regular
/// file: a directory, a FIFO or a device is refused here, not at boot.
pub fn check_inputs(case: &Case, root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let file = case.file.display();
    for named in case.paths() {
        let path = named.path.display();
        let full = root.join(&named.path);
        match std::fs::metadata(&full) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => errors.push(format!(
                "{file}: {}: {path} does not exist (paths are relative to the workspace root {})",
                named.field,
                root.display()
            )),
            Err(error) => errors.push(format!("{file}: {}: {path} cannot be read: {error}", named.field)),
            Ok(metadata) => {
                let (fits, must) = match named.kind {
                    PathKind::File => (metadata.is_file(), "a regular file"),
                    PathKind::Dir => (metadata.is_dir(), "a directory"),
                };
                if !fits {
                    errors.push(format!(
                        "{file}: {}: {path} is {}: {} must be {must}",
                        named.field,
                        file_type_words(metadata.file_type()),
                        named.what
                    ));
                }
            }
        }
    }
    // A firmware image that is missing is the host's lack (checked at boot time), but one
    // that is there and is not a regular file is the case's mistake.
    if let Some((Firmware::Path(path), field)) = case.firmware() {
        if let Ok(metadata) = std::fs::metadata(root.join(path)) {
            if !metadata.is_file() {
                errors.push(format!(
                    "{file}: {field}: {} is {}: a firmware image must be a regular file",
                    path.display(),
                    file_type_words(metadata.file_type())
                ));
            }
        }
    }
    let Some(boot) = case.as_boot() else { return errors };
    match &boot.guest {
        Guest::External(guest) => {
            if let GuestImage::Recipe(recipe) = &guest.image {
                let full = root.join(recipe);
                // Read only a regular file: anything else is refused above.
                if full.is_file() {
                    match testbench_recipe::load(&full) {
                        Err(error) => errors.push(format!("{file}: guest.recipe: {error}")),
                        Ok(recipe) => {
                            for arch in &boot.arch {
                                if arch.name() != recipe.arch.to_string() {
                                    errors.push(format!(
                                        "{file}: arch: the recipe {} boots {} only, not {arch}",
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

/// The start of every replay line: the workspace, so the line works from any directory.
fn replay_prefix(ws: &Workspace) -> String {
    format!("cd {} && ", shell_quote(&ws.root.display().to_string()))
}

/// The `--cases` a replay repeats (absolute: main made it so).
fn replay_cases(ws: &Workspace) -> String {
    match &ws.cases_flag {
        Some(dir) => format!(" --cases {}", shell_quote(&dir.display().to_string())),
        None => String::new(),
    }
}

/// The command that replays one boot, and a note for a person on what it cannot repeat.
fn replay_line(case: &Case, boot: &PlannedBoot, ws: &Workspace) -> (String, Option<String>) {
    let mut line = replay_prefix(ws);
    if boot.seed_from == SeedFrom::Environment {
        line.push_str(&format!("TESTBENCH_QEMU_SEED={} ", boot.seed.unwrap_or(0)));
    }
    line.push_str(&format!("cargo testbench --exact {} --arch {} --smp {}", case.name, boot.arch, boot.smp));
    if boot.seed_from == SeedFrom::Sweep {
        line.push_str(&format!(" --sweep {}", boot.seed.unwrap_or(0)));
    }
    line.push_str(&replay_cases(ws));
    // A recording replays the boot whatever its seed: QEMU records its random draws too.
    let recording = match &boot.rr {
        Ok(Some(Rr::Record)) => Some(boot.dir.join(RR_FILE)).filter(|path| path.is_file()),
        Ok(Some(Rr::Replay(path))) => Some(path.clone()),
        _ => None,
    };
    if let Some(path) = &recording {
        line.push_str(&format!(" --rr-replay {}", shell_quote(&path.display().to_string())));
    }
    let mut notes = Vec::new();
    if boot.seed_from == SeedFrom::None && recording.is_none() {
        notes.push(
            "seed: QEMU drew it from host entropy; pin qemu_seed or use --sweep to repeat it exactly".to_string(),
        );
    }
    if let Err(why) = &boot.rr {
        if case.as_boot().is_some_and(|b| !b.inputs.is_empty()) {
            notes.push(format!("typed input not recorded: {why}"));
        }
    }
    (line, (!notes.is_empty()).then(|| notes.join("; ")))
}

/// The command that replays a case that boots nothing.
fn host_replay_line(case: &Case, arch: Option<Arch>, ws: &Workspace) -> String {
    let mut line = format!("{}cargo testbench --exact {}", replay_prefix(ws), case.name);
    if let Some(arch) = arch {
        line.push_str(&format!(" --arch {arch}"));
    }
    line.push_str(&replay_cases(ws));
    line
}

/// Refuse the run: every refusal printed together (and in JSON as one event), and a
/// JUnit report that says so when one was asked for.
fn refuse(reporter: &mut Reporter, options: &Options, errors: Vec<String>) -> i32 {
    refuse_with(reporter, options.junit.as_deref(), errors)
}

/// `refuse`, for a refusal that comes before there are options (the command line, the
/// configuration).
pub fn refuse_with(reporter: &mut Reporter, junit: Option<&Path>, errors: Vec<String>) -> i32 {
    reporter.refused(&errors);
    if let Some(path) = junit {
        if let Err(error) = reporter.write_junit(path) {
            eprintln!("error: {error}");
        }
    }
    EXIT_BAD_INPUT
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
        triggers: Vec::new(),
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

/// Whether a verdict is a wait that ran out (its report quotes the console's last lines).
fn timed_out(verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::Fail(f) if matches!(f.kind, FailureKind::TimedOut | FailureKind::NoPowerOff | FailureKind::ProgramFailed))
}

/// One boot, or two when the case asks for captures that differ across boots or for
/// two consoles the same byte for byte (`repeat_exactly`). A replayed boot
/// (`--rr-replay`) is compared byte for byte with the console it was recorded with.
/// With the result, the console log to quote when the verdict is a timeout.
fn boot_once_or_twice(spec: BootSpec, root: &Path, repeat_exactly: bool) -> (CaseResult, Option<PathBuf>) {
    let console = |dir: &Path, verdict: &Verdict| timed_out(verdict).then(|| dir.join("console.log"));
    let trouble = |e: String| Blocked::Build(format!("the bench could not boot: {e}"));
    let first = match spec.run(root) {
        Ok(first) => first,
        Err(e) => return (Err(trouble(e)), None),
    };
    forget_passing_recording(&spec, &first.verdict);
    if let Some(Rr::Replay(recording)) = &spec.rr {
        let tail = console(&spec.dir, &first.verdict);
        return (Ok(replayed(recording, &spec.dir, first.verdict)), tail);
    }
    if (spec.judge.capture.is_empty() && !repeat_exactly) || first.verdict != Verdict::Pass {
        let tail = console(&spec.dir, &first.verdict);
        return (Ok(verdict_result(first.verdict)), tail);
    }
    let first_dir = spec.dir.clone();
    let second_spec = BootSpec { dir: spec.dir.join("second-boot"), first_boot: Some(first_dir.clone()), ..spec };
    let second = match second_spec.run(root) {
        Ok(second) => second,
        Err(e) => return (Err(trouble(e)), None),
    };
    forget_passing_recording(&second_spec, &second.verdict);
    if second.verdict != Verdict::Pass {
        let tail = console(&second_spec.dir, &second.verdict);
        return (Ok(verdict_result(second.verdict).map_err(|m| format!("second boot: {m}"))), tail);
    }
    if repeat_exactly {
        let read = |dir: &Path| std::fs::read(dir.join("console.log")).unwrap_or_default();
        let (a, b) = (read(&first_dir), read(&second_spec.dir));
        let result = match first_difference(&a, &b) {
            None => Ok(()),
            Some(at) => Err(format!(
                "repeat_exactly: the two boots' consoles differ from line {}: first boot: {}; second boot: {}",
                at.line, at.a, at.b
            )),
        };
        return (Ok(result), None);
    }
    for ((pattern, a), b) in second_spec.judge.capture.iter().zip(&first.captures).zip(&second.captures) {
        if a == b {
            let message = format!(
                "{} '{}' captured '{}' in both boots",
                pattern.label,
                pattern.regex.as_str(),
                a.as_deref().unwrap_or("")
            );
            return (Ok(Err(message)), None);
        }
    }
    (Ok(Ok(())), None)
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

/// The run proper; returns the exit status.
pub fn run(ws: &Workspace, options: &Options, reporter: &mut Reporter) -> i32 {
    let started = Instant::now();
    // Every refusal of the run, gathered here and given to `refuse` together: every file
    // that does not parse, and what the cases that parsed name.
    let loaded = load_cases(&ws.cases_dir);
    let mut refusals: Vec<String> = loaded.refusals.clone();
    if options.list {
        if !refusals.is_empty() {
            return refuse(reporter, options, refusals);
        }
        reporter.list(&loaded.cases);
        return EXIT_PASSED;
    }
    let cases = &loaded.cases;
    let selected = match select(cases, &options.filter) {
        Ok(selected) => selected,
        Err(error) => {
            // A name whose file was refused already has its refusal.
            let refused = matches!(&options.filter, Filter::Exact(name) if loaded.refused_names.contains(name));
            if !refused {
                refusals.push(error);
            }
            Vec::new()
        }
    };
    refusals.extend(selected.iter().flat_map(|c| check_inputs(c, &ws.root)));
    // The guest workspace's names, once, only when a case names some of them.
    if selected.iter().any(|c| crate::guest_names::needed(c)) {
        match crate::guest_names::read(&ws.root) {
            Ok(names) => refusals.extend(selected.iter().flat_map(|c| names.check(c))),
            Err(error) => refusals.push(error),
        }
    }
    if options.sweep.is_some() && selected.len() > 1 {
        let names: Vec<&str> = selected.iter().map(|c| c.name.as_str()).collect();
        refusals.push(format!(
            "--sweep runs one case; the filter took {}: {} (name one with --exact)",
            names.len(),
            names.join(", ")
        ));
    }
    let env_seed = parse_env_seed().unwrap_or_else(|error| {
        refusals.push(error);
        None
    });
    if refusals.is_empty() {
        if let Some(dir) = &options.keep_failed {
            if let Err(error) = std::fs::create_dir_all(dir) {
                refusals.push(format!("--keep-failed {}: {error}", dir.display()));
            }
        }
    }
    if !refusals.is_empty() {
        return refuse(reporter, options, refusals);
    }
    if let Some(why) = why_empty(&loaded, &selected, options, &ws.cases_dir) {
        return match options.no_tests {
            NoTests::Fail => {
                eprintln!(
                    "error: nothing to run: {why} (exit status {EXIT_NO_CASES}; --no-tests warn or pass exits 0)"
                );
                EXIT_NO_CASES
            }
            NoTests::Warn => {
                eprintln!("warning: nothing to run: {why}");
                EXIT_PASSED
            }
            NoTests::Pass => EXIT_PASSED,
        };
    }

    // The run's private directory for QMP sockets (qmp.rs), made before anything builds
    // so that a temporary directory too deep for a socket's path is refused first.
    let tmp = std::env::temp_dir();
    crate::qmp::sweep_stale(&tmp);
    let qmp_dir = if selected.iter().any(|c| c.as_boot().is_some()) {
        match crate::qmp::QmpDir::create(&tmp) {
            Ok(dir) => Some(Arc::new(dir)),
            Err(error) => return refuse(reporter, options, vec![error]),
        }
    } else {
        None
    };

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
    let mut rows: Vec<Row> = host_runs
        .iter()
        .map(|(index, arch)| Row {
            label: crate::report::label_of(&selected[*index].name, arch.map(|a| a.name()), None),
            seed: String::new(),
        })
        .collect();
    rows.extend(boots.iter().map(|boot| Row {
        label: crate::report::label_of(&selected[boot.case].name, Some(boot.arch.name()), Some(boot.smp)),
        seed: crate::report::seed_text(boot.seed, true),
    }));
    reporter.run_started(&run_dir, &rows);
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
        let replay = host_replay_line(case, *arch, ws);
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
            replay_note: None,
            sweep: false,
            console_tail: Vec::new(),
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
    let mut probes: HashMap<Arch, crate::qemu::Probe> = HashMap::new();
    for (arch, thread) in probe_threads {
        let probe = thread.join().unwrap_or_else(|_| crate::qemu::Probe {
            version: Err(format!("the probe of {arch}'s QEMU panicked")),
            firmware_dirs: Ok(Vec::new()),
        });
        if let Ok(version) = &probe.version {
            reporter.note("qemu-probed", &format!("qemu {arch}: {version}"));
        }
        probes.insert(arch, probe);
    }
    let mut firmware_checks: HashMap<(Arch, Firmware), Result<(), String>> = HashMap::new();
    for ((index, arch), result) in prepared.iter_mut() {
        let case = selected[*index];
        let probe = &probes[arch];
        let lack = match &probe.version {
            Err(complaint) => Some(complaint.clone()),
            Ok(_) => {
                let (firmware, field) = case.firmware().expect("a planned boot's case is a boot case");
                firmware_checks
                    .entry((*arch, firmware.clone()))
                    .or_insert_with(|| {
                        crate::qemu::check_firmware(*arch, firmware, &ws.root, field, &probe.firmware_dirs)
                    })
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
                qmp_dir: qmp_dir.clone().expect("a run with boots has its QMP socket directory"),
                devices: Vec::new(),
                first_boot: None,
            });
            (index, spec.map(|spec| (spec, boot_of(case).repeat_exactly)))
        })
        .collect();
    let queue = Arc::new(Mutex::new(jobs.into_iter()));
    let (sender, receiver) = mpsc::channel::<(usize, (CaseResult, Option<PathBuf>), Duration)>();
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
            // signal follows (see crates/process).
            let result = match spec {
                Err(blocked) => (Err(blocked), None),
                Ok((spec, repeat_exactly)) => boot_once_or_twice(spec, &root, repeat_exactly),
            };
            if sender.send((index, result, started.elapsed())).is_err() {
                break;
            }
        }));
    }
    drop(sender);
    let mut waiting: BTreeMap<usize, ((CaseResult, Option<PathBuf>), Duration)> = BTreeMap::new();
    let mut next_to_print = 0;
    if let Some(first) = boots.first() {
        reporter.boot_started(&format!("{} {} smp{}", selected[first.case].name, first.arch, first.smp), first.seed);
    }
    for (index, result, took) in receiver {
        waiting.insert(index, (result, took));
        while let Some(((result, timed_out_console), took)) = waiting.remove(&next_to_print) {
            let boot = &boots[next_to_print];
            let case = selected[boot.case];
            let outcome = outcome_of(case, result, options.allow_skip);
            // A wait that ran out says what the guest printed last, so the person need
            // not open the log to see where it stopped.
            let console_tail = match (&outcome, &timed_out_console) {
                (Outcome::Fail(_), Some(console)) => {
                    crate::report::console_tail(console, crate::report::CONSOLE_TAIL_LINES)
                }
                _ => Vec::new(),
            };
            let (replay, replay_note) = replay_line(case, boot, ws);
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
                replay,
                replay_note,
                sweep: boot.seed_from == SeedFrom::Sweep,
                console_tail,
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
