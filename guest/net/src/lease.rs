//! The lease: what smoltcp's DHCP client accepted, read again from the very ACK that made
//! it (for the lease time, which smoltcp keeps to itself and defaults to two minutes when
//! the server gives none), and judged by rules smoltcp does not apply.

use smoltcp::socket::dhcpv4::Config;
use smoltcp::wire::{
    DhcpMessageType, DhcpPacket, DhcpRepr, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, UdpPacket,
};

/// At most this many DNS servers are kept (smoltcp's own limit).
pub const MAX_DNS: usize = 3;

/// A lease the stack holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Our address.
    pub address: [u8; 4],
    /// The subnet's prefix length (from the subnet mask), in 1..=30.
    pub prefix_len: u8,
    /// The gateway, inside the subnet, when the server named one.
    pub router: Option<[u8; 4]>,
    /// The DNS servers the server named (unicast ones only), `dns_count` of them.
    pub dns: [[u8; 4]; MAX_DNS],
    pub dns_count: u8,
    /// The server's identifier.
    pub server: [u8; 4],
    /// The lease time the ACK gave, in seconds (never 0).
    pub lease_secs: u32,
    /// When the last ACK of this lease (the first, or a renewal's) was taken, in ms.
    pub acked_ms: u64,
    /// How many ACKs renewed it for the same address.
    pub renewals: u32,
}

impl Lease {
    /// The DNS servers.
    pub fn dns_servers(&self) -> &[[u8; 4]] {
        &self.dns[..usize::from(self.dns_count).min(MAX_DNS)]
    }

    /// When the lease ends, in ms, unless renewed.
    pub fn expires_ms(&self) -> u64 {
        self.acked_ms.saturating_add(u64::from(self.lease_secs) * 1000)
    }
}

/// Why an ACK that smoltcp accepted was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseRefusal {
    /// The frame that made the lease is not a DHCP ACK for its address (no such frame).
    NoAck,
    /// The ACK states no lease time (option 51).
    NoLeaseTime,
    /// The ACK's lease time is 0.
    ZeroLeaseTime,
    /// The ACK names another server than the one the client asked (the one it names).
    OtherServer([u8; 4]),
    /// The prefix length is outside 1..=30 (the length).
    BadPrefix(u8),
    /// The address is no host's: in 0/8, 127/8 or 240/4, or the subnet's own network or
    /// broadcast address.
    NotAHost([u8; 4]),
    /// The router is outside the subnet, or is our own address.
    RouterOffLink([u8; 4]),
}

fn mask(prefix_len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix_len)).unwrap_or(0)
}

/// Reads the lease out of the ACK `frame` (the frame just processed) and `config`
/// (smoltcp's reading of it), by our rules.
pub fn take(config: &Config<'_>, frame: &[u8], now_ms: u64) -> Result<Lease, LeaseRefusal> {
    let address = config.address.address().octets();
    let prefix_len = config.address.prefix_len();
    let (lease_secs, server) = ack_lease_time(frame, address)?;
    if server != Some(config.server.identifier.octets()) {
        return Err(LeaseRefusal::OtherServer(server.unwrap_or_default()));
    }
    let lease_secs = lease_secs.ok_or(LeaseRefusal::NoLeaseTime)?;
    if lease_secs == 0 {
        return Err(LeaseRefusal::ZeroLeaseTime);
    }
    if !(1..=30).contains(&prefix_len) {
        return Err(LeaseRefusal::BadPrefix(prefix_len));
    }
    let ours = u32::from_be_bytes(address);
    let host = ours & !mask(prefix_len);
    if matches!(address[0], 0 | 127 | 240..=255) || host == 0 || host == !mask(prefix_len) {
        return Err(LeaseRefusal::NotAHost(address));
    }
    let router = config.router.map(|r| r.octets());
    if let Some(r) = router {
        let theirs = u32::from_be_bytes(r);
        if theirs & mask(prefix_len) != ours & mask(prefix_len) || theirs == ours {
            return Err(LeaseRefusal::RouterOffLink(r));
        }
    }
    let mut dns = [[0; 4]; MAX_DNS];
    for (slot, server) in dns.iter_mut().zip(config.dns_servers.iter()) {
        *slot = server.octets();
    }
    Ok(Lease {
        address,
        prefix_len,
        router,
        dns,
        dns_count: config.dns_servers.len().min(MAX_DNS) as u8,
        server: config.server.identifier.octets(),
        lease_secs,
        acked_ms: now_ms,
        renewals: 0,
    })
}

/// The lease time and the server identifier of the DHCP ACK for `address` in the
/// Ethernet `frame`.
fn ack_lease_time(frame: &[u8], address: [u8; 4]) -> Result<(Option<u32>, Option<[u8; 4]>), LeaseRefusal> {
    let ethernet = EthernetFrame::new_checked(frame).map_err(|_| LeaseRefusal::NoAck)?;
    if ethernet.ethertype() != EthernetProtocol::Ipv4 {
        return Err(LeaseRefusal::NoAck);
    }
    let ip = Ipv4Packet::new_checked(ethernet.payload()).map_err(|_| LeaseRefusal::NoAck)?;
    if ip.next_header() != IpProtocol::Udp {
        return Err(LeaseRefusal::NoAck);
    }
    let udp = UdpPacket::new_checked(ip.payload()).map_err(|_| LeaseRefusal::NoAck)?;
    let dhcp = DhcpPacket::new_checked(udp.payload()).map_err(|_| LeaseRefusal::NoAck)?;
    let repr = DhcpRepr::parse(&dhcp).map_err(|_| LeaseRefusal::NoAck)?;
    if repr.message_type != DhcpMessageType::Ack || repr.your_ip.octets() != address {
        return Err(LeaseRefusal::NoAck);
    }
    Ok((repr.lease_duration, repr.server_identifier.map(|s| s.octets())))
}
