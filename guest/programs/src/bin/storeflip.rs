//! A flipped bit in the record store (`guest/store`) on the kernel's `[disk]`, found and
//! refused: the program formats the disk, appends a record, reads it back, then flips
//! one bit of the record's value on the disk itself (a raw `disk_write` past the store,
//! as a failing medium would) and reads again:
//!
//!     storeflip: read back "the value"
//!     storeflip: flipped bit 0 of byte 24 of sector 2
//!     storeflip: refused: Inconsistent(RecordDamaged { sector: 2, index: 0 })
//!     storeflip: check: RecordDamaged { sector: 2, index: 0 }
//!     storeflip: check found 1
//!
//! A read that returned the damaged value would print `storeflip: read back` again.

#![no_std]
#![no_main]

use programs::disk;

use store::Store;

rt::program!("storeflip", main);

const VALUE: &[u8] = b"the value";
/// The value's first byte: the record's header is 24 bytes.
const BYTE: usize = store::RECORD_HEADER;

fn fail(what: &str) -> ! {
    rt::log!("[storeflip] FAIL: {what}");
    rt::exit(1)
}

fn show(store: &mut Store<&mut disk::Disk>) {
    let mut out = [0u8; 32];
    match store.get(0, &mut out) {
        Ok(Some(n)) => match core::str::from_utf8(&out[..n]) {
            Ok(text) => rt::log!("storeflip: read back {text:?}"),
            Err(_) => rt::log!("storeflip: read back {:?}", &out[..n]),
        },
        Ok(None) => rt::log!("storeflip: read nothing"),
        Err(e) => rt::log!("storeflip: refused: {e:?}"),
    }
}

fn main(_pid: u32, _badge: u32) {
    let Ok(mut disk) = disk::Disk::open() else { fail("no disk") };
    let sector = store::FIRST_RECORD;
    {
        let Ok(mut store) = Store::format(&mut disk) else { fail("format") };
        if store.append(0, VALUE).is_err() {
            fail("append");
        }
        show(&mut store);
    }
    let mut buf = [0u8; store::MAX_SECTOR];
    let buf = &mut buf[..disk.block.min(store::MAX_SECTOR)];
    let raw = sector as usize;
    if rt::disk_read(raw, buf).is_err() {
        fail("raw read");
    }
    buf[BYTE] ^= 1;
    if rt::disk_write(raw, buf).is_err() || rt::disk_flush().is_err() {
        fail("raw write");
    }
    rt::log!("storeflip: flipped bit 0 of byte {BYTE} of sector {sector}");
    match Store::mount(&mut disk) {
        Ok(mut store) => show(&mut store),
        Err(e) => rt::log!("storeflip: refused at mount: {e:?}"),
    }
    let found = store::check(&mut disk, &mut |i| rt::log!("storeflip: check: {i:?}"));
    rt::log!("storeflip: check found {found}");
}
