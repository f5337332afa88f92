//! What the bundle target's Ed25519 work costs a call, in the hostfuzz build (overflow
//! checks and debug assertions on, curve25519-dalek's precomputed tables on):
//! `cargo bench --manifest-path hostfuzz/Cargo.toml --bench bundle` prints each call's
//! best time over 20 blocks of 100 calls, on a bundle of a kernel, a first program and
//! a data entry (docs/host-fuzzing.md, "The fork server"). The prepared `Signer` and
//! `Verifier` beside the one-shot calls that read the key each time.

use bundle::{Kind, Signer, Verifier, DEV_PUBLIC_KEY, DEV_SEED};
use std::hint::black_box;
use std::time::Instant;

const BLOCKS: u32 = 20;
const CALLS: u32 = 100;

/// Prints the best time a call of `f` took, over `BLOCKS` blocks of `CALLS` calls.
fn time(name: &str, mut f: impl FnMut()) {
    let mut best = f64::MAX;
    for _ in 0..BLOCKS {
        let start = Instant::now();
        for _ in 0..CALLS {
            f();
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS));
    }
    println!("{name:<50} {best:>7.1} µs");
}

fn main() {
    let (kernel, first, data) = (vec![7u8; 256], vec![9u8; 128], vec![1u8; 64]);
    let entries: [(&str, Kind, &[u8]); 3] =
        [("kernel", Kind::Kernel, &kernel), ("logsrv", Kind::FirstProgram, &first), ("blob", Kind::Data, &data)];
    let signer = Signer::new(&DEV_SEED);
    let verifier = Verifier::new(&DEV_PUBLIC_KEY).expect("the development key is valid");
    let signed = signer.pack_signed(&entries).expect("a valid bundle");
    let mut flipped = signed.clone();
    flipped[100] ^= 1;
    assert!(verifier.verify(&signed).is_ok() && verifier.verify(&flipped).is_err());
    println!("a bundle of {} bytes; best of {BLOCKS} blocks of {CALLS} calls", signed.len());
    time("Signer::new (the key derived from the seed)", || {
        black_box(Signer::new(black_box(&DEV_SEED)));
    });
    time("Verifier::new (the key decompressed, checked)", || {
        black_box(Verifier::new(black_box(&DEV_PUBLIC_KEY)).is_ok());
    });
    time("Signer::pack_signed (pack, one signature)", || {
        black_box(signer.pack_signed(black_box(&entries)).is_ok());
    });
    time("bundle::pack_signed (the same, key derived)", || {
        black_box(bundle::pack_signed(black_box(&entries), &DEV_SEED).is_ok());
    });
    time("Verifier::verify, intact", || {
        black_box(verifier.verify(black_box(&signed)).is_ok());
    });
    time("Verifier::verify, a byte flipped (bad signature)", || {
        black_box(verifier.verify(black_box(&flipped)).is_err());
    });
    time("bundle::verify, intact (key read each call)", || {
        black_box(bundle::verify(black_box(&signed), &DEV_PUBLIC_KEY).is_ok());
    });
}
