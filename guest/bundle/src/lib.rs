//! The signed boot bundle: its format, strict parsing and Ed25519 verification.
//!
//! Portable: `no_std`, no allocation, no `unsafe`; builds for the bare-metal guest
//! targets and for the host. Packing and signing (host only, for the bench) are behind
//! the cargo feature `sign`, which brings in `std`.
//!
//! All integers little-endian:
//!
//! ```text
//! archive  := b"TBBUNDL1" | count: u32 | reserved: u32 (0) | entry[count] | data bytes
//! entry    := name: [u8; 32] (ASCII, NUL-padded, non-empty, printable)
//!           | kind: u32 (1 = kernel, 2 = first program, 3 = program, 4 = data)
//!           | offset: u32 (from the archive's start) | len: u32 | reserved: u32 (0)
//! bundle   := archive | trailer
//! trailer  := b"TBSIG001" | archive_len: u64 | signature: [u8; 64]   (80 bytes, at the end)
//! signature = Ed25519 over DOMAIN || archive_len (u64 LE) || archive
//! DOMAIN    = b"testbench boot bundle v1\0"
//! ```
//!
//! The data area (after the entry table) is laid out canonically: each entry's data
//! starts at the previous entry's end (the table's end for the first) rounded up to
//! [`DATA_ALIGN`], the padding is zero, and the last entry's data ends the archive.
//! So data never overlaps the header, the table or other data, and there is no gap or
//! trailing garbage. [`verify`] checks the trailer and the signature before it parses
//! a single entry.
//!
//! The feature `fuzz-stand-in` (host fuzzing only: a build for anything but Linux with it
//! does not compile) adds [`Verifier::stand_in`] and `Signer::stand_in`: the same
//! trailer, message and checks, with SHA-512 over a marker, the public key and the
//! message in place of Ed25519. Anyone holding the public key can make such a signature,
//! so it proves nothing about who signed; it lets a fuzzing campaign spend its time on
//! the format and the verifier's own code instead of on Ed25519's arithmetic (hostfuzz's
//! `bundle-format`).

#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "sign")]
extern crate std;

#[cfg(feature = "sign")]
mod sign;
#[cfg(feature = "sign")]
pub use sign::{pack, pack_signed, sign, sign_bare, Signer, DEV_SEED};

// The host fuzzer runs on Linux only: any other target with the stand-in is a mistake.
#[cfg(all(feature = "fuzz-stand-in", not(target_os = "linux")))]
compile_error!("bundle's `fuzz-stand-in` is for host fuzzing: a guest with it would accept signatures anyone can make");

use curve25519_dalek::edwards::CompressedEdwardsY;
use ed25519_dalek::{Signature, VerifyingKey};

/// The archive's first 8 bytes.
pub const ARCHIVE_MAGIC: [u8; 8] = *b"TBBUNDL1";
/// The trailer's first 8 bytes.
pub const TRAILER_MAGIC: [u8; 8] = *b"TBSIG001";
/// The signature's domain separator, the first bytes of the signed message.
pub const DOMAIN: &[u8] = b"testbench boot bundle v1\0";
/// The trailer's length: magic, archive length, signature.
pub const TRAILER_LEN: usize = 80;
/// The archive header's length: magic, count, reserved.
pub const HEADER_LEN: usize = 16;
/// One entry of the table.
pub const ENTRY_LEN: usize = 48;
/// An entry name's field length.
pub const NAME_LEN: usize = 32;
/// Each entry's data starts at a multiple of this (from the archive's start).
pub const DATA_ALIGN: usize = 8;
/// The most entries an archive may have.
pub const MAX_ENTRIES: usize = 256;

/// The DEVELOPMENT public key: the Ed25519 public key of [`DEV_SEED`] (feature `sign`).
///
/// **DEVELOPMENT ONLY, NOT FOR PRODUCTION.** Its seed is in this source tree, so ANYONE
/// can sign a bundle this key accepts. It exists so the bench and the reference guest
/// can sign and check bundles out of the box; a real deployment uses its own key pair
/// with the seed kept secret.
pub const DEV_PUBLIC_KEY: [u8; 32] = [
    0xd9, 0x31, 0xc4, 0x60, 0xbe, 0x37, 0x21, 0x47, 0x93, 0xcb, 0xe5, 0xfe, 0x55, 0x51, 0xef, 0x55, 0x50, 0x51, 0xd8,
    0x11, 0xed, 0x5e, 0x70, 0xa4, 0x04, 0x75, 0xa0, 0xc8, 0x27, 0x88, 0x10, 0x02,
];

/// What an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The kernel image (exactly one per bundle).
    Kernel = 1,
    /// The first program the kernel starts (exactly one per bundle).
    FirstProgram = 2,
    /// Another program.
    Program = 3,
    /// Anything else.
    Data = 4,
}

impl Kind {
    /// The kind with this table value, if any.
    pub fn from_u32(value: u32) -> Option<Kind> {
        match value {
            1 => Some(Kind::Kernel),
            2 => Some(Kind::FirstProgram),
            3 => Some(Kind::Program),
            4 => Some(Kind::Data),
            _ => None,
        }
    }
}

/// Which rule of the archive format was broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The archive is shorter than its header, or its magic is not `TBBUNDL1`.
    Magic,
    /// The header's reserved field is not 0.
    Reserved,
    /// The count is 0 or more than [`MAX_ENTRIES`].
    Count,
    /// The entry table runs past the end of the archive.
    Table,
    /// A name is empty, not printable ASCII, or has bytes after its NUL padding starts.
    Name,
    /// A kind is not 1..=4.
    Kind,
    /// An entry's reserved field is not 0.
    EntryReserved,
    /// An entry's data lies (partly) outside the data area (the header or the table, or
    /// past the archive's end).
    Bounds,
    /// An entry's data does not start where the canonical layout puts it (it overlaps
    /// the previous entry's data, or leaves a gap).
    Layout,
    /// Padding between two entries' data is not zero.
    Padding,
    /// Two entries have the same name.
    DuplicateName,
    /// Not exactly one kernel entry.
    KernelCount,
    /// Not exactly one first-program entry.
    FirstProgramCount,
    /// Bytes after the last entry's data.
    TrailingGarbage,
}

/// Why a bundle was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer than 80 bytes, or the trailer's archive length is not the bundle's length
    /// minus 80: a bundle cut short (or padded).
    Short,
    /// The trailer's magic is not `TBSIG001`.
    TrailerMagic,
    /// The public key is not a valid (or is a weak) Ed25519 key.
    Key,
    /// The signature does not verify (with the domain and the length) under the key.
    Signature,
    /// The archive is signed but breaks a rule of the format.
    Archive(Malformed),
}

impl Error {
    /// A short, stable line fragment (`loader: refused bundle: <describe>`).
    pub fn describe(&self) -> &'static str {
        match self {
            Error::Short => "short: bundle cut short",
            Error::TrailerMagic => "bad trailer magic",
            Error::Key => "bad public key",
            Error::Signature => "bad signature",
            Error::Archive(m) => match m {
                Malformed::Magic => "malformed archive: magic",
                Malformed::Reserved => "malformed archive: header reserved not zero",
                Malformed::Count => "malformed archive: entry count",
                Malformed::Table => "malformed archive: entry table past the end",
                Malformed::Name => "malformed archive: entry name",
                Malformed::Kind => "malformed archive: entry kind",
                Malformed::EntryReserved => "malformed archive: entry reserved not zero",
                Malformed::Bounds => "malformed archive: entry data outside the data area",
                Malformed::Layout => "malformed archive: entry data overlaps or leaves a gap",
                Malformed::Padding => "malformed archive: padding not zero",
                Malformed::DuplicateName => "malformed archive: duplicate name",
                Malformed::KernelCount => "malformed archive: not exactly one kernel",
                Malformed::FirstProgramCount => "malformed archive: not exactly one first program",
                Malformed::TrailingGarbage => "malformed archive: trailing garbage",
            },
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.describe())
    }
}

/// One entry of a verified bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The name, without its NUL padding (printable ASCII, 1 to 32 bytes).
    pub name: &'a str,
    /// What it holds.
    pub kind: Kind,
    /// Where its data starts, from the archive's start.
    pub offset: usize,
    /// Its data.
    pub data: &'a [u8],
}

/// A verified, parsed bundle.
#[derive(Clone, Copy, Debug)]
pub struct Bundle<'a> {
    archive: &'a [u8],
    count: usize,
    kernel: Entry<'a>,
    first_program: Entry<'a>,
}

impl<'a> Bundle<'a> {
    /// The signed archive (the bundle without its trailer).
    pub fn archive(&self) -> &'a [u8] {
        self.archive
    }

    /// The entries, in table order.
    pub fn entries(&self) -> Entries<'a> {
        Entries { archive: self.archive, next: 0, count: self.count }
    }

    /// The entry called `name`, if any.
    pub fn entry(&self, name: &str) -> Option<Entry<'a>> {
        self.entries().find(|e| e.name == name)
    }

    /// The kernel entry.
    pub fn kernel(&self) -> Entry<'a> {
        self.kernel
    }

    /// The first-program entry.
    pub fn first_program(&self) -> Entry<'a> {
        self.first_program
    }
}

/// The entries of a [`Bundle`], in table order.
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    archive: &'a [u8],
    next: usize,
    count: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        while self.next < self.count {
            let i = self.next;
            self.next += 1;
            // Parsed before, so this never fails; a failure would only end the walk.
            if let Ok(raw) = read_entry(self.archive, i) {
                if let Ok(entry) = raw.check(self.archive) {
                    return Some(entry);
                }
            }
        }
        None
    }
}

fn le32(bytes: &[u8], offset: usize) -> Option<u32> {
    let b = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn le64(bytes: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from(le32(bytes, offset)?) | (u64::from(le32(bytes, offset.checked_add(4)?)?) << 32))
}

/// `n` rounded up to a multiple of [`DATA_ALIGN`].
fn align(n: usize) -> Option<usize> {
    Some(n.checked_add(DATA_ALIGN - 1)? & !(DATA_ALIGN - 1))
}

/// Checks `bytes` (archive and trailer) against the public key `key`, then parses the
/// archive strictly. Nothing of the archive is parsed before the signature verifies.
/// The key is read at each call; [`Verifier`] reads it once for many bundles.
pub fn verify<'a>(bytes: &'a [u8], key: &[u8; 32]) -> Result<Bundle<'a>, Error> {
    let (archive, signature) = split(bytes)?;
    Verifier::new(key)?.check_signature(archive, &signature)?;
    parse(archive)
}

/// The archive and the signature of `bytes` (archive and trailer), the trailer checked.
fn split(bytes: &[u8]) -> Result<(&[u8], [u8; 64]), Error> {
    let Some(archive_len) = bytes.len().checked_sub(TRAILER_LEN) else {
        return Err(Error::Short);
    };
    let (archive, trailer) = bytes.split_at(archive_len);
    if trailer.get(..8) != Some(&TRAILER_MAGIC[..]) {
        return Err(Error::TrailerMagic);
    }
    if le64(trailer, 8) != Some(archive_len as u64) {
        return Err(Error::Short);
    }
    let mut signature = [0u8; 64];
    signature.copy_from_slice(trailer.get(16..TRAILER_LEN).ok_or(Error::Short)?);
    Ok((archive, signature))
}

/// A public key read once (decompressed, and refused if of small order), to verify many
/// bundles: [`verify`] without the key's work at each call.
#[derive(Clone, Debug)]
pub struct Verifier {
    key: Scheme,
}

/// How a [`Verifier`] checks a signature.
#[derive(Clone, Debug)]
enum Scheme {
    Ed25519(VerifyingKey),
    /// The public key's bytes: [`stand_in_signature`].
    #[cfg(feature = "fuzz-stand-in")]
    StandIn([u8; 32]),
}

impl Verifier {
    /// The verifier for the public key `key`; [`Error::Key`] if it is no valid key or
    /// one of small order.
    pub fn new(key: &[u8; 32]) -> Result<Verifier, Error> {
        let key = VerifyingKey::from_bytes(key).map_err(|_| Error::Key)?;
        if key.is_weak() {
            return Err(Error::Key);
        }
        Ok(Verifier { key: Scheme::Ed25519(key) })
    }

    /// UNSAFE, host fuzzing only: a verifier that takes the stand-in signature of the
    /// public key `key` (see the crate's doc), which anyone holding `key` can make.
    #[cfg(feature = "fuzz-stand-in")]
    pub fn stand_in(key: &[u8; 32]) -> Verifier {
        Verifier { key: Scheme::StandIn(*key) }
    }

    /// [`verify`] with this key: the trailer, the signature, then the strict parse.
    pub fn verify<'a>(&self, bytes: &'a [u8]) -> Result<Bundle<'a>, Error> {
        let (archive, signature) = split(bytes)?;
        self.check_signature(archive, &signature)?;
        parse(archive)
    }

    /// The signature over the [`signed_message`], by this verifier's scheme.
    fn check_signature(&self, archive: &[u8], signature: &[u8; 64]) -> Result<(), Error> {
        match &self.key {
            Scheme::Ed25519(key) => check_ed25519(key, archive, signature),
            #[cfg(feature = "fuzz-stand-in")]
            Scheme::StandIn(key) => {
                let made = stand_in_signature(key, |part| signed_message(archive, part));
                if made == *signature {
                    Ok(())
                } else {
                    Err(Error::Signature)
                }
            }
        }
    }
}

/// Ed25519 over the [`signed_message`], checked as strictly as `verify_strict` (canonical
/// s, neither the key nor R of small order) but streamed, so the message is never copied.
fn check_ed25519(key: &VerifyingKey, archive: &[u8], signature: &[u8; 64]) -> Result<(), Error> {
    let mut r = [0u8; 32];
    r.copy_from_slice(&signature[..32]);
    match CompressedEdwardsY(r).decompress() {
        Some(point) if !point.is_small_order() => {}
        _ => return Err(Error::Signature),
    }
    let mut stream = key.verify_stream(&Signature::from_bytes(signature)).map_err(|_| Error::Signature)?;
    signed_message(archive, |part| stream.update(part));
    stream.finalize_and_verify().map_err(|_| Error::Signature)
}

/// The message a signature covers, in parts: DOMAIN || archive_len (u64 LE) || archive.
fn signed_message(archive: &[u8], mut part: impl FnMut(&[u8])) {
    part(DOMAIN);
    part(&(archive.len() as u64).to_le_bytes());
    part(archive);
}

/// The stand-in signature (feature `fuzz-stand-in`): SHA-512 over a marker, the public
/// key and the message `message` gives in parts.
#[cfg(feature = "fuzz-stand-in")]
pub(crate) fn stand_in_signature(key: &[u8; 32], message: impl FnOnce(&mut dyn FnMut(&[u8]))) -> [u8; 64] {
    use sha2::Digest;
    let mut hash = sha2::Sha512::new();
    hash.update(b"testbench bundle fuzzing stand-in, not a signature\0");
    hash.update(key);
    message(&mut |part| hash.update(part));
    hash.finalize().into()
}

/// One table entry as stored.
struct RawEntry<'a> {
    name: &'a [u8],
    kind: u32,
    offset: u32,
    len: u32,
    reserved: u32,
}

fn read_entry(archive: &[u8], i: usize) -> Result<RawEntry<'_>, Malformed> {
    let at = i.checked_mul(ENTRY_LEN).and_then(|o| o.checked_add(HEADER_LEN)).ok_or(Malformed::Table)?;
    let raw = at.checked_add(ENTRY_LEN).and_then(|end| archive.get(at..end)).ok_or(Malformed::Table)?;
    let field = |o: usize| le32(raw, NAME_LEN + o).ok_or(Malformed::Table);
    Ok(RawEntry {
        name: raw.get(..NAME_LEN).ok_or(Malformed::Table)?,
        kind: field(0)?,
        offset: field(4)?,
        len: field(8)?,
        reserved: field(12)?,
    })
}

impl<'a> RawEntry<'a> {
    /// The entry's own rules (name, kind, reserved, data inside the archive).
    fn check(&self, archive: &'a [u8]) -> Result<Entry<'a>, Malformed> {
        let used = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        let (name, padding) = self.name.split_at(used);
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) || padding.iter().any(|&b| b != 0) {
            return Err(Malformed::Name);
        }
        let name = core::str::from_utf8(name).map_err(|_| Malformed::Name)?;
        let kind = Kind::from_u32(self.kind).ok_or(Malformed::Kind)?;
        if self.reserved != 0 {
            return Err(Malformed::EntryReserved);
        }
        let offset = self.offset as usize;
        let data =
            offset.checked_add(self.len as usize).and_then(|end| archive.get(offset..end)).ok_or(Malformed::Bounds)?;
        Ok(Entry { name, kind, offset, data })
    }
}

/// Parses a (verified) archive strictly.
fn parse(archive: &[u8]) -> Result<Bundle<'_>, Error> {
    parse_rules(archive).map_err(Error::Archive)
}

fn parse_rules(archive: &[u8]) -> Result<Bundle<'_>, Malformed> {
    if archive.get(..8) != Some(&ARCHIVE_MAGIC[..]) {
        return Err(Malformed::Magic);
    }
    let (Some(count), Some(reserved)) = (le32(archive, 8), le32(archive, 12)) else {
        return Err(Malformed::Magic);
    };
    if reserved != 0 {
        return Err(Malformed::Reserved);
    }
    let count = count as usize;
    if count == 0 || count > MAX_ENTRIES {
        return Err(Malformed::Count);
    }
    let table_end = count * ENTRY_LEN + HEADER_LEN;
    if table_end > archive.len() {
        return Err(Malformed::Table);
    }
    let mut kernel = None;
    let mut first_program = None;
    let mut kernels = 0;
    let mut first_programs = 0;
    let mut end = table_end;
    for i in 0..count {
        let entry = read_entry(archive, i)?.check(archive)?;
        if entry.offset < table_end {
            return Err(Malformed::Bounds);
        }
        let start = align(end).ok_or(Malformed::Layout)?;
        if entry.offset != start {
            // Before `end`: over the previous entry's data; past `start`: a gap.
            return Err(Malformed::Layout);
        }
        if archive.get(end..start).is_none_or(|pad| pad.iter().any(|&b| b != 0)) {
            return Err(Malformed::Padding);
        }
        end = entry.offset + entry.data.len();
        for j in 0..i {
            if read_entry(archive, j)?.check(archive)?.name == entry.name {
                return Err(Malformed::DuplicateName);
            }
        }
        match entry.kind {
            Kind::Kernel => {
                kernels += 1;
                kernel = Some(entry);
            }
            Kind::FirstProgram => {
                first_programs += 1;
                first_program = Some(entry);
            }
            Kind::Program | Kind::Data => {}
        }
    }
    if end != archive.len() {
        return Err(Malformed::TrailingGarbage);
    }
    let (1, Some(kernel)) = (kernels, kernel) else {
        return Err(Malformed::KernelCount);
    };
    let (1, Some(first_program)) = (first_programs, first_program) else {
        return Err(Malformed::FirstProgramCount);
    };
    Ok(Bundle { archive, count, kernel, first_program })
}

#[cfg(all(test, not(feature = "sign")))]
compile_error!("the bundle tests need the `sign` feature: cargo test -p bundle --features sign");
#[cfg(all(test, feature = "sign"))]
mod tests;
