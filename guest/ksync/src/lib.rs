//! The kernel's synchronisation and timing pieces, portable so that the host fuzzer runs
//! the very code the guest kernel runs:
//!
//! - [`Lock`]: the spin lock around kernel state;
//! - [`TimerQueue`]: sleepers ordered by the tick they wake at;
//! - [`machine`] (feature `machine`, host only): where a lock reports its acquisitions and
//!   releases, so that a deterministic machine can decide who runs next at each of them
//!   and check the locking rules at the line that breaks them.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

mod lock;
#[cfg(feature = "machine")]
pub mod machine;
mod timers;

pub use lock::{Guard, Lock};
pub use timers::{Full, TimerQueue};
