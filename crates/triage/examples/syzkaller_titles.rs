//! Compares this crate's titles and corrupted flags with a directory of syzkaller's
//! parser test data (`pkg/report/testdata/linux/report/` of github.com/google/syzkaller:
//! each file a set of `KEY: value` header lines, a blank line, then a console log).
//! The data is not ours and is never committed here: give its directory.
//!
//!     cargo run --release -p testbench-triage --example syzkaller_titles -- DIR [-v]
//!
//! Prints how many files with a `TITLE:` get the same title from the first report (and
//! the same title or one of the file's `ALT:` titles, a figure beside it), how
//! many get the same corrupted flag (`CORRUPTED: Y`, else no), how many title-less files
//! get a report all the same, and the misses grouped by the expected title's kind.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use testbench_triage::{reports, Corruption, Guest};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.iter().find(|a| !a.starts_with('-')) else {
        eprintln!("usage: syzkaller_titles DIR [-v]   (DIR: syzkaller's pkg/report/testdata/linux/report)");
        return ExitCode::from(2);
    };
    let verbose = args.iter().any(|a| a == "-v");
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect(),
        Err(e) => {
            eprintln!("syzkaller_titles: {dir}: {e}");
            return ExitCode::from(2);
        }
    };
    paths.sort();
    let mut same_or_alt = 0;
    let (mut titled, mut same_title, mut same_corrupt, mut untitled, mut untitled_reported) = (0, 0, 0, 0, 0);
    let mut misses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut corrupt_misses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in &paths {
        let Ok(data) = std::fs::read(path) else { continue };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let split = memchr::memmem::find(&data, b"\n\n").map_or(data.len(), |p| p + 2);
        let head = String::from_utf8_lossy(&data[..split]);
        let log = &data[split..];
        let mut title = None;
        let mut alts = Vec::new();
        let mut corrupted = false;
        for line in head.lines() {
            if let Some(t) = line.strip_prefix("ALT: ") {
                alts.push(t.trim().to_string());
            }
            if let Some(t) = line.strip_prefix("TITLE: ") {
                title.get_or_insert(t.trim().to_string());
            }
            if line.trim() == "CORRUPTED: Y" {
                corrupted = true;
            }
        }
        let got = reports(log, Guest::Linux);
        let first = got.first();
        let Some(want) = title else {
            untitled += 1;
            if let Some(r) = first {
                untitled_reported += 1;
                if verbose {
                    println!("untitled {name}: got {:?}", r.title);
                }
            }
            continue;
        };
        titled += 1;
        let got_title = first.map_or("(none)".to_string(), |r| r.title.clone());
        let got_corrupt = first.is_some_and(|r| r.is_corrupted());
        let group = kind_of(&want);
        if got_title == want || alts.contains(&got_title) {
            same_or_alt += 1;
        }
        if got_title == want {
            same_title += 1;
        } else {
            misses.entry(group.clone()).or_default().push(format!("{name}: want {want:?}, got {got_title:?}"));
        }
        if got_corrupt == corrupted {
            same_corrupt += 1;
        } else {
            let mut why = first.and_then(|r| r.corrupted).map_or("none".to_string(), |c| c.to_string());
            if let Some(Corruption::Interleaved { at }) = first.and_then(|r| r.corrupted) {
                let line = log[at..].split(|&b| b == b'\n').next().unwrap_or_default();
                why = format!("{why}: {:?}", String::from_utf8_lossy(&line[..line.len().min(100)]));
            }
            corrupt_misses.entry(group).or_default().push(format!(
                "{name}: want {}, got {} ({why}) {got_title:?}",
                yn(corrupted),
                yn(got_corrupt)
            ));
        }
    }
    let pct = |n: usize| if titled == 0 { 0.0 } else { 100.0 * n as f64 / titled as f64 };
    println!("files: {}; with a title: {titled}; without: {untitled}", paths.len());
    println!("same title: {same_title} ({:.1}%)", pct(same_title));
    println!("same title or one of the file's ALT titles: {same_or_alt} ({:.1}%)", pct(same_or_alt));
    println!("same corrupted flag: {same_corrupt} ({:.1}%)", pct(same_corrupt));
    println!("title-less files given a report: {untitled_reported} of {untitled}");
    let examples = if verbose { usize::MAX } else { 3 };
    println!("\ntitle misses by kind:");
    for (kind, list) in &misses {
        println!("  {kind}: {}", list.len());
        for m in list.iter().take(examples) {
            println!("    {m}");
        }
    }
    println!("\ncorrupted-flag misses by kind:");
    for (kind, list) in &corrupt_misses {
        println!("  {kind}: {}", list.len());
        for m in list.iter().take(examples) {
            println!("    {m}");
        }
    }
    ExitCode::SUCCESS
}

fn yn(b: bool) -> &'static str {
    if b {
        "Y"
    } else {
        "N"
    }
}

/// A title's kind: its words before " in " (or its first two words).
fn kind_of(title: &str) -> String {
    let head = title.split(" in ").next().unwrap_or(title);
    head.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
