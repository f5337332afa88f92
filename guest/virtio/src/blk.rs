//! A virtio-blk driver on the mmio transport and one split virtqueue, one request at a
//! time: a request is a header (type, sector) the device reads, the data segment (read
//! by the device for a write, written by it for a read) and a status byte it writes.

use crate::mmio::{Mmio, Transport, F_VERSION_1};
use crate::queue::{Layout, Queue, MAX_SIZE};
use crate::{Dma, Error, Segment};

/// The device id of a block device.
pub const DEVICE_ID: u32 = 2;
/// The disk is read-only.
pub const F_RO: u64 = 1 << 5;
/// The configuration's blk_size is the disk's block size.
pub const F_BLK_SIZE: u64 = 1 << 6;
/// The device has a write cache and takes flush requests.
pub const F_FLUSH: u64 = 1 << 9;

/// Request types.
pub const T_IN: u32 = 0;
pub const T_OUT: u32 = 1;
pub const T_FLUSH: u32 = 4;

/// Status values.
pub const S_OK: u8 = 0;
pub const S_IOERR: u8 = 1;
pub const S_UNSUPP: u8 = 2;

/// The unit of the capacity and of a request's sector, whatever the block size.
pub const SECTOR: u64 = 512;

/// The queue's size at most: a request needs three descriptors.
const QUEUE_SIZE: u16 = 8;
const HEADER: usize = 16;
/// The status byte's value until the device writes it.
const NO_STATUS: u8 = 0xff;

/// The bytes of driver memory [`Blk::new`] needs (with room to align it).
pub const MEMORY: usize = Layout::new(QUEUE_SIZE).total + 16 + HEADER + 1;

/// A block device, initialised and live.
pub struct Blk<M: Mmio> {
    transport: Transport<M>,
    queue: Queue,
    request: Dma,
    features: u64,
    capacity: u64,
    block_size: u32,
    poll_limit: u32,
    broken: bool,
}

impl<M: Mmio> Blk<M> {
    /// Probes and initialises the block device behind `mmio`, with its queue, header and
    /// status in `memory` ([`MEMORY`] bytes, 16-aligned). Refuses a device that is not a
    /// block device, a block size that is not a power of two in 512..=4096 and a capacity
    /// whose size in bytes does not fit in 64 bits; the device is left FAILED.
    pub fn new(mmio: M, memory: Dma) -> Result<Blk<M>, Error> {
        let mut transport = Transport::probe(mmio)?;
        if transport.device_id() != DEVICE_ID {
            return Err(Error::WrongDevice(transport.device_id()));
        }
        let features = transport.init(F_RO | F_BLK_SIZE | F_FLUSH | F_VERSION_1)?;
        match Self::start(&mut transport, memory, features) {
            Ok((queue, request, capacity, block_size)) => Ok(Blk {
                transport,
                queue,
                request,
                features,
                capacity,
                block_size,
                poll_limit: 1 << 24,
                broken: false,
            }),
            Err(error) => {
                transport.fail();
                Err(error)
            }
        }
    }

    fn start(transport: &mut Transport<M>, memory: Dma, features: u64) -> Result<(Queue, Dma, u64, u32), Error> {
        let (capacity, blk_size) =
            transport.read_config(|word| (u64::from(word(0)) | u64::from(word(4)) << 32, word(20)))?;
        let block_size = if features & F_BLK_SIZE != 0 { blk_size } else { SECTOR as u32 };
        if !block_size.is_power_of_two() || !(512..=4096).contains(&block_size) {
            return Err(Error::BadBlockSize(block_size));
        }
        capacity.checked_mul(SECTOR).ok_or(Error::CapacityOverflow(capacity))?;
        let (ring, request) = memory.split(Layout::new(QUEUE_SIZE).total, 16)?;
        if request.len() < HEADER + 1 {
            return Err(Error::BadMemory);
        }
        let queue = transport.setup_queue(0, ring, QUEUE_SIZE.min(MAX_SIZE))?;
        transport.driver_ok()?;
        Ok((queue, request, capacity, block_size))
    }

    /// The capacity in 512-byte sectors.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The block size: every request is a whole number of blocks, at a block boundary.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The features agreed with the device.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// How many times a request polls the used ring before it gives up (Timeout).
    pub fn set_poll_limit(&mut self, limit: u32) {
        self.poll_limit = limit;
    }

    /// Reads `buffer.len()` bytes from `sector` (512-byte units) into `buffer`. When the
    /// read fails after the device had the buffer, the buffer is zeroed: whatever the
    /// device put there is not the disk's data, and must not pass for it.
    pub fn read(&mut self, sector: u64, buffer: &mut Dma) -> Result<(), Error> {
        let data = self.data(sector, buffer, true)?;
        let result = self.request(T_IN, sector, Some(data));
        if result.is_err() {
            buffer.fill(0);
        }
        result
    }

    /// Writes `buffer` to the disk from `sector`.
    pub fn write(&mut self, sector: u64, buffer: &Dma) -> Result<(), Error> {
        if self.features & F_RO != 0 {
            return Err(Error::ReadOnly);
        }
        let data = self.data(sector, buffer, false)?;
        self.request(T_OUT, sector, Some(data))
    }

    /// Asks the device to put what it has cached on the disk; nothing to do when it did
    /// not offer F_FLUSH (its writes then reach the disk before they complete).
    pub fn flush(&mut self) -> Result<(), Error> {
        if self.features & F_FLUSH == 0 {
            return Ok(());
        }
        self.request(T_FLUSH, 0, None)
    }

    /// The data segment of a request, once checked to be whole blocks inside the disk.
    fn data(&self, sector: u64, buffer: &Dma, writable: bool) -> Result<Segment, Error> {
        let block = u64::from(self.block_size);
        let len = buffer.len() as u64;
        if len == 0 || len % block != 0 || sector % (block / SECTOR) != 0 {
            return Err(Error::OutOfRange);
        }
        let end = sector.checked_add(len / SECTOR).ok_or(Error::OutOfRange)?;
        if end > self.capacity {
            return Err(Error::OutOfRange);
        }
        buffer.segment(0, buffer.len(), writable)
    }

    /// Sends one request and waits for it; Ok once the status is OK and, for a read, the
    /// device says it wrote every byte of the data.
    fn request(&mut self, kind: u32, sector: u64, data: Option<Segment>) -> Result<(), Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&kind.to_le_bytes());
        header[8..].copy_from_slice(&sector.to_le_bytes());
        self.request.write(0, &header)?;
        self.request.write(HEADER, &[NO_STATUS])?;
        let header = self.request.segment(0, HEADER, false)?;
        let status = self.request.segment(HEADER, 1, true)?;
        let chain: &[Segment] = match data {
            Some(data) => &[header, data, status],
            None => &[header, status],
        };
        let result = self.submit(chain).and_then(|len| match data {
            Some(data) if kind == T_IN && u64::from(len) != u64::from(data.len()) + 1 => Err(Error::ShortRead(len)),
            _ => Ok(()),
        });
        // A status is the device's answer to this request; anything else (a refused
        // answer, or none: the device may still write the buffer) ends the driver's trust.
        if let Err(error) = result {
            if !matches!(error, Error::Status(_)) {
                self.broken = true;
                self.transport.fail();
            }
        }
        result
    }

    fn submit(&mut self, chain: &[Segment]) -> Result<u32, Error> {
        let head = self.queue.add(chain)?;
        #[cfg(feature = "status-borrowed-early")]
        // SAFETY: none; this is the bug the self-check needs Miri to find (Cargo.toml).
        let early: &u8 = unsafe { &*self.request.at(HEADER, 1, 1)? };
        if self.queue.should_notify()? {
            self.transport.notify(0);
        }
        let mut polls = 0u32;
        let used = loop {
            if let Some(used) = self.queue.pop_used()? {
                break used;
            }
            polls += 1;
            if polls >= self.poll_limit {
                return Err(Error::Timeout);
            }
            core::hint::spin_loop();
        };
        self.transport.ack_interrupts();
        if used.id != head {
            return Err(Error::UsedIdNotInFlight(u32::from(used.id)));
        }
        let mut status = [NO_STATUS];
        self.request.read(HEADER, &mut status)?;
        #[cfg(feature = "status-borrowed-early")]
        let status = [*early];
        match status[0] {
            S_OK => Ok(used.len),
            other => Err(Error::Status(other)),
        }
    }
}
