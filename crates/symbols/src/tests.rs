//! Against a real ELF: a small C program the host's `cc` builds with DWARF into a
//! scratch directory, looked up by this crate and by GNU `addr2line -fi`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_process::Cmd;
use testbench_triage::Frame;

use super::*;

/// `crash_here` holds two inlined calls of `twice` (lines 5-6, called at 12 and 13); `caller` calls it, `main` calls `caller`.
const PROGRAM: &str = r#"
volatile int counter;

static inline __attribute__((always_inline)) int twice(int x) {
    counter += x;
    return counter * 2 + 1;
}

__attribute__((noinline)) int crash_here(int x) {
    volatile int *p = (volatile int *)0;
    if (x > 3)
        *p = twice(x);
    return twice(x + 1) + x;
}

__attribute__((noinline)) int caller(int x) {
    int y = crash_here(x);
    return y + 1;
}

int main(int argc, char **argv) {
    (void)argv;
    return caller(argc);
}
"#;

/// A scratch directory of the test's own, and the program built in it with `flags`.
fn build(test: &str, flags: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix(&format!("symbols-{test}-")).tempdir().expect("a scratch directory");
    let source = dir.path().join("prog.c");
    std::fs::write(&source, PROGRAM).expect("the source written");
    let elf = dir.path().join("prog");
    let output = Cmd::new("cc", "cc to build the test program", Duration::from_secs(120))
        .args(flags)
        .arg("-o")
        .arg(&elf)
        .arg(&source)
        .cwd(dir.path())
        .output()
        .expect("these tests need the host's C compiler, cc");
    assert!(output.status.success(), "cc failed: {}", String::from_utf8_lossy(&output.stderr));
    (dir, elf)
}

fn with_dwarf(test: &str) -> (tempfile::TempDir, PathBuf) {
    build(test, &["-g", "-O2", "-fno-pie", "-no-pie"])
}

fn function<'a>(symbols: &'a Symbols, name: &str) -> &'a Symbol {
    symbols.functions().iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} in the symbol table"))
}

/// Every byte address of the program's three functions gives the same frames (function,
/// file and line, inlined ones included, outermost last) as GNU `addr2line -fi`.
#[test]
fn every_address_of_a_program_gives_the_frames_gnu_addr2line_gives() {
    let (dir, elf) = with_dwarf("gnu");
    let symbols = Symbols::open(&elf).expect("the program's ELF");
    assert!(symbols.has_dwarf());
    let mut addresses = Vec::new();
    for name in ["crash_here", "caller", "main"] {
        let f = function(&symbols, name);
        assert!(f.function && f.size > 0, "{f:?}");
        addresses.extend(f.address..f.address + f.size);
    }
    let gnu = gnu::addr2line_fi("addr2line", &elf, &addresses, dir.path(), Duration::from_secs(60))
        .expect("these tests need GNU addr2line (binutils) on the path");
    let mut inlined = 0;
    for (address, theirs) in addresses.iter().zip(&gnu) {
        let ours = symbols.lookup(*address).expect("a lookup");
        let ours: Vec<(String, String, Option<u32>)> = ours
            .iter()
            .map(|l| (l.function.clone().unwrap_or("??".into()), l.file.clone().unwrap_or("??".into()), l.line))
            .collect();
        let theirs: Vec<(String, String, Option<u32>)> =
            theirs.iter().map(|g| (g.function.clone(), g.file.clone(), g.line)).collect();
        assert_eq!(ours, theirs, "at {address:#x}");
        inlined += usize::from(ours.len() > 1);
    }
    assert!(inlined > 0, "no address of the program is in an inlined call: the test proves nothing of inlining");
}

/// An address inside the inlined `twice` gives two frames: `twice` (inlined) at its own
/// line, then `crash_here` at the line that calls it, not inlined.
#[test]
fn an_inlined_call_is_a_frame_of_its_own_before_its_caller() {
    let (_dir, elf) = with_dwarf("inlined");
    let symbols = Symbols::open(&elf).expect("the program's ELF");
    let f = function(&symbols, "crash_here");
    let frames = (f.address..f.address + f.size)
        .map(|a| symbols.lookup(a).expect("a lookup"))
        .find(|frames| frames.len() == 2)
        .expect("an address in an inlined twice()");
    assert_eq!(frames[0].function.as_deref(), Some("twice"), "{frames:?}");
    assert!(frames[0].inlined);
    assert!(matches!(frames[0].line, Some(5) | Some(6)), "twice's body is lines 5 and 6: {frames:?}");
    assert_eq!(frames[1].function.as_deref(), Some("crash_here"), "{frames:?}");
    assert!(!frames[1].inlined);
    assert!(matches!(frames[1].line, Some(12) | Some(13)), "a call of twice in crash_here: {frames:?}");
    assert!(frames.iter().all(|l| l.file.as_deref().is_some_and(|file| file.ends_with("prog.c"))), "{frames:?}");
    assert_eq!(symbols.symbol_at(f.address + 1).map(|(s, off)| (s.name.as_str(), off)), Some(("crash_here", 1)));
}

fn frame(function: &str, offset: u64, size: u64, address: Option<u64>) -> Frame {
    Frame {
        function: Some(function.into()),
        offset: Some(offset),
        size: Some(size),
        module: None,
        address,
        location: None,
        reliable: true,
    }
}

/// The offset comes from `Kernel Offset:` when the console has it, else from the frames
/// that print an address and a function (the most agreeing), else it is 0; each frame is
/// looked up where it points (a return address one byte before), a module's frame not at all.
#[test]
fn the_offset_is_read_from_the_console_else_from_the_frames() {
    let (_dir, elf) = with_dwarf("relocation");
    let symbols = Symbols::open(&elf).expect("the program's ELF");
    let (crash, caller) = (function(&symbols, "crash_here").clone(), function(&symbols, "caller").clone());
    let delta = 0x2a00_0000;
    let at = |s: &Symbol, off: u64| Some(s.address + off + delta);
    // Where the CPU was: a place whose frames are not those of the byte before it.
    let pc = (1..crash.size)
        .find(|&off| symbols.lookup(crash.address + off).unwrap() != symbols.lookup(crash.address + off - 1).unwrap())
        .expect("two places in crash_here with other lines");
    let frames = vec![
        frame("crash_here", pc, crash.size, at(&crash, pc)),
        frame("caller", 9, caller.size, at(&caller, 9)),
        // A frame that lies (a stale stack word) is outvoted.
        frame("main", 2, 0x40, Some(0x1234)),
        // Names the table does not have, or a module's, do not vote.
        frame("no_such_function", 1, 2, Some(0x5000)),
        Frame { module: Some("virtio_net".into()), ..frame("virtnet_poll", 1, 2, Some(0x6000)) },
        // The faulting place again, as riscv's call trace starts.
        frame("crash_here", pc, crash.size, at(&crash, pc)),
    ];
    let relocation = relocation(&symbols, b"[ 1.0] Oops\n", &frames);
    assert_eq!(relocation, Relocation { offset: delta, from: OffsetFrom::Frames { agreeing: 3, of: 4 } });

    let console = b"[ 2.0] Kernel panic - not syncing: Fatal exception\n[ 2.0] Kernel Offset: 0x1000 from 0xffffffff81000000 (relocation range: 0xffffffff80000000-0xffffffffbfffffff)\n";
    assert_eq!(super::relocation(&symbols, console, &frames), Relocation { offset: 0x1000, from: OffsetFrom::Console });
    assert_eq!(kernel_offset(b"Kernel Offset: disabled\n"), Some(0));
    assert_eq!(kernel_offset(b"Kernel Offset: 0x\n"), None);
    assert_eq!(super::relocation(&symbols, b"", &[]), Relocation { offset: 0, from: OffsetFrom::Unknown });

    let traced = symbolize(&symbols, &frames, relocation, 64).expect("symbolized");
    assert_eq!(traced.len(), 6);
    assert_eq!(traced[0].address, Some(crash.address + pc));
    assert_eq!(traced[0].located, symbols.lookup(crash.address + pc).unwrap());
    assert_eq!(traced[0].located.last().and_then(|l| l.function.as_deref()), Some("crash_here"));
    // A return address: its call, one byte before.
    assert_eq!(traced[1].located, symbols.lookup(caller.address + 8).unwrap());
    assert_eq!(traced[1].located.last().and_then(|l| l.function.as_deref()), Some("caller"));
    assert_eq!(traced[4], Symbolized { address: None, located: Vec::new() });
    // Where the CPU was, again: not a return address.
    assert_eq!(traced[5], traced[0]);
    assert_eq!(symbolize(&symbols, &frames, relocation, 2).expect("symbolized").len(), 2);

    // No address printed (arm64's and x86's call traces): the function's link address
    // plus the offset, whatever the relocation.
    let by_name = symbolize(&symbols, &[frame("caller", 9, caller.size, None)], relocation, 64).unwrap();
    assert_eq!(by_name[0].address, Some(caller.address + 9));
    assert_eq!(by_name[0].located, symbols.lookup(caller.address + 9).unwrap());
}

/// A file is loaded once while its path, size and time stay; a changed file is loaded
/// again; an error is kept like a load.
#[test]
fn a_loaded_file_is_kept_warm_until_it_changes() {
    let (dir, elf) = with_dwarf("cache");
    let cache = Cache::new(2);
    let first = cache.open(&elf).expect("loaded");
    let again = cache.open(&elf).expect("kept");
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(cache.loads(), 1);
    let (_other_dir, other) = build("cache-other", &["-g", "-O0", "-fno-pie", "-no-pie"]);
    std::fs::copy(&other, &elf).expect("the file replaced");
    let changed = cache.open(&elf).expect("loaded afresh");
    assert!(!Arc::ptr_eq(&first, &changed));
    assert_eq!(cache.loads(), 2);
    let missing = dir.path().join("missing");
    assert!(matches!(*cache.open(&missing).unwrap_err(), Error::Unreadable { .. }));
    assert_eq!(cache.loads(), 2, "a missing file is not a load");
}

/// What cannot be symbolized against is refused naming the file and what is wrong.
#[test]
fn a_file_that_cannot_be_symbolized_against_is_refused_naming_it() {
    let (dir, no_dwarf) = build("refusals", &["-O2", "-fno-pie", "-no-pie"]);
    let said = |path: &Path| Symbols::open(path).map(|_| ()).unwrap_err().to_string();

    let missing = dir.path().join("vmlinux-missing");
    assert!(said(&missing).starts_with(&format!("{}: cannot be read: ", missing.display())), "{}", said(&missing));

    let text = dir.path().join("prog.c");
    assert!(said(&text).starts_with(&format!("{}: is not an ELF file", text.display())), "{}", said(&text));

    let symbols = Symbols::open(&no_dwarf).expect("a symbol table is enough to open");
    assert!(!symbols.has_dwarf());
    let error = symbols.require_dwarf().unwrap_err().to_string();
    assert!(error.starts_with(&format!("{}: has no DWARF debug information", no_dwarf.display())), "{error}");
    // Without DWARF, the symbol table still names the function, with no line.
    let f = function(&symbols, "caller");
    let located = symbols.lookup(f.address + 1).unwrap();
    assert_eq!(located, vec![Located { function: Some("caller".into()), file: None, line: None, inlined: false }]);

    // An ELF whose .debug_info says it is larger than the file (a cut or damaged file).
    let (_dir, elf) = with_dwarf("past-end");
    let mut bytes = std::fs::read(&elf).unwrap();
    let index = {
        let parsed = object::File::parse(&*bytes).unwrap();
        parsed.section_by_name(".debug_info").unwrap().index().0
    };
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    // ELF64, little-endian: e_shoff at 0x28, 64-byte section headers, sh_size at 0x20.
    let size_at = word(0x28) + index * 64 + 0x20;
    bytes[size_at..size_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let damaged = dir.path().join("damaged");
    std::fs::write(&damaged, &bytes).unwrap();
    let error = said(&damaged);
    assert!(
        error.starts_with(&format!("{}: its .debug_info section (1099511627776 bytes at ", damaged.display()))
            && error.contains("goes past the file's end"),
        "{error}"
    );

    let (_dir, stripped) = build("stripped", &["-O2", "-s", "-fno-pie", "-no-pie"]);
    assert!(said(&stripped).contains("has neither DWARF nor a symbol table"), "{}", said(&stripped));
}
