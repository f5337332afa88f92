//! The disk: the virtio-blk device on the `virt` machine's virtio-mmio slot 0
//! (0x1000_1000, where the bench attaches a case's `[disk]`), driven by the portable
//! `virtio` crate, polled (the kernel takes no interrupts), one request at a time under
//! the big kernel lock. The device is not trusted: a refusal of the driver is a console
//! line naming it and an error for the program, never a panic.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use abi::Error;
use virtio::blk::{self, Blk};
use virtio::mmio::{reg, MAGIC};
use virtio::{Dma, Mmio, VolatileMmio};

use crate::kprintln;

/// Slot 0 of QEMU virt's eight virtio-mmio transports.
pub const SLOT0: usize = 0x1000_1000;
/// Its node in the device tree QEMU gives the firmware.
pub const SLOT0_NODE: &str = "/soc/virtio_mmio@10001000/reg";
/// The bounce buffer: user pages are not contiguous in physical memory, so each block of
/// a transfer goes through this kernel page (a block is 512..=4096 bytes).
const BOUNCE: usize = 4096;

/// The driver's memory: the queue, the request header and status, and the bounce page.
#[repr(C, align(4096))]
struct Memory(UnsafeCell<[u8; BOUNCE + blk::MEMORY]>);

// SAFETY: the memory is touched only through the one `Disk` built on it, by `probe`
// (once, at boot) and then under the big kernel lock.
unsafe impl Sync for Memory {}

static MEMORY: Memory = Memory(UnsafeCell::new([0; BOUNCE + blk::MEMORY]));

/// The disk, if one was found: its driver and its bounce page.
pub struct Disk {
    blk: Blk<VolatileMmio>,
    bounce: Dma,
}

// SAFETY: the driver holds raw pointers to the device's registers and to MEMORY, both
// fixed physical addresses every hart reaches the same way (satp = 0 in the kernel); the
// `Disk` lives in the kernel state and is only used under the big lock.
unsafe impl Send for Disk {}

/// A request the driver refused or the device failed: a console line naming the
/// driver's error, and Io for the program.
fn io(error: virtio::Error) -> Error {
    kprintln!("disk: request failed: {error:?}");
    Error::Io
}

impl Disk {
    /// Probes slot 0 when the device tree names it at the expected address; None (with a
    /// line saying why) when there is no block device there or the driver refuses it.
    pub fn probe(node: Option<&[u8]>) -> Option<Disk> {
        let Some(cells) = node else {
            kprintln!("disk: no {SLOT0_NODE} in the device tree");
            return None;
        };
        if cells.len() != 16 || fdt::read_u64(&cells[..8]) != Some(SLOT0 as u64) {
            kprintln!("disk: {SLOT0_NODE} is not at {SLOT0:#x}");
            return None;
        }
        // SAFETY: SLOT0 is the register window of virt's virtio-mmio slot 0 (the tree
        // names it there), reached on physical addresses; only this driver uses it.
        let mmio = unsafe { VolatileMmio::new(NonNull::new(SLOT0 as *mut u32)?) };
        // Device id 0 is an empty slot in either register layout; QEMU's empty slots
        // answer the legacy version 1, which the driver would refuse as BadVersion.
        if mmio.read32(reg::MAGIC) == MAGIC && mmio.read32(reg::DEVICE_ID) == 0 {
            kprintln!("disk: none on virtio-mmio slot 0");
            return None;
        }
        let base = MEMORY.0.get().cast::<u8>();
        // SAFETY: MEMORY is a static of BOUNCE + blk::MEMORY bytes, used by nothing but
        // this one Disk (probe runs once, at boot); the kernel runs on physical addresses,
        // so its address is the one the device uses.
        let memory = unsafe { Dma::new(base, base as u64, BOUNCE + blk::MEMORY) }.ok()?;
        let (bounce, queue) = memory.split(BOUNCE, 4096).ok()?;
        match Blk::new(mmio, queue) {
            Ok(blk) => {
                // Each request moves one block through the front of the bounce page.
                let (bounce, _) = bounce.split(blk.block_size() as usize, 1).ok()?;
                kprintln!("disk: {} sectors of {}", blk.capacity(), blk.block_size());
                Some(Disk { blk, bounce })
            }
            Err(error) => {
                kprintln!("disk: device refused: {error:?}");
                None
            }
        }
    }

    /// (sectors, block size); sectors beyond usize (rv32) are out of reach.
    pub fn info(&self) -> (usize, usize) {
        (usize::try_from(self.blk.capacity()).unwrap_or(usize::MAX), self.blk.block_size() as usize)
    }

    /// Checks a transfer of `len` bytes from `sector`: whole blocks, inside the disk, at
    /// most abi::DISK_TRANSFER_MAX (the big lock is held meanwhile).
    pub fn check(&self, sector: usize, len: usize) -> Result<(), Error> {
        let block = self.blk.block_size() as usize;
        let end = (sector as u64).checked_add((len / 512) as u64).ok_or(Error::Invalid)?;
        if len == 0
            || len > abi::DISK_TRANSFER_MAX
            || len % block != 0
            || sector % (block / 512) != 0
            || end > self.blk.capacity()
        {
            return Err(Error::Invalid);
        }
        Ok(())
    }

    /// The block size in bytes: the piece each request moves.
    pub fn block(&self) -> usize {
        self.blk.block_size() as usize
    }

    /// Reads the block at `sector` into `out` (one block long).
    pub fn read(&mut self, sector: usize, out: &mut [u8]) -> Result<(), Error> {
        self.blk.read(sector as u64, &mut self.bounce).map_err(io)?;
        self.bounce.read(0, out).map_err(io)
    }

    /// Writes `data` (one block) at `sector`.
    pub fn write(&mut self, sector: usize, data: &[u8]) -> Result<(), Error> {
        self.bounce.write(0, data).map_err(io)?;
        self.blk.write(sector as u64, &self.bounce).map_err(io)
    }

    /// Asks the device to put its cache on the disk.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.blk.flush().map_err(io)
    }
}
