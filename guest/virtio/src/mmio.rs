//! The virtio-mmio transport, version 2 (virtio 1.x, "modern"): the register window, the
//! feature negotiation and the device status state machine.

use core::ptr::NonNull;

use crate::queue::{Layout, Queue};
use crate::{Dma, Error};

/// The register offsets of the version 2 layout.
pub mod reg {
    pub const MAGIC: usize = 0x000;
    pub const VERSION: usize = 0x004;
    pub const DEVICE_ID: usize = 0x008;
    pub const DEVICE_FEATURES: usize = 0x010;
    pub const DEVICE_FEATURES_SEL: usize = 0x014;
    pub const DRIVER_FEATURES: usize = 0x020;
    pub const DRIVER_FEATURES_SEL: usize = 0x024;
    pub const QUEUE_SEL: usize = 0x030;
    pub const QUEUE_NUM_MAX: usize = 0x034;
    pub const QUEUE_NUM: usize = 0x038;
    pub const QUEUE_READY: usize = 0x044;
    pub const QUEUE_NOTIFY: usize = 0x050;
    pub const INTERRUPT_STATUS: usize = 0x060;
    pub const INTERRUPT_ACK: usize = 0x064;
    pub const STATUS: usize = 0x070;
    pub const QUEUE_DESC: usize = 0x080;
    pub const QUEUE_DRIVER: usize = 0x090;
    pub const QUEUE_DEVICE: usize = 0x0a0;
    pub const CONFIG_GENERATION: usize = 0x0fc;
    pub const CONFIG: usize = 0x100;
}

/// The device status bits.
pub mod status {
    pub const ACKNOWLEDGE: u32 = 1;
    pub const DRIVER: u32 = 2;
    pub const DRIVER_OK: u32 = 4;
    pub const FEATURES_OK: u32 = 8;
    pub const DEVICE_NEEDS_RESET: u32 = 64;
    pub const FAILED: u32 = 128;
}

/// "virt", little-endian.
pub const MAGIC: u32 = 0x7472_6976;
/// The feature every modern device offers and this driver requires.
pub const F_VERSION_1: u64 = 1 << 32;

/// How many times `init` reads the status for the end of a reset.
const RESET_POLLS: u32 = 4096;

/// A device's register window: 32-bit reads and writes at byte offsets.
pub trait Mmio {
    fn read32(&self, offset: usize) -> u32;
    fn write32(&self, offset: usize, value: u32);
}

/// The register window of a real device, reached with volatile accesses.
pub struct VolatileMmio {
    base: NonNull<u32>,
}

impl VolatileMmio {
    /// The window at `base` (0x200 bytes: the registers and 0x100 of configuration).
    ///
    /// # Safety
    ///
    /// `base` is the 4-aligned address of a virtio-mmio device's registers, mapped for
    /// the life of the value, and no one else drives that device.
    pub unsafe fn new(base: NonNull<u32>) -> VolatileMmio {
        VolatileMmio { base }
    }
}

impl Mmio for VolatileMmio {
    fn read32(&self, offset: usize) -> u32 {
        debug_assert!(offset % 4 == 0 && offset < 0x200);
        // SAFETY: the window is a device's registers (new); every offset the transport
        // passes is a 4-aligned register or a configuration word below 0x200.
        unsafe { self.base.as_ptr().add(offset / 4).read_volatile() }
    }

    fn write32(&self, offset: usize, value: u32) {
        debug_assert!(offset % 4 == 0 && offset < 0x200);
        // SAFETY: as in read32.
        unsafe { self.base.as_ptr().add(offset / 4).write_volatile(value) }
    }
}

/// A virtio-mmio device being driven: probed, then initialised with [`Transport::init`].
pub struct Transport<M: Mmio> {
    mmio: M,
    device_id: u32,
}

impl<M: Mmio> Transport<M> {
    /// Checks the magic and the version (2 only) and that a device is there (id not 0).
    pub fn probe(mmio: M) -> Result<Transport<M>, Error> {
        let magic = mmio.read32(reg::MAGIC);
        if magic != MAGIC {
            return Err(Error::BadMagic(magic));
        }
        let version = mmio.read32(reg::VERSION);
        if version != 2 {
            return Err(Error::BadVersion(version));
        }
        let device_id = mmio.read32(reg::DEVICE_ID);
        if device_id == 0 {
            return Err(Error::WrongDevice(0));
        }
        Ok(Transport { mmio, device_id })
    }

    /// The device id (2 is a block device).
    pub fn device_id(&self) -> u32 {
        self.device_id
    }

    /// Resets the device (and waits for the status to read 0) and negotiates: ACKNOWLEDGE, DRIVER, then the features both want
    /// (`wanted` and VERSION_1, which the device must offer), FEATURES_OK, read back.
    /// Returns the features agreed. On a refusal the device is left FAILED.
    pub fn init(&mut self, wanted: u64) -> Result<u64, Error> {
        self.mmio.write32(reg::STATUS, 0);
        // The reset is done when the status reads 0 again.
        if !(0..RESET_POLLS).any(|_| self.mmio.read32(reg::STATUS) == 0) {
            self.fail();
            return Err(Error::DeviceFailed);
        }
        self.set_status(status::ACKNOWLEDGE);
        self.set_status(status::ACKNOWLEDGE | status::DRIVER);
        let result = self.negotiate(wanted);
        if result.is_err() {
            self.fail();
        }
        result
    }

    fn negotiate(&mut self, wanted: u64) -> Result<u64, Error> {
        let offered = self.device_features();
        if offered & F_VERSION_1 == 0 {
            return Err(Error::NoVersion1);
        }
        let agreed = offered & (wanted | F_VERSION_1);
        for half in 0..2 {
            self.mmio.write32(reg::DRIVER_FEATURES_SEL, half);
            self.mmio.write32(reg::DRIVER_FEATURES, (agreed >> (32 * half)) as u32);
        }
        let driver = status::ACKNOWLEDGE | status::DRIVER;
        self.set_status(driver | status::FEATURES_OK);
        if self.status()? & status::FEATURES_OK == 0 {
            return Err(Error::FeaturesRefused);
        }
        let again = self.device_features();
        if again & !offered != 0 {
            return Err(Error::FeaturesChanged(again & !offered));
        }
        Ok(agreed)
    }

    /// The features the device offers (both 32-bit halves).
    fn device_features(&self) -> u64 {
        let mut features = 0;
        for half in 0..2 {
            self.mmio.write32(reg::DEVICE_FEATURES_SEL, half);
            features |= u64::from(self.mmio.read32(reg::DEVICE_FEATURES)) << (32 * half);
        }
        features
    }

    fn set_status(&self, value: u32) {
        self.mmio.write32(reg::STATUS, value);
    }

    /// The status register, refused when the device asks for a reset.
    pub fn status(&self) -> Result<u32, Error> {
        let value = self.mmio.read32(reg::STATUS);
        if value & (status::DEVICE_NEEDS_RESET | status::FAILED) != 0 {
            return Err(Error::DeviceFailed);
        }
        Ok(value)
    }

    /// Sets DRIVER_OK once the queues are set up; the device is live.
    pub fn driver_ok(&mut self) -> Result<(), Error> {
        let done = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK;
        self.set_status(done | status::DRIVER_OK);
        let now = self.status()?;
        if now & (done | status::DRIVER_OK) != done | status::DRIVER_OK {
            self.fail();
            return Err(Error::DeviceFailed);
        }
        Ok(())
    }

    /// Tells the device the driver has given up on it (FAILED).
    pub fn fail(&mut self) {
        let now = self.mmio.read32(reg::STATUS);
        self.set_status(now | status::FAILED);
    }

    /// Sets up queue `index` in `memory` with at most `max` entries (a power of two): the
    /// size is the smaller of `max` and the device's maximum, which must be a power of
    /// two too. QueueNum is write-only (virtio 1.2, 4.2.2; QEMU reads it as 0), so the
    /// size written is not read back.
    pub fn setup_queue(&mut self, index: u32, memory: Dma, max: u16) -> Result<Queue, Error> {
        if !max.is_power_of_two() {
            return Err(Error::BadQueueSize(u32::from(max)));
        }
        self.mmio.write32(reg::QUEUE_SEL, index);
        if self.mmio.read32(reg::QUEUE_READY) != 0 {
            return Err(Error::QueueUnavailable);
        }
        let device_max = self.mmio.read32(reg::QUEUE_NUM_MAX);
        if device_max == 0 {
            return Err(Error::QueueUnavailable);
        }
        if !device_max.is_power_of_two() {
            return Err(Error::BadQueueSize(device_max));
        }
        let size = device_max.min(u32::from(max));
        self.mmio.write32(reg::QUEUE_NUM, size);
        let layout = Layout::new(size as u16);
        let queue = Queue::new(memory, layout)?;
        let (desc, driver, device) = queue.addresses();
        self.write64(reg::QUEUE_DESC, desc);
        self.write64(reg::QUEUE_DRIVER, driver);
        self.write64(reg::QUEUE_DEVICE, device);
        self.mmio.write32(reg::QUEUE_READY, 1);
        Ok(queue)
    }

    fn write64(&self, offset: usize, value: u64) {
        self.mmio.write32(offset, value as u32);
        self.mmio.write32(offset + 4, (value >> 32) as u32);
    }

    /// Tells the device queue `index` has new buffers.
    pub fn notify(&self, index: u32) {
        self.mmio.write32(reg::QUEUE_NOTIFY, index);
    }

    /// Reads and acknowledges the interrupt status (bit 0: used buffers, bit 1: config).
    pub fn ack_interrupts(&self) -> u32 {
        let pending = self.mmio.read32(reg::INTERRUPT_STATUS);
        if pending != 0 {
            self.mmio.write32(reg::INTERRUPT_ACK, pending);
        }
        pending
    }

    /// Reads the configuration with `read` (32-bit words at offsets from the start of the
    /// device configuration) until the generation is the same before and after, at most
    /// a few times: a device that keeps changing it is refused.
    pub fn read_config<T>(&self, read: impl Fn(&dyn Fn(usize) -> u32) -> T) -> Result<T, Error> {
        let word = |offset: usize| self.mmio.read32(reg::CONFIG + (offset & 0xfc));
        for _ in 0..4 {
            let before = self.mmio.read32(reg::CONFIG_GENERATION);
            let value = read(&word);
            if self.mmio.read32(reg::CONFIG_GENERATION) == before {
                return Ok(value);
            }
        }
        Err(Error::ConfigUnstable)
    }
}
