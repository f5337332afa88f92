//! The reference kernel. The loader starts it on the boot hart at its ELF entry with
//! a0 = hart id and a1 = the `abi::BootInfo`, paging off. It checks the device tree,
//! starts the first program as PID 1, starts every other hart, and each hart runs the
//! scheduler. See guest/README.md for the memory map and the system calls.

#![no_std]
#![no_main]

mod backtrace;
mod console;
mod disk;
mod mm;
mod net;
#[cfg(feature = "panic-test")]
mod panic_test;
mod proc;
mod sbi;
#[cfg(feature = "sched-trace")]
mod sched_trace;
mod trap;

use abi::{BootInfo, BOOT_MAGIC, STATUS_REFUSED};

use console::power_off;
use trap::{MAX_HARTS, NONE};

/// The shortest /chosen/rng-seed the kernel accepts, in bytes.
const MIN_SEED: usize = 16;

// Each entry sets s0 (the frame pointer) to 0 before its first call: the end of the
// chain of frame records the panic handler's backtrace walks (backtrace.rs).
core::arch::global_asm!(
    r#"
    .section .text.entry, "ax"
    .globl _start
_start:
    li      t0, {max_harts}
    bgeu    a0, t0, 2f
    la      sp, __stacks_top
    slli    t1, a0, 14
    sub     sp, sp, t1
    li      s0, 0
    call    kmain
2:  wfi
    j       2b

    .globl _secondary
_secondary:
    li      t0, {max_harts}
    bgeu    a0, t0, 2b
    la      sp, __stacks_top
    slli    t1, a0, 14
    sub     sp, sp, t1
    li      s0, 0
    call    secondary_main
    j       2b
"#,
    max_harts = const MAX_HARTS,
);

extern "C" {
    fn _secondary();
    static __kernel_end: u8;
    static __stacks_top: u8;
}

/// Sets stvec, sscratch-independent state and the timer interrupt for this hart.
fn hart_setup(hartid: usize) -> &'static mut trap::Hart {
    // SAFETY: this hart is `hartid` and takes its own block once, here.
    let hart = unsafe { trap::HARTS.mine(hartid) };
    hart.hartid = hartid;
    hart.current = NONE;
    // Only the linker symbol's address is taken.
    hart.kstack = core::ptr::addr_of!(__stacks_top) as usize - hartid * 0x4000;
    // SAFETY: stvec gets the trap entry (4-byte aligned, direct mode); sie.STIE turns on
    // the timer interrupt, taken only in user mode since sstatus.SIE stays 0.
    unsafe {
        core::arch::asm!("csrw stvec, {v}", "csrs sie, {stie}", v = in(reg) trap::vector(), stie = in(reg) 1usize << 5,
            options(nostack));
    }
    hart
}

/// Refuses the device tree: one line, power-off with the system-failure status.
fn refuse_tree(what: &str) -> ! {
    kprintln!("refused device tree: {what}");
    power_off(STATUS_REFUSED)
}

#[no_mangle]
extern "C" fn kmain(hartid: usize, info: usize) -> ! {
    kprintln!("KMAIN");
    if cfg!(debug_assertions) {
        kprintln!("debug-assertions on");
    }
    if info == 0 || info % core::mem::align_of::<BootInfo>() != 0 {
        kprintln!("refused boot info at {info:#x}");
        power_off(STATUS_REFUSED);
    }
    // SAFETY: the loader passes its boot info in a1; it lies in the loader's image,
    // which nothing reuses, and the magic is checked before anything else is read.
    let info = unsafe { &*(info as *const BootInfo) };
    if info.magic != BOOT_MAGIC || info.entry_count > abi::MAX_ENTRIES || info.first_program >= info.entry_count {
        kprintln!("refused boot info: bad magic or entries");
        power_off(STATUS_REFUSED);
    }

    // SAFETY: the firmware's device tree (address from the loader) is readable RAM that
    // nothing writes; the header is read first to learn its size.
    let header = unsafe { core::slice::from_raw_parts(info.dtb as *const u8, fdt::HEADER_LEN) };
    let total = fdt::total_size(header).unwrap_or_else(|e| refuse_tree(e.what));
    // SAFETY: as above, for the size the header gives (at most fdt::MAX_TOTAL_SIZE).
    let bytes = unsafe { core::slice::from_raw_parts(info.dtb as *const u8, total) };
    let tree = fdt::Fdt::new(bytes).unwrap_or_else(|e| refuse_tree(e.what));
    let timebase = match tree.u32("/cpus/timebase-frequency") {
        Ok(Some(0)) => refuse_tree("/cpus/timebase-frequency is 0"),
        Ok(Some(f)) => u64::from(f),
        Ok(None) => refuse_tree("no /cpus/timebase-frequency"),
        Err(e) => refuse_tree(e.what),
    };
    let seed = match tree.property("/chosen/rng-seed") {
        Ok(Some(seed)) if seed.len() >= MIN_SEED => seed,
        Ok(Some(seed)) => {
            kprintln!("refused device tree: /chosen/rng-seed has {} bytes, fewer than {MIN_SEED}", seed.len());
            power_off(STATUS_REFUSED)
        }
        Ok(None) => refuse_tree("no /chosen/rng-seed"),
        Err(e) => refuse_tree(e.what),
    };
    let ram_end = match tree.property("/memory@80000000/reg") {
        Ok(Some(reg)) if reg.len() == 16 => {
            let base = fdt::read_u64(&reg[..8]).unwrap_or(0);
            let size = fdt::read_u64(&reg[8..]).unwrap_or(0);
            base.saturating_add(size).min(0xc000_0000) as usize
        }
        _ => refuse_tree("no /memory@80000000 reg of two 2-cell numbers"),
    };

    let mut k = proc::KERNEL.lock();
    // Only the linker symbol's address is taken.
    let image_end = core::ptr::addr_of!(__kernel_end) as usize;
    debug_assert!(image_end <= abi::KERNEL_END);
    // Free RAM: above the kernel's region, less the initrd (the bundle) and the tree.
    let dtb_end = info.dtb + total;
    let mut holes = [(info.initrd_start, info.initrd_end), (info.dtb, dtb_end)];
    holes.sort_unstable();
    let mut from = abi::KERNEL_END;
    for (start, end) in holes {
        if end > from {
            k.frames.add(from, start.min(ram_end));
            from = end.next_multiple_of(abi::PAGE_SIZE);
        }
    }
    k.frames.add(from, ram_end);
    k.init(&info.entries[..info.entry_count], seed, timebase);
    match tree.property(disk::SLOT0_NODE) {
        Ok(node) => k.disk = disk::Disk::probe(node),
        Err(e) => refuse_tree(e.what),
    }
    match tree.property(net::SLOT2_NODE) {
        Ok(node) => k.net = net::Card::probe(node),
        Err(e) => refuse_tree(e.what),
    }
    if let Err(e) = k.start_first(info.first_program) {
        kprintln!("cannot start the first program: {}", e.name());
        power_off(STATUS_REFUSED);
    }
    drop(k);
    // The test-only panic: here, after every check of the boot and before any other
    // hart or any program runs, so nothing prints beside its report.
    #[cfg(feature = "panic-test")]
    panic_test::run();

    let hart = hart_setup(hartid);
    // The other harts wait for the kernel lock before they run anything, so holding it
    // here prints the count before any program's line, whatever the harts' timing.
    let k = proc::KERNEL.lock();
    let mut started = 1;
    for other in (0..MAX_HARTS).filter(|&h| h != hartid) {
        if sbi::hart_start(other, _secondary as *const () as usize, 0) == 0 {
            started += 1;
        }
    }
    kprintln!("harts {started}");
    drop(k);
    proc::run(hart)
}

#[no_mangle]
extern "C" fn secondary_main(hartid: usize) -> ! {
    let hart = hart_setup(hartid);
    proc::run(hart)
}

/// Whether a hart is already printing a panic.
static PANICKING: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The one line `PANIC <message> at <file>:<line>:<col>`, the backtrace (backtrace.rs),
/// power-off with status 1. A second panic, on another hart or inside this one, waits
/// forever: the first report is printed whole, and its power-off ends the machine.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    use core::sync::atomic::Ordering;
    // The frame record of this function: its caller's return address and fp.
    let fp: usize;
    // SAFETY: reading s0 (this function's frame pointer: the kernel is built with frame
    // pointers) has no side effects.
    unsafe { core::arch::asm!("mv {}, s0", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    if PANICKING.swap(true, Ordering::AcqRel) {
        console::halt()
    }
    let _ = write!(console::Uart, "PANIC {}", info.message());
    if let Some(location) = info.location() {
        let _ = write!(console::Uart, " at {location}");
    }
    console::put_bytes(b"\r\n");
    backtrace::print(fp);
    power_off(1)
}
