//! What the network programs share: the kernel's card (net_info, net_send, net_recv) as
//! guest/net's `Device`, the clock in milliseconds, the stack's memory, and the loop that
//! drives a stack until something is done or a deadline passes.
//!
//! The card has no interrupts for programs: the loop polls it, sleeping 2 ms between
//! polls when nothing came.

use core::fmt::Write;

use net::{Buffers, Device, DeviceError, Stack};

/// The kernel's card.
pub struct Card {
    mac: [u8; 6],
}

impl Card {
    /// The card, or `[<name>] FAIL: no network card: <error>` and exit 1.
    pub fn open(name: &str) -> Card {
        match rt::net_info() {
            Ok(mac) => Card { mac },
            Err(e) => {
                rt::log!("[{name}] FAIL: no network card: {}", e.name());
                rt::exit(1)
            }
        }
    }
}

impl Device for Card {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<(), DeviceError> {
        rt::net_send(frame).map(|_| ()).map_err(|_| DeviceError)
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        match rt::net_recv(buf) {
            Ok(0) | Err(_) => None,
            Ok(len) => Some(len),
        }
    }
}

/// The kernel's clock in milliseconds.
pub fn now_ms() -> u64 {
    let (ticks, second) = (rt::time(), rt::timebase().max(1));
    ticks / second * 1000 + ticks % second * 1000 / second
}

/// The stack's memory: too big for a program's 16 KiB stack, so a static.
static mut BUFFERS: Buffers<'static> = Buffers::new();

/// A stack on the kernel's card, its DHCP client started, seeded from the kernel's
/// generator (so the bench's pinned seed pins it). Call once: the memory is one static.
pub fn stack(name: &str, echo_port: u16) -> Stack<'static, Card> {
    let card = Card::open(name);
    // SAFETY: the program has one thread and calls this once (its main does, at its
    // start), so this is the only reference to BUFFERS there ever is.
    let buffers = unsafe { &mut *core::ptr::addr_of_mut!(BUFFERS) };
    Stack::new(card, buffers, echo_port, rt::random(), now_ms())
}

/// Polls `stack` until `done` gives a value or `deadline_ms` (on the kernel's clock)
/// passes: None then.
pub fn drive<T>(
    stack: &mut Stack<'static, Card>,
    deadline_ms: u64,
    mut done: impl FnMut(&mut Stack<'static, Card>) -> Option<T>,
) -> Option<T> {
    let sleep = (rt::timebase() / 500).max(1);
    loop {
        let now = now_ms();
        stack.poll(now);
        if let Some(value) = done(stack) {
            return Some(value);
        }
        if now >= deadline_ms {
            return None;
        }
        rt::sleep(sleep);
    }
}

/// An IPv4 address as text.
pub struct Ip(pub [u8; 4]);

impl core::fmt::Display for Ip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// Takes a lease within `secs` seconds and prints it, or `[<name>] FAIL: no DHCP lease
/// within N s` and exit 1:
///
///     <name>: lease 10.0.2.15/24 router none dns none for 86400 s
///
/// (slirp with `restrict=on`, the bench's `[net]`, names no router and no resolver.)
pub fn lease(name: &str, stack: &mut Stack<'static, Card>, secs: u64) -> net::Lease {
    let deadline = now_ms() + secs * 1000;
    let Some(lease) = drive(stack, deadline, |s| s.lease().copied()) else {
        rt::log!("[{name}] FAIL: no DHCP lease within {secs} s");
        rt::exit(1)
    };
    let mut line = rt::Line::new();
    let _ = write!(line, "{name}: lease {}/{} router ", Ip(lease.address), lease.prefix_len);
    match lease.router {
        Some(router) => _ = write!(line, "{}", Ip(router)),
        None => line.push(b"none"),
    }
    line.push(b" dns");
    for server in lease.dns_servers() {
        let _ = write!(line, " {}", Ip(*server));
    }
    if lease.dns_servers().is_empty() {
        line.push(b" none");
    }
    let _ = write!(line, " for {} s", lease.lease_secs);
    rt::log(line.as_bytes());
    lease
}

/// Connects to `to`:`port`, sends `payload` and reads it back whole within 10 s:
/// `<name>: <to>:<port> echoed N bytes`, or `[<name>] FAIL: <to>:<port>: <how>` and exit 1.
pub fn echo_check(name: &str, stack: &mut Stack<'static, Card>, to: [u8; 4], port: u16, payload: &[u8]) {
    let deadline = now_ms() + 10_000;
    if let Err(e) = stack.start_check(to, port, payload, deadline) {
        rt::log!("[{name}] FAIL: {}:{port}: not started: {e:?}", Ip(to));
        rt::exit(1);
    }
    // The check keeps its own deadline; a second more for the loop to see it pass.
    let ended = drive(stack, deadline + 1_000, |s| (s.check() != net::Check::Running).then(|| s.check()));
    match ended {
        Some(net::Check::Echoed(n)) => rt::log!("{name}: {}:{port} echoed {n} bytes", Ip(to)),
        other => {
            rt::log!("[{name}] FAIL: {}:{port}: {other:?}", Ip(to));
            rt::exit(1);
        }
    }
}
