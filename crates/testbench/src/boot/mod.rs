//! One boot: QEMU's machine, the plan of what judges it, and the stages that run it.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`BootSpec`] (the [`Machine`], the [`Plan`], the boot's place), [`Judged`], [`Trouble`] |
//! | `machine.rs` | [`Machine`]: QEMU's command line as values, and the device tree dumped and edited |
//! | `media.rs` | a disk image and a CD the firmware boots (formats from headers, drives in snapshot mode), UEFI's files per width |
//! | `stages.rs` | the boot as stages: launch, the loop over one channel of events, the pass's checks, stop, collect |
//! | `event.rs` | [`Event`], the loop's one kind of event (a leaf) |
//! | `crash_watch.rs` | the console's crash reports read as it arrives: a fatal one ends the boot |
//! | `part.rs` | [`Part`], [`PartSpec`] and the [`Phase`]s a part acts at; [`Evidence`] and [`Broken`] |
//! | `live_parts.rs` | the parts of one running boot: the phase machine, who holds the verdict, triggers, finish |
//! | `gdb.rs` | `--gdb`: the gdbstub's socket in the run's private directory (checked), the attach command, the snapshot overlay of a replay |
//! | `recording.rs` | what a recording was made of (`replay.guest`), and a replay refused with other files |
//! | `slot.rs` | [`Slot`]: the fixed virtio-mmio transports and PCI device numbers |
//! | `parts/` | every piece of evidence, one file each, and `parts::for_case`, the list |
//!
//! A new kind of evidence is a new file in `parts/` implementing [`PartSpec`] and
//! [`Part`], and one line in `parts::for_case`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use testbench_judge::Verdict;

pub mod crash_watch;
pub mod event;
pub mod gdb;
mod live_parts;
pub mod machine;
pub mod media;
pub mod part;
pub mod parts;
pub mod recording;
pub mod slot;
mod stages;
pub mod stamps;

pub use event::{Event, PartEvent};
pub use machine::Machine;
pub use part::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Live, Part, PartSpec, Passing, Phase};
pub use parts::console::MARKS_FILE;
pub use slot::Slot;

use crate::qemu::qmp::QmpDir;

/// Everything one boot needs; built by the runner.
#[derive(Clone)]
pub struct BootSpec {
    /// What QEMU is asked to be.
    pub machine: Machine,
    /// What judges the boot.
    pub plan: Plan,
    /// The boot's own directory: console.log, qemu-stderr.log, command-line.
    pub dir: PathBuf,
    /// For a case's second boot: the first boot's directory (a kept disk is there).
    pub first_boot: Option<PathBuf>,
    /// The run's private directory for QMP sockets.
    pub qmp_dir: Arc<QmpDir>,
    /// `--gdb`: the guest waits for a debugger, at most this long at each stop (gdb.rs).
    pub gdb: Option<Duration>,
}

/// What judges one boot: the console's judge, the case's other parts, the deadline.
#[derive(Clone)]
pub struct Plan {
    pub judge: testbench_judge::Config,
    /// Every other piece of evidence, in the order they judge (parts::for_case).
    pub parts: Vec<Arc<dyn PartSpec>>,
    /// The boot's deadline, from the guest's start.
    pub timeout: Duration,
    /// How the console is read for crashes: the rules (also for the crash a failing
    /// boot names, crate::crash) and the kinds that end the boot (crash_watch.rs).
    pub crash: crash_watch::CrashPlan,
    /// The kernel's ELF the crash's frames are symbolized against, when one is known.
    pub crash_elf: Option<crate::crash::KernelElf>,
}

/// How one boot went: the verdict, what the judge's capture patterns took, and the
/// notes its parts left for the case's result.
pub struct Judged {
    pub verdict: Verdict,
    pub captures: Vec<Option<String>>,
    pub notes: Vec<String>,
}

/// The bench's own trouble during a boot: not the guest's failure, so the run says it
/// and exits 3 (docs/running.md, "Exit status").
#[derive(Debug, thiserror::Error)]
pub enum Trouble {
    /// A file of the boot's own could not be made or written.
    #[error("failed to {doing} {}: {source}", path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// QMP could not be listened on, or QEMU neither connected nor exited.
    #[error("{0}")]
    Qmp(String),
    /// The boot could not be put under the debugger (`--gdb`).
    #[error(transparent)]
    Gdb(#[from] gdb::GdbError),
    /// QEMU could not be started.
    #[error("failed to start QEMU: {0}")]
    Qemu(String),
    /// Waiting for QEMU's exit failed.
    #[error("failed to wait for QEMU: {0}")]
    Wait(#[source] std::io::Error),
    /// QEMU closed its console but did not exit.
    #[error("QEMU closed the console but had not exited {0:?} later; killed it")]
    NoExit(Duration),
}

impl Trouble {
    pub fn file(doing: &'static str, path: &std::path::Path, source: std::io::Error) -> Trouble {
        Trouble::File { doing, path: path.to_path_buf(), source }
    }
}

impl BootSpec {
    /// Boot once, through every stage (stages.rs). Call from the thread that will wait
    /// for QEMU (see `process`).
    pub fn run(&self, root: &std::path::Path) -> Result<Judged, Trouble> {
        stages::run(self, root)
    }
}
