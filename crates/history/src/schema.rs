//! The history's schema and its versions. `schema_version` holds one row, the version;
//! each step below takes a database from one version to the next in place (a new
//! column, a new index), never dropping a row. A new database is made at version 1 and
//! walked up the same steps, so every step runs on every new database too.
//!
//! - 1: `results`, one row per result, and the index `cargo testbench history` seeks by
//!   (case, width, harts, outcome, id): the last pass and the first failure after it are
//!   each one seek, however many rows the history holds.
//! - 2: `results.class`, a failure's class (deterministic, host-dependent,
//!   bench-or-host).
//! - 3: `results.quarantined`, whether the case was in its `quarantine.toml` then.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::{History, HistoryError};

/// The version this bench writes.
pub const CURRENT: i64 = 3;

/// Version 1, whole: what a bench of that version made.
pub const V1: &str = "
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE results (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    finished INTEGER NOT NULL,
    case_name TEXT NOT NULL,
    width TEXT NOT NULL,
    harts INTEGER,
    seed INTEGER,
    verdict TEXT NOT NULL,
    outcome TEXT NOT NULL,
    fail_kind TEXT,
    crash_title TEXT,
    duration_ms INTEGER NOT NULL,
    commit_id TEXT,
    dirty INTEGER,
    kernel_sha256 TEXT,
    qemu_version TEXT,
    host TEXT NOT NULL,
    clock TEXT,
    rerun_alone INTEGER NOT NULL
);
CREATE INDEX results_series ON results (case_name, width, harts, outcome, id);
";

/// The steps: `STEPS[i]` takes version i + 1 to i + 2.
const STEPS: [&str; 2] = [
    "ALTER TABLE results ADD COLUMN class TEXT;",
    "ALTER TABLE results ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0;",
];

fn version(conn: &Connection) -> Result<Option<i64>, rusqlite::Error> {
    let has_table: Option<String> = conn
        .query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'", [], |row| {
            row.get(0)
        })
        .optional()?;
    match has_table {
        None => Ok(None),
        Some(_) => conn.query_row("SELECT MAX(version) FROM schema_version", [], |row| row.get(0)),
    }
}

fn tables(conn: &Connection) -> Result<Vec<String>, rusqlite::Error> {
    let mut query = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    let names = query.query_map([], |row| row.get(0))?.collect();
    names
}

/// Take the history to [`CURRENT`], in one write transaction (two benches opening one
/// new file at once: the second finds it made).
pub fn migrate(history: &mut History) -> Result<(), HistoryError> {
    let path = history.path.clone();
    let tx = history
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| HistoryError::Sqlite { path: path.clone(), what: "starting its migration", source: e })?;
    let outcome = walk(&tx, &path);
    let outcome = outcome.and_then(|()| tx.commit().map_err(|e| Step::Sqlite("committing its migration", e)));
    outcome.map_err(|step| match step {
        Step::Refused(error) => error,
        Step::Sqlite(what, e) => history.error(what, e),
    })
}

enum Step {
    Refused(HistoryError),
    Sqlite(&'static str, rusqlite::Error),
}

fn walk(conn: &Connection, path: &std::path::Path) -> Result<(), Step> {
    let sqlite = |what| move |e| Step::Sqlite(what, e);
    let found = match version(conn).map_err(sqlite("reading its schema version"))? {
        Some(found) => found,
        None => {
            let tables = tables(conn).map_err(sqlite("listing its tables"))?;
            if !tables.is_empty() {
                let why = format!(
                    "not a bench's history: it has no schema_version table and holds the tables {}",
                    tables.join(", ")
                );
                return Err(Step::Refused(HistoryError::Shape { path: path.into(), why }));
            }
            conn.execute_batch(V1).map_err(sqlite("creating its tables"))?;
            1
        }
    };
    if found > CURRENT {
        return Err(Step::Refused(HistoryError::Newer { path: path.into(), found }));
    }
    if found < 1 {
        let why = format!("its schema_version says {found}; versions start at 1");
        return Err(Step::Refused(HistoryError::Shape { path: path.into(), why }));
    }
    for (from, step) in STEPS.iter().enumerate().skip(found as usize - 1) {
        conn.execute_batch(step).map_err(sqlite("migrating its schema"))?;
        conn.execute("UPDATE schema_version SET version = ?1", [from as i64 + 2])
            .map_err(sqlite("migrating its schema"))?;
    }
    Ok(())
}

/// The version of the history at `path` as it is now, without migrating it.
pub fn version_of(path: &std::path::Path) -> Result<Option<i64>, HistoryError> {
    let conn =
        Connection::open(path).map_err(|e| HistoryError::Sqlite { path: path.into(), what: "opening", source: e })?;
    version(&conn).map_err(|e| HistoryError::Sqlite {
        path: path.into(),
        what: "reading its schema version",
        source: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{a_record, Verdict};

    #[test]
    fn a_version_1_history_is_migrated_with_its_rows_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("old.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(V1).unwrap();
            conn.execute(
                "INSERT INTO results (run, finished, case_name, width, harts, seed, verdict, outcome, duration_ms, host, rerun_alone)
                 VALUES ('run-0', 1, 'old-case', 'rv64', 1, 7, 'fail', 'fail', 10, 'h', 0)",
                [],
            )
            .unwrap();
        }
        assert_eq!(version_of(&path).unwrap(), Some(1));
        let mut history = History::open(&path).unwrap();
        assert_eq!(version_of(&path).unwrap(), Some(CURRENT));
        assert_eq!(history.count().unwrap(), 1, "the old row is kept");
        let mut record = a_record("old-case", Verdict::Fail, "c1");
        record.class = Some("deterministic".into());
        record.quarantined = true;
        history.append(&[record]).unwrap();
        let series = history.series("old-case", 20).unwrap();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].failed, 2, "the migrated row and the new one: {series:?}");
        let class: Option<String> =
            history.conn.query_row("SELECT class FROM results ORDER BY id DESC LIMIT 1", [], |r| r.get(0)).unwrap();
        assert_eq!(class.as_deref(), Some("deterministic"));
        let quarantined: Vec<bool> = {
            let mut q = history.conn.prepare("SELECT quarantined FROM results ORDER BY id").unwrap();
            q.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        };
        assert_eq!(quarantined, [false, true], "the old row takes the new column's default");
        // Opening again changes nothing.
        drop(history);
        assert_eq!(History::open(&path).unwrap().count().unwrap(), 2);
    }

    #[test]
    fn a_newer_history_and_a_foreign_database_are_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let newer = tmp.path().join("newer.sqlite");
        Connection::open(&newer).unwrap().execute_batch(V1).unwrap();
        Connection::open(&newer).unwrap().execute("UPDATE schema_version SET version = 99", []).unwrap();
        let error = History::open(&newer).err().expect("a newer schema is refused").to_string();
        assert!(error.contains("newer.sqlite") && error.contains("version 99, newer than this bench's 3"), "{error}");
        let foreign = tmp.path().join("foreign.sqlite");
        Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE photos (id INTEGER);").unwrap();
        let error = History::open(&foreign).err().expect("another program's database is refused").to_string();
        assert!(error.contains("not a bench's history") && error.contains("photos"), "{error}");
        let text = tmp.path().join("text.sqlite");
        std::fs::write(&text, "this is not a database, it is text long enough to be read as a header......").unwrap();
        let error = History::open(&text).err().expect("a text file is refused").to_string();
        assert!(error.starts_with(&format!("the history {}", text.display())), "{error}");
    }
}
