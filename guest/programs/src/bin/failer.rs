//! Reports a failure: `[failer] FAIL: on purpose`, then exits with status 1.

#![no_std]
#![no_main]

rt::program!("failer", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"[failer] FAIL: on purpose");
    rt::exit(1);
}
