//! Packing and signing (feature `sign`, host only: the bench builds bundles with it).

use crate::{align, parse_rules, Error, Kind, Malformed, ARCHIVE_MAGIC, DOMAIN, ENTRY_LEN, HEADER_LEN, NAME_LEN};
use crate::{TRAILER_LEN, TRAILER_MAGIC};
use ed25519_dalek::{Signer as _, SigningKey};
use std::vec::Vec;

/// The DEVELOPMENT signing seed, whose public key is [`crate::DEV_PUBLIC_KEY`].
///
/// **DEVELOPMENT ONLY, NOT FOR PRODUCTION, NOT A SECRET.** It is published in this
/// source tree: ANYONE can sign a bundle with it, so a guest that trusts
/// `DEV_PUBLIC_KEY` accepts anybody's bundle. Use it for the bench and local work only.
pub const DEV_SEED: [u8; 32] = *b"TESTBENCH-DEV-SEED-NOT-A-SECRET!";

/// A signing key derived once from its seed, to sign many archives: [`sign`] and
/// [`pack_signed`] without the key's derivation at each call.
#[derive(Clone, Debug)]
pub struct Signer {
    key: SigningKey,
    /// Feature `fuzz-stand-in`: the public key whose stand-in signature this signer makes
    /// instead of Ed25519's (see the crate's doc).
    #[cfg(feature = "fuzz-stand-in")]
    stand_in: Option<[u8; 32]>,
}

impl Signer {
    /// The signer for `seed`.
    pub fn new(seed: &[u8; 32]) -> Signer {
        Signer {
            key: SigningKey::from_bytes(seed),
            #[cfg(feature = "fuzz-stand-in")]
            stand_in: None,
        }
    }

    /// UNSAFE, host fuzzing only: a signer that makes the stand-in signature of `seed`'s
    /// public key, which [`crate::Verifier::stand_in`] of that key takes and no Ed25519
    /// verifier does.
    #[cfg(feature = "fuzz-stand-in")]
    pub fn stand_in(seed: &[u8; 32]) -> Signer {
        let key = SigningKey::from_bytes(seed);
        Signer { stand_in: Some(key.verifying_key().to_bytes()), key }
    }

    /// The trailer for `archive`: Ed25519 over DOMAIN || archive_len (u64 LE) || archive.
    pub fn sign(&self, archive: &[u8]) -> [u8; TRAILER_LEN] {
        let mut message = Vec::with_capacity(DOMAIN.len() + 8 + archive.len());
        message.extend_from_slice(DOMAIN);
        message.extend_from_slice(&(archive.len() as u64).to_le_bytes());
        message.extend_from_slice(archive);
        self.trailer(archive.len(), &message)
    }

    /// The HOSTILE variant of [`Signer::sign`]: a trailer of the same layout whose
    /// signature covers the archive alone (no domain, no length). [`crate::verify`] must
    /// refuse it.
    pub fn sign_bare(&self, archive: &[u8]) -> [u8; TRAILER_LEN] {
        self.trailer(archive.len(), archive)
    }

    /// [`pack`], then the [`Signer::sign`] trailer appended: a whole bundle.
    pub fn pack_signed(&self, entries: &[(&str, Kind, &[u8])]) -> Result<Vec<u8>, Error> {
        let mut out = pack(entries)?;
        let trailer = self.sign(&out);
        out.extend_from_slice(&trailer);
        Ok(out)
    }

    fn trailer(&self, archive_len: usize, message: &[u8]) -> [u8; TRAILER_LEN] {
        let signature = self.signature(message);
        let mut out = [0u8; TRAILER_LEN];
        out[..8].copy_from_slice(&TRAILER_MAGIC);
        out[8..16].copy_from_slice(&(archive_len as u64).to_le_bytes());
        out[16..].copy_from_slice(&signature);
        out
    }
}

#[cfg(feature = "fuzz-stand-in")]
impl Signer {
    /// The signature over `message`: Ed25519's, or the stand-in's.
    fn signature(&self, message: &[u8]) -> [u8; 64] {
        match &self.stand_in {
            Some(key) => crate::stand_in_signature(key, |part| part(message)),
            None => self.key.sign(message).to_bytes(),
        }
    }
}

#[cfg(not(feature = "fuzz-stand-in"))]
impl Signer {
    /// The Ed25519 signature over `message`.
    fn signature(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

/// The trailer for `archive`: Ed25519 (key from `seed`) over
/// DOMAIN || archive_len (u64 LE) || archive. The key is derived at each call; a
/// [`Signer`] derives it once.
pub fn sign(archive: &[u8], seed: &[u8; 32]) -> [u8; TRAILER_LEN] {
    Signer::new(seed).sign(archive)
}

/// The HOSTILE variant of [`sign`]: a trailer of the same layout whose signature covers
/// the archive alone (no domain, no length). [`crate::verify`] must refuse it.
pub fn sign_bare(archive: &[u8], seed: &[u8; 32]) -> [u8; TRAILER_LEN] {
    Signer::new(seed).sign_bare(archive)
}

/// The archive holding `entries` (name, kind, data), in the canonical layout: the
/// table in the given order, each entry's data at the next multiple of
/// [`crate::DATA_ALIGN`], zero padding. Refused (with the rule) when the result would
/// not parse: a bad or duplicate name, not exactly one kernel and one first program, ...
pub fn pack(entries: &[(&str, Kind, &[u8])]) -> Result<Vec<u8>, Error> {
    let malformed = |m| Error::Archive(m);
    let count = u32::try_from(entries.len()).map_err(|_| malformed(Malformed::Count))?;
    let mut out = Vec::new();
    out.extend_from_slice(&ARCHIVE_MAGIC);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut data_at = HEADER_LEN + entries.len() * ENTRY_LEN;
    for (name, kind, data) in entries {
        if name.len() > NAME_LEN {
            return Err(malformed(Malformed::Name));
        }
        let offset = align(data_at).ok_or(malformed(Malformed::Bounds))?;
        let mut field = [0u8; NAME_LEN];
        field[..name.len()].copy_from_slice(name.as_bytes());
        out.extend_from_slice(&field);
        out.extend_from_slice(&(*kind as u32).to_le_bytes());
        for n in [offset, data.len()] {
            out.extend_from_slice(&u32::try_from(n).map_err(|_| malformed(Malformed::Bounds))?.to_le_bytes());
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        data_at = offset + data.len();
    }
    for (_, _, data) in entries {
        out.resize(align(out.len()).ok_or(malformed(Malformed::Bounds))?, 0);
        out.extend_from_slice(data);
    }
    parse_rules(&out).map_err(malformed)?;
    Ok(out)
}

/// [`pack`], then the [`sign`] trailer appended: a whole bundle.
pub fn pack_signed(entries: &[(&str, Kind, &[u8])], seed: &[u8; 32]) -> Result<Vec<u8>, Error> {
    Signer::new(seed).pack_signed(entries)
}
