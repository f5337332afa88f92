//! The tests' device: a virtio-mmio block device over a byte array, reading and writing
//! the driver's memory through raw pointers at the addresses the driver gives it, as a
//! real device does by DMA. Its `hostile` knobs make it lie in the ways the driver must
//! refuse.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::rc::Rc;

use virtio::mmio::{reg, status, F_VERSION_1, MAGIC};
use virtio::{blk, Dma, Error, Mmio};

/// The device address of the arena's first byte.
pub const BASE: u64 = 0x8000_0000;
/// The arena's size: the driver's memory, then data buffers.
const ARENA: usize = 1 << 16;

/// The "guest memory": one allocation, 4096-aligned, shared by the driver and the device.
pub struct Arena {
    ptr: *mut u8,
}

impl Arena {
    fn layout() -> Layout {
        Layout::from_size_align(ARENA, 4096).unwrap()
    }

    pub fn new() -> Arena {
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc_zeroed(Self::layout()) };
        assert!(!ptr.is_null());
        Arena { ptr }
    }

    /// The `len` bytes at `offset`, as driver memory. Each test hands out disjoint parts.
    pub fn dma(&self, offset: usize, len: usize) -> Dma {
        assert!(offset + len <= ARENA);
        // SAFETY: inside the arena, which outlives every driver of the test (declared
        // first); the tests hand out disjoint parts.
        unsafe { Dma::new(self.ptr.add(offset), BASE + offset as u64, len) }.unwrap()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in new with the same layout.
        unsafe { dealloc(self.ptr, Self::layout()) }
    }
}

/// Ways the device lies. All off by default.
#[derive(Default)]
pub struct Hostile {
    pub magic: Option<u32>,
    pub version: Option<u32>,
    /// Offers these extra feature bits once FEATURES_OK is set.
    pub features_after: u64,
    /// Clears FEATURES_OK when the driver sets it.
    pub refuse_features: bool,
    /// What a read of the write-only QueueNum answers (an honest QEMU: 0); the driver
    /// never reads it, so no answer may change what it does.
    pub queue_num: Option<u32>,
    /// The queue is already ready.
    pub queue_ready: bool,
    /// Moves the used index by this much more than it completed.
    pub used_jump: u16,
    /// Puts this id in the used element instead of the chain's head.
    pub used_id: Option<u32>,
    /// Adds this to the used length.
    pub used_len_extra: u32,
    /// Reports this many bytes fewer than it wrote.
    pub used_len_short: u32,
    /// Writes this status instead of OK.
    pub status: Option<u8>,
    /// Never completes a request.
    pub silent: bool,
    /// The configuration generation changes on every read.
    pub generation_moves: bool,
    /// The status never reads 0 after a reset.
    pub stuck_in_reset: bool,
}

/// The device's state.
pub struct Model {
    pub device_id: u32,
    pub offered: u64,
    pub capacity: u64,
    pub blk_size: u32,
    pub queue_max: u32,
    pub disk: Vec<u8>,
    pub hostile: Hostile,
    /// Requests completed.
    pub completed: u64,
    pub status: u32,
    arena: *mut u8,
    features_sel: u32,
    driver_sel: u32,
    pub driver_features: u64,
    queue_num: u32,
    ready: u32,
    addrs: [u64; 3],
    last_avail: u16,
    used_idx: u16,
    generation: u32,
    /// The interrupt status: bit 0 set by each completion, cleared by the driver's ack.
    pub interrupt: u32,
}

/// The driver's handle on the device (its `Mmio`); the test keeps another.
#[derive(Clone)]
pub struct Device(pub Rc<RefCell<Model>>);

/// A test's world: the memory and a block device of `sectors` 512-byte sectors, each
/// holding its number (8 bytes, little-endian) and then bytes `i * 7 % 251` to start with.
pub struct World {
    pub arena: Arena,
    pub device: Device,
}

impl World {
    pub fn new(sectors: u64) -> World {
        let arena = Arena::new();
        // Sector by sector, copied: Miri interprets a loop over every byte slowly.
        let pattern: Vec<u8> = (0..512).map(|i| (i * 7 % 251) as u8).collect();
        let mut disk = Vec::with_capacity(sectors as usize * 512);
        for sector in 0..sectors {
            disk.extend_from_slice(&sector.to_le_bytes());
            disk.extend_from_slice(&pattern[8..]);
        }
        let model = Model {
            device_id: blk::DEVICE_ID,
            offered: F_VERSION_1 | blk::F_FLUSH,
            capacity: sectors,
            blk_size: 512,
            queue_max: 128,
            disk,
            hostile: Hostile::default(),
            completed: 0,
            status: 0,
            arena: arena.ptr,
            features_sel: 0,
            driver_sel: 0,
            driver_features: 0,
            queue_num: 0,
            ready: 0,
            addrs: [0; 3],
            last_avail: 0,
            used_idx: 0,
            generation: 0,
            interrupt: 0,
        };
        World { arena, device: Device(Rc::new(RefCell::new(model))) }
    }

    /// The device's state, to set it up or look at it.
    pub fn model(&self) -> std::cell::RefMut<'_, Model> {
        self.device.0.borrow_mut()
    }

    /// The block driver on the device, its memory at the arena's start.
    pub fn blk(&self) -> Result<blk::Blk<Device>, Error> {
        blk::Blk::new(self.device.clone(), self.arena.dma(0, blk::MEMORY))
    }

    /// A data buffer of `len` bytes, the `n`th (from the arena's second half).
    pub fn buffer(&self, n: usize, len: usize) -> Dma {
        self.arena.dma(ARENA / 2 + n * 8192, len)
    }
}

impl Mmio for Device {
    fn read32(&self, offset: usize) -> u32 {
        let mut guard = self.0.borrow_mut();
        let m = &mut *guard;
        let h = &m.hostile;
        match offset {
            reg::MAGIC => h.magic.unwrap_or(MAGIC),
            reg::VERSION => h.version.unwrap_or(2),
            reg::DEVICE_ID => m.device_id,
            reg::DEVICE_FEATURES => {
                let mut features = m.offered;
                if m.status & status::FEATURES_OK != 0 {
                    features |= h.features_after;
                }
                (features >> (32 * m.features_sel.min(1))) as u32
            }
            reg::QUEUE_NUM_MAX => m.queue_max,
            reg::QUEUE_NUM => h.queue_num.unwrap_or(0),
            reg::QUEUE_READY => m.ready | u32::from(h.queue_ready),
            reg::INTERRUPT_STATUS => m.interrupt,
            reg::STATUS if h.stuck_in_reset => m.status | status::ACKNOWLEDGE,
            reg::STATUS => m.status,
            reg::CONFIG_GENERATION => {
                if m.hostile.generation_moves {
                    m.generation += 1;
                }
                m.generation
            }
            o if o >= reg::CONFIG => {
                let mut config = [0u8; 24];
                config[..8].copy_from_slice(&m.capacity.to_le_bytes());
                config[20..24].copy_from_slice(&m.blk_size.to_le_bytes());
                let o = o - reg::CONFIG;
                config.get(o..o + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => panic!("read of register {offset:#x}"),
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        let mut m = self.0.borrow_mut();
        match offset {
            reg::DEVICE_FEATURES_SEL => m.features_sel = value,
            reg::DRIVER_FEATURES_SEL => m.driver_sel = value,
            reg::DRIVER_FEATURES => {
                let shift = 32 * m.driver_sel.min(1);
                m.driver_features = m.driver_features & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_SEL => assert_eq!(value, 0, "only queue 0"),
            reg::QUEUE_NUM => m.queue_num = value,
            reg::QUEUE_READY => {
                let negotiating = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK;
                assert_eq!(m.status, negotiating, "queue made ready outside FEATURES_OK..DRIVER_OK");
                assert!(m.addrs.iter().all(|&a| a != 0), "queue made ready before its addresses");
                m.ready = value;
            }
            o if (reg::QUEUE_DESC..reg::QUEUE_DEVICE + 8).contains(&o) => {
                let (which, high) = ((o - reg::QUEUE_DESC) / 0x10, (o - reg::QUEUE_DESC) % 0x10 == 4);
                let shift = if high { 32 } else { 0 };
                m.addrs[which] = m.addrs[which] & !(0xffff_ffff << shift) | u64::from(value) << shift;
            }
            reg::QUEUE_NOTIFY => {
                assert_eq!(m.status & status::DRIVER_OK, status::DRIVER_OK, "notified before DRIVER_OK");
                if !m.hostile.silent {
                    m.process();
                }
            }
            reg::INTERRUPT_ACK => m.interrupt &= !value,
            reg::STATUS => {
                m.status = value;
                if value == 0 {
                    m.reset();
                }
                if m.hostile.refuse_features {
                    m.status &= !status::FEATURES_OK;
                }
            }
            _ => panic!("write of {value:#x} to register {offset:#x}"),
        }
    }
}

impl Model {
    fn reset(&mut self) {
        self.driver_features = 0;
        self.ready = 0;
        self.last_avail = 0;
        self.used_idx = 0;
    }

    /// The device's pointer to `len` bytes at device address `addr`; a test failure when
    /// the driver named memory outside the arena.
    fn at(&self, addr: u64, len: usize) -> *mut u8 {
        let offset = addr.checked_sub(BASE).expect("address below the arena") as usize;
        assert!(offset + len <= ARENA, "address {addr:#x}+{len} beyond the arena");
        // SAFETY: inside the arena (checked).
        unsafe { self.arena.add(offset) }
    }

    fn read<const N: usize>(&self, addr: u64) -> [u8; N] {
        let mut bytes = [0; N];
        // SAFETY: at() checked the N bytes lie in the arena; the driver is not running.
        unsafe { std::ptr::copy_nonoverlapping(self.at(addr, N), bytes.as_mut_ptr(), N) };
        bytes
    }

    fn write(&self, addr: u64, bytes: &[u8]) {
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(addr, bytes.len()), bytes.len()) };
    }

    /// Takes every new chain from the available ring, carries it out, and puts it in the
    /// used ring.
    fn process(&mut self) {
        let [desc, avail, used] = self.addrs;
        let size = self.queue_num;
        let avail_idx = u16::from_le_bytes(self.read(avail + 2));
        while self.last_avail != avail_idx {
            let slot = u64::from(u32::from(self.last_avail) % size);
            let head = u16::from_le_bytes(self.read(avail + 4 + 2 * slot));
            self.last_avail = self.last_avail.wrapping_add(1);
            let mut chain = Vec::new();
            let mut id = head;
            loop {
                assert!(u32::from(id) < size && chain.len() < size as usize, "a bad chain");
                let d: [u8; 16] = self.read(desc + 16 * u64::from(id));
                let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
                let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
                let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
                chain.push((addr, len as usize, flags & 2 != 0));
                if flags & 1 == 0 {
                    break;
                }
                id = u16::from_le_bytes(d[14..16].try_into().unwrap());
            }
            let written = self.execute(&chain);
            let h = &self.hostile;
            let id = h.used_id.unwrap_or(u32::from(head));
            let len = (written + h.used_len_extra).saturating_sub(h.used_len_short);
            let slot = u64::from(u32::from(self.used_idx) % size);
            self.write(used + 4 + 8 * slot, &id.to_le_bytes());
            self.write(used + 8 + 8 * slot, &len.to_le_bytes());
            self.used_idx = self.used_idx.wrapping_add(1).wrapping_add(self.hostile.used_jump);
            self.write(used + 2, &self.used_idx.to_le_bytes());
            self.interrupt |= 1;
            self.completed += 1;
        }
    }

    /// One block request: header, data, status. The bytes written into the chain.
    fn execute(&mut self, chain: &[(u64, usize, bool)]) -> u32 {
        let header: [u8; 16] = self.read(chain[0].0);
        let kind = u32::from_le_bytes(header[..4].try_into().unwrap());
        let sector = u64::from_le_bytes(header[8..].try_into().unwrap());
        let (status_addr, _, _) = *chain.last().unwrap();
        let data = &chain[1..chain.len() - 1];
        let mut at = sector * 512;
        let mut written = 1;
        let mut result = blk::S_OK;
        for &(addr, len, device_writes) in data {
            let Some(range) = usize::try_from(at).ok().and_then(|a| Some(a..a.checked_add(len)?)) else {
                result = blk::S_IOERR;
                break;
            };
            if range.end > self.disk.len() {
                result = blk::S_IOERR;
                break;
            }
            match (kind, device_writes) {
                (blk::T_IN, true) => {
                    self.write(addr, &self.disk[range]);
                    written += len as u32;
                }
                (blk::T_OUT, false) => {
                    let mut bytes = vec![0; len];
                    // SAFETY: at() checked the bytes lie in the arena.
                    unsafe { std::ptr::copy_nonoverlapping(self.at(addr, len), bytes.as_mut_ptr(), len) };
                    self.disk[range].copy_from_slice(&bytes);
                }
                _ => panic!("request {kind} with a data segment the wrong way"),
            }
            at += len as u64;
        }
        self.write(status_addr, &[self.hostile.status.unwrap_or(result)]);
        written
    }
}
