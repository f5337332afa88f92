//! The NS16550A UART of QEMU `virt` at 0x1000_0000, used directly (not the SBI
//! console). OpenSBI has already set it up (it prints its banner through it), so the
//! guest only polls the line status register.

use core::fmt;

const BASE: usize = 0x1000_0000;
/// Receive buffer (read) / transmit holding register (write).
const RBR_THR: usize = 0;
/// Line status register.
const LSR: usize = 5;
/// LSR: a received byte is waiting in RBR.
#[cfg(feature = "echo")]
const LSR_DATA_READY: u8 = 1 << 0;
/// LSR: the transmit holding register is empty.
const LSR_THR_EMPTY: u8 = 1 << 5;

fn read_reg(offset: usize) -> u8 {
    // SAFETY: BASE + offset (offset < 8) is a register of the NS16550A that QEMU `virt`
    // maps at 0x1000_0000; S-mode may access it (OpenSBI does not PMP-protect it), and
    // MMIO needs a volatile access. Paging is off, so the address is physical.
    unsafe { core::ptr::read_volatile((BASE + offset) as *const u8) }
}

fn write_reg(offset: usize, value: u8) {
    // SAFETY: as in `read_reg`: a UART register, written with a volatile store.
    unsafe { core::ptr::write_volatile((BASE + offset) as *mut u8, value) }
}

pub fn put_byte(byte: u8) {
    while read_reg(LSR) & LSR_THR_EMPTY == 0 {
        core::hint::spin_loop();
    }
    write_reg(RBR_THR, byte);
}

pub fn put_bytes(bytes: &[u8]) {
    for &b in bytes {
        put_byte(b);
    }
}

/// Waits for one received byte (polls the LSR data-ready bit).
#[cfg(feature = "echo")]
pub fn get_byte() -> u8 {
    while read_reg(LSR) & LSR_DATA_READY == 0 {
        core::hint::spin_loop();
    }
    read_reg(RBR_THR)
}

/// `core::fmt` sink for the UART.
pub struct Uart;

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        put_bytes(s.as_bytes());
        Ok(())
    }
}
