//! The SBI calls the kernel makes: TIME set_timer, HSM hart_start, SRST shutdown and
//! cold reboot.

const EID_TIME: usize = 0x5449_4D45;
const EID_HSM: usize = 0x0048_534D;
const EID_SRST: usize = 0x5352_5354;

/// Makes one SBI call; returns (error, value).
fn ecall(eid: usize, fid: usize, a0: usize, a1: usize, a2: usize) -> (isize, usize) {
    let error: usize;
    let value: usize;
    // SAFETY: an SBI call traps to the M-mode firmware, which follows the SBI calling
    // convention: it writes only a0 and a1 and touches no S-mode memory for the calls
    // made here (timer, hart start, reset).
    unsafe {
        core::arch::asm!(
            "ecall",
            inlateout("a0") a0 => error,
            inlateout("a1") a1 => value,
            in("a2") a2,
            in("a6") fid,
            in("a7") eid,
            options(nostack),
        );
    }
    (error as isize, value)
}

/// Arms this hart's timer for `deadline` (in ticks), clearing a pending one.
pub fn set_timer(deadline: u64) {
    if cfg!(target_pointer_width = "64") {
        ecall(EID_TIME, 0, deadline as usize, 0, 0);
    } else {
        ecall(EID_TIME, 0, deadline as usize, (deadline >> 32) as usize, 0);
    }
}

/// Starts hart `hartid` at physical address `start` with a1 = `opaque`.
pub fn hart_start(hartid: usize, start: usize, opaque: usize) -> isize {
    ecall(EID_HSM, 0, hartid, start, opaque).0
}

/// Shuts the machine down (QEMU exits 0). Returns only if the firmware refuses.
pub fn shutdown() {
    ecall(EID_SRST, 0, 0, 0, 0);
}

/// Cold-reboots the machine (SRST type 1; QEMU under -no-reboot exits 0). Returns only
/// if the firmware refuses.
pub fn cold_reboot() {
    ecall(EID_SRST, 0, 1, 0, 0);
}
