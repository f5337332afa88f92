//! The rebooter: in init's place, boots the machine three times in one QEMU run. It
//! counts its boots on the disk's first sector (the one thing a reset keeps: a tag and
//! the count), says which boot this is, and resets the machine through the kernel
//! (SBI SRST cold reboot) until the third boot, which powers off:
//!
//!     rebooter: boot <n> of 3
//!     rebooter: rebooting
//!
//! or `[rebooter] FAIL: ...` naming what the kernel refused. The bench judges the
//! resets from outside (QMP's RESET events, `reboots` in the case, docs/judging.md).

#![no_std]
#![no_main]

rt::program!("rebooter", main);

const BOOTS: u8 = 3;
const TAG: &[u8; 8] = b"TBREBOOT";
const SECTOR: usize = 512;

fn fail(what: &str, e: abi::Error) -> ! {
    rt::log!("[rebooter] FAIL: {what}: {}", e.name());
    rt::exit(1)
}

fn main(_pid: u32, _badge: u32) {
    let mut sector = [0u8; SECTOR];
    rt::disk_read(0, &mut sector).unwrap_or_else(|e| fail("reading sector 0", e));
    let before = if &sector[..8] == TAG { sector[8] } else { 0 };
    let boot = before.saturating_add(1);
    sector[..8].copy_from_slice(TAG);
    sector[8] = boot;
    rt::disk_write(0, &sector).unwrap_or_else(|e| fail("writing sector 0", e));
    rt::disk_flush().unwrap_or_else(|e| fail("flushing", e));
    rt::log!("rebooter: boot {boot} of {BOOTS}");
    if boot < BOOTS {
        rt::log(b"rebooter: rebooting");
        fail("reset", rt::reset());
    }
    rt::power_off(0)
}
