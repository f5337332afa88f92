//! The panic handler's backtrace: the kernel's own frame records walked from the
//! handler up, printed after the `PANIC` line (docs/triage.md, "The reference kernel").
//!
//! The bench builds the kernel with frame pointers (`-C force-frame-pointers=yes`,
//! crates/testbench/src/build.rs), and the core library the toolchain ships is built
//! with them too. On RISC-V every function then keeps a frame record: s0 (fp) points
//! just above it, the saved return address at fp - XLEN and the caller's fp at
//! fp - 2 * XLEN, on both widths (XLEN = 8 on riscv64, 4 on riscv32). The entry points
//! (`_start`, `_secondary`, the trap entry) set s0 to 0 before their first call, so
//! the chain ends with a null fp there.
//!
//! ```text
//! backtrace:
//!   #0 0x0000000080801a3e (core)
//!   #1 0x0000000080800f12
//!   ...
//! end of backtrace
//! ```
//!
//! Each frame is a call site: its return address less 2, which lies inside the call
//! instruction whether that was 4 bytes (`jalr`, `jal`) or 2 (`c.jalr`, `c.jal`), so a
//! symbolizer given the kernel's ELF resolves it to the calling function and line (the
//! return address itself can lie in the next function, after a call that never returns,
//! as every panic's is). `(core)` marks a call site in the core library's code, which
//! link.ld keeps apart between `__core_text_start` and `__core_text_end`: the panic
//! machinery (`core::panicking`, `unwrap_failed`, ...); the first frame without it is
//! the kernel's own, where the panic was raised. The first frame is the handler's
//! caller; the handler itself is not printed.
//!
//! The walk never faults: it reads a record only when fp is aligned and lies inside
//! the panicking hart's own stack, each fp must be above the one before (the stack
//! grows down, so the walk cannot loop), a return address must lie in the kernel's
//! code, and at most [`MAX_FRAMES`] are printed. The end line is `end of backtrace` at
//! the chain's end, and says why the walk stopped otherwise: `end of backtrace: no frame
//! record of this hart's stack at fp 0x…`, `…: a return address outside the kernel's
//! code: 0x…`, `…: more frames not read, from fp 0x…`.

use core::fmt::Write;

use crate::console::Uart;
use crate::trap::MAX_HARTS;

/// The most frames printed.
pub const MAX_FRAMES: usize = 32;
/// Bytes of one hart's stack (link.ld).
const STACK_SIZE: usize = 0x4000;
const XLEN: usize = core::mem::size_of::<usize>();
/// Hex digits of an address: 16 on riscv64, 8 on riscv32.
const DIGITS: usize = 2 * XLEN;

extern "C" {
    static __kernel_start: u8;
    static __text_end: u8;
    static __core_text_start: u8;
    static __core_text_end: u8;
    static __stacks_top: u8;
}

/// Prints the backtrace from the frame record at `fp` (the handler's own s0), then
/// the end line.
pub fn print(fp: usize) {
    crate::console::put_bytes(b"backtrace:\r\n");
    let _ = match walk(fp) {
        None => write!(Uart, "end of backtrace"),
        Some((why, value)) => write!(Uart, "end of backtrace: {why} {value:#x}"),
    };
    crate::console::put_bytes(b"\r\n");
}

/// Walks and prints the frames; None at the chain's end, else why the walk stopped
/// and the value that stopped it.
fn walk(mut fp: usize) -> Option<(&'static str, usize)> {
    // Only the linker symbols' addresses are taken.
    let text = core::ptr::addr_of!(__kernel_start) as usize..core::ptr::addr_of!(__text_end) as usize;
    let core_text = core::ptr::addr_of!(__core_text_start) as usize..core::ptr::addr_of!(__core_text_end) as usize;
    let stacks_top = core::ptr::addr_of!(__stacks_top) as usize;
    // This hart's stack: the one of link.ld's MAX_HARTS stacks that holds a local, as
    // it holds sp.
    let here = 0u8;
    let depth = stacks_top.wrapping_sub(core::ptr::addr_of!(here) as usize);
    if depth >= MAX_HARTS * STACK_SIZE {
        return Some(("a local's address is on no hart's stack:", core::ptr::addr_of!(here) as usize));
    }
    let top = stacks_top - depth / STACK_SIZE * STACK_SIZE;
    let records = top - STACK_SIZE + 2 * XLEN..top + 1;
    let mut below = 0;
    for n in 0..MAX_FRAMES {
        if fp == 0 {
            return None;
        }
        if fp % XLEN != 0 || !records.contains(&fp) || fp <= below {
            return Some(("no frame record of this hart's stack at fp", fp));
        }
        // SAFETY: fp is aligned and at least two words above this hart's stack's
        // bottom and at most its top, so both words lie in the stack (RAM in the kernel's
        // image, which the kernel reaches on physical addresses).
        let (ra, caller) = unsafe {
            (
                core::ptr::read_volatile((fp - XLEN) as *const usize),
                core::ptr::read_volatile((fp - 2 * XLEN) as *const usize),
            )
        };
        let site = ra.wrapping_sub(2);
        if !text.contains(&site) {
            return Some(("a return address outside the kernel's code:", ra));
        }
        let mark = if core_text.contains(&site) { " (core)" } else { "" };
        let _ = write!(Uart, "  #{n} {site:#0width$x}{mark}", width = DIGITS + 2);
        crate::console::put_bytes(b"\r\n");
        below = fp;
        fp = caller;
    }
    (fp != 0).then_some(("more frames not read, from fp", fp))
}
