//! The `kernel-syscalls` target: `guest/kernel/src/proc.rs` and `mm.rs` as compiled for
//! the guest (kernel-host/, src/kernel.rs), the kernel's own scheduler loop (`proc::run`)
//! and trap handling (`proc::take_trap`) driven by a world that plays the hart in user
//! mode. The first program (slot 0, as the boot starts it) and the workers it spawns make
//! the system calls the input scripts, one at each entry to user mode: every call number
//! (and unknown ones), with pointers into the caller's own text, read-only and writable
//! pages, its stack, across their ends and into the pages past them, into nothing, into
//! the kernel's region and its frames, the user half's top and 2^64 - 1, lengths at the
//! edges (0, 1, a name's 32 and 33, a line's 256 and 257, a page and one past, 2^63,
//! 2^64 - 1); now and then a fault or the end of a time slice instead.
//!
//! The world knows each program's layout (it built their ELF images) and reads every
//! address space itself, from the arena, at every entry. Findings: a panic (overflow
//! checks and debug assertions on); a program whose first entry shows other pages, flags
//! or bytes than its image; any byte of any program's memory changed by a call other than
//! what the call may write (the caller's own writable output, or the first program's
//! receive buffer when a message is delivered): a read or write outside the caller's
//! mapped bytes, or into another program's memory (rule F); a call answering Fault
//! otherwise than the caller's pages say, or answering a privileged call of a worker
//! other than Permission; a console line other than the caller's bytes; a worker's end
//! that gives back other than its frames, a spawn that takes other than its child's (a
//! refused one: none).

use crate::kernel::{mm, proc, ram};
use crate::targets::kernel_mm::user_leaves;
use crate::{Decisions, Finding};
use abi::{sys, BootEntry, Error, Message, KERNEL_END, KERNEL_START, NAME_LEN, PAGE_SIZE, STACK_PAGES, STACK_TOP};
use kernel_host::trap::Hart;
use kernel_host::Machine;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};

const TEXT: usize = 0x1_0000;
const RODATA: usize = 0x1_1000;
const DATA: usize = 0x1_2000;
/// The data segment: one page from the file, one of zeros.
const DATA_PAGES: usize = 2;
const STACK: usize = STACK_TOP - STACK_PAGES * PAGE_SIZE;
const POOL_PAGES: usize = 256;
const TIMEBASE: u64 = 10_000_000;
const MAX_STEPS: usize = 48;
const A0: usize = 10;
const A7: usize = 17;
const V: usize = 1;
const R: usize = 1 << 1;
const W: usize = 1 << 2;
const X: usize = 1 << 3;
const U: usize = 1 << 4;
const A: usize = 1 << 6;
const D: usize = 1 << 7;
/// Where each program's data page keeps the names it passes (its own bytes).
const NAME_WORKER: usize = DATA;
const NAME_DATA: usize = DATA + 64;
/// A name that runs off the file's page into the zeroed one.
const NAME_STRADDLE: usize = DATA + PAGE_SIZE - 3;

/// Where a pointer argument points, in the caller's own layout.
#[derive(Clone, Copy, Debug)]
enum Place {
    WorkerName,
    DataName,
    StraddleName,
    Data,
    DataEnd,
    Rodata,
    RodataEnd,
    Text,
    Stack,
    StackTop,
    Unmapped,
    KernelRegion,
    Frames,
    UserTop,
    Top,
    Null,
}

#[derive(Clone, Copy, Debug)]
enum Arg {
    Raw(usize),
    Ptr(Place, usize),
}

#[derive(Clone, Debug)]
enum Act {
    Sys(usize, [Arg; 5]),
    Fault(usize, Arg),
    Tick,
}

/// How a run leaves the kernel's loop (an unwinding payload, never a finding).
enum Leave {
    Script,
    PowerOff,
}

/// What the world expects a process's a0 to hold at its next entry.
struct Expect {
    /// Whether the call answers at once (never leaves its caller waiting).
    immediate: bool,
    what: &'static str,
    ok: Box<dyn Fn(usize) -> bool>,
    detail: String,
}

struct World {
    script: VecDeque<Act>,
    /// Slot -> its root, for the spaces seen and not ended.
    roots: BTreeMap<usize, usize>,
    /// Every live space's user bytes as the world last read them: (slot, page) -> bytes.
    snapshot: BTreeMap<(usize, usize), Vec<u8>>,
    /// What the last call may write: (slot, va, len).
    may_write: Vec<(usize, usize, usize)>,
    /// The first program's receive buffer while it waits in recv.
    receiving: Option<(usize, usize)>,
    expect: BTreeMap<usize, Expect>,
    /// Console bytes expected from the last call, and the console so far.
    console: Vec<u8>,
    console_expect: Option<Vec<u8>>,
    console_at: usize,
    input: VecDeque<u8>,
    clock: u64,
    timer: u64,
    idles: usize,
    /// The slot whose trap the kernel is taking.
    trapping: usize,
    /// The script has run out: programs are put to sleep until the kernel idles.
    draining: bool,
    /// A worker ending: its frames, and in_use before.
    ending: Option<(usize, usize)>,
    /// A spawn of the worker: in_use before, and whether it may have started one (13
    /// frames: its root, four tables, eight pages) or must have left the pool as it was.
    spawning: Option<(usize, bool)>,
    images: [Vec<u8>; 2],
    data: Vec<u8>,
    finding: Option<Finding>,
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

fn with<T>(f: impl FnOnce(&mut World) -> T) -> T {
    WORLD.with(|w| f(w.borrow_mut().as_mut().expect("the world is set for the run")))
}

/// Ends the run with `finding` (kept by the world, read after the loop is left).
fn fail(w: &mut World, what: &str, detail: String) -> ! {
    w.finding = Some(Finding::oracle(what, detail));
    panic::panic_any(Leave::Script)
}

fn pte_pa(pte: usize) -> usize {
    (pte >> 10) << 12
}

fn page_bytes(pa: usize) -> Vec<u8> {
    assert!(pa >= ram::BASE && pa + PAGE_SIZE <= ram::END, "a user frame outside the arena: {pa:#x}");
    // SAFETY: a page of the arena, mapped for the whole run.
    unsafe { std::slice::from_raw_parts(pa as *const u8, PAGE_SIZE) }.to_vec()
}

/// Whether every byte of [va, va + len) is in a page of `leaves` with `need`.
fn allowed(leaves: &BTreeMap<usize, usize>, va: usize, len: usize, need: usize) -> bool {
    let Some(end) = va.checked_add(len) else { return false };
    let mut at = va;
    while at < end {
        let page = at & !(PAGE_SIZE - 1);
        match leaves.get(&page) {
            Some(&pte) if pte & need == need && (abi::USER_START..abi::USER_END).contains(&at) => {}
            _ => return false,
        }
        at = page + PAGE_SIZE;
    }
    true
}

fn read(leaves: &BTreeMap<usize, usize>, va: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| {
            let at = va + k;
            let pa = pte_pa(leaves[&(at & !(PAGE_SIZE - 1))]) + (at & (PAGE_SIZE - 1));
            // SAFETY: a byte of a user frame in the arena.
            unsafe { std::ptr::read(pa as *const u8) }
        })
        .collect()
}

impl World {
    fn resolve(arg: Arg) -> usize {
        match arg {
            Arg::Raw(v) => v,
            Arg::Ptr(place, off) => {
                let base = match place {
                    Place::WorkerName => NAME_WORKER,
                    Place::DataName => NAME_DATA,
                    Place::StraddleName => NAME_STRADDLE,
                    Place::Data => DATA,
                    Place::DataEnd => DATA + DATA_PAGES * PAGE_SIZE,
                    Place::Rodata => RODATA,
                    Place::RodataEnd => DATA,
                    Place::Text => TEXT,
                    Place::Stack => STACK,
                    Place::StackTop => STACK_TOP,
                    Place::Unmapped => 0x40_0000,
                    Place::KernelRegion => KERNEL_START,
                    Place::Frames => KERNEL_END,
                    Place::UserTop => abi::USER_END,
                    Place::Top => usize::MAX,
                    Place::Null => 0,
                };
                base.wrapping_add(off)
            }
        }
    }

    /// Every live space's bytes now, against the snapshot: only what the last call may
    /// write may differ.
    fn compare(&mut self) {
        let roots: Vec<(usize, usize)> = self.roots.iter().map(|(&s, &r)| (s, r)).collect();
        for (slot, root) in roots {
            for (va, pte) in user_leaves(root) {
                let Some(before) = self.snapshot.get(&(slot, va)) else { continue };
                let now = page_bytes(pte_pa(pte));
                if &now == before {
                    continue;
                }
                for k in (0..PAGE_SIZE).filter(|&k| now[k] != before[k]) {
                    let at = va + k;
                    let mut ranges = self.may_write.clone();
                    if let Some((recv_at, len)) = self.receiving {
                        ranges.push((0, recv_at, len));
                    }
                    let ok = ranges
                        .iter()
                        .any(|&(s, start, len)| s == slot && (start..start.saturating_add(len)).contains(&at));
                    if !ok || pte & W == 0 {
                        fail(
                            self,
                            "a call changed memory it may not write",
                            format!("slot {slot} va {at:#x} (pte {pte:#x}): {:#x} -> {:#x}", before[k], now[k]),
                        );
                    }
                }
            }
        }
    }

    fn snapshot(&mut self) {
        self.snapshot.clear();
        let roots: Vec<(usize, usize)> = self.roots.iter().map(|(&s, &r)| (s, r)).collect();
        for (slot, root) in roots {
            for (va, pte) in user_leaves(root) {
                self.snapshot.insert((slot, va), page_bytes(pte_pa(pte)));
            }
        }
    }

    /// The checks owed since the last trap, at the kernel's next call to the world.
    fn settle(&mut self) {
        self.compare();
        let console = self.console[self.console_at..].to_vec();
        match self.console_expect.take() {
            Some(want) if console != want => {
                fail(self, "a console line other than the caller's bytes", format!("{console:x?}, expected {want:x?}"))
            }
            // Only the first program's lines and the kernel's own reach the console.
            None if !console.is_empty() && !console.starts_with(b"kernel: ") => {
                fail(self, "a worker's bytes reached the console", format!("{:?}", String::from_utf8_lossy(&console)))
            }
            _ => {}
        }
        self.console_at = self.console.len();
        if let Some((before, may_start)) = self.spawning.take() {
            let now = proc::KERNEL.lock().frames.in_use;
            if now != before && !(may_start && now == before + 13) {
                let detail = format!("in_use {before} -> {now} (a child would take 13; one may start: {may_start})");
                fail(self, "a spawn took other frames than its child's", detail);
            }
        }
        if let Some((frames, before)) = self.ending.take() {
            let now = proc::KERNEL.lock().frames.in_use;
            if before.checked_sub(frames) != Some(now) {
                fail(
                    self,
                    "a worker's end gave back other than its frames",
                    format!("in_use {before} -> {now}, its frames {frames}"),
                );
            }
        }
    }

    /// The layout a program's first entry must show: its pages and flags, and its bytes.
    fn check_layout(&mut self, slot: usize, root: usize) {
        let leaves = user_leaves(root);
        let mut want: BTreeMap<usize, usize> = BTreeMap::new();
        want.insert(TEXT, R | X);
        want.insert(RODATA, R);
        for p in 0..DATA_PAGES {
            want.insert(DATA + p * PAGE_SIZE, R | W);
        }
        for p in 0..STACK_PAGES {
            want.insert(STACK + p * PAGE_SIZE, R | W);
        }
        let flags: BTreeMap<usize, usize> = leaves.iter().map(|(&va, &pte)| (va, pte & 0x3ff)).collect();
        let want_flags: BTreeMap<usize, usize> = want.iter().map(|(&va, &f)| (va, f | U | A | D | V)).collect();
        if flags != want_flags {
            fail(
                self,
                "a program's pages other than its image's",
                format!("slot {slot}: {flags:x?}, image {want_flags:x?}"),
            );
        }
        let image = &self.images[usize::from(slot != 0)];
        for (va, off) in [(TEXT, 0x1000), (RODATA, 0x2000), (DATA, 0x3000)] {
            if read(&leaves, va, PAGE_SIZE) != image[off..off + PAGE_SIZE] {
                fail(self, "a program's bytes other than its image's", format!("slot {slot} page {va:#x}"));
            }
        }
        if read(&leaves, DATA + PAGE_SIZE, PAGE_SIZE).iter().any(|&b| b != 0) {
            fail(self, "a program's zeroed page not zero", format!("slot {slot}"));
        }
    }

    /// The hart enters slot `hart.current`'s process: the world checks what it owes, and
    /// makes the process's next trap.
    fn user(&mut self, hart: &mut Hart, satp: usize) -> (usize, usize) {
        self.settle();
        self.idles = 0;
        let slot = hart.current;
        self.trapping = slot;
        let root = (satp & ((1 << 44) - 1)) << 12;
        if self.roots.get(&slot) != Some(&root) {
            self.roots.insert(slot, root);
            self.check_layout(slot, root);
        }
        if slot == 0 {
            // Back from recv (or never in it): its buffer is its own again.
            self.receiving = None;
        }
        if let Some(e) = self.expect.remove(&slot) {
            let a0 = hart.frame[A0];
            if !(e.ok)(a0) {
                fail(
                    self,
                    e.what,
                    format!("slot {slot}: a0 {a0:#x} ({:?}); {}", Error::from_raw(a0).map(Error::name), e.detail),
                );
            }
        }
        // Past the script, every program still running sleeps for good, so that the
        // kernel idles and the world sees who is left waiting (see `idle`).
        let act = self.script.pop_front().unwrap_or_else(|| {
            self.draining = true;
            Act::Sys(sys::SLEEP, [Arg::Raw(usize::MAX), Arg::Raw(0), Arg::Raw(0), Arg::Raw(0), Arg::Raw(0)])
        });
        let leaves = user_leaves(root);
        self.may_write.clear();
        let answer = match act {
            Act::Tick => (1usize << 63 | 5, 0),
            Act::Fault(cause, at) => {
                self.end(slot, &leaves);
                (cause, Self::resolve(at))
            }
            Act::Sys(nr, args) => {
                let a: Vec<usize> = args.iter().map(|&x| Self::resolve(x)).collect();
                for (k, &v) in a.iter().enumerate() {
                    hart.frame[A0 + k] = v;
                }
                hart.frame[A7] = nr;
                self.expect_call(slot, nr, &a, &leaves);
                (8, 0)
            }
        };
        self.snapshot();
        answer
    }

    /// Slot `slot` ends (exit or fault): a worker's frames go back.
    fn end(&mut self, slot: usize, leaves: &BTreeMap<usize, usize>) {
        if slot == 0 {
            return;
        }
        let root = self.roots[&slot];
        let tables = crate::targets::kernel_mm::table_count(root);
        let before = proc::KERNEL.lock().frames.in_use;
        self.ending = Some((1 + tables + leaves.len(), before));
        self.roots.remove(&slot);
    }

    fn expect_is(&mut self, slot: usize, what: &'static str, want: usize, detail: String) {
        self.expect.insert(slot, Expect { immediate: true, what, ok: Box::new(move |a0| a0 == want), detail });
    }

    /// Fault exactly when `fault`; a call that may wait (a message sent, a receive) says
    /// `waits`, and then answers at once only with its Fault.
    fn expect_fault_iff(&mut self, slot: usize, fault: bool, waits: bool, detail: String) {
        let f = Error::Fault.to_raw();
        self.expect.insert(
            slot,
            Expect {
                immediate: fault || !waits,
                what: "a call answered Fault otherwise than the caller's pages say",
                ok: Box::new(move |a0| (a0 == f) == fault),
                detail,
            },
        );
    }

    /// What call `nr` with `a` from slot `slot` must answer, write and print.
    fn expect_call(&mut self, slot: usize, nr: usize, a: &[usize], leaves: &BTreeMap<usize, usize>) {
        let first = slot == 0;
        let readable = |va: usize, len: usize| allowed(leaves, va, len, R);
        let writable = |va: usize, len: usize| allowed(leaves, va, len, W);
        let perm = Error::Permission.to_raw();
        let detail = format!("call {nr} args {a:x?}");
        match nr {
            sys::LOG if first => {
                let len = a[1].min(256);
                let ok = readable(a[0], len);
                if ok {
                    let mut line = read(leaves, a[0], len);
                    if a[2] & sys::LOG_NO_END == 0 {
                        line.extend_from_slice(b"\r\n");
                    }
                    self.console_expect = Some(line);
                } else {
                    self.console_expect = Some(Vec::new());
                }
                self.expect_fault_iff(slot, !ok, false, detail);
            }
            sys::LOG => {
                let ok = readable(a[0], a[1].min(abi::LOG_MAX));
                self.expect_fault_iff(slot, !ok, true, detail);
            }
            sys::LOG_MINTED if (a[0] as u64) < u64::from(abi::MINT_MIN) || a[0] > u32::MAX as usize => {
                self.expect_is(slot, "a minted badge below MINT_MIN or past 32 bits allowed", perm, detail);
            }
            sys::LOG_MINTED => {
                let ok = readable(a[1], a[2].min(abi::LOG_MAX));
                self.expect_fault_iff(slot, !ok, true, detail);
            }
            sys::DONE if first => self.expect_is(slot, "the first program's done allowed", perm, detail),
            sys::EXIT => self.end(slot, leaves),
            sys::SPAWN | sys::POWER_OFF | sys::RECV | sys::CONSOLE_READ | sys::RESET if !first => {
                self.expect_is(slot, "a worker's privileged call allowed", perm, detail);
            }
            sys::SPAWN if a[1] <= NAME_LEN && readable(a[0], a[1]) => {
                // A worker needs 13 frames, and 3 to spare before each page it maps.
                let name = read(leaves, a[0], a[1]);
                let (what, ok): (&'static str, Box<dyn Fn(usize) -> bool>) = if a[2] > u32::MAX as usize {
                    ("a spawn's badge past 32 bits taken", Box::new(|a0| a0 == Error::Invalid.to_raw()))
                } else if name != b"worker" {
                    ("a spawn of what is not a program", Box::new(|a0| a0 == Error::NoEntry.to_raw()))
                } else if a[3] < 15 || a[3] >= 4096 {
                    ("a spawn past its quota", Box::new(|a0| a0 == Error::NoMemory.to_raw()))
                } else {
                    ("a spawn within its quota refused", Box::new(|a0| a0 < 1 << 15 || a0 == Error::NoProcess.to_raw()))
                };
                self.expect.insert(slot, Expect { immediate: true, what, ok, detail });
                // A refused spawn (here, past its quota, after some of its pages) leaves
                // nothing behind.
                let may_start = what == "a spawn within its quota refused";
                self.spawning = Some((proc::KERNEL.lock().frames.in_use, may_start));
            }
            sys::SPAWN | sys::ENTRY_INFO | sys::ENTRY_READ if a[1] > NAME_LEN => {
                self.expect_is(slot, "a name longer than NAME_LEN taken", Error::NoEntry.to_raw(), detail);
            }
            sys::SPAWN | sys::ENTRY_INFO => {
                let ok = readable(a[0], a[1]);
                self.expect_fault_iff(slot, !ok, false, detail);
            }
            sys::ENTRY_READ => {
                if !readable(a[0], a[1]) {
                    self.expect_fault_iff(slot, true, false, detail);
                } else if read(leaves, a[0], a[1]) == b"worker" {
                    self.expect_is(slot, "a program's image read as data", Error::NoEntry.to_raw(), detail);
                } else if read(leaves, a[0], a[1]) == b"data" {
                    let count = a[4].min(self.data.len().saturating_sub(a[2]));
                    let ok = writable(a[3], count);
                    if ok {
                        self.may_write.push((slot, a[3], count));
                    }
                    self.expect_fault_iff(slot, !ok, false, detail);
                }
            }
            sys::RECV => {
                let len = std::mem::size_of::<Message>();
                self.receiving = Some((a[0], len));
                self.may_write.push((slot, a[0], len));
                // Answered when a message is delivered: Fault iff the buffer is not writable.
                // Answered at a delivery, its buffer judged then: it may wait either way.
                self.expect_fault_iff(slot, !writable(a[0], len), true, detail);
                if let Some(e) = self.expect.get_mut(&slot) {
                    e.immediate = false;
                }
            }
            sys::CONSOLE_READ => {
                let n = a[1].min(64).min(self.input.len());
                let ok = writable(a[0], n);
                if ok {
                    self.may_write.push((slot, a[0], n));
                }
                self.expect_fault_iff(slot, !ok, false, detail);
            }
            sys::DISK_INFO
            | sys::DISK_READ
            | sys::DISK_WRITE
            | sys::DISK_FLUSH
            | sys::NET_INFO
            | sys::NET_SEND
            | sys::NET_RECV => {
                self.expect_is(slot, "a device call answered without a device", Error::NoEntry.to_raw(), detail);
            }
            n if n > sys::NET_RECV || n == 0 => {
                self.expect_is(slot, "an unknown call answered other than NoSys", Error::NoSys.to_raw(), detail);
            }
            _ => {}
        }
    }
}

struct HostMachine;

impl Machine for HostMachine {
    fn user(&self, hart: &mut Hart, satp: usize) -> (usize, usize) {
        with(|w| w.user(hart, satp))
    }

    fn trap_entry(&self, hart: &mut Hart) -> ! {
        proc::take_trap(hart);
        proc::run(hart)
    }

    fn idle(&self) {
        with(|w| {
            w.settle();
            // Nothing runs: a call that answers at once must not have left its caller
            // waiting.
            if let Some((slot, e)) = w.expect.iter().find(|(_, e)| e.immediate) {
                let detail = format!("slot {slot}: {} ({})", e.what, e.detail);
                fail(w, "a call that answers at once left its caller waiting", detail);
            }
            w.idles += 1;
            if w.draining || w.idles > 16 {
                panic::panic_any(Leave::Script);
            }
            w.clock = w.clock.max(w.timer);
        });
    }

    fn power_off(&self, _status: u16) -> ! {
        with(|w| {
            if w.trapping != 0 {
                fail(w, "a worker powered the machine off", format!("slot {}", w.trapping));
            }
        });
        panic::panic_any(Leave::PowerOff)
    }

    fn cold_reboot(&self) {
        with(|w| {
            if w.trapping != 0 {
                fail(w, "a worker rebooted the machine", format!("slot {}", w.trapping));
            }
        });
    }

    fn put_bytes(&self, bytes: &[u8]) {
        with(|w| w.console.extend_from_slice(bytes));
    }

    fn get_byte(&self) -> Option<u8> {
        with(|w| w.input.pop_front())
    }

    fn now(&self) -> u64 {
        with(|w| {
            w.clock += 1;
            w.clock
        })
    }

    fn set_timer(&self, deadline: u64) {
        with(|w| w.timer = deadline);
    }
}

static MACHINE: HostMachine = HostMachine;

/// A program's ELF image: text (R+X), read-only data (R), data (R+W, a page from the file
/// and one of zeros), each from its own page of the file.
fn image(tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 0x4000];
    f[..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // ELFCLASS64
    f[5] = 1; // little-endian
    f[6] = 1;
    let put = |f: &mut Vec<u8>, at: usize, v: u64, n: usize| f[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
    put(&mut f, 16, 2, 2); // ET_EXEC
    put(&mut f, 18, 243, 2); // EM_RISCV
    put(&mut f, 20, 1, 4);
    put(&mut f, 24, TEXT as u64, 8);
    put(&mut f, 32, 64, 8); // e_phoff
    put(&mut f, 52, 64, 2); // e_ehsize
    put(&mut f, 54, 56, 2); // e_phentsize
    put(&mut f, 56, 3, 2); // e_phnum
    let segments =
        [(TEXT, 0x1000, 0x1000, 0x1000, 5u64), (RODATA, 0x2000, 0x1000, 0x1000, 4), (DATA, 0x3000, 0x1000, 0x2000, 6)];
    for (k, &(vaddr, offset, filesz, memsz, flags)) in segments.iter().enumerate() {
        let h = 64 + 56 * k;
        put(&mut f, h, 1, 4); // PT_LOAD
        put(&mut f, h + 4, flags, 4);
        put(&mut f, h + 8, offset as u64, 8);
        put(&mut f, h + 16, vaddr as u64, 8);
        put(&mut f, h + 24, vaddr as u64, 8);
        put(&mut f, h + 32, filesz as u64, 8);
        put(&mut f, h + 40, memsz as u64, 8);
        put(&mut f, h + 48, PAGE_SIZE as u64, 8);
    }
    for (k, b) in f[0x1000..0x3000].iter_mut().enumerate() {
        *b = (k as u8).wrapping_mul(31) ^ tag;
    }
    // The data page: the names the program passes, then its own bytes.
    for (k, b) in f[0x3000..].iter_mut().enumerate() {
        *b = (k as u8) ^ tag ^ 0x5a;
    }
    let names: [(usize, &[u8]); 3] =
        [(NAME_WORKER - DATA, b"worker\0"), (NAME_DATA - DATA, b"data\0"), (NAME_STRADDLE - DATA, b"wor")];
    for (at, name) in names {
        f[0x3000 + at..0x3000 + at + name.len()].copy_from_slice(name);
    }
    f
}

fn entry(name: &[u8], kind: u32, bytes: &[u8]) -> BootEntry {
    let mut e = BootEntry::EMPTY;
    e.name[..name.len()].copy_from_slice(name);
    e.kind = kind;
    e.addr = bytes.as_ptr() as usize;
    e.len = bytes.len();
    e
}

fn place(d: &mut Decisions) -> Arg {
    let p = *d.choose(&[
        Place::Data,
        Place::WorkerName,
        Place::Stack,
        Place::DataName,
        Place::Rodata,
        Place::Text,
        Place::DataEnd,
        Place::RodataEnd,
        Place::StraddleName,
        Place::StackTop,
        Place::Unmapped,
        Place::KernelRegion,
        Place::Frames,
        Place::UserTop,
        Place::Top,
        Place::Null,
    ]);
    let off = match d.below(4) {
        0 => 0,
        1 => d.below(PAGE_SIZE),
        2 => (0usize).wrapping_sub(1 + d.below(64)),
        _ => d.below(64),
    };
    Arg::Ptr(p, off)
}

fn length(d: &mut Decisions) -> Arg {
    Arg::Raw(*d.choose(&[6, 4, 0, 1, 32, 33, 200, 256, 257, PAGE_SIZE, PAGE_SIZE + 1, 1 << 63, usize::MAX, 240, 3]))
}

fn small(d: &mut Decisions) -> Arg {
    Arg::Raw(*d.choose(&[0, 1, 2, 0x100, 64, u32::MAX as usize, 1 << 32, usize::MAX]))
}

fn act(d: &mut Decisions) -> Act {
    match d.below(16) {
        0 => return Act::Tick,
        1 if d.below(4) == 0 => return Act::Fault(*d.choose(&[13, 15, 12, 2]), place(d)),
        _ => {}
    }
    // Calls that end a program (the first's end powers the machine off) are rarer.
    if d.below(12) == 0 {
        let nr = *d.choose(&[sys::EXIT, sys::POWER_OFF, sys::RESET]);
        return Act::Sys(nr, [small(d), small(d), small(d), small(d), small(d)]);
    }
    let nr = *d.choose(&[
        sys::LOG,
        sys::SPAWN,
        sys::RECV,
        sys::ENTRY_READ,
        sys::ENTRY_INFO,
        sys::LOG_MINTED,
        sys::CONSOLE_READ,
        sys::YIELD,
        sys::GETPID,
        sys::DONE,
        sys::TIME,
        sys::RANDOM,
        sys::TIMEBASE,
        sys::SLEEP,
        sys::DISK_READ,
        sys::NET_SEND,
        sys::DISK_INFO,
        0,
        25,
        usize::MAX,
    ]);
    // Half the names are the programs' own, whole: the calls then go past the name.
    let name = |d: &mut Decisions, place: Place, len: usize| {
        if d.bool() {
            (Arg::Ptr(place, 0), Arg::Raw(len))
        } else {
            (self::place(d), length(d))
        }
    };
    let args = match nr {
        sys::SPAWN => {
            let (p, l) = if d.below(8) == 0 { name(d, Place::DataName, 4) } else { name(d, Place::WorkerName, 6) };
            let badge = if d.below(8) == 0 { small(d) } else { Arg::Raw(2) };
            [p, l, badge, Arg::Raw(*d.choose(&[16, 64, 15, 14, 0, 4096, usize::MAX])), small(d)]
        }
        sys::ENTRY_READ => {
            let (p, l) = if d.below(8) == 0 { name(d, Place::WorkerName, 6) } else { name(d, Place::DataName, 4) };
            [p, l, small(d), place(d), length(d)]
        }
        sys::LOG => [place(d), length(d), small(d), small(d), small(d)],
        sys::LOG_MINTED => [small(d), place(d), length(d), small(d), small(d)],
        sys::ENTRY_INFO => [place(d), length(d), small(d), small(d), small(d)],
        sys::RECV | sys::CONSOLE_READ => [place(d), length(d), small(d), small(d), small(d)],
        sys::SLEEP => [Arg::Raw(*d.choose(&[1, 0, 100_000, usize::MAX])), small(d), small(d), small(d), small(d)],
        sys::DISK_READ | sys::NET_SEND => [small(d), place(d), length(d), small(d), small(d)],
        _ => [small(d), small(d), small(d), small(d), small(d)],
    };
    Act::Sys(nr, args)
}

/// The kernel's state as the first run in this process found it, put back before each
/// run (a forked child starts from it anyway; in process, the last run's would stay).
fn reset_kernel() {
    use std::mem::MaybeUninit;
    use std::sync::OnceLock;
    struct Pristine(Box<MaybeUninit<proc::Kernel>>);
    // SAFETY: the copy is plain data (frames, slots, entries, the timer queue; no disk or
    // card on the host), read only under the kernel's lock.
    unsafe impl Send for Pristine {}
    // SAFETY: as above; it is never written after it is made.
    unsafe impl Sync for Pristine {}
    static PRISTINE: OnceLock<Pristine> = OnceLock::new();
    let mut k = proc::KERNEL.lock();
    let pristine = PRISTINE.get_or_init(|| {
        let mut copy = Box::new(MaybeUninit::<proc::Kernel>::uninit());
        // SAFETY: a bitwise copy of a valid Kernel, which owns nothing to drop twice.
        unsafe { std::ptr::copy_nonoverlapping(&*k as *const proc::Kernel, copy.as_mut_ptr(), 1) };
        Pristine(copy)
    });
    // SAFETY: the copy is a valid Kernel (above); the lock is held, and the state it
    // replaces owns nothing (no disk, no card).
    unsafe { std::ptr::copy_nonoverlapping(pristine.0.as_ptr(), &mut *k as *mut proc::Kernel, 1) };
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    assert!(ram::mapped(), "the kernel's RAM arena is not mapped (targets::prepare)");
    let images = [image(0x11), image(0x77)];
    let data: Vec<u8> = (0..*d.choose(&[100usize, 0, 1, PAGE_SIZE, 5000])).map(|k| (k as u8) ^ 0xc3).collect();
    let entries = [
        entry(b"first", abi::KIND_FIRST_PROGRAM, &images[0]),
        entry(b"worker", abi::KIND_PROGRAM, &images[1]),
        entry(b"data", abi::KIND_DATA, &data),
    ];
    let script: VecDeque<Act> = (0..1 + d.below(MAX_STEPS)).map(|_| act(d)).collect();
    let input: VecDeque<u8> = (0..d.below(80)).map(|k| k as u8 ^ 0x3c).collect();
    kernel_host::world::install(&MACHINE);
    WORLD.with(|w| {
        *w.borrow_mut() = Some(World {
            script,
            roots: BTreeMap::new(),
            snapshot: BTreeMap::new(),
            may_write: Vec::new(),
            receiving: None,
            expect: BTreeMap::new(),
            console: Vec::new(),
            console_expect: None,
            console_at: 0,
            input,
            clock: 0,
            timer: 0,
            idles: 0,
            trapping: 0,
            draining: false,
            ending: None,
            spawning: None,
            images: images.clone(),
            data: data.clone(),
            finding: None,
        })
    });
    reset_kernel();
    {
        let mut k = proc::KERNEL.lock();
        k.frames = mm::Frames::new();
        k.frames.add(KERNEL_END, KERNEL_END + POOL_PAGES * PAGE_SIZE);
        k.init(&entries, &[7; 16], TIMEBASE);
        if let Err(e) = k.start_first(0) {
            return Err(Finding::oracle("the first program refused", e.name()));
        }
    }
    let mut hart = Hart::new(0);
    let left = panic::catch_unwind(AssertUnwindSafe(|| proc::run(&mut hart)));
    let payload = match left {
        Ok(never) => never,
        Err(payload) => payload,
    };
    let world = WORLD.with(|w| w.borrow_mut().take()).expect("the world");
    match payload.downcast_ref::<Leave>() {
        Some(leave) => {
            // The hook kept the world's own unwinding as a panic: not a finding.
            crate::panics::take_panic();
            if let Some(finding) = world.finding {
                return Err(finding);
            }
            d.end(match leave {
                Leave::Script => "the script ran out",
                Leave::PowerOff => "powered off",
            });
            Ok(())
        }
        None => panic::resume_unwind(payload),
    }
}
