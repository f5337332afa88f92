//! Builds guests/debian-busybox.toml (downloads ~113 MB the first time) and boots it
//! under QEMU. Ignored by default: needs the Debian mirror and qemu-system-riscv64.
//!
//! cargo test -p testbench-recipe --test boot -- --ignored --nocapture
//! TESTBENCH_GUEST_CACHE sets the cache root (default: target/guest-cache).

use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
#[ignore = "downloads Debian packages and boots QEMU"]
fn debian_busybox_reaches_init_and_powers_off() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache =
        std::env::var_os("TESTBENCH_GUEST_CACHE").map(PathBuf::from).unwrap_or_else(|| root.join("target/guest-cache"));
    let recipe = testbench_recipe::load(&root.join("guests/debian-busybox.toml")).unwrap();
    let image = testbench_recipe::build(&recipe, &cache, &mut |m| eprintln!("[recipe] {m}")).unwrap();
    let out = Command::new("timeout")
        .arg("300")
        .arg(image.arch.qemu())
        .args(["-machine", "virt", "-bios", "default", "-m", "512", "-smp", "1"])
        .args(["-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(&image.kernel)
        .arg("-initrd")
        .arg(&image.initrd)
        .arg("-append")
        .arg(&image.append)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let serial = String::from_utf8_lossy(&out.stdout);
    assert!(serial.contains("testbench-guest: init reached"), "no marker; serial:\n{serial}");
    assert!(serial.contains("testbench-guest: kernel 6.12.117+deb13-riscv64 on riscv64"), "{serial}");
    assert!(out.status.success(), "qemu: {}; serial:\n{serial}", out.status);
}
