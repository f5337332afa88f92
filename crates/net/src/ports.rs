//! Host ports for a boot's forwards, and QEMU's `-netdev user` argument that names them.
//!
//! A boot's forwarded ports come from one of two sources ([`PortSource`]):
//!
//! - **A lease** (`TESTBENCH_PORTS=lo-hi`, set by a scheduler): a range no other lease
//!   holds. A sweep's concurrent boots each take their own [`Slice`] of it, cut by
//!   [`Lease::slices`], which refuses a lease too short before anything builds. Ports
//!   inside a lease are not probed: the lease is the promise that nobody else uses them.
//!   What remains is a process outside the scheduler taking a leased port, which fails
//!   that boot loudly (QEMU cannot bind).
//! - **The operating system** ([`pick_free`]): bind `127.0.0.1:0`, note the port, release
//!   it, and let QEMU bind it. Between the release and QEMU's bind another process may
//!   take the port; then QEMU cannot bind and the boot fails rather than hides it. Two
//!   such boots started at once may race for one port, so without a lease only one boot
//!   with forwards should run at a time.
//!
//! Every forward listens on `127.0.0.1` only.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, UdpSocket};

/// The environment variable a scheduler sets to lease a range of host ports.
pub const PORTS_VAR: &str = "TESTBENCH_PORTS";

/// A lease, a slice or a peer address this module refuses, in words naming the variable
/// or the address and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortsError {
    /// [`PORTS_VAR`]'s value is not `lo-hi`.
    #[error(
        "{PORTS_VAR}={text:?}: {why}; it takes lo-hi, two port numbers from 1 to 65535 with lo <= hi (e.g. 40000-40099)"
    )]
    BadLease { text: String, why: LeaseFault },
    /// A lease cut for no boot at all.
    #[error("a lease is cut for at least one boot (0 jobs asked)")]
    NoJobs,
    /// The lease holds fewer ports than the boots' forwards.
    #[error(
        "{PORTS_VAR}={}-{} holds {} ports; {n_jobs} boots of {per_boot} forwards need {}",
        lease.lo,
        lease.hi,
        lease.len(),
        match n_jobs.checked_mul(*per_boot) { Some(need) => need.to_string(), None => "more than there are".to_string() }
    )]
    LeaseShort { lease: Lease, n_jobs: usize, per_boot: usize },
    /// A boot's slice holds fewer ports than it forwards.
    #[error("the slice {}-{} holds {} ports; the boot forwards {need}", slice.lo, u32::from(slice.lo) + u32::from(slice.len) - 1, slice.len)]
    SliceShort { slice: Slice, need: usize },
    /// A peer's address QEMU or the capture's rules would not take.
    #[error("peer {peer}: {why}")]
    Peer { peer: SocketAddrV4, why: PeerFault },
}

/// What is wrong with a [`PORTS_VAR`] value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseFault {
    #[error("no `-` between two ports")]
    NoDash,
    /// `which` is `lo` or `hi`.
    #[error("{which} {text:?} is not a decimal number")]
    NotANumber { which: &'static str, text: String },
    #[error("{which} is 0, which is no port")]
    Zero { which: &'static str },
    #[error("{which} {n} is above 65535")]
    AboveMax { which: &'static str, n: u32 },
    #[error("lo {lo} is above hi {hi}")]
    Reversed { lo: u16, hi: u16 },
}

/// Why a peer's address is refused ([`check_peers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerFault {
    #[error("outside 10.0.0.0/16, the network a case with peers has (QEMU refuses a guestfwd outside it)")]
    OutsideNet,
    #[error(
        "inside 10.0.2.0/24, the guest's own network: it would ask ARP for it instead of going through its gateway"
    )]
    GuestNet,
    #[error("the network's own or broadcast address")]
    NetworkOrBroadcast,
    #[error("port 0")]
    PortZero,
    #[error("named twice")]
    Twice,
}

/// Where a boot's host ports come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSource {
    /// A leased range, cut into slices for concurrent boots.
    Lease(Lease),
    /// No lease: the operating system picks ports ([`pick_free`]).
    Free,
}

impl PortSource {
    /// From the value of [`PORTS_VAR`] (`None` when it is not set): `lo-hi`, two decimal
    /// port numbers from 1 to 65535 with `lo <= hi`. Anything else is refused, in words
    /// naming the variable and the form it takes.
    pub fn from_env(var: Option<&str>) -> Result<PortSource, PortsError> {
        let Some(text) = var else { return Ok(PortSource::Free) };
        let refuse = |why: LeaseFault| PortsError::BadLease { text: text.to_string(), why };
        let Some((lo, hi)) = text.split_once('-') else { return Err(refuse(LeaseFault::NoDash)) };
        let port = |s: &str, which: &'static str| -> Result<u16, PortsError> {
            let not_a_number = || refuse(LeaseFault::NotANumber { which, text: s.to_string() });
            if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_number());
            }
            match s.parse::<u32>() {
                Ok(0) => Err(refuse(LeaseFault::Zero { which })),
                Ok(n) if n > 65535 => Err(refuse(LeaseFault::AboveMax { which, n })),
                Ok(n) => Ok(n as u16),
                Err(_) => Err(not_a_number()),
            }
        };
        let (lo, hi) = (port(lo, "lo")?, port(hi, "hi")?);
        if lo > hi {
            return Err(refuse(LeaseFault::Reversed { lo, hi }));
        }
        Ok(PortSource::Lease(Lease { lo, hi }))
    }
}

/// A leased range of host ports, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub lo: u16,
    pub hi: u16,
}

impl Lease {
    /// How many ports the lease holds.
    pub fn len(&self) -> u32 {
        u32::from(self.hi) - u32::from(self.lo) + 1
    }

    /// Never true: a lease holds at least one port.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `n_jobs` disjoint slices of `per_boot` ports each, from the lease's start, or a
    /// refusal when the lease is too short (or `n_jobs` is 0).
    pub fn slices(&self, n_jobs: usize, per_boot: usize) -> Result<Vec<Slice>, PortsError> {
        if n_jobs == 0 {
            return Err(PortsError::NoJobs);
        }
        let need = n_jobs.saturating_mul(per_boot);
        if need > self.len() as usize {
            return Err(PortsError::LeaseShort { lease: *self, n_jobs, per_boot });
        }
        // need <= len <= 65535, so every start and length fits a u16.
        Ok((0..n_jobs).map(|j| Slice { lo: self.lo + (j * per_boot) as u16, len: per_boot as u16 }).collect())
    }
}

/// One boot's ports out of a lease: `len` ports from `lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub lo: u16,
    pub len: u16,
}

impl Slice {
    /// The slice's ports, in order.
    pub fn ports(&self) -> impl Iterator<Item = u16> {
        let lo = self.lo;
        (0..self.len).map(move |i| lo + i)
    }
}

/// `tcp` distinct free TCP ports, and with `udp` one free UDP port, on 127.0.0.1, as the
/// operating system picks them: every socket is bound to `127.0.0.1:0` and held until
/// all are bound (so the TCP ports are distinct), then all are released. The ports are
/// free when this returns, not when QEMU binds them (the race in the module's docs).
pub fn pick_free(tcp: usize, udp: bool) -> io::Result<(Vec<u16>, Option<u16>)> {
    let any = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let listeners = (0..tcp).map(|_| TcpListener::bind(any)).collect::<io::Result<Vec<_>>>()?;
    let tcp_ports = listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<io::Result<Vec<_>>>()?;
    let udp_port = if udp { Some(UdpSocket::bind(any)?.local_addr()?.port()) } else { None };
    drop(listeners);
    Ok((tcp_ports, udp_port))
}

/// A boot's forwards: `(guest port, host port)` for each TCP forward, and the poke's UDP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardPlan {
    pub tcp: Vec<(u16, u16)>,
    pub udp: Option<(u16, u16)>,
}

impl ForwardPlan {
    /// The plan on a lease's slice: the TCP forwards take its ports in order, then the
    /// poke the next one. Refused when the slice is shorter than that.
    pub fn from_slice(slice: &Slice, tcp_guest: &[u16], udp_guest: Option<u16>) -> Result<ForwardPlan, PortsError> {
        let need = tcp_guest.len() + usize::from(udp_guest.is_some());
        if need > usize::from(slice.len) {
            return Err(PortsError::SliceShort { slice: *slice, need });
        }
        let mut ports = slice.ports();
        let tcp = tcp_guest.iter().map(|&g| (g, ports.next().unwrap_or(0))).collect();
        let udp = udp_guest.map(|g| (g, ports.next().unwrap_or(0)));
        Ok(ForwardPlan { tcp, udp })
    }

    /// The plan on ports the operating system picks ([`pick_free`], and its race).
    pub fn pick_free(tcp_guest: &[u16], udp_guest: Option<u16>) -> io::Result<ForwardPlan> {
        let (tcp_host, udp_host) = pick_free(tcp_guest.len(), udp_guest.is_some())?;
        let tcp = tcp_guest.iter().copied().zip(tcp_host).collect();
        let udp = udp_guest.zip(udp_host);
        Ok(ForwardPlan { tcp, udp })
    }

    /// The host port that forwards to the guest's TCP port `guest`.
    pub fn host_port(&self, guest: u16) -> Option<u16> {
        self.tcp.iter().find(|&&(g, _)| g == guest).map(|&(_, h)| h)
    }
}

/// A value inside a QEMU option list (`key=value,key=value`): QEMU reads `,,` as one
/// comma inside a value, so every comma is doubled.
pub fn qemu_opt_value(value: &str) -> String {
    value.replace(',', ",,")
}

/// The widened network of a case with peers: a /16 in which the host (10.0.2.2), the
/// resolver (10.0.2.3) and the guest's first address (10.0.2.15) stay where QEMU's
/// defaults put them, so a guest configured for 10.0.2.0/24 reaches the peers through
/// its gateway.
pub const WIDE_NET: &str = "net=10.0.0.0/16,host=10.0.2.2,dns=10.0.2.3,dhcpstart=10.0.2.15";

/// Refuses peer addresses QEMU or the capture's rules would not take: each must lie in
/// the widened 10.0.0.0/16 (QEMU refuses a `guestfwd` outside the network: "Conflicting/
/// invalid host:port in guest forwarding rule", seen on QEMU 10.0), outside the guest's
/// own 10.0.2.0/24 (the guest reaches it through its gateway, never by ARP), not the
/// /16's network or broadcast address, with a port other than 0, and no two alike.
pub fn check_peers(peers: &[SocketAddrV4]) -> Result<(), PortsError> {
    for (i, p) in peers.iter().enumerate() {
        let [a, b, c, d] = p.ip().octets();
        let why = if (a, b) != (10, 0) {
            Some(PeerFault::OutsideNet)
        } else if c == 2 {
            Some(PeerFault::GuestNet)
        } else if (c, d) == (0, 0) || (c, d) == (255, 255) {
            Some(PeerFault::NetworkOrBroadcast)
        } else if p.port() == 0 {
            Some(PeerFault::PortZero)
        } else if peers[..i].contains(p) {
            Some(PeerFault::Twice)
        } else {
            None
        };
        if let Some(why) = why {
            return Err(PortsError::Peer { peer: *p, why });
        }
    }
    Ok(())
}

/// QEMU's `-netdev` argument for the guest's card: user-mode networking with
/// `restrict=on` and `ipv6=off`, the widened network when `widen`, a `hostfwd` on
/// 127.0.0.1 for each forward (TCP, then the poke's UDP), and a `guestfwd` for each peer
/// running `cmd` (its commas doubled, as is `id`'s). Peers need `widen` (and
/// [`check_peers`]). slirp starts `cmd` for each connection, splitting it into words
/// the way a shell would (quote a path with spaces), with the connection as the
/// command's stdin, stdout and stderr.
pub fn netdev_arg(id: &str, plan: &ForwardPlan, peers: &[(SocketAddrV4, String)], widen: bool) -> String {
    let mut arg = format!("user,id={},restrict=on,ipv6=off", qemu_opt_value(id));
    if widen {
        arg.push(',');
        arg.push_str(WIDE_NET);
    }
    for &(guest, host) in &plan.tcp {
        arg.push_str(&format!(",hostfwd=tcp:127.0.0.1:{host}-:{guest}"));
    }
    if let Some((guest, host)) = plan.udp {
        arg.push_str(&format!(",hostfwd=udp:127.0.0.1:{host}-:{guest}"));
    }
    for (addr, cmd) in peers {
        arg.push_str(&format!(",guestfwd=tcp:{}:{}-cmd:{}", addr.ip(), addr.port(), qemu_opt_value(cmd)));
    }
    arg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_variable_is_free() {
        assert_eq!(PortSource::from_env(None), Ok(PortSource::Free));
    }

    #[test]
    fn a_lease_parses() {
        assert_eq!(PortSource::from_env(Some("40000-40099")), Ok(PortSource::Lease(Lease { lo: 40000, hi: 40099 })));
        assert_eq!(PortSource::from_env(Some("1-65535")), Ok(PortSource::Lease(Lease { lo: 1, hi: 65535 })));
        assert_eq!(
            PortSource::from_env(Some("7-7")).map(|s| matches!(s, PortSource::Lease(l) if l.len() == 1)),
            Ok(true)
        );
    }

    #[test]
    fn malformed_leases_are_refused_in_words() {
        use LeaseFault::*;
        let nan = |which, text: &str| NotANumber { which, text: text.to_string() };
        for (text, fault, why) in [
            ("", NoDash, "no `-`"),
            ("40000", NoDash, "no `-`"),
            ("40000-", nan("hi", ""), "hi \"\" is not a decimal number"),
            ("-40000", nan("lo", ""), "lo \"\" is not a decimal number"),
            ("a-b", nan("lo", "a"), "lo \"a\" is not"),
            (" 1-2", nan("lo", " 1"), "lo \" 1\" is not"),
            ("+1-2", nan("lo", "+1"), "lo \"+1\" is not"),
            ("1-2-3", nan("hi", "2-3"), "hi \"2-3\" is not"),
            ("0-10", Zero { which: "lo" }, "lo is 0"),
            ("10-0", Zero { which: "hi" }, "hi is 0"),
            ("1-65536", AboveMax { which: "hi", n: 65536 }, "hi 65536 is above 65535"),
            ("1-999999", nan("hi", "999999"), "hi \"999999\" is not"),
            ("200-100", Reversed { lo: 200, hi: 100 }, "lo 200 is above hi 100"),
        ] {
            let err = PortSource::from_env(Some(text)).unwrap_err();
            assert_eq!(err, PortsError::BadLease { text: text.to_string(), why: fault });
            let err = err.to_string();
            assert!(err.starts_with(&format!("TESTBENCH_PORTS={text:?}: ")), "{err}");
            assert!(err.contains(why), "{text}: {err}");
            assert!(
                err.ends_with("it takes lo-hi, two port numbers from 1 to 65535 with lo <= hi (e.g. 40000-40099)"),
                "{err}"
            );
        }
    }

    #[test]
    fn slices_are_disjoint_and_inside_the_lease() {
        let lease = Lease { lo: 40000, hi: 40009 };
        let slices = lease.slices(3, 3).unwrap();
        assert_eq!(slices, [Slice { lo: 40000, len: 3 }, Slice { lo: 40003, len: 3 }, Slice { lo: 40006, len: 3 }]);
        let mut all: Vec<u16> = slices.iter().flat_map(|s| s.ports()).collect();
        all.dedup();
        assert_eq!(all, (40000..40009).collect::<Vec<_>>());
        // Exactly full.
        assert_eq!(lease.slices(2, 5).unwrap().last(), Some(&Slice { lo: 40005, len: 5 }));
        assert_eq!(Lease { lo: 65535, hi: 65535 }.slices(1, 1).unwrap(), [Slice { lo: 65535, len: 1 }]);
        // No forwards: empty slices.
        assert!(lease.slices(4, 0).unwrap().iter().all(|s| s.ports().count() == 0));
    }

    #[test]
    fn a_short_lease_is_refused() {
        let lease = Lease { lo: 40000, hi: 40009 };
        let short = lease.slices(4, 3).unwrap_err();
        assert_eq!(short, PortsError::LeaseShort { lease, n_jobs: 4, per_boot: 3 });
        assert_eq!(short.to_string(), "TESTBENCH_PORTS=40000-40009 holds 10 ports; 4 boots of 3 forwards need 12");
        let huge = lease.slices(usize::MAX, 2).unwrap_err();
        assert!(matches!(huge, PortsError::LeaseShort { n_jobs: usize::MAX, .. }));
        assert!(huge.to_string().ends_with("need more than there are"));
        let none = lease.slices(0, 1).unwrap_err();
        assert_eq!(none, PortsError::NoJobs);
        assert_eq!(none.to_string(), "a lease is cut for at least one boot (0 jobs asked)");
    }

    #[test]
    fn plans_from_a_slice() {
        let slice = Slice { lo: 40010, len: 3 };
        let plan = ForwardPlan::from_slice(&slice, &[7, 22], Some(47000)).unwrap();
        assert_eq!(plan, ForwardPlan { tcp: vec![(7, 40010), (22, 40011)], udp: Some((47000, 40012)) });
        assert_eq!(plan.host_port(22), Some(40011));
        assert_eq!(plan.host_port(23), None);
        let err = ForwardPlan::from_slice(&slice, &[1, 2, 3], Some(4)).unwrap_err();
        assert_eq!(err, PortsError::SliceShort { slice, need: 4 });
        assert_eq!(err.to_string(), "the slice 40010-40012 holds 3 ports; the boot forwards 4");
    }

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let (tcp, udp) = pick_free(4, true).unwrap();
        assert_eq!(tcp.len(), 4);
        let mut sorted = tcp.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
        assert!(tcp.iter().all(|&p| p != 0));
        let udp = udp.unwrap();
        assert_ne!(udp, 0);
        // Released: binding them again works (the race is another process's to win).
        let _l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, tcp[0])).unwrap();
        let _u = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, udp)).unwrap();
        assert_eq!(pick_free(0, false).unwrap(), (vec![], None));
        let plan = ForwardPlan::pick_free(&[7], Some(9)).unwrap();
        assert_eq!(plan.tcp.len(), 1);
        assert_eq!(plan.udp.map(|u| u.0), Some(9));
    }

    #[test]
    fn the_netdev_argument() {
        let plan = ForwardPlan { tcp: vec![(7, 40010), (22, 40011)], udp: Some((47000, 40012)) };
        let peers = vec![
            (
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 9, 100), 7),
                "/opt/tb/testbench peer-helper /run/peers 10.0.9.100-7".to_string(),
            ),
            (SocketAddrV4::new(Ipv4Addr::new(10, 0, 9, 101), 80), "/odd,dir/tb peer a,,b".to_string()),
        ];
        assert_eq!(
            netdev_arg("net0", &plan, &peers, true),
            "user,id=net0,restrict=on,ipv6=off,net=10.0.0.0/16,host=10.0.2.2,dns=10.0.2.3,dhcpstart=10.0.2.15,\
             hostfwd=tcp:127.0.0.1:40010-:7,hostfwd=tcp:127.0.0.1:40011-:22,hostfwd=udp:127.0.0.1:40012-:47000,\
             guestfwd=tcp:10.0.9.100:7-cmd:/opt/tb/testbench peer-helper /run/peers 10.0.9.100-7,\
             guestfwd=tcp:10.0.9.101:80-cmd:/odd,,dir/tb peer a,,,,b"
        );
        // An empty [net]: a card that reaches nothing, no host port.
        assert_eq!(netdev_arg("net0", &ForwardPlan::default(), &[], false), "user,id=net0,restrict=on,ipv6=off");
        assert_eq!(netdev_arg("a,b", &ForwardPlan::default(), &[], false), "user,id=a,,b,restrict=on,ipv6=off");
    }

    #[test]
    fn peer_addresses() {
        let p = |s: &str| s.parse::<SocketAddrV4>().unwrap();
        assert_eq!(check_peers(&[p("10.0.9.100:7"), p("10.0.9.100:8"), p("10.0.255.254:1")]), Ok(()));
        for (peers, fault, why) in [
            (vec![p("10.1.0.1:7")], PeerFault::OutsideNet, "peer 10.1.0.1:7: outside 10.0.0.0/16"),
            (vec![p("192.168.1.1:7")], PeerFault::OutsideNet, "outside 10.0.0.0/16"),
            (vec![p("10.0.2.50:7")], PeerFault::GuestNet, "peer 10.0.2.50:7: inside 10.0.2.0/24"),
            (vec![p("10.0.255.255:7")], PeerFault::NetworkOrBroadcast, "broadcast"),
            (vec![p("10.0.9.1:0")], PeerFault::PortZero, "port 0"),
            (vec![p("10.0.9.1:7"), p("10.0.9.1:7")], PeerFault::Twice, "named twice"),
        ] {
            let err = check_peers(&peers).unwrap_err();
            assert!(matches!(err, PortsError::Peer { why, .. } if why == fault), "{err}");
            let err = err.to_string();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn doubled_commas_read_back_as_one() {
        // QEMU's reading of a value: `,,` is a comma, a single `,` ends the value.
        fn qemu_reads(opts: &str, key: &str) -> Option<String> {
            let mut out = None;
            let mut rest = opts;
            while !rest.is_empty() {
                let mut value = String::new();
                let mut chars = rest.char_indices().peekable();
                let mut end = rest.len();
                while let Some((i, c)) = chars.next() {
                    if c == ',' {
                        if chars.peek().map(|&(_, c)| c) == Some(',') {
                            chars.next();
                            value.push(',');
                            continue;
                        }
                        end = i + 1;
                        break;
                    }
                    value.push(c);
                }
                if let Some(v) = value.strip_prefix(&format!("{key}=")) {
                    out = Some(v.to_string());
                }
                rest = &rest[end.min(rest.len())..];
            }
            out
        }
        for cmd in ["plain", "a,b", ",,", "x,", ",x", "a,,,b"] {
            let arg = format!("user,cmd={},id=n", qemu_opt_value(cmd));
            assert_eq!(qemu_reads(&arg, "cmd").as_deref(), Some(cmd), "{arg}");
            assert_eq!(qemu_reads(&arg, "id").as_deref(), Some("n"), "{arg}");
        }
    }
}
