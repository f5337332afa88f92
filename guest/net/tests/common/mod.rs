//! The host tests' network: a hub that gives every frame to every other port and keeps
//! them all, the worlds' DHCP server (`guest/worlds`) on one port, and a TCP peer made
//! with smoltcp itself.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use net::Device;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
pub use worlds::dhcp::{self, Script};
pub use worlds::frame::udp_frame;

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

/// The DHCP server on its port of the hub: the worlds' one server (`guest/worlds`, which
/// hostfuzz's network world lies through), answering by its script.
pub struct Server {
    pub port: usize,
    pub hub: Shared,
    pub dhcp: dhcp::Server,
}

impl Server {
    pub fn new(hub: &Shared, script: Script) -> Server {
        let port = hub.borrow_mut().port();
        Server { port, hub: hub.clone(), dhcp: dhcp::Server::new(SERVER_MAC, SERVER_IP, script) }
    }

    /// Answers every DHCP request waiting.
    pub fn step(&mut self) {
        loop {
            let Some(frame) = self.hub.borrow_mut().inbox[self.port].pop_front() else { return };
            if let Some(answer) = self.dhcp.answer(&frame) {
                self.hub.borrow_mut().send(self.port, &answer);
            }
        }
    }
}

/// The script of QEMU's user network: a 60 s lease of 10.0.2.15/24 from 10.0.2.2.
pub fn script() -> Script {
    Script::qemu(SERVER_IP, Some(60))
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
