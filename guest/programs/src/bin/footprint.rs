//! The footprint program: uses a known depth of its stack and a known number of its
//! heap's pages, says so, and then sleeps, so the bench can measure both in a dump of
//! the guest's RAM (`memory = true`, docs/ram.md). The optional data entry
//! `footprint-mode` picks what it does:
//!
//! - (none): about 2 KiB of stack below main's frame and 5 pages of its 16-page heap;
//! - `deep`: about 10 KiB of stack, more than half its 4 pages;
//! - `heavy`: 12 heap pages, more than half the cap but leaving an eighth unused;
//! - `full`: 15 heap pages, less than an eighth unused;
//! - `forge`: also writes one stack unit of its own tag whose index lies past its stack
//!   (the bench must refuse it);
//!
//! Its line: `footprint: holding <mode>`.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;

rt::program!("footprint", main, heap_pages = 16);

/// Touches `N` bytes of stack in one frame.
#[inline(never)]
fn dig<const N: usize>() {
    let mut buf = [0u8; N];
    core::hint::black_box(&mut buf);
}

/// Holds about `pages` pages of heap (in one-page pieces: each reaches a new page).
fn hold(pages: usize) -> Vec<Vec<u8>> {
    let mut held = Vec::with_capacity(pages);
    while (rt::heap::peak_pages() as usize) < pages {
        held.push(core::hint::black_box(alloc::vec![1u8; 1024]));
    }
    held
}

#[repr(C, align(4096))]
struct Page([u64; 512]);

/// A page of this program's data, where `forge` writes its unit.
static mut FORGED: Page = Page([0; 512]);

fn main(_pid: u32, _badge: u32) {
    let mut mode = [0u8; 16];
    let len = rt::entry_read(b"footprint-mode", 0, &mut mode).unwrap_or(0);
    let mode = core::str::from_utf8(&mode[..len]).unwrap_or("?").trim();
    match mode {
        "deep" => dig::<10240>(),
        _ => dig::<2048>(),
    }
    let held = hold(match mode {
        "heavy" => 12,
        "full" => 15,
        _ => 5,
    });
    if mode == "forge" {
        let index = abi::STACK_PAGES * abi::paint::UNITS_PER_PAGE + 3;
        let word = abi::paint::stack_word(rt::heap::tag(), abi::STACK_PAGES, index);
        // SAFETY: this program's own static, written once on its one thread; unit 3 of
        // the page sits at the offset its index encodes.
        unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!(FORGED.0[3]), word) };
    }
    rt::log!("footprint: holding {}", if mode.is_empty() { "normal" } else { mode });
    core::hint::black_box(&held);
    let hour = rt::timebase() * 3600;
    loop {
        rt::sleep(hour);
    }
}
