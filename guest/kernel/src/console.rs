//! The kernel's console (the NS16550A UART at 0x1000_0000, set up by the firmware),
//! the clock and power-off.

use core::fmt;

const UART: usize = 0x1000_0000;
const LSR: usize = 5;
const LSR_THR_EMPTY: u8 = 1 << 5;
const LSR_DATA_READY: u8 = 1;
/// QEMU virt's `sifive,test` finisher.
const FINISHER: usize = 0x10_0000;
const FINISHER_FAIL: u32 = 0x3333;

/// Writes bytes to the UART, polling for room.
pub fn put_bytes(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: UART + LSR and UART are registers of the NS16550A QEMU virt maps at
        // 0x1000_0000; the kernel runs on physical addresses (satp = 0), and MMIO needs
        // volatile accesses.
        unsafe {
            while core::ptr::read_volatile((UART + LSR) as *const u8) & LSR_THR_EMPTY == 0 {
                core::hint::spin_loop();
            }
            core::ptr::write_volatile(UART as *mut u8, b);
        }
    }
}

/// A byte from the UART's receiver, if one is waiting (never waits).
pub fn get_byte() -> Option<u8> {
    // SAFETY: UART + LSR and UART (RBR) are registers of the NS16550A QEMU virt maps at
    // 0x1000_0000; the kernel runs on physical addresses (satp = 0); reading RBR only
    // when LSR says data is ready takes exactly that byte.
    unsafe {
        if core::ptr::read_volatile((UART + LSR) as *const u8) & LSR_DATA_READY == 0 {
            return None;
        }
        Some(core::ptr::read_volatile(UART as *const u8))
    }
}

/// `core::fmt` sink for the UART.
pub struct Uart;

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        put_bytes(s.as_bytes());
        Ok(())
    }
}

/// Prints one line: "kernel: " + the text + "\r\n".
#[macro_export]
macro_rules! kprintln {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = write!($crate::console::Uart, "kernel: ");
        let _ = write!($crate::console::Uart, $($arg)*);
        $crate::console::put_bytes(b"\r\n");
    }};
}

/// The time CSR.
#[cfg(target_arch = "riscv64")]
pub fn now() -> u64 {
    let time: u64;
    // SAFETY: reading the time CSR has no side effects.
    unsafe { core::arch::asm!("rdtime {}", out(reg) time, options(nomem, nostack)) };
    time
}

/// The time CSR, read as timeh/time/timeh until the high half holds still.
#[cfg(target_arch = "riscv32")]
pub fn now() -> u64 {
    loop {
        let (hi, lo, hi2): (u32, u32, u32);
        // SAFETY: reading the time and timeh CSRs has no side effects.
        unsafe {
            core::arch::asm!("rdtimeh {0}", "rdtime {1}", "rdtimeh {2}", out(reg) hi, out(reg) lo, out(reg) hi2,
                options(nomem, nostack))
        };
        if hi == hi2 {
            return (u64::from(hi) << 32) | u64::from(lo);
        }
    }
}

/// Powers off with `status`: 0 through SBI SRST, anything else through the finisher
/// (QEMU's OpenSBI turns every SRST shutdown into exit status 0).
pub fn power_off(status: u16) -> ! {
    if status == 0 {
        crate::sbi::shutdown();
    }
    let value = (u32::from(status) << 16) | FINISHER_FAIL;
    // SAFETY: 0x10_0000 is QEMU virt's `sifive,test` device; a volatile 32-bit store
    // to it makes QEMU exit with `status`; OpenSBI leaves it open to S-mode.
    unsafe { core::ptr::write_volatile(FINISHER as *mut u32, value) };
    halt()
}

/// Waits forever.
pub fn halt() -> ! {
    loop {
        // SAFETY: wfi only waits for an interrupt.
        unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
    }
}
