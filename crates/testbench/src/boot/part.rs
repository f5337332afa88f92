//! What a piece of evidence is to a boot: a [`Part`], and the [`Phase`]s it acts at.
//!
//! A case's parts are planned once ([`PartSpec`], in the boot's plan) and attached afresh
//! to every boot ([`PartSpec::attach`]): the attachment makes what the boot needs in the
//! boot's directory (a disk image, a capture file's place, host ports), before both the
//! device-tree dump and the boot, and gives QEMU's arguments, the files it leaves and the
//! live [`Part`]s that take part in the boot (stages.rs):
//!
//! 1. as the boot moves through its phases ([`Part::on`]: the guest started, every expect
//!    met, the parts that held the verdict released it), and when a console line fires one
//!    of its triggers ([`Part::triggered`]); a part that waits does so on a thread of its
//!    own and reports by [`PartEvent`]s;
//! 2. once the console's verdict is a pass, while QEMU still has the guest
//!    ([`Part::on_pass`]: the RAM is read there);
//! 3. once QEMU has ended ([`Part::finish`]): its own evidence, judged from outside the
//!    guest, a [`Broken`] finding failing a boot that passed so far.
//!
//! Adding a kind of evidence is one file in `parts/` and one line in `parts::for_case`.

use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use testbench_case::Arch;
use testbench_judge::Pattern;

use super::event::Event;
use super::slot::MODERN_TRANSPORT;
use crate::qemu::qmp::QmpClient;

/// The moments of a running boot a part may act at, in the order they come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// QEMU runs the guest, on the QMP connection the bench holds.
    Started,
    /// Every expect of the console has matched (called once).
    ExpectsMet,
    /// Every part that holds the verdict from [`Phase::ExpectsMet`] or earlier has
    /// released it (called once, after `ExpectsMet`): the window at rest starts here.
    Released,
}

/// Where one boot takes place, for a part attaching to it.
pub struct BootPlace<'a> {
    /// The boot's width: where its devices' slots are.
    pub arch: Arch,
    /// The workspace root (a case's paths are relative to it).
    pub root: &'a Path,
    /// The boot's own directory (created before any part attaches).
    pub dir: &'a Path,
    /// The first boot's directory, when this is a case's second boot: a kept disk is the
    /// one the first boot left there.
    pub first_boot: Option<&'a Path>,
    /// QEMU records or replays this boot (record/replay): each disk goes through QEMU's
    /// `blkreplay` driver, so that its requests are in the recording. (A case with a
    /// network card is not recorded: `runner/plan.rs`'s `rr_for`.)
    pub recorded: bool,
}

/// One piece of evidence of a case, planned once, attached to each boot.
pub trait PartSpec: Send + Sync {
    /// What the part is, for messages and `devices.log` (`[disk]`, `[net]`, `ram_forbid`).
    fn name(&self) -> String;

    /// Make what this boot needs and say how QEMU attaches it. An error is the bench's
    /// trouble or a refusal (a kept disk that is not what a fresh one would be) and
    /// ends the boot before QEMU starts. Each part's error is its own typed enum, boxed:
    /// a new part brings its own without a change here.
    fn attach(&self, place: &BootPlace) -> Result<Attached, AttachError>;
}

/// A part's own error from [`PartSpec::attach`] (each part's enum, boxed).
pub type AttachError = Box<dyn std::error::Error + Send + Sync>;

/// Why the parts could not be attached to a boot: the boot fails before QEMU starts, with
/// these words.
#[derive(Debug, thiserror::Error)]
pub enum AttachAllError {
    /// One part's error, under the part's name.
    #[error("{part}: {source}")]
    Part { part: String, source: AttachError },
    /// `devices.log` could not be written.
    #[error("failed to write {}: {source}", .path.display())]
    Log { path: PathBuf, source: std::io::Error },
}

/// A part attached to one boot.
#[derive(Default)]
pub struct Attached {
    /// QEMU's arguments for it (its slot named).
    pub args: Vec<String>,
    /// The files it leaves in the boot's directory, named in the boot's `devices.log`.
    pub files: Vec<PathBuf>,
    /// What was made for this boot (a disk's layout, a flipped bit, the host ports), for
    /// `devices.log`; a part that logs nothing is not named there.
    pub log: Vec<String>,
    /// Its live parts in the boot (the network's, and its sessions').
    pub parts: Vec<Box<dyn Part>>,
}

/// What a part is given while the guest runs.
pub struct Live {
    /// When the guest started (after QMP's `cont`): the time every note counts from.
    pub start: Instant,
    /// The boot's deadline.
    pub deadline: Instant,
    /// The boot's channel of events: a part's threads send [`Event::Part`] with a
    /// [`PartEvent`](super::PartEvent).
    pub events: SyncSender<Event>,
    /// Set when the boot ends: a part's threads stop waiting.
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    /// QEMU's QMP connection, for commands (the guest runs).
    pub qmp: Arc<QmpClient>,
    /// QEMU's process id (its CPU time is in `/proc/<pid>/stat`).
    pub pid: u32,
}

/// What a part is given once the console's verdict is a pass and QEMU still has the guest.
pub struct Passing<'a> {
    /// The boot's directory (a RAM dump is written there).
    pub dir: &'a Path,
    /// QEMU's QMP connection; none when QEMU never connected (it exited first).
    pub qmp: Option<&'a QmpClient>,
    /// The boot's deadline.
    pub deadline: Instant,
}

/// What a part is given once QEMU has ended.
pub struct Ended<'a> {
    /// The boot's directory; its console log is whole.
    pub dir: &'a Path,
    /// The workspace root.
    pub root: &'a Path,
    /// Whether the boot has passed so far (the console, and every part before this one).
    pub passed: bool,
    /// Why it failed, when it has failed so far: the verdict's reason.
    pub failure: Option<&'a str>,
}

/// What a part saw that holds: the notes the case's result prints.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    pub notes: Vec<String>,
}

impl Evidence {
    pub fn notes(notes: Vec<String>) -> Evidence {
        Evidence { notes }
    }

    pub fn note(note: impl Into<String>) -> Evidence {
        Evidence { notes: vec![note.into()] }
    }
}

/// What a part saw that fails the boot: the reason, in words.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Broken(pub String);

impl From<String> for Broken {
    fn from(message: String) -> Broken {
        Broken(message)
    }
}

/// One part's role in one boot. Every method runs on the boot's loop's thread.
pub trait Part: Send {
    /// Console patterns whose first match the part wants to hear of ([`Part::triggered`]).
    fn triggers(&self) -> Vec<Pattern> {
        Vec::new()
    }

    /// The phase from which the verdict waits for this part's [`PartEvent::Released`] as
    /// well as for the console: sessions hold from [`Phase::ExpectsMet`], the window at
    /// rest from [`Phase::Released`]. None: the part never holds it.
    fn holds_from(&self) -> Option<Phase> {
        None
    }

    /// The boot reached `phase` (each phase once, in order).
    fn on(&mut self, phase: Phase, live: &Live) {
        let _ = (phase, live);
    }

    /// Trigger `which` (an index into [`Part::triggers`]) matched a console line.
    fn triggered(&mut self, which: usize, live: &Live) {
        let _ = (which, live);
    }

    /// The console's verdict is a pass (and every part before this one passed here too),
    /// QEMU still has the guest: a check of the machine itself (its RAM).
    fn on_pass(&mut self, passing: &Passing) -> Result<Evidence, Broken> {
        let _ = passing;
        Ok(Evidence::default())
    }

    /// QEMU has ended: the part's own evidence, from what it saw outside the guest. A
    /// [`Broken`] fails a boot that passed so far; a part on a boot that already failed
    /// gives what it found as notes.
    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken>;
}

/// The parts attached to one boot, with their arguments in slot order.
pub struct AttachedSet {
    pub args: Vec<String>,
    pub files: Vec<PathBuf>,
    pub parts: Vec<Box<dyn Part>>,
}

/// The file in a boot's directory that says what each part made for that boot.
pub const DEVICES_LOG: &str = "devices.log";

/// Attach every part to one boot, and write `devices.log` (when a part logs anything).
/// The modern-transport option comes first when any part gives QEMU an argument.
pub fn attach_all(specs: &[Arc<dyn PartSpec>], place: &BootPlace) -> Result<AttachedSet, AttachAllError> {
    let mut set = AttachedSet { args: Vec::new(), files: Vec::new(), parts: Vec::new() };
    let mut log = String::new();
    for spec in specs {
        let attached = spec.attach(place).map_err(|source| AttachAllError::Part { part: spec.name(), source })?;
        if !attached.log.is_empty() || !attached.files.is_empty() {
            log.push_str(&format!("{}:\n", spec.name()));
        }
        for line in &attached.log {
            log.push_str(&format!("  {line}\n"));
        }
        for file in &attached.files {
            log.push_str(&format!("  file: {}\n", file.display()));
        }
        set.args.extend(attached.args);
        set.files.extend(attached.files);
        set.parts.extend(attached.parts);
    }
    // The transports are modern only where a device sits on one.
    if !set.args.is_empty() && place.arch.virtio_mmio() {
        set.args.splice(0..0, MODERN_TRANSPORT.map(String::from));
    }
    if !log.is_empty() {
        let path = place.dir.join(DEVICES_LOG);
        std::fs::write(&path, log).map_err(|source| AttachAllError::Log { path: path.clone(), source })?;
    }
    Ok(set)
}
