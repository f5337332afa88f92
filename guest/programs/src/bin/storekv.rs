//! The record store (`guest/store`) on the kernel's `[disk]`, carried from one boot to
//! the next: a blank disk (sectors 0 and 1 all zero) is formatted, any other is mounted;
//! the program reads the last boot's record, appends its own and checks the image:
//!
//!     storekv: formatted a blank disk          (or `mounted: N records`)
//!     storekv: found boot N                    (or `found nothing`)
//!     storekv: wrote boot N+1
//!     storekv: check found 0
//!
//! A store the disk holds but that fails its checks is `storekv: refused: <Error>`, with
//! every inconsistency the checker names (`storekv: check: <Inconsistency>`).

#![no_std]
#![no_main]

use programs::disk;

use store::{Error, Store};

rt::program!("storekv", main);

/// The key each boot's record has.
const BOOT: u32 = 1;

fn fail(what: &str, e: Error) -> ! {
    rt::log!("[storekv] FAIL: {what}: {e:?}");
    rt::exit(1)
}

/// Whether sectors 0 and 1 are all zero.
fn blank(disk: &disk::Disk) -> bool {
    let mut buf = [0u8; store::MAX_SECTOR];
    let buf = &mut buf[..disk.block.min(store::MAX_SECTOR)];
    (0..2).all(|s| rt::disk_read(s, buf).is_ok() && buf.iter().all(|&b| b == 0))
}

/// Runs the checker and logs every inconsistency.
fn check(disk: &mut disk::Disk) -> usize {
    let found = store::check(disk, &mut |i| rt::log!("storekv: check: {i:?}"));
    rt::log!("storekv: check found {found}");
    found
}

fn main(_pid: u32, _badge: u32) {
    let Ok(mut disk) = disk::Disk::open() else {
        rt::log!("[storekv] FAIL: no disk");
        rt::exit(1)
    };
    let opened = if blank(&disk) {
        Store::format(&mut disk).inspect(|_| rt::log!("storekv: formatted a blank disk"))
    } else {
        Store::mount(&mut disk).inspect(|s| rt::log!("storekv: mounted: {} records", s.len()))
    };
    let mut store = match opened {
        Ok(store) => store,
        Err(e) => {
            rt::log!("storekv: refused: {e:?}");
            check(&mut disk);
            rt::exit(0)
        }
    };
    let mut value = [0u8; 32];
    let last = match store.get(BOOT, &mut value) {
        Ok(Some(n)) => {
            let mut boot = [0u8; 8];
            let len = n.min(8);
            boot[..len].copy_from_slice(&value[..len]);
            let boot = u64::from_le_bytes(boot);
            rt::log!("storekv: found boot {boot}");
            boot
        }
        Ok(None) => {
            rt::log!("storekv: found nothing");
            0
        }
        Err(e) => {
            rt::log!("storekv: refused: {e:?}");
            check(&mut disk);
            rt::exit(0)
        }
    };
    let next = last + 1;
    store.append(BOOT, &next.to_le_bytes()).unwrap_or_else(|e| fail("append", e));
    rt::log!("storekv: wrote boot {next}");
    if check(&mut disk) != 0 {
        rt::log!("[storekv] FAIL: the store it wrote is inconsistent");
        rt::exit(1);
    }
}
