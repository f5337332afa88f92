//! The block driver against the device model: what it writes reaches the disk, what it
//! reads is the disk's, and requests outside the disk never reach the device. Run under
//! Miri by the case `virtio-miri`, where the driver's and the device's accesses to the
//! shared rings and buffers are checked for aliasing and bounds.

mod common;

use common::World;
use virtio::mmio::status;
use virtio::{blk, Error};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn the_driver_negotiates_and_goes_live() {
    let world = World::new(64);
    let disk = world.blk().unwrap();
    assert_eq!(disk.capacity(), 64);
    assert_eq!(disk.block_size(), 512);
    assert_eq!(disk.features(), virtio::mmio::F_VERSION_1 | blk::F_FLUSH);
    let model = world.model();
    assert_eq!(model.transport.driver_features, disk.features());
    let live = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK | status::DRIVER_OK;
    assert_eq!(model.transport.status, live);
}

#[test]
fn reads_return_the_disks_bytes() {
    let world = World::new(64);
    let mut disk = world.blk().unwrap();
    let mut buffer = world.buffer(0, 1024);
    disk.read(3, &mut buffer).unwrap();
    let mut got = vec![0; 1024];
    buffer.read(0, &mut got).unwrap();
    assert_eq!(got, world.model().device.disk.read(3, 1024));
    // The driver acknowledged the completion's interrupt.
    assert_eq!(world.model().transport.interrupt, 0);
}

#[test]
fn writes_reach_the_disk_and_read_back() {
    let world = World::new(64);
    let mut disk = world.blk().unwrap();
    let data = pattern(2048, 9);
    let mut out = world.buffer(0, 2048);
    out.write(0, &data).unwrap();
    let mut expect = world.model().device.disk.read(0, 64 * 512);
    expect[10 * 512..14 * 512].copy_from_slice(&data);
    disk.write(10, &out).unwrap();
    disk.flush().unwrap();
    // Those four sectors, and only they, changed.
    assert!(world.model().device.disk.read(0, 64 * 512) == expect);
    let mut back = world.buffer(1, 2048);
    disk.read(10, &mut back).unwrap();
    let mut got = vec![0; 2048];
    back.read(0, &mut got).unwrap();
    assert_eq!(got, data);
    assert_eq!(world.model().device.completed, 3);
}

#[test]
fn requests_outside_the_disk_or_not_whole_blocks_never_reach_the_device() {
    let world = World::new(16);
    let mut disk = world.blk().unwrap();
    let mut buffer = world.buffer(0, 1024);
    assert_eq!(disk.read(15, &mut buffer), Err(Error::OutOfRange));
    assert_eq!(disk.read(u64::MAX, &mut buffer), Err(Error::OutOfRange));
    let mut odd = world.buffer(1, 100);
    assert_eq!(disk.read(0, &mut odd), Err(Error::OutOfRange));
    let mut empty = world.buffer(2, 0);
    assert_eq!(disk.read(0, &mut empty), Err(Error::OutOfRange));
    assert_eq!(world.model().device.completed, 0);
    // The last two sectors are inside.
    disk.read(14, &mut buffer).unwrap();
}

#[test]
fn a_4096_byte_block_size_is_used_when_offered() {
    let world = World::new(64);
    world.model().transport.offered |= blk::F_BLK_SIZE;
    world.model().device.blk_size = 4096;
    let mut disk = world.blk().unwrap();
    assert_eq!(disk.block_size(), 4096);
    let mut buffer = world.buffer(0, 4096);
    assert_eq!(disk.read(1, &mut buffer), Err(Error::OutOfRange), "not at a block boundary");
    let mut small = world.buffer(1, 512);
    assert_eq!(disk.read(0, &mut small), Err(Error::OutOfRange), "not a whole block");
    disk.read(8, &mut buffer).unwrap();
    let mut got = vec![0; 4096];
    buffer.read(0, &mut got).unwrap();
    assert_eq!(got, world.model().device.disk.read(8, 4096));
}

#[test]
fn a_read_only_disk_refuses_writes_before_the_device_sees_them() {
    let world = World::new(8);
    world.model().transport.offered |= blk::F_RO;
    let mut disk = world.blk().unwrap();
    let buffer = world.buffer(0, 512);
    assert_eq!(disk.write(0, &buffer), Err(Error::ReadOnly));
    assert_eq!(world.model().device.completed, 0);
}

#[test]
fn without_f_flush_a_flush_asks_nothing_of_the_device() {
    let world = World::new(8);
    world.model().transport.offered &= !blk::F_FLUSH;
    let mut disk = world.blk().unwrap();
    disk.flush().unwrap();
    assert_eq!(world.model().device.completed, 0);
}
