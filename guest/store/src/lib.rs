//! A small crash-consistent record store on a block device (docs/reference-guest.md,
//! "The store").
//!
//! The device is reached through [`BlockDevice`], which carries its geometry: a sector of
//! [`MIN_SECTOR`]..=[`MAX_SECTOR`] bytes (any size in that range, 520 too) and a count of
//! up to 2^64 - 1 sectors. Every sum of sector numbers is checked: nothing wraps.
//!
//! The layout, little-endian:
//!
//! - sectors 0 and 1 are the two commit slots. A commit (48 bytes, the rest of the
//!   sector zero) holds its sequence number, the geometry it was made for, the log's head
//!   (the first sector past the last record) and the number of records. Commit `n` lives
//!   in slot `n % 2`, so writing commit `n + 1` never touches commit `n`.
//! - from sector 2 on, the log: records one after another, each a 24-byte header (its
//!   number in the log, a key, the value's length) and the value, padded with zeros to
//!   whole sectors.
//!
//! Every byte in use (both slots, every record sector up to the head, padding included)
//! is under a CRC-32C: a flipped bit anywhere in it is found, and a read that meets one is
//! refused with [`Error::Inconsistent`], never returned.
//!
//! Crash consistency comes from the order of writes and flushes. [`Store::append`] writes
//! the record past the head, flushes, then writes the next commit (into the slot of the
//! older one) and flushes again. A power cut anywhere leaves either the old commit (the
//! record past its head is ignored) or the new one (whose record was made durable by the
//! first flush): the old state or the new, never a mix. This holds on a device whose
//! sector writes are atomic, as the host fuzzer's disk world assumes: unflushed writes
//! may be lost, any of them, in any order, but a sector is written whole or not at all.
//! A failed request makes the call fail and poisons the store (every later call is
//! [`Error::Poisoned`] until it is mounted again), as the device's state is then unknown.
//!
//! [`check`] reads an image and names every inconsistency it finds. [`Store::mount`]
//! refuses on the first it finds in the two commits, and [`Store::get`] on the first in
//! the log it reads. One the checker names is refused by neither: an older commit that
//! does not end on a record boundary of the newer log, which no read uses once both
//! commits are valid.
//!
//! The `records-unchecked` feature stops the records' checksums from being checked (a
//! must-fail self-check's build, `store-flip-unchecked`; never a guest's build).

#![no_std]
#![forbid(unsafe_code)]

use crc::{Crc, CRC_32_ISCSI};

/// CRC-32C (Castagnoli).
const CRC: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);

/// The smallest and largest sector the store works on, in bytes.
pub const MIN_SECTOR: usize = 512;
pub const MAX_SECTOR: usize = 4096;
/// The longest value.
pub const MAX_VALUE: usize = 65_536;
/// The first sector of the log (0 and 1 are the commit slots).
pub const FIRST_RECORD: u64 = 2;
/// The fewest sectors a store needs: the two slots and one record.
pub const MIN_SECTORS: u64 = 3;
/// A commit's bytes, and a record's header.
pub const COMMIT_LEN: usize = 48;
pub const RECORD_HEADER: usize = 24;
/// Where the checksum of a commit or a record starts: everything after its magic and
/// the checksum itself.
const SUMMED_FROM: usize = 8;
const COMMIT_MAGIC: u32 = u32::from_le_bytes(*b"TBsc");
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"TBsr");
const VERSION: u32 = 1;

/// A request the device failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoError;

/// A block device: its geometry, and whole-sector reads and writes.
pub trait BlockDevice {
    /// Bytes in a sector.
    fn sector_size(&self) -> usize;
    /// Sectors on the device.
    fn sector_count(&self) -> u64;
    /// Reads sector `sector` into `buf` (one sector long).
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError>;
    /// Writes `buf` (one sector long) to sector `sector`; durable only after a flush.
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError>;
    /// Makes every write before it durable.
    fn flush(&mut self) -> Result<(), IoError>;
}

impl<D: BlockDevice + ?Sized> BlockDevice for &mut D {
    fn sector_size(&self) -> usize {
        (**self).sector_size()
    }
    fn sector_count(&self) -> u64 {
        (**self).sector_count()
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        (**self).read(sector, buf)
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        (**self).write(sector, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        (**self).flush()
    }
}

/// What is wrong with an image, as [`check`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inconsistency {
    /// The device's sector size is not in MIN_SECTOR..=MAX_SECTOR, or it has fewer than
    /// MIN_SECTORS sectors.
    DeviceGeometry { sector_size: usize, sector_count: u64 },
    /// A sector could not be read.
    Unreadable { sector: u64 },
    /// A commit slot's magic, version or checksum is wrong.
    SlotDamaged { slot: u64 },
    /// A commit in the slot its sequence number does not name.
    SlotMisplaced { slot: u64, seq: u64 },
    /// A commit made for another geometry than the device's.
    SlotGeometry { slot: u64, sector_size: u32, sector_count: u64 },
    /// A commit's head outside FIRST_RECORD..=sector count.
    HeadOutOfRange { slot: u64, head: u64 },
    /// A commit counts more records than its log has sectors.
    TooManyRecords { slot: u64, records: u64 },
    /// The two commits' sequence numbers are not consecutive.
    NotConsecutive { older: u64, newer: u64 },
    /// The older commit's log is not a prefix of the newer's.
    OlderNotPrefix { head: u64, records: u64 },
    /// No record starts where one must (its magic is wrong); the walk stops here.
    RecordMissing { sector: u64, index: u64 },
    /// A record's length is past MAX_VALUE or runs past the head; the walk stops here.
    RecordTooLong { sector: u64, index: u64, len: u64 },
    /// A record's checksum fails.
    RecordDamaged { sector: u64, index: u64 },
    /// A record's number is not its place in the log.
    RecordMisnumbered { sector: u64, index: u64, found: u64 },
    /// The commit counts other than the records its log holds.
    RecordCount { commit: u64, found: u64 },
}

/// Why a call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The device failed a request (a flush when `sector` is None).
    Io { sector: Option<u64> },
    /// A sector size the store does not work on.
    BadSectorSize(usize),
    /// Fewer than MIN_SECTORS sectors.
    TooSmall(u64),
    /// The image is inconsistent: the first inconsistency met.
    Inconsistent(Inconsistency),
    /// A value longer than MAX_VALUE.
    ValueTooLong(usize),
    /// The caller's buffer is shorter than the value.
    BufferTooSmall { need: usize },
    /// No room on the device for the record (or the sequence number would wrap).
    Full,
    /// An earlier call failed a request: mount again.
    Poisoned,
}

/// A commit: which part of the log is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    pub seq: u64,
    pub sector_size: u32,
    pub sector_count: u64,
    /// The first sector past the last record.
    pub head: u64,
    pub records: u64,
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut v = [0; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(v)
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

impl Commit {
    /// The commit as a sector's bytes (`buf` is one sector of at least COMMIT_LEN bytes).
    pub fn encode(&self, buf: &mut [u8]) {
        buf.fill(0);
        buf[0..4].copy_from_slice(&COMMIT_MAGIC.to_le_bytes());
        buf[8..12].copy_from_slice(&VERSION.to_le_bytes());
        buf[12..16].copy_from_slice(&self.sector_size.to_le_bytes());
        buf[16..24].copy_from_slice(&self.seq.to_le_bytes());
        buf[24..32].copy_from_slice(&self.sector_count.to_le_bytes());
        buf[32..40].copy_from_slice(&self.head.to_le_bytes());
        buf[40..48].copy_from_slice(&self.records.to_le_bytes());
        let sum = CRC.checksum(&buf[SUMMED_FROM..]);
        buf[4..8].copy_from_slice(&sum.to_le_bytes());
    }

    /// The commit in a slot's sector, or None when its magic, version or checksum
    /// (over the whole sector past it) is wrong.
    pub fn decode(buf: &[u8]) -> Option<Commit> {
        if buf.len() < COMMIT_LEN || le32(buf, 0) != COMMIT_MAGIC || le32(buf, 8) != VERSION {
            return None;
        }
        if CRC.checksum(&buf[SUMMED_FROM..]) != le32(buf, 4) {
            return None;
        }
        Some(Commit {
            seq: le64(buf, 16),
            sector_size: le32(buf, 12),
            sector_count: le64(buf, 24),
            head: le64(buf, 32),
            records: le64(buf, 40),
        })
    }
}

/// The sectors a record of a `len`-byte value takes (`len` at most MAX_VALUE, so the
/// sum cannot overflow).
pub fn extent(sector_size: usize, len: usize) -> u64 {
    (RECORD_HEADER + len).div_ceil(sector_size) as u64
}

/// The device's geometry, when the store works on it.
fn geometry<D: BlockDevice>(dev: &D) -> Result<(usize, u64), Error> {
    let size = dev.sector_size();
    if !(MIN_SECTOR..=MAX_SECTOR).contains(&size) {
        return Err(Error::BadSectorSize(size));
    }
    let count = dev.sector_count();
    if count < MIN_SECTORS {
        return Err(Error::TooSmall(count));
    }
    Ok((size, count))
}

/// Judges the two slots (each a commit, or None when damaged), reporting each
/// inconsistency; the newer valid commit, if any.
fn judge(slots: [Option<Commit>; 2], size: usize, count: u64, report: &mut dyn FnMut(Inconsistency)) -> Option<Commit> {
    for (slot, commit) in (0u64..).zip(slots) {
        let Some(c) = commit else {
            report(Inconsistency::SlotDamaged { slot });
            continue;
        };
        if c.seq % 2 != slot {
            report(Inconsistency::SlotMisplaced { slot, seq: c.seq });
        }
        if c.sector_size as usize != size || c.sector_count != count {
            report(Inconsistency::SlotGeometry { slot, sector_size: c.sector_size, sector_count: c.sector_count });
        }
        if c.head < FIRST_RECORD || c.head > count {
            report(Inconsistency::HeadOutOfRange { slot, head: c.head });
        } else if c.records > c.head - FIRST_RECORD {
            report(Inconsistency::TooManyRecords { slot, records: c.records });
        }
    }
    match slots {
        [Some(a), Some(b)] => {
            let (older, newer) = if a.seq < b.seq { (a, b) } else { (b, a) };
            if older.seq.checked_add(1) != Some(newer.seq) {
                report(Inconsistency::NotConsecutive { older: older.seq, newer: newer.seq });
            }
            if older.head > newer.head || older.records > newer.records {
                report(Inconsistency::OlderNotPrefix { head: older.head, records: older.records });
            }
            Some(newer)
        }
        [a, b] => a.or(b),
    }
}

/// Reads both slots; an unreadable one is reported and ends the reading (Err: its sector).
fn read_slots<D: BlockDevice>(
    dev: &mut D,
    buf: &mut [u8],
    report: &mut dyn FnMut(Inconsistency),
) -> Result<[Option<Commit>; 2], u64> {
    let mut slots = [None, None];
    for (slot, out) in (0u64..).zip(slots.iter_mut()) {
        if dev.read(slot, buf).is_err() {
            report(Inconsistency::Unreadable { sector: slot });
            return Err(slot);
        }
        *out = Commit::decode(buf);
    }
    Ok(slots)
}

/// One record met by [`walk`].
#[derive(Clone, Copy, Debug)]
struct Found {
    sector: u64,
    index: u64,
    key: u32,
    len: usize,
}

/// Walks the log of `commit`, checking every record (its magic, length, checksum and
/// number) and reporting each inconsistency; calls `visit` on every record whose checksum
/// holds. `older` is the other commit's (head, records), which must be a record boundary
/// of this log. Err(sector) when a read failed (reported too).
fn walk<D: BlockDevice>(
    dev: &mut D,
    buf: &mut [u8],
    commit: &Commit,
    older: Option<(u64, u64)>,
    report: &mut dyn FnMut(Inconsistency),
    visit: &mut dyn FnMut(Found),
) -> Result<(), u64> {
    let size = buf.len();
    let mut sector = FIRST_RECORD;
    let mut index = 0u64;
    let mut older_met = older.is_none();
    while sector < commit.head {
        if older == Some((sector, index)) {
            older_met = true;
        }
        if dev.read(sector, buf).is_err() {
            report(Inconsistency::Unreadable { sector });
            return Err(sector);
        }
        if le32(buf, 0) != RECORD_MAGIC {
            report(Inconsistency::RecordMissing { sector, index });
            return Ok(());
        }
        let len = u64::from(le32(buf, 20));
        let sectors = extent(size, (len as usize).min(MAX_VALUE));
        let end = sector.checked_add(sectors).filter(|&end| end <= commit.head);
        let Some(end) = end.filter(|_| len <= MAX_VALUE as u64) else {
            report(Inconsistency::RecordTooLong { sector, index, len });
            return Ok(());
        };
        let found = le64(buf, 8);
        let key = le32(buf, 16);
        let stored = le32(buf, 4);
        let mut digest = CRC.digest();
        digest.update(&buf[SUMMED_FROM..]);
        for s in sector + 1..end {
            if dev.read(s, buf).is_err() {
                report(Inconsistency::Unreadable { sector: s });
                return Err(s);
            }
            digest.update(buf);
        }
        if digest.finalize() != stored && !cfg!(feature = "records-unchecked") {
            report(Inconsistency::RecordDamaged { sector, index });
        } else {
            if found != index {
                report(Inconsistency::RecordMisnumbered { sector, index, found });
            }
            visit(Found { sector, index, key, len: len as usize });
        }
        sector = end;
        index += 1;
    }
    if older == Some((sector, index)) {
        older_met = true;
    }
    if index != commit.records {
        report(Inconsistency::RecordCount { commit: commit.records, found: index });
    }
    if !older_met {
        if let Some((head, records)) = older {
            report(Inconsistency::OlderNotPrefix { head, records });
        }
    }
    Ok(())
}

/// Reads the image on `dev` and reports every inconsistency it finds to `report`; the
/// number found. The log is walked from the newer valid commit (when both slots hold
/// one, the older must mark a record boundary of it); a walk stops where no record can
/// be found or a read fails.
pub fn check<D: BlockDevice>(dev: &mut D, report: &mut dyn FnMut(Inconsistency)) -> usize {
    let mut found = 0usize;
    let mut count = |i: Inconsistency| {
        found += 1;
        report(i);
    };
    let (size, sectors) = match geometry(dev) {
        Ok(g) => g,
        Err(_) => {
            count(Inconsistency::DeviceGeometry { sector_size: dev.sector_size(), sector_count: dev.sector_count() });
            return found;
        }
    };
    let mut buf = [0u8; MAX_SECTOR];
    let buf = &mut buf[..size];
    let Ok(slots) = read_slots(dev, buf, &mut count) else {
        return found;
    };
    let Some(newer) = judge(slots, size, sectors, &mut count) else {
        return found;
    };
    let older = match slots {
        [Some(a), Some(b)] if a.seq.checked_add(1) == Some(b.seq) => Some((a.head, a.records)),
        [Some(a), Some(b)] if b.seq.checked_add(1) == Some(a.seq) => Some((b.head, b.records)),
        _ => None,
    };
    let usable = newer.head >= FIRST_RECORD && newer.head <= sectors && newer.sector_size as usize == size;
    if usable {
        let _ = walk(dev, buf, &newer, older, &mut count, &mut |_| {});
    }
    found
}

/// A mounted store.
pub struct Store<D: BlockDevice> {
    dev: D,
    size: usize,
    count: u64,
    commit: Commit,
    poisoned: bool,
    buf: [u8; MAX_SECTOR],
}

impl<D: BlockDevice> Store<D> {
    /// Makes an empty store on `dev` (whatever it held), durable when this returns Ok.
    pub fn format(mut dev: D) -> Result<Store<D>, Error> {
        let (size, count) = geometry(&dev)?;
        let mut buf = [0u8; MAX_SECTOR];
        let mut commit =
            Commit { seq: 0, sector_size: size as u32, sector_count: count, head: FIRST_RECORD, records: 0 };
        for slot in 0..2 {
            commit.seq = slot;
            commit.encode(&mut buf[..size]);
            dev.write(slot, &buf[..size]).map_err(|_| Error::Io { sector: Some(slot) })?;
        }
        dev.flush().map_err(|_| Error::Io { sector: None })?;
        Ok(Store { dev, size, count, commit, poisoned: false, buf })
    }

    /// Opens the store on `dev`: both slots must hold consistent commits for this
    /// geometry (the log itself is checked by every [`Store::get`]).
    pub fn mount(mut dev: D) -> Result<Store<D>, Error> {
        let (size, count) = geometry(&dev)?;
        let mut buf = [0u8; MAX_SECTOR];
        let mut first = None;
        let mut note = |i: Inconsistency| {
            first.get_or_insert(i);
        };
        let slots = read_slots(&mut dev, &mut buf[..size], &mut note);
        let commit = match slots {
            Ok(slots) => judge(slots, size, count, &mut note),
            Err(sector) => return Err(Error::Io { sector: Some(sector) }),
        };
        match (first, commit) {
            (None, Some(commit)) => Ok(Store { dev, size, count, commit, poisoned: false, buf }),
            (Some(i), _) => Err(Error::Inconsistent(i)),
            (None, None) => Err(Error::Inconsistent(Inconsistency::SlotDamaged { slot: 0 })),
        }
    }

    /// The commit in use.
    pub fn commit(&self) -> Commit {
        self.commit
    }

    /// The number of records.
    pub fn len(&self) -> u64 {
        self.commit.records
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.commit.records == 0
    }

    /// The device, given back.
    pub fn into_device(self) -> D {
        self.dev
    }

    /// Appends a record of `key` and `value`; durable when this returns Ok (its number in
    /// the log). Any failed request fails the call and poisons the store.
    pub fn append(&mut self, key: u32, value: &[u8]) -> Result<u64, Error> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if value.len() > MAX_VALUE {
            return Err(Error::ValueTooLong(value.len()));
        }
        let at = self.commit.head;
        let end = at.checked_add(extent(self.size, value.len())).filter(|&end| end <= self.count).ok_or(Error::Full)?;
        let seq = self.commit.seq.checked_add(1).ok_or(Error::Full)?;
        let next = Commit { seq, head: end, records: self.commit.records + 1, ..self.commit };
        self.poisoned = true;
        self.write_record(at, self.commit.records, key, value)?;
        self.flush()?;
        self.write_commit(&next)?;
        self.flush()?;
        self.commit = next;
        self.poisoned = false;
        Ok(next.records - 1)
    }

    /// The value of the last record of `key` into `out`: its length, or None when no
    /// record has that key. The whole log is checked first: any inconsistency in it
    /// refuses the read.
    pub fn get(&mut self, key: u32, out: &mut [u8]) -> Result<Option<usize>, Error> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let size = self.size;
        let mut first = None;
        let mut last = None;
        let walked = walk(
            &mut self.dev,
            &mut self.buf[..size],
            &self.commit,
            None,
            &mut |i| {
                first.get_or_insert(i);
            },
            &mut |f| {
                if f.key == key {
                    last = Some(f);
                }
            },
        );
        if let Err(sector) = walked {
            return Err(Error::Io { sector: Some(sector) });
        }
        if let Some(i) = first {
            return Err(Error::Inconsistent(i));
        }
        let Some(found) = last else {
            return Ok(None);
        };
        let Some(out) = out.get_mut(..found.len) else {
            return Err(Error::BufferTooSmall { need: found.len });
        };
        self.read_value(found, out).inspect_err(|_| out.fill(0))?;
        Ok(Some(found.len))
    }

    /// Reads a record's value again into `out`, its checksum checked again.
    fn read_value(&mut self, found: Found, out: &mut [u8]) -> Result<(), Error> {
        let size = self.size;
        let mut digest = CRC.digest();
        let mut stored = 0;
        let mut copied = 0;
        for s in 0..extent(size, found.len) {
            let sector = found.sector + s;
            let buf = &mut self.buf[..size];
            self.dev.read(sector, buf).map_err(|_| Error::Io { sector: Some(sector) })?;
            let from = if s == 0 {
                stored = le32(buf, 4);
                digest.update(&buf[SUMMED_FROM..]);
                RECORD_HEADER
            } else {
                digest.update(buf);
                0
            };
            let take = (size - from).min(found.len - copied);
            out[copied..copied + take].copy_from_slice(&buf[from..from + take]);
            copied += take;
        }
        if digest.finalize() != stored && !cfg!(feature = "records-unchecked") {
            return Err(Error::Inconsistent(Inconsistency::RecordDamaged { sector: found.sector, index: found.index }));
        }
        Ok(())
    }

    /// Builds sector `s` of a record into the buffer: its header in the first.
    fn record_sector(&mut self, s: u64, index: u64, key: u32, value: &[u8]) {
        let size = self.size;
        let buf = &mut self.buf[..size];
        buf.fill(0);
        let (from, skip) = if s == 0 {
            buf[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
            buf[8..16].copy_from_slice(&index.to_le_bytes());
            buf[16..20].copy_from_slice(&key.to_le_bytes());
            buf[20..24].copy_from_slice(&(value.len() as u32).to_le_bytes());
            (RECORD_HEADER, 0)
        } else {
            (0, (size - RECORD_HEADER) + (s as usize - 1) * size)
        };
        let rest = value.get(skip..).unwrap_or(&[]);
        let take = rest.len().min(size - from);
        buf[from..from + take].copy_from_slice(&rest[..take]);
    }

    fn write_record(&mut self, at: u64, index: u64, key: u32, value: &[u8]) -> Result<(), Error> {
        let sectors = extent(self.size, value.len());
        let mut digest = CRC.digest();
        for s in 0..sectors {
            self.record_sector(s, index, key, value);
            digest.update(&self.buf[if s == 0 { SUMMED_FROM } else { 0 }..self.size]);
        }
        let sum = digest.finalize();
        for s in 0..sectors {
            self.record_sector(s, index, key, value);
            if s == 0 {
                self.buf[4..8].copy_from_slice(&sum.to_le_bytes());
            }
            let sector = at + s;
            self.dev.write(sector, &self.buf[..self.size]).map_err(|_| Error::Io { sector: Some(sector) })?;
        }
        Ok(())
    }

    fn write_commit(&mut self, commit: &Commit) -> Result<(), Error> {
        let slot = commit.seq % 2;
        commit.encode(&mut self.buf[..self.size]);
        self.dev.write(slot, &self.buf[..self.size]).map_err(|_| Error::Io { sector: Some(slot) })
    }

    fn flush(&mut self) -> Result<(), Error> {
        self.dev.flush().map_err(|_| Error::Io { sector: None })
    }
}
