//! `cargo testbench --measure-deadlines [FILTER] [--runs N]`: boots each boot case in
//! guest time whose name contains FILTER alone (`--jobs 1`), N times (default 3) on each
//! of its widths, and writes its slowest pass per width into the record the deadlines
//! gate reads (`tests/data/deadlines.toml`, testbench_gates::deadlines). A width on which
//! any of the N boots did not pass is not recorded, and the measurement says so and
//! fails: a deadline is never measured from a failing boot.
//!
//! Each boot is this binary run again (`--exact NAME --arch W --jobs 1
//! --message-format json`), so a measured boot is what `cargo testbench` boots, its
//! build included in nothing but its first run (the run's own figure is the boot's).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use testbench_gates::deadlines;

/// The flag that picks this mode (first on the command line).
pub const FLAG: &str = "--measure-deadlines";

/// Boots per width unless `--runs` says otherwise, and the most it may say.
const RUNS: u32 = 3;
const RUNS_MAX: u32 = 20;

/// What a measured boot may take on top of its case's deadline: its build, the first time.
const BUILD_ALLOWANCE: Duration = Duration::from_secs(1800);

/// Reads `[FILTER] [--runs N]`; an argument it does not take is refused naming it.
fn parse(args: &[OsString]) -> Result<(String, u32), String> {
    let mut filter = None;
    let mut runs = RUNS;
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                let value = args.next().ok_or("--runs: needs a number of boots per width")?;
                runs = match value.parse::<u32>() {
                    Ok(n @ 1..=RUNS_MAX) => n,
                    _ => return Err(format!("--runs {value}: not accepted; a whole number from 1 to {RUNS_MAX}")),
                };
            }
            flag if flag.starts_with('-') => {
                return Err(format!("{flag}: not an option of {FLAG}; it takes [FILTER] [--runs N]"))
            }
            _ if filter.is_some() => return Err(format!("{arg}: a second FILTER; {FLAG} takes one")),
            _ => filter = Some(arg),
        }
    }
    Ok((filter.unwrap_or_default(), runs))
}

/// The slowest of one boot's runs, from the JSON events of `cargo testbench`: every
/// boot-finished event's duration, when each passed (a self-check's expected failure
/// included); the first reason otherwise.
fn slowest_pass(stdout: &str) -> Result<f64, String> {
    let mut slowest: Option<f64> = None;
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event["event"] != "boot-finished" {
            continue;
        }
        if event["verdict"] != "pass" {
            return Err(event["reason"].as_str().unwrap_or("(no reason)").to_string());
        }
        let secs = event["duration_secs"].as_f64().ok_or("a boot-finished event without duration_secs")?;
        slowest = Some(slowest.map_or(secs, |s: f64| s.max(secs)));
    }
    slowest.ok_or_else(|| "no boot finished".to_string())
}

/// One width of one case, `runs` times: the slowest pass, or why there is none.
fn measure_width(root: &Path, name: &str, width: &str, deadline: u64, runs: u32) -> Result<f64, String> {
    let bench = std::env::current_exe().map_err(|e| format!("cannot name this binary: {e}"))?;
    let mut slowest = 0.0f64;
    for run in 1..=runs {
        let bound = Duration::from_secs(deadline) * 2 + BUILD_ALLOWANCE;
        let out = crate::process::Cmd::new(&bench, format!("the boot of {name} on {width}"), bound)
            .cwd(root)
            .env("TESTBENCH_ROOT", root)
            .args(["--exact", name, "--arch", width, "--jobs", "1", "--message-format", "json"])
            .output()
            .map_err(|e| e.to_string())?;
        let secs = slowest_pass(&String::from_utf8_lossy(&out.stdout)).map_err(|why| format!("run {run}: {why}"))?;
        slowest = slowest.max(secs);
    }
    Ok(slowest)
}

/// The mode's work: every held case the filter takes, measured and recorded. Exit 0 when
/// every width was measured, 1 when one was not, 2 for a command line it does not take.
pub fn measure(root: &Path, args: &[OsString]) -> ! {
    let (filter, runs) = match parse(args) {
        Ok(parsed) => parsed,
        Err(why) => {
            eprintln!("testbench: {why}");
            std::process::exit(2)
        }
    };
    let record_path = root.join(deadlines::RECORD);
    let cases = match load(root, &record_path) {
        Ok(loaded) => loaded,
        Err(why) => {
            eprintln!("testbench: {why}");
            std::process::exit(2)
        }
    };
    let mut failed = 0;
    let mut taken = 0;
    for (name, widths, deadline) in cases.into_iter().filter(|(name, ..)| name.contains(&filter)) {
        taken += 1;
        let mut measured = BTreeMap::new();
        for width in widths {
            match measure_width(root, &name, width, deadline, runs) {
                Ok(slowest) => {
                    let minimum = deadlines::minimum(slowest);
                    let verdict = if deadline >= minimum { "holds" } else { "is UNDER it" };
                    println!("{name} {width}: slowest pass {slowest:.2} s of {runs}; minimum deadline {minimum} s, timeout_secs {deadline} {verdict}");
                    measured.insert(width.to_string(), slowest);
                }
                Err(why) => {
                    failed += 1;
                    println!("{name} {width}: not measured: {why}");
                }
            }
        }
        // Each case is recorded as soon as it is measured, into the record as it is on
        // disk then: a measurement cut short keeps what it measured, and one run beside
        // another (two filters at once) keeps the other's cases.
        if !measured.is_empty() {
            if let Err(e) = record_case(&record_path, &name, measured, runs) {
                eprintln!("testbench: writing {}: {e}", record_path.display());
                std::process::exit(1)
            }
        }
    }
    if taken == 0 {
        eprintln!("testbench: {FLAG}: no boot case in guest time (icount, its deadline not its evidence) has a name containing {filter:?}");
        std::process::exit(2)
    }
    println!("recorded in {}", record_path.display());
    std::process::exit(if failed == 0 { 0 } else { 1 })
}

/// One case's widths written into the record as it is on disk now.
fn record_case(path: &Path, name: &str, widths: BTreeMap<String, f64>, runs: u32) -> Result<(), String> {
    let mut record = deadlines::read_record(path).map_err(|e| e.to_string())?;
    record.entry(name.to_string()).or_default().extend(widths);
    deadlines::write_record(path, &record, runs).map_err(|e| e.to_string())
}

/// The cases the gate holds: name, widths, deadline in seconds.
type Held = Vec<(String, Vec<&'static str>, u64)>;

/// The cases the gate holds (name, widths, deadline); the record is read first, so that
/// one that is not a record is refused before anything boots.
fn load(root: &Path, record_path: &Path) -> Result<Held, String> {
    deadlines::read_record(record_path).map_err(|e| e.to_string())?;
    let held = deadlines::cases(root)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|(_, case)| deadlines::held(&case).map(|(widths, deadline)| (case.name, widths, deadline)))
        .collect();
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_takes_a_filter_and_a_count_and_refuses_the_rest() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(parse(&args(&[])), Ok((String::new(), 3)));
        assert_eq!(parse(&args(&["bench-", "--runs", "5"])), Ok(("bench-".into(), 5)));
        assert!(parse(&args(&["--runs", "0"])).unwrap_err().contains("a whole number from 1 to 20"));
        assert!(parse(&args(&["--jobs", "2"])).unwrap_err().contains("it takes [FILTER] [--runs N]"));
        assert!(parse(&args(&["a", "b"])).unwrap_err().contains("a second FILTER"));
    }

    #[test]
    fn the_slowest_pass_is_read_from_the_events_and_a_failure_is_no_measurement() {
        let pass = |secs: f64| format!(r#"{{"event":"boot-finished","verdict":"pass","duration_secs":{secs}}}"#);
        let two = format!("{}\nnot json\n{}\n", pass(0.75), pass(1.77));
        assert_eq!(slowest_pass(&two), Ok(1.77));
        let failed = r#"{"event":"boot-finished","verdict":"fail","reason":"timed out after 3s","duration_secs":3.0}"#;
        assert_eq!(slowest_pass(failed), Err("timed out after 3s".into()));
        assert_eq!(slowest_pass(""), Err("no boot finished".into()));
    }
}
