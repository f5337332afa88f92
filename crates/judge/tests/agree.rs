//! Property tests: on random configs and random console logs, the fast judge agrees
//! with the per-line reference, and the verdict does not depend on how the bytes of
//! one instant are cut into `feed` calls.

use std::time::Duration;

use testbench_judge::{Config, Ending, ExitStatus, Input, Judge, Pattern, Shutdown, Verdict};

/// SplitMix64: small, seedable, good enough to drive generators.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// Patterns chosen to probe the line-mode rewrite: anchors of every kind, classes that
/// match '\n', word boundaries, raw escapes, U+FFFD.
const PATTERNS: &[&str] = &[
    "ok",
    "^ok",
    "ok$",
    r"\bok\b",
    "(?i)OK",
    "PANIC",
    r"^\[ *\d+\.\d+\]",
    r"foo\s+bar",
    r"\x1b",
    r"\x1b\[3",
    r"\r",
    "[^a-z ]x",
    "(?s)foo.bar",
    r"\Aboot\z",
    "(?-m)^boot$",
    "(?R)done$",
    r"\Bx",
    r"done\W",
    r"\t",
    "a{3}",
    r"caf\x{FFFD}",
    "  $",
    "(?m)^$",
    "x|y",
    "^$",
    r"\s$",
    r"\x07",
    "(?i)café",
    r"\x{FFFD}x",
    "bo+t",
    r"(x)(?P<n>y)",
    "[[:upper:]]{2}",
];

/// Literal input triggers: no anchors, no trailing blank, ASCII only, so that a
/// partial line that matches stays matching when it completes.
const TRIGGERS: &[&str] = &["login:", "ask", "ok", "boot", "x", "done"];

const WORDS: &[&str] = &[
    "ok",
    "OK",
    "boot",
    "done",
    "foo",
    "bar",
    "PANIC",
    "[  1.234]",
    "x",
    "y",
    "aaa",
    "café",
    "login:",
    "ask",
    "[t] FAIL",
    "b",
    "text",
];

const NOISE: &[&[u8]] = &[
    b"\x1b[31m",
    b"\x1b[0m",
    b"\x1b[1;3",
    b"\x1b(B",
    b"\x1b",
    b"\r",
    b"\x07",
    b"\x7f",
    b"\xff",
    b"\xc3",
    b"   ",
    b"\t",
    b"\x1b[",
    b"\x1b[?25l",
];

fn pattern(rng: &mut Rng, label: String) -> Pattern {
    Pattern::new(label, rng.pick(PATTERNS)).unwrap()
}

fn config(rng: &mut Rng) -> Config {
    let mut c = Config::default();
    for i in 0..rng.below(4) {
        c.expect.push(pattern(rng, format!("expect[{i}]")));
    }
    for i in 0..rng.below(3) {
        c.forbid.push(pattern(rng, format!("forbid[{i}]")));
    }
    if rng.chance(30) {
        c.always_forbidden.push(pattern(rng, "always-forbidden".into()));
    }
    for i in 0..rng.below(3) {
        c.inputs.push(Input {
            after: Pattern::new(format!("input[{i}]"), rng.pick(TRIGGERS)).unwrap(),
            send: format!("reply {i}\n").into_bytes(),
        });
    }
    c.poweroff = rng.chance(40);
    c.poweroff_status = rng.below(2) as i32;
    c.settle = Duration::from_millis(rng.below(3) as u64 * 50);
    c
}

fn log(rng: &mut Rng, lines: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..lines {
        for _ in 0..rng.below(6) {
            if rng.chance(25) {
                out.extend_from_slice(rng.pick(NOISE));
            }
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
            if rng.chance(80) {
                out.push(if rng.chance(90) { b' ' } else { b'\t' });
            }
        }
        if rng.chance(10) {
            out.extend_from_slice(rng.pick(NOISE));
        }
        if rng.chance(10) {
            out.push(b'\r');
        }
        out.push(b'\n');
    }
    if rng.chance(50) {
        out.extend_from_slice(b"login: ");
    }
    out
}

fn ending(rng: &mut Rng) -> Ending {
    if rng.chance(30) {
        return Ending::TimedOut { deadline: Duration::from_secs(9) };
    }
    Ending::Exited {
        status: if rng.chance(80) { ExitStatus::Code(rng.below(3) as i32) } else { ExitStatus::Signal(9) },
        shutdown: rng.pick(&[
            Shutdown::PowerOff,
            Shutdown::Reset,
            Shutdown::NoEvent,
            Shutdown::PowerOffFailure,
            Shutdown::Other("host-signal".into()),
        ]),
        stderr_tail: vec!["err".into()],
    }
}

/// One run: the feeds (time, bytes), polls between them, the ending.
struct Script {
    groups: Vec<(Duration, Vec<u8>)>,
    polls: Vec<bool>,
    end: Ending,
}

fn script(rng: &mut Rng, lines: usize) -> Script {
    let bytes = log(rng, lines);
    let mut groups = Vec::new();
    let mut polls = Vec::new();
    let mut at = 0;
    let mut ms = 0u64;
    while at < bytes.len() {
        let n = 1 + rng.below(bytes.len().min(400));
        let end = (at + n).min(bytes.len());
        ms += rng.below(60) as u64;
        groups.push((Duration::from_millis(ms), bytes[at..end].to_vec()));
        polls.push(rng.chance(20));
        at = end;
    }
    Script { groups, polls, end: ending(rng) }
}

/// Runs `script`; `cut` decides how each group is cut into feed calls.
fn run(judge: &mut Judge, s: &Script, mut cut: impl FnMut(usize) -> usize) -> (Verdict, Vec<Vec<u8>>) {
    let mut sent = Vec::new();
    let mut last = Duration::ZERO;
    for ((t, bytes), poll) in s.groups.iter().zip(&s.polls) {
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let n = cut(rest.len()).clamp(1, rest.len());
            sent.extend(judge.feed(*t, &rest[..n]).send);
            rest = &rest[n..];
        }
        if *poll {
            judge.poll(*t + Duration::from_millis(20));
        }
        last = *t;
    }
    let v = judge.end(last + Duration::from_millis(30), s.end.clone());
    (v, sent)
}

fn check(seed: u64, lines: usize) {
    check_limited(seed, lines, None)
}

/// As `check`, every judge with the line limit and overlap `limit` when given.
fn check_limited(seed: u64, lines: usize, limit: Option<(usize, usize)>) {
    let mut rng = Rng(seed);
    let cfg = config(&mut rng);
    let s = script(&mut rng, lines);
    let limited = |j: Judge| match limit {
        Some((n, overlap)) => j.with_line_limit(n, overlap),
        None => j,
    };
    let mut reference = limited(Judge::reference(cfg.clone()));
    let want = run(&mut reference, &s, |n| n);
    let mut fast = limited(Judge::new(cfg.clone()));
    let got = run(&mut fast, &s, |n| n);
    // A judge reset after another console judges as a new one.
    let mut reused = limited(Judge::new(cfg.clone()));
    let other = script(&mut Rng(seed ^ 0xfeed), lines);
    run(&mut reused, &other, |n| n);
    reused.reset();
    assert_eq!(run(&mut reused, &s, |n| n), want, "seed {seed}: a reset judge differs");
    assert_eq!(reused.lines_seen(), reference.lines_seen(), "seed {seed}: lines seen after a reset");
    assert_eq!(got, want, "seed {seed}: fast and reference differ");
    assert_eq!(fast.lines_seen(), reference.lines_seen(), "seed {seed}: lines seen");
    assert_eq!(fast.marks(), reference.marks(), "seed {seed}: marks");
    assert_eq!(reused.marks(), reference.marks(), "seed {seed}: marks after a reset");
    let mut cuts = Rng(seed ^ 0x5eed);
    let mut chopped = limited(Judge::new(cfg));
    let got = run(&mut chopped, &s, |n| 1 + cuts.below(n.min(40)));
    assert_eq!(got.0, want.0, "seed {seed}: chunking changed the verdict");
    if !matches!(&want.0, Verdict::Fail(f) if f.kind == testbench_judge::FailureKind::Forbidden) {
        assert_eq!(got.1, want.1, "seed {seed}: chunking changed what was sent");
    }
}

#[test]
fn fast_path_agrees_with_reference() {
    // JUDGE_AGREE_SEEDS=N runs more (the regex builds make each seed slow in debug).
    let n = std::env::var("JUDGE_AGREE_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    for seed in 0..n {
        check(seed, 30);
    }
}

#[test]
fn fast_path_agrees_with_small_line_limits() {
    // Lines of the random logs are up to ~60 bytes: limits of 4 to 40 bytes cut many of
    // them into pieces, at every position relative to the feed calls.
    for seed in 0..300u64 {
        let limit = 4 + (seed as usize * 7) % 37;
        let overlap = (seed as usize) % (limit / 2 + 1);
        check_limited(seed, 30, Some((limit, overlap)));
    }
}

#[test]
fn fast_path_agrees_on_long_logs() {
    // Long enough to cross the fast path's block size.
    for seed in 0..4 {
        check(1_000_000 + seed, 12_000);
    }
}

#[test]
fn fast_path_agrees_without_forbids_on_clean_text() {
    // The clean-block path: no controls, no trailing blanks, expects far apart.
    for seed in 0..200u64 {
        let mut rng = Rng(seed);
        let mut cfg = Config::default();
        for i in 0..3 {
            cfg.expect.push(Pattern::new(format!("expect[{i}]"), rng.pick(&["ok$", r"\bdone\b", "^boot"])).unwrap());
        }
        cfg.forbid.push(Pattern::new("forbid[0]", r"\Afoo bar\z").unwrap());
        cfg.poweroff = true;
        let mut text = Vec::new();
        for _ in 0..200 {
            for w in 0..rng.below(5) {
                if w > 0 {
                    text.push(b' ');
                }
                text.extend_from_slice(rng.pick(&["ok", "done", "boot", "foo", "bar", "x"]).as_bytes());
            }
            text.push(b'\n');
        }
        let s = Script {
            groups: vec![(Duration::from_millis(5), text)],
            polls: vec![false],
            end: Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOff, stderr_tail: vec![] },
        };
        let want = run(&mut Judge::reference(cfg.clone()), &s, |n| n);
        let got = run(&mut Judge::new(cfg), &s, |n| n);
        assert_eq!(got, want, "seed {seed}");
    }
}

#[test]
fn marks_name_the_lines_the_rules_took_on_both_paths() {
    use testbench_judge::Rule;
    let mut cfg = Config::default();
    cfg.expect.push(Pattern::new("expect[0]", "^booting$").unwrap());
    cfg.expect.push(Pattern::new("expect[1]", "ready").unwrap());
    cfg.forbid.push(Pattern::new("forbid[0]", "PANIC").unwrap());
    cfg.inputs.push(Input { after: Pattern::new("input[0]", r"^\$").unwrap(), send: b"ls\n".to_vec() });
    cfg.poweroff = true;
    let console = b"hello\r\nbooting\n\x1b[1m[t] FAIL\x1b[0m x\nre\x08ady\n$ ls\nPA\x1b[0mNIC\nafter\n";
    for judge in [Judge::reference(cfg.clone()), Judge::new(cfg.clone())] {
        let mut judge = judge;
        judge.feed(Duration::from_millis(1), console);
        let got: Vec<(u64, Rule, &str)> = judge.marks().iter().map(|m| (m.line, m.rule, m.label.as_str())).collect();
        assert_eq!(
            got,
            [
                (2, Rule::Expect, "expect[0]"),
                (3, Rule::ProgramFail, "FAIL line"),
                (4, Rule::Expect, "expect[1]"),
                (5, Rule::Input, "input[0]"),
                (6, Rule::Forbid, "forbid[0]"),
            ]
        );
        assert_eq!(judge.marks()[4].pattern, "PANIC");
    }
    // A prompt that has no '\n' yet is the line after the last whole one.
    let mut judge = Judge::new(cfg);
    judge.feed(Duration::from_millis(1), b"a\nbooting\nready\n$ ");
    assert_eq!(judge.marks().last().map(|m| (m.line, m.rule)), Some((4, Rule::Input)));
}

/// A failure points at the console line that made it, on both paths: the forbidden
/// line (its number as the marks count, its shown form quoted), and a deadline's
/// failure at the first `[name] FAIL` line; a plain deadline points at no line.
#[test]
fn a_failure_names_the_line_that_made_it_on_both_paths() {
    use testbench_judge::{FailureKind, Place};
    let mut cfg = Config::default();
    cfg.expect.push(Pattern::new("expect[0]", "^never$").unwrap());
    cfg.forbid.push(Pattern::new("forbid[0]", "PANIC").unwrap());
    let timed_out = Ending::TimedOut { deadline: Duration::from_secs(1) };
    let failure = |verdict: Verdict| match verdict {
        Verdict::Fail(failure) => failure,
        Verdict::Pass => panic!("the boot must fail"),
    };
    for make in [Judge::reference as fn(Config) -> Judge, Judge::new] {
        let mut judge = make(cfg.clone());
        judge.feed(Duration::from_millis(1), b"one\ntwo\nkernel \x1b[1mPANIC\x1b[0m here\nfour\n");
        let got = failure(judge.end(Duration::from_millis(2), timed_out.clone()));
        assert_eq!(got.kind, FailureKind::Forbidden);
        assert_eq!(got.place, Some(Place { line: 3, quote: "kernel PANIC here".to_string() }));

        let mut judge = make(cfg.clone());
        judge.feed(Duration::from_millis(1), b"a\nb\n[mm] FAIL leak\nc\n");
        let got = failure(judge.end(Duration::from_millis(2), timed_out.clone()));
        assert_eq!(got.kind, FailureKind::ProgramFailed);
        assert_eq!(got.place, Some(Place { line: 3, quote: "[mm] FAIL leak".to_string() }));
    }
    let mut judge = Judge::new(cfg);
    judge.feed(Duration::from_millis(1), b"a\nb\n");
    let got = failure(judge.end(Duration::from_millis(2), timed_out));
    assert_eq!((got.kind, got.place), (FailureKind::TimedOut, None));
}
