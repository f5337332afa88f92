//! Picks the linker script for the target width: OpenSBI (fw_dynamic) on QEMU `virt`
//! hands over at 0x8020_0000 on rv64 (firmware end aligned to 2 MiB) and at 0x8040_0000
//! on rv32 (aligned to 4 MiB).

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let script = match arch.as_str() {
        "riscv64" => "link-rv64.ld",
        "riscv32" => "link-rv32.ld",
        // Host builds (e.g. `cargo check` without --target) get no script; the guest is
        // only meant for the two bare-metal riscv targets.
        _ => return,
    };
    let path = dir.join(script);
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-T{}", path.display());
}
