//! A virtio-net driver (virtio 1.2, 5.1): raw Ethernet frames, no offloads. The receive
//! queue (0) is kept full of buffers of one whole frame each; the transmit queue (1)
//! carries one frame at a time, and a send waits for the device to take it back.
//!
//! Negotiated: VIRTIO_NET_F_MAC and VERSION_1, nothing else, so every buffer starts with
//! the 12-byte `virtio_net_hdr` (the version 1 layout, num_buffers included) and no frame
//! is longer than 1514 bytes. Every used element is checked by the queue (its id in
//! flight, its length within the buffer) and then by this driver: a received length
//! shorter than the header is a lie that ends the driver's trust; a frame the device
//! should not have made (shorter than an Ethernet header, or a GSO frame nobody asked
//! for) is dropped and counted.

use crate::mmio::{Mmio, Transport, F_VERSION_1};
use crate::queue::{Layout, Queue, MAX_SIZE};
use crate::{Dma, Error};

/// The device id of a network card.
pub const DEVICE_ID: u32 = 1;
/// The configuration's mac is the card's address.
pub const F_MAC: u64 = 1 << 5;

/// The `virtio_net_hdr` before every frame (version 1: with num_buffers).
pub const HEADER: usize = 12;
/// The longest frame: an Ethernet header and a 1500-byte payload, no FCS.
pub const FRAME_MAX: usize = 1514;
/// The shortest frame: an Ethernet header.
pub const FRAME_MIN: usize = 14;
/// One buffer: the header and the longest frame.
pub const BUFFER: usize = HEADER + FRAME_MAX;
/// The receive buffers kept with the device.
pub const RX_BUFFERS: u16 = 8;
/// The transmit queue's size at most (one frame is in flight at a time).
const TX_SIZE: u16 = 2;

const RX: u32 = 0;
const TX: u32 = 1;
/// No receive buffer behind a descriptor id.
const NO_BUFFER: u8 = u8::MAX;

const RX_RING: usize = Layout::new(RX_BUFFERS).total;
const TX_RING: usize = Layout::new(TX_SIZE).total;

/// The bytes of driver memory [`Net::new`] needs (with room to align its parts).
pub const MEMORY: usize = RX_RING + 16 + TX_RING + 16 + (RX_BUFFERS as usize + 1) * BUFFER;

/// What `setup` lays out for a `Net`.
struct Parts {
    rx: Queue,
    tx: Queue,
    rx_buffers: Dma,
    tx_buffer: Dma,
    mac: [u8; 6],
}

/// A network card, initialised and live, its receive queue full.
pub struct Net<M: Mmio> {
    transport: Transport<M>,
    rx: Queue,
    tx: Queue,
    /// RX_BUFFERS buffers of BUFFER bytes, one after the other.
    rx_buffers: Dma,
    tx_buffer: Dma,
    /// Which receive buffer each descriptor id heads, while the device holds it.
    rx_of: [u8; MAX_SIZE as usize],
    mac: [u8; 6],
    features: u64,
    poll_limit: u32,
    dropped: u64,
    broken: bool,
}

impl<M: Mmio> Net<M> {
    /// Probes and initialises the card behind `mmio`, with its queues and buffers in
    /// `memory` ([`MEMORY`] bytes, 16-aligned), and gives the device every receive
    /// buffer. Refuses a device that is not a network card, one that gives no MAC, and a
    /// MAC that is not a unicast address (multicast bit set, or all zeros); the device is
    /// left FAILED.
    pub fn new(mmio: M, memory: Dma) -> Result<Net<M>, Error> {
        let mut transport = Transport::probe(mmio)?;
        if transport.device_id() != DEVICE_ID {
            return Err(Error::WrongDevice(transport.device_id()));
        }
        let features = transport.init(F_MAC | F_VERSION_1)?;
        let parts = match Self::setup(&mut transport, memory, features) {
            Ok(parts) => parts,
            Err(error) => {
                transport.fail();
                return Err(error);
            }
        };
        let mut net = Net {
            transport,
            rx: parts.rx,
            tx: parts.tx,
            rx_buffers: parts.rx_buffers,
            tx_buffer: parts.tx_buffer,
            rx_of: [NO_BUFFER; MAX_SIZE as usize],
            mac: parts.mac,
            features,
            poll_limit: 1 << 24,
            dropped: 0,
            broken: false,
        };
        if let Err(error) = net.fill().and_then(|()| net.transport.driver_ok()) {
            net.transport.fail();
            return Err(error);
        }
        // No notification before DRIVER_OK (virtio 1.2, 3.1.1): the buffers filled
        // before it are announced now.
        net.transport.notify(RX);
        Ok(net)
    }

    /// The MAC, checked, and the queues and buffers laid out in `memory`.
    fn setup(transport: &mut Transport<M>, memory: Dma, features: u64) -> Result<Parts, Error> {
        if features & F_MAC == 0 {
            return Err(Error::NoMac);
        }
        let mac = transport.read_config(|word| {
            let (low, high) = (word(0).to_le_bytes(), word(4).to_le_bytes());
            [low[0], low[1], low[2], low[3], high[0], high[1]]
        })?;
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(Error::BadMac(mac));
        }
        let (rx_ring, rest) = memory.split(RX_RING, 16)?;
        let (tx_ring, rest) = rest.split(TX_RING, 16)?;
        let (rx_buffers, rest) = rest.split(RX_BUFFERS as usize * BUFFER, 1)?;
        let (tx_buffer, _) = rest.split(BUFFER, 1)?;
        let rx = transport.setup_queue(RX, rx_ring, RX_BUFFERS)?;
        let tx = transport.setup_queue(TX, tx_ring, TX_SIZE)?;
        Ok(Parts { rx, tx, rx_buffers, tx_buffer, mac })
    }

    /// Puts every receive buffer in the queue, before DRIVER_OK and without a
    /// notification (the queue may be smaller than RX_BUFFERS when the device's maximum
    /// is: then only as many as it holds).
    fn fill(&mut self) -> Result<(), Error> {
        let count = RX_BUFFERS.min(self.rx.size());
        for buffer in 0..count as u8 {
            self.post(buffer)?;
        }
        Ok(())
    }

    /// Puts receive buffer `buffer` in the queue.
    fn post(&mut self, buffer: u8) -> Result<(), Error> {
        let segment = self.rx_buffers.segment(usize::from(buffer) * BUFFER, BUFFER, true)?;
        let head = self.rx.add(&[segment])?;
        self.rx_of[usize::from(head)] = buffer;
        Ok(())
    }

    /// Hands receive buffer `buffer` back to the live device.
    fn give(&mut self, buffer: u8) -> Result<(), Error> {
        self.post(buffer)?;
        if self.rx.should_notify()? {
            self.transport.notify(RX);
        }
        Ok(())
    }

    /// The card's MAC address, from its configuration.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The features agreed with the device.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Frames the device delivered that no driver asked for (shorter than an Ethernet
    /// header, or marked GSO), dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// How many times a send polls the used ring before it gives up (Timeout).
    pub fn set_poll_limit(&mut self, limit: u32) {
        self.poll_limit = limit;
    }

    /// A refusal of the device's answer: the driver trusts it no more.
    fn distrust(&mut self, error: Error) -> Error {
        self.broken = true;
        self.transport.fail();
        error
    }

    /// Sends one Ethernet frame (FRAME_MIN..=FRAME_MAX bytes, no FCS) and waits for the
    /// device to take it.
    pub fn send(&mut self, frame: &[u8]) -> Result<(), Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        if !(FRAME_MIN..=FRAME_MAX).contains(&frame.len()) {
            return Err(Error::BadFrameLen(frame.len()));
        }
        self.tx_buffer.write(0, &[0; HEADER])?;
        self.tx_buffer.write(HEADER, frame)?;
        let segment = self.tx_buffer.segment(0, HEADER + frame.len(), false)?;
        let head = self.tx.add(&[segment])?;
        if self.tx.should_notify().map_err(|e| self.distrust(e))? {
            self.transport.notify(TX);
        }
        let mut polls = 0u32;
        let used = loop {
            match self.tx.pop_used() {
                Ok(Some(used)) => break used,
                Ok(None) => {}
                Err(error) => return Err(self.distrust(error)),
            }
            polls += 1;
            if polls >= self.poll_limit {
                return Err(self.distrust(Error::Timeout));
            }
            core::hint::spin_loop();
        };
        self.transport.ack_interrupts();
        if used.id != head {
            return Err(self.distrust(Error::UsedIdNotInFlight(u32::from(used.id))));
        }
        Ok(())
    }

    /// The next received frame, copied into `out` (at least FRAME_MAX bytes): its length,
    /// or None when the device has none waiting. It never waits. The buffer goes back to
    /// the device at once.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<Option<usize>, Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        if out.len() < FRAME_MAX {
            return Err(Error::BadFrameLen(out.len()));
        }
        // Each round takes one used element; the device may have finished at most as
        // many as it holds, and dropped frames do not keep the caller here for longer.
        for _ in 0..self.rx.size() {
            let used = match self.rx.pop_used() {
                Ok(Some(used)) => used,
                Ok(None) => return Ok(None),
                Err(error) => return Err(self.distrust(error)),
            };
            self.transport.ack_interrupts();
            let buffer = core::mem::replace(&mut self.rx_of[usize::from(used.id)], NO_BUFFER);
            if buffer == NO_BUFFER {
                return Err(self.distrust(Error::UsedIdNotInFlight(u32::from(used.id))));
            }
            let len = used.len as usize;
            if len < HEADER {
                return Err(self.distrust(Error::UsedLenShort { id: used.id, len: used.len }));
            }
            let at = usize::from(buffer) * BUFFER;
            let mut header = [0u8; HEADER];
            self.rx_buffers.read(at, &mut header)?;
            let frame = len - HEADER;
            // gso_type (byte 1) is GSO_NONE: no GSO feature was negotiated.
            let kept = frame >= FRAME_MIN && header[1] == 0;
            if kept {
                self.rx_buffers.read(at + HEADER, &mut out[..frame])?;
            } else {
                self.dropped += 1;
            }
            self.give(buffer).map_err(|e| self.distrust(e))?;
            if kept {
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }
}
