//! Tries to write the UART directly at 0x1000_0000 (not mapped in any address space):
//! it must fault (scause 0xf) before a byte reaches the console.

#![no_std]
#![no_main]

rt::program!("uartpoke", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"uartpoke: writing the UART");
    // SAFETY: none: this store is meant to fault; the UART is not mapped for users.
    unsafe { core::ptr::write_volatile(core::hint::black_box(0x1000_0000usize) as *mut u8, b'X') };
    rt::log(b"[uartpoke] FAIL: the UART store went through");
}
