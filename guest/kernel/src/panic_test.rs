//! The panic self-check (test-only feature `panic-test`): right after the boot's checks,
//! before any other hart or program runs, the kernel panics three calls deep in
//! functions of its own (`first` → `second` → `third`), with a fixed message, so that
//! the bench's cases can see the panic handler's line and backtrace and the crash they
//! name (tests/reference-panic-backtrace.toml; docs/triage.md).
//!
//! No call is a tail call (each caller adds to what the callee returns), so every one of
//! the three keeps its own frame record and its own line in the backtrace.

#[cfg(all(feature = "panic-test", not(debug_assertions)))]
compile_error!(
    "the kernel feature panic-test is test-only: build it with debug assertions (debug_assertions = true in the case), never into a release kernel"
);

use core::hint::black_box;

/// Panics through `first`, `second` and `third`.
#[inline(never)]
pub fn run() {
    let depth = first(black_box(0));
    // Never printed: `third` panics at depth 3.
    crate::kprintln!("panic-test: returned from depth {depth}");
}

#[inline(never)]
fn first(depth: usize) -> usize {
    second(black_box(depth + 1)) + 1
}

#[inline(never)]
fn second(depth: usize) -> usize {
    third(black_box(depth + 1)) + 1
}

#[inline(never)]
fn third(depth: usize) -> usize {
    if black_box(depth + 1) == 3 {
        panic!("panic-test: three calls deep");
    }
    depth
}
