//! Every result of every bench run, kept: a SQLite database (by default
//! `target/testbench/history.sqlite`) that each run appends its results to, in one
//! transaction at its end, and that `cargo testbench history` asks per case and width:
//! the last pass, the first failure after it, the pass rate over the last N runs, the
//! crash titles seen and whether it flakes (docs/history.md).
//!
//! Several benches may share one file (`--history PATH`): the database is in WAL mode
//! (readers never block the writer), every connection waits up to [`BUSY_TIMEOUT`] for
//! another's write to end and says so when it does not, and a run's rows go in one
//! transaction, so a bench killed mid-write leaves the rows committed before it and none
//! of its own half-written ones.
//!
//! The schema is versioned (`schema_version`); a database an older bench made is
//! migrated forward in place ([`schema`]), never dropped; one a newer bench made is
//! refused, saying so.

mod query;
pub mod schema;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};

pub use query::{Cell, Seen, Series};

/// How long one connection waits for another's write before it gives up, saying so.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the history could not be opened, written or read; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("the history {}: creating its directory: {source}", path.display())]
    Directory { path: PathBuf, source: std::io::Error },
    #[error("the history {}: {what}: {source}", path.display())]
    Sqlite { path: PathBuf, what: &'static str, source: rusqlite::Error },
    #[error(
        "the history {}: another bench held its write lock for more than {}s while this one {what}",
        path.display(),
        BUSY_TIMEOUT.as_secs()
    )]
    Busy { path: PathBuf, what: &'static str },
    #[error(
        "the history {}: its schema is version {found}, newer than this bench's {}: a newer bench wrote it; use that bench, or another --history",
        path.display(),
        schema::CURRENT
    )]
    Newer { path: PathBuf, found: i64 },
    #[error("the history {}: {why}", path.display())]
    Shape { path: PathBuf, why: String },
}

/// What a stored result's verdict was, as the bench's verdict names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    /// A self-check that failed as it must: a pass.
    ExpectedFailure,
    Fail,
    /// A self-check that passed: a failure.
    Unfailed,
    Skip,
    /// The bench could not run it: neither a pass nor a failure.
    Trouble,
}

impl Verdict {
    pub const ALL: [Verdict; 6] =
        [Verdict::Pass, Verdict::ExpectedFailure, Verdict::Fail, Verdict::Unfailed, Verdict::Skip, Verdict::Trouble];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::ExpectedFailure => "expected-failure",
            Verdict::Fail => "fail",
            Verdict::Unfailed => "unfailed",
            Verdict::Skip => "skip",
            Verdict::Trouble => "trouble",
        }
    }

    pub fn from_name(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.name() == name)
    }

    /// What it counts as: `pass`, `fail`, or `other` (a skip, the bench's trouble).
    pub fn outcome(self) -> &'static str {
        match self {
            Verdict::Pass | Verdict::ExpectedFailure => "pass",
            Verdict::Fail | Verdict::Unfailed => "fail",
            Verdict::Skip | Verdict::Trouble => "other",
        }
    }
}

/// One result of one run, as it is stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The run it came from (its directory's name): a run's rows share it.
    pub run: String,
    /// When the run ended, in seconds since the Unix epoch.
    pub finished: i64,
    pub case: String,
    /// The width (`rv64`...), or `host` for a case that boots nothing.
    pub width: String,
    pub harts: Option<u32>,
    pub seed: Option<u64>,
    pub verdict: Verdict,
    /// The failure's kind (`timed-out`, `crash`...), for a failure.
    pub fail_kind: Option<String>,
    pub crash_title: Option<String>,
    /// The failure's class (deterministic, host-dependent, bench-or-host), when classed.
    pub class: Option<String>,
    pub duration: Duration,
    /// The tree's commit (`git rev-parse HEAD`), when the tree is a git checkout.
    pub commit: Option<String>,
    /// Whether the tree had changes git tracks or could track.
    pub dirty: Option<bool>,
    /// The sha256 of the kernel QEMU booted, where the bench knows it.
    pub kernel_sha256: Option<String>,
    /// QEMU's `-version` first line, for a boot.
    pub qemu_version: Option<String>,
    pub host: String,
    /// `icount` (guest time) or `host` (the host's clock), for a boot.
    pub clock: Option<String>,
    /// Whether the result is a second boot, run alone after the first failed beside others.
    pub rerun_alone: bool,
    /// Whether the case was quarantined (its failure failed no run).
    pub quarantined: bool,
}

/// The history: one connection to its database.
pub struct History {
    path: PathBuf,
    conn: Connection,
}

impl History {
    /// Open (or create) the history at `path`, migrated to [`schema::CURRENT`].
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Directory { path: path.into(), source })?;
        }
        let sqlite = |what| move |source| HistoryError::Sqlite { path: path.into(), what, source };
        let conn = Connection::open(path).map_err(sqlite("opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite("setting its busy timeout"))?;
        let mut history = History { path: path.into(), conn };
        // WAL: a reader never waits for the writer, and a writer killed mid-transaction
        // leaves the committed rows whole. Switching takes the write lock: wait for it.
        let mode: String = history
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(|e| history.error("switching it to WAL", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(HistoryError::Shape {
                path: path.into(),
                why: format!("SQLite kept journal mode {mode}, not WAL"),
            });
        }
        history
            .conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| history.error("setting synchronous", e))?;
        schema::migrate(&mut history)?;
        Ok(history)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An SQLite error as the history's: a lock held past the busy timeout said as such.
    fn error(&self, what: &'static str, source: rusqlite::Error) -> HistoryError {
        classify(&self.path, what, source)
    }

    /// Append `records` in one transaction: all of them, or (on any error, or a bench
    /// killed on the way) none. How many were written.
    pub fn append(&mut self, records: &[Record]) -> Result<usize, HistoryError> {
        let path = &self.path;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(path, "starting a write", e))?;
        let written = insert_all(&tx, records).and_then(|n| tx.commit().map(|()| n));
        written.map_err(|e| classify(path, "appending a run's results", e))
    }

    /// How many results the history holds.
    pub fn count(&self) -> Result<u64, HistoryError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM results", [], |row| row.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.error("counting results", e))
    }

    /// SQLite's own check of the file: `ok`, or what is wrong.
    pub fn integrity(&self) -> Result<String, HistoryError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .map_err(|e| self.error("checking its integrity", e))
    }
}

/// An SQLite error as the history's: a lock held past the busy timeout said as such.
fn classify(path: &Path, what: &'static str, source: rusqlite::Error) -> HistoryError {
    let busy = matches!(
        source.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    match busy {
        true => HistoryError::Busy { path: path.into(), what },
        false => HistoryError::Sqlite { path: path.into(), what, source },
    }
}

/// A seed as SQLite keeps it: its 64 bits as a signed integer (read back the same).
fn seed_to_sql(seed: Option<u64>) -> Option<i64> {
    seed.map(|s| s as i64)
}

fn insert_all(tx: &rusqlite::Transaction<'_>, records: &[Record]) -> Result<usize, rusqlite::Error> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO results (run, finished, case_name, width, harts, seed, verdict, outcome, fail_kind,
            crash_title, class, duration_ms, commit_id, dirty, kernel_sha256, qemu_version, host, clock, rerun_alone,
            quarantined)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    )?;
    for r in records {
        insert.execute(params![
            r.run,
            r.finished,
            r.case,
            r.width,
            r.harts,
            seed_to_sql(r.seed),
            r.verdict.name(),
            r.verdict.outcome(),
            r.fail_kind,
            r.crash_title,
            r.class,
            i64::try_from(r.duration.as_millis()).unwrap_or(i64::MAX),
            r.commit,
            r.dirty,
            r.kernel_sha256,
            r.qemu_version,
            r.host,
            r.clock,
            r.rerun_alone,
            r.quarantined,
        ])?;
    }
    Ok(records.len())
}

#[cfg(test)]
pub(crate) fn a_record(case: &str, verdict: Verdict, commit: &str) -> Record {
    Record {
        run: "run-1".into(),
        finished: 1_700_000_000,
        case: case.into(),
        width: "rv64".into(),
        harts: Some(1),
        seed: Some(u64::MAX - 1),
        verdict,
        fail_kind: (verdict.outcome() == "fail").then(|| "crash".to_string()),
        crash_title: (verdict.outcome() == "fail").then(|| "kernel panic: boom".to_string()),
        class: None,
        duration: Duration::from_millis(1234),
        commit: Some(commit.into()),
        dirty: Some(false),
        kernel_sha256: None,
        qemu_version: Some("QEMU emulator version 9.2.0".into()),
        host: "h".into(),
        clock: Some("icount".into()),
        rerun_alone: false,
        quarantined: false,
    }
}
