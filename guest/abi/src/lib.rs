//! The contract between the loader, the kernel and the user programs: the boot-info
//! block the loader hands the kernel, the system-call numbers and error codes, the
//! message the log endpoint delivers, the user address range and the badge rules.
//! Everything here is plain data; nothing in it runs.

#![no_std]

/// Physical addresses the kernel is linked at and may occupy (both widths). The loader
/// refuses a kernel ELF with a segment outside it.
pub const KERNEL_START: usize = 0x8080_0000;
/// End of the kernel's region (exclusive): 8 MiB for its image, stacks and tables.
pub const KERNEL_END: usize = 0x8100_0000;

/// The user part of every address space: [USER_START, USER_END). The same on both
/// widths, because the kernel runs on physical addresses and is mapped (supervisor
/// only) at 0x8000_0000 and up in every address space.
pub const USER_START: usize = 0x1_0000;
/// End of the user range (exclusive).
pub const USER_END: usize = 0x8000_0000;
/// A program's stack: STACK_PAGES pages ending at STACK_TOP, with an unmapped page
/// above it.
pub const STACK_TOP: usize = 0x7fff_0000;
/// Pages of stack each process gets, mapped at start.
pub const STACK_PAGES: usize = 4;
/// Size of a page on both widths.
pub const PAGE_SIZE: usize = 4096;

/// "TBBOOTI1": the magic at the start of the boot info.
pub const BOOT_MAGIC: u64 = u64::from_le_bytes(*b"TBBOOTI1");
/// How many bundle entries the boot info can carry.
pub const MAX_ENTRIES: usize = 32;
/// Longest entry name (the bundle's name field).
pub const NAME_LEN: usize = 32;

/// Bundle entry kinds, as the bundle stores them.
pub const KIND_KERNEL: u32 = 1;
/// The first program: runs in init's place.
pub const KIND_FIRST_PROGRAM: u32 = 2;
/// A program the first program may start.
pub const KIND_PROGRAM: u32 = 3;
/// Data: readable by every program through `ENTRY_READ`.
pub const KIND_DATA: u32 = 4;

/// One entry of the verified bundle, as the loader found it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BootEntry {
    /// The name, NUL-padded.
    pub name: [u8; NAME_LEN],
    /// One of the KIND_* values.
    pub kind: u32,
    /// Physical address of the entry's bytes (inside the initrd, which stays put).
    pub addr: usize,
    /// Length in bytes.
    pub len: usize,
}

impl BootEntry {
    /// An unused slot.
    pub const EMPTY: BootEntry = BootEntry { name: [0; NAME_LEN], kind: 0, addr: 0, len: 0 };

    /// The name without its NUL padding.
    pub fn name(&self) -> &[u8] {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        &self.name[..end]
    }
}

/// What the loader hands the kernel, its address in a1 (a0 is the boot hart's id).
/// It lives in the loader's memory, which the kernel never reuses.
#[repr(C)]
pub struct BootInfo {
    /// BOOT_MAGIC.
    pub magic: u64,
    /// The hart the loader ran on.
    pub hartid: usize,
    /// Physical address of the device tree (as the firmware passed it).
    pub dtb: usize,
    /// The initrd: [initrd_start, initrd_end). The kernel never reuses it.
    pub initrd_start: usize,
    /// End of the initrd (exclusive).
    pub initrd_end: usize,
    /// The loader's own image: [loader_start, loader_end). Never reused either.
    pub loader_start: usize,
    /// End of the loader's image (exclusive), the boot info included.
    pub loader_end: usize,
    /// Index into `entries` of the first program.
    pub first_program: usize,
    /// How many of `entries` are used.
    pub entry_count: usize,
    /// The bundle's entries in the bundle's order.
    pub entries: [BootEntry; MAX_ENTRIES],
}

/// System-call numbers: `ecall` with the number in a7 and the arguments in a0..a4.
/// The result comes back in a0 (a negative value is an `Error`), a second value in a1.
pub mod sys {
    /// log(ptr, len, flags): writes one line (no line ending needed). The first
    /// program's text goes to the UART as it is; any other program's goes to the log
    /// endpoint, under its badge. With [`LOG_NO_END`] in flags the first program's
    /// text goes out without the line ending (a prompt); other programs' flags are
    /// ignored.
    pub const LOG: usize = 1;
    /// log's flag: no line ending after the first program's text.
    pub const LOG_NO_END: usize = 1;
    /// exit(status): ends the calling process; its parent gets an EXIT message.
    pub const EXIT: usize = 2;
    /// time() -> a0 = ticks (low half on rv32), a1 = high half on rv32.
    pub const TIME: usize = 3;
    /// timebase() -> ticks per second.
    pub const TIMEBASE: usize = 4;
    /// random() -> a0, a1: two words from the kernel's generator.
    pub const RANDOM: usize = 5;
    /// yield(): gives up the rest of the time slice.
    pub const YIELD: usize = 6;
    /// sleep(ticks_lo, ticks_hi): sleeps at least that many ticks.
    pub const SLEEP: usize = 7;
    /// spawn(name_ptr, name_len, badge, pages) -> pid: starts the program the bundle
    /// entry names, with that badge and a quota of `pages` pages taken from the
    /// caller's. First program only.
    pub const SPAWN: usize = 8;
    /// power_off(status). First program only.
    pub const POWER_OFF: usize = 9;
    /// recv(msg_ptr): waits for the next `Message` on the log endpoint. First program
    /// only.
    pub const RECV: usize = 10;
    /// done(): tells the log endpoint this program's run is the verdict (a DONE message
    /// under the caller's badge).
    pub const DONE: usize = 11;
    /// log_minted(badge, ptr, len): as log, under a badge the caller mints; the badge
    /// must be at least MINT_MIN.
    pub const LOG_MINTED: usize = 12;
    /// entry_info(name_ptr, name_len) -> a0 = length, a1 = kind.
    pub const ENTRY_INFO: usize = 13;
    /// entry_read(name_ptr, name_len, offset, buf_ptr, buf_len) -> bytes copied.
    pub const ENTRY_READ: usize = 14;
    /// getpid() -> a0 = pid, a1 = badge.
    pub const GETPID: usize = 15;
    /// console_read(buf_ptr, buf_len) -> bytes read from the UART (those waiting now,
    /// 0 when none; it never waits). First program only.
    pub const CONSOLE_READ: usize = 16;
    /// reset(): SBI SRST cold reboot (QEMU under -no-reboot exits). First program only.
    pub const RESET: usize = 17;
    /// disk_info() -> (sectors of 512 bytes, block size); no-entry without a disk.
    pub const DISK_INFO: usize = 18;
    /// disk_read(sector, buf, len) -> len: whole blocks from `sector`, at most
    /// DISK_TRANSFER_MAX bytes.
    pub const DISK_READ: usize = 19;
    /// disk_write(sector, buf, len) -> len: as disk_read, the other way.
    pub const DISK_WRITE: usize = 20;
    /// disk_flush(): the device's cache onto the disk.
    pub const DISK_FLUSH: usize = 21;
    /// net_info() -> the network card's MAC: a0 = bytes 0..3, a1 = bytes 3..6, each
    /// little-endian (24 bits, so a0 never reads as an error); no-entry without a card.
    pub const NET_INFO: usize = 22;
    /// net_send(buf, len) -> len: sends one Ethernet frame (no FCS) of
    /// NET_FRAME_MIN..=NET_FRAME_MAX bytes, and returns once the card took it.
    pub const NET_SEND: usize = 23;
    /// net_recv(buf, len) -> the length of the next received frame copied to `buf`
    /// (`len` at least NET_FRAME_MAX), or 0 when none waits: it never waits.
    pub const NET_RECV: usize = 24;
}

/// The longest Ethernet frame net_send and net_recv move (header and 1500 bytes, no FCS).
pub const NET_FRAME_MAX: usize = 1514;
/// The shortest frame net_send takes: an Ethernet header.
pub const NET_FRAME_MIN: usize = 14;

/// The most bytes one disk_read or disk_write moves.
pub const DISK_TRANSFER_MAX: usize = 64 * 1024;

/// Error codes (a0 = -(code)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(isize)]
pub enum Error {
    /// The caller may not make this call (not the first program, a badge below
    /// MINT_MIN).
    Permission = 1,
    /// A pointer or length that is not the caller's readable (or writable) memory.
    Fault = 2,
    /// No bundle entry of that name (or not of the kind the call needs).
    NoEntry = 3,
    /// The caller's page quota or the kernel's frames ran out.
    NoMemory = 4,
    /// An argument out of range.
    Invalid = 5,
    /// The entry is not an ELF the kernel accepts.
    BadProgram = 6,
    /// No process slot left.
    NoProcess = 7,
    /// No such system call.
    NoSys = 8,
    /// A device (the disk or the network card) refused or failed a request (the
    /// kernel's console names how).
    Io = 9,
}

impl Error {
    /// The value a0 carries for this error.
    pub const fn to_raw(self) -> usize {
        (self as isize).wrapping_neg() as usize
    }

    /// The error a0 carries, if it is one.
    pub fn from_raw(raw: usize) -> Option<Error> {
        let code = (raw as isize).checked_neg()?;
        Some(match code {
            1 => Error::Permission,
            2 => Error::Fault,
            3 => Error::NoEntry,
            4 => Error::NoMemory,
            5 => Error::Invalid,
            6 => Error::BadProgram,
            7 => Error::NoProcess,
            8 => Error::NoSys,
            9 => Error::Io,
            _ => return None,
        })
    }

    /// A short name for lines.
    pub const fn name(self) -> &'static str {
        match self {
            Error::Permission => "permission",
            Error::Fault => "fault",
            Error::NoEntry => "no-entry",
            Error::NoMemory => "no-memory",
            Error::Invalid => "invalid",
            Error::BadProgram => "bad-program",
            Error::NoProcess => "no-process",
            Error::NoSys => "no-sys",
            Error::Io => "io",
        }
    }
}

/// The largest text one log call carries; longer text is cut.
pub const LOG_MAX: usize = 200;

/// Message kinds on the log endpoint.
pub mod msg {
    /// A line a program wrote (`data[..len]`), under `badge`.
    pub const LOG: u32 = 1;
    /// A program called done().
    pub const DONE: u32 = 2;
    /// A child exited: `pid`, `badge`, `status`.
    pub const EXIT: u32 = 3;
    /// A child faulted: `pid`, `badge`, `status` = scause, `addr` = stval, `pc` = sepc.
    pub const FAULT: u32 = 4;
}

/// What `recv` writes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Message {
    /// One of `msg::*`.
    pub kind: u32,
    /// The sender's badge, as the kernel knows it.
    pub badge: u32,
    /// The sender's (or the child's) PID.
    pub pid: u32,
    /// Exit status, or scause for a fault.
    pub status: u32,
    /// stval for a fault.
    pub addr: usize,
    /// sepc for a fault.
    pub pc: usize,
    /// Used bytes of `data`.
    pub len: u32,
    /// Line text.
    pub data: [u8; LOG_MAX],
}

impl Message {
    /// An empty message.
    pub const EMPTY: Message =
        Message { kind: 0, badge: 0, pid: 0, status: 0, addr: 0, pc: 0, len: 0, data: [0; LOG_MAX] };
}

/// The badge rules. The first program has badge FIRST_BADGE; it starts the others with
/// their place in the case (FIRST_PLACE..=LAST_PLACE) as badge; a badge a program
/// mints is MINT_MIN or more, so it never prints as a place.
pub const FIRST_BADGE: u32 = 1;
/// The first place a started program gets.
pub const FIRST_PLACE: u32 = 2;
/// The last place.
pub const LAST_PLACE: u32 = 16;
/// The smallest badge a program may mint.
pub const MINT_MIN: u32 = 0x100;

/// Whether the log server prints this badge as `[pid N]` (true) or `[badge N]`.
pub const fn is_place(badge: u32) -> bool {
    badge < MINT_MIN
}

/// Most processes alive at once, the first program's included.
pub const MAX_PROCS: usize = 17;
/// Pages the first program gets for itself and everything it starts.
pub const FIRST_QUOTA_PAGES: usize = 2048;
/// Exit status of the power-off for a refusal (the SBI "system failure" reason).
pub const STATUS_REFUSED: u16 = 255;

/// What the bench reads in a dump of the guest's RAM (`memory = true`, docs/ram.md): the
/// paint of every program's stack and its heap record. Any guest may write the same
/// words; the bench trusts neither more than the guest that wrote them.
pub mod paint {
    /// A program's tag: FNV-1a 32 of its bundle entry name. The kernel paints the stack
    /// with it and hands it to the program (a2 at start), whose runtime writes it into
    /// the heap record; the bench computes it from the names it packed.
    pub const fn tag(name: &[u8]) -> u32 {
        let mut hash = 0x811c_9dc5u32;
        let mut i = 0;
        while i < name.len() {
            hash = (hash ^ name[i] as u32).wrapping_mul(0x0100_0193);
            i += 1;
        }
        hash
    }

    /// Bits 31..24 of every stack unit.
    pub const STACK_MARK: u64 = 0xc5;
    /// The most pages a painted stack may have: its unit index fits 16 bits.
    pub const STACK_PAGES_MAX: usize = 128;
    /// Eight-byte units in a page: a unit's index modulo this is its word offset in
    /// whatever physical page holds it.
    pub const UNITS_PER_PAGE: usize = 512;

    /// The word painted at unit `index` (counted from the stack's lowest address, eight
    /// bytes each) of a stack of `pages` pages: the tag in bits 63..32, STACK_MARK in
    /// 31..24, the pages in 23..16 and the index in 15..0. Stored little-endian.
    pub const fn stack_word(tag: u32, pages: usize, index: usize) -> u64 {
        ((tag as u64) << 32) | (STACK_MARK << 24) | (((pages as u64) & 0xff) << 16) | (index as u64 & 0xffff)
    }

    /// A stack unit read back: (tag, pages, index), or None when the mark is not there.
    pub const fn stack_unit(word: u64) -> Option<(u32, usize, usize)> {
        if (word >> 24) & 0xff != STACK_MARK {
            return None;
        }
        Some(((word >> 32) as u32, ((word >> 16) & 0xff) as usize, (word & 0xffff) as usize))
    }

    /// The heap record's first word, "TBHEAPR1" as little-endian bytes. The runtime
    /// builds it at run time from two halves, so no program file holds it.
    pub const HEAP_MAGIC: u64 = u64::from_le_bytes(*b"TBHEAPR1");
    /// The half the runtime XORs with HEAP_MAGIC_B to make HEAP_MAGIC.
    pub const HEAP_MAGIC_A: u64 = 0x5a5a_5a5a_5a5a_5a5a;
    /// The other half.
    pub const HEAP_MAGIC_B: u64 = HEAP_MAGIC ^ HEAP_MAGIC_A;
    /// The record's size and alignment in bytes.
    pub const HEAP_RECORD_LEN: usize = 32;

    /// The heap record, 32 bytes aligned to 32 (so it never crosses a page): HEAP_MAGIC,
    /// the program's tag, its heap's cap and the most pages it has held at once, and
    /// `!HEAP_MAGIC` to close it. All fields little-endian.
    #[repr(C, align(32))]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct HeapRecord {
        /// HEAP_MAGIC once written.
        pub magic: u64,
        /// The program's tag.
        pub tag: u32,
        /// Pages the heap may hold.
        pub cap: u32,
        /// The most pages it has held at once.
        pub peak: u32,
        /// Zero.
        pub zero: u32,
        /// `!HEAP_MAGIC` once written.
        pub end: u64,
    }

    impl HeapRecord {
        /// Nothing written yet (the record in the program's file).
        pub const EMPTY: HeapRecord = HeapRecord { magic: 0, tag: 0, cap: 0, peak: 0, zero: 0, end: 0 };

        /// Reads a record from 32 bytes; None when its magic words are not there.
        pub fn read(bytes: &[u8; HEAP_RECORD_LEN]) -> Option<HeapRecord> {
            let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
            let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"));
            let record = HeapRecord {
                magic: word(0),
                tag: half(8),
                cap: half(12),
                peak: half(16),
                zero: half(20),
                end: word(24),
            };
            (record.magic == HEAP_MAGIC && record.end == !HEAP_MAGIC).then_some(record)
        }
    }
}
