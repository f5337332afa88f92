//! The reference kernel's own files, compiled for the host as they are, through `#[path]`
//! (docs/host-fuzzing.md, "The kernel's files on the host"): not a copy, not a model. They
//! are built in `kernel-host/` (a crate that stands where the kernel's root stands, so
//! their `crate::` paths find the stubs beside them); here is the memory they run on.
//!
//! - [`mm`]: `guest/kernel/src/mm.rs`, the frame pool and the page tables. It reaches
//!   nothing outside but `abi`'s constants and physical memory, which it reads and
//!   writes through raw pointers at physical addresses (the kernel runs with paging off).
//!   On the host those addresses are [`ram`]'s: an arena mapped where the guest's RAM
//!   would be, so a page-table frame at 0x8100_0000 in the guest is one at 0x8100_0000
//!   here. The one seam in the file: its table format follows `target_pointer_width`
//!   (Sv39 on 64 bits), not `target_arch`, so the host's build walks Sv39 tables.
//!   `satp` (the page-table register's value) reaches no register: the world reads the
//!   root it names.
//! - [`proc`]: `guest/kernel/src/proc.rs`, the processes, system calls and scheduler. Its
//!   one seam: the trap's entry glue (`trap_from_user`, called by assembly) is split from
//!   the trap's handling (`take_trap`), which the world calls; the CSR reads and `wfi` are
//!   trap.rs's (`trap::cause`, `trap::wait_for_interrupt`), which kernel-host answers.

pub use kernel_host::{mm, proc};

/// Physical memory: an arena the fuzzer's world owns, at the guest's own physical
/// addresses, mapped once in the runner before it forks (each child writes its own
/// copy-on-write pages, so no input sees another's).
pub mod ram {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Where the guest's RAM starts (QEMU virt): the arena's first byte.
    pub const BASE: usize = 0x8000_0000;
    /// The arena's size: the kernel's region (up to `abi::KERNEL_END`, 16 MiB) and 16 MiB
    /// of frames above it. Address space only (`MAP_NORESERVE`): a page is made when a
    /// run first writes it.
    pub const SIZE: usize = 32 << 20;
    /// One past the arena's last byte.
    pub const END: usize = BASE + SIZE;

    static MAPPED: AtomicBool = AtomicBool::new(false);

    /// Maps the arena at [BASE, END), once. Refuses, naming the range and the system's
    /// error, when something of the process already lies there (`MAP_FIXED_NOREPLACE`:
    /// nothing is replaced).
    pub fn map() -> Result<(), String> {
        if MAPPED.load(Ordering::SeqCst) {
            return Ok(());
        }
        // SAFETY: an anonymous private mapping at a fixed address that must be free
        // (MAP_FIXED_NOREPLACE fails instead of replacing anything of ours).
        let at = unsafe {
            libc::mmap(
                BASE as *mut libc::c_void,
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED || at as usize != BASE {
            let error = std::io::Error::last_os_error();
            return Err(format!(
                "cannot map the kernel's physical memory arena at {BASE:#x}..{END:#x} (the guest's RAM addresses): {error}"
            ));
        }
        MAPPED.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Whether [`map`] has mapped the arena in this process (or the one it forked from).
    pub fn mapped() -> bool {
        MAPPED.load(Ordering::SeqCst)
    }
}
