//! Virtio for the reference guest, portable so that the host tests run the very code the
//! guest runs, against a device model:
//!
//! - [`mmio`]: the virtio-mmio transport, version 2 ("modern") only: the register
//!   window behind the [`Mmio`] trait (volatile in the guest, a model on the host),
//!   feature negotiation and the status state machine;
//! - [`queue`]: split virtqueues in memory the driver owns ([`Dma`]), descriptor chains
//!   of [`Segment`]s, whose device address is reached only through a checked add;
//! - [`blk`]: a virtio-blk driver on both, one request at a time;
//! - [`net`]: a virtio-net driver on both, raw Ethernet frames, no offloads.
//!
//! The device is not trusted: every register it answers and every byte it writes into
//! the used ring is checked before it is used, and a bad answer is an [`Error`], never
//! a panic nor an access outside the driver's memory.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod blk;
mod dma;
pub mod mmio;
pub mod net;
pub mod queue;

pub use dma::{Dma, Segment};
pub use mmio::{Mmio, Transport, VolatileMmio};
pub use queue::{Queue, Used};

/// Every way the driver refuses a device, a request or its own caller's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The magic register does not read "virt" (the value read).
    BadMagic(u32),
    /// Not a version 2 (modern) virtio-mmio device (the version read).
    BadVersion(u32),
    /// The device is not the kind the driver drives (the device id read).
    WrongDevice(u32),
    /// The device does not offer VIRTIO_F_VERSION_1.
    NoVersion1,
    /// The device offered features it had not offered at first (the new bits).
    FeaturesChanged(u64),
    /// The device did not keep FEATURES_OK after the driver set it.
    FeaturesRefused,
    /// The device set DEVICE_NEEDS_RESET or cleared a status bit the driver set.
    DeviceFailed,
    /// The queue does not exist (its maximum size reads 0) or is already in use.
    QueueUnavailable,
    /// The device's maximum queue size is not a power of two (the size read).
    BadQueueSize(u32),
    /// A device address plus a length does not fit in 64 bits.
    AddressWrap,
    /// Driver memory that is too small, misaligned or out of its region.
    BadMemory,
    /// A chain with no segment, a readable segment after a writable one, or a length
    /// that does not fit a descriptor.
    BadChain,
    /// Not enough free descriptors for the chain.
    QueueFull,
    /// The used ring's index moved by more than the requests in flight (the distance).
    UsedIndexJump(u16),
    /// A used element names a descriptor id beyond the queue (the id).
    UsedIdOutOfRange(u32),
    /// A used element names a descriptor that heads no chain in flight (the id).
    UsedIdNotInFlight(u32),
    /// A used element claims more bytes written than the chain's writable segments hold.
    UsedLenTooLong { id: u16, len: u32, writable: u64 },
    /// The configuration kept changing while it was read.
    ConfigUnstable,
    /// The block size is not a power of two in 512..=4096 (the size read).
    BadBlockSize(u32),
    /// The capacity in bytes does not fit in 64 bits (the capacity in sectors).
    CapacityOverflow(u64),
    /// A request outside the disk, or not a whole number of blocks.
    OutOfRange,
    /// A write to a read-only disk.
    ReadOnly,
    /// The device wrote fewer bytes than the read asked for (the used length).
    ShortRead(u32),
    /// The request's status is not OK (the status byte: 1 I/O error, 2 unsupported).
    Status(u8),
    /// A network card that offers no MAC (VIRTIO_NET_F_MAC).
    NoMac,
    /// A MAC that is not a unicast address: the multicast bit set, or all zeros.
    BadMac([u8; 6]),
    /// A frame to send that is not 14..=1514 bytes, or a receive buffer shorter than
    /// 1514 (the length given).
    BadFrameLen(usize),
    /// A used element whose length is shorter than the header the device always writes.
    UsedLenShort { id: u16, len: u32 },
    /// The device did not answer within the poll limit.
    Timeout,
    /// The driver gave up on the device after an earlier refusal (and set FAILED).
    Broken,
}
