//! A generator's view of an input: a stream of decisions.
//!
//! The input is bytes ([`crate::rng::Rng::input`]); a generator that knows a format reads
//! them as decisions, little-endian, in the order it asks. The contract every generator
//! relies on:
//!
//! - **Past the end every read is zero.** A short input is a complete input: the run goes
//!   on with zeros, so truncating an input (as the shrinker does) never breaks it.
//! - **Zero is always the ordinary choice.** Each generator arranges its choices so that
//!   a zero decision means the common, well-formed case: `bool()` is false, `below(n)` and
//!   `choose` give the first option, `rare()` is false. An all-zero input is therefore the
//!   most ordinary run there is, and the shrinker, which lowers bytes toward zero, moves an
//!   input toward it.
//! - **What ends a run early must be rare** ([`Decisions::rare`], about once in 4096), or
//!   runs would never go deep.
//!
//! Every read also feeds a running hash (the trace), which the gate's determinism check
//! compares between two runs of one input.

/// FNV-1a's 64-bit offset basis and prime.
const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Reads decisions from a byte slice.
#[derive(Clone, Debug)]
pub struct Decisions<'a> {
    bytes: &'a [u8],
    pos: usize,
    trace: u64,
    end: &'static str,
}

impl<'a> Decisions<'a> {
    /// Decisions read from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Decisions<'a> {
        Decisions { bytes, pos: 0, trace: FNV_BASIS, end: "ok" }
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for byte in &mut out {
            *byte = self.bytes.get(self.pos).copied().unwrap_or(0);
            self.pos = self.pos.saturating_add(1);
            self.trace = (self.trace ^ u64::from(*byte)).wrapping_mul(FNV_PRIME);
        }
        out
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    /// A number in `0..n` (0 when `n` is 0), from four bytes by multiply-shift: a zero
    /// decision is 0, and a larger decision never gives a smaller result.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        ((u64::from(self.u32()) * n.min(1 << 32)) >> 32) as usize
    }

    /// One of `items`, the first for a zero decision. Panics when `items` is empty (a
    /// generator's bug, not the input's).
    pub fn choose<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        assert!(!items.is_empty(), "choose from nothing");
        &items[self.below(items.len())]
    }

    /// A coin: false for a zero decision.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// True about once in 4096 (the top twelve bits of a u16 all set), for what ends a
    /// run or breaks the format: false for a zero decision.
    pub fn rare(&mut self) -> bool {
        self.u16() >> 4 == 0xfff
    }

    /// `len` bytes of data.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.u8()).collect()
    }

    /// How many bytes have been read so far, including the zeros past the end: how deep
    /// the run went.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// The hash of every decision read so far, in order.
    pub fn trace(&self) -> u64 {
        self.trace
    }

    /// Records how the run ended when it found nothing ("accepted", "refused: magic", ...),
    /// for `HOSTFUZZ_STATS`: keep the set of reasons small and fixed.
    pub fn end(&mut self, reason: &'static str) {
        self.end = reason;
    }

    /// The last reason given to [`Decisions::end`] ("ok" when none was).
    pub fn end_reason(&self) -> &'static str {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn decisions_past_end_read_zero() {
        let mut d = Decisions::new(&[0xff, 0x01, 0x02]);
        assert_eq!(d.u16(), 0x01ff);
        assert_eq!(d.u32(), 0x02);
        for _ in 0..100 {
            assert_eq!(d.u64(), 0);
            assert!(!d.bool());
            assert!(!d.rare());
            assert_eq!(d.below(10), 0);
            assert_eq!(*d.choose(&["first", "second"]), "first");
        }
        assert_eq!(d.consumed(), 6 + 100 * (8 + 1 + 2 + 4 + 4));
    }

    #[test]
    fn decisions_zero_is_ordinary() {
        let zeros = [0u8; 64];
        let mut d = Decisions::new(&zeros);
        assert!(!d.bool());
        assert!(!d.rare());
        assert_eq!(d.below(1000), 0);
        assert_eq!(*d.choose(&[1, 2, 3]), 1);
    }

    #[test]
    fn decisions_below_is_below() {
        let input = Rng::new(3).bytes(1 << 16);
        let mut d = Decisions::new(&input);
        for n in [1usize, 2, 3, 10, 255, 4096, 1 << 20] {
            for _ in 0..1000 {
                assert!(d.below(n) < n);
            }
        }
        assert_eq!(d.below(0), 0);
        let all = [0xffu8; 4];
        assert_eq!(Decisions::new(&all).below(7), 6);
    }

    #[test]
    fn decisions_rare_frequency() {
        // 2^20 draws from a fixed seed: the expectation is 256 (once in 4096).
        let input = Rng::new(1).bytes(2 << 20);
        let mut d = Decisions::new(&input);
        let hits = (0..1 << 20).filter(|_| d.rare()).count();
        assert!((200..=312).contains(&hits), "{hits} in 2^20");
    }

    #[test]
    fn decisions_trace_follows_the_reads() {
        let a = Decisions::new(&[1, 2, 3]);
        let mut b = a.clone();
        let mut c = a.clone();
        b.u16();
        c.u8();
        c.u8();
        assert_eq!(b.trace(), c.trace());
        assert_ne!(a.trace(), b.trace());
    }
}
