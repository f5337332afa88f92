//! Arbitrary console bytes through `shown`, `raw_text` and a judge with a few patterns,
//! cut into feed calls in a way the input also chooses. Checks that nothing panics,
//! that `shown` keeps its promises, that the fast judge agrees with the per-line
//! reference (with the default line limit and with a small one the input chooses, so
//! that its lines are cut into pieces), that a forbidden word is never missed however
//! the line is cut, that the judge never holds more than its limit for one line, and
//! (one input in 64) that the bytes pushed through the bench's bounded reader → judge
//! plumbing are logged and judged as when fed directly.
//!
//! The judges are built once per process and cloned per input (cloning shares the
//! compiled patterns). Run with `cargo +nightly fuzz run console_normalizer` from the
//! worktree root (docs/verdicts.md has the figures).

#![no_main]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use testbench_console::Ended;
use testbench_judge::{
    raw_text, shown, Config, Ending, ExitStatus, FailureKind, Input, Judge, Pattern, Shutdown, Verdict,
};

fn pattern(label: &str, re: &str) -> Pattern {
    Pattern::new(label, re).expect("a valid pattern")
}

fn config() -> Config {
    Config {
        // expect[2] ends in `$`: over a small line limit the fast judge and the reference
        // both match an over-long line's head with it as a line that goes on.
        expect: vec![pattern("expect[0]", "^ok"), pattern("expect[1]", r"done\b"), pattern("expect[2]", "(o+)+k?$")],
        forbid: vec![pattern("forbid[0]", "PANIC"), pattern("forbid[1]", r"\x1b\[5m")],
        always_forbidden: vec![pattern("always-forbidden", r"^\[[^\]]*\] TEST FAILED")],
        inputs: vec![Input { after: pattern("input[0]", "login:"), send: b"root\n".to_vec() }],
        poweroff: false,
        poweroff_status: 0,
        settle: Duration::from_millis(50),
        ..Config::default()
    }
}

/// The reference and the fast judge, and a fast one that waits for a power-off (its
/// verdict does not depend on the times the bytes came at), built once and reset for
/// every run (a reset keeps the compiled patterns and their search caches).
fn judges() -> &'static Mutex<(Judge, Judge, Judge)> {
    static JUDGES: OnceLock<Mutex<(Judge, Judge, Judge)>> = OnceLock::new();
    JUDGES.get_or_init(|| {
        Mutex::new((
            Judge::reference(config()),
            Judge::new(config()),
            Judge::new(Config { poweroff: true, ..config() }),
        ))
    })
}

fn end() -> Ending {
    Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOff, stderr_tail: vec![] }
}

/// Feeds `data` cut as `cuts` says; returns the verdict and what the judge typed.
fn run(judge: &mut Judge, data: &[u8], cuts: &[u8], limit: usize, overlap: usize) -> (Verdict, Vec<Vec<u8>>) {
    judge.set_line_limit(limit, overlap);
    judge.reset();
    let mut rest = data;
    let mut i = 0;
    let mut typed = Vec::new();
    while !rest.is_empty() {
        let n = if cuts.is_empty() { rest.len() } else { (cuts[i % cuts.len()] as usize + 1).min(rest.len()) };
        i += 1;
        // A few cuts share an instant; the time moves on every 4th cut.
        let now = Duration::from_millis((i / 4) as u64);
        typed.extend(judge.feed(now, &rest[..n]).send);
        assert!(judge.line_bytes_held() <= limit, "the judge holds {} bytes of a line", judge.line_bytes_held());
        rest = &rest[n..];
    }
    (judge.end(Duration::from_secs(1), end()), typed)
}

fn forbidden(v: &Verdict) -> bool {
    matches!(v, Verdict::Fail(f) if f.kind == FailureKind::Forbidden)
}

fuzz_target!(|input: &[u8]| {
    // The first bytes say how to cut the rest into feed calls, the line limit to try, and
    // whether to take the bounded channel's path.
    let (head, data) = input.split_at(input.len().min(10));
    let (cuts, knobs) = head.split_at(head.len().min(8));
    for line in data.split(|&b| b == b'\n') {
        let s = shown(line);
        let _ = raw_text(line);
        assert!(!s.ends_with(' ') && !s.ends_with('\t'));
        assert!(!s.chars().any(|c| c.is_ascii_control() && c != '\t'));
    }
    let mut judges = judges().lock().unwrap_or_else(|e| e.into_inner());
    let (reference, fast, poweroff) = &mut *judges;
    let (default, default_overlap) = (testbench_judge::LINE_LIMIT, testbench_judge::LINE_OVERLAP);
    let want = run(reference, data, &[], default, default_overlap);
    let whole = run(fast, data, &[], default, default_overlap);
    assert_eq!(whole, want, "the fast judge disagrees with the reference");
    let _ = run(fast, data, cuts, default, default_overlap);

    // A small line limit: most lines are cut into pieces.
    let limit = 16 + knobs.first().map_or(30, |&b| b as usize % 112);
    let overlap = knobs.get(1).map_or(8, |&b| b as usize) % (limit / 2 + 1);
    let want = run(reference, data, &[], limit, overlap);
    let whole = run(fast, data, &[], limit, overlap);
    assert_eq!(whole, want, "limit {limit}/{overlap}: the fast judge disagrees with the reference");
    let chopped = run(fast, data, cuts, limit, overlap);
    // All bytes fed at one instant are all judged: a 5-byte word in a raw line is seen
    // when the pieces share at least 5 bytes, however the line was cut.
    if overlap >= 5 && memchr::memmem::find(data, b"PANIC").is_some() {
        assert!(forbidden(&want.0), "limit {limit}/{overlap}: PANIC was missed: {}", want.0);
    }
    if forbidden(&want.0) && cuts.is_empty() {
        assert!(forbidden(&chopped.0));
    }

    // The bench's own plumbing: reader thread, bounded channel, the loop, the log.
    // One input in 64, by a hash of the whole input: a knob byte would let the corpus
    // fill with inputs that take this path (it is new coverage), and a reader thread per
    // input is slow.
    let hash = input.iter().fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    if hash % 64 == 0 {
        poweroff.set_line_limit(default, default_overlap);
        poweroff.reset();
        let judge = poweroff;
        let (ended, typed, log) = testbench_console::replay(data, cuts, judge, 64, 64);
        let verdict = match ended {
            Ended::Verdict(v) => v,
            Ended::Closed => judge.end(Duration::from_secs(1), end()),
            Ended::Deadline => panic!("an hour passed"),
        };
        // The log is what was read (all of it, unless a forbidden line ended the loop
        // first), or its head and its tail with the cut between them.
        let cut = memchr::memmem::find(&log, b"\n--- testbench: ");
        match cut {
            None => assert!(data.starts_with(&log), "the log is not the console"),
            Some(at) => assert!(at == 64 && log.starts_with(&data[..64]), "the log's head is not the console's"),
        }
        if !forbidden(&verdict) {
            if data.len() <= 128 {
                assert_eq!(log, data, "a short console was not logged whole");
            } else {
                assert!(cut.is_some() && log.ends_with(&data[data.len() - 64..]), "a long console's log");
            }
        }
        // Judged as when fed directly: the same kind of verdict, and (unless a forbidden
        // line cut the boot short) the same bytes typed.
        let direct = run(judge, data, &[], default, default_overlap);
        let kind = |v: &Verdict| match v {
            Verdict::Pass => None,
            Verdict::Fail(f) => Some(f.kind),
        };
        assert_eq!(kind(&verdict), kind(&direct.0), "the channel's path: {verdict} / direct: {}", direct.0);
        if !forbidden(&verdict) {
            assert_eq!(typed, direct.1, "the channel's path typed something else");
        }
    }
});
