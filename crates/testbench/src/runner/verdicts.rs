//! From a verdict to an outcome: a boot once or twice (`repeat_exactly`, captures that
//! differ across boots, a replay compared with its recording), `must_fail` and the
//! evidence a self-check quotes, a timeout's console tail, and each run's report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_case::{Arch, Case};
use testbench_judge::{FailureKind, Verdict as ConsoleVerdict};

use super::plan::{host_replay_line, replay_line, PlannedBoot, SeedFrom};
use crate::boot::parts::sessions::SESSIONS_DIR;
use crate::boot::BootSpec;
use crate::case_result::{Blocked, CaseResult, HostResult};
use crate::cli::{KeepFailed, Options};
use crate::qemu::{RecordReplay, RR_FILE};
use crate::report::BootReport;
use crate::verdict::{Class, FailKind, Failed, Verdict};
use crate::workspace::Workspace;

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

/// What a case's `must_fail` wants, in words: "a failure of kind K matching 'P'".
fn wanted(case: &Case) -> Option<String> {
    let kind = case.must_fail_kind.as_deref().map(|kind| format!(" of kind {kind}"));
    let pattern = case.must_fail.as_ref().map(|p| format!(" matching '{}'", p.source()));
    (kind.is_some() || pattern.is_some())
        .then(|| format!("a failure{}{}", kind.unwrap_or_default(), pattern.unwrap_or_default()))
}

/// Whether a case's `must_fail` takes a failure: its kind, when it names one, and its
/// reason, when it has a pattern. What a case boots that could not be built
/// (`before_run`) is taken only by a `must_fail` that names the kind `build` (the pieces
/// must be there for any other failure); a build case's own failure is its evidence.
fn must_fail_takes_failed(case: &Case, failed: &Failed, before_run: bool) -> bool {
    let kind = case.must_fail_kind.as_deref();
    (!before_run || failed.kind != FailKind::Build || kind == Some("build"))
        && kind.is_none_or(|kind| kind == failed.kind.name())
        && case.must_fail.as_ref().is_none_or(|pattern| must_fail_takes(pattern, &failed.reason))
}

/// What a case's result is worth, under its `must_fail` and `--allow-skip`: the verdict
/// every sink is told.
fn verdict_of(case: &Case, result: CaseResult, allow_skip: bool) -> Verdict {
    // Whether what failed stopped the case before it ran (a build, the host's lack).
    let (failed, before_run) = match result {
        // The bench's own trouble is not the case's to pass or fail, must_fail or not.
        Err(Blocked::Trouble(message)) => return Verdict::Trouble(message),
        Err(Blocked::Build(message)) => (Failed::new(FailKind::Build, message), true),
        Err(Blocked::HostLack(message)) => (Failed::new(FailKind::HostLack, message), true),
        Ok(Ok(())) => return wanted(case).map_or(Verdict::Pass, Verdict::Unfailed),
        Ok(Err(failed)) => (failed, false),
    };
    match wanted(case) {
        Some(_) if must_fail_takes_failed(case, &failed, before_run) => match &case.must_fail {
            Some(pattern) => {
                let reason = evidence(pattern, failed.reason.clone());
                Verdict::ExpectedFailure(failed.with_reason(reason))
            }
            None => Verdict::ExpectedFailure(failed),
        },
        // What stopped the case before it ran says only its own reason (a host's lack is
        // a skip when --allow-skip says so).
        _ if before_run && failed.kind == FailKind::HostLack && allow_skip => Verdict::Skip(failed.reason),
        Some(_) if before_run => Verdict::Fail(failed),
        Some(wanted) => {
            let got = match case.must_fail_kind {
                Some(_) => format!(" (a failure of kind {})", failed.kind.name()),
                None => String::new(),
            };
            let reason = format!("{}{got}\n(must_fail wanted {wanted})", failed.reason);
            Verdict::Fail(failed.with_reason(reason))
        }
        None => Verdict::Fail(failed),
    }
}

/// Whether a verdict is a wait that ran out (its report quotes the console's last lines).
fn timed_out(verdict: &ConsoleVerdict) -> bool {
    matches!(verdict, ConsoleVerdict::Fail(f) if matches!(f.kind, FailureKind::TimedOut | FailureKind::NoPowerOff | FailureKind::ProgramFailed))
}

/// What one planned boot gave: its result, the console log to quote when the verdict
/// is a timeout, and the notes its devices left (a dial's echo, a poke, the capture).
pub struct Booted {
    pub result: CaseResult,
    pub console: Option<PathBuf>,
    pub notes: Vec<String>,
    /// The failure is a deadline that passed (an expect or the power-off never came):
    /// what other work beside the boot can cause on its own ([`super::alone`]).
    pub deadline: bool,
    /// What a second boot of a failure showed of its cause (`classify.rs`).
    pub class: Option<crate::verdict::Class>,
}

impl Booted {
    pub fn blocked(blocked: Blocked) -> Booted {
        Booted { result: Err(blocked), console: None, notes: Vec::new(), deadline: false, class: None }
    }
}

/// Whether a verdict is a deadline that passed while the bench waited for the guest.
fn deadline_passed(verdict: &ConsoleVerdict) -> bool {
    matches!(verdict, ConsoleVerdict::Fail(f) if matches!(f.kind, FailureKind::TimedOut | FailureKind::NoPowerOff))
}

/// One boot, or two when the case asks for captures that differ across boots or for
/// two consoles the same byte for byte (`repeat_exactly`). A replayed boot
/// (`--rr-replay`) is compared byte for byte with the console it was recorded with.
pub fn boot_once_or_twice(spec: BootSpec, root: &Path, repeat_exactly: bool) -> Booted {
    let (dir, rules, elf) = (spec.dir.clone(), spec.plan.crash.rules, spec.plan.crash_elf.clone());
    let booted = boot_and_compare(spec, root, repeat_exactly);
    match rules {
        Some(rules) => name_crash(booted, &dir, rules, elf.as_ref()),
        None => booted,
    }
}

/// A failing boot's crash, named on its failure: read from the console of the boot that
/// failed (the second's, when the reason says so), its frames symbolized against `elf`.
fn name_crash(
    mut booted: Booted,
    dir: &Path,
    rules: testbench_triage::Guest,
    elf: Option<&crate::crash::KernelElf>,
) -> Booted {
    if let Ok(Err(failed)) = &mut booted.result {
        let console = match failed.reason.starts_with("second boot: ") {
            true => dir.join("second-boot").join("console.log"),
            false => dir.join("console.log"),
        };
        if failed.crash.is_none() {
            failed.crash = crate::crash::in_console(&console, rules, elf).map(Box::new);
        }
    }
    booted
}

fn boot_and_compare(spec: BootSpec, root: &Path, repeat_exactly: bool) -> Booted {
    let console = |dir: &Path, verdict: &ConsoleVerdict| timed_out(verdict).then(|| dir.join("console.log"));
    let trouble =
        |e: crate::boot::Trouble| Booted::blocked(Blocked::Trouble(format!("the bench could not boot it: {e}")));
    let first = match spec.run(root) {
        Ok(first) => first,
        Err(e) => return trouble(e),
    };
    forget_passing_recording(&spec, &first.verdict);
    let mut notes = first.notes.clone();
    if let Some(RecordReplay::Replay(recording)) = &spec.machine.rr {
        let tail = console(&spec.dir, &first.verdict);
        return Booted {
            result: Ok(replayed(recording, &spec.dir, first.verdict)),
            console: tail,
            notes,
            deadline: false,
            class: None,
        };
    }
    if (spec.plan.judge.capture.is_empty() && !repeat_exactly) || first.verdict != ConsoleVerdict::Pass {
        let tail = console(&spec.dir, &first.verdict);
        let deadline = deadline_passed(&first.verdict);
        return Booted { result: Ok(verdict_result(first.verdict)), console: tail, notes, deadline, class: None };
    }
    let first_dir = spec.dir.clone();
    let second_spec = BootSpec { dir: spec.dir.join("second-boot"), first_boot: Some(first_dir.clone()), ..spec };
    let second = match second_spec.run(root) {
        Ok(second) => second,
        Err(e) => return trouble(e),
    };
    forget_passing_recording(&second_spec, &second.verdict);
    if !notes.is_empty() || !second.notes.is_empty() {
        notes = notes.into_iter().map(|n| format!("first boot: {n}")).collect();
        notes.extend(second.notes.iter().map(|n| format!("second boot: {n}")));
    }
    let done = |result: Result<(), Failed>, console: Option<PathBuf>, notes: Vec<String>| Booted {
        result: Ok(result),
        console,
        notes,
        deadline: false,
        class: None,
    };
    if second.verdict != ConsoleVerdict::Pass {
        let tail = console(&second_spec.dir, &second.verdict);
        let deadline = deadline_passed(&second.verdict);
        let result = verdict_result(second.verdict).map_err(|failed| failed.prefixed("second boot: "));
        return Booted { deadline, ..done(result, tail, notes) };
    }
    if repeat_exactly {
        let read = |dir: &Path| std::fs::read(dir.join("console.log")).unwrap_or_default();
        let (a, b) = (read(&first_dir), read(&second_spec.dir));
        let result = match first_difference(&a, &b) {
            None => Ok(()),
            Some(at) => Err(Failed::new(
                FailKind::Repeat,
                format!(
                    "repeat_exactly: the two boots' consoles differ from line {}: first boot: {}; second boot: {}",
                    at.line, at.a, at.b
                ),
            )),
        };
        return done(result, None, notes);
    }
    for ((pattern, a), b) in second_spec.plan.judge.capture.iter().zip(&first.captures).zip(&second.captures) {
        if a == b {
            let message = format!(
                "{} '{}' captured '{}' in both boots",
                pattern.label,
                pattern.regex.as_str(),
                a.as_deref().unwrap_or("")
            );
            return done(Err(Failed::new(FailKind::Repeat, message)), None, notes);
        }
    }
    done(Ok(()), None, notes)
}

/// A passing boot's recording is of no use: only a failure's replay line names one.
fn forget_passing_recording(spec: &BootSpec, verdict: &ConsoleVerdict) {
    if spec.machine.rr == Some(RecordReplay::Record) && *verdict == ConsoleVerdict::Pass {
        let _ = std::fs::remove_file(spec.dir.join(RR_FILE));
        let _ = std::fs::remove_file(spec.dir.join(crate::boot::recording::GUEST_FILE));
    }
}

/// The verdict on a replayed boot: the replayed console must be the recorded one byte
/// for byte; then the boot's own verdict stands, said to be a replay.
fn replayed(recording: &Path, dir: &Path, verdict: ConsoleVerdict) -> Result<(), Failed> {
    let recorded_log = recording.with_file_name("console.log");
    let recorded = match std::fs::read(&recorded_log) {
        Ok(bytes) => bytes,
        Err(error) => {
            let reason = format!("--rr-replay: cannot read {}: {error}", recorded_log.display());
            return Err(Failed::new(FailKind::Replay, reason));
        }
    };
    let replayed = std::fs::read(dir.join("console.log")).unwrap_or_default();
    let (recorded, replayed) = (console_only(&recorded), console_only(&replayed));
    if let Some(at) = first_difference(recorded, replayed) {
        let reason = format!(
            "--rr-replay: the replay differs from the recording from console line {}: recorded: {}; replayed: {}",
            at.line, at.a, at.b
        );
        return Err(Failed::new(FailKind::Replay, reason));
    }
    let same = format!("replayed {} byte for byte ({} console bytes as recorded)", recording.display(), recorded.len());
    match verdict {
        ConsoleVerdict::Pass => Ok(()),
        ConsoleVerdict::Fail(failure) => Err(Failed::from(failure).prefixed(&format!("{same}; the verdict again: "))),
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

fn verdict_result(verdict: ConsoleVerdict) -> Result<(), Failed> {
    match verdict {
        ConsoleVerdict::Pass => Ok(()),
        ConsoleVerdict::Fail(failure) => Err(failure.into()),
    }
}

/// `--keep-failed DIR`: a failed boot's logs copied where they outlive pruning (a copy
/// that fails is said when the run ends: [`KeepFailed::trouble`]).
/// A case booted twice keeps its second boot's too, as `<stem>.second-boot.<file>`.
fn keep_failed(keep: &KeepFailed, case: &Case, boot: &PlannedBoot) {
    let mut stem = format!("{}-{}.smp{}", boot.arch, case.name, boot.smp);
    if boot.seed_from == SeedFrom::Sweep {
        stem.push_str(&format!(".seed{}", boot.seed.unwrap_or(0)));
    }
    keep_boot(keep, &boot.dir, &stem);
    let second = boot.dir.join("second-boot");
    if second.is_dir() {
        keep_boot(keep, &second, &format!("{stem}.second-boot"));
    }
}

/// One boot's logs in `dir`, each as `<stem>.<file>`.
fn keep_boot(keep: &KeepFailed, dir: &Path, stem: &str) {
    keep.copy(&dir.join("console.log"), &format!("{stem}.log"));
    keep.copy(&dir.join("qemu-stderr.log"), &format!("{stem}.qemu-stderr.log"));
    keep.copy(&dir.join("command-line"), &format!("{stem}.command-line"));
    keep.copy(&dir.join("devices.log"), &format!("{stem}.devices.log"));
    // Each session's transcript (sessions/<name>.log), as <stem>.session-<name>.log.
    keep_sessions(keep, dir, stem);
}

/// Each session's transcript in `dir` (sessions/<name>.log), as `<stem>.session-<name>.log`.
fn keep_sessions(keep: &KeepFailed, dir: &Path, stem: &str) {
    if let Ok(entries) = std::fs::read_dir(dir.join(SESSIONS_DIR)) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(session) = name.strip_suffix(".log") {
                keep.copy(&entry.path(), &format!("{stem}.session-{session}.log"));
            }
        }
    }
}

/// `--keep-failed DIR` for an ssh-loopback case: the server's log, and each session's
/// transcript, guest console and QEMU stderr, as `<arch>-<case>.<file>`.
fn keep_failed_loopback(keep: &KeepFailed, case: &Case, arch: Option<Arch>, dir: &Path) {
    let stem = format!("{}-{}", arch.map_or("host", Arch::name), case.name);
    keep.copy(&dir.join(crate::loopback::SERVER_LOG), &format!("{stem}.server.log"));
    keep_sessions(keep, dir, &stem);
}

/// The report of a case that boots nothing, once it ran.
pub fn host_report(
    case: &Case,
    arch: Option<Arch>,
    result: HostResult,
    took: Duration,
    dir: PathBuf,
    ws: &Workspace,
    options: &Options,
) -> BootReport {
    let result = result.map(|ran| ran.map_err(|reason| Failed::new(FailKind::of_host(&case.kind), reason)));
    let verdict = verdict_of(case, result, options.allow_skip);
    let replay = host_replay_line(case, arch, ws);
    if let (true, Some(keep), testbench_case::Kind::SshLoopback(_)) =
        (verdict.is_failure(), &options.keep_failed, &case.kind)
    {
        keep_failed_loopback(keep, case, arch, &dir);
    }
    BootReport {
        class: Class::of_verdict(&verdict),
        quarantined: None,
        case: case.name.clone(),
        kind: case.kind.name(),
        arch: arch.map(|a| a.name().to_string()),
        smp: None,
        seed: None,
        verdict,
        duration: took,
        dir,
        replay,
        replay_note: None,
        sweep: false,
        console_tail: Vec::new(),
        notes: Vec::new(),
    }
}

/// The report of a boot, once it ran (its failed logs kept under `--keep-failed`).
pub fn boot_report(
    case: &Case,
    boot: &PlannedBoot,
    Booted { result, console: timed_out_console, notes, class, .. }: Booted,
    took: Duration,
    ws: &Workspace,
    options: &Options,
) -> BootReport {
    let verdict = verdict_of(case, result, options.allow_skip);
    // A wait that ran out says what the guest printed last, so the person need not open
    // the log to see where it stopped.
    let console_tail = match (&verdict, &timed_out_console) {
        (Verdict::Fail(_), Some(console)) => crate::report::console_tail(console, crate::report::CONSOLE_TAIL_LINES),
        _ => Vec::new(),
    };
    let (replay, replay_note) = replay_line(case, boot, ws);
    // What a replay cannot repeat matters where a replay is wanted: a failing boot.
    let replay_note = replay_note.filter(|_| verdict.is_failure());
    if let (true, Some(keep)) = (verdict.is_failure(), &options.keep_failed) {
        keep_failed(keep, case, boot);
    }
    // A failure's class, or a pass's whose first boot failed (host-dependent).
    let class = Class::of_verdict(&verdict).or(class.filter(|_| !matches!(verdict, Verdict::Skip(_))));
    BootReport {
        class,
        quarantined: None,
        case: case.name.clone(),
        kind: "boot",
        arch: Some(boot.arch.name().into()),
        smp: Some(boot.smp),
        seed: boot.seed,
        verdict,
        duration: took,
        dir: boot.dir.clone(),
        replay,
        replay_note,
        sweep: boot.seed_from == SeedFrom::Sweep,
        console_tail,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

#[cfg(test)]
mod must_fail_tests {
    use super::*;

    fn case(must_fail: &str) -> Case {
        let text = format!(
            "description = \"x\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [{{ package = \"smoke\", bin = \"smoke\" }}]\nexpect = ['x']\nmust_fail = {must_fail}\n"
        );
        testbench_case::parse("tests/c.toml", &text).unwrap()
    }

    fn failed(kind: FailKind, reason: &str) -> CaseResult {
        Ok(Err(Failed::new(kind, reason)))
    }

    /// `must_fail` names the failure's kind, its reason, or both; a failure of another
    /// kind, or a pass, fails the self-check saying what it wanted.
    #[test]
    fn must_fail_takes_the_kind_it_names_and_its_pattern_still_works() {
        let timed_out = || failed(FailKind::TimedOut, "timed out after 3s waiting for expect[0] 'x'");
        let by_kind = case("{ kind = \"timed-out\" }");
        assert_eq!(
            verdict_of(&by_kind, timed_out(), false),
            Verdict::ExpectedFailure(Failed::new(FailKind::TimedOut, "timed out after 3s waiting for expect[0] 'x'"))
        );
        assert_eq!(
            verdict_of(&by_kind, failed(FailKind::Forbidden, "forbidden line"), false),
            Verdict::Fail(Failed::new(
                FailKind::Forbidden,
                "forbidden line (a failure of kind forbidden)\n(must_fail wanted a failure of kind timed-out)"
            ))
        );
        let both = case("{ kind = \"timed-out\", reason = 'expect\\[1\\]' }");
        assert!(
            matches!(verdict_of(&both, timed_out(), false), Verdict::Fail(ref f) if f.reason.ends_with("(must_fail wanted a failure of kind timed-out matching 'expect\\[1\\]')"))
        );
        let by_text = case("'^timed out'");
        assert!(matches!(verdict_of(&by_text, timed_out(), false), Verdict::ExpectedFailure(_)));
        let unfailed = verdict_of(&by_kind, Ok(Ok(())), false);
        assert_eq!(unfailed, Verdict::Unfailed("a failure of kind timed-out".into()));
        assert!(unfailed.is_failure());
        assert_eq!(unfailed.reason().unwrap(), "passed, but must_fail wanted a failure of kind timed-out");
        // A build that failed is no self-check's evidence unless it names the kind build.
        let build = || Err(Blocked::Build("cargo failed".into()));
        assert_eq!(verdict_of(&by_text, build(), false), Verdict::Fail(Failed::new(FailKind::Build, "cargo failed")));
        let wants_build = case("{ kind = \"build\" }");
        assert_eq!(
            verdict_of(&wants_build, build(), false),
            Verdict::ExpectedFailure(Failed::new(FailKind::Build, "cargo failed"))
        );
        // A build case's own failure (its binary scan, its cargo error) is a self-check's
        // evidence by its pattern, as any case's is: it failed as it ran.
        let scanned = || failed(FailKind::Build, "forbidden bytes \"x\" at offset 0x10 of smoke");
        let by_scan = case("'^forbidden bytes'");
        assert!(matches!(verdict_of(&by_scan, scanned(), false), Verdict::ExpectedFailure(_)));
        // A host's lack that must_fail does not take is a skip under --allow-skip, as before.
        let lack = || Err(Blocked::HostLack("qemu-system-riscv64 cannot run".into()));
        assert_eq!(verdict_of(&by_kind, lack(), true), Verdict::Skip("qemu-system-riscv64 cannot run".into()));
        assert_eq!(
            verdict_of(&by_kind, lack(), false),
            Verdict::Fail(Failed::new(FailKind::HostLack, "qemu-system-riscv64 cannot run"))
        );
    }

    /// The failure keeps the console line that made it through a `must_fail`'s evidence.
    #[test]
    fn a_failures_place_is_carried_to_the_verdict() {
        let place = crate::verdict::Place { line: 7, quote: "kernel PANIC".into() };
        let forbidden = Failed { place: Some(place.clone()), ..Failed::new(FailKind::Forbidden, "forbidden: PANIC") };
        let by_kind = case("{ kind = \"forbidden\" }");
        let verdict = verdict_of(&by_kind, Ok(Err(forbidden.clone())), false);
        assert_eq!(verdict.failed().and_then(|f| f.place.clone()), Some(place.clone()));
        let plain = case("'^never$'");
        let verdict = verdict_of(&plain, Ok(Err(forbidden)), false);
        assert!(matches!(verdict, Verdict::Fail(ref f) if f.place == Some(place)));
    }
}
