//! The network world around `guest/net`'s stack: the very stack the guest runs, on a card
//! of this file's own, in a world the decisions make.
//!
//! - A channel each way that delays, reorders, duplicates and drops frames.
//! - A DHCP server (`guest/worlds`' one, which `guest/net`'s host tests answer with too)
//!   that lies now and then: short leases, no lease time or 0, renewals
//!   answered as new (an OFFER, or an ACK for another address), a NAK, options cut short
//!   (no END), any bytes over the packet, addresses no host may have, masks of /0, /31,
//!   /32 or not contiguous, a router off the subnet. It keeps the bytes of every ACK.
//! - A TCP peer (smoltcp, at 10.0.2.100) that records every byte of both streams: an echo
//!   server for the guest's echo check that echoes whole, cut, altered, reset or not at
//!   all, and a client of the guest's echo service.
//! - Now and then the guest program sends a frame of its own making: honest, or as
//!   another machine (the peer's address or MAC, 0.0.0.0 outside DHCP, ARP claiming the
//!   peer's address or with another sender MAC, IPv6, cut short).
//!
//! Time is virtual and jumps from event to event (a frame due, the stack's or the peer's
//! next timer, a planned action), so an hour's lease costs its timers. A zero decision is
//! the honest world: an all-zero input is a lease, an echo check and a served echo.
//!
//! The oracle judges what the stack reports against what the world knows: every frame
//! leaving the card as the card's MAC and the address the stack held (before or after
//! the poll that sent it; 0.0.0.0 only for DHCP client traffic), IPv4 or ARP only; a lease
//! that some ACK the server sent says (address, mask, router, server, lease time, DNS),
//! that keeps the rules (lease time given and not 0, prefix 1..=30, a host address, the
//! router on the subnet) and that is not held past its time; an echo check reported
//! whole only when the peer's stream held every byte sent, the same; the guest's echo
//! service answering only what the peer sent; a frame of the program's own making
//! refused exactly when the egress rules say.

use std::cell::RefCell;
use std::rc::Rc;

use ::net::{Buffers, Check, Device, DeviceError, Lease, SendError, Stack};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use crate::{Decisions, Finding};
use worlds::dhcp::{self, Liar, Lie, Script};
use worlds::frame::{be16, ip4, udp_frame};

const GUEST: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
const SERVER_MAC: [u8; 6] = [0x52, 0x55, 10, 0, 2, 2];
const SERVER_IP: [u8; 4] = [10, 0, 2, 2];
const PEER_MAC: [u8; 6] = [0x52, 0x55, 10, 0, 2, 100];
const PEER_IP: [u8; 4] = [10, 0, 2, 100];
const BROADCAST: [u8; 6] = [0xff; 6];
/// The guest's echo service and the peer's echo server.
const ECHO_PORT: u16 = 7;
/// How long a run lasts in virtual time at most, and how many steps it takes at most.
const RUN_MS: u64 = 3 * 3600 * 1000;
const STEPS: usize = 1500;

/// A frame on its way, due at `at` (ties in the order sent).
struct InFlight {
    at: u64,
    seq: u64,
    frame: Vec<u8>,
}

/// What passes between the world and the guest's card.
#[derive(Default)]
struct Card {
    /// Frames the guest sent during the current poll.
    out: Vec<Vec<u8>>,
    /// Frames due at the card, in order.
    inbox: std::collections::VecDeque<Vec<u8>>,
    /// Transmissions so far, and which fail (every `fail_every`-th; 0: none).
    transmits: u64,
    fail_every: u64,
}

struct Nic(Rc<RefCell<Card>>);

impl Device for Nic {
    fn mac(&self) -> [u8; 6] {
        GUEST
    }
    fn transmit(&mut self, frame: &[u8]) -> Result<(), DeviceError> {
        let mut card = self.0.borrow_mut();
        card.transmits += 1;
        if card.fail_every != 0 && card.transmits % card.fail_every == 0 {
            return Err(DeviceError);
        }
        card.out.push(frame.to_vec());
        Ok(())
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let frame = self.0.borrow_mut().inbox.pop_front()?;
        let n = frame.len().min(buf.len());
        buf[..n].copy_from_slice(&frame[..n]);
        Some(frame.len())
    }
}

/// A channel: each frame dropped, duplicated or delayed as the decisions say.
#[derive(Default)]
struct Channel {
    frames: Vec<InFlight>,
    seq: u64,
}

impl Channel {
    fn send(&mut self, d: &mut Decisions, now: u64, frame: Vec<u8>) {
        let fate = d.u8();
        // One in 16 dropped, one in 16 sent twice; the rest delayed 1 ms, or up to 300 ms
        // (one in 8: frames overtake each other).
        if fate >= 0xf0 {
            return;
        }
        let copies = if fate >= 0xe0 { 2 } else { 1 };
        for _ in 0..copies {
            let delay = if d.u8() >= 0xe0 { 1 + d.below(300) as u64 } else { 1 };
            self.seq += 1;
            self.frames.push(InFlight { at: now + delay, seq: self.seq, frame: frame.clone() });
        }
    }

    fn next_at(&self) -> Option<u64> {
        self.frames.iter().map(|f| f.at).min()
    }

    /// The frames due by `now`, in order.
    fn due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let mut due: Vec<InFlight> = Vec::new();
        let mut i = 0;
        while i < self.frames.len() {
            if self.frames[i].at <= now {
                due.push(self.frames.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|f| (f.at, f.seq));
        due.into_iter().map(|f| f.frame).collect()
    }
}

/// The egress rules, read again here from the frame's bytes: Ok, or why not.
fn egress_allows(frame: &[u8], leased: &[Option<[u8; 4]>]) -> Result<(), String> {
    if frame.len() < 14 {
        return Err(format!("a {}-byte frame", frame.len()));
    }
    if frame[6..12] != GUEST {
        return Err(format!("source MAC {:02x?}", &frame[6..12]));
    }
    let held = |a: [u8; 4]| leased.contains(&Some(a));
    match be16(frame, 12) {
        Some(0x0806) => {
            let (Some(mac), Some(ip), true) = (frame.get(22..28), ip4(frame, 28), frame.len() >= 42) else {
                return Err("a short ARP".into());
            };
            if mac != GUEST {
                return Err(format!("ARP sender MAC {mac:02x?}"));
            }
            if !held(ip) {
                return Err(format!("ARP sender {ip:?}"));
            }
            Ok(())
        }
        Some(0x0800) => {
            let Some(src) = ip4(frame, 26).filter(|_| frame.len() >= 34) else { return Err("a short IPv4".into()) };
            if held(src) {
                return Ok(());
            }
            let ihl = usize::from(frame[14] & 0xf) * 4;
            let dhcp = src == [0; 4]
                && ihl >= 20
                && frame[23] == 17
                && be16(frame, 14 + ihl) == Some(68)
                && be16(frame, 14 + ihl + 2) == Some(67);
            if dhcp {
                Ok(())
            } else {
                Err(format!("IPv4 source {src:?}"))
            }
        }
        other => Err(format!("EtherType {other:04x?}")),
    }
}

/// The server's lies, drawn from the decisions: one answer in eight lies, in one of
/// twelve ways (`guest/worlds`' [`Lie`]s), each with its own values.
struct Lies<'d, 'a>(&'d mut Decisions<'a>);

impl Liar for Lies<'_, '_> {
    fn lie(&mut self, request: &dhcp::Request, offered: [u8; 4]) -> Option<Lie> {
        let d = &mut *self.0;
        if d.u8() < 0xe0 {
            return None;
        }
        Some(match d.below(12) {
            0 => Lie::Silence,
            1 if request.ciaddr != [0; 4] => Lie::Offer,
            1 | 2 => Lie::NewAddress(1 + d.u8() % 4),
            3 => Lie::Nak,
            4 => Lie::Cut(d.below(40)),
            5 => Lie::Scribble(1 + d.below(6)),
            6 => Lie::Address(*d.choose(&[
                [127, 0, 0, 5],
                [10, 0, 2, 0],
                [10, 0, 2, 255],
                [0, 1, 2, 3],
                [240, 0, 0, 1],
                [224, 0, 0, 1],
            ])),
            7 => Lie::Mask(*d.choose(&[
                [0, 0, 0, 0],
                [255, 255, 255, 254],
                [255, 255, 255, 255],
                [255, 0, 255, 0],
                [128, 0, 0, 0],
            ])),
            8 => Lie::Router(*d.choose(&[Some([10, 0, 3, 1]), Some(offered), Some([192, 168, 0, 1]), None])),
            9 => Lie::LeaseTime(*d.choose(&[None, Some(0), Some(1), Some(2)])),
            10 => Lie::OtherXid,
            _ => {
                let len = d.below(600);
                Lie::Junk(d.bytes(len))
            }
        })
    }

    fn scribble(&mut self, len: usize) -> (usize, u8) {
        (self.0.below(len), self.0.u8())
    }
}

/// Whether the ACK payload `p` says `lease`: its address, a mask of its prefix, its router
/// (when it has one), its server, its lease time and each of its DNS servers.
fn ack_says(p: &[u8], lease: &Lease) -> bool {
    let opts = dhcp::options(p);
    let has = |code: u8, f: &dyn Fn(&[u8]) -> bool| opts.iter().any(|(c, v)| *c == code && f(v));
    let prefix = |v: &[u8]| {
        v.len() == 4 && u32::from_be_bytes(v.try_into().unwrap()).leading_ones() == u32::from(lease.prefix_len)
    };
    ip4(p, 16) == Some(lease.address)
        && has(53, &|v| v == [5])
        && has(51, &|v| v == lease.lease_secs.to_be_bytes())
        && has(1, &prefix)
        && has(54, &|v| v == lease.server)
        && lease.router.is_none_or(|r| has(3, &|v| v.get(..4) == Some(&r[..])))
        && lease.dns_servers().iter().all(|s| has(6, &|v| v.chunks(4).any(|c| c == s)))
}

/// The lease rules, read again: None when `lease` keeps them.
fn lease_breaks(lease: &Lease) -> Option<String> {
    let p = lease.prefix_len;
    if lease.lease_secs == 0 {
        return Some("a lease time of 0".into());
    }
    if !(1..=30).contains(&p) {
        return Some(format!("prefix /{p}"));
    }
    let mask = u32::MAX << (32 - u32::from(p));
    let a = u32::from_be_bytes(lease.address);
    if matches!(lease.address[0], 0 | 127 | 224..=255) || a & !mask == 0 || a & !mask == !mask {
        return Some(format!("address {:?}/{p}", lease.address));
    }
    if let Some(r) = lease.router {
        let r32 = u32::from_be_bytes(r);
        if r32 & mask != a & mask || r32 == a {
            return Some(format!("router {r:?} for {:?}/{p}", lease.address));
        }
    }
    None
}

/// How the peer's echo server answers the guest's check.
#[derive(Clone, Copy, Debug)]
enum Echo {
    Whole,
    /// The first k bytes, then FIN.
    Cut(usize),
    /// Byte k changed.
    Alter(usize),
    /// The first k bytes, then RST.
    Reset(usize),
    /// Nothing.
    Silent,
}

struct PeerNic {
    inbox: Vec<Vec<u8>>,
    out: Vec<Vec<u8>>,
}

struct PeerRx(Vec<u8>);
struct PeerTx<'a>(&'a mut Vec<Vec<u8>>);

impl phy::RxToken for PeerRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for PeerTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let r = f(&mut frame);
        self.0.push(frame);
        r
    }
}

impl phy::Device for PeerNic {
    type RxToken<'a> = PeerRx;
    type TxToken<'a> = PeerTx<'a>;
    fn receive(&mut self, _: Instant) -> Option<(PeerRx, PeerTx<'_>)> {
        if self.inbox.is_empty() {
            return None;
        }
        let frame = self.inbox.remove(0);
        Some((PeerRx(frame), PeerTx(&mut self.out)))
    }
    fn transmit(&mut self, _: Instant) -> Option<PeerTx<'_>> {
        Some(PeerTx(&mut self.out))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps
    }
}

/// The TCP peer: an echo server for the guest's check and a client of the guest's echo
/// service, each stream's bytes kept whole.
struct Peer {
    iface: Interface,
    sockets: SocketSet<'static>,
    server: SocketHandle,
    client: SocketHandle,
    nic: PeerNic,
    echo: Echo,
    /// The echo server's streams: what the guest sent, what the peer sent back.
    from_guest: Vec<u8>,
    to_guest: Vec<u8>,
    ended: bool,
    /// The client's streams: what it sends the guest's service, and what came back.
    client_sends: Vec<u8>,
    client_sent: usize,
    client_got: Vec<u8>,
    client_started: bool,
}

fn instant(ms: u64) -> Instant {
    Instant::from_millis(ms as i64)
}

impl Peer {
    fn new(echo: Echo, client_sends: Vec<u8>) -> Peer {
        let mut nic = PeerNic { inbox: Vec::new(), out: Vec::new() };
        let mut iface =
            Interface::new(Config::new(HardwareAddress::Ethernet(EthernetAddress(PEER_MAC))), &mut nic, instant(0));
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(PEER_IP)), 24));
        });
        let storage: Vec<SocketStorage<'static>> = vec![SocketStorage::EMPTY, SocketStorage::EMPTY];
        let mut sockets = SocketSet::new(storage);
        let buffer = || tcp::SocketBuffer::new(vec![0u8; 2048]);
        let mut server = tcp::Socket::new(buffer(), buffer());
        server.listen(ECHO_PORT).expect("listen");
        let server = sockets.add(server);
        let client = sockets.add(tcp::Socket::new(buffer(), buffer()));
        Peer {
            iface,
            sockets,
            server,
            client,
            nic,
            echo,
            from_guest: Vec::new(),
            to_guest: Vec::new(),
            ended: false,
            client_sends,
            client_sent: 0,
            client_got: Vec::new(),
            client_started: false,
        }
    }

    fn connect(&mut self, to: [u8; 4]) {
        self.client_started = true;
        let cx = self.iface.context();
        let socket = self.sockets.get_mut::<tcp::Socket>(self.client);
        let _ = socket.connect(cx, (Ipv4Address::from(to), ECHO_PORT), 40000);
    }

    fn poll(&mut self, now: u64) {
        self.iface.poll(instant(now), &mut self.nic, &mut self.sockets);
        let s = self.sockets.get_mut::<tcp::Socket>(self.server);
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = s.recv_slice(&mut buf) {
            self.from_guest.extend_from_slice(&buf[..n]);
        }
        if !self.ended {
            let (limit, end) = match self.echo {
                Echo::Whole | Echo::Alter(_) => (usize::MAX, None),
                Echo::Cut(k) => (k, Some(false)),
                Echo::Reset(k) => (k, Some(true)),
                Echo::Silent => (0, None),
            };
            let upto = self.from_guest.len().min(limit);
            if upto > self.to_guest.len() && s.can_send() {
                let mut chunk = self.from_guest[self.to_guest.len()..upto].to_vec();
                if let Echo::Alter(k) = self.echo {
                    if let Some(b) = k.checked_sub(self.to_guest.len()).and_then(|i| chunk.get_mut(i)) {
                        *b ^= 0x20;
                    }
                }
                let n = s.send_slice(&chunk).unwrap_or(0);
                self.to_guest.extend_from_slice(&chunk[..n]);
            }
            if let Some(reset) = end {
                if self.to_guest.len() >= limit && s.state() == tcp::State::Established {
                    self.ended = true;
                    if reset {
                        s.abort();
                    } else {
                        s.close();
                    }
                }
            }
        }
        let c = self.sockets.get_mut::<tcp::Socket>(self.client);
        while let Ok(n @ 1..) = c.recv_slice(&mut buf) {
            self.client_got.extend_from_slice(&buf[..n]);
        }
        if self.client_sent < self.client_sends.len() && c.can_send() {
            self.client_sent += c.send_slice(&self.client_sends[self.client_sent..]).unwrap_or(0);
        }
        // Everything back: the client ends its stream, and the service must close too.
        if self.client_got.len() == self.client_sends.len() && c.state() == tcp::State::Established {
            c.close();
        }
        self.iface.poll(instant(now), &mut self.nic, &mut self.sockets);
    }

    fn poll_at(&mut self, now: u64) -> Option<u64> {
        self.iface.poll_at(instant(now), &self.sockets).map(|t| t.total_millis().max(0) as u64)
    }
}

/// A frame the guest program makes itself, and whether the egress rules let it leave.
fn forged(d: &mut Decisions, lease: [u8; 4]) -> Vec<u8> {
    match d.below(9) {
        0 => udp_frame(GUEST, PEER_MAC, lease, PEER_IP, (5000, 5001), b"honest"),
        8 => {
            let mut f = BROADCAST.to_vec();
            f.extend_from_slice(&GUEST);
            f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
            f.extend_from_slice(&PEER_MAC);
            f.extend_from_slice(&lease);
            f.extend_from_slice(&[0xff; 6]);
            f.extend_from_slice(&SERVER_IP);
            f
        }
        1 => udp_frame(GUEST, SERVER_MAC, PEER_IP, SERVER_IP, (5000, 5001), b"as the peer"),
        2 => udp_frame(PEER_MAC, SERVER_MAC, lease, SERVER_IP, (5000, 5001), b"as the peer's card"),
        3 => udp_frame(PEER_MAC, SERVER_MAC, PEER_IP, SERVER_IP, (5000, 5001), b"as the peer whole"),
        4 => udp_frame(GUEST, BROADCAST, [0; 4], [255; 4], (68, 69), b"0.0.0.0, not DHCP"),
        5 => {
            let mut f = BROADCAST.to_vec();
            f.extend_from_slice(&GUEST);
            f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
            f.extend_from_slice(&GUEST);
            f.extend_from_slice(&PEER_IP);
            f.extend_from_slice(&[0xff; 6]);
            f.extend_from_slice(&SERVER_IP);
            f
        }
        6 => {
            let mut f = udp_frame(GUEST, PEER_MAC, lease, PEER_IP, (5000, 5001), b"IPv6 type");
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f
        }
        7 => {
            let mut f = udp_frame(GUEST, PEER_MAC, lease, PEER_IP, (5000, 5001), b"x");
            f.truncate(d.below(f.len()));
            f
        }
        _ => unreachable!("below(9)"),
    }
}

/// One run of the world.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let card = Rc::new(RefCell::new(Card::default()));
    card.borrow_mut().fail_every = if d.u8() >= 0xf0 { 2 + d.below(30) as u64 } else { 0 };
    let lease_secs = if d.u8() >= 0xe0 {
        *d.choose(&[Some(1), Some(3), Some(10), None, Some(0), Some(u32::MAX)])
    } else {
        Some(*d.choose(&[600, 60, 3600, 120, 86400]))
    };
    // QEMU's user network, with two DNS servers, the second 0.0.0.0.
    let script = Script { dns: vec![[10, 0, 2, 3], [0; 4]], ..Script::qemu(SERVER_IP, lease_secs) };
    let mut server = dhcp::Server::new(SERVER_MAC, SERVER_IP, script);
    let echo = match d.below(8) {
        0..=3 => Echo::Whole,
        4 => Echo::Cut(d.below(64)),
        5 => Echo::Alter(d.below(64)),
        6 => Echo::Reset(d.below(64)),
        _ => Echo::Silent,
    };
    let payload: Vec<u8> = (0..1 + d.below(::net::CHECK_MAX)).map(|i| (i as u8).wrapping_mul(31) ^ d.u8()).collect();
    let client_sends: Vec<u8> = (0..1 + d.below(700)).map(|i| i as u8).collect();
    let mut peer = Peer::new(echo, client_sends);
    // When the check starts and the peer connects, after the lease; when (if) a forged
    // frame goes out.
    let check_after = d.below(5000) as u64;
    let deadline = 1000 + d.below(60_000) as u64;
    let client_after = d.below(5000) as u64;
    let mut forge_at = if d.u8() >= 0xc0 { Some(d.below(20_000) as u64) } else { None };
    let run_ms = 10_000 + d.below(RUN_MS as usize) as u64;
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(Nic(card.clone()), &mut buffers, ECHO_PORT, d.u64(), 0);
    let (mut to_guest, mut to_world) = (Channel::default(), Channel::default());
    let mut now = 0u64;
    let mut leased_at: Option<u64> = None;
    let mut check_started = false;
    let mut reported = Check::Idle;
    for _ in 0..STEPS {
        // The guest's poll, and every frame it sent judged.
        card.borrow_mut().inbox.extend(to_guest.due(now));
        let before = stack.lease().map(|l| l.address);
        stack.poll(now);
        let after = stack.lease().map(|l| l.address);
        let sent = std::mem::take(&mut card.borrow_mut().out);
        for frame in sent {
            if let Err(why) = egress_allows(&frame, &[before, after]) {
                return Err(Finding::oracle("a frame left as another machine", format!("{why} at {now} ms")));
            }
            to_world.send(d, now, frame);
        }
        // The lease, against the ACKs the server sent and the rules.
        match stack.lease() {
            Some(lease) => {
                if !server.acks.iter().any(|p| ack_says(p, lease)) {
                    return Err(Finding::oracle("a lease the server never gave", format!("{lease:?}")));
                }
                if let Some(why) = lease_breaks(lease) {
                    return Err(Finding::oracle("a lease that breaks the rules", why));
                }
                if now >= lease.expires_ms() {
                    return Err(Finding::oracle("a lease held past its time", format!("{lease:?} at {now} ms")));
                }
                leased_at.get_or_insert(now);
            }
            None => leased_at = None,
        }
        // The echo check's report, against what the peer sent.
        let check = stack.check();
        if check != reported {
            reported = check;
            if let Check::Echoed(n) = check {
                if n != payload.len() || peer.to_guest.get(..n) != Some(&payload[..]) {
                    return Err(Finding::oracle(
                        "an echo reported whole that the peer did not send whole",
                        format!("{n} of {} bytes; the peer sent {} ({echo:?})", payload.len(), peer.to_guest.len()),
                    ));
                }
                d.end("echoed");
            }
        }
        // The guest's echo service: only what the peer sent comes back.
        if !peer.client_sends.starts_with(&peer.client_got) {
            return Err(Finding::oracle(
                "the echo service answered other bytes",
                format!("{} bytes back", peer.client_got.len()),
            ));
        }
        // The program's actions.
        if let (Some(at), Some(lease)) = (leased_at, stack.lease().copied()) {
            if !check_started && now >= at + check_after {
                check_started = true;
                let started = stack.start_check(PEER_IP, ECHO_PORT, &payload, now + deadline);
                if started.is_err() {
                    return Err(Finding::oracle("a check refused to start on a lease", format!("{started:?}")));
                }
            }
            if !peer.client_started && now >= at + client_after {
                peer.connect(lease.address);
            }
            if forge_at.is_some_and(|t| now >= at + t) {
                forge_at.take();
                let frame = forged(d, lease.address);
                let before = card.borrow().out.len();
                let result = stack.send_raw(&frame);
                let allowed = egress_allows(&frame, &[Some(lease.address)]);
                if result.is_ok() != allowed.is_ok() || matches!(result, Err(SendError::TooLong)) {
                    return Err(Finding::oracle(
                        "a program's frame judged against the rules",
                        format!("{result:?}, {allowed:?}"),
                    ));
                }
                let sent = std::mem::take(&mut card.borrow_mut().out);
                if result.is_err() && sent.len() != before {
                    return Err(Finding::oracle("a refused frame reached the card", format!("{result:?}")));
                }
                for frame in sent {
                    to_world.send(d, now, frame);
                }
            }
        }
        // The world's side: the server and the peer take what is due.
        for frame in to_world.due(now) {
            let dst = &frame[..6.min(frame.len())];
            if dst == BROADCAST || dst == SERVER_MAC {
                if let Some(answer) = server.answer_lying(&frame, &mut Lies(d)) {
                    to_guest.send(d, now, answer);
                }
            }
            if dst == BROADCAST || dst == PEER_MAC {
                peer.nic.inbox.push(frame);
            }
        }
        peer.poll(now);
        for frame in std::mem::take(&mut peer.nic.out) {
            to_guest.send(d, now, frame);
        }
        // On to the next event.
        let next = [to_guest.next_at(), to_world.next_at(), stack.poll_at(now), peer.poll_at(now)]
            .into_iter()
            .flatten()
            .chain(leased_at.map(|at| at + check_after.min(client_after)).filter(|&t| t > now))
            .min();
        let Some(next) = next else { break };
        now = next.max(now + 1);
        if now > run_ms {
            break;
        }
    }
    if reported == Check::Idle && stack.lease().is_none() {
        d.end("no lease at the end");
    } else if reported == Check::Idle {
        d.end("leased, no check yet");
    } else if reported == Check::Running {
        d.end("check: still running");
    } else if let Check::Failed(why) = reported {
        d.end(match why {
            ::net::CheckFailure::Truncated { .. } => "check: truncated",
            ::net::CheckFailure::Mismatch(_) => "check: mismatch",
            ::net::CheckFailure::Reset => "check: reset",
            ::net::CheckFailure::Timeout => "check: timeout",
            ::net::CheckFailure::LeaseLost => "check: lease lost",
        });
    }
    Ok(())
}
