//! Links the kernel with link.ld (both widths: it runs on physical addresses at
//! abi::KERNEL_START, where the loader puts it).

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch != "riscv64" && arch != "riscv32" {
        return;
    }
    let path = dir.join("link.ld");
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-T{}", path.display());
}
