//! The record store (`guest/store`) the bench packed into the first GPT partition of the
//! `[disk]` (tests/data/disks/store.toml): the program finds the partition (the GPT
//! header in sector 1, its first entry), mounts the store on it, reads key 1 and runs
//! the checker:
//!
//!     storepart: partition 1 sectors F..=L
//!     storepart: key 1 is "packed by the bench"
//!     storepart: check found 0
//!
//! A store that fails its checks (the bench's `flip_header` flips bit 0 of the
//! partition's first byte, a commit's magic) is `storepart: refused: <Error>`, with every
//! inconsistency the checker names (`storepart: check: <Inconsistency>`).

#![no_std]
#![no_main]

use programs::disk;
use programs::part;

use store::BlockDevice;

rt::program!("storepart", main);

fn fail(what: &str) -> ! {
    rt::log!("[storepart] FAIL: {what}");
    rt::exit(1)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn main(_pid: u32, _badge: u32) {
    let Ok(mut disk) = disk::Disk::open() else { fail("no disk") };
    if disk.block != 512 {
        fail("a block size other than 512");
    }
    let mut buf = [0u8; 512];
    if disk.read(1, &mut buf).is_err() || &buf[..8] != b"EFI PART" {
        fail("no GPT header in sector 1");
    }
    if disk.read(u64_at(&buf, 72), &mut buf).is_err() {
        fail("the partition entries are outside the disk");
    }
    let (first, last) = (u64_at(&buf, 32), u64_at(&buf, 40));
    if first == 0 || last < first || last >= disk.sectors {
        fail("the first partition entry is empty or outside the disk");
    }
    rt::log!("storepart: partition 1 sectors {first}..={last}");
    let mut part = part::Part { disk: &mut disk, first, sectors: last - first + 1 };
    match store::Store::mount(&mut part) {
        Ok(mut store) => {
            let mut out = [0u8; 64];
            match store.get(1, &mut out) {
                Ok(Some(n)) => match core::str::from_utf8(&out[..n]) {
                    Ok(text) => rt::log!("storepart: key 1 is {text:?}"),
                    Err(_) => rt::log!("storepart: key 1 is {:?}", &out[..n]),
                },
                Ok(None) => rt::log!("storepart: no key 1"),
                Err(e) => rt::log!("storepart: refused: {e:?}"),
            }
        }
        Err(e) => rt::log!("storepart: refused: {e:?}"),
    }
    let found = store::check(&mut part, &mut |i| rt::log!("storepart: check: {i:?}"));
    rt::log!("storepart: check found {found}");
}
