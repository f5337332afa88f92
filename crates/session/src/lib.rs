//! # testbench-session: one session's client driven through its steps
//!
//! The patterns a session's output is matched against, and the board of marks the
//! sessions of a case share. (The engine follows.)

mod marks;
mod pattern;

pub use marks::{Marks, WaitEnd};
pub use pattern::Pattern;
