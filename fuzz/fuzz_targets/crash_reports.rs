//! Arbitrary console bytes through the crash-report parser of every guest kind, cut into
//! feed calls where the input chooses. Checks that nothing panics, that every report's
//! range lies in the input, in order and not overlapping, and that feeding in chunks
//! gives exactly the reports of feeding whole. Run with
//! `cargo +nightly fuzz run crash_reports` from the worktree root (docs/triage.md has
//! the figures).

#![no_main]

use libfuzzer_sys::fuzz_target;
use testbench_triage::{reports, Guest, Scanner};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the cuts' sizes; the rest is the console.
    let Some((&seed, console)) = data.split_first() else { return };
    for guest in [Guest::Linux, Guest::Xv6, Guest::Reference, Guest::Generic] {
        let whole = reports(console, guest);
        let mut end = 0;
        for r in &whole {
            assert!(r.range.start >= end, "reports in order, not overlapping: {:?}", r.range);
            assert!(r.range.start < r.range.end && r.range.end <= console.len(), "range {:?}", r.range);
            end = r.range.end;
        }
        let mut s = Scanner::new(guest);
        let mut got = Vec::new();
        let mut at = 0;
        let mut k = seed as usize;
        while at < console.len() {
            k = k.wrapping_mul(31).wrapping_add(7);
            let n = 1 + k % (1 + (seed as usize % 64));
            let e = (at + n).min(console.len());
            got.extend(s.feed(&console[at..e]));
            at = e;
        }
        got.extend(s.finish());
        assert_eq!(got, whole, "{guest:?}: chunked feeding differs from whole");
    }
});
