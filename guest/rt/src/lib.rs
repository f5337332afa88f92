//! The runtime of the user programs. The kernel starts a program at `_start` with its
//! stack set, a0 = its PID, a1 = its badge and a2 = its tag; `program!` names the program, its
//! `main` and its panic handler, which reports `[name] PANIC <message>` on the log
//! endpoint and exits with status 101.

#![no_std]

use core::fmt::{self, Write};

pub use abi::{Error, Message};

pub mod heap;

core::arch::global_asm!(
    r#"
    .section .text.entry, "ax"
    .globl _start
_start:
    call    rt_main
1:  j       1b
"#
);

/// Declares the program: `program!("name", main)` with `fn main(pid: u32, badge: u32)`,
/// or `program!("name", main, heap_pages = N)` for a heap of N pages (`heap`), which
/// the global allocator hands out. Before `main` the runtime writes the program's heap
/// record (cap N, or 0 without a heap) with the tag the kernel gave it.
#[macro_export]
macro_rules! program {
    ($name:literal, $main:path) => {
        $crate::program!(@common $name, $main, core::ptr::null_mut(), 0);
    };
    ($name:literal, $main:path, heap_pages = $pages:expr) => {
        #[repr(C, align(4096))]
        struct HeapSpace([u8; $pages * 4096]);
        static mut HEAP_SPACE: HeapSpace = HeapSpace([0; $pages * 4096]);
        $crate::program!(@common $name, $main, core::ptr::addr_of_mut!(HEAP_SPACE) as *mut u8, $pages);
    };
    (@common $name:literal, $main:path, $space:expr, $pages:expr) => {
        /// The program's name, as its panic report gives it.
        pub const NAME: &str = $name;

        #[no_mangle]
        extern "C" fn rt_main(pid: usize, badge: usize, tag: usize) -> ! {
            $crate::heap::start($space, $pages, tag as u32);
            $main(pid as u32, badge as u32);
            $crate::exit(0)
        }

        #[panic_handler]
        fn panic(info: &core::panic::PanicInfo) -> ! {
            $crate::panic_report(NAME, info)
        }
    };
}

/// Reports a panic on the log endpoint and exits with status 101.
pub fn panic_report(name: &str, info: &core::panic::PanicInfo) -> ! {
    let mut line = Line::new();
    let _ = write!(line, "[{name}] PANIC {}", info.message());
    log(line.as_bytes());
    exit(101)
}

/// Makes system call `n` with up to five arguments; returns a0 and a1.
pub fn syscall(n: usize, args: [usize; 5]) -> (usize, usize) {
    let (r0, r1): (usize, usize);
    // SAFETY: ecall traps to the kernel, which reads a7 and a0..a4, writes a0 and a1
    // and reads or writes only the memory the arguments name, which the callers in
    // this module pass as live buffers of the stated lengths.
    unsafe {
        core::arch::asm!("ecall", inlateout("a0") args[0] => r0, inlateout("a1") args[1] => r1, in("a2") args[2],
            in("a3") args[3], in("a4") args[4], in("a7") n, options(nostack));
    }
    (r0, r1)
}

fn result(raw: usize) -> Result<usize, Error> {
    match Error::from_raw(raw) {
        Some(e) => Err(e),
        None => Ok(raw),
    }
}

/// Writes one line (the first program's goes to the UART, any other's to the log
/// endpoint, under its badge).
pub fn log(text: &[u8]) {
    syscall(abi::sys::LOG, [text.as_ptr() as usize, text.len(), 0, 0, 0]);
}

/// Writes text without a line ending (first program only: a prompt); for any other
/// program it is a line, as [`log`].
pub fn write(text: &[u8]) {
    syscall(abi::sys::LOG, [text.as_ptr() as usize, text.len(), abi::sys::LOG_NO_END, 0, 0]);
}

/// Writes one line under a minted badge (at least abi::MINT_MIN).
pub fn log_minted(badge: u32, text: &[u8]) -> Result<(), Error> {
    result(syscall(abi::sys::LOG_MINTED, [badge as usize, text.as_ptr() as usize, text.len(), 0, 0]).0).map(|_| ())
}

/// Ends the program.
pub fn exit(status: u32) -> ! {
    syscall(abi::sys::EXIT, [status as usize, 0, 0, 0, 0]);
    unreachable!("exit returned")
}

/// The time in ticks.
pub fn time() -> u64 {
    let (lo, hi) = syscall(abi::sys::TIME, [0; 5]);
    if cfg!(target_pointer_width = "32") {
        ((hi as u64) << 32) | lo as u64
    } else {
        lo as u64
    }
}

/// Ticks per second.
pub fn timebase() -> u64 {
    syscall(abi::sys::TIMEBASE, [0; 5]).0 as u64
}

/// A draw from the kernel's generator.
pub fn random() -> u64 {
    let (lo, hi) = syscall(abi::sys::RANDOM, [0; 5]);
    if cfg!(target_pointer_width = "32") {
        ((hi as u64) << 32) | lo as u64
    } else {
        lo as u64
    }
}

/// Gives up the rest of the time slice.
pub fn yield_now() {
    syscall(abi::sys::YIELD, [0; 5]);
}

/// Sleeps at least `ticks`.
pub fn sleep(ticks: u64) {
    syscall(abi::sys::SLEEP, [ticks as usize, (ticks >> 32) as usize, 0, 0, 0]);
}

/// Starts the program of bundle entry `name` with `badge` and `pages` of quota.
pub fn spawn(name: &[u8], badge: u32, pages: usize) -> Result<u32, Error> {
    result(syscall(abi::sys::SPAWN, [name.as_ptr() as usize, name.len(), badge as usize, pages, 0]).0)
        .map(|pid| pid as u32)
}

/// Powers the machine off (first program only).
pub fn power_off(status: u16) -> ! {
    syscall(abi::sys::POWER_OFF, [status as usize, 0, 0, 0, 0]);
    exit(1)
}

/// Cold-reboots the machine through SBI SRST (first program only); QEMU under
/// -no-reboot exits. Returns the error if the kernel refuses.
pub fn reset() -> Error {
    let raw = syscall(abi::sys::RESET, [0; 5]).0;
    Error::from_raw(raw).unwrap_or(Error::Invalid)
}

/// Reads the bytes waiting on the console (first program only); Ok(0) when none wait.
pub fn console_read(buf: &mut [u8]) -> Result<usize, Error> {
    result(syscall(abi::sys::CONSOLE_READ, [buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0]).0)
}

/// Reads one line from the console (first program only): bytes until CR or LF (not
/// kept), at most `buf.len()` (and at most 64) bytes, no echo, sleeping about 1 ms
/// between polls. Returns the line's length.
pub fn read_line(buf: &mut [u8]) -> Result<usize, Error> {
    let max = buf.len().min(64);
    let pause = (timebase() / 1000).max(1);
    let mut len = 0;
    while len < max {
        let mut byte = [0u8; 1];
        if console_read(&mut byte)? == 0 {
            sleep(pause);
            continue;
        }
        match byte[0] {
            b'\r' | b'\n' => break,
            b => {
                buf[len] = b;
                len += 1;
            }
        }
    }
    Ok(len)
}

/// Waits for the next message on the log endpoint (first program only).
pub fn recv(message: &mut Message) -> Result<(), Error> {
    result(syscall(abi::sys::RECV, [message as *mut Message as usize, 0, 0, 0, 0]).0).map(|_| ())
}

/// Tells the log endpoint this program's run is the verdict.
pub fn done() -> Result<(), Error> {
    result(syscall(abi::sys::DONE, [0; 5]).0).map(|_| ())
}

/// The length and kind of bundle entry `name`.
pub fn entry_info(name: &[u8]) -> Result<(usize, u32), Error> {
    let (len, kind) = syscall(abi::sys::ENTRY_INFO, [name.as_ptr() as usize, name.len(), 0, 0, 0]);
    result(len).map(|len| (len, kind as u32))
}

/// Reads data entry `name` from `offset` into `buf`; returns the bytes read.
pub fn entry_read(name: &[u8], offset: usize, buf: &mut [u8]) -> Result<usize, Error> {
    result(
        syscall(
            abi::sys::ENTRY_READ,
            [name.as_ptr() as usize, name.len(), offset, buf.as_mut_ptr() as usize, buf.len()],
        )
        .0,
    )
}

/// The disk: (sectors of 512 bytes, block size); no-entry when the boot found none.
pub fn disk_info() -> Result<(usize, usize), Error> {
    let (sectors, block) = syscall(abi::sys::DISK_INFO, [0; 5]);
    result(sectors).map(|sectors| (sectors, block))
}

/// Reads `buf.len()` bytes (whole blocks, at most abi::DISK_TRANSFER_MAX) from `sector`.
pub fn disk_read(sector: usize, buf: &mut [u8]) -> Result<usize, Error> {
    result(syscall(abi::sys::DISK_READ, [sector, buf.as_mut_ptr() as usize, buf.len(), 0, 0]).0)
}

/// Writes `buf` (whole blocks, at most abi::DISK_TRANSFER_MAX) from `sector`.
pub fn disk_write(sector: usize, buf: &[u8]) -> Result<usize, Error> {
    result(syscall(abi::sys::DISK_WRITE, [sector, buf.as_ptr() as usize, buf.len(), 0, 0]).0)
}

/// Asks the disk to put its cache on the medium.
pub fn disk_flush() -> Result<(), Error> {
    result(syscall(abi::sys::DISK_FLUSH, [0; 5]).0).map(|_| ())
}

/// The network card's MAC; no-entry when the boot found none.
pub fn net_info() -> Result<[u8; 6], Error> {
    let (low, high) = syscall(abi::sys::NET_INFO, [0; 5]);
    let low = result(low)?;
    let byte = |word: usize, n: usize| (word >> (8 * n)) as u8;
    Ok([byte(low, 0), byte(low, 1), byte(low, 2), byte(high, 0), byte(high, 1), byte(high, 2)])
}

/// Sends one Ethernet frame (abi::NET_FRAME_MIN..=abi::NET_FRAME_MAX bytes, no FCS).
pub fn net_send(frame: &[u8]) -> Result<usize, Error> {
    result(syscall(abi::sys::NET_SEND, [frame.as_ptr() as usize, frame.len(), 0, 0, 0]).0)
}

/// The next received frame copied into `buf` (at least abi::NET_FRAME_MAX bytes): its
/// length, or 0 when none waits. It never waits.
pub fn net_recv(buf: &mut [u8]) -> Result<usize, Error> {
    result(syscall(abi::sys::NET_RECV, [buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0]).0)
}

/// This program's PID and badge.
pub fn getpid() -> (u32, u32) {
    let (pid, badge) = syscall(abi::sys::GETPID, [0; 5]);
    (pid as u32, badge as u32)
}

/// A line being formatted: at most LINE bytes, the rest cut.
pub struct Line {
    buf: [u8; Line::MAX],
    len: usize,
}

impl Line {
    /// The longest line.
    pub const MAX: usize = 240;

    /// An empty line.
    pub const fn new() -> Line {
        Line { buf: [0; Line::MAX], len: 0 }
    }

    /// The bytes so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Appends bytes, cutting what does not fit.
    pub fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(Line::MAX - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
}

impl Default for Line {
    fn default() -> Line {
        Line::new()
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// Formats one line and writes it with `log`.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let mut line = $crate::Line::new();
        let _ = write!(line, $($arg)*);
        $crate::log(line.as_bytes());
    }};
}
