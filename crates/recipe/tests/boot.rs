//! Builds guests/debian-busybox.toml and the debian-devices recipes (riscv64, x86_64,
//! aarch64; downloads ~120 MB per width the first time) and boots them under QEMU (TCG).
//! Ignored by `cargo test` (they need the Debian mirror and qemu-system-riscv64,
//! -x86_64 and -aarch64, and take about 80 s with the packages cached); `./test` runs
//! them, after the host tests, with this line:
//!
//! cargo test -p testbench-recipe --test boot -- --ignored --test-threads 1
//! They build into the user's shared cache (`testbench_recipe::user_cache_root`:
//! TESTBENCH_CACHE, else XDG_CACHE_HOME/testbench, else ~/.cache/testbench), as the bench
//! does, so a machine that fetched once builds them offline.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use testbench_recipe::Arch;

/// The machine a width boots on, and what its virtio-mmio transports need.
fn machine(arch: Arch) -> Vec<&'static str> {
    match arch {
        Arch::Rv64 | Arch::Rv32 => {
            vec!["-machine", "virt", "-bios", "default", "-global", "virtio-mmio.force-legacy=false"]
        }
        Arch::X86_64 => vec!["-machine", "q35", "-accel", "tcg"],
        Arch::Aarch64 => {
            vec!["-machine", "virt", "-cpu", "max", "-accel", "tcg", "-global", "virtio-mmio.force-legacy=false"]
        }
    }
}

#[test]
#[ignore = "downloads Debian packages and boots QEMU: ./test runs it (--ignored)"]
fn debian_busybox_reaches_init_and_powers_off() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = testbench_recipe::user_cache_root().unwrap();
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

/// Boots the devices guest with `append` and extra QEMU arguments; returns the serial
/// output after checking QEMU exited 0.
fn boot_devices(image: &testbench_recipe::Image, append: &str, devices: &[String]) -> String {
    let out = Command::new("timeout")
        .arg("300")
        .arg(image.arch.qemu())
        .args(machine(image.arch))
        .args(["-m", "512", "-smp", "1", "-nodefaults"])
        .args(["-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(&image.kernel)
        .arg("-initrd")
        .arg(&image.initrd)
        .arg("-append")
        .arg(format!("{} quiet {append}", image.append))
        .args(devices)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let serial = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "qemu: {}; serial:\n{serial}", out.status);
    assert!(!serial.contains("testbench-guest: FAIL"), "{serial}");
    serial
}

fn disk(slot: u32, id: &str, path: &std::path::Path, readonly: bool) -> Vec<String> {
    disk_on(Arch::Rv64, slot, id, path, readonly)
}

/// A disk on slot N: virtio-mmio transport N, or on x86_64 PCI device 0x10 + N of the
/// root bus.
fn disk_on(arch: Arch, slot: u32, id: &str, path: &std::path::Path, readonly: bool) -> Vec<String> {
    let ro = if readonly { ",readonly=on" } else { "" };
    let device = match arch {
        Arch::X86_64 => format!("virtio-blk-pci,drive={id},bus=pcie.0,addr={:#x}", 0x10 + slot),
        _ => format!("virtio-blk-device,drive={id},bus=virtio-mmio-bus.{slot}"),
    };
    vec!["-drive".into(), format!("if=none,id={id},file={},format=raw{ro}", path.display()), "-device".into(), device]
}

/// guests/debian-devices.toml: a disk on slot 0 kept across two boots (the second finds
/// what the first wrote), and a read-only disk on slot 1 whose write the guest sees
/// refused while the image stays as it was.
#[test]
#[ignore = "downloads Debian packages and boots QEMU: ./test runs it (--ignored)"]
fn debian_devices_keeps_a_disk_and_sees_a_read_only_one_refuse_writes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = testbench_recipe::user_cache_root().unwrap();
    let recipe = testbench_recipe::load(&root.join("guests/debian-devices.toml")).unwrap();
    let image = testbench_recipe::build(&recipe, &cache, &mut |m| eprintln!("[recipe] {m}")).unwrap();
    let dir = std::env::temp_dir().join(format!("testbench-devices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kept = dir.join("kept.img");
    let ro = dir.join("ro.img");
    std::fs::write(&kept, vec![0u8; 1 << 20]).unwrap();
    let ro_bytes: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&ro, &ro_bytes).unwrap();

    let first = boot_devices(&image, "tb.do=disk-keep", &disk(0, "disk0", &kept, false));
    assert!(first.contains("testbench-guest: disk-keep: found nothing, wrote generation 1 on vda (slot 0)"), "{first}");
    let second = boot_devices(&image, "tb.do=disk-keep", &disk(0, "disk0", &kept, false));
    assert!(
        second.contains("testbench-guest: disk-keep: found generation 1, wrote generation 2 on vda (slot 0)"),
        "{second}"
    );
    assert!(std::fs::read(&kept).unwrap().starts_with(b"TESTBENCH generation 2\n\0"));

    let mut devices = disk(0, "disk0", &kept, false);
    devices.extend(disk(1, "disk1", &ro, true));
    let serial = boot_devices(&image, "tb.do=ro-write", &devices);
    // Two disks: Linux names the slot-1 disk vda, the slot-0 one vdb.
    assert!(serial.contains("testbench-guest: ro-write: vda (slot 1) has ro=1"), "{serial}");
    assert!(
        serial.contains(
            "testbench-guest: ro-write: write refused: dd: error writing '/dev/vda': Operation not permitted"
        ),
        "{serial}"
    );
    assert!(serial.contains("testbench-guest: done ro-write"), "{serial}");
    assert!(std::fs::read(&ro).unwrap() == ro_bytes, "the read-only image changed");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The x86_64 and aarch64 devices guests: a disk on slot 0 kept across two boots, found
/// at the width's own slot path, with the same lines as on riscv64.
#[test]
#[ignore = "downloads Debian packages and boots QEMU: ./test runs it (--ignored)"]
fn debian_devices_on_x86_64_and_aarch64_keep_a_disk() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = testbench_recipe::user_cache_root().unwrap();
    for (file, machine) in [("debian-devices-x86_64.toml", "x86_64"), ("debian-devices-aarch64.toml", "aarch64")] {
        let recipe = testbench_recipe::load(&root.join("guests").join(file)).unwrap();
        let image = testbench_recipe::build(&recipe, &cache, &mut |m| eprintln!("[recipe] {m}")).unwrap();
        let dir = std::env::temp_dir().join(format!("testbench-devices-{machine}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kept = dir.join("kept.img");
        std::fs::write(&kept, vec![0u8; 1 << 20]).unwrap();
        let devices = disk_on(image.arch, 0, "disk0", &kept, false);
        let first = boot_devices(&image, "tb.do=disk-keep", &devices);
        assert!(first.contains("testbench-guest: kernel 6.12.117+deb13-"), "{first}");
        assert!(first.contains(&format!(" on {machine}")), "{first}");
        assert!(
            first.contains("testbench-guest: disk-keep: found nothing, wrote generation 1 on vda (slot 0)"),
            "{first}"
        );
        let second = boot_devices(&image, "tb.do=disk-keep", &devices);
        assert!(
            second.contains("testbench-guest: disk-keep: found generation 1, wrote generation 2 on vda (slot 0)"),
            "{second}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
