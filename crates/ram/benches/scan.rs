//! The RAM scan's speed: `cargo bench -p testbench-ram`. A 512 MiB "RAM" (pseudo-random
//! bytes, the size of the Linux cases' guests) held in memory, scanned for four needles
//! that are nowhere in it (the scan's worst case: every byte read), against a baseline in
//! the same run: memchr counting one byte value over the same buffer (a plain read at
//! memory speed); then the same scan reading the buffer from a file in the page cache, as
//! the bench reads QEMU's dump. Then `footprint::measure` over the same bytes (with one
//! program's painted stack and heap record planted in them) for eight declared programs,
//! in memory and from the file. Prints figures; asserts only that the planted program
//! is measured.

use std::time::{Duration, Instant};

use testbench_ram::footprint::{measure, Declared};
use testbench_ram::{scan, Needle};

fn main() {
    let size = std::env::var("RAM_BENCH_MIB").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(512) << 20;
    let mut ram = vec![0u8; size];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in ram.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    // One program's stack of four pages, used down to unit 1000, and its heap record, in
    // the middle of the RAM; the other seven programs are nowhere.
    let declared: Vec<Declared> = ["init", "shell", "worker", "logger", "pager", "timer", "net", "disk"]
        .iter()
        .map(|n| Declared::new(n))
        .collect();
    let tag = declared[0].tag;
    let stack_at = size / 2;
    for index in 0..4 * abi::paint::UNITS_PER_PAGE {
        let word = if index < 1000 { abi::paint::stack_word(tag, 4, index) } else { 0 };
        ram[stack_at + index * 8..stack_at + index * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
    let record_at = stack_at + 4 * 4096;
    let mut record = abi::paint::HEAP_MAGIC.to_le_bytes().to_vec();
    for half in [tag, 16, 5, 0] {
        record.extend(half.to_le_bytes());
    }
    record.extend((!abi::paint::HEAP_MAGIC).to_le_bytes());
    ram[record_at..record_at + record.len()].copy_from_slice(&record);
    let needles: Vec<Needle> =
        ["tb-ram-secret-42042", "-----BEGIN OPENSSH PRIVATE KEY-----", "hunter2-hunter2", "\u{0}\u{1}zz\u{2}\u{3}yy"]
            .iter()
            .enumerate()
            .map(|(i, t)| Needle { label: format!("ram_forbid[{i}]"), bytes: t.as_bytes().to_vec() })
            .collect();
    let best = |f: &mut dyn FnMut() -> u64| {
        let mut best = Duration::MAX;
        let mut out = 0;
        for _ in 0..5 {
            let start = Instant::now();
            out = f();
            best = best.min(start.elapsed());
        }
        (best, out)
    };
    let (baseline, count) = best(&mut || memchr::memchr_iter(0xa5, &ram).count() as u64);
    let (scanned, read) = best(&mut || {
        let result = scan(&ram[..], 0x8000_0000, &needles).expect("the needles are in bounds");
        assert!(result.found.is_empty());
        result.bytes
    });
    assert_eq!(read, size as u64);
    // The bench's own way: the dump is a file QEMU has just written (in the page cache).
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("ram.bin");
    std::fs::write(&path, &ram).expect("the dump written");
    let (from_file, _) = best(&mut || {
        let file = std::fs::File::open(&path).expect("the dump opens");
        scan(file, 0x8000_0000, &needles).expect("the needles are in bounds").bytes
    });
    let check = |measured: testbench_ram::footprint::Measured| {
        let init = &measured.programs[0];
        assert_eq!(init.stack.as_ref().map(|s| s.peak_bytes), Some((2048 - 1000) * 8));
        assert_eq!(init.heap.map(|h| (h.cap, h.peak)), Some((16, 5)));
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        measured.bytes
    };
    let (measured, read) = best(&mut || check(measure(&ram[..], 0x8000_0000, &declared).expect("a page-aligned base")));
    assert_eq!(read, size as u64);
    let (measured_file, _) = best(&mut || {
        let file = std::fs::File::open(&path).expect("the dump opens");
        check(measure(file, 0x8000_0000, &declared).expect("a page-aligned base"))
    });
    let rate = |d: Duration| size as f64 / d.as_secs_f64() / 1e9;
    println!("ram scan: {} MiB, {} needles, best of 5", size >> 20, needles.len());
    println!("  baseline memchr byte count: {:.2} GB/s ({count} hits)", rate(baseline));
    println!("  scan:                       {:.2} GB/s", rate(scanned));
    println!("  ratio scan/baseline:        {:.2}", rate(scanned) / rate(baseline));
    println!("  scan of a file in the page cache: {:.2} GB/s", rate(from_file));
    println!("  target: at least 2 GB/s from the file: {}", if rate(from_file) >= 2.0 { "met" } else { "missed" });
    println!("footprint measure: {} declared programs, one planted, best of 5", declared.len());
    println!("  measure:                    {:.2} GB/s", rate(measured));
    println!("  ratio measure/baseline:     {:.2}", rate(measured) / rate(baseline));
    println!("  measure of a file in the page cache: {:.2} GB/s", rate(measured_file));
    println!("  target: at least 2 GB/s from the file: {}", if rate(measured_file) >= 2.0 { "met" } else { "missed" });
}
