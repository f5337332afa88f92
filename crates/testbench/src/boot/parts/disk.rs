//! A case's disks as QEMU devices: `[disk]` (slot 0), `[userland]` (slot 1, read-only)
//! and `[vault]` (slot 4), each made afresh for every boot in the boot's directory by
//! `testbench-disk`, or, with `keep`, the one the case's first boot left.

use std::path::{Path, PathBuf};

use testbench_case::{DiskLayout, DiskSpec, ImageFormat};
use testbench_disk::DiskRecipe;

use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec, Slot};
use crate::qemu::option_value;

/// One of a case's disks, planned once (its recipe read and checked at intake).
pub struct Disk {
    /// The case's table: `disk`, `vault` or `userland`.
    table: &'static str,
    spec: DiskSpec,
    recipe: Option<DiskRecipe>,
}

impl Disk {
    /// The disk of `table` (`disk`, `vault`, `userland`); `recipe` is its recipe, read.
    pub fn new(table: &'static str, spec: DiskSpec, recipe: Option<DiskRecipe>) -> Disk {
        Disk { table, spec, recipe }
    }

    fn slot(&self) -> Slot {
        match self.table {
            "userland" => Slot::Userland,
            "vault" => Slot::Vault,
            _ => Slot::Disk,
        }
    }

    /// QEMU's drive id, and the image's name in the boot's directory: `disk0`, `disk1`
    /// (the read-only disk), `disk2` (the vault).
    fn id(&self) -> &'static str {
        match self.slot() {
            Slot::Userland => "disk1",
            Slot::Vault => "disk2",
            _ => "disk0",
        }
    }

    /// What a fresh disk of this spec is, as `testbench-disk` checks a kept one (an image
    /// the case gives is checked by [`Disk::check_kept_image`]).
    fn fresh(&self) -> Option<testbench_disk::DiskSpec> {
        Some(match (&self.spec.layout, &self.recipe) {
            (DiskLayout::Zeroed { size_kib }, _) => testbench_disk::DiskSpec::Zeroed { size_kib: *size_kib },
            (DiskLayout::Partitions { size_kib, count }, _) => {
                testbench_disk::DiskSpec::Partitioned { size_kib: *size_kib, count: u64::from(*count) }
            }
            (DiskLayout::Recipe(_), Some(recipe)) => testbench_disk::DiskSpec::Recipe(recipe.clone()),
            (DiskLayout::Recipe(path), None) => unreachable!("{} was read at intake", path.display()),
            (DiskLayout::Image { .. }, _) => return None,
        })
    }

    /// A kept copy of a raw image is still the image's size (a guest cannot change it;
    /// a host that did is refused). A qcow2 copy grows as it is written: QEMU checks it.
    fn check_kept_image(&self, root: &Path, kept: &Path) -> Result<(), DiskPartError> {
        let DiskLayout::Image { path, .. } = &self.spec.layout else { return Ok(()) };
        let original = root.join(path);
        if self.format(root)? != ImageFormat::Raw {
            return Ok(());
        }
        let size = |p: &Path| {
            std::fs::metadata(p).map(|m| m.len()).map_err(|source| DiskPartError::Io { path: p.to_owned(), source })
        };
        let (want, have) = (size(&original)?, size(kept)?);
        if want != have {
            return Err(DiskPartError::KeptImage { kept: kept.to_owned(), have, want, image: original });
        }
        Ok(())
    }

    /// The format of the disk's file: an image's as the case says it or as its first
    /// bytes tell (checked at intake); raw for every disk the bench makes.
    fn format(&self, root: &Path) -> Result<ImageFormat, DiskPartError> {
        match &self.spec.layout {
            DiskLayout::Image { format: Some(format), .. } => Ok(*format),
            DiskLayout::Image { path, format: None } => crate::boot::media::image_format(&root.join(path))
                .map_err(|e| DiskPartError::Io { path: root.join(path), source: std::io::Error::other(e.to_string()) }),
            _ => Ok(ImageFormat::Raw),
        }
    }

    /// Make the disk afresh at `image`; what was made, for the boot's devices.log.
    fn make(&self, root: &Path, image: &Path, scratch: &Path) -> Result<Vec<String>, DiskPartError> {
        let mut log = Vec::new();
        match &self.spec.layout {
            DiskLayout::Zeroed { size_kib } => {
                testbench_disk::make_zeroed(image, *size_kib)?;
                log.push(format!("{size_kib} KiB of zeros"));
            }
            DiskLayout::Partitions { size_kib, count } => {
                testbench_disk::make_partitioned(image, *size_kib, u64::from(*count))?;
                let parts = if *count == 1 { "one partition".to_string() } else { format!("{count} equal partitions") };
                log.push(format!("{size_kib} KiB, a GPT of {parts}"));
            }
            DiskLayout::Image { path, format } => {
                // A copy: the case's file is never written, whatever the guest does.
                let original = root.join(path);
                let bytes = std::fs::copy(&original, image).map_err(|source| DiskPartError::Copy {
                    from: original.clone(),
                    to: image.to_owned(),
                    source,
                })?;
                let format = format.map_or("its format told by its first bytes", |f| f.name());
                log.push(format!("copied from {} ({bytes} bytes, {format})", path.display()));
            }
            DiskLayout::Recipe(path) => {
                let recipe = self.recipe.as_ref().expect("a recipe is read at intake");
                let layout = testbench_disk::pack(recipe, root, image, scratch)?;
                log.push(format!("packed from {} ({} bytes)", path.display(), layout.size_bytes));
                for part in &layout.partitions {
                    log.push(format!(
                        "  partition {} ({}): bytes {}..{}",
                        part.name,
                        part.fs.name(),
                        part.offset,
                        part.offset + part.length
                    ));
                }
                if let Some(flip) = &self.spec.flip {
                    let note = testbench_disk::flip_file_bit(image, &layout, &flip.partition, &flip.file)
                        .map_err(|source| DiskPartError::Flip { table: self.table, field: "flip", source })?;
                    log.push(note.to_string());
                }
                if let Some(partition) = &self.spec.flip_header {
                    let note = testbench_disk::flip_header_bit(image, &layout, partition)
                        .map_err(|source| DiskPartError::Flip { table: self.table, field: "flip_header", source })?;
                    log.push(note.to_string());
                }
            }
        }
        Ok(log)
    }
}

impl PartSpec for Disk {
    fn name(&self) -> String {
        format!("[{}]", self.table)
    }

    fn attach(&self, place: &BootPlace) -> Result<Attached, AttachError> {
        let name = format!("{}.img", self.id());
        let mut log = Vec::new();
        let image: PathBuf = match (self.spec.keep, place.first_boot) {
            (true, Some(first)) => {
                let kept = first.join(&name);
                if let Some(kib) = self.spec.resize_kept_kib {
                    // The self-check's tampering: a kept disk that is not what a fresh one is.
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&kept)
                        .map_err(|source| DiskPartError::Io { path: kept.clone(), source })?;
                    file.set_len(kib * 1024).map_err(|source| DiskPartError::Io { path: kept.clone(), source })?;
                    log.push(format!("resized the kept disk to {kib} KiB (resize_kept_kib, a self-check)"));
                }
                match self.fresh() {
                    Some(fresh) => testbench_disk::check_kept(&kept, &fresh).map_err(DiskPartError::from)?,
                    None => self.check_kept_image(place.root, &kept)?,
                }
                log.push(format!("kept from the first boot: {}", kept.display()));
                kept
            }
            _ => {
                let image = place.dir.join(&name);
                let scratch = place.dir.join(format!("{}.scratch", self.id()));
                std::fs::create_dir_all(&scratch)
                    .map_err(|source| DiskPartError::Io { path: scratch.clone(), source })?;
                let made = self.make(place.root, &image, &scratch);
                let _ = std::fs::remove_dir_all(&scratch);
                log.extend(made?);
                image
            }
        };
        let readonly = if self.slot() == Slot::Userland { ",readonly=on" } else { "" };
        let file = option_value(&image.display().to_string());
        let format = self.format(place.root)?.name();
        let args = if place.recorded {
            // Recorded or replayed: the device reads and writes through QEMU's blkreplay
            // driver, which puts the disk's requests in the recording's order.
            vec![
                "-drive".into(),
                format!("if=none,id={}-file,format={format},file={file}{readonly}", self.id()),
                "-drive".into(),
                format!("driver=blkreplay,if=none,image={}-file,id={}{readonly}", self.id(), self.id()),
                "-device".into(),
                self.slot().device(place.arch, "blk", &format!("drive={}", self.id())),
            ]
        } else {
            vec![
                "-drive".into(),
                format!("if=none,id={},format={format},file={file}{readonly}", self.id()),
                "-device".into(),
                self.slot().device(place.arch, "blk", &format!("drive={}", self.id())),
            ]
        };
        let what = format!(
            "{} on {}{}",
            self.id(),
            self.slot().described(place.arch),
            if readonly.is_empty() { "" } else { ", read-only" }
        );
        log.insert(0, what);
        // The read-only disk's proof is outside the guest: its image is the same bytes
        // after the boot as before it, whatever the guest tried.
        let part: Option<Box<dyn Part>> = if self.slot() == Slot::Userland {
            let before = digest(&image)?;
            log.push(format!("sha256 {before} before the boot"));
            Some(Box::new(Unchanged { image: image.clone(), before }))
        } else {
            None
        };
        Ok(Attached { args, files: vec![image], log, parts: part.into_iter().collect() })
    }
}

/// Why a disk could not be made, kept or read.
#[derive(Debug, thiserror::Error)]
pub enum DiskPartError {
    /// `testbench-disk` could not make the image, or the kept one is not a fresh one's.
    #[error(transparent)]
    Disk(#[from] testbench_disk::DiskError),
    /// The self-check's `flip` or `flip_header` (under the case's table) did not apply.
    #[error("{table}.{field}: {source}")]
    Flip { table: &'static str, field: &'static str, source: testbench_disk::DiskError },
    /// An image or its scratch directory that could not be opened, sized, made or read.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A case's image that could not be copied into the boot.
    #[error("failed to copy the disk image {} to {}: {source}", .from.display(), .to.display())]
    Copy { from: PathBuf, to: PathBuf, source: std::io::Error },
    /// A kept copy of a raw image whose size is not the image's.
    #[error("the kept disk {} is {have} bytes, but the image it is a copy of ({}) is {want}: not what the first boot left", .kept.display(), .image.display())]
    KeptImage { kept: PathBuf, have: u64, want: u64, image: PathBuf },
}

/// A file's sha256, in hex.
fn digest(path: &Path) -> Result<String, DiskPartError> {
    use sha2::Digest;
    let io = |source| DiskPartError::Io { path: path.to_owned(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(io)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The read-only disk's check after the boot: its image unchanged.
struct Unchanged {
    image: PathBuf,
    before: String,
}

impl Part for Unchanged {
    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        let after = digest(&self.image).map_err(|e| Broken(e.to_string()))?;
        if after == self.before {
            return Ok(Evidence::note(format!(
                "[userland]: the read-only disk is the same bytes after the boot (sha256 {})",
                &after[..16]
            )));
        }
        let message = format!(
            "[userland]: the read-only disk changed during the boot (sha256 {} before, {} after): {}",
            self.before,
            after,
            self.image.display()
        );
        if ended.passed {
            Err(Broken(message))
        } else {
            Ok(Evidence::note(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-only disk's check fails a passing boot when the image changed, and only
    /// notes it beside a boot that failed anyway.
    #[test]
    fn a_read_only_disk_that_changed_fails_the_boot() {
        let tmp = tempfile::tempdir().unwrap();
        let image = tmp.path().join("disk1.img");
        std::fs::write(&image, [0u8; 4096]).unwrap();
        let mut check = Unchanged { image: image.clone(), before: digest(&image).unwrap() };
        let ended = |passed: bool| Ended {
            dir: tmp.path(),
            root: tmp.path(),
            passed,
            failure: (!passed).then_some("the console's failure"),
        };
        let evidence = check.finish(&ended(true)).unwrap();
        assert!(evidence.notes[0].contains("the same bytes after the boot"), "{evidence:?}");
        std::fs::write(&image, [1u8; 4096]).unwrap();
        let Broken(error) = check.finish(&ended(true)).unwrap_err();
        assert!(error.starts_with("[userland]: the read-only disk changed during the boot (sha256 "), "{error}");
        let evidence = check.finish(&ended(false)).unwrap();
        assert!(evidence.notes[0].contains("changed during the boot"), "{evidence:?}");
    }
}
