//! `cargo testbench history [FILTER] [--last N] [--history PATH] [--message-format json]`:
//! per case, width and hart count whose case name holds FILTER, the last pass, the first
//! failure after it, the pass rate over the last N results (default 20), the crash
//! titles seen and a flake mark (a commit with both a pass and a failure in the window,
//! its tree clean both times). In JSON, one object per series on stdout.
//!
//! Exit status: 0 (even with no result kept: it says so), 2 for a command line it cannot
//! take, 3 for a history it cannot read.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use testbench_history::{History, Seen, Series};

/// The word that makes the command line this one.
pub const WORD: &str = "history";

#[derive(Parser, Debug)]
#[command(
    name = "testbench history",
    about = "What the history says of each case: last pass, first failure after it, pass rate, crash titles, flakes"
)]
struct Flags {
    /// Only the cases whose names contain FILTER.
    filter: Option<String>,
    /// The window the pass rate and the flake mark are over: each series' last N results.
    #[arg(long, value_name = "N", default_value_t = 20)]
    last: usize,
    /// The history database (default target/testbench/history.sqlite in the workspace).
    #[arg(long, value_name = "PATH")]
    history: Option<PathBuf>,
    /// human (default) or json (one JSON object per series on stdout).
    #[arg(long, value_name = "FORMAT", default_value = "human")]
    message_format: String,
}

/// Run the command on `args` (the words after `history`); never returns.
pub fn main(root: &std::path::Path, args: &[OsString]) -> ! {
    let words = std::iter::once(OsString::from("testbench history")).chain(args.iter().cloned());
    let flags = Flags::try_parse_from(words).unwrap_or_else(|e| e.exit());
    let json = match flags.message_format.as_str() {
        "human" => false,
        "json" => true,
        other => {
            eprintln!("error: --message-format {other:?}: accepted: human or json");
            std::process::exit(crate::error::EXIT_REFUSED)
        }
    };
    if flags.last == 0 {
        eprintln!("error: --last 0: the window takes at least 1 result");
        std::process::exit(crate::error::EXIT_REFUSED)
    }
    let path = super::path(root, flags.history.as_deref());
    if !path.is_file() {
        eprintln!("no history at {}: no run has kept a result there yet", path.display());
        std::process::exit(crate::error::EXIT_PASSED)
    }
    let series = History::open(&path).and_then(|h| h.series(flags.filter.as_deref().unwrap_or(""), flags.last));
    let series = match series {
        Ok(series) => series,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(crate::error::EXIT_TROUBLE)
        }
    };
    for one in &series {
        match json {
            true => println!("{}", serde_json::to_string(&json_of(one)).expect("a series serializes")),
            false => print!("{}", shown(one, flags.last)),
        }
    }
    if series.is_empty() && !json {
        let which = flags.filter.map(|f| format!(" whose name contains {f:?}")).unwrap_or_default();
        println!("the history {} keeps no result of a case{which}", path.display());
    }
    std::process::exit(crate::error::EXIT_PASSED)
}

/// A series as one JSON object: its fields, with `flake` and `pass_rate` said.
fn json_of(series: &Series) -> serde_json::Value {
    let mut value = serde_json::to_value(series).expect("a series serializes");
    value["flake"] = series.flake().into();
    value["pass_rate"] = series.pass_rate().into();
    value["crash_titles"] = series
        .crash_titles
        .iter()
        .map(|(title, count)| serde_json::json!({ "title": title, "count": count }))
        .collect();
    value
}

fn short(commit: &Option<String>) -> String {
    match commit {
        Some(commit) => commit.chars().take(12).collect(),
        None => "no commit".to_string(),
    }
}

/// One result in a line: run, time, commit (dirty or not), seed, and a failure's kind,
/// class and crash.
fn seen(seen: &Seen) -> String {
    let dirty = if seen.dirty == Some(true) { " (dirty)" } else { "" };
    let mut text = format!("{} at {} UTC, commit {}{dirty}", seen.run, seen.when, short(&seen.commit));
    if let Some(seed) = seen.seed {
        text.push_str(&format!(", seed {seed}"));
    }
    if let Some(kind) = &seen.fail_kind {
        text.push_str(&format!(": {kind}"));
    }
    if let Some(class) = &seen.class {
        text.push_str(&format!(" ({class})"));
    }
    if let Some(title) = &seen.crash_title {
        text.push_str(&format!(", crash {title:?}"));
    }
    text
}

/// A series as a person reads it: a heading line with the rate and the flake mark, then
/// the last pass, the first failure after it, and the crash titles.
fn shown(series: &Series, last: usize) -> String {
    let label =
        crate::report::label_of(&series.case, (series.width != "host").then_some(series.width.as_str()), series.harts);
    let rate = match series.pass_rate() {
        Some(rate) => format!("{} of {} passed ({:.0}%)", series.passed, series.passed + series.failed, rate * 100.0),
        None => "none passed or failed".to_string(),
    };
    let mut text = format!("{label}: {rate} over its last {} results (of at most {last})", series.window);
    if series.flake() {
        let commits: Vec<String> = series.flaky_commits.iter().map(|c| short(&Some(c.clone()))).collect();
        text.push_str(&format!("; FLAKY: passed and failed at {}", commits.join(", ")));
    }
    text.push('\n');
    let never = |what: &str| format!("  {what}: never\n");
    match &series.last_pass {
        Some(pass) => text.push_str(&format!("  last pass:             {}\n", seen(pass))),
        None => text.push_str(&never("last pass")),
    }
    match &series.first_failure_after {
        Some(failure) => text.push_str(&format!("  first failure after it: {}\n", seen(failure))),
        None if series.last_pass.is_some() => text.push_str("  first failure after it: none\n"),
        None => text.push_str(&never("failure")),
    }
    if !series.crash_titles.is_empty() {
        let titles: Vec<String> = series.crash_titles.iter().map(|(t, n)| format!("{t:?} ×{n}")).collect();
        text.push_str(&format!("  crash titles: {}\n", titles.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbench_history::Verdict;

    fn a_seen(run: &str, verdict: Verdict) -> Seen {
        Seen {
            id: 1,
            run: run.into(),
            finished: 0,
            when: "2026-12-07 20:00:00".into(),
            seed: Some(7),
            commit: Some("0123456789abcdef0123".into()),
            dirty: Some(false),
            verdict,
            fail_kind: (verdict == Verdict::Fail).then(|| "crash".into()),
            crash_title: (verdict == Verdict::Fail).then(|| "kernel panic: boom".into()),
            class: (verdict == Verdict::Fail).then(|| "deterministic".into()),
        }
    }

    #[test]
    fn a_series_reads_as_its_rate_its_last_pass_its_first_failure_after_and_its_titles() {
        let series = Series {
            case: "c".into(),
            width: "rv64".into(),
            harts: Some(2),
            last_pass: Some(a_seen("run-1", Verdict::Pass)),
            first_failure_after: Some(a_seen("run-2", Verdict::Fail)),
            window: 3,
            passed: 2,
            failed: 1,
            crash_titles: vec![("kernel panic: boom".into(), 1)],
            flaky_commits: vec!["0123456789abcdef0123".into()],
        };
        let text = shown(&series, 20);
        let expected = "c rv64 smp2: 2 of 3 passed (67%) over its last 3 results (of at most 20); FLAKY: passed and failed at 0123456789ab
  last pass:             run-1 at 2026-12-07 20:00:00 UTC, commit 0123456789ab, seed 7
  first failure after it: run-2 at 2026-12-07 20:00:00 UTC, commit 0123456789ab, seed 7: crash (deterministic), crash \"kernel panic: boom\"
  crash titles: \"kernel panic: boom\" ×1
";
        assert_eq!(text, expected);
        let json = json_of(&series);
        assert_eq!(json["flake"], true);
        assert_eq!(json["crash_titles"][0]["count"], 1);
        assert_eq!(json["first_failure_after"]["verdict"], "fail");
        let never = Series { last_pass: None, first_failure_after: None, flaky_commits: vec![], ..series };
        assert!(shown(&never, 20).contains("  last pass: never\n  failure: never\n"), "{}", shown(&never, 20));
    }
}
