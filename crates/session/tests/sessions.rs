//! Sessions driven against real client processes (sh, cat, python3): no ssh needed.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbench_process::Cmd;
use testbench_session::{run, Forbid, Marks, Pattern, SessionOutcome, SessionSpec, Step};

/// A generous deadline: no test waits it out unless it fails.
const DEADLINE: Duration = Duration::from_secs(60);

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("testbench-session-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sh(script: &str) -> Cmd {
    Cmd::new("sh", "the test client", DEADLINE).args(["-c", script])
}

fn python(script: &str) -> Cmd {
    Cmd::new("python3", "the test client", DEADLINE).args(["-u", "-c", script])
}

fn expect(p: &str) -> Step {
    Step::Expect(Pattern::new(p).unwrap())
}

fn send(text: &str) -> Step {
    Step::Send(text.to_string())
}

fn spec(name: &str, steps: Vec<Step>) -> SessionSpec {
    SessionSpec { name: name.to_string(), steps, forbid: Vec::new(), pty: false }
}

struct Run {
    outcome: SessionOutcome,
    transcript: String,
}

fn run_one(name: &str, spec: &SessionSpec, cmd: &Cmd, deadline: Duration) -> Run {
    let dir = dir(name);
    let log = dir.join("session.log");
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let outcome = run(spec, cmd, &Marks::new(), &stop, start, start + deadline, &log);
    let transcript = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    Run { outcome, transcript }
}

fn reason(run: &Run) -> &str {
    match &run.outcome {
        SessionOutcome::Fail { reason } => reason,
        SessionOutcome::Pass { .. } => panic!("passed, but should have failed:\n{}", run.transcript),
    }
}

fn passed(run: &Run) -> (i32, &[(usize, Duration)], Option<Duration>) {
    match &run.outcome {
        SessionOutcome::Pass { status, expects, first_prompt } => (status.code().unwrap(), expects, *first_prompt),
        SessionOutcome::Fail { reason } => panic!("failed: {reason}\n{}", run.transcript),
    }
}

#[test]
fn a_prompt_loop_driven_by_expect_and_send_types_a_capture_back() {
    let client = sh(r#"printf 'id 4f2a\n$ '; while read line; do echo "got $line"; printf '$ '; done"#);
    let steps = vec![
        expect(r"^id "),
        expect(r"([0-9a-f]+)\n\$ $"),
        send("approve $1 for $$5\n"),
        expect(r"got (approve \w+ for \$5)\n\$ $"),
        send("echo $1\n"),
        expect(r"got echo approve 4f2a for \$5"),
        Step::Exit(0),
    ];
    let run = run_one("prompt", &spec("prompt", steps), &client, DEADLINE);
    let (code, expects, first_prompt) = passed(&run);
    assert_eq!(code, 0);
    // The two expects before the first send, the prompt last.
    assert_eq!(expects.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(first_prompt, Some(expects[1].1));
    let t = &run.transcript;
    assert!(t.contains("expect 1 matched") && t.contains("after sh started: 'id '"), "{t}");
    assert!(t.contains("expect 2 matched") && t.contains("after sh started: '4f2a\\n$ '"), "{t}");
    assert!(t.contains("sent 'approve 4f2a for $5\\n'"), "{t}");
    assert!(t.contains("got echo approve 4f2a for $5"), "{t}");
    assert!(t.contains("closed sh's stdin") && t.contains("] sh exited 0"), "{t}");
    assert!(t.contains("] started sh (pid ") && t.contains("sh -c '"), "{t}");
}

#[test]
fn a_group_that_took_no_part_fails_the_send_naming_it() {
    let client = sh("echo a; cat");
    let steps = vec![expect("(a)|(b)"), send("$2\n"), Step::Exit(0)];
    let run = run_one("group", &spec("group", steps), &client, DEADLINE);
    let r = reason(&run);
    assert!(r.starts_with("step 2 (send '$2\\n'): $2, but group 2 of the last expect ('(a)|(b)') took no part"), "{r}");
}

#[test]
fn marks_order_two_sessions_on_threads() {
    let dir = dir("marks");
    let flag = dir.join("flag");
    // a writes the flag, then says so; b starts only once a marked it, and reads it.
    let a_cmd = sh(&format!("echo written > '{}'; echo ready; cat", flag.display()));
    let b_cmd = Cmd::new("cat", "b", DEADLINE).arg(&flag);
    let a = spec("a", vec![expect("ready"), Step::Mark("a-ready".into()), Step::Wait("b-done".into()), Step::Exit(0)]);
    let b =
        spec("b", vec![Step::Wait("a-ready".into()), expect("written"), Step::Mark("b-done".into()), Step::Ended(0)]);
    let marks = Marks::new();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let deadline = start + DEADLINE;
    let threads: Vec<_> = [(a, a_cmd, "a.log"), (b, b_cmd, "b.log")]
        .into_iter()
        .map(|(spec, cmd, log)| {
            let (marks, stop, log) = (marks.clone(), stop.clone(), dir.join(log));
            std::thread::spawn(move || run(&spec, &cmd, &marks, &stop, start, deadline, &log))
        })
        .collect();
    for thread in threads {
        if let SessionOutcome::Fail { reason } = thread.join().unwrap() {
            panic!("{reason}\n{}\n{}", read(&dir.join("a.log")), read(&dir.join("b.log")));
        }
    }
    let b_log = read(&dir.join("b.log"));
    assert!(b_log.find("mark a-ready seen").unwrap() < b_log.find("started cat").unwrap(), "{b_log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_wait_that_never_comes_fails_naming_the_mark() {
    // Before the client starts, and after.
    for (name, steps) in [
        ("before", vec![Step::Wait("nobody-sets-this".into()), Step::Exit(0)]),
        ("after", vec![expect("hi"), Step::Wait("nobody-sets-this".into()), Step::Exit(0)]),
    ] {
        let run = run_one(name, &spec(name, steps), &sh("echo hi; cat"), Duration::from_millis(500));
        let r = reason(&run);
        assert!(
            r.contains("(wait 'nobody-sets-this'): the mark 'nobody-sets-this' was never set by the case's deadline"),
            "{r}"
        );
    }
}

#[test]
fn sessions_waiting_for_each_other_fail_at_once_naming_the_deadlock() {
    // With their clients running (after an expect) and before them: either way no
    // session can set a mark any more, and the case ends long before its deadline.
    for (case, first) in [("clients", Some(expect("up"))), ("no-clients", None)] {
        let dir = dir(&format!("deadlock-{case}"));
        let marks = Marks::for_sessions(["left", "right"]);
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let threads: Vec<_> = [("left", "right-ready", "left-ready"), ("right", "left-ready", "right-ready")]
            .into_iter()
            .map(|(name, wait, mark)| {
                let steps =
                    first.iter().cloned().chain([Step::Wait(wait.into()), Step::Mark(mark.into()), Step::Exit(0)]);
                let spec = spec(name, steps.collect());
                let (marks, stop, log) = (marks.clone(), stop.clone(), dir.join(format!("{name}.log")));
                std::thread::spawn(move || {
                    run(&spec, &sh("echo up; cat"), &marks, &stop, start, start + DEADLINE, &log)
                })
            })
            .collect();
        let reasons: Vec<String> = threads
            .into_iter()
            .map(|t| match t.join().unwrap() {
                SessionOutcome::Fail { reason } => reason,
                SessionOutcome::Pass { .. } => panic!("{case}: a session passed"),
            })
            .collect();
        assert!(start.elapsed() < DEADLINE / 2, "{case}: found only at the deadline");
        let deadlock = "deadlock: every session still running waits for a mark none of them can set \
                        (left for 'right-ready', right for 'left-ready')";
        let step = if first.is_some() { 2 } else { 1 };
        // The first to see it fails; the other fails the same way or is stopped by it.
        let failed: Vec<&String> = reasons.iter().filter(|r| !r.starts_with("stopped:")).collect();
        assert!(!failed.is_empty(), "{case}: {reasons:?}");
        for r in failed {
            assert!(r.starts_with(&format!("step {step} (wait '")), "{case}: {r}");
            assert!(r.contains(deadlock), "{case}: {r}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_step_past_its_within_fails() {
    let client = python("import time; print('start'); time.sleep(30); print('late')");
    let steps = vec![expect("start"), Step::Within(Duration::from_millis(300)), expect("late"), Step::Exit(0)];
    let begun = Instant::now();
    let run = run_one("within", &spec("within", steps), &client, DEADLINE);
    let r = reason(&run);
    assert!(
        r.starts_with("step 3 (expect 'late'): no match within 0.300s (its within); last output: 'start\\n'"),
        "{r}"
    );
    assert!(begun.elapsed() < Duration::from_secs(20), "the within did not end the step");
    assert!(run.transcript.contains("killed python3"), "{}", run.transcript);
}

#[test]
fn forbidden_output_fails_even_split_across_two_writes() {
    let client = python(
        "import sys, time\n\
         sys.stdout.write('the bob-sec'); sys.stdout.flush(); time.sleep(0.3)\n\
         sys.stdout.write('ret is out\\n'); sys.stdout.flush(); time.sleep(0.3)\n\
         print('done')",
    );
    let mut s = spec("forbid", vec![expect("done"), Step::Ended(0)]);
    s.forbid.push(Forbid::new(Pattern::new("bob-secret").unwrap()));
    let run = run_one("forbid", &s, &client, DEADLINE);
    let r = reason(&run);
    assert!(r.contains("forbidden output on stdout (forbid 'bob-secret'): 'the bob-secret is out'"), "{r}");
    // The same on stderr, split, with no newline before the client exits.
    let client = python(
        "import sys, time\n\
         sys.stderr.write('bob-se'); sys.stderr.flush(); time.sleep(0.3)\n\
         sys.stderr.write('cret')",
    );
    let run = run_one("forbid-eof", &s, &client, DEADLINE);
    assert!(
        reason(&run).contains("forbidden output on stderr (forbid 'bob-secret'): 'bob-secret'"),
        "{}",
        reason(&run)
    );
}

#[test]
fn an_exit_status_other_than_the_one_asked_fails() {
    let run =
        run_one("status", &spec("status", vec![expect("bye"), Step::Ended(0)]), &sh("echo bye; exit 3"), DEADLINE);
    let r = reason(&run);
    assert!(r.starts_with("step 2 (ended 0): sh exited 3, not exit status 0; last output: 'bye\\n'"), "{r}");
    let run = run_one("signal", &spec("signal", vec![Step::Ended(0)]), &sh("kill -9 $$"), DEADLINE);
    assert!(reason(&run).contains("sh was killed by signal 9 (SIGKILL), not exit status 0"), "{}", reason(&run));
    // An expect the client exits before.
    let run =
        run_one("early", &spec("early", vec![expect("never"), Step::Exit(0)]), &sh("echo soon; exit 2"), DEADLINE);
    assert!(reason(&run).starts_with("step 1 (expect 'never'): sh exited 2 before a match; last output: 'soon\\n'"));
}

/// `^` and `$` are line anchors, as in a console `expect`: `^hidden-42$` matches a line
/// in the middle of the output (not only the output's first and last line), on a pipe's
/// `\n` and on a terminal's `\r\n` alike.
#[test]
fn line_anchors_match_a_line_in_the_middle_of_the_output() {
    let client = sh(r"printf 'boot\nhidden-42\nriscv64\n'; printf 'id 7\r\nok\r\nend\r\n'");
    let steps = vec![expect("^hidden-42$"), expect("^ok$"), expect(r"^end\r?\n"), Step::Ended(0)];
    let run = run_one("anchors", &spec("anchors", steps), &client, DEADLINE);
    assert_eq!(passed(&run).0, 0);
    let t = &run.transcript;
    assert!(t.contains("expect 1 matched") && t.contains("after sh started: 'hidden-42'"), "{t}");
    assert!(t.contains("expect 2 matched") && t.contains("after sh started: 'ok'"), "{t}");
    // A line that only ends with the text is no match for the anchored pattern.
    let steps = vec![expect("^ok$"), Step::Ended(0)];
    let run = run_one("anchors-miss", &spec("anchors-miss", steps), &sh(r"printf 'nok\nok2\n'"), DEADLINE);
    assert!(reason(&run).starts_with("step 1 (expect '^ok$'): sh exited 0 before a match"), "{}", reason(&run));
}

#[test]
fn ended_takes_a_client_that_exits_by_itself() {
    let run = run_one("ended", &spec("ended", vec![expect("bye"), Step::Ended(4)]), &sh("echo bye; exit 4"), DEADLINE);
    assert_eq!(passed(&run).0, 4);
    assert!(!run.transcript.contains("closed"), "{}", run.transcript);
}

#[test]
fn exit_closes_the_input_so_cat_exits_0() {
    let steps = vec![send("hello\n"), expect("hello\n"), Step::Exit(0), Step::Mark("gone".into())];
    let run = run_one("cat", &spec("cat", steps), &Cmd::new("cat", "cat", DEADLINE), DEADLINE);
    let (code, expects, first_prompt) = passed(&run);
    assert_eq!(code, 0);
    // It typed before any expect: no prompt latency, nothing for the result line.
    assert!(expects.is_empty() && first_prompt.is_none());
    assert!(run.transcript.contains("mark gone"));
}

#[test]
fn steps_without_exit_end_as_exit_0() {
    let run = run_one("implied", &spec("implied", vec![expect("hi")]), &sh("echo hi; cat"), DEADLINE);
    assert_eq!(passed(&run).0, 0);
    let run = run_one("implied-fail", &spec("implied-fail", vec![expect("hi")]), &sh("echo hi; exit 1"), DEADLINE);
    assert!(reason(&run).starts_with("the end of the steps (an implied exit 0): sh exited 1, not exit status 0"));
}

#[test]
fn a_terminal_starts_at_80x24_and_a_resize_reaches_the_client() {
    let client = sh("while read line; do stty size; done");
    let mut s = spec(
        "pty",
        vec![
            send("size\n"),
            expect(r"^24 80\n"),
            Step::Resize(132, 43),
            send("size\n"),
            expect(r"^43 132\n"),
            Step::Exit(0),
        ],
    );
    s.pty = true;
    let run = run_one("pty", &s, &client, DEADLINE);
    assert_eq!(passed(&run).0, 0);
    assert!(run.transcript.contains("its stdin a terminal at 80x24"), "{}", run.transcript);
    assert!(run.transcript.contains("resized the terminal to 132x43 and sent SIGWINCH"), "{}", run.transcript);
    // The terminal's echo of what was typed is not output.
    assert!(!run.transcript.contains("size\n"), "{}", run.transcript);

    // SIGWINCH itself reaches the client.
    let client = python(
        "import os, signal, sys
signal.signal(signal.SIGWINCH, lambda *_: print('winch %dx%d' % tuple(os.get_terminal_size(0))))
print('ready')
try:
    for line in sys.stdin: pass
except OSError: pass  # the terminal hung up: the session closed it
",
    );
    let mut s = spec("winch", vec![expect("ready"), Step::Resize(100, 30), expect(r"winch 100x30"), Step::Exit(0)]);
    s.pty = true;
    let run = run_one("winch", &s, &client, DEADLINE);
    assert_eq!(passed(&run).0, 0);
}

#[test]
fn resize_without_a_terminal_is_refused_naming_it() {
    let run = run_one("nopty", &spec("nopty", vec![Step::Resize(132, 43), Step::Exit(0)]), &sh("cat"), DEADLINE);
    assert_eq!(reason(&run), "step 1 (resize [132, 43]): resize needs pty = true");
    assert!(!run.transcript.contains("started"), "{}", run.transcript);
}

#[test]
fn a_failing_session_stops_the_others_promptly() {
    let dir = dir("stop");
    let marks = Marks::new();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let deadline = start + DEADLINE;
    // It fails once the others are where they wait.
    let failing = spec(
        "first",
        vec![Step::Wait("after-waits".into()), Step::Wait("expecting-waits".into()), expect("never"), Step::Exit(0)],
    );
    // One waits before its client starts, one after, one in an expect.
    let waiting = [
        spec("before", vec![Step::Wait("never-set".into()), Step::Exit(0)]),
        spec(
            "after",
            vec![expect("up"), Step::Mark("after-waits".into()), Step::Wait("never-set".into()), Step::Exit(0)],
        ),
        spec("expecting", vec![expect("up"), Step::Mark("expecting-waits".into()), expect("never")]),
    ];
    let threads: Vec<_> = waiting
        .into_iter()
        .map(|spec| {
            let (marks, stop, log) = (marks.clone(), stop.clone(), dir.join(format!("{}.log", spec.name)));
            std::thread::spawn(move || {
                let outcome = run(&spec, &sh("echo up; cat"), &marks, &stop, start, deadline, &log);
                (outcome, Instant::now())
            })
        })
        .collect();
    let failed = run(&failing, &sh("exit 1"), &marks, &stop, start, deadline, &dir.join("first.log"));
    let failed_at = Instant::now();
    assert!(matches!(failed, SessionOutcome::Fail { .. }));
    for thread in threads {
        let (outcome, ended) = thread.join().unwrap();
        let SessionOutcome::Fail { reason } = outcome else { panic!("passed") };
        assert!(reason.starts_with("stopped: session first failed (this session was at step "), "{reason}");
        assert!(ended.duration_since(failed_at) < Duration::from_secs(20), "not stopped promptly");
    }
    assert!(read(&dir.join("after.log")).contains("killed sh"));
    assert!(read(&dir.join("expecting.log")).contains("killed sh"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_send_the_client_never_reads_ends_at_its_within() {
    let client = python("import time; print('up'); time.sleep(30)");
    let big = "x".repeat(1 << 20);
    let steps = vec![expect("up"), Step::Within(Duration::from_millis(500)), send(&big), Step::Exit(0)];
    let run = run_one("stuck", &spec("stuck", steps), &client, DEADLINE);
    let r = reason(&run);
    assert!(r.contains("python3 did not take its input within 0.500s (its within); last output: 'up\\n'"), "{r}");
    assert!(r.len() < 800, "{r}");
}

#[test]
fn a_stop_raised_by_the_bench_ends_a_session_saying_so() {
    let dir = dir("bench-stop");
    let marks = Marks::new();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let s = spec("waiter", vec![expect("up"), Step::Mark("waiting".into()), Step::Wait("never-set".into())]);
    let thread = {
        let (marks, stop, log) = (marks.clone(), stop.clone(), dir.join("waiter.log"));
        std::thread::spawn(move || run(&s, &sh("echo up; cat"), &marks, &stop, start, start + DEADLINE, &log))
    };
    marks.wait_for("waiting", start + DEADLINE, &AtomicBool::new(false)).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    marks.wake();
    let SessionOutcome::Fail { reason } = thread.join().unwrap() else { panic!("passed") };
    assert_eq!(reason, "stopped: the case stopped its sessions (this session was at step 3 (wait 'never-set'))");
    std::fs::remove_dir_all(&dir).unwrap();
}
