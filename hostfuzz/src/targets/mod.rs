//! The targets: each a generator over the decisions and the guest code it drives.

pub mod bundle;
pub mod canary;
pub mod elf;
pub mod fdt;
pub mod isolation;
pub mod kernel_mm;
pub mod kernel_syscalls;
pub mod network;
pub mod programs;
pub mod rules;
pub mod store;
pub mod timers;
pub mod virtio;
pub mod virtio_net;

use crate::{Decisions, Finding};

/// A target's entry point. A panic inside it is a finding too.
pub type RunFn = fn(&mut Decisions) -> Result<(), Finding>;

/// A named target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line for `--list`.
    pub about: &'static str,
    /// Whether the gate (no arguments) runs it; the canary is left out, as it must find.
    pub gate: bool,
    /// One run.
    pub run: RunFn,
}

/// Every target, in the order the gate runs them.
pub const TARGETS: &[Target] = &[
    Target { name: "fdt", about: "guest/fdt: generated device trees, rarely corrupted", gate: true, run: fdt::run },
    Target {
        name: "bundle",
        about: "guest/bundle: signed bundles changed after signing, or re-signed",
        gate: true,
        run: bundle::run,
    },
    Target {
        name: "bundle-format",
        about: "guest/bundle: the same, signed with the fuzzing stand-in instead of Ed25519 (campaigns)",
        gate: true,
        run: bundle::run_format,
    },
    Target { name: "elf", about: "guest/elf: built images and corrupted fixtures", gate: true, run: elf::run },
    Target {
        name: "programs",
        about: "guest/listing: the log server's programs listings, now and then damaged",
        gate: true,
        run: programs::run,
    },
    Target {
        name: "timers",
        about: "the machine: guest/ksync's lock and timer queue under 2-4 tasks and a timer interrupt",
        gate: true,
        run: timers::run,
    },
    Target {
        name: "virtio",
        about: "guest/virtio: the virtio-blk driver against a hostile virtio-mmio block device",
        gate: true,
        run: virtio::run,
    },
    Target {
        name: "net",
        about:
            "guest/net: the network stack in a world of a lossy channel, a lying DHCP server and a recording TCP peer",
        gate: true,
        run: network::run,
    },
    Target {
        name: "virtio-net",
        about: "guest/virtio: the virtio-net driver against a hostile virtio-mmio network card",
        gate: true,
        run: virtio_net::run,
    },
    Target {
        name: "store",
        about: "guest/store: the record store on a disk that loses unflushed writes, fails requests and loses power",
        gate: true,
        run: store::run,
    },
    Target {
        name: "kernel-mm",
        about: "guest/kernel/src/mm.rs as compiled for the guest: frames and page tables against a shadow map",
        gate: true,
        run: kernel_mm::run,
    },
    Target {
        name: "kernel-syscalls",
        about: "guest/kernel/src/proc.rs as compiled for the guest: hostile system calls against each program's memory",
        gate: true,
        run: kernel_syscalls::run,
    },
    Target { name: "canary", about: "must always find: proves findings are reported", gate: false, run: canary::run },
    Target {
        name: "machine-rules",
        about: "must always find: each run breaks one kernel rule on the machine",
        gate: false,
        run: rules::run,
    },
    Target {
        name: "isolation",
        about: "must not find: a static one run sets never reaches the next (the fork per input)",
        gate: false,
        run: isolation::run,
    },
];

/// What the targets do once, in the runner before it forks: its children inherit it
/// instead of each doing it again (the bundle target's keys). Called by every way of
/// running an input.
pub fn prepare() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        bundle::prepare();
        // The kernel's physical memory (src/kernel.rs): without it the `kernel-mm`
        // target's frames would be nobody's addresses, so nothing is run.
        if let Err(e) = crate::kernel::ram::map() {
            eprintln!("hostfuzz: {e}");
            std::process::exit(2);
        }
    });
}

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
