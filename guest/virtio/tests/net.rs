//! The network driver against a device model of a virtio-net card: what it sends reaches
//! the wire with a zeroed header, what the wire delivers comes back frame by frame
//! through buffers that go round, and every lie of the device about its rings is refused
//! (the device is then FAILED and the driver refuses every later call). Run under Miri
//! by the case `virtio-miri`.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::rc::Rc;

use virtio::mmio::{reg, status, F_VERSION_1, MAGIC};
use virtio::net::{self, Net, BUFFER, FRAME_MAX, HEADER};
use virtio::{Dma, Error, Mmio};

const BASE: u64 = 0x4000_0000;
const ARENA: usize = 32 * 1024;
const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
/// Features a card offers that the driver must not take: checksum and GSO offloads,
/// mergeable receive buffers.
const OFFLOADS: u64 = 1 | 1 << 1 | 1 << 7 | 1 << 11 | 1 << 15;

/// Ways the card lies. All off by default.
#[derive(Default)]
struct Hostile {
    /// Puts this id in the next used element instead of the chain's head.
    used_id: Option<u32>,
    /// Puts this length in the next used element instead of the bytes written.
    used_len: Option<u32>,
    /// Moves the used index by this much more than it completed.
    used_jump: u16,
    /// Writes this gso_type into received headers.
    gso_type: u8,
    /// Never takes a sent frame back.
    silent: bool,
}

#[derive(Default)]
struct QueueState {
    num: u32,
    ready: u32,
    addrs: [u64; 3],
    last_avail: u16,
    used_idx: u16,
}

struct Model {
    device_id: u32,
    offered: u64,
    mac: [u8; 6],
    queue_max: u32,
    status: u32,
    hostile: Hostile,
    arena: *mut u8,
    features_sel: u32,
    driver_sel: u32,
    driver_features: u64,
    sel: usize,
    queues: [QueueState; 2],
    /// The frames sent, header included.
    sent: Vec<Vec<u8>>,
}

#[derive(Clone)]
struct Card(Rc<RefCell<Model>>);

struct World {
    arena: *mut u8,
    card: Card,
}

fn arena_layout() -> Layout {
    Layout::from_size_align(ARENA, 4096).unwrap()
}

impl World {
    fn new() -> World {
        // SAFETY: the layout's size is not zero.
        let arena = unsafe { alloc_zeroed(arena_layout()) };
        assert!(!arena.is_null());
        let model = Model {
            device_id: net::DEVICE_ID,
            offered: F_VERSION_1 | net::F_MAC | OFFLOADS,
            mac: MAC,
            queue_max: 256,
            status: 0,
            hostile: Hostile::default(),
            arena,
            features_sel: 0,
            driver_sel: 0,
            driver_features: 0,
            sel: 0,
            queues: Default::default(),
            sent: Vec::new(),
        };
        World { arena, card: Card(Rc::new(RefCell::new(model))) }
    }

    fn model(&self) -> std::cell::RefMut<'_, Model> {
        self.card.0.borrow_mut()
    }

    fn net(&self) -> Result<Net<Card>, Error> {
        const { assert!(net::MEMORY <= ARENA) };
        // SAFETY: the arena outlives the driver (World is dropped after it in each test),
        // and only the driver and the card touch it.
        let memory = unsafe { Dma::new(self.arena, BASE, net::MEMORY) }.unwrap();
        Net::new(self.card.clone(), memory)
    }

    fn failed(&self) -> bool {
        self.model().status & status::FAILED != 0
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: allocated in new with the same layout.
        unsafe { dealloc(self.arena, arena_layout()) }
    }
}

impl Mmio for Card {
    fn read32(&self, offset: usize) -> u32 {
        let m = self.0.borrow();
        match offset {
            reg::MAGIC => MAGIC,
            reg::VERSION => 2,
            reg::DEVICE_ID => m.device_id,
            reg::DEVICE_FEATURES => (m.offered >> (32 * m.features_sel.min(1))) as u32,
            reg::QUEUE_NUM_MAX => m.queue_max * u32::from(m.sel < 2),
            reg::QUEUE_READY => m.queues[m.sel].ready,
            reg::INTERRUPT_STATUS => 1,
            reg::STATUS => m.status,
            reg::CONFIG_GENERATION => 0,
            o if o >= reg::CONFIG => {
                let mut config = [0u8; 8];
                config[..6].copy_from_slice(&m.mac);
                config[6] = 1;
                let o = o - reg::CONFIG;
                config.get(o..o + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => panic!("read of register {offset:#x}"),
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        let mut m = self.0.borrow_mut();
        let sel = m.sel;
        match offset {
            reg::DEVICE_FEATURES_SEL => m.features_sel = value,
            reg::DRIVER_FEATURES_SEL => m.driver_sel = value,
            reg::DRIVER_FEATURES => {
                let shift = 32 * m.driver_sel.min(1);
                m.driver_features = m.driver_features & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_SEL => {
                assert!(value < 2, "queue {value}");
                m.sel = value as usize;
            }
            reg::QUEUE_NUM => m.queues[sel].num = value,
            reg::QUEUE_READY => m.queues[sel].ready = value,
            o if (reg::QUEUE_DESC..reg::QUEUE_DEVICE + 8).contains(&o) => {
                let (which, high) = ((o - reg::QUEUE_DESC) / 0x10, (o - reg::QUEUE_DESC) % 0x10 == 4);
                let shift = if high { 32 } else { 0 };
                let a = &mut m.queues[sel].addrs[which];
                *a = *a & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_NOTIFY => {
                if value == 1 && !m.hostile.silent {
                    m.transmit();
                }
            }
            reg::INTERRUPT_ACK => {}
            reg::STATUS => {
                m.status = value;
                if value == 0 {
                    m.queues = Default::default();
                }
            }
            _ => panic!("write of {value:#x} to register {offset:#x}"),
        }
    }
}

impl Model {
    fn at(&self, addr: u64, len: usize) -> *mut u8 {
        let offset = addr.checked_sub(BASE).expect("address below the arena") as usize;
        assert!(offset + len <= ARENA, "address {addr:#x}+{len} beyond the arena");
        // SAFETY: inside the arena (checked).
        unsafe { self.arena.add(offset) }
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        // SAFETY: at() checked the bytes lie in the arena; the driver is not running.
        unsafe { std::ptr::copy_nonoverlapping(self.at(addr, len), bytes.as_mut_ptr(), len) };
        bytes
    }

    fn write(&self, addr: u64, bytes: &[u8]) {
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(addr, bytes.len()), bytes.len()) };
    }

    fn u16_at(&self, addr: u64) -> u16 {
        u16::from_le_bytes(self.read(addr, 2).try_into().unwrap())
    }

    /// The next available chain of queue `q` (one descriptor: address, length, flags), or
    /// None.
    fn take(&mut self, q: usize) -> Option<(u16, u64, u32, u16)> {
        let s = &self.queues[q];
        let [desc, avail, _] = s.addrs;
        if self.u16_at(avail + 2) == s.last_avail {
            return None;
        }
        let slot = u64::from(u32::from(s.last_avail) % s.num);
        let head = self.u16_at(avail + 4 + 2 * slot);
        assert!(u32::from(head) < s.num, "a bad head");
        let d = self.read(desc + 16 * u64::from(head), 16);
        let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
        let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
        assert_eq!(flags & 1, 0, "a chain of more than one descriptor");
        self.queues[q].last_avail = s.last_avail.wrapping_add(1);
        Some((head, addr, len, flags))
    }

    /// Puts (id, len) in queue `q`'s used ring, with the hostile knobs applied.
    fn complete(&mut self, q: usize, head: u16, written: u32) {
        let id = self.hostile.used_id.take().unwrap_or(u32::from(head));
        let len = self.hostile.used_len.take().unwrap_or(written);
        let s = &self.queues[q];
        let used = s.addrs[2];
        let slot = u64::from(u32::from(s.used_idx) % s.num);
        self.write(used + 4 + 8 * slot, &id.to_le_bytes());
        self.write(used + 8 + 8 * slot, &len.to_le_bytes());
        let idx = s.used_idx.wrapping_add(1).wrapping_add(self.hostile.used_jump);
        self.queues[q].used_idx = idx;
        self.write(used + 2, &idx.to_le_bytes());
    }

    fn transmit(&mut self) {
        while let Some((head, addr, len, flags)) = self.take(1) {
            assert_eq!(flags & 2, 0, "a transmit buffer the device may write");
            let frame = self.read(addr, len as usize);
            self.sent.push(frame);
            self.complete(1, head, 0);
        }
    }

    /// Delivers `frame` into the next receive buffer; false when the driver gave none.
    fn deliver(&mut self, frame: &[u8]) -> bool {
        let Some((head, addr, len, flags)) = self.take(0) else { return false };
        assert_eq!(flags & 2, 2, "a receive buffer the device may not write");
        assert_eq!(len as usize, BUFFER);
        let mut bytes = vec![0u8; HEADER];
        bytes[1] = self.hostile.gso_type;
        bytes.extend_from_slice(frame);
        assert!(bytes.len() <= len as usize);
        self.write(addr, &bytes);
        self.complete(0, head, bytes.len() as u32);
        true
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

#[test]
fn the_driver_takes_the_mac_and_no_offloads_and_fills_the_receive_queue() {
    let world = World::new();
    let card = world.net().unwrap();
    assert_eq!(card.mac(), MAC);
    assert_eq!(card.features(), F_VERSION_1 | net::F_MAC);
    assert_eq!(world.model().driver_features, card.features());
    let live = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK | status::DRIVER_OK;
    assert_eq!(world.model().status, live);
    // Eight buffers wait with the device, and no more.
    for n in 0..8 {
        assert!(world.model().deliver(&frame(60, n)), "buffer {n}");
    }
    assert!(!world.model().deliver(&frame(60, 9)));
}

#[test]
fn a_sent_frame_reaches_the_wire_after_a_zeroed_header() {
    let world = World::new();
    let mut card = world.net().unwrap();
    for (n, len) in [14, 60, 1000, FRAME_MAX].into_iter().enumerate() {
        let f = frame(len, n as u8);
        card.send(&f).unwrap();
        let sent = world.model().sent.pop().unwrap();
        assert_eq!(sent[..HEADER], [0; HEADER]);
        assert_eq!(sent[HEADER..], f[..]);
    }
}

#[test]
fn frames_too_short_or_too_long_never_reach_the_device() {
    let world = World::new();
    let mut card = world.net().unwrap();
    assert_eq!(card.send(&frame(13, 0)), Err(Error::BadFrameLen(13)));
    assert_eq!(card.send(&frame(FRAME_MAX + 1, 0)), Err(Error::BadFrameLen(FRAME_MAX + 1)));
    assert_eq!(card.send(&[]), Err(Error::BadFrameLen(0)));
    assert!(world.model().sent.is_empty());
    let mut small = [0u8; FRAME_MAX - 1];
    assert_eq!(card.recv(&mut small), Err(Error::BadFrameLen(FRAME_MAX - 1)));
    // The caller's mistakes leave the driver working.
    card.send(&frame(60, 0)).unwrap();
}

#[test]
fn received_frames_come_back_in_order_through_buffers_that_go_round() {
    let world = World::new();
    let mut card = world.net().unwrap();
    let mut out = vec![0u8; FRAME_MAX];
    assert_eq!(card.recv(&mut out), Ok(None));
    // Three rounds of the eight buffers, three frames waiting at a time.
    for round in 0..8u8 {
        let frames: Vec<Vec<u8>> = (0..3).map(|k| frame(14 + 500 * k, round * 3 + k as u8)).collect();
        for f in &frames {
            assert!(world.model().deliver(f));
        }
        for f in &frames {
            let len = card.recv(&mut out).unwrap().unwrap();
            assert_eq!(out[..len], f[..]);
        }
        assert_eq!(card.recv(&mut out), Ok(None));
    }
    assert!(world.model().deliver(&frame(FRAME_MAX, 1)));
    assert_eq!(card.recv(&mut out), Ok(Some(FRAME_MAX)));
    assert_eq!(out, frame(FRAME_MAX, 1));
    assert_eq!(card.dropped(), 0);
}

#[test]
fn a_smaller_device_queue_gets_as_many_buffers_as_it_holds() {
    let world = World::new();
    world.model().queue_max = 2;
    let mut card = world.net().unwrap();
    assert!(world.model().deliver(&frame(20, 1)));
    assert!(world.model().deliver(&frame(20, 2)));
    assert!(!world.model().deliver(&frame(20, 3)));
    let mut out = vec![0u8; FRAME_MAX];
    assert_eq!(card.recv(&mut out), Ok(Some(20)));
    assert_eq!(card.recv(&mut out), Ok(Some(20)));
    card.send(&frame(60, 0)).unwrap();
}

/// The error `net()` gives with the card set up by `lie`, and whether it was left FAILED.
fn refused(lie: impl FnOnce(&mut Model)) -> (Error, bool) {
    let world = World::new();
    lie(&mut world.model());
    let error = world.net().err().expect("the driver took a lying card");
    (error, world.failed())
}

#[test]
fn a_card_without_a_unicast_mac_is_refused() {
    assert_eq!(refused(|m| m.device_id = 2), (Error::WrongDevice(2), false));
    assert_eq!(refused(|m| m.offered &= !net::F_MAC), (Error::NoMac, true));
    let multicast = [0x01, 0, 0x5e, 0, 0, 1];
    assert_eq!(refused(|m| m.mac = multicast), (Error::BadMac(multicast), true));
    assert_eq!(refused(|m| m.mac = [0xff; 6]), (Error::BadMac([0xff; 6]), true));
    assert_eq!(refused(|m| m.mac = [0; 6]), (Error::BadMac([0; 6]), true));
    assert_eq!(refused(|m| m.queue_max = 0), (Error::QueueUnavailable, true));
}

/// The error of one recv after the card, with `lie` set, delivers a 60-byte frame; then
/// the card is FAILED and every later call is refused.
fn refused_recv(lie: impl FnOnce(&mut Hostile)) -> Error {
    let world = World::new();
    let mut card = world.net().unwrap();
    lie(&mut world.model().hostile);
    assert!(world.model().deliver(&frame(60, 7)));
    let mut out = vec![0u8; FRAME_MAX];
    let error = card.recv(&mut out).unwrap_err();
    assert!(world.failed(), "{error:?}: not FAILED");
    assert_eq!(card.recv(&mut out), Err(Error::Broken));
    assert_eq!(card.send(&frame(60, 0)), Err(Error::Broken));
    error
}

#[test]
fn a_received_length_beyond_the_buffer_or_short_of_the_header_is_refused() {
    let len = BUFFER as u32 + 1;
    let error = refused_recv(|h| h.used_len = Some(len));
    assert_eq!(error, Error::UsedLenTooLong { id: 0, len, writable: BUFFER as u64 });
    let error = refused_recv(|h| h.used_len = Some(u32::MAX));
    assert_eq!(error, Error::UsedLenTooLong { id: 0, len: u32::MAX, writable: BUFFER as u64 });
    for len in [0, 1, HEADER as u32 - 1] {
        assert_eq!(refused_recv(|h| h.used_len = Some(len)), Error::UsedLenShort { id: 0, len });
    }
}

#[test]
fn a_received_id_out_of_range_or_an_index_jump_is_refused() {
    assert_eq!(refused_recv(|h| h.used_id = Some(8)), Error::UsedIdOutOfRange(8));
    assert_eq!(refused_recv(|h| h.used_id = Some(u32::MAX)), Error::UsedIdOutOfRange(u32::MAX));
    assert_eq!(refused_recv(|h| h.used_jump = 8), Error::UsedIndexJump(9));
}

#[test]
fn runt_and_gso_frames_are_dropped_and_the_next_good_frame_comes_through() {
    let world = World::new();
    let mut card = world.net().unwrap();
    let mut out = vec![0u8; FRAME_MAX];
    assert!(world.model().deliver(&frame(13, 1)));
    assert!(world.model().deliver(&[]));
    world.model().hostile.gso_type = 1;
    assert!(world.model().deliver(&frame(60, 2)));
    world.model().hostile.gso_type = 0;
    assert!(world.model().deliver(&frame(60, 3)));
    assert_eq!(card.recv(&mut out), Ok(Some(60)));
    assert_eq!(out[..60], frame(60, 3)[..]);
    assert_eq!(card.dropped(), 3);
    assert!(!world.failed());
    // Every buffer went back: eight more frames fit.
    for n in 0..8 {
        assert!(world.model().deliver(&frame(60, n)));
    }
}

/// The error of one send with the card set up by `lie`; then FAILED and refused after.
fn refused_send(lie: impl FnOnce(&mut Hostile)) -> Error {
    let world = World::new();
    let mut card = world.net().unwrap();
    card.set_poll_limit(100);
    lie(&mut world.model().hostile);
    let error = card.send(&frame(60, 0)).unwrap_err();
    assert!(world.failed(), "{error:?}: not FAILED");
    assert_eq!(card.send(&frame(60, 0)), Err(Error::Broken));
    error
}

#[test]
fn a_send_the_card_lies_about_or_never_finishes_is_refused() {
    assert_eq!(refused_send(|h| h.silent = true), Error::Timeout);
    assert_eq!(refused_send(|h| h.used_len = Some(1)), Error::UsedLenTooLong { id: 0, len: 1, writable: 0 });
    assert_eq!(refused_send(|h| h.used_id = Some(1)), Error::UsedIdNotInFlight(1));
    assert_eq!(refused_send(|h| h.used_id = Some(2)), Error::UsedIdOutOfRange(2));
    assert_eq!(refused_send(|h| h.used_jump = 1), Error::UsedIndexJump(2));
}
