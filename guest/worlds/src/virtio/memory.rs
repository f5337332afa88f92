//! The driver's memory as a device model reaches it: an [`Arena`] the driver and the
//! device share, and the [`Memory`] regions of it the device may read and write, each at
//! a device address. The device reaches only inside them; the driver sending it anywhere
//! else (or breaking the transport's rules) is a [`Violation`]: kept, the first one, for
//! hostfuzz's oracle, or a panic at once for the host tests.

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// The guest memory: one zeroed allocation, 4096-aligned, shared by the driver (through
/// its `Dma`) and the device (through [`Memory`]).
pub struct Arena {
    ptr: *mut u8,
    size: usize,
}

impl Arena {
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 4096).expect("the arena's layout")
    }

    /// An arena of `size` bytes (not zero).
    pub fn new(size: usize) -> Arena {
        assert!(size > 0, "an empty arena");
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc_zeroed(Self::layout(size)) };
        assert!(!ptr.is_null(), "out of memory");
        Arena { ptr, size }
    }

    /// The arena's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The arena's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in new with the same layout.
        unsafe { dealloc(self.ptr, Self::layout(self.size)) }
    }
}

/// What the driver did wrong, as the device saw it: what (the same words for the same
/// failure) and its details.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub what: &'static str,
    pub detail: String,
}

/// The regions of the driver's memory the device may reach, and the first violation.
pub struct Memory {
    /// (device address, pointer into the arena, length).
    pub regions: Vec<(u64, *mut u8, usize)>,
    violation: Option<Violation>,
    /// A violation panics at once (the host tests) instead of being kept (hostfuzz).
    panics: bool,
}

impl Memory {
    /// Regions whose first violation is kept, for [`Memory::take_violation`].
    pub fn keeping(regions: Vec<(u64, *mut u8, usize)>) -> Memory {
        Memory { regions, violation: None, panics: false }
    }

    /// Regions whose every violation panics: a host test fails where the driver went
    /// wrong.
    pub fn panicking(regions: Vec<(u64, *mut u8, usize)>) -> Memory {
        Memory { regions, violation: None, panics: true }
    }

    /// Keeps `what` as the violation, unless one is kept already (or panics with it).
    pub fn violate(&mut self, what: &'static str, detail: String) {
        assert!(!self.panics, "{what}: {detail}");
        if self.violation.is_none() {
            self.violation = Some(Violation { what, detail });
        }
    }

    /// The violation kept, if any, which is then forgotten.
    pub fn take_violation(&mut self) -> Option<Violation> {
        self.violation.take()
    }

    /// The pointer to `len` bytes at device address `addr`, when they lie in one region.
    pub fn at(&self, addr: u64, len: usize) -> Option<*mut u8> {
        self.regions.iter().find_map(|&(start, ptr, size)| {
            let offset = addr.checked_sub(start)?;
            let end = offset.checked_add(len as u64)?;
            // SAFETY: offset + len <= size: inside the region, which lies in the arena.
            (end <= size as u64).then(|| unsafe { ptr.add(offset as usize) })
        })
    }

    /// Reads `out.len()` bytes at `addr`; false (and the violation) when they lie outside.
    pub fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let Some(ptr) = self.at(addr, out.len()) else {
            self.violate("the device was sent outside the driver's memory", format!("{addr:#x}+{}", out.len()));
            return false;
        };
        // SAFETY: at() checked the bytes lie in the arena; the driver is not running.
        unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr(), out.len()) };
        true
    }

    /// Writes `bytes` at `addr`; nothing (and the violation) when they lie outside.
    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        let Some(ptr) = self.at(addr, bytes.len()) else {
            self.violate("the device was sent outside the driver's memory", format!("{addr:#x}+{}", bytes.len()));
            return;
        };
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
    }

    pub fn read16(&mut self, addr: u64) -> u16 {
        let mut b = [0; 2];
        self.read(addr, &mut b);
        u16::from_le_bytes(b)
    }

    pub fn read32(&mut self, addr: u64) -> u32 {
        let mut b = [0; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_reaches_only_inside_a_region_and_the_first_violation_is_kept() {
        let arena = Arena::new(4096);
        let mut mem = Memory::keeping(vec![(0x1000, arena.ptr(), 16)]);
        mem.write(0x100e, &[1, 2]);
        assert_eq!(mem.read16(0x100e), 0x0201);
        assert!(mem.take_violation().is_none());
        // Past the region's end by one byte, then below its start: the first is kept.
        mem.write(0x100f, &[1, 2]);
        assert_eq!(mem.read32(0xffe), 0);
        let first = Violation { what: "the device was sent outside the driver's memory", detail: "0x100f+2".into() };
        assert_eq!(mem.take_violation(), Some(first));
        assert!(mem.take_violation().is_none());
        assert!(mem.at(u64::MAX, 2).is_none());
    }

    #[test]
    #[should_panic(expected = "the device was sent outside the driver's memory: 0x2000+1")]
    fn in_the_tests_a_violation_panics() {
        let arena = Arena::new(4096);
        Memory::panicking(vec![(0x1000, arena.ptr(), 4096)]).write(0x2000, &[0]);
    }
}
