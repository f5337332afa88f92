//! A virtio-net card: a receive queue (0) the driver fills with buffers and the card
//! delivers frames into, and a transmit queue (1) whose frames it takes. Every buffer is
//! checked (one descriptor inside the driver's memory, the right way round and size; a
//! sent frame after a zeroed header and, when told, the very frame the driver was asked
//! to send); each answer is honest or as the [`Lies`] say; the card keeps the books of
//! what it did ([`Sent`], the buffers posted) for an oracle to judge the driver by.

use std::collections::BTreeMap;

use virtio::mmio::F_VERSION_1;
use virtio::net::{self, BUFFER, FRAME_MAX, HEADER};

use super::memory::Memory;
use super::transport::{Descriptor, Device, Model, Transport};

pub const RX: usize = 0;
pub const TX: usize = 1;

/// Ways the card lies, on every answer until told otherwise. All off: honest.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lies {
    /// Never answers a sent frame.
    pub silent: bool,
    /// Says in the transmit queue's used flags that it wants no notification.
    pub no_notify: bool,
    /// Moves the used index by this much more than it completed.
    pub jump: u16,
    /// Puts this id in the used element instead of the chain's head.
    pub id: Option<u32>,
    /// Puts this length in the used element instead of the bytes written.
    pub len: Option<u32>,
    /// Writes this gso_type into received headers.
    pub gso: u8,
    /// Random bytes over the queue's descriptor table and available ring after answering.
    pub scribble: Option<u64>,
}

/// How the card answered the last frame sent, for the oracle.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub head: u16,
    pub id: u32,
    pub len: u32,
    /// How far the used index moved.
    pub delta: u16,
}

/// The card and its books.
pub struct Card {
    pub mac: [u8; 6],
    pub lies: Lies,
    /// Receive buffers posted and not yet filled, in order: (id, device address).
    pub posted: Vec<(u16, u64)>,
    /// The buffer each receive id last named (as the driver posted it).
    pub rx_addr: BTreeMap<u16, u64>,
    /// The frame the driver was asked to send, when the card is told.
    pub want_frame: Option<Vec<u8>>,
    /// The frames taken from the transmit queue, header included.
    pub sent: Vec<Vec<u8>>,
    /// The answer to the last frame sent (None: none since it was cleared).
    pub answer: Option<Sent>,
}

impl Card {
    pub fn new(mac: [u8; 6]) -> Card {
        Card {
            mac,
            lies: Lies::default(),
            posted: Vec::new(),
            rx_addr: BTreeMap::new(),
            want_frame: None,
            sent: Vec::new(),
            answer: None,
        }
    }

    /// The transport of a card offering `offered`, each queue of `queue_max`; the driver
    /// may take only VERSION_1 and MAC.
    pub fn transport(offered: u64, queue_max: [u32; 2]) -> Transport {
        let mut transport = Transport::new(net::DEVICE_ID, offered, &queue_max);
        transport.takes = F_VERSION_1 | net::F_MAC;
        transport
    }

    /// The next new chain of queue `q`: its head and its one descriptor; None when there
    /// is none, or (and the violation) when it is not one descriptor inside the driver's
    /// memory.
    fn take(transport: &mut Transport, mem: &mut Memory, q: usize) -> Option<(u16, Descriptor)> {
        let queue = &mut transport.queues[q];
        let size = queue.num;
        if queue.avail_idx(mem) == queue.last_avail {
            return None;
        }
        let head = queue.next_head(mem);
        if u32::from(head) >= size {
            mem.violate("a chain head beyond the queue", format!("queue {q}: head {head} of {size}"));
            return None;
        }
        let d = queue.descriptor(mem, head)?;
        if d.flags & Descriptor::NEXT != 0 || mem.at(d.addr, d.len as usize).is_none() {
            mem.violate(
                "a chain that is not one descriptor in the driver's memory",
                format!("{:#x}+{} {:#x}", d.addr, d.len, d.flags),
            );
            return None;
        }
        Some((head, d))
    }

    /// Reads every receive buffer the driver posted since the last look.
    fn sync_rx(&mut self, transport: &mut Transport, mem: &mut Memory) {
        if transport.queues[RX].ready == 0 {
            return;
        }
        while let Some((head, d)) = Self::take(transport, mem, RX) {
            if d.flags & Descriptor::WRITE == 0 || d.len as usize != BUFFER {
                mem.violate("a receive buffer unlike the driver's", format!("{:#x}+{} {:#x}", d.addr, d.len, d.flags));
                return;
            }
            self.posted.push((head, d.addr));
            self.rx_addr.insert(head, d.addr);
        }
    }

    /// The card's work on a notification of the transmit queue: the new chain, checked,
    /// and answered as the lies say.
    fn transmit(&mut self, transport: &mut Transport, mem: &mut Memory) {
        let Some((head, d)) = Self::take(transport, mem, TX) else {
            mem.violate("a transmit notification without a frame", String::new());
            return;
        };
        let (addr, len, flags) = (d.addr, d.len, d.flags);
        let mut bytes = vec![0u8; len as usize];
        mem.read(addr, &mut bytes);
        if flags & Descriptor::WRITE != 0
            || len as usize > BUFFER
            || len as usize <= HEADER
            || bytes[..HEADER] != [0; HEADER]
        {
            mem.violate("a transmit chain unlike a frame", format!("{addr:#x}+{len} {flags:#x}"));
            return;
        }
        if self.want_frame.as_ref().is_some_and(|want| want[..] != bytes[HEADER..]) {
            mem.violate("the card got other bytes than the driver was asked to send", format!("{len} bytes"));
            return;
        }
        self.sent.push(bytes);
        let lies = self.lies;
        if lies.silent {
            return;
        }
        let id = lies.id.unwrap_or(u32::from(head));
        let used_len = lies.len.unwrap_or(0);
        transport.queues[TX].complete(mem, id, used_len, lies.jump);
        transport.interrupt |= 1;
        if let Some(seed) = lies.scribble {
            transport.queues[TX].scribble(mem, seed, false);
        }
        self.answer = Some(Sent { head, id, len: used_len, delta: 1u16.wrapping_add(lies.jump) });
    }

    /// Delivers `frame` (at most FRAME_MAX bytes: the caller's to keep) into the next
    /// posted receive buffer, as the lies say; false when the driver posted none.
    fn deliver(&mut self, frame: &[u8], transport: &mut Transport, mem: &mut Memory) -> bool {
        assert!(frame.len() <= FRAME_MAX, "a frame of {} bytes delivered: longer than a buffer holds", frame.len());
        self.sync_rx(transport, mem);
        if self.posted.is_empty() {
            return false;
        }
        let (head, addr) = self.posted.remove(0);
        let lies = self.lies;
        let mut bytes = vec![0u8; HEADER];
        bytes[1] = lies.gso;
        bytes.extend_from_slice(frame);
        mem.write(addr, &bytes);
        let id = lies.id.unwrap_or(u32::from(head));
        transport.queues[RX].complete(mem, id, lies.len.unwrap_or(bytes.len() as u32), lies.jump);
        transport.interrupt |= 1;
        if let Some(seed) = lies.scribble {
            transport.queues[RX].scribble(mem, seed, false);
        }
        true
    }
}

impl Device for Card {
    fn config(&self) -> Vec<u8> {
        let mut config = vec![0u8; 8];
        config[..6].copy_from_slice(&self.mac);
        config[6] = 1;
        config
    }

    fn notify(&mut self, queue: u32, transport: &mut Transport, mem: &mut Memory) {
        if queue == TX as u32 && self.lies.no_notify {
            mem.violate("a transmit notification after the card said it needs none", String::new());
        } else if queue == TX as u32 {
            self.transmit(transport, mem);
        }
    }
}

impl Model<Card> {
    /// Reads every receive buffer the driver posted since the card last looked.
    pub fn sync_rx(&mut self) {
        let Model { transport, mem, device } = self;
        device.sync_rx(transport, mem);
    }

    /// Delivers `frame` into the next posted receive buffer, as the card's lies say;
    /// false when the driver posted none.
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        let Model { transport, mem, device } = self;
        device.deliver(frame, transport, mem)
    }

    /// Before a send of `frame`: the card expects it, answers as `lies` say, and says in
    /// the transmit queue's used flags whether it wants a notification.
    pub fn begin_send(&mut self, frame: &[u8], lies: Lies) {
        self.device.lies = lies;
        self.device.want_frame = Some(frame.to_vec());
        self.device.answer = None;
        let used = self.transport.queues[TX].addrs[2];
        self.mem.write(used, &u16::from(lies.no_notify).to_le_bytes());
    }
}
