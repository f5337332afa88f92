//! The `kernel-mm` target: `guest/kernel/src/mm.rs`, the kernel's frame pool and page
//! tables, compiled as the guest compiles it (src/kernel.rs), on physical memory the world
//! owns. The input builds a pool of one to five ranges (now and then not page-aligned, or
//! empty once rounded inwards), then runs up to 48 operations on up to three address
//! spaces in any order: map a fresh frame at an address (mostly near pages already used,
//! else an edge: 0, the user half's first and last pages and the bytes around them, the
//! user/kernel split, the kernel's gigapage, 2^38, 2^39 and an alias of a user page above
//! it, 2^64 - 4096, 2^64 - 1, any 64-bit value) with flags the kernel's loader gives or
//! others; translate, check, copy in and copy out at such addresses with lengths at the
//! edges (0, 1, a page and its neighbours, up to three pages, and for `check` lengths that
//! overflow); tear a space down; take and give back frames as the kernel's `page` does.
//!
//! The world keeps its own books and reads the tables itself (Sv39, from the arena), never
//! through mm.rs. Findings: a panic (overflow checks and debug assertions on, as in the
//! kernel's checked build); a frame handed out twice, outside the pool, not page-aligned or
//! not zeroed; a frame refused while the pool has one; `in_use` other than the frames out;
//! a space torn down that gives back other than its root, tables and pages (a leak), or a
//! pool that does not give back every frame once all are returned; a table whose entries
//! are other than the kernel's window (its one gigapage, supervisor-only), pointers to
//! table frames of this space alone, and user leaves the shadow map holds; a user mapping
//! outside the user half, onto a frame not the one given for it, or onto kernel memory; a
//! page both writable and executable (W^X) or writable and not readable; `map` answering
//! otherwise than the rules (Ok only for a page of the user half not mapped yet, with the
//! frames its tables need), `tables` counting other than the tables made; `translate`,
//! `check`, `copy_in` or `copy_out` answering otherwise than the shadow map (a byte read or
//! written outside the caller's mapped pages with the needed permission, a fault that
//! wrote anything); a byte of user memory other than the world wrote; kernel memory (the
//! RAM's first page, the kernel's region's first and last, the page past the pool)
//! written.

use crate::kernel::{mm, ram};
use crate::{Decisions, Finding};
use abi::{KERNEL_END, KERNEL_START, PAGE_SIZE, USER_END, USER_START};
use std::collections::{BTreeMap, BTreeSet};

/// Page-table bits, as the Sv39 specification numbers them (the world's own reading).
const V: usize = 1;
const R: usize = 1 << 1;
const W: usize = 1 << 2;
const X: usize = 1 << 3;
const U: usize = 1 << 4;
const G: usize = 1 << 5;
const A: usize = 1 << 6;
const D: usize = 1 << 7;
const ENTRIES: usize = 512;
const LEVELS: usize = 3;
/// The kernel's window in every root: one supervisor gigapage over 0x8000_0000.
const WINDOW_INDEX: usize = 2;
const WINDOW_PTE: usize = ((0x8000_0000 >> 12) << 10) | R | W | X | G | A | D | V;

const SPACES: usize = 3;
const MAX_OPS: usize = 48;
/// The world's pattern in the kernel's memory around the pool.
const PAINT: u8 = 0xa5;

fn finding(what: &str, detail: impl Into<String>) -> Finding {
    Finding::oracle(what, detail)
}

fn page_of(va: usize) -> usize {
    va & !(PAGE_SIZE - 1)
}

fn vpn(va: usize, level: usize) -> usize {
    (va >> (12 + 9 * level)) & (ENTRIES - 1)
}

fn pte_pa(pte: usize) -> usize {
    (pte >> 10) << 12
}

fn read_pte(table: usize, index: usize) -> usize {
    // SAFETY: `table` is a frame of the arena (checked by the caller: in the pool, or a
    // root mm.rs handed out from it), and index < ENTRIES keeps the read inside it.
    unsafe { std::ptr::read_volatile((table as *const usize).add(index)) }
}

fn bytes(pa: usize, len: usize) -> &'static [u8] {
    debug_assert!(pa >= ram::BASE && pa + len <= ram::END);
    // SAFETY: [pa, pa + len) lies in the arena, mapped for the whole run.
    unsafe { std::slice::from_raw_parts(pa as *const u8, len) }
}

fn paint(pa: usize) {
    // SAFETY: a page of the arena outside the pool, which nothing of mm.rs may write.
    unsafe { std::ptr::write_bytes(pa as *mut u8, PAINT, PAGE_SIZE) };
}

/// The leaves of the tables under `root` (va -> entry), read from the arena, the kernel's
/// window left out: what a user address of that space reaches. For the worlds that judge
/// what mm.rs built for them (`kernel-syscalls`), after `kernel-mm` judged how.
pub(crate) fn user_leaves(root: usize) -> BTreeMap<usize, usize> {
    let mut leaves = BTreeMap::new();
    let mut stack = vec![(root, LEVELS - 1, 0usize)];
    while let Some((table, level, base)) = stack.pop() {
        for index in 0..ENTRIES {
            let pte = read_pte(table, index);
            if pte & V == 0 || (table == root && index == WINDOW_INDEX) {
                continue;
            }
            let va = base | (index << (12 + 9 * level));
            if pte & (R | W | X) != 0 || level == 0 {
                leaves.insert(va, pte);
            } else {
                stack.push((pte_pa(pte), level - 1, va));
            }
        }
    }
    leaves
}

/// How many tables lie under `root`, the root left out.
pub(crate) fn table_count(root: usize) -> usize {
    let mut count = 0;
    let mut stack = vec![(root, LEVELS - 1)];
    while let Some((table, level)) = stack.pop() {
        for index in 0..ENTRIES {
            let pte = read_pte(table, index);
            if level > 0 && pte & V != 0 && pte & (R | W | X) == 0 && !(table == root && index == WINDOW_INDEX) {
                count += 1;
                stack.push((pte_pa(pte), level - 1));
            }
        }
    }
    count
}

/// One user page as the world gave it: its frame, its flags and the bytes it must hold.
struct Page {
    frame: usize,
    flags: usize,
    bytes: Vec<u8>,
}

/// An address space: its root, the table frames found in it, its pages by address.
struct Space {
    root: usize,
    tables: BTreeSet<usize>,
    pages: BTreeMap<usize, Page>,
}

struct World {
    frames: mm::Frames,
    /// The pool's ranges as the rules give them: the first four non-empty ones, rounded in.
    pool: Vec<(usize, usize)>,
    pool_pages: usize,
    /// Every frame handed out and not given back, as the world counts them.
    out: BTreeSet<usize>,
    spaces: Vec<Option<Space>>,
    /// Frames taken and held by the world itself (the kernel's `page` before it maps).
    raw: Vec<usize>,
    /// Kernel pages the world painted.
    painted: Vec<usize>,
}

impl World {
    fn in_pool(&self, pa: usize) -> bool {
        self.pool.iter().any(|&(s, e)| (s..e).contains(&pa))
    }

    fn check_count(&self, after: &str) -> Result<(), Finding> {
        if self.frames.in_use != self.out.len() {
            return Err(finding(
                "in_use is not the frames out",
                format!("after {after}: in_use {}, frames out {}", self.frames.in_use, self.out.len()),
            ));
        }
        Ok(())
    }

    /// A frame just handed out by mm.rs (by `alloc`, or for a table or a root).
    fn handed(&mut self, frame: usize, by: &str) -> Result<(), Finding> {
        if frame % PAGE_SIZE != 0 || !self.in_pool(frame) {
            return Err(finding("a frame outside the pool", format!("{by} handed {frame:#x}; pool {:x?}", self.pool)));
        }
        if !self.out.insert(frame) {
            return Err(finding("a frame handed out twice", format!("{by} handed {frame:#x}, which is still out")));
        }
        Ok(())
    }

    fn alloc(&mut self, by: &str) -> Result<Option<usize>, Finding> {
        let free = self.pool_pages - self.out.len();
        let got = self.frames.alloc();
        match got {
            None if free > 0 => {
                return Err(finding("a frame refused while the pool has one", format!("{by}: {free} free")))
            }
            None => {}
            Some(frame) => {
                self.handed(frame, by)?;
                if bytes(frame, PAGE_SIZE).iter().any(|&b| b != 0) {
                    return Err(finding("a frame handed out not zeroed", format!("{by}: {frame:#x}")));
                }
            }
        }
        self.check_count(by)?;
        Ok(got)
    }

    fn give_back(&mut self, frame: usize) -> Result<(), Finding> {
        self.frames.free(frame);
        self.out.remove(&frame);
        self.check_count("free")
    }

    fn new_space(&mut self, slot: usize) -> Result<(), Finding> {
        let free = self.pool_pages - self.out.len();
        match mm::new_root(&mut self.frames) {
            None if free > 0 => Err(finding("a root refused while the pool has a frame", format!("{free} free"))),
            None => Ok(()),
            Some(root) => {
                self.handed(root, "new_root")?;
                self.check_count("new_root")?;
                self.spaces[slot] = Some(Space { root, tables: BTreeSet::new(), pages: BTreeMap::new() });
                self.walk(slot, 0)
            }
        }
    }

    /// Reads space `slot`'s tables from the arena and holds them to the rules and the
    /// shadow map; table frames not seen before are recorded (and must be fresh, and
    /// number `new_tables`).
    fn walk(&mut self, slot: usize, new_tables: usize) -> Result<(), Finding> {
        let space = self.spaces[slot].as_ref().expect("a live space");
        let root = space.root;
        let mut tables = BTreeSet::new();
        let mut leaves = BTreeMap::new();
        let mut stack = vec![(root, LEVELS - 1, 0usize)];
        while let Some((table, level, base)) = stack.pop() {
            for index in 0..ENTRIES {
                let pte = read_pte(table, index);
                let va = base | (index << (12 + 9 * level));
                if table == root && index == WINDOW_INDEX {
                    if pte != WINDOW_PTE {
                        return Err(finding(
                            "the kernel's window is not the one supervisor gigapage",
                            format!("root {root:#x} entry 2 is {pte:#x}, not {WINDOW_PTE:#x}"),
                        ));
                    }
                    continue;
                }
                if pte == 0 {
                    continue;
                }
                if level > 0 {
                    let next = pte_pa(pte);
                    if pte != ((next >> 12) << 10) | V || !self.in_pool(next) || next == root || !tables.insert(next) {
                        return Err(finding(
                            "a table entry that is not a pointer to a table of its own",
                            format!("level {level} entry {index} of {table:#x} (va {va:#x}): {pte:#x}"),
                        ));
                    }
                    stack.push((next, level - 1, va));
                } else {
                    leaves.insert(va, pte);
                }
            }
        }
        for (&va, &pte) in &leaves {
            let pa = pte_pa(pte);
            if !(USER_START..USER_END).contains(&va) {
                return Err(finding("a user mapping outside the user half", format!("va {va:#x}: {pte:#x}")));
            }
            if pa < KERNEL_END || tables.contains(&pa) || pa == root || !self.in_pool(pa) {
                return Err(finding("a user mapping reaching kernel memory", format!("va {va:#x} -> {pa:#x}")));
            }
            if pte & W != 0 && (pte & X != 0 || pte & R == 0) {
                return Err(finding(
                    "a user page writable and executable, or writable only",
                    format!("va {va:#x}: {pte:#x}"),
                ));
            }
            match space.pages.get(&va) {
                Some(page) if pte == ((page.frame >> 12) << 10) | page.flags | U | A | D | V => {}
                other => {
                    return Err(finding(
                        "a translation the shadow map does not hold",
                        format!("va {va:#x}: {pte:#x}, shadow {:x?}", other.map(|p| (p.frame, p.flags))),
                    ))
                }
            }
        }
        if let Some(missing) = space.pages.keys().find(|va| !leaves.contains_key(va)) {
            return Err(finding("a mapping the tables lost", format!("va {missing:#x}")));
        }
        let fresh: Vec<usize> = tables.difference(&space.tables).copied().collect();
        if fresh.len() != new_tables || space.tables.difference(&tables).next().is_some() {
            return Err(finding(
                "tables counted otherwise than made",
                format!("{} new tables found, {new_tables} counted; {} before", fresh.len(), space.tables.len()),
            ));
        }
        for &t in &fresh {
            self.handed(t, "map (a table)")?;
        }
        self.spaces[slot].as_mut().expect("a live space").tables = tables;
        Ok(())
    }

    /// How many tables a map at `va` in `root` needs, read from the arena.
    fn tables_needed(root: usize, va: usize) -> usize {
        let top = read_pte(root, vpn(va, 2));
        if top & V == 0 {
            return 2;
        }
        if top & (R | W | X) != 0 {
            return 0;
        }
        usize::from(read_pte(pte_pa(top), vpn(va, 1)) & V == 0)
    }

    fn map(&mut self, slot: usize, va: usize, flags: usize) -> Result<(), Finding> {
        let Some(frame) = self.alloc("alloc before map")? else { return Ok(()) };
        let root = self.spaces[slot].as_ref().expect("a live space").root;
        let needed = Self::tables_needed(root, va);
        let free = self.pool_pages - self.out.len();
        let space = self.spaces[slot].as_ref().expect("a live space");
        let user = (USER_START..USER_END).contains(&va);
        let fresh = !space.pages.contains_key(&page_of(va));
        let allowed = flags & !(R | W | X) == 0 && flags & (W | X) != W | X && flags & (R | W) != W;
        let expect = user && fresh && allowed && free >= needed;
        let mut tables = 0;
        let mapped = mm::map(&mut self.frames, root, va, frame, flags, &mut tables);
        if mapped.is_ok() != expect {
            let what = match (user, allowed) {
                (false, _) if mapped.is_ok() => "map accepted a page outside the user half",
                (_, false) if mapped.is_ok() => "map accepted flags against the rules (W^X, W without R, another bit)",
                _ => "map answered otherwise than the rules",
            };
            return Err(finding(
                what,
                format!(
                    "va {va:#x} flags {flags:#x}: {mapped:?}; user half {user}, not mapped {fresh}, flags allowed {allowed}, {free} free for {needed} tables"
                ),
            ));
        }
        if mapped.is_ok() {
            let page = Page { frame, flags, bytes: vec![0; PAGE_SIZE] };
            self.spaces[slot].as_mut().expect("a live space").pages.insert(page_of(va), page);
        }
        self.walk(slot, tables)?;
        if mapped.is_err() {
            self.give_back(frame)?;
        }
        self.check_count("map")
    }

    /// Whether every byte of [va, va + len) lies in a page of `slot` mapped with `need`,
    /// or None when the range wraps.
    fn readable(&self, slot: usize, va: usize, len: usize, need: usize) -> Option<bool> {
        let end = va.checked_add(len)?;
        let space = self.spaces[slot].as_ref().expect("a live space");
        let mut at = va;
        while at < end {
            let page = page_of(at);
            let ok = (USER_START..USER_END).contains(&at)
                && space.pages.get(&page).is_some_and(|p| p.flags & need == need && p.flags & (R | W | X) != 0);
            if !ok {
                return Some(false);
            }
            at = page + PAGE_SIZE;
        }
        Some(true)
    }

    fn translate(&self, slot: usize, va: usize, need: usize) -> Result<(), Finding> {
        let space = self.spaces[slot].as_ref().expect("a live space");
        let got = mm::translate(space.root, va, need);
        let expect = if self.readable(slot, va, 1, need) == Some(true) {
            space.pages.get(&page_of(va)).map(|p| p.frame + (va - page_of(va)))
        } else {
            None
        };
        if got != expect {
            return Err(finding(
                "a translation other than the shadow map's",
                format!("va {va:#x} need {need:#x}: {got:x?}, shadow {expect:x?}"),
            ));
        }
        Ok(())
    }

    fn check(&self, slot: usize, va: usize, len: usize, need: usize) -> Result<(), Finding> {
        let root = self.spaces[slot].as_ref().expect("a live space").root;
        let got = mm::check(root, va, len, need).is_ok();
        let expect = self.readable(slot, va, len, need) == Some(true);
        if got != expect {
            return Err(finding(
                "check answered otherwise than the shadow map",
                format!("va {va:#x} len {len:#x} need {need:#x}: ok {got}, shadow {expect}"),
            ));
        }
        Ok(())
    }

    fn copy_in(&self, slot: usize, va: usize, len: usize) -> Result<(), Finding> {
        let space = self.spaces[slot].as_ref().expect("a live space");
        let mut out = vec![0u8; len];
        let got = mm::copy_in(space.root, va, &mut out).is_ok();
        let expect = self.readable(slot, va, len, R) == Some(true);
        if got != expect {
            return Err(finding(
                "copy_in answered otherwise than the shadow map",
                format!("va {va:#x} len {len:#x}: ok {got}, shadow {expect}"),
            ));
        }
        if got {
            for (k, &b) in out.iter().enumerate() {
                let at = va + k;
                let want = space.pages[&page_of(at)].bytes[at - page_of(at)];
                if b != want {
                    return Err(finding("copy_in read other bytes", format!("va {at:#x}: {b:#x}, written {want:#x}")));
                }
            }
        }
        Ok(())
    }

    fn copy_out(&mut self, slot: usize, va: usize, data: &[u8]) -> Result<(), Finding> {
        let expect = self.readable(slot, va, data.len(), W) == Some(true);
        let space = self.spaces[slot].as_mut().expect("a live space");
        let got = mm::copy_out(space.root, va, data).is_ok();
        if got != expect {
            return Err(finding(
                "copy_out answered otherwise than the shadow map",
                format!("va {va:#x} len {:#x}: ok {got}, shadow {expect}", data.len()),
            ));
        }
        if got {
            for (k, &b) in data.iter().enumerate() {
                let at = va + k;
                let page = space.pages.get_mut(&page_of(at)).expect("checked mapped");
                page.bytes[at - page_of(at)] = b;
            }
        }
        // A fault must have written nothing: every page is compared.
        self.memory(slot)
    }

    /// Every user page of `slot` holds the bytes the world wrote.
    fn memory(&self, slot: usize) -> Result<(), Finding> {
        let space = self.spaces[slot].as_ref().expect("a live space");
        for (&va, page) in &space.pages {
            if bytes(page.frame, PAGE_SIZE) != &page.bytes[..] {
                return Err(finding("user memory other than the world wrote", format!("va {va:#x}")));
            }
        }
        Ok(())
    }

    fn painted(&self, after: &str) -> Result<(), Finding> {
        for &pa in &self.painted {
            if bytes(pa, PAGE_SIZE).iter().any(|&b| b != PAINT) {
                return Err(finding("kernel memory written", format!("after {after}: the page at {pa:#x}")));
            }
        }
        Ok(())
    }

    fn tear_down(&mut self, slot: usize) -> Result<(), Finding> {
        self.memory(slot)?;
        let space = self.spaces[slot].take().expect("a live space");
        let owned = 1 + space.tables.len() + space.pages.len();
        let freed = mm::free_space(&mut self.frames, space.root);
        self.out.remove(&space.root);
        for t in &space.tables {
            self.out.remove(t);
        }
        for page in space.pages.values() {
            self.out.remove(&page.frame);
        }
        if freed != owned {
            return Err(finding(
                "a space torn down gave back other than its frames",
                format!(
                    "freed {freed}, owned {owned} (root, {} tables, {} pages)",
                    space.tables.len(),
                    space.pages.len()
                ),
            ));
        }
        self.check_count("free_space")?;
        self.painted("free_space")
    }
}

/// An address: mostly near what the run already used, else an edge.
fn address(d: &mut Decisions, w: &World, slot: usize) -> usize {
    let used: Vec<usize> = w.spaces[slot].as_ref().map(|s| s.pages.keys().copied().collect()).unwrap_or_default();
    let base = if !used.is_empty() && d.below(3) != 0 {
        let near = used[d.below(used.len())];
        near.wrapping_add(PAGE_SIZE.wrapping_mul(d.below(3))).wrapping_sub(PAGE_SIZE * usize::from(d.rare()))
    } else {
        match d.below(16) {
            0..=5 => USER_START + PAGE_SIZE * d.below(16),
            6 => 0,
            7 => USER_START - PAGE_SIZE,
            8 => USER_END - PAGE_SIZE * (1 + d.below(2)),
            9 => USER_END,
            10 => *d.choose(&[0x20_0000 - PAGE_SIZE, 0x4000_0000 - PAGE_SIZE, 0x4000_0000]),
            11 => *d.choose(&[KERNEL_START, 0xc000_0000 - PAGE_SIZE, 0xc000_0000]),
            12 => *d.choose(&[1 << 38, (1 << 39) + USER_START, 1 << 39, (1 << 38) - PAGE_SIZE]),
            13 => *d.choose(&[usize::MAX - PAGE_SIZE + 1, usize::MAX]),
            14 => USER_START + PAGE_SIZE * d.below(1 << 19),
            _ => d.u64() as usize,
        }
    };
    match d.below(4) {
        0 | 1 => page_of(base),
        2 => page_of(base) + *d.choose(&[PAGE_SIZE - 1, 1, PAGE_SIZE - 8]),
        _ => base.wrapping_add(d.below(PAGE_SIZE)),
    }
}

fn length(d: &mut Decisions, va: usize, huge: bool) -> usize {
    match d.below(if huge { 10 } else { 8 }) {
        0 => 0,
        1 => 1,
        2 => PAGE_SIZE - 1,
        3 => PAGE_SIZE,
        4 => PAGE_SIZE + 1,
        5 => 2 * PAGE_SIZE,
        6 => PAGE_SIZE - (va & (PAGE_SIZE - 1)) + d.below(2),
        7 => d.below(3 * PAGE_SIZE),
        8 => *d.choose(&[usize::MAX, usize::MAX - va, (usize::MAX - va).wrapping_add(1), 1 << 63]),
        _ => USER_END.wrapping_sub(va),
    }
}

fn flags(d: &mut Decisions) -> usize {
    // The loader's: R, R|W (writable segments and the stack), X, R|X; then the rest.
    if d.below(8) != 0 {
        *d.choose(&[R | W, R, R | X, X])
    } else {
        *d.choose(&[0, W, W | X, R | W | X, R | U, R | G, 1 << 8])
    }
}

fn need(d: &mut Decisions) -> usize {
    *d.choose(&[R, W, X, R | W, 0, R | X])
}

/// The pool: one to five ranges above the kernel's region, each after a gap of 0-2 pages,
/// now and then not page-aligned or empty once rounded in; the world's books get what the
/// rules give it (the first four non-empty ranges, rounded in).
fn pool(d: &mut Decisions, w: &mut World) {
    let mut at = KERNEL_END;
    for _ in 0..1 + d.below(5) {
        let skew = |d: &mut Decisions| if d.below(8) == 0 { d.below(PAGE_SIZE) } else { 0 };
        let start = at + PAGE_SIZE * d.below(3) + skew(d);
        let pages = *d.choose(&[24, 4, 1, 0, 64, 2]);
        let end = (start + PAGE_SIZE * pages + skew(d)).saturating_sub(if d.rare() { PAGE_SIZE } else { 0 });
        w.frames.add(start, end);
        let (s, e) = (start.next_multiple_of(PAGE_SIZE), end & !(PAGE_SIZE - 1));
        if s < e && w.pool.len() < 4 {
            w.pool.push((s, e));
            w.pool_pages += (e - s) / PAGE_SIZE;
        }
        at = end.max(start).next_multiple_of(PAGE_SIZE);
    }
    // The page past the pool is not the pool's: painted, never handed out.
    w.painted.push(at);
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    assert!(ram::mapped(), "the kernel's RAM arena is not mapped (targets::prepare)");
    let mut w = World {
        frames: mm::Frames::new(),
        pool: Vec::new(),
        pool_pages: 0,
        out: BTreeSet::new(),
        spaces: (0..SPACES).map(|_| None).collect(),
        raw: Vec::new(),
        painted: vec![ram::BASE, KERNEL_START, KERNEL_END - PAGE_SIZE],
    };
    pool(d, &mut w);
    w.painted.sort_unstable();
    w.painted.dedup();
    for &pa in &w.painted {
        paint(pa);
    }
    w.new_space(0)?;
    for _ in 0..1 + d.below(MAX_OPS) {
        let slot = d.below(SPACES);
        if w.spaces[slot].is_none() {
            w.new_space(slot)?;
            continue;
        }
        match d.below(12) {
            0..=3 => {
                let va = address(d, &w, slot);
                let f = flags(d);
                w.map(slot, va, f)?;
            }
            4 => {
                let va = address(d, &w, slot);
                let n = need(d);
                w.translate(slot, va, n)?;
            }
            5 => {
                let va = address(d, &w, slot);
                let len = length(d, va, true);
                let n = need(d);
                w.check(slot, va, len, n)?;
            }
            6 | 7 => {
                let va = address(d, &w, slot);
                let len = length(d, va, false);
                w.copy_in(slot, va, len)?;
            }
            8 | 9 => {
                let va = address(d, &w, slot);
                let len = length(d, va, false);
                let data: Vec<u8> = (0..len).map(|k| (k as u8) ^ d.u8() ^ 0x5a).collect();
                w.copy_out(slot, va, &data)?;
            }
            10 => w.tear_down(slot)?,
            _ => {
                if !w.raw.is_empty() && d.bool() {
                    let frame = w.raw.swap_remove(d.below(w.raw.len()));
                    w.give_back(frame)?;
                } else if let Some(frame) = w.alloc("alloc")? {
                    w.raw.push(frame);
                }
            }
        }
    }
    // Teardown: every space and every held frame back, then the whole pool drained.
    for slot in 0..SPACES {
        if w.spaces[slot].is_some() {
            w.tear_down(slot)?;
        }
    }
    while let Some(frame) = w.raw.pop() {
        w.give_back(frame)?;
    }
    if w.frames.in_use != 0 || !w.out.is_empty() {
        return Err(finding("frames leaked at teardown", format!("in_use {}, out {}", w.frames.in_use, w.out.len())));
    }
    let mut drained = 0;
    while w.alloc("the drain")?.is_some() {
        drained += 1;
    }
    if drained != w.pool_pages {
        return Err(finding(
            "the pool gave back other than its frames",
            format!("{drained} drained, the pool has {} ({:x?})", w.pool_pages, w.pool),
        ));
    }
    w.painted("the drain")?;
    d.end("every space torn down, the pool whole");
    Ok(())
}
