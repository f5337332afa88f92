//! The worlds the guest's portable crates are tested and fuzzed in, written once for both:
//! `guest/net`'s host tests and hostfuzz's network world (`hostfuzz/src/targets/network.rs`)
//! answer the stack's DHCP client with the one [`dhcp::Server`]; `guest/virtio`'s host
//! tests and hostfuzz's `virtio` and `virtio-net` targets drive the drivers against the
//! one hostile device model of [`virtio`].
//!
//! Host only: the guest workspace excludes this crate, and its users take it as a
//! dev-dependency (the guest's crates) or a dependency (hostfuzz), so no guest build
//! ever links it.

pub mod dhcp;
pub mod frame;
pub mod virtio;
