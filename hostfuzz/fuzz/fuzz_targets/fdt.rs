//! hostfuzz's `fdt` target under libFuzzer: the device-tree reader (guest/fdt) driven by the same
//! generator and checks, run by `hostfuzz::exec::in_process` exactly as `cargo hostfuzz
//! --in-process` runs it. A finding is printed and aborts, which libFuzzer reports.
#![no_main]

use hostfuzz::exec::in_process;
use hostfuzz::targets::fdt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(finding) = in_process(fdt::run, data).finding() {
        eprintln!("hostfuzz fdt: {finding}");
        std::process::abort();
    }
});
