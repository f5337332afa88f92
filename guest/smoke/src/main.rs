//! The smoke guest: a tiny S-mode program for QEMU `virt` that OpenSBI (fw_dynamic)
//! starts on the boot hart at 0x8020_0000 (rv64) or 0x8040_0000 (rv32) with a0 = hart
//! id and a1 = device-tree address. The other harts stay stopped in OpenSBI (HSM).
//!
//! It writes the NS16550A UART directly. Every line it prints ends with "\r\n" (like
//! OpenSBI's own output, so it reads right on a raw terminal), and all but the
//! `program-fail` fixture line start with "smoke: ":
//!
//! ```text
//! smoke: hello from rv64                 (or rv32, from target_arch)
//! smoke: harts N                         (SBI HSM hart_get_status over hart ids 0..64)
//! smoke: rng-seed <hex>|none             (/chosen/rng-seed, first 16 bytes)
//! smoke: debug-assertions on             (only in the `checked` profile)
//! smoke: ticks <n>                       (the time CSR)
//! smoke: program <name> <size> bytes fnv1a64 <hex>   (per regular file of the initrd)
//! smoke: programs <count>|none           (a malformed initrd instead prints only
//!                                         smoke: initrd malformed at offset N,
//!                                         N = offset of the first bad entry header)
//! smoke: done
//! ```
//!
//! then it powers off with status 0 through SBI SRST. The cargo features (see
//! Cargo.toml) are fixtures that misbehave on purpose.
//!
//! About exit statuses: QEMU's OpenSBI turns an SRST shutdown (whatever the reason)
//! into a write of FINISHER_PASS (0x5555) to the `sifive,test` device at 0x10_0000,
//! so QEMU then always exits 0. To exit with a chosen non-zero status the guest writes
//! the finisher itself: `(status << 16) | 0x3333` (FINISHER_FAIL) makes QEMU exit with
//! `status`; 0x5555 exits 0 and 0x7777 (FINISHER_RESET) resets the machine.

#![no_std]
#![no_main]

mod cpio;
mod sbi;
mod uart;

use core::fmt::Write;

core::arch::global_asm!(
    r#"
    .section .text.entry, "ax"
    .globl _start
_start:
    /* a0 = hart id, a1 = device tree: left untouched for smoke_main. */
    la      sp, __stack_top
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sb      zero, 0(t0)
    addi    t0, t0, 1
    j       1b
2:  call    smoke_main
3:  wfi
    j       3b
"#
);

#[cfg(target_arch = "riscv64")]
const ARCH: &str = "rv64";
#[cfg(target_arch = "riscv32")]
const ARCH: &str = "rv32";

/// Hart ids probed with HSM hart_get_status.
const MAX_HARTS: usize = 64;
/// Largest initrd the guest accepts.
const MAX_INITRD: u64 = 1 << 30;

/// The `sifive,test` finisher of QEMU `virt`.
const FINISHER: usize = 0x10_0000;
const FINISHER_FAIL: u32 = 0x3333;

/// Prints one line: "smoke: " + the formatted text + "\r\n".
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = write!(uart::Uart, "smoke: ");
        let _ = write!(uart::Uart, $($arg)*);
        uart::put_bytes(b"\r\n");
    }};
}

/// The `/chosen` properties the guest reports.
#[derive(Default)]
struct Chosen<'a> {
    rng_seed: Option<&'a [u8]>,
    initrd_start: Option<u64>,
    initrd_end: Option<u64>,
}

/// Reads the `/chosen` properties out of the device tree at physical address `addr`.
///
/// # Safety
/// `addr` must be the device-tree address the firmware passed in a1: readable memory
/// that stays unchanged while the guest runs.
unsafe fn read_chosen(addr: usize) -> Result<Chosen<'static>, fdt::Error> {
    if addr == 0 || addr % 4 != 0 {
        return Err(fdt::Error { what: "bad address", offset: 0 });
    }
    // SAFETY: the caller promises the header at `addr` is readable; the header is
    // fdt::HEADER_LEN bytes and nothing writes to it.
    let header = unsafe { core::slice::from_raw_parts(addr as *const u8, fdt::HEADER_LEN) };
    let total = fdt::total_size(header)?;
    // SAFETY: the header says the tree is `total` bytes long (at most
    // fdt::MAX_TOTAL_SIZE), all placed by the firmware in RAM; the caller promises it is
    // readable and left alone.
    let tree = fdt::Fdt::new(unsafe { core::slice::from_raw_parts(addr as *const u8, total) })?;
    Ok(Chosen {
        rng_seed: tree.property("/chosen/rng-seed")?,
        initrd_start: tree.property("/chosen/linux,initrd-start")?.and_then(fdt::read_cells),
        initrd_end: tree.property("/chosen/linux,initrd-end")?.and_then(fdt::read_cells),
    })
}

#[no_mangle]
extern "C" fn smoke_main(_hartid: usize, dtb: usize) -> ! {
    say!("hello from {ARCH}");
    if cfg!(feature = "forbidden-then-hang") {
        say!("TEST FAILED early");
        halt();
    }

    say!("harts {}", count_harts());

    // SAFETY: `dtb` is the device-tree address OpenSBI passed in a1; QEMU put the tree
    // in RAM, and nothing writes to it while the guest runs.
    let chosen = match unsafe { read_chosen(dtb) } {
        Ok(chosen) => chosen,
        Err(e) => {
            say!("fdt malformed at offset {} ({})", e.offset, e.what);
            Chosen::default()
        }
    };

    match chosen.rng_seed {
        Some(seed) if !seed.is_empty() => {
            let _ = write!(uart::Uart, "smoke: rng-seed ");
            for b in seed.iter().take(16) {
                let _ = write!(uart::Uart, "{b:02x}");
            }
            uart::put_bytes(b"\r\n");
        }
        _ => say!("rng-seed none"),
    }

    if cfg!(debug_assertions) {
        say!("debug-assertions on");
    }

    say!("ticks {}", read_time());

    report_programs(chosen.initrd_start, chosen.initrd_end);

    if cfg!(feature = "program-fail") {
        uart::put_bytes(b"[smoke] FAIL: the fixture failed on purpose\r\n");
        halt();
    }
    if cfg!(feature = "split-word") {
        say!("split PA\x1b[1mNIC word");
    }
    #[cfg(feature = "echo")]
    echo_line();
    if cfg!(feature = "panic") {
        panic!("on purpose");
    }

    say!("done");

    if cfg!(feature = "late-forbidden") {
        say!("TEST FAILED after done");
    }
    if cfg!(feature = "no-poweroff") {
        halt();
    }
    if cfg!(feature = "reset") {
        // QEMU runs with -no-reboot, so the reboot ends it (exit status 0).
        let e = sbi::system_reset(sbi::RESET_COLD_REBOOT, sbi::REASON_NONE);
        say!("reset failed: sbi error {}", e.0);
        halt();
    }
    if cfg!(feature = "status-3") {
        power_off(3);
    }
    power_off(0);
}

/// Counts the harts: every hart id below MAX_HARTS for which HSM hart_get_status
/// succeeds exists (an id that returns an error does not).
fn count_harts() -> usize {
    (0..MAX_HARTS).filter(|&id| sbi::hart_get_status(id).is_ok()).count()
}

/// The `time` CSR.
#[cfg(target_arch = "riscv64")]
fn read_time() -> u64 {
    let time: u64;
    // SAFETY: reading the time CSR has no side effects; OpenSBI lets S-mode read it
    // (it is implemented by QEMU or emulated by the firmware).
    unsafe { core::arch::asm!("rdtime {}", out(reg) time, options(nomem, nostack)) };
    time
}

/// The `time` CSR: on rv32 read timeh, time, timeh again until the high half holds
/// still, so a carry between the two reads cannot tear the value.
#[cfg(target_arch = "riscv32")]
fn read_time() -> u64 {
    loop {
        let (hi, lo, hi2): (u32, u32, u32);
        // SAFETY: reading the time/timeh CSRs has no side effects; OpenSBI lets S-mode
        // read them.
        unsafe {
            core::arch::asm!(
                "rdtimeh {0}",
                "rdtime {1}",
                "rdtimeh {2}",
                out(reg) hi,
                out(reg) lo,
                out(reg) hi2,
                options(nomem, nostack),
            )
        };
        if hi == hi2 {
            return (u64::from(hi) << 32) | u64::from(lo);
        }
    }
}

/// Lists the regular files of the initrd (a cpio newc archive), if there is one.
fn report_programs(start: Option<u64>, end: Option<u64>) {
    let (Some(start), Some(end)) = (start, end) else {
        say!("programs none");
        return;
    };
    let range = usize::try_from(start).ok().zip(usize::try_from(end).ok());
    let Some((start, end)) = range.filter(|&(s, e)| s <= e && (e - s) as u64 <= MAX_INITRD) else {
        say!("initrd malformed at offset 0");
        return;
    };
    // SAFETY: QEMU loaded the initrd into RAM at [start, end) and said so in
    // /chosen (checked above to be a sane, ordered range); nothing writes to it while
    // the guest runs, and paging is off, so the addresses are the physical ones.
    let archive = unsafe { core::slice::from_raw_parts(start as *const u8, end - start) };
    // Check the whole archive first, so a malformed one prints only the one line.
    if let Err(offset) = cpio::for_each_file(archive, |_, _| {}) {
        say!("initrd malformed at offset {offset}");
        return;
    }
    let listed = cpio::for_each_file(archive, |name, data| {
        let _ = write!(uart::Uart, "smoke: program ");
        uart::put_bytes(name);
        let _ = write!(uart::Uart, " {} bytes fnv1a64 {:016x}\r\n", data.len(), cpio::fnv1a64(data));
    });
    match listed {
        Ok(count) => say!("programs {count}"),
        Err(offset) => say!("initrd malformed at offset {offset}"),
    }
}

/// Reads one line from the UART (until CR or LF, at most 64 bytes, no echo) and
/// prints it back as `smoke: got <line>`.
///
/// Send the line after the prompt: OpenSBI's UART init reads RBR once, so a byte that
/// QEMU delivers before the firmware has set the UART up (e.g. stdin piped in at
/// start) is lost; bytes that arrive later wait in the UART FIFO (QEMU holds back the
/// rest), so anything sent once OpenSBI's banner shows is received whole.
#[cfg(feature = "echo")]
fn echo_line() {
    say!("type a line");
    let mut line = [0u8; 64];
    let mut len = 0;
    while len < line.len() {
        match uart::get_byte() {
            b'\r' | b'\n' => break,
            b => {
                line[len] = b;
                len += 1;
            }
        }
    }
    let _ = write!(uart::Uart, "smoke: got ");
    uart::put_bytes(&line[..len]);
    uart::put_bytes(b"\r\n");
}

/// Powers the machine off with exit status `status`: 0 through SBI SRST (shutdown, no
/// reason), anything else through the finisher (SRST would make QEMU exit 0).
fn power_off(status: u16) -> ! {
    if status == 0 {
        let e = sbi::system_reset(sbi::RESET_SHUTDOWN, sbi::REASON_NONE);
        say!("poweroff failed: sbi error {}", e.0);
    } else {
        finisher_fail(status);
    }
    halt();
}

/// Writes FINISHER_FAIL with `status` in the upper half: QEMU exits with `status`.
fn finisher_fail(status: u16) {
    let value = (u32::from(status) << 16) | FINISHER_FAIL;
    // SAFETY: 0x10_0000 is QEMU virt's `sifive,test` device; a volatile 32-bit store
    // to it asks QEMU to exit; OpenSBI leaves it accessible to S-mode.
    unsafe { core::ptr::write_volatile(FINISHER as *mut u32, value) };
}

/// Spins forever, sleeping in `wfi` between (spurious) wake-ups.
fn halt() -> ! {
    loop {
        // SAFETY: wfi only waits for an interrupt; it has no other effect.
        unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let _ = write!(uart::Uart, "smoke: PANIC {}", info.message());
    if let Some(location) = info.location() {
        let _ = write!(uart::Uart, " at {location}");
    }
    uart::put_bytes(b"\r\n");
    finisher_fail(1);
    halt();
}
