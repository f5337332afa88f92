//! Tries to read memory that is not its own: first the kernel's image at 0x8080_0000
//! (mapped supervisor-only in every address space), which must fault (scause 0xd).
//! Every program is linked at the same addresses, so its own static at the address
//! another program uses for its data holds its own value, never the other's.

#![no_std]
#![no_main]

rt::program!("peeker", main);

static MINE: u32 = 0x5eed_1234;

fn main(_pid: u32, _badge: u32) {
    let own = core::hint::black_box(&MINE as *const u32);
    // SAFETY: `own` points at this program's own static.
    rt::log!("peeker: own static at {:#x} holds {:#x}", own as usize, unsafe { core::ptr::read_volatile(own) });
    rt::log!("peeker: reading the kernel at {:#x}", abi::KERNEL_START);
    // SAFETY: none: this load is meant to fault (a supervisor-only page); the kernel
    // ends the process before the value is used.
    let value = unsafe { core::ptr::read_volatile(core::hint::black_box(abi::KERNEL_START) as *const u32) };
    rt::log!("[peeker] FAIL: read the kernel: {value:#x}");
}
