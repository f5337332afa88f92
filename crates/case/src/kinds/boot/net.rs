//! A boot case's `[net]`: the forwarded ports, the peers the guest may reach
//! (`[[net.peer]]`), the bench's dials in (`[[net.dial]]`), the one UDP poke
//! (`[net.poke]`), and the capture's rules (`self_forbidden`, `truncate_capture`).

use std::net::{Ipv4Addr, SocketAddrV4};

use super::raw::{RawNet, DIAL, NET, PEER, POKE};
use crate::common::Ctx;
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
    let mut forward: Vec<u16> = Vec::new();
    for (index, port) in raw.forward.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.forward[{index}]");
        let port = port_number(ctx, &field, *port, "a guest TCP port")?;
        if forward.contains(&port) {
            return Err(ctx.err(field, format!("{port} is named twice")));
        }
        forward.push(port);
    }

    let mut self_forbidden: Vec<Ipv4Net> = Vec::new();
    for (index, text) in raw.self_forbidden.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.self_forbidden[{index}]");
        let prefix = ipv4_net(ctx, &field, text)?;
        if self_forbidden.contains(&prefix) {
            return Err(ctx.err(field, format!("{text:?} is named twice")));
        }
        self_forbidden.push(prefix);
    }

    let mut peers: Vec<Peer> = Vec::new();
    for (index, raw) in raw.peer.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.peer[{index}]");
        let addr = match &raw.addr {
            None => {
                return Err(ctx.err(
                    format!("{field}.addr"),
                    "required: the peer's IPv4 address and port, such as \"10.0.9.100:7\"",
                ))
            }
            Some(text) => peer_addr(ctx, &format!("{field}.addr"), text)?,
        };
        if peers.iter().any(|peer| peer.addr == addr) {
            return Err(ctx.err(format!("{field}.addr"), format!("\"{addr}\" is named twice")));
        }
        let connections = match raw.connections {
            None => {
                return Err(ctx.err(
                    format!("{field}.connections"),
                    format!("required: exactly how many connections the guest makes to this peer, 0 to {CONNECTIONS_MAX}"),
                ))
            }
            Some(n @ 0..=CONNECTIONS_MAX) => n as u32,
            Some(n) => {
                return Err(ctx.err(
                    format!("{field}.connections"),
                    format!("{n} is not accepted: the number of connections the guest makes to this peer, 0 to {CONNECTIONS_MAX}"),
                ))
            }
        };
        peers.push(Peer { addr, connections });
    }
    if !peers.is_empty() && peers.iter().all(|peer| peer.connections == 0) {
        return Err(ctx.err(
            "net.peer",
            "every peer expects 0 connections: a case with peers needs one that expects a connection, whose SYN in the capture shows the capture was live",
        ));
    }
    if !self_forbidden.is_empty() && peers.is_empty() {
        return Err(ctx.err(
            "net.self_forbidden",
            "only with [[net.peer]]: the capture it is checked on is judged in a case with peers",
        ));
    }
    let truncate_capture = raw.truncate_capture.unwrap_or(false);
    if truncate_capture && !self_check {
        return Err(ctx.err(
            "net.truncate_capture",
            "only with must_fail: it cuts the capture on purpose, so the case is a self-check that expects the bench to fail it",
        ));
    }
    if truncate_capture && peers.is_empty() {
        return Err(ctx.err(
            "net.truncate_capture",
            "only with [[net.peer]]: the capture it cuts is judged in a case with peers",
        ));
    }

    let mut dials = Vec::new();
    for (index, raw) in raw.dial.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("net.dial[{index}]");
        let port = match raw.port {
            None => return Err(ctx.err(format!("{field}.port"), "required: a port of net.forward")),
            Some(port) => port_number(ctx, &format!("{field}.port"), port, "a port of net.forward")?,
        };
        if !forward.contains(&port) {
            let ports = match forward.as_slice() {
                [] => "and net.forward is empty".to_string(),
                ports => {
                    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                    format!("one of net.forward ({})", ports.join(", "))
                }
            };
            return Err(ctx.err(
                format!("{field}.port"),
                format!("{port} is not accepted: a dial connects through a forwarded port, {ports}"),
            ));
        }
        let send = dial_text(ctx, &format!("{field}.send"), raw.send.as_deref(), "the text to send, as written")?;
        let expect = dial_text(ctx, &format!("{field}.expect"), raw.expect.as_deref(), "the text that must come back")?;
        let after = raw.after.as_deref().map(|source| ctx.regex(format!("{field}.after"), source)).transpose()?;
        dials.push(Dial { port, send, expect, after, until_closed: raw.until_closed.unwrap_or(false) });
    }

    let poke = match &raw.poke {
        None => None,
        Some(raw) => {
            let port = match raw.port {
                None => return Err(ctx.err("net.poke.port", "required: the guest's UDP port, 1 to 65535")),
                // UDP: a TCP port of forward is another port, and may have the same number.
                Some(port) => port_number(ctx, "net.poke.port", port, "the guest's UDP port")?,
            };
            let payload = match raw.payload.as_deref() {
                None => return Err(ctx.err("net.poke.payload", "required: the datagram's bytes, as a string")),
                Some("") => {
                    return Err(ctx.err("net.poke.payload", format!("empty: the datagram's bytes, 1 to {POKE_BYTES_MAX}")))
                }
                Some(payload) if payload.len() > POKE_BYTES_MAX => {
                    return Err(ctx.err(
                        "net.poke.payload",
                        format!("{} bytes is not accepted: at most {POKE_BYTES_MAX}, so the datagram reaches the guest in one frame, unfragmented", payload.len()),
                    ))
                }
                Some(payload) => payload.to_string(),
            };
            let after = match raw.after.as_deref() {
                None => {
                    return Err(ctx.err(
                        "net.poke.after",
                        "required: a regex a shown console line must match; the poke is sent when one first does",
                    ))
                }
                Some(source) => ctx.regex("net.poke.after".into(), source)?,
            };
            Some(Poke { port, payload, after })
        }
    };

    Ok(Some(NetSpec { forward, self_forbidden, truncate_capture, peers, dials, poke }))
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
