//! hostfuzz's `programs` target under libFuzzer: the log server's listing parser (guest/listing) driven by the same
//! generator and checks, run by `hostfuzz::exec::in_process` exactly as `cargo hostfuzz
//! --in-process` runs it. A finding is printed and aborts, which libFuzzer reports.
#![no_main]

use hostfuzz::exec::in_process;
use hostfuzz::targets::programs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(finding) = in_process(programs::run, data).finding() {
        eprintln!("hostfuzz programs: {finding}");
        std::process::abort();
    }
});
