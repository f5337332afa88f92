//! The loader. OpenSBI (fw_dynamic) starts it in S-mode on the boot hart, a0 = hart
//! id, a1 = device tree. It finds the initrd through /chosen, verifies the signed boot
//! bundle in it before it uses a byte of it, checks the kernel's ELF and the first
//! program's, copies the kernel to its region and jumps to it with a0 = hart id and
//! a1 = the `abi::BootInfo`. Any refusal is one line no program can print (no program
//! runs yet) and a power-off with status 255:
//!
//! ```text
//! loader: refused bundle: <why>
//! loader: refused kernel: <why>
//! loader: refused program: <why>
//! ```

#![no_std]
#![no_main]

use core::cell::UnsafeCell;
use core::fmt::{self, Write};

use abi::{BootEntry, BootInfo, BOOT_MAGIC, KERNEL_END, KERNEL_START, MAX_ENTRIES, NAME_LEN, STATUS_REFUSED};

core::arch::global_asm!(
    r#"
    .section .text.entry, "ax"
    .globl _start
_start:
    la      sp, __stack_top
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sb      zero, 0(t0)
    addi    t0, t0, 1
    j       1b
2:  call    loader_main
3:  wfi
    j       3b
"#
);

extern "C" {
    static __loader_start: u8;
    static __loader_end: u8;
}

const UART: usize = 0x1000_0000;
const FINISHER: usize = 0x10_0000;

fn put_bytes(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: the NS16550A registers of QEMU virt (THR at +0, LSR at +5), reached
        // on physical addresses with volatile accesses; the firmware set the UART up.
        unsafe {
            while core::ptr::read_volatile((UART + 5) as *const u8) & (1 << 5) == 0 {
                core::hint::spin_loop();
            }
            core::ptr::write_volatile(UART as *mut u8, b);
        }
    }
}

struct Uart;

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        put_bytes(s.as_bytes());
        Ok(())
    }
}

macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = write!(Uart, "loader: ");
        let _ = write!(Uart, $($arg)*);
        put_bytes(b"\r\n");
    }};
}

/// Powers off with `status` through the `sifive,test` finisher (an SBI SRST
/// shutdown would make QEMU exit 0 whatever the reason).
fn power_off(status: u16) -> ! {
    // SAFETY: 0x10_0000 is QEMU virt's finisher; a 32-bit volatile store of
    // (status << 16) | 0x3333 makes QEMU exit with `status`.
    unsafe { core::ptr::write_volatile(FINISHER as *mut u32, (u32::from(status) << 16) | 0x3333) };
    loop {
        // SAFETY: wfi only waits.
        unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
    }
}

fn refuse(what: &str, why: &str) -> ! {
    say!("refused {what}: {why}");
    power_off(STATUS_REFUSED)
}

/// The boot info, in the loader's .bss (which the kernel never reuses).
struct InfoCell(UnsafeCell<BootInfo>);

// SAFETY: only the boot hart runs the loader; nothing else touches the cell until the
// kernel gets its address, after the loader is done with it.
unsafe impl Sync for InfoCell {}

static INFO: InfoCell = InfoCell(UnsafeCell::new(BootInfo {
    magic: 0,
    hartid: 0,
    dtb: 0,
    initrd_start: 0,
    initrd_end: 0,
    loader_start: 0,
    loader_end: 0,
    first_program: 0,
    entry_count: 0,
    entries: [BootEntry::EMPTY; MAX_ENTRIES],
}));

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[no_mangle]
extern "C" fn loader_main(hartid: usize, dtb: usize) -> ! {
    // SAFETY: a1 from the firmware is the device tree in RAM, left alone while the
    // loader runs; its header is read first to learn its size.
    let header = unsafe { core::slice::from_raw_parts(dtb as *const u8, fdt::HEADER_LEN) };
    let total = fdt::total_size(header).unwrap_or_else(|e| refuse("bundle", e.what));
    // SAFETY: as above, over the size its header gives (bounded by the fdt crate).
    let tree = fdt::Fdt::new(unsafe { core::slice::from_raw_parts(dtb as *const u8, total) })
        .unwrap_or_else(|e| refuse("bundle", e.what));
    let start = tree.cells("/chosen/linux,initrd-start").ok().flatten();
    let end = tree.cells("/chosen/linux,initrd-end").ok().flatten();
    let (Some(start), Some(end)) = (start, end) else { refuse("bundle", "no initrd in /chosen") };
    let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
        refuse("bundle", "initrd out of reach")
    };
    if start >= end || end - start > 1 << 28 {
        refuse("bundle", "initrd range is empty or too large");
    }
    // SAFETY: QEMU loaded the initrd at [start, end) in RAM, as /chosen says; nothing
    // writes to it. The loader runs on physical addresses.
    let initrd = unsafe { core::slice::from_raw_parts(start as *const u8, end - start) };
    let bundle = bundle::verify(initrd, &bundle::DEV_PUBLIC_KEY).unwrap_or_else(|e| refuse("bundle", e.describe()));
    // From here on the bytes are the signed ones.
    let loader = (core::ptr::addr_of!(__loader_start) as usize, core::ptr::addr_of!(__loader_end) as usize);
    let kernel_region = (KERNEL_START, KERNEL_END);
    if overlaps(kernel_region, (start, end)) || overlaps(kernel_region, (dtb, dtb + total)) {
        refuse("kernel", "its region overlaps the initrd or the device tree (too little RAM)");
    }

    // SAFETY: only this hart uses INFO, and no other reference to it exists yet.
    let info = unsafe { &mut *INFO.0.get() };
    let mut count = 0;
    for entry in bundle.entries() {
        if count == MAX_ENTRIES {
            refuse("bundle", "more entries than the boot info holds");
        }
        let slot = &mut info.entries[count];
        let n = entry.name.len().min(NAME_LEN);
        slot.name[..n].copy_from_slice(&entry.name.as_bytes()[..n]);
        slot.kind = entry.kind as u32;
        slot.addr = entry.data.as_ptr() as usize;
        slot.len = entry.data.len();
        if entry.kind == bundle::Kind::FirstProgram {
            info.first_program = count;
        }
        count += 1;
    }
    say!("bundle verified, {count} entries");

    let image = bundle.kernel().data;
    let program =
        elf::check(image, KERNEL_START as u64..KERNEL_END as u64).unwrap_or_else(|e| refuse("kernel", e.describe()));
    elf::check(bundle.first_program().data, abi::USER_START as u64..abi::USER_END as u64)
        .unwrap_or_else(|e| refuse("program", e.describe()));

    for seg in program.segments() {
        let (vaddr, memsz) = (seg.vaddr as usize, seg.memsz as usize);
        let (data, filesz) = (seg.data, seg.data.len());
        if filesz > memsz {
            refuse("kernel", "segment file size above its memory size");
        }
        // SAFETY: elf::check put [vaddr, vaddr + memsz) inside the kernel's region,
        // which is RAM no one else uses (checked against the initrd, the tree and the
        // loader above); the source is the verified bundle, which does not overlap it.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), vaddr as *mut u8, filesz);
            core::ptr::write_bytes((vaddr + filesz) as *mut u8, 0, memsz - filesz);
        }
    }

    info.magic = BOOT_MAGIC;
    info.hartid = hartid;
    info.dtb = dtb;
    info.initrd_start = start;
    info.initrd_end = end;
    info.loader_start = loader.0;
    info.loader_end = loader.1;
    info.entry_count = count;
    say!("starting kernel");
    let entry = program.entry as usize;
    // SAFETY: the kernel's segments are in place; fence.i makes the copied code
    // visible to instruction fetch, and the jump hands over a0 = hart id, a1 = boot
    // info, as the kernel's entry expects. It never returns.
    unsafe {
        core::arch::asm!("fence.i", "jr {entry}", entry = in(reg) entry, in("a0") hartid,
            in("a1") info as *mut BootInfo as usize, options(noreturn));
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let _ = write!(Uart, "loader: PANIC {}", info.message());
    put_bytes(b"\r\n");
    power_off(1)
}
