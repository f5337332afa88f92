//! Builds a guest recipe and boots it once under QEMU, checking for the marker.
//!
//! cargo run --release -p testbench-recipe --example boot -- [RECIPE] [CACHE_DIR]
//!
//! Defaults: guests/debian-busybox.toml and the user's shared cache (TESTBENCH_CACHE,
//! else XDG_CACHE_HOME/testbench, else ~/.cache/testbench). Exits 0 when the
//! serial output holds `testbench-guest: init reached` and QEMU exited 0.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use testbench_process::Cmd;
use testbench_recipe::Arch;

const MARKER: &str = "testbench-guest: init reached";

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let recipe_path = args.next().map(PathBuf::from).unwrap_or_else(|| root.join("guests/debian-busybox.toml"));
    let cache = match args.next() {
        Some(dir) => PathBuf::from(dir),
        None => testbench_recipe::user_cache_root().unwrap_or_else(|e| die(&e.to_string())),
    };

    let recipe = testbench_recipe::load(&recipe_path).unwrap_or_else(|e| die(&e.to_string()));
    let t = Instant::now();
    let image = testbench_recipe::build(&recipe, &cache, &mut |m| eprintln!("[recipe] {m}"))
        .unwrap_or_else(|e| die(&e.to_string()));
    eprintln!("[recipe] build took {:.3}s (from_cache: {})", t.elapsed().as_secs_f64(), image.from_cache);
    let t = Instant::now();
    let what = format!("QEMU to boot {} to init and power off", recipe_path.display());
    let out = Cmd::new(image.arch.qemu(), what, Duration::from_secs(300))
        .args(machine(image.arch))
        .args(["-m", "512", "-smp", "1"])
        .args(["-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(&image.kernel)
        .arg("-initrd")
        .arg(&image.initrd)
        .arg("-append")
        .arg(&image.append)
        .output()
        .unwrap_or_else(|e| die(&e.to_string()));
    let secs = t.elapsed().as_secs_f64();
    let serial = String::from_utf8_lossy(&out.stdout);
    for line in serial.lines().filter(|l| l.starts_with("testbench-guest:")) {
        println!("{line}");
    }
    eprintln!("[boot] qemu exited {} after {secs:.2}s", out.status);
    if !serial.contains(MARKER) || !out.status.success() {
        eprintln!("--- serial ---\n{serial}\n--- stderr ---\n{}", String::from_utf8_lossy(&out.stderr));
        die("the guest did not reach init and power off cleanly");
    }
}

/// The machine each width boots on (TCG: no KVM is assumed).
fn machine(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::Rv64 | Arch::Rv32 => &["-machine", "virt", "-bios", "default"],
        Arch::X86_64 => &["-machine", "q35", "-accel", "tcg"],
        Arch::Aarch64 => &["-machine", "virt", "-cpu", "max", "-accel", "tcg"],
    }
}

fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
