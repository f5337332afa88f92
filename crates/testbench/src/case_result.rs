//! What running one case gives, whatever its kind: its verdict (pass, or the reason it
//! failed), or why it could not run at all (`Blocked`). The runner makes a boot's, the
//! host kinds (host.rs, gates.rs) their own; the runner turns either into an `Outcome`.

/// What running a case gave: its verdict (pass, or the reason it failed), or why it
/// could not run.
pub type CaseResult = Result<Result<(), String>, Blocked>;

/// Why a case cannot run; decides between fail and skip.
#[derive(Clone, Debug)]
pub enum Blocked {
    /// The host lacks something (QEMU, firmware): fails, or skips under --allow-skip.
    HostLack(String),
    /// A build failed: always a failure.
    Build(String),
}
