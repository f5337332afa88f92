//! Panics on purpose: the runtime prints `[panicker] PANIC on purpose` through the log
//! server and exits with status 101.

#![no_std]
#![no_main]

rt::program!("panicker", main);

fn main(_pid: u32, _badge: u32) {
    panic!("on purpose");
}
