//! Reads sector 0 of the disk and reports what an earlier boot left there, then writes
//! the next generation and reads it back:
//!
//!     diskgen: sector 0 starts <16 hex digits>
//!     diskgen: found nothing                  (or `found generation N`)
//!     diskgen: wrote generation N+1
//!
//! A kept disk (`[disk] keep = true`) shows the second boot what the first one wrote.

#![no_std]
#![no_main]

rt::program!("diskgen", main);

const TAG: &[u8; 8] = b"TBDGEN01";
const SECTOR: usize = 512;

fn fail(what: &str, e: abi::Error) -> ! {
    rt::log!("[diskgen] FAIL: {what}: {}", e.name());
    rt::exit(1)
}

fn main(_pid: u32, _badge: u32) {
    let (_, block) = rt::disk_info().unwrap_or_else(|e| fail("no disk", e));
    if block != SECTOR {
        rt::log!("[diskgen] FAIL: block size {block}, not {SECTOR}");
        rt::exit(1);
    }
    let mut sector = [0u8; SECTOR];
    rt::disk_read(0, &mut sector).unwrap_or_else(|e| fail("read", e));
    let mut first = [0u8; 8];
    first.copy_from_slice(&sector[..8]);
    rt::log!("diskgen: sector 0 starts {:016x}", u64::from_be_bytes(first));
    let found = if &first == TAG {
        let mut n = [0u8; 4];
        n.copy_from_slice(&sector[8..12]);
        let n = u32::from_le_bytes(n);
        rt::log!("diskgen: found generation {n}");
        n
    } else {
        rt::log!("diskgen: found nothing");
        0
    };
    let next = found.wrapping_add(1);
    sector.fill(0);
    sector[..8].copy_from_slice(TAG);
    sector[8..12].copy_from_slice(&next.to_le_bytes());
    rt::disk_write(0, &sector).unwrap_or_else(|e| fail("write", e));
    rt::disk_flush().unwrap_or_else(|e| fail("flush", e));
    let mut back = [0u8; SECTOR];
    rt::disk_read(0, &mut back).unwrap_or_else(|e| fail("read back", e));
    if back != sector {
        rt::log!("[diskgen] FAIL: MISMATCH sector 0 did not read back as written");
        rt::exit(1);
    }
    rt::log!("diskgen: wrote generation {next}");
}
