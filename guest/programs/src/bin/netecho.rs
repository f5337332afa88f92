//! A TCP echo service on port 7 (guest/net's stack over the kernel's card), for the
//! bench's dial through a forwarded port:
//!
//!     netecho: lease 10.0.2.15/24 router none dns none for 86400 s
//!     netecho: listening on 10.0.2.15:7
//!     netecho: echoed N bytes
//!
//! It serves until it has echoed a byte and then 2 s more (the rest of the dial's
//! bytes, retransmissions, the close), and reports the bytes it echoed. `[netecho] FAIL:
//! nothing to echo within 20 s` when no connection brings a byte.

#![no_std]
#![no_main]

rt::program!("netecho", main);

use programs::netcard;

const PORT: u16 = 7;

fn main(_pid: u32, _badge: u32) {
    let mut stack = netcard::stack("netecho", PORT);
    let lease = netcard::lease("netecho", &mut stack, 10);
    rt::log!("netecho: listening on {}:{PORT}", netcard::Ip(lease.address));
    let deadline = netcard::now_ms() + 20_000;
    if netcard::drive(&mut stack, deadline, |s| (s.counters().echoed > 0).then_some(())).is_none() {
        rt::log!("[netecho] FAIL: nothing to echo within 20 s");
        rt::exit(1);
    }
    let linger = netcard::now_ms() + 2_000;
    let _: Option<()> = netcard::drive(&mut stack, linger, |_| None);
    rt::log!("netecho: echoed {} bytes", stack.counters().echoed);
}
