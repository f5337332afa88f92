//! The network driver against a device model of a virtio-net card: what it sends reaches
//! the wire with a zeroed header, what the wire delivers comes back frame by frame
//! through buffers that go round, and every lie of the device about its rings is refused
//! (the device is then FAILED and the driver refuses every later call). Run under Miri
//! by the case `virtio-miri`.

use virtio::mmio::{status, F_VERSION_1};
use virtio::net::{self, Net, BUFFER, FRAME_MAX, HEADER};
use virtio::{Dma, Error};
use worlds::virtio::net::{Card, Lies};
use worlds::virtio::{Arena, Memory, Model, Port};

const BASE: u64 = 0x4000_0000;
const ARENA: usize = 32 * 1024;
const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
/// Features a card offers that the driver must not take: checksum and GSO offloads,
/// mergeable receive buffers.
const OFFLOADS: u64 = 1 | 1 << 1 | 1 << 7 | 1 << 11 | 1 << 15;

/// The memory and the worlds' virtio-net card model (`guest/worlds`, the one hostfuzz's
/// `virtio-net` target lies through); any rule the driver breaks panics in the model.
struct World {
    arena: Arena,
    card: Port<Card>,
}

impl World {
    fn new() -> World {
        let arena = Arena::new(ARENA);
        let transport = Card::transport(F_VERSION_1 | net::F_MAC | OFFLOADS, [256, 256]);
        let mem = Memory::panicking(vec![(BASE, arena.ptr(), ARENA)]);
        let card = Port::new(transport, mem, Card::new(MAC));
        World { arena, card }
    }

    fn model(&self) -> std::cell::RefMut<'_, Model<Card>> {
        self.card.model()
    }

    fn net(&self) -> Result<Net<Port<Card>>, Error> {
        const { assert!(net::MEMORY <= ARENA) };
        // SAFETY: the arena outlives the driver (World is dropped after it in each test),
        // and only the driver and the card touch it.
        let memory = unsafe { Dma::new(self.arena.ptr(), BASE, net::MEMORY) }.unwrap();
        Net::new(self.card.clone(), memory)
    }

    fn failed(&self) -> bool {
        self.model().transport.status & status::FAILED != 0
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
    assert_eq!(world.model().transport.driver_features, card.features());
    let live = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK | status::DRIVER_OK;
    assert_eq!(world.model().transport.status, live);
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
        let sent = world.model().device.sent.pop().unwrap();
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
    assert!(world.model().device.sent.is_empty());
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
    world.model().transport.queue_max = vec![2, 2];
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
fn refused(lie: impl FnOnce(&mut Model<Card>)) -> (Error, bool) {
    let world = World::new();
    lie(&mut world.model());
    let error = world.net().err().expect("the driver took a lying card");
    (error, world.failed())
}

#[test]
fn a_card_without_a_unicast_mac_is_refused() {
    assert_eq!(refused(|m| m.transport.device_id = 2), (Error::WrongDevice(2), false));
    assert_eq!(refused(|m| m.transport.offered &= !net::F_MAC), (Error::NoMac, true));
    let multicast = [0x01, 0, 0x5e, 0, 0, 1];
    assert_eq!(refused(|m| m.device.mac = multicast), (Error::BadMac(multicast), true));
    assert_eq!(refused(|m| m.device.mac = [0xff; 6]), (Error::BadMac([0xff; 6]), true));
    assert_eq!(refused(|m| m.device.mac = [0; 6]), (Error::BadMac([0; 6]), true));
    assert_eq!(refused(|m| m.transport.queue_max = vec![0, 0]), (Error::QueueUnavailable, true));
}

/// The error of one recv after the card, with `lie` set, delivers a 60-byte frame; then
/// the card is FAILED and every later call is refused.
fn refused_recv(lie: impl FnOnce(&mut Lies)) -> Error {
    let world = World::new();
    let mut card = world.net().unwrap();
    lie(&mut world.model().device.lies);
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
    let error = refused_recv(|h| h.len = Some(len));
    assert_eq!(error, Error::UsedLenTooLong { id: 0, len, writable: BUFFER as u64 });
    let error = refused_recv(|h| h.len = Some(u32::MAX));
    assert_eq!(error, Error::UsedLenTooLong { id: 0, len: u32::MAX, writable: BUFFER as u64 });
    for len in [0, 1, HEADER as u32 - 1] {
        assert_eq!(refused_recv(|h| h.len = Some(len)), Error::UsedLenShort { id: 0, len });
    }
}

#[test]
fn a_received_id_out_of_range_or_an_index_jump_is_refused() {
    assert_eq!(refused_recv(|h| h.id = Some(8)), Error::UsedIdOutOfRange(8));
    assert_eq!(refused_recv(|h| h.id = Some(u32::MAX)), Error::UsedIdOutOfRange(u32::MAX));
    assert_eq!(refused_recv(|h| h.jump = 8), Error::UsedIndexJump(9));
}

#[test]
fn runt_and_gso_frames_are_dropped_and_the_next_good_frame_comes_through() {
    let world = World::new();
    let mut card = world.net().unwrap();
    let mut out = vec![0u8; FRAME_MAX];
    assert!(world.model().deliver(&frame(13, 1)));
    assert!(world.model().deliver(&[]));
    world.model().device.lies.gso = 1;
    assert!(world.model().deliver(&frame(60, 2)));
    world.model().device.lies.gso = 0;
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
fn refused_send(lie: impl FnOnce(&mut Lies)) -> Error {
    let world = World::new();
    let mut card = world.net().unwrap();
    card.set_poll_limit(100);
    lie(&mut world.model().device.lies);
    let error = card.send(&frame(60, 0)).unwrap_err();
    assert!(world.failed(), "{error:?}: not FAILED");
    assert_eq!(card.send(&frame(60, 0)), Err(Error::Broken));
    error
}

#[test]
fn a_send_the_card_lies_about_or_never_finishes_is_refused() {
    assert_eq!(refused_send(|h| h.silent = true), Error::Timeout);
    assert_eq!(refused_send(|h| h.len = Some(1)), Error::UsedLenTooLong { id: 0, len: 1, writable: 0 });
    assert_eq!(refused_send(|h| h.id = Some(1)), Error::UsedIdNotInFlight(1));
    assert_eq!(refused_send(|h| h.id = Some(2)), Error::UsedIdOutOfRange(2));
    assert_eq!(refused_send(|h| h.jump = 1), Error::UsedIndexJump(2));
}
