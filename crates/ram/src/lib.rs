//! A dump of a guest's physical RAM, read at memory speed.
//!
//! [`scan`] reads a dump (QEMU's `pmemsave`: the RAM's bytes from its base address, as
//! they were when the guest was stopped) once, in pieces of [`PIECE`] bytes, and finds
//! the first place of each [`Needle`]: a byte string that must appear nowhere (a key the
//! guest was meant to wipe). A needle split across two pieces is found, since each piece
//! is searched with the end of the one before it. Each find says its physical address
//! and the bytes around it ([`Found::quote`]).
//!
//! No clock and no process: bytes in, finds out. The search is `memchr`'s `memmem`
//! (SIMD), one finder per needle built once; `benches/scan.rs` measures it against a
//! plain read of the same bytes.
//!
//! [`footprint`] reads the same dump for what the guest's programs wrote into it: the
//! paint left on each program's stack and its heap record, and measures each one's peak.

use std::io::Read;

pub mod footprint;

/// How much of the dump one read takes: small enough that every needle's pass over it
/// finds it in the cache (256 KiB read 3.45 GB/s with four needles here, 16 MiB 2.06).
pub const PIECE: usize = 256 << 10;
/// How many bytes a find quotes on each side of the needle.
pub const CONTEXT: usize = 24;
/// The shortest needle: a shorter string turns up in a RAM of hundreds of MiB by chance.
pub const NEEDLE_MIN: usize = 8;
/// The longest needle.
pub const NEEDLE_MAX: usize = 4096;

/// A byte string that must be nowhere in the RAM, with the label its failure names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needle {
    pub label: String,
    pub bytes: Vec<u8>,
}

/// Where a needle was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The needle's index in the list scanned.
    pub needle: usize,
    /// The physical address of its first byte.
    pub address: u64,
    /// Up to [`CONTEXT`] bytes before it (fewer at the dump's start).
    pub before: Vec<u8>,
    /// Up to [`CONTEXT`] bytes after it (fewer at the dump's end or a piece's).
    pub after: Vec<u8>,
}

impl Found {
    /// The needle with the bytes around it, printable ASCII as it is and every other
    /// byte escaped (`\x00`): `...before[needle]after...`.
    pub fn quote(&self, needle: &[u8]) -> String {
        format!("{}[{}]{}", self.before.escape_ascii(), needle.escape_ascii(), self.after.escape_ascii())
    }
}

/// What a scan read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// The first find of each needle that is anywhere, in the order of the needles.
    pub found: Vec<Found>,
    /// The bytes read.
    pub bytes: u64,
}

/// Read `dump` (RAM from physical address `base`) to its end and find each needle's
/// first place. A needle outside the bounds ([`NEEDLE_MIN`] to [`NEEDLE_MAX`] bytes) is
/// the caller's mistake, refused as an `InvalidInput` error before anything is read.
pub fn scan(mut dump: impl Read, base: u64, needles: &[Needle]) -> std::io::Result<Scanned> {
    if let Some(bad) = needles.iter().find(|n| !(NEEDLE_MIN..=NEEDLE_MAX).contains(&n.bytes.len())) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: {} bytes, not {NEEDLE_MIN} to {NEEDLE_MAX}", bad.label, bad.bytes.len()),
        ));
    }
    let finders: Vec<memchr::memmem::Finder> = needles.iter().map(|n| memchr::memmem::Finder::new(&n.bytes)).collect();
    let longest = needles.iter().map(|n| n.bytes.len()).max().unwrap_or(0);
    // What each piece is searched with of the one before: a needle that straddles the
    // boundary, and the context quoted before a find at the piece's start.
    let carry = longest.saturating_sub(1) + CONTEXT;
    let mut window: Vec<u8> = Vec::with_capacity(carry + PIECE);
    // The physical address of window[0].
    let mut window_base = base;
    let mut found: Vec<Option<Found>> = vec![None; needles.len()];
    let mut bytes = 0u64;
    loop {
        let kept = window.len();
        window.resize(kept + PIECE, 0);
        let got = read_full(&mut dump, &mut window[kept..])?;
        window.truncate(kept + got);
        bytes += got as u64;
        if got == 0 {
            break;
        }
        for (index, finder) in finders.iter().enumerate() {
            if found[index].is_some() {
                continue;
            }
            if let Some(at) = finder.find(&window) {
                let end = at + needles[index].bytes.len();
                found[index] = Some(Found {
                    needle: index,
                    address: window_base + at as u64,
                    before: window[at.saturating_sub(CONTEXT)..at].to_vec(),
                    after: window[end..(end + CONTEXT).min(window.len())].to_vec(),
                });
            }
        }
        if found.iter().all(Option::is_some) {
            // Every needle has its first place; the rest need not be read.
            break;
        }
        let drop = window.len().saturating_sub(carry);
        window.drain(..drop);
        window_base += drop as u64;
    }
    Ok(Scanned { found: found.into_iter().flatten().collect(), bytes })
}

/// Fill `buf` unless the reader ends first; how much was read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needle(label: &str, text: &[u8]) -> Needle {
        Needle { label: label.into(), bytes: text.to_vec() }
    }

    /// A reader that hands out at most `step` bytes a call, as a pipe or a file may.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_needle_across_a_piece_boundary_is_found_with_its_address_and_context() {
        let mut ram = vec![0u8; PIECE * 2 + 100];
        let secret = b"tb-ram-secret-42042";
        let at = PIECE - 7; // straddles the first boundary
        ram[at..at + secret.len()].copy_from_slice(secret);
        ram[at - 3..at].copy_from_slice(b"k=:");
        let other = b"second-needle!";
        let late = 2 * PIECE + 50;
        ram[late..late + other.len()].copy_from_slice(other);
        let needles = [needle("ram_forbid[0]", secret), needle("ram_forbid[1]", other), needle("x", b"nowhere-at-all")];
        let scanned = scan(Trickle(&ram, 1 << 20), 0x8000_0000, &needles).unwrap();
        assert_eq!(scanned.bytes, ram.len() as u64);
        assert_eq!(scanned.found.len(), 2);
        let first = &scanned.found[0];
        assert_eq!((first.needle, first.address), (0, 0x8000_0000 + at as u64));
        assert_eq!(first.before.len(), CONTEXT);
        assert_eq!(
            first.quote(secret),
            format!("{}k=:[tb-ram-secret-42042]{}", "\\x00".repeat(CONTEXT - 3), "\\x00".repeat(CONTEXT))
        );
        assert_eq!((scanned.found[1].needle, scanned.found[1].address), (1, 0x8000_0000 + late as u64));
        // Only 50 bytes follow the second needle's piece... and the dump's end is near.
        assert_eq!(scanned.found[1].after.len(), CONTEXT);
    }

    #[test]
    fn the_first_place_is_reported_and_the_ends_of_the_dump_count() {
        let mut ram = b"secret-at-zero..".to_vec();
        ram.extend(vec![7u8; 1000]);
        ram.extend(b"secret-at-zero");
        let scanned = scan(&ram[..], 0x1000, &[needle("n", b"secret-at-zero")]).unwrap();
        assert_eq!(scanned.found.len(), 1);
        assert_eq!(scanned.found[0].address, 0x1000);
        assert!(scanned.found[0].before.is_empty());
        let tail = scan(&ram[16..], 0, &[needle("n", b"secret-at-zero")]).unwrap();
        assert_eq!(tail.found[0].address, 1000);
        assert!(tail.found[0].after.is_empty());
        assert!(scan(&[][..], 0, &[needle("n", b"secret-at-zero")]).unwrap().found.is_empty());
    }

    #[test]
    fn a_needle_too_short_to_mean_anything_is_refused() {
        let error = scan(&b"abcdefgh"[..], 0, &[needle("ram_forbid[2]", b"abc")]).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "ram_forbid[2]: 3 bytes, not 8 to 4096");
    }
}
