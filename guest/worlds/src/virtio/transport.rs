//! The device side of virtio-mmio (version 2): the register file a driver talks to, its
//! lies (a wrong magic or version, features that change after FEATURES_OK, FEATURES_OK
//! dropped, a reset that never ends, a moving configuration generation, a queue already
//! ready, an answer to the write-only QueueNum, DEVICE_NEEDS_RESET), the rules it holds
//! the driver to, and the device side of each split virtqueue ([`Queue`]). What a
//! notification does is the [`Device`]'s.

use std::cell::{RefCell, RefMut};
use std::rc::Rc;

use virtio::mmio::{reg, status, MAGIC};
use virtio::Mmio;

use super::memory::Memory;

/// A device behind the transport: its configuration space and what it does when told a
/// queue has new buffers.
pub trait Device {
    /// The device configuration, from its offset 0; reads past it answer 0.
    fn config(&self) -> Vec<u8>;
    /// The driver notified `queue` (the device is live: DRIVER_OK set, FAILED not).
    fn notify(&mut self, queue: u32, transport: &mut Transport, mem: &mut Memory);
}

/// The device side of one split virtqueue: as the driver set it up, and how far the
/// device has gone through it.
#[derive(Clone, Debug, Default)]
pub struct Queue {
    pub num: u32,
    pub ready: u32,
    /// The descriptor table, the available (driver) ring, the used (device) ring.
    pub addrs: [u64; 3],
    /// The next available entry the device has not read.
    pub last_avail: u16,
    pub used_idx: u16,
}

/// One descriptor as the device reads it.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    pub addr: u64,
    pub len: u32,
    pub flags: u16,
    pub next: u16,
}

impl Descriptor {
    pub const NEXT: u16 = 1;
    pub const WRITE: u16 = 2;
}

impl Queue {
    /// The available ring's index, as the driver last wrote it.
    pub fn avail_idx(&self, mem: &mut Memory) -> u16 {
        mem.read16(self.addrs[1] + 2)
    }

    /// The head of the next available chain; the device has then read it.
    pub fn next_head(&mut self, mem: &mut Memory) -> u16 {
        let slot = u64::from(u32::from(self.last_avail) % self.num);
        let head = mem.read16(self.addrs[1] + 4 + 2 * slot);
        self.last_avail = self.last_avail.wrapping_add(1);
        head
    }

    /// Descriptor `id` of the table; None (and the violation) when the table lies outside
    /// the driver's memory.
    pub fn descriptor(&self, mem: &mut Memory, id: u16) -> Option<Descriptor> {
        let mut d = [0u8; 16];
        if !mem.read(self.addrs[0] + 16 * u64::from(id), &mut d) {
            return None;
        }
        Some(Descriptor {
            addr: u64::from_le_bytes(d[..8].try_into().unwrap()),
            len: u32::from_le_bytes(d[8..12].try_into().unwrap()),
            flags: u16::from_le_bytes(d[12..14].try_into().unwrap()),
            next: u16::from_le_bytes(d[14..16].try_into().unwrap()),
        })
    }

    /// Puts (`id`, `len`) in the used ring and moves its index by one and `jump`.
    pub fn complete(&mut self, mem: &mut Memory, id: u32, len: u32, jump: u16) {
        let used = self.addrs[2];
        let slot = u64::from(u32::from(self.used_idx) % self.num);
        mem.write(used + 4 + 8 * slot, &id.to_le_bytes());
        mem.write(used + 8 + 8 * slot, &len.to_le_bytes());
        self.used_idx = self.used_idx.wrapping_add(1).wrapping_add(jump);
        mem.write(used + 2, &self.used_idx.to_le_bytes());
    }

    /// Sets the used ring's flags (1: no notification wanted).
    pub fn set_used_flags(&self, mem: &mut Memory, flags: u16) {
        mem.write(self.addrs[2], &flags.to_le_bytes());
    }

    /// Random bytes from `seed` over the descriptor table and the available ring's
    /// entries, and its flags and index too when `header` (the block device's lie: its
    /// driver must never read them back; the network card leaves them, as it reads the
    /// index to find new receive buffers).
    pub fn scribble(&self, mem: &mut Memory, seed: u64, header: bool) {
        let [desc, avail, _] = self.addrs;
        let size = self.num as usize;
        let mut x = seed | 1;
        let mut junk = vec![0u8; 16 * size + if header { 4 } else { 0 } + 2 * size];
        for b in &mut junk {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        mem.write(desc, &junk[..16 * size]);
        mem.write(if header { avail } else { avail + 4 }, &junk[16 * size..]);
    }
}

/// The register file: what the device answers (each lie off by default) and what the
/// driver has set.
#[derive(Clone, Debug)]
pub struct Transport {
    pub magic: u32,
    pub version: u32,
    pub device_id: u32,
    pub offered: u64,
    /// The features the driver may take of those offered (the others are offloads it
    /// must leave).
    pub takes: u64,
    /// Offered too once FEATURES_OK is set.
    pub features_after: u64,
    /// Clears FEATURES_OK when the driver sets it.
    pub refuse_features: bool,
    /// The status never reads 0 after a reset.
    pub stuck_in_reset: bool,
    /// How many reads of the configuration generation find it moved.
    pub generation_moves: u32,
    /// Every queue reads ready before the driver set it up.
    pub queue_ready: bool,
    /// What a read of the write-only QueueNum answers (honest: 0, as QEMU); the driver
    /// never reads it, so no answer may change what it does.
    pub queue_num: Option<u32>,
    /// The status reads DEVICE_NEEDS_RESET once DRIVER_OK is set.
    pub needs_reset: bool,
    /// Each queue's maximum size; as many queues as entries.
    pub queue_max: Vec<u32>,
    pub status: u32,
    pub features_sel: u32,
    pub driver_sel: u32,
    pub driver_features: u64,
    pub sel: usize,
    pub queues: Vec<Queue>,
    pub generation: u32,
    pub generation_reads: u32,
    /// The interrupt status: bit 0 set by each completion, cleared by the driver's ack.
    pub interrupt: u32,
}

impl Transport {
    /// An honest device of kind `device_id` offering `offered`, with one queue per entry
    /// of `queue_max`.
    pub fn new(device_id: u32, offered: u64, queue_max: &[u32]) -> Transport {
        Transport {
            magic: MAGIC,
            version: 2,
            device_id,
            offered,
            takes: u64::MAX,
            features_after: 0,
            refuse_features: false,
            stuck_in_reset: false,
            generation_moves: 0,
            queue_ready: false,
            queue_num: None,
            needs_reset: false,
            queue_max: queue_max.to_vec(),
            status: 0,
            features_sel: 0,
            driver_sel: 0,
            driver_features: 0,
            sel: 0,
            queues: vec![Queue::default(); queue_max.len()],
            generation: 0,
            generation_reads: 0,
            interrupt: 0,
        }
    }

    fn read32(&mut self, offset: usize, config: impl FnOnce() -> Vec<u8>, mem: &mut Memory) -> u32 {
        match offset {
            reg::MAGIC => self.magic,
            reg::VERSION => self.version,
            reg::DEVICE_ID => self.device_id,
            reg::DEVICE_FEATURES => {
                let mut features = self.offered;
                if self.status & status::FEATURES_OK != 0 {
                    features |= self.features_after;
                }
                (features >> (32 * self.features_sel.min(1))) as u32
            }
            reg::QUEUE_NUM_MAX => self.queue_max[self.sel],
            reg::QUEUE_NUM => self.queue_num.unwrap_or(0),
            reg::QUEUE_READY => self.queues[self.sel].ready | u32::from(self.queue_ready),
            reg::INTERRUPT_STATUS => self.interrupt,
            reg::STATUS => {
                let mut value = self.status;
                if self.stuck_in_reset {
                    value |= status::ACKNOWLEDGE;
                }
                if self.needs_reset && self.status & status::DRIVER_OK != 0 {
                    value |= status::DEVICE_NEEDS_RESET;
                }
                value
            }
            reg::CONFIG_GENERATION => {
                if self.generation_reads < self.generation_moves {
                    self.generation_reads += 1;
                    self.generation += 1;
                }
                self.generation
            }
            o if (reg::CONFIG..reg::CONFIG + 0x100).contains(&o) => {
                let o = o - reg::CONFIG;
                config().get(o..o + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => {
                mem.violate("a read of a register the transport does not have", format!("{offset:#x}"));
                0
            }
        }
    }

    /// A write of the driver's; true when it is a notification for the device (of
    /// queue `value`), which may have it.
    fn write32(&mut self, offset: usize, value: u32, mem: &mut Memory) -> bool {
        let sel = self.sel;
        match offset {
            reg::DEVICE_FEATURES_SEL => self.features_sel = value,
            reg::DRIVER_FEATURES_SEL => self.driver_sel = value,
            reg::DRIVER_FEATURES => {
                let shift = 32 * self.driver_sel.min(1);
                self.driver_features = self.driver_features & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_SEL if (value as usize) < self.queues.len() => self.sel = value as usize,
            reg::QUEUE_NUM => self.queues[sel].num = value,
            reg::QUEUE_READY => {
                if self.status != status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK {
                    mem.violate(
                        "a queue made ready outside FEATURES_OK..DRIVER_OK",
                        format!("status {:#x}", self.status),
                    );
                }
                let q = &self.queues[sel];
                let size = q.num;
                if q.addrs.contains(&0) || size == 0 || size > self.queue_max[sel] || !size.is_power_of_two() {
                    mem.violate(
                        "a queue made ready unlike the device's",
                        format!("queue {sel} at {:x?}, size {size}", q.addrs),
                    );
                }
                self.queues[sel].ready = value;
            }
            o if (reg::QUEUE_DESC..reg::QUEUE_DEVICE + 8).contains(&o) => {
                let (which, high) = ((o - reg::QUEUE_DESC) / 0x10, (o - reg::QUEUE_DESC) % 0x10 == 4);
                let shift = if high { 32 } else { 0 };
                let a = &mut self.queues[sel].addrs[which];
                *a = *a & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_NOTIFY => {
                if self.status & status::FAILED != 0 || self.status & status::DRIVER_OK == 0 {
                    let detail = format!("queue {value}, status {:#x}", self.status);
                    mem.violate("a notification the device must not get", detail);
                } else {
                    return true;
                }
            }
            reg::INTERRUPT_ACK => self.interrupt &= !value,
            reg::STATUS => {
                if value & status::FEATURES_OK != 0 && self.driver_features & !(self.offered & self.takes) != 0 {
                    let detail = format!("{:#x}", self.driver_features);
                    mem.violate("the driver took features the device did not offer or it must not take", detail);
                }
                if self.status & status::FAILED != 0 && value != 0 && value & status::FAILED == 0 {
                    mem.violate("the driver went on with a device it had set FAILED", format!("{value:#x}"));
                }
                self.status = value;
                if value == 0 {
                    self.driver_features = 0;
                    self.queues.fill(Queue::default());
                }
                if self.refuse_features {
                    self.status &= !status::FEATURES_OK;
                }
            }
            _ => mem.violate("a write to a register the transport does not have", format!("{value:#x} to {offset:#x}")),
        }
        false
    }
}

/// A device model: the transport, the driver memory the device reaches, the device.
pub struct Model<D> {
    pub transport: Transport,
    pub mem: Memory,
    pub device: D,
}

/// The driver's handle on a device model (its [`Mmio`]); the test or the fuzz target
/// keeps another.
pub struct Port<D>(pub Rc<RefCell<Model<D>>>);

impl<D> Clone for Port<D> {
    fn clone(&self) -> Self {
        Port(Rc::clone(&self.0))
    }
}

impl<D: Device> Port<D> {
    /// The port of a new model.
    pub fn new(transport: Transport, mem: Memory, device: D) -> Port<D> {
        Port(Rc::new(RefCell::new(Model { transport, mem, device })))
    }

    /// The model, to set it up or look at it.
    pub fn model(&self) -> RefMut<'_, Model<D>> {
        self.0.borrow_mut()
    }
}

impl<D: Device> Mmio for Port<D> {
    fn read32(&self, offset: usize) -> u32 {
        let mut guard = self.0.borrow_mut();
        let Model { transport, mem, device } = &mut *guard;
        transport.read32(offset, || device.config(), mem)
    }

    fn write32(&self, offset: usize, value: u32) {
        let mut guard = self.0.borrow_mut();
        let Model { transport, mem, device } = &mut *guard;
        if transport.write32(offset, value, mem) {
            device.notify(value, transport, mem);
        }
    }
}
