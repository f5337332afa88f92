//! Prints an id drawn from the kernel's generator (seeded from /chosen/rng-seed):
//! `rng id: <16 hex digits>`. Two boots with different seeds print different ids.

#![no_std]
#![no_main]

rt::program!("rng", main);

fn main(_pid: u32, _badge: u32) {
    rt::log!("rng id: {:016x}", rt::random());
}
