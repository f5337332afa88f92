//! Processes, the scheduler and the system calls, all under the big kernel lock.

#[cfg(all(feature = "spawn-unchecked-entry", not(debug_assertions)))]
compile_error!(
    "the kernel feature spawn-unchecked-entry is test-only: build it with debug assertions (debug_assertions = true in the case), never into a release kernel"
);

use abi::{msg, sys, BootEntry, Error, Message, MAX_ENTRIES, MAX_PROCS, PAGE_SIZE};
use ksync::{Lock, TimerQueue};

use crate::console::{get_byte, now, power_off, put_bytes};
use crate::disk::Disk;
use crate::mm::{self, Frames, R, W, X};
use crate::net::Card;
use crate::trap::{self, Hart, FRAME_WORDS, NONE};
use crate::{kprintln, sbi};

/// The longest line the first program writes in one call.
const LINE_MAX: usize = 256;
/// Most bytes one console_read takes from the UART.
const CONSOLE_MAX: usize = 64;
/// How often an idle hart looks for work again, in parts of a second.
const IDLE_POLLS_PER_SECOND: u64 = 1000;
/// Time slices per second.
const SLICES_PER_SECOND: u64 = 100;
/// Index of the first program.
const FIRST: usize = 0;
/// a0, a1 ... in a frame.
const A0: usize = 10;
const A7: usize = 17;
const SP: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Runnable,
    Running,
    Sleeping,
    /// Waiting for the log endpoint to take `msg`.
    Sending,
    /// The first program waiting in recv.
    Receiving,
    /// Ended; `msg` is the notice for the parent.
    Zombie,
}

struct Proc {
    state: State,
    pid: u32,
    badge: u32,
    root: usize,
    frame: [usize; FRAME_WORDS],
    /// Pages this process may hold, what it lent to its children included.
    quota: usize,
    /// Pages it holds (page tables and user pages).
    used: usize,
    /// Quota handed to children still alive.
    lent: usize,
    recv_at: usize,
    msg: Message,
    parent: usize,
}

const FREE: Proc = Proc {
    state: State::Free,
    pid: 0,
    badge: 0,
    root: 0,
    frame: [0; FRAME_WORDS],
    quota: 0,
    used: 0,
    lent: 0,
    recv_at: 0,
    msg: Message::EMPTY,
    parent: NONE,
};

/// Everything the kernel knows.
pub struct Kernel {
    /// The frame pool.
    pub frames: Frames,
    procs: [Proc; MAX_PROCS],
    next: usize,
    rng: u64,
    /// Ticks per second (/cpus/timebase-frequency).
    pub timebase: u64,
    entries: [BootEntry; MAX_ENTRIES],
    entry_count: usize,
    /// Sleeping processes (slots), by the tick they wake at.
    sleepers: TimerQueue<MAX_PROCS>,
    /// The disk on virtio-mmio slot 0, if the boot found one (disk.rs).
    pub disk: Option<Disk>,
    /// The network card on virtio-mmio slot 2, if the boot found one (net.rs).
    pub net: Option<Card>,
    /// The scheduler's trace (test-only).
    #[cfg(feature = "sched-trace")]
    trace: crate::sched_trace::Trace,
}

/// The kernel's state, behind the big lock.
pub static KERNEL: Lock<Kernel> = Lock::new(
    "kernel",
    Kernel {
        frames: Frames::new(),
        procs: [FREE; MAX_PROCS],
        next: 0,
        rng: 0,
        timebase: 0,
        entries: [BootEntry::EMPTY; MAX_ENTRIES],
        entry_count: 0,
        sleepers: TimerQueue::new(),
        disk: None,
        net: None,
        #[cfg(feature = "sched-trace")]
        trace: crate::sched_trace::Trace::new(),
    },
);

impl Kernel {
    /// Takes the bundle's entries and seeds the generator.
    pub fn init(&mut self, entries: &[BootEntry], seed: &[u8], timebase: u64) {
        let n = entries.len().min(MAX_ENTRIES);
        self.entries[..n].copy_from_slice(&entries[..n]);
        self.entry_count = n;
        self.timebase = timebase;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for chunk in seed.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            state = mix(state ^ u64::from_le_bytes(word));
        }
        self.rng = state;
    }

    /// A draw from the generator (splitmix64 over the seeded state).
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.rng)
    }

    fn entry(&self, name: &[u8]) -> Option<BootEntry> {
        self.entries[..self.entry_count].iter().find(|e| e.name() == name).copied()
    }

    /// Starts the first program from entry `index` as PID 1 with badge 1.
    pub fn start_first(&mut self, index: usize) -> Result<(), Error> {
        let entry = self.entries[index];
        self.procs[FIRST].parent = NONE;
        self.load(FIRST, &entry, abi::FIRST_QUOTA_PAGES)?;
        self.procs[FIRST].pid = 1;
        self.procs[FIRST].badge = abi::FIRST_BADGE;
        self.procs[FIRST].frame[A0] = 1;
        self.procs[FIRST].frame[A0 + 1] = abi::FIRST_BADGE as usize;
        self.procs[FIRST].state = State::Runnable;
        Ok(())
    }

    /// Builds the address space of slot `slot` from an ELF entry.
    fn load(&mut self, slot: usize, entry: &BootEntry, quota: usize) -> Result<(), Error> {
        // SAFETY: the loader verified the bundle and found this entry inside the initrd,
        // which the kernel never reuses or writes; the range is the entry's bytes.
        let image = unsafe { core::slice::from_raw_parts(entry.addr as *const u8, entry.len) };
        let user = abi::USER_START as u64..abi::USER_END as u64;
        #[cfg(not(feature = "spawn-unchecked-entry"))]
        let checked = elf::check(image, user);
        #[cfg(feature = "spawn-unchecked-entry")]
        let checked = elf::check_layout(image, user);
        let checked = checked.and_then(|p| if p.class == elf::Class::NATIVE { Ok(p) } else { Err(elf::Error::Class) });
        let program = checked.map_err(|e| {
            // One line per refusal, in the kernel's words: which check refused the image
            // (the parent learns only bad-program).
            kprintln!(
                "spawn: refused {}: {}",
                core::str::from_utf8(entry.name()).unwrap_or("(a name not UTF-8)"),
                e.describe()
            );
            Error::BadProgram
        })?;
        let root = mm::new_root(&mut self.frames).ok_or(Error::NoMemory)?;
        let p = &mut self.procs[slot];
        p.root = root;
        p.used = 1;
        p.quota = quota;
        p.lent = 0;
        p.frame = [0; FRAME_WORDS];
        let built = self.fill(slot, &program, abi::paint::tag(entry.name()));
        if built.is_err() {
            let p = &mut self.procs[slot];
            mm::free_space(&mut self.frames, p.root);
            p.root = 0;
            p.used = 0;
        }
        built
    }

    fn fill(&mut self, slot: usize, program: &elf::Program, tag: u32) -> Result<(), Error> {
        for seg in program.segments() {
            let mut flags = 0;
            if seg.readable() {
                flags |= R;
            }
            if seg.writable() {
                flags |= W | R;
            }
            if seg.executable() {
                flags |= X;
            }
            let (vaddr, memsz) = (seg.vaddr as usize, seg.memsz as usize);
            let (data, filesz) = (seg.data, seg.data.len());
            if filesz > memsz {
                return Err(Error::BadProgram);
            }
            let mut page = vaddr & !(PAGE_SIZE - 1);
            while page < vaddr + memsz {
                let frame = self.page(slot, page, flags)?;
                // The part of the file that lands in this page.
                let lo = page.max(vaddr);
                let hi = (page + PAGE_SIZE).min(vaddr + filesz);
                if lo < hi {
                    let src = &data[lo - vaddr..hi - vaddr];
                    // SAFETY: `frame` is the page just allocated for this process and
                    // [lo - page, hi - page) lies inside it.
                    unsafe {
                        core::ptr::copy_nonoverlapping(src.as_ptr(), (frame + (lo - page)) as *mut u8, src.len())
                    };
                }
                page += PAGE_SIZE;
            }
        }
        // The stack, painted for the bench's RAM scan (abi::paint, docs/ram.md): each
        // eight-byte unit holds the program's tag and its index from the stack's bottom.
        for i in 1..=abi::STACK_PAGES {
            let frame = self.page(slot, abi::STACK_TOP - i * PAGE_SIZE, R | W)?;
            let first = (abi::STACK_PAGES - i) * abi::paint::UNITS_PER_PAGE;
            for unit in 0..abi::paint::UNITS_PER_PAGE {
                let word = abi::paint::stack_word(tag, abi::STACK_PAGES, first + unit);
                // SAFETY: `frame` is the page just allocated for this stack, aligned, and
                // unit * 8 + 8 <= PAGE_SIZE.
                unsafe { core::ptr::write((frame + unit * 8) as *mut u64, word) };
            }
        }
        let p = &mut self.procs[slot];
        p.frame[0] = program.entry as usize;
        p.frame[SP] = abi::STACK_TOP;
        p.frame[A0 + 2] = tag as usize;
        Ok(())
    }

    /// Maps a fresh zeroed page at `va` in slot's space, charging its quota.
    fn page(&mut self, slot: usize, va: usize, flags: usize) -> Result<usize, Error> {
        let p = &mut self.procs[slot];
        // A page and up to two tables.
        if p.used + p.lent + 3 > p.quota {
            return Err(Error::NoMemory);
        }
        let frame = self.frames.alloc().ok_or(Error::NoMemory)?;
        let mut tables = 0;
        let mapped = mm::map(&mut self.frames, p.root, va, frame, flags, &mut tables);
        p.used += tables;
        if mapped.is_err() {
            self.frames.free(frame);
            return Err(Error::BadProgram);
        }
        p.used += 1;
        Ok(frame)
    }

    fn new_pid(&mut self) -> u32 {
        loop {
            let pid = 2 + (self.random() % 32766) as u32;
            if !self.procs.iter().any(|p| p.state != State::Free && p.pid == pid) {
                return pid;
            }
        }
    }

    fn spawn(&mut self, parent: usize, name: &[u8], badge: u32, pages: usize) -> Result<u32, Error> {
        let entry = self.entry(name).filter(|e| e.kind == abi::KIND_PROGRAM).ok_or(Error::NoEntry)?;
        let p = &self.procs[parent];
        if pages > p.quota - p.used - p.lent {
            return Err(Error::NoMemory);
        }
        let slot = self.procs.iter().position(|p| p.state == State::Free).ok_or(Error::NoProcess)?;
        self.load(slot, &entry, pages)?;
        let pid = self.new_pid();
        self.procs[parent].lent += pages;
        let child = &mut self.procs[slot];
        child.pid = pid;
        child.badge = badge;
        child.parent = parent;
        child.frame[A0] = pid as usize;
        child.frame[A0 + 1] = badge as usize;
        child.state = State::Runnable;
        Ok(pid)
    }

    /// Ends process `i`: its pages go back, its parent gets `notice`.
    fn end(&mut self, i: usize, mut notice: Message) {
        if i == FIRST {
            match notice.kind {
                msg::EXIT => {
                    kprintln!("first program exited with status {}", notice.status as i32);
                    power_off(notice.status.min(255) as u16);
                }
                _ => {
                    kprintln!(
                        "first program faulted: scause {:#x} stval {:#x} sepc {:#x}",
                        notice.status,
                        notice.addr,
                        notice.pc
                    );
                    power_off(1);
                }
            }
        }
        let p = &mut self.procs[i];
        mm::free_space(&mut self.frames, p.root);
        let (parent, quota) = (p.parent, p.quota);
        notice.pid = p.pid;
        notice.badge = p.badge;
        p.root = 0;
        p.used = 0;
        p.msg = notice;
        p.state = State::Zombie;
        self.procs[parent].lent -= quota;
        self.deliver();
    }

    /// Hands the first program the next message, if it waits for one and one is there.
    fn deliver(&mut self) {
        if self.procs[FIRST].state != State::Receiving {
            return;
        }
        let n = self.procs.len();
        let start = self.next;
        let Some(from) = (0..n)
            .map(|k| (start + k) % n)
            .find(|&j| j != FIRST && matches!(self.procs[j].state, State::Sending | State::Zombie))
        else {
            return;
        };
        let message = self.procs[from].msg;
        // SAFETY: Message is plain #[repr(C)] data with no padding-sensitive invariants;
        // its bytes are what recv writes to the first program.
        let bytes = unsafe {
            core::slice::from_raw_parts(&message as *const Message as *const u8, core::mem::size_of::<Message>())
        };
        let server = &mut self.procs[FIRST];
        server.state = State::Runnable;
        if mm::copy_out(server.root, server.recv_at, bytes).is_err() {
            server.frame[A0] = Error::Fault.to_raw();
            return;
        }
        server.frame[A0] = 0;
        let sender = &mut self.procs[from];
        if sender.state == State::Zombie {
            *sender = FREE;
        } else {
            sender.state = State::Runnable;
            sender.frame[A0] = 0;
        }
    }

    fn syscall(&mut self, i: usize) {
        let f = self.procs[i].frame;
        let (a0, a1, a2, a3, a4) = (f[A0], f[A0 + 1], f[A0 + 2], f[A0 + 3], f[A0 + 4]);
        let first = i == FIRST;
        let result: Result<(usize, usize), Error> = match f[A7] {
            sys::LOG if first => self.log_first(i, a0, a1, a2 & sys::LOG_NO_END == 0).map(|()| (0, 0)),
            sys::LOG => {
                let badge = self.procs[i].badge;
                return self.send(i, msg::LOG, badge, a0, a1);
            }
            sys::LOG_MINTED if (a0 as u64) < u64::from(abi::MINT_MIN) || a0 > u32::MAX as usize => {
                Err(Error::Permission)
            }
            sys::LOG_MINTED => return self.send(i, msg::LOG, a0 as u32, a1, a2),
            sys::DONE if first => Err(Error::Permission),
            sys::DONE => {
                let badge = self.procs[i].badge;
                return self.send(i, msg::DONE, badge, 0, 0);
            }
            sys::EXIT => {
                let mut notice = Message::EMPTY;
                notice.kind = msg::EXIT;
                notice.status = a0 as u32;
                return self.end(i, notice);
            }
            sys::TIME => {
                let t = now();
                Ok((t as usize, if cfg!(target_pointer_width = "32") { (t >> 32) as usize } else { 0 }))
            }
            sys::TIMEBASE => Ok((self.timebase as usize, 0)),
            sys::RANDOM => {
                let r = self.random();
                Ok((r as usize, (r >> 32) as usize))
            }
            sys::YIELD => Ok((0, 0)),
            sys::SLEEP => {
                let ticks = if cfg!(target_pointer_width = "32") { ((a1 as u64) << 32) | a0 as u64 } else { a0 as u64 };
                let p = &mut self.procs[i];
                p.state = State::Sleeping;
                p.frame[A0] = 0;
                // Every process sleeps at most once, so there is always room.
                let _ = self.sleepers.add(i, now().saturating_add(ticks));
                return;
            }
            sys::SPAWN if first => {
                let mut name = [0u8; abi::NAME_LEN];
                match self.user_name(i, a0, a1, &mut name) {
                    Ok(n) if a2 <= u32::MAX as usize => {
                        self.spawn(i, &name[..n], a2 as u32, a3).map(|pid| (pid as usize, 0))
                    }
                    Ok(_) => Err(Error::Invalid),
                    Err(e) => Err(e),
                }
            }
            sys::POWER_OFF if first => power_off(a0.min(255) as u16),
            sys::RECV if first => {
                let p = &mut self.procs[i];
                p.recv_at = a0;
                p.state = State::Receiving;
                self.deliver();
                return;
            }
            sys::CONSOLE_READ if first => self.console_read(i, a0, a1).map(|n| (n, 0)),
            sys::RESET if first => {
                sbi::cold_reboot();
                Err(Error::Invalid)
            }
            sys::SPAWN | sys::POWER_OFF | sys::RECV | sys::CONSOLE_READ | sys::RESET => Err(Error::Permission),
            sys::ENTRY_INFO => {
                let mut name = [0u8; abi::NAME_LEN];
                self.user_name(i, a0, a1, &mut name)
                    .and_then(|n| self.entry(&name[..n]).ok_or(Error::NoEntry))
                    .map(|e| (e.len, e.kind as usize))
            }
            sys::ENTRY_READ => self.entry_read(i, a0, a1, a2, a3, a4).map(|n| (n, 0)),
            sys::GETPID => Ok((self.procs[i].pid as usize, self.procs[i].badge as usize)),
            sys::DISK_INFO => self.disk.as_ref().map(Disk::info).ok_or(Error::NoEntry),
            sys::DISK_READ => self.disk_read(i, a0, a1, a2).map(|n| (n, 0)),
            sys::DISK_WRITE => self.disk_write(i, a0, a1, a2).map(|n| (n, 0)),
            sys::DISK_FLUSH => self.disk.as_mut().ok_or(Error::NoEntry).and_then(Disk::flush).map(|()| (0, 0)),
            sys::NET_INFO => self.net.as_ref().map(Card::info).ok_or(Error::NoEntry),
            sys::NET_SEND => self.net_send(i, a0, a1).map(|n| (n, 0)),
            sys::NET_RECV => self.net_recv(i, a0, a1).map(|n| (n, 0)),
            _ => Err(Error::NoSys),
        };
        let p = &mut self.procs[i];
        match result {
            Ok((v0, v1)) => {
                p.frame[A0] = v0;
                p.frame[A0 + 1] = v1;
            }
            Err(e) => p.frame[A0] = e.to_raw(),
        }
    }

    fn user_name(&self, i: usize, ptr: usize, len: usize, out: &mut [u8; abi::NAME_LEN]) -> Result<usize, Error> {
        if len > abi::NAME_LEN {
            return Err(Error::NoEntry);
        }
        mm::copy_in(self.procs[i].root, ptr, &mut out[..len]).map_err(|()| Error::Fault)?;
        Ok(len)
    }

    fn log_first(&self, i: usize, ptr: usize, len: usize, end: bool) -> Result<(), Error> {
        let mut line = [0u8; LINE_MAX];
        let len = len.min(LINE_MAX);
        mm::copy_in(self.procs[i].root, ptr, &mut line[..len]).map_err(|()| Error::Fault)?;
        put_bytes(&line[..len]);
        put_bytes(if end { b"\r\n" } else { b"" });
        Ok(())
    }

    /// Copies the bytes waiting in the UART (at most `len`, at most CONSOLE_MAX per call)
    /// to the caller's `buf`; 0 when none wait.
    fn console_read(&self, i: usize, buf: usize, len: usize) -> Result<usize, Error> {
        let mut bytes = [0u8; CONSOLE_MAX];
        let mut n = 0;
        while n < len.min(CONSOLE_MAX) {
            match get_byte() {
                Some(b) => {
                    bytes[n] = b;
                    n += 1;
                }
                None => break,
            }
        }
        mm::copy_out(self.procs[i].root, buf, &bytes[..n]).map_err(|()| Error::Fault)?;
        Ok(n)
    }

    /// Queues a message for the log endpoint; the caller waits until it is taken.
    fn send(&mut self, i: usize, kind: u32, badge: u32, ptr: usize, len: usize) {
        let mut m = Message::EMPTY;
        m.kind = kind;
        m.badge = badge;
        let len = len.min(abi::LOG_MAX);
        let p = &mut self.procs[i];
        if mm::copy_in(p.root, ptr, &mut m.data[..len]).is_err() {
            p.frame[A0] = Error::Fault.to_raw();
            return;
        }
        m.len = len as u32;
        m.pid = p.pid;
        p.msg = m;
        p.state = State::Sending;
        self.deliver();
    }

    fn entry_read(
        &self,
        i: usize,
        name: usize,
        name_len: usize,
        offset: usize,
        buf: usize,
        len: usize,
    ) -> Result<usize, Error> {
        let mut n = [0u8; abi::NAME_LEN];
        let n = self.user_name(i, name, name_len, &mut n).map(|k| &n[..k])?;
        let entry = self.entry(n).filter(|e| e.kind == abi::KIND_DATA).ok_or(Error::NoEntry)?;
        let count = len.min(entry.len.saturating_sub(offset));
        // SAFETY: the entry lies in the verified initrd, which stays untouched; the
        // slice is inside it (offset + count <= entry.len).
        let data = unsafe { core::slice::from_raw_parts((entry.addr + offset.min(entry.len)) as *const u8, count) };
        mm::copy_out(self.procs[i].root, buf, data).map_err(|()| Error::Fault)?;
        Ok(count)
    }

    /// Reads `len` bytes (whole blocks) from `sector` into the caller's `buf`, block by
    /// block; the whole buffer is checked writable before the first request.
    fn disk_read(&mut self, i: usize, sector: usize, buf: usize, len: usize) -> Result<usize, Error> {
        let root = self.procs[i].root;
        let disk = self.disk.as_mut().ok_or(Error::NoEntry)?;
        disk.check(sector, len)?;
        mm::check(root, buf, len, W).map_err(|()| Error::Fault)?;
        let mut block = [0u8; 4096];
        let size = disk.block();
        for at in (0..len).step_by(size) {
            disk.read(sector + at / 512, &mut block[..size])?;
            mm::copy_out(root, buf + at, &block[..size]).map_err(|()| Error::Fault)?;
        }
        Ok(len)
    }

    /// Writes `len` bytes (whole blocks) of the caller's `buf` from `sector`; the whole
    /// buffer is checked readable before the first request.
    fn disk_write(&mut self, i: usize, sector: usize, buf: usize, len: usize) -> Result<usize, Error> {
        let root = self.procs[i].root;
        let disk = self.disk.as_mut().ok_or(Error::NoEntry)?;
        disk.check(sector, len)?;
        mm::check(root, buf, len, R).map_err(|()| Error::Fault)?;
        let mut block = [0u8; 4096];
        let size = disk.block();
        for at in (0..len).step_by(size) {
            mm::copy_in(root, buf + at, &mut block[..size]).map_err(|()| Error::Fault)?;
            disk.write(sector + at / 512, &block[..size])?;
        }
        Ok(len)
    }

    /// Sends the frame of `len` bytes at the caller's `buf`.
    fn net_send(&mut self, i: usize, buf: usize, len: usize) -> Result<usize, Error> {
        let root = self.procs[i].root;
        let card = self.net.as_mut().ok_or(Error::NoEntry)?;
        mm::copy_in(root, buf, card.send_buffer(len)?).map_err(|()| Error::Fault)?;
        card.send(len)?;
        Ok(len)
    }

    /// Copies the next received frame to the caller's `buf` (at least NET_FRAME_MAX
    /// bytes, checked writable before a frame is taken from the card); 0 when none waits.
    fn net_recv(&mut self, i: usize, buf: usize, len: usize) -> Result<usize, Error> {
        let root = self.procs[i].root;
        let card = self.net.as_mut().ok_or(Error::NoEntry)?;
        if len < abi::NET_FRAME_MAX {
            return Err(Error::Invalid);
        }
        mm::check(root, buf, abi::NET_FRAME_MAX, W).map_err(|()| Error::Fault)?;
        match card.recv()? {
            Some(frame) => {
                mm::copy_out(root, buf, frame).map_err(|()| Error::Fault)?;
                Ok(frame.len())
            }
            None => Ok(0),
        }
    }

    fn fault(&mut self, i: usize, scause: usize, stval: usize) {
        let mut notice = Message::EMPTY;
        notice.kind = msg::FAULT;
        notice.status = scause as u32;
        notice.addr = stval;
        notice.pc = self.procs[i].frame[0];
        self.end(i, notice);
    }

    /// The rule (docs/reference-guest.md): the first runnable slot at or after the cursor,
    /// cyclically; the cursor then moves to the slot after it. It starts at slot 0.
    fn pick(&mut self) -> Option<usize> {
        let n = self.procs.len();
        let start = self.next;
        #[cfg(not(feature = "sched-break-rule"))]
        let found = (0..n).map(|k| (start + k) % n).find(|&j| self.procs[j].state == State::Runnable)?;
        // Test-only: the last runnable slot before the cursor instead, for the oracle to catch.
        #[cfg(feature = "sched-break-rule")]
        let found = (1..=n).map(|k| (start + n - k) % n).find(|&j| self.procs[j].state == State::Runnable)?;
        self.next = (found + 1) % n;
        Some(found)
    }

    /// The trace's account of what changed, before hart `hart` picks.
    #[cfg(feature = "sched-trace")]
    fn trace_before_pick(&mut self, hart: usize) {
        use crate::sched_trace::Seen;
        let Kernel { trace, procs, timebase, .. } = self;
        trace.before_pick(hart, *timebase, |i| match procs[i].state {
            State::Runnable => Seen::Runnable,
            State::Running => Seen::Running,
            _ => Seen::Out,
        });
    }

    /// Wakes the processes due at `t`; returns the tick the next one is due at.
    fn wake_sleepers(&mut self, t: u64) -> u64 {
        let procs = &mut self.procs;
        self.sleepers.expire(t, |i| procs[i].state = State::Runnable).unwrap_or(u64::MAX)
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// This hart's scheduler loop: runs a runnable process, or idles until one may be.
pub fn run(hart: &mut Hart) -> ! {
    loop {
        let mut k = KERNEL.lock();
        let t = now();
        let next_wake = k.wake_sleepers(t);
        let slice = k.timebase / SLICES_PER_SECOND;
        #[cfg(feature = "sched-trace")]
        k.trace_before_pick(hart.hartid);
        #[cfg(feature = "sched-trace")]
        let began = now();
        let picked = k.pick();
        #[cfg(feature = "sched-trace")]
        {
            let cost = now().wrapping_sub(began);
            match picked {
                Some(i) => k.trace.picked(hart.hartid, i, cost),
                None => k.trace.idle(hart.hartid, cost),
            }
        }
        if let Some(i) = picked {
            let p = &mut k.procs[i];
            p.state = State::Running;
            hart.frame = p.frame;
            hart.current = i;
            let satp = mm::satp(p.root);
            drop(k);
            sbi::set_timer(t + slice.max(1));
            // SAFETY: the frame is process i's own context (made by load or saved at
            // its last trap), satp is its table, and the lock is free.
            unsafe { trap::enter_user(hart, satp) }
        }
        let poll = t + (k.timebase / IDLE_POLLS_PER_SECOND).max(1);
        drop(k);
        sbi::set_timer(next_wake.min(poll));
        trap::wait_for_interrupt();
    }
}

/// Where every trap from user mode lands, on the hart's kernel stack.
#[no_mangle]
extern "C" fn trap_from_user(hart: *mut Hart) -> ! {
    // SAFETY: the trap entry passes this hart's own block (from sscratch), and nothing
    // else holds a reference to it while the hart is in the kernel.
    let hart = unsafe { &mut *hart };
    take_trap(hart);
    run(hart)
}

/// Takes the trap the hart's process just made: its registers saved, then its system
/// call, fault or end of slice handled. The scheduler ([`run`]) goes on from there.
pub fn take_trap(hart: &mut Hart) {
    let (scause, stval, sstatus) = trap::cause();
    if sstatus & (1 << 8) != 0 || hart.current == NONE {
        panic!("trap in the kernel: scause {scause:#x} sepc {:#x} stval {stval:#x}", hart.frame[0]);
    }
    let mut k = KERNEL.lock();
    let i = hart.current;
    hart.current = NONE;
    let p = &mut k.procs[i];
    p.frame = hart.frame;
    p.state = State::Runnable;
    let interrupt = scause >> (usize::BITS - 1) != 0;
    if interrupt {
        // The timer: the slice is over (run arms the next one).
    } else if scause == 8 {
        p.frame[0] += 4;
        k.syscall(i);
    } else {
        k.fault(i, scause, stval);
    }
}
