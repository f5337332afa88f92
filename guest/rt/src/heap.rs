//! The program's heap and its record (docs/ram.md).
//!
//! A program declared with `heap_pages = N` gets N pages in its own data, handed out by
//! the global allocator from the bottom up: an allocation takes the next aligned bytes,
//! and freeing the most recent allocation gives its bytes back (a stack discipline; any
//! other free keeps its bytes until the heap is empty again). The heap holds, at any
//! time, the pages from its start to the end of its highest live allocation.
//!
//! The record (`abi::paint::HeapRecord`'s layout, 32 bytes in the program's data) says
//! the program's tag, the heap's cap and the most pages the heap has held at once.
//! `start` writes it before `main`, building the magic word at run time from two
//! halves, so the program's file holds no record; every allocation that reaches a new
//! page raises the peak. The bench finds the record in a dump of the guest's RAM and
//! judges the cap against the peak. Anything in the guest could write such a record: it
//! is evidence of what this runtime did, not a proof against hostile code.
//!
//! A program has one thread: the state is atomics only so that it needs no `unsafe`.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering::Relaxed};

use abi::paint::{HEAP_MAGIC_A, HEAP_MAGIC_B};
use abi::PAGE_SIZE;

struct Heap {
    /// The heap's first byte (null without a heap).
    base: AtomicPtr<u8>,
    /// Its size in bytes.
    size: AtomicUsize,
    /// Bytes from `base` to the end of the highest live allocation.
    top: AtomicUsize,
    /// Where the most recent allocation starts, so freeing it gives its bytes back.
    last: AtomicUsize,
    /// Live allocations.
    live: AtomicUsize,
}

#[global_allocator]
static HEAP: Heap = Heap {
    base: AtomicPtr::new(null_mut()),
    size: AtomicUsize::new(0),
    top: AtomicUsize::new(0),
    last: AtomicUsize::new(0),
    live: AtomicUsize::new(0),
};

/// `abi::paint::HeapRecord` as words of 32 bits (the magic words in two halves each,
/// low first), so that every width writes it with plain atomic stores.
#[repr(C, align(32))]
struct Record([AtomicU32; 8]);

const TAG: usize = 2;
const CAP: usize = 3;
const PEAK: usize = 4;

/// The record the bench reads; zero in the program's file.
#[used]
#[no_mangle]
static TESTBENCH_HEAP_RECORD: Record = Record([const { AtomicU32::new(0) }; 8]);

/// Sets the heap up and writes the record: `pages` pages at `space` (null and 0 for a
/// program without a heap), under the kernel's `tag`. Called by `program!` before
/// `main`, with the program's own space, which nothing else names.
pub fn start(space: *mut u8, pages: usize, tag: u32) {
    HEAP.base.store(space, Relaxed);
    HEAP.size.store(pages * PAGE_SIZE, Relaxed);
    let magic = core::hint::black_box(HEAP_MAGIC_A) ^ HEAP_MAGIC_B;
    let words = [magic as u32, (magic >> 32) as u32, tag, pages as u32, 0, 0, !magic as u32, (!magic >> 32) as u32];
    for (slot, word) in TESTBENCH_HEAP_RECORD.0.iter().zip(words) {
        slot.store(word, Relaxed);
    }
}

/// The most pages the heap has held at once, as the record says.
pub fn peak_pages() -> u32 {
    TESTBENCH_HEAP_RECORD.0[PEAK].load(Relaxed)
}

/// The tag the kernel gave this program, as its record holds it.
pub fn tag() -> u32 {
    TESTBENCH_HEAP_RECORD.0[TAG].load(Relaxed)
}

/// The heap's cap in pages, as its record holds it.
pub fn cap_pages() -> u32 {
    TESTBENCH_HEAP_RECORD.0[CAP].load(Relaxed)
}

// SAFETY: every block handed out lies inside [base, base + size), aligned as asked, and
// no two live blocks overlap: a block starts at or above `top`, which only goes down
// when the most recent block (the one ending at `top`) or every block is freed.
unsafe impl GlobalAlloc for Heap {
    /// A block of `layout` from the heap, or null when it does not fit.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.base.load(Relaxed);
        let top = self.top.load(Relaxed);
        let start = (base as usize + top).next_multiple_of(layout.align()) - base as usize;
        let Some(end) = start.checked_add(layout.size()).filter(|&end| end <= self.size.load(Relaxed)) else {
            return null_mut();
        };
        self.last.store(start, Relaxed);
        self.top.store(end, Relaxed);
        self.live.fetch_add(1, Relaxed);
        TESTBENCH_HEAP_RECORD.0[PEAK].fetch_max(end.div_ceil(PAGE_SIZE) as u32, Relaxed);
        base.wrapping_add(start)
    }

    /// Gives a block back: its bytes return when it is the most recent, or the last live.
    ///
    /// # Safety
    /// As `GlobalAlloc::dealloc`: `ptr` came from `alloc` with this `layout`.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let offset = ptr as usize - self.base.load(Relaxed) as usize;
        if self.live.fetch_sub(1, Relaxed) == 1 {
            self.top.store(0, Relaxed);
        } else if offset == self.last.load(Relaxed) && offset + layout.size() == self.top.load(Relaxed) {
            self.top.store(offset, Relaxed);
        }
    }
}
