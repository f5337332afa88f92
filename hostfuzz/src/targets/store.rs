//! The disk world: `guest/store` on a disk of this file's own that loses what it was not
//! told to keep. The decisions choose the geometry (512, 520 or 4096-byte sectors, now
//! and then one the store must refuse; counts from 0 to 2^64 - 1), then one to four
//! epochs, each a few appends (keys 0..4, values from empty to past MAX_VALUE) and reads,
//! with the power cut before any write the input names and any request failing (a failed
//! write may still reach the cache). Every epoch ends in a power cut: each write still in
//! the volatile cache is kept or lost, and the kept ones land in an order the input
//! decides. The store is then mounted again.
//!
//! The oracle after every cut: `store::check` names no inconsistency; the store holds
//! exactly what was acknowledged, or that plus the one append in flight (never a mix);
//! its head is where the layout says. During an epoch: an append or a read that met a
//! failed request fails with `Io`, and one that met none does not; after a failed append
//! the store is `Poisoned` and touches the disk no more; `Full` exactly when the record
//! does not fit (checked, up to 2^64); every request inside the disk, one sector long; a
//! geometry refused exactly when the store's rules say. Now and then the medium is
//! damaged after a cut: a flipped bit in the used area must be named by the checker and
//! refused by mount or by every read; a forged commit (its checksum right, its head
//! anywhere up to 2^64) must be refused when out of range, and otherwise appends past it
//! must stop at the disk's end without wrapping; a disk that comes back with another
//! sector count must not mount the store made for the old one. And damage with every
//! checksum right (the world computes the CRC-32C), each breaking one rule: both commits
//! in the wrong slots, a record count past the log, sequence numbers not consecutive (the
//! checker must name it and mount refuse it), a record numbered other than its place
//! (named, and every read refused), an older commit off the newer log's record boundaries
//! (named); or both commits at the last sequence numbers, where an append must answer
//! `Full`. A read now and then gets a buffer shorter than the value: `BufferTooSmall`.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::{Decisions, Finding};
use store::{check, extent, BlockDevice, Commit, Error, Inconsistency, IoError, Store, MAX_VALUE};

/// A lie now and then: one decision in 8.
fn lie(d: &mut Decisions) -> bool {
    d.u8() >= 0xe0
}

fn any_u64(d: &mut Decisions, edges: &[u64]) -> u64 {
    let k = d.below(edges.len() + 1);
    edges.get(k).copied().unwrap_or_else(|| d.u64())
}

/// The disk: a durable medium and a volatile write cache.
struct World {
    size: usize,
    count: u64,
    durable: BTreeMap<u64, Vec<u8>>,
    /// Writes since the last flush, in order.
    cache: Vec<(u64, Vec<u8>)>,
    requests: u64,
    writes: u64,
    failures: u64,
    /// The power goes before this write.
    cut_before: Option<u64>,
    /// Requests that fail, by number: whether a failed write still reaches the cache.
    fails: BTreeMap<u64, bool>,
    dead: bool,
    violation: Option<Finding>,
}

impl World {
    fn violate(&mut self, what: &str, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(Finding::oracle(what, detail));
        }
    }

    fn inside(&mut self, op: &str, sector: u64, len: usize) -> bool {
        if sector >= self.count || len != self.size {
            let count = self.count;
            self.violate(
                "the store asked for a sector outside the disk",
                format!("{op} {sector} of {len} bytes on {count}"),
            );
            return false;
        }
        true
    }

    /// Counts a request; Err when the power is gone or it is to fail (and whether a
    /// failed write lands anyway).
    fn request(&mut self) -> Result<(), bool> {
        let n = self.requests;
        self.requests += 1;
        if self.dead {
            self.failures += 1;
            return Err(false);
        }
        if let Some(&lands) = self.fails.get(&n) {
            self.failures += 1;
            return Err(lands);
        }
        Ok(())
    }

    /// The sector as a read sees it: the cache's last write, the medium, or zeros.
    fn sector(&self, sector: u64) -> Vec<u8> {
        let cached = self.cache.iter().rev().find(|(s, _)| *s == sector).map(|(_, b)| b);
        cached.or(self.durable.get(&sector)).cloned().unwrap_or_else(|| vec![0; self.size])
    }

    /// The power goes and comes back: each cached write is kept or lost, the kept land
    /// in the order the input picks.
    fn power_cycle(&mut self, d: &mut Decisions) {
        let mut cache = std::mem::take(&mut self.cache);
        while !cache.is_empty() {
            let (sector, bytes) = cache.remove(d.below(cache.len()));
            if !d.bool() {
                self.durable.insert(sector, bytes);
            }
        }
        self.dead = false;
        self.cut_before = None;
        self.fails.clear();
    }
}

/// The store's view of the world.
struct Port<'a>(&'a RefCell<World>);

impl BlockDevice for Port<'_> {
    fn sector_size(&self) -> usize {
        self.0.borrow().size
    }
    fn sector_count(&self) -> u64 {
        self.0.borrow().count
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let mut w = self.0.borrow_mut();
        if !w.inside("read", sector, buf.len()) {
            return Err(IoError);
        }
        w.request().map_err(|_| IoError)?;
        buf.copy_from_slice(&w.sector(sector));
        Ok(())
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        let mut w = self.0.borrow_mut();
        if !w.inside("write", sector, buf.len()) {
            return Err(IoError);
        }
        if w.cut_before == Some(w.writes) {
            w.dead = true;
        }
        let result = w.request();
        if result.is_ok() || result == Err(true) {
            w.writes += 1;
            w.cache.push((sector, buf.to_vec()));
        }
        result.map_err(|_| IoError)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        let mut w = self.0.borrow_mut();
        w.request().map_err(|_| IoError)?;
        let cache = std::mem::take(&mut w.cache);
        w.durable.extend(cache);
        Ok(())
    }
}

/// What must be on the disk: the acknowledged appends, in order.
#[derive(Default)]
struct Model {
    log: Vec<(u32, Vec<u8>)>,
    /// The first sector past the last acknowledged record, by the layout.
    head: u64,
}

impl Model {
    fn latest(&self, key: u32) -> Option<&[u8]> {
        self.log.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v.as_slice())
    }
}

/// Every inconsistency the checker names, with no request failing.
fn inconsistencies(world: &RefCell<World>) -> Vec<Inconsistency> {
    let fails = std::mem::take(&mut world.borrow_mut().fails);
    let mut found = Vec::new();
    check(&mut Port(world), &mut |i| found.push(i));
    world.borrow_mut().fails = fails;
    found
}

/// A value the input shapes: its length near the sector's edges now and then.
fn value(d: &mut Decisions, size: usize) -> Vec<u8> {
    let len = match d.below(9) {
        0 => d.below(64),
        1 => size - 24,
        2 => size - 23,
        3 => size,
        4 => 2 * size - 24,
        5 => d.below(4 * size),
        6 if d.rare() => MAX_VALUE + 1,
        6 => MAX_VALUE,
        7 => 0,
        _ => 1,
    };
    let seed = d.u8();
    (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
}

/// Runs `f` and says how many requests failed during it, and how many writes it made.
fn watch<T>(world: &RefCell<World>, f: impl FnOnce() -> T) -> (T, u64, u64) {
    let (failures, writes) = {
        let w = world.borrow();
        (w.failures, w.requests)
    };
    let out = f();
    let w = world.borrow();
    (out, w.failures - failures, w.requests - writes)
}

fn oracle<T>(what: &str, detail: String) -> Result<T, Finding> {
    Err(Finding::oracle(what, detail))
}

fn violation(world: &RefCell<World>) -> Result<(), Finding> {
    match world.borrow_mut().violation.take() {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// One epoch's operations on a mounted store. The append in flight when a request
/// failed, if one did.
fn epoch(
    d: &mut Decisions,
    world: &RefCell<World>,
    store: &mut Store<Port>,
    model: &mut Model,
) -> Result<Option<(u32, Vec<u8>)>, Finding> {
    let size = world.borrow().size;
    let count = world.borrow().count;
    for _ in 0..1 + d.below(6) {
        if d.below(4) == 3 {
            let key = d.below(5) as u32;
            let want = model.latest(key);
            // Now and then a buffer shorter than the value (or none at all).
            let cap = match (want, d.below(8)) {
                (Some(w), 0) if !w.is_empty() => w.len() - 1 - d.below(w.len()),
                _ => MAX_VALUE,
            };
            let mut out = vec![0; cap];
            let (got, failed, _) = watch(world, || store.get(key, &mut out));
            violation(world)?;
            let short = want.map(<[u8]>::len).filter(|&n| n > cap);
            match got {
                Ok(n) if failed == 0 && short.is_none() && n.map(|n| &out[..n]) == want => {}
                Err(Error::BufferTooSmall { need }) if failed == 0 && short == Some(need) => {}
                Err(Error::Io { .. }) if failed > 0 => {}
                got => {
                    return oracle(
                        "a read answered other than the acknowledged log",
                        format!("key {key}: {got:?} after {failed} failed requests, want {:?}", want.map(<[u8]>::len)),
                    );
                }
            }
            continue;
        }
        let key = d.below(4) as u32;
        let bytes = value(d, size);
        let end = model.head.checked_add(extent(size, bytes.len().min(MAX_VALUE))).filter(|&e| e <= count);
        let (got, failed, requests) = watch(world, || store.append(key, &bytes));
        violation(world)?;
        let len = bytes.len();
        match got {
            Err(Error::ValueTooLong(n)) if n == len && len > MAX_VALUE && requests == 0 => {}
            Err(Error::Full) if len <= MAX_VALUE && end.is_none() && requests == 0 => {}
            Ok(i) if failed == 0 && end.is_some() && len <= MAX_VALUE => {
                if i != model.log.len() as u64 {
                    return oracle(
                        "an append answered another record number",
                        format!("{i}, want {}", model.log.len()),
                    );
                }
                model.log.push((key, bytes));
                model.head = end.unwrap_or(model.head);
            }
            Err(Error::Io { .. }) if failed > 0 => {
                let (again, _, requests) = watch(world, || store.append(key, &bytes));
                if again != Err(Error::Poisoned) || requests != 0 {
                    return oracle(
                        "a store that failed a request went on",
                        format!("{again:?} after {requests} requests"),
                    );
                }
                return Ok(Some((key, bytes)));
            }
            got => {
                return oracle(
                    "an append answered other than the disk and the layout say",
                    format!(
                        "{got:?} for {len} bytes at head {} of {count} after {failed} failed requests, {requests} requests",
                        model.head
                    ),
                );
            }
        }
    }
    Ok(None)
}

/// After a cut: the store holds the acknowledged log, or that plus `pending`, and the
/// checker is silent.
fn remount<'a>(
    world: &'a RefCell<World>,
    model: &mut Model,
    pending: Option<(u32, Vec<u8>)>,
) -> Result<Store<Port<'a>>, Finding> {
    let found = inconsistencies(world);
    violation(world)?;
    if !found.is_empty() {
        return Err(Finding::oracle("the checker found the store inconsistent after a cut", format!("{found:?}")));
    }
    let fails = std::mem::take(&mut world.borrow_mut().fails);
    let mut store = match Store::mount(Port(world)) {
        Ok(store) => store,
        Err(e) => return Err(Finding::oracle("a store the checker passed did not mount", format!("{e:?}"))),
    };
    let size = world.borrow().size;
    let acked = model.log.len() as u64;
    if let Some((key, bytes)) = pending.filter(|_| store.len() == acked + 1) {
        model.head += extent(size, bytes.len());
        model.log.push((key, bytes));
    }
    if store.len() != model.log.len() as u64 || store.commit().head != model.head {
        return oracle(
            "after a cut the store holds neither the old state nor the new",
            format!(
                "{} records at head {}, {acked} acknowledged at head {}",
                store.len(),
                store.commit().head,
                model.head
            ),
        );
    }
    let mut out = vec![0; MAX_VALUE];
    for key in 0..4 {
        let got = store.get(key, &mut out);
        let want = model.latest(key);
        if got.as_ref().ok().copied().flatten().map(|n| &out[..n]) != want || got.is_err() {
            return oracle("after a cut a read answered other than the log", format!("key {key}: {got:?}"));
        }
    }
    violation(world)?;
    world.borrow_mut().fails = fails;
    Ok(store)
}

/// A flipped bit in the used area: named by the checker, refused by mount or every read.
fn flipped(d: &mut Decisions, world: &RefCell<World>, model: &Model) -> Result<(), Finding> {
    let (sector, byte, bit) = {
        let w = world.borrow();
        // Half the flips in the first 24 bytes: a commit's fields, a record's header.
        let byte = if d.bool() { d.below(24) } else { d.below(w.size) };
        (d.below(model.head as usize) as u64, byte, d.below(8))
    };
    let mut bytes = world.borrow().sector(sector);
    bytes[byte] ^= 1 << bit;
    world.borrow_mut().durable.insert(sector, bytes);
    let found = inconsistencies(world);
    if found.is_empty() {
        return oracle("the checker missed a flipped bit", format!("sector {sector} byte {byte} bit {bit}"));
    }
    if let Ok(mut store) = Store::mount(Port(world)) {
        let mut out = vec![0; MAX_VALUE];
        for key in 0..4 {
            let got = store.get(key, &mut out);
            violation(world)?;
            if !matches!(got, Err(Error::Inconsistent(_))) {
                return oracle(
                    "a read over a flipped bit was not refused",
                    format!("sector {sector} byte {byte} bit {bit}: key {key}: {got:?}"),
                );
            }
        }
    }
    d.end("a flipped bit refused");
    violation(world)
}

/// A forged commit, its checksum right: out of range refused; in range, appends past it
/// stop at the disk's end.
fn forged(d: &mut Decisions, world: &RefCell<World>, current: Commit) -> Result<(), Finding> {
    let count = world.borrow().count;
    let size = world.borrow().size;
    let head = any_u64(
        d,
        &[count, count - 1, count - 2, current.head + 1, count.wrapping_add(1), u64::MAX, 0, 1, u64::MAX - 1],
    );
    let commit = Commit { seq: current.seq + 1, head, ..current };
    let mut buf = vec![0; size];
    commit.encode(&mut buf);
    world.borrow_mut().durable.insert(commit.seq % 2, buf);
    let found = inconsistencies(world);
    if head != current.head && found.is_empty() {
        return oracle("the checker missed a forged head", format!("{head} for {}", current.head));
    }
    let mounted = Store::mount(Port(world));
    let in_range = (2..=count).contains(&head);
    let mut store = match mounted {
        Err(Error::Inconsistent(Inconsistency::HeadOutOfRange { slot, head: h }))
            if !in_range && h == head && slot == commit.seq % 2 =>
        {
            d.end("a forged commit refused");
            return Ok(());
        }
        Err(Error::Inconsistent(Inconsistency::OlderNotPrefix { .. } | Inconsistency::TooManyRecords { .. }))
            if in_range && head < current.head =>
        {
            d.end("a forged commit refused");
            return Ok(());
        }
        Ok(store) if in_range && head >= current.head => store,
        got => {
            let got = got.map(|s| s.commit());
            return oracle("a forged commit was judged otherwise", format!("head {head} of {count}: {got:?}"));
        }
    };
    let mut at = head;
    for _ in 0..1 + d.below(3) {
        let bytes = value(d, size);
        let len = bytes.len();
        let end = at.checked_add(extent(size, len.min(MAX_VALUE))).filter(|&e| e <= count);
        let got = store.append(0, &bytes);
        violation(world)?;
        match (got, end) {
            (Ok(_), Some(end)) if len <= MAX_VALUE => at = end,
            (Err(Error::Full), None) if len <= MAX_VALUE => {}
            (Err(Error::ValueTooLong(_)), _) if len > MAX_VALUE => {}
            (got, _) => {
                return oracle(
                    "an append past a forged head answered otherwise",
                    format!("{got:?} for {len} bytes at {at} of {count}"),
                );
            }
        }
    }
    d.end("appends past a forged head");
    Ok(())
}

/// The CRC-32C the store's layout puts on commits and records (docs/reference-guest.md),
/// computed here by the world, not by the store.
const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// A commit's sector by the layout: magic, checksum (over everything past it), version,
/// geometry, sequence number, head and record count.
fn commit_sector(size: usize, c: &Commit) -> Vec<u8> {
    let mut b = vec![0; size];
    b[0..4].copy_from_slice(b"TBsc");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[12..16].copy_from_slice(&c.sector_size.to_le_bytes());
    b[16..24].copy_from_slice(&c.seq.to_le_bytes());
    b[24..32].copy_from_slice(&c.sector_count.to_le_bytes());
    b[32..40].copy_from_slice(&c.head.to_le_bytes());
    b[40..48].copy_from_slice(&c.records.to_le_bytes());
    let sum = CRC.checksum(&b[8..]);
    b[4..8].copy_from_slice(&sum.to_le_bytes());
    b
}

/// A record's sectors by the layout, numbered `number`, its checksum right.
fn record_sectors(size: usize, number: u64, key: u32, value: &[u8]) -> Vec<Vec<u8>> {
    let mut b = vec![0; extent(size, value.len()) as usize * size];
    b[0..4].copy_from_slice(b"TBsr");
    b[8..16].copy_from_slice(&number.to_le_bytes());
    b[16..20].copy_from_slice(&key.to_le_bytes());
    b[20..24].copy_from_slice(&(value.len() as u32).to_le_bytes());
    b[24..24 + value.len()].copy_from_slice(value);
    let sum = CRC.checksum(&b[8..]);
    b[4..8].copy_from_slice(&sum.to_le_bytes());
    b.chunks(size).map(<[u8]>::to_vec).collect()
}

/// Where each record starts, and where the log ends: (sector, number) for 0..=len.
fn boundaries(size: usize, model: &Model) -> Vec<(u64, u64)> {
    let mut at = store::FIRST_RECORD;
    let mut marks = vec![(at, 0)];
    for (i, (_, v)) in (1u64..).zip(&model.log) {
        at += extent(size, v.len());
        marks.push((at, i));
    }
    marks
}

/// Damage a hostile disk could hold, every checksum right (the world computes it), each
/// breaking exactly one of the store's rules: both commits in the wrong slots, a record
/// count past the log, sequence numbers not consecutive, a record numbered other than its
/// place, an older commit that does not end on a record boundary of the newer log. The
/// checker must name it, and mount (a slot's rule) or every read (a record's) refuse it;
/// the older commit off the newer log's boundaries is the checker's alone (mount judges
/// the slots, a read walks the newer log). Or the two commits moved to the last sequence
/// numbers, 2^64 - 2 and 2^64 - 1: consistent, and an append must answer `Full`.
fn broken(d: &mut Decisions, world: &RefCell<World>, model: &Model) -> Result<(), Finding> {
    let size = world.borrow().size;
    let count = world.borrow().count;
    let marks = boundaries(size, model);
    let n = model.log.len() as u64;
    // Format leaves commits 0 and 1; every acknowledged append adds one.
    let newer = Commit { seq: n + 1, sector_size: size as u32, sector_count: count, head: model.head, records: n };
    let (head, records) = marks[marks.len().saturating_sub(2)];
    let older = Commit { seq: n, head, records, ..newer };
    let put = |slot: u64, c: &Commit| {
        world.borrow_mut().durable.insert(slot, commit_sector(size, c));
    };
    put(newer.seq % 2, &newer);
    put(older.seq % 2, &older);
    let kind = if n == 0 { *d.choose(&[0, 1, 2, 5]) } else { d.below(6) };
    // What the checker must name (exactly, or at least), and what mount must answer.
    let (want, exact, mount): (Inconsistency, bool, Option<Inconsistency>) = match kind {
        0 => {
            put(newer.seq % 2, &older);
            put(older.seq % 2, &newer);
            let in0 = if newer.seq % 2 == 1 { newer } else { older };
            let want = Inconsistency::SlotMisplaced { slot: 0, seq: in0.seq };
            (want, false, Some(want))
        }
        1 => {
            let records = any_u64(d, &[model.head - 1, model.head, u64::MAX]).max(model.head - 1);
            let forged = Commit { seq: newer.seq + 1, records, ..newer };
            put(forged.seq % 2, &forged);
            let want = Inconsistency::TooManyRecords { slot: forged.seq % 2, records };
            (want, false, Some(want))
        }
        2 => {
            let last = u64::MAX - (u64::MAX - (newer.seq + 1)) % 2;
            let seq = *d.choose(&[newer.seq + 3, newer.seq + 5, last]);
            put(seq % 2, &Commit { seq, ..newer });
            let want = Inconsistency::NotConsecutive { older: newer.seq, newer: seq };
            (want, true, Some(want))
        }
        3 => {
            let index = d.below(n as usize) as u64;
            let found = any_u64(d, &[index + 1, index.wrapping_sub(1), u64::MAX, n]);
            let found = if found == index { index + 1 } else { found };
            let (key, value) = &model.log[index as usize];
            let sector = marks[index as usize].0;
            for (s, bytes) in (sector..).zip(record_sectors(size, found, *key, value)) {
                world.borrow_mut().durable.insert(s, bytes);
            }
            (Inconsistency::RecordMisnumbered { sector, index, found }, true, None)
        }
        4 => {
            let k = 1 + d.below(n as usize);
            let (start, end) = (marks[k - 1].0, marks[k].0);
            // The end of record k - 1 counting one record fewer, or a sector inside it.
            let (head, records) =
                if end - start > 1 && d.bool() { (start + 1, k as u64 - 1) } else { (end, k as u64 - 1) };
            put(older.seq % 2, &Commit { head, records, ..older });
            (Inconsistency::OlderNotPrefix { head, records }, true, None)
        }
        _ => return last_seq(d, world, model, newer, older),
    };
    let found = inconsistencies(world);
    violation(world)?;
    if !found.contains(&want) || (exact && found.len() != 1) {
        return oracle(
            "the checker did not name a forged commit's or record's broken rule",
            format!("want {want:?}{}, found {found:?}", if exact { " alone" } else { "" }),
        );
    }
    let mounted = Store::mount(Port(world));
    violation(world)?;
    match (mounted, mount) {
        (Err(Error::Inconsistent(i)), Some(w)) if i == w => {}
        // Not promised by mount (it judges the slots alone), but no wrong answer either.
        (Err(Error::Inconsistent(i)), None) if kind == 4 && i == want => {}
        (Ok(mut store), None) => {
            if kind == 3 {
                let mut out = vec![0; MAX_VALUE];
                for key in 0..5 {
                    let got = store.get(key, &mut out);
                    violation(world)?;
                    if got != Err(Error::Inconsistent(want)) {
                        return oracle(
                            "a read over a misnumbered record was not refused",
                            format!("key {key}: {got:?}, want {want:?}"),
                        );
                    }
                }
            }
        }
        (got, _) => {
            let got = got.map(|s| s.commit());
            return oracle("a store with a broken rule was mounted otherwise", format!("{got:?}, want {mount:?}"));
        }
    }
    d.end(match kind {
        0 => "forged: commits misplaced",
        1 => "forged: too many records",
        2 => "forged: not consecutive",
        3 => "forged: record misnumbered",
        _ => "forged: older not a boundary",
    });
    Ok(())
}

/// Both commits moved to the last sequence numbers: the checker silent, the store mounts
/// with commit 2^64 - 1 and holds the log, and an append answers `Full` (the next number
/// would wrap) without a request, or `ValueTooLong`.
fn last_seq(
    d: &mut Decisions,
    world: &RefCell<World>,
    model: &Model,
    newer: Commit,
    older: Commit,
) -> Result<(), Finding> {
    let size = world.borrow().size;
    let (older, newer) = (Commit { seq: u64::MAX - 1, ..older }, Commit { seq: u64::MAX, ..newer });
    world.borrow_mut().durable.insert(0, commit_sector(size, &older));
    world.borrow_mut().durable.insert(1, commit_sector(size, &newer));
    let found = inconsistencies(world);
    violation(world)?;
    if !found.is_empty() {
        return oracle("the checker named commits at the last sequence numbers", format!("{found:?}"));
    }
    let mut store = match Store::mount(Port(world)) {
        Ok(store) if store.commit() == newer => store,
        got => {
            let got = got.map(|s| s.commit());
            return oracle("a store at the last sequence number mounted otherwise", format!("{got:?}, want {newer:?}"));
        }
    };
    let mut out = vec![0; MAX_VALUE];
    for key in 0..4 {
        let got = store.get(key, &mut out);
        if got.as_ref().ok().copied().flatten().map(|n| &out[..n]) != model.latest(key) || got.is_err() {
            return oracle(
                "at the last sequence number a read answered other than the log",
                format!("key {key}: {got:?}"),
            );
        }
    }
    let bytes = value(d, size);
    let len = bytes.len();
    let (got, _, requests) = watch(world, || store.append(0, &bytes));
    violation(world)?;
    match got {
        Err(Error::Full) if len <= MAX_VALUE && requests == 0 => {}
        Err(Error::ValueTooLong(l)) if len > MAX_VALUE && l == len && requests == 0 => {}
        got => {
            return oracle(
                "an append at the last sequence number answered other than Full",
                format!("{got:?} for {len} bytes after {requests} requests"),
            );
        }
    }
    d.end("forged: the last sequence number");
    violation(world)
}

/// The disk comes back with another sector count (grown, or cut short): the store made
/// for the old geometry must refuse to mount, and the checker name both slots.
fn moved(d: &mut Decisions, world: &RefCell<World>) -> Result<(), Finding> {
    let old = world.borrow().count;
    let new = any_u64(d, &[old.wrapping_add(1), old - 1, u64::MAX, old.wrapping_mul(2), 2]);
    let size = world.borrow().size;
    world.borrow_mut().count = new;
    let mounted = Store::mount(Port(world)).map(|s| s.commit());
    violation(world)?;
    let geometry = |slot| Inconsistency::SlotGeometry { slot, sector_size: size as u32, sector_count: old };
    let refused = match mounted {
        Ok(_) if new == old => true,
        Err(Error::TooSmall(c)) => c == new && new < store::MIN_SECTORS,
        Err(Error::Inconsistent(i)) => i == geometry(0) && new >= store::MIN_SECTORS && new != old,
        _ => false,
    };
    if !refused {
        return oracle(
            "a store mounted on another geometry was judged otherwise",
            format!("{old} sectors now {new}: {mounted:?}"),
        );
    }
    let found = inconsistencies(world);
    if new != old && new >= store::MIN_SECTORS && !(found.contains(&geometry(0)) && found.contains(&geometry(1))) {
        return oracle("the checker missed a changed geometry", format!("{old} sectors now {new}: {found:?}"));
    }
    d.end("a changed geometry refused");
    violation(world)
}

pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let size =
        if lie(d) { *d.choose(&[256, 511, 513, 1024, 2048, 4097, 8192, 0]) } else { *d.choose(&[512, 520, 4096]) };
    let count = if d.below(4) == 3 {
        any_u64(d, &[u64::MAX, 1 << 32, (1 << 32) + 3, 1 << 63, u64::MAX - 1, 0, 1, 2, 3])
    } else {
        3 + d.below(200) as u64
    };
    let world = RefCell::new(World {
        size,
        count,
        durable: BTreeMap::new(),
        cache: Vec::new(),
        requests: 0,
        writes: 0,
        failures: 0,
        cut_before: None,
        fails: BTreeMap::new(),
        dead: false,
        violation: None,
    });
    let mut model = Model { log: Vec::new(), head: store::FIRST_RECORD };
    let plan = |d: &mut Decisions, w: &mut World| {
        if d.bool() {
            w.cut_before = Some(w.writes + d.below(16) as u64);
        }
        if lie(d) {
            let at = w.requests + d.below(40) as u64;
            w.fails.insert(at, d.bool());
        }
    };
    plan(d, &mut world.borrow_mut());
    let (formatted, failed, _) = watch(&world, || Store::format(Port(&world)));
    violation(&world)?;
    let good = (512..=4096).contains(&size);
    let mut store = match formatted {
        Ok(store) if good && count >= 3 && failed == 0 => store,
        Err(Error::BadSectorSize(s)) if !good && s == size => {
            d.end("refused: sector size");
            return Ok(());
        }
        Err(Error::TooSmall(c)) if good && count < 3 && c == count => {
            d.end("refused: too small");
            return Ok(());
        }
        Err(Error::Io { .. }) if good && count >= 3 && failed > 0 => {
            // Not acknowledged: nothing is promised but that a mount finds no records.
            world.borrow_mut().power_cycle(d);
            if let Ok(store) = Store::mount(Port(&world)) {
                if !store.is_empty() {
                    return oracle("a store whose format failed holds records", format!("{}", store.len()));
                }
            }
            d.end("format not acknowledged");
            return violation(&world);
        }
        got => {
            let got = got.map(|s| s.commit());
            return oracle(
                "format answered other than the geometry says",
                format!("{size} x {count}: {got:?} after {failed} failed requests"),
            );
        }
    };
    for _ in 0..1 + d.below(4) {
        let pending = epoch(d, &world, &mut store, &mut model)?;
        world.borrow_mut().power_cycle(d);
        store = remount(&world, &mut model, pending)?;
        if lie(d) && model.head > 2 && d.below(2) == 0 {
            return flipped(d, &world, &model);
        }
        if lie(d) && d.below(2) == 0 {
            return forged(d, &world, store.commit());
        }
        if lie(d) && d.below(4) == 0 {
            return moved(d, &world);
        }
        if lie(d) && d.below(4) == 0 {
            return broken(d, &world, &model);
        }
        plan(d, &mut world.borrow_mut());
    }
    d.end("every cut survived");
    violation(&world)
}
