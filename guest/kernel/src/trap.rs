//! Entering and leaving user mode. Each hart has a `Hart` block (its address in
//! sscratch while a process runs): the user registers are saved there on a trap and
//! loaded from there on the way back; the block and this code lie in the kernel's
//! window, mapped in every address space, so the satp switch in between is safe.

use core::cell::UnsafeCell;

/// Harts the kernel runs on (hart ids 0..MAX_HARTS); link.ld has a stack for each.
pub const MAX_HARTS: usize = 8;
/// Registers in a frame: pc in slot 0, then x1..x31 in slots 1..31.
pub const FRAME_WORDS: usize = 32;
/// Nothing runs on the hart.
pub const NONE: usize = usize::MAX;

/// One hart's trap block. The assembly reaches `frame` at offset 0 and `kstack` at
/// FRAME_WORDS words.
#[repr(C)]
pub struct Hart {
    /// The running process's registers while it is in user mode or trapping.
    pub frame: [usize; FRAME_WORDS],
    /// Top of this hart's kernel stack.
    pub kstack: usize,
    /// This hart's id.
    pub hartid: usize,
    /// Index of the process running here, or NONE.
    pub current: usize,
}

/// Every hart's block.
pub struct Harts(UnsafeCell<[Hart; MAX_HARTS]>);

// SAFETY: hart i touches only block i (through `mine`, called with its own id), so no
// block is ever reached from two harts.
unsafe impl Sync for Harts {}

const IDLE: Hart = Hart { frame: [0; FRAME_WORDS], kstack: 0, hartid: 0, current: NONE };
/// The blocks.
pub static HARTS: Harts = Harts(UnsafeCell::new([IDLE; MAX_HARTS]));

impl Harts {
    /// The block of hart `hartid`.
    ///
    /// # Safety
    /// Only hart `hartid` may call this, and it must not hold two of the references at
    /// once.
    // A mutable block from a shared `HARTS` is the point: each hart's block is its own,
    // which the contract above (not the borrow checker) guarantees.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn mine(&self, hartid: usize) -> &mut Hart {
        // SAFETY: the caller is hart `hartid` (< MAX_HARTS, checked by the entry code),
        // the only one to use this block, and holds no other reference to it.
        unsafe { &mut (*self.0.get())[hartid] }
    }
}

core::arch::global_asm!(
    r#"
    .if {xlen} == 8
    .macro STX reg, slot
        sd \reg, (\slot * 8)(a0)
    .endm
    .macro LDX reg, slot
        ld \reg, (\slot * 8)(a0)
    .endm
    .else
    .macro STX reg, slot
        sw \reg, (\slot * 4)(a0)
    .endm
    .macro LDX reg, slot
        lw \reg, (\slot * 4)(a0)
    .endm
    .endif

    .section .text
    .balign 4
    .globl trap_entry
trap_entry:
    csrrw a0, sscratch, a0
    STX x1, 1
    STX x2, 2
    STX x3, 3
    STX x4, 4
    STX x5, 5
    STX x6, 6
    STX x7, 7
    STX x8, 8
    STX x9, 9
    STX x11, 11
    STX x12, 12
    STX x13, 13
    STX x14, 14
    STX x15, 15
    STX x16, 16
    STX x17, 17
    STX x18, 18
    STX x19, 19
    STX x20, 20
    STX x21, 21
    STX x22, 22
    STX x23, 23
    STX x24, 24
    STX x25, 25
    STX x26, 26
    STX x27, 27
    STX x28, 28
    STX x29, 29
    STX x30, 30
    STX x31, 31
    csrr t0, sscratch
    STX t0, 10
    csrw sscratch, a0
    csrr t0, sepc
    STX t0, 0
    csrw satp, zero
    sfence.vma
    LDX sp, 32
    li s0, 0
    call trap_from_user
1:  j 1b

    .globl user_return
user_return:
    csrw satp, a1
    sfence.vma
    LDX t0, 0
    csrw sepc, t0
    LDX x1, 1
    LDX x2, 2
    LDX x3, 3
    LDX x4, 4
    LDX x5, 5
    LDX x6, 6
    LDX x7, 7
    LDX x8, 8
    LDX x9, 9
    LDX x11, 11
    LDX x12, 12
    LDX x13, 13
    LDX x14, 14
    LDX x15, 15
    LDX x16, 16
    LDX x17, 17
    LDX x18, 18
    LDX x19, 19
    LDX x20, 20
    LDX x21, 21
    LDX x22, 22
    LDX x23, 23
    LDX x24, 24
    LDX x25, 25
    LDX x26, 26
    LDX x27, 27
    LDX x28, 28
    LDX x29, 29
    LDX x30, 30
    LDX x31, 31
    LDX x10, 10
    sret
"#,
    xlen = const core::mem::size_of::<usize>(),
);

extern "C" {
    fn trap_entry();
    fn user_return(hart: *mut Hart, satp: usize) -> !;
}

/// The trap being handled: (scause, stval, sstatus).
pub fn cause() -> (usize, usize, usize) {
    let (scause, stval, sstatus): (usize, usize, usize);
    // SAFETY: reading trap CSRs has no side effects.
    unsafe {
        core::arch::asm!("csrr {0}, scause", "csrr {1}, stval", "csrr {2}, sstatus",
            out(reg) scause, out(reg) stval, out(reg) sstatus, options(nomem, nostack));
    }
    (scause, stval, sstatus)
}

/// Waits for the next interrupt (the timer the scheduler armed).
pub fn wait_for_interrupt() {
    // SAFETY: wfi waits for the timer (sie.STIE is on); interrupts stay off in sstatus,
    // so no trap is taken in the kernel.
    unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
}

/// The address stvec takes.
pub fn vector() -> usize {
    trap_entry as *const () as usize
}

/// Runs the hart's frame in user mode under `satp`.
///
/// # Safety
/// `hart` must be this hart's block, its frame a user context whose pc and sp are the
/// process's own, and `satp` that process's table; the kernel lock must be free.
pub unsafe fn enter_user(hart: &mut Hart, satp: usize) -> ! {
    let hart: *mut Hart = hart;
    // SAFETY: sstatus.SPP = 0 (return to U) and SPIE = 1 (interrupts on there); sscratch
    // holds the block for the next trap; then user_return loads the frame and srets.
    // The caller vouches for the frame and the table.
    unsafe {
        core::arch::asm!("csrc sstatus, {spp}", "csrs sstatus, {spie}", "csrw sscratch, {h}",
            spp = in(reg) 1usize << 8, spie = in(reg) 1usize << 5, h = in(reg) hart, options(nostack));
        user_return(hart, satp)
    }
}
