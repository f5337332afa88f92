//! Writes the inputs the runner makes, one file each, for another fuzzer's corpus
//! (scripts/hostfuzz-bench seeds libFuzzer with the gate's inputs):
//!
//!     cargo run --release --manifest-path hostfuzz/Cargo.toml --example write_inputs -- SEED COUNT DIR
//!
//! `DIR/<iteration>` holds the input of iteration `iteration` of `SEED`, for 0..COUNT.

use hostfuzz::rng::Rng;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [seed, count, dir] = &args[..] else {
        eprintln!("usage: write_inputs SEED COUNT DIR");
        return ExitCode::from(2);
    };
    let (Ok(seed), Ok(count)) = (seed.parse::<u64>(), count.parse::<u64>()) else {
        eprintln!("write_inputs: SEED and COUNT are numbers");
        return ExitCode::from(2);
    };
    let dir = std::path::Path::new(dir);
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        (0..count).try_for_each(|i| std::fs::write(dir.join(i.to_string()), Rng::for_input(seed, i).input()))
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("write_inputs: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
