//! The reference kernel's files compiled for the host as they are, through `#[path]`
//! (docs/host-fuzzing.md, "The kernel's files on the host"): not a copy, not a model.
//! This crate stands where the kernel's `main.rs` stands, so `crate::mm`,
//! `crate::console`, ... in those files find the modules here. Two are the kernel's own
//! files ([`mm`], [`proc`]); the rest answer, for the fuzzer's world ([`world`]), every
//! name the two reach that the host has no hardware for: the console and the clock, the
//! firmware's calls, the hart's trap block and its way into user mode, the devices.

use std::sync::RwLock;

/// `guest/kernel/src/mm.rs`: the frame pool and the page tables. Its physical addresses
/// are the world's arena (hostfuzz's `kernel::ram`, at the guest's RAM addresses).
// The kernel's API as the kernel has it (the guest's clippy judges it).
#[allow(clippy::new_without_default, clippy::result_unit_err)]
#[path = "../../../guest/kernel/src/mm.rs"]
pub mod mm;

/// `guest/kernel/src/proc.rs`: processes, the system calls and the scheduler.
#[path = "../../../guest/kernel/src/proc.rs"]
pub mod proc;

/// What the world answers for the hardware (installed by the world for a run).
pub trait Machine: Sync {
    /// The hart runs its process in user mode until the process's next trap: the world
    /// sets `hart.frame` as the process left it and returns (scause, stval). Returns only
    /// with a trap to take; the world leaves the run by unwinding (see [`world`]).
    fn user(&self, hart: &mut trap::Hart, satp: usize) -> (usize, usize);
    /// The trap entry (guest: trap.rs's assembly calling `trap_from_user`): takes the
    /// trap just made (`proc::take_trap`) and schedules again (`proc::run`). The world
    /// calls them, so that this crate's `trap` reaches no `proc`, as the guest's does not.
    fn trap_entry(&self, hart: &mut trap::Hart) -> !;
    /// The hart waits for an interrupt (nothing to run).
    fn idle(&self);
    /// The machine powers off with `status`.
    fn power_off(&self, status: u16) -> !;
    /// The firmware's cold reboot.
    fn cold_reboot(&self);
    /// Bytes to the console.
    fn put_bytes(&self, bytes: &[u8]);
    /// A byte waiting on the console, if any.
    fn get_byte(&self) -> Option<u8>;
    /// The clock, in ticks.
    fn now(&self) -> u64;
    /// The hart's timer, armed for `deadline`.
    fn set_timer(&self, deadline: u64);
}

/// The world installed for the run under way.
pub mod world {
    use super::{Machine, RwLock};

    static MACHINE: RwLock<Option<&'static dyn Machine>> = RwLock::new(None);

    /// Installs `machine` for the runs to come (the kernel's hardware calls reach it).
    pub fn install(machine: &'static dyn Machine) {
        *MACHINE.write().unwrap_or_else(|e| e.into_inner()) = Some(machine);
    }

    /// The machine installed; a kernel call without one is the world's bug.
    pub fn machine() -> &'static dyn Machine {
        MACHINE.read().unwrap_or_else(|e| e.into_inner()).expect("no machine installed (kernel_host::world::install)")
    }
}

/// The kernel's console (guest: the UART, the clock, the finisher).
pub mod console {
    use crate::world::machine;

    /// Writes bytes to the console.
    pub fn put_bytes(bytes: &[u8]) {
        machine().put_bytes(bytes);
    }

    /// A byte waiting on the console, if any.
    pub fn get_byte() -> Option<u8> {
        machine().get_byte()
    }

    /// The clock, in ticks.
    pub fn now() -> u64 {
        machine().now()
    }

    /// Powers the machine off with `status`.
    pub fn power_off(status: u16) -> ! {
        machine().power_off(status)
    }

    /// `core::fmt` sink for the console.
    pub struct Uart;

    impl core::fmt::Write for Uart {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            put_bytes(s.as_bytes());
            Ok(())
        }
    }
}

/// One line on the console, as the kernel's own macro prints it.
#[macro_export]
macro_rules! kprintln {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = write!($crate::console::Uart, "kernel: ");
        let _ = write!($crate::console::Uart, $($arg)*);
        $crate::console::put_bytes(b"\r\n");
    }};
}

/// The firmware's calls.
pub mod sbi {
    use crate::world::machine;

    /// Arms the hart's timer for `deadline`.
    pub fn set_timer(deadline: u64) {
        machine().set_timer(deadline);
    }

    /// The cold reboot.
    pub fn cold_reboot() {
        machine().cold_reboot();
    }
}

/// The hart's trap block and its way into user mode (guest: trap.rs's assembly).
pub mod trap {
    use std::cell::Cell;

    /// Registers in a frame: pc in slot 0, then x1..x31.
    pub const FRAME_WORDS: usize = 32;
    /// Nothing runs on the hart.
    pub const NONE: usize = usize::MAX;

    /// One hart's trap block, as trap.rs lays it out.
    #[repr(C)]
    pub struct Hart {
        /// The running process's registers.
        pub frame: [usize; FRAME_WORDS],
        /// Top of this hart's kernel stack (unused on the host).
        pub kstack: usize,
        /// This hart's id.
        pub hartid: usize,
        /// Index of the process running here, or NONE.
        pub current: usize,
    }

    impl Hart {
        /// Hart `hartid`, running nothing.
        pub const fn new(hartid: usize) -> Hart {
            Hart { frame: [0; FRAME_WORDS], kstack: 0, hartid, current: NONE }
        }
    }

    thread_local! {
        /// The trap being taken: (scause, stval, sstatus), as the CSRs would say.
        static CAUSE: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
    }

    /// The trap being taken: (scause, stval, sstatus). sstatus.SPP is 0: from user mode.
    pub fn cause() -> (usize, usize, usize) {
        CAUSE.with(Cell::get)
    }

    /// Waits for the next interrupt.
    pub fn wait_for_interrupt() {
        crate::world::machine().idle();
    }

    /// Runs the hart's process in user mode under `satp` until its next trap, then enters
    /// the kernel at the trap entry, as trap.rs's `user_return` and `trap_entry` do.
    ///
    /// # Safety
    /// As the kernel's: the hart's block and its process's context and table.
    pub unsafe fn enter_user(hart: &mut Hart, satp: usize) -> ! {
        let machine = crate::world::machine();
        let (scause, stval) = machine.user(hart, satp);
        CAUSE.with(|c| c.set((scause, stval, 0)));
        machine.trap_entry(hart)
    }
}

/// The disk (guest: virtio-blk on slot 0): none in this world, so no value exists.
pub mod disk {
    use abi::Error;

    /// No disk: the type has no value, so every disk call refuses with NoEntry first.
    pub enum Disk {}

    impl Disk {
        /// (sectors, block size).
        pub fn info(&self) -> (usize, usize) {
            match *self {}
        }
        /// Whether a transfer of `len` bytes from `sector` is allowed.
        pub fn check(&self, _sector: usize, _len: usize) -> Result<(), Error> {
            match *self {}
        }
        /// The block size.
        pub fn block(&self) -> usize {
            match *self {}
        }
        /// Reads a block.
        pub fn read(&mut self, _sector: usize, _out: &mut [u8]) -> Result<(), Error> {
            match *self {}
        }
        /// Writes a block.
        pub fn write(&mut self, _sector: usize, _data: &[u8]) -> Result<(), Error> {
            match *self {}
        }
        /// Flushes.
        pub fn flush(&mut self) -> Result<(), Error> {
            match *self {}
        }
    }
}

/// The network card (guest: virtio-net on slot 2): none in this world.
pub mod net {
    use abi::Error;

    /// No card: the type has no value, so every network call refuses with NoEntry first.
    pub enum Card {}

    impl Card {
        /// (MAC high, MAC low).
        pub fn info(&self) -> (usize, usize) {
            match *self {}
        }
        /// The buffer a frame of `len` bytes is copied into.
        pub fn send_buffer(&mut self, _len: usize) -> Result<&mut [u8], Error> {
            match *self {}
        }
        /// Sends the buffer's first `len` bytes.
        pub fn send(&mut self, _len: usize) -> Result<(), Error> {
            match *self {}
        }
        /// The next frame received, if any.
        pub fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
            match *self {}
        }
    }
}
