//! The runtime shared by the guest programs: `_start` sets up a stack, clears .bss and
//! calls the program's `program_main` (defined by each bin with `#[no_mangle]`); a
//! panic, or a return from `program_main`, ends in a `wfi` loop.

#![no_std]

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
2:  call    program_main
3:  wfi
    j       3b
"#
);

/// Spins forever, sleeping in `wfi`.
pub fn halt() -> ! {
    loop {
        // SAFETY: wfi only waits for an interrupt; it has no other effect.
        unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
    }
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    halt()
}
