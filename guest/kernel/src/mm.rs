//! Physical frames and page tables (Sv39 on rv64, Sv32 on rv32). The kernel runs on
//! physical addresses (satp = 0); a process's table maps its user pages (U set) and,
//! supervisor-only, the kernel's own window so the trap path survives the switch.
//!
//! The table format follows the word width (Sv39 where `usize` is 64 bits, Sv32 where it
//! is 32), not the architecture's name, so that hostfuzz can compile this very file on
//! the host (docs/host-fuzzing.md, "The kernel's files on the host"): there physical
//! addresses are those of an arena the fuzzer maps where the guest's RAM would be.

use abi::{KERNEL_END, KERNEL_START, PAGE_SIZE};

/// PTE bits.
pub const V: usize = 1 << 0;
/// Readable.
pub const R: usize = 1 << 1;
/// Writable.
pub const W: usize = 1 << 2;
/// Executable.
pub const X: usize = 1 << 3;
/// User-accessible.
pub const U: usize = 1 << 4;
const G: usize = 1 << 5;
const A: usize = 1 << 6;
const D: usize = 1 << 7;

/// Entries per table: 512 of 8 bytes (Sv39) or 1024 of 4 bytes (Sv32).
const ENTRIES: usize = PAGE_SIZE / core::mem::size_of::<usize>();
#[cfg(target_pointer_width = "64")]
const LEVELS: usize = 3;
#[cfg(target_pointer_width = "32")]
const LEVELS: usize = 2;
const VPN_BITS: usize = ENTRIES.trailing_zeros() as usize;

/// A range of free frames handed out from the bottom, then the frames given back.
pub struct Frames {
    ranges: [(usize, usize); 4],
    free_list: usize,
    /// Frames handed out and not given back.
    pub in_use: usize,
}

impl Frames {
    /// No frames yet.
    pub const fn new() -> Frames {
        Frames { ranges: [(0, 0); 4], free_list: 0, in_use: 0 }
    }

    /// Adds [start, end) (rounded inwards to pages) to the pool.
    pub fn add(&mut self, start: usize, end: usize) {
        let start = start.next_multiple_of(PAGE_SIZE);
        let end = end & !(PAGE_SIZE - 1);
        if start >= end {
            return;
        }
        if let Some(slot) = self.ranges.iter_mut().find(|r| r.0 == r.1) {
            *slot = (start, end);
        }
    }

    /// A zeroed frame's physical address.
    pub fn alloc(&mut self) -> Option<usize> {
        let frame = if self.free_list != 0 {
            let frame = self.free_list;
            // SAFETY: a frame on the free list is free RAM the kernel owns; its first
            // word holds the next free frame's address (written by `free`).
            self.free_list = unsafe { core::ptr::read(frame as *const usize) };
            frame
        } else {
            let range = self.ranges.iter_mut().find(|r| r.0 < r.1)?;
            let frame = range.0;
            range.0 += PAGE_SIZE;
            frame
        };
        // SAFETY: `frame` is a free page of RAM in the pool, aligned, owned by nobody.
        unsafe { core::ptr::write_bytes(frame as *mut u8, 0, PAGE_SIZE) };
        self.in_use += 1;
        Some(frame)
    }

    /// Gives a frame back.
    pub fn free(&mut self, frame: usize) {
        debug_assert!(frame % PAGE_SIZE == 0 && frame != 0);
        // SAFETY: the caller gives back a frame it got from `alloc` and no longer maps;
        // its first word becomes the free-list link.
        unsafe { core::ptr::write(frame as *mut usize, self.free_list) };
        self.free_list = frame;
        self.in_use -= 1;
    }
}

fn table(pa: usize) -> *mut usize {
    pa as *mut usize
}

fn read_pte(table_pa: usize, index: usize) -> usize {
    debug_assert!(index < ENTRIES);
    // SAFETY: `table_pa` is a page-table frame this module allocated (or the root) and
    // `index` is below ENTRIES, so the read stays inside that frame.
    unsafe { core::ptr::read_volatile(table(table_pa).add(index)) }
}

fn write_pte(table_pa: usize, index: usize, pte: usize) {
    debug_assert!(index < ENTRIES);
    // SAFETY: as in read_pte: an entry inside a page-table frame the kernel owns.
    unsafe { core::ptr::write_volatile(table(table_pa).add(index), pte) }
}

fn vpn(va: usize, level: usize) -> usize {
    (va >> (12 + level * VPN_BITS)) & (ENTRIES - 1)
}

fn pte_pa(pte: usize) -> usize {
    (pte >> 10) << 12
}

fn make_pte(pa: usize, flags: usize) -> usize {
    ((pa >> 12) << 10) | flags
}

/// A new root table with the kernel's window mapped supervisor-only. The frame is
/// counted by the caller.
pub fn new_root(frames: &mut Frames) -> Option<usize> {
    let root = frames.alloc()?;
    let kernel = R | W | X | G | A | D | V;
    if cfg!(target_pointer_width = "64") {
        // One gigapage: 0x8000_0000..0xC000_0000 (all of RAM on QEMU virt).
        write_pte(root, 2, make_pte(0x8000_0000, kernel));
    } else {
        // Megapages over the kernel's region only.
        let mut pa = KERNEL_START;
        while pa < KERNEL_END {
            write_pte(root, vpn(pa, LEVELS - 1), make_pte(pa, kernel));
            pa += PAGE_SIZE * ENTRIES;
        }
    }
    Some(root)
}

/// The satp value that turns on `root`.
pub fn satp(root: usize) -> usize {
    if cfg!(target_pointer_width = "64") {
        (8 << 60) | (root >> 12)
    } else {
        (1 << 31) | (root >> 12)
    }
}

/// Maps the user page at `va` to frame `pa` with `flags` (R/W/X), allocating tables
/// on the way; each new table frame is counted in `*tables`. Fails if `va` is outside
/// the user half, `flags` hold another bit or W without R or with X (W^X), `va` is
/// already mapped or a frame is missing.
pub fn map(frames: &mut Frames, root: usize, va: usize, pa: usize, flags: usize, tables: &mut usize) -> Result<(), ()> {
    if !(abi::USER_START..abi::USER_END).contains(&va) || flags & !(R | W | X) != 0 || flags & (R | W | X) == W {
        return Err(());
    }
    if flags & (W | X) == W | X {
        return Err(());
    }
    let mut t = root;
    for level in (1..LEVELS).rev() {
        let index = vpn(va, level);
        let pte = read_pte(t, index);
        if pte & V == 0 {
            let next = frames.alloc().ok_or(())?;
            *tables += 1;
            write_pte(t, index, make_pte(next, V));
            t = next;
        } else if pte & (R | W | X) != 0 {
            return Err(());
        } else {
            t = pte_pa(pte);
        }
    }
    let index = vpn(va, 0);
    if read_pte(t, index) & V != 0 {
        return Err(());
    }
    write_pte(t, index, make_pte(pa, flags | U | A | D | V));
    Ok(())
}

/// The frame behind user page `va` if it is mapped with U and every bit of `need`.
pub fn translate(root: usize, va: usize, need: usize) -> Option<usize> {
    if !(abi::USER_START..abi::USER_END).contains(&va) {
        return None;
    }
    let mut t = root;
    for level in (0..LEVELS).rev() {
        let pte = read_pte(t, vpn(va, level));
        if pte & V == 0 {
            return None;
        }
        if pte & (R | W | X) != 0 {
            if level != 0 || pte & (U | need) != U | need {
                return None;
            }
            return Some(pte_pa(pte) + (va & (PAGE_SIZE - 1)));
        }
        t = pte_pa(pte);
    }
    None
}

/// Frees every user page and table below `root`, and `root` itself. Returns how many
/// frames it gave back.
pub fn free_space(frames: &mut Frames, root: usize) -> usize {
    fn walk(frames: &mut Frames, t: usize, level: usize, freed: &mut usize) {
        for index in 0..ENTRIES {
            let pte = read_pte(t, index);
            if pte & V == 0 || pte & G != 0 {
                continue;
            }
            if pte & (R | W | X) == 0 && level > 0 {
                walk(frames, pte_pa(pte), level - 1, freed);
            }
            frames.free(pte_pa(pte));
            *freed += 1;
        }
    }
    let mut freed = 0;
    walk(frames, root, LEVELS - 1, &mut freed);
    frames.free(root);
    freed + 1
}

/// Copies user memory [va, va + out.len()) of `root` into `out`.
pub fn copy_in(root: usize, va: usize, out: &mut [u8]) -> Result<(), ()> {
    let mut done = 0;
    while done < out.len() {
        let at = va.checked_add(done).ok_or(())?;
        let pa = translate(root, at, R).ok_or(())?;
        let n = (PAGE_SIZE - (at & (PAGE_SIZE - 1))).min(out.len() - done);
        // SAFETY: `pa` is inside a user frame the kernel owns (translate checked the
        // mapping) and [pa, pa + n) stays within that page.
        let src = unsafe { core::slice::from_raw_parts(pa as *const u8, n) };
        out[done..done + n].copy_from_slice(src);
        done += n;
    }
    Ok(())
}

/// Checks that every page of user memory [va, va + len) of `root` is mapped with `need`
/// (none for no byte, wherever `va` is).
pub fn check(root: usize, va: usize, len: usize, need: usize) -> Result<(), ()> {
    let end = va.checked_add(len).ok_or(())?;
    let mut at = va;
    while at < end {
        translate(root, at, need).ok_or(())?;
        // `at` is in the user half (translate said so): the next page does not wrap.
        at = (at & !(PAGE_SIZE - 1)) + PAGE_SIZE;
    }
    Ok(())
}

/// Copies `data` to user memory at `va` of `root`; the pages must be writable.
pub fn copy_out(root: usize, va: usize, data: &[u8]) -> Result<(), ()> {
    // Check every page first, so a fault writes nothing.
    check(root, va, data.len(), W)?;
    let mut done = 0;
    while done < data.len() {
        let at = va + done;
        let pa = translate(root, at, W).ok_or(())?;
        let n = (PAGE_SIZE - (at & (PAGE_SIZE - 1))).min(data.len() - done);
        // SAFETY: as in copy_in: [pa, pa + n) lies in one writable user frame.
        let dst = unsafe { core::slice::from_raw_parts_mut(pa as *mut u8, n) };
        dst.copy_from_slice(&data[done..done + n]);
        done += n;
    }
    Ok(())
}
