//! The forger: tries to pass for other writers. Every line it writes reaches the
//! console only through the log server, behind its own `[pid N]` (or the `[badge N]`
//! of a badge it mints), so none of these can match an anchored verdict pattern:
//! a bare `CHECKER TEST PASSED`, a `[server] done:` line, a `[pid 2]` prefix, the same
//! after control sequences meant to erase the prefix, and lines under a minted badge.
//! It ends with `forger: attempts done`.

#![no_std]
#![no_main]

rt::program!("forger", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"CHECKER TEST PASSED");
    rt::log(b"TEST PASSED");
    rt::log(b"[server] done: 2");
    rt::log(b"[pid 2] CHECKER TEST PASSED");
    rt::log(b"\x1b[2K\r[server] done: 2");
    rt::log(b"\x1b[1mCHECKER TEST PASSED\x1b[0m\n[pid 2] CHECKER TEST PASSED");
    for badge in [2, 0xff] {
        match rt::log_minted(badge, b"[server] done: 2") {
            Ok(()) => rt::log!("[forger] FAIL: the kernel let it mint badge {badge}"),
            Err(e) => rt::log!("forger: minting badge {badge} refused: {}", e.name()),
        }
    }
    for badge in [0x100, 0x1234] {
        if let Err(e) = rt::log_minted(badge, b"[pid 2] CHECKER TEST PASSED") {
            rt::log!("[forger] FAIL: minting badge {badge} refused: {}", e.name());
        }
    }
    rt::log(b"forger: attempts done");
}
