//! Connects to the bench's peer 10.0.9.100:7 (guest/net's echo check over the kernel's
//! card), sends a line and reads the same bytes back, whole:
//!
//!     netpeer: lease 10.0.2.15/16 router none dns none for 86400 s
//!     netpeer: 10.0.9.100:7 echoed 15 bytes
//!
//! `[netpeer] FAIL: 10.0.9.100:7: <how>` when the check fails (reset, truncated, another
//! byte, past its 10 s deadline).

#![no_std]
#![no_main]

rt::program!("netpeer", main);

use programs::netcard;

pub const PEER: [u8; 4] = [10, 0, 9, 100];
pub const PORT: u16 = 7;

fn main(_pid: u32, _badge: u32) {
    let mut stack = netcard::stack("netpeer", 0);
    netcard::lease("netpeer", &mut stack, 10);
    netcard::echo_check("netpeer", &mut stack, PEER, PORT, b"testbench-hello");
}
