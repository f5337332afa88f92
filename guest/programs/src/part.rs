//! A partition of the kernel's `[disk]` as a `store::BlockDevice` (storepart).

use crate::disk::Disk;

/// A window of the disk, `first..first + sectors`: a partition as a `store::BlockDevice`.
pub struct Part<'a> {
    pub disk: &'a mut Disk,
    pub first: u64,
    pub sectors: u64,
}

impl Part<'_> {
    /// The disk's sector for the partition's `sector`, inside both.
    fn at(&self, sector: u64) -> Result<u64, store::IoError> {
        let on_disk = self.first.checked_add(sector).filter(|_| sector < self.sectors);
        on_disk.filter(|&s| s < self.disk.sectors).ok_or(store::IoError)
    }
}

impl store::BlockDevice for Part<'_> {
    fn sector_size(&self) -> usize {
        self.disk.block
    }
    fn sector_count(&self) -> u64 {
        self.sectors
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), store::IoError> {
        let s = self.at(sector)?;
        self.disk.read(s, buf)
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), store::IoError> {
        let s = self.at(sector)?;
        self.disk.write(s, buf)
    }
    fn flush(&mut self) -> Result<(), store::IoError> {
        self.disk.flush()
    }
}
