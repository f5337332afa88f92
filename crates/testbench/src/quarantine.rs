//! `quarantine.toml` in the cases directory (docs/history.md): cases whose failures do
//! not fail the run until a date.
//!
//! ```toml
//! leave_after = 5            # optional: passes in a row that say a case can leave (default 5)
//!
//! [[quarantine]]
//! case = "linux-hung-task"   # a case of the directory
//! widths = ["rv64"]          # optional: only these widths (default: every width)
//! reason = "hangs under load, issue 40"
//! until = "2026-12-31"       # the last day it holds (UTC)
//! ```
//!
//! A quarantined case still runs and is reported apart ("quarantined: 2 failed, 1
//! passed"); its failure does not fail the run. After its `until` the run that selects it
//! refuses to start, naming the entry to extend or remove. Every field is checked before
//! anything builds, each error naming the file, the field and what is accepted.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use testbench_case::Arch;

/// The file's name in the cases directory (not read as a case).
pub const FILE: &str = "quarantine.toml";
/// Passes in a row, in the history, after which a quarantined case can leave.
pub const LEAVE_AFTER: u32 = 5;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    leave_after: Option<u32>,
    #[serde(default)]
    quarantine: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    case: String,
    widths: Option<Vec<String>>,
    reason: String,
    until: String,
}

/// One entry: a case (at some widths, or all), why, and the last day it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub case: String,
    pub widths: Option<Vec<Arch>>,
    pub reason: String,
    /// `YYYY-MM-DD`, as written.
    pub until: String,
    /// `until` in days since 1970-01-01.
    until_day: i64,
}

/// What a report says of its case's quarantine.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quarantined {
    pub until: String,
    pub reason: String,
}

/// The cases directory's quarantine.
#[derive(Clone, Debug, PartialEq)]
pub struct Quarantine {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    pub leave_after: u32,
}

/// Why `quarantine.toml` cannot be used: each names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum QuarantineError {
    #[error("{}: cannot be read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    #[error("{}: {field}: {value:?} {why}; accepted: {accepted}", path.display())]
    Field { path: PathBuf, field: String, value: String, why: &'static str, accepted: String },
    #[error(
        "{}: {field} (case {case}, until {until}: {reason}) expired on {until}: extend its until or remove the entry",
        path.display()
    )]
    Expired { path: PathBuf, field: String, case: String, until: String, reason: String },
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A `YYYY-MM-DD` date as days since 1970-01-01, when it is one (a real day of a month).
fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    (1..=12).contains(&m).then_some(())?;
    (1..=days[(m - 1) as usize]).contains(&d).then(|| days_from_civil(y, m, d))
}

/// Today, in days since 1970-01-01 (UTC).
pub fn today() -> i64 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    (secs / 86_400) as i64
}

/// The quarantine of `dir`, when it has a `quarantine.toml`: an entry may name any case
/// file of the directory (`<name>.toml`).
pub fn load(dir: &Path) -> Result<Option<Quarantine>, QuarantineError> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(QuarantineError::Read { path, source }),
    };
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|source| QuarantineError::Read { path: dir.into(), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.file_name().is_some_and(|n| n != FILE))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    parse(&path, &text, &names).map(Some)
}

fn field_error(path: &Path, field: String, value: &str, why: &'static str, accepted: String) -> QuarantineError {
    QuarantineError::Field { path: path.into(), field, value: value.into(), why, accepted }
}

/// The file's text, every field checked.
pub fn parse(path: &Path, text: &str, cases: &[&str]) -> Result<Quarantine, QuarantineError> {
    let file: File =
        toml::from_str(text).map_err(|e| QuarantineError::Toml { path: path.into(), message: e.to_string() })?;
    let leave_after = file.leave_after.unwrap_or(LEAVE_AFTER);
    if leave_after == 0 {
        return Err(field_error(
            path,
            "leave_after".into(),
            "0",
            "is no count of runs",
            "a whole number from 1".into(),
        ));
    }
    let mut entries = Vec::new();
    for (i, raw) in file.quarantine.into_iter().enumerate() {
        let at = |name: &str| format!("quarantine[{i}].{name}");
        if !cases.contains(&raw.case.as_str()) {
            let accepted = format!("the name of a case in {}", path.parent().unwrap_or(path).display());
            return Err(field_error(path, at("case"), &raw.case, "is no case", accepted));
        }
        let widths = match raw.widths {
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|name| {
                        Arch::from_name(name).ok_or_else(|| {
                            field_error(path, at("widths"), name, "is no width", "rv64, rv32, x86_64, aarch64".into())
                        })
                    })
                    .collect::<Result<Vec<Arch>, _>>()?,
            ),
        };
        if raw.reason.trim().is_empty() {
            return Err(field_error(path, at("reason"), &raw.reason, "is empty", "why the case is quarantined".into()));
        }
        let until_day = parse_date(&raw.until)
            .ok_or_else(|| field_error(path, at("until"), &raw.until, "is not a date", "YYYY-MM-DD".into()))?;
        entries.push(Entry { case: raw.case, widths, reason: raw.reason, until: raw.until, until_day });
    }
    Ok(Quarantine { path: path.into(), entries, leave_after })
}

impl Quarantine {
    /// The entry that holds `case` at `width` (a width-less report: any entry of the case).
    fn entry(&self, case: &str, width: Option<&str>) -> Option<&Entry> {
        self.entries.iter().find(|e| {
            e.case == case
                && match (&e.widths, width.and_then(Arch::from_name)) {
                    (Some(widths), Some(arch)) => widths.contains(&arch),
                    _ => true,
                }
        })
    }

    /// What a report of `case` at `width` says of its quarantine, when it is in one.
    pub fn of(&self, case: &str, width: Option<&str>) -> Option<Quarantined> {
        self.entry(case, width).map(|e| Quarantined { until: e.until.clone(), reason: e.reason.clone() })
    }

    /// The entries of `selected` cases whose date passed before `today`: each refuses the run.
    pub fn expired(&self, selected: &[&str], today: i64) -> Vec<QuarantineError> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.until_day < today && selected.contains(&e.case.as_str()))
            .map(|(i, e)| QuarantineError::Expired {
                path: self.path.clone(),
                field: format!("quarantine[{i}]"),
                case: e.case.clone(),
                until: e.until.clone(),
                reason: e.reason.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: &[&str] = &["flaky", "other"];

    fn parsed(text: &str) -> Result<Quarantine, String> {
        parse(Path::new("/c/quarantine.toml"), text, CASES).map_err(|e| e.to_string())
    }

    #[test]
    fn dates_are_days_and_only_real_days_are_dates() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2000-03-01"), Some(11_017));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        for bad in ["2023-02-29", "2026-13-01", "2026-1-01", "31.12.2026", "2026-12-31T00", ""] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        assert!(today() > parse_date("2026-01-01").unwrap());
    }

    #[test]
    fn an_entry_holds_its_case_at_its_widths_until_its_date() {
        let q = parsed(
            "leave_after = 3\n[[quarantine]]\ncase = \"flaky\"\nwidths = [\"rv64\"]\nreason = \"r\"\nuntil = \"2026-12-31\"\n",
        )
        .unwrap();
        assert_eq!(q.leave_after, 3);
        assert_eq!(q.of("flaky", Some("rv64")), Some(Quarantined { until: "2026-12-31".into(), reason: "r".into() }));
        assert_eq!(q.of("flaky", Some("rv32")), None);
        assert_eq!(q.of("other", Some("rv64")), None);
        let last_day = parse_date("2026-12-31").unwrap();
        assert!(q.expired(&["flaky"], last_day).is_empty(), "it holds through its last day");
        let expired = q.expired(&["flaky"], last_day + 1);
        assert_eq!(
            expired[0].to_string(),
            "/c/quarantine.toml: quarantine[0] (case flaky, until 2026-12-31: r) expired on 2026-12-31: extend its until or remove the entry"
        );
        assert!(q.expired(&["other"], last_day + 1).is_empty(), "an entry of a case not run refuses nothing");
    }

    #[test]
    fn each_bad_field_is_named_with_what_is_accepted() {
        let entry = |fields: &str| format!("[[quarantine]]\n{fields}\n");
        let ok = "case = \"flaky\"\nreason = \"r\"\nuntil = \"2026-12-31\"";
        let cases = [
            (
                entry(&ok.replace("flaky", "nope")),
                "quarantine[0].case: \"nope\" is no case; accepted: the name of a case in /c",
            ),
            (
                entry(&format!("{ok}\nwidths = [\"rv128\"]")),
                "quarantine[0].widths: \"rv128\" is no width; accepted: rv64, rv32, x86_64, aarch64",
            ),
            (
                entry(&ok.replace("\"r\"", "\" \"")),
                "quarantine[0].reason: \" \" is empty; accepted: why the case is quarantined",
            ),
            (
                entry(&ok.replace("2026-12-31", "31/12/2026")),
                "quarantine[0].until: \"31/12/2026\" is not a date; accepted: YYYY-MM-DD",
            ),
            (
                "leave_after = 0\n".to_string(),
                "leave_after: \"0\" is no count of runs; accepted: a whole number from 1",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parsed(&text).unwrap_err(), format!("/c/quarantine.toml: {expected}"), "{text}");
        }
        let unknown = parsed(&entry(&format!("{ok}\nuntill = \"x\""))).unwrap_err();
        assert!(unknown.starts_with("/c/quarantine.toml: ") && unknown.contains("unknown field `untill`"), "{unknown}");
        let missing = parsed(&entry("case = \"flaky\"\nreason = \"r\"")).unwrap_err();
        assert!(missing.contains("missing field `until`"), "{missing}");
    }
}
