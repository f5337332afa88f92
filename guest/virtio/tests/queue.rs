//! The split virtqueue and its segments on their own, the test playing the device by
//! hand: a segment at the top of the address space is refused, chains are laid out as
//! the spec says and their descriptors come back to the free list. Run under Miri by
//! the case `virtio-miri`.

use virtio::queue::{Layout, MAX_SIZE};
use virtio::{Dma, Error, Queue, Segment, Used};

/// Memory for a queue, 16-aligned, that the test reads and writes as the device, held
/// as a raw pointer from the start (a Box moved after the pointer was taken would
/// invalidate it) and freed when the test ends.
#[repr(C, align(16))]
struct Bytes([u8; 4096]);

struct Memory(*mut Bytes);

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in memory(), freed once.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

const ADDR: u64 = 0x4000_0000;

fn memory() -> (Memory, *mut u8) {
    let raw = Box::into_raw(Box::new(Bytes([0xaa; 4096])));
    (Memory(raw), raw.cast())
}

fn queue(ptr: *mut u8, size: u16) -> Queue {
    // SAFETY: the test's Memory, alive for the test, reached only through `ptr`.
    let dma = unsafe { Dma::new(ptr, ADDR, 4096) }.unwrap();
    Queue::new(dma, Layout::new(size)).unwrap()
}

fn segment(addr: u64, len: u32, writable: bool) -> Segment {
    Segment::new(addr, len, writable).unwrap()
}

/// The device's side: reads `N` bytes at `offset` of the queue memory.
fn peek<const N: usize>(ptr: *mut u8, offset: usize) -> [u8; N] {
    let mut out = [0; N];
    // SAFETY: the tests keep offset + N inside the 4096 bytes of Memory.
    unsafe { std::ptr::copy_nonoverlapping(ptr.add(offset), out.as_mut_ptr(), N) };
    out
}

/// The device's side: writes `bytes` at `offset`.
fn poke(ptr: *mut u8, offset: usize, bytes: &[u8]) {
    assert!(offset + bytes.len() <= 4096);
    // SAFETY: inside Memory (checked).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.add(offset), bytes.len()) };
}

/// The device completes chain `id`, having written `len` bytes: the used element at the
/// slot of `used_idx`, then the index moved past it.
fn complete(ptr: *mut u8, layout: Layout, used_idx: u16, id: u32, len: u32) {
    let slot = layout.used + 4 + 8 * usize::from(used_idx % layout.size);
    poke(ptr, slot, &id.to_le_bytes());
    poke(ptr, slot + 4, &len.to_le_bytes());
    poke(ptr, layout.used + 2, &used_idx.wrapping_add(1).to_le_bytes());
}

#[test]
fn a_segment_at_the_top_of_the_address_space_is_refused_not_wrapped() {
    assert_eq!(Segment::new(u64::MAX, 1, false), Err(Error::AddressWrap));
    assert_eq!(Segment::new(u64::MAX - 15, 16, true), Err(Error::AddressWrap));
    assert_eq!(Segment::new(u64::MAX - 511, u32::MAX, false), Err(Error::AddressWrap));
    // Ending one byte below 2^64 fits.
    let top = Segment::new(u64::MAX - 16, 16, true).unwrap();
    assert_eq!((top.addr(), top.len(), top.writable()), (u64::MAX - 16, 16, true));
    assert_eq!(Segment::new(0x1000, 0, false), Err(Error::BadChain), "an empty segment");
    // A region the device would see at the top: refused when made, so no segment of it
    // can be asked for.
    let (_memory, ptr) = memory();
    // SAFETY: the test's memory, as in queue().
    assert_eq!(unsafe { Dma::new(ptr, u64::MAX - 100, 4096) }.err(), Some(Error::AddressWrap));
    // SAFETY: as above.
    let high = unsafe { Dma::new(ptr, u64::MAX - 4096, 4096) }.unwrap();
    assert_eq!(high.segment(4000, 96, false).unwrap().addr(), u64::MAX - 96);
    assert_eq!(high.segment(4000, 97, false), Err(Error::BadMemory));
    assert_eq!(high.segment(usize::MAX, 2, false), Err(Error::BadMemory));
}

#[test]
fn the_layout_follows_the_spec_and_its_alignments() {
    for shift in 0..=8 {
        let size = 1u16 << shift;
        let n = usize::from(size);
        let layout = Layout::new(size);
        assert_eq!(layout.avail, 16 * n);
        assert_eq!(layout.used % 4, 0);
        assert!(layout.used >= layout.avail + 6 + 2 * n);
        assert_eq!(layout.total, layout.used + 6 + 8 * n);
    }
    let (_memory, ptr) = memory();
    // SAFETY: as in queue().
    let dma = || unsafe { Dma::new(ptr, ADDR, 4096) }.unwrap();
    assert_eq!(Queue::new(dma(), Layout::new(6)).err(), Some(Error::BadQueueSize(6)));
    assert_eq!(Queue::new(dma(), Layout::new(2 * MAX_SIZE)).err(), Some(Error::BadQueueSize(u32::from(2 * MAX_SIZE))));
    assert_eq!(Queue::new(dma(), Layout { total: 10, ..Layout::new(4) }).err(), Some(Error::BadMemory));
    // SAFETY: as above; one byte in, so misaligned.
    let skewed = unsafe { Dma::new(ptr.wrapping_add(1), ADDR + 1, 4000) }.unwrap();
    assert_eq!(Queue::new(skewed, Layout::new(4)).err(), Some(Error::BadMemory));
    // SAFETY: as above; too small for MAX_SIZE entries.
    let small = unsafe { Dma::new(ptr, ADDR, 64) }.unwrap();
    assert_eq!(Queue::new(small, Layout::new(MAX_SIZE)).err(), Some(Error::BadMemory));
}

#[test]
fn a_chain_is_written_as_descriptors_and_published_in_the_available_ring() {
    let (_memory, ptr) = memory();
    let mut q = queue(ptr, 4);
    let layout = Layout::new(4);
    assert_eq!(q.addresses(), (ADDR, ADDR + 64, ADDR + layout.used as u64));
    let chain = [segment(0x1000, 16, false), segment(0x2000, 512, true), segment(0x3000, 1, true)];
    assert_eq!(q.add(&chain), Ok(0));
    assert_eq!(q.free(), 1);
    let expect = [(0x1000u64, 16u32, 1u16, 1u16), (0x2000, 512, 3, 2), (0x3000, 1, 2, 0)];
    for (i, &(addr, len, flags, next)) in expect.iter().enumerate() {
        let d: [u8; 16] = peek(ptr, 16 * i);
        assert_eq!(u64::from_le_bytes(d[..8].try_into().unwrap()), addr);
        assert_eq!(u32::from_le_bytes(d[8..12].try_into().unwrap()), len);
        assert_eq!(u16::from_le_bytes(d[12..14].try_into().unwrap()), flags, "descriptor {i}");
        if flags & 1 != 0 {
            assert_eq!(u16::from_le_bytes(d[14..].try_into().unwrap()), next);
        }
    }
    assert_eq!(peek::<2>(ptr, layout.avail + 2), 1u16.to_le_bytes(), "avail idx");
    assert_eq!(peek::<2>(ptr, layout.avail + 4), 0u16.to_le_bytes(), "avail ring[0]");
    assert_eq!(q.should_notify(), Ok(true));
    poke(ptr, layout.used, &1u16.to_le_bytes());
    assert_eq!(q.should_notify(), Ok(false), "the device's NO_NOTIFY");
}

#[test]
fn bad_chains_and_a_full_queue_are_refused() {
    let (_memory, ptr) = memory();
    let mut q = queue(ptr, 4);
    assert_eq!(q.add(&[]), Err(Error::BadChain));
    let out_of_order = [segment(0x1000, 8, true), segment(0x2000, 8, false)];
    assert_eq!(q.add(&out_of_order), Err(Error::BadChain));
    let five = [segment(0x1000, 8, false); 5];
    assert_eq!(q.add(&five), Err(Error::QueueFull));
    assert_eq!(q.add(&five[..3]), Ok(0));
    assert_eq!(q.add(&five[..2]), Err(Error::QueueFull));
    assert_eq!(q.add(&five[..1]), Ok(3));
    assert_eq!(q.free(), 0);
}

#[test]
fn used_chains_return_their_descriptors_and_the_indices_wrap() {
    let (_memory, ptr) = memory();
    let mut q = queue(ptr, 4);
    let layout = Layout::new(4);
    let chain = [segment(0x1000, 16, false), segment(0x2000, 100, true)];
    // Past 2^16 on both rings' indices, two chains in flight at a time.
    let mut used_idx = 0u16;
    for round in 0..(1u32 << 16) + 10 {
        let a = q.add(&chain).unwrap();
        let b = q.add(&chain[..1]).unwrap();
        assert_eq!(q.free(), 1, "round {round}");
        assert_eq!(q.pop_used(), Ok(None));
        complete(ptr, layout, used_idx, u32::from(b), 0);
        complete(ptr, layout, used_idx.wrapping_add(1), u32::from(a), 100);
        used_idx = used_idx.wrapping_add(2);
        assert_eq!(q.pop_used(), Ok(Some(Used { id: b, len: 0 })));
        assert_eq!(q.pop_used(), Ok(Some(Used { id: a, len: 100 })));
        assert_eq!(q.pop_used(), Ok(None));
        assert_eq!(q.free(), 4);
        if cfg!(miri) && round == 300 {
            // Miri interprets every step: a few hundred rounds prove the accesses; the
            // native run goes on past the wrap.
            return;
        }
    }
    assert_eq!(u16::from_le_bytes(peek(ptr, layout.avail + 2)), 20, "2^17 + 20 chains, wrapped");
}

#[test]
fn a_used_element_is_checked_against_the_drivers_books() {
    let (_memory, ptr) = memory();
    let layout = Layout::new(4);
    let chain = [segment(0x1000, 16, false), segment(0x2000, 100, true)];
    let cases: [(u16, u32, u32, Error); 4] = [
        (1, 0, 0, Error::UsedIndexJump(2)),
        (0, 4, 0, Error::UsedIdOutOfRange(4)),
        (0, 1, 0, Error::UsedIdNotInFlight(1)),
        (0, 0, 101, Error::UsedLenTooLong { id: 0, len: 101, writable: 100 }),
    ];
    for (jump, id, len, error) in cases {
        let mut q = queue(ptr, 4);
        q.add(&chain).unwrap();
        complete(ptr, layout, jump, id, len);
        assert_eq!(q.pop_used(), Err(error));
        // Refused, the element is not taken: the chain is still in flight.
        assert_eq!(q.free(), 2);
    }
}
