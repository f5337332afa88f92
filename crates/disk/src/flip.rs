//! Hostile disks: one bit flipped after the pack, found through the file system's own
//! structures.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use testbench_process::Cmd;

use crate::pack::{run, tool, DEBUGFS_DEADLINE};
use crate::{fat, io_err, refused, DiskError, Fs, Layout, PartitionPlace};

/// Where a flip went, for the case's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlipNote {
    pub partition: String,
    /// What the byte is, in words.
    pub what: String,
    /// The byte's offset from the disk's first byte.
    pub offset: u64,
    /// The bit flipped within that byte (0 is the least significant).
    pub bit: u8,
    pub before: u8,
    pub after: u8,
}

impl std::fmt::Display for FlipNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "flipped bit {} of disk byte {} (0x{:02x} -> 0x{:02x}) in partition `{}`: {}",
            self.bit, self.offset, self.before, self.after, self.partition, self.what
        )
    }
}

fn place<'a>(image: &Path, layout: &'a Layout, partition: &str) -> Result<&'a PartitionPlace, DiskError> {
    layout.partition(partition).ok_or_else(|| {
        let names: Vec<String> = layout.partitions.iter().map(|p| format!("`{}`", p.name)).collect();
        refused(image, format!("no partition `{partition}`; the disk has {}", names.join(", ")))
    })
}

fn flip(image: &Path, place: &PartitionPlace, offset: u64, what: String) -> Result<FlipNote, DiskError> {
    let file =
        OpenOptions::new().read(true).write(true).open(image).map_err(io_err(image, "open the disk to flip a bit"))?;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).map_err(io_err(image, "read the byte to flip"))?;
    let before = byte[0];
    byte[0] ^= 1;
    file.write_all_at(&byte, offset).map_err(io_err(image, "write the flipped byte"))?;
    file.sync_all().map_err(io_err(image, "write the flipped byte"))?;
    Ok(FlipNote { partition: place.name.clone(), what, offset, bit: 0, before, after: byte[0] })
}

/// The file's path as the file systems take it: `/`-separated names from the root.
fn clean(image: &Path, file: &str) -> Result<String, DiskError> {
    let names: Vec<&str> = file.split('/').filter(|n| !n.is_empty()).collect();
    if names.is_empty() || names.iter().any(|n| *n == "." || *n == "..") || file.contains(['"', '\n', '\0']) {
        return Err(refused(image, format!("`{file}` is not a file's path from the partition's root")));
    }
    Ok(names.join("/"))
}

/// Flip bit 0 of `file`'s first data byte where `partition`'s file system holds it
/// (ext4: the block `debugfs`'s `bmap` gives for logical block 0; FAT: the first cluster
/// in its directory entry). Raw partitions hold no files; empty files no data byte.
pub fn flip_file_bit(image: &Path, layout: &Layout, partition: &str, file: &str) -> Result<FlipNote, DiskError> {
    let place = place(image, layout, partition)?;
    let file = clean(image, file)?;
    let within = match place.fs {
        Fs::Raw => {
            return Err(refused(image, format!("partition `{partition}` is raw: it holds no files, so no `{file}`")))
        }
        Fs::Ext4 => ext4_first_data_byte(image, place, &file)?,
        Fs::Fat => {
            let disk = File::open(image).map_err(io_err(image, "open the disk"))?;
            fat::first_data_byte(&disk, image, place, &file)?
        }
    };
    flip(image, place, place.offset + within, format!("the first data byte of `{file}` ({})", place.fs))
}

/// Flip bit 0 of one byte of `partition`'s file-system header: ext4's superblock magic,
/// FAT's bytes per sector (512 becomes 768), a raw partition's first byte.
pub fn flip_header_bit(image: &Path, layout: &Layout, partition: &str) -> Result<FlipNote, DiskError> {
    let place = place(image, layout, partition)?;
    let disk = File::open(image).map_err(io_err(image, "open the disk"))?;
    let mut head = [0u8; 2048];
    disk.read_exact_at(&mut head, place.offset).map_err(io_err(image, "read the partition's header"))?;
    match place.fs {
        Fs::Raw => flip(image, place, place.offset, "the raw partition's first byte".into()),
        Fs::Ext4 => {
            if head[1080..1082] != [0x53, 0xef] {
                return Err(refused(image, format!("partition `{partition}` has no ext4 superblock magic to flip")));
            }
            flip(image, place, place.offset + 1080, "the ext4 superblock's magic (0xEF53 becomes 0xEF52)".into())
        }
        Fs::Fat => {
            if head[510..512] != [0x55, 0xaa] || head[11..13] != [0x00, 0x02] {
                return Err(refused(
                    image,
                    format!("partition `{partition}` has no FAT boot sector of 512-byte sectors"),
                ));
            }
            flip(image, place, place.offset + 12, "the FAT boot sector's bytes per sector (512 becomes 768)".into())
        }
    }
}

/// `debugfs` on the partition's range of the disk (e2fsprogs' `?offset=` option).
fn debugfs(image: &Path, place: &PartitionPlace, request: &str) -> Result<String, DiskError> {
    let name = image.to_str().filter(|s| !s.contains('?')).ok_or_else(|| {
        refused(image, "debugfs reads a disk through `PATH?offset=N`: the disk's path must be UTF-8 without `?`")
    })?;
    let cmd = Cmd::new(tool("debugfs"), "debugfs to find a file's block", DEBUGFS_DEADLINE)
        .env("LC_ALL", "C")
        .env("DEBUGFS_PAGER", "__none__")
        .arg("-R")
        .arg(request)
        .arg(format!("{name}?offset={}", place.offset));
    Ok(String::from_utf8_lossy(&run(cmd, true)?).into_owned())
}

fn ext4_first_data_byte(image: &Path, place: &PartitionPlace, file: &str) -> Result<u64, DiskError> {
    let disk = File::open(image).map_err(io_err(image, "open the disk"))?;
    let mut sb = [0u8; 1024];
    disk.read_exact_at(&mut sb, place.offset + 1024).map_err(io_err(image, "read the ext4 superblock"))?;
    if sb[56..58] != [0x53, 0xef] {
        return Err(refused(image, format!("partition `{}` has no ext4 superblock", place.name)));
    }
    let log = u32::from_le_bytes([sb[24], sb[25], sb[26], sb[27]]);
    if log > 6 {
        return Err(refused(
            image,
            format!("partition `{}`: ext4 block size 1024 << {log} is not one ext4 uses", place.name),
        ));
    }
    let block_size = 1024u64 << log;
    let refuse = |message: String| refused(image, format!("partition `{}` (ext4): {message}", place.name));
    let stat = debugfs(image, place, &format!("stat \"/{file}\""))?;
    if !stat.contains("Type: regular") {
        return Err(refuse(format!("`{file}` is not a regular file")));
    }
    let size = stat
        .split_whitespace()
        .skip_while(|w| *w != "Size:")
        .nth(1)
        .and_then(|w| w.parse::<u64>().ok())
        .ok_or_else(|| refuse(format!("debugfs's stat of `{file}` gives no size")))?;
    if size == 0 {
        return Err(refuse(format!("`{file}` is empty: it has no data byte to flip")));
    }
    let bmap = debugfs(image, place, &format!("bmap \"/{file}\" 0"))?;
    let block: u64 =
        bmap.trim().parse().map_err(|_| refuse(format!("debugfs's bmap of `{file}` gave `{}`", bmap.trim())))?;
    if block == 0 {
        return Err(refuse(format!("`{file}` has no block for its first byte (a hole or inline data)")));
    }
    if (block + 1) * block_size > place.length {
        return Err(refuse(format!("`{file}`'s block {block} lies past the partition's end")));
    }
    Ok(block * block_size)
}
