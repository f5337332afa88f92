//! Memory the driver shares with the device, and the segments of it a descriptor names.

use core::ptr::NonNull;

use crate::Error;

/// A region of memory the driver owns and the device reads or writes by its device
/// address (the same as the physical address in the guest, whose kernel runs with paging
/// off). The driver reaches it only through raw pointers, never a reference, because the
/// device writes it behind the compiler's back.
pub struct Dma {
    ptr: NonNull<u8>,
    addr: u64,
    len: usize,
}

impl Dma {
    /// The `len` bytes at `ptr`, which the device sees at `addr`. Refused when
    /// `addr + len` does not fit in 64 bits or `ptr` is null.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` is valid for reads and writes for as long as the `Dma` (and any
    /// queue or driver built on it) lives, nothing else reads or writes it but the device
    /// at `addr`, and `addr` is where the device finds those same bytes.
    pub unsafe fn new(ptr: *mut u8, addr: u64, len: usize) -> Result<Dma, Error> {
        let ptr = NonNull::new(ptr).ok_or(Error::BadMemory)?;
        addr.checked_add(len as u64).ok_or(Error::AddressWrap)?;
        Ok(Dma { ptr, addr, len })
    }

    /// The device address of the first byte.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits the region in two at `at` (rounded up to `align`, a power of two, in both
    /// the pointer and the device address): the part before and the part from there on.
    pub fn split(self, at: usize, align: usize) -> Result<(Dma, Dma), Error> {
        let mask = align.checked_sub(1).filter(|_| align.is_power_of_two()).ok_or(Error::BadMemory)?;
        let start = self.ptr.as_ptr() as usize;
        let end = start.checked_add(at).ok_or(Error::BadMemory)?;
        let skip = (align - (end & mask)) & mask;
        let cut = at.checked_add(skip).filter(|&cut| cut <= self.len).ok_or(Error::BadMemory)?;
        if (self.addr as usize ^ start) & mask != 0 {
            return Err(Error::BadMemory);
        }
        // SAFETY: cut <= len, so the pointer stays inside (or one past) the region.
        let rest = unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(cut)) };
        let head = Dma { ptr: self.ptr, addr: self.addr, len: at };
        Ok((head, Dma { ptr: rest, addr: self.addr + cut as u64, len: self.len - cut }))
    }

    /// A segment of `len` bytes from `offset`, readable by the device, or writable by it.
    pub fn segment(&self, offset: usize, len: usize, writable: bool) -> Result<Segment, Error> {
        self.check(offset, len)?;
        let len = u32::try_from(len).map_err(|_| Error::BadChain)?;
        Segment::new(self.addr + offset as u64, len, writable)
    }

    /// Copies `out.len()` bytes from `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        self.check(offset, out.len())?;
        for (i, byte) in out.iter_mut().enumerate() {
            // SAFETY: offset + i < len (checked above); the region is ours (Dma::new).
            *byte = unsafe { self.ptr.as_ptr().add(offset + i).read_volatile() };
        }
        Ok(())
    }

    /// Copies `data` into the region from `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<(), Error> {
        self.check(offset, data.len())?;
        for (i, &byte) in data.iter().enumerate() {
            // SAFETY: as in read.
            unsafe { self.ptr.as_ptr().add(offset + i).write_volatile(byte) };
        }
        Ok(())
    }

    /// Sets every byte to `byte`.
    pub fn fill(&mut self, byte: u8) {
        for i in 0..self.len {
            // SAFETY: i < len; the region is ours (Dma::new).
            unsafe { self.ptr.as_ptr().add(i).write_volatile(byte) };
        }
    }

    /// The pointer to byte `offset`, for the queue's and the driver's typed accesses, once
    /// `offset + size` is checked to lie in the region and `offset` to be `align`-aligned.
    pub(crate) fn at(&self, offset: usize, size: usize, align: usize) -> Result<*mut u8, Error> {
        self.check(offset, size)?;
        let ptr = self.ptr.as_ptr().wrapping_add(offset);
        if (ptr as usize) % align != 0 {
            return Err(Error::BadMemory);
        }
        Ok(ptr)
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::BadMemory),
        }
    }
}

/// A buffer the device may read, or write: one descriptor's address, length and
/// direction. Its address is private and set only by [`Segment::new`], which refuses a
/// buffer whose end does not fit in 64 bits (one at the top of the address space would
/// otherwise wrap to address 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    addr: u64,
    len: u32,
    writable: bool,
}

impl Segment {
    /// `len` bytes at device address `addr`; writable by the device or only readable.
    pub fn new(addr: u64, len: u32, writable: bool) -> Result<Segment, Error> {
        if len == 0 {
            return Err(Error::BadChain);
        }
        addr.checked_add(u64::from(len)).ok_or(Error::AddressWrap)?;
        Ok(Segment { addr, len, writable })
    }

    /// The device address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Always false: a segment has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// True when the device writes it.
    pub fn writable(&self) -> bool {
        self.writable
    }
}
