//! The virtio-net driver (`guest/virtio/src/net.rs`) against a hostile virtio-mmio network
//! card of this file's own. The decisions set the card (its device id, whether it offers
//! a MAC, the MAC, offloads the driver must not take, each queue's maximum) and then one
//! to sixteen steps: the driver sends a frame (any length, now and then outside
//! 14..=1514), or the card delivers zero to three frames into the receive buffers and the
//! driver receives. At each answer the card may lie: silence, "no notification", a used
//! index that jumps, a used element with any id or any length (past the buffer, short of
//! the header), a GSO type nobody negotiated, runt frames, and random bytes over both
//! queues' descriptor tables and available rings. A zero decision is the honest choice.
//!
//! The card keeps the books of what it did; the oracle judges the driver by them:
//! `Net::new` must answer what the driver's documented checks say (the error, or the MAC
//! and no feature but MAC and VERSION_1), a refused card is left FAILED, every receive
//! buffer the driver posts is one writable descriptor of a whole buffer inside the
//! driver's memory, every sent frame reaches the card once, after a zeroed header, with
//! its bytes; every send and receive answers what the used ring the card wrote says (the
//! error and its values, or the frame: exactly the bytes in the buffer the used element
//! names), dropped frames are counted, and after a fatal refusal every call is `Broken`.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::device_memory::DeviceMemory;
use super::virtio::{any_u32, lie, name, Arena, ARENA};
use crate::{Decisions, Finding};
use virtio::mmio::{reg, status, F_VERSION_1, MAGIC};
use virtio::net::{self, Net, BUFFER, FRAME_MAX, FRAME_MIN, HEADER};
use virtio::{Dma, Error, Mmio};

const BASE: u64 = 0x4000_0000;
/// Offloads and other features a card offers that the driver must not take.
const OFFLOADS: u64 = 1 | 1 << 1 | 1 << 7 | 1 << 11 | 1 << 15 | 1 << 16 | 1 << 40;
const RX: usize = 0;
const TX: usize = 1;

#[derive(Clone, Copy, Debug)]
struct Setup {
    device_id: u32,
    offered: u64,
    mac: [u8; 6],
    queue_max: [u32; 2],
}

impl Setup {
    fn draw(d: &mut Decisions) -> Setup {
        let device_id = if lie(d) { any_u32(d, &[2, 0, 3]) } else { net::DEVICE_ID };
        let mut offered = F_VERSION_1 | net::F_MAC;
        if lie(d) {
            offered &= !net::F_MAC;
        }
        if d.bool() {
            offered |= OFFLOADS;
        }
        let mut mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
        if lie(d) {
            mac = *d.choose(&[[0; 6], [0xff; 6], [1, 0, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1]]);
        } else if d.bool() {
            let b = d.bytes(6);
            mac.copy_from_slice(&b);
            mac[0] &= !1;
            mac[5] |= 1;
        }
        let mut queue_max = [256, 256];
        for max in &mut queue_max {
            if lie(d) {
                *max = any_u32(d, &[0, 1, 2, 3, 6, 4]);
            }
        }
        Setup { device_id, offered, mac, queue_max }
    }

    /// What `Net::new` must answer: Ok with the queues' sizes, or the error and whether
    /// the card is left FAILED.
    fn expected(&self) -> Result<[u32; 2], (Error, bool)> {
        if self.device_id != net::DEVICE_ID {
            return Err((Error::WrongDevice(self.device_id), false));
        }
        if self.offered & net::F_MAC == 0 {
            return Err((Error::NoMac, true));
        }
        if self.mac[0] & 1 != 0 || self.mac == [0; 6] {
            return Err((Error::BadMac(self.mac), true));
        }
        let mut sizes = [0; 2];
        for (q, wanted) in [(RX, u32::from(net::RX_BUFFERS)), (TX, 2)] {
            let max = self.queue_max[q];
            if max == 0 {
                return Err((Error::QueueUnavailable, true));
            }
            if !max.is_power_of_two() {
                return Err((Error::BadQueueSize(max), true));
            }
            sizes[q] = max.min(wanted);
        }
        Ok(sizes)
    }
}

/// How the card answers one chain. All zero: honestly.
#[derive(Clone, Copy, Debug, Default)]
struct Plan {
    silent: bool,
    no_notify: bool,
    jump: u16,
    id: Option<u32>,
    len: Option<u32>,
    gso: u8,
    scribble: Option<u64>,
}

impl Plan {
    fn draw(d: &mut Decisions) -> Plan {
        let mut p = Plan::default();
        if d.u8() < 0xe0 {
            return p;
        }
        for _ in 0..1 + d.below(2) {
            match d.below(7) {
                0 => p.silent = true,
                1 => p.no_notify = true,
                2 => p.jump = any_u32(d, &[1, 7, 8, 0xffff]) as u16,
                3 => p.id = Some(any_u32(d, &[1, 2, 7, 8, 255, u32::MAX])),
                4 => {
                    let edges = [0, HEADER as u32 - 1, HEADER as u32, BUFFER as u32, BUFFER as u32 + 1, u32::MAX];
                    p.len = Some(any_u32(d, &edges));
                }
                5 => p.gso = 1 | d.u8(),
                _ => p.scribble = Some(d.u64()),
            }
        }
        p
    }
}

#[derive(Default)]
struct QueueState {
    num: u32,
    ready: u32,
    addrs: [u64; 3],
    /// The next available entry the card has not read.
    last_avail: u16,
    used_idx: u16,
}

/// The card's state and its books.
struct Model {
    setup: Setup,
    /// The driver memory the card may reach, and the first finding.
    mem: DeviceMemory,
    status: u32,
    features_sel: u32,
    driver_sel: u32,
    driver_features: u64,
    sel: usize,
    queues: [QueueState; 2],
    /// Receive buffers posted and not yet filled, in order: (id, device address).
    posted: Vec<(u16, u64)>,
    /// The buffer each receive id last named (as the driver posted it).
    rx_addr: BTreeMap<u16, u64>,
    /// The plan for the next send, and the frame the driver was asked to send.
    plan: Plan,
    want_frame: Vec<u8>,
    /// Frames the card took from the transmit queue.
    sent: Vec<Vec<u8>>,
    /// The transmit answer the driver must give (None: the card never answered).
    tx_outcome: Option<Result<(), Error>>,
}

impl Model {
    fn violate(&mut self, what: &str, detail: String) {
        self.mem.violate(what, detail);
    }

    /// The next new chain of queue `q`: its head and its one descriptor (address, length,
    /// flags); a violation when it is not one descriptor inside the driver's memory.
    fn take(&mut self, q: usize) -> Option<(u16, u64, u32, u16)> {
        let [desc, avail, _] = self.queues[q].addrs;
        let size = self.queues[q].num;
        let last = self.queues[q].last_avail;
        if self.mem.read16(avail + 2) == last {
            return None;
        }
        let head = self.mem.read16(avail + 4 + 2 * u64::from(u32::from(last) % size));
        self.queues[q].last_avail = last.wrapping_add(1);
        if u32::from(head) >= size {
            self.violate("a chain head beyond the queue", format!("queue {q}: head {head} of {size}"));
            return None;
        }
        let mut d = [0u8; 16];
        if !self.mem.read(desc + 16 * u64::from(head), &mut d) {
            return None;
        }
        let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
        let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
        if flags & 1 != 0 || self.mem.at(addr, len as usize).is_none() {
            self.violate(
                "a chain that is not one descriptor in the driver's memory",
                format!("{addr:#x}+{len} {flags:#x}"),
            );
            return None;
        }
        Some((head, addr, len, flags))
    }

    /// Reads every receive buffer the driver posted since the last look.
    fn sync_rx(&mut self) {
        if self.queues[RX].ready == 0 {
            return;
        }
        while let Some((head, addr, len, flags)) = self.take(RX) {
            if flags & 2 == 0 || len as usize != BUFFER {
                self.violate("a receive buffer unlike the driver's", format!("{addr:#x}+{len} {flags:#x}"));
                return;
            }
            self.posted.push((head, addr));
            self.rx_addr.insert(head, addr);
        }
    }

    /// Puts (id, len) in queue `q`'s used ring and moves its index by one and `jump`.
    fn complete(&mut self, q: usize, id: u32, len: u32, jump: u16) {
        let used = self.queues[q].addrs[2];
        let idx = self.queues[q].used_idx;
        let slot = u64::from(u32::from(idx) % self.queues[q].num);
        self.mem.write(used + 4 + 8 * slot, &id.to_le_bytes());
        self.mem.write(used + 8 + 8 * slot, &len.to_le_bytes());
        let idx = idx.wrapping_add(1).wrapping_add(jump);
        self.queues[q].used_idx = idx;
        self.mem.write(used + 2, &idx.to_le_bytes());
    }

    /// Random bytes over queue `q`'s descriptor table and its available ring's entries.
    fn scribble(&mut self, q: usize, seed: u64) {
        let [desc, avail, _] = self.queues[q].addrs;
        let size = self.queues[q].num as usize;
        let mut x = seed | 1;
        let mut junk = vec![0u8; 18 * size];
        for b in &mut junk {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        self.mem.write(desc, &junk[..16 * size]);
        self.mem.write(avail + 4, &junk[16 * size..]);
    }

    /// The card's work on a notification of the transmit queue: the new chain, checked,
    /// and answered as the plan says.
    fn transmit(&mut self) {
        let Some((head, addr, len, flags)) = self.take(TX) else {
            self.violate("a transmit notification without a frame", String::new());
            return;
        };
        let mut bytes = vec![0u8; len as usize];
        self.mem.read(addr, &mut bytes);
        if flags & 2 != 0 || len as usize > BUFFER || len as usize <= HEADER || bytes[..HEADER] != [0; HEADER] {
            self.violate("a transmit chain unlike a frame", format!("{addr:#x}+{len} {flags:#x}"));
            return;
        }
        if self.want_frame[..] != bytes[HEADER..] {
            self.violate("the card got other bytes than the driver was asked to send", format!("{len} bytes"));
            return;
        }
        self.sent.push(bytes[HEADER..].to_vec());
        let plan = self.plan;
        if plan.silent {
            return;
        }
        let id = plan.id.unwrap_or(u32::from(head));
        let used_len = plan.len.unwrap_or(0);
        self.complete(TX, id, used_len, plan.jump);
        if let Some(seed) = plan.scribble {
            self.scribble(TX, seed);
        }
        let size = self.queues[TX].num;
        let delta = 1u16.wrapping_add(plan.jump);
        self.tx_outcome = Some(if delta == 0 {
            Err(Error::Timeout)
        } else if delta > 1 {
            Err(Error::UsedIndexJump(delta))
        } else if id >= size {
            Err(Error::UsedIdOutOfRange(id))
        } else if id != u32::from(head) {
            Err(Error::UsedIdNotInFlight(id))
        } else if used_len > 0 {
            Err(Error::UsedLenTooLong { id: head, len: used_len, writable: 0 })
        } else {
            Ok(())
        });
    }

    /// Delivers `frame` into the next posted receive buffer, as `plan` says; false when
    /// the driver posted none.
    fn deliver(&mut self, frame: &[u8], plan: Plan) -> bool {
        self.sync_rx();
        if self.posted.is_empty() {
            return false;
        }
        let (head, addr) = self.posted.remove(0);
        let mut bytes = vec![0u8; HEADER];
        bytes[1] = plan.gso;
        bytes.extend_from_slice(frame);
        self.mem.write(addr, &bytes);
        let id = plan.id.unwrap_or(u32::from(head));
        self.complete(RX, id, plan.len.unwrap_or(bytes.len() as u32), plan.jump);
        if let Some(seed) = plan.scribble {
            self.scribble(RX, seed);
        }
        true
    }

    /// What one `recv` must answer, by the driver's documented checks over the used ring
    /// as the card left it (`consumed`: the used elements the driver took before), and
    /// how many elements it takes and drops.
    fn expected_recv(&mut self, consumed: u16) -> (Result<Option<Vec<u8>>, Error>, u16, u64) {
        let size = self.queues[RX].num;
        let used = self.queues[RX].addrs[2];
        let (mut taken, mut dropped) = (0u16, 0u64);
        for _ in 0..size {
            let at = consumed.wrapping_add(taken);
            let pending = self.queues[RX].used_idx.wrapping_sub(at);
            if pending == 0 {
                return (Ok(None), taken, dropped);
            }
            if u32::from(pending) > size {
                return (Err(Error::UsedIndexJump(pending)), taken, dropped);
            }
            let slot = u64::from(u32::from(at) % size);
            let id = self.mem.read32(used + 4 + 8 * slot);
            let len = self.mem.read32(used + 8 + 8 * slot);
            if id >= size {
                return (Err(Error::UsedIdOutOfRange(id)), taken, dropped);
            }
            let id = id as u16;
            if u64::from(len) > BUFFER as u64 {
                return (Err(Error::UsedLenTooLong { id, len, writable: BUFFER as u64 }), taken, dropped);
            }
            taken += 1;
            if (len as usize) < HEADER {
                return (Err(Error::UsedLenShort { id, len }), taken, dropped);
            }
            let Some(&addr) = self.rx_addr.get(&id) else {
                self.violate("a receive id the driver never posted is in flight", format!("{id}"));
                return (Ok(None), taken, dropped);
            };
            let mut bytes = vec![0u8; len as usize];
            self.mem.read(addr, &mut bytes);
            let frame = bytes.split_off(HEADER);
            if frame.len() < FRAME_MIN || bytes[1] != 0 {
                dropped += 1;
                continue;
            }
            return (Ok(Some(frame)), taken, dropped);
        }
        (Ok(None), taken, dropped)
    }
}

struct Port<'a>(&'a RefCell<Model>);

impl Mmio for Port<'_> {
    fn read32(&self, offset: usize) -> u32 {
        let mut guard = self.0.borrow_mut();
        let m = &mut *guard;
        let s = m.setup;
        match offset {
            reg::MAGIC => MAGIC,
            reg::VERSION => 2,
            reg::DEVICE_ID => s.device_id,
            reg::DEVICE_FEATURES => (s.offered >> (32 * m.features_sel.min(1))) as u32,
            reg::QUEUE_NUM_MAX => s.queue_max[m.sel],
            reg::QUEUE_NUM => 0,
            reg::QUEUE_READY => m.queues[m.sel].ready,
            reg::INTERRUPT_STATUS => 1,
            reg::STATUS => m.status,
            reg::CONFIG_GENERATION => 0,
            o if (reg::CONFIG..reg::CONFIG + 0x100).contains(&o) => {
                let mut config = [0u8; 8];
                config[..6].copy_from_slice(&s.mac);
                config[6] = 1;
                let o = o - reg::CONFIG;
                config.get(o..o + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => {
                m.violate("a read of a register the transport does not have", format!("{offset:#x}"));
                0
            }
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        let mut guard = self.0.borrow_mut();
        let m = &mut *guard;
        let sel = m.sel;
        match offset {
            reg::DEVICE_FEATURES_SEL => m.features_sel = value,
            reg::DRIVER_FEATURES_SEL => m.driver_sel = value,
            reg::DRIVER_FEATURES => {
                let shift = 32 * m.driver_sel.min(1);
                m.driver_features = m.driver_features & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_SEL if value < 2 => m.sel = value as usize,
            reg::QUEUE_NUM => m.queues[sel].num = value,
            reg::QUEUE_READY => {
                let q = &m.queues[sel];
                let size = q.num;
                if q.addrs.contains(&0) || size == 0 || size > m.setup.queue_max[sel] || !size.is_power_of_two() {
                    m.violate("a queue made ready unlike the card's", format!("queue {sel}, size {size}"));
                }
                m.queues[sel].ready = value;
            }
            o if (reg::QUEUE_DESC..reg::QUEUE_DEVICE + 8).contains(&o) => {
                let (which, high) = ((o - reg::QUEUE_DESC) / 0x10, (o - reg::QUEUE_DESC) % 0x10 == 4);
                let shift = if high { 32 } else { 0 };
                let a = &mut m.queues[sel].addrs[which];
                *a = *a & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_NOTIFY => {
                if m.status & status::FAILED != 0 || m.status & status::DRIVER_OK == 0 {
                    m.violate("a notification the card must not get", format!("queue {value}, status {:#x}", m.status));
                } else if value == TX as u32 && m.plan.no_notify {
                    m.violate("a transmit notification after the card said it needs none", String::new());
                } else if value == TX as u32 {
                    m.transmit();
                }
            }
            reg::INTERRUPT_ACK => {}
            reg::STATUS => {
                if value & status::FEATURES_OK != 0 && m.driver_features & !(F_VERSION_1 | net::F_MAC) != 0 {
                    m.violate("the driver took features it must not", format!("{:#x}", m.driver_features));
                }
                if m.status & status::FAILED != 0 && value != 0 && value & status::FAILED == 0 {
                    m.violate("the driver went on with a card it had set FAILED", format!("{value:#x}"));
                }
                m.status = value;
                if value == 0 {
                    m.queues = Default::default();
                }
            }
            _ => m.violate("a write to a register the transport does not have", format!("{value:#x} to {offset:#x}")),
        }
    }
}

fn check(model: &RefCell<Model>) -> Result<(), Finding> {
    model.borrow_mut().mem.violation.take().map_or(Ok(()), Err)
}

/// A frame of `len` bytes that changes with `seed`.
fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29) ^ (i >> 8) as u8 ^ seed).collect()
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    const { assert!(net::MEMORY <= ARENA) };
    let setup = Setup::draw(d);
    let arena = Arena::new();
    let model = RefCell::new(Model {
        setup,
        mem: DeviceMemory::new(vec![(BASE, arena.0, net::MEMORY)]),
        status: 0,
        features_sel: 0,
        driver_sel: 0,
        driver_features: 0,
        sel: 0,
        queues: Default::default(),
        posted: Vec::new(),
        rx_addr: BTreeMap::new(),
        plan: Plan::default(),
        want_frame: Vec::new(),
        sent: Vec::new(),
        tx_outcome: None,
    });
    // SAFETY: the first MEMORY bytes of the arena, which outlives the driver (declared
    // before it); only the driver and the card reach them.
    let memory = unsafe { Dma::new(arena.0, BASE, net::MEMORY) }.expect("the driver's memory");
    let got = Net::new(Port(&model), memory);
    check(&model)?;
    let mut card = match (got, setup.expected()) {
        (Ok(card), Ok(sizes)) => {
            let mut m = model.borrow_mut();
            m.sync_rx();
            let got = (card.mac(), card.features(), m.queues[RX].num, m.queues[TX].num, m.posted.len());
            let want = (setup.mac, F_VERSION_1 | net::F_MAC, sizes[RX], sizes[TX], sizes[RX] as usize);
            if got != want {
                return Err(Finding::oracle(
                    "Net::new read or set up the card otherwise",
                    format!("(mac, features, rx size, tx size, buffers posted) {got:x?}, not {want:x?}"),
                ));
            }
            drop(m);
            check(&model)?;
            card
        }
        (Err(e), Err((w, failed))) if e == w => {
            if failed && model.borrow().status & status::FAILED == 0 {
                return Err(Finding::oracle("a refused card was not set FAILED", format!("{e:?}")));
            }
            d.end(name(e));
            return Ok(());
        }
        (got, want) => {
            return Err(Finding::oracle(
                "Net::new answered otherwise than the card's books",
                format!("got {:?}, want {want:?} for {setup:x?}", got.map(|c| c.mac())),
            ));
        }
    };
    card.set_poll_limit(2);
    let mut broken = false;
    let mut end = "every call answered";
    let mut consumed = 0u16;
    let mut dropped = 0u64;
    let mut out = vec![0u8; FRAME_MAX];
    for _ in 0..1 + d.below(16) {
        if d.bool() {
            let len = if lie(d) {
                any_u32(d, &[0, 13, FRAME_MAX as u32 + 1, 4000, FRAME_MIN as u32, FRAME_MAX as u32]) as usize % 5000
            } else {
                FRAME_MIN + d.below(FRAME_MAX - FRAME_MIN + 1)
            };
            let bytes = frame(len, d.u8());
            let plan = Plan::draw(d);
            let sent_before = {
                let mut m = model.borrow_mut();
                m.plan = plan;
                m.want_frame = bytes.clone();
                m.tx_outcome = None;
                let used = m.queues[TX].addrs[2];
                m.mem.write(used, &u16::from(plan.no_notify).to_le_bytes());
                m.sent.len()
            };
            let got = card.send(&bytes);
            check(&model)?;
            let m = model.borrow();
            let want = if broken {
                Err(Error::Broken)
            } else if !(FRAME_MIN..=FRAME_MAX).contains(&len) {
                Err(Error::BadFrameLen(len))
            } else {
                if !plan.no_notify && m.sent.len() != sent_before + 1 {
                    return Err(Finding::oracle("a frame sent never reached the card", format!("{len} bytes")));
                }
                m.tx_outcome.unwrap_or(Err(Error::Timeout))
            };
            if got != want {
                return Err(Finding::oracle(
                    "a send answered otherwise than the card's books",
                    format!("{len} bytes, {plan:?}: the driver answered {got:?}, the books say {want:?}"),
                ));
            }
            if let Err(e) = got {
                if !broken && e != Error::BadFrameLen(len) {
                    broken = true;
                    end = name(e);
                    if m.status & status::FAILED == 0 {
                        return Err(Finding::oracle("a refused card was not set FAILED", format!("{e:?}")));
                    }
                }
            }
            continue;
        }
        let count = d.below(4);
        for _ in 0..count {
            let len = if lie(d) { d.below(FRAME_MIN) } else { FRAME_MIN + d.below(FRAME_MAX - FRAME_MIN + 1) };
            let bytes = frame(len, d.u8());
            let plan = Plan::draw(d);
            if !plan.silent {
                model.borrow_mut().deliver(&bytes, plan);
            }
        }
        for _ in 0..=count {
            let short = lie(d);
            let want = if broken {
                (Err(Error::Broken), 0, 0)
            } else if short {
                (Err(Error::BadFrameLen(FRAME_MAX - 1)), 0, 0)
            } else {
                model.borrow_mut().expected_recv(consumed)
            };
            check(&model)?;
            let got = card.recv(if short { &mut out[..FRAME_MAX - 1] } else { &mut out });
            check(&model)?;
            let (want, taken, drops) = want;
            let same = match (&got, &want) {
                (Ok(Some(n)), Ok(Some(bytes))) => out[..*n] == bytes[..],
                (Ok(None), Ok(None)) => true,
                (Err(e), Err(w)) => e == w,
                _ => false,
            };
            if !same {
                return Err(Finding::oracle(
                    "a receive answered otherwise than the card's books",
                    format!("the driver answered {got:?}, the books say {:?}", want.map(|w| w.map(|b| b.len()))),
                ));
            }
            consumed = consumed.wrapping_add(taken);
            dropped += drops;
            if card.dropped() != dropped {
                return Err(Finding::oracle(
                    "the driver counted other drops than the card's books",
                    format!("{} dropped, the books say {dropped}", card.dropped()),
                ));
            }
            if let Err(e) = got {
                if !broken && !short {
                    broken = true;
                    end = name(e);
                    if model.borrow().status & status::FAILED == 0 {
                        return Err(Finding::oracle("a refused card was not set FAILED", format!("{e:?}")));
                    }
                }
            }
            model.borrow_mut().sync_rx();
            check(&model)?;
        }
    }
    d.end(end);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;

    #[test]
    fn the_all_zero_input_is_an_honest_card_and_passes() {
        let mut d = Decisions::new(&[]);
        assert_eq!(run(&mut d), Ok(()));
        assert_eq!(d.end_reason(), "every call answered");
        assert!(in_process(run, &[0; 4096]).finding().is_none());
    }

    #[test]
    fn random_inputs_find_nothing_and_reach_the_drivers_refusals() {
        let mut reasons = std::collections::BTreeSet::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            let input: Vec<u8> = (0..512)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let mut d = Decisions::new(&input);
            assert_eq!(run(&mut d), Ok(()), "{input:x?}");
            reasons.insert(d.end_reason());
        }
        for reason in ["every call answered", "UsedLenTooLong", "UsedIdOutOfRange", "UsedIndexJump", "Timeout"] {
            assert!(reasons.contains(reason), "{reason} never reached: {reasons:?}");
        }
    }
}
