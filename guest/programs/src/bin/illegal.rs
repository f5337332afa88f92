//! Runs an illegal instruction: the kernel ends it (scause 0x2).

#![no_std]
#![no_main]

rt::program!("illegal", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"illegal: running unimp");
    // SAFETY: none needed in effect: `unimp` traps at once and the kernel ends the
    // process; no memory or register the compiler relies on changes.
    unsafe { core::arch::asm!("unimp") };
    rt::log(b"[illegal] FAIL: unimp ran");
}
