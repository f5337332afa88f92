//! hostfuzz's `timers` target under libFuzzer: the machine running guest/ksync's lock and timer queue, driven by the same
//! generator and checks, run by `hostfuzz::exec::in_process` exactly as `cargo hostfuzz
//! --in-process` runs it. A finding is printed and aborts, which libFuzzer reports.
#![no_main]

use hostfuzz::exec::in_process;
use hostfuzz::targets::timers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(finding) = in_process(timers::run, data).finding() {
        eprintln!("hostfuzz timers: {finding}");
        std::process::abort();
    }
});
