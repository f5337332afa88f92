//! The worlds the guest's portable crates are tested and fuzzed in, written once for both:
//! `guest/net`'s host tests and hostfuzz's network world (`hostfuzz/src/targets/network.rs`)
//! answer the stack's DHCP client with the one [`dhcp::Server`].
//!
//! Host only: the guest workspace excludes this crate, and its users take it as a
//! dev-dependency (the guest's crates) or a dependency (hostfuzz), so no guest build
//! ever links it.

pub mod dhcp;
pub mod frame;
