//! A DHCP server for the stack's client, honest by its script or lying when told.
//!
//! It answers a DISCOVER with an OFFER and a REQUEST with an ACK (nothing else), from its
//! own MAC and address to the client's MAC and the address it offers. The n-th client (by
//! MAC, in the order they first ask) is offered the script's `first` address plus n. Each
//! answer may carry one [`Lie`], which a [`Liar`] picks once the server has read the
//! request: the network world of hostfuzz draws them from its decisions; the guest's host
//! tests script their lies through [`Script`] and answer with none ([`Server::answer`]).
//!
//! An answer's payload, byte by byte: BOOTREPLY, Ethernet, 6-byte addresses, the
//! request's transaction id, the offered address (`yiaddr`), the server's address
//! (`siaddr`), the client's MAC, the magic cookie, then the options in this order: message
//! type (53), server identifier (54), lease time (51, when the script has one), subnet mask
//! (1), router (3, when it has one), DNS servers (6), END. The server keeps every ACK's
//! payload as sent ([`Server::acks`]), and every request it saw ([`Server::seen`]).

use crate::frame::{be16, ip4, udp_frame};

/// The magic cookie before a DHCP message's options.
pub const MAGIC: [u8; 4] = [99, 130, 83, 99];
/// Message types (option 53).
pub const DISCOVER: u8 = 1;
pub const OFFER: u8 = 2;
pub const REQUEST: u8 = 3;
pub const ACK: u8 = 5;
pub const NAK: u8 = 6;

/// A client's message to port 67, as the server reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Its message type (option 53; 0 when it has none).
    pub kind: u8,
    /// Its transaction id.
    pub xid: [u8; 4],
    /// The address it says it holds (`ciaddr`; 0.0.0.0 before a lease).
    pub ciaddr: [u8; 4],
    /// The client's MAC (`chaddr`).
    pub chaddr: [u8; 6],
    /// The IPv4 source address it was sent from.
    pub source: [u8; 4],
}

/// The DHCP client message an Ethernet frame holds (IPv4, UDP to port 67, the magic
/// cookie in place), or `None` for any other frame.
pub fn request(frame: &[u8]) -> Option<Request> {
    if be16(frame, 12)? != 0x0800 || *frame.get(23)? != 17 {
        return None;
    }
    let udp = 14 + usize::from(frame[14] & 0xf) * 4;
    if be16(frame, udp + 2)? != 67 {
        return None;
    }
    let p = frame.get(udp + 8..)?;
    if p.get(236..240)? != MAGIC {
        return None;
    }
    let kind = options(p).iter().find(|(code, value)| *code == 53 && value.len() == 1).map_or(0, |(_, v)| v[0]);
    let chaddr = p.get(28..34)?.try_into().ok()?;
    Some(Request { kind, xid: ip4(p, 4)?, ciaddr: ip4(p, 12)?, chaddr, source: ip4(frame, 26)? })
}

/// Every option of a DHCP payload `p`, in order, up to END or the last whole one.
pub fn options(p: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    let mut i = 240;
    while let Some(&code) = p.get(i) {
        match code {
            0 => i += 1,
            255 => break,
            _ => {
                let Some(&len) = p.get(i + 1) else { break };
                let Some(value) = p.get(i + 2..i + 2 + usize::from(len)) else { break };
                out.push((code, value));
                i += 2 + usize::from(len);
            }
        }
    }
    out
}

/// What the server answers with, every time.
#[derive(Clone, Debug)]
pub struct Script {
    /// The lease time (option 51); none: the option is left out.
    pub lease_secs: Option<u32>,
    /// The router (option 3); none: left out.
    pub router: Option<[u8; 4]>,
    pub mask: [u8; 4],
    /// The DNS servers (option 6), in order.
    pub dns: Vec<[u8; 4]>,
    /// The address offered to the first client; the n-th gets its last byte plus n.
    pub first: [u8; 4],
    /// The server identifier in ACKs (an OFFER's is the server's own address).
    pub ack_server: [u8; 4],
}

impl Script {
    /// QEMU's user network, as the guest sees it from `server` (10.0.2.2): a /24 whose
    /// first client is 10.0.2.15, the server the router, 10.0.2.3 the DNS server, a lease
    /// of `lease_secs`.
    pub fn qemu(server: [u8; 4], lease_secs: Option<u32>) -> Script {
        Script {
            lease_secs,
            router: Some(server),
            mask: [255, 255, 255, 0],
            dns: vec![[10, 0, 2, 3]],
            first: [10, 0, 2, 15],
            ack_server: server,
        }
    }
}

/// One answer's lie, instead of the script's truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lie {
    /// No answer.
    Silence,
    /// An OFFER where an ACK was due (a renewal answered as new).
    Offer,
    /// The addresses move on by this much, from this answer on (a renewal, or a
    /// request, answered with an ACK for a new address).
    NewAddress(u8),
    /// A NAK where an answer was due.
    Nak,
    /// The payload cut this many bytes past byte 248 (inside the server identifier, or
    /// an option after it: no END).
    Cut(usize),
    /// This many bytes of the payload overwritten (where and with what: the liar's
    /// [`Liar::scribble`], asked once each).
    Scribble(usize),
    /// This address offered.
    Address([u8; 4]),
    /// This subnet mask.
    Mask([u8; 4]),
    /// This router, or none.
    Router(Option<[u8; 4]>),
    /// This lease time, or none.
    LeaseTime(Option<u32>),
    /// Another transaction id (its first byte's low bit flipped).
    OtherXid,
    /// These bytes as the whole DHCP payload.
    Junk(Vec<u8>),
}

/// Who picks an answer's lie.
pub trait Liar {
    /// The lie for the answer to `request`, whose address would be `offered`; `None`: the
    /// script's truth.
    fn lie(&mut self, request: &Request, offered: [u8; 4]) -> Option<Lie>;
    /// For [`Lie::Scribble`], each byte it overwrites: where (below `len`, the payload's
    /// length) and with what.
    fn scribble(&mut self, len: usize) -> (usize, u8);
}

/// The liar that never lies.
struct Truth;

impl Liar for Truth {
    fn lie(&mut self, _: &Request, _: [u8; 4]) -> Option<Lie> {
        None
    }

    fn scribble(&mut self, _: usize) -> (usize, u8) {
        unreachable!("the truth scribbles nothing")
    }
}

/// The server: its MAC and address, its script, and its books.
#[derive(Clone, Debug)]
pub struct Server {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub script: Script,
    /// Each client's MAC, in the order they first asked.
    pub clients: Vec<[u8; 6]>,
    /// Every client message it read, answered or not, in order.
    pub seen: Vec<Request>,
    /// Every ACK's DHCP payload, as sent (after its lie).
    pub acks: Vec<Vec<u8>>,
    /// How far [`Lie::NewAddress`] moved every client's address.
    moved: u8,
}

impl Server {
    pub fn new(mac: [u8; 6], ip: [u8; 4], script: Script) -> Server {
        Server { mac, ip, script, clients: Vec::new(), seen: Vec::new(), acks: Vec::new(), moved: 0 }
    }

    /// The script's answer to `frame`, if it holds a DISCOVER or a REQUEST.
    pub fn answer(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        self.answer_lying(frame, &mut Truth)
    }

    /// The answer to `frame`, if it holds a DISCOVER or a REQUEST, with the lie `liar`
    /// picks once the server has read the request.
    pub fn answer_lying(&mut self, frame: &[u8], liar: &mut dyn Liar) -> Option<Vec<u8>> {
        let req = request(frame)?;
        self.seen.push(req);
        let mut reply = match req.kind {
            DISCOVER => OFFER,
            REQUEST => ACK,
            _ => return None,
        };
        let n = match self.clients.iter().position(|m| *m == req.chaddr) {
            Some(n) => n,
            None => {
                self.clients.push(req.chaddr);
                self.clients.len() - 1
            }
        };
        let address = |moved: u8| {
            let mut a = self.script.first;
            a[3] = a[3].wrapping_add(n as u8).wrapping_add(moved);
            a
        };
        let mut yiaddr = address(self.moved);
        let (mut mask, mut router, mut lease) = (self.script.mask, self.script.router, self.script.lease_secs);
        let (mut xid, mut cut, mut scribbled) = (req.xid, None, 0);
        match liar.lie(&req, yiaddr) {
            None => {}
            Some(Lie::Silence) => return None,
            Some(Lie::Offer) => reply = OFFER,
            Some(Lie::NewAddress(by)) => {
                self.moved = self.moved.wrapping_add(by);
                yiaddr = address(self.moved);
            }
            Some(Lie::Nak) => reply = NAK,
            Some(Lie::Cut(k)) => cut = Some(k),
            Some(Lie::Scribble(count)) => scribbled = count,
            Some(Lie::Address(a)) => yiaddr = a,
            Some(Lie::Mask(m)) => mask = m,
            Some(Lie::Router(r)) => router = r,
            Some(Lie::LeaseTime(l)) => lease = l,
            Some(Lie::OtherXid) => xid[0] ^= 1,
            Some(Lie::Junk(bytes)) => return Some(udp_frame(self.mac, req.chaddr, self.ip, yiaddr, (67, 68), &bytes)),
        }
        let mut p = vec![0u8; 240];
        p[0] = 2;
        p[1] = 1;
        p[2] = 6;
        p[4..8].copy_from_slice(&xid);
        p[16..20].copy_from_slice(&yiaddr);
        p[20..24].copy_from_slice(&self.ip);
        p[28..34].copy_from_slice(&req.chaddr);
        p[236..240].copy_from_slice(&MAGIC);
        let server_id = if reply == ACK { self.script.ack_server } else { self.ip };
        p.extend_from_slice(&[53, 1, reply, 54, 4]);
        p.extend_from_slice(&server_id);
        if let Some(secs) = lease {
            p.extend_from_slice(&[51, 4]);
            p.extend_from_slice(&secs.to_be_bytes());
        }
        p.extend_from_slice(&[1, 4]);
        p.extend_from_slice(&mask);
        if let Some(r) = router {
            p.extend_from_slice(&[3, 4]);
            p.extend_from_slice(&r);
        }
        p.extend_from_slice(&[6, 4 * self.script.dns.len() as u8]);
        for server in &self.script.dns {
            p.extend_from_slice(server);
        }
        p.push(255);
        if let Some(k) = cut {
            p.truncate(248 + k);
        }
        for _ in 0..scribbled {
            let (at, byte) = liar.scribble(p.len());
            p[at] = byte;
        }
        if reply == ACK {
            self.acks.push(p.clone());
        }
        Some(udp_frame(self.mac, req.chaddr, self.ip, yiaddr, (67, 68), &p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const SERVER: [u8; 4] = [10, 0, 2, 2];

    /// A client's message of type `kind` from `source`, saying it holds `ciaddr`.
    fn asks(kind: u8, client: [u8; 6], source: [u8; 4], ciaddr: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 240];
        p[0] = 1;
        p[4..8].copy_from_slice(&[1, 2, 3, 4]);
        p[12..16].copy_from_slice(&ciaddr);
        p[28..34].copy_from_slice(&client);
        p[236..240].copy_from_slice(&MAGIC);
        p.extend_from_slice(&[53, 1, kind, 255]);
        udp_frame(client, [0xff; 6], source, [255; 4], (68, 67), &p)
    }

    fn payload(frame: &[u8]) -> &[u8] {
        &frame[42..]
    }

    #[test]
    fn a_discover_gets_an_offer_and_a_request_an_ack_with_the_scripts_terms() {
        let mut server = Server::new([2; 6], SERVER, Script::qemu(SERVER, Some(60)));
        let offer = server.answer(&asks(DISCOVER, CLIENT, [0; 4], [0; 4])).unwrap();
        assert_eq!((&offer[..6], &offer[6..12]), (&CLIENT[..], &[2u8; 6][..]));
        let p = payload(&offer);
        assert_eq!(
            (p[0], &p[4..8], ip4(p, 16), ip4(p, 20)),
            (2, &[1u8, 2, 3, 4][..], Some([10, 0, 2, 15]), Some(SERVER))
        );
        let opts = options(p);
        let codes: Vec<u8> = opts.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, [53, 54, 51, 1, 3, 6]);
        assert_eq!(opts[0].1, [OFFER]);
        assert_eq!(opts[2].1, 60u32.to_be_bytes());
        assert!(server.acks.is_empty(), "an OFFER is no ACK");
        let ack = server.answer(&asks(REQUEST, CLIENT, [0; 4], [0; 4])).unwrap();
        assert_eq!(options(payload(&ack))[0].1, [ACK]);
        assert_eq!(server.acks, [payload(&ack).to_vec()]);
        // Another client gets the next address; a release gets nothing but is seen.
        let other = server.answer(&asks(DISCOVER, [7; 6], [0; 4], [0; 4])).unwrap();
        assert_eq!(ip4(payload(&other), 16), Some([10, 0, 2, 16]));
        assert_eq!(server.answer(&asks(7, CLIENT, [10, 0, 2, 15], [10, 0, 2, 15])), None);
        let kinds: Vec<u8> = server.seen.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [DISCOVER, REQUEST, DISCOVER, 7]);
        assert_eq!(server.seen[3].source, [10, 0, 2, 15]);
    }

    #[test]
    fn the_script_leaves_out_what_it_does_not_have_and_names_its_ack_server() {
        let script = Script { lease_secs: None, router: None, ack_server: [10, 0, 2, 9], ..Script::qemu(SERVER, None) };
        let mut server = Server::new([2; 6], SERVER, script);
        let ack = server.answer(&asks(REQUEST, CLIENT, [0; 4], [0; 4])).unwrap();
        let opts = options(payload(&ack));
        assert_eq!(opts.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [53, 54, 1, 6]);
        assert_eq!(opts[1].1, [10, 0, 2, 9]);
    }

    #[test]
    fn each_lie_changes_what_it_says_and_nothing_else() {
        let fresh = || Server::new([2; 6], SERVER, Script::qemu(SERVER, Some(60)));
        let req = asks(REQUEST, CLIENT, [0; 4], [0; 4]);
        /// Tells one lie; scribbles 0xee over the last byte.
        struct Once(Option<Lie>);
        impl Liar for Once {
            fn lie(&mut self, _: &Request, _: [u8; 4]) -> Option<Lie> {
                self.0.take()
            }
            fn scribble(&mut self, len: usize) -> (usize, u8) {
                (len - 1, 0xee)
            }
        }
        let told = |lie: Lie| {
            let mut s = fresh();
            let answer = s.answer_lying(&req, &mut Once(Some(lie)));
            (answer, s)
        };
        assert_eq!(told(Lie::Silence).0, None);
        let (offer, s) = told(Lie::Offer);
        assert_eq!(options(payload(&offer.unwrap()))[0].1, [OFFER]);
        assert!(s.acks.is_empty());
        let (moved, mut s) = told(Lie::NewAddress(3));
        assert_eq!(ip4(payload(&moved.unwrap()), 16), Some([10, 0, 2, 18]));
        assert_eq!(ip4(payload(&s.answer(&req).unwrap()), 16), Some([10, 0, 2, 18]), "moved for good");
        assert_eq!(options(payload(&told(Lie::Nak).0.unwrap()))[0].1, [NAK]);
        assert_eq!(payload(&told(Lie::Cut(2)).0.unwrap()).len(), 250);
        assert_eq!(*payload(&told(Lie::Scribble(1)).0.unwrap()).last().unwrap(), 0xee);
        assert_eq!(ip4(payload(&told(Lie::Address([127, 0, 0, 5])).0.unwrap()), 16), Some([127, 0, 0, 5]));
        let masked = told(Lie::Mask([255, 0, 255, 0])).0.unwrap();
        assert!(options(payload(&masked)).contains(&(1, &[255, 0, 255, 0][..])));
        let routed = told(Lie::Router(None)).0.unwrap();
        assert!(!options(payload(&routed)).iter().any(|(c, _)| *c == 3));
        let timed = told(Lie::LeaseTime(Some(0))).0.unwrap();
        assert!(options(payload(&timed)).contains(&(51, &[0, 0, 0, 0][..])));
        assert_eq!(&payload(&told(Lie::OtherXid).0.unwrap())[4..8], [0, 2, 3, 4]);
        assert_eq!(payload(&told(Lie::Junk(vec![9; 5])).0.unwrap()), [9; 5]);
    }

    #[test]
    fn only_a_dhcp_client_message_is_a_request() {
        let mut not_dhcp = asks(DISCOVER, CLIENT, [0; 4], [0; 4]);
        assert!(request(&not_dhcp).is_some());
        not_dhcp[42 + 236] ^= 1;
        assert_eq!(request(&not_dhcp), None, "no magic cookie");
        let to_68 = udp_frame(CLIENT, [0xff; 6], [0; 4], [255; 4], (67, 68), &[0; 300]);
        assert_eq!(request(&to_68), None);
        assert_eq!(request(&[0; 20]), None);
    }
}
