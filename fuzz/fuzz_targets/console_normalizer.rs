//! Arbitrary console bytes through `shown`, `raw_text` and a judge with a few patterns,
//! cut into feed calls in a way the input also chooses. Checks that nothing panics,
//! that `shown` keeps its promises, that the fast judge agrees with the per-line
//! reference, and that any cutting into feed calls (with time moving on) is judged
//! without a panic.
//!
//! Run with `cargo +nightly fuzz run console_normalizer` from the worktree root.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use testbench_judge::{raw_text, shown, Config, Ending, ExitStatus, Input, Judge, Pattern, Shutdown, Verdict};

fn pattern(label: &str, re: &str) -> Pattern {
    Pattern::new(label, re).expect("a valid pattern")
}

fn config() -> Config {
    Config {
        expect: vec![pattern("expect[0]", "^ok"), pattern("expect[1]", r"done\b")],
        forbid: vec![pattern("forbid[0]", "PANIC"), pattern("forbid[1]", r"\x1b\[5m")],
        always_forbidden: vec![pattern("always-forbidden", r"^\[[^\]]*\] TEST FAILED")],
        inputs: vec![Input { after: pattern("input[0]", "login:"), send: b"root\n".to_vec() }],
        poweroff: false,
        poweroff_status: 0,
        settle: Duration::from_millis(50),
        ..Config::default()
    }
}

fn run(judge: &mut Judge, data: &[u8], cuts: &[u8]) -> Verdict {
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if cuts.is_empty() { rest.len() } else { (cuts[i % cuts.len()] as usize + 1).min(rest.len()) };
        i += 1;
        // A few cuts share an instant; the time moves on every 4th cut.
        let now = Duration::from_millis((i / 4) as u64);
        judge.feed(now, &rest[..n]);
        rest = &rest[n..];
    }
    judge.end(
        Duration::from_secs(1),
        Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOff, stderr_tail: vec![] },
    )
}

fuzz_target!(|input: &[u8]| {
    // The first bytes say how to cut the rest into feed calls.
    let (cuts, data) = input.split_at(input.len().min(8));
    for line in data.split(|&b| b == b'\n') {
        let s = shown(line);
        let _ = raw_text(line);
        assert!(!s.ends_with(' ') && !s.ends_with('\t'));
        assert!(!s.chars().any(|c| c.is_ascii_control() && c != '\t'));
    }
    let want = run(&mut Judge::reference(config()), data, &[]);
    let whole = run(&mut Judge::new(config()), data, &[]);
    assert_eq!(whole, want, "the fast judge disagrees with the reference");
    let _ = run(&mut Judge::new(config()), data, cuts);
});
