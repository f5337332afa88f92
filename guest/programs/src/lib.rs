//! What the programs share, as a library so that each program takes only the part it
//! uses: `netcard`, the kernel's network card under guest/net's stack.
#![no_std]

pub mod netcard;
