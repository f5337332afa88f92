//! Calls done() itself: the log server's `[server] done:` line names this program's
//! place, not the reporter's, so a case with another reporter fails.

#![no_std]
#![no_main]

rt::program!("forge-done", main);

fn main(_pid: u32, _badge: u32) {
    rt::log(b"forge-done: calling done");
    let _ = rt::done();
}
