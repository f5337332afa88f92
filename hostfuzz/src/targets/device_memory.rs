//! The driver's memory as the hostile device models of the `virtio` and `virtio-net`
//! targets reach it: regions of the target's arena, each at a device address. A model
//! reads and writes only inside them; the driver sending it anywhere else is a finding,
//! the first one kept.

use crate::finding::Finding;

/// The regions (device address, pointer into the arena, length) and the first finding.
pub(crate) struct DeviceMemory {
    pub(crate) regions: Vec<(u64, *mut u8, usize)>,
    pub(crate) violation: Option<Finding>,
}

impl DeviceMemory {
    pub(crate) fn new(regions: Vec<(u64, *mut u8, usize)>) -> DeviceMemory {
        DeviceMemory { regions, violation: None }
    }

    /// Keeps `what` as the finding, unless one is kept already.
    pub(crate) fn violate(&mut self, what: &str, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(Finding::oracle(what, detail));
        }
    }

    /// The pointer to `len` bytes at device address `addr`, when they lie in one region.
    pub(crate) fn at(&self, addr: u64, len: usize) -> Option<*mut u8> {
        self.regions.iter().find_map(|&(start, ptr, size)| {
            let offset = addr.checked_sub(start)?;
            let end = offset.checked_add(len as u64)?;
            // SAFETY: offset + len <= size: inside the region, which lies in the arena.
            (end <= size as u64).then(|| unsafe { ptr.add(offset as usize) })
        })
    }

    /// Reads `out.len()` bytes at `addr`; false (and the finding) when they lie outside.
    pub(crate) fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let Some(ptr) = self.at(addr, out.len()) else {
            self.violate("the device was sent outside the driver's memory", format!("{addr:#x}+{}", out.len()));
            return false;
        };
        // SAFETY: at() checked the bytes lie in the arena; the driver is not running.
        unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr(), out.len()) };
        true
    }

    /// Writes `bytes` at `addr`; nothing (and the finding) when they lie outside.
    pub(crate) fn write(&mut self, addr: u64, bytes: &[u8]) {
        let Some(ptr) = self.at(addr, bytes.len()) else {
            self.violate("the device was sent outside the driver's memory", format!("{addr:#x}+{}", bytes.len()));
            return;
        };
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
    }

    pub(crate) fn read16(&mut self, addr: u64) -> u16 {
        let mut b = [0; 2];
        self.read(addr, &mut b);
        u16::from_le_bytes(b)
    }

    pub(crate) fn read32(&mut self, addr: u64) -> u32 {
        let mut b = [0; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }
}
