//! hostfuzz's `bundle-format` target under libFuzzer: the bundle verifier (guest/bundle)
//! with the fuzzing stand-in signature in place of Ed25519, driven by the same generator
//! and checks, run by `hostfuzz::exec::in_process` exactly as `cargo hostfuzz --in-process`
//! runs it. A finding is printed and aborts, which libFuzzer reports.
#![no_main]

use hostfuzz::exec::in_process;
use hostfuzz::targets::bundle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(finding) = in_process(bundle::run_format, data).finding() {
        eprintln!("hostfuzz bundle-format: {finding}");
        std::process::abort();
    }
});
