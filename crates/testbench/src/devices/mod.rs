//! The devices a boot case gives its guest, as the bench attaches them to QEMU: disks
//! (`disk.rs`) and the network (`net.rs`). The mechanism they plug into, one boot's
//! loop and the fixed virtio-mmio slots, is `qemu/devices.rs`.

pub mod disk;
pub mod net;
