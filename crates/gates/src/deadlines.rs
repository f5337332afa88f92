//! The measured-deadlines gate: every boot case in guest time (under `icount`) has a
//! deadline of at least four times its slowest pass alone on each of its widths, rounded
//! up to 10 s, from a measurement the tree keeps (`tests/data/deadlines.toml`, written by
//! `cargo testbench --measure-deadlines`), never a guess.
//!
//! A case whose deadline is its evidence (a self-check that must time out, or that fails
//! when a power-off never comes: `must_fail` kind `timed-out` or `no-power-off`, or a
//! pattern that speaks of a deadline: [`deadline_is_evidence`]) is left
//! out: its `timeout_secs` is the oracle, not a bound on its work. A case on the host's
//! clock is left out too: its time is the host's, which no record can bound.
//!
//! Findings: `no-record` (a case or a width the record lacks), `under-measured` (a
//! deadline under the rule's minimum, naming it), `stale-record` (a record of a case that
//! is no longer in guest time, or no longer exists).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::finding::{ConfigError, Finding};

/// How many times the slowest pass a deadline must be.
pub const FACTOR: f64 = 4.0;
/// Deadlines are whole tens of seconds.
pub const ROUND_TO: u64 = 10;
/// The record, relative to the tree.
pub const RECORD: &str = "tests/data/deadlines.toml";

/// The deadline the rule asks for a slowest pass of `slowest` seconds.
pub fn minimum(slowest: f64) -> u64 {
    let secs = (slowest * FACTOR).ceil().max(1.0) as u64;
    secs.div_ceil(ROUND_TO) * ROUND_TO
}

/// The record: each case's slowest pass alone per width, in seconds.
pub type Record = BTreeMap<String, BTreeMap<String, f64>>;

/// Reads the record at `path` (its `[cases.NAME]` tables); a missing file is an empty
/// record, a file that is not one is refused naming the field.
pub fn read_record(path: &Path) -> Result<Record, ConfigError> {
    let error = |field: &str, message: String| ConfigError {
        file: path.display().to_string(),
        field: field.to_string(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::new()),
        Err(e) => return Err(error("(file)", e.to_string())),
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| error("(file)", e.message().to_string()))?;
    let mut record = Record::new();
    let Some(cases) = table.get("cases") else { return Ok(record) };
    let cases = cases.as_table().ok_or_else(|| error("cases", "a table of [cases.NAME] tables".into()))?;
    for (name, widths) in cases {
        let widths =
            widths.as_table().ok_or_else(|| error(&format!("cases.{name}"), "a table of width = seconds".into()))?;
        let mut seconds = BTreeMap::new();
        for (width, value) in widths {
            let secs = value.as_float().or_else(|| value.as_integer().map(|i| i as f64));
            match secs {
                Some(secs) if secs > 0.0 && secs.is_finite() => {
                    seconds.insert(width.clone(), secs);
                }
                _ => {
                    return Err(error(
                        &format!("cases.{name}.{width}"),
                        format!("{value} is not accepted: the slowest pass in seconds, above 0"),
                    ))
                }
            }
        }
        record.insert(name.clone(), seconds);
    }
    Ok(record)
}

/// Writes `record` to `path` as the gate reads it, with a header saying what it is.
pub fn write_record(path: &Path, record: &Record, runs: u32) -> std::io::Result<()> {
    let mut text = format!(
        "# Each boot case in guest time: its slowest pass alone of {runs} boots per width, in seconds,\n\
         # written by `cargo testbench --measure-deadlines [FILTER]`. The deadlines gate\n\
         # (crates/gates/src/deadlines.rs) holds every such case's timeout_secs to at least\n\
         # {FACTOR} times it, rounded up to {ROUND_TO} s. Measure again, never edit by hand.\n"
    );
    for (name, widths) in record {
        text.push_str(&format!("\n[cases.{name}]\n"));
        for (width, secs) in widths {
            // Rounded up to the hundredth: a pass of 4 ms is recorded as 0.01, never as
            // 0.00, which the reader refuses (no pass takes no time).
            let secs = (secs * 100.0).ceil() / 100.0;
            text.push_str(&format!("{width} = {secs:.2}\n"));
        }
    }
    let temporary = path.with_extension("toml.tmp");
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

/// Whether a case's deadline is its evidence: a self-check that must time out or wait
/// for a power-off that never comes (`must_fail` kind `timed-out` or `no-power-off`), or
/// whose pattern speaks of a deadline (`timed out`, `deadline`, `within`: it waits for
/// one). The one rule: the quiet class (the bench's `report::host_clock_measure`) reads
/// it too.
pub fn deadline_is_evidence(case: &testbench_case::Case) -> bool {
    matches!(case.must_fail_kind.as_deref(), Some("timed-out" | "no-power-off"))
        || case.must_fail.as_ref().is_some_and(|p| {
            let text = p.source();
            ["timed out", "deadline", "within"].iter().any(|word| text.contains(word))
        })
}

/// The boot cases the rule holds: in guest time, their deadline not their evidence. Each
/// with its widths and its deadline in seconds.
pub fn held(case: &testbench_case::Case) -> Option<(Vec<&'static str>, u64)> {
    let testbench_case::Kind::Boot(boot) = &case.kind else { return None };
    if boot.icount.is_none() || deadline_is_evidence(case) {
        return None;
    }
    Some((boot.arch.iter().map(|a| a.name()).collect(), boot.timeout.as_secs()))
}

/// Checks the cases in `<tree>/tests` against the record at `<tree>/<record>`.
pub fn check(tree: &Path, record: &Path) -> Result<Vec<Finding>, ConfigError> {
    let record_path = tree.join(record);
    let measured = read_record(&record_path)?;
    let mut findings = Vec::new();
    let mut seen = Vec::new();
    for (path, case) in cases(tree)? {
        let Some((widths, deadline)) = held(&case) else { continue };
        seen.push(case.name.clone());
        let finding =
            |code: &str, message: String| Finding { path: path.clone(), line: None, code: code.into(), message };
        for width in widths {
            match measured.get(&case.name).and_then(|w| w.get(width)) {
                None => findings.push(finding(
                    "no-record",
                    format!(
                        "{} on {width} runs in guest time with no measured deadline in {}: run `cargo testbench --measure-deadlines {}`",
                        case.name,
                        record.display(),
                        case.name
                    ),
                )),
                Some(&slowest) if deadline < minimum(slowest) => findings.push(finding(
                    "under-measured",
                    format!(
                        "{} on {width}: timeout_secs = {deadline} is under {} s, {FACTOR} times its slowest pass alone ({slowest:.2} s, {}) rounded up to {ROUND_TO} s",
                        case.name,
                        minimum(slowest),
                        record.display()
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    for name in measured.keys().filter(|name| !seen.contains(name)) {
        findings.push(Finding {
            path: record.to_path_buf(),
            line: None,
            code: "stale-record".into(),
            message: format!("{name} is recorded but is no case in guest time here: remove it, or measure again"),
        });
    }
    Ok(findings)
}

/// Every case file of `<tree>/tests`, parsed, with its path relative to `tree`; one that
/// does not parse is a configuration the gate cannot use. The measurement
/// (`cargo testbench --measure-deadlines`) reads the cases through it too.
pub fn cases(tree: &Path) -> Result<Vec<(PathBuf, testbench_case::Case)>, ConfigError> {
    let dir = tree.join("tests");
    let error = |field: String, message: String| ConfigError { file: dir.display().to_string(), field, message };
    let entries = std::fs::read_dir(&dir).map_err(|e| error("(directory)".into(), e.to_string()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        // The cases directory's quarantine (the bench's quarantine.rs) is not a case.
        .filter(|p| p.file_name().is_none_or(|name| name != "quarantine.toml"))
        .collect();
    paths.sort();
    let mut cases = Vec::new();
    for path in paths {
        let relative = path.strip_prefix(tree).unwrap_or(&path).to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|e| error(relative.display().to_string(), e.to_string()))?;
        let case = testbench_case::parse(&relative.display().to_string(), &text)
            .map_err(|e| error(relative.display().to_string(), e.to_string()))?;
        cases.push((relative, case));
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_is_four_times_the_slowest_pass_rounded_up_to_ten_seconds() {
        assert_eq!(minimum(0.2), 10);
        assert_eq!(minimum(2.5), 10);
        assert_eq!(minimum(2.51), 20);
        assert_eq!(minimum(7.0), 30);
        assert_eq!(minimum(0.0), 10, "never a deadline of 0");
    }
}
