//! The stack on a hub: leases from a scripted DHCP server, renewals, refused leases, echo
//! between two stacks, a cut echo, and the egress check on a program's own frames.

mod common;

use common::{dhcp, hub, script, udp_frame, Nic, Peer, Script, Server, SERVER_IP};
use net::{Buffers, Check, CheckFailure, LeaseRefusal, Refusal, SendError, Stack, StartError};

const A: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
const B: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x57];

/// Polls `stack` and the server every 10 ms from `from` until `until` or `done`.
fn run<D: net::Device>(
    stack: &mut Stack<'_, D>,
    server: &mut Server,
    from: u64,
    until: u64,
    mut done: impl FnMut(&Stack<'_, D>) -> bool,
) -> u64 {
    let mut now = from;
    while now < until {
        stack.poll(now);
        server.step();
        stack.poll(now);
        if done(stack) {
            return now;
        }
        now += 10;
    }
    panic!("not done by {until} ms (from {from} ms)");
}

#[test]
fn a_lease_is_taken_with_its_time_and_renewed_not_rediscovered() {
    let hub = hub();
    let mut server = Server::new(&hub, script());
    let nic = Nic::new(&hub, A);
    let port = nic.port;
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(nic, &mut buffers, 7, 1, 0);
    let at = run(&mut stack, &mut server, 0, 10_000, |s| s.lease().is_some());
    let lease = *stack.lease().unwrap();
    assert_eq!(lease.address, [10, 0, 2, 15]);
    assert_eq!(lease.prefix_len, 24);
    assert_eq!(lease.router, Some(SERVER_IP));
    assert_eq!(lease.dns_servers(), &[[10, 0, 2, 3]]);
    assert_eq!(lease.server, SERVER_IP);
    assert_eq!(lease.lease_secs, 60);
    assert_eq!(lease.renewals, 0);
    assert_eq!(lease.acked_ms, at);
    // Past T1 (half the lease) the client asks the same server from its own address.
    let kinds_before = server.dhcp.seen.len();
    let at2 = run(&mut stack, &mut server, at + 10, at + 60_000, |s| s.lease().is_some_and(|l| l.renewals == 1));
    assert!(at2 >= at + 30_000, "renewed at {at2}, leased at {at}");
    let renewal = server.dhcp.seen[kinds_before..].iter().find(|s| s.kind == dhcp::REQUEST).unwrap();
    assert_eq!(renewal.source, [10, 0, 2, 15]);
    assert_eq!(renewal.ciaddr, [10, 0, 2, 15]);
    // And again: held as RFC 2131 says, never by starting over.
    run(&mut stack, &mut server, at2 + 10, at2 + 60_000, |s| s.lease().is_some_and(|l| l.renewals == 2));
    assert_eq!(server.dhcp.seen.iter().filter(|s| s.kind == dhcp::DISCOVER).count(), 1);
    assert_eq!(stack.counters().refused, 0);
    // Every frame the stack sent left as the card and as 0.0.0.0 (DHCP) or the lease.
    for frame in hub.borrow().sent_by(port) {
        assert_eq!(frame[6..12], A);
        let source = if frame[12..14] == [8, 6] { &frame[28..32] } else { &frame[26..30] };
        assert!(source == [0; 4] || source == [10, 0, 2, 15], "{frame:?}");
    }
}

#[test]
fn a_lease_not_renewed_ends_at_its_time() {
    for secs in [20, 1] {
        lease_ends_at_its_time(secs);
    }
}

/// A lease of `secs` the server never renews (it answers no ARP either, so smoltcp, which
/// renews by unicast, waits for the server's MAC past the lease's end).
fn lease_ends_at_its_time(secs: u32) {
    let hub = hub();
    let mut server = Server::new(&hub, Script { lease_secs: Some(secs), ..script() });
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(Nic::new(&hub, A), &mut buffers, 7, 1, 0);
    let at = run(&mut stack, &mut server, 0, 10_000, |s| s.lease().is_some());
    // The server goes silent: no renewal, no rebinding answer.
    let mut now = at;
    while stack.lease().is_some() {
        now += 10;
        assert!(now < at + 30_000, "still leased at {now}");
        stack.poll(now);
        hub.borrow_mut().inbox[server.port].clear();
    }
    let end = at + u64::from(secs) * 1000;
    assert!(now >= end && now <= end + 10, "a {secs} s lease lost at {now}, leased at {at}");
}

fn refused(script: Script) -> (Option<LeaseRefusal>, u64) {
    let hub = hub();
    let mut server = Server::new(&hub, script);
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(Nic::new(&hub, A), &mut buffers, 7, 1, 0);
    run(&mut stack, &mut server, 0, 10_000, |s| s.counters().leases_refused > 0);
    assert!(stack.lease().is_none());
    (stack.last_lease_refusal(), stack.counters().leases_refused)
}

#[test]
fn a_lease_without_a_time_from_another_server_or_off_link_is_refused() {
    assert_eq!(refused(Script { lease_secs: None, ..script() }).0, Some(LeaseRefusal::NoLeaseTime));
    assert_eq!(refused(Script { lease_secs: Some(0), ..script() }).0, Some(LeaseRefusal::ZeroLeaseTime));
    assert_eq!(
        refused(Script { router: Some([10, 0, 3, 1]), ..script() }).0,
        Some(LeaseRefusal::RouterOffLink([10, 0, 3, 1]))
    );
    assert_eq!(
        refused(Script { ack_server: [10, 0, 2, 9], ..script() }).0,
        Some(LeaseRefusal::OtherServer([10, 0, 2, 9]))
    );
    assert_eq!(refused(Script { mask: [0; 4], ..script() }).0, Some(LeaseRefusal::BadPrefix(0)));
    assert_eq!(refused(Script { first: [127, 0, 0, 5], ..script() }).0, Some(LeaseRefusal::NotAHost([127, 0, 0, 5])));
    assert_eq!(refused(Script { first: [10, 0, 2, 255], ..script() }).0, Some(LeaseRefusal::NotAHost([10, 0, 2, 255])));
}

#[test]
fn two_stacks_lease_and_echo_through_each_other() {
    let hub = hub();
    let mut server = Server::new(&hub, script());
    let (mut ba, mut bb) = (Buffers::new(), Buffers::new());
    let mut a = Stack::new(Nic::new(&hub, A), &mut ba, 0, 1, 0);
    let mut b = Stack::new(Nic::new(&hub, B), &mut bb, 7, 2, 0);
    assert_eq!(a.start_check([10, 0, 2, 16], 7, b"x", 1000), Err(StartError::NoLease));
    let mut now = 0;
    while a.lease().is_none() || b.lease().is_none() {
        a.poll(now);
        b.poll(now);
        server.step();
        now += 10;
        assert!(now < 10_000);
    }
    let to = b.lease().unwrap().address;
    let payload: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(a.start_check(to, 7, &[], now + 5000), Err(StartError::BadPayload));
    a.start_check(to, 7, &payload, now + 5000).unwrap();
    assert_eq!(a.start_check(to, 7, b"x", now + 5000), Err(StartError::Busy));
    while a.check() == Check::Running {
        a.poll(now);
        b.poll(now);
        server.step();
        now += 10;
    }
    assert_eq!(a.check(), Check::Echoed(300));
    assert_eq!(b.counters().echoed, 300);
    // A second check on the same stack, after the first.
    a.start_check(to, 7, b"again", now + 5000).unwrap();
    while a.check() == Check::Running {
        a.poll(now);
        b.poll(now);
        now += 10;
    }
    assert_eq!(a.check(), Check::Echoed(5));
    assert_eq!(a.counters().refused + b.counters().refused, 0);
}

fn against_peer(cut: usize, want: usize, peer_port: u16, deadline: u64) -> Check {
    let hub = hub();
    let mut server = Server::new(&hub, script());
    let mut peer = Peer::new(&hub, [0x52, 0x54, 0, 0, 0, 9], [10, 0, 2, 100], 7, cut);
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(Nic::new(&hub, A), &mut buffers, 0, 3, 0);
    let mut now = 0;
    while stack.lease().is_none() {
        stack.poll(now);
        server.step();
        peer.poll(now);
        now += 10;
    }
    let payload = vec![b'e'; want];
    stack.start_check([10, 0, 2, 100], peer_port, &payload, now + deadline).unwrap();
    while stack.check() == Check::Running {
        stack.poll(now);
        peer.poll(now);
        now += 10;
    }
    stack.check()
}

#[test]
fn a_cut_echo_is_truncated_not_echoed() {
    assert_eq!(against_peer(100, 100, 7, 5000), Check::Echoed(100));
    assert_eq!(against_peer(40, 100, 7, 5000), Check::Failed(CheckFailure::Truncated { got: 40, want: 100 }));
    assert_eq!(against_peer(0, 100, 7, 5000), Check::Failed(CheckFailure::Truncated { got: 0, want: 100 }));
    // Nobody listens on port 9: a reset.
    assert_eq!(against_peer(100, 100, 9, 5000), Check::Failed(CheckFailure::Reset));
}

/// With the feature `spoof-unchecked` (no egress check) this test fails: the self-check
/// `net-tests-spoof-unchecked` requires it.
#[test]
fn a_frame_as_another_machine_is_refused_and_never_sent() {
    let hub = hub();
    let mut server = Server::new(&hub, script());
    let nic = Nic::new(&hub, A);
    let port = nic.port;
    let mut buffers = Buffers::new();
    let mut stack = Stack::new(nic, &mut buffers, 7, 1, 0);
    // Before a lease: only the DHCP client's traffic from 0.0.0.0.
    let early = udp_frame(A, [0xff; 6], [0; 4], [255; 4], (68, 69), b"not dhcp");
    assert_eq!(stack.send_raw(&early), Err(SendError::Refused(Refusal::SourceIp([0; 4]))));
    run(&mut stack, &mut server, 0, 10_000, |s| s.lease().is_some());
    let ours = udp_frame(A, B, [10, 0, 2, 15], [10, 0, 2, 16], (1000, 2000), b"hello");
    let as_b = udp_frame(A, B, [10, 0, 2, 16], [10, 0, 2, 2], (1000, 2000), b"hello");
    let b_mac = udp_frame(B, A, [10, 0, 2, 15], [10, 0, 2, 16], (1000, 2000), b"hello");
    let before = hub.borrow().sent_by(port).len();
    assert_eq!(stack.send_raw(&ours), Ok(()));
    assert_eq!(stack.send_raw(&as_b), Err(SendError::Refused(Refusal::SourceIp([10, 0, 2, 16]))));
    assert_eq!(stack.send_raw(&b_mac), Err(SendError::Refused(Refusal::SourceMac(B))));
    assert_eq!(stack.send_raw(&vec![0; 1515]), Err(SendError::TooLong));
    let sent = hub.borrow().sent_by(port);
    assert_eq!(sent.len(), before + 1);
    assert_eq!(sent[before], ours);
    assert_eq!(stack.counters().refused, 3);
    assert_eq!(stack.last_refusal(), Some(Refusal::SourceMac(B)));
}
