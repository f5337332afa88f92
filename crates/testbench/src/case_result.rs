//! What running one case gives, whatever its kind: its verdict (pass, or the reason it
//! failed), or why it could not run at all (`Blocked`). The runner makes a boot's, the
//! host kinds (host.rs, gates.rs) their own; the runner turns either into the case's
//! `verdict::Verdict` (runner/verdicts.rs).
//! The bench's own trouble is neither a pass nor a failure (`Blocked::Trouble`).

/// What running a boot case gave: its verdict (pass, or its typed failure), or why it
/// could not run.
pub type CaseResult = Result<Result<(), crate::verdict::Failed>, Blocked>;

/// What running a case that boots nothing gave: pass, or the reason it failed (its kind
/// is the case's kind, `verdict::FailKind::of_host`), or why it could not run.
pub type HostResult = Result<Result<(), String>, Blocked>;

/// Why a case cannot run; decides between fail and skip.
#[derive(Clone, Debug)]
pub enum Blocked {
    /// The host lacks something (QEMU, firmware): fails, or skips under --allow-skip.
    HostLack(String),
    /// A build failed: always a failure.
    Build(String),
    /// The bench itself could not run the case (a socket or a file of its own could not
    /// be made): neither a pass nor the case's failure; the run exits 3.
    Trouble(String),
}
