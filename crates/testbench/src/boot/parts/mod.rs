//! Every piece of evidence a boot can have beside its console's judge, one file each,
//! each a [`PartSpec`] planned once and a [`Part`](super::Part) per boot (`../part.rs`),
//! and [`for_case`], the list a case's parts are planned from:
//!
//! | file | part |
//! |---|---|
//! | `console.rs` | the console's own side: marks, QEMU's stderr, the QMP log, draining |
//! | `disk.rs` | `[disk]`, `[userland]`, `[vault]`: images made, kept, flipped; the read-only one checked unchanged |
//! | `net.rs` | `[net]`: the card, forwards, peers, dials, the poke, the capture judged |
//! | `sessions.rs` | `[[session]]`s over the forwarded ssh port (attached with `[net]`) |
//! | `idle.rs` | `[idle]`: the window at rest, after the sessions |
//! | `memory.rs` | `memory = true`: stacks and heaps measured in the guest's RAM |
//! | `ram_forbid.rs` | `ram_forbid`: strings that must be nowhere in the guest's RAM |
//! | `ram.rs` | the RAM dump both RAM parts read |
//! | `post_check.rs` | `post_check`: a command or oracle that judges the whole console log |
//! | `qemu_stderr.rs` | QEMU's own last words noted on a failing boot that does not quote them |

pub mod console;
pub mod disk;
pub mod idle;
pub mod memory;
pub mod net;
pub mod post_check;
pub mod qemu_stderr;
pub mod ram;
pub mod ram_forbid;
pub mod sessions;

use std::path::Path;
use std::sync::Arc;

use testbench_case::{Arch, BootCase, Case, DiskLayout, DiskSpec, Guest};
use testbench_disk::{DiskRecipe, Fs};

use super::PartSpec;
use crate::case_result::Blocked;

/// Every disk recipe a case names, read and checked against what the case asks of it
/// (a flip's partition and file system), before anything builds. The refusals name the
/// case file, the field and what is accepted.
pub fn check(case: &Case, root: &Path) -> Vec<String> {
    let Some(boot) = case.as_boot() else { return Vec::new() };
    let mut errors = Vec::new();
    for (table, spec) in boot.disks.iter() {
        if let Err(error) = recipe_of(table, spec, root).and_then(|_| image_of(table, spec, root)) {
            errors.push(format!("{}: {error}", case.file.display()));
        }
    }
    errors
}

/// The largest disk image a case may give: 16 GiB (it is copied into each boot).
const IMAGE_BYTES_MAX: u64 = 16 << 30;
/// A disk image the case gives, checked before anything builds: a regular file that can
/// be read, at most [`IMAGE_BYTES_MAX`], its format told from its first bytes as
/// `[guest] image`'s is (`boot/media.rs`: qcow2 2 or 3, a foreign format refused, else
/// raw), the format the case says when it says one, and a raw one whole sectors.
fn image_of(table: &str, spec: &DiskSpec, root: &Path) -> Result<(), String> {
    let DiskLayout::Image { path, format } = &spec.layout else { return Ok(()) };
    let full = root.join(path);
    let at = |why: String| format!("{table}.image: {}: {why}", path.display());
    if !full.is_file() {
        // Named paths are checked (and refused) by the intake; nothing more to say here.
        return Err(at("not a regular file".into()));
    }
    let file = std::fs::File::open(&full).map_err(|e| at(format!("cannot be read: {e}")))?;
    let len = file.metadata().map_err(|e| at(format!("cannot be read: {e}")))?.len();
    if len > IMAGE_BYTES_MAX {
        return Err(at(format!("{len} bytes, more than the {IMAGE_BYTES_MAX} (16 GiB) a disk image may be")));
    }
    let told = crate::boot::media::image_format(&full).map_err(|e| at(e.to_string()))?;
    match (format, told) {
        (Some(said), told) if *said != told => Err(at(format!(
            "{} image by its first bytes, and {table}.format says {}: give the image's own format, or leave format out to have it told",
            told.name(),
            said.name()
        ))),
        (_, testbench_case::ImageFormat::Raw) if len % 512 != 0 => {
            Err(at(format!("{len} bytes: a raw disk image is whole 512-byte sectors")))
        }
        _ => Ok(()),
    }
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

/// A boot case's parts on `arch`, planned once for all its boots, in the order they
/// judge: the devices in slot order (the sessions with the card), the window at rest,
/// the RAM's two checks, the post-check last (it reads the console once the rest passed).
/// A host without a usable ssh is a host lack (a skip under `--allow-skip`); anything
/// else that goes wrong here fails the case.
pub fn for_case(
    boot: &BootCase,
    arch: Arch,
    root: &Path,
    ports: &net::Ports,
) -> Result<Vec<Arc<dyn PartSpec>>, Blocked> {
    let mut parts: Vec<Arc<dyn PartSpec>> = Vec::new();
    for (table, spec) in boot.disks.iter() {
        let recipe = recipe_of(table, spec, root).map_err(Blocked::Build)?;
        parts.push(Arc::new(disk::Disk::new(table, spec.clone(), recipe)));
    }
    if let Some(spec) = &boot.net {
        let sessions = sessions::Sessions::for_case(boot, root).map_err(|lack| Blocked::HostLack(lack.to_string()))?;
        parts.push(Arc::new(
            net::Net::new(spec.clone(), ports.clone(), sessions).map_err(|e| Blocked::Build(e.to_string()))?,
        ));
    }
    if let Some(idle) = &boot.idle {
        parts.push(Arc::new(idle::Idle::new(idle.clone())));
    }
    if let (Some(memory), Guest::Built { programs, .. }) = (&boot.memory, &boot.guest) {
        let names = programs.iter().map(|p| p.program.entry_name());
        parts.push(Arc::new(memory::Memory::new(names, memory.heap_fits, boot.memory_mib)));
    }
    if !boot.ram_forbid.is_empty() {
        parts.push(Arc::new(ram_forbid::RamForbid::new(&boot.ram_forbid, arch, boot.memory_mib)));
    }
    if let Some(check) = &boot.post_check {
        parts.push(Arc::new(post_check::PostCheckSpec::new(check.clone())));
    }
    parts.push(Arc::new(qemu_stderr::QemuStderr));
    Ok(parts)
}
