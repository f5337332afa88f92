//! The capture: every frame on the guest's card, as QEMU's `filter-dump` writes it, read
//! fail-closed ([`read`]) and judged against the case's rules ([`judge`]).
//!
//! # What QEMU writes
//!
//! `-object filter-dump,id=cap0,netdev=net0,file=PATH` opens PATH with `O_TRUNC`, writes
//! the classic pcap header (magic `0xa1b2c3d4` in the host's byte order, version 2.4,
//! microsecond timestamps, snaplen = the filter's `maxlen`, 65536 unless set, linktype 1,
//! Ethernet) and then one record per frame, header and bytes in one `writev`. A filter
//! on the netdev sees both directions (its default `queue=all`): what the guest sent and
//! what slirp sent it. A record's time is QEMU's virtual clock plus the wall time at the
//! filter's start, so under icount it is guest time. Seen on QEMU 10.0.2 (the tests'
//! two real captures): both directions are recorded, the guest's frames as it sent them
//! (a 42-byte ARP request, unpadded) and slirp's as it sent them (its ARP reply padded
//! to 64 bytes). Frames larger than `maxlen` are
//! recorded short (`incl_len < orig_len`), which this reader refuses rather than judges
//! half a frame. QEMU stops the dump silently (one line on its stderr) after a failed
//! write, so a capture can end early and still be well-formed: that is a residual risk
//! the capture cannot show by itself; the peers' counts, matched against the helper's
//! records, catch a dump that stopped before a SYN it needed.
//!
//! # Whose frames
//!
//! slirp's emulated hosts use the MAC address `52:55:` followed by their IPv4 address
//! (the gateway 10.0.2.2 is `52:55:0a:00:02:02`; an ARP reply for 10.0.2.3 comes from
//! `52:55:0a:00:02:03`), and everything slirp sends the guest, whatever its IP source, is
//! sent from one of these. So a frame whose source MAC starts `52:55` is slirp's; every
//! other frame is the guest's own output, as it left the card before slirp saw it. A
//! guest that forged a `52:55` source address would hide its frames from the rules; the
//! rules judge a guest's mistakes, not an adversary's disguise.
//!
//! # What the rules prove
//!
//! In a case with peers the guest may send only ARP requests for the gateway or a peer (a
//! peer is on the guest's link when slirp's network is widened to 10.0.0.0/16 and the
//! lease names no router, as slirp's does when restricted), ARP replies,
//! IPv4 TCP and a DHCP client's IPv4 UDP (port 68 to port 67); never an IPv4 fragment;
//! never a SYN (without ACK) into a `self_forbidden` prefix; and each peer receives
//! exactly as many distinct SYNs (by source port and sequence number, so a retransmitted
//! SYN counts once) as its `connections`. A peer that expects a connection and gets its
//! SYN shows the capture was live. Every frame the guest sends is its own: from the
//! card's MAC, and (IPv4, and an ARP packet's sender) from the guest's address, or from
//! 0.0.0.0 for a DHCP client's discover or request and an ARP probe; a guest that sends
//! as another address fails the case with that frame quoted. The guest's own account of
//! its network is never read.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use etherparse::{ArpHardwareId, ArpOperation, EtherType, LinkSlice, NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::{DataLink, PcapError};

/// The largest capture file read (a bound on memory).
pub const MAX_CAPTURE_BYTES: u64 = 64 << 20;
const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// A capture read whole: its snaplen and its frames, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frames {
    pub snaplen: u32,
    pub frames: Vec<Frame>,
}

/// One frame as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// 1 for the first frame, as Wireshark numbers them.
    pub index: usize,
    /// The record's timestamp (seconds since the Unix epoch, as QEMU stamps it).
    pub time: Duration,
    /// The Ethernet frame, whole.
    pub data: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("the capture {path} is missing: {source}")]
    Missing { path: PathBuf, source: io::Error },
    #[error("the capture {path} could not be read: {source}")]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("the capture {path} is {size} bytes, above the bound of {MAX_CAPTURE_BYTES} bytes")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("the capture {path} is empty (0 bytes): not even the pcap header was written")]
    Empty { path: PathBuf },
    #[error("the capture {path}: its pcap header is cut: {len} of {FILE_HEADER} bytes")]
    CutFileHeader { path: PathBuf, len: usize },
    #[error("the capture {path}: its pcap header is malformed: {reason}")]
    BadFileHeader { path: PathBuf, reason: HeaderFault },
    #[error("the capture {path} holds no frame (its header only)")]
    NoFrames { path: PathBuf },
    #[error(
        "the capture {path}: frame {index}'s record header at byte {offset} is cut: {have} of {RECORD_HEADER} bytes"
    )]
    CutRecordHeader { path: PathBuf, index: usize, offset: usize, have: usize },
    #[error("the capture {path}: frame {index} at byte {offset} is cut: {have} of its {need} bytes")]
    CutFrame { path: PathBuf, index: usize, offset: usize, have: usize, need: usize },
    #[error("the capture {path}: frame {index}'s record at byte {offset} is malformed: {reason}")]
    BadRecord { path: PathBuf, index: usize, offset: usize, reason: String },
    #[error("the capture {path}: frame {index} (at unix time {}) is not a well-formed Ethernet frame: {reason}", secs(*time))]
    BadFrame { path: PathBuf, index: usize, time: Duration, reason: FrameFault },
    #[error("the capture {path} could not be cut (self-check): {reason}")]
    Truncate { path: PathBuf, reason: String },
    /// A capture path QEMU's option list cannot carry ([`filter_dump_arg`]).
    #[error("the capture path {} is not UTF-8", path.display())]
    PathNotUtf8 { path: PathBuf },
}

/// What is wrong with a capture's pcap file header.
#[derive(Debug, thiserror::Error)]
pub enum HeaderFault {
    #[error("{}", pcap_reason(.0))]
    Pcap(#[source] PcapError),
    #[error("version {major}.{minor}, not 2.x")]
    Version { major: u16, minor: u16 },
    #[error("link type {0:?}, not Ethernet (1)")]
    LinkType(DataLink),
}

/// Why a recorded frame is not a well-formed Ethernet frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameFault {
    #[error("{0}")]
    Unparsable(#[source] etherparse::err::packet::SliceError),
    #[error("no Ethernet II header")]
    NotEthernet2,
}

/// Why the guest's frames fail the capture's rules ([`judge`]), or the rules cannot be
/// used. `at` is a frame's place: its number, its time since the first and its unix time.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("self_forbidden prefix {addr}/{len}: a prefix length is at most 32")]
    PrefixTooLong { addr: Ipv4Addr, len: u8 },
    #[error("a case with peers needs one that expects a connection: its SYN shows the capture was live")]
    NoLivePeer,
    #[error("{at}: does not parse: {source}")]
    Unparsable { at: String, source: etherparse::err::packet::SliceError },
    #[error("{at}: no Ethernet II header")]
    NotEthernet2 { at: String },
    /// The rules the guest broke: the first [`MAX_LISTED`] said a line each, and how many
    /// more were not listed.
    #[error("{}{}", listed.join("\n"), if *unlisted > 0 { format!("\n(and {unlisted} more rule breaks)") } else { String::new() })]
    Broken { listed: Vec<String>, unlisted: usize },
}

/// QEMU's `-object` argument that records every frame of the netdev `netdev` into
/// `file` (both directions, full frames up to 65536 bytes), commas in the path doubled.
/// A path that is not UTF-8 is refused.
pub fn filter_dump_arg(id: &str, netdev: &str, file: &Path) -> Result<String, CaptureError> {
    let Some(file) = file.to_str() else { return Err(CaptureError::PathNotUtf8 { path: file.to_path_buf() }) };
    let v = crate::ports::qemu_opt_value;
    Ok(format!("filter-dump,id={},netdev={},file={}", v(id), v(netdev), v(file)))
}

/// Reads the capture at `path`, whole and fail-closed: a missing, empty, header-only, cut
/// or malformed file, or a frame that does not parse as Ethernet (and, where it says so,
/// ARP, IPv4 and TCP), is an error naming the place. With `truncate` (the self-check) the
/// file is first cut in the middle of its last frame.
pub fn read(path: &Path, truncate: bool) -> Result<Frames, CaptureError> {
    let p = || path.to_path_buf();
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => CaptureError::Missing { path: p(), source },
        _ => CaptureError::Unreadable { path: p(), source },
    })?;
    if meta.len() > MAX_CAPTURE_BYTES {
        return Err(CaptureError::TooLarge { path: p(), size: meta.len() });
    }
    if truncate {
        cut_last_frame(path)?;
    }
    let data = std::fs::read(path).map_err(|source| CaptureError::Unreadable { path: p(), source })?;
    if data.len() as u64 > MAX_CAPTURE_BYTES {
        return Err(CaptureError::TooLarge { path: p(), size: data.len() as u64 });
    }
    parse(path, &data)
}

/// The records' offsets: the file's header, then each record's start and its length.
fn parse(path: &Path, data: &[u8]) -> Result<Frames, CaptureError> {
    let p = || path.to_path_buf();
    if data.is_empty() {
        return Err(CaptureError::Empty { path: p() });
    }
    if data.len() < FILE_HEADER {
        return Err(CaptureError::CutFileHeader { path: p(), len: data.len() });
    }
    let (mut rest, parser) =
        PcapParser::new(data).map_err(|e| CaptureError::BadFileHeader { path: p(), reason: HeaderFault::Pcap(e) })?;
    let header = parser.header();
    check_header(&header).map_err(|reason| CaptureError::BadFileHeader { path: p(), reason })?;
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let index = frames.len() + 1;
        let offset = data.len() - rest.len();
        if rest.len() < RECORD_HEADER {
            return Err(CaptureError::CutRecordHeader { path: p(), index, offset, have: rest.len() });
        }
        let (next, raw) = match parser.next_raw_packet(rest) {
            Ok(r) => r,
            Err(PcapError::IncompleteBuffer) => {
                let need = u32_at(rest, 8, header.endianness) as usize;
                let have = rest.len() - RECORD_HEADER;
                return Err(CaptureError::CutFrame { path: p(), index, offset, have, need });
            }
            Err(e) => return Err(CaptureError::BadRecord { path: p(), index, offset, reason: pcap_reason(&e) }),
        };
        let (incl, orig) = (raw.incl_len, raw.orig_len);
        let packet = raw
            .try_into_pcap_packet(header.ts_resolution, header.snaplen)
            .map_err(|e| CaptureError::BadRecord { path: p(), index, offset, reason: pcap_reason(&e) })?;
        if incl < orig {
            return Err(CaptureError::BadRecord {
                path: p(),
                index,
                offset,
                reason: format!(
                    "recorded {incl} of the frame's {orig} bytes (the snaplen cut it); half a frame is not judged"
                ),
            });
        }
        let frame = Frame { index, time: packet.timestamp, data: packet.data.into_owned() };
        check_frame(&frame.data).map_err(|reason| CaptureError::BadFrame {
            path: p(),
            index,
            time: frame.time,
            reason,
        })?;
        frames.push(frame);
        rest = next;
    }
    if frames.is_empty() {
        return Err(CaptureError::NoFrames { path: p() });
    }
    Ok(Frames { snaplen: header.snaplen, frames })
}

fn check_header(h: &PcapHeader) -> Result<(), HeaderFault> {
    if h.version_major != 2 {
        return Err(HeaderFault::Version { major: h.version_major, minor: h.version_minor });
    }
    if h.datalink != DataLink::ETHERNET {
        return Err(HeaderFault::LinkType(h.datalink));
    }
    Ok(())
}

fn pcap_reason(e: &PcapError) -> String {
    match e {
        PcapError::InvalidField(what) => (*what).to_string(),
        other => other.to_string(),
    }
}

fn u32_at(rest: &[u8], at: usize, endianness: pcap_file::Endianness) -> u32 {
    let b = [rest[at], rest[at + 1], rest[at + 2], rest[at + 3]];
    match endianness {
        pcap_file::Endianness::Big => u32::from_be_bytes(b),
        pcap_file::Endianness::Little => u32::from_le_bytes(b),
    }
}

/// A frame is well-formed when etherparse slices it without error from its Ethernet
/// header down to what it carries (ARP, IPv4 and TCP headers within their stated lengths).
fn check_frame(data: &[u8]) -> Result<(), FrameFault> {
    let sliced = SlicedPacket::from_ethernet(data).map_err(FrameFault::Unparsable)?;
    match sliced.link {
        Some(LinkSlice::Ethernet2(_)) => Ok(()),
        _ => Err(FrameFault::NotEthernet2),
    }
}

/// Cuts the file in the middle of its last frame: half its bytes (or, for a frame of
/// fewer than two bytes, half its record header) are kept.
fn cut_last_frame(path: &Path) -> Result<(), CaptureError> {
    let err = |reason: String| CaptureError::Truncate { path: path.to_path_buf(), reason };
    let data = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let (mut rest, parser) = PcapParser::new(&data).map_err(|e| err(format!("its header: {}", pcap_reason(&e))))?;
    let mut last = None;
    while let Ok((next, raw)) = parser.next_raw_packet(rest) {
        last = Some((data.len() - rest.len(), raw.data.len()));
        rest = next;
    }
    let Some((offset, len)) = last else { return Err(err("it holds no whole frame to cut".to_string())) };
    let cut_at = if len >= 2 { offset + RECORD_HEADER + len / 2 } else { offset + RECORD_HEADER / 2 };
    let file = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| err(e.to_string()))?;
    file.set_len(cut_at as u64).map_err(|e| err(e.to_string()))?;
    file.sync_all().map_err(|e| err(e.to_string()))
}

/// What a case with `[net]` holds the guest's frames to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The gateway, one of the addresses the guest may ask for with ARP (10.0.2.2; the
    /// peers' are the others).
    pub gateway: Ipv4Addr,
    /// The guest's own address (10.0.2.15): the source of every IPv4 frame it sends.
    pub guest: Ipv4Addr,
    /// The card's MAC: the source of every frame the guest sends.
    pub mac: [u8; 6],
    /// Prefixes (address, length) the guest must never send a SYN into.
    pub self_forbidden: Vec<(Ipv4Addr, u8)>,
    /// Each peer and the connections it must receive.
    pub peers: Vec<(SocketAddrV4, u32)>,
}

/// What the capture held, when every rule held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub frames: usize,
    /// Frames the guest sent.
    pub guest_frames: usize,
    /// Frames slirp sent the guest.
    pub slirp_frames: usize,
    /// SYNs (without ACK) the guest sent, distinct by destination, source port and
    /// sequence number.
    pub syns: usize,
    /// Each peer and the distinct SYNs it received, in the rules' order.
    pub peer_syns: Vec<(SocketAddrV4, u32)>,
}

/// One peer's SYNs: distinct by source port and sequence number, and the first few
/// frames that carried them (for a failure's evidence).
#[derive(Clone, Default)]
struct PeerSyns {
    distinct: BTreeSet<(u16, u32)>,
    shown: Vec<String>,
}

/// What a guest may send, as a failure says it.
const ALLOWED: &str = "only ARP, IPv4 TCP and a DHCP client's UDP (68 to 67) are allowed";

/// The card's MAC, set on QEMU's command line for every `[net]` card.
pub const GUEST_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

/// The most rule breaks a failure lists (it counts the rest).
const MAX_LISTED: usize = 3;

/// Judges the guest's frames against `rules` (see the module's docs). A failure names
/// each broken rule with the frame's number, its time and a one-line decoding of it.
pub fn judge(frames: &Frames, rules: &Rules) -> Result<Summary, JudgeError> {
    for &(addr, len) in &rules.self_forbidden {
        if len > 32 {
            return Err(JudgeError::PrefixTooLong { addr, len });
        }
    }
    if !rules.peers.is_empty() && rules.peers.iter().all(|&(_, n)| n == 0) {
        return Err(JudgeError::NoLivePeer);
    }
    let first = frames.frames.first().map(|f| f.time).unwrap_or_default();
    let mut broken: Vec<String> = Vec::new();
    let mut broken_count = 0usize;
    let mut guest_frames = 0;
    let mut syns = BTreeSet::new();
    let mut peer_syns: Vec<PeerSyns> = vec![PeerSyns::default(); rules.peers.len()];
    for frame in &frames.frames {
        let sliced = SlicedPacket::from_ethernet(&frame.data)
            .map_err(|source| JudgeError::Unparsable { at: at(frame, first), source })?;
        let Some(LinkSlice::Ethernet2(eth)) = &sliced.link else {
            return Err(JudgeError::NotEthernet2 { at: at(frame, first) });
        };
        if is_slirp_mac(eth.source()) {
            continue;
        }
        guest_frames += 1;
        let mut breaks = |rule: &str| {
            broken_count += 1;
            if broken.len() < MAX_LISTED {
                broken.push(format!(
                    "{}: {rule}: {}",
                    at(frame, first),
                    testbench_judge::quote(&describe(&frame.data))
                ));
            }
        };
        if eth.source() != rules.mac {
            breaks(&format!("the guest sent as MAC {}; the card's is {}", mac(eth.source()), mac(rules.mac)));
            continue;
        }
        if !sliced.link_exts.is_empty() {
            breaks(&format!("the guest sent a VLAN or MACsec frame; {ALLOWED}"));
            continue;
        }
        match &sliced.net {
            Some(NetSlice::Arp(arp)) => {
                let eth_ipv4 = arp.hw_addr_type() == ArpHardwareId::ETHERNET
                    && arp.proto_addr_type() == EtherType::IPV4
                    && arp.hw_addr_size() == 6
                    && arp.proto_addr_size() == 4;
                let sender = ipv4(arp.sender_protocol_addr());
                if !eth_ipv4 {
                    breaks("the guest sent an ARP packet that is not Ethernet/IPv4");
                } else if arp.sender_hw_addr() != rules.mac || !(sender == rules.guest || sender.is_unspecified()) {
                    breaks(&format!(
                        "the guest sent ARP as {sender} at {}; it may speak only as {} at {}",
                        mac_of(arp.sender_hw_addr()),
                        rules.guest,
                        mac(rules.mac)
                    ));
                } else if arp.operation() == ArpOperation::REQUEST {
                    let target = ipv4(arp.target_protocol_addr());
                    if target != rules.gateway && !rules.peers.iter().any(|(peer, _)| *peer.ip() == target) {
                        breaks(&format!(
                            "the guest asked ARP for {target}; it may ask only for the gateway {} or a peer",
                            rules.gateway
                        ));
                    }
                } else if arp.operation() != ArpOperation::REPLY {
                    breaks("the guest sent an ARP packet that is neither a request nor a reply");
                }
            }
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                if h.is_fragmenting_payload() {
                    breaks("the guest sent an IPv4 fragment");
                    continue;
                }
                let dhcp = matches!(&sliced.transport,
                    Some(TransportSlice::Udp(u)) if u.source_port() == 68 && u.destination_port() == 67);
                let src = h.source_addr();
                if src != rules.guest && !(dhcp && src.is_unspecified()) {
                    breaks(&format!(
                        "the guest sent IPv4 as {src}; its own address is {} (0.0.0.0 only for a DHCP client)",
                        rules.guest
                    ));
                    continue;
                }
                if dhcp {
                    continue;
                }
                let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
                    breaks(&format!("the guest sent IPv4 that is neither TCP nor a DHCP client's UDP; {ALLOWED}"));
                    continue;
                };
                if tcp.syn() && !tcp.ack() {
                    let dst = SocketAddrV4::new(h.destination_addr(), tcp.destination_port());
                    syns.insert((dst, tcp.source_port(), tcp.sequence_number()));
                    if let Some(&(net, len)) =
                        rules.self_forbidden.iter().find(|&&(net, len)| in_prefix(*dst.ip(), net, len))
                    {
                        breaks(&format!("the guest sent a SYN into {net}/{len}, which it must never"));
                    }
                    for (i, &(peer, _)) in rules.peers.iter().enumerate() {
                        let seen = &mut peer_syns[i];
                        if peer == dst
                            && seen.distinct.insert((tcp.source_port(), tcp.sequence_number()))
                            && seen.shown.len() < MAX_LISTED
                        {
                            let line = describe(&frame.data);
                            seen.shown.push(format!("{}: {}", at(frame, first), testbench_judge::quote(&line)));
                        }
                    }
                }
            }
            _ => breaks(&format!("the guest sent a frame that is neither ARP nor IPv4; {ALLOWED}")),
        }
    }
    for (i, &(peer, want)) in rules.peers.iter().enumerate() {
        let (got, seen) = (&peer_syns[i].distinct, &peer_syns[i].shown);
        if got.len() as u64 != u64::from(want) {
            broken_count += 1;
            if broken.len() < MAX_LISTED {
                let mut m = format!(
                    "peer {peer} expects {want} connection{}; the capture shows {} distinct SYN{} to it",
                    if want == 1 { "" } else { "s" },
                    got.len(),
                    if got.len() == 1 { "" } else { "s" }
                );
                if !seen.is_empty() {
                    let _ = write!(m, ": {}", seen.join("; "));
                    if got.len() > seen.len() {
                        let _ = write!(m, "; and {} more", got.len() - seen.len());
                    }
                }
                broken.push(m);
            }
        }
    }
    if broken_count > 0 {
        let unlisted = broken_count - broken.len();
        return Err(JudgeError::Broken { listed: broken, unlisted });
    }
    Ok(Summary {
        frames: frames.frames.len(),
        guest_frames,
        slirp_frames: frames.frames.len() - guest_frames,
        syns: syns.len(),
        peer_syns: rules.peers.iter().zip(&peer_syns).map(|(&(p, _), s)| (p, s.distinct.len() as u32)).collect(),
    })
}

/// slirp's emulated hosts: `52:55:` and an IPv4 address.
pub fn is_slirp_mac(mac: [u8; 6]) -> bool {
    mac[0] == 0x52 && mac[1] == 0x55
}

fn in_prefix(addr: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
    u32::from(addr) & mask == u32::from(net) & mask
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    match b {
        [a, b, c, d] => Ipv4Addr::new(*a, *b, *c, *d),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

fn secs(t: Duration) -> String {
    format!("{}.{:06}", t.as_secs(), t.subsec_micros())
}

/// `frame 12 (+1.250000 s, unix 1733340001.250000)`: the number Wireshark shows, the time
/// from the capture's first frame and the record's own time.
fn at(frame: &Frame, first: Duration) -> String {
    format!("frame {} (+{} s, unix {})", frame.index, secs(frame.time.saturating_sub(first)), secs(frame.time))
}

fn mac(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// A frame in one line: addresses, protocol and the fields the rules look at. Never its
/// payload.
pub fn describe(data: &[u8]) -> String {
    let sliced = match SlicedPacket::from_ethernet(data) {
        Ok(s) => s,
        Err(e) => return format!("{} bytes that do not parse: {e}", data.len()),
    };
    let Some(LinkSlice::Ethernet2(eth)) = &sliced.link else {
        return format!("{} bytes, no Ethernet II header", data.len());
    };
    let mut s = format!("{} > {} ", mac(eth.source()), mac(eth.destination()));
    if !sliced.link_exts.is_empty() {
        s.push_str("(tagged) ");
    }
    match &sliced.net {
        Some(NetSlice::Arp(arp)) => {
            let (sip, tip) = (ipv4(arp.sender_protocol_addr()), ipv4(arp.target_protocol_addr()));
            match arp.operation() {
                ArpOperation::REQUEST => {
                    let _ = write!(s, "ARP request who-has {tip} tell {sip}");
                }
                ArpOperation::REPLY => {
                    let _ = write!(s, "ARP reply {sip} is-at {}", mac_of(arp.sender_hw_addr()));
                }
                op => {
                    let _ = write!(s, "ARP operation {} {sip} > {tip}", op.0);
                }
            }
        }
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            let (src, dst) = (h.source_addr(), h.destination_addr());
            let proto = h.protocol().keyword_str().unwrap_or("?").to_string();
            if h.is_fragmenting_payload() {
                let _ = write!(
                    s,
                    "IPv4 fragment {src} > {dst} proto {} ({proto}) id {} offset {}{}",
                    h.protocol().0,
                    h.identification(),
                    u32::from(h.fragments_offset().value()) * 8,
                    if h.more_fragments() { " MF" } else { "" }
                );
                return s;
            }
            match &sliced.transport {
                Some(TransportSlice::Tcp(t)) => {
                    let mut flags = Vec::new();
                    for (on, name) in
                        [(t.syn(), "SYN"), (t.ack(), "ACK"), (t.fin(), "FIN"), (t.rst(), "RST"), (t.psh(), "PSH")]
                    {
                        if on {
                            flags.push(name);
                        }
                    }
                    let _ = write!(
                        s,
                        "IPv4 TCP {src}:{} > {dst}:{} [{}] seq {} len {}",
                        t.source_port(),
                        t.destination_port(),
                        flags.join(","),
                        t.sequence_number(),
                        t.payload().len()
                    );
                }
                Some(TransportSlice::Udp(u)) => {
                    let _ = write!(
                        s,
                        "IPv4 UDP {src}:{} > {dst}:{} len {}",
                        u.source_port(),
                        u.destination_port(),
                        u.payload().len()
                    );
                }
                _ => {
                    let _ = write!(s, "IPv4 {src} > {dst} proto {} ({proto})", h.protocol().0);
                }
            }
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            let _ = write!(s, "IPv6 {} > {} next header {}", h.source_addr(), h.destination_addr(), h.next_header().0);
        }
        None => {
            let _ = write!(s, "ethertype 0x{:04x}, {} bytes", eth.ether_type().0, data.len());
        }
    }
    s
}

fn mac_of(b: &[u8]) -> String {
    match <[u8; 6]>::try_from(b) {
        Ok(m) => mac(m),
        Err(_) => format!("{b:02x?}"),
    }
}
