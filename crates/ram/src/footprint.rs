//! Each program's stack and heap peak, measured from a dump of the guest's RAM.
//!
//! The guest writes what this module reads (the format is `abi::paint`, shared with the
//! kernel and the runtime): whoever makes a program's stack paints every eight-byte unit
//! of it with a word naming the program's tag, the stack's size in pages and the unit's
//! index; the program overwrites the paint as its stack grows down, so the lowest unit
//! whose paint is gone marks the deepest point the stack reached. The runtime keeps a
//! heap record (cap and peak, in pages) that the dump holds as the program left it.
//!
//! [`measure`] reads the dump once, in pieces of [`PIECE`](crate::PIECE) bytes, and
//! keeps per declared program only a set of units per physical page that holds some of
//! its stack (never the dump itself). Anything the bench cannot trust — a unit outside
//! its stack, units that disagree on the stack's size, two pages that are equally the
//! stack, a second or malformed heap record — is a [`Refusal`] naming the program and
//! the physical addresses. Any guest may write these words; a find says what the RAM
//! holds, not who wrote it.

use std::fmt;
use std::io::Read;

use abi::paint::{stack_unit, HeapRecord, HEAP_MAGIC, HEAP_RECORD_LEN, STACK_PAGES_MAX, UNITS_PER_PAGE};
use abi::PAGE_SIZE;

use crate::{read_full, PIECE};

// A piece starts on a page and a unit's index modulo UNITS_PER_PAGE is its word in the page.
const _: () = assert!(
    PIECE.is_multiple_of(PAGE_SIZE) && UNITS_PER_PAGE * 8 == PAGE_SIZE && PAGE_SIZE.is_multiple_of(HEAP_RECORD_LEN)
);

/// The words a page's fast path looks at together: eight, two heap-record slots.
const BLOCK: usize = 64;
/// Words of one unit set (UNITS_PER_PAGE bits).
const SET_WORDS: usize = UNITS_PER_PAGE / 64;

/// A program the bench packed, which the dump is searched for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// Its bundle entry name, which its refusals and measure name.
    pub name: String,
    /// `abi::paint::tag` of the name: what its stack words and heap record carry.
    pub tag: u32,
}

impl Declared {
    /// The program named `name`, with the tag its name gives.
    pub fn new(name: &str) -> Declared {
        Declared { name: name.to_string(), tag: abi::paint::tag(name.as_bytes()) }
    }
}

/// What [`measure`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measured {
    /// The bytes read: the whole dump.
    pub bytes: u64,
    /// One measure per declared program, in the order declared.
    pub programs: Vec<ProgramMeasure>,
    /// Everything found that cannot be trusted, at most one of each kind per program (its
    /// first place in address order; one fault usually repeats over thousands of words).
    /// A measure with a refusal against its program is not to be believed.
    pub refusals: Vec<Refusal>,
}

/// One program's stack and heap as the dump holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramMeasure {
    /// The program's name, as declared.
    pub name: String,
    /// Its stack, or None when no unit of its paint is anywhere in the dump.
    pub stack: Option<Stack>,
    /// Its heap record, or None when there is none (the first one, if there are two).
    pub heap: Option<Heap>,
}

/// A painted stack's peak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Its size in pages, as its units say.
    pub pages: usize,
    /// Bytes from the deepest touched unit to the stack's top: how much of the stack the
    /// program used at most. Zero when every unit still holds its paint.
    pub peak_bytes: u64,
    /// The lowest unit whose paint is gone (counted from the stack's lowest address), or
    /// None when every unit holds its paint.
    pub lowest_missing: Option<usize>,
    /// The units found with their paint, counted in the physical page each stack page's
    /// units are counted from.
    pub units: usize,
}

/// A heap record as the dump holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    /// Pages the heap may hold (0: the program has no heap).
    pub cap: u32,
    /// The most pages it held at once.
    pub peak: u32,
    /// The record's physical address.
    pub address: u64,
}

/// Something in the dump the measure cannot trust. Its `Display` says it in plain words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A stack unit at its word in a page whose index is outside its own stack, or
    /// whose stack size is zero or above `STACK_PAGES_MAX`.
    OutOfRange {
        /// The program its tag names.
        name: String,
        /// The word's physical address.
        address: u64,
        /// The unit index it carries.
        index: usize,
        /// The stack size in pages it carries.
        pages: usize,
    },
    /// A stack unit whose stack size differs from that of the program's first unit.
    Inconsistent {
        /// The program its tag names.
        name: String,
        /// The stack size the program's first unit carries.
        first_pages: usize,
        /// The first unit's physical address.
        first_address: u64,
        /// The stack size this unit carries.
        pages: usize,
        /// This unit's physical address.
        address: u64,
    },
    /// Two physical pages hold equally many units of one stack page, at or below the
    /// deepest touched page: two stacks with one tag, or a copy that cannot be told from
    /// the stack, and the peak depends on which is the stack.
    Duplicate {
        /// The program its tag names.
        name: String,
        /// The stack page (0 is the lowest).
        page: usize,
        /// The units each of the two holds.
        units: usize,
        /// The physical page the units were counted from (the lower address).
        kept: u64,
        /// The other physical page.
        other: u64,
    },
    /// A second heap record for one program.
    DuplicateRecord {
        /// The program its tag names.
        name: String,
        /// The first record's physical address (the one measured).
        first: u64,
        /// The second's.
        second: u64,
    },
    /// A heap record whose zero word is not zero or whose peak is above its cap.
    BadRecord {
        /// The program its tag names.
        name: String,
        /// The record's physical address.
        address: u64,
        /// Its cap.
        cap: u32,
        /// Its peak.
        peak: u32,
        /// Its zero word.
        zero: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::OutOfRange { name, address, index, pages } => write!(
                f,
                "{name}: the stack word at {address:#x} says unit {index} of a stack of {pages} pages, \
                 which is outside any such stack (1 to {STACK_PAGES_MAX} pages of {UNITS_PER_PAGE} units)"
            ),
            Refusal::Inconsistent { name, first_pages, first_address, pages, address } => write!(
                f,
                "{name}: the stack word at {address:#x} says the stack has {pages} pages, the one at \
                 {first_address:#x} says {first_pages}: the program's stack words disagree on its size"
            ),
            Refusal::Duplicate { name, page, units, kept, other } => write!(
                f,
                "{name}: stack page {page} is at two physical pages, {kept:#x} and {other:#x}, each holding \
                 {units} of its units: two stacks with one tag, or a copy that cannot be told from the stack"
            ),
            Refusal::DuplicateRecord { name, first, second } => {
                write!(f, "{name}: two heap records, at {first:#x} and {second:#x}; a program has one")
            }
            Refusal::BadRecord { name, address, cap, peak, zero } => {
                write!(f, "{name}: the heap record at {address:#x} is malformed:")?;
                if *zero != 0 {
                    write!(f, " its zero word is {zero:#x}")?;
                }
                if peak > cap {
                    let and = if *zero != 0 { " and" } else { "" };
                    write!(f, "{and} its peak ({peak} pages) is above its cap ({cap} pages)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether a stack of `stack.pages` pages has room for twice its peak: the peak doubled,
/// rounded up to whole pages, is at most the stack's pages.
pub fn stack_fits(stack: &Stack) -> bool {
    let need = (2 * stack.peak_bytes).div_ceil(PAGE_SIZE as u64);
    stack.pages as u64 >= need
}

/// Whether a heap's cap suits its peak (both in pages). A cap of zero (no heap) always
/// fits. Otherwise the cap must be at least twice the peak; `relaxed` (a case's
/// `heap_fits = true`) asks only that the peak leave at least an eighth of the cap unused.
pub fn heap_fits(cap: u32, peak: u32, relaxed: bool) -> bool {
    let (cap, peak) = (u64::from(cap), u64::from(peak));
    if cap == 0 {
        true
    } else if relaxed {
        peak <= cap && 8 * (cap - peak) >= cap
    } else {
        cap >= 2 * peak
    }
}

/// Read `reader` (a dump of RAM from physical address `base`) to its end and measure
/// every declared program's stack and heap. A `base` that is not page aligned, or two
/// declared programs with one tag, is the caller's mistake, refused as an `InvalidInput`
/// error before anything is read.
pub fn measure<R: Read>(mut reader: R, base: u64, declared: &[Declared]) -> std::io::Result<Measured> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    if !base.is_multiple_of(PAGE_SIZE as u64) {
        return Err(invalid(format!("the dump's base {base:#x} is not page aligned")));
    }
    let mut tags: Vec<(u32, usize)> = declared.iter().enumerate().map(|(i, d)| (d.tag, i)).collect();
    tags.sort_unstable();
    if let Some(pair) = tags.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let (a, b) = (&declared[pair[0].1].name, &declared[pair[1].1].name);
        return Err(invalid(format!("{a} and {b} have one tag, {:#010x}", pair[0].0)));
    }
    let mut pass = Pass { tags, programs: vec![Program::default(); declared.len()], declared, refusals: Vec::new() };
    let mut piece = vec![0u8; PIECE];
    let mut address = base;
    let mut bytes = 0u64;
    loop {
        let got = read_full(&mut reader, &mut piece)?;
        for page in piece[..got].chunks(PAGE_SIZE) {
            pass.page(page, address);
            address += page.len() as u64;
        }
        bytes += got as u64;
        if got < PIECE {
            break;
        }
    }
    Ok(pass.finish(bytes))
}

/// Some of a stack page's units, as one physical page holds them.
#[derive(Clone, Debug)]
struct Candidate {
    /// The physical page's address.
    address: u64,
    /// Bit `u` set: unit `u` of the stack page is there, at its word.
    units: [u64; SET_WORDS],
}

impl Candidate {
    fn count(&self) -> usize {
        self.units.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The lowest unit not there, if any.
    fn first_missing(&self) -> Option<usize> {
        self.units.iter().enumerate().find(|(_, w)| **w != !0).map(|(i, w)| i * 64 + (!w).trailing_zeros() as usize)
    }
}

/// Which faults a program has been refused for already (one refusal of each kind).
#[derive(Clone, Copy, Debug, Default)]
struct Refused {
    out_of_range: bool,
    inconsistent: bool,
    duplicate_record: bool,
    bad_record: bool,
}

/// What the pass has found of one declared program.
#[derive(Clone, Debug, Default)]
struct Program {
    /// The stack size its first unit carries, and that unit's physical address.
    first: Option<(usize, u64)>,
    /// Per stack page, every physical page holding some of its units, in address order.
    stack: Vec<Vec<Candidate>>,
    /// Its first heap record.
    heap: Option<Heap>,
    refused: Refused,
}

/// The state of one pass over a dump.
struct Pass<'a> {
    /// The declared tags, sorted, each with its program's index.
    tags: Vec<(u32, usize)>,
    programs: Vec<Program>,
    declared: &'a [Declared],
    refusals: Vec<Refusal>,
}

impl Pass<'_> {
    fn program(&self, tag: u32) -> Option<usize> {
        self.tags.binary_search_by_key(&tag, |&(t, _)| t).ok().map(|at| self.tags[at].1)
    }

    /// One physical page (or the dump's last bytes, short of a page) at `address`.
    fn page(&mut self, page: &[u8], address: u64) {
        let mut blocks = page.chunks_exact(BLOCK);
        for (at, block) in blocks.by_ref().enumerate() {
            // The fast path: no stack mark in any of the eight words and no heap magic at
            // either record slot, decided without a branch per word.
            let word = |i: usize| u64::from_le_bytes(block[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
            let mut interesting = word(0) == HEAP_MAGIC || word(4) == HEAP_MAGIC;
            for i in 0..BLOCK / 8 {
                interesting |= stack_unit(word(i)).is_some();
            }
            if interesting {
                self.words(block, at * BLOCK, address);
            }
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            self.words(rest, page.len() - rest.len(), address);
        }
    }

    /// The words of `bytes`, which start at offset `offset` of the page at `address`.
    fn words(&mut self, bytes: &[u8], offset: usize, address: u64) {
        for (i, chunk) in bytes.chunks_exact(8).enumerate() {
            let at = offset + i * 8;
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            if at.is_multiple_of(HEAP_RECORD_LEN) && word == HEAP_MAGIC && bytes.len() >= i * 8 + HEAP_RECORD_LEN {
                let record = bytes[i * 8..i * 8 + HEAP_RECORD_LEN].try_into().expect("a record's bytes");
                if let Some(record) = HeapRecord::read(record) {
                    self.record(record, address + at as u64);
                }
            }
            if let Some((tag, pages, index)) = stack_unit(word) {
                if let Some(program) = self.program(tag) {
                    self.unit(program, pages, index, address, at);
                }
            }
        }
    }

    fn record(&mut self, record: HeapRecord, address: u64) {
        let Some(program) = self.program(record.tag) else { return };
        let name = &self.declared[program].name;
        let state = &mut self.programs[program];
        match state.heap {
            None => state.heap = Some(Heap { cap: record.cap, peak: record.peak, address }),
            Some(first) if !state.refused.duplicate_record => {
                state.refused.duplicate_record = true;
                self.refusals.push(Refusal::DuplicateRecord {
                    name: name.clone(),
                    first: first.address,
                    second: address,
                });
            }
            Some(_) => {}
        }
        if (record.zero != 0 || record.peak > record.cap) && !state.refused.bad_record {
            state.refused.bad_record = true;
            self.refusals.push(Refusal::BadRecord {
                name: name.clone(),
                address,
                cap: record.cap,
                peak: record.peak,
                zero: record.zero,
            });
        }
    }

    /// A stack unit of `program` at offset `at` of the page at `page`.
    fn unit(&mut self, program: usize, pages: usize, index: usize, page: u64, at: usize) {
        if index % UNITS_PER_PAGE != at / 8 {
            // Not at its own word: a copy of a stack word in an ordinary slot.
            return;
        }
        let address = page + at as u64;
        let name = &self.declared[program].name;
        let state = &mut self.programs[program];
        if pages == 0 || pages > STACK_PAGES_MAX || index >= pages * UNITS_PER_PAGE {
            if !state.refused.out_of_range {
                state.refused.out_of_range = true;
                self.refusals.push(Refusal::OutOfRange { name: name.clone(), address, index, pages });
            }
            return;
        }
        let (first_pages, first_address) = *state.first.get_or_insert((pages, address));
        if pages != first_pages {
            if !state.refused.inconsistent {
                state.refused.inconsistent = true;
                self.refusals.push(Refusal::Inconsistent {
                    name: name.clone(),
                    first_pages,
                    first_address,
                    pages,
                    address,
                });
            }
            return;
        }
        if state.stack.is_empty() {
            state.stack = vec![Vec::new(); pages];
        }
        let candidates = &mut state.stack[index / UNITS_PER_PAGE];
        // Pages come in address order: this page's candidate, if any, is the last one.
        if candidates.last().is_none_or(|c| c.address != page) {
            candidates.push(Candidate { address: page, units: [0; SET_WORDS] });
        }
        let unit = index % UNITS_PER_PAGE;
        candidates.last_mut().expect("just pushed").units[unit / 64] |= 1 << (unit % 64);
    }

    fn finish(mut self, bytes: u64) -> Measured {
        let mut programs = Vec::with_capacity(self.declared.len());
        for (declared, state) in self.declared.iter().zip(&self.programs) {
            let stack = state.first.map(|(pages, _)| {
                // Per stack page, the physical page holding most of its units (the lower
                // address on a tie).
                let chosen: Vec<Option<&Candidate>> = state
                    .stack
                    .iter()
                    .map(|candidates| {
                        candidates.iter().fold(None, |best: Option<&Candidate>, c| match best {
                            Some(b) if b.count() >= c.count() => Some(b),
                            _ => Some(c),
                        })
                    })
                    .collect();
                let total = pages * UNITS_PER_PAGE;
                let lowest_missing = chosen.iter().enumerate().find_map(|(p, c)| match c {
                    None => Some(p * UNITS_PER_PAGE),
                    Some(c) => c.first_missing().map(|u| p * UNITS_PER_PAGE + u),
                });
                let deepest_page = lowest_missing.unwrap_or(total) / UNITS_PER_PAGE;
                // A tie at or below the deepest touched page moves the peak with the
                // choice; one above it leaves the peak where it is.
                for (p, candidates) in state.stack.iter().enumerate().take(deepest_page + 1) {
                    let Some(kept) = chosen[p] else { continue };
                    let units = kept.count();
                    if let Some(other) = candidates.iter().find(|c| c.address != kept.address && c.count() == units) {
                        self.refusals.push(Refusal::Duplicate {
                            name: declared.name.clone(),
                            page: p,
                            units,
                            kept: kept.address,
                            other: other.address,
                        });
                        break;
                    }
                }
                Stack {
                    pages,
                    peak_bytes: (total - lowest_missing.unwrap_or(total)) as u64 * 8,
                    lowest_missing,
                    units: chosen.iter().flatten().map(|c| c.count()).sum(),
                }
            });
            programs.push(ProgramMeasure { name: declared.name.clone(), stack, heap: state.heap });
        }
        Measured { bytes, programs, refusals: self.refusals }
    }
}

#[cfg(test)]
mod tests {
    use abi::paint::{stack_word, tag};

    use super::*;

    const PAGE: usize = PAGE_SIZE;
    const BASE: u64 = 0x8000_0000;

    fn put(ram: &mut [u8], at: usize, word: u64) {
        ram[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }

    /// Paints a stack of `pages` pages at byte `at` of `ram` for the program `name`, its
    /// units from `touched` up overwritten (zero), as a program that reached unit
    /// `touched` leaves it.
    fn stack(ram: &mut [u8], at: usize, name: &str, pages: usize, touched: usize) {
        for index in 0..pages * UNITS_PER_PAGE {
            let word = if index < touched { stack_word(tag(name.as_bytes()), pages, index) } else { 0 };
            put(ram, at + index * 8, word);
        }
    }

    /// Writes a heap record at byte `at` of `ram`.
    fn record(ram: &mut [u8], at: usize, tag: u32, cap: u32, peak: u32, zero: u32) {
        put(ram, at, HEAP_MAGIC);
        ram[at + 8..at + 12].copy_from_slice(&tag.to_le_bytes());
        ram[at + 12..at + 16].copy_from_slice(&cap.to_le_bytes());
        ram[at + 16..at + 20].copy_from_slice(&peak.to_le_bytes());
        ram[at + 20..at + 24].copy_from_slice(&zero.to_le_bytes());
        put(ram, at + 24, !HEAP_MAGIC);
    }

    fn declared(names: &[&str]) -> Vec<Declared> {
        names.iter().map(|n| Declared::new(n)).collect()
    }

    fn run(ram: &[u8], names: &[&str]) -> Measured {
        measure(ram, BASE, &declared(names)).expect("a valid measure")
    }

    fn peak(measured: &Measured, program: usize) -> Stack {
        measured.programs[program].stack.clone().expect("a stack")
    }

    /// A reader that hands out at most `step` bytes a call, as a pipe or a file may.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_stack_touched_down_to_a_unit_gives_the_exact_peak() {
        let mut ram = vec![0u8; 8 * PAGE];
        let touched = 3 * UNITS_PER_PAGE + 100;
        stack(&mut ram, 2 * PAGE, "init", 4, touched);
        let measured = run(&ram, &["init", "absent"]);
        assert_eq!(measured.bytes, ram.len() as u64);
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        let expected = Stack {
            pages: 4,
            peak_bytes: (4 * 512 - touched as u64) * 8,
            lowest_missing: Some(touched),
            units: touched,
        };
        assert_eq!(peak(&measured, 0), expected);
        assert_eq!(peak(&measured, 0).peak_bytes, 412 * 8);
        assert_eq!(measured.programs[0].name, "init");
        assert_eq!(measured.programs[1], ProgramMeasure { name: "absent".into(), stack: None, heap: None });

        // Untouched, the peak is zero; touched to unit 0, the whole stack.
        stack(&mut ram, 2 * PAGE, "init", 4, 4 * UNITS_PER_PAGE);
        assert_eq!(
            peak(&run(&ram, &["init"]), 0),
            Stack { pages: 4, peak_bytes: 0, lowest_missing: None, units: 2048 }
        );
        stack(&mut ram, 2 * PAGE, "init", 4, 0);
        put(&mut ram, 2 * PAGE + 8, stack_word(tag(b"init"), 4, 1));
        let whole = peak(&run(&ram, &["init"]), 0);
        assert_eq!((whole.peak_bytes, whole.lowest_missing), (4 * 4096, Some(0)));
    }

    #[test]
    fn a_stack_word_away_from_its_own_offset_is_ignored() {
        let mut ram = vec![0u8; 8 * PAGE];
        stack(&mut ram, 0, "init", 4, 1000);
        let clean = run(&ram, &["init"]);
        let t = tag(b"init");
        // Copies in ordinary slots: a unit of the deepest page, one outside any stack and
        // one that disagrees on the size; none is at the word its index names.
        put(&mut ram, 5 * PAGE + 8 * 7, stack_word(t, 4, 1000));
        put(&mut ram, 5 * PAGE + 8 * 8, stack_word(t, 4, 3000));
        put(&mut ram, 6 * PAGE + 8 * 9, stack_word(t, 2, 10));
        put(&mut ram, 6 * PAGE + 8 * 10, stack_word(t, 0, 0));
        assert_eq!(run(&ram, &["init"]), clean);
        assert_eq!(peak(&clean, 0).peak_bytes, (2048 - 1000) * 8);
    }

    #[test]
    fn a_partial_copy_of_a_stack_page_does_not_move_the_peak() {
        let mut ram = vec![0u8; 8 * PAGE];
        let touched = 2 * UNITS_PER_PAGE + 300;
        stack(&mut ram, 4 * PAGE, "init", 4, touched);
        let clean = run(&ram, &["init"]);
        // Below the stack, a buffer holding units 200..420 of stack page 2, each at its own
        // word: among them unit 300, which the stack has lost. Fewer units than the stack's
        // page 2 (0..300), so the stack's page is the one counted.
        let t = tag(b"init");
        for unit in 200..420 {
            put(&mut ram, PAGE + unit * 8, stack_word(t, 4, 2 * UNITS_PER_PAGE + unit));
        }
        let measured = run(&ram, &["init"]);
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        assert_eq!(measured, clean);
        assert_eq!(peak(&measured, 0).lowest_missing, Some(touched));
    }

    #[test]
    fn a_second_whole_stack_with_the_same_tag_is_refused() {
        let mut ram = vec![0u8; 10 * PAGE];
        stack(&mut ram, PAGE, "init", 4, 1500);
        stack(&mut ram, 6 * PAGE, "init", 4, 1500);
        let measured = run(&ram, &["init"]);
        assert_eq!(
            measured.refusals,
            [Refusal::Duplicate {
                name: "init".into(),
                page: 0,
                units: 512,
                kept: BASE + PAGE as u64,
                other: BASE + 6 * PAGE as u64
            }]
        );
        assert_eq!(
            measured.refusals[0].to_string(),
            "init: stack page 0 is at two physical pages, 0x80001000 and 0x80006000, each holding 512 of its \
             units: two stacks with one tag, or a copy that cannot be told from the stack"
        );
        // Untouched twins tie on every page: refused too.
        stack(&mut ram, PAGE, "init", 4, 2048);
        stack(&mut ram, 6 * PAGE, "init", 4, 2048);
        assert!(matches!(run(&ram, &["init"]).refusals[..], [Refusal::Duplicate { page: 0, .. }]));
    }

    #[test]
    fn a_tie_above_the_deepest_page_is_ignored_and_one_at_it_refused() {
        let mut ram = vec![0u8; 8 * PAGE];
        let touched = UNITS_PER_PAGE + 40; // the deepest touch is in stack page 1
        stack(&mut ram, 0, "init", 4, touched);
        // Stack page 3 kept ten units of its paint (slots the program never wrote); a
        // buffer elsewhere holds the same ten, each at its own word.
        let t = tag(b"init");
        for unit in 500..510 {
            let word = stack_word(t, 4, 3 * UNITS_PER_PAGE + unit);
            put(&mut ram, 3 * PAGE + unit * 8, word);
            put(&mut ram, 6 * PAGE + unit * 8, word);
        }
        let measured = run(&ram, &["init"]);
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        assert_eq!(peak(&measured, 0).lowest_missing, Some(touched));
        assert_eq!(peak(&measured, 0).units, touched + 10);

        // The same copy of stack page 1 (the deepest touched page) cannot be told apart.
        for unit in 0..40 {
            put(&mut ram, 7 * PAGE + unit * 8, stack_word(t, 4, UNITS_PER_PAGE + unit));
        }
        let refused = run(&ram, &["init"]).refusals;
        assert_eq!(
            refused,
            [Refusal::Duplicate {
                name: "init".into(),
                page: 1,
                units: 40,
                kept: BASE + PAGE as u64,
                other: BASE + 7 * PAGE as u64
            }]
        );
    }

    #[test]
    fn a_unit_outside_its_stack_is_refused_with_its_address() {
        let t = tag(b"init");
        for (pages, index) in [(4, 2048 + 5), (0, 5), (STACK_PAGES_MAX + 1, 5)] {
            let mut ram = vec![0u8; 4 * PAGE];
            stack(&mut ram, 0, "init", 2, 600);
            put(&mut ram, 3 * PAGE + 5 * 8, stack_word(t, pages, index));
            let measured = run(&ram, &["init"]);
            let address = BASE + 3 * PAGE as u64 + 40;
            assert_eq!(measured.refusals, [Refusal::OutOfRange { name: "init".into(), address, index, pages }]);
            assert!(measured.refusals[0].to_string().starts_with(&format!(
                "init: the stack word at 0x80003028 says unit {index} of a stack of {pages} pages"
            )));
            // The good units still measure.
            assert_eq!(peak(&measured, 0).lowest_missing, Some(600));
        }
    }

    #[test]
    fn units_that_disagree_on_the_stack_size_are_refused() {
        let mut ram = vec![0u8; 8 * PAGE];
        stack(&mut ram, 0, "init", 4, 900);
        put(&mut ram, 6 * PAGE + 7 * 8, stack_word(tag(b"init"), 2, 7));
        put(&mut ram, 6 * PAGE + 8 * 8, stack_word(tag(b"init"), 3, 8));
        let measured = run(&ram, &["init"]);
        assert_eq!(
            measured.refusals,
            [Refusal::Inconsistent {
                name: "init".into(),
                first_pages: 4,
                first_address: BASE,
                pages: 2,
                address: BASE + 6 * PAGE as u64 + 56
            }]
        );
        assert_eq!(
            measured.refusals[0].to_string(),
            "init: the stack word at 0x80006038 says the stack has 2 pages, the one at 0x80000000 says 4: \
             the program's stack words disagree on its size"
        );
    }

    #[test]
    fn heap_records_are_found_checked_and_refused() {
        let (a, b, c) = (tag(b"init"), tag(b"worker"), tag(b"undeclared"));
        let mut ram = vec![0u8; 4 * PAGE];
        record(&mut ram, PAGE + 96, a, 16, 5, 0);
        record(&mut ram, 2 * PAGE, c, 1, 9, 3); // not declared: ignored, bad as it is
        record(&mut ram, 2 * PAGE + 48, b, 16, 5, 0); // not 32-aligned: not a record
        let measured = run(&ram, &["init", "worker"]);
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        assert_eq!(measured.programs[0].heap, Some(Heap { cap: 16, peak: 5, address: BASE + PAGE as u64 + 96 }));
        assert_eq!(measured.programs[1].heap, None);
        assert_eq!(measured.programs[0].stack, None);

        // A second record for init, and a bad one for worker (peak above cap, zero word set).
        record(&mut ram, 3 * PAGE + 32, a, 16, 6, 0);
        record(&mut ram, 3 * PAGE + 128, b, 4, 9, 1);
        let measured = run(&ram, &["init", "worker"]);
        assert_eq!(measured.programs[0].heap.map(|h| h.peak), Some(5), "the first record is the one measured");
        assert_eq!(
            measured.refusals,
            [
                Refusal::DuplicateRecord {
                    name: "init".into(),
                    first: BASE + PAGE as u64 + 96,
                    second: BASE + 3 * PAGE as u64 + 32
                },
                Refusal::BadRecord {
                    name: "worker".into(),
                    address: BASE + 3 * PAGE as u64 + 128,
                    cap: 4,
                    peak: 9,
                    zero: 1
                },
            ]
        );
        assert_eq!(
            measured.refusals[0].to_string(),
            "init: two heap records, at 0x80001060 and 0x80003020; a program has one"
        );
        assert_eq!(
            measured.refusals[1].to_string(),
            "worker: the heap record at 0x80003080 is malformed: its zero word is 0x1 and its peak (9 pages) \
             is above its cap (4 pages)"
        );
        let mut ram = vec![0u8; PAGE];
        record(&mut ram, 0, a, 4, 5, 0);
        assert_eq!(
            run(&ram, &["init"]).refusals[0].to_string(),
            "init: the heap record at 0x80000000 is malformed: its peak (5 pages) is above its cap (4 pages)"
        );
    }

    #[test]
    fn a_dump_read_in_pieces_measures_the_same() {
        // A stack straddling the first piece boundary, a heap record in the second piece,
        // a dump longer than two pieces and not a whole number of pages.
        let mut ram = vec![0u8; 2 * PIECE + 3 * PAGE + 100];
        let at = PIECE - 2 * PAGE;
        let touched = 2 * UNITS_PER_PAGE + 77; // in the page just past the boundary
        stack(&mut ram, at, "init", 4, touched);
        record(&mut ram, PIECE + 5 * PAGE, tag(b"init"), 32, 10, 0);
        stack(&mut ram, 2 * PIECE + PAGE, "tail", 1, 3);
        let names = ["init", "tail"];
        let measured = measure(Trickle(&ram, 5000), BASE, &declared(&names)).unwrap();
        assert_eq!(measured.bytes, ram.len() as u64);
        assert!(measured.refusals.is_empty(), "{:?}", measured.refusals);
        assert_eq!(peak(&measured, 0).lowest_missing, Some(touched));
        assert_eq!(peak(&measured, 0).peak_bytes, (2048 - touched as u64) * 8);
        assert_eq!(
            measured.programs[0].heap,
            Some(Heap { cap: 32, peak: 10, address: BASE + (PIECE + 5 * PAGE) as u64 })
        );
        assert_eq!(peak(&measured, 1).peak_bytes, (512 - 3) * 8);

        // The stack alone, in a dump of its own four pages at its own address.
        let alone = measure(&ram[at..at + 4 * PAGE], BASE + at as u64, &declared(&["init"])).unwrap();
        assert_eq!(alone.programs[0].stack, measured.programs[0].stack);
    }

    #[test]
    fn bad_arguments_are_the_callers_mistake() {
        let error = measure(&[0u8; 64][..], 0x8000_0800, &declared(&["init"])).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "the dump's base 0x80000800 is not page aligned");
        let twice = [Declared::new("init"), Declared { name: "other".into(), tag: tag(b"init") }];
        let error = measure(&[0u8; 64][..], 0, &twice).unwrap_err();
        assert_eq!(error.to_string(), format!("init and other have one tag, {:#010x}", tag(b"init")));
        assert_eq!(measure(&[][..], 0, &twice[..1]).unwrap().bytes, 0);
    }

    #[test]
    fn the_verdicts_at_their_boundaries() {
        let stack = |pages, peak_bytes| Stack { pages, peak_bytes, lowest_missing: None, units: 0 };
        assert!(stack_fits(&stack(4, 8192)));
        assert!(!stack_fits(&stack(4, 8193)));
        assert!(stack_fits(&stack(4, 0)));
        assert!(stack_fits(&stack(1, 2048)));
        assert!(!stack_fits(&stack(1, 2049)));
        assert!(heap_fits(16, 8, false));
        assert!(!heap_fits(16, 9, false));
        assert!(heap_fits(16, 14, true));
        assert!(!heap_fits(16, 15, true));
        assert!(!heap_fits(16, 17, true));
        assert!(heap_fits(0, 0, false) && heap_fits(0, 3, false) && heap_fits(0, 3, true));
        assert!(heap_fits(u32::MAX, u32::MAX / 2, false));
    }
}
