//! The kernel's `[disk]` as a `store::BlockDevice`: whole sectors through the disk system
//! calls (docs/reference-guest.md, "The store"); `part` is a partition of it.

/// The disk, with the geometry `disk_info` gave.
pub struct Disk {
    pub sectors: u64,
    pub block: usize,
}

impl Disk {
    /// The disk, or the error `disk_info` gave.
    pub fn open() -> Result<Disk, abi::Error> {
        let (sectors, block) = rt::disk_info()?;
        Ok(Disk { sectors: sectors as u64, block })
    }
}

/// A sector number the system calls take (a usize: 32 bits on rv32).
fn at(sector: u64) -> Result<usize, store::IoError> {
    usize::try_from(sector).map_err(|_| store::IoError)
}

impl store::BlockDevice for Disk {
    fn sector_size(&self) -> usize {
        self.block
    }
    fn sector_count(&self) -> u64 {
        self.sectors
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), store::IoError> {
        rt::disk_read(at(sector)?, buf).map(|_| ()).map_err(|_| store::IoError)
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), store::IoError> {
        rt::disk_write(at(sector)?, buf).map(|_| ()).map_err(|_| store::IoError)
    }
    fn flush(&mut self) -> Result<(), store::IoError> {
        rt::disk_flush().map_err(|_| store::IoError)
    }
}
