//! Many requests through one queue: past 2^16 the available and used indices wrap, and
//! every read still returns what was last written. Not in the Miri case (it would
//! interpret 70 000 requests; tests/queue.rs has the queue's wrap under Miri's eye, cut
//! short there).

mod common;

use common::World;

#[test]
fn the_rings_wrap_past_two_to_the_sixteen_requests_and_data_stays_right() {
    const REQUESTS: u64 = (1 << 16) + 4000;
    let world = World::new(32);
    let mut disk = world.blk().unwrap();
    let mut out = world.buffer(0, 512);
    let mut back = world.buffer(1, 512);
    let mut got = [0u8; 512];
    let mut sent = 0;
    while sent < REQUESTS {
        // A write of a sector with bytes naming the request, then its read.
        let sector = sent % 32;
        let stamp = sent.to_le_bytes();
        let data: Vec<u8> = (0..512).map(|i| stamp[i % 8] ^ i as u8).collect();
        out.write(0, &data).unwrap();
        disk.write(sector, &out).unwrap();
        disk.read(sector, &mut back).unwrap();
        back.read(0, &mut got).unwrap();
        assert_eq!(got[..], data[..], "request {sent}");
        sent += 2;
    }
    assert_eq!(world.model().device.completed, REQUESTS);
    assert!(world.model().device.completed > u64::from(u16::MAX) + 1);
}
