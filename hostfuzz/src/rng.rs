//! The one pseudo-random generator: every random byte the fuzzer makes comes from here.
//!
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! 2014): a 64-bit counter advanced by the golden-ratio odd constant, each step's output
//! the counter through a fixed bijective mixer. It is small, has no state but the counter
//! and passes BigCrush; it is not cryptographic, and does not need to be. The input of
//! iteration `iter` of seed `seed` is [`Rng::for_input`]'s bytes, so a seed and an
//! iteration number are all it takes to make an input again.

/// The golden-ratio increment of the counter.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The mixing function: a bijection of u64 (David Stafford's "Mix13" variant).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The generator for iteration `iter` of seed `seed`: independent streams for every
    /// pair, as neighbouring seeds or iterations share no prefix.
    pub fn for_input(seed: u64, iter: u64) -> Rng {
        Rng::new(mix(seed ^ mix(iter.wrapping_add(GAMMA))))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// A number in `0..n` (`n` > 0), by multiply-shift (Lemire): unbiased enough for
    /// choosing input lengths.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// The input of one iteration: its length mostly long enough that a run never reaches
    /// the end (the generators then read real decisions throughout), sometimes short so
    /// that the zeros past the end are exercised too.
    pub fn input(&mut self) -> Vec<u8> {
        let len = match self.below(8) {
            0 => self.below(64),
            1 | 2 => 64 + self.below(960),
            _ => 1024 + self.below(7168),
        };
        self.bytes(len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic() {
        let a: Vec<u64> = (0..100)
            .map({
                let mut r = Rng::for_input(1, 7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::for_input(1, 7);
        assert!(a.iter().all(|&v| v == r.next_u64()));
        assert_eq!(Rng::for_input(5, 3).input(), Rng::for_input(5, 3).input());
        assert_ne!(Rng::for_input(5, 3).input(), Rng::for_input(5, 4).input());
        assert_ne!(Rng::for_input(5, 3).next_u64(), Rng::for_input(6, 3).next_u64());
    }

    #[test]
    fn rng_known_values() {
        // SplitMix64 from state 0: the reference implementation's first outputs.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn rng_below_is_below() {
        let mut r = Rng::new(9);
        for n in [1, 2, 3, 7, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }
}
