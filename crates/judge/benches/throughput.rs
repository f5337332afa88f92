//! Throughput of the judge on a 1 GiB synthetic console log, against a baseline (a
//! plain memchr line count over the same buffer) in the same run. Prints figures; makes
//! no timed assertions. Run with `cargo bench -p testbench-judge`.
//!
//! The log: lines of 60–100 bytes of kernel-like ASCII text, about one in six with ANSI
//! colour sequences, 10 expects spread through the log (the last near its end), 10
//! forbids that never match. The judge waits for a power-off, so it reads every byte.

use std::hint::black_box;
use std::time::{Duration, Instant};

use testbench_judge::{Config, Ending, ExitStatus, Judge, Pattern, Shutdown, Verdict};

const SIZE: usize = 1 << 30;
const CHUNK: usize = 64 * 1024;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SUBSYSTEMS: &[&str] = &[
    "virtio_blk",
    "riscv-plic",
    "sbi",
    "mm",
    "sched",
    "vfs",
    "net",
    "uart",
    "timer",
    "pci",
    "clk",
    "rcu",
    "ext2",
    "init",
    "alloc",
];
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
    "hart",
    "online",
    "probe",
    "ok",
    "freed",
    "memory",
    "registered",
    "driver",
    "version",
    "1.2.3",
    "clock",
    "source",
    "tick",
    "mode",
    "cpu0",
    "buffer",
    "slot",
];

/// One line of 60–100 bytes (before colour sequences), without '\n'.
fn line(rng: &mut Rng, out: &mut Vec<u8>) {
    let start = out.len();
    let colour = rng.below(6) == 0;
    let secs = rng.below(100_000);
    out.extend_from_slice(format!("[{:5}.{:06}] ", secs / 100, rng.below(1_000_000)).as_bytes());
    if colour {
        out.extend_from_slice(b"\x1b[32m[ OK ]\x1b[0m ");
    }
    out.extend_from_slice(SUBSYSTEMS[rng.below(SUBSYSTEMS.len())].as_bytes());
    out.extend_from_slice(b": ");
    let target = 60 + rng.below(41);
    while out.len() - start < target {
        out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
        out.push(b' ');
    }
    out.pop(); // no trailing space
    if colour && rng.below(2) == 0 {
        out.extend_from_slice(b" \x1b[1;33mdone\x1b[0m");
    }
}

fn generate() -> Vec<u8> {
    let mut rng = Rng(42);
    // A pool of distinct lines, copied at random to fill the buffer quickly.
    let mut pool = Vec::new();
    let mut starts = vec![0];
    for _ in 0..65_536 {
        line(&mut rng, &mut pool);
        pool.push(b'\n');
        starts.push(pool.len());
    }
    let mut log = Vec::with_capacity(SIZE + 4096);
    let mut next_expect = 0;
    while log.len() < SIZE {
        // Expect k sits at (k + 0.95) tenths of the log.
        if next_expect < 10 && log.len() >= (SIZE / 10) * next_expect + SIZE / 10 * 95 / 100 {
            log.extend_from_slice(format!("[ 1234.000000] \x1b[1mmilestone {next_expect} reached\x1b[0m\n").as_bytes());
            next_expect += 1;
            continue;
        }
        let i = rng.below(65_536);
        log.extend_from_slice(&pool[starts[i]..starts[i + 1]]);
    }
    log
}

fn config() -> Config {
    let mut c = Config { poweroff: true, ..Config::default() };
    let n_expect = if std::env::var_os("NOEXPECT").is_some() { 0 } else { 10 };
    for k in 0..n_expect {
        c.expect
            .push(Pattern::new(format!("expect[{k}]"), &format!(r"^\[ *\d+\.\d+\] milestone {k} reached$")).unwrap());
    }
    let forbids = [
        "PANIC",
        "Kernel panic - not syncing",
        "TEST FAILED",
        "WARNING: INSECURE",
        "BUG: ",
        "segfault at [0-9a-f]+",
        "(?i)double fault",
        "^ERROR:",
        "assertion failed",
        r"Oops\b",
    ];
    let skip: Vec<usize> =
        std::env::var("SKIP").unwrap_or_default().split(',').filter_map(|x| x.parse().ok()).collect();
    for (i, f) in forbids.iter().enumerate().filter(|(i, _)| !skip.contains(i)) {
        c.forbid.push(Pattern::new(format!("forbid[{i}]"), f).unwrap());
    }
    c
}

fn judge(log: &[u8]) -> (Duration, Verdict, u64) {
    let t = Instant::now();
    let mut j = Judge::new(config());
    let mut now = Duration::ZERO;
    for chunk in log.chunks(CHUNK) {
        now += Duration::from_micros(1);
        let step = j.feed(now, chunk);
        black_box(&step);
    }
    let v =
        j.end(now, Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOff, stderr_tail: vec![] });
    (t.elapsed(), v, j.lines_seen())
}

fn baseline(log: &[u8]) -> (Duration, usize) {
    let t = Instant::now();
    let n = memchr::memchr_iter(b'\n', black_box(log)).count();
    (t.elapsed(), n)
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    let t = Instant::now();
    let log = generate();
    println!(
        "generated {} bytes ({:.0} MiB) of console log in {:.2?}",
        log.len(),
        log.len() as f64 / (1 << 20) as f64,
        t.elapsed()
    );
    let mut best_judge = Duration::MAX;
    let mut best_base = Duration::MAX;
    for round in 1..=std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3) {
        let (dj, verdict, lines) = judge(&log);
        assert_eq!(verdict, Verdict::Pass, "the synthetic log must pass");
        let (db, count) = baseline(&log);
        assert_eq!(count as u64, lines);
        println!(
            "round {round}: judge {:8.1} MB/s ({:.3} s, {lines} lines)   baseline memchr line count {:8.1} MB/s ({:.3} s)",
            mbps(log.len(), dj),
            dj.as_secs_f64(),
            mbps(log.len(), db),
            db.as_secs_f64()
        );
        best_judge = best_judge.min(dj);
        best_base = best_base.min(db);
    }
    let (j, b) = (mbps(log.len(), best_judge), mbps(log.len(), best_base));
    println!(
        "best: judge {j:.1} MB/s, baseline {b:.1} MB/s, judge/baseline = {:.3} (baseline is {:.1}x faster)",
        j / b,
        b / j
    );
}
