//! The devices a boot case gives its guest, as the bench attaches them to QEMU: disks
//! (`disk.rs`) and the network (`net.rs`). The mechanism they plug into, one boot's
//! loop and the fixed virtio-mmio slots, is `qemu/devices.rs`.

pub mod disk;
pub mod idle;
pub mod net;

use std::path::Path;
use std::sync::Arc;

use testbench_case::{BootCase, Case, DiskLayout, DiskSpec};
use testbench_disk::{DiskRecipe, Fs};

use crate::case_result::Blocked;
use crate::qemu::DeviceSpec;

/// Every disk recipe a case names, read and checked against what the case asks of it
/// (a flip's partition and file system), before anything builds. The refusals name the
/// case file, the field and what is accepted.
pub fn check(case: &Case, root: &Path) -> Vec<String> {
    let Some(boot) = case.as_boot() else { return Vec::new() };
    let mut errors = Vec::new();
    for (table, spec) in boot.disks.iter() {
        if let Err(error) = recipe_of(table, spec, root) {
            errors.push(format!("{}: {error}", case.file.display()));
        }
    }
    errors
}

/// The recipe of a disk that has one, read and checked against the disk's flips.
fn recipe_of(table: &str, spec: &DiskSpec, root: &Path) -> Result<Option<DiskRecipe>, String> {
    let DiskLayout::Recipe(path) = &spec.layout else { return Ok(None) };
    if !root.join(path).is_file() {
        // Named paths are checked (and refused) by the intake; nothing more to say here.
        return Err(format!("{table}.recipe: {} is not a regular file", path.display()));
    }
    let recipe = DiskRecipe::load(root, path).map_err(|e| format!("{table}.recipe: {e}"))?;
    let names = || recipe.partitions.iter().map(|p| format!("{:?}", p.name)).collect::<Vec<_>>().join(", ");
    let find = |field: &str, name: &str| {
        recipe.partitions.iter().find(|p| p.name == name).ok_or_else(|| {
            format!("{table}.{field}: {name:?} is not a partition of {}: one of {}", path.display(), names())
        })
    };
    if let Some(flip) = &spec.flip {
        let partition = find("flip.partition", &flip.partition)?;
        if partition.fs == Fs::Raw {
            return Err(format!(
                "{table}.flip: partition {:?} of {} is raw: it holds no files; a flip of a file needs ext4 or fat (flip_header flips a raw partition's first byte)",
                flip.partition,
                path.display()
            ));
        }
        let stage = partition.stage.as_ref().map(|s| root.join(s).join(&flip.file));
        if !stage.as_ref().is_some_and(|s| s.is_file()) {
            return Err(format!(
                "{table}.flip.file: {:?} is not a regular file in partition {:?}'s stage",
                flip.file, flip.partition
            ));
        }
    }
    if let Some(name) = &spec.flip_header {
        find("flip_header", name)?;
    }
    Ok(Some(recipe))
}

/// The most host ports one boot of a case takes: its forwards and its poke.
pub fn host_ports(boot: &BootCase) -> usize {
    boot.net.as_ref().map_or(0, |net| net.host_ports())
}

/// A boot case's devices, in slot order, planned once for all its boots.
/// A host without a usable ssh is a host lack (a skip under `--allow-skip`); anything
/// else that goes wrong here fails the case.
pub fn for_case(boot: &BootCase, root: &Path, ports: &net::Ports) -> Result<Vec<Arc<dyn DeviceSpec>>, Blocked> {
    let mut devices: Vec<Arc<dyn DeviceSpec>> = Vec::new();
    for (table, spec) in boot.disks.iter() {
        let recipe = recipe_of(table, spec, root).map_err(Blocked::Build)?;
        devices.push(Arc::new(disk::Disk::new(table, spec.clone(), recipe)));
    }
    if let Some(spec) = &boot.net {
        let sessions = crate::sessions::Sessions::for_case(boot, root).map_err(Blocked::HostLack)?;
        devices.push(Arc::new(net::Net::new(spec.clone(), ports.clone(), sessions).map_err(Blocked::Build)?));
    }
    if let Some(idle) = &boot.idle {
        devices.push(Arc::new(idle::Idle::new(idle.clone())));
    }
    Ok(devices)
}
