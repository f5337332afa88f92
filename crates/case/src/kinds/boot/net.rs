//! A boot case's `[net]`: the forwarded ports, the peers the guest may reach
//! (`[[net.peer]]`), the bench's dials in (`[[net.dial]]`), the one UDP poke
//! (`[net.poke]`), the capture's rules (`self_forbidden`, `truncate_capture`), the frames
//! it must hold (`capture_expect`), and the
//! sessions' host key (`host_key`, in `boot/host_key.rs`).

use std::net::{Ipv4Addr, SocketAddrV4};

use super::raw::{RawDial, RawNet, RawPeer, RawPoke, DIAL, NET, PEER, POKE};
use crate::common::{Ctx, Refusals};
use crate::fields::check_table;
use crate::{CaseError, Dial, Ipv4Net, NetSpec, Peer, Poke};

/// The most connections a peer may expect: more is a typo, and each is a helper process.
const CONNECTIONS_MAX: i64 = 1000;

/// The most bytes a dial sends or expects back: 64 KiB.
const DIAL_BYTES_MAX: usize = 64 * 1024;

/// The most bytes of a poke: one Ethernet frame's 1500 less the IPv4 and UDP headers, so
/// the datagram reaches the guest unfragmented.
const POKE_BYTES_MAX: usize = 1472;

/// What a prefix in `self_forbidden` looks like, for refusals.
const PREFIX: &str = "an IPv4 prefix a.b.c.d/n, n from 0 to 32, such as \"10.0.2.0/24\"";

/// Stage one for `[net]` and the tables inside it: their fields checked in words.
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Result<(), CaseError> {
    let Some(toml::Value::Table(net)) = table.get("net") else { return Ok(()) };
    check_table(ctx, net, NET, "net.", "[net]", &|_| None)?;
    for (key, fields, whose) in [("peer", PEER, "[[net.peer]]"), ("dial", DIAL, "[[net.dial]]")] {
        if let Some(toml::Value::Array(items)) = net.get(key) {
            for (index, item) in items.iter().enumerate() {
                if let toml::Value::Table(item) = item {
                    check_table(ctx, item, fields, &format!("net.{key}[{index}]."), whose, &|_| None)?;
                }
            }
        }
    }
    if let Some(toml::Value::Table(poke)) = net.get("poke") {
        check_table(ctx, poke, POKE, "net.poke.", "[net.poke]", &|_| None)?;
    }
    Ok(())
}

/// Stage two of `[net]`. `self_check`: the case has `must_fail`, which `truncate_capture`
/// needs.
pub(crate) fn net(ctx: &Ctx, raw: Option<&RawNet>, self_check: bool) -> Result<Option<NetSpec>, CaseError> {
    let Some(raw) = raw else { return Ok(None) };
    // Every refusal of the table, each field's (each item of a list, each field of each
    // peer, each dial and the poke); a check that reads a list (the dials' ports against
    // forward, the rules on peers) only when that list is accepted whole.
    let mut refused = Refusals::new();
    let mut forward: Vec<u16> = Vec::new();
    let mut forward_whole = true;
    for (index, port) in raw.forward.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.forward[{index}]");
        match refused.keep(port_number(ctx, &field, *port, "a guest TCP port")) {
            Some(port) if forward.contains(&port) => refused.push(ctx.err(field, format!("{port} is named twice"))),
            Some(port) => forward.push(port),
            None => forward_whole = false,
        }
    }

    let mut self_forbidden: Vec<Ipv4Net> = Vec::new();
    for (index, text) in raw.self_forbidden.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.self_forbidden[{index}]");
        match refused.keep(ipv4_net(ctx, &field, text)) {
            Some(prefix) if self_forbidden.contains(&prefix) => {
                refused.push(ctx.err(field, format!("{text:?} is named twice")))
            }
            Some(prefix) => self_forbidden.push(prefix),
            None => {}
        }
    }

    let mut peers: Vec<Peer> = Vec::new();
    let mut peers_whole = true;
    for (index, raw) in raw.peer.as_deref().unwrap_or(&[]).iter().enumerate() {
        match refused.keep(peer(ctx, index, raw, &peers)) {
            Some(peer) => peers.push(peer),
            None => peers_whole = false,
        }
    }
    if peers_whole && !peers.is_empty() && peers.iter().all(|peer| peer.connections == 0) {
        refused.push(ctx.err(
            "net.peer",
            "every peer expects 0 connections: a case with peers needs one that expects a connection, whose SYN in the capture shows the capture was live",
        ));
    }
    if peers_whole && !raw.self_forbidden.as_deref().unwrap_or(&[]).is_empty() && peers.is_empty() {
        refused.push(ctx.err(
            "net.self_forbidden",
            "only with [[net.peer]]: the capture it is checked on is judged in a case with peers",
        ));
    }
    let truncate_capture = raw.truncate_capture.unwrap_or(false);
    if truncate_capture && !self_check {
        refused.push(ctx.err(
            "net.truncate_capture",
            "only with must_fail: it cuts the capture on purpose, so the case is a self-check that expects the bench to fail it",
        ));
    }
    if truncate_capture && peers_whole && peers.is_empty() {
        refused.push(
            ctx.err(
                "net.truncate_capture",
                "only with [[net.peer]]: the capture it cuts is judged in a case with peers",
            ),
        );
    }

    let capture_expect = refused.keep(ctx.patterns("net.capture_expect", raw.capture_expect.as_deref().unwrap_or(&[])));

    let mut dials = Vec::new();
    for (index, raw) in raw.dial.as_deref().unwrap_or(&[]).iter().enumerate() {
        if let Some(dial) = refused.keep(dial(ctx, index, raw, forward_whole.then_some(&forward[..]))) {
            dials.push(dial);
        }
    }

    let poke = raw.poke.as_ref().and_then(|raw| refused.keep(poke(ctx, raw)));
    let host_key = refused.keep(raw.host_key.as_deref().map(|text| super::host_key::host_key(ctx, text)).transpose());
    let made = capture_expect.zip(host_key).map(|(capture_expect, host_key)| {
        Some(NetSpec { forward, self_forbidden, truncate_capture, capture_expect, peers, dials, poke, host_key })
    });
    refused.end(ctx, made)
}

/// `net.peer[index]`, one of `peers` before it accepted: every refusal of its fields,
/// in the order of [`PEER`].
fn peer(ctx: &Ctx, index: usize, raw: &RawPeer, peers: &[Peer]) -> Result<Peer, CaseError> {
    let field = format!("net.peer[{index}]");
    let mut refused = Refusals::new();
    let addr =
        refused.keep(match &raw.addr {
            None => Err(ctx
                .err(format!("{field}.addr"), "required: the peer's IPv4 address and port, such as \"10.0.9.100:7\"")),
            Some(text) => peer_addr(ctx, &format!("{field}.addr"), text).and_then(|addr| {
                if peers.iter().any(|peer| peer.addr == addr) {
                    Err(ctx.err(format!("{field}.addr"), format!("\"{addr}\" is named twice")))
                } else {
                    Ok(addr)
                }
            }),
        });
    let connections = refused.keep(match raw.connections {
        None => Err(ctx.err(
            format!("{field}.connections"),
            format!("required: exactly how many connections the guest makes to this peer, 0 to {CONNECTIONS_MAX}"),
        )),
        Some(n @ 0..=CONNECTIONS_MAX) => Ok(n as u32),
        Some(n) => Err(ctx.err(
            format!("{field}.connections"),
            format!(
                "{n} is not accepted: the number of connections the guest makes to this peer, 0 to {CONNECTIONS_MAX}"
            ),
        )),
    });
    refused.end(ctx, addr.zip(connections).map(|(addr, connections)| Peer { addr, connections }))
}

/// `net.dial[index]`: every refusal of its fields, in the order of [`DIAL`]; its port is
/// checked against `forward` when that is accepted whole.
fn dial(ctx: &Ctx, index: usize, raw: &RawDial, forward: Option<&[u16]>) -> Result<Dial, CaseError> {
    let field = format!("net.dial[{index}]");
    let mut refused = Refusals::new();
    let port = refused.keep(match raw.port {
        None => Err(ctx.err(format!("{field}.port"), "required: a port of net.forward")),
        Some(port) => port_number(ctx, &format!("{field}.port"), port, "a port of net.forward"),
    });
    // Checked against forward only when the port itself is accepted.
    if let Some((port, forward)) = port.zip(forward).filter(|(port, forward)| !forward.contains(port)) {
        let ports = match forward {
            [] => "and net.forward is empty".to_string(),
            ports => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                format!("one of net.forward ({})", ports.join(", "))
            }
        };
        refused.push(ctx.err(
            format!("{field}.port"),
            format!("{port} is not accepted: a dial connects through a forwarded port, {ports}"),
        ));
    }
    let send =
        refused.keep(dial_text(ctx, &format!("{field}.send"), raw.send.as_deref(), "the text to send, as written"));
    let expect =
        refused.keep(dial_text(ctx, &format!("{field}.expect"), raw.expect.as_deref(), "the text that must come back"));
    let after =
        refused.keep(raw.after.as_deref().map(|source| ctx.regex(format!("{field}.after"), source)).transpose());
    let made = || {
        Some(Dial {
            port: port?,
            send: send?,
            expect: expect?,
            after: after?,
            until_closed: raw.until_closed.unwrap_or(false),
        })
    };
    refused.end(ctx, made())
}

/// `[net.poke]`: every refusal of its fields, in the order of [`POKE`].
fn poke(ctx: &Ctx, raw: &RawPoke) -> Result<Poke, CaseError> {
    let mut refused = Refusals::new();
    let port = refused.keep(match raw.port {
        None => Err(ctx.err("net.poke.port", "required: the guest's UDP port, 1 to 65535")),
        // UDP: a TCP port of forward is another port, and may have the same number.
        Some(port) => port_number(ctx, "net.poke.port", port, "the guest's UDP port"),
    });
    let payload = refused.keep(match raw.payload.as_deref() {
        None => Err(ctx.err("net.poke.payload", "required: the datagram's bytes, as a string")),
        Some("") => Err(ctx.err("net.poke.payload", format!("empty: the datagram's bytes, 1 to {POKE_BYTES_MAX}"))),
        Some(payload) if payload.len() > POKE_BYTES_MAX => Err(ctx.err(
            "net.poke.payload",
            format!("{} bytes is not accepted: at most {POKE_BYTES_MAX}, so the datagram reaches the guest in one frame, unfragmented", payload.len()),
        )),
        Some(payload) => Ok(payload.to_string()),
    });
    let after = refused.keep(match raw.after.as_deref() {
        None => Err(ctx.err(
            "net.poke.after",
            "required: a regex a shown console line must match; the poke is sent when one first does",
        )),
        Some(source) => ctx.regex("net.poke.after".into(), source),
    });
    let made = || Some(Poke { port: port?, payload: payload?, after: after? });
    refused.end(ctx, made())
}

fn port_number(ctx: &Ctx, field: &str, port: i64, what: &str) -> Result<u16, CaseError> {
    match u16::try_from(port) {
        Ok(port) if port >= 1 => Ok(port),
        _ => Err(ctx.err(field, format!("{port} is not accepted: {what}, 1 to 65535"))),
    }
}

/// A dial's `send` or `expect`: required, not empty, at most 64 KiB.
fn dial_text(ctx: &Ctx, field: &str, text: Option<&str>, what: &str) -> Result<String, CaseError> {
    match text {
        None => Err(ctx.err(field, format!("required: {what}"))),
        Some("") => Err(ctx.err(field, format!("empty: {what}, 1 byte to 64 KiB"))),
        Some(text) if text.len() > DIAL_BYTES_MAX => {
            Err(ctx.err(field, format!("{} bytes is not accepted: at most {DIAL_BYTES_MAX} (64 KiB)", text.len())))
        }
        Some(text) => Ok(text.to_string()),
    }
}

/// `a.b.c.d/n` with its host bits zero; one with host bits is refused naming its prefix.
fn ipv4_net(ctx: &Ctx, field: &str, text: &str) -> Result<Ipv4Net, CaseError> {
    let refused = || ctx.err(field, format!("{text:?} is not accepted: {PREFIX}"));
    let (addr, prefix) = text.split_once('/').ok_or_else(refused)?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| refused())?;
    if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused());
    }
    let prefix: u8 = prefix.parse().map_err(|_| refused())?;
    if prefix > 32 {
        return Err(refused());
    }
    let net = Ipv4Net { addr: u32::from(addr), prefix };
    let canonical = Ipv4Net { addr: net.addr & net.mask(), prefix };
    if canonical != net {
        return Err(
            ctx.err(field, format!("{text:?} is not accepted: its host bits are set; the prefix is \"{canonical}\""))
        );
    }
    Ok(net)
}

/// A peer's `a.b.c.d:port`: in the /16 a case with peers widens to, outside the guest's
/// own /24 (its address, the gateway and the resolver), neither the /16's network nor its
/// broadcast address, on a port from 1.
fn peer_addr(ctx: &Ctx, field: &str, text: &str) -> Result<SocketAddrV4, CaseError> {
    let addr: SocketAddrV4 = text.parse().map_err(|_| {
        ctx.err(
            field,
            format!("{text:?} is not accepted: an IPv4 address and port, a.b.c.d:port, such as \"10.0.9.100:7\""),
        )
    })?;
    let (wide, guest) = (NetSpec::WIDE, NetSpec::GUEST);
    let ip = *addr.ip();
    let broadcast = Ipv4Addr::from(wide.addr | !wide.mask());
    if !wide.contains(ip) || guest.contains(ip) || ip == wide.network() || ip == broadcast {
        return Err(ctx.err(
            field,
            format!(
                "{text:?} is not accepted: a peer lies in {wide} (the network a case with peers widens to, neither {} nor {broadcast}), outside {guest} (the guest's own: its address, the gateway {} and the resolver {})",
                wide.network(),
                NetSpec::HOST,
                NetSpec::DNS
            ),
        ));
    }
    if addr.port() == 0 {
        return Err(ctx.err(field, format!("{text:?} is not accepted: port 0; a port from 1 to 65535")));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use crate::{Case, Ipv4Net, NetSpec, Peer};

    const BASE: &str =
        "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [\"logsrv\"]\nexpect = ['x']\n";

    /// A boot case with `top` among its top-level fields and `tables` after them.
    fn text(top: &str, tables: &str) -> String {
        format!("{BASE}{top}\n{tables}")
    }

    fn parsed(top: &str, tables: &str) -> Case {
        let text = text(top, tables);
        crate::parse("tests/c.toml", &text).unwrap_or_else(|error| panic!("{error}\n{text}"))
    }

    fn refused(top: &str, tables: &str) -> String {
        let text = text(top, tables);
        crate::parse("tests/c.toml", &text).expect_err(&text).to_string()
    }

    fn net_of(case: &Case) -> &NetSpec {
        case.as_boot().unwrap().net.as_ref().expect("a [net]")
    }

    #[test]
    fn a_capture_expect_that_is_not_a_regex_is_refused_naming_its_index() {
        let e = refused("", "[net]\ncapture_expect = ['ARP', 'a{2,1}']\n");
        assert!(e.contains("net.capture_expect[1]"), "{e}");
        let e = refused("", "[net]\ncapture_expect = 'ARP'\n");
        assert!(e.contains("net.capture_expect"), "{e}");
    }

    /// A peer that expects a connection, for the cases that need one.
    const PEER_ONE: &str = "[[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 1\n";

    #[test]
    fn a_case_with_every_net_field_parses_to_its_typed_form() {
        let case = parsed(
            "must_fail = 'capture'",
            "[net]\nforward = [7, 22]\nself_forbidden = [\"10.0.2.0/24\", \"127.0.0.0/8\", \"0.0.0.0/0\", \"10.0.9.1/32\"]\ntruncate_capture = true\n\
             capture_expect = ['ARP request who-has 10\\.0\\.2\\.2 ', ' ARP reply ']\n\
             [[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 1\n\
             [[net.peer]]\naddr = \"10.0.255.254:65535\"\nconnections = 0\n\
             [[net.dial]]\nport = 7\nsend = \"hello\\n\"\nexpect = \"hello\\n\"\n\
             [[net.dial]]\nport = 22\nsend = \"x\"\nexpect = \"SSH-\"\nafter = '^ready$'\nuntil_closed = true\n\
             [net.poke]\nport = 7\npayload = \"poke\"\nafter = '^poke me$'\n",
        );
        let net = net_of(&case);
        assert_eq!(net.forward, [7, 22]);
        let prefixes: Vec<String> = net.self_forbidden.iter().map(ToString::to_string).collect();
        assert_eq!(prefixes, ["10.0.2.0/24", "127.0.0.0/8", "0.0.0.0/0", "10.0.9.1/32"]);
        assert!(net.truncate_capture);
        let expect: Vec<(&str, &str)> =
            net.capture_expect.iter().map(|p| (p.label.as_str(), p.regex.as_str())).collect();
        assert_eq!(
            expect,
            [("net.capture_expect[0]", r"ARP request who-has 10\.0\.2\.2 "), ("net.capture_expect[1]", " ARP reply ")]
        );
        assert_eq!(
            net.peers,
            [
                Peer { addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 9, 100), 7), connections: 1 },
                Peer { addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 255, 254), 65535), connections: 0 },
            ]
        );
        assert_eq!(net.dials.len(), 2);
        let (first, second) = (&net.dials[0], &net.dials[1]);
        assert_eq!((first.port, first.send.as_str(), first.expect.as_str()), (7, "hello\n", "hello\n"));
        assert!(first.after.is_none() && !first.until_closed);
        let after = second.after.as_ref().unwrap();
        assert_eq!((after.label.as_str(), after.source()), ("net.dial[1].after", "^ready$"));
        assert!(second.until_closed);
        // A poke is UDP: its port may have the number of a forwarded TCP port.
        let poke = net.poke.as_ref().unwrap();
        assert_eq!((poke.port, poke.payload.as_str()), (7, "poke"));
        assert_eq!((poke.after.label.as_str(), poke.after.source()), ("net.poke.after", "^poke me$"));
        assert_eq!(net.host_ports(), 3);
        assert!(case.paths().is_empty());

        // An empty [net] is a card that reaches nothing; no [net] is no card.
        let empty = parsed("", "[net]\n");
        let net = net_of(&empty);
        assert!(net.forward.is_empty() && net.peers.is_empty() && net.dials.is_empty() && net.poke.is_none());
        assert_eq!(net.host_ports(), 0);
        assert!(parsed("", "").as_boot().unwrap().net.is_none());
    }

    #[test]
    fn prefixes_hold_what_they_say() {
        let net = |addr: [u8; 4], prefix| Ipv4Net { addr: u32::from(Ipv4Addr::from(addr)), prefix };
        assert_eq!(net([0, 0, 0, 0], 0).mask(), 0);
        assert_eq!(net([10, 0, 9, 1], 32).mask(), u32::MAX);
        assert!(NetSpec::WIDE.contains(Ipv4Addr::new(10, 0, 200, 1)));
        assert!(!NetSpec::WIDE.contains(Ipv4Addr::new(10, 1, 0, 1)));
        assert!(NetSpec::GUEST.contains(NetSpec::HOST) && NetSpec::GUEST.contains(NetSpec::DNS));
        assert!(net([0, 0, 0, 0], 0).contains(Ipv4Addr::new(192, 168, 1, 1)));
        assert_eq!(NetSpec::WIDE.to_string(), "10.0.0.0/16");
        assert_eq!(NetSpec::GUEST.to_string(), "10.0.2.0/24");
    }

    #[test]
    fn forwarded_ports_are_ports_each_once() {
        for bad in [0, 65536, -1] {
            assert_eq!(
                refused("", &format!("[net]\nforward = [7, {bad}]\n")),
                format!("tests/c.toml: net.forward[1]: {bad} is not accepted: a guest TCP port, 1 to 65535")
            );
        }
        assert_eq!(refused("", "[net]\nforward = [7, 22, 7]\n"), "tests/c.toml: net.forward[2]: 7 is named twice");
        assert_eq!(
            refused("", "[net]\nforward = [\"7\"]\n"),
            "tests/c.toml: net.forward[0]: \"7\" is not accepted: net.forward is a list of guest TCP ports, each 1 to 65535, such as [7, 22]"
        );
        assert_eq!(
            refused("", "[net]\nforward = 7\n"),
            "tests/c.toml: net.forward: 7 is not accepted: a list of guest TCP ports, each 1 to 65535, such as [7, 22]"
        );
    }

    #[test]
    fn a_forbidden_prefix_is_a_canonical_prefix_in_a_case_with_peers() {
        let refusal = |prefix: &str| refused("", &format!("[net]\nself_forbidden = [{prefix:?}]\n{PEER_ONE}"));
        assert_eq!(
            refusal("10.0.2.1/24"),
            "tests/c.toml: net.self_forbidden[0]: \"10.0.2.1/24\" is not accepted: its host bits are set; the prefix is \"10.0.2.0/24\""
        );
        assert_eq!(
            refusal("127.0.0.1/0"),
            "tests/c.toml: net.self_forbidden[0]: \"127.0.0.1/0\" is not accepted: its host bits are set; the prefix is \"0.0.0.0/0\""
        );
        for bad in
            ["10.0.2.0/33", "10.0.2.0", "10.0.2/24", "10.0.2.0/", "10.0.2.0/+8", "10.0.2.0/024", "x/8", "10.0.2.0/8/8"]
        {
            assert_eq!(
                refusal(bad),
                format!("tests/c.toml: net.self_forbidden[0]: {bad:?} is not accepted: an IPv4 prefix a.b.c.d/n, n from 0 to 32, such as \"10.0.2.0/24\"")
            );
        }
        assert_eq!(
            refused("", &format!("[net]\nself_forbidden = [\"127.0.0.0/8\", \"127.0.0.0/8\"]\n{PEER_ONE}")),
            "tests/c.toml: net.self_forbidden[1]: \"127.0.0.0/8\" is named twice"
        );
        assert_eq!(
            refused("", "[net]\nself_forbidden = [\"127.0.0.0/8\"]\n"),
            "tests/c.toml: net.self_forbidden: only with [[net.peer]]: the capture it is checked on is judged in a case with peers"
        );
    }

    #[test]
    fn a_peer_lies_in_the_wide_network_outside_the_guests_own() {
        let refusal = |addr: &str| refused("", &format!("[[net.peer]]\naddr = {addr:?}\nconnections = 1\n"));
        for bad in ["10.0.9.100", "10.0.9.100:", "10.0.9.100:65536", "host:7", "10.0.9:7", "[::1]:7", " 10.0.9.100:7"] {
            assert_eq!(
                refusal(bad),
                format!("tests/c.toml: net.peer[0].addr: {bad:?} is not accepted: an IPv4 address and port, a.b.c.d:port, such as \"10.0.9.100:7\"")
            );
        }
        for bad in [
            "10.1.0.1:7",
            "192.168.1.1:7",
            "10.0.2.2:7",
            "10.0.2.3:53",
            "10.0.2.15:7",
            "10.0.2.200:7",
            "10.0.0.0:7",
            "10.0.255.255:7",
        ] {
            assert_eq!(
                refusal(bad),
                format!("tests/c.toml: net.peer[0].addr: {bad:?} is not accepted: a peer lies in 10.0.0.0/16 (the network a case with peers widens to, neither 10.0.0.0 nor 10.0.255.255), outside 10.0.2.0/24 (the guest's own: its address, the gateway 10.0.2.2 and the resolver 10.0.2.3)")
            );
        }
        assert_eq!(
            refusal("10.0.9.100:0"),
            "tests/c.toml: net.peer[0].addr: \"10.0.9.100:0\" is not accepted: port 0; a port from 1 to 65535"
        );
        for good in ["10.0.0.1:1", "10.0.1.255:80", "10.0.3.0:7"] {
            parsed("", &format!("[[net.peer]]\naddr = {good:?}\nconnections = 1\n"));
        }
        assert_eq!(
            refused("", &format!("{PEER_ONE}[[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 0\n")),
            "tests/c.toml: net.peer[1].addr: \"10.0.9.100:7\" is named twice"
        );
        parsed("", &format!("{PEER_ONE}[[net.peer]]\naddr = \"10.0.9.100:8\"\nconnections = 0\n"));
        assert_eq!(
            refused("", "[[net.peer]]\nconnections = 1\n"),
            "tests/c.toml: net.peer[0].addr: required: the peer's IPv4 address and port, such as \"10.0.9.100:7\""
        );
    }

    #[test]
    fn a_peer_expects_0_to_1000_connections_and_one_peer_expects_one() {
        for bad in [-1, 1001] {
            assert_eq!(
                refused("", &format!("[[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = {bad}\n")),
                format!("tests/c.toml: net.peer[0].connections: {bad} is not accepted: the number of connections the guest makes to this peer, 0 to 1000")
            );
        }
        assert_eq!(
            refused("", "[[net.peer]]\naddr = \"10.0.9.100:7\"\n"),
            "tests/c.toml: net.peer[0].connections: required: exactly how many connections the guest makes to this peer, 0 to 1000"
        );
        assert_eq!(
            refused(
                "",
                "[[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 0\n[[net.peer]]\naddr = \"10.0.9.101:7\"\nconnections = 0\n"
            ),
            "tests/c.toml: net.peer: every peer expects 0 connections: a case with peers needs one that expects a connection, whose SYN in the capture shows the capture was live"
        );
        let case = parsed("", "[[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 1000\n");
        assert_eq!(net_of(&case).peers[0].connections, 1000);
    }

    #[test]
    fn a_cut_capture_is_a_self_check_of_a_case_with_peers() {
        assert_eq!(
            refused("", &format!("[net]\ntruncate_capture = true\n{PEER_ONE}")),
            "tests/c.toml: net.truncate_capture: only with must_fail: it cuts the capture on purpose, so the case is a self-check that expects the bench to fail it"
        );
        assert_eq!(
            refused("must_fail = 'capture'", "[net]\ntruncate_capture = true\n"),
            "tests/c.toml: net.truncate_capture: only with [[net.peer]]: the capture it cuts is judged in a case with peers"
        );
        let case = parsed("", &format!("[net]\ntruncate_capture = false\n{PEER_ONE}"));
        assert!(!net_of(&case).truncate_capture);
    }

    #[test]
    fn a_dial_goes_through_a_forwarded_port_and_sends_and_expects_something() {
        let dial =
            |forward: &str, body: &str| refused("", &format!("[net]\nforward = [{forward}]\n[[net.dial]]\n{body}"));
        assert_eq!(
            dial("7, 22", "port = 8\nsend = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].port: 8 is not accepted: a dial connects through a forwarded port, one of net.forward (7, 22)"
        );
        assert_eq!(
            dial("", "port = 8\nsend = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].port: 8 is not accepted: a dial connects through a forwarded port, and net.forward is empty"
        );
        assert_eq!(
            dial("7", "port = 0\nsend = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].port: 0 is not accepted: a port of net.forward, 1 to 65535"
        );
        assert_eq!(
            dial("7", "send = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].port: required: a port of net.forward"
        );
        assert_eq!(
            dial("7", "port = 7\nsend = \"\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].send: empty: the text to send, as written, 1 byte to 64 KiB"
        );
        assert_eq!(
            dial("7", "port = 7\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].send: required: the text to send, as written"
        );
        assert_eq!(
            dial("7", "port = 7\nsend = \"a\"\nexpect = \"\"\n"),
            "tests/c.toml: net.dial[0].expect: empty: the text that must come back, 1 byte to 64 KiB"
        );
        assert_eq!(
            dial("7", "port = 7\nsend = \"a\"\n"),
            "tests/c.toml: net.dial[0].expect: required: the text that must come back"
        );
        let long = "a".repeat(64 * 1024 + 1);
        assert_eq!(
            dial("7", &format!("port = 7\nsend = \"{long}\"\nexpect = \"a\"\n")),
            "tests/c.toml: net.dial[0].send: 65537 bytes is not accepted: at most 65536 (64 KiB)"
        );
        let full = "a".repeat(64 * 1024);
        parsed("", &format!("[net]\nforward = [7]\n[[net.dial]]\nport = 7\nsend = \"{full}\"\nexpect = \"{full}\"\n"));
        assert!(dial("7", "port = 7\nsend = \"a\"\nexpect = \"a\"\nafter = '('\n")
            .starts_with("tests/c.toml: net.dial[0].after: not a valid regex:\n"));
        assert_eq!(
            refused(
                "",
                "[net]\nforward = [7]\n[[net.dial]]\nport = 7\nsend = \"a\"\nexpect = \"a\"\n[[net.dial]]\nport = 8\nsend = \"a\"\nexpect = \"a\"\n"
            ),
            "tests/c.toml: net.dial[1].port: 8 is not accepted: a dial connects through a forwarded port, one of net.forward (7)"
        );
    }

    #[test]
    fn a_poke_is_one_small_datagram_to_a_port_after_a_line() {
        let poke = |body: &str| refused("", &format!("[net.poke]\n{body}"));
        for bad in [0, 65536] {
            assert_eq!(
                poke(&format!("port = {bad}\npayload = \"p\"\nafter = 'x'\n")),
                format!("tests/c.toml: net.poke.port: {bad} is not accepted: the guest's UDP port, 1 to 65535")
            );
        }
        assert_eq!(
            poke("payload = \"p\"\nafter = 'x'\n"),
            "tests/c.toml: net.poke.port: required: the guest's UDP port, 1 to 65535"
        );
        assert_eq!(
            poke("port = 9\nafter = 'x'\n"),
            "tests/c.toml: net.poke.payload: required: the datagram's bytes, as a string"
        );
        assert_eq!(
            poke("port = 9\npayload = \"\"\nafter = 'x'\n"),
            "tests/c.toml: net.poke.payload: empty: the datagram's bytes, 1 to 1472"
        );
        assert_eq!(
            poke(&format!("port = 9\npayload = \"{}\"\nafter = 'x'\n", "p".repeat(1473))),
            "tests/c.toml: net.poke.payload: 1473 bytes is not accepted: at most 1472, so the datagram reaches the guest in one frame, unfragmented"
        );
        assert_eq!(
            poke("port = 9\npayload = \"p\"\n"),
            "tests/c.toml: net.poke.after: required: a regex a shown console line must match; the poke is sent when one first does"
        );
        assert!(poke("port = 9\npayload = \"p\"\nafter = '['\n")
            .starts_with("tests/c.toml: net.poke.after: not a valid regex:\n"));
        let case = parsed("", &format!("[net.poke]\nport = 9\npayload = \"{}\"\nafter = 'x'\n", "p".repeat(1472)));
        assert_eq!(net_of(&case).host_ports(), 1);
    }

    #[test]
    fn a_misspelt_or_mistyped_key_anywhere_in_net_is_refused_in_words() {
        assert_eq!(
            refused("", "[net]\nforwrd = [7]\n"),
            "tests/c.toml: net.forwrd: not a field of [net]; did you mean `forward`? Accepted: forward, self_forbidden, truncate_capture, capture_expect, peer, dial, poke, host_key"
        );
        assert_eq!(
            refused("", &format!("{PEER_ONE}[[net.peer]]\nadr = \"10.0.9.101:7\"\nconnections = 1\n")),
            "tests/c.toml: net.peer[1].adr: not a field of [[net.peer]]; did you mean `addr`? Accepted: addr, connections"
        );
        assert_eq!(
            refused("", "[net]\nforward = [7]\n[[net.dial]]\nport = 7\nsned = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].sned: not a field of [[net.dial]]; did you mean `send`? Accepted: port, send, expect, after, until_closed"
        );
        assert_eq!(
            refused("", "[net.poke]\nport = 9\npaylod = \"p\"\nafter = 'x'\n"),
            "tests/c.toml: net.poke.paylod: not a field of [net.poke]; did you mean `payload`? Accepted: port, payload, after"
        );
        assert_eq!(
            refused("", "[net.peer]\naddr = \"10.0.9.100:7\"\nconnections = 1\n"),
            "tests/c.toml: net.peer: a table is not accepted: [[net.peer]] tables, each with addr and connections"
        );
        assert_eq!(
            refused("", "[net]\nforward = [7]\n[[net.dial]]\nport = \"7\"\nsend = \"a\"\nexpect = \"a\"\n"),
            "tests/c.toml: net.dial[0].port: \"7\" is not accepted: a port of net.forward, such as 7"
        );
        assert_eq!(
            refused("", "[net.poke]\nport = 9\npayload = \"p\"\nafter = 'x'\nlater = 1\n"),
            "tests/c.toml: net.poke.later: not a field of [net.poke]. Accepted: port, payload, after"
        );
        // Every key of every table in [net], given a date, is refused in words, never in serde's.
        let date = "1979-05-27";
        let tables: [(&str, &[crate::fields::Field]); 4] = [
            ("[net]", super::NET),
            ("[[net.peer]]", super::PEER),
            ("[[net.dial]]", super::DIAL),
            ("[net.poke]", super::POKE),
        ];
        for (table, fields) in tables {
            for field in fields {
                let error = refused("", &format!("{table}\n{} = {date}\n", field.name));
                assert!(
                    error.contains(&format!(" is not accepted: {}", field.accepted)) && !error.contains("invalid type"),
                    "{table} {}: {error}",
                    field.name
                );
            }
        }
    }
}
