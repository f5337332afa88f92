//! The host tests' network: a hub that gives every frame to every other port and keeps
//! them all, a scripted DHCP server on one port, and a TCP peer made with smoltcp itself.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use net::Device;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{
    DhcpMessageType, DhcpPacket, DhcpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr,
    HardwareAddress, IpAddress, IpCidr, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
};

pub const SERVER_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];
pub const SERVER_IP: [u8; 4] = [10, 0, 2, 2];

/// Every frame sent, by the port that sent it, and what waits at each port.
#[derive(Default)]
pub struct Hub {
    pub inbox: Vec<VecDeque<Vec<u8>>>,
    pub log: Vec<(usize, Vec<u8>)>,
}

pub type Shared = Rc<RefCell<Hub>>;

pub fn hub() -> Shared {
    Rc::new(RefCell::new(Hub::default()))
}

impl Hub {
    pub fn port(&mut self) -> usize {
        self.inbox.push(VecDeque::new());
        self.inbox.len() - 1
    }

    pub fn send(&mut self, from: usize, frame: &[u8]) {
        self.log.push((from, frame.to_vec()));
        for (i, inbox) in self.inbox.iter_mut().enumerate() {
            if i != from {
                inbox.push_back(frame.to_vec());
            }
        }
    }

    /// The frames `port` sent.
    pub fn sent_by(&self, port: usize) -> Vec<Vec<u8>> {
        self.log.iter().filter(|(p, _)| *p == port).map(|(_, f)| f.clone()).collect()
    }
}

/// A card on the hub.
pub struct Nic {
    pub mac: [u8; 6],
    pub hub: Shared,
    pub port: usize,
}

impl Nic {
    pub fn new(hub: &Shared, mac: [u8; 6]) -> Nic {
        let port = hub.borrow_mut().port();
        Nic { mac, hub: hub.clone(), port }
    }
}

impl Device for Nic {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }
    fn transmit(&mut self, frame: &[u8]) -> Result<(), net::DeviceError> {
        self.hub.borrow_mut().send(self.port, frame);
        Ok(())
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let frame = self.hub.borrow_mut().inbox[self.port].pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }
}

/// What the scripted server answers with.
#[derive(Clone, Debug)]
pub struct Script {
    pub lease_secs: Option<u32>,
    pub router: Option<[u8; 4]>,
    pub mask: [u8; 4],
    pub dns: Vec<[u8; 4]>,
    /// The address offered to the n-th client (by MAC, in the order they first ask).
    pub first: [u8; 4],
    /// The server identifier in ACKs (the OFFER's is always SERVER_IP).
    pub ack_server: [u8; 4],
}

impl Default for Script {
    fn default() -> Script {
        Script {
            lease_secs: Some(60),
            router: Some(SERVER_IP),
            mask: [255, 255, 255, 0],
            dns: vec![[10, 0, 2, 3]],
            first: [10, 0, 2, 15],
            ack_server: SERVER_IP,
        }
    }
}

/// A request the server saw: its type, its IPv4 source and ciaddr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub kind: DhcpMessageType,
    pub source: [u8; 4],
    pub ciaddr: [u8; 4],
}

pub struct Server {
    pub port: usize,
    pub hub: Shared,
    pub script: Script,
    pub clients: Vec<[u8; 6]>,
    pub seen: Vec<Seen>,
}

impl Server {
    pub fn new(hub: &Shared, script: Script) -> Server {
        let port = hub.borrow_mut().port();
        Server { port, hub: hub.clone(), script, clients: Vec::new(), seen: Vec::new() }
    }

    /// Answers every DHCP request waiting.
    pub fn step(&mut self) {
        loop {
            let Some(frame) = self.hub.borrow_mut().inbox[self.port].pop_front() else { return };
            if let Some(answer) = self.answer(&frame) {
                self.hub.borrow_mut().send(self.port, &answer);
            }
        }
    }

    fn answer(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != EthernetProtocol::Ipv4 {
            return None;
        }
        let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
        let udp = UdpPacket::new_checked(ip.payload()).ok()?;
        if udp.dst_port() != 67 {
            return None;
        }
        let packet = DhcpPacket::new_checked(udp.payload()).ok()?;
        let req = DhcpRepr::parse(&packet).ok()?;
        self.seen.push(Seen { kind: req.message_type, source: ip.src_addr().octets(), ciaddr: req.client_ip.octets() });
        let mac = req.client_hardware_address.0;
        let n = match self.clients.iter().position(|m| *m == mac) {
            Some(n) => n,
            None => {
                self.clients.push(mac);
                self.clients.len() - 1
            }
        };
        let mut yiaddr = self.script.first;
        yiaddr[3] += n as u8;
        let kind = match req.message_type {
            DhcpMessageType::Discover => DhcpMessageType::Offer,
            DhcpMessageType::Request => DhcpMessageType::Ack,
            _ => return None,
        };
        let dns: heapless::Vec<Ipv4Address, 3> = self.script.dns.iter().map(|a| Ipv4Address::from(*a)).collect();
        let repr = DhcpRepr {
            message_type: kind,
            transaction_id: req.transaction_id,
            secs: 0,
            client_hardware_address: req.client_hardware_address,
            client_ip: Ipv4Address::UNSPECIFIED,
            your_ip: Ipv4Address::from(yiaddr),
            server_ip: Ipv4Address::from(SERVER_IP),
            router: self.script.router.map(Ipv4Address::from),
            subnet_mask: Some(Ipv4Address::from(self.script.mask)),
            relay_agent_ip: Ipv4Address::UNSPECIFIED,
            broadcast: false,
            requested_ip: None,
            client_identifier: None,
            server_identifier: Some(Ipv4Address::from(if kind == DhcpMessageType::Ack {
                self.script.ack_server
            } else {
                SERVER_IP
            })),
            parameter_request_list: None,
            dns_servers: Some(dns),
            max_size: None,
            lease_duration: self.script.lease_secs,
            renew_duration: None,
            rebind_duration: None,
            additional_options: &[],
        };
        let mut dhcp = vec![0; repr.buffer_len()];
        repr.emit(&mut DhcpPacket::new_unchecked(&mut dhcp)).ok()?;
        Some(udp_frame(SERVER_MAC, mac, SERVER_IP, yiaddr, 67, 68, &dhcp))
    }
}

/// An Ethernet frame holding a UDP datagram.
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let udp = UdpRepr { src_port: sport, dst_port: dport };
    let ip = Ipv4Repr {
        src_addr: Ipv4Address::from(src),
        dst_addr: Ipv4Address::from(dst),
        next_header: IpProtocol::Udp,
        payload_len: 8 + payload.len(),
        hop_limit: 64,
    };
    let mut frame = vec![0; 14 + 20 + 8 + payload.len()];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: EthernetAddress(src_mac),
        dst_addr: EthernetAddress(dst_mac),
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut eth);
    let caps = ChecksumCapabilities::default();
    let mut ipp = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut ipp, &caps);
    let mut udpp = UdpPacket::new_unchecked(ipp.payload_mut());
    udp.emit(
        &mut udpp,
        &IpAddress::Ipv4(ip.src_addr),
        &IpAddress::Ipv4(ip.dst_addr),
        payload.len(),
        |b| b.copy_from_slice(payload),
        &caps,
    );
    frame
}

/// A TCP peer made with smoltcp on the hub, at a fixed address: it listens on `port` and
/// sends back the first `cut` bytes it gets, then closes.
pub struct Peer {
    iface: Interface,
    sockets: SocketSet<'static>,
    handle: SocketHandle,
    nic: PeerNic,
    pub cut: usize,
    pub got: Vec<u8>,
    pub echoed: usize,
}

struct PeerNic(Nic);

pub struct PeerRx(Vec<u8>);
pub struct PeerTx<'a>(&'a mut Nic);

impl phy::RxToken for PeerRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for PeerTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let r = f(&mut frame);
        self.0.transmit(&frame).unwrap();
        r
    }
}

impl phy::Device for PeerNic {
    type RxToken<'a> = PeerRx;
    type TxToken<'a> = PeerTx<'a>;
    fn receive(&mut self, _: Instant) -> Option<(PeerRx, PeerTx<'_>)> {
        let frame = self.0.hub.borrow_mut().inbox[self.0.port].pop_front()?;
        Some((PeerRx(frame), PeerTx(&mut self.0)))
    }
    fn transmit(&mut self, _: Instant) -> Option<PeerTx<'_>> {
        Some(PeerTx(&mut self.0))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps
    }
}

impl Peer {
    pub fn new(hub: &Shared, mac: [u8; 6], ip: [u8; 4], port: u16, cut: usize) -> Peer {
        let mut nic = PeerNic(Nic::new(hub, mac));
        let iface =
            Interface::new(Config::new(HardwareAddress::Ethernet(EthernetAddress(mac))), &mut nic, Instant::ZERO);
        let mut iface = iface;
        iface.update_ip_addrs(|a| a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(ip)), 24)).unwrap());
        let storage: &'static mut [SocketStorage<'static>] = Box::leak(Box::new([SocketStorage::EMPTY]));
        let mut sockets = SocketSet::new(storage);
        let rx: &'static mut [u8] = Box::leak(vec![0; 2048].into_boxed_slice());
        let tx: &'static mut [u8] = Box::leak(vec![0; 2048].into_boxed_slice());
        let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(rx), tcp::SocketBuffer::new(tx));
        socket.listen(port).unwrap();
        let handle = sockets.add(socket);
        Peer { iface, sockets, handle, nic, cut, got: Vec::new(), echoed: 0 }
    }

    pub fn poll(&mut self, now_ms: u64) {
        let now = Instant::from_millis(now_ms as i64);
        self.iface.poll(now, &mut self.nic, &mut self.sockets);
        let socket = self.sockets.get_mut::<tcp::Socket>(self.handle);
        let mut buf = [0u8; 512];
        while let Ok(n @ 1..) = socket.recv_slice(&mut buf) {
            self.got.extend_from_slice(&buf[..n]);
        }
        if self.echoed < self.cut.min(self.got.len()) && socket.can_send() {
            let end = self.cut.min(self.got.len());
            self.echoed += socket.send_slice(&self.got[self.echoed..end]).unwrap();
        }
        if self.echoed == self.cut && socket.may_send() {
            socket.close();
        }
        self.iface.poll(now, &mut self.nic, &mut self.sockets);
    }
}
