//! A device that lies: each lie the driver must refuse, with a typed error, before it
//! believes it, and the device is then told FAILED. Run under Miri by the case
//! `virtio-miri`: no lie makes the driver touch memory outside its own.

mod common;

use common::World;
use virtio::mmio::{status, F_VERSION_1};
use virtio::{blk, Error};
use worlds::virtio::blk::UsedLen;

/// The error `blk()` gives with the device set up by `lie`, and whether the device was
/// left FAILED.
fn refused(lie: impl FnOnce(&mut common::Model)) -> (Error, bool) {
    let world = World::new(16);
    lie(&mut world.model());
    let error = world.blk().err().expect("the driver took a lying device");
    let failed = world.model().transport.status & status::FAILED != 0;
    (error, failed)
}

#[test]
fn a_wrong_magic_version_or_device_is_refused() {
    assert_eq!(refused(|m| m.transport.magic = 0x1234_5678).0, Error::BadMagic(0x1234_5678));
    assert_eq!(refused(|m| m.transport.version = 1).0, Error::BadVersion(1));
    assert_eq!(refused(|m| m.transport.device_id = 1).0, Error::WrongDevice(1));
    assert_eq!(refused(|m| m.transport.device_id = 0).0, Error::WrongDevice(0));
}

#[test]
fn a_device_without_version_1_is_refused_and_failed() {
    assert_eq!(refused(|m| m.transport.offered &= !F_VERSION_1), (Error::NoVersion1, true));
}

#[test]
fn features_the_device_did_not_offer_at_first_are_refused() {
    let lie = |m: &mut common::Model| m.transport.features_after = 1 << 40 | blk::F_RO;
    assert_eq!(refused(lie), (Error::FeaturesChanged(1 << 40 | blk::F_RO), true));
}

#[test]
fn a_device_that_drops_features_ok_is_refused() {
    assert_eq!(refused(|m| m.transport.refuse_features = true), (Error::FeaturesRefused, true));
}

#[test]
fn queue_sizes_that_are_not_a_power_of_two_are_refused() {
    assert_eq!(refused(|m| m.transport.queue_max[0] = 6), (Error::BadQueueSize(6), true));
    assert_eq!(refused(|m| m.transport.queue_max[0] = 0), (Error::QueueUnavailable, true));
    assert_eq!(refused(|m| m.transport.queue_ready = true), (Error::QueueUnavailable, true));
    // A device maximum below the driver's is taken.
    let world = World::new(16);
    world.model().transport.queue_max[0] = 2;
    let mut disk = world.blk().unwrap();
    disk.flush().unwrap();
}

#[test]
fn block_sizes_outside_512_to_4096_or_not_a_power_of_two_are_refused() {
    for size in [0, 256, 520, 1000, 8192, u32::MAX] {
        let lie = |m: &mut common::Model| {
            m.transport.offered |= blk::F_BLK_SIZE;
            m.device.blk_size = size;
        };
        assert_eq!(refused(lie), (Error::BadBlockSize(size), true), "{size}");
    }
    // Without F_BLK_SIZE the field is not read: 512.
    let world = World::new(16);
    world.model().device.blk_size = 520;
    assert_eq!(world.blk().unwrap().block_size(), 512);
}

#[test]
fn a_capacity_whose_bytes_overflow_u64_is_refused() {
    assert_eq!(refused(|m| m.device.capacity = 1 << 55), (Error::CapacityOverflow(1 << 55), true));
    assert_eq!(refused(|m| m.device.capacity = u64::MAX), (Error::CapacityOverflow(u64::MAX), true));
    let world = World::new(16);
    world.model().device.capacity = (1 << 55) - 1;
    assert_eq!(world.blk().unwrap().capacity(), (1 << 55) - 1);
}

#[test]
fn a_device_that_never_finishes_its_reset_is_refused() {
    assert_eq!(refused(|m| m.transport.stuck_in_reset = true), (Error::DeviceFailed, true));
}

#[test]
fn a_configuration_that_never_settles_is_refused() {
    assert_eq!(refused(|m| m.transport.generation_moves = u32::MAX), (Error::ConfigUnstable, true));
}

/// The error of one read with the device set up by `lie` after the driver went live,
/// and then: the device is FAILED, the driver refuses every later request, and the
/// buffer holds none of the disk's bytes (it was zero).
fn refused_read(lie: impl FnOnce(&mut common::Model)) -> Error {
    let world = World::new(16);
    let mut disk = world.blk().unwrap();
    lie(&mut world.model());
    let mut buffer = world.buffer(0, 512);
    let error = disk.read(2, &mut buffer).unwrap_err();
    assert!(world.model().transport.status & status::FAILED != 0, "{error:?}: not FAILED");
    let mut got = [1u8; 512];
    buffer.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 512], "{error:?}: the device's bytes were left in the buffer");
    assert_eq!(disk.flush(), Err(Error::Broken));
    error
}

#[test]
fn a_used_index_that_jumps_past_the_requests_in_flight_is_refused() {
    assert_eq!(refused_read(|m| m.device.lies.used_jump = 1), Error::UsedIndexJump(2));
    assert_eq!(refused_read(|m| m.device.lies.used_jump = 8), Error::UsedIndexJump(9));
    assert_eq!(refused_read(|m| m.device.lies.used_jump = u16::MAX - 1), Error::UsedIndexJump(u16::MAX));
}

#[test]
fn a_used_id_out_of_range_or_not_in_flight_is_refused() {
    assert_eq!(refused_read(|m| m.device.lies.used_id = Some(8)), Error::UsedIdOutOfRange(8));
    assert_eq!(refused_read(|m| m.device.lies.used_id = Some(u32::MAX)), Error::UsedIdOutOfRange(u32::MAX));
    // Descriptor 1 is the chain's second, not its head: no chain in flight starts there.
    assert_eq!(refused_read(|m| m.device.lies.used_id = Some(1)), Error::UsedIdNotInFlight(1));
    assert_eq!(refused_read(|m| m.device.lies.used_id = Some(5)), Error::UsedIdNotInFlight(5));
}

#[test]
fn a_used_length_beyond_the_writable_bytes_is_refused() {
    // The read's chain lets the device write 512 + 1 bytes.
    let error = refused_read(|m| m.device.lies.used_len = UsedLen::HonestPlus(1));
    assert_eq!(error, Error::UsedLenTooLong { id: 0, len: 514, writable: 513 });
}

#[test]
fn a_read_the_device_did_not_fill_is_refused() {
    assert_eq!(refused_read(|m| m.device.lies.used_len = UsedLen::HonestMinus(1)), Error::ShortRead(512));
}

#[test]
fn a_device_that_never_answers_times_out() {
    let world = World::new(16);
    let mut disk = world.blk().unwrap();
    disk.set_poll_limit(100);
    world.model().device.lies.silent = true;
    let mut buffer = world.buffer(0, 512);
    assert_eq!(disk.read(0, &mut buffer), Err(Error::Timeout));
    assert_eq!(disk.read(0, &mut buffer), Err(Error::Broken));
    assert!(world.model().transport.status & status::FAILED != 0);
}

#[test]
fn a_status_other_than_ok_is_an_error_and_never_data() {
    for bad in [blk::S_IOERR, blk::S_UNSUPP, 7, 0xff] {
        let world = World::new(16);
        let mut disk = world.blk().unwrap();
        world.model().device.lies.status = Some(bad);
        let mut buffer = world.buffer(0, 512);
        assert_eq!(disk.read(1, &mut buffer), Err(Error::Status(bad)));
        // The model copied the sector before it wrote the bad status: it is not kept.
        let mut got = [1u8; 512];
        buffer.read(0, &mut got).unwrap();
        assert_eq!(got, [0; 512]);
        let out = world.buffer(1, 512);
        assert_eq!(disk.write(1, &out), Err(Error::Status(bad)));
        // The device answered: it is not failed, and a good answer is taken again.
        world.model().device.lies.status = None;
        disk.read(1, &mut buffer).unwrap();
        assert_eq!(world.model().transport.status & status::FAILED, 0);
    }
    // A request past the disk's end, which the driver cannot know of: the device says
    // IOERR, and the read is an error.
    let world = World::new(16);
    let mut disk = world.blk().unwrap();
    world.model().device.disk.sectors = 8;
    let mut buffer = world.buffer(0, 512);
    assert_eq!(disk.read(9, &mut buffer), Err(Error::Status(blk::S_IOERR)));
}
