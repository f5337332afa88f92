//! The block tests' world: the worlds' virtio-blk device model (`guest/worlds`, the one
//! hostfuzz's `virtio` target lies through) over a disk, and the memory the driver and
//! the device share, which the device reads and writes through raw pointers at the
//! addresses the driver gives it, as a real device does by DMA. Any rule the driver
//! breaks panics in the model; its lies (`Block::lies`, the transport's fields) are the
//! tests' to set.

use virtio::mmio::F_VERSION_1;
use virtio::{blk, Dma, Error};
use worlds::virtio::blk::{Block, Disk};
use worlds::virtio::{Arena, Memory, Port};

/// The device address of the arena's first byte.
pub const BASE: u64 = 0x8000_0000;
/// The arena's size: the driver's memory, then data buffers.
const ARENA: usize = 1 << 16;

/// The driver's handle on the device; the test keeps another.
pub type Device = Port<Block>;

/// The device's state: its transport (registers and their lies) and the block device.
pub type Model = worlds::virtio::Model<Block>;

/// A test's world: the memory and a block device of `sectors` 512-byte sectors, each
/// holding its number (8 bytes, little-endian) and then bytes `i * 7 % 251` to start with.
pub struct World {
    pub arena: Arena,
    pub device: Device,
}

/// Bytes `i * 7 % 251`, the sectors' after their number.
const PATTERN: [u8; 512] = {
    let mut pattern = [0u8; 512];
    let mut i = 0;
    while i < 512 {
        pattern[i] = (i * 7 % 251) as u8;
        i += 1;
    }
    pattern
};

/// Sector `sector` as the disk starts: copied, as Miri interprets a loop over every byte
/// slowly.
fn fill(sector: u64, out: &mut [u8]) {
    out.copy_from_slice(&PATTERN);
    out[..8].copy_from_slice(&sector.to_le_bytes());
}

impl World {
    pub fn new(sectors: u64) -> World {
        let arena = Arena::new(ARENA);
        let transport = Block::transport(F_VERSION_1 | blk::F_FLUSH, 128);
        let mem = Memory::panicking(vec![(BASE, arena.ptr(), ARENA)]);
        let device = Port::new(transport, mem, Block::new(sectors, Disk::new(sectors, fill)));
        World { arena, device }
    }

    /// The device's state, to set it up or look at it.
    pub fn model(&self) -> std::cell::RefMut<'_, Model> {
        self.device.model()
    }

    /// The block driver on the device, its memory at the arena's start.
    pub fn blk(&self) -> Result<blk::Blk<Device>, Error> {
        blk::Blk::new(self.device.clone(), self.dma(0, blk::MEMORY))
    }

    /// A data buffer of `len` bytes, the `n`th (from the arena's second half).
    pub fn buffer(&self, n: usize, len: usize) -> Dma {
        self.dma(ARENA / 2 + n * 8192, len)
    }

    /// The `len` bytes at `offset`, as driver memory. Each test hands out disjoint parts.
    fn dma(&self, offset: usize, len: usize) -> Dma {
        assert!(offset + len <= ARENA);
        // SAFETY: inside the arena, which outlives every driver of the test (declared
        // first); the tests hand out disjoint parts.
        unsafe { Dma::new(self.arena.ptr().add(offset), BASE + offset as u64, len) }.unwrap()
    }
}
