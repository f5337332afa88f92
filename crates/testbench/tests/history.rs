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

/// A kernel image the fake QEMU never reads, and a wrapper around the fake QEMU
/// (scripts/fake-qemu-console) that prints `console` (a file's bytes, then its `done`)
/// on the first boot and, with `second` given, that on the boots after.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(first: &str, second: Option<&str>) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let (path, fake) = (dir.path(), root().join("scripts/fake-qemu-console"));
        std::fs::write(path.join("kernel"), "not a kernel\n").unwrap();
        std::fs::write(path.join("first"), first).unwrap();
        std::fs::write(path.join("second"), second.unwrap_or(first)).unwrap();
        let script = format!(
            "#!/bin/sh\nd='{}'\nif [ -e \"$d/booted\" ]; then c=second; else c=first; fi\ncase \"$*\" in *-chardev*) touch \"$d/booted\";; esac\nFAKE_QEMU_CONSOLE=\"file:$d/$c\" exec '{}' \"$@\"\n",
            path.display(),
            fake.display()
        );
        std::fs::write(path.join("qemu"), script).unwrap();
        std::fs::set_permissions(path.join("qemu"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Fake { dir }
    }

    fn qemu(&self) -> String {
        self.dir.path().join("qemu").display().to_string()
    }

    /// A case that boots the fake and forbids `oops`, with `extra` lines.
    fn case(&self, extra: &str) -> String {
        format!(
            "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 20\nexpect = ['^fake-qemu-console: done$']\nforbid = ['^oops$']\n{extra}[guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
            self.dir.path().join("kernel").display()
        )
    }
}

/// The boot-finished events of a JSON run.
fn finished(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "boot-finished")
        .collect()
}

/// Each class from the evidence a run has: a failure whose second boot passed is
/// host-dependent (and stays a failure); one whose second boot under icount with a
/// pinned seed printed the same bytes is deterministic; a host's lack is the bench's or
/// the host's. The class is on the verdict line, in JSON, in JUnit and in the history.
#[test]
fn a_failure_is_classed_by_its_second_boot_or_by_what_stopped_it() {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("history.sqlite");
    let history = history.to_str().unwrap();
    let run = |fake: &Fake, case: &str, format: &str| {
        let cases = tmp.path().join(format!("cases-{case}"));
        std::fs::create_dir_all(&cases).unwrap();
        std::fs::write(
            cases.join(format!("{case}.toml")),
            fake.case(if case == "det" { "icount = \"shift=3,sleep=off\"\nqemu_seed = 7\n" } else { "" }),
        )
        .unwrap();
        let junit = tmp.path().join(format!("{case}.xml"));
        let args = ["--cases", cases.to_str().unwrap(), "--history", history, "--message-format", format, "--junit"];
        let mut command = bench(&args);
        command.arg(&junit).env("TESTBENCH_QEMU_RV64", fake.qemu());
        (command.output().unwrap(), std::fs::read_to_string(&junit).unwrap_or_default())
    };

    let flaky = Fake::new("boot\noops\n", Some("boot\nfine\n"));
    let (output, junit) = run(&flaky, "flaky", "json");
    assert_eq!(output.status.code(), Some(1), "the first boot's failure stays the verdict\n{}", explain(&output));
    let event = &finished(&output)[0];
    assert_eq!((event["verdict"].as_str(), event["failure_class"].as_str()), (Some("fail"), Some("host-dependent")));
    let notes = event["notes"].to_string();
    assert!(notes.contains("booted again alone (") && notes.contains("it passed: host-dependent"), "{notes}");
    assert!(junit.contains("name=\"failure_class\" value=\"host-dependent\""), "{junit}");

    let same = Fake::new("boot\noops\n", None);
    let (output, _) = run(&same, "det", "human");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.lines().any(|l| l.starts_with("det rv64 smp1") && l.ends_with("[deterministic]")), "{text}");
    assert!(text.contains("it failed with the same console bytes under icount: deterministic"), "{text}");

    let missing = Fake::new("", None);
    std::fs::remove_file(missing.dir.path().join("qemu")).unwrap();
    let (output, junit) = run(&missing, "lack", "json");
    let event = &finished(&output)[0];
    assert_eq!(
        (event["failure_kind"].as_str(), event["failure_class"].as_str()),
        (Some("host-lack"), Some("bench-or-host"))
    );
    assert!(junit.contains("value=\"bench-or-host\""), "{junit}");

    let kept = bench(&["history", "", "--history", history, "--message-format", "json"]).output().unwrap();
    let classes: Vec<(String, String)> = String::from_utf8_lossy(&kept.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|s| {
            (
                s["case"].as_str().unwrap().to_string(),
                s["first_failure_after"]["class"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected = [("det", "deterministic"), ("flaky", "host-dependent"), ("lack", "bench-or-host")];
    assert_eq!(classes, expected.map(|(a, b)| (a.to_string(), b.to_string())), "{}", explain(&kept));
}

/// A real kernel's deterministic failure: the reference guest under icount with a
/// pinned seed runs to its power-off without printing what the case expects; booted
/// again, it prints the same bytes, so the failure is deterministic.
#[test]
fn a_real_boots_failure_under_icount_with_a_pinned_seed_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let case = "description = \"never prints what it must\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [{ package = \"smoke\", bin = \"smoke\" }]\nicount = \"shift=3,sleep=off\"\nqemu_seed = 7\ntimeout_secs = 60\nexpect = ['^never printed$']\npoweroff = true\n";
    std::fs::write(tmp.path().join("never.toml"), case).unwrap();
    let history = tmp.path().join("history.sqlite");
    let args =
        ["--cases", tmp.path().to_str().unwrap(), "--history", history.to_str().unwrap(), "--message-format", "json"];
    let output = bench(&args).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let event = &finished(&output)[0];
    assert_eq!(event["failure_class"], "deterministic", "{}", explain(&output));
    let dir = PathBuf::from(event["dir"].as_str().unwrap());
    let again = dir.with_file_name("rv64-smp1.again");
    let read = |d: &Path| std::fs::read(d.join("console.log")).unwrap();
    assert!(!read(&dir).is_empty() && read(&dir) == read(&again), "the two consoles are the same bytes");
}

/// `quarantine.toml` in the cases directory: a quarantined case runs and is reported
/// apart, its failure fails no run before its date; one that passed its last
/// `leave_after` runs is told it can leave; after its date the run refuses to start,
/// naming the entry; a bad field is refused naming the file and the field.
#[test]
fn a_quarantined_failure_fails_no_run_until_its_date() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(cases.join("hist-ok.toml"), OK).unwrap();
    std::fs::write(cases.join("hist-fails.toml"), FAILS).unwrap();
    let quarantine = cases.join("quarantine.toml");
    let entry = |case: &str, until: &str| {
        format!("[[quarantine]]\ncase = \"{case}\"\nreason = \"flakes, issue 9\"\nuntil = \"{until}\"\n")
    };
    let history = tmp.path().join("history.sqlite");
    let run = |format: &str| {
        let args = ["--cases", cases.to_str().unwrap(), "--history", history.to_str().unwrap(), "--color", "never"];
        bench(&args).args(["--message-format", format]).output().unwrap()
    };

    std::fs::write(&quarantine, entry("hist-fails", "2999-12-31")).unwrap();
    let output = run("human");
    assert_eq!(output.status.code(), Some(0), "a quarantined failure fails no run\n{}", explain(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("hist-fails host")
            && l.contains("FAIL")
            && l.contains("[quarantined until 2999-12-31]")),
        "{text}"
    );
    assert!(text.contains("\nquarantined: 1 failed, 0 passed (their failures fail no run)\n"), "{text}");
    assert!(text.contains("testbench: 1 passed, 0 failed, 0 skipped"), "{text}");
    let output = run("json");
    let events: Vec<serde_json::Value> =
        String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let end = events.iter().find(|e| e["event"] == "run-finished").unwrap();
    assert_eq!((end["failed"].as_u64(), end["quarantined_failed"].as_u64()), (Some(0), Some(1)), "{end}");
    assert!(finished(&output).iter().any(|e| e["quarantined_until"] == "2999-12-31"), "{}", explain(&output));

    // Passing its last leave_after runs (the two above, and the two below): it can leave.
    std::fs::write(&quarantine, format!("leave_after = 4\n{}", entry("hist-ok", "2999-12-31"))).unwrap();
    let first = run("human");
    assert_eq!(first.status.code(), Some(1), "hist-fails is out of quarantine now\n{}", explain(&first));
    let second = run("human");
    let said = String::from_utf8_lossy(&second.stderr);
    let leave = format!(
        "note: {}: hist-ok host passed its last 4 runs in the history: it can leave quarantine",
        quarantine.display()
    );
    assert!(!String::from_utf8_lossy(&first.stderr).contains(&leave) && said.contains(&leave), "{}", explain(&second));

    // After its date: refused before anything runs, naming the entry.
    std::fs::write(&quarantine, entry("hist-fails", "2020-01-01")).unwrap();
    let output = run("human");
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expired = format!("error: {}: quarantine[0] (case hist-fails, until 2020-01-01: flakes, issue 9) expired on 2020-01-01: extend its until or remove the entry", quarantine.display());
    assert!(stderr.contains(&expired), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("PASS"), "nothing ran\n{}", explain(&output));

    std::fs::write(&quarantine, entry("hist-fails", "2026-02-30")).unwrap();
    let output = run("human");
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    let bad =
        format!("{}: quarantine[0].until: \"2026-02-30\" is not a date; accepted: YYYY-MM-DD", quarantine.display());
    assert!(String::from_utf8_lossy(&output.stderr).contains(&bad), "{}", explain(&output));
}
