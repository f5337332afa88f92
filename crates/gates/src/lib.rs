//! Source gates: checks that read the tree and boot nothing.
//!
//! Each gate takes the root of the tree it checks and its configuration file, and returns
//! its findings; an empty list is a pass. A configuration the gate cannot use is an error
//! naming the file, the field and what is accepted, never a silent pass. The bench runs
//! each gate as a case (`kind = "gate"`); each gate has a bad tree it must fire on and a
//! good one it must not, under `tests/fixtures/<gate>/`.
//!
//! Architecture invariant: a gate reads files and runs git and cargo read-only; it never
//! writes into the tree it checks.

pub mod finding;

pub mod deadlines;
pub mod docs;
pub mod formatting;
pub mod history;
pub mod import_cycles;
pub mod nocruft;
pub mod size_budget;
mod skip;
pub mod unsafe_budget;
pub mod vendor;

pub use finding::{ConfigError, Finding};
