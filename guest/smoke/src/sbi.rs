//! The few SBI calls the smoke guest makes, by hand: `ecall` with the extension id in
//! a7, the function id in a6 and the arguments in a0..a2; the error comes back in a0
//! and the value in a1 (SBI v2.0, chapter 3).

/// Hart State Management extension ("HSM").
const EID_HSM: usize = 0x0048_534D;
const FID_HSM_HART_GET_STATUS: usize = 2;
/// System Reset extension ("SRST").
const EID_SRST: usize = 0x5352_5354;
const FID_SRST_SYSTEM_RESET: usize = 0;

/// SRST reset types.
pub const RESET_SHUTDOWN: usize = 0;
pub const RESET_COLD_REBOOT: usize = 1;
/// SRST reset reason "no reason".
pub const REASON_NONE: usize = 0;

/// An SBI error code (negative per the spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error(pub isize);

fn ecall(eid: usize, fid: usize, a0: usize, a1: usize, a2: usize) -> Result<usize, Error> {
    let error: usize;
    let value: usize;
    // SAFETY: an SBI call traps to the M-mode firmware, which follows the SBI calling
    // convention: it only writes a0/a1 and preserves every other register and our
    // memory. The calls made here (HSM status, SRST) do not touch S-mode memory.
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
    if error == 0 {
        Ok(value)
    } else {
        Err(Error(error as isize))
    }
}

/// HSM `sbi_hart_get_status`: the state of hart `hartid` (0 = started, 1 = stopped, ...),
/// or an error (SBI_ERR_INVALID_PARAM) when no such hart exists.
pub fn hart_get_status(hartid: usize) -> Result<usize, Error> {
    ecall(EID_HSM, FID_HSM_HART_GET_STATUS, hartid, 0, 0)
}

/// SRST `sbi_system_reset`. Returns only when the firmware refuses the request.
pub fn system_reset(reset_type: usize, reason: usize) -> Error {
    match ecall(EID_SRST, FID_SRST_SYSTEM_RESET, reset_type, reason, 0) {
        Ok(_) => Error(0),
        Err(e) => e,
    }
}
