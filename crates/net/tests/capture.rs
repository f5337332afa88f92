//! The capture read fail-closed and judged, on pcap files written here the way QEMU's
//! filter-dump writes them (little-endian classic pcap, microseconds, snaplen 65536,
//! Ethernet), frames made with etherparse's builders.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use etherparse::{ArpEthIpv4Packet, ArpOperation, PacketBuilder};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter, RawPcapPacket};
use pcap_file::{DataLink, Endianness};
use testbench_net::capture::{self, CaptureError, JudgeError, Rules};

const GUEST_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const GW_MAC: [u8; 6] = [0x52, 0x55, 0x0a, 0x00, 0x02, 0x02];
const GUEST: [u8; 4] = [10, 0, 2, 15];
const GW: [u8; 4] = [10, 0, 2, 2];
const PEER: [u8; 4] = [10, 0, 9, 100];
const T0: u64 = 1_764_800_000;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("testbench-net-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.pcap"));
    let _ = std::fs::remove_file(&path);
    path
}

fn qemu_header() -> PcapHeader {
    PcapHeader { snaplen: 65536, endianness: Endianness::Little, ..PcapHeader::default() }
}

/// Writes `frames` as QEMU would, one every 10 ms of guest time.
fn write_pcap(path: &Path, header: PcapHeader, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = Duration::from_secs(T0) + Duration::from_millis(10 * i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).unwrap();
    }
}

fn arp(from_mac: [u8; 6], to_mac: [u8; 6], op: ArpOperation, sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let packet = ArpEthIpv4Packet {
        operation: op,
        sender_mac: from_mac,
        sender_ipv4: sender,
        target_mac: if op == ArpOperation::REQUEST { [0; 6] } else { to_mac },
        target_ipv4: target,
    };
    let b = PacketBuilder::ethernet2(from_mac, to_mac).arp(packet.into());
    let mut out = Vec::new();
    b.write(&mut out).unwrap();
    out
}

fn tcp(from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u32, syn: bool, ack: Option<u32>, payload: &[u8]) -> Vec<u8> {
    let (src_mac, dst_mac) = if from.0 == GUEST { (GUEST_MAC, GW_MAC) } else { (GW_MAC, GUEST_MAC) };
    let mut b = PacketBuilder::ethernet2(src_mac, dst_mac).ipv4(from.0, to.0, 64).tcp(from.1, to.1, seq, 64240);
    if syn {
        b = b.syn();
    }
    if let Some(a) = ack {
        b = b.ack(a);
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

fn udp(from: ([u8; 4], u16), to: ([u8; 4], u16)) -> Vec<u8> {
    udp_from(GUEST_MAC, from, to)
}

fn udp_from(mac: [u8; 6], from: ([u8; 4], u16), to: ([u8; 4], u16)) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(mac, [0xff; 6]).ipv4(from.0, to.0, 64).udp(from.1, to.1);
    let mut out = Vec::new();
    b.write(&mut out, &[0u8; 8]).unwrap();
    out
}

/// A guest that asks ARP for its gateway, answers slirp's ARP, and opens one connection
/// to the peer (its first SYN sent twice, as a retransmission).
fn good_frames() -> Vec<Vec<u8>> {
    vec![
        arp(GUEST_MAC, [0xff; 6], ArpOperation::REQUEST, GUEST, GW),
        arp(GW_MAC, GUEST_MAC, ArpOperation::REPLY, GW, GUEST),
        arp(GW_MAC, [0xff; 6], ArpOperation::REQUEST, GW, GUEST),
        arp(GUEST_MAC, GW_MAC, ArpOperation::REPLY, GUEST, GW),
        tcp((GUEST, 40000), (PEER, 7), 1000, true, None, b""),
        tcp((GUEST, 40000), (PEER, 7), 1000, true, None, b""),
        tcp((PEER, 7), (GUEST, 40000), 5000, true, Some(1001), b""),
        tcp((GUEST, 40000), (PEER, 7), 1001, false, Some(5001), b"hello\n"),
        tcp((PEER, 7), (GUEST, 40000), 5001, false, Some(1007), b"hello\n"),
    ]
}

fn rules(connections: u32) -> Rules {
    Rules {
        gateway: Ipv4Addr::from(GW),
        guest: Ipv4Addr::from(GUEST),
        mac: GUEST_MAC,
        self_forbidden: vec![(Ipv4Addr::new(10, 0, 2, 0), 24), (Ipv4Addr::new(127, 0, 0, 0), 8)],
        peers: vec![(SocketAddrV4::new(Ipv4Addr::from(PEER), 7), connections)],
    }
}

fn judged(name: &str, frames: &[Vec<u8>], rules: &Rules) -> Result<capture::Summary, JudgeError> {
    let path = scratch(name);
    write_pcap(&path, qemu_header(), frames);
    let read = capture::read(&path, false).unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(read.frames.len(), frames.len());
    capture::judge(&read, rules)
}

/// The rule breaks a judge found, as the failure says them; any other error fails the test.
fn broken(error: JudgeError) -> String {
    assert!(matches!(error, JudgeError::Broken { .. }), "not a rule break: {error}");
    error.to_string()
}

#[test]
fn a_good_capture_reads_and_passes() {
    let path = scratch("good");
    write_pcap(&path, qemu_header(), &good_frames());
    let frames = capture::read(&path, false).unwrap();
    assert_eq!(frames.snaplen, 65536);
    assert_eq!(frames.frames.len(), 9);
    assert_eq!(frames.frames[0].index, 1);
    assert_eq!(frames.frames[8].time, Duration::from_secs(T0) + Duration::from_millis(80));
    let summary = capture::judge(&frames, &rules(1)).unwrap();
    assert_eq!(summary.frames, 9);
    assert_eq!(summary.guest_frames, 5);
    assert_eq!(summary.slirp_frames, 4);
    assert_eq!(summary.syns, 1);
    assert_eq!(summary.peer_syns, vec![(SocketAddrV4::new(Ipv4Addr::from(PEER), 7), 1)]);
}

#[test]
fn big_endian_and_nanosecond_captures_read_too() {
    let path = scratch("big");
    let header =
        PcapHeader { endianness: Endianness::Big, ts_resolution: pcap_file::TsResolution::NanoSecond, ..qemu_header() };
    write_pcap(&path, header, &good_frames());
    assert_eq!(capture::read(&path, false).unwrap().frames.len(), 9);
}

#[test]
fn missing_empty_and_header_only_fail() {
    let path = scratch("missing");
    let e = capture::read(&path, false).unwrap_err();
    assert!(matches!(e, CaptureError::Missing { .. }), "{e}");
    assert!(e.to_string().starts_with(&format!("the capture {} is missing: ", path.display())), "{e}");

    std::fs::write(&path, b"").unwrap();
    let e = capture::read(&path, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the capture {} is empty (0 bytes): not even the pcap header was written", path.display())
    );

    std::fs::write(&path, [0xd4, 0xc3, 0xb2, 0xa1, 2, 0]).unwrap();
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().ends_with("its pcap header is cut: 6 of 24 bytes"), "{e}");

    write_pcap(&path, qemu_header(), &[]);
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().ends_with("holds no frame (its header only)"), "{e}");
    // Nothing to cut for the self-check either, and that fails too.
    let e = capture::read(&path, true).unwrap_err();
    assert!(e.to_string().ends_with("could not be cut (self-check): it holds no whole frame to cut"), "{e}");
}

#[test]
fn a_malformed_header_fails() {
    let path = scratch("magic");
    let mut bytes = vec![0u8; 24];
    bytes[..4].copy_from_slice(b"\x0a\x0d\x0d\x0a"); // pcapng, not what QEMU writes
    std::fs::write(&path, &bytes).unwrap();
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().ends_with("its pcap header is malformed: PcapHeader: wrong magic number"), "{e}");

    write_pcap(&path, PcapHeader { datalink: DataLink::RAW, ..qemu_header() }, &good_frames());
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().contains("link type RAW, not Ethernet (1)"), "{e}");
}

#[test]
fn the_self_check_cut_fails_naming_the_frame() {
    let path = scratch("truncate");
    write_pcap(&path, qemu_header(), &good_frames());
    let full = std::fs::metadata(&path).unwrap().len() as usize;
    let last_len = good_frames()[8].len();
    let e = capture::read(&path, true).unwrap_err();
    let offset = full - last_len - 16;
    assert_eq!(
        e.to_string(),
        format!(
            "the capture {}: frame 9 at byte {offset} is cut: {} of its {last_len} bytes",
            path.display(),
            last_len / 2
        )
    );
    // The file itself was cut.
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, offset + 16 + last_len / 2);
}

#[test]
fn a_cut_record_header_fails() {
    let path = scratch("cuthdr");
    write_pcap(&path, qemu_header(), &good_frames()[..2]);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    bytes.extend_from_slice(&[1, 2, 3, 4, 5]);
    std::fs::write(&path, &bytes).unwrap();
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().ends_with(&format!("frame 3's record header at byte {len} is cut: 5 of 16 bytes")), "{e}");
}

fn raw_record(path: &Path, incl_len: u32, orig_len: u32, data: &[u8]) {
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), qemu_header()).unwrap();
    let frame = good_frames()[0].clone();
    w.write_packet(&PcapPacket::new(Duration::from_secs(T0), frame.len() as u32, &frame)).unwrap();
    w.write_raw_packet(&RawPcapPacket { ts_sec: T0 as u32, ts_frac: 5, incl_len, orig_len, data: data.into() })
        .unwrap();
}

#[test]
fn malformed_records_fail() {
    let path = scratch("records");
    let frame = good_frames()[4].clone();
    let n = frame.len() as u32;
    // Recorded shorter than the frame was (the snaplen cut it).
    raw_record(&path, n - 4, n, &frame[..frame.len() - 4]);
    let e = capture::read(&path, false).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "frame 2's record at byte 82 is malformed: recorded {} of the frame's {n} bytes",
            n - 4
        )),
        "{e}"
    );
    // More than the file's snaplen.
    let big = vec![0u8; 70_000];
    raw_record(&path, 70_000, 70_000, &big);
    let e = capture::read(&path, false).unwrap_err();
    assert!(e.to_string().ends_with("is malformed: PacketHeader incl_len > snap_len"), "{e}");
}

#[test]
fn malformed_frames_fail() {
    let path = scratch("frames");
    // Shorter than an Ethernet header.
    raw_record(&path, 10, 10, &[0u8; 10]);
    let e = capture::read(&path, false).unwrap_err();
    assert!(
        e.to_string().contains("frame 2 (at unix time 1764800000.000005) is not a well-formed Ethernet frame: "),
        "{e}"
    );
    // An IPv4 packet whose total length runs past the frame.
    let mut frame = good_frames()[4].clone();
    frame.truncate(frame.len() - 8);
    raw_record(&path, frame.len() as u32, frame.len() as u32, &frame);
    let e = capture::read(&path, false).unwrap_err();
    assert!(
        e.to_string().contains("frame 2 (at unix time 1764800000.000005) is not a well-formed Ethernet frame: "),
        "{e}"
    );
}

#[test]
fn an_arp_request_for_another_address_fails() {
    let mut frames = good_frames();
    frames.insert(1, arp(GUEST_MAC, [0xff; 6], ArpOperation::REQUEST, GUEST, [10, 0, 2, 3]));
    let e = broken(judged("arp", &frames, &rules(1)).unwrap_err());
    assert_eq!(
        e,
        "frame 2 (+0.010000 s, unix 1764800000.010000): the guest asked ARP for 10.0.2.3; it may ask only for the gateway 10.0.2.2 or a peer: \
         52:54:00:12:34:56 > ff:ff:ff:ff:ff:ff ARP request who-has 10.0.2.3 tell 10.0.2.15"
    );
}

#[test]
fn an_arp_request_for_a_peer_passes_and_for_its_neighbour_fails() {
    // A guest whose lease puts the peer on its link (slirp's 10.0.0.0/16, no router) asks
    // for the peer itself.
    let mut frames = good_frames();
    frames.insert(1, arp(GUEST_MAC, [0xff; 6], ArpOperation::REQUEST, GUEST, PEER));
    judged("arp-peer", &frames, &rules(1)).unwrap();
    let mut neighbour = PEER;
    neighbour[3] ^= 1;
    frames[1] = arp(GUEST_MAC, [0xff; 6], ArpOperation::REQUEST, GUEST, neighbour);
    let e = broken(judged("arp-peer-neighbour", &frames, &rules(1)).unwrap_err());
    assert!(
        e.contains("the guest asked ARP for 10.0.9.101; it may ask only for the gateway 10.0.2.2 or a peer"),
        "{e}"
    );
}

#[test]
fn udp_from_the_guest_fails_unless_a_dhcp_clients() {
    // A DHCP client's discover (from 0.0.0.0) and its renewal (from its own address, to the
    // server at the gateway) pass.
    let mut frames = good_frames();
    frames.push(udp(([0, 0, 0, 0], 68), ([255, 255, 255, 255], 67)));
    frames.push(udp((GUEST, 68), (GW, 67)));
    let s = judged("dhcp", &frames, &rules(1)).unwrap();
    assert_eq!(s.guest_frames, 7);
    // Any other UDP fails: to DNS, from port 68 to another port, to port 67 from another,
    // and 67 to 68 (a server's).
    for (n, (from, to)) in
        [((GUEST, 40000), (GW, 53)), ((GUEST, 68), (GW, 53)), ((GUEST, 40000), (GW, 67)), ((GUEST, 67), (GW, 68))]
            .into_iter()
            .enumerate()
    {
        let mut frames = good_frames();
        frames.push(udp(from, to));
        let e = broken(judged(&format!("udp{n}"), &frames, &rules(1)).unwrap_err());
        assert!(
            e.starts_with(
                "frame 10 (+0.090000 s, unix 1764800000.090000): the guest sent IPv4 that is neither TCP nor a DHCP client's UDP; \
                 only ARP, IPv4 TCP and a DHCP client's UDP (68 to 67) are allowed: "
            ),
            "{e}"
        );
        assert!(e.ends_with(&format!("IPv4 UDP 10.0.2.15:{} > 10.0.2.2:{} len 8", from.1, to.1)), "{e}");
    }
}

#[test]
fn a_guest_sending_as_another_address_fails_quoting_the_frame() {
    // IPv4 from another address of its /24: TCP, and UDP dressed as a DHCP client's.
    let from_card = |mut frame: Vec<u8>| {
        frame[6..12].copy_from_slice(&GUEST_MAC);
        frame
    };
    let mut frames = good_frames();
    frames.push(from_card(tcp(([10, 0, 2, 16], 40000), (PEER, 7), 5, false, Some(1), b"x")));
    let e = broken(judged("spoof-tcp", &frames, &rules(1)).unwrap_err());
    assert!(
        e.starts_with(
            "frame 10 (+0.090000 s, unix 1764800000.090000): the guest sent IPv4 as 10.0.2.16; \
             its own address is 10.0.2.15 (0.0.0.0 only for a DHCP client): "
        ),
        "{e}"
    );
    assert!(e.ends_with("IPv4 TCP 10.0.2.16:40000 > 10.0.9.100:7 [ACK] seq 5 len 1"), "{e}");
    let mut frames = good_frames();
    frames.push(udp(([10, 0, 2, 16], 68), (GW, 67)));
    let e = broken(judged("spoof-dhcp", &frames, &rules(1)).unwrap_err());
    assert!(e.contains("the guest sent IPv4 as 10.0.2.16;"), "{e}");
    // 0.0.0.0 is a DHCP client's only: TCP from it fails.
    let mut frames = good_frames();
    frames.push(from_card(tcp(([0, 0, 0, 0], 40000), (PEER, 7), 5, false, Some(1), b"x")));
    let e = broken(judged("spoof-zero", &frames, &rules(1)).unwrap_err());
    assert!(e.contains("the guest sent IPv4 as 0.0.0.0;"), "{e}");
    // Another MAC (not slirp's): the frame is the guest's, and fails, whatever it holds.
    let other = [0x52, 0x54, 0x00, 0x12, 0x34, 0x57];
    let mut frames = good_frames();
    frames.push(udp_from(other, ([0, 0, 0, 0], 68), ([255, 255, 255, 255], 67)));
    let e = broken(judged("spoof-mac", &frames, &rules(1)).unwrap_err());
    assert!(
        e.starts_with(
            "frame 10 (+0.090000 s, unix 1764800000.090000): the guest sent as MAC 52:54:00:12:34:57; \
             the card's is 52:54:00:12:34:56: 52:54:00:12:34:57 > ff:ff:ff:ff:ff:ff IPv4 UDP 0.0.0.0:68"
        ),
        "{e}"
    );
    // ARP as another address: a reply claiming the gateway's address.
    let mut frames = good_frames();
    frames.push(arp(GUEST_MAC, GW_MAC, ArpOperation::REPLY, GW, GUEST));
    let e = broken(judged("spoof-arp", &frames, &rules(1)).unwrap_err());
    assert!(
        e.contains(
            "the guest sent ARP as 10.0.2.2 at 52:54:00:12:34:56; it may speak only as 10.0.2.15 at 52:54:00:12:34:56"
        ),
        "{e}"
    );
    // An ARP probe (sender 0.0.0.0) is the guest's own.
    let mut frames = good_frames();
    frames.push(arp(GUEST_MAC, [0xff; 6], ArpOperation::REQUEST, [0; 4], GW));
    judged("arp-probe", &frames, &rules(1)).unwrap();
}

#[test]
fn a_fragment_fails() {
    let mut frames = good_frames();
    let mut frag = tcp((GUEST, 40001), (PEER, 7), 9, false, Some(1), b"0123456789abcdef");
    frag[14 + 6] |= 0x20; // MF
                          // The IPv4 checksum is not checked (nor is it by the rules): the flag is what counts.
    frames.push(frag);
    let e = broken(judged("frag", &frames, &rules(1)).unwrap_err());
    assert!(e.contains("the guest sent an IPv4 fragment: "), "{e}");
    assert!(e.ends_with("IPv4 fragment 10.0.2.15 > 10.0.9.100 proto 6 (TCP) id 0 offset 0 MF"), "{e}");
}

#[test]
fn a_syn_into_a_forbidden_prefix_fails() {
    let mut frames = good_frames();
    frames.push(tcp((GUEST, 40002), (GW, 22), 77, true, None, b""));
    let e = broken(judged("forbidden", &frames, &rules(1)).unwrap_err());
    assert_eq!(
        e,
        "frame 10 (+0.090000 s, unix 1764800000.090000): the guest sent a SYN into 10.0.2.0/24, which it must never: \
         52:54:00:12:34:56 > 52:55:0a:00:02:02 IPv4 TCP 10.0.2.15:40002 > 10.0.2.2:22 [SYN] seq 77 len 0"
    );
    // The same frame with ACK set is no SYN of a new connection.
    let mut frames = good_frames();
    frames.push(tcp((GUEST, 40002), (GW, 22), 77, true, Some(1), b""));
    assert!(judged("forbidden-ack", &frames, &rules(1)).is_ok());
}

#[test]
fn a_peer_count_off_by_one_fails() {
    // One connection expected, two opened (distinct source ports).
    let mut frames = good_frames();
    frames.push(tcp((GUEST, 40003), (PEER, 7), 2000, true, None, b""));
    let e = broken(judged("two", &frames, &rules(1)).unwrap_err());
    assert!(
        e.starts_with(
            "peer 10.0.9.100:7 expects 1 connection; the capture shows 2 distinct SYNs to it: frame 5 (+0.040000 s"
        ),
        "{e}"
    );
    assert!(e.contains("; frame 10 (+0.090000 s, unix 1764800000.090000): 52:54:00:12:34:56 > 52:55:0a:00:02:02 IPv4 TCP 10.0.2.15:40003 > 10.0.9.100:7 [SYN] seq 2000 len 0"), "{e}");
    // Two expected, one opened (the retransmitted SYN counts once).
    let e = broken(judged("one", &good_frames(), &rules(2)).unwrap_err());
    assert!(
        e.starts_with("peer 10.0.9.100:7 expects 2 connections; the capture shows 1 distinct SYN to it: frame 5"),
        "{e}"
    );
    // One expected, none seen.
    let e = broken(judged("none", &good_frames()[..4], &rules(1)).unwrap_err());
    assert_eq!(e, "peer 10.0.9.100:7 expects 1 connection; the capture shows 0 distinct SYNs to it");
}

#[test]
fn a_case_with_peers_needs_a_live_one() {
    let e = judged("dead", &good_frames()[..4], &rules(0)).unwrap_err();
    assert!(matches!(e, JudgeError::NoLivePeer), "{e}");
    let e = e.to_string();
    assert!(e.starts_with("a case with peers needs one that expects a connection"), "{e}");
    // No peers at all: the frame rules alone.
    let no_peers = Rules { peers: vec![], ..rules(0) };
    let s = judged("nopeers", &good_frames()[..4], &no_peers).unwrap();
    assert_eq!(s.peer_syns, vec![]);
}

#[test]
fn other_protocols_fail_and_many_breaks_are_counted() {
    let mut frames = good_frames();
    let v6 = {
        let b = PacketBuilder::ethernet2(GUEST_MAC, [0x33, 0x33, 0, 0, 0, 2]).ipv6([0xfe; 16], [0xff; 16], 1).udp(1, 2);
        let mut out = Vec::new();
        b.write(&mut out, b"").unwrap();
        out
    };
    for _ in 0..5 {
        frames.push(v6.clone());
    }
    let e = judged("v6", &frames, &rules(1)).unwrap_err();
    assert!(matches!(&e, JudgeError::Broken { listed, unlisted: 2 } if listed.len() == 3), "{e}");
    let e = e.to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "{e}");
    assert!(lines[0].contains("the guest sent a frame that is neither ARP nor IPv4"), "{e}");
    assert!(lines[0].contains(" IPv6 fefe:"), "{e}");
    assert_eq!(lines[3], "(and 2 more rule breaks)");
}

#[test]
fn slirp_frames_are_not_the_guests() {
    // slirp's UDP (a DNS answer, say) and IPv6 are not judged: only the guest's output is.
    let mut frames = good_frames();
    let b = PacketBuilder::ethernet2([0x52, 0x55, 0x0a, 0x00, 0x02, 0x03], GUEST_MAC)
        .ipv4([10, 0, 2, 3], GUEST, 64)
        .udp(53, 3333);
    let mut out = Vec::new();
    b.write(&mut out, b"x").unwrap();
    frames.push(out);
    let s = judged("slirp", &frames, &rules(1)).unwrap();
    assert_eq!(s.slirp_frames, 5);
}

#[test]
fn the_describe_line_is_bounded() {
    let frame = tcp((GUEST, 1), (PEER, 7), 1, false, Some(1), &[b'x'; 1400]);
    let line = capture::describe(&frame);
    assert!(line.len() < 200, "{line}");
    assert!(line.ends_with("[ACK] seq 1 len 1400"), "{line}");
}

/// A real filter-dump from QEMU 10.0.2 (riscv64 `virt`, no guest running, one host
/// connection to a forward): slirp asks ARP for the guest three times, unanswered.
/// QEMU's header: little-endian classic pcap, microseconds, snaplen 65536, Ethernet.
const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/qemu-10.0-slirp-arp.pcap");

#[test]
fn a_real_filter_dump_reads() {
    let bytes = std::fs::read(REAL).unwrap();
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian magic, microseconds");
    assert_eq!(&bytes[20..24], &[1, 0, 0, 0], "linktype 1, Ethernet");
    let frames = capture::read(Path::new(REAL), false).unwrap();
    assert_eq!(frames.snaplen, 65536);
    assert_eq!(frames.frames.len(), 3);
    for f in &frames.frames {
        assert_eq!(f.data.len(), 42, "slirp's ARP is not padded to 60 bytes");
        assert!(capture::is_slirp_mac(f.data[6..12].try_into().unwrap()));
        assert_eq!(
            capture::describe(&f.data),
            "52:55:0a:00:02:02 > ff:ff:ff:ff:ff:ff ARP request who-has 10.0.2.15 tell 10.0.2.2"
        );
    }
    let no_peers = Rules { peers: vec![], ..rules(0) };
    let s = capture::judge(&frames, &no_peers).unwrap();
    assert_eq!((s.frames, s.guest_frames, s.slirp_frames), (3, 0, 3));
    // The self-check's cut on a copy of it.
    let copy = scratch("real-copy");
    std::fs::copy(REAL, &copy).unwrap();
    let e = capture::read(&copy, true).unwrap_err();
    assert!(e.to_string().ends_with("frame 3 at byte 140 is cut: 21 of its 42 bytes"), "{e}");
}

#[test]
fn the_filter_dump_argument() {
    // QEMU 10.0 wrote its header to /tmp/x,y/c.pcap from this form.
    assert_eq!(
        capture::filter_dump_arg("cap0", "net0", Path::new("/tmp/x,y/c.pcap")).unwrap(),
        "filter-dump,id=cap0,netdev=net0,file=/tmp/x,,y/c.pcap"
    );
    use std::os::unix::ffi::OsStrExt;
    let bad = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/\xff.pcap"));
    let e = capture::filter_dump_arg("cap0", "net0", bad).unwrap_err();
    assert!(matches!(&e, CaptureError::PathNotUtf8 { path } if path == bad), "{e}");
    assert!(e.to_string().ends_with("is not UTF-8"));
}

/// A real filter-dump with a guest on the card: Debian's U-Boot 2023.01 for riscv64
/// (`qemu-riscv64_smode`) under QEMU 10.0.2, on the widened network, running
/// `ping 10.0.2.2`. Both directions are there: the guest's ARP request and slirp's reply
/// (padded to 60 bytes, unlike the guest's 42), the guest's ICMP echo and slirp's answer.
const REAL_PING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/qemu-10.0-uboot-ping.pcap");

#[test]
fn a_real_guest_ping_is_refused() {
    let frames = capture::read(Path::new(REAL_PING), false).unwrap();
    let lines: Vec<String> = frames.frames.iter().map(|f| capture::describe(&f.data)).collect();
    assert_eq!(
        lines,
        [
            "52:54:00:12:34:56 > ff:ff:ff:ff:ff:ff ARP request who-has 10.0.2.2 tell 10.0.2.15",
            "52:55:0a:00:02:02 > 52:54:00:12:34:56 ARP reply 10.0.2.2 is-at 52:55:0a:00:02:02",
            "52:54:00:12:34:56 > 52:55:0a:00:02:02 IPv4 10.0.2.15 > 10.0.2.2 proto 1 (ICMP)",
            "52:55:0a:00:02:02 > 52:54:00:12:34:56 IPv4 10.0.2.2 > 10.0.2.15 proto 1 (ICMP)",
        ]
    );
    assert_eq!(frames.frames[1].data.len(), 64);
    let no_peers = Rules { peers: vec![], ..rules(0) };
    let e = broken(capture::judge(&frames, &no_peers).unwrap_err());
    assert!(
        e.starts_with(
            "frame 3 (+0.000587 s, unix 1796416701.332528): the guest sent IPv4 that is neither TCP nor a DHCP"
        ),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    // Without the ICMP the same guest passes: its ARP for the gateway is allowed.
    let first_two = testbench_net::Frames { snaplen: frames.snaplen, frames: frames.frames[..2].to_vec() };
    let s = capture::judge(&first_two, &no_peers).unwrap();
    assert_eq!((s.guest_frames, s.slirp_frames), (1, 1));
}
