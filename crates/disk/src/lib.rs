//! Disk images for boot cases.
//!
//! A case's disk is one of three kinds ([`DiskSpec`]): a zeroed file of `size_kib`
//! ([`make_zeroed`]), a GPT of `count` equal partitions with nothing in them
//! ([`make_partitioned`]), or a recipe ([`DiskRecipe`], a TOML file) whose partitions
//! each hold raw bytes, an ext4 file system made by `mke2fs -d` from a staged tree, or a
//! FAT file system this crate writes itself with the `fatfs` crate ([`pack`]). After a
//! pack a case may damage the disk on purpose: one bit of a file's data where the file
//! system keeps it ([`flip_file_bit`]) or one bit of a partition's file-system header
//! ([`flip_header_bit`]). A disk kept from an earlier boot is checked against the table a
//! fresh one would have ([`check_kept`]) and refused, never reformatted, when it differs:
//! its size, and for a partitioned disk or a recipe its GPT's entries (count, names, type
//! GUIDs, first and last sectors, both headers valid). A zeroed disk carries no table of
//! the bench's, so only its size is checked: a table the guest wrote on it is its data.
//!
//! The crate prints nothing and touches only the files it is told to write or read (and
//! the scratch directory [`pack`] is given). Its child processes (`mke2fs`, `debugfs`) go
//! through `testbench_process::Cmd`, each with a deadline.
//!
//! # A recipe
//!
//! ```toml
//! size_kib = 8192                    # the whole disk
//! [[partition]]                      # one or more; the disk is cut into equal partitions
//! name = "data"                      # the GPT partition name: unique, 1 to 36 UTF-16 units
//! fs = "ext4"                        # "raw" | "ext4" | "fat"
//! stage = "tests/data/disks/tree"    # ext4 and fat: a directory, relative to the workspace root
//! # file = "tests/data/disks/blob"   # raw only, optional: the bytes at the partition's start
//! ```
//!
//! Each file system needs a smallest partition ([`Fs::min_partition_bytes`]): raw 4 KiB
//! (or its file's size, rounded up to 4 KiB), ext4 256 KiB, FAT 256 KiB. A recipe whose
//! disk is too small is refused with the smallest `size_kib` that fits; `size_kib` runs
//! from 1 to 2^32 (4 TiB). Every refusal names the recipe, the field (`partition[1].fs`,
//! `size_kib`, `line 3` for the syntax) and what the field takes, with the nearest name
//! for an unknown key or file system. A stage holds directories and regular files only
//! (a link, device or socket is refused at the pack); a FAT stage's names must be UTF-8
//! and names FAT takes. Whether a stage fits its partition is found by packing it:
//! `mke2fs` or `fatfs` says so.
//!
//! # The partition table
//!
//! 512-byte sectors, a protective MBR, the primary GPT (header at LBA 1, 128 entries)
//! and its backup at the disk's end, written with the `gpt` crate. The partitions are
//! equal and back to back. They start on 1 MiB boundaries (the first at 1 MiB, each
//! length a multiple of 1 MiB) when every partition gets at least 1 MiB that way;
//! otherwise on 4 KiB boundaries (the first at LBA 40, lengths multiples of 4 KiB). What
//! is left at the end stays outside every partition. The disk's GUID and each
//! partition's GUID are fixed ([`DISK_GUID`], [`partition_guid`]), so the table is the same
//! bytes every time. Partition types: ext4 and raw take "Linux filesystem data"
//! (`0FC63DAF-8483-4772-8E79-3D69D8477DE4`), FAT takes "Microsoft basic data"
//! (`EBD0A0A2-B9E5-4433-87C0-68B6B72699C7`). [`make_partitioned`] names its partitions
//! `part1` to `partN`, all Linux filesystem data.
//!
//! # Determinism
//!
//! Two packs of one recipe give the same bytes, from any checkout, by any user, at any
//! time (tests pack twice, and once from a copy of the fixtures with other modes and
//! times):
//! - the table: fixed GUIDs, the layout a function of the size and the count alone;
//! - ext4: the stage is copied into the scratch directory, every copy given mode 0755
//!   (directories, and files their owner may run) or 0644 and [`FIXED_TIME`] as access
//!   and modification time; `mke2fs` (with `LC_ALL=C`, so it takes each directory's
//!   entries in byte order) runs with `E2FSPROGS_FAKE_TIME` (creation and check times,
//!   inode generations), a fixed UUID (`-U`) and directory hash seed (`-E hash_seed=`),
//!   `root_owner=0:0`, `no_copy_xattrs` (a host's labels stay on the host), and
//!   `-T default` so the usage type is not guessed from the size;
//!   `mke2fs -d` copies each inode's change time (which no one can set) and owner (the
//!   user packing) from the copy, so `debugfs -w` then sets every inode's `ctime` to
//!   [`FIXED_TIME`] and its owner to 0:0;
//! - FAT: a fixed volume ID and label, every directory entry's times from a fixed clock
//!   (2000-01-01 00:00:00), the stage's entries written in byte order of their names;
//! - what still counts besides the stage's names and bytes: which e2fsprogs packs (its
//!   version, and `/etc/mke2fs.conf`'s `[defaults]`), and for each file whether its owner
//!   may run it.
//!
//! # Flips
//!
//! Bit 0 of one byte, found by reading the file system's own structures (never by
//! searching for the file's bytes, which two files may share):
//! - [`flip_file_bit`]: the file's first data byte. ext4: the physical block of the
//!   file's logical block 0 from `debugfs -R "bmap PATH 0"`. FAT: the first cluster in the
//!   file's directory entry, found by walking the directories from the boot sector (FAT12,
//!   FAT16 and FAT32; a name matches its long or its short name without regard to case,
//!   as FAT looks names up).
//!   Raw partitions hold no files: refused. An empty file has no data byte: refused.
//! - [`flip_header_bit`]: ext4, the superblock's magic (partition offset 1024 + 56, 0xEF53
//!   becomes 0xEF52: the kernel, `debugfs` and `e2fsck` refuse the primary superblock).
//!   FAT: the high byte of the boot sector's bytes per sector (partition offset 12, 512
//!   becomes 768, not a power of two, which Linux's FAT driver refuses as a "bogus logical
//!   sector size"). Raw: the partition's first byte.

mod fat;
mod flip;
mod pack;
mod recipe;
mod stage;
mod table;

use std::path::{Path, PathBuf};

pub use flip::{flip_file_bit, flip_header_bit, FlipNote};
pub use pack::{pack, FIXED_TIME};
pub use recipe::{DiskRecipe, PartitionRecipe};
pub use table::{check_kept, make_partitioned, make_zeroed, partition_guid, DiskSpec, DISK_GUID, SECTOR};

/// A partition's file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    /// No file system: the bytes of a file at the partition's start, zeros after.
    Raw,
    /// ext4, made by `mke2fs -d` from a staged tree.
    Ext4,
    /// FAT (12, 16 or 32 as `fatfs` chooses for the size), written by this crate.
    Fat,
}

impl Fs {
    pub const NAMES: [&'static str; 3] = ["raw", "ext4", "fat"];

    pub fn name(self) -> &'static str {
        match self {
            Fs::Raw => "raw",
            Fs::Ext4 => "ext4",
            Fs::Fat => "fat",
        }
    }

    pub fn from_name(name: &str) -> Option<Fs> {
        match name {
            "raw" => Some(Fs::Raw),
            "ext4" => Some(Fs::Ext4),
            "fat" => Some(Fs::Fat),
            _ => None,
        }
    }

    /// The smallest partition this file system is packed into (raw: without a file).
    pub fn min_partition_bytes(self) -> u64 {
        match self {
            Fs::Raw => 4096,
            Fs::Ext4 => 256 * 1024,
            Fs::Fat => 256 * 1024,
        }
    }
}

impl std::fmt::Display for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one partition sits on the disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionPlace {
    pub name: String,
    pub fs: Fs,
    /// From the disk's first byte.
    pub offset: u64,
    pub length: u64,
}

/// What a pack made: the disk's size and its partitions in table order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub size_bytes: u64,
    pub partitions: Vec<PartitionPlace>,
}

impl Layout {
    pub fn partition(&self, name: &str) -> Option<&PartitionPlace> {
        self.partitions.iter().find(|p| p.name == name)
    }
}

/// Everything this crate refuses or fails at, each naming the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// A recipe refused: the file, the field as a path into it (`partition[1].fs`;
    /// `line N` for a syntax error, `toml` when its place is unknown; `file` when it
    /// cannot be read), and what is wrong and what is accepted.
    #[error("{file}: {field}: {message}")]
    Recipe { file: String, field: String, message: String },
    /// A file could not be read or written.
    #[error("{path}: {action}: {source}")]
    Io { path: String, action: &'static str, source: std::io::Error },
    /// A child process (`mke2fs`, `debugfs`) failed or could not run.
    #[error("{command}: {message}")]
    Tool { command: String, message: String },
    /// Asked for something the disk does not have or cannot give (a flip of a raw
    /// partition's file, a partition name not in the layout, a disk too small).
    #[error("{image}: {message}")]
    Refused { image: String, message: String },
    /// A kept disk that is not what a fresh disk of its spec would be.
    #[error("{image}: kept disk refused (never reformatted): {}", differences.join("; "))]
    Kept { image: String, differences: Vec<String> },
}

pub(crate) fn io_err<'a>(path: &'a Path, action: &'static str) -> impl FnOnce(std::io::Error) -> DiskError + 'a {
    move |source| DiskError::Io { path: path.display().to_string(), action, source }
}

pub(crate) fn refused(image: &Path, message: impl Into<String>) -> DiskError {
    DiskError::Refused { image: image.display().to_string(), message: message.into() }
}

/// "; did you mean `a`?" or nothing: the nearest of `candidates` to `word`, by the rule
/// the case files use (`testbench-suggest`).
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    let question = testbench_suggest::did_you_mean(&testbench_suggest::nearest(word, candidates.iter().copied()));
    if question.is_empty() {
        question
    } else {
        format!("; {question}")
    }
}

/// `root.join(path)`, for paths a recipe gives relative to the workspace root.
pub(crate) fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path)
}
