//! `cargo hostfuzz`: the gate, campaigns, replay (docs/host-fuzzing.md).
//!
//!     cargo hostfuzz                                  the gate: every target but the two that
//!                                                     must find, a fixed number of inputs from seed 1
//!     cargo hostfuzz --target canary                  one target, the gate's inputs
//!     cargo hostfuzz --seed 7 --seconds 60 [TARGET]   a campaign (each target, 60 s)
//!     cargo hostfuzz --count N ...                    N inputs instead of the gate's number
//!     cargo hostfuzz --replay TARGET FILE.hex         one saved input
//!     cargo hostfuzz --list                           the targets
//!     cargo hostfuzz --in-process ...                 no fork: each input in the runner's
//!                                                     own process (for measurement only:
//!                                                     statics may leak between inputs)
//!     cargo hostfuzz --fork-each ...                  each input in a child forked when it
//!                                                     comes, not from the fork server (for
//!                                                     measurement: as isolated, slower)
//!     cargo hostfuzz --fork-spare ...                 each input in a spare the runner forked
//!                                                     ahead of need, the fork server before its
//!                                                     zygote (for measurement)
//!     cargo hostfuzz --slurm --seeds A..B [--slurm-partition P] [--seconds T | --count N] [TARGET]
//!                                                     a campaign as a Slurm job array, one seed
//!                                                     a task, joined in seed order (src/slurm.rs)
//!     cargo hostfuzz --no-regressions ...             a counted run without replaying the
//!                                                     target's kept inputs (hostfuzz/regressions/)
//!     cargo hostfuzz --mutations [ID...]              each check of hostfuzz/mutations.toml removed
//!                                                     in a scratch copy: a finding within 20,000
//!                                                     inputs for each (src/mutations.rs)
//!
//! Exit status: 0 nothing found, 1 a finding, 3 a hang, 2 a usage error (with `--slurm`,
//! the worst seed's; 4 when a seed's task gave no result). With
//! `--mutations`: 0 every mutation caught, 1 one survived, 2 the run proves nothing.

use hostfuzz::runner::{self, Budget, Settings, Status, GATE_COUNT};
use hostfuzz::targets::{self, Target, TARGETS};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str =
    "usage: cargo hostfuzz [--list] [--seed S] [--seconds T | --count N] [--in-process | --fork-each | --fork-spare] [--no-regressions] [--target] [TARGET]\n       \
     cargo hostfuzz [--in-process | --fork-each | --fork-spare] --replay TARGET FILE.hex\n       \
     cargo hostfuzz --slurm --seeds A..B [--slurm-partition P] [--slurm-queue-secs S] [--seconds T | --count N] [TARGET]\n       \
     cargo hostfuzz --mutations [ID...]";

fn target(name: &str) -> Result<&'static Target, String> {
    targets::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        format!("no target {name:?} (targets: {})", names.join(", "))
    })
}

fn run(args: &[String]) -> Result<u8, String> {
    let mut settings = Settings::from_env();
    let mut seed = 1u64;
    let mut budget = Budget::Count(GATE_COUNT);
    let mut chosen: Option<&Target> = None;
    let (mut slurm, mut seeds, mut partition, mut queue) = (false, None, None, Duration::from_secs(600));
    let mut args = args.iter();
    let value = |flag: &str, v: Option<&String>| v.cloned().ok_or_else(|| format!("{flag} needs a value"));
    let number = |flag: &str, v: Option<&String>| -> Result<u64, String> {
        value(flag, v)?.parse().map_err(|_| format!("{flag} needs a number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--list" => {
                for t in TARGETS {
                    println!("{:<14} {}{}", t.name, t.about, if t.gate { "" } else { " (not in the gate)" });
                }
                return Ok(Status::Clean as u8);
            }
            "--replay" => {
                let t = target(&value("--replay", args.next())?)?;
                let path = value("--replay", args.next())?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                let input = hostfuzz::hex::decode(&text).map_err(|e| format!("{path}: {e}"))?;
                return Ok(runner::replay(t, &input, &settings) as u8);
            }
            "--seed" => seed = number("--seed", args.next())?,
            "--seconds" => budget = Budget::Time(Duration::from_secs(number("--seconds", args.next())?)),
            "--count" => budget = Budget::Count(number("--count", args.next())?),
            "--in-process" => settings.in_process = true,
            "--fork-each" => settings.fork_each = true,
            "--fork-spare" => settings.fork_spare = true,
            "--no-regressions" => settings.regressions = false,
            "--slurm" => slurm = true,
            "--seeds" => seeds = Some(hostfuzz::slurm::parse_seeds(&value("--seeds", args.next())?)?),
            "--slurm-partition" => partition = Some(value("--slurm-partition", args.next())?),
            "--slurm-queue-secs" => queue = Duration::from_secs(number("--slurm-queue-secs", args.next())?),
            "--target" => chosen = Some(target(&value("--target", args.next())?)?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(Status::Clean as u8);
            }
            name if !name.starts_with('-') && chosen.is_none() => chosen = Some(target(name)?),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if slurm || seeds.is_some() || partition.is_some() {
        let (Some(seeds), true) = (seeds, slurm) else {
            return Err(
                "--slurm runs a campaign over --seeds A..B, and --seeds and --slurm-partition need --slurm".into()
            );
        };
        let campaign = hostfuzz::slurm::Campaign {
            seeds,
            partition,
            queue,
            budget,
            target: chosen.map(|t| t.name.to_string()),
            targets: chosen.map_or_else(|| TARGETS.iter().filter(|t| t.gate).count(), |_| 1),
            in_process: settings.in_process,
        };
        return campaign.run(&hostfuzz::slurm::root());
    }
    // One core for the runner, its zygote and their children (src/cpu.rs).
    hostfuzz::cpu::pin()?;
    let self_check = matches!(budget, Budget::Count(_));
    let chosen: Vec<&Target> = match chosen {
        Some(t) => vec![t],
        None => TARGETS.iter().filter(|t| t.gate).collect(),
    };
    let worst = chosen.iter().map(|t| runner::fuzz(t, seed, budget, self_check, &settings)).max();
    Ok(worst.unwrap_or(Status::Clean) as u8)
}

fn main() -> ExitCode {
    // First, with one thread: the code on huge pages before any fork (hugetext.rs);
    // HOSTFUZZ_HUGE_TEXT=0 leaves it where it is, =report says what moved.
    let huge = std::env::var_os("HOSTFUZZ_HUGE_TEXT");
    if huge.as_deref() != Some("0".as_ref()) {
        let moved = hostfuzz::hugetext::remap();
        if huge.as_deref() == Some("report".as_ref()) {
            eprintln!(
                "hostfuzz: code on huge pages: {} stretches of 2 MiB ({} left on small pages)",
                moved.huge, moved.left
            );
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--mutations") {
        return ExitCode::from(hostfuzz::mutations::main(&args[1..], &Settings::from_env()));
    }
    match run(&args) {
        Ok(status) => ExitCode::from(status),
        Err(message) => {
            eprintln!("hostfuzz: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
