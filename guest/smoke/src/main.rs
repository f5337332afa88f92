//! The smoke guest: a user program the reference kernel runs as the first program (a
//! kind-2 bundle entry, in init's place). Its `rt::log` lines go straight to the UART,
//! unprefixed, each ended with "\r\n" by the kernel; all but the `program-fail`
//! fixture line start with "smoke: ":
//!
//! ```text
//! smoke: hello from rv64                 (or rv32, from target_arch)
//! smoke: rng <16 hex>                    (the first rt::random() draw: the kernel's
//!                                         generator is seeded from /chosen/rng-seed)
//! smoke: ticks <n>                       (rt::time())
//! smoke: done
//! ```
//!
//! then it powers off with status 0. The cargo features (see Cargo.toml) are fixtures
//! that misbehave on purpose.

#![no_std]
#![no_main]

rt::program!("smoke", main);

#[cfg(target_arch = "riscv64")]
const ARCH: &str = "rv64";
#[cfg(target_arch = "riscv32")]
const ARCH: &str = "rv32";

fn main(_pid: u32, _badge: u32) {
    rt::log!("smoke: hello from {ARCH}");
    if cfg!(feature = "forbidden-then-hang") {
        rt::log(b"smoke: TEST FAILED early");
        hang();
    }
    rt::log!("smoke: rng {:016x}", rt::random());
    rt::log!("smoke: ticks {}", rt::time());

    if cfg!(feature = "program-fail") {
        rt::log(b"[smoke] FAIL: the fixture failed on purpose");
        hang();
    }
    if cfg!(feature = "split-word") {
        rt::log(b"smoke: split PA\x1b[1mNIC word");
    }
    if cfg!(feature = "echo") {
        echo_line();
    }
    if cfg!(feature = "prompt") {
        prompt_line();
    }
    if cfg!(feature = "panic") {
        panic!("on purpose");
    }

    rt::log(b"smoke: done");

    if cfg!(feature = "late-forbidden") {
        rt::log(b"smoke: TEST FAILED after done");
    }
    if cfg!(feature = "no-poweroff") {
        hang();
    }
    if cfg!(feature = "reset") {
        // QEMU runs with -no-reboot, so the reboot ends it (exit status 0).
        let e = rt::reset();
        rt::log!("smoke: reset failed: {e:?}");
        hang();
    }
    rt::power_off(if cfg!(feature = "status-3") { 3 } else { 0 });
}

/// Prints `smoke: type a line`, reads one line from the console (until CR or LF, at
/// most 64 bytes, no echo) and prints it back as `smoke: got <line>`.
///
/// Send the line after the prompt: OpenSBI's UART init reads RBR once, so a byte that
/// arrives before the firmware has set the UART up is lost; later bytes wait in the
/// UART FIFO until console_read takes them.
fn echo_line() {
    rt::log(b"smoke: type a line");
    let mut line = [0u8; 64];
    let len = match rt::read_line(&mut line) {
        Ok(len) => len,
        Err(e) => {
            rt::log!("smoke: console_read failed: {e:?}");
            0
        }
    };
    let mut out = rt::Line::new();
    out.push(b"smoke: got ");
    out.push(&line[..len]);
    rt::log(out.as_bytes());
}

/// Prints the prompt `$ ` in two writes, `$` then ` ` a fifth of a second later (a
/// terminal shows `$` alone meanwhile), reads one line and prints it back as
/// `smoke: got <line>` on a line of its own, then `smoke: line read at <ticks>`. Bytes that were already waiting when the
/// space was due (typed before the prompt ended) are kept as the line's start, and
/// then reported: `smoke: typed before the prompt ended`.
fn prompt_line() {
    rt::write(b"$");
    rt::sleep((rt::timebase() / 5).max(1));
    let mut line = [0u8; 64];
    let early = rt::console_read(&mut line).unwrap_or(0);
    rt::write(b" ");
    let ended = line[..early].iter().position(|&b| b == b'\r' || b == b'\n');
    let len = match ended {
        Some(end) => end,
        None => early + rt::read_line(&mut line[early..]).unwrap_or(0),
    };
    let mut out = rt::Line::new();
    out.push(b"\r\nsmoke: got ");
    out.push(&line[..len]);
    rt::log(out.as_bytes());
    rt::log!("smoke: line read at {}", rt::time());
    if early > 0 {
        rt::log(b"smoke: typed before the prompt ended");
    }
}

/// Sleeps forever, a second at a time.
fn hang() -> ! {
    let second = rt::timebase().max(1);
    loop {
        rt::sleep(second);
    }
}
