//! FAT: written with the `fatfs` crate; read back here, from the boot sector and the
//! directory entries, to find where a file's data starts (`fatfs` does not say).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use fatfs::{Date, DateTime, FileSystem, FormatVolumeOptions, FsOptions, Time, TimeProvider};

use crate::stage::sorted_entries;
use crate::{io_err, refused, DiskError, PartitionPlace};

/// The volume ID and label of every FAT partition a pack writes.
pub const VOLUME_ID: u32 = 0x7e57_be0c;
pub const VOLUME_LABEL: [u8; 11] = *b"TESTBENCH  ";

/// The clock of every directory entry a pack writes: 2000-01-01 00:00:00.
#[derive(Debug)]
struct FixedClock;

const FIXED_DATE: Date = Date { year: 2000, month: 1, day: 1 };

impl TimeProvider for FixedClock {
    fn get_current_date(&self) -> Date {
        FIXED_DATE
    }

    fn get_current_date_time(&self) -> DateTime {
        DateTime { date: FIXED_DATE, time: Time { hour: 0, min: 0, sec: 0, millis: 0 } }
    }
}

static CLOCK: FixedClock = FixedClock;

fn fat_err(image: &Path, place: &PartitionPlace, what: &str) -> impl FnOnce(std::io::Error) -> DiskError {
    let message = format!("partition `{}`: {what}", place.name);
    let image = image.to_path_buf();
    move |e| refused(&image, format!("{message}: {e}"))
}

/// Format `place` as FAT and copy the tree under `stage` into it.
pub(crate) fn write(image: &File, image_path: &Path, place: &PartitionPlace, stage: &Path) -> Result<(), DiskError> {
    let options = FormatVolumeOptions::new().volume_id(VOLUME_ID).volume_label(VOLUME_LABEL);
    fatfs::format_volume(Window::new(image, place), options).map_err(fat_err(image_path, place, "format FAT"))?;
    let fs =
        FileSystem::new(Window::new(image, place), FsOptions::new().time_provider(&CLOCK).update_accessed_date(false))
            .map_err(fat_err(image_path, place, "open the new FAT"))?;
    copy_tree(&fs.root_dir(), stage, image_path, place)?;
    fs.unmount().map_err(fat_err(image_path, place, "close the FAT"))
}

fn copy_tree(
    dir: &fatfs::Dir<'_, Window<'_>>,
    from: &Path,
    image: &Path,
    place: &PartitionPlace,
) -> Result<(), DiskError> {
    for (name, path, kind) in sorted_entries(from)? {
        let Some(name) = name.to_str() else {
            return Err(refused(&path, "a FAT name must be UTF-8"));
        };
        if kind.is_dir() {
            let sub = dir.create_dir(name).map_err(fat_err(image, place, &format!("make directory `{name}`")))?;
            copy_tree(&sub, &path, image, place)?;
        } else {
            let bytes = std::fs::read(&path).map_err(io_err(&path, "read a stage file"))?;
            let mut file = dir.create_file(name).map_err(fat_err(image, place, &format!("make file `{name}`")))?;
            file.write_all(&bytes).map_err(fat_err(image, place, &format!("write file `{name}`")))?;
        }
    }
    Ok(())
}

/// The numbers of a FAT boot sector this module uses.
struct Bpb {
    bytes_per_sector: u64,
    sectors_per_cluster: u64,
    fat_start: u64,
    root_start: u64,
    root_bytes: u64,
    data_start: u64,
    clusters: u64,
    kind: Kind,
    root_cluster: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fat12,
    Fat16,
    Fat32,
}

fn u16_at(b: &[u8], at: usize) -> u64 {
    u16::from_le_bytes([b[at], b[at + 1]]) as u64
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as u64
}

/// Reads within one partition, with the partition's name in every refusal.
struct Part<'a> {
    image: &'a File,
    path: &'a Path,
    place: &'a PartitionPlace,
}

impl Part<'_> {
    fn refuse(&self, message: impl std::fmt::Display) -> DiskError {
        refused(self.path, format!("partition `{}` (fat): {message}", self.place.name))
    }

    fn read(&self, at: u64, len: u64) -> Result<Vec<u8>, DiskError> {
        if at + len > self.place.length {
            return Err(self.refuse(format!("a structure at byte {at} runs past the partition's end")));
        }
        let mut buffer = vec![0u8; len as usize];
        self.image
            .read_exact_at(&mut buffer, self.place.offset + at)
            .map_err(io_err(self.path, "read a FAT partition"))?;
        Ok(buffer)
    }

    fn bpb(&self) -> Result<Bpb, DiskError> {
        let b = self.read(0, 512)?;
        if b[510] != 0x55 || b[511] != 0xaa {
            return Err(self.refuse("no boot sector signature (0x55 0xAA at 510)"));
        }
        let bytes_per_sector = u16_at(&b, 11);
        let sectors_per_cluster = b[13] as u64;
        let reserved = u16_at(&b, 14);
        let fats = b[16] as u64;
        let root_entries = u16_at(&b, 17);
        let total = if u16_at(&b, 19) != 0 { u16_at(&b, 19) } else { u32_at(&b, 32) };
        let fat_size = if u16_at(&b, 22) != 0 { u16_at(&b, 22) } else { u32_at(&b, 36) };
        if !bytes_per_sector.is_power_of_two()
            || !(512..=4096).contains(&bytes_per_sector)
            || !sectors_per_cluster.is_power_of_two()
            || reserved == 0
            || fats == 0
        {
            return Err(self.refuse("the boot sector's BPB is not a FAT one"));
        }
        let root_sectors = (root_entries * 32).div_ceil(bytes_per_sector);
        let first_data = reserved + fats * fat_size + root_sectors;
        if total <= first_data {
            return Err(self.refuse("the boot sector leaves no data area"));
        }
        let clusters = (total - first_data) / sectors_per_cluster;
        let kind = match clusters {
            0..4085 => Kind::Fat12,
            4085..65525 => Kind::Fat16,
            _ => Kind::Fat32,
        };
        Ok(Bpb {
            bytes_per_sector,
            sectors_per_cluster,
            fat_start: reserved * bytes_per_sector,
            root_start: (reserved + fats * fat_size) * bytes_per_sector,
            root_bytes: root_entries * 32,
            data_start: first_data * bytes_per_sector,
            clusters,
            kind,
            root_cluster: u32_at(&b, 44) as u32,
        })
    }

    fn cluster_offset(&self, bpb: &Bpb, cluster: u64) -> Result<u64, DiskError> {
        if cluster < 2 || cluster >= bpb.clusters + 2 {
            return Err(self.refuse(format!("cluster {cluster} is outside the data area")));
        }
        Ok(bpb.data_start + (cluster - 2) * bpb.sectors_per_cluster * bpb.bytes_per_sector)
    }

    /// The next cluster of a chain, `None` at its end.
    fn next(&self, bpb: &Bpb, cluster: u64) -> Result<Option<u64>, DiskError> {
        let (value, end) = match bpb.kind {
            Kind::Fat12 => {
                let b = self.read(bpb.fat_start + cluster + cluster / 2, 2)?;
                let v = u16_at(&b, 0);
                (if cluster % 2 == 1 { v >> 4 } else { v & 0xfff }, 0xff8)
            }
            Kind::Fat16 => (u16_at(&self.read(bpb.fat_start + cluster * 2, 2)?, 0), 0xfff8),
            Kind::Fat32 => (u32_at(&self.read(bpb.fat_start + cluster * 4, 4)?, 0) & 0x0fff_ffff, 0x0fff_fff8),
        };
        Ok(if value >= end { None } else { Some(value) })
    }

    /// A directory's bytes: the fixed root of FAT12/16, else its cluster chain.
    fn dir_bytes(&self, bpb: &Bpb, first_cluster: Option<u64>) -> Result<Vec<u8>, DiskError> {
        let cluster_bytes = bpb.sectors_per_cluster * bpb.bytes_per_sector;
        let mut cluster = match first_cluster {
            None if bpb.kind != Kind::Fat32 => return self.read(bpb.root_start, bpb.root_bytes),
            None => bpb.root_cluster as u64,
            Some(c) => c,
        };
        let mut bytes = Vec::new();
        for _ in 0..bpb.clusters {
            bytes.extend(self.read(self.cluster_offset(bpb, cluster)?, cluster_bytes)?);
            match self.next(bpb, cluster)? {
                Some(next) => cluster = next,
                None => return Ok(bytes),
            }
        }
        Err(self.refuse("a directory's cluster chain loops"))
    }
}

/// One directory entry: its long name if it has one, its short name, first cluster,
/// size and whether it is a directory.
struct DirEntry {
    long: Option<String>,
    short: String,
    cluster: u64,
    size: u64,
    is_dir: bool,
}

fn entries(bytes: &[u8]) -> Vec<DirEntry> {
    let mut found = Vec::new();
    let mut long: Vec<(u8, Vec<u16>)> = Vec::new();
    for e in bytes.chunks_exact(32) {
        match e[0] {
            0x00 => break,
            0xe5 => {
                long.clear();
                continue;
            }
            _ => {}
        }
        let attr = e[11];
        if attr == 0x0f {
            let mut units = Vec::new();
            for range in [1..11, 14..26, 28..32] {
                units.extend(e[range].chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])));
            }
            long.push((e[0] & 0x1f, units));
            continue;
        }
        if attr & 0x08 != 0 {
            long.clear();
            continue;
        }
        long.sort_by_key(|(seq, _)| *seq);
        let units: Vec<u16> = long.iter().flat_map(|(_, u)| u.iter().copied()).take_while(|&u| u != 0).collect();
        let long_name = (!long.is_empty()).then(|| String::from_utf16_lossy(&units));
        long.clear();
        let base = String::from_utf8_lossy(&e[0..8]).trim_end().to_string();
        let ext = String::from_utf8_lossy(&e[8..11]).trim_end().to_string();
        let short = if ext.is_empty() { base } else { format!("{base}.{ext}") };
        found.push(DirEntry {
            long: long_name,
            short,
            cluster: (u16_at(e, 20) << 16) | u16_at(e, 26),
            size: u32_at(e, 28),
            is_dir: attr & 0x10 != 0,
        });
    }
    found
}

/// The byte offset, within its partition, of the first data byte of `file` (a path of
/// `/`-separated names from the root), found from the boot sector and the directories.
pub(crate) fn first_data_byte(image: &File, path: &Path, place: &PartitionPlace, file: &str) -> Result<u64, DiskError> {
    let part = Part { image, path, place };
    let bpb = part.bpb()?;
    let names: Vec<&str> = file.split('/').filter(|n| !n.is_empty()).collect();
    let mut dir: Option<u64> = None;
    for (depth, name) in names.iter().enumerate() {
        let bytes = part.dir_bytes(&bpb, dir)?;
        // FAT looks names up without regard to case, by the long name or the short one.
        let wanted = name.to_lowercase();
        let found = entries(&bytes).into_iter().find(|e| {
            e.long.as_ref().is_some_and(|long| long.to_lowercase() == wanted) || e.short.eq_ignore_ascii_case(name)
        });
        let Some(entry) = found else {
            return Err(part.refuse(format!("no `{}` in the FAT", names[..=depth].join("/"))));
        };
        let last = depth + 1 == names.len();
        if last {
            if entry.is_dir {
                return Err(part.refuse(format!("`{file}` is a directory, not a file")));
            }
            if entry.size == 0 || entry.cluster == 0 {
                return Err(part.refuse(format!("`{file}` is empty: it has no data byte to flip")));
            }
            return part.cluster_offset(&bpb, entry.cluster);
        }
        if !entry.is_dir {
            return Err(part.refuse(format!("`{}` is a file, not a directory", names[..=depth].join("/"))));
        }
        dir = Some(entry.cluster);
    }
    Err(part.refuse("no file named"))
}

/// A partition's byte range of an open disk as a stream of its own (for `fatfs`):
/// reads end at the range's end and writes past it fail.
#[derive(Debug)]
pub(crate) struct Window<'a> {
    file: &'a File,
    start: u64,
    len: u64,
    pos: u64,
}

impl<'a> Window<'a> {
    pub(crate) fn new(file: &'a File, place: &PartitionPlace) -> Window<'a> {
        Window { file, start: place.offset, len: place.length, pos: 0 }
    }
}

impl Read for Window<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..n], self.start + self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for Window<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pos + buf.len() as u64 > self.len {
            return Err(io::Error::other("a write past the partition's end"));
        }
        let n = self.file.write_at(buf, self.start + self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for Window<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match pos {
            Some(pos) => {
                self.pos = pos;
                Ok(pos)
            }
            None => Err(io::Error::new(io::ErrorKind::InvalidInput, "a seek before the partition's start")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fatfs::FatType;

    /// Each FAT type, a root and a subdirectory of many clusters (512-byte clusters hold
    /// 16 entries; long names take more): every file's first data byte is found where
    /// the file's own bytes start, each file's bytes being its own.
    #[test]
    fn the_first_data_byte_of_every_file_of_every_fat_type() {
        for (kind, mib) in [(FatType::Fat12, 1), (FatType::Fat16, 8), (FatType::Fat32, 40)] {
            let path = std::env::temp_dir().join(format!("testbench-disk-fat-{kind:?}-{}", std::process::id()));
            let image = File::options().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
            image.set_len(mib << 20).unwrap();
            let place = PartitionPlace { name: "p".into(), fs: crate::Fs::Fat, offset: 0, length: mib << 20 };
            let options = FormatVolumeOptions::new().fat_type(kind).bytes_per_cluster(512);
            fatfs::format_volume(Window::new(&image, &place), options).unwrap();
            let mut files = Vec::new();
            {
                let fs = FileSystem::new(Window::new(&image, &place), FsOptions::new().time_provider(&CLOCK)).unwrap();
                assert_eq!(fs.fat_type(), kind);
                let dir = fs.root_dir().create_dir("A Directory With A Long Name").unwrap();
                for i in 0..40 {
                    let name = if i % 2 == 0 { format!("file number {i:02}.text") } else { format!("F{i:02}.TXT") };
                    let bytes = format!("{}{i:02}", (b'a' + i as u8 % 26) as char);
                    dir.create_file(&name).unwrap().write_all(bytes.as_bytes()).unwrap();
                    files.push((format!("A Directory With A Long Name/{name}"), bytes));
                }
                drop(dir);
                fs.root_dir().create_file("top.bin").unwrap().write_all(b"Z top").unwrap();
                files.push(("top.bin".into(), "Z top".into()));
                fs.unmount().unwrap();
            }
            for (name, bytes) in &files {
                let at = first_data_byte(&image, &path, &place, name).unwrap();
                let mut byte = [0u8];
                image.read_exact_at(&mut byte, at).unwrap();
                assert_eq!(byte[0], bytes.as_bytes()[0], "{kind:?} {name}");
                let mut all = vec![0u8; bytes.len()];
                image.read_exact_at(&mut all, at).unwrap();
                assert_eq!(all, bytes.as_bytes(), "{kind:?} {name}");
            }
            let error = first_data_byte(&image, &path, &place, "A Directory With A Long Name").unwrap_err();
            assert!(error.to_string().ends_with("is a directory, not a file"), "{error}");
            std::fs::remove_file(&path).unwrap();
        }
    }
}
