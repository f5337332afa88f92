use super::*;

/// A failure of the judge's most common kind, with `reason`.
fn fail(reason: String) -> Verdict {
    Verdict::Fail(crate::verdict::Failed::new(crate::verdict::FailKind::TimedOut, reason))
}

/// A run directory with one boot's files: its console log and its marks.
fn boot_dir(run: &Path, name: &str, console: &[u8], marks: &str) -> PathBuf {
    let dir = run.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("console.log"), console).unwrap();
    std::fs::write(dir.join(crate::boot::MARKS_FILE), marks).unwrap();
    dir
}

fn report(case: &str, dir: PathBuf, verdict: Verdict, seed: Option<u64>, sweep: bool) -> BootReport {
    BootReport {
        case: case.into(),
        kind: "boot",
        arch: Some("rv64".into()),
        smp: Some(1),
        seed,
        verdict,
        duration: Duration::from_millis(1500),
        dir,
        replay: format!("cargo testbench --exact {case} --arch rv64 --smp 1"),
        replay_note: None,
        sweep,
        console_tail: Vec::new(),
        notes: Vec::new(),
        class: None,
        quarantined: None,
    }
}

fn info(run_dir: &Path, summary: Summary) -> RunInfo<'_> {
    RunInfo { run_dir, took: Duration::from_secs(3), summary, sweep: None, stopped: None, strips: None, coverage: None }
}

const MARKS: &str = r#"{"lines": 6, "marks": [
  {"line": 2, "rule": "expect", "label": "expect[0]", "pattern": "^booting"},
  {"line": 3, "rule": "input", "label": "input[0]", "pattern": "login: $"},
  {"line": 5, "rule": "forbid", "label": "forbid[0]", "pattern": "PANIC"}]}"#;

const NO_MARKS: &str = r#"{"lines": 6, "marks": []}"#;

fn hostile_run() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("invocation.json"), r#"{"command": ["testbench", "--exact", "x y"]}"#).unwrap();
    let console = b"hello <b>there</b> see https://example.org/x.js\r\n\x1b[32mbooting\x1b[0m now\n\
        login: \nwaiting 10%\rwaiting 99%\x07\n\x1b[1;31mPANIC\x1b[0m: <script>alert(1)</script> \xff\n\
        after the panic\n";
    let dir = boot_dir(&run, "rv64/flood.smp1", console, MARKS);
    let reason = "forbidden line at 0.10s matched forbid[0] 'PANIC': PANIC: <script>alert(1)</script>".to_string();
    let reports = vec![report("flood", dir, fail(reason), Some(7), false)];
    let summary = Summary { passed: 0, failed: 1, skipped: 0, trouble: 0 };
    let page = page(&info(&run, summary), &reports);
    (tmp, page)
}

#[test]
fn the_page_names_nothing_outside_itself() {
    let (_tmp, page) = hostile_run();
    for outside in ["http://", "https://", "src=", "<link", "url(", "@import", "<iframe", "<img", "<object"] {
        assert!(!page.contains(outside), "the page holds {outside:?}");
    }
    // The one script is the page's own; the console's is text.
    assert_eq!(page.matches("<script").count(), 1);
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("https&#58;//example.org/x.js"), "a URL in the console is text");
    assert!(page.contains("&lt;b&gt;there&lt;/b&gt;"));
}

#[test]
fn the_failing_line_is_at_the_top_and_every_mark_is_labelled() {
    let (_tmp, page) = hostile_run();
    let block = page.find("<section class=\"boot FAIL\" id=\"b0\">").expect("the failed boot's block");
    let failure = page[block..].find("failed at line <a href=\"#b0-L5\">5</a>").map(|at| block + at);
    let console = page[block..].find("class=\"console\"").map(|at| block + at);
    assert!(failure.is_some() && failure < console, "the failing line comes before the console");
    assert!(page.contains("<div class=\"l mark m-forbid\" id=\"b0-L5\">"), "the forbidden line is marked");
    assert!(page.contains("<div class=\"l mark m-expect\" id=\"b0-L2\">"));
    assert!(page.contains("<div class=\"l mark m-input\" id=\"b0-L3\">"));
    assert!(page.contains(" <span class=\"tag\">expect[0] '^booting'</span>"));
    assert!(page.contains(" <span class=\"tag\">forbid[0] 'PANIC'</span>"));
    // The console as a terminal shows it: colours, the carriage return, the bell, U+FFFD.
    assert!(page.contains("<span class=\"f2\">booting</span> now"));
    assert!(page.contains("waiting 99%<span class=\"ctl\">\u{2407}</span>") && !page.contains("waiting 10%"));
    assert!(page.contains("<span class=\"f1 bo\">PANIC</span>"));
    assert!(page.contains(" \u{fffd}</div>"));
    assert!(page.contains("id=\"b0-L6\"><a class=\"n\" href=\"#b0-L6\">6</a>after the panic</div>"));
    assert!(!page.contains('\u{240a}'), "a line's own '\\n' is not part of it");
    // Verdict, seed, replay line, the command.
    assert!(page.contains("<span class=\"verdict FAIL\">FAILED</span>"));
    assert!(page.contains("<dd class=\"seed\">seed 7</dd>"));
    assert!(page.contains("<pre class=\"replay\">cargo testbench --exact flood --arch rv64 --smp 1</pre>"));
    assert!(page.contains("<code class=\"command\">testbench --exact &#39;x y&#39;</code>"));
    assert!(page.contains("<a href=\"rv64/flood.smp1/console.log\">"), "the whole log, relative");
}

#[test]
fn a_long_console_is_shown_as_a_bounded_window_saying_what_was_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let mut console = Vec::new();
    for i in 1..=200_000 {
        console.extend_from_slice(format!("line {i}\n").as_bytes());
    }
    // One line of a megabyte, marked.
    console.extend_from_slice(&vec![b'y'; 1 << 20]);
    console.extend_from_slice(b"\nthe end\n");
    let marks = r#"{"lines": 200002, "marks": [{"line": 100000, "rule": "expect", "label": "expect[0]", "pattern": "line 100000$"},
        {"line": 200001, "rule": "forbid", "label": "forbid[0]", "pattern": "y{10}"}]}"#;
    let dir = boot_dir(&run, "b", &console, marks);
    let reports = vec![report("long", dir, fail("forbidden".into()), None, false)];
    let page = page(&info(&run, Summary { passed: 0, failed: 1, skipped: 0, trouble: 0 }), &reports);
    assert!(page.len() < 200_000, "a page of {} bytes", page.len());
    assert!(page.contains("id=\"b0-L1\"") && page.contains("id=\"b0-L60\"") && !page.contains("id=\"b0-L61\""));
    assert!(page.contains("… 99936 lines left out here (lines 61–99996); the whole log: <a href=\"b/console.log\">"));
    assert!(page.contains("id=\"b0-L99997\"") && page.contains("<div class=\"l mark m-expect\" id=\"b0-L100000\">"));
    assert!(page.contains("id=\"b0-L200002\""), "the last line");
    assert!(page.contains(&format!("[… {} more bytes of this line left out]", (1 << 20) - term::LINE_BYTES)));
    // The first 60, the 7 around the expect's line, the last 120 (the forbidden line among them).
    assert!(page.contains("console&#58; 200002 lines, 187 shown, 2 marked"));
}

#[test]
fn a_sweep_is_a_grid_of_seeds_and_a_histogram_and_host_failures_keep_their_block() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let mut reports = Vec::new();
    for seed in 1..=5u64 {
        let dir = boot_dir(&run, &format!("s{seed}"), b"ok\n", r#"{"lines": 1, "marks": []}"#);
        let outcome =
            if seed == 3 { fail("timed out after 3s waiting for expect[0] 'x'".into()) } else { Verdict::Pass };
        let mut r = report("sw", dir, outcome, Some(seed), true);
        r.duration = Duration::from_millis(1000 + 250 * seed);
        reports.push(r);
    }
    let host = BootReport {
        kind: "host-tests",
        arch: None,
        smp: None,
        seed: None,
        sweep: false,
        dir: run.join("unit"),
        ..report("unit", PathBuf::new(), fail("failures:\n---- a stdout ----\npanicked at <x>".into()), None, false)
    };
    reports.push(host);
    let seeds = [1, 2, 3, 4, 5];
    let info =
        RunInfo { sweep: Some(("sw", &seeds)), ..info(&run, Summary { passed: 4, failed: 2, skipped: 0, trouble: 0 }) };
    let page = page(&info, &reports);
    assert!(page.contains("<a class=\"cell FAIL\" href=\"#b2\" title=\"seed 3: FAILED in 1.75s\">3</a>"));
    assert_eq!(page.matches("<a class=\"cell PASS\"").count(), 4);
    assert_eq!(page.matches("<rect class=\"bar\"").count(), 3, "ceil(sqrt(5)) bins");
    assert!(page.contains("data-count=\"2\""));
    // A timeout has no failing line: the console's last one is named.
    assert!(page.contains("failed; the console's last line is <a href=\"#b2-L1\">line 1</a>"));
    assert!(page.contains("<pre class=\"reason\">failures&#58;\n---- a stdout ----\npanicked at &lt;x&gt;</pre>"));
    // Failures first: the failed boot's block before the passed ones'.
    assert!(page.find("id=\"b2\"") < page.find("id=\"b0\""));
}

#[test]
fn a_huge_log_is_read_only_to_the_logs_own_bound() {
    // A sparse 64 GiB console.log (no disk, no memory): the page reads its start only.
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let dir = boot_dir(&run, "b", b"", r#"{"lines": 0, "marks": []}"#);
    std::fs::File::options().write(true).open(dir.join("console.log")).unwrap().set_len(64 << 30).unwrap();
    let reports = vec![report("huge", dir, fail("timed out".into()), None, false)];
    let page = page(&info(&run, Summary { passed: 0, failed: 1, skipped: 0, trouble: 0 }), &reports);
    let read = testbench_console::LOG_HEAD + testbench_console::LOG_TAIL as u64 + 256 * 1024;
    assert!(page.contains(&format!("the log has {} bytes; only its first {read} were read", 64u64 << 30)));
    assert!(page.len() < 64 * 1024, "a page of {} bytes", page.len());
    assert!(page.contains("<span class=\"ctl\">\u{2400}\u{2400}"), "NULs are shown as symbols");
}

/// A failure that names a crash: the report's lines are marked in its console, the first
/// with the title; the run's crashes are grouped in a table whose boots link to their
/// blocks, and a self-check's expected failure is in no group.
#[test]
fn a_crash_is_marked_in_its_console_and_the_run_groups_its_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let console = b"booting\nKernel panic - not syncing: VFS: oops\nCall Trace:\n dump_stack+0x1/0x2\n mount_root+0x3/0x4\nafter\n";
    let crash = |title: &str| crate::verdict::Crash {
        kind: "panic".into(),
        title: title.into(),
        frame: Some("mount_root".into()),
        line: 2,
        lines: 4,
        corrupted: None,
        trace: Vec::new(),
        trace_error: None,
    };
    let failed = |title: &str| {
        let mut failed = crate::verdict::Failed::new(crate::verdict::FailKind::Crash, "crash at 1.00s");
        failed.crash = Some(Box::new(crash(title)));
        failed
    };
    let reports = vec![
        report("a", boot_dir(&run, "a", console, NO_MARKS), Verdict::Fail(failed("kernel panic: VFS")), Some(1), true),
        report("a", boot_dir(&run, "b", console, NO_MARKS), Verdict::Fail(failed("kernel panic: VFS")), Some(2), true),
        report(
            "c",
            boot_dir(&run, "c", console, NO_MARKS),
            Verdict::ExpectedFailure(failed("kernel panic: other")),
            None,
            false,
        ),
    ];
    let summary = Summary { passed: 1, failed: 2, skipped: 0, trouble: 0 };
    let page = page(&info(&run, summary), &reports);
    assert!(page.contains("<section id=\"crashes\"><h2>1 distinct crash&#58;</h2>"), "{page}");
    assert!(page.contains("<a href=\"#b0\">a rv64 smp1 seed 1</a>, <a href=\"#b1\">a rv64 smp1 seed 2</a>"), "{page}");
    assert!(!page.contains("kernel panic&#58; other</td>"), "{page}");
    // Lines 2 to 5 of the failing consoles are the crash's; line 6 is not.
    assert!(page.contains("class=\"l mark m-crash\" id=\"b0-L3\""), "{page}");
    assert!(page.contains("class=\"l mark m-crash\" id=\"b0-L5\""), "{page}");
    assert!(page.contains("<div class=\"l mark m-crash\" id=\"b0-L2\">"), "{page}");
    assert!(page.contains("<div class=\"l\" id=\"b0-L6\">"), "{page}");
    assert!(page.contains("<span class=\"tag\">crash&#58; kernel panic&#58; VFS</span>"), "{page}");
}

#[test]
fn a_failures_class_and_quarantine_are_in_its_block() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let dir = boot_dir(&run, "rv64/c.smp1", b"boot\n", NO_MARKS);
    let mut failed = report("c", dir.clone(), fail("timed out".into()), Some(7), false);
    failed.class = Some(crate::verdict::Class::Deterministic);
    failed.quarantined =
        Some(crate::quarantine::Quarantined { until: "2026-12-31".into(), reason: "flakes <under load>".into() });
    let passed = report("p", dir, Verdict::Pass, Some(7), false);
    let summary = Summary { passed: 1, failed: 1, skipped: 0, trouble: 0 };
    let page = page(&info(&run, summary), &[failed, passed]);
    assert_eq!(page.matches("<dt>class</dt>").count(), 1, "the classed failure only");
    assert!(page.contains("<dt>class</dt><dd class=\"failure-class\">deterministic</dd>"));
    assert!(
        page.contains("<dt>quarantined</dt><dd class=\"quarantined\">until 2026-12-31: flakes &lt;under load&gt;</dd>")
    );
}

#[test]
fn each_result_shows_its_last_results_from_the_history_oldest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-1-2");
    let dir = boot_dir(&run, "rv64/c.smp1", b"boot\n", NO_MARKS);
    let cell = |outcome, flaky, quarantined| testbench_history::Cell {
        run: "run-<9>".into(),
        when: "2026-12-07 20:00:00".into(),
        outcome,
        flaky,
        quarantined,
    };
    let mut strips = std::collections::HashMap::new();
    strips.insert("c rv64 smp1".to_string(), vec![cell("pass", false, false), cell("fail", true, true)]);
    let summary = Summary { passed: 1, failed: 0, skipped: 0, trouble: 0 };
    let info = RunInfo { strips: Some(&strips), ..info(&run, summary) };
    let page = page(&info, &[report("c", dir, Verdict::Pass, None, false)]);
    assert!(page.contains("<th>last results</th>"), "{page}");
    assert!(page.contains(
        "<span class=\"strip\" title=\"the last 2 results, oldest first\"><span class=\"s pass\" title=\"run-&lt;9&gt; at 2026-12-07 20&#58;00&#58;00 UTC: pass\"></span><span class=\"s fail flaky quarantined\" title=\"run-&lt;9&gt; at 2026-12-07 20&#58;00&#58;00 UTC: fail flaky quarantined\"></span></span>"
    ), "{page}");
    let without = page_without_history(&run);
    assert!(!without.contains("last results"), "no history, no column");
}

fn page_without_history(run: &Path) -> String {
    page(&info(run, Summary::default()), &[])
}
