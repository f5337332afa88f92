//! The run's plan: the boots (case × width × hart count × seed), each with its directory
//! and whether QEMU's record/replay serves it, the host runs, and the line that replays
//! each of them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_case::{Arch, BootCase, BuildCase, Case, Guest, Kind, SshLoopbackCase};

use crate::cli::Options;
use crate::error::BenchError;
use crate::process::shell_quote;
use crate::qemu::{RecordReplay, RR_FILE};
use crate::report::Row;
use crate::workspace::Workspace;

/// Where a boot's seed came from (the replay line depends on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedFrom {
    None,
    Case,
    Environment,
    Sweep,
}

/// One boot of the run: which case, on which width, with how many harts and which seed.
pub struct PlannedBoot {
    /// The case's index in the run's selection.
    pub case: usize,
    pub arch: Arch,
    pub smp: u32,
    pub seed: Option<u64>,
    pub seed_from: SeedFrom,
    pub timeout: Duration,
    pub dir: PathBuf,
    /// QEMU's record/replay for this boot, or why it cannot serve it (a boot with typed
    /// input is recorded where it can be).
    pub rr: Result<Option<RecordReplay>, String>,
}

/// Whether QEMU's record/replay can serve a boot: it runs under icount only, with sleep
/// on (under sleep=off a recorded boot's typed input never reached the guest), on one
/// hart only (QEMU refuses it with several CPUs), not for devices a case adds itself in
/// `guest.qemu_args` (the bench puts its own disks behind QEMU's blkreplay driver), not
/// for the reference guest's disks (it polls them, and under record its disk requests
/// never completed), and not for a network card (no recording of a guest's traffic is
/// proven here). The reference guest and a recipe's guest use the serial
/// console, the RTC and the QMP monitor, which QEMU records and replays (or, the QMP
/// socket, leaves out of the recording). When it cannot, every reason is given at once
/// ([`reasons`]), so one change to the case does not meet the next reason after it.
fn rr_for(boot: &BootCase, smp: u32, replay: Option<&Path>) -> Result<Option<RecordReplay>, String> {
    if replay.is_none() && boot.inputs.is_empty() {
        return Ok(None);
    }
    let mut why = Vec::new();
    let sleep_off = |o: &str| ["sleep=off", "sleep=no", "sleep=false", "sleep=n"].contains(&o);
    match boot.icount.as_deref() {
        None => why.push("QEMU's record/replay runs only under icount, and the case runs on the host's clock".into()),
        // Found by experiment on QEMU 10.0: a recorded boot under sleep=off never got the
        // typed line to the guest, which then waited out its deadline.
        Some(icount) if icount.split(',').any(sleep_off) => {
            why.push("under icount sleep=off QEMU's record/replay does not deliver typed input to the guest".into())
        }
        Some(_) => {}
    }
    if smp > 1 {
        why.push(format!("QEMU's record/replay takes one hart only, and this boot has {smp}"));
    }
    let disks: Vec<String> = boot.disks.iter().map(|(name, _)| format!("[{name}]")).collect();
    if !disks.is_empty() && matches!(boot.guest, Guest::Built { .. }) {
        // Found by experiment on QEMU 10.0 (rv64, the reference guest's diskrw): under
        // rr=record its first disk request never completed, with the drive behind QEMU's
        // blkreplay driver or not; unrecorded it did. The reference kernel polls its
        // devices (it takes no interrupts); xv6 and Debian's Linux, which wait for their
        // disk's interrupt, record and replay with the bench's disk (docs/reproducibility.md).
        why.push(format!(
            "the reference kernel polls its devices, and under QEMU 10.0's record its disk requests never completed, so the bench does not record it with {}",
            disks.join(" or ")
        ));
    }
    if boot.net.is_some() {
        why.push("the bench does not record its [net] card: a recording of a guest's network traffic (QEMU's filter-replay) is not proven here".into());
    }
    if let Guest::External(guest) = &boot.guest {
        if !guest.qemu_args.is_empty() {
            why.push("the bench does not record devices a case adds in guest.qemu_args (give a disk as [disk] image = \"path\" instead: the bench records its own disks through QEMU's blkreplay driver)".into());
        }
    }
    if !why.is_empty() {
        return Err(reasons(&why));
    }
    Ok(Some(match replay {
        Some(path) => RecordReplay::Replay(path.to_path_buf()),
        None => RecordReplay::Record,
    }))
}

/// Reasons as one text: the one reason, or each numbered, `(1) …; (2) …`.
fn reasons(why: &[String]) -> String {
    match why {
        [one] => one.clone(),
        several => several.iter().enumerate().map(|(i, w)| format!("({}) {w}", i + 1)).collect::<Vec<_>>().join("; "),
    }
}

/// What `--sweep` replaces without a word otherwise: the swept case's pinned `qemu_seed`
/// (a note for the terminal).
pub fn sweep_note(cases: &[&Case], options: &Options) -> Option<String> {
    let seeds = options.sweep.as_ref()?;
    let (name, pinned) = cases.iter().find_map(|c| c.as_boot()?.qemu_seed.map(|seed| (&c.name, seed)))?;
    let noun = if seeds.len() == 1 { "seed" } else { "seeds" };
    Some(format!(
        "note: --sweep replaces {name}'s pinned qemu_seed = {pinned}: its boots take the sweep's {noun} instead"
    ))
}

pub fn plan(cases: &[&Case], options: &Options, run_dir: &Path, env_seed: Option<u64>) -> Vec<PlannedBoot> {
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

/// The host-side runs: each host-tests, scripts and gate case once, a build case and an
/// ssh-loopback case once per width. `--arch` leaves out such a case's other width; it does not leave out a case
/// that runs on no width.
pub fn plan_host(cases: &[&Case], options: &Options) -> Vec<(usize, Option<Arch>)> {
    let mut runs = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        match &case.kind {
            Kind::Boot(_) => {}
            Kind::SshLoopback(SshLoopbackCase { arch: arches, .. }) | Kind::Build(BuildCase { arch: arches, .. }) => {
                for &arch in arches {
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
pub fn replay_line(case: &Case, boot: &PlannedBoot, ws: &Workspace) -> (String, Option<String>) {
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
        Ok(Some(RecordReplay::Record)) => Some(boot.dir.join(RR_FILE)).filter(|path| path.is_file()),
        Ok(Some(RecordReplay::Replay(path))) => Some(path.clone()),
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
pub fn host_replay_line(case: &Case, arch: Option<Arch>, ws: &Workspace) -> String {
    let mut line = format!("{}cargo testbench --exact {}", replay_prefix(ws), case.name);
    if let Some(arch) = arch {
        line.push_str(&format!(" --arch {arch}"));
    }
    line.push_str(&replay_cases(ws));
    line
}

/// `--rr-replay PATH` replays one recorded boot: the recording and the console it was
/// recorded with must be there, and the selection must plan exactly one boot that QEMU's
/// record/replay can serve.
pub fn check_rr_replay(recording: &Path, boots: &[PlannedBoot]) -> Result<(), BenchError> {
    check_replayable(recording, boots).map_err(BenchError::Replay)
}

fn check_replayable(recording: &Path, boots: &[PlannedBoot]) -> Result<(), String> {
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

/// `--gdb` boots one guest under the debugger: the selection must plan exactly one boot.
pub fn check_gdb(boots: &[PlannedBoot]) -> Result<(), BenchError> {
    match boots.len() {
        1 => Ok(()),
        n => Err(BenchError::Refused(vec![format!(
            "--gdb boots one guest under the debugger, and the selection plans {n} boots: name it as its replay line does (--exact, --arch, --smp)"
        )])),
    }
}

/// The run's rows, in the order they run: the host runs, then the boots.
pub fn rows(selected: &[&Case], host_runs: &[(usize, Option<Arch>)], boots: &[PlannedBoot]) -> Vec<Row> {
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
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--smp N` boots a case at N harts under its `timeout_secs_smp` (its own
    /// `timeout_secs` when it has none), and leaves a `keep_smp` case its own counts and
    /// deadline.
    #[test]
    fn smp_overrides_counts_and_deadlines_but_not_a_case_that_keeps_its_own() {
        use clap::Parser;
        let case = |extra: &str| {
            let text = format!("description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\nexpect = ['x']\nsmp = [1, 2]\ntimeout_secs = 30\n{extra}");
            testbench_case::parse("tests/c.toml", &text).unwrap()
        };
        let (plain, slow, kept) = (case(""), case("timeout_secs_smp = 90\n"), case("keep_smp = true\n"));
        let options = crate::cli::Flags::try_parse_from(["testbench", "--smp", "4"]).unwrap().validate().unwrap();
        let boots = plan(&[&plain, &slow, &kept], &options, Path::new("/run"), None);
        let got: Vec<(usize, u32, u64)> = boots.iter().map(|b| (b.case, b.smp, b.timeout.as_secs())).collect();
        assert_eq!(got, [(0, 4, 30), (1, 4, 90), (2, 1, 30), (2, 2, 30)]);
    }

    /// Self-check: a reference-guest case with the bench's own disk or network card is not
    /// recorded (it polls them, and a recorded disk request never completed: the boot
    /// waited out its deadline), and says why, naming the tables; a guest the bench does
    /// not build is recorded with its disk (through blkreplay); no case with a card is.
    #[test]
    fn a_reference_case_with_the_benchs_disk_or_card_is_not_recorded_and_another_guest_is() {
        let text = "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\nexpect = ['x']\nicount = \"shift=3\"\n[[input]]\nafter = 'login'\nsend = \"root\\r\"\n[disk]\nsize_kib = 1024\n";
        let case = testbench_case::parse("tests/c.toml", text).unwrap();
        let why = rr_for(case.as_boot().unwrap(), 1, None).unwrap_err();
        assert!(why.starts_with("the reference kernel polls its devices, and under QEMU 10.0's record"), "{why}");
        assert!(why.ends_with("so the bench does not record it with [disk]"), "{why}");
        let net = text.replace("[disk]\nsize_kib = 1024\n", "[net]\n");
        let case = testbench_case::parse("tests/c.toml", &net).unwrap();
        let why = rr_for(case.as_boot().unwrap(), 1, None).unwrap_err();
        assert!(why.starts_with("the bench does not record its [net] card"), "{why}");
        let plain = text.replace("[disk]\nsize_kib = 1024\n", "");
        let case = testbench_case::parse("tests/c.toml", &plain).unwrap();
        assert_eq!(rr_for(case.as_boot().unwrap(), 1, None), Ok(Some(RecordReplay::Record)));
        let other = text.replace("programs = [\"logsrv\"]\n", "").to_string() + "[guest]\nkernel = \"k\"\n";
        let case = testbench_case::parse("tests/c.toml", &other).unwrap();
        assert_eq!(rr_for(case.as_boot().unwrap(), 1, None), Ok(Some(RecordReplay::Record)));
    }

    /// A boot record/replay cannot serve for three reasons at once (the host's clock, two
    /// harts, a device of its own) names all three, not the first alone.
    #[test]
    fn every_reason_record_replay_cannot_serve_a_boot_is_given_at_once() {
        let text = "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nexpect = ['x']\nsmp = [2]\nclock = \"host\"\nclock_reason = \"typed-input\"\n[[input]]\nafter = 'login'\nsend = \"root\\r\"\n[guest]\nkernel = \"k\"\nqemu_args = [\"-drive\", \"file=fs.img,format=raw\"]\n";
        let case = testbench_case::parse("tests/c.toml", text).unwrap();
        let boot = case.as_boot().unwrap();
        let why = rr_for(boot, 2, None).unwrap_err();
        assert!(why.starts_with("(1) QEMU's record/replay runs only under icount"), "{why}");
        assert!(why.contains("; (2) QEMU's record/replay takes one hart only, and this boot has 2; "), "{why}");
        assert!(why.contains("; (3) the bench does not record devices a case adds in guest.qemu_args"), "{why}");
        // At one hart the other two remain, renumbered.
        let why = rr_for(boot, 1, None).unwrap_err();
        assert!(why.starts_with("(1) QEMU's record/replay runs only under icount"), "{why}");
        assert!(why.contains("; (2) the bench does not record devices") && !why.contains("(3)"), "{why}");
        // One reason is said as it is, unnumbered.
        let sleep_off = text
            .replace(
                "smp = [2]\nclock = \"host\"\nclock_reason = \"typed-input\"\n",
                "icount = \"shift=3,sleep=off\"\n",
            )
            .replace("qemu_args = [\"-drive\", \"file=fs.img,format=raw\"]\n", "");
        let case = testbench_case::parse("tests/c.toml", &sleep_off).unwrap();
        let why = rr_for(case.as_boot().unwrap(), 1, None).unwrap_err();
        assert!(why.starts_with("under icount sleep=off QEMU's record/replay does not deliver"), "{why}");
    }
}
