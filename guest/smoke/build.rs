//! Links smoke like the other user programs: with `programs/link.ld` (one script for
//! both widths, at 0x1_0000).

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // Host builds (e.g. `cargo check` without --target) get no script; the guest is
    // only meant for the two bare-metal riscv targets.
    if arch != "riscv64" && arch != "riscv32" {
        return;
    }
    let path = dir.join("../programs/link.ld");
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-T{}", path.display());
}
