//! What the programs share, as a library so that each program takes only the part it
//! uses: `netcard`, the kernel's network card under guest/net's stack; `disk`, the
//! kernel's disk under guest/store, and `part`, a partition of it.
#![no_std]

pub mod disk;
pub mod netcard;
pub mod part;
