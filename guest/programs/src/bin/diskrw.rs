//! Writes a recognisable pattern to 16 sectors of the disk (from sector 8), flushes,
//! reads them back one by one and compares:
//!
//!     diskrw: disk: <sectors> sectors of <block size>
//!     diskrw: wrote and read back 16 sectors
//!
//! or `[diskrw] FAIL: ...` naming the error, a refusal the kernel did not make (a range
//! outside the disk, part of a sector, a buffer that is not the caller's), or the first
//! byte that differs.

#![no_std]
#![no_main]

rt::program!("diskrw", main);

const FIRST: usize = 8;
const COUNT: usize = 16;
const SECTOR: usize = 512;

/// Byte `i` of sector `sector`'s pattern: a tag and the sector's number, then bytes that
/// change with both.
fn pattern(sector: usize, i: usize) -> u8 {
    match i {
        0..=7 => b"TBDISKRW"[i],
        8..=15 => (sector as u64).to_le_bytes()[i - 8],
        _ => (sector.wrapping_mul(31) ^ i.wrapping_mul(7) ^ 0x5a) as u8,
    }
}

fn fail(what: &str, e: abi::Error) -> ! {
    rt::log!("[diskrw] FAIL: {what}: {}", e.name());
    rt::exit(1)
}

fn main(_pid: u32, _badge: u32) {
    let (sectors, block) = rt::disk_info().unwrap_or_else(|e| fail("no disk", e));
    rt::log!("diskrw: disk: {sectors} sectors of {block}");
    if block != SECTOR || sectors < FIRST + COUNT {
        rt::log!("[diskrw] FAIL: the disk needs {} sectors of {SECTOR}", FIRST + COUNT);
        rt::exit(1);
    }
    let mut data = [0u8; COUNT * SECTOR];
    for (i, byte) in data.iter_mut().enumerate() {
        *byte = pattern(FIRST + i / SECTOR, i % SECTOR);
    }
    rt::disk_write(FIRST, &data).unwrap_or_else(|e| fail("write", e));
    rt::disk_flush().unwrap_or_else(|e| fail("flush", e));
    // Refusals the kernel must make before it touches the device.
    if rt::disk_read(sectors, &mut data[..SECTOR]) != Err(abi::Error::Invalid) {
        rt::log!("[diskrw] FAIL: a read past the end was not refused");
        rt::exit(1);
    }
    if rt::disk_read(FIRST, &mut data[..100]) != Err(abi::Error::Invalid) {
        rt::log!("[diskrw] FAIL: a read of part of a sector was not refused");
        rt::exit(1);
    }
    // Buffers that are not the caller's to write (the kernel's image, a read-only page of
    // this program's own) or to read (unmapped): fault, before any request.
    let raw = |call, sector, buf: usize| abi::Error::from_raw(rt::syscall(call, [sector, buf, SECTOR, 0, 0]).0);
    let own_code = main as fn(u32, u32) as usize & !(SECTOR - 1);
    for (call, buf, what) in [
        (abi::sys::DISK_READ, abi::KERNEL_START, "a read into the kernel"),
        (abi::sys::DISK_READ, own_code, "a read into read-only code"),
        (abi::sys::DISK_WRITE, 0x10, "a write from unmapped memory"),
    ] {
        if raw(call, FIRST, buf) != Some(abi::Error::Fault) {
            rt::log!("[diskrw] FAIL: {what} was not refused as a fault");
            rt::exit(1);
        }
    }
    let mut back = [0u8; SECTOR];
    for n in 0..COUNT {
        let sector = FIRST + n;
        back.fill(0);
        rt::disk_read(sector, &mut back).unwrap_or_else(|e| fail("read", e));
        if let Some(i) = (0..SECTOR).find(|&i| back[i] != pattern(sector, i)) {
            rt::log!(
                "[diskrw] FAIL: MISMATCH sector {sector} byte {i}: read {:#04x}, wrote {:#04x}",
                back[i],
                pattern(sector, i)
            );
            rt::exit(1);
        }
    }
    rt::log!("diskrw: wrote and read back {COUNT} sectors");
}
