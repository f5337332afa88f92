//! The store on a RAM disk with a volatile write cache: round trips on every geometry,
//! a power cut between any two writes (keeping any part of the cache), failed requests,
//! flipped bits, sector counts near 2^64, and the checker naming every inconsistency.

use std::collections::BTreeMap;
use store::{check, extent, BlockDevice, Commit, Error, Inconsistency, IoError, Store, MAX_VALUE};

/// A RAM disk: writes go to a cache that a flush makes durable; the power can go before
/// any write, and a request can fail.
struct Disk {
    size: usize,
    count: u64,
    durable: BTreeMap<u64, Vec<u8>>,
    cache: Vec<(u64, Vec<u8>)>,
    writes: u64,
    requests: u64,
    cut_before: Option<u64>,
    fail: Option<u64>,
    dead: bool,
}

impl Disk {
    fn new(size: usize, count: u64) -> Disk {
        Disk {
            size,
            count,
            durable: BTreeMap::new(),
            cache: Vec::new(),
            writes: 0,
            requests: 0,
            cut_before: None,
            fail: None,
            dead: false,
        }
    }

    /// Counts a request: Err when the power is gone or this one is to fail.
    fn request(&mut self) -> Result<(), IoError> {
        let n = self.requests;
        self.requests += 1;
        if self.dead || self.fail == Some(n) {
            return Err(IoError);
        }
        Ok(())
    }

    /// The power comes back: the cached writes `keep` chooses (by their place in the
    /// cache) reached the medium, the others are lost.
    fn power_cycle(&mut self, keep: impl Fn(usize) -> bool) {
        for (i, (sector, bytes)) in std::mem::take(&mut self.cache).into_iter().enumerate() {
            if keep(i) {
                self.durable.insert(sector, bytes);
            }
        }
        self.dead = false;
        self.cut_before = None;
        self.fail = None;
    }

    fn flip(&mut self, sector: u64, byte: usize, bit: u8) {
        let size = self.size;
        let s = self.durable.entry(sector).or_insert_with(|| vec![0; size]);
        s[byte] ^= 1 << bit;
    }
}

impl BlockDevice for Disk {
    fn sector_size(&self) -> usize {
        self.size
    }
    fn sector_count(&self) -> u64 {
        self.count
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        assert!(sector < self.count && buf.len() == self.size, "read {sector} of {}", buf.len());
        self.request()?;
        let cached = self.cache.iter().rev().find(|(s, _)| *s == sector).map(|(_, b)| b);
        match cached.or(self.durable.get(&sector)) {
            Some(bytes) => buf.copy_from_slice(bytes),
            None => buf.fill(0),
        }
        Ok(())
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        assert!(sector < self.count && buf.len() == self.size, "write {sector} of {}", buf.len());
        if self.cut_before == Some(self.writes) {
            self.dead = true;
        }
        self.request()?;
        self.writes += 1;
        self.cache.push((sector, buf.to_vec()));
        Ok(())
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.request()?;
        for (sector, bytes) in self.cache.drain(..) {
            self.durable.insert(sector, bytes);
        }
        Ok(())
    }
}

fn value(key: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(key * 7 + len as u32) as u8).collect()
}

fn inconsistencies(disk: &mut Disk) -> Vec<Inconsistency> {
    let mut found = Vec::new();
    let n = check(disk, &mut |i| found.push(i));
    assert_eq!(n, found.len());
    found
}

/// The last value of each key in `log`.
fn latest(log: &[(u32, Vec<u8>)], key: u32) -> Option<Vec<u8>> {
    log.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
}

/// The store on `disk` holds exactly `log`: its length, each key's last value, and a
/// clean check.
fn holds(disk: &mut Disk, log: &[(u32, Vec<u8>)]) -> bool {
    assert_eq!(inconsistencies(disk), []);
    let mut store = Store::mount(&mut *disk).expect("mount");
    if store.len() != log.len() as u64 {
        return false;
    }
    let mut out = vec![0; MAX_VALUE];
    (0..4).all(|key| {
        let got = store.get(key, &mut out).expect("get").map(|n| out[..n].to_vec());
        got == latest(log, key)
    })
}

/// The appends the scenarios make: keys 0..4, values from empty to several sectors.
fn script(size: usize) -> Vec<(u32, Vec<u8>)> {
    [(0, 0), (1, 1), (0, size - 24), (2, size - 23), (1, 3 * size + 5), (3, 100), (0, 7)]
        .into_iter()
        .map(|(k, len)| (k, value(k, len)))
        .collect()
}

#[test]
fn round_trip_on_every_geometry() {
    for size in [512, 520, 1000, 4096] {
        let mut disk = Disk::new(size, 4096);
        let log = script(size);
        let mut store = Store::format(&mut disk).unwrap();
        for (i, (k, v)) in log.iter().enumerate() {
            assert_eq!(store.append(*k, v), Ok(i as u64));
        }
        assert!(holds(&mut disk, &log), "size {size}");
        let mut store = Store::mount(&mut disk).unwrap();
        assert_eq!(store.get(9, &mut [0; 8]), Ok(None));
        let mut short = [0u8; 4];
        assert_eq!(store.get(1, &mut short), Err(Error::BufferTooSmall { need: 3 * size + 5 }));
        assert_eq!(store.append(0, &vec![0; MAX_VALUE + 1]), Err(Error::ValueTooLong(MAX_VALUE + 1)));
        assert_eq!(store.append(0, &vec![5; MAX_VALUE]), Ok(log.len() as u64));
        let mut out = vec![0; MAX_VALUE];
        assert_eq!(store.get(0, &mut out), Ok(Some(MAX_VALUE)));
        assert!(out.iter().all(|&b| b == 5));
    }
}

#[test]
fn power_cut_between_any_two_writes_gives_old_or_new() {
    type Keep = fn(usize) -> bool;
    let keeps: [(&str, Keep); 5] = [
        ("none", |_| false),
        ("all", |_| true),
        ("even", |i| i % 2 == 0),
        ("odd", |i| i % 2 == 1),
        ("first", |i| i == 0),
    ];
    for size in [512, 520, 4096] {
        let log = script(size);
        // A clean run's writes: format, then every append.
        let mut clean = Disk::new(size, 64);
        let mut store = Store::format(&mut clean).unwrap();
        for (k, v) in &log {
            store.append(*k, v).unwrap();
        }
        let total = clean.writes;
        let mut cuts = 0;
        for cut in 0..=total {
            for (name, keep) in keeps {
                let mut disk = Disk::new(size, 64);
                disk.cut_before = Some(cut);
                let Ok(mut store) = Store::format(&mut disk) else {
                    // The format was not acknowledged: nothing is promised.
                    continue;
                };
                let mut acked = Vec::new();
                let mut pending = None;
                for (k, v) in &log {
                    match store.append(*k, v) {
                        Ok(_) => acked.push((*k, v.clone())),
                        Err(e) => {
                            assert!(matches!(e, Error::Io { .. }), "{e:?}");
                            assert_eq!(store.append(*k, v), Err(Error::Poisoned));
                            pending = Some((*k, v.clone()));
                            break;
                        }
                    }
                }
                disk.power_cycle(keep);
                let mut new = acked.clone();
                new.extend(pending.clone());
                let old_ok = holds(&mut disk, &acked);
                assert!(old_ok || holds(&mut disk, &new), "size {size} cut before write {cut}, kept {name}");
                cuts += 1;
                // And the store goes on after the cut.
                let mut store = Store::mount(&mut disk).unwrap();
                store.append(3, b"after").unwrap();
                let mut after = if old_ok { acked } else { new };
                after.push((3, b"after".to_vec()));
                assert!(holds(&mut disk, &after));
            }
        }
        assert!(cuts > 5 * 2 * log.len(), "{cuts} cuts");
    }
}

#[test]
fn every_failed_request_fails_the_call() {
    let size = 520;
    let log = script(size);
    let mut n = 0;
    loop {
        let mut disk = Disk::new(size, 64);
        let mut store = Store::format(&mut disk).unwrap();
        store.append(0, b"first").unwrap();
        let start = disk.requests;
        disk.fail = Some(start + n);
        let mut store = Store::mount(&mut disk);
        let mut acked = vec![(0, b"first".to_vec())];
        let mut failed = None;
        match &mut store {
            Err(e) => failed = Some((*e, None)),
            Ok(store) => {
                for (k, v) in &log {
                    match store.append(*k, v) {
                        Ok(_) => acked.push((*k, v.clone())),
                        Err(e) => {
                            failed = Some((e, Some((*k, v.clone()))));
                            assert_eq!(store.get(0, &mut [0; 8]), Err(Error::Poisoned));
                            break;
                        }
                    }
                }
                if failed.is_none() {
                    let mut out = vec![0; 4096];
                    if let Err(e) = store.get(1, &mut out) {
                        failed = Some((e, None));
                    }
                }
            }
        }
        let used = disk.requests - start;
        let Some((e, pending)) = failed else {
            assert!(n >= used, "request {n} failed, and no call said so");
            break;
        };
        assert!(matches!(e, Error::Io { .. }), "{e:?}");
        disk.power_cycle(|_| true);
        let mut new = acked.clone();
        new.extend(pending);
        assert!(holds(&mut disk, &acked) || holds(&mut disk, &new), "request {n}");
        n += 1;
    }
    assert!(n > 20, "only {n} requests");
}

#[test]
fn a_flipped_bit_anywhere_in_use_is_found_and_refused() {
    for size in [512, 520] {
        let log = script(size);
        let mut disk = Disk::new(size, 64);
        let mut store = Store::format(&mut disk).unwrap();
        for (k, v) in &log {
            store.append(*k, v).unwrap();
        }
        let head = store.commit().head;
        for sector in 0..head {
            for byte in 0..size {
                let bit = (byte % 8) as u8;
                let mut damaged = Disk::new(size, 64);
                damaged.durable = disk.durable.clone();
                damaged.flip(sector, byte, bit);
                let found = inconsistencies(&mut damaged);
                assert!(!found.is_empty(), "sector {sector} byte {byte}: not found");
                if let Ok(mut store) = Store::mount(&mut damaged) {
                    let mut out = vec![0; MAX_VALUE];
                    for key in 0..4 {
                        let got = store.get(key, &mut out);
                        assert!(matches!(got, Err(Error::Inconsistent(_))), "sector {sector} byte {byte}: {got:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_checker_names_every_inconsistency() {
    let size = 512;
    let mut disk = Disk::new(size, 64);
    let mut store = Store::format(&mut disk).unwrap();
    for k in 0..4 {
        store.append(k, &value(k, 10)).unwrap();
    }
    assert_eq!(inconsistencies(&mut disk), []);
    // Records 1 and 3 (sectors 3 and 5) damaged, and the older commit (slot 0: seq 4).
    disk.flip(3, 100, 0);
    disk.flip(5, 30, 7);
    disk.flip(0, 40, 1);
    assert_eq!(
        inconsistencies(&mut disk),
        [
            Inconsistency::SlotDamaged { slot: 0 },
            Inconsistency::RecordDamaged { sector: 3, index: 1 },
            Inconsistency::RecordDamaged { sector: 5, index: 3 },
        ]
    );
    assert_eq!(Store::mount(&mut disk).err(), Some(Error::Inconsistent(Inconsistency::SlotDamaged { slot: 0 })));
    // A record's magic gone: the walk cannot go on, and says where it stopped.
    disk.flip(0, 40, 1);
    disk.flip(4, 0, 0);
    assert_eq!(
        inconsistencies(&mut disk),
        [Inconsistency::RecordDamaged { sector: 3, index: 1 }, Inconsistency::RecordMissing { sector: 4, index: 2 }]
    );
}

/// Writes `commit` into its slot on the medium.
fn forge(disk: &mut Disk, commit: Commit) {
    let mut buf = vec![0; disk.size];
    commit.encode(&mut buf);
    disk.durable.insert(commit.seq % 2, buf);
}

#[test]
fn commits_that_lie_are_refused() {
    let size = 4096;
    let mut disk = Disk::new(size, 100);
    let mut store = Store::format(&mut disk).unwrap();
    store.append(1, b"one").unwrap();
    let good = store.commit();
    let cases = [
        (Commit { head: 101, ..good }, Inconsistency::HeadOutOfRange { slot: 0, head: 101 }),
        (Commit { head: 1, ..good }, Inconsistency::HeadOutOfRange { slot: 0, head: 1 }),
        (Commit { records: 5, ..good }, Inconsistency::TooManyRecords { slot: 0, records: 5 }),
        (
            Commit { sector_count: 99, ..good },
            Inconsistency::SlotGeometry { slot: 0, sector_size: 4096, sector_count: 99 },
        ),
        (
            Commit { sector_size: 512, ..good },
            Inconsistency::SlotGeometry { slot: 0, sector_size: 512, sector_count: 100 },
        ),
        (Commit { seq: 4, ..good }, Inconsistency::NotConsecutive { older: 1, newer: 4 }),
        (Commit { seq: 1, head: 4, records: 1, ..good }, Inconsistency::OlderNotPrefix { head: 4, records: 1 }),
    ];
    for (commit, want) in cases {
        let mut bad = Disk::new(size, 100);
        bad.durable = disk.durable.clone();
        forge(&mut bad, commit);
        assert_eq!(Store::mount(&mut bad).err(), Some(Error::Inconsistent(want)), "{commit:?}");
        assert!(inconsistencies(&mut bad).contains(&want), "{commit:?}");
    }
    // A commit in the wrong slot.
    let mut bad = Disk::new(size, 100);
    bad.durable = disk.durable.clone();
    let mut buf = vec![0; size];
    Commit { seq: 3, ..good }.encode(&mut buf);
    bad.durable.insert(0, buf);
    assert!(inconsistencies(&mut bad).contains(&Inconsistency::SlotMisplaced { slot: 0, seq: 3 }));
    // A count the log does not hold.
    let mut bad = Disk::new(size, 100);
    bad.durable = disk.durable.clone();
    forge(&mut bad, Commit { seq: 3, records: 2, head: 4, ..good });
    assert!(inconsistencies(&mut bad).contains(&Inconsistency::RecordMissing { sector: 3, index: 1 }));
}

#[test]
fn geometries_the_store_does_not_work_on_are_refused() {
    for size in [0, 256, 511, 4097, 8192] {
        assert_eq!(Store::format(Disk::new(size, 100)).err(), Some(Error::BadSectorSize(size)));
        let found = inconsistencies(&mut Disk::new(size, 100));
        assert_eq!(found, [Inconsistency::DeviceGeometry { sector_size: size, sector_count: 100 }]);
    }
    for count in [0, 1, 2] {
        assert_eq!(Store::format(Disk::new(512, count)).err(), Some(Error::TooSmall(count)));
    }
    assert!(Store::format(Disk::new(512, 3)).is_ok());
    // A store made on 100 sectors is not mounted on 101.
    let mut disk = Disk::new(512, 100);
    Store::format(&mut disk).unwrap();
    disk.count = 101;
    assert_eq!(
        Store::mount(&mut disk).err(),
        Some(Error::Inconsistent(Inconsistency::SlotGeometry { slot: 0, sector_size: 512, sector_count: 100 }))
    );
}

#[test]
fn a_full_device_refuses_and_stays_consistent() {
    let mut disk = Disk::new(512, 5);
    let mut store = Store::format(&mut disk).unwrap();
    assert_eq!(store.append(0, &value(0, 600)), Ok(0));
    assert_eq!(store.append(1, &value(1, 600)), Err(Error::Full));
    assert_eq!(store.append(1, &value(1, 400)), Ok(1));
    assert_eq!(store.append(2, &[]), Err(Error::Full));
    assert!(holds(&mut disk, &[(0, value(0, 600)), (1, value(1, 400))]));
}

#[test]
fn counts_near_two_to_the_64_never_wrap() {
    for size in [512, 520, 4096] {
        let count = u64::MAX;
        let mut disk = Disk::new(size, count);
        let mut store = Store::format(&mut disk).unwrap();
        store.append(7, b"near the top").unwrap();
        let good = store.commit();
        assert!(holds(&mut disk, &[(7, b"near the top".to_vec())]));
        // A commit whose head is near the end: the arithmetic past it must not wrap.
        for head in [u64::MAX, u64::MAX - 1, u64::MAX - 2] {
            let mut top = Disk::new(size, count);
            top.durable = disk.durable.clone();
            forge(&mut top, Commit { seq: good.seq + 1, head, ..good });
            let mut store = Store::mount(&mut top).unwrap();
            let one = extent(size, 1);
            let two = vec![1; size];
            let fits = |len| head.checked_add(extent(size, len)).is_some_and(|end| end <= count);
            assert_eq!(store.append(1, &two).is_ok(), fits(size), "head {head}");
            assert_eq!(store.append(1, &two).err(), Some(Error::Full));
            let r = store.append(1, b"x");
            assert_eq!(r.is_ok(), head.checked_add(one).is_some_and(|e| e <= count) && !fits(size), "head {head}");
            // The log does not reach such a head: the checker says where it stops.
            let found = inconsistencies(&mut top);
            assert!(matches!(found[0], Inconsistency::RecordMissing { sector: 3, index: 1 }), "{found:?}");
        }
    }
}
