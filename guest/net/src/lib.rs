//! The reference guest's network stack above raw Ethernet frames, portable so that the
//! host tests and the host fuzzer run the very code the guest runs:
//!
//! - [`Device`]: the card as the stack sees it (send a frame, take a frame, its MAC);
//! - [`Stack`]: smoltcp's interface over it, with a DHCP client whose lease ([`Lease`])
//!   is read again from its ACK and judged by rules of our own, a TCP echo service on a
//!   port, and an echo check (connect, send, read the same bytes back, whole);
//! - [`egress`]: the check in front of the device: a frame leaves only as the card's MAC
//!   and the leased address (0.0.0.0 only for the DHCP client), or is refused, never sent.
//!   The `spoof-unchecked` feature removes it (a must-fail self-check's build, never a
//!   guest's).
//!
//! No allocation: the caller owns the memory ([`Buffers`]), and every loop is bounded.
//! Time is the caller's clock in milliseconds, passed to every call that needs it.
#![no_std]
#![forbid(unsafe_code)]

pub mod egress;
mod lease;

pub use egress::{Refusal, FRAME_MAX};
pub use lease::{Lease, LeaseRefusal, MAX_DNS};

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Address, Ipv4Cidr};

/// The card: one whole Ethernet frame at a time (no FCS), at most [`FRAME_MAX`] bytes.
pub trait Device {
    /// The card's MAC.
    fn mac(&self) -> [u8; 6];
    /// Hands `frame` to the card. Err: the card did not take it (the frame is lost).
    fn transmit(&mut self, frame: &[u8]) -> Result<(), DeviceError>;
    /// Copies the next received frame into `buf` and gives its length, or None when none
    /// waits. A length past `buf.len()` is taken as a lost frame.
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize>;
}

/// The card refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceError;

/// Each TCP socket's receive and send buffer.
pub const TCP_BUFFER: usize = 1024;
/// The longest payload an echo check sends.
pub const CHECK_MAX: usize = 512;
/// Frames taken in one [`Stack::poll`] at most (the rest wait for the next).
pub const FRAMES_PER_POLL: usize = 32;
/// The echo check's local port is this plus a number from the seed below 16384.
const EPHEMERAL: u16 = 49152;

/// The memory the stack runs in, owned by the caller (a static or a local that outlives
/// the [`Stack`]): about 4 KiB of TCP buffers and the socket table.
pub struct Buffers<'a> {
    sockets: [SocketStorage<'a>; 3],
    echo_rx: [u8; TCP_BUFFER],
    echo_tx: [u8; TCP_BUFFER],
    check_rx: [u8; TCP_BUFFER],
    check_tx: [u8; TCP_BUFFER],
}

impl Buffers<'_> {
    /// Zeroed buffers.
    pub const fn new() -> Self {
        Buffers {
            sockets: [SocketStorage::EMPTY, SocketStorage::EMPTY, SocketStorage::EMPTY],
            echo_rx: [0; TCP_BUFFER],
            echo_tx: [0; TCP_BUFFER],
            check_rx: [0; TCP_BUFFER],
            check_tx: [0; TCP_BUFFER],
        }
    }
}

impl Default for Buffers<'_> {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts of what went through the card.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed to the card and taken by it.
    pub sent: u64,
    /// Frames the card refused ([`DeviceError`]).
    pub device_errors: u64,
    /// Frames received (whatever became of them).
    pub received: u64,
    /// Frames the egress check refused.
    pub refused: u64,
    /// ACKs smoltcp accepted and our lease rules refused.
    pub leases_refused: u64,
    /// Bytes the echo service sent back.
    pub echoed: u64,
}

/// The echo check's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// None started.
    Idle,
    /// Connecting, sending or reading back.
    Running,
    /// Every byte sent came back, the same, and no byte more (how many).
    Echoed(usize),
    /// It failed.
    Failed(CheckFailure),
}

/// How an echo check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckFailure {
    /// The peer ended its stream after `got` of the `want` bytes.
    Truncated { got: usize, want: usize },
    /// The byte at this offset came back other than it was sent, or past the end.
    Mismatch(usize),
    /// The connection was reset or never made.
    Reset,
    /// Not done by its deadline.
    Timeout,
    /// The lease the check ran on was lost or changed.
    LeaseLost,
}

/// Why an echo check could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// No lease yet.
    NoLease,
    /// A check is running.
    Busy,
    /// The payload is empty or longer than [`CHECK_MAX`].
    BadPayload,
    /// smoltcp refused the endpoint (port 0, or an unspecified address).
    BadEndpoint,
}

/// The transmit side of the card: the egress check sits in front of it.
struct Out<D> {
    dev: D,
    mac: [u8; 6],
    leased: Option<[u8; 4]>,
    tx: [u8; FRAME_MAX],
    counters: Counters,
    last_refusal: Option<Refusal>,
}

impl<D: Device> Out<D> {
    /// Checks the first `len` bytes of `tx` and hands them to the card.
    fn send(&mut self, len: usize) -> Result<(), Refusal> {
        let frame = &self.tx[..len];
        #[cfg(not(feature = "spoof-unchecked"))]
        if let Err(refusal) = egress::check(frame, self.mac, self.leased) {
            self.counters.refused += 1;
            self.last_refusal = Some(refusal);
            return Err(refusal);
        }
        match self.dev.transmit(frame) {
            Ok(()) => self.counters.sent += 1,
            Err(DeviceError) => self.counters.device_errors += 1,
        }
        Ok(())
    }
}

/// The card as smoltcp sees it: a frame the stack took from the device waits in `rx`
/// (`pending`) until smoltcp takes it, so the stack feeds smoltcp one frame at a time
/// and knows which frame made each DHCP event.
struct Port<D> {
    rx: [u8; FRAME_MAX],
    rx_len: usize,
    pending: bool,
    out: Out<D>,
}

struct RxToken<'p> {
    frame: &'p [u8],
}

struct TxToken<'p, D> {
    out: &'p mut Out<D>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

impl<D: Device> phy::TxToken for TxToken<'_, D> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // smoltcp asks for no more than `capabilities`' MTU; a longer frame is cut, and
        // its own lengths then refuse nothing here: the card gets what fits.
        let len = len.min(FRAME_MAX);
        let r = f(&mut self.out.tx[..len]);
        let _ = self.out.send(len);
        r
    }
}

impl<D: Device> phy::Device for Port<D> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a, D>
    where
        Self: 'a;

    fn receive(&mut self, _: Instant) -> Option<(RxToken<'_>, TxToken<'_, D>)> {
        if !self.pending {
            return None;
        }
        self.pending = false;
        let Port { rx, rx_len, out, .. } = self;
        Some((RxToken { frame: &rx[..*rx_len] }, TxToken { out }))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_, D>> {
        Some(TxToken { out: &mut self.out })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = FRAME_MAX;
        caps.max_burst_size = Some(1);
        caps
    }
}

/// Why [`Stack::send_raw`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Longer than [`FRAME_MAX`].
    TooLong,
    /// The egress check refused it.
    Refused(Refusal),
}

/// The echo check's books.
struct Client {
    to: ([u8; 4], u16),
    payload: [u8; CHECK_MAX],
    want: usize,
    sent: usize,
    got: usize,
    deadline_ms: u64,
    state: Check,
}

/// The network stack: smoltcp over a [`Device`], polled by its owner.
///
/// A program drives it in one loop: `stack.poll(now_ms)` whenever a frame may have come or
/// the time of `stack.poll_at(now_ms)` has come, and reads `lease()`, `check()` and
/// `counters()` between polls.
pub struct Stack<'a, D: Device> {
    port: Port<D>,
    iface: Interface,
    sockets: SocketSet<'a>,
    dhcp: SocketHandle,
    echo: SocketHandle,
    client: SocketHandle,
    echo_port: u16,
    lease: Option<Lease>,
    last_lease_refusal: Option<LeaseRefusal>,
    check: Client,
    local_port: u16,
}

impl<'a, D: Device> Stack<'a, D> {
    /// A stack on `dev`, in `buffers`, its DHCP client starting at once. `echo_port`: the
    /// echo service's port (0: none). `seed` seeds TCP's initial sequence numbers, the
    /// DHCP transaction id and the echo check's local ports: a different one each boot.
    pub fn new(dev: D, buffers: &'a mut Buffers<'a>, echo_port: u16, seed: u64, now_ms: u64) -> Self {
        let mac = dev.mac();
        let mut port = Port {
            rx: [0; FRAME_MAX],
            rx_len: 0,
            pending: false,
            out: Out { dev, mac, leased: None, tx: [0; FRAME_MAX], counters: Counters::default(), last_refusal: None },
        };
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        config.random_seed = seed;
        let iface = Interface::new(config, &mut port, instant(now_ms));
        let Buffers { sockets, echo_rx, echo_tx, check_rx, check_tx } = buffers;
        let mut sockets = SocketSet::new(&mut sockets[..]);
        let mut dhcp = dhcpv4::Socket::new();
        // An empty buffer: smoltcp copies no packet into it, but with a buffer set it
        // reports every ACK, renewals too, so each is read and judged here.
        dhcp.set_receive_packet_buffer(&mut []);
        let dhcp = sockets.add(dhcp);
        let echo = sockets
            .add(tcp::Socket::new(tcp::SocketBuffer::new(&mut echo_rx[..]), tcp::SocketBuffer::new(&mut echo_tx[..])));
        let client = sockets.add(tcp::Socket::new(
            tcp::SocketBuffer::new(&mut check_rx[..]),
            tcp::SocketBuffer::new(&mut check_tx[..]),
        ));
        let check = Client {
            to: ([0; 4], 0),
            payload: [0; CHECK_MAX],
            want: 0,
            sent: 0,
            got: 0,
            deadline_ms: 0,
            state: Check::Idle,
        };
        let local_port = (seed % 16384) as u16;
        Stack {
            port,
            iface,
            sockets,
            dhcp,
            echo,
            client,
            echo_port,
            lease: None,
            last_lease_refusal: None,
            check,
            local_port,
        }
    }

    /// The card's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.port.out.mac
    }

    /// The card.
    pub fn device(&mut self) -> &mut D {
        &mut self.port.out.dev
    }

    /// The lease held now.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Why the last ACK smoltcp accepted was refused.
    pub fn last_lease_refusal(&self) -> Option<LeaseRefusal> {
        self.last_lease_refusal
    }

    /// What went through the card.
    pub fn counters(&self) -> Counters {
        self.port.out.counters
    }

    /// Why the egress check last refused a frame.
    pub fn last_refusal(&self) -> Option<Refusal> {
        self.port.out.last_refusal
    }

    /// The echo check's state.
    pub fn check(&self) -> Check {
        self.check.state
    }

    /// When to poll next at the latest, in ms (None: only when a frame comes).
    pub fn poll_at(&mut self, now_ms: u64) -> Option<u64> {
        let at = self.iface.poll_at(instant(now_ms), &self.sockets).map(|t| t.total_millis().max(0) as u64);
        let at = match (at, self.lease) {
            (Some(at), Some(lease)) => Some(at.min(lease.expires_ms())),
            (None, Some(lease)) => Some(lease.expires_ms()),
            (at, None) => at,
        };
        match (at, self.check.state) {
            (Some(at), Check::Running) => Some(at.min(self.check.deadline_ms)),
            (None, Check::Running) => Some(self.check.deadline_ms),
            (at, _) => at,
        }
    }

    /// Takes up to [`FRAMES_PER_POLL`] frames from the card, one at a time, then sends what
    /// is due: DHCP's messages and timers, the echo service, the echo check.
    pub fn poll(&mut self, now_ms: u64) {
        let now = instant(now_ms);
        self.expire(now_ms);
        for _ in 0..FRAMES_PER_POLL {
            let Some(len) = self.port.out.dev.receive(&mut self.port.rx) else { break };
            self.port.out.counters.received += 1;
            if len > FRAME_MAX {
                continue;
            }
            self.port.rx_len = len;
            self.port.pending = true;
            self.iface.poll_ingress_single(now, &mut self.port, &mut self.sockets);
            self.port.pending = false;
            self.dhcp_event(now_ms, true);
            self.serve();
            self.run_check(now_ms);
        }
        self.iface.poll_egress(now, &mut self.port, &mut self.sockets);
        self.dhcp_event(now_ms, false);
        self.serve();
        self.run_check(now_ms);
        self.iface.poll_egress(now, &mut self.port, &mut self.sockets);
        self.expire(now_ms);
    }

    /// Ends a lease whose time is up. smoltcp checks that only when its DHCP socket may
    /// send, and keeps it from sending for a second while the server's MAC is unknown:
    /// past the lease's end by that much (the fuzzer's world found a 1 s lease held 1.4 s).
    fn expire(&mut self, now_ms: u64) {
        if self.lease.is_some_and(|l| now_ms >= l.expires_ms()) {
            self.drop_lease();
            self.sockets.get_mut::<dhcpv4::Socket>(self.dhcp).reset();
        }
    }

    /// Sends `frame` as it is, through the egress check: the way a program sends a frame
    /// of its own making.
    pub fn send_raw(&mut self, frame: &[u8]) -> Result<(), SendError> {
        let out = &mut self.port.out;
        out.tx.get_mut(..frame.len()).ok_or(SendError::TooLong)?.copy_from_slice(frame);
        out.send(frame.len()).map_err(SendError::Refused)
    }

    /// Starts an echo check: connect to `to`:`port`, send `payload`, and read the same
    /// bytes back by `deadline_ms`. Its outcome is [`Stack::check`].
    pub fn start_check(&mut self, to: [u8; 4], port: u16, payload: &[u8], deadline_ms: u64) -> Result<(), StartError> {
        if self.lease.is_none() {
            return Err(StartError::NoLease);
        }
        if self.check.state == Check::Running {
            return Err(StartError::Busy);
        }
        if payload.is_empty() || payload.len() > CHECK_MAX {
            return Err(StartError::BadPayload);
        }
        self.local_port = (self.local_port + 1) % 16384;
        let socket = self.sockets.get_mut::<tcp::Socket>(self.client);
        socket.abort();
        socket
            .connect(self.iface.context(), (Ipv4Address::from(to), port), EPHEMERAL + self.local_port)
            .map_err(|_| StartError::BadEndpoint)?;
        let c = &mut self.check;
        c.payload[..payload.len()].copy_from_slice(payload);
        c.to = (to, port);
        c.want = payload.len();
        c.sent = 0;
        c.got = 0;
        c.deadline_ms = deadline_ms;
        c.state = Check::Running;
        Ok(())
    }

    /// Takes the DHCP client's event, if any: a lease (judged by our rules) or its loss.
    /// `from_frame`: the frame in `rx` is the one just processed (an ACK makes an event
    /// only as it is processed).
    fn dhcp_event(&mut self, now_ms: u64, from_frame: bool) {
        let frame: &[u8] = if from_frame { &self.port.rx[..self.port.rx_len] } else { &[] };
        let taken = match self.sockets.get_mut::<dhcpv4::Socket>(self.dhcp).poll() {
            None => return,
            Some(dhcpv4::Event::Deconfigured) => None,
            Some(dhcpv4::Event::Configured(config)) => Some(lease::take(&config, frame, now_ms)),
        };
        match taken {
            None => self.drop_lease(),
            Some(Ok(mut new)) => {
                let same = |old: &Lease| {
                    (old.address, old.prefix_len, old.router, old.dns_servers(), old.server)
                        == (new.address, new.prefix_len, new.router, new.dns_servers(), new.server)
                };
                match self.lease {
                    Some(old) if same(&old) => new.renewals = old.renewals + 1,
                    Some(_) => {
                        self.drop_lease();
                        self.configure(&new);
                    }
                    None => self.configure(&new),
                }
                self.lease = Some(new);
            }
            Some(Err(refusal)) => {
                self.port.out.counters.leases_refused += 1;
                self.last_lease_refusal = Some(refusal);
                self.drop_lease();
                self.sockets.get_mut::<dhcpv4::Socket>(self.dhcp).reset();
            }
        }
    }

    /// Puts `lease`'s address and route on the interface and in the egress check.
    fn configure(&mut self, lease: &Lease) {
        let cidr = Ipv4Cidr::new(Ipv4Address::from(lease.address), lease.prefix_len);
        self.iface.update_ip_addrs(|addrs| {
            addrs.clear();
            let _ = addrs.push(IpCidr::Ipv4(cidr));
        });
        match lease.router {
            Some(router) => {
                let _ = self.iface.routes_mut().add_default_ipv4_route(Ipv4Address::from(router));
            }
            None => {
                self.iface.routes_mut().remove_default_ipv4_route();
            }
        }
        self.port.out.leased = Some(lease.address);
    }

    /// Forgets the lease: the interface's address, its route, the egress check's address,
    /// and every connection made on it.
    fn drop_lease(&mut self) {
        if self.lease.take().is_none() {
            return;
        }
        self.port.out.leased = None;
        self.iface.update_ip_addrs(|addrs| addrs.clear());
        self.iface.routes_mut().remove_default_ipv4_route();
        self.sockets.get_mut::<tcp::Socket>(self.echo).abort();
        self.sockets.get_mut::<tcp::Socket>(self.client).abort();
        if self.check.state == Check::Running {
            self.check.state = Check::Failed(CheckFailure::LeaseLost);
        }
    }

    /// The echo service: listen, send back what came, close when the peer has.
    fn serve(&mut self) {
        if self.echo_port == 0 {
            return;
        }
        let socket = self.sockets.get_mut::<tcp::Socket>(self.echo);
        if !socket.is_open() {
            let _ = socket.listen(self.echo_port);
            return;
        }
        let mut chunk = [0u8; 256];
        for _ in 0..TCP_BUFFER / chunk.len() + 1 {
            let room = socket.send_capacity() - socket.send_queue();
            if room == 0 || !socket.can_recv() {
                break;
            }
            let n = room.min(chunk.len());
            let got = socket.recv_slice(&mut chunk[..n]).unwrap_or(0);
            let put = socket.send_slice(&chunk[..got]).unwrap_or(0);
            self.port.out.counters.echoed += put as u64;
        }
        if socket.state() == tcp::State::CloseWait && socket.send_queue() == 0 && !socket.can_recv() {
            socket.close();
        }
    }

    /// The echo check: send, compare what comes back, and judge the stream whole or not.
    fn run_check(&mut self, now_ms: u64) {
        let c = &mut self.check;
        if c.state != Check::Running {
            return;
        }
        let socket = self.sockets.get_mut::<tcp::Socket>(self.client);
        if now_ms >= c.deadline_ms {
            socket.abort();
            c.state = Check::Failed(CheckFailure::Timeout);
            return;
        }
        if c.sent < c.want && socket.can_send() {
            c.sent += socket.send_slice(&c.payload[c.sent..c.want]).unwrap_or(0);
        }
        let mut chunk = [0u8; 256];
        for _ in 0..TCP_BUFFER / chunk.len() + 1 {
            let got = socket.recv_slice(&mut chunk).unwrap_or(0);
            if got == 0 {
                break;
            }
            for &byte in &chunk[..got] {
                if c.got >= c.want || byte != c.payload[c.got] {
                    socket.abort();
                    c.state = Check::Failed(CheckFailure::Mismatch(c.got));
                    return;
                }
                c.got += 1;
            }
        }
        if c.got == c.want {
            socket.close();
            c.state = Check::Echoed(c.want);
            return;
        }
        match socket.state() {
            tcp::State::Closed => c.state = Check::Failed(CheckFailure::Reset),
            tcp::State::CloseWait | tcp::State::LastAck | tcp::State::Closing | tcp::State::TimeWait => {
                c.state = Check::Failed(CheckFailure::Truncated { got: c.got, want: c.want });
            }
            _ => {}
        }
    }
}

fn instant(ms: u64) -> Instant {
    Instant::from_millis(ms.min(i64::MAX as u64) as i64)
}
