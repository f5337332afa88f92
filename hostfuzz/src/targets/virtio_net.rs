//! The virtio-net driver (`guest/virtio/src/net.rs`) against the hostile virtio-mmio
//! network card of `guest/worlds` (`worlds::virtio::net`, the one `guest/virtio`'s host
//! tests use); this file draws its setup and its lies from the decisions and is its
//! oracle. The decisions set the card (its device id, whether it offers
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

use virtio::mmio::{status, F_VERSION_1};
use virtio::net::{self, Net, BUFFER, FRAME_MAX, FRAME_MIN, HEADER};
use virtio::{Dma, Error};
use worlds::virtio::net::{Card, Lies, Sent, RX, TX};
use worlds::virtio::{Arena, Memory, Model, Port};

use super::virtio::{any_u32, check, lie, name, ARENA};
use crate::{Decisions, Finding};

const BASE: u64 = 0x4000_0000;
/// Offloads and other features a card offers that the driver must not take.
const OFFLOADS: u64 = 1 | 1 << 1 | 1 << 7 | 1 << 11 | 1 << 15 | 1 << 16 | 1 << 40;

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

    /// The card the decisions set up, the driver's memory (`net::MEMORY` bytes of
    /// `arena`) its region.
    fn device(&self, arena: &Arena) -> Port<Card> {
        let mut transport = Card::transport(self.offered, self.queue_max);
        transport.device_id = self.device_id;
        Port::new(transport, Memory::keeping(vec![(BASE, arena.ptr(), net::MEMORY)]), Card::new(self.mac))
    }
}

/// How the card answers one chain. All zero: honestly.
fn plan(d: &mut Decisions) -> Lies {
    let mut p = Lies::default();
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

/// What a send must answer after the card's answer `a` on a transmit queue of `size`,
/// by the driver's checks in their order.
fn sent(a: &Sent, size: u32) -> Result<(), Error> {
    if a.delta == 0 {
        Err(Error::Timeout)
    } else if a.delta > 1 {
        Err(Error::UsedIndexJump(a.delta))
    } else if a.id >= size {
        Err(Error::UsedIdOutOfRange(a.id))
    } else if a.id != u32::from(a.head) {
        Err(Error::UsedIdNotInFlight(a.id))
    } else if a.len > 0 {
        Err(Error::UsedLenTooLong { id: a.head, len: a.len, writable: 0 })
    } else {
        Ok(())
    }
}

/// What one `recv` must answer, by the driver's documented checks over the used ring
/// as the card left it (`consumed`: the used elements the driver took before), and
/// how many elements it takes and drops.
fn expected_recv(m: &mut Model<Card>, consumed: u16) -> (Result<Option<Vec<u8>>, Error>, u16, u64) {
    let size = m.transport.queues[RX].num;
    let used = m.transport.queues[RX].addrs[2];
    let (mut taken, mut dropped) = (0u16, 0u64);
    for _ in 0..size {
        let at = consumed.wrapping_add(taken);
        let pending = m.transport.queues[RX].used_idx.wrapping_sub(at);
        if pending == 0 {
            return (Ok(None), taken, dropped);
        }
        if u32::from(pending) > size {
            return (Err(Error::UsedIndexJump(pending)), taken, dropped);
        }
        let slot = u64::from(u32::from(at) % size);
        let id = m.mem.read32(used + 4 + 8 * slot);
        let len = m.mem.read32(used + 8 + 8 * slot);
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
        let Some(&addr) = m.device.rx_addr.get(&id) else {
            m.mem.violate("a receive id the driver never posted is in flight", format!("{id}"));
            return (Ok(None), taken, dropped);
        };
        let mut bytes = vec![0u8; len as usize];
        m.mem.read(addr, &mut bytes);
        let frame = bytes.split_off(HEADER);
        if frame.len() < FRAME_MIN || bytes[1] != 0 {
            dropped += 1;
            continue;
        }
        return (Ok(Some(frame)), taken, dropped);
    }
    (Ok(None), taken, dropped)
}

/// A frame of `len` bytes that changes with `seed`.
fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29) ^ (i >> 8) as u8 ^ seed).collect()
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    const { assert!(net::MEMORY <= ARENA) };
    let setup = Setup::draw(d);
    let arena = Arena::new(ARENA);
    let device = setup.device(&arena);
    // SAFETY: the first MEMORY bytes of the arena, which outlives the driver (declared
    // before it); only the driver and the card reach them.
    let memory = unsafe { Dma::new(arena.ptr(), BASE, net::MEMORY) }.expect("the driver's memory");
    let got = Net::new(device.clone(), memory);
    check(&device)?;
    let mut card = match (got, setup.expected()) {
        (Ok(card), Ok(sizes)) => {
            let mut m = device.model();
            m.sync_rx();
            let queues = &m.transport.queues;
            let got = (card.mac(), card.features(), queues[RX].num, queues[TX].num, m.device.posted.len());
            let want = (setup.mac, F_VERSION_1 | net::F_MAC, sizes[RX], sizes[TX], sizes[RX] as usize);
            if got != want {
                return Err(Finding::oracle(
                    "Net::new read or set up the card otherwise",
                    format!("(mac, features, rx size, tx size, buffers posted) {got:x?}, not {want:x?}"),
                ));
            }
            drop(m);
            check(&device)?;
            card
        }
        (Err(e), Err((w, failed))) if e == w => {
            if failed && device.model().transport.status & status::FAILED == 0 {
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
            let plan = plan(d);
            let sent_before = {
                let mut m = device.model();
                m.begin_send(&bytes, plan);
                m.device.sent.len()
            };
            let got = card.send(&bytes);
            check(&device)?;
            let m = device.model();
            let want = if broken {
                Err(Error::Broken)
            } else if !(FRAME_MIN..=FRAME_MAX).contains(&len) {
                Err(Error::BadFrameLen(len))
            } else {
                if !plan.no_notify && m.device.sent.len() != sent_before + 1 {
                    return Err(Finding::oracle("a frame sent never reached the card", format!("{len} bytes")));
                }
                m.device.answer.map_or(Err(Error::Timeout), |a| sent(&a, m.transport.queues[TX].num))
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
                    if m.transport.status & status::FAILED == 0 {
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
            let lies = plan(d);
            if !lies.silent {
                let mut m = device.model();
                m.device.lies = lies;
                m.deliver(&bytes);
            }
        }
        for _ in 0..=count {
            let short = lie(d);
            let want = if broken {
                (Err(Error::Broken), 0, 0)
            } else if short {
                (Err(Error::BadFrameLen(FRAME_MAX - 1)), 0, 0)
            } else {
                expected_recv(&mut device.model(), consumed)
            };
            check(&device)?;
            let got = card.recv(if short { &mut out[..FRAME_MAX - 1] } else { &mut out });
            check(&device)?;
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
                    if device.model().transport.status & status::FAILED == 0 {
                        return Err(Finding::oracle("a refused card was not set FAILED", format!("{e:?}")));
                    }
                }
            }
            device.model().sync_rx();
            check(&device)?;
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
