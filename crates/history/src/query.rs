//! What `cargo testbench history` asks: per case, width and harts (a series), the last
//! pass, the first failure after it, the pass rate over the last N results, the crash
//! titles seen and the flake mark. Each is answered from the `results_series` index: the
//! last pass and the first failure after it by one seek each.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use crate::{History, HistoryError, Verdict};

/// One stored result, as the history shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Seen {
    /// Its row's number: later results have higher ones.
    pub id: i64,
    pub run: String,
    pub finished: i64,
    /// `finished` in UTC, `YYYY-MM-DD HH:MM:SS`.
    pub when: String,
    pub seed: Option<u64>,
    pub commit: Option<String>,
    pub dirty: Option<bool>,
    pub verdict: Verdict,
    pub fail_kind: Option<String>,
    pub crash_title: Option<String>,
    pub class: Option<String>,
}

/// One case at one width and hart count, over its history.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub case: String,
    pub width: String,
    pub harts: Option<u32>,
    pub last_pass: Option<Seen>,
    /// The first failure after the last pass (after none: the first failure ever).
    pub first_failure_after: Option<Seen>,
    /// How many of its last N results the window holds (N, or fewer for a short history).
    pub window: usize,
    pub passed: usize,
    pub failed: usize,
    /// Every crash title its failures showed, with how many failures showed it, the most first.
    pub crash_titles: Vec<(String, u64)>,
    /// Commits at which the window holds both a pass and a failure, each with a clean
    /// tree: the same code passed and failed.
    pub flaky_commits: Vec<String>,
}

impl Series {
    /// Whether it flakes: a commit with both a pass and a failure in the window.
    pub fn flake(&self) -> bool {
        !self.flaky_commits.is_empty()
    }

    /// The passes among the window's passes and failures, from 0 to 1 (None: neither).
    pub fn pass_rate(&self) -> Option<f64> {
        let judged = self.passed + self.failed;
        (judged > 0).then(|| self.passed as f64 / judged as f64)
    }
}

const SEEN: &str =
    "id, run, finished, seed, commit_id, dirty, verdict, fail_kind, crash_title, class, datetime(finished, 'unixepoch')";

fn seen(row: &Row<'_>) -> Result<Seen, rusqlite::Error> {
    let verdict: String = row.get(6)?;
    let verdict = Verdict::from_name(&verdict).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, format!("verdict {verdict:?}").into())
    })?;
    Ok(Seen {
        id: row.get(0)?,
        run: row.get(1)?,
        finished: row.get(2)?,
        when: row.get(10)?,
        seed: row.get::<_, Option<i64>>(3)?.map(|s| s as u64),
        commit: row.get(4)?,
        dirty: row.get(5)?,
        verdict,
        fail_kind: row.get(7)?,
        crash_title: row.get(8)?,
        class: row.get(9)?,
    })
}

/// Which series: a case, a width, a hart count (NULL matched by `IS`).
struct Key<'a> {
    case: &'a str,
    width: &'a str,
    harts: Option<u32>,
}

fn last_pass(conn: &Connection, key: &Key<'_>) -> Result<Option<Seen>, rusqlite::Error> {
    let sql = format!(
        "SELECT {SEEN} FROM results WHERE case_name = ?1 AND width = ?2 AND harts IS ?3 AND outcome = 'pass'
         ORDER BY id DESC LIMIT 1"
    );
    conn.prepare_cached(&sql)?.query_row(params![key.case, key.width, key.harts], seen).optional()
}

fn first_failure_after(conn: &Connection, key: &Key<'_>, after: i64) -> Result<Option<Seen>, rusqlite::Error> {
    let sql = format!(
        "SELECT {SEEN} FROM results WHERE case_name = ?1 AND width = ?2 AND harts IS ?3 AND outcome = 'fail'
         AND id > ?4 ORDER BY id ASC LIMIT 1"
    );
    conn.prepare_cached(&sql)?.query_row(params![key.case, key.width, key.harts, after], seen).optional()
}

fn window(conn: &Connection, key: &Key<'_>, last: usize) -> Result<Vec<Seen>, rusqlite::Error> {
    let sql = format!(
        "SELECT {SEEN} FROM results WHERE case_name = ?1 AND width = ?2 AND harts IS ?3 ORDER BY id DESC LIMIT ?4"
    );
    let mut query = conn.prepare_cached(&sql)?;
    let rows = query.query_map(params![key.case, key.width, key.harts, last as i64], seen)?.collect();
    rows
}

fn crash_titles(conn: &Connection, key: &Key<'_>) -> Result<Vec<(String, u64)>, rusqlite::Error> {
    let mut query = conn.prepare_cached(
        "SELECT crash_title, COUNT(*) AS n FROM results
         WHERE case_name = ?1 AND width = ?2 AND harts IS ?3 AND outcome = 'fail' AND crash_title IS NOT NULL
         GROUP BY crash_title ORDER BY n DESC, MIN(id) ASC",
    )?;
    let rows = query
        .query_map(params![key.case, key.width, key.harts], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))?
        .collect();
    rows
}

/// The commits at which `window` holds both a pass and a failure, each with a clean tree.
fn flaky_commits(window: &[Seen]) -> Vec<String> {
    let mut commits: Vec<String> = Vec::new();
    for seen in window.iter().filter(|s| s.dirty == Some(false) && s.verdict.outcome() == "fail") {
        let Some(commit) = &seen.commit else { continue };
        let passed_there = window.iter().any(|other| {
            other.dirty == Some(false) && other.commit.as_ref() == Some(commit) && other.verdict.outcome() == "pass"
        });
        if passed_there && !commits.contains(commit) {
            commits.push(commit.clone());
        }
    }
    commits
}

fn one_series(conn: &Connection, key: &Key<'_>, last: usize) -> Result<Series, rusqlite::Error> {
    let last_pass = last_pass(conn, key)?;
    let first_failure_after = first_failure_after(conn, key, last_pass.as_ref().map_or(0, |p| p.id))?;
    let window = window(conn, key, last)?;
    let count = |outcome| window.iter().filter(|s| s.verdict.outcome() == outcome).count();
    Ok(Series {
        case: key.case.to_string(),
        width: key.width.to_string(),
        harts: key.harts,
        last_pass,
        first_failure_after,
        window: window.len(),
        passed: count("pass"),
        failed: count("fail"),
        crash_titles: crash_titles(conn, key)?,
        flaky_commits: flaky_commits(&window),
    })
}

/// One result of a series' strip (`History::strip`), as report.html draws it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub run: String,
    pub when: String,
    /// `pass`, `fail` or `other` (a skip, the bench's trouble).
    pub outcome: &'static str,
    /// A pass or a failure at a commit (a clean tree) where the strip also holds the other.
    pub flaky: bool,
    pub quarantined: bool,
}

impl History {
    /// The last `last` results of one case at one width and hart count, oldest first.
    pub fn strip(&self, case: &str, width: &str, harts: Option<u32>, last: usize) -> Result<Vec<Cell>, HistoryError> {
        let read = |e| self.error("reading a case's last results", e);
        let key = Key { case, width, harts };
        let seen = window(&self.conn, &key, last).map_err(read)?;
        let flaky = flaky_commits(&seen);
        let mut query = self
            .conn
            .prepare_cached(
                "SELECT quarantined FROM results WHERE case_name = ?1 AND width = ?2 AND harts IS ?3
                 ORDER BY id DESC LIMIT ?4",
            )
            .map_err(read)?;
        let quarantined: Vec<bool> = query
            .query_map(params![case, width, harts, last as i64], |row| row.get(0))
            .and_then(|rows| rows.collect())
            .map_err(read)?;
        let cells = seen.iter().zip(quarantined).rev().map(|(s, quarantined)| Cell {
            run: s.run.clone(),
            when: s.when.clone(),
            outcome: s.verdict.outcome(),
            flaky: s.dirty == Some(false)
                && s.verdict.outcome() != "other"
                && s.commit.as_ref().is_some_and(|c| flaky.contains(c)),
            quarantined,
        });
        Ok(cells.collect())
    }

    /// Every series whose case name holds `filter` (every series for an empty one), in
    /// name, width and hart order, each over its last `last` results.
    pub fn series(&self, filter: &str, last: usize) -> Result<Vec<Series>, HistoryError> {
        let read = |e| self.error("reading its results", e);
        let mut query = self
            .conn
            .prepare(
                "SELECT DISTINCT case_name, width, harts FROM results WHERE instr(case_name, ?1) > 0
                 ORDER BY case_name, width, harts",
            )
            .map_err(read)?;
        let keys: Vec<(String, String, Option<u32>)> = query
            .query_map([filter], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(read)?;
        keys.iter()
            .map(|(case, width, harts)| one_series(&self.conn, &Key { case, width, harts: *harts }, last).map_err(read))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::{a_record, History, Verdict};

    #[test]
    fn the_last_pass_the_first_failure_after_it_the_rate_the_titles_and_the_flake() {
        let tmp = tempfile::tempdir().unwrap();
        let mut history = History::open(&tmp.path().join("h.sqlite")).unwrap();
        let runs = [
            ("a", Verdict::Fail, "c0"),
            ("a", Verdict::Pass, "c1"),
            ("a", Verdict::Pass, "c2"),
            ("a", Verdict::Skip, "c2"),
            ("a", Verdict::Fail, "c3"),
            ("a", Verdict::Unfailed, "c3"),
            ("b", Verdict::Pass, "c3"),
            ("b", Verdict::Fail, "c3"),
        ];
        for (i, (case, verdict, commit)) in runs.into_iter().enumerate() {
            let mut record = a_record(case, verdict, commit);
            record.run = format!("run-{i}");
            if verdict == Verdict::Unfailed {
                record.crash_title = Some("another title".into());
            }
            history.append(&[record]).unwrap();
        }
        let all = history.series("", 20).unwrap();
        assert_eq!(all.iter().map(|s| s.case.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        let a = &all[0];
        assert_eq!(a.last_pass.as_ref().map(|s| s.run.as_str()), Some("run-2"));
        assert_eq!(a.first_failure_after.as_ref().map(|s| s.run.as_str()), Some("run-4"));
        assert_eq!(a.first_failure_after.as_ref().and_then(|s| s.seed), Some(u64::MAX - 1), "a seed reads back whole");
        assert_eq!((a.window, a.passed, a.failed), (6, 2, 3));
        assert_eq!(a.crash_titles, [("kernel panic: boom".to_string(), 2), ("another title".to_string(), 1)]);
        assert!(!a.flake(), "each commit either passed or failed: a regression, not a flake");
        let b = &all[1];
        assert_eq!(b.flaky_commits, ["c3"], "c3 passed and failed");
        // The window: the last 2 of a are the two failures at c3.
        let a2 = &history.series("a", 2).unwrap()[0];
        assert_eq!((a2.window, a2.passed, a2.failed, a2.pass_rate()), (2, 0, 2, Some(0.0)));
        // A pass and a failure at one commit in a dirty tree is not a flake: the tree differed.
        let mut dirty = a_record("d", Verdict::Pass, "c9");
        dirty.dirty = Some(true);
        history.append(&[dirty.clone(), a_record("d", Verdict::Fail, "c9")]).unwrap();
        assert!(!history.series("d", 20).unwrap()[0].flake());
        // Never passed: the first failure ever.
        let c = history.series("b", 20).unwrap();
        assert_eq!(c[0].first_failure_after.as_ref().map(|s| s.verdict), Some(Verdict::Fail));
        assert!(history.series("zzz", 20).unwrap().is_empty());
        // b's strip, oldest first: the pass and the failure at c3, each flaky.
        let strip = history.strip("b", "rv64", Some(1), 10).unwrap();
        let shown: Vec<(&str, bool, bool)> = strip.iter().map(|c| (c.outcome, c.flaky, c.quarantined)).collect();
        assert_eq!(shown, [("pass", true, false), ("fail", true, false)]);
        let a = history.strip("a", "rv64", Some(1), 3).unwrap();
        let shown: Vec<(&str, bool)> = a.iter().map(|c| (c.outcome, c.flaky)).collect();
        assert_eq!(shown, [("other", false), ("fail", false), ("fail", false)], "the last 3, oldest first");
    }
}
