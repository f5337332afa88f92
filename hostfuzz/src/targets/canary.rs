//! The canary: a target that must always find, proving that the runner reports, saves,
//! shrinks and replays a finding. It draws up to 64 `rare()` decisions and fails on the
//! first that comes true: about 1.5% of inputs, so one within the gate's first thousand.

use crate::{Decisions, Finding};

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    for read in 0..64 {
        if d.rare() {
            return Err(Finding::new("canary", "rare() came true", format!("at read {read}")));
        }
    }
    d.end("64 ordinary reads");
    Ok(())
}
