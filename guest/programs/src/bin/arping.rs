//! Asks the network for the gateway's MAC with one ARP request, through the kernel's raw
//! frame calls (net_info, net_send, net_recv), and prints the answer:
//!
//!     arping: mac <our MAC>
//!     arping: 10.0.2.2 is at <its MAC>
//!
//! Slirp (the bench's `[net]`) puts the guest at 10.0.2.15 and answers for its gateway
//! 10.0.2.2. The reply is polled for (net_recv never waits) for at most 5 seconds, the
//! request sent again every second; other frames are skipped. `[arping] FAIL: ...` names
//! what went wrong: no card (`no-entry`), a call's error, or no reply in time.

#![no_std]
#![no_main]

rt::program!("arping", main);

const OURS: [u8; 4] = [10, 0, 2, 15];
const GATEWAY: [u8; 4] = [10, 0, 2, 2];
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
/// An ARP packet for IPv4 over Ethernet: hardware type 1, protocol 0x0800, sizes 6 and 4.
const ARP_ETHER_IPV4: [u8; 6] = [0, 1, 0x08, 0x00, 6, 4];
const OP_REQUEST: u16 = 1;
const OP_REPLY: u16 = 2;
const DEADLINE_SECS: u64 = 5;

fn fail(what: &str, e: abi::Error) -> ! {
    rt::log!("[arping] FAIL: {what}: {}", e.name());
    rt::exit(1)
}

struct Mac([u8; 6]);

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// The broadcast request "who has 10.0.2.2? tell 10.0.2.15", padded to 60 bytes.
fn request(mac: [u8; 6]) -> [u8; 60] {
    let mut frame = [0u8; 60];
    frame[..6].fill(0xff);
    frame[6..12].copy_from_slice(&mac);
    frame[12..14].copy_from_slice(&ETHERTYPE_ARP);
    frame[14..20].copy_from_slice(&ARP_ETHER_IPV4);
    frame[20..22].copy_from_slice(&OP_REQUEST.to_be_bytes());
    frame[22..28].copy_from_slice(&mac);
    frame[28..32].copy_from_slice(&OURS);
    frame[38..42].copy_from_slice(&GATEWAY);
    frame
}

/// The sender's MAC when `frame` is an ARP reply from 10.0.2.2 to us.
fn reply_from_gateway(frame: &[u8], mac: [u8; 6]) -> Option<[u8; 6]> {
    let is_reply = frame.len() >= 42
        && frame[..6] == mac
        && frame[12..14] == ETHERTYPE_ARP
        && frame[14..20] == ARP_ETHER_IPV4
        && frame[20..22] == OP_REPLY.to_be_bytes()
        && frame[28..32] == GATEWAY
        && frame[32..38] == mac
        && frame[38..42] == OURS;
    is_reply.then(|| frame[22..28].try_into().unwrap_or([0; 6]))
}

fn main(_pid: u32, _badge: u32) {
    let mac = rt::net_info().unwrap_or_else(|e| fail("no network card", e));
    rt::log!("arping: mac {}", Mac(mac));
    let ask = request(mac);
    // A frame too short for Ethernet is refused before the card sees it.
    if rt::net_send(&ask[..13]) != Err(abi::Error::Invalid) {
        rt::log!("[arping] FAIL: a 13-byte frame was not refused");
        rt::exit(1);
    }
    let second = rt::timebase();
    let start = rt::time();
    let mut sent_at = None;
    let mut frame = [0u8; abi::NET_FRAME_MAX];
    loop {
        let now = rt::time();
        if now.saturating_sub(start) >= DEADLINE_SECS * second {
            rt::log!("[arping] FAIL: no ARP reply from 10.0.2.2 within {DEADLINE_SECS} s");
            rt::exit(1);
        }
        if sent_at.is_none_or(|at: u64| now.saturating_sub(at) >= second) {
            rt::net_send(&ask).unwrap_or_else(|e| fail("send", e));
            sent_at = Some(now);
        }
        let len = rt::net_recv(&mut frame).unwrap_or_else(|e| fail("recv", e));
        if let Some(theirs) = reply_from_gateway(&frame[..len], mac) {
            rt::log!("arping: 10.0.2.2 is at {}", Mac(theirs));
            return;
        }
        if len == 0 {
            rt::sleep(second / 100);
        }
    }
}
