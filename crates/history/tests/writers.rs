//! Several benches writing one history: processes of this test binary, each opening the
//! file on its own as a bench does. Two writing together lose no row; one killed with
//! SIGKILL in the middle of its transaction leaves the file readable with every row
//! committed before it, and none of its half-written ones.
//!
//! The writers are this binary run again on the ignored test [`writer`], told what to do
//! by environment variables.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testbench_history::{History, Record, Verdict};

const PATH_VAR: &str = "TESTBENCH_HISTORY_WRITER_PATH";
const RUNS_VAR: &str = "TESTBENCH_HISTORY_WRITER_RUNS";
const ROWS_VAR: &str = "TESTBENCH_HISTORY_WRITER_ROWS";
const NAME_VAR: &str = "TESTBENCH_HISTORY_WRITER_NAME";
/// After its runs, the writer starts one more of this many rows and says so on stdout
/// first (it is killed on the way).
const LAST_VAR: &str = "TESTBENCH_HISTORY_WRITER_LAST";

fn record(name: &str, run: usize, index: usize) -> Record {
    Record {
        run: format!("{name}-run-{run}"),
        finished: 1_700_000_000 + run as i64,
        case: format!("{name}-case-{}", index % 7),
        width: "rv64".into(),
        harts: Some(1),
        seed: Some(index as u64),
        verdict: if index.is_multiple_of(3) { Verdict::Fail } else { Verdict::Pass },
        fail_kind: None,
        crash_title: None,
        class: None,
        duration: Duration::from_millis(index as u64),
        commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        dirty: Some(false),
        kernel_sha256: None,
        qemu_version: None,
        host: "test".into(),
        clock: Some("icount".into()),
        rerun_alone: false,
        quarantined: false,
    }
}

/// The writer: `RUNS` runs of `ROWS` rows, each appended as a bench appends its run;
/// then, with `LAST`, one more run that never ends before it is killed.
#[test]
#[ignore = "a helper the other tests run as a child process"]
fn writer() {
    let var = |name| std::env::var(name).unwrap_or_else(|_| panic!("{name} is unset: run by the other tests only"));
    let number = |name| var(name).parse::<usize>().unwrap();
    let (name, runs, rows) = (var(NAME_VAR), number(RUNS_VAR), number(ROWS_VAR));
    let mut history = History::open(Path::new(&var(PATH_VAR))).unwrap();
    for run in 0..runs {
        let records: Vec<Record> = (0..rows).map(|i| record(&name, run, i)).collect();
        assert_eq!(history.append(&records).unwrap(), rows);
    }
    println!("committed {}", runs * rows);
    if let Ok(last) = std::env::var(LAST_VAR) {
        let records: Vec<Record> = (0..last.parse::<usize>().unwrap()).map(|i| record(&name, runs, i)).collect();
        println!("writing");
        history.append(&records).unwrap();
        println!("unkilled");
    }
}

fn spawn(path: &Path, name: &str, runs: usize, rows: usize, last: Option<usize>) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--ignored", "--exact", "writer", "--nocapture", "--test-threads", "1"])
        .env(PATH_VAR, path)
        .env(NAME_VAR, name)
        .env(RUNS_VAR, runs.to_string())
        .env(ROWS_VAR, rows.to_string())
        .stdout(Stdio::piped());
    if let Some(last) = last {
        command.env(LAST_VAR, last.to_string());
    }
    command.spawn().unwrap()
}

#[test]
fn two_writers_together_lose_no_row() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("shared/history.sqlite");
    let (runs, rows) = (150, 40);
    let children = [spawn(&path, "a", runs, rows, None), spawn(&path, "b", runs, rows, None)];
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a writer failed: {}", String::from_utf8_lossy(&out.stdout));
    }
    let history = History::open(&path).unwrap();
    assert_eq!(history.count().unwrap(), 2 * (runs * rows) as u64);
    assert_eq!(history.integrity().unwrap(), "ok");
    for name in ["a", "b"] {
        let series = history.series(&format!("{name}-case-"), 1_000_000).unwrap();
        let total: usize = series.iter().map(|s| s.window).sum();
        assert_eq!(total, runs * rows, "every row of writer {name}");
    }
}

#[test]
fn a_writer_killed_mid_transaction_leaves_the_committed_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.sqlite");
    let (runs, rows) = (5, 100);
    let mut child = spawn(&path, "k", runs, rows, Some(3_000_000));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = lines.next().expect("the writer said 'writing' before it ended").unwrap();
        if line == "writing" {
            break;
        }
        assert!(Instant::now() < deadline, "the writer did not start its last run within 120 s");
    }
    // Well inside the three million rows' transaction (seconds of inserts).
    std::thread::sleep(Duration::from_millis(400));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "killed by SIGKILL, not ended: {status}"
    );
    assert!(
        !lines.any(|line| line.unwrap() == "unkilled"),
        "the last run ended before the kill: the test proves nothing"
    );
    let mut history = History::open(&path).unwrap();
    assert_eq!(history.integrity().unwrap(), "ok");
    assert_eq!(history.count().unwrap(), (runs * rows) as u64, "the committed rows, and none of the killed run's");
    history.append(&[record("after", 0, 0)]).unwrap();
    assert_eq!(history.count().unwrap(), (runs * rows) as u64 + 1, "and the next bench writes");
}
