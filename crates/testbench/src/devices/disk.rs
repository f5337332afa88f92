//! A case's disks as QEMU devices: `[disk]` (slot 0), `[userland]` (slot 1, read-only)
//! and `[vault]` (slot 4), each made afresh for every boot in the boot's directory by
//! `testbench-disk`, or, with `keep`, the one the case's first boot left.

use std::path::{Path, PathBuf};

use testbench_case::{DiskLayout, DiskSpec};
use testbench_disk::DiskRecipe;

use crate::qemu::{option_value, Attached, BootPlace, DeviceSpec, Slot};

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

    /// What a fresh disk of this spec is, as `testbench-disk` checks a kept one.
    fn fresh(&self) -> testbench_disk::DiskSpec {
        match (&self.spec.layout, &self.recipe) {
            (DiskLayout::Zeroed { size_kib }, _) => testbench_disk::DiskSpec::Zeroed { size_kib: *size_kib },
            (DiskLayout::Partitions { size_kib, count }, _) => {
                testbench_disk::DiskSpec::Partitioned { size_kib: *size_kib, count: u64::from(*count) }
            }
            (DiskLayout::Recipe(_), Some(recipe)) => testbench_disk::DiskSpec::Recipe(recipe.clone()),
            (DiskLayout::Recipe(path), None) => unreachable!("{} was read at intake", path.display()),
        }
    }

    /// Make the disk afresh at `image`; what was made, for the boot's devices.log.
    fn make(&self, root: &Path, image: &Path, scratch: &Path) -> Result<Vec<String>, String> {
        let mut log = Vec::new();
        match &self.spec.layout {
            DiskLayout::Zeroed { size_kib } => {
                testbench_disk::make_zeroed(image, *size_kib).map_err(|e| e.to_string())?;
                log.push(format!("{size_kib} KiB of zeros"));
            }
            DiskLayout::Partitions { size_kib, count } => {
                testbench_disk::make_partitioned(image, *size_kib, u64::from(*count)).map_err(|e| e.to_string())?;
                let parts = if *count == 1 { "one partition".to_string() } else { format!("{count} equal partitions") };
                log.push(format!("{size_kib} KiB, a GPT of {parts}"));
            }
            DiskLayout::Recipe(path) => {
                let recipe = self.recipe.as_ref().expect("a recipe is read at intake");
                let layout = testbench_disk::pack(recipe, root, image, scratch).map_err(|e| e.to_string())?;
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
                        .map_err(|e| format!("{}.flip: {e}", self.table))?;
                    log.push(note.to_string());
                }
                if let Some(partition) = &self.spec.flip_header {
                    let note = testbench_disk::flip_header_bit(image, &layout, partition)
                        .map_err(|e| format!("{}.flip_header: {e}", self.table))?;
                    log.push(note.to_string());
                }
            }
        }
        Ok(log)
    }
}

impl DeviceSpec for Disk {
    fn name(&self) -> String {
        format!("[{}]", self.table)
    }

    fn attach(&self, place: &BootPlace) -> Result<Attached, String> {
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
                        .map_err(|e| format!("{}: {e}", kept.display()))?;
                    file.set_len(kib * 1024).map_err(|e| format!("{}: {e}", kept.display()))?;
                    log.push(format!("resized the kept disk to {kib} KiB (resize_kept_kib, a self-check)"));
                }
                testbench_disk::check_kept(&kept, &self.fresh()).map_err(|e| e.to_string())?;
                log.push(format!("kept from the first boot: {}", kept.display()));
                kept
            }
            _ => {
                let image = place.dir.join(&name);
                let scratch = place.dir.join(format!("{}.scratch", self.id()));
                std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
                let made = self.make(place.root, &image, &scratch);
                let _ = std::fs::remove_dir_all(&scratch);
                log.extend(made?);
                image
            }
        };
        let readonly = if self.slot() == Slot::Userland { ",readonly=on" } else { "" };
        let args = vec![
            "-drive".into(),
            format!(
                "if=none,id={},format=raw,file={}{readonly}",
                self.id(),
                option_value(&image.display().to_string())
            ),
            "-device".into(),
            format!("virtio-blk-device,drive={},bus={}", self.id(), self.slot().bus()),
        ];
        let what = format!(
            "{} on slot {} ({}, {:#x}){}",
            self.id(),
            self.slot() as u8,
            self.slot().bus(),
            self.slot().address(),
            if readonly.is_empty() { "" } else { ", read-only" }
        );
        log.insert(0, what);
        Ok(Attached { args, files: vec![image], log, hook: None })
    }
}
