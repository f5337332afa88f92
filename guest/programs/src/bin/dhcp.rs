//! Takes a DHCP lease with guest/net's stack over the kernel's card (slirp's server, in
//! the bench's `[net]`), prints it and ends:
//!
//!     dhcp: mac 52:54:00:12:34:56
//!     dhcp: lease 10.0.2.15/24 router none dns none for 86400 s
//!
//! `[dhcp] FAIL: ...` when there is no card or no lease within 10 s.

#![no_std]
#![no_main]

rt::program!("dhcp", main);

use programs::netcard;

fn main(_pid: u32, _badge: u32) {
    let mut stack = netcard::stack("dhcp", 0);
    let m = stack.mac();
    rt::log!("dhcp: mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
    netcard::lease("dhcp", &mut stack, 10);
}
