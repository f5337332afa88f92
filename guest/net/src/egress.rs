//! The egress check: what the stack may put on the wire, read from the frame's own bytes
//! just before the device gets it. A frame leaves only as the card (its source MAC) and as
//! the leased address (its IPv4 or ARP sender address); before a lease, only the DHCP
//! client's own traffic leaves, from 0.0.0.0 (UDP port 68 to port 67). Only IPv4 and ARP
//! leave at all. This is the rule a virtual switch applies at a guest's port: here the
//! guest applies it to itself, so a bug in the stack above (or a program asking for a
//! forged frame) cannot make the guest speak as another machine.

/// Ethernet's header: destination, source, type.
pub const ETHERNET_HEADER: usize = 14;
/// The largest frame the stack sends or takes: a 1500-byte payload and the header (no FCS).
pub const FRAME_MAX: usize = 1514;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
/// ARP for IPv4 over Ethernet: 28 bytes.
const ARP_LEN: usize = 28;
const IPV4_MIN: usize = 20;
const UDP_HEADER: usize = 8;
const PROTO_UDP: u8 = 17;
const DHCP_CLIENT_PORT: u16 = 68;
const DHCP_SERVER_PORT: u16 = 67;

/// Why a frame was refused before the device had it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than its headers (Ethernet, then the ARP or IPv4 header, then UDP's for a
    /// frame from 0.0.0.0).
    Short,
    /// The frame's (or its ARP sender's) MAC is not the card's (the MAC it named).
    SourceMac([u8; 6]),
    /// Neither IPv4 nor ARP (the EtherType).
    EtherType(u16),
    /// The IPv4 source (or the ARP sender address) is not the leased address, and the
    /// frame is not the DHCP client's from 0.0.0.0 (the address it named).
    SourceIp([u8; 4]),
}

fn be16(frame: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at.checked_add(1)?)?]))
}

fn array<const N: usize>(frame: &[u8], at: usize) -> Option<[u8; N]> {
    frame.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Whether `frame` may leave a card whose MAC is `mac`, holding the lease of `leased`
/// (None before a lease). Pure: reads only the frame's bytes.
pub fn check(frame: &[u8], mac: [u8; 6], leased: Option<[u8; 4]>) -> Result<(), Refusal> {
    let source: [u8; 6] = array(frame, 6).ok_or(Refusal::Short)?;
    if source != mac {
        return Err(Refusal::SourceMac(source));
    }
    let ethertype = be16(frame, 12).ok_or(Refusal::Short)?;
    let body = &frame[ETHERNET_HEADER..];
    match ethertype {
        ETHERTYPE_ARP => {
            if body.len() < ARP_LEN {
                return Err(Refusal::Short);
            }
            let sender_mac: [u8; 6] = array(body, 8).ok_or(Refusal::Short)?;
            if sender_mac != mac {
                return Err(Refusal::SourceMac(sender_mac));
            }
            let sender_ip: [u8; 4] = array(body, 14).ok_or(Refusal::Short)?;
            if Some(sender_ip) != leased {
                return Err(Refusal::SourceIp(sender_ip));
            }
            Ok(())
        }
        ETHERTYPE_IPV4 => {
            let source_ip: [u8; 4] = array(body, 12).ok_or(Refusal::Short)?;
            if body.len() < IPV4_MIN {
                return Err(Refusal::Short);
            }
            if Some(source_ip) == leased {
                return Ok(());
            }
            if source_ip == [0; 4] && dhcp_client(body)? {
                return Ok(());
            }
            Err(Refusal::SourceIp(source_ip))
        }
        other => Err(Refusal::EtherType(other)),
    }
}

/// Whether the IPv4 packet `ip` is UDP from the DHCP client's port to the server's.
fn dhcp_client(ip: &[u8]) -> Result<bool, Refusal> {
    let header = usize::from(ip[0] & 0x0f) * 4;
    if ip[9] != PROTO_UDP || header < IPV4_MIN {
        return Ok(false);
    }
    let udp = ip.get(header..).filter(|u| u.len() >= UDP_HEADER).ok_or(Refusal::Short)?;
    Ok(be16(udp, 0) == Some(DHCP_CLIENT_PORT) && be16(udp, 2) == Some(DHCP_SERVER_PORT))
}
