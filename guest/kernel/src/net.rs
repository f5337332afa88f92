//! The network card: the virtio-net device on the `virt` machine's virtio-mmio slot 2
//! (0x1000_3000, where the bench attaches a case's `[net]`), driven by the portable
//! `virtio` crate. Polled, like the disk: the kernel takes no device interrupts, a send
//! waits (under the big lock) for the device to take the frame back, and a receive takes
//! a frame the device has already written or says there is none; programs poll.
//! Programs get raw Ethernet frames (net_info, net_send, net_recv in guest/abi); any
//! network stack runs in the program. The device is not trusted: a refusal of the driver
//! is a console line naming it and Io for the program, never a panic.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use abi::Error;
use virtio::mmio::{reg, MAGIC};
use virtio::net::{self, Net, FRAME_MAX, FRAME_MIN};
use virtio::{Dma, Mmio, VolatileMmio};

use crate::kprintln;

/// Slot 2 of QEMU virt's eight virtio-mmio transports.
pub const SLOT2: usize = 0x1000_3000;
/// Its node in the device tree QEMU gives the firmware.
pub const SLOT2_NODE: &str = "/soc/virtio_mmio@10003000/reg";

/// The driver's memory: the two queues and every buffer.
#[repr(C, align(4096))]
struct Memory(UnsafeCell<[u8; net::MEMORY]>);

// SAFETY: the memory is touched only through the one `Card` built on it, by `probe`
// (once, at boot) and then under the big kernel lock.
unsafe impl Sync for Memory {}

static MEMORY: Memory = Memory(UnsafeCell::new([0; net::MEMORY]));

/// The card, if one was found, and the kernel's copy of one frame (in the kernel's
/// state, not on the 16 KiB kernel stack).
pub struct Card {
    net: Net<VolatileMmio>,
    frame: [u8; FRAME_MAX],
}

// SAFETY: as for the disk (disk.rs): raw pointers to fixed physical addresses, used only
// under the big lock.
unsafe impl Send for Card {}

/// A request the driver refused or the device failed: a console line, and Io.
fn io(error: virtio::Error) -> Error {
    kprintln!("net: request failed: {error:?}");
    Error::Io
}

impl Card {
    /// Probes slot 2 when the device tree names it at the expected address; None (with a
    /// line saying why) when there is no network card there or the driver refuses it.
    pub fn probe(node: Option<&[u8]>) -> Option<Card> {
        let Some(cells) = node else {
            kprintln!("net: no {SLOT2_NODE} in the device tree");
            return None;
        };
        if cells.len() != 16 || fdt::read_u64(&cells[..8]) != Some(SLOT2 as u64) {
            kprintln!("net: {SLOT2_NODE} is not at {SLOT2:#x}");
            return None;
        }
        // SAFETY: SLOT2 is the register window of virt's virtio-mmio slot 2 (the tree
        // names it there), reached on physical addresses; only this driver uses it.
        let mmio = unsafe { VolatileMmio::new(NonNull::new(SLOT2 as *mut u32)?) };
        // An empty slot: device id 0 (see disk.rs).
        if mmio.read32(reg::MAGIC) == MAGIC && mmio.read32(reg::DEVICE_ID) == 0 {
            kprintln!("net: none on virtio-mmio slot 2");
            return None;
        }
        let base = MEMORY.0.get().cast::<u8>();
        // SAFETY: MEMORY is a static of net::MEMORY bytes, used by nothing but this one
        // Card (probe runs once, at boot); the kernel runs on physical addresses, so its
        // address is the one the device uses.
        let memory = unsafe { Dma::new(base, base as u64, net::MEMORY) }.ok()?;
        match Net::new(mmio, memory) {
            Ok(net) => {
                let m = net.mac();
                kprintln!("net: mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
                Some(Card { net, frame: [0; FRAME_MAX] })
            }
            Err(error) => {
                kprintln!("net: device refused: {error:?}");
                None
            }
        }
    }

    /// The MAC: bytes 0..3 little-endian in the first word, 3..6 in the second.
    pub fn info(&self) -> (usize, usize) {
        let m = self.net.mac();
        let word = |b: &[u8]| b.iter().rev().fold(0usize, |w, &byte| w << 8 | usize::from(byte));
        (word(&m[..3]), word(&m[3..]))
    }

    /// The kernel's frame buffer, `len` bytes of it for a send (FRAME_MIN..=FRAME_MAX).
    pub fn send_buffer(&mut self, len: usize) -> Result<&mut [u8], Error> {
        if !(FRAME_MIN..=FRAME_MAX).contains(&len) {
            return Err(Error::Invalid);
        }
        Ok(&mut self.frame[..len])
    }

    /// Sends the first `len` bytes of the frame buffer.
    pub fn send(&mut self, len: usize) -> Result<(), Error> {
        self.net.send(&self.frame[..len]).map_err(io)
    }

    /// The next received frame, in the frame buffer: its bytes, or None.
    pub fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.net.recv(&mut self.frame).map_err(io)? {
            Some(len) => Ok(Some(&self.frame[..len])),
            None => Ok(None),
        }
    }
}
