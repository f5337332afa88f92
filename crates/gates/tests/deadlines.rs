//! The measured-deadlines gate on a good tree, a bad one and this project's own.

use std::path::Path;

use testbench_gates::deadlines::{check, RECORD};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlines").join(name)
}

#[test]
fn a_tree_whose_guest_time_deadlines_hold_their_measurements_passes() {
    let findings = check(&fixture("good"), Path::new(RECORD)).unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn a_deadline_under_four_times_its_slowest_pass_an_unmeasured_case_and_a_stale_record_are_found() {
    let findings: Vec<String> =
        check(&fixture("bad"), Path::new(RECORD)).unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(
        findings,
        [
            "tests/held.toml: under-measured: held on rv64: timeout_secs = 20 is under 30 s, 4 times its slowest pass alone (5.10 s, tests/data/deadlines.toml) rounded up to 10 s",
            "tests/unmeasured.toml: no-record: unmeasured on rv64 runs in guest time with no measured deadline in tests/data/deadlines.toml: run `cargo testbench --measure-deadlines unmeasured`",
            "tests/unmeasured.toml: no-record: unmeasured on rv32 runs in guest time with no measured deadline in tests/data/deadlines.toml: run `cargo testbench --measure-deadlines unmeasured`",
            "tests/data/deadlines.toml: stale-record: gone is recorded but is no case in guest time here: remove it, or measure again",
        ]
    );
}

#[test]
fn a_record_that_is_not_one_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tests/data")).unwrap();
    std::fs::write(dir.path().join(RECORD), "[cases.x]\nrv64 = \"slow\"\n").unwrap();
    let error = check(dir.path(), Path::new(RECORD)).unwrap_err().to_string();
    assert!(error.contains("cases.x.rv64") && error.contains("the slowest pass in seconds, above 0"), "{error}");
}

/// This project's own cases in guest time each hold their measured deadline.
#[test]
fn the_projects_own_guest_time_cases_hold_their_measured_deadlines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let findings = check(&root, Path::new(RECORD)).unwrap();
    assert!(findings.is_empty(), "{}", findings.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
}

/// A pass of a few milliseconds is written as 0.01 s, which the reader takes back: never
/// as 0.00, which it would refuse; and every value is rounded up, never down.
#[test]
fn a_record_written_is_read_back_with_every_pass_rounded_up_to_the_hundredth() {
    use testbench_gates::deadlines::{read_record, write_record, Record};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deadlines.toml");
    let mut record = Record::new();
    record.entry("quick".into()).or_default().insert("rv64".into(), 0.004);
    record.entry("slow".into()).or_default().insert("rv32".into(), 7.151);
    write_record(&path, &record, 2).unwrap();
    let back = read_record(&path).unwrap();
    assert_eq!(back["quick"]["rv64"], 0.01);
    assert_eq!(back["slow"]["rv32"], 7.16);
}
