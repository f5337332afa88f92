//! A served child's heap: a bump allocator over a region the runner reserved and never
//! touched, so a child's allocations land on fresh pages of its own, packed, instead of
//! on the free chunks scattered through the runner's heap, each a copy-on-write fault.
//! Nothing is freed (the child lives for one input); what does not fit falls back to the
//! system allocator. Off in the runner and in `--in-process` and `--fork-each` runs.
//!
//! The global allocator (`machine::Watch`, src/machine.rs) asks here first.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The reserved region's size: address space only (`MAP_NORESERVE`), never touched by
/// the runner; a child's pages are made on its first write to them. The gate's children
/// use 6–30 KB on average (docs/host-fuzzing.md); the bound keeps what a child that
/// allocates and frees in a loop can hold to 64 MiB more than `malloc` would.
const SIZE: usize = 64 << 20;

/// The region's start (0: none reserved yet).
static START: AtomicUsize = AtomicUsize::new(0);
/// The next free byte while the arena is on in this process, 0 while it is off.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Reserves the region, once, in the runner (before its first fork).
pub fn reserve() {
    if START.load(Ordering::SeqCst) != 0 {
        return;
    }
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing; it
    // overlaps nothing of ours.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if at != libc::MAP_FAILED {
        START.store(at as usize, Ordering::SeqCst);
    }
}

/// Turns the arena on in this process: called by a served child, after its fork.
pub fn start() {
    NEXT.store(START.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// Whether `ptr` came from the arena.
pub fn owns(ptr: *mut u8) -> bool {
    let start = START.load(Ordering::Relaxed);
    let at = ptr as usize;
    start != 0 && at >= start && at < start + SIZE
}

/// Room for `size` bytes aligned to `align`, or `None` (the arena off or full). The bytes
/// are zeros (see [`grow_in_place`]).
pub fn alloc(size: usize, align: usize) -> Option<*mut u8> {
    let start = START.load(Ordering::Relaxed);
    let mut next = NEXT.load(Ordering::Relaxed);
    loop {
        if next == 0 {
            return None;
        }
        let at = next.checked_add(align - 1)? & !(align - 1);
        let end = at.checked_add(size.max(1))?;
        if end > start + SIZE {
            return None;
        }
        match NEXT.compare_exchange_weak(next, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(at as *mut u8),
            Err(now) => next = now,
        }
    }
}

/// Grows the arena's last allocation, `ptr` of `old` bytes, in place to `new` bytes: true
/// if it was the last and there is room. Nothing shrinks, so the bytes from the next free
/// one on were never handed out: still the zeros of fresh pages.
pub fn grow_in_place(ptr: *mut u8, old: usize, new: usize) -> bool {
    let (at, start) = (ptr as usize, START.load(Ordering::Relaxed));
    let end = at + old.max(1);
    match at.checked_add(new.max(1)) {
        Some(new_end) if new_end <= start + SIZE => {
            NEXT.compare_exchange(end, new_end, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        }
        _ => false,
    }
}
