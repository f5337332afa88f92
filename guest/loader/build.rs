//! Picks the linker script for the width: OpenSBI (fw_dynamic) on QEMU `virt` jumps
//! to 0x8020_0000 on rv64 and to 0x8040_0000 on rv32.

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let script = match env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default().as_str() {
        "riscv64" => "link-rv64.ld",
        "riscv32" => "link-rv32.ld",
        _ => return,
    };
    let path = dir.join(script);
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-T{}", path.display());
}
