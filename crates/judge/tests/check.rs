//! Runs every `tests/data/*.case` file. `UPDATE_EXPECT=1` rewrites their expected part.
//!
//! A case file:
//!
//! ```text
//! # comments and blank lines are ignored
//! expect: <regex>            (any number, in order; labelled expect[0], expect[1], ...)
//! forbid: <regex>            (forbid[0], ...)
//! always: <regex>            (always-forbidden)
//! input: <regex> => <bytes>  (input[0], ...; bytes with escapes)
//! poweroff: <status>         (wait for a power-off with this status; absent: no)
//! settle: <secs>             (default 0.05)
//! done: <place|none>         (the log server's done rule: the reporter's place, or none)
//! distinct: <regex>          (distinct[0], ...)
//! capture: <regex>           (distinct_across_boots[0], ...; the captures are printed)
//! limit: <bytes> <overlap>   (the judge's line limit and piece overlap; default 64 KiB, 4 KiB)
//! nosplit                    (do not also check byte-by-byte feeding)
//! ---
//! @<secs> <bytes>            (one feed call; nothing is added, write \n yourself)
//! poll <secs>
//! end <secs> timeout <deadline secs>
//! end <secs> exit <status N|signal N> <poweroff|panic|reset|noevent|other=REASON> [stderr: a | b]
//! === expected
//! (written by the test: the sends and the verdict)
//! ```
//!
//! Bytes are written with escapes: `\xNN`, `\n`, `\r`, `\t`, `\e` (ESC), `\\`, `\s` (a
//! space, for trailing spaces that an editor would eat).
//!
//! Each case is run with the fast judge and with the per-line reference: both must give
//! the expected output. Unless `nosplit`, it is run again feeding each chunk byte by
//! byte, which must give the same verdict.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use testbench_judge::{Config, Ending, ExitStatus, Input, Judge, Pattern, ServerDone, Shutdown, Verdict};

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'e' => out.push(0x1b),
                b's' => out.push(b' '),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("\\xNN");
                    out.push(u8::from_str_radix(hex, 16).expect("\\xNN"));
                    i += 2;
                }
                other => panic!("unknown escape \\{}", other as char),
            }
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}

fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => write!(s, "\\x{b:02x}").unwrap(),
        }
    }
    s
}

fn secs(s: &str) -> Duration {
    Duration::from_secs_f64(s.parse::<f64>().unwrap_or_else(|_| panic!("bad time {s:?}")))
}

enum Event {
    Feed(Duration, Vec<u8>),
    Poll(Duration),
    End(Duration, Ending),
}

struct Case {
    config: Config,
    limit: Option<(usize, usize)>,
    split: bool,
    events: Vec<Event>,
}

fn parse(text: &str) -> Case {
    let mut config = Config::default();
    let mut split = true;
    let mut limit = None;
    let mut events = Vec::new();
    let mut in_events = false;
    for line in text.lines() {
        if line == "=== expected" {
            break;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if !in_events {
            if line == "---" {
                in_events = true;
                continue;
            }
            if line == "nosplit" {
                split = false;
                continue;
            }
            let (key, value) = line.split_once(": ").unwrap_or_else(|| panic!("bad line {line:?}"));
            match key {
                "expect" => {
                    let label = format!("expect[{}]", config.expect.len());
                    config.expect.push(Pattern::new(label, value).unwrap());
                }
                "forbid" => {
                    let label = format!("forbid[{}]", config.forbid.len());
                    config.forbid.push(Pattern::new(label, value).unwrap());
                }
                "always" => config.always_forbidden.push(Pattern::new("always-forbidden", value).unwrap()),
                "input" => {
                    let (after, send) = value.split_once(" => ").expect("input: RE => BYTES");
                    let label = format!("input[{}]", config.inputs.len());
                    config.inputs.push(Input { after: Pattern::new(label, after).unwrap(), send: unescape(send) });
                }
                "poweroff" => {
                    config.poweroff = true;
                    config.poweroff_status = value.parse().unwrap();
                }
                "settle" => config.settle = secs(value),
                "limit" => {
                    let (n, overlap) = value.split_once(' ').expect("limit: BYTES OVERLAP");
                    limit = Some((n.parse().unwrap(), overlap.parse().unwrap()));
                }
                "done" => {
                    let place = if value == "none" { None } else { Some(value.parse().unwrap()) };
                    config.server_done = Some(ServerDone { reporter_place: place });
                }
                "distinct" => {
                    let label = format!("distinct[{}]", config.distinct.len());
                    config.distinct.push(Pattern::new(label, value).unwrap());
                }
                "capture" => {
                    let label = format!("distinct_across_boots[{}]", config.capture.len());
                    config.capture.push(Pattern::new(label, value).unwrap());
                }
                _ => panic!("unknown key {key:?}"),
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix('@') {
            let (t, bytes) = rest.split_once(' ').unwrap_or((rest, ""));
            events.push(Event::Feed(secs(t), unescape(bytes)));
        } else if let Some(t) = line.strip_prefix("poll ") {
            events.push(Event::Poll(secs(t)));
        } else if let Some(rest) = line.strip_prefix("end ") {
            let words: Vec<&str> = rest.splitn(5, ' ').collect();
            let now = secs(words[0]);
            let ending = match words[1] {
                "timeout" => Ending::TimedOut { deadline: secs(words[2]) },
                "exit" => {
                    let n: i32 = words[3].parse().unwrap();
                    let status = match words[2] {
                        "status" => ExitStatus::Code(n),
                        "signal" => ExitStatus::Signal(n),
                        other => panic!("bad status {other}"),
                    };
                    let tail = words.get(4).copied().unwrap_or("");
                    let (how, stderr) = tail.split_once(' ').unwrap_or((tail, ""));
                    let shutdown = match how {
                        "poweroff" => Shutdown::PowerOff,
                        "reset" => Shutdown::Reset,
                        "noevent" => Shutdown::NoEvent,
                        "panic" => Shutdown::PowerOffFailure,
                        other if other.starts_with("other=") => Shutdown::Other(other["other=".len()..].into()),
                        other => panic!("bad shutdown {other:?}"),
                    };
                    let stderr_tail = match stderr.strip_prefix("stderr: ") {
                        Some(s) => s.split(" | ").map(str::to_string).collect(),
                        None => Vec::new(),
                    };
                    Ending::Exited { status, shutdown, stderr_tail }
                }
                other => panic!("bad ending {other}"),
            };
            events.push(Event::End(now, ending));
        } else {
            panic!("bad event line {line:?}");
        }
    }
    Case { config, limit, split, events }
}

fn verdict_line(v: &Option<Verdict>) -> String {
    match v {
        None => "verdict: none yet".to_string(),
        Some(Verdict::Pass) => "verdict: pass".to_string(),
        Some(Verdict::Fail(f)) => format!("verdict: {:?} at {:.2}s: {}", f.kind, f.at.as_secs_f64(), f.message),
    }
}

/// Runs the case; `bytewise` feeds each chunk one byte at a time.
fn run(case: &Case, mut judge: Judge, bytewise: bool) -> String {
    if let Some((n, overlap)) = case.limit {
        judge = judge.with_line_limit(n, overlap);
    }
    let mut out = String::new();
    let mut verdict = None;
    for event in &case.events {
        match event {
            Event::Feed(t, bytes) => {
                let pieces: Vec<&[u8]> = if bytewise { bytes.chunks(1).collect() } else { vec![bytes] };
                for piece in pieces {
                    let step = judge.feed(*t, piece);
                    for s in &step.send {
                        writeln!(out, "send at {:.2}s: {}", t.as_secs_f64(), escape(s)).unwrap();
                    }
                    if step.verdict.is_some() && verdict.is_none() {
                        writeln!(out, "verdict given by feed at {:.2}s", t.as_secs_f64()).unwrap();
                    }
                    verdict = verdict.or(step.verdict);
                }
            }
            Event::Poll(t) => {
                let v = judge.poll(*t);
                if v.is_some() && verdict.is_none() {
                    writeln!(out, "verdict given by poll at {:.2}s", t.as_secs_f64()).unwrap();
                }
                verdict = verdict.or(v);
            }
            Event::End(t, ending) => {
                let v = judge.end(*t, ending.clone());
                if let Some(old) = &verdict {
                    assert_eq!(old, &v, "end() changed the verdict");
                }
                verdict = Some(v);
            }
        }
    }
    writeln!(out, "lines seen: {}", judge.lines_seen()).unwrap();
    if judge.captures().iter().any(Option::is_some) {
        writeln!(out, "captures: {:?}", judge.captures()).unwrap();
    }
    writeln!(out, "{}", verdict_line(&verdict)).unwrap();
    out
}

#[test]
fn check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no cases in {}", dir.display());
    let mut failed = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let case = parse(&text);
        let got = run(&case, Judge::new(case.config.clone()), false);
        let reference = run(&case, Judge::reference(case.config.clone()), false);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if got != reference {
            failed.push(format!("{name}: fast and reference differ:\n{got}---\n{reference}"));
        }
        if case.split {
            let split = run(&case, Judge::new(case.config.clone()), true);
            let last = |s: &str| s.lines().last().unwrap_or("").to_string();
            if last(&split) != last(&got) {
                failed.push(format!("{name}: byte-by-byte feeding gives another verdict:\n{split}---\n{got}"));
            }
        }
        let head = text.split("=== expected\n").next().unwrap_or("");
        let want = text.split_once("=== expected\n").map(|x| x.1).unwrap_or("");
        if update {
            std::fs::write(path, format!("{head}=== expected\n{got}")).unwrap();
        } else if want != got {
            failed.push(format!("{name}: expected\n{want}got\n{got}"));
        }
    }
    assert!(failed.is_empty(), "{} of {} cases failed:\n\n{}", failed.len(), paths.len(), failed.join("\n"));
}
