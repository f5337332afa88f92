//! The fixed places a part's device sits on, whatever else the case has, so that a
//! guest's configuration names its devices the same way in every case: a virtio-mmio
//! transport of the `virt` machine on riscv and aarch64, a PCI device number on x86_64's
//! `q35`.

use testbench_case::Arch;

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
