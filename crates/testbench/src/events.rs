//! The run's events as a program reads them (`--message-format json`): one JSON object a
//! line on stdout, each a [`RunEvent`] with its `event` name and the schema's version
//! ([`SCHEMA`]). These types are the schema's source: docs/running.md ("JSON events")
//! describes each, and the snapshots in `tests` hold one of each kind, so a change of
//! shape is seen in review and bumps [`SCHEMA`].

use std::path::Path;

use serde::Serialize;

/// The version of the events' shape. A field added keeps it; a field renamed, removed
/// or given another meaning bumps it.
pub const SCHEMA: u32 = 1;

/// One event of a run.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum RunEvent<'a> {
    /// The run's input was refused: every refusal, each naming the file, the field and
    /// what is accepted. Nothing ran.
    Refused { errors: &'a [String] },
    /// `--list`: one case, with what a scheduler needs to lease for it.
    Case {
        name: &'a str,
        kind: &'a str,
        arch: Vec<&'a str>,
        description: &'a str,
        whole_run: bool,
        file: &'a Path,
        cores: u32,
        /// Whether it runs on q's quiet set: it measures the host's clock.
        quiet: bool,
        /// What it measures on the host's clock, when it is quiet.
        quiet_because: Option<&'a str>,
        ports: usize,
        /// A boot case's clock: "guest" (icount) or "host"; none for the other kinds.
        clock: Option<&'a str>,
        /// On the host's clock: the case's `clock_reason`.
        clock_reason: Option<&'a str>,
    },
    /// The run has its directory and its plan: how many boots and host runs it holds.
    RunStarted { run_dir: &'a Path, boots: usize },
    /// A boot or host run starts (its label: `case arch smpN`, `case arch`, `case host`).
    BootStarted { boot: &'a str, seed: Option<u64> },
    /// A boot or host run ended, with its verdict (`pass`, `fail`, `skip`, `trouble`).
    BootFinished(&'a BootFinished<'a>),
    /// A sweep's seeds all ended: which failed (`arch/seed`).
    SweepFinished { case: &'a str, seeds: &'a [u64], failed: &'a [String] },
    /// The run ended: its counts, its directory and its HTML report.
    RunFinished {
        passed: usize,
        failed: usize,
        skipped: usize,
        trouble: usize,
        /// The results of quarantined cases (`quarantine.toml`), counted apart from the above.
        quarantined_passed: usize,
        quarantined_failed: usize,
        duration_secs: f64,
        run_dir: &'a Path,
        report: Option<&'a Path>,
        /// The failures grouped by their crash's title (report::crash_groups).
        crashes: &'a [crate::verdict::CrashGroup],
    },
    /// Which accelerator a width's boots run under, and why.
    Accel { message: &'a str },
    /// A build's command line or its output.
    Build { message: &'a str },
    /// A recipe's guest image made or taken from the cache.
    GuestImage { message: &'a str },
    /// A host run's progress (host tests, scripts, gates).
    Host { message: &'a str },
    /// `--prebuild`'s progress.
    Prebuild { message: &'a str },
    /// What a width's QEMU said of itself.
    QemuProbed { message: &'a str },
    /// A `--slurm` run's or task's progress.
    Slurm { message: &'a str },
    /// What the host's ssh is and takes.
    Ssh { message: &'a str },
    /// What `--sweep` does to a case (it replaces a pinned seed).
    Sweep { message: &'a str },
    /// `--coverage`'s summary: the kernel lines the run's boots reached, and its lcov file.
    Coverage { message: &'a str },
}

/// A boot's or host run's end, as the `boot-finished` event says it.
#[derive(Debug, Serialize)]
pub struct BootFinished<'a> {
    pub case: &'a str,
    /// `boot`, or the host kind (`host-tests`, `build`, `scripts`, `gate`, `ssh-loopback`).
    pub kind: &'a str,
    pub arch: Option<&'a str>,
    pub smp: Option<u32>,
    pub seed: Option<u64>,
    /// `pass`, `fail`, `skip` or `trouble` (the bench could not run it).
    pub verdict: &'a str,
    /// Why, for anything but a plain pass (a must_fail case's evidence for its pass).
    pub reason: Option<&'a str>,
    pub failed_as_it_must: bool,
    /// The failure's kind (`timed-out`, `forbidden`, `device`, `build`...: the words a
    /// case's `must_fail = { kind = ... }` takes), for a failure or a must_fail pass.
    pub failure_kind: Option<&'a str>,
    /// What the evidence says of a failure's cause: `deterministic`, `host-dependent`,
    /// `bench-or-host` (docs/history.md); also on a pass whose first boot failed.
    pub failure_class: Option<&'a str>,
    /// The last day of the case's quarantine (`quarantine.toml`), when it is in one: its
    /// failure fails no run.
    pub quarantined_until: Option<&'a str>,
    /// The `console.log` line (from 1) that made the failure, when one did (a forbidden
    /// line, a `[name] FAIL` line, a second `[server] done:` line); none for a failure
    /// no one line made (a deadline with no FAIL line, a device's check, a host kind's).
    pub failure_line: Option<u64>,
    /// That line's shown form, quoted as the reason quotes it (a few hundred bytes at most).
    pub failure_quote: Option<&'a str>,
    /// The crash a failing boot's console shows (its first report), when it shows one.
    pub crash: Option<&'a crate::verdict::Crash>,
    pub console_tail: &'a [String],
    pub notes: &'a [String],
    pub duration_secs: f64,
    pub dir: &'a Path,
    pub replay: &'a str,
    pub replay_note: Option<&'a str>,
}

/// A progress note's kind: the `event` name its line carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    Accel,
    Build,
    GuestImage,
    Host,
    Prebuild,
    QemuProbed,
    Slurm,
    Ssh,
    Sweep,
    Coverage,
}

impl Note {
    /// The event that carries `message` as this kind of note.
    pub fn event(self, message: &str) -> RunEvent<'_> {
        match self {
            Note::Accel => RunEvent::Accel { message },
            Note::Build => RunEvent::Build { message },
            Note::GuestImage => RunEvent::GuestImage { message },
            Note::Host => RunEvent::Host { message },
            Note::Prebuild => RunEvent::Prebuild { message },
            Note::QemuProbed => RunEvent::QemuProbed { message },
            Note::Slurm => RunEvent::Slurm { message },
            Note::Ssh => RunEvent::Ssh { message },
            Note::Sweep => RunEvent::Sweep { message },
            Note::Coverage => RunEvent::Coverage { message },
        }
    }
}

/// One event's line: the schema's version beside the event's own fields.
pub fn line(event: &RunEvent) -> String {
    #[derive(Serialize)]
    struct Line<'a, 'b> {
        schema: u32,
        #[serde(flatten)]
        event: &'a RunEvent<'b>,
    }
    serde_json::to_string(&Line { schema: SCHEMA, event }).expect("an event always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crash the boot-finished event of the snapshot names, with a symbolized trace.
    fn crash() -> crate::verdict::Crash {
        crate::verdict::Crash {
            kind: "panic".into(),
            title: "kernel panic: mm: leak".into(),
            frame: Some("mm::check at src/mm.rs:88:9".into()),
            line: 11,
            lines: 9,
            corrupted: None,
            trace: vec![
                crate::verdict::SymFrame {
                    frame: 0,
                    address: Some(0x8020_1a2c),
                    function: Some("kernel::mm::check_page".into()),
                    file: Some("src/mm.rs".into()),
                    line: Some(88),
                    inlined: true,
                },
                crate::verdict::SymFrame {
                    frame: 0,
                    address: Some(0x8020_1a2c),
                    function: Some("kernel::mm::check".into()),
                    file: Some("src/mm.rs".into()),
                    line: Some(120),
                    inlined: false,
                },
            ],
            trace_error: None,
        }
    }

    /// One line of each kind, as a program reads it: a change of shape shows here.
    #[test]
    fn each_event_kind_has_the_shape_the_schema_documents() {
        let dir = Path::new("/ws/target/testbench/run-1-2");
        let crash = crash();
        let finished = BootFinished {
            case: "bench-boot",
            kind: "boot",
            arch: Some("rv64"),
            smp: Some(2),
            seed: Some(7),
            verdict: "fail",
            reason: Some("[mm] FAIL leak; then timed out after 30s waiting for expect[0] '^done$'"),
            failed_as_it_must: false,
            failure_kind: Some("program-failed"),
            failure_class: Some("deterministic"),
            quarantined_until: None,
            failure_line: Some(12),
            failure_quote: Some("[mm] FAIL leak"),
            crash: Some(&crash),
            console_tail: &["kernel: harts 2".into()],
            notes: &["net.dial[0] (port 7): echoed 1.20s after the guest started".into()],
            duration_secs: 30.5,
            dir: &dir.join("bench-boot/rv64-smp2"),
            replay: "cd /ws && cargo testbench --exact bench-boot --arch rv64 --smp 2 --qemu-seed 7",
            replay_note: None,
        };
        let errors = ["tests/a.toml: expect: missing".to_string()];
        let groups = [crate::verdict::CrashGroup {
            title: "kernel panic: mm: leak".into(),
            kind: "panic".into(),
            boots: vec!["bench-boot rv64 smp2".into()],
            seeds: vec![7],
            first_replay: "cd /ws && cargo testbench --exact bench-boot --arch rv64 --smp 2 --qemu-seed 7".into(),
        }];
        let events = [
            RunEvent::Refused { errors: &errors },
            RunEvent::Case {
                name: "bench-boot",
                kind: "boot",
                arch: vec!["rv64", "rv32"],
                description: "the reference guest boots",
                whole_run: true,
                file: Path::new("tests/bench-boot.toml"),
                cores: 2,
                quiet: true,
                quiet_because: Some("an idle window: trap counts and host CPU over host seconds"),
                ports: 0,
                clock: Some("guest"),
                clock_reason: None,
            },
            RunEvent::RunStarted { run_dir: dir, boots: 3 },
            RunEvent::BootStarted { boot: "bench-boot rv64 smp2", seed: Some(7) },
            RunEvent::BootFinished(&finished),
            RunEvent::SweepFinished { case: "bench-boot", seeds: &[1, 2], failed: &["rv64/2".into()] },
            RunEvent::RunFinished {
                passed: 2,
                failed: 1,
                skipped: 0,
                trouble: 0,
                quarantined_passed: 0,
                quarantined_failed: 1,
                duration_secs: 41.25,
                run_dir: dir,
                report: Some(&dir.join("report.html")),
                crashes: &groups,
            },
            Note::Accel.event("accel rv64: tcg (the case asks for tcg)"),
            Note::QemuProbed.event("rv64: QEMU emulator version 10.0.2"),
        ];
        let lines: Vec<String> = events.iter().map(line).collect();
        insta::assert_snapshot!("run-events", lines.join("\n"));
        for line in &lines {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["schema"], SCHEMA, "{line}");
        }
    }

    /// Every kind of note is an event of its own name.
    #[test]
    fn each_note_kind_is_named_as_before() {
        let names: Vec<String> = [
            Note::Accel,
            Note::Build,
            Note::GuestImage,
            Note::Host,
            Note::Prebuild,
            Note::QemuProbed,
            Note::Slurm,
            Note::Ssh,
            Note::Sweep,
        ]
        .iter()
        .map(|note| serde_json::from_str::<serde_json::Value>(&line(&note.event("m"))).unwrap()["event"].to_string())
        .collect();
        assert_eq!(
            names,
            [
                "\"accel\"",
                "\"build\"",
                "\"guest-image\"",
                "\"host\"",
                "\"prebuild\"",
                "\"qemu-probed\"",
                "\"slurm\"",
                "\"ssh\"",
                "\"sweep\""
            ]
        );
    }
}
