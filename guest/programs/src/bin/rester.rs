//! The rester: in init's place, says it is at rest and then sleeps an hour at a time, so
//! that the machine does nothing a program asked for while the bench measures its cost
//! at rest (`[idle]`, docs/idle.md). What the window counts is the kernel's own.

#![no_std]
#![no_main]

rt::program!("rester", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"rester: at rest");
    let hour = rt::timebase() * 3600;
    loop {
        rt::sleep(hour);
    }
}
