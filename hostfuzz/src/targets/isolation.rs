//! The isolation check: proves that no input's statics reach the next, as the runner
//! promises (src/exec.rs). Each run counts itself in a static and is a finding if an
//! earlier run in the same process counted there first: never with a fresh child per
//! input, at the second input in process (`--in-process`). Not in the gate.
//!
//! A first decision of one of four magic values (never drawn in practice: 4 in 2^32)
//! makes the run panic, die by a signal, hang or find with a 2 MiB detail instead: saved
//! inputs for the runner's tests of those endings (tests/cli.rs).

use crate::{Decisions, Finding};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A first decision that makes the run panic.
pub const PANIC: u32 = 0x4349_4e50;
/// A first decision that makes the run abort (`SIGABRT`).
pub const ABORT: u32 = 0x5452_4241;
/// A first decision that makes the run hang (it sleeps forever).
pub const HANG: u32 = 0x474e_4148;
/// A first decision that makes the run a finding whose detail is 2 MiB long (longer than
/// the fork server's answer pipe holds).
pub const LONG: u32 = 0x474e_4f4c;

/// Runs so far in this process.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let earlier = RUNS.fetch_add(1, Ordering::SeqCst);
    match d.u32() {
        PANIC => panic!("asked to panic"),
        ABORT => std::process::abort(),
        HANG => loop {
            std::thread::sleep(Duration::from_millis(10));
        },
        LONG => return Err(Finding::new("isolation", "asked for a long finding", "x".repeat(2 << 20))),
        _ => {}
    }
    if earlier != 0 {
        return Err(Finding::new(
            "isolation",
            "a static set by an earlier run reached this one",
            format!("{earlier} earlier runs in this process"),
        ));
    }
    d.end("the first run in its process");
    Ok(())
}
