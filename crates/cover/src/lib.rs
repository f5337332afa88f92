//! # testbench-cover: which of the kernel's instructions a boot executed
//!
//! The bench's coverage plugin (`crates/cover-plugin`, loaded into QEMU by `--coverage`)
//! keeps, for each translation block whose first instruction lies in one of the kernel's
//! [`Range`]s, whether it ever ran; when QEMU exits it writes the addresses of every
//! instruction of the blocks that ran, once each, in a [`Coverage`] file. The bench reads
//! it back ([`Coverage::decode`]) and maps the addresses to source lines.
//!
//! The file: [`MAGIC`], a flags word ([`TRUNCATED`]), the count, then that many
//! little-endian addresses in increasing order. It is bounded: at most [`MAX_ADDRESSES`]
//! addresses (32 MiB); a boot that ran more says so with the flag.

use std::fmt;

/// The file's first eight bytes.
pub const MAGIC: [u8; 8] = *b"TBCOVER1";
/// Set when the plugin met more code than [`MAX_ADDRESSES`] or [`MAX_BLOCKS`]: the file
/// holds a part of what ran.
pub const TRUNCATED: u64 = 1;
/// The most instruction addresses a file holds.
pub const MAX_ADDRESSES: usize = 1 << 22;
/// The most distinct blocks the plugin follows (a block translated again at the same
/// address with the same length is the same block).
pub const MAX_BLOCKS: usize = 1 << 21;
/// The most ranges the plugin is given.
pub const MAX_RANGES: usize = 16;
const HEADER: usize = 24;

/// The addresses a boot executed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Strictly increasing.
    pub addresses: Vec<u64>,
    /// The plugin stopped following new code at its bounds.
    pub truncated: bool,
}

/// Why a coverage file cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("it does not start with {:?} (not a file of the bench's coverage plugin)", String::from_utf8_lossy(&MAGIC))]
    Magic,
    #[error("it is {len} bytes, shorter than its {HEADER}-byte header")]
    Short { len: usize },
    #[error("it says {count} addresses, more than the {MAX_ADDRESSES} a file may hold")]
    TooMany { count: u64 },
    #[error("it says {count} addresses, which take {expected} bytes, but it is {len} bytes")]
    Length { count: u64, expected: usize, len: usize },
    #[error("its address {index} ({address:#x}) does not come after the one before it")]
    Order { index: usize, address: u64 },
    #[error("unknown flags {flags:#x}")]
    Flags { flags: u64 },
}

impl Coverage {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 8 * self.addresses.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(if self.truncated { TRUNCATED } else { 0 }).to_le_bytes());
        out.extend_from_slice(&(self.addresses.len() as u64).to_le_bytes());
        for address in &self.addresses {
            out.extend_from_slice(&address.to_le_bytes());
        }
        out
    }

    /// A file's coverage, checked whole: its magic, flags, count, length and order.
    pub fn decode(bytes: &[u8]) -> Result<Coverage, FormatError> {
        if bytes.len() < HEADER {
            return Err(if bytes.starts_with(&MAGIC) || bytes.len() < MAGIC.len() {
                FormatError::Short { len: bytes.len() }
            } else {
                FormatError::Magic
            });
        }
        if bytes[..8] != MAGIC {
            return Err(FormatError::Magic);
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        let flags = word(8);
        if flags & !TRUNCATED != 0 {
            return Err(FormatError::Flags { flags });
        }
        let count = word(16);
        if count > MAX_ADDRESSES as u64 {
            return Err(FormatError::TooMany { count });
        }
        let expected = HEADER + 8 * count as usize;
        if bytes.len() != expected {
            return Err(FormatError::Length { count, expected, len: bytes.len() });
        }
        let addresses: Vec<u64> = (0..count as usize).map(|i| word(HEADER + 8 * i)).collect();
        if let Some(index) = (1..addresses.len()).find(|&i| addresses[i] <= addresses[i - 1]) {
            return Err(FormatError::Order { index, address: addresses[index] });
        }
        Ok(Coverage { addresses, truncated: flags & TRUNCATED != 0 })
    }
}

/// A half-open range of guest addresses, `0xLO-0xHI` on the plugin's command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    pub fn contains(&self, address: u64) -> bool {
        (self.start..self.end).contains(&address)
    }

    /// `0xLO-0xHI`, LO below HI.
    pub fn parse(text: &str) -> Result<Range, String> {
        let hex = |part: &str| {
            let digits = part.strip_prefix("0x").ok_or_else(|| format!("{part}: not 0x and hex digits"))?;
            u64::from_str_radix(digits, 16).map_err(|e| format!("{part}: {e}"))
        };
        let (start, end) = text.split_once('-').ok_or_else(|| format!("{text}: not 0xLO-0xHI"))?;
        let (start, end) = (hex(start)?, hex(end)?);
        if start >= end {
            return Err(format!("{text}: its start is not below its end"));
        }
        Ok(Range { start, end })
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}-{:#x}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_back_as_it_was_written() {
        let coverage = Coverage { addresses: vec![0x8080_0000, 0x8080_0004, 0xffff_ffff_8000_0000], truncated: true };
        assert_eq!(Coverage::decode(&coverage.encode()), Ok(coverage));
        let empty = Coverage::default();
        assert_eq!(Coverage::decode(&empty.encode()), Ok(empty));
    }

    #[test]
    fn a_damaged_file_is_refused_saying_how() {
        let good = Coverage { addresses: vec![1, 2, 3], truncated: false }.encode();
        assert_eq!(Coverage::decode(&good[..10]), Err(FormatError::Short { len: 10 }));
        assert_eq!(
            Coverage::decode(&good[..good.len() - 1]),
            Err(FormatError::Length { count: 3, expected: 48, len: 47 })
        );
        let mut magic = good.clone();
        magic[0] = b'X';
        assert_eq!(Coverage::decode(&magic), Err(FormatError::Magic));
        let mut order = good.clone();
        order[HEADER + 8..HEADER + 16].copy_from_slice(&1u64.to_le_bytes());
        assert_eq!(Coverage::decode(&order), Err(FormatError::Order { index: 1, address: 1 }));
        let mut many = good.clone();
        many[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Coverage::decode(&many), Err(FormatError::TooMany { count: u64::MAX }));
        let mut flags = good;
        flags[8] = 2;
        assert_eq!(Coverage::decode(&flags), Err(FormatError::Flags { flags: 2 }));
    }

    #[test]
    fn ranges_parse_as_the_plugin_takes_them() {
        assert_eq!(Range::parse("0x80800000-0x80900000"), Ok(Range { start: 0x8080_0000, end: 0x8090_0000 }));
        assert_eq!(Range::parse("0x80800000-0x80900000").unwrap().to_string(), "0x80800000-0x80900000");
        assert!(Range::parse("0x10-0x10").is_err());
        assert!(Range::parse("10-20").is_err());
        assert!(Range::parse("0x10").is_err());
        assert!(Range { start: 4, end: 8 }.contains(7) && !Range { start: 4, end: 8 }.contains(8));
    }
}
