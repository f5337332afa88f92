//! The checker, the reporter of most cases: checks that time moves, that sleep waits
//! and that two draws differ, prints `CHECKER TEST PASSED` (or `[checker] FAIL: ...`)
//! and calls done(), whose `[server] done: <place>` line is the verdict.

#![no_std]
#![no_main]

rt::program!("checker", main);

fn main(_pid: u32, badge: u32) {
    rt::log!("checker: place {badge}");
    let tick = rt::timebase() / 1000;
    let before = rt::time();
    rt::sleep(tick);
    let after = rt::time();
    if after < before + tick {
        rt::log!("[checker] FAIL: slept {} ticks, asked for {tick}", after - before);
        rt::exit(1);
    }
    if rt::random() == rt::random() {
        rt::log!("[checker] FAIL: two draws are equal");
        rt::exit(1);
    }
    rt::log!("CHECKER TEST PASSED");
    if let Err(e) = rt::done() {
        rt::log!("[checker] FAIL: done refused: {}", e.name());
    }
}
