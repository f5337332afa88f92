//! Throughput of the crash-report parser on a synthetic console (1 GiB by default;
//! TRIAGE_BENCH_MIB sets another size), with no crash and with 10,000 reports spread
//! through it, against a baseline in the same run: a plain memchr count of the lines
//! over the same bytes. Prints figures; makes no timed assertions. The console lives in
//! memory only. Run with `cargo bench -p testbench-triage`.
//!
//! `TRIAGE_BENCH_CONSOLE=PATH` adds a third figure: a real console (a boot's
//! `console.log` with no crash, such as a Debian boot's) repeated to the same size, so
//! the trigger literals are measured on a kernel's own vocabulary too, not only on the
//! synthetic one.

use std::hint::black_box;
use std::time::{Duration, Instant};

use testbench_triage::{Guest, Scanner};

const CHUNK: usize = 64 * 1024;
const REPORTS: usize = 10_000;

const SUBSYSTEMS: &[&str] =
    &["virtio_blk", "EXT4-fs (vda)", "systemd[1]", "random", "NET", "audit", "usb 1-1", "ACPI", "pci 0000:00:02.0"];
const WORDS: &[&str] = &[
    "mapped",
    "region",
    "at",
    "0x80200000",
    "size",
    "4096",
    "pages",
    "irq",
    "enabled",
    "device",
    "found",
    "queue",
    "ready",
    "registered",
    "driver",
    "version",
    "clock",
    "source",
    "mode",
    "buffer",
    "mounted",
    "filesystem",
    "with",
    "ordered",
    "data",
    "link",
    "up",
    "started",
    "service",
    "type=1400",
    "audit(1.2:3):",
];

/// A Linux report of a kind drawn from a few (WARNING, oops, KASAN, hung task).
fn report(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
    let t = rng.usize(..100_000);
    let f = ["ext4_find_entry", "tcp_retransmit_timer", "skb_warn_bad_offload", "rtnl_lock"][rng.usize(..4)];
    let head = match rng.usize(..4) {
        0 => format!("WARNING: CPU: 1 PID: {} at net/core/dev.c:3345 {f}+0x1f0/0x2c0", rng.usize(..9999)),
        1 => "BUG: kernel NULL pointer dereference, address: 0000000000000000".to_string(),
        2 => format!("BUG: KASAN: use-after-free in {f}+0x1a/0x40"),
        _ => format!("INFO: task kworker/1:0:{} blocked for more than 143 seconds.", rng.usize(..9999)),
    };
    let lines = [
        head.as_str(),
        "CPU: 1 PID: 312 Comm: poc Not tainted 6.1.0-18-amd64 #1",
        "Hardware name: QEMU Standard PC (i440FX + PIIX, 1996)",
        "RIP: 0010:__schedule+0x1f0/0x2c0",
        "RSP: 0018:ffffc90000b7fb08 EFLAGS: 00010286",
        "Call Trace:",
        " <TASK>",
        " ? __warn+0x7d/0xc0",
        " __schedule+0x94f/0x1e70",
    ];
    for l in lines {
        out.extend_from_slice(format!("[{:5}.{:06}] {l}\n", t / 100, rng.usize(..1_000_000)).as_bytes());
    }
    out.extend_from_slice(format!("[{:5}.{:06}]  {f}+0x10a/0x190\n", t / 100, 1).as_bytes());
    out.extend_from_slice(format!("[{:5}.{:06}] ---[ end trace 0000000000000000 ]---\n", t / 100, 2).as_bytes());
}

fn line(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
    let start = out.len();
    let secs = rng.usize(..100_000);
    out.extend_from_slice(format!("[{:5}.{:06}] ", secs / 100, rng.usize(..1_000_000)).as_bytes());
    out.extend_from_slice(SUBSYSTEMS[rng.usize(..SUBSYSTEMS.len())].as_bytes());
    out.extend_from_slice(b": ");
    let target = 60 + rng.usize(..41);
    while out.len() - start < target {
        out.extend_from_slice(WORDS[rng.usize(..WORDS.len())].as_bytes());
        out.push(b' ');
    }
    out.pop();
    out.push(b'\n');
}

fn generate(size: usize, reports: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(42);
    let mut pool = Vec::new();
    let mut starts = vec![0];
    for _ in 0..65_536 {
        line(&mut rng, &mut pool);
        starts.push(pool.len());
    }
    let mut log = Vec::with_capacity(size + 4096);
    let mut placed = 0;
    while log.len() < size {
        if placed < reports && log.len() >= size / reports * placed {
            report(&mut rng, &mut log);
            placed += 1;
            continue;
        }
        let i = rng.usize(..65_536);
        log.extend_from_slice(&pool[starts[i]..starts[i + 1]]);
    }
    log
}

fn parse(log: &[u8]) -> (Duration, usize) {
    let t = Instant::now();
    let mut s = Scanner::new(Guest::Linux);
    let mut n = 0;
    for chunk in log.chunks(CHUNK) {
        n += black_box(s.feed(chunk)).len();
    }
    n += s.finish().len();
    (t.elapsed(), n)
}

fn baseline(log: &[u8]) -> Duration {
    let t = Instant::now();
    black_box(memchr::memchr_iter(b'\n', black_box(log)).count());
    t.elapsed()
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e9 / d.as_secs_f64()
}

/// `path`'s bytes repeated to `size`, whole copies only (at least one).
fn repeated(path: &str, size: usize) -> Vec<u8> {
    let one = std::fs::read(path).unwrap_or_else(|e| panic!("TRIAGE_BENCH_CONSOLE={path}: {e}"));
    assert!(!one.is_empty(), "TRIAGE_BENCH_CONSOLE={path} is empty");
    let mut log = Vec::with_capacity(size + one.len());
    while log.len() < size {
        log.extend_from_slice(&one);
    }
    log
}

fn main() {
    let mib: usize = std::env::var("TRIAGE_BENCH_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let real = std::env::var("TRIAGE_BENCH_CONSOLE").ok();
    let mut runs: Vec<(&str, usize, Option<&str>)> = vec![("no crash", 0, None), ("10,000 reports", REPORTS, None)];
    if let Some(path) = real.as_deref() {
        runs.push(("real console", 0, Some(path)));
    }
    for (label, reports, path) in runs {
        let log = match path {
            Some(path) => repeated(path, mib << 20),
            None => generate(mib << 20, reports),
        };
        let (mut best, mut base) = (Duration::MAX, Duration::MAX);
        let mut found = 0;
        for _ in 0..3 {
            let (d, n) = parse(&log);
            best = best.min(d);
            found = n;
            base = base.min(baseline(&log));
        }
        assert_eq!(found, reports, "{label}: every report found, no other");
        println!(
            "{label:>15}: {} MiB, parser {:.2} GB/s ({:.3} s), baseline memchr line count {:.2} GB/s, ratio {:.2}; reports {found}",
            log.len() >> 20,
            gbps(log.len(), best),
            best.as_secs_f64(),
            gbps(log.len(), base),
            base.as_secs_f64() / best.as_secs_f64(),
        );
    }
}
