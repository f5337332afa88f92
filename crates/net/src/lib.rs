//! The bench's side of a guest's network, judged from outside the guest.
//!
//! A `[net]` case gives the guest a virtio-net card on QEMU's user-mode network (slirp)
//! with `restrict=on` (the guest reaches nothing outside QEMU) and `ipv6=off`. This crate
//! holds what the bench does around that card; it spawns nothing, prints nothing, and
//! every wait has a deadline that names what it waited for.
//!
//! | module | holds | proves | cannot prove |
//! |---|---|---|---|
//! | [`ports`] | host ports from a lease (`TESTBENCH_PORTS=lo-hi`) or the OS, the `-netdev` argument | two boots on one lease never share a port | that no stranger takes a port between the OS's pick and QEMU's bind (QEMU then fails loudly) |
//! | [`peer`] | the helper QEMU runs per guest connection to a peer: record, then echo | a record exists for every connection handed to it, before any echo | a connection slirp could not hand over (the capture's SYNs witness those) |
//! | [`dial`] | a TCP connection in through a forward, retried until one echoes | something behind the forward echoed `expect` | which program in the guest echoed |
//! | [`poke`] | one UDP datagram in, once | it left the bench whole | that the guest read it |
//! | [`capture`] | `filter-dump`'s pcap read fail-closed; the rules on the guest's frames | what the guest put on its card, before slirp touched it | frames a guest disguised with slirp's MAC prefix; frames after a dump that QEMU stopped on a write error |
//!
//! Dials and pokes wait on the host's clock: a case's result should say so, and a
//! failure beside other work is no verdict until it fails alone.

pub mod capture;
pub mod dial;
pub mod peer;
pub mod poke;
pub mod ports;
mod text;

pub use capture::{CaptureError, Frame, Frames, JudgeError, Rules, Summary};
pub use dial::DialOutcome;
pub use ports::{check_peers, netdev_arg, pick_free, ForwardPlan, Lease, PortSource, PortsError, Slice};
pub use text::quoted;
