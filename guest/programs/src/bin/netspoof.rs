//! Tries to send as another host through guest/net's stack, then connects to the bench's
//! peer as itself. Each forged frame is a well-formed TCP SYN to the peer 10.0.9.100:7:
//! one from the address 10.0.2.99 (not the lease), one from the MAC 52:54:00:12:34:57
//! (not the card's). The stack's egress check refuses both, before the card sees them:
//!
//!     netspoof: lease 10.0.2.15/16 router none dns none for 86400 s
//!     netspoof: as 10.0.2.99: refused: SourceIp([10, 0, 2, 99])
//!     netspoof: as 52:54:00:12:34:57: refused: SourceMac([82, 84, 0, 18, 52, 87])
//!     netspoof: 10.0.9.100:7 echoed 15 bytes
//!
//! Built with `spoof-unchecked` (guest/net without its egress check, for the self-check
//! `reference-net-spoof-unchecked`) the forged frames leave: `netspoof: as ...: sent`,
//! and the bench's capture must catch them.

#![no_std]
#![no_main]

rt::program!("netspoof", main);

use programs::netcard;

const PEER: [u8; 4] = [10, 0, 9, 100];
const PORT: u16 = 7;
const FORGED_IP: [u8; 4] = [10, 0, 2, 99];
const FORGED_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x57];
/// Ethernet (14) + IPv4 (20) + TCP (20).
const SYN_LEN: usize = 54;

/// The ones'-complement sum of `bytes` as big-endian 16-bit words, folded.
fn sum(mut acc: u32, bytes: &[u8]) -> u32 {
    for pair in bytes.chunks(2) {
        acc += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

/// A TCP SYN from `mac`/`ip` port 40000 to the peer, through the gateway's MAC `to_mac`,
/// with true IPv4 and TCP checksums (so the capture reads it as a SYN, not as junk).
fn syn(mac: [u8; 6], ip: [u8; 4], to_mac: [u8; 6]) -> [u8; SYN_LEN] {
    let mut f = [0u8; SYN_LEN];
    f[..6].copy_from_slice(&to_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_hdr = &mut f[14..34];
    ip_hdr[0] = 0x45;
    ip_hdr[2..4].copy_from_slice(&40u16.to_be_bytes());
    ip_hdr[6] = 0x40; // don't fragment
    ip_hdr[8] = 64;
    ip_hdr[9] = 6;
    ip_hdr[12..16].copy_from_slice(&ip);
    ip_hdr[16..20].copy_from_slice(&PEER);
    let check = !(sum(0, ip_hdr) as u16);
    ip_hdr[10..12].copy_from_slice(&check.to_be_bytes());
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&PORT.to_be_bytes());
    tcp[4..8].copy_from_slice(&0x0102_0304u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x02; // SYN
    tcp[14..16].copy_from_slice(&1024u16.to_be_bytes());
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&ip);
    pseudo[4..8].copy_from_slice(&PEER);
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&20u16.to_be_bytes());
    let check = !(sum(sum(0, &pseudo), tcp) as u16);
    tcp[16..18].copy_from_slice(&check.to_be_bytes());
    f
}

fn attempt(stack: &mut net::Stack<'static, netcard::Card>, what: core::fmt::Arguments<'_>, frame: &[u8]) {
    match stack.send_raw(frame) {
        Ok(()) => rt::log!("netspoof: as {what}: sent"),
        Err(net::SendError::Refused(why)) => rt::log!("netspoof: as {what}: refused: {why:?}"),
        Err(e) => {
            rt::log!("[netspoof] FAIL: as {what}: {e:?}");
            rt::exit(1);
        }
    }
}

fn main(_pid: u32, _badge: u32) {
    let mut stack = netcard::stack("netspoof", 0);
    let lease = netcard::lease("netspoof", &mut stack, 10);
    // slirp answers for every address with its own MAC; the stack learned it from the
    // DHCP exchange, and it is the same for the gateway: 52:55:0a:00:02:02.
    let gateway_mac = [0x52, 0x55, 0x0a, 0x00, 0x02, 0x02];
    let mac = stack.mac();
    let forged_ip = syn(mac, FORGED_IP, gateway_mac);
    attempt(&mut stack, format_args!("{}", netcard::Ip(FORGED_IP)), &forged_ip);
    let forged_mac = syn(FORGED_MAC, lease.address, gateway_mac);
    let m = FORGED_MAC;
    attempt(
        &mut stack,
        format_args!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]),
        &forged_mac,
    );
    netcard::echo_check("netspoof", &mut stack, PEER, PORT, b"testbench-hello");
}
