//! The gate, campaigns and replay: what `cargo hostfuzz` does (src/main.rs parses the
//! arguments). Every input runs in its own child from the fork server
//! ([`crate::zygote::served`]); with `--fork-spare` ([`Settings::fork_spare`]) in a spare
//! the runner forked ahead of need ([`crate::exec::spared`]); with `--fork-each`
//! ([`Settings::fork_each`]) in a child forked for it when it comes
//! ([`crate::exec::forked`]); with `--in-process`
//! ([`Settings::in_process`]) in the runner's own process.

use crate::exec::{self, Outcome, Verdict};
use crate::rng::Rng;
use crate::shrink::shrink;
use crate::targets::{RunFn, Target};
use crate::{hex, zygote, Finding};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Inputs per target in the gate.
pub const GATE_COUNT: u64 = 3000;
/// The gate runs every this-many-th input twice and compares the two runs.
pub const SELF_CHECK_EVERY: u64 = 50;

/// The exit status: 0 nothing found, 1 a finding, 3 a hang (the worst wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Nothing found.
    Clean = 0,
    /// A finding.
    Finding = 1,
    /// A hang.
    Hang = 3,
}

/// How the runs are made.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where findings are saved (`<out>/findings/`).
    pub out: PathBuf,
    /// A child past this is killed: a hang.
    pub bound: Duration,
    /// The shrinker's time bound.
    pub shrink_for: Duration,
    /// `HOSTFUZZ_STATS=1`: end reasons one a line, and the depth.
    pub stats: bool,
    /// `--in-process`: every input runs in this process ([`exec::in_process`]), no fork.
    /// For measurement only: an input's statics reach the next, and no bound holds (a
    /// hang hangs the runner). Panics are still caught, and the self-check still runs.
    pub in_process: bool,
    /// `--fork-each`: every input in a child forked when the input comes and waited for
    /// to its exit ([`exec::forked`]), not from the fork server ([`zygote::served`]). For
    /// measurement: the fork server's inputs are as isolated, and faster.
    pub fork_each: bool,
    /// `--fork-spare`: every input in a spare the runner forked ahead of need
    /// ([`exec::spared`]), the fork server before its zygote. For measurement.
    pub fork_spare: bool,
    /// A counted run replays the target's kept regression inputs ([`REGRESSIONS`]) first;
    /// `--no-regressions` leaves them out (`--mutations`: the generator alone must find).
    pub regressions: bool,
}

impl Settings {
    /// From the environment: `HOSTFUZZ_OUT` (default `target/hostfuzz`),
    /// `HOSTFUZZ_BOUND_MS` (5000), `HOSTFUZZ_SHRINK_SECS` (10), `HOSTFUZZ_STATS`.
    pub fn from_env() -> Settings {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let number = |name: &str, default: u64| var(name).and_then(|v| v.parse().ok()).unwrap_or(default);
        Settings {
            out: var("HOSTFUZZ_OUT").map_or_else(|| PathBuf::from("target/hostfuzz"), PathBuf::from),
            bound: Duration::from_millis(number("HOSTFUZZ_BOUND_MS", 5000)),
            shrink_for: Duration::from_secs(number("HOSTFUZZ_SHRINK_SECS", 10)),
            stats: var("HOSTFUZZ_STATS").is_some_and(|v| v != "0"),
            in_process: false,
            fork_each: false,
            fork_spare: false,
            regressions: true,
        }
    }

    /// Runs one input as these settings say: in a child with the bound (from the fork
    /// server, or forked for it), or in process.
    pub fn exec(&self, run: RunFn, input: &[u8]) -> Outcome {
        if self.in_process {
            exec::in_process(run, input)
        } else if self.fork_each {
            exec::forked(run, input, self.bound)
        } else if self.fork_spare {
            exec::spared(run, input, self.bound)
        } else {
            zygote::served(run, input, self.bound)
        }
    }

    /// How inputs run, for the rate line on stderr.
    fn how(&self) -> &'static str {
        if self.in_process {
            "in process"
        } else if self.fork_each {
            "a fork each"
        } else if self.fork_spare {
            "spares forked by the runner"
        } else {
            "fork server"
        }
    }
}

/// How long a target runs.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// This many inputs (the gate: the same inputs every time).
    Count(u64),
    /// Until this much time has passed (a campaign).
    Time(Duration),
}

fn save(dir: &Path, name: &str, input: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, hex::encode(input))) {
        eprintln!("hostfuzz: cannot save {}: {e}", path.display());
    }
    path
}

/// Reports a finding or hang of `target` at `seed`/`iter`: saves the input, shrinks a
/// finding and saves that too. Returns the status it calls for.
fn report(target: &Target, seed: u64, iter: u64, input: &[u8], outcome: &Outcome, settings: &Settings) -> Status {
    let dir = settings.out.join("findings");
    let stem = format!("{}-{seed}-{iter}", target.name);
    let path = save(&dir, &format!("{stem}.hex"), input);
    let Verdict::Found(finding) = &outcome.verdict else {
        println!("{}: HANG at seed {seed} iteration {iter}: killed after {:?}", target.name, settings.bound);
        println!("  input: {} ({} bytes)", path.display(), input.len());
        println!("  replay: cargo hostfuzz --replay {} {}", target.name, path.display());
        return Status::Hang;
    };
    println!("{}: FINDING at seed {seed} iteration {iter}: {finding}", target.name);
    println!("  input: {} ({} bytes, {} read)", path.display(), input.len(), outcome.consumed);
    let same = |candidate: &[u8]| {
        settings.exec(target.run, candidate).finding().is_some_and(|f| f.signature() == finding.signature())
    };
    let shrunk = shrink(input, Instant::now() + settings.shrink_for, same);
    let min = save(&dir, &format!("{stem}.min.hex"), &shrunk.input);
    let bound = if shrunk.timed_out { ", stopped by the time bound" } else { "" };
    println!("  shrunk: {} ({} bytes, {} tries{bound})", min.display(), shrunk.input.len(), shrunk.tries);
    println!("  replay: cargo hostfuzz --replay {} {}", target.name, min.display());
    Status::Finding
}

/// Where the inputs of findings fixed are kept: `<target>-<what>.hex`, each replayed by
/// the gate (and every counted run) of its target before its generated inputs.
pub const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions");

/// The kept inputs of `target` in [`REGRESSIONS`], in name order: (file name, input).
pub fn regressions(target: &Target) -> Result<Vec<(String, Vec<u8>)>, String> {
    let dir = Path::new(REGRESSIONS);
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let prefix = format!("{}-", target.name);
    let mut kept = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Another target's whose name extends this one's (`kernel-mm-…` against a `kernel`)
        // would share the prefix: a name is this target's only if no longer target claims it.
        let longer = crate::targets::TARGETS
            .iter()
            .any(|t| t.name.len() > target.name.len() && name.starts_with(&format!("{}-", t.name)));
        if !name.starts_with(&prefix) || !name.ends_with(".hex") || longer {
            continue;
        }
        let path = entry.path();
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        kept.push((name, hex::decode(&text).map_err(|e| format!("{}: {e}", path.display()))?));
    }
    kept.sort();
    Ok(kept)
}

/// Replays `target`'s kept inputs: the first that finds (or hangs, or cannot be read)
/// ends the run with its status. Says how many passed when there are any.
fn replay_regressions(target: &Target, settings: &Settings) -> Status {
    let kept = match regressions(target) {
        Ok(kept) => kept,
        Err(e) => {
            println!("{}: the kept regression inputs cannot be read: {e}", target.name);
            return Status::Finding;
        }
    };
    for (name, input) in &kept {
        let outcome = settings.exec(target.run, input);
        match &outcome.verdict {
            Verdict::Pass(_) => {}
            Verdict::Found(f) => {
                println!("{}: REGRESSION {name}: {f}", target.name);
                return Status::Finding;
            }
            Verdict::Hang => {
                println!("{}: REGRESSION {name}: HANG: killed after {:?}", target.name, settings.bound);
                return Status::Hang;
            }
        }
    }
    if !kept.is_empty() {
        println!("{}: {} kept regression inputs pass", target.name, kept.len());
    }
    Status::Clean
}

/// Runs `target` from `seed` within `budget`, stopping at its first finding or hang.
/// With `self_check`, every [`SELF_CHECK_EVERY`]-th input runs twice and the two
/// outcomes (verdict, depth and trace hash) must agree. A counted run (`self_check`: the
/// gate) first replays the target's kept regression inputs ([`REGRESSIONS`]) unless
/// [`Settings::regressions`] is off.
pub fn fuzz(target: &Target, seed: u64, budget: Budget, self_check: bool, settings: &Settings) -> Status {
    if self_check && settings.regressions {
        let status = replay_regressions(target, settings);
        if status != Status::Clean {
            stop_serving();
            return status;
        }
    }
    let start = Instant::now();
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    let mut depths = Vec::new();
    let mut status = Status::Clean;
    let mut iter = 0;
    let mut elapsed = Duration::ZERO;
    loop {
        let more = match budget {
            Budget::Count(n) => iter < n,
            Budget::Time(t) => start.elapsed() < t,
        };
        if !more {
            break;
        }
        let input = Rng::for_input(seed, iter).input();
        let outcome = settings.exec(target.run, &input);
        depths.push(outcome.consumed);
        match &outcome.verdict {
            Verdict::Pass(reason) => *reasons.entry(reason.clone()).or_default() += 1,
            _ => {
                elapsed = start.elapsed();
                status = report(target, seed, iter, &input, &outcome, settings);
                iter += 1;
                break;
            }
        }
        if self_check && iter % SELF_CHECK_EVERY == 0 {
            let again = settings.exec(target.run, &input);
            if again != outcome {
                elapsed = start.elapsed();
                let detail = format!("first {outcome:?}, then {again:?}");
                let leak = Outcome {
                    verdict: Verdict::Found(Finding::new("nondeterminism", "two runs differ", detail)),
                    ..outcome
                };
                status = report(target, seed, iter, &input, &leak, settings);
                iter += 1;
                break;
            }
        }
        iter += 1;
    }
    if status == Status::Clean {
        elapsed = start.elapsed();
    }
    stop_serving();
    let elapsed = elapsed.as_secs_f64();
    let checked = if self_check { format!(", every {SELF_CHECK_EVERY}th run twice") } else { String::new() };
    let result = match status {
        Status::Clean => "nothing found",
        Status::Finding => "a finding",
        Status::Hang => "a hang",
    };
    println!("{}: {iter} inputs from seed {seed}{checked}: {result}", target.name);
    let mut by_count: Vec<(&String, &u64)> = reasons.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    if settings.stats {
        println!("  end reasons:");
        for (reason, count) in &by_count {
            println!("    {count:>7}  {reason}");
        }
        depths.sort_unstable();
        let at = |q: usize| depths.get((depths.len().saturating_sub(1)) * q / 100).copied().unwrap_or(0);
        println!(
            "  depth (bytes of decisions read): min {}, median {}, p90 {}, max {}",
            at(0),
            at(50),
            at(90),
            at(100)
        );
    } else {
        let line: Vec<String> = by_count.iter().map(|(r, c)| format!("{r} {c}")).collect();
        println!("  ended: {}", line.join("; "));
    }
    eprintln!(
        "{}: {iter} inputs in {elapsed:.2} s ({:.0} inputs/s, {}{})",
        target.name,
        iter as f64 / elapsed,
        settings.how(),
        crate::cpu::describe()
    );
    status
}

/// Stops the runner's fork servers (the zygote, and `--fork-spare`'s spares): no child
/// waits and every one is reaped.
fn stop_serving() {
    zygote::stop_serving();
    exec::stop_spares();
}

/// Runs a saved input once (in a child, or in process) and prints its outcome.
pub fn replay(target: &Target, input: &[u8], settings: &Settings) -> Status {
    let outcome = settings.exec(target.run, input);
    stop_serving();
    let status = match &outcome.verdict {
        Verdict::Pass(reason) => {
            println!("{}: no finding ({reason}; {} bytes read)", target.name, outcome.consumed);
            Status::Clean
        }
        Verdict::Found(f) => {
            println!("{}: FINDING: {f} ({} bytes read)", target.name, outcome.consumed);
            Status::Finding
        }
        Verdict::Hang => {
            println!("{}: HANG: killed after {:?}", target.name, settings.bound);
            Status::Hang
        }
    };
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Decisions;
    use std::sync::atomic::{AtomicU64, Ordering};

    static RUNS: AtomicU64 = AtomicU64::new(0);

    /// Counts its runs in a static, and panics on a first decision of 7.
    fn counted(d: &mut Decisions) -> Result<(), Finding> {
        RUNS.fetch_add(1, Ordering::SeqCst);
        assert_ne!(d.u8(), 7, "seven");
        Ok(())
    }

    #[test]
    fn in_process_runs_in_this_process_and_still_catches_panics() {
        // No forked run here: the test harness has threads, and the fork per input
        // relies on a runner with one (tests/cli.rs compares the two modes).
        let settings = Settings { in_process: true, ..Settings::from_env() };
        let before = RUNS.load(Ordering::SeqCst);
        let outcome = settings.exec(counted, &[1]);
        assert_eq!(outcome.verdict, Verdict::Pass("ok".to_owned()));
        assert_eq!(RUNS.load(Ordering::SeqCst), before + 1, "an in-process run's static is the runner's");
        let panicked = settings.exec(counted, &[7]);
        let finding = panicked.finding().expect("the panic is a finding");
        assert_eq!(finding.kind, "panic");
        assert!(finding.detail.contains("seven"), "{finding}");
        assert_eq!(RUNS.load(Ordering::SeqCst), before + 2);
    }
}
