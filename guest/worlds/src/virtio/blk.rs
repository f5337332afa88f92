//! A virtio-blk device over a [`Disk`]: it takes each request the driver publishes,
//! checks the chain (header, data, status, each inside the driver's memory, the right
//! way round; and, when told, that it is the very [`Request`] the driver was asked for),
//! carries it out and answers, honestly or with the [`Lies`] it is told, and keeps the
//! books of what it did ([`Answer`], the bytes it left, the write it saw) for an oracle
//! to judge the driver by.

use std::collections::BTreeMap;

use virtio::blk;

use super::memory::Memory;
use super::transport::{Descriptor, Device, Model, Queue, Transport};

/// The driver's request header's size.
pub const HEADER: usize = 16;

/// A disk of 512-byte sectors: those written, and the others as `fill` makes them.
pub struct Disk {
    /// The sectors the device has; a request past them is S_IOERR.
    pub sectors: u64,
    written: BTreeMap<u64, Vec<u8>>,
    /// Fills a sector (its number, its 512 bytes) before it is written; a sector at a
    /// time, so that the tests under Miri can copy it rather than loop over its bytes.
    fill: fn(u64, &mut [u8]),
}

impl Disk {
    pub fn new(sectors: u64, fill: fn(u64, &mut [u8])) -> Disk {
        Disk { sectors, written: BTreeMap::new(), fill }
    }

    /// The `len` bytes from sector `sector` on.
    pub fn read(&self, sector: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len.next_multiple_of(512)];
        for (k, out) in bytes.chunks_mut(512).enumerate() {
            let s = sector + k as u64;
            match self.written.get(&s) {
                Some(b) => out.copy_from_slice(b),
                None => (self.fill)(s, out),
            }
        }
        bytes.truncate(len);
        bytes
    }

    /// Writes `bytes` (whole sectors) from sector `sector` on.
    pub fn write(&mut self, sector: u64, bytes: &[u8]) {
        for (k, block) in bytes.chunks(512).enumerate() {
            self.written.insert(sector + k as u64, block.to_vec());
        }
    }

    /// Whether `len` bytes from sector `sector` on lie on the disk.
    pub fn holds(&self, sector: u64, len: usize) -> bool {
        u128::from(sector) * 512 + len as u128 <= u128::from(self.sectors) * 512
    }
}

/// What the used element's length says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UsedLen {
    /// The bytes the device wrote.
    #[default]
    Honest,
    /// This value.
    Is(u32),
    /// The chain's writable data bytes plus this (wrapping): without the status byte.
    DataPlus(u32),
    /// The honest length plus this.
    HonestPlus(u32),
    /// The honest length less this (down to 0).
    HonestMinus(u32),
}

/// Ways the device lies, each on every request until told otherwise. All off: honest.
#[derive(Clone, Debug, Default)]
pub struct Lies {
    /// Never answers.
    pub silent: bool,
    /// Says in the used ring's flags that it wants no notification.
    pub no_notify: bool,
    /// Moves the used index by this much more than it completed.
    pub used_jump: u16,
    /// Puts this id in the used element instead of the chain's head.
    pub used_id: Option<u32>,
    pub used_len: UsedLen,
    /// Writes this status instead of its own (and then keeps no write).
    pub status: Option<u8>,
    /// Writes no status byte at all (and keeps no write).
    pub no_status: bool,
    /// Writes only this many of a read's data bytes (modulo its length).
    pub partial: Option<usize>,
    /// One byte of a read's data, at this offset (modulo its length), is another.
    pub garbage: Option<(usize, u8)>,
    /// Random bytes over the descriptor table and the available ring, after answering.
    pub scribble: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Flush,
}

/// The request the driver is asked for, as the device must see it.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub op: Op,
    pub sector: u64,
    pub len: usize,
    pub buffer: u64,
}

/// What the device is told to expect at the next notification.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// Any well-made request (the host tests).
    Anything,
    /// This one (hostfuzz, told before each call).
    Request(Request),
    /// None: the driver was asked for nothing.
    Nothing,
}

/// How the device answered a chain, for the oracle.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    pub head: u16,
    /// The used element's id and length.
    pub id: u32,
    pub len: u32,
    /// How far the used index moved.
    pub delta: u16,
    /// The bytes the chain let the device write (data and status).
    pub writable: u64,
    /// The status byte the driver finds (0xff when none was written: the driver's
    /// memory holds what it put there).
    pub status: u8,
    /// The chain's writable data bytes.
    pub data: u32,
}

/// The block device and its books.
pub struct Block {
    pub capacity: u64,
    pub blk_size: u32,
    pub disk: Disk,
    pub lies: Lies,
    pub expect: Expect,
    /// Requests answered.
    pub completed: u64,
    /// The last answer, since the last [`Block::begin`].
    pub answer: Option<Answer>,
    /// A read's buffer as the device left it.
    pub left: Vec<u8>,
    /// The last write the device saw: sector and bytes.
    pub seen_write: Option<(u64, Vec<u8>)>,
}

impl Block {
    /// An honest device over `disk`, of `capacity` sectors of 512 bytes.
    pub fn new(capacity: u64, disk: Disk) -> Block {
        Block {
            capacity,
            blk_size: 512,
            disk,
            lies: Lies::default(),
            expect: Expect::Anything,
            completed: 0,
            answer: None,
            left: Vec::new(),
            seen_write: None,
        }
    }

    /// The transport of a block device offering `offered` with one queue of
    /// `queue_max`.
    pub fn transport(offered: u64, queue_max: u32) -> Transport {
        Transport::new(blk::DEVICE_ID, offered, &[queue_max])
    }

    /// Before a request: what to expect and how to answer it; the used ring's flags
    /// (no notification, or none asked for) are set at once.
    pub fn begin(&mut self, request: Request, lies: Lies, transport: &Transport, mem: &mut Memory) {
        self.expect = Expect::Request(request);
        self.answer = None;
        self.left.clear();
        self.seen_write = None;
        let queue = &transport.queues[0];
        if queue.addrs[2] != 0 {
            queue.set_used_flags(mem, u16::from(lies.no_notify));
        }
        self.lies = lies;
    }

    /// The chain from `head`: (address, length, device-writable) of each descriptor,
    /// each inside the driver's memory; None (and the violation) otherwise.
    fn chain(queue: &Queue, mem: &mut Memory, head: u16) -> Option<Vec<(u64, usize, bool)>> {
        let mut chain = Vec::new();
        let mut id = head;
        loop {
            if u32::from(id) >= queue.num || chain.len() >= 3 {
                mem.violate("a bad chain", format!("descriptor {id} after {chain:?}"));
                return None;
            }
            let d = queue.descriptor(mem, id)?;
            if d.addr.checked_add(u64::from(d.len)).is_none() || mem.at(d.addr, d.len as usize).is_none() {
                mem.violate("a descriptor outside the driver's memory", format!("{:#x}+{}", d.addr, d.len));
                return None;
            }
            chain.push((d.addr, d.len as usize, d.flags & Descriptor::WRITE != 0));
            if d.flags & Descriptor::NEXT == 0 {
                return Some(chain);
            }
            id = d.next;
        }
    }

    /// The request the chain carries: the one expected, or (when any is) a well-made
    /// one; None (and the violation) otherwise.
    fn request(&self, chain: &[(u64, usize, bool)], mem: &mut Memory) -> Option<Request> {
        let ends_well = chain[0].1 == HEADER && !chain[0].2 && chain.last().is_some_and(|&(_, len, w)| len == 1 && w);
        if let Expect::Request(want) = self.expect {
            let want_data = want.op != Op::Flush;
            let shape_ok = chain.len() == if want_data { 3 } else { 2 }
                && ends_well
                && (!want_data || chain[1] == (want.buffer, want.len, want.op == Op::Read));
            if !shape_ok {
                mem.violate("a chain unlike the request", format!("{want:?}: {chain:?}"));
                return None;
            }
        } else if !ends_well || !(2..=3).contains(&chain.len()) {
            mem.violate("a chain unlike a request", format!("{chain:?}"));
            return None;
        }
        let mut header = [0u8; HEADER];
        mem.read(chain[0].0, &mut header);
        let kind = u32::from_le_bytes(header[..4].try_into().unwrap());
        let sector = u64::from_le_bytes(header[8..].try_into().unwrap());
        let data = chain.get(1).filter(|_| chain.len() == 3);
        let request = match (kind, data) {
            (blk::T_IN, Some(&(buffer, len, true))) => Some(Request { op: Op::Read, sector, len, buffer }),
            (blk::T_OUT, Some(&(buffer, len, false))) => Some(Request { op: Op::Write, sector, len, buffer }),
            (blk::T_FLUSH, None) => Some(Request { op: Op::Flush, sector, len: 0, buffer: 0 }),
            _ => None,
        };
        if let Expect::Request(want) = self.expect {
            let want_sector = if want.op == Op::Flush { 0 } else { want.sector };
            if request.is_none_or(|r| r.op != want.op) || sector != want_sector {
                mem.violate("a header unlike the request", format!("{want:?}: type {kind}, sector {sector}"));
                return None;
            }
        }
        if request.is_none() {
            mem.violate("a header unlike its chain", format!("type {kind}, sector {sector}: {chain:?}"));
        }
        request
    }

    /// The device's work when notified: the one new chain, checked, carried out and
    /// answered as the lies say.
    fn process(&mut self, transport: &mut Transport, mem: &mut Memory) {
        if matches!(self.expect, Expect::Nothing) {
            mem.violate("the driver notified without a request", String::new());
            return;
        }
        if let Expect::Request(_) = self.expect {
            self.expect = Expect::Nothing;
        }
        let queue = &mut transport.queues[0];
        let avail_idx = queue.avail_idx(mem);
        if avail_idx != queue.last_avail.wrapping_add(1) {
            let detail = format!("avail idx {avail_idx}, the device's {}", queue.last_avail);
            mem.violate("the driver published other than one chain", detail);
            return;
        }
        let head = queue.next_head(mem);
        let Some(chain) = Self::chain(queue, mem, head) else { return };
        let Some(request) = self.request(&chain, mem) else { return };
        let lies = self.lies.clone();
        if lies.silent {
            return;
        }
        let on_disk = request.op == Op::Flush || self.disk.holds(request.sector, request.len);
        let mut status = if on_disk { blk::S_OK } else { blk::S_IOERR };
        // The data.
        let mut written = 0usize;
        if request.op == Op::Read && on_disk {
            let (addr, len) = (request.buffer, request.len);
            let mut bytes = vec![0u8; len];
            mem.read(addr, &mut bytes);
            let count = lies.partial.map_or(len, |p| p % len);
            bytes[..count].copy_from_slice(&self.disk.read(request.sector, count));
            if let Some((at, x)) = lies.garbage {
                bytes[at % len] ^= x;
            }
            mem.write(addr, &bytes);
            self.left = bytes;
            written = count;
        } else if request.op == Op::Write && on_disk {
            let mut bytes = vec![0u8; request.len];
            mem.read(request.buffer, &mut bytes);
            if lies.status.is_none() && !lies.no_status {
                self.disk.write(request.sector, &bytes);
            }
            self.seen_write = Some((request.sector, bytes));
        }
        status = if lies.no_status { 0xff } else { lies.status.unwrap_or(status) };
        if !lies.no_status {
            mem.write(chain.last().unwrap().0, &[status]);
        }
        // The used element.
        let data = if request.op == Op::Read { request.len as u32 } else { 0 };
        let honest = written as u32 + 1;
        let len = match lies.used_len {
            UsedLen::Honest => honest,
            UsedLen::Is(len) => len,
            UsedLen::DataPlus(more) => data.wrapping_add(more),
            UsedLen::HonestPlus(more) => honest.wrapping_add(more),
            UsedLen::HonestMinus(less) => honest.saturating_sub(less),
        };
        let id = lies.used_id.unwrap_or(u32::from(head));
        queue.complete(mem, id, len, lies.used_jump);
        transport.interrupt |= 1;
        self.completed += 1;
        if let Some(seed) = lies.scribble {
            transport.queues[0].scribble(mem, seed, true);
        }
        let delta = 1u16.wrapping_add(lies.used_jump);
        let writable = u64::from(data) + 1;
        self.answer = Some(Answer { head, id, len, delta, writable, status, data });
    }
}

impl Device for Block {
    fn config(&self) -> Vec<u8> {
        let mut config = vec![0u8; 24];
        config[..8].copy_from_slice(&self.capacity.to_le_bytes());
        config[20..24].copy_from_slice(&self.blk_size.to_le_bytes());
        config
    }

    fn notify(&mut self, _queue: u32, transport: &mut Transport, mem: &mut Memory) {
        self.process(transport, mem);
    }
}

impl Model<Block> {
    /// Before a request: the device expects it and answers as `lies` say; the used
    /// ring's flags (no notification, or none asked for) are set at once.
    pub fn begin(&mut self, request: Request, lies: Lies) {
        let Model { transport, mem, device } = self;
        device.begin(request, lies, transport, mem);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_reads_its_fill_until_written_and_holds_only_its_sectors() {
        let mut disk =
            Disk::new(4, |sector, out| out.iter_mut().enumerate().for_each(|(i, b)| *b = sector as u8 ^ i as u8));
        assert_eq!(disk.read(1, 3), [1, 0, 3]);
        disk.write(2, &[7; 512]);
        let both = disk.read(1, 1024);
        assert_eq!((both[511], both[512], both[1023]), (1 ^ 0xff, 7, 7));
        assert!(disk.holds(3, 512));
        assert!(!disk.holds(3, 513));
        assert!(!disk.holds(u64::MAX, 512));
    }
}
