//! The crate against GNU `addr2line -fi` on a kernel's ELF (docs/triage.md, "Symbolization").
//!
//! ```text
//! cargo run --release -p testbench-symbols --example addr2line_compare -- VMLINUX [N] [SEED]
//! ```
//!
//! Samples N addresses (1000 unless given) from the ELF's function symbols, the same ones
//! for one seed (fastrand, seed 28 unless given): a function drawn at random, then a
//! byte inside it. Each is looked up by the crate and by one GNU `addr2line -fi -a -e`
//! process given them all on its standard input (and by `llvm-addr2line`, a third
//! opinion, when it is on the path). Prints how many get the same functions (every frame
//! of the address, inlined ones included, in order) and the same file:line (every
//! frame's; `//` in a path read as `/`), the first misses (`SHOW_MISSES=N` for more),
//! and the times: the crate's 64-frame trace
//! cold (the file opened, then 64 lookups), warm (the file loaded, 64 other addresses
//! whose units were never parsed) and again (the same 64 once more), and GNU
//! addr2line's time on all N.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use testbench_symbols::gnu::{self, GnuFrame};
use testbench_symbols::{Located, Symbols};

const TRACE: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(elf) = args.first().map(PathBuf::from) else {
        eprintln!("usage: addr2line_compare VMLINUX [N] [SEED]");
        std::process::exit(2);
    };
    let count: usize = args.get(1).map(|n| n.parse().expect("N: a number of addresses")).unwrap_or(1000);
    let seed: u64 = args.get(2).map(|n| n.parse().expect("SEED: a number")).unwrap_or(28);

    // Cold: the file opened and a 64-frame trace looked up, before anything else.
    let started = Instant::now();
    let symbols = Symbols::open(&elf).unwrap_or_else(|e| panic!("{e}"));
    let opened = started.elapsed();
    symbols.require_dwarf().unwrap_or_else(|e| panic!("{e}"));

    let mut rng = fastrand::Rng::with_seed(seed);
    // x86's `__pfx_` symbols name the NOP padding before each function (for call-depth
    // tracking), which no CPU runs and no DWARF covers: not sampled.
    let functions: Vec<_> =
        symbols.functions().iter().filter(|s| s.function && s.size > 0 && !s.name.starts_with("__pfx_")).collect();
    let sample = |rng: &mut fastrand::Rng| {
        let f = functions[rng.usize(..functions.len())];
        f.address + rng.u64(..f.size)
    };
    let addresses: Vec<u64> = (0..count).map(|_| sample(&mut rng)).collect();
    let other: Vec<u64> = (0..TRACE).map(|_| sample(&mut rng)).collect();
    let trace = &addresses[..TRACE.min(addresses.len())];

    let time = |addresses: &[u64]| {
        let started = Instant::now();
        for &a in addresses {
            symbols.lookup(a).unwrap_or_else(|e| panic!("{e}"));
        }
        started.elapsed()
    };
    let cold = opened + time(trace);
    let warm = time(&other);
    let again = time(trace);

    let started = Instant::now();
    let ours: Vec<Vec<Located>> =
        addresses.iter().map(|&a| symbols.lookup(a).unwrap_or_else(|e| panic!("{e}"))).collect();
    let ours_time = started.elapsed();

    // The crate's peak memory so far (Linux's high-water mark), before GNU's process runs.
    let peak = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        status.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l["VmHWM:".len()..].trim().to_string())
    });

    let scratch = std::env::temp_dir().join(format!("addr2line-compare-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let started = Instant::now();
    let theirs = gnu::addr2line_fi("addr2line", &elf, &addresses, &scratch, Duration::from_secs(1800))
        .unwrap_or_else(|e| panic!("{e}"));
    let theirs_time = started.elapsed();
    // A third opinion where the two differ, when LLVM's is on the path.
    let started = Instant::now();
    let llvm = testbench_process::on_path("llvm-addr2line").map(|_| {
        gnu::addr2line_fi("llvm-addr2line", &elf, &addresses, &scratch, Duration::from_secs(1800))
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let llvm_time = started.elapsed();
    let _ = std::fs::remove_dir_all(&scratch);

    let functions_of = |frames: &[Located]| -> Vec<String> {
        frames.iter().map(|l| l.function.clone().unwrap_or_else(|| "??".into())).collect()
    };
    // One path spelt two ways (`intel//trace.h`, `intel/trace.h`) is one file.
    let path = |file: &str| {
        let mut path = String::with_capacity(file.len());
        for c in file.chars() {
            if !(c == '/' && path.ends_with('/')) {
                path.push(c);
            }
        }
        path
    };
    let places_of = |frames: &[Located]| -> Vec<(String, Option<u32>)> {
        frames.iter().map(|l| (path(l.file.as_deref().unwrap_or("??")), l.line)).collect()
    };
    let their_functions = |frames: &[GnuFrame]| -> Vec<String> {
        let mut names: Vec<String> = frames.iter().map(|g| g.function.clone()).collect();
        // GNU prints `??` and `??:0` for an address it knows nothing of; the crate, nothing.
        if names == ["??"] {
            names.clear();
        }
        names
    };
    let their_places = |frames: &[GnuFrame]| -> Vec<(String, Option<u32>)> {
        let mut places: Vec<(String, Option<u32>)> = frames.iter().map(|g| (path(&g.file), g.line)).collect();
        if frames.len() == 1 && frames[0].function == "??" && frames[0].file == "??" {
            places.clear();
        }
        places
    };
    let (mut same_function, mut same_place, mut same_outer, mut shown) = (0, 0, 0, 0);
    let (mut llvm_place, mut either_place, mut llvm_function) = (0, 0, 0);
    let show = std::env::var("SHOW_MISSES").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    for (index, ((address, ours), theirs)) in addresses.iter().zip(&ours).zip(&theirs).enumerate() {
        let (f_ours, f_theirs) = (functions_of(ours), their_functions(theirs));
        let (p_ours, p_theirs) = (places_of(ours), their_places(theirs));
        same_function += usize::from(f_ours == f_theirs);
        same_outer += usize::from(f_ours.last() == f_theirs.last());
        same_place += usize::from(p_ours == p_theirs);
        let p_llvm = llvm.as_ref().map(|llvm| their_places(&llvm[index]));
        if let Some(llvm) = &llvm {
            llvm_function += usize::from(f_ours == their_functions(&llvm[index]));
        }
        llvm_place += usize::from(p_llvm.as_ref() == Some(&p_ours));
        either_place += usize::from(p_ours == p_theirs || p_llvm.as_ref() == Some(&p_ours));
        if (f_ours != f_theirs || p_ours != p_theirs) && shown < show {
            shown += 1;
            println!("miss at {address:#x}:\n  crate: {f_ours:?} {p_ours:?}\n  GNU:   {f_theirs:?} {p_theirs:?}");
            if let Some(p_llvm) = &p_llvm {
                println!("  LLVM:  {p_llvm:?}");
            }
        }
    }
    let pct = |n: usize| 100.0 * n as f64 / addresses.len() as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{}: {} addresses (seed {seed}) from {} function symbols",
        elf.display(),
        addresses.len(),
        functions.len()
    );
    println!("same functions (every frame): {same_function} ({:.2}%)", pct(same_function));
    println!("same outermost function:      {same_outer} ({:.2}%)", pct(same_outer));
    println!("same file:line (every frame): {same_place} ({:.2}%)", pct(same_place));
    if llvm.is_some() {
        println!("same functions as llvm-addr2line: {llvm_function} ({:.2}%)", pct(llvm_function));
        println!("same file:line as llvm-addr2line: {llvm_place} ({:.2}%)", pct(llvm_place));
        println!("same file:line as GNU's or LLVM's: {either_place} ({:.2}%)", pct(either_place));
    }
    println!(
        "crate, {TRACE}-frame trace: cold {:.0} ms (open {:.0} ms), warm {:.1} ms, again {:.2} ms",
        ms(cold),
        ms(opened),
        ms(warm),
        ms(again)
    );
    println!(
        "all {} addresses: crate {:.0} ms (loaded), GNU addr2line {:.0} ms (one process, from its start)",
        addresses.len(),
        ms(ours_time),
        ms(theirs_time)
    );
    if let Some(peak) = peak {
        println!("crate's peak memory (VmHWM), loaded and {} addresses looked up: {peak}", addresses.len());
    }
    if llvm.is_some() {
        println!("llvm-addr2line {:.0} ms (one process, from its start)", ms(llvm_time));
    }
}
