//! The guest's console stamped with the guest's own clock: each byte the guest stores to
//! its UART's transmit register, with the count of instructions the guest had executed
//! when it did. Under icount that count is the guest's time, the same on every run of a
//! pinned seed, so a boot that never powers off can end a fixed count of instructions
//! after its last expect and keep exactly the bytes before it (docs/verdicts.md, "The
//! settle time").
//!
//! This crate is what the two ends share: [`Uart`], which tells a store that sends a
//! byte from one that programs the UART, and the records the QEMU plugin
//! (`crates/stamp-plugin`) writes on its socket and the bench reads ([`Record`]). It does
//! no I/O and knows nothing of QEMU.

/// The UART models the stamp follows, as QEMU's virt machines wire them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// A 16550 with one-byte registers (riscv's virt): THR at offset 0 unless the
    /// divisor latch is selected (LCR bit 7), nothing sent in loopback (MCR bit 4).
    Ns16550,
    /// Arm's PL011 (aarch64's virt): every store to DR (offset 0) sends its low byte.
    Pl011,
}

impl Model {
    /// The name the plugin's `model=` argument takes.
    pub fn name(self) -> &'static str {
        match self {
            Model::Ns16550 => "16550",
            Model::Pl011 => "pl011",
        }
    }

    /// The model a `model=` argument names.
    pub fn from_name(name: &str) -> Option<Model> {
        [Model::Ns16550, Model::Pl011].into_iter().find(|m| m.name() == name)
    }
}

/// One UART's registers as far as the stamp needs them: which stores send a byte.
#[derive(Clone, Debug)]
pub struct Uart {
    model: Model,
    base: u64,
    /// 16550: LCR bit 7, the divisor latch selected (offset 0 is then DLL).
    divisor_latch: bool,
    /// 16550: MCR bit 4, loopback (a byte written is not sent).
    loopback: bool,
}

/// 16550 register offsets and bits.
const LCR: u64 = 3;
const MCR: u64 = 4;
const LCR_DLAB: u64 = 1 << 7;
const MCR_LOOP: u64 = 1 << 4;

impl Uart {
    /// A UART of `model` whose registers start at physical address `base`, as reset.
    pub fn new(model: Model, base: u64) -> Uart {
        Uart { model, base, divisor_latch: false, loopback: false }
    }

    /// Whether a store at physical address `addr` is this UART's (its first page).
    pub fn owns(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.base) < 0x1000
    }

    /// A store of `value` at physical address `addr`: the byte it sends, if it sends one.
    pub fn store(&mut self, addr: u64, value: u64) -> Option<u8> {
        let offset = addr.checked_sub(self.base)?;
        match (self.model, offset) {
            (Model::Ns16550, 0) => (!self.divisor_latch && !self.loopback).then_some(value as u8),
            (Model::Ns16550, LCR) => {
                self.divisor_latch = value & LCR_DLAB != 0;
                None
            }
            (Model::Ns16550, MCR) => {
                self.loopback = value & MCR_LOOP != 0;
                None
            }
            (Model::Pl011, 0) => Some(value as u8),
            _ => None,
        }
    }
}

/// One record on the plugin's socket: [`RECORD_LEN`] bytes, a tag, a byte (or 0), and the
/// instruction count, little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// The guest sent `byte` after `insns` instructions.
    Byte { insns: u64, byte: u8 },
    /// The guest has executed `insns` instructions (sent every [`TICK_INSNS`], so that
    /// the bench sees the guest's time pass while it prints nothing).
    Tick { insns: u64 },
}

/// The length of one record.
pub const RECORD_LEN: usize = 10;

/// How many instructions between two ticks: 2^20, about 8 ms of guest time at icount's
/// `shift=3` (8 ns an instruction).
pub const TICK_INSNS: u64 = 1 << 20;

const TAG_BYTE: u8 = b'B';
const TAG_TICK: u8 = b'T';

impl Record {
    /// The record's bytes.
    pub fn encode(self) -> [u8; RECORD_LEN] {
        let (tag, byte, insns) = match self {
            Record::Byte { insns, byte } => (TAG_BYTE, byte, insns),
            Record::Tick { insns } => (TAG_TICK, 0, insns),
        };
        let mut out = [0; RECORD_LEN];
        out[0] = tag;
        out[1] = byte;
        out[2..].copy_from_slice(&insns.to_le_bytes());
        out
    }

    /// The record in `bytes`, or None for a tag no plugin writes.
    pub fn decode(bytes: &[u8; RECORD_LEN]) -> Option<Record> {
        let insns = u64::from_le_bytes(bytes[2..].try_into().expect("eight bytes"));
        match bytes[0] {
            TAG_BYTE => Some(Record::Byte { insns, byte: bytes[1] }),
            TAG_TICK => Some(Record::Tick { insns }),
            _ => None,
        }
    }

    /// The instruction count the record carries.
    pub fn insns(self) -> u64 {
        match self {
            Record::Byte { insns, .. } | Record::Tick { insns } => insns,
        }
    }
}

/// The guest's time after `insns` instructions under icount's `shift`: 2^shift ns each.
pub fn guest_time(insns: u64, shift: u32) -> std::time::Duration {
    std::time::Duration::from_nanos(insns.saturating_mul(1u64 << shift.min(20)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_16550_sends_only_what_it_transmits() {
        let mut uart = Uart::new(Model::Ns16550, 0x1000_0000);
        assert_eq!(uart.store(0x1000_0000, b'a' as u64), Some(b'a'));
        // The divisor latch selected: offset 0 is DLL, nothing is sent.
        assert_eq!(uart.store(0x1000_0003, 0x80), None);
        assert_eq!(uart.store(0x1000_0000, 0x03), None);
        assert_eq!(uart.store(0x1000_0003, 0x03), None);
        assert_eq!(uart.store(0x1000_0000, b'b' as u64), Some(b'b'));
        // Loopback: the byte goes back to the receiver, not out.
        assert_eq!(uart.store(0x1000_0004, 0x10), None);
        assert_eq!(uart.store(0x1000_0000, b'c' as u64), None);
        assert_eq!(uart.store(0x1000_0004, 0x0b), None);
        assert_eq!(uart.store(0x1000_0000, b'd' as u64 | 0xff00), Some(b'd'), "the low byte");
        // Other registers, and addresses below the base, send nothing.
        assert_eq!(uart.store(0x1000_0001, 0x01), None);
        assert_eq!(uart.store(0x0fff_ffff, b'e' as u64), None);
        assert!(uart.owns(0x1000_0fff) && !uart.owns(0x1000_1000) && !uart.owns(0x0fff_ffff));
    }

    #[test]
    fn a_pl011_sends_every_data_register_store() {
        let mut uart = Uart::new(Model::Pl011, 0x0900_0000);
        assert_eq!(uart.store(0x0900_0000, b'x' as u64), Some(b'x'));
        assert_eq!(uart.store(0x0900_0030, 0x301), None, "UARTCR");
        assert_eq!(Model::from_name("pl011"), Some(Model::Pl011));
        assert_eq!(Model::from_name("16550"), Some(Model::Ns16550));
        assert_eq!(Model::from_name("8250"), None);
    }

    #[test]
    fn records_read_back_as_written_and_an_unknown_tag_is_none() {
        for record in [Record::Byte { insns: 1 << 40, byte: b'\n' }, Record::Tick { insns: 7 }] {
            assert_eq!(Record::decode(&record.encode()), Some(record));
        }
        let mut bad = Record::Tick { insns: 1 }.encode();
        bad[0] = b'?';
        assert_eq!(Record::decode(&bad), None);
        assert_eq!(guest_time(1000, 3), std::time::Duration::from_micros(8));
    }
}
