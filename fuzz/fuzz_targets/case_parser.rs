//! The case parser on arbitrary text: it must refuse or accept, never panic, and what
//! it accepts must hold the validated form's promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use testbench_case::{parse, Guest};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse("tests/fuzzed.toml", text) {
        Err(error) => {
            // Every refusal names the file.
            assert!(error.to_string().starts_with("tests/fuzzed.toml: "));
        }
        Ok(case) => {
            let Some(boot) = case.as_boot() else { return };
            assert!(!boot.arch.is_empty());
            for arch in &boot.arch {
                let counts = boot.smp_for(*arch);
                assert!(!counts.is_empty() && counts.iter().all(|&n| (1..=testbench_case::SMP_MAX).contains(&n)));
            }
            assert!(!boot.expect.is_empty() || boot.poweroff);
            assert!((0..=255).contains(&boot.poweroff_status));
            assert!(boot.timeout.as_secs_f64() > 0.0);
            if let Guest::Built { programs, .. } = &boot.guest {
                for program in programs {
                    assert!(!program.program.entry_name().is_empty());
                }
            }
        }
    }
});
