//! The one kind of event on a boot's one channel (stages.rs): a leaf, so that the loop
//! and every part can name it without naming each other.

use testbench_console::ConsoleEvent;

use crate::qemu::qmp::QmpEvent;

/// One event of a boot, on the boot's one channel.
pub enum Event {
    /// The console's bytes, or its end.
    Console(ConsoleEvent),
    /// What QEMU said over QMP on its own.
    Qmp(QmpEvent),
    /// A part's thread reporting.
    Part(PartEvent),
    /// The stamp plugin's records: the console's bytes at the guest's instruction counts,
    /// and ticks (stamps.rs).
    Stamps(Vec<testbench_stamp::Record>),
    /// The stamp plugin's socket closed; `connected`: false when the plugin never
    /// connected by QEMU's start's deadline.
    StampsEnd { connected: bool },
}

/// What a part's thread reports to the boot's loop.
#[derive(Debug)]
pub enum PartEvent {
    /// Something for the case's result (a dial that echoed after 1.2 s).
    Note(String),
    /// The part's check failed: the boot ends with this failure at once.
    Failed(String),
    /// A part that holds the verdict (`Part::holds_from`) is done with it (its sessions
    /// ended well).
    Released,
}
