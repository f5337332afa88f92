//! Writes to an unmapped address (0x10): the kernel ends it and the log server prints
//! its fault notice (scause 0xf, a store page fault).

#![no_std]
#![no_main]

rt::program!("faulter", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"faulter: writing to 0x10");
    // SAFETY: none: this store is meant to fault (the page is unmapped); the kernel
    // ends the process before it could have any effect.
    unsafe { core::ptr::write_volatile(core::hint::black_box(0x10usize) as *mut u32, 1) };
    rt::log(b"[faulter] FAIL: the store went through");
}
