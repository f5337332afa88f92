//! The devices a boot attaches beside its console, and how each takes part in the boot.
//!
//! A case's devices are planned once ([`DeviceSpec`], held by the [`BootSpec`]) and
//! attached afresh for every boot ([`DeviceSpec::attach`]): the attachment makes what
//! the boot needs in the boot's directory (a disk image, a capture file's place, host
//! ports), before both the device-tree dump and the boot, and gives QEMU's arguments for
//! it, the files it leaves, and optionally a [`Hook`] that runs beside the console in the
//! boot's one loop of events (boot.rs): it learns when the guest starts, when a console
//! line fires one of its triggers, and when one of its own threads reports; after the
//! console's verdict it gives its own (a dial never echoed, a peer count off, a capture
//! that breaks a rule) and the notes the case's result prints.
//!
//! Every device sits on a fixed slot ([`Slot`]), whatever else the case has, so a guest's
//! configuration names its devices the same way in every case: a virtio-mmio transport
//! of the `virt` machine on riscv and aarch64, a PCI device number on x86_64's `q35`.
//!
//! [`BootSpec`]: super::BootSpec

use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use testbench_case::Arch;
use testbench_judge::Pattern;

use super::boot::Event;
use super::qmp::QmpClient;

/// A device's fixed place. On the `virt` machines it is virtio-mmio transport N (bus
/// `virtio-mmio-bus.N`), at 0x10001000 + N × 0x1000 on riscv and 0x0a000000 + N × 0x200 on
/// aarch64; on x86_64's `q35` it is device 0x10 + N of the root bus `pcie.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The writable data disk, `[disk]`.
    Disk = 0,
    /// The read-only disk, `[userland]`.
    Userland = 1,
    /// The network card, `[net]`.
    Net = 2,
    // Slot 3 is kept free for a later device (a virtio-serial port).
    /// The second writable disk, `[vault]`.
    Vault = 4,
}

impl Slot {
    /// The virtio-mmio bus a `-device` names to sit on this slot (the `virt` machines).
    pub fn bus(self) -> String {
        format!("virtio-mmio-bus.{}", self as u8)
    }

    /// The transport's physical address on `arch`'s `virt` machine, which a guest's
    /// device tree names (`virtio_mmio@10001000`) and Linux's sysfs path carries; None
    /// on x86_64, whose devices are on PCI.
    pub fn address(self, arch: Arch) -> Option<u64> {
        match arch {
            Arch::Rv64 | Arch::Rv32 => Some(0x1000_1000 + 0x1000 * self as u64),
            Arch::Aarch64 => Some(0x0a00_0000 + 0x200 * self as u64),
            Arch::X86_64 => None,
        }
    }

    /// The PCI device number on `q35`'s root bus (x86_64).
    pub fn pci_device(self) -> u8 {
        0x10 + self as u8
    }

    /// QEMU's `-device` value for virtio device `kind` (`blk`, `net`) with `props`
    /// (`drive=disk0`) on this slot of `arch`'s machine: the modern transport on both
    /// (virtio-mmio by [`MODERN_TRANSPORT`], virtio-pci without its legacy interface).
    pub fn device(self, arch: Arch, kind: &str, props: &str) -> String {
        if arch.virtio_mmio() {
            format!("virtio-{kind}-device,{props},bus={}", self.bus())
        } else {
            format!("virtio-{kind}-pci,{props},bus=pcie.0,addr={:#x},disable-legacy=on", self.pci_device())
        }
    }

    /// Where the slot is, for `devices.log`: `slot 0 (virtio-mmio-bus.0, 0x10001000)`,
    /// `slot 0 (pcie.0 00:10.0)`.
    pub fn described(self, arch: Arch) -> String {
        match self.address(arch) {
            Some(address) => format!("slot {} ({}, {address:#x})", self as u8, self.bus()),
            None => format!("slot {} (pcie.0 00:{:02x}.0)", self as u8, self.pci_device()),
        }
    }
}

/// QEMU's global option that makes every virtio-mmio transport the modern one (version 2),
/// given once on a command line with any device on a `virt` machine.
pub const MODERN_TRANSPORT: [&str; 2] = ["-global", "virtio-mmio.force-legacy=false"];

/// Where one boot takes place, for a device attaching to it.
pub struct BootPlace<'a> {
    /// The boot's width: where its devices' slots are.
    pub arch: Arch,
    /// The workspace root (a case's paths are relative to it).
    pub root: &'a Path,
    /// The boot's own directory (created before any device attaches).
    pub dir: &'a Path,
    /// The first boot's directory, when this is a case's second boot: a kept disk is the
    /// one the first boot left there.
    pub first_boot: Option<&'a Path>,
}

/// One device of a case, planned once, attached to each boot.
pub trait DeviceSpec: Send + Sync {
    /// What the device is, for messages (`[disk]`, `[net]`).
    fn name(&self) -> String;

    /// Make what this boot needs and say how QEMU attaches it. An error is the bench's
    /// trouble or a refusal (a kept disk that is not what a fresh one would be) and
    /// ends the boot before QEMU starts.
    fn attach(&self, place: &BootPlace) -> Result<Attached, String>;
}

/// A device attached to one boot.
pub struct Attached {
    /// QEMU's arguments for it (its slot named).
    pub args: Vec<String>,
    /// The files it leaves in the boot's directory, named in the boot's `devices.log`.
    pub files: Vec<PathBuf>,
    /// What was made for this boot (a disk's layout, a flipped bit, the host ports), for
    /// `devices.log`.
    pub log: Vec<String>,
    /// Its parts in the boot's loop (the network's, and its sessions').
    pub hooks: Vec<Box<dyn Hook>>,
}

/// What a hook is given when the guest starts.
pub struct HookStart {
    /// When the guest started (after QMP's `cont`): the time every device's note counts from.
    pub start: Instant,
    /// The boot's deadline.
    pub deadline: Instant,
    /// The boot's channel of events: a hook's threads send [`Event::Device`].
    pub events: SyncSender<Event>,
    /// Set when the boot ends: a hook's threads stop waiting.
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    /// QEMU's QMP connection, for commands (the guest runs).
    pub qmp: Arc<QmpClient>,
    /// QEMU's process id (its CPU time is in `/proc/<pid>/stat`).
    pub pid: u32,
}

/// What a device's thread reports to the boot's loop.
#[derive(Debug)]
pub enum DeviceEvent {
    /// Something for the case's result (a dial that echoed after 1.2 s).
    Note(String),
    /// The device's check failed: the boot ends with this failure at once.
    Failed(String),
    /// A hook that holds the verdict ([`Hook::holds`]) is done with it (its sessions
    /// ended well).
    Released,
}

/// A device's part in one boot's loop. All of it runs on the loop's thread; a hook that
/// waits (a dial retrying) does so on a thread of its own and reports by events.
pub trait Hook: Send {
    /// Console patterns whose first match the hook wants to hear of ([`Hook::triggered`]).
    fn triggers(&self) -> Vec<Pattern> {
        Vec::new()
    }

    /// The guest has started.
    fn started(&mut self, start: &HookStart) {
        let _ = start;
    }

    /// Whether the boot's verdict waits for this hook's [`DeviceEvent::Released`] as
    /// well as for the console (sessions do).
    fn holds(&self) -> bool {
        false
    }

    /// Every expect of the case has matched (sessions start then). Called once.
    fn expects_matched(&mut self, start: &HookStart) {
        let _ = start;
    }

    /// Whether this hook's part starts only once every other hook that holds the verdict
    /// has released it ([`Hook::others_done`]): the window at rest follows the sessions.
    fn after_others(&self) -> bool {
        false
    }

    /// Every expect has matched and every other holding hook has released the verdict
    /// (called once, only on a hook whose [`Hook::after_others`] is true).
    fn others_done(&mut self, start: &HookStart) {
        let _ = start;
    }

    /// Trigger `which` (an index into [`Hook::triggers`]) matched a console line.
    fn triggered(&mut self, which: usize, start: &HookStart) {
        let _ = (which, start);
    }

    /// The boot has ended (QEMU has exited or been stopped): the device's own verdict,
    /// from what it saw outside the guest, when the console's verdict (`passed`) is a
    /// pass; its notes either way. `Ok` holds the notes the case's result prints; an
    /// error fails a boot that passed on its console.
    fn finish(&mut self, dir: &Path, passed: bool) -> Result<Vec<String>, String>;
}

/// The devices attached to one boot, with their arguments in slot order.
pub struct AttachedSet {
    pub args: Vec<String>,
    pub files: Vec<PathBuf>,
    pub hooks: Vec<Box<dyn Hook>>,
}

/// The file in a boot's directory that says what each device was for that boot.
pub const DEVICES_LOG: &str = "devices.log";

/// Attach every device to one boot, and write `devices.log`. The modern-transport option
/// comes first when any device gives QEMU an argument.
pub fn attach_all(specs: &[Arc<dyn DeviceSpec>], place: &BootPlace) -> Result<AttachedSet, String> {
    let mut set = AttachedSet { args: Vec::new(), files: Vec::new(), hooks: Vec::new() };
    if specs.is_empty() {
        return Ok(set);
    }
    let mut log = String::new();
    for spec in specs {
        let attached = spec.attach(place).map_err(|e| format!("{}: {e}", spec.name()))?;
        log.push_str(&format!("{}:\n", spec.name()));
        for line in &attached.log {
            log.push_str(&format!("  {line}\n"));
        }
        for file in &attached.files {
            log.push_str(&format!("  file: {}\n", file.display()));
        }
        set.args.extend(attached.args);
        set.files.extend(attached.files);
        set.hooks.extend(attached.hooks);
    }
    // The transports are modern only where a device sits on one.
    if !set.args.is_empty() && place.arch.virtio_mmio() {
        set.args.splice(0..0, MODERN_TRANSPORT.map(String::from));
    }
    let path = place.dir.join(DEVICES_LOG);
    std::fs::write(&path, log).map_err(|e| format!("failed to write {}: {e}", path.display()))?;
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_virt_machines_transports() {
        assert_eq!(Slot::Disk.bus(), "virtio-mmio-bus.0");
        assert_eq!(Slot::Vault.bus(), "virtio-mmio-bus.4");
        assert_eq!(Slot::Disk.address(Arch::Rv64), Some(0x1000_1000));
        assert_eq!(Slot::Net.address(Arch::Rv32), Some(0x1000_3000));
        assert_eq!(Slot::Net.address(Arch::Aarch64), Some(0x0a00_0400));
        assert_eq!(Slot::Vault.address(Arch::X86_64), None);
        assert_eq!(
            Slot::Disk.device(Arch::Aarch64, "blk", "drive=d"),
            "virtio-blk-device,drive=d,bus=virtio-mmio-bus.0"
        );
        assert_eq!(
            Slot::Net.device(Arch::X86_64, "net", "netdev=n"),
            "virtio-net-pci,netdev=n,bus=pcie.0,addr=0x12,disable-legacy=on"
        );
        assert_eq!(Slot::Vault.described(Arch::X86_64), "slot 4 (pcie.0 00:14.0)");
    }
}
