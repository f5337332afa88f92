//! Split virtqueues (virtio 1.x, 2.7): the descriptor table, the available ring the driver
//! writes and the used ring the device writes, in memory the driver owns.
//!
//! The driver keeps its own books (the free list, which chains are in flight and how many
//! bytes each lets the device write) and never reads them back from the shared memory: a
//! device that scribbles over the descriptors changes nothing the driver relies on, and
//! every used element is checked against those books before it is believed.

use core::sync::atomic::{fence, Ordering};

use crate::{Dma, Error, Segment};

/// The most entries a queue of this driver has (its books are fixed arrays, in the
/// driver's struct: 32 keeps a `Net`, two queues, under 2 KiB where 256 made it 10 KiB,
/// which the kernel's boot-time probe copied over its 16 KiB stack). The drivers use 8.
pub const MAX_SIZE: u16 = 32;

const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;
/// The device's hint, in the used ring's flags, that it needs no notification.
const USED_NO_NOTIFY: u16 = 1;

/// Where the three parts of a queue of `size` entries lie in its memory: the descriptors
/// (16 bytes each, 16-aligned), the available ring (flags, idx, `size` ids, used_event;
/// 2-aligned) and the used ring (flags, idx, `size` (id, len) pairs, avail_event;
/// 4-aligned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub size: u16,
    pub avail: usize,
    pub used: usize,
    pub total: usize,
}

impl Layout {
    /// The layout of a queue of `size` entries.
    pub const fn new(size: u16) -> Layout {
        let n = size as usize;
        let avail = 16 * n;
        let used = (avail + 6 + 2 * n + 3) & !3;
        Layout { size, avail, used, total: used + 6 + 8 * n }
    }
}

/// A finished chain: the id of its first descriptor and the bytes the device wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Used {
    pub id: u16,
    pub len: u32,
}

#[derive(Clone, Copy)]
struct Chain {
    in_flight: bool,
    descriptors: u16,
    writable: u64,
}

/// A split virtqueue.
pub struct Queue {
    memory: Dma,
    layout: Layout,
    /// The driver's own free list: `next[i]` follows descriptor i.
    next: [u16; MAX_SIZE as usize],
    chains: [Chain; MAX_SIZE as usize],
    free_head: u16,
    free: u16,
    in_flight: u16,
    avail_idx: u16,
    last_used: u16,
}

impl Queue {
    /// A queue laid out in `memory` (16-aligned, at least `layout.total` bytes, zeroed
    /// here). Sizes that are not a power of two or above [`MAX_SIZE`] are refused.
    pub fn new(memory: Dma, layout: Layout) -> Result<Queue, Error> {
        let size = layout.size;
        if !size.is_power_of_two() || size > MAX_SIZE {
            return Err(Error::BadQueueSize(u32::from(size)));
        }
        if layout != Layout::new(size) || memory.addr() % 16 != 0 {
            return Err(Error::BadMemory);
        }
        let start = memory.at(0, layout.total, 16)?;
        for i in 0..layout.total {
            // SAFETY: at() checked that the `total` bytes from start lie in the region.
            unsafe { start.add(i).write_volatile(0) };
        }
        let mut next = [0; MAX_SIZE as usize];
        for (i, n) in next.iter_mut().enumerate() {
            *n = (i as u16).wrapping_add(1);
        }
        let chain = Chain { in_flight: false, descriptors: 0, writable: 0 };
        Ok(Queue {
            memory,
            layout,
            next,
            chains: [chain; MAX_SIZE as usize],
            free_head: 0,
            free: size,
            in_flight: 0,
            avail_idx: 0,
            last_used: 0,
        })
    }

    /// The number of entries.
    pub fn size(&self) -> u16 {
        self.layout.size
    }

    /// The free descriptors.
    pub fn free(&self) -> u16 {
        self.free
    }

    /// The device addresses of the descriptor table, the available and the used ring.
    pub fn addresses(&self) -> (u64, u64, u64) {
        let base = self.memory.addr();
        (base, base + self.layout.avail as u64, base + self.layout.used as u64)
    }

    /// Puts a chain of `segments` (those the device reads first, then those it writes) in
    /// the descriptor table and its head in the available ring; returns the head's id.
    pub fn add(&mut self, segments: &[Segment]) -> Result<u16, Error> {
        let count = u16::try_from(segments.len()).map_err(|_| Error::QueueFull)?;
        if count == 0 || segments.windows(2).any(|w| w[0].writable() && !w[1].writable()) {
            return Err(Error::BadChain);
        }
        if count > self.free {
            return Err(Error::QueueFull);
        }
        let head = self.free_head;
        let mut id = head;
        let mut writable = 0u64;
        for (i, segment) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let mut flags = if last { 0 } else { DESC_NEXT };
            if segment.writable() {
                flags |= DESC_WRITE;
                writable += u64::from(segment.len());
            }
            let next = self.next[usize::from(id)];
            self.write_descriptor(id, segment, flags, if last { 0 } else { next })?;
            if !last {
                id = next;
            }
        }
        self.free_head = self.next[usize::from(id)];
        self.free -= count;
        self.in_flight += 1;
        self.chains[usize::from(head)] = Chain { in_flight: true, descriptors: count, writable };
        let slot = usize::from(self.avail_idx % self.layout.size);
        self.write16(self.layout.avail + 4 + 2 * slot, head)?;
        // The descriptors and the ring entry before the index that publishes them.
        fence(Ordering::SeqCst);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.write16(self.layout.avail + 2, self.avail_idx)?;
        fence(Ordering::SeqCst);
        Ok(head)
    }

    /// True unless the device has said, in the used ring's flags, it needs no
    /// notification (VIRTIO_F_EVENT_IDX is never negotiated).
    pub fn should_notify(&self) -> Result<bool, Error> {
        fence(Ordering::SeqCst);
        Ok(self.read16(self.layout.used)? & USED_NO_NOTIFY == 0)
    }

    /// The next chain the device has finished, once checked: the used index moved by no
    /// more than the chains in flight, the element names the head of one of them, and its
    /// length is no more than the chain's writable bytes. Its descriptors are freed.
    /// A refused element is not taken; the device lied, and the caller sets it FAILED
    /// rather than ask again.
    pub fn pop_used(&mut self) -> Result<Option<Used>, Error> {
        let used_idx = self.read16(self.layout.used + 2)?;
        let pending = used_idx.wrapping_sub(self.last_used);
        if pending == 0 {
            return Ok(None);
        }
        if pending > self.in_flight {
            return Err(Error::UsedIndexJump(pending));
        }
        // The element after the index that published it.
        fence(Ordering::SeqCst);
        let slot = usize::from(self.last_used % self.layout.size);
        let element = self.layout.used + 4 + 8 * slot;
        let id = self.read32(element)?;
        let len = self.read32(element + 4)?;
        if id >= u32::from(self.layout.size) {
            return Err(Error::UsedIdOutOfRange(id));
        }
        let id = id as u16;
        let chain = self.chains[usize::from(id)];
        if !chain.in_flight {
            return Err(Error::UsedIdNotInFlight(u32::from(id)));
        }
        if u64::from(len) > chain.writable {
            return Err(Error::UsedLenTooLong { id, len, writable: chain.writable });
        }
        let mut last = id;
        for _ in 1..chain.descriptors {
            last = self.next[usize::from(last)];
        }
        self.next[usize::from(last)] = self.free_head;
        self.free_head = id;
        self.free += chain.descriptors;
        self.in_flight -= 1;
        self.chains[usize::from(id)].in_flight = false;
        self.last_used = self.last_used.wrapping_add(1);
        Ok(Some(Used { id, len }))
    }

    fn write_descriptor(&mut self, id: u16, segment: &Segment, flags: u16, next: u16) -> Result<(), Error> {
        let at = 16 * usize::from(id);
        let ptr = self.memory.at(at, 16, 16)?;
        // SAFETY: at() checked the 16 bytes lie in the queue's memory, 16-aligned; the
        // fields are written one by one, little-endian, through the raw pointer.
        unsafe {
            ptr.cast::<u64>().write_volatile(segment.addr().to_le());
            ptr.add(8).cast::<u32>().write_volatile(segment.len().to_le());
            ptr.add(12).cast::<u16>().write_volatile(flags.to_le());
            ptr.add(14).cast::<u16>().write_volatile(next.to_le());
        }
        Ok(())
    }

    fn write16(&mut self, offset: usize, value: u16) -> Result<(), Error> {
        let ptr = self.memory.at(offset, 2, 2)?;
        // SAFETY: at() checked the 2 bytes lie in the queue's memory, 2-aligned.
        unsafe { ptr.cast::<u16>().write_volatile(value.to_le()) };
        Ok(())
    }

    fn read16(&self, offset: usize) -> Result<u16, Error> {
        let ptr = self.memory.at(offset, 2, 2)?;
        // SAFETY: as in write16; the device may have written any value, all are valid.
        Ok(u16::from_le(unsafe { ptr.cast::<u16>().read_volatile() }))
    }

    fn read32(&self, offset: usize) -> Result<u32, Error> {
        let ptr = self.memory.at(offset, 4, 4)?;
        // SAFETY: at() checked the 4 bytes lie in the queue's memory, 4-aligned.
        Ok(u32::from_le(unsafe { ptr.cast::<u32>().read_volatile() }))
    }
}
