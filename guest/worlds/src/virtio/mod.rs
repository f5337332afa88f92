//! The hostile virtio device models, written once for `guest/virtio`'s host tests and
//! hostfuzz's `virtio` and `virtio-net` targets: a virtio-mmio [`transport`] (the
//! register file and the device side of split virtqueues) over the driver's
//! [`memory`], behind which a [`blk`] device or a [`net`] card answers, honestly or with
//! the lies it is told, and keeps the books of what it did. The driver breaking a rule
//! is a [`memory::Violation`]: a panic in the tests, a finding in hostfuzz.

pub mod blk;
pub mod memory;
pub mod net;
pub mod transport;

pub use memory::{Arena, Memory, Violation};
pub use transport::{Device, Model, Port, Transport};
