//! Zeroed disks, the GPT of equal partitions, and the check of a kept disk.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::Path;

use gpt::disk::LogicalBlockSize;
use gpt::mbr::ProtectiveMBR;
use gpt::partition::Partition;
use gpt::partition_types::{self, Type};
use gpt::GptConfig;
use uuid::Uuid;

use crate::{io_err, refused, DiskError, DiskRecipe, Fs, Layout, PartitionPlace};

/// The sector size of every table this crate writes.
pub const SECTOR: u64 = 512;

/// The largest disk: 4 TiB (the protective MBR counts sectors in 32 bits).
pub const SIZE_KIB_MAX: u64 = 1 << 32;

/// The GUID of every disk this crate partitions.
pub const DISK_GUID: Uuid = Uuid::from_u128(0x7e57_be0c_d15c_4000_8000_0000_0000_0000);

/// The unique GUID of partition `index` (from 0): fixed, so tables repeat byte for byte.
pub fn partition_guid(index: usize) -> Uuid {
    Uuid::from_u128(0x7e57_be0c_0a27_4000_8000_0000_0000_0000 + index as u128 + 1)
}

/// 1 MiB in sectors, and 4 KiB.
const ALIGN_WIDE: u64 = 2048;
const ALIGN_NARROW: u64 = 8;
/// The primary table: the protective MBR, the header and 128 entries of 128 bytes.
const FIRST_USABLE: u64 = 34;
/// The backup table at the end: 32 sectors of entries and the header.
const BACKUP_SECTORS: u64 = 33;

/// What a fresh disk of a case's spec is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskSpec {
    /// `size_kib` of zeros, no table.
    Zeroed { size_kib: u64 },
    /// `size_kib` with a GPT of `count` equal, empty partitions.
    Partitioned { size_kib: u64, count: u64 },
    /// A packed recipe.
    Recipe(DiskRecipe),
}

/// One entry of a table: what [`check_kept`] compares.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: String,
    type_guid: Uuid,
    first_lba: u64,
    /// Inclusive, as GPT keeps it.
    last_lba: u64,
}

fn type_of(fs: Fs) -> Type {
    match fs {
        Fs::Raw | Fs::Ext4 => partition_types::LINUX_FS,
        Fs::Fat => partition_types::BASIC,
    }
}

/// The first sector and the length in bytes of each of `count` equal partitions on a
/// disk of `size_bytes`: 1 MiB-aligned when each gets at least 1 MiB that way, else
/// 4 KiB-aligned when each gets at least 4 KiB; `None` when not even that.
pub(crate) fn equal_partitions(size_bytes: u64, count: u64) -> Option<(u64, u64)> {
    let total = size_bytes / SECTOR;
    if count == 0 || total < FIRST_USABLE + BACKUP_SECTORS {
        return None;
    }
    let end = total - BACKUP_SECTORS;
    for align in [ALIGN_WIDE, ALIGN_NARROW] {
        let start = FIRST_USABLE.div_ceil(align) * align;
        if end > start {
            let length = (end - start) / count / align * align;
            if length >= align {
                return Some((start, length * SECTOR));
            }
        }
    }
    None
}

/// The smallest disk (in KiB) whose `count` equal partitions each get `need` bytes.
pub(crate) fn smallest_size_kib(count: u64, need: u64) -> u64 {
    let mut kib = (need.saturating_mul(count) / 1024).max(1);
    while kib < SIZE_KIB_MAX && equal_partitions(kib * 1024, count).is_none_or(|(_, len)| len < need) {
        kib += 1;
    }
    kib
}

/// The layout of `count` partitions named and typed as given.
fn layout(image: &Path, size_kib: u64, parts: &[(String, Fs)]) -> Result<Layout, DiskError> {
    let size_bytes = size_kib * 1024;
    let count = parts.len() as u64;
    let Some((start, length)) = equal_partitions(size_bytes, count) else {
        return Err(refused(
            image,
            format!(
                "{size_kib} KiB is too small for {count} partition{}: the smallest disk is {} KiB",
                if count == 1 { "" } else { "s" },
                smallest_size_kib(count, ALIGN_NARROW * SECTOR)
            ),
        ));
    };
    let partitions = parts
        .iter()
        .enumerate()
        .map(|(i, (name, fs))| PartitionPlace {
            name: name.clone(),
            fs: *fs,
            offset: start * SECTOR + i as u64 * length,
            length,
        })
        .collect();
    Ok(Layout { size_bytes, partitions })
}

fn entries(layout: &Layout) -> Vec<Entry> {
    layout
        .partitions
        .iter()
        .map(|p| Entry {
            name: p.name.clone(),
            type_guid: type_of(p.fs).guid,
            first_lba: p.offset / SECTOR,
            last_lba: (p.offset + p.length) / SECTOR - 1,
        })
        .collect()
}

fn check_size(image: &Path, size_kib: u64) -> Result<(), DiskError> {
    if size_kib == 0 || size_kib > SIZE_KIB_MAX {
        return Err(refused(image, format!("size_kib {size_kib} is out of range: 1 to {SIZE_KIB_MAX}")));
    }
    Ok(())
}

/// A new file of `size_kib` zeros at `path` (sparse; whatever was there is replaced).
pub fn make_zeroed(path: &Path, size_kib: u64) -> Result<(), DiskError> {
    check_size(path, size_kib)?;
    let file = create(path)?;
    file.set_len(size_kib * 1024).map_err(io_err(path, "set the disk's size"))
}

fn create(path: &Path) -> Result<File, DiskError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io_err(path, "create the disk"))
}

/// A new disk of `size_kib` at `path` with a GPT of `count` equal, empty partitions named
/// `part1` to `partN` (type Linux filesystem data).
pub fn make_partitioned(path: &Path, size_kib: u64, count: u64) -> Result<Layout, DiskError> {
    if count == 0 || count > 128 {
        return Err(refused(path, format!("{count} partitions: a GPT here takes 1 to 128")));
    }
    let parts: Vec<(String, Fs)> = (1..=count).map(|i| (format!("part{i}"), Fs::Raw)).collect();
    partitioned(path, size_kib, &parts)
}

/// A zeroed disk with the table of `parts`, for [`make_partitioned`] and the pack.
pub(crate) fn partitioned(path: &Path, size_kib: u64, parts: &[(String, Fs)]) -> Result<Layout, DiskError> {
    check_size(path, size_kib)?;
    let layout = layout(path, size_kib, parts)?;
    make_zeroed(path, size_kib)?;
    let mut file = OpenOptions::new().read(true).write(true).open(path).map_err(io_err(path, "open the disk"))?;
    let gpt_err = |e: gpt::GptError| DiskError::Io {
        path: path.display().to_string(),
        action: "write the partition table",
        source: std::io::Error::other(e.to_string()),
    };
    let total = layout.size_bytes / SECTOR;
    ProtectiveMBR::with_lb_size(u32::try_from(total - 1).unwrap_or(u32::MAX)).overwrite_lba0(&mut file).map_err(
        |e| DiskError::Io {
            path: path.display().to_string(),
            action: "write the protective MBR",
            source: std::io::Error::other(e.to_string()),
        },
    )?;
    let mut disk = GptConfig::new()
        .writable(true)
        .logical_block_size(LogicalBlockSize::Lb512)
        .create_from_device(file, Some(DISK_GUID))
        .map_err(gpt_err)?;
    let mut table = BTreeMap::new();
    for (index, (entry, place)) in entries(&layout).into_iter().zip(&layout.partitions).enumerate() {
        let partition = Partition {
            part_type_guid: type_of(place.fs),
            part_guid: partition_guid(index),
            first_lba: entry.first_lba,
            last_lba: entry.last_lba,
            flags: 0,
            name: entry.name,
        };
        table.insert(index as u32 + 1, partition);
    }
    disk.update_partitions(table).map_err(gpt_err)?;
    let file = disk.write().map_err(gpt_err)?;
    file.sync_all().map_err(io_err(path, "write the partition table"))?;
    Ok(layout)
}

/// The layout a fresh disk of `spec` has (`None` partitions for a zeroed disk).
pub(crate) fn expected_layout(image: &Path, spec: &DiskSpec) -> Result<(u64, Option<Layout>), DiskError> {
    match spec {
        DiskSpec::Zeroed { size_kib } => Ok((size_kib * 1024, None)),
        DiskSpec::Partitioned { size_kib, count } => {
            let parts: Vec<(String, Fs)> = (1..=*count).map(|i| (format!("part{i}"), Fs::Raw)).collect();
            let layout = layout(image, *size_kib, &parts)?;
            Ok((layout.size_bytes, Some(layout)))
        }
        DiskSpec::Recipe(recipe) => {
            let parts: Vec<(String, Fs)> = recipe.partitions.iter().map(|p| (p.name.clone(), p.fs)).collect();
            let layout = layout(image, recipe.size_kib, &parts)?;
            Ok((layout.size_bytes, Some(layout)))
        }
    }
}

/// Why a kept disk's GPT could not be read ([`read_entries`]); a difference of
/// [`check_kept`] says it after "its partition table: ".
#[derive(Debug, thiserror::Error)]
enum TableReadError {
    #[error("cannot open: {0}")]
    Open(#[source] std::io::Error),
    #[error("no valid GPT (both headers checked): {0}")]
    NoGpt(#[source] gpt::GptError),
}

/// The entries of the GPT on `image`, both headers valid, or why not.
fn read_entries(image: &Path) -> Result<Vec<Entry>, TableReadError> {
    let file = File::open(image).map_err(TableReadError::Open)?;
    let disk = GptConfig::new()
        .writable(false)
        .only_valid_headers(true)
        .logical_block_size(LogicalBlockSize::Lb512)
        .open_from_device(file)
        .map_err(TableReadError::NoGpt)?;
    Ok(disk
        .partitions()
        .values()
        .filter(|p| p.is_used())
        .map(|p| Entry {
            name: p.name.clone(),
            type_guid: p.part_type_guid.guid,
            first_lba: p.first_lba,
            last_lba: p.last_lba,
        })
        .collect())
}

/// A disk kept from an earlier boot must be what a fresh disk of `expected` would be in
/// size and, for a partitioned disk or a recipe, in its GPT's entries (count, and each
/// one's name, type GUID, first and last sector). A zeroed disk has no table of the
/// bench's to compare: whatever the guest wrote on it is its data, so only its size
/// counts. Every difference is named; nothing is written.
pub fn check_kept(image: &Path, expected: &DiskSpec) -> Result<(), DiskError> {
    let (size, layout) = expected_layout(image, expected)?;
    let actual = std::fs::metadata(image).map_err(io_err(image, "read the kept disk's size"))?.len();
    let mut differences = Vec::new();
    if actual != size {
        differences.push(format!("its size is {actual} bytes, a fresh disk's {size}"));
    }
    if let Some(layout) = layout {
        let want = entries(&layout);
        match read_entries(image) {
            Err(why) => differences.push(format!("its partition table: {why}")),
            Ok(have) => {
                if have.len() != want.len() {
                    differences.push(format!("it has {} partitions, a fresh disk {}", have.len(), want.len()));
                }
                for (index, (h, w)) in have.iter().zip(&want).enumerate() {
                    let mut say = |what: &str, have: String, want: String| {
                        if have != want {
                            differences
                                .push(format!("partition {} {what} is {have}, a fresh disk's {want}", index + 1));
                        }
                    };
                    say("name", format!("`{}`", h.name), format!("`{}`", w.name));
                    say("type GUID", h.type_guid.to_string(), w.type_guid.to_string());
                    say("first sector", h.first_lba.to_string(), w.first_lba.to_string());
                    say("last sector", h.last_lba.to_string(), w.last_lba.to_string());
                }
            }
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(DiskError::Kept { image: image.display().to_string(), differences })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_that_cannot_be_read_says_which_way() {
        let dir = std::env::temp_dir().join(format!("testbench-disk-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = read_entries(&dir.join("missing.img")).unwrap_err();
        assert!(matches!(&missing, TableReadError::Open(e) if e.kind() == std::io::ErrorKind::NotFound), "{missing}");
        let blank = dir.join("blank.img");
        std::fs::write(&blank, vec![0u8; 64 * 1024]).unwrap();
        let none = read_entries(&blank).unwrap_err();
        assert!(matches!(none, TableReadError::NoGpt(_)), "{none}");
        assert!(none.to_string().starts_with("no valid GPT (both headers checked): "), "{none}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn partitions_are_wide_aligned_when_each_gets_a_mebibyte() {
        // 8 MiB, 2 partitions: from 1 MiB, 3 MiB each (the backup table takes the end).
        assert_eq!(equal_partitions(8 << 20, 2), Some((2048, 3 << 20)));
        // 2 MiB, 1 partition: 1 MiB-aligned would leave less than 1 MiB; 4 KiB it is.
        let (start, len) = equal_partitions(2 << 20, 1).unwrap();
        assert_eq!(start, 40);
        assert_eq!(len % 4096, 0);
        assert!(len < 2 << 20 && len > 1 << 20);
        // Too small for anything.
        assert_eq!(equal_partitions(16 * 1024, 3), None);
    }

    #[test]
    fn the_smallest_size_fits_and_one_less_does_not() {
        for (count, need) in [(1, 4096), (3, 256 * 1024), (2, 3 << 20)] {
            let kib = smallest_size_kib(count, need);
            assert!(equal_partitions(kib * 1024, count).unwrap().1 >= need);
            assert!(equal_partitions((kib - 1) * 1024, count).is_none_or(|(_, len)| len < need));
        }
    }
}
