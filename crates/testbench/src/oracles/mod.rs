//! Oracles built into the bench, run over a console log after a boot has passed
//! (`post_check = { oracle = "..." }`, docs/oracles.md), or by hand on a kept log
//! (`cargo testbench --oracle NAME LOG [LIMIT=VALUE ...]`). Each reads text only: no
//! kernel code, no clock, no process.

pub mod sched;

/// The flag that runs an oracle by hand.
pub const ORACLE_FLAG: &str = "--oracle";

/// Run oracle `name` over `text` with `limits`: its summary, or why the log breaks it, in
/// words (the edge: a post-check's failure, or `--oracle`'s output).
pub fn run(name: &str, text: &str, limits: &[String]) -> Result<String, String> {
    match name {
        "sched" => {
            let limits = sched::Limits::parse(limits).map_err(|e| e.to_string())?;
            sched::check(text, &limits).map_err(|e| e.to_string())
        }
        other => Err(format!("no oracle {other:?}: \"sched\" is the one the bench has")),
    }
}
