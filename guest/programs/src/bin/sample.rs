//! The sample program: the smallest thing the bench packs and measures. It sums a few
//! bytes (so it has some .text and .rodata) and exits.

#![no_std]
#![no_main]

rt::program!("sample", main);

static GREETING: &[u8] = b"sample: hello\n";

fn main(_pid: u32, _badge: u32) {
    let sum = GREETING.iter().fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)));
    core::hint::black_box(sum);
}
