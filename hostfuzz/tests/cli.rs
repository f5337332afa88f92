//! The runner as `cargo hostfuzz` runs it: the gate, the canary, replay.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hostfuzz(out: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hostfuzz"))
        .args(args)
        .env("HOSTFUZZ_OUT", out)
        .env_remove("HOSTFUZZ_STATS")
        .output()
        .expect("the runner starts")
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The path on the stdout line starting with `label` (`  input: PATH (...`).
fn saved(stdout: &str, label: &str) -> PathBuf {
    let line = stdout.lines().find_map(|l| l.trim_start().strip_prefix(label)).expect(label);
    PathBuf::from(line.split(" (").next().unwrap())
}

#[test]
fn gate_exits_0_and_prints_the_same_twice() {
    let out = out_dir("gate");
    let first = hostfuzz(&out, &[]);
    let second = hostfuzz(&out, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stdout(&first));
    assert_eq!(stdout(&first), stdout(&second));
    for target in ["fdt", "bundle", "elf", "programs", "timers"] {
        assert!(stdout(&first).contains(&format!("{target}: 3000 inputs from seed 1")), "{}", stdout(&first));
    }
    assert!(!stdout(&first).contains("canary"));
    assert!(!stdout(&first).contains("machine-rules"));
}

#[test]
fn canary_finds_and_its_hex_replays_and_shrinks() {
    let out = out_dir("canary");
    let run = hostfuzz(&out, &["--target", "canary"]);
    let text = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(text.contains("canary: FINDING at seed 1 iteration "), "{text}");
    let (input, shrunk) = (saved(&text, "input: "), saved(&text, "shrunk: "));
    assert!(input.starts_with(out.join("findings")), "{}", input.display());
    for file in [&input, &shrunk] {
        let replay = hostfuzz(&out, &["--replay", "canary", file.to_str().unwrap()]);
        assert_eq!(replay.status.code(), Some(1), "{}", stdout(&replay));
        assert!(stdout(&replay).contains("canary: FINDING: canary: rare() came true"), "{}", stdout(&replay));
    }
    let len = |p: &Path| std::fs::read_to_string(p).unwrap().split_whitespace().map(str::len).sum::<usize>();
    assert!(len(&shrunk) <= len(&input));
    assert_eq!(std::fs::read_to_string(&shrunk).unwrap(), "f0ff\n");
}

#[test]
fn an_ordinary_input_replays_clean_and_the_list_names_every_target() {
    let out = out_dir("replay");
    std::fs::create_dir_all(&out).unwrap();
    let zeros = out.join("zeros.hex");
    std::fs::write(&zeros, "00000000\n").unwrap();
    for target in hostfuzz::targets::TARGETS.iter().filter(|t| t.name != "machine-rules") {
        let replay = hostfuzz(&out, &["--replay", target.name, zeros.to_str().unwrap()]);
        assert_eq!(replay.status.code(), Some(0), "{}: {}", target.name, stdout(&replay));
    }
    let list = stdout(&hostfuzz(&out, &["--list"]));
    assert_eq!(list.lines().count(), hostfuzz::targets::TARGETS.len(), "{list}");
    for target in hostfuzz::targets::TARGETS {
        assert!(list.lines().any(|l| l.split_whitespace().next() == Some(target.name)), "{list}");
    }
    let bad = hostfuzz(&out, &["--target", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_machine_rules_target_finds_a_broken_rule_and_its_input_replays() {
    let out = out_dir("machine-rules");
    let run = hostfuzz(&out, &["--target", "machine-rules"]);
    let text = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(text.contains("machine-rules: FINDING at seed 1 iteration 0: invariant: "), "{text}");
    let replay = hostfuzz(&out, &["--replay", "machine-rules", saved(&text, "shrunk: ").to_str().unwrap()]);
    assert_eq!(replay.status.code(), Some(1), "{}", stdout(&replay));
    assert!(stdout(&replay).contains("machine-rules: FINDING: invariant: "), "{}", stdout(&replay));
}

#[test]
fn in_process_prints_what_the_fork_per_input_prints() {
    let out = out_dir("in-process");
    for args in [&["--count", "300"][..], &["--target", "canary"]] {
        let forked = hostfuzz(&out, args);
        let inline = hostfuzz(&out, &[&["--in-process"][..], args].concat());
        assert_eq!(forked.status.code(), inline.status.code(), "{args:?}: {}", stdout(&inline));
        assert_eq!(stdout(&forked), stdout(&inline), "{args:?}");
        assert!(String::from_utf8_lossy(&inline.stderr).contains("inputs/s, in process"), "{args:?}");
    }
}
