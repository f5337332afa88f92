//! `cargo bench -p testbench-history`: what `cargo testbench history` costs over a large
//! history, and what one run's writes cost. Prints its figures (docs/performance.md).
//!
//! - 100,000 results over 100 cases: one case's series (last pass, first failure after
//!   it, the window, the titles, the flake mark), and every case's;
//! - 100,000 results of one case (the worst a single series can be): its series;
//! - a run of 50 results appended to a history of 100,000: one transaction;
//! - opening a history (the schema checked), as every run does first.
//!
//! Each figure is the median of its repetitions; the process fails if one case's
//! series takes 1 s or more (the bound).

use std::time::{Duration, Instant};

use testbench_history::{History, Record, Verdict};

const ROWS: usize = 100_000;

fn record(case: &str, i: usize) -> Record {
    let fails = i % 10 == 3 || (i > ROWS - 40 && i.is_multiple_of(2));
    Record {
        run: format!("run-{}", i / 50),
        finished: 1_700_000_000 + i as i64,
        case: case.to_string(),
        width: "rv64".into(),
        harts: Some(1 + ((i / 100) % 2) as u32),
        seed: Some(i as u64),
        verdict: if fails { Verdict::Fail } else { Verdict::Pass },
        fail_kind: fails.then(|| "crash".into()),
        crash_title: fails.then(|| format!("kernel panic: title {}", i % 7)),
        class: fails.then(|| "deterministic".into()),
        duration: Duration::from_millis(900 + (i % 300) as u64),
        commit: Some(format!("{:040x}", i / 500)),
        dirty: Some(false),
        kernel_sha256: Some(format!("{:064x}", i / 500)),
        qemu_version: Some("QEMU emulator version 9.2.0".into()),
        host: "bench-host".into(),
        clock: Some("icount".into()),
        rerun_alone: false,
        quarantined: false,
    }
}

fn fill(path: &std::path::Path, cases: usize) -> History {
    let mut history = History::open(path).unwrap();
    let records: Vec<Record> = (0..ROWS).map(|i| record(&format!("case-{:03}", i % cases), i)).collect();
    for chunk in records.chunks(10_000) {
        history.append(chunk).unwrap();
    }
    assert_eq!(history.count().unwrap(), ROWS as u64);
    history
}

fn median(mut work: impl FnMut(), times: usize) -> Duration {
    let mut took: Vec<Duration> = (0..times)
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .collect();
    took.sort();
    took[times / 2]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let spread = fill(&tmp.path().join("spread.sqlite"), 100);
    let one = median(|| assert_eq!(spread.series("case-042", 20).unwrap().len(), 2), 21);
    let all = median(|| assert_eq!(spread.series("", 20).unwrap().len(), 200), 5);
    let single = fill(&tmp.path().join("single.sqlite"), 1);
    let worst = median(|| assert_eq!(single.series("case-000", 20).unwrap().len(), 2), 11);
    drop(single);
    let mut history = spread;
    let mut next = ROWS;
    let run_of_50 = median(
        || {
            let records: Vec<Record> = (next..next + 50).map(|i| record("case-new", i)).collect();
            history.append(&records).unwrap();
            next += 50;
        },
        21,
    );
    drop(history);
    let open = median(|| drop(History::open(&tmp.path().join("spread.sqlite")).unwrap()), 21);
    let size = std::fs::metadata(tmp.path().join("spread.sqlite")).map(|m| m.len()).unwrap_or(0);
    println!("history over {ROWS} results (median):");
    println!("  one case's series, 100 cases stored:     {:>9.3} ms", ms(one));
    println!("  every case's series (200), 100 cases:    {:>9.3} ms", ms(all));
    println!("  one case's series, all rows that case's: {:>9.3} ms", ms(worst));
    println!("  a run of 50 results appended:            {:>9.3} ms", ms(run_of_50));
    println!("  opening it (schema checked):             {:>9.3} ms", ms(open));
    println!("  file size: {:.1} MB ({} bytes a result)", size as f64 / 1e6, size / ROWS as u64);
    assert!(one < Duration::from_secs(1) && worst < Duration::from_secs(1), "a case's series took 1 s or more");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
