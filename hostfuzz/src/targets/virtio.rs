//! The virtio-blk driver (`guest/virtio`) against a hostile virtio-mmio block device of
//! this file's own. The decisions set the device's registers (magic, version, device id,
//! the features offered and those it adds after FEATURES_OK, whether it keeps
//! FEATURES_OK, a reset that never ends, a moving configuration generation, capacity,
//! blk_size, the queue's maximum and the size it reads back, DEVICE_NEEDS_RESET) and,
//! for each of one to eight requests (reads, writes, flushes, now and then outside the
//! disk or misaligned), what the device does: an honest answer, or silence, "no
//! notification" in the used ring's flags, a used index that jumps, a used element with
//! any id or length, fewer data bytes, other data bytes, any status byte or none, and
//! random bytes over the descriptor table and the available ring. A zero decision is the
//! honest choice: an all-zero input is an honest device and ordinary reads.
//!
//! The device keeps the books of what it did; the oracle judges the driver by them:
//! `Blk::new` and every request must answer exactly what the driver's documented checks
//! say for that device (the error and its values, or Ok), a refused device is left
//! FAILED, after a fatal refusal every request is `Broken`, a failed read leaves its
//! buffer zeroed, a read that returns Ok holds exactly the bytes the device wrote, a
//! write that returns Ok was seen by the device at its sector with its bytes, and every
//! descriptor the driver gives lies inside the driver's memory (its address plus length
//! fits in 64 bits), the right way round. `Dma::new` and `Segment::new` are also asked
//! for regions at the top of the address space, which they must refuse when they wrap.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::collections::BTreeMap;

use super::device_memory::DeviceMemory;
use crate::{Decisions, Finding};
use virtio::blk::{self, Blk};
use virtio::mmio::{reg, status, F_VERSION_1, MAGIC};
use virtio::{Dma, Error, Mmio, Segment};

/// The device address of the arena's first byte.
const BASE: u64 = 0x8000_0000;
/// The arena: the driver's memory, then at [`BUFFER_AT`] one data buffer.
pub(crate) const ARENA: usize = 0x8000;
const BUFFER_AT: usize = 0x1000;
/// The driver's queue is at most this size (blk.rs's QUEUE_SIZE).
const DRIVER_QUEUE: u32 = 8;
/// The driver's request header and the offset of its memory's request part.
const HEADER: usize = 16;
const WANTED: u64 = blk::F_RO | blk::F_BLK_SIZE | blk::F_FLUSH | F_VERSION_1;

/// A lie now and then: one decision in 32.
pub(crate) fn lie(d: &mut Decisions) -> bool {
    d.u8() >= 0xf8
}

/// One of `edges`, or (as often as any one of them) a random value.
pub(crate) fn any_u32(d: &mut Decisions, edges: &[u32]) -> u32 {
    let k = d.below(edges.len() + 1);
    edges.get(k).copied().unwrap_or_else(|| d.u32())
}

fn any_u64(d: &mut Decisions, edges: &[u64]) -> u64 {
    let k = d.below(edges.len() + 1);
    edges.get(k).copied().unwrap_or_else(|| d.u64())
}

/// The driver's refusals by name, for `HOSTFUZZ_STATS`.
pub(crate) fn name(e: Error) -> &'static str {
    match e {
        Error::BadMagic(_) => "BadMagic",
        Error::BadVersion(_) => "BadVersion",
        Error::WrongDevice(_) => "WrongDevice",
        Error::NoVersion1 => "NoVersion1",
        Error::FeaturesChanged(_) => "FeaturesChanged",
        Error::FeaturesRefused => "FeaturesRefused",
        Error::DeviceFailed => "DeviceFailed",
        Error::QueueUnavailable => "QueueUnavailable",
        Error::BadQueueSize(_) => "BadQueueSize",
        Error::AddressWrap => "AddressWrap",
        Error::BadMemory => "BadMemory",
        Error::BadChain => "BadChain",
        Error::QueueFull => "QueueFull",
        Error::UsedIndexJump(_) => "UsedIndexJump",
        Error::UsedIdOutOfRange(_) => "UsedIdOutOfRange",
        Error::UsedIdNotInFlight(_) => "UsedIdNotInFlight",
        Error::UsedLenTooLong { .. } => "UsedLenTooLong",
        Error::ConfigUnstable => "ConfigUnstable",
        Error::BadBlockSize(_) => "BadBlockSize",
        Error::CapacityOverflow(_) => "CapacityOverflow",
        Error::OutOfRange => "OutOfRange",
        Error::ReadOnly => "ReadOnly",
        Error::ShortRead(_) => "ShortRead",
        Error::NoMac => "NoMac",
        Error::BadMac(_) => "BadMac",
        Error::BadFrameLen(_) => "BadFrameLen",
        Error::UsedLenShort { .. } => "UsedLenShort",
        Error::Status(_) => "Status",
        Error::Timeout => "Timeout",
        Error::Broken => "Broken",
    }
}

/// The device's registers, as the decisions set them.
#[derive(Clone, Copy, Debug)]
struct Setup {
    magic: u32,
    version: u32,
    device_id: u32,
    offered: u64,
    /// Offered too once FEATURES_OK is set.
    features_after: u64,
    refuse_features: bool,
    stuck_in_reset: bool,
    /// How many reads of the configuration generation find it moved.
    generation_moves: u32,
    capacity: u64,
    blk_size: u32,
    queue_ready: bool,
    queue_max: u32,
    /// What a read of the write-only QueueNum answers (honest: 0, as QEMU); the driver
    /// never reads it, so no answer may change what it does.
    queue_num: Option<u32>,
    /// The status reads DEVICE_NEEDS_RESET once DRIVER_OK is set.
    needs_reset: bool,
}

impl Setup {
    fn draw(d: &mut Decisions) -> Setup {
        let magic = if lie(d) { any_u32(d, &[0, MAGIC.swap_bytes(), MAGIC ^ 1, u32::MAX]) } else { MAGIC };
        let version = if lie(d) { any_u32(d, &[1, 0, 3]) } else { 2 };
        let device_id = if lie(d) { any_u32(d, &[0, 1, 3]) } else { blk::DEVICE_ID };
        let mut offered = F_VERSION_1;
        if d.bool() {
            offered |= blk::F_BLK_SIZE;
        }
        if d.bool() {
            offered |= blk::F_FLUSH;
        }
        if d.u8() >= 0xe0 {
            offered |= blk::F_RO;
        }
        if lie(d) {
            offered ^= any_u64(d, &[F_VERSION_1, 1 << 40 | 1]);
        }
        let features_after = if lie(d) { any_u64(d, &[blk::F_RO, 1 << 40]) } else { 0 };
        let refuse_features = lie(d);
        let stuck_in_reset = d.rare();
        let generation_moves = if lie(d) { 1 + d.below(8) as u32 } else { 0 };
        let capacity = if lie(d) {
            any_u64(d, &[0, 1 << 55, u64::MAX, (1 << 55) - 1, (1 << 55) + 1, 1])
        } else {
            16 + d.below(240) as u64
        };
        let blk_size = if lie(d) {
            any_u32(d, &[0, 256, 520, 1000, 1536, 3072, 8192, u32::MAX, 0x8000_0200, 511])
        } else {
            *d.choose(&[512, 1024, 2048, 4096])
        };
        let queue_ready = lie(d);
        let queue_max = if lie(d) { any_u32(d, &[0, 3, 6, 12, 1, 2]) } else { *d.choose(&[128, 8, 16, 256, 4]) };
        let queue_num = if lie(d) { Some(any_u32(d, &[0, 16, 4, 7])) } else { None };
        let needs_reset = lie(d);
        Setup {
            magic,
            version,
            device_id,
            offered,
            features_after,
            refuse_features,
            stuck_in_reset,
            generation_moves,
            capacity,
            blk_size,
            queue_ready,
            queue_max,
            queue_num,
            needs_reset,
        }
    }

    /// What `Blk::new` must answer, by the driver's documented checks in their order:
    /// Ok with (features, capacity, block size, queue size), or the error and whether
    /// the device is left FAILED.
    fn expected(&self) -> Result<(u64, u64, u32, u32), (Error, bool)> {
        if self.magic != MAGIC {
            return Err((Error::BadMagic(self.magic), false));
        }
        if self.version != 2 {
            return Err((Error::BadVersion(self.version), false));
        }
        if self.device_id != blk::DEVICE_ID {
            return Err((Error::WrongDevice(self.device_id), false));
        }
        let failed = |e| Err((e, true));
        if self.stuck_in_reset {
            return failed(Error::DeviceFailed);
        }
        if self.offered & F_VERSION_1 == 0 {
            return failed(Error::NoVersion1);
        }
        let agreed = self.offered & WANTED;
        if self.refuse_features {
            return failed(Error::FeaturesRefused);
        }
        let new = self.features_after & !self.offered;
        if new != 0 {
            return failed(Error::FeaturesChanged(new));
        }
        if self.generation_moves > 7 {
            return failed(Error::ConfigUnstable);
        }
        let block = if agreed & blk::F_BLK_SIZE != 0 { self.blk_size } else { 512 };
        if !block.is_power_of_two() || !(512..=4096).contains(&block) {
            return failed(Error::BadBlockSize(block));
        }
        if self.capacity.checked_mul(512).is_none() {
            return failed(Error::CapacityOverflow(self.capacity));
        }
        if self.queue_ready || self.queue_max == 0 {
            return failed(Error::QueueUnavailable);
        }
        if !self.queue_max.is_power_of_two() {
            return failed(Error::BadQueueSize(self.queue_max));
        }
        let size = self.queue_max.min(DRIVER_QUEUE);
        if self.needs_reset {
            return failed(Error::DeviceFailed);
        }
        Ok((agreed, self.capacity, block, size))
    }
}

/// What the device does with one request. All `None`/false/0 is the honest answer.
#[derive(Clone, Debug, Default)]
struct Plan {
    silent: bool,
    no_notify: bool,
    jump: u16,
    id: Option<u32>,
    /// A used length: which (0 any, 1 data, 2 data+2, 3 0, 4 u32::MAX, 5 data+1) and a
    /// random value for "any".
    len: Option<(usize, u32)>,
    status: Option<u8>,
    no_status: bool,
    /// The device writes only this many of the data bytes (it says so, unless `len` lies).
    partial: Option<usize>,
    /// One byte of the data, at this offset (modulo its length), is another.
    garbage: Option<(usize, u8)>,
    /// Random bytes the device writes over the descriptor table and the available ring.
    scribble: Option<u64>,
}

impl Plan {
    fn draw(d: &mut Decisions) -> Plan {
        let mut p = Plan::default();
        // One request in eight lies.
        if d.u8() < 0xe0 {
            return p;
        }
        // A lying request: each way now and then, several at once sometimes.
        for _ in 0..1 + d.below(2) {
            match d.below(10) {
                0 => p.silent = true,
                1 => p.no_notify = true,
                2 => p.jump = any_u32(d, &[1, 2, 0xffff, 7]) as u16,
                3 => p.id = Some(any_u32(d, &[1, 2, 7, 8, 255, 256, u32::MAX, 0x1_0000])),
                4 => p.len = Some((d.below(6), d.u32())),
                5 => p.status = Some(any_u32(d, &[1, 2, 0xff]) as u8),
                6 => p.no_status = true,
                7 => p.partial = Some(d.below(1 << 16)),
                8 => p.garbage = Some((d.below(1 << 16), 1 | d.u8())),
                _ => p.scribble = Some(d.u64()),
            }
        }
        p
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Flush,
}

/// The request the driver is asked for, as the device must see it.
#[derive(Clone, Copy, Debug)]
struct Request {
    op: Op,
    sector: u64,
    len: usize,
    buffer: u64,
}

/// The device's state and its books.
struct Model {
    setup: Setup,
    /// The driver memory the device may reach, and the first finding.
    mem: DeviceMemory,
    status: u32,
    features_sel: u32,
    driver_sel: u32,
    driver_features: u64,
    queue_num: u32,
    ready: u32,
    addrs: [u64; 3],
    generation: u32,
    generation_reads: u32,
    last_avail: u16,
    used_idx: u16,
    interrupt: u32,
    /// Sectors written, by sector; the others read as [`sector_byte`].
    disk: BTreeMap<u64, Vec<u8>>,
    plan: Plan,
    request: Option<Request>,
    /// What processing the request must make the driver answer (None: not processed).
    outcome: Option<Result<(), Error>>,
    /// A read's buffer as the device left it.
    left: Vec<u8>,
    /// The last write the device saw: sector and bytes.
    seen_write: Option<(u64, Vec<u8>)>,
}

fn sector_byte(sector: u64, i: usize) -> u8 {
    (sector.wrapping_mul(0x9e37_79b9) >> 8) as u8 ^ (i as u8).wrapping_mul(7) ^ (i >> 8) as u8
}

impl Model {
    fn violate(&mut self, what: &str, detail: String) {
        self.mem.violate(what, detail);
    }

    /// Before a request: the used ring's flags (no notification, or none asked for).
    fn begin(&mut self, request: Request, plan: Plan) {
        self.request = Some(request);
        self.outcome = None;
        self.left.clear();
        self.seen_write = None;
        if self.addrs[2] != 0 {
            let flags: u16 = if plan.no_notify { 1 } else { 0 };
            self.mem.write(self.addrs[2], &flags.to_le_bytes());
        }
        self.plan = plan;
    }

    /// The device's work when notified: the one new chain, checked, carried out and
    /// answered as the plan says.
    fn process(&mut self) {
        let [desc, avail, used] = self.addrs;
        let size = self.queue_num;
        let Some(request) = self.request.take() else {
            self.violate("the driver notified without a request", String::new());
            return;
        };
        let avail_idx = self.mem.read16(avail + 2);
        if avail_idx != self.last_avail.wrapping_add(1) {
            self.violate(
                "the driver published other than one chain",
                format!("avail idx {avail_idx}, the device's {}", self.last_avail),
            );
            return;
        }
        let slot = u64::from(u32::from(self.last_avail) % size);
        let head = self.mem.read16(avail + 4 + 2 * slot);
        self.last_avail = avail_idx;
        // The chain, each descriptor's address and length checked.
        let mut chain = Vec::new();
        let mut id = head;
        loop {
            if u32::from(id) >= size || chain.len() >= 3 {
                self.violate("a bad chain", format!("descriptor {id} after {chain:?}"));
                return;
            }
            let mut d = [0u8; 16];
            if !self.mem.read(desc + 16 * u64::from(id), &mut d) {
                return;
            }
            let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
            let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
            let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
            if addr.checked_add(u64::from(len)).is_none() || self.mem.at(addr, len as usize).is_none() {
                self.violate("a descriptor outside the driver's memory", format!("{addr:#x}+{len}"));
                return;
            }
            chain.push((addr, len as usize, flags & 2 != 0));
            if flags & 1 == 0 {
                break;
            }
            id = u16::from_le_bytes(d[14..16].try_into().unwrap());
        }
        let want_data = request.op != Op::Flush;
        let shape_ok = chain.len() == if want_data { 3 } else { 2 }
            && chain[0].1 == HEADER
            && !chain[0].2
            && chain.last().is_some_and(|&(_, len, w)| len == 1 && w)
            && (!want_data || chain[1] == (request.buffer, request.len, request.op == Op::Read));
        if !shape_ok {
            self.violate("a chain unlike the request", format!("{request:?}: {chain:?}"));
            return;
        }
        let mut header = [0u8; HEADER];
        self.mem.read(chain[0].0, &mut header);
        let kind = u32::from_le_bytes(header[..4].try_into().unwrap());
        let sector = u64::from_le_bytes(header[8..].try_into().unwrap());
        let want_kind = match request.op {
            Op::Read => blk::T_IN,
            Op::Write => blk::T_OUT,
            Op::Flush => blk::T_FLUSH,
        };
        let want_sector = if request.op == Op::Flush { 0 } else { request.sector };
        if kind != want_kind || sector != want_sector {
            self.violate("a header unlike the request", format!("{request:?}: type {kind}, sector {sector}"));
            return;
        }
        if self.plan.silent {
            return;
        }
        let plan = self.plan.clone();
        // The data.
        let mut written = 0usize;
        if request.op == Op::Read {
            let (addr, len, _) = chain[1];
            let mut bytes = vec![0u8; len];
            self.mem.read(addr, &mut bytes);
            let count = plan.partial.map_or(len, |p| p % len);
            for (i, byte) in bytes.iter_mut().enumerate().take(count) {
                let s = sector + (i / 512) as u64;
                *byte = self.disk.get(&s).map_or_else(|| sector_byte(s, i % 512), |b| b[i % 512]);
            }
            if let Some((at, x)) = plan.garbage {
                bytes[at % len] ^= x;
            }
            self.mem.write(addr, &bytes);
            self.left = bytes;
            written = count;
        } else if request.op == Op::Write {
            let (addr, len, _) = chain[1];
            let mut bytes = vec![0u8; len];
            self.mem.read(addr, &mut bytes);
            if plan.status.is_none() && !plan.no_status {
                for (k, block) in bytes.chunks(512).enumerate() {
                    self.disk.insert(sector + k as u64, block.to_vec());
                }
            }
            self.seen_write = Some((sector, bytes));
        }
        let status_byte = if plan.no_status { 0xff } else { plan.status.unwrap_or(blk::S_OK) };
        if !plan.no_status {
            self.mem.write(chain.last().unwrap().0, &[status_byte]);
        }
        // The used element.
        let data = if request.op == Op::Read { request.len as u32 } else { 0 };
        let honest = written as u32 + 1;
        let len = match plan.len {
            None => honest,
            Some((0, any)) => any,
            Some((1, _)) => data,
            Some((2, _)) => data.wrapping_add(2),
            Some((3, _)) => 0,
            Some((4, _)) => u32::MAX,
            Some(_) => data + 1,
        };
        let id = plan.id.unwrap_or(u32::from(head));
        let slot = u64::from(u32::from(self.used_idx) % size);
        self.mem.write(used + 4 + 8 * slot, &id.to_le_bytes());
        self.mem.write(used + 8 + 8 * slot, &len.to_le_bytes());
        let delta = 1u16.wrapping_add(plan.jump);
        self.used_idx = self.used_idx.wrapping_add(delta);
        self.mem.write(used + 2, &self.used_idx.to_le_bytes());
        self.interrupt |= 1;
        if let Some(seed) = plan.scribble {
            let mut x = seed | 1;
            let mut junk = vec![0u8; 16 * size as usize + 4 + 2 * size as usize];
            for b in &mut junk {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            self.mem.write(desc, &junk[..16 * size as usize]);
            self.mem.write(avail, &junk[16 * size as usize..]);
        }
        // What the driver must answer, by its checks in their order.
        let writable = u64::from(data) + 1;
        self.outcome = Some(if delta == 0 {
            Err(Error::Timeout)
        } else if delta > 1 {
            Err(Error::UsedIndexJump(delta))
        } else if id >= size {
            Err(Error::UsedIdOutOfRange(id))
        } else if id != u32::from(head) {
            Err(Error::UsedIdNotInFlight(id))
        } else if u64::from(len) > writable {
            Err(Error::UsedLenTooLong { id: head, len, writable })
        } else if status_byte != blk::S_OK {
            Err(Error::Status(status_byte))
        } else if request.op == Op::Read && len != data + 1 {
            Err(Error::ShortRead(len))
        } else {
            Ok(())
        });
    }
}

/// The driver's handle on the device.
struct Port<'a>(&'a RefCell<Model>);

impl Mmio for Port<'_> {
    fn read32(&self, offset: usize) -> u32 {
        let mut guard = self.0.borrow_mut();
        let m = &mut *guard;
        let s = m.setup;
        match offset {
            reg::MAGIC => s.magic,
            reg::VERSION => s.version,
            reg::DEVICE_ID => s.device_id,
            reg::DEVICE_FEATURES => {
                let mut features = s.offered;
                if m.status & status::FEATURES_OK != 0 {
                    features |= s.features_after;
                }
                (features >> (32 * m.features_sel.min(1))) as u32
            }
            reg::QUEUE_NUM_MAX => s.queue_max,
            reg::QUEUE_NUM => s.queue_num.unwrap_or(0),
            reg::QUEUE_READY => m.ready | u32::from(s.queue_ready),
            reg::INTERRUPT_STATUS => m.interrupt,
            reg::STATUS => {
                let mut value = m.status;
                if s.stuck_in_reset {
                    value |= status::ACKNOWLEDGE;
                }
                if s.needs_reset && m.status & status::DRIVER_OK != 0 {
                    value |= status::DEVICE_NEEDS_RESET;
                }
                value
            }
            reg::CONFIG_GENERATION => {
                if m.generation_reads < s.generation_moves {
                    m.generation_reads += 1;
                    m.generation += 1;
                }
                m.generation
            }
            o if (reg::CONFIG..reg::CONFIG + 0x100).contains(&o) => {
                let mut config = [0u8; 24];
                config[..8].copy_from_slice(&s.capacity.to_le_bytes());
                config[20..24].copy_from_slice(&s.blk_size.to_le_bytes());
                let o = o - reg::CONFIG;
                config.get(o..o + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => {
                m.violate("a read of a register the transport does not have", format!("{offset:#x}"));
                0
            }
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        let mut guard = self.0.borrow_mut();
        let m = &mut *guard;
        match offset {
            reg::DEVICE_FEATURES_SEL => m.features_sel = value,
            reg::DRIVER_FEATURES_SEL => m.driver_sel = value,
            reg::DRIVER_FEATURES => {
                let shift = 32 * m.driver_sel.min(1);
                m.driver_features = m.driver_features & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_SEL if value == 0 => {}
            reg::QUEUE_NUM => m.queue_num = value,
            reg::QUEUE_READY => {
                if m.status != status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK {
                    m.violate("a queue made ready outside FEATURES_OK..DRIVER_OK", format!("status {:#x}", m.status));
                }
                let size = m.queue_num;
                if m.addrs.contains(&0) || size == 0 || size > m.setup.queue_max || !size.is_power_of_two() {
                    m.violate("a queue made ready unlike the device's", format!("{:x?}, size {size}", m.addrs));
                }
                m.ready = value;
            }
            o if (reg::QUEUE_DESC..reg::QUEUE_DEVICE + 8).contains(&o) => {
                let (which, high) = ((o - reg::QUEUE_DESC) / 0x10, (o - reg::QUEUE_DESC) % 0x10 == 4);
                let shift = if high { 32 } else { 0 };
                m.addrs[which] = m.addrs[which] & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_NOTIFY => {
                if m.status & status::FAILED != 0 || m.status & status::DRIVER_OK == 0 {
                    m.violate("a notification the device must not get", format!("status {:#x}", m.status));
                } else {
                    m.process();
                }
            }
            reg::INTERRUPT_ACK => m.interrupt &= !value,
            reg::STATUS => {
                if value & status::FEATURES_OK != 0 && m.driver_features & !m.setup.offered != 0 {
                    m.violate("the driver took features the device did not offer", format!("{:#x}", m.driver_features));
                }
                if m.status & status::FAILED != 0 && value != 0 && value & status::FAILED == 0 {
                    m.violate("the driver went on with a device it had set FAILED", format!("{value:#x}"));
                }
                m.status = value;
                if value == 0 {
                    m.driver_features = 0;
                    m.ready = 0;
                    m.last_avail = 0;
                    m.used_idx = 0;
                }
                if m.setup.refuse_features {
                    m.status &= !status::FEATURES_OK;
                }
            }
            _ => m.violate("a write to a register the transport does not have", format!("{value:#x} to {offset:#x}")),
        }
    }
}

/// The guest memory: one allocation, 4096-aligned, shared by the driver and the device.
pub(crate) struct Arena(pub(crate) *mut u8);

impl Arena {
    fn layout() -> Layout {
        Layout::from_size_align(ARENA, 4096).expect("the arena's layout")
    }

    pub(crate) fn new() -> Arena {
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc_zeroed(Self::layout()) };
        assert!(!ptr.is_null(), "out of memory");
        Arena(ptr)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in new with the same layout.
        unsafe { dealloc(self.0, Self::layout()) }
    }
}

fn check(model: &RefCell<Model>) -> Result<(), Finding> {
    model.borrow_mut().mem.violation.take().map_or(Ok(()), Err)
}

fn differ(what: &str, got: &Result<(), Error>, want: &Result<(), Error>, request: &Request) -> Finding {
    Finding::oracle(what, format!("{request:?}: the driver answered {got:?}, the device's books say {want:?}"))
}

/// `Segment::new` asked for a segment at the top of the address space.
fn segment_at_the_top(d: &mut Decisions) -> Result<(), Finding> {
    let addr = u64::MAX - d.below(0x1_0000) as u64;
    let len = any_u32(d, &[1, 0x1_0000, u32::MAX, 0]);
    let got = Segment::new(addr, len, d.bool());
    let want = if len == 0 {
        Err(Error::BadChain)
    } else if addr.checked_add(u64::from(len)).is_none() {
        Err(Error::AddressWrap)
    } else {
        Ok(())
    };
    if got.map(|_| ()) != want {
        return Err(Finding::oracle(
            "Segment::new answered otherwise",
            format!("{addr:#x}+{len}: {got:?}, not {want:?}"),
        ));
    }
    Ok(())
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    if lie(d) {
        segment_at_the_top(d)?;
    }
    let setup = Setup::draw(d);
    let arena = Arena::new();
    let model = RefCell::new(Model {
        setup,
        mem: DeviceMemory::new(vec![(BASE, arena.0, blk::MEMORY)]),
        status: 0,
        features_sel: 0,
        driver_sel: 0,
        driver_features: 0,
        queue_num: 0,
        ready: 0,
        addrs: [0; 3],
        generation: 0,
        generation_reads: 0,
        last_avail: 0,
        used_idx: 0,
        interrupt: 0,
        disk: BTreeMap::new(),
        plan: Plan::default(),
        request: None,
        outcome: None,
        left: Vec::new(),
        seen_write: None,
    });
    // SAFETY: the first MEMORY bytes of the arena, which outlives the driver (declared
    // before it); only the driver and the device reach them.
    let memory = unsafe { Dma::new(arena.0, BASE, blk::MEMORY) }.expect("the driver's memory");
    let got = Blk::new(Port(&model), memory);
    check(&model)?;
    let want = setup.expected();
    let mut disk = match (got, want) {
        (Ok(disk), Ok((features, capacity, block, _))) => {
            if (disk.features(), disk.capacity(), disk.block_size()) != (features, capacity, block) {
                return Err(Finding::oracle(
                    "Blk::new read the device otherwise",
                    format!(
                        "{:#x}, {}, {} for {features:#x}, {capacity}, {block}",
                        disk.features(),
                        disk.capacity(),
                        disk.block_size()
                    ),
                ));
            }
            disk
        }
        (Err(e), Err((w, failed))) if e == w => {
            let status = model.borrow().status;
            if failed && status & status::FAILED == 0 {
                return Err(Finding::oracle("a refused device was not set FAILED", format!("{e:?}")));
            }
            d.end(name(e));
            return Ok(());
        }
        (got, want) => {
            return Err(Finding::oracle(
                "Blk::new answered otherwise than the device's books",
                format!("got {:?}, want {want:?} for {setup:x?}", got.map(|_| ())),
            ));
        }
    };
    let (features, capacity, block, qsize) = want.expect("matched above");
    disk.set_poll_limit(2);
    let mut broken = false;
    let mut end = "every request answered";
    for _ in 0..1 + d.below(8) {
        let op = match d.below(8) {
            0..=4 => Op::Read,
            5 | 6 => Op::Write,
            _ => Op::Flush,
        };
        let spb = u64::from(block) / 512;
        let blocks = 1 + d.below(4);
        let mut len = blocks * block as usize;
        let mut sector = (d.below((capacity / spb).min(1 << 16) as usize) as u64) * spb;
        if lie(d) {
            sector = any_u64(
                d,
                &[
                    capacity.saturating_sub(blocks as u64 * spb),
                    capacity.saturating_sub(spb),
                    capacity,
                    u64::MAX - 3,
                    sector + 1,
                ],
            );
        }
        if lie(d) {
            len = any_u32(d, &[0, 512, block * 4 + 512, block - 512]) as usize % (0x4000 + 1024);
        }
        // The buffer's device address: now and then at the top of the address space.
        let mut buffer = BASE + BUFFER_AT as u64;
        if lie(d) {
            buffer = u64::MAX - d.below(0x8000) as u64;
        }
        let seed = d.u8();
        let plan = Plan::draw(d);
        // SAFETY: `len` bytes of the arena from BUFFER_AT (len <= 0x5000, the arena is
        // 0x8000): outlives the buffer; the driver's memory ends before BUFFER_AT.
        let dma = unsafe { Dma::new(arena.0.add(BUFFER_AT), buffer, len) };
        let mut dma = match dma {
            Err(e) if buffer.checked_add(len as u64).is_none() && e == Error::AddressWrap => continue,
            Ok(dma) if buffer.checked_add(len as u64).is_some() => dma,
            other => {
                return Err(Finding::oracle(
                    "Dma::new answered otherwise",
                    format!("{buffer:#x}+{len}: {:?}", other.err()),
                ))
            }
        };
        let fill: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed ^ 0xa5).collect();
        dma.write(0, &fill).expect("the buffer is len bytes");
        {
            let mut m = model.borrow_mut();
            m.mem.regions.truncate(1);
            // SAFETY: as for the Dma above.
            m.mem.regions.push((buffer, unsafe { arena.0.add(BUFFER_AT) }, len));
        }
        let request = Request { op, sector, len, buffer };
        model.borrow_mut().begin(request, plan);
        // What the driver must answer before the device has the request.
        let bad_range = len == 0
            || len as u64 % u64::from(block) != 0
            || sector % spb != 0
            || sector.checked_add(len as u64 / 512).is_none_or(|end| end > capacity);
        let before = match op {
            Op::Flush if features & blk::F_FLUSH == 0 => Some(Ok(())),
            Op::Write if features & blk::F_RO != 0 => Some(Err(Error::ReadOnly)),
            Op::Read | Op::Write if bad_range => Some(Err(Error::OutOfRange)),
            _ if broken => Some(Err(Error::Broken)),
            _ if (if op == Op::Flush { 2 } else { 3 }) > qsize => Some(Err(Error::QueueFull)),
            _ => None,
        };
        let got = match op {
            Op::Read => disk.read(sector, &mut dma),
            Op::Write => disk.write(sector, &dma),
            Op::Flush => disk.flush(),
        };
        check(&model)?;
        let m = model.borrow();
        let want = before.or(m.outcome).unwrap_or(Err(Error::Timeout));
        if got != want {
            return Err(differ("a request answered otherwise than the device's books", &got, &want, &request));
        }
        if let Err(e) = got {
            if !broken {
                end = name(e);
            }
            if !matches!(e, Error::Status(_) | Error::OutOfRange | Error::ReadOnly | Error::Broken) {
                broken = true;
                if m.status & status::FAILED == 0 {
                    return Err(Finding::oracle("a refused device was not set FAILED", format!("{e:?}")));
                }
            }
        }
        let mut now = vec![0u8; len];
        dma.read(0, &mut now).expect("the buffer is len bytes");
        match (op, got) {
            (Op::Read, Ok(())) if now != m.left => {
                return Err(Finding::oracle(
                    "an Ok read holds other bytes than the device wrote",
                    format!("{request:?}"),
                ));
            }
            (Op::Read, Err(e)) if e != Error::OutOfRange && now.iter().any(|&b| b != 0) => {
                return Err(Finding::oracle(
                    "a failed read left the device's bytes in its buffer",
                    format!("{request:?}"),
                ));
            }
            (Op::Write, Ok(())) if m.seen_write != Some((sector, fill.clone())) => {
                return Err(Finding::oracle("an Ok write the device did not see", format!("{request:?}")));
            }
            _ => {}
        }
    }
    d.end(end);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;

    /// The bytes of an honest device's registers (every lie and choice zero): the
    /// decisions `run` reads before its first request.
    const SETUP: usize = 31;

    /// An honest device, one read of one block at sector 0, the device lying in way
    /// `kind` of `Plan::draw` (its first choice for the lie's value).
    fn one_lying_read(kind: u32) -> Vec<u8> {
        let mut input = vec![0u8; SETUP];
        // One request: a read, one block, sector 0; no lie of the harness's; seed 0.
        input.extend_from_slice(&[0; 4 + 4 + 4 + 4 + 4]);
        // The device lies (0xff), in one way (0), this way: the least decision whose
        // below(10) is `kind`.
        input.push(0xff);
        input.extend_from_slice(&0u32.to_le_bytes());
        let x = ((u64::from(kind) << 32).div_ceil(10)) as u32;
        input.extend_from_slice(&x.to_le_bytes());
        input
    }

    fn ends(input: &[u8]) -> &'static str {
        let mut d = Decisions::new(input);
        assert_eq!(run(&mut d), Ok(()), "{input:x?}");
        d.end_reason()
    }

    #[test]
    fn the_all_zero_input_is_an_honest_device_and_passes() {
        assert_eq!(ends(&[]), "every request answered");
        assert_eq!(ends(&one_lying_read(9)[..SETUP]), "every request answered");
        assert!(in_process(run, &[0; 4096]).finding().is_none());
    }

    #[test]
    fn lying_devices_are_refused_with_the_drivers_errors() {
        // A magic of 0 (the first lie's first edge).
        let mut magic = vec![0u8, 0xff];
        magic.extend_from_slice(&[0; 4]);
        assert_eq!(ends(&magic), "BadMagic");
        for (kind, refusal) in [
            (0, "Timeout"),
            (1, "Timeout"),
            (2, "UsedIndexJump"),
            (3, "UsedIdNotInFlight"),
            (4, "ShortRead"),
            (5, "Status"),
            (6, "Status"),
            (7, "ShortRead"),
        ] {
            assert_eq!(ends(&one_lying_read(kind)), refusal, "lie {kind}");
        }
        // Other data bytes, said honestly, pass for data: the driver cannot tell, and the
        // oracle holds the read to the bytes the device wrote.
        assert_eq!(ends(&one_lying_read(8)), "every request answered");
    }
}
