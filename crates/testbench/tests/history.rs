//! The history through the real `testbench` binary: two benches run at once, each
//! several times, sharing one `--history`, and every result of every run lands in it;
//! `testbench history` then says each case's last pass, first failure, rate and titles,
//! in words and in JSON. The cases are scripts cases (no QEMU): what is tested is the
//! keeping, not the boots.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

fn bench(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_testbench"));
    command
        .args(args)
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn explain(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

const OK: &str = "description = \"passes\"\nkind = \"scripts\"\nscripts = [\"tests/scripts/ok.sh\"]\nbuild = [\"mkdir -p target/testbench-scripts-fixture && touch target/testbench-scripts-fixture/built\"]\ntimeout_secs = 30\n";
const FAILS: &str =
    "description = \"fails\"\nkind = \"scripts\"\nscripts = [\"tests/scripts/fails.sh\"]\ntimeout_secs = 30\n";

#[test]
fn two_benches_at_once_keep_every_result_in_one_history_and_history_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(cases.join("hist-ok.toml"), OK).unwrap();
    std::fs::write(cases.join("hist-fails.toml"), FAILS).unwrap();
    let history = tmp.path().join("shared/history.sqlite");
    let (cases, history_arg) = (cases.to_str().unwrap(), history.to_str().unwrap());
    let rounds = 3;
    for _ in 0..rounds {
        let run = |_| bench(&["--cases", cases, "--history", history_arg, "--color", "never"]).spawn().unwrap();
        let children: Vec<_> = (0..2).map(run).collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.status.code(), Some(1), "hist-fails fails the run\n{}", explain(&output));
        }
    }
    let json = bench(&["history", "hist-", "--history", history_arg, "--message-format", "json"]).output().unwrap();
    assert_eq!(json.status.code(), Some(0), "{}", explain(&json));
    let series: Vec<serde_json::Value> =
        String::from_utf8_lossy(&json.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(series.len(), 2, "{}", explain(&json));
    let (fails, ok) = (&series[0], &series[1]);
    assert_eq!((fails["case"].as_str(), fails["width"].as_str()), (Some("hist-fails"), Some("host")));
    assert_eq!((fails["window"].as_u64(), fails["failed"].as_u64()), (Some(2 * rounds), Some(2 * rounds)));
    assert_eq!(fails["last_pass"], serde_json::Value::Null);
    assert_eq!(fails["first_failure_after"]["fail_kind"], "scripts");
    assert_eq!(fails["flake"], false);
    assert_eq!((ok["window"].as_u64(), ok["passed"].as_u64(), ok["pass_rate"].as_f64()), (Some(6), Some(6), Some(1.0)));
    assert!(ok["last_pass"]["commit"].as_str().is_some_and(|c| c.len() == 40), "the tree's commit: {ok}");
    assert!(ok["last_pass"]["run"].as_str().is_some_and(|r| r.starts_with("run-")), "{ok}");

    let human = bench(&["history", "hist-ok", "--history", history_arg, "--last", "4"]).output().unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.starts_with("hist-ok host: 4 of 4 passed (100%) over its last 4 results (of at most 4)\n"), "{text}");
    assert!(
        text.contains("  last pass:             run-") && text.contains("  first failure after it: none\n"),
        "{text}"
    );

    // A history that is not one is refused before anything runs, naming the file.
    let bad = tmp.path().join("bad.sqlite");
    std::fs::write(&bad, "not a database, and long enough that SQLite reads a whole header of it to know so").unwrap();
    let refused = bench(&["--cases", cases, "--history", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", explain(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains(&format!("error: --history: the history {}", bad.display())), "{stderr}");
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("hist-ok"), "nothing ran: {}", explain(&refused));
}
