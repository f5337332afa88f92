//! Spins through a hundred million rounds without a system call, then says so: only the
//! timer can take the hart from it, so the programs after it running at all, and
//! before it ends, shows the round-robin preemption.

#![no_std]
#![no_main]

rt::program!("hog", main);

fn main(_pid: u32, _badge: u32) {
    let mut x = 0u32;
    for i in 0..100_000_000u32 {
        x = core::hint::black_box(x.wrapping_add(i));
    }
    rt::log!("hog: spun ({x:#x})");
}
