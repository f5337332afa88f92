//! The sample program: the smallest thing the bench can pack and measure. It sums a
//! few bytes (so it has some .text and .rodata) and stops.

#![no_std]
#![no_main]

use programs::halt;

static GREETING: &[u8] = b"sample: hello\n";

#[no_mangle]
extern "C" fn program_main() -> ! {
    let sum = GREETING.iter().fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)));
    core::hint::black_box(sum);
    halt()
}
