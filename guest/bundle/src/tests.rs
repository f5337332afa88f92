//! Host tests (they need the feature `sign`, see guest/README.md).

extern crate std;

use super::*;
use ed25519_dalek::SigningKey;
use std::vec::Vec;

#[test]
fn dev_public_key_is_the_dev_seeds() {
    assert_eq!(SigningKey::from_bytes(&DEV_SEED).verifying_key().to_bytes(), DEV_PUBLIC_KEY);
}

const KERNEL: &[u8] = b"\x7fELF kernel image";
const INIT: &[u8] = b"init program";
const BLOB: &[u8] = b"abc";

fn entries() -> [(&'static str, Kind, &'static [u8]); 4] {
    [
        ("kernel", Kind::Kernel, KERNEL),
        ("init", Kind::FirstProgram, INIT),
        ("blob", Kind::Data, BLOB),
        ("sample", Kind::Program, b""),
    ]
}

fn good() -> Vec<u8> {
    pack_signed(&entries(), &DEV_SEED).unwrap()
}

/// `archive` with the development trailer appended.
fn signed(archive: &[u8]) -> Vec<u8> {
    let mut out = archive.to_vec();
    out.extend_from_slice(&sign(archive, &DEV_SEED));
    out
}

#[test]
fn round_trip() {
    let bytes = good();
    let bundle = verify(&bytes, &DEV_PUBLIC_KEY).unwrap();
    assert_eq!(bundle.archive().len(), bytes.len() - TRAILER_LEN);
    let got: Vec<_> = bundle.entries().map(|e| (e.name, e.kind, e.data)).collect();
    assert_eq!(got, entries().to_vec());
    for e in bundle.entries() {
        assert_eq!(e.offset % DATA_ALIGN, 0, "{}", e.name);
        assert_eq!(&bundle.archive()[e.offset..e.offset + e.data.len()], e.data);
    }
    assert_eq!(bundle.kernel().data, KERNEL);
    assert_eq!(bundle.kernel().name, "kernel");
    assert_eq!(bundle.first_program().data, INIT);
    assert_eq!(bundle.entry("blob").map(|e| e.data), Some(BLOB));
    assert_eq!(bundle.entry("sample").map(|e| e.kind), Some(Kind::Program));
    assert_eq!(bundle.entry("nothing"), None);
    assert_eq!(bundle.entry("kerne"), None);
    // The smallest bundle: a kernel and a first program, both empty.
    let small = pack_signed(&[("k", Kind::Kernel, b""), ("p", Kind::FirstProgram, b"")], &DEV_SEED).unwrap();
    assert_eq!(small.len(), HEADER_LEN + 2 * ENTRY_LEN + TRAILER_LEN);
    assert!(verify(&small, &DEV_PUBLIC_KEY).is_ok());
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let bytes = good();
    let archive_len = bytes.len() - TRAILER_LEN;
    for i in 0..bytes.len() {
        for bit in [0, 7] {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            let want = match i - archive_len.min(i) {
                _ if i < archive_len => Error::Signature,
                0..8 => Error::TrailerMagic,
                8..16 => Error::Short,
                _ => Error::Signature,
            };
            assert_eq!(verify(&bad, &DEV_PUBLIC_KEY).unwrap_err(), want, "byte {i} bit {bit}");
        }
    }
}

#[test]
fn sign_bare_is_refused() {
    let bytes = good();
    let archive = &bytes[..bytes.len() - TRAILER_LEN];
    let mut bare = archive.to_vec();
    bare.extend_from_slice(&sign_bare(archive, &DEV_SEED));
    assert_eq!(bare.len(), bytes.len());
    assert_eq!(verify(&bare, &DEV_PUBLIC_KEY).unwrap_err(), Error::Signature);
}

#[test]
fn every_short_length_is_refused() {
    let bytes = good();
    for len in 0..bytes.len() {
        let err = verify(&bytes[..len], &DEV_PUBLIC_KEY).unwrap_err();
        if len < TRAILER_LEN {
            assert_eq!(err, Error::Short, "length {len}");
        } else {
            assert!(matches!(err, Error::Short | Error::TrailerMagic), "length {len}: {err:?}");
        }
    }
    // The archive cut short but the trailer kept: the length no longer matches.
    let archive_len = bytes.len() - TRAILER_LEN;
    for cut in 1..=archive_len {
        let mut bad = bytes[..archive_len - cut].to_vec();
        bad.extend_from_slice(&bytes[archive_len..]);
        assert_eq!(verify(&bad, &DEV_PUBLIC_KEY).unwrap_err(), Error::Short, "cut {cut}");
    }
    // Bytes appended after the trailer: the trailer is no longer at the end.
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(verify(&longer, &DEV_PUBLIC_KEY).unwrap_err(), Error::TrailerMagic);
}

#[test]
fn other_keys_are_refused() {
    let bytes = good();
    let other = SigningKey::from_bytes(&[7; 32]).verifying_key().to_bytes();
    assert_eq!(verify(&bytes, &other).unwrap_err(), Error::Signature);
    // The identity point: a weak key.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert_eq!(verify(&bytes, &identity).unwrap_err(), Error::Key);
    // Signed with another seed, checked with the development key.
    let mut stranger = bytes[..bytes.len() - TRAILER_LEN].to_vec();
    let trailer = sign(&stranger, &[7; 32]);
    stranger.extend_from_slice(&trailer);
    assert_eq!(verify(&stranger, &DEV_PUBLIC_KEY).unwrap_err(), Error::Signature);
    assert!(verify(&stranger, &other).is_ok());
}

#[test]
fn a_prepared_signer_and_verifier_answer_as_the_one_shot_calls() {
    let signer = Signer::new(&DEV_SEED);
    let verifier = Verifier::new(&DEV_PUBLIC_KEY).unwrap();
    let bytes = signer.pack_signed(&entries()).unwrap();
    assert_eq!(bytes, good(), "Ed25519 signatures are deterministic");
    let archive = &bytes[..bytes.len() - TRAILER_LEN];
    assert_eq!(signer.sign(archive), sign(archive, &DEV_SEED));
    assert_eq!(signer.sign_bare(archive), sign_bare(archive, &DEV_SEED));
    let mut bare = archive.to_vec();
    bare.extend_from_slice(&signer.sign_bare(archive));
    let mut flipped = bytes.clone();
    flipped[20] ^= 4;
    let mut magic = archive.to_vec();
    magic[0] = b'X';
    let resigned = signed(&magic);
    for case in [&bytes[..], &bare, &flipped, &resigned, &bytes[..bytes.len() - 1], &bytes[..10]] {
        let one_shot = verify(case, &DEV_PUBLIC_KEY).map(|b| b.entries().count());
        assert_eq!(verifier.verify(case).map(|b| b.entries().count()), one_shot);
    }
    assert_eq!(verifier.verify(&bytes).unwrap().entries().count(), 4);
    assert_eq!(verifier.verify(&bare).unwrap_err(), Error::Signature);
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert_eq!(Verifier::new(&identity).unwrap_err(), Error::Key);
    let other = SigningKey::from_bytes(&[7; 32]).verifying_key().to_bytes();
    assert_eq!(Verifier::new(&other).unwrap().verify(&bytes).unwrap_err(), Error::Signature);
}

#[test]
fn the_signature_is_checked_before_any_entry() {
    let bytes = good();
    let mut bad = bytes.clone();
    bad[0] = b'X'; // a malformed archive magic, and a signature that no longer matches
    assert_eq!(verify(&bad, &DEV_PUBLIC_KEY).unwrap_err(), Error::Signature);
    let archive = &bad[..bad.len() - TRAILER_LEN];
    assert_eq!(verify(&signed(archive), &DEV_PUBLIC_KEY).unwrap_err(), Error::Archive(Malformed::Magic));
}

/// The unsigned archive of [`good`].
fn archive() -> Vec<u8> {
    pack(&entries()).unwrap()
}

/// Entry `i`'s field at `field` (0 name, 32 kind, 36 offset, 40 len, 44 reserved).
fn at(i: usize, field: usize) -> usize {
    HEADER_LEN + i * ENTRY_LEN + field
}

fn put32(archive: &mut [u8], offset: usize, value: u32) {
    archive[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

fn get32(archive: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(archive[offset..offset + 4].try_into().unwrap())
}

fn refused(archive: &[u8]) -> Malformed {
    match verify(&signed(archive), &DEV_PUBLIC_KEY) {
        Err(Error::Archive(m)) => m,
        other => panic!("not a malformed archive: {other:?}"),
    }
}

#[test]
fn each_malformed_archive_rule() {
    let good = archive();
    let with = |change: &dyn Fn(&mut Vec<u8>)| {
        let mut a = good.clone();
        change(&mut a);
        refused(&a)
    };
    assert_eq!(refused(b""), Malformed::Magic);
    assert_eq!(refused(b"TBBUNDL1"), Malformed::Magic);
    assert_eq!(with(&|a| a[7] = b'2'), Malformed::Magic);
    assert_eq!(with(&|a| put32(a, 12, 1)), Malformed::Reserved);
    assert_eq!(with(&|a| put32(a, 8, 0)), Malformed::Count);
    assert_eq!(with(&|a| put32(a, 8, MAX_ENTRIES as u32 + 1)), Malformed::Count);
    assert_eq!(with(&|a| put32(a, 8, u32::MAX)), Malformed::Count);
    assert_eq!(with(&|a| put32(a, 8, 40)), Malformed::Table);
    assert_eq!(with(&|a| a[at(0, 0)] = 0), Malformed::Name);
    assert_eq!(with(&|a| a[at(0, 0)] = 0x01), Malformed::Name);
    assert_eq!(with(&|a| a[at(0, 0)] = b' '), Malformed::Name);
    assert_eq!(with(&|a| a[at(0, 0)] = 0xc3), Malformed::Name);
    assert_eq!(with(&|a| a[at(1, 31)] = b'x'), Malformed::Name);
    assert_eq!(with(&|a| put32(a, at(1, 32), 0)), Malformed::Kind);
    assert_eq!(with(&|a| put32(a, at(1, 32), 5)), Malformed::Kind);
    assert_eq!(with(&|a| put32(a, at(2, 44), 1)), Malformed::EntryReserved);
    assert_eq!(with(&|a| put32(a, at(0, 36), 0)), Malformed::Bounds);
    assert_eq!(with(&|a| put32(a, at(0, 36), HEADER_LEN as u32)), Malformed::Bounds);
    assert_eq!(with(&|a| put32(a, at(0, 40), u32::MAX)), Malformed::Bounds);
    let len = good.len() as u32;
    assert_eq!(with(&|a| put32(a, at(2, 40), len)), Malformed::Bounds);
    assert_eq!(with(&|a| put32(a, at(3, 36), len + 8)), Malformed::Bounds);
    // The second entry's data over the first's, or after a gap.
    assert_eq!(with(&|a| put32(a, at(1, 36), get32(&good, at(0, 36)))), Malformed::Layout);
    assert_eq!(with(&|a| put32(a, at(1, 36), get32(&good, at(1, 36)) + 8)), Malformed::Layout);
    // The first entry 8 bytes longer: its end runs into the second's data.
    assert_eq!(with(&|a| put32(a, at(0, 40), get32(&good, at(0, 40)) + 8)), Malformed::Layout);
    let pad = get32(&good, at(0, 36)) as usize + KERNEL.len();
    assert_eq!(with(&|a| a[pad] = 1), Malformed::Padding);
    assert_eq!(with(&|a| a[at(2, 0)..at(2, 4)].copy_from_slice(b"init")), Malformed::DuplicateName);
    assert_eq!(with(&|a| put32(a, at(0, 32), 3)), Malformed::KernelCount);
    assert_eq!(with(&|a| put32(a, at(2, 32), 1)), Malformed::KernelCount);
    assert_eq!(with(&|a| put32(a, at(1, 32), 4)), Malformed::FirstProgramCount);
    assert_eq!(with(&|a| put32(a, at(3, 32), 2)), Malformed::FirstProgramCount);
    assert_eq!(with(&|a| a.push(0)), Malformed::TrailingGarbage);
    assert_eq!(with(&|a| put32(a, at(3, 36), len - 8)), Malformed::Layout);
}

#[test]
fn pack_refuses_what_would_not_parse() {
    let e = |m| Err(Error::Archive(m));
    assert_eq!(pack(&[("k", Kind::Kernel, b""), ("k", Kind::FirstProgram, b"")]), e(Malformed::DuplicateName));
    assert_eq!(pack(&[("k", Kind::Kernel, b"")]), e(Malformed::FirstProgramCount));
    assert_eq!(pack(&[("p", Kind::FirstProgram, b"")]), e(Malformed::KernelCount));
    assert_eq!(pack(&[("a-name-of-33-bytes-is-one-too-long", Kind::Kernel, b"")]), e(Malformed::Name));
    assert_eq!(pack(&[("", Kind::Kernel, b"")]), e(Malformed::Name));
    assert_eq!(pack(&[]), e(Malformed::Count));
    let name32 = "n".repeat(32);
    let ok = pack(&[(&name32, Kind::Kernel, b"x"), ("p", Kind::FirstProgram, b"")]).unwrap();
    let bytes = signed(&ok);
    let bundle = verify(&bytes, &DEV_PUBLIC_KEY).unwrap();
    assert_eq!(bundle.kernel().name, name32);
}

#[test]
fn describe_is_distinct_per_error() {
    let all = [
        Error::Short,
        Error::TrailerMagic,
        Error::Key,
        Error::Signature,
        Error::Archive(Malformed::Magic),
        Error::Archive(Malformed::Reserved),
        Error::Archive(Malformed::Count),
        Error::Archive(Malformed::Table),
        Error::Archive(Malformed::Name),
        Error::Archive(Malformed::Kind),
        Error::Archive(Malformed::EntryReserved),
        Error::Archive(Malformed::Bounds),
        Error::Archive(Malformed::Layout),
        Error::Archive(Malformed::Padding),
        Error::Archive(Malformed::DuplicateName),
        Error::Archive(Malformed::KernelCount),
        Error::Archive(Malformed::FirstProgramCount),
        Error::Archive(Malformed::TrailingGarbage),
    ];
    for (i, a) in all.iter().enumerate() {
        assert!(!a.describe().contains('\n'));
        for b in &all[i + 1..] {
            assert_ne!(a.describe(), b.describe());
        }
    }
}

/// The fuzzing stand-in (feature `fuzz-stand-in`): the same trailer, message and checks,
/// and no bundle crosses between it and Ed25519.
#[cfg(feature = "fuzz-stand-in")]
#[test]
fn the_stand_in_verifies_only_its_own_signatures_over_the_whole_message() {
    let (signer, verifier) = (Signer::stand_in(&DEV_SEED), Verifier::stand_in(&DEV_PUBLIC_KEY));
    let bytes = signer.pack_signed(&entries()).unwrap();
    let verified = verifier.verify(&bytes).unwrap();
    assert_eq!(verified.kernel().data, KERNEL);
    // Ed25519's verifier refuses it, and the stand-in refuses Ed25519's bundle.
    assert_eq!(verify(&bytes, &DEV_PUBLIC_KEY).unwrap_err(), Error::Signature);
    assert_eq!(verifier.verify(&good()).unwrap_err(), Error::Signature);
    // Another key's stand-in, a flipped bit anywhere in the archive or the signature, and
    // a signature over the bare archive are refused.
    let other = Verifier::stand_in(&[7; 32]);
    assert_eq!(other.verify(&bytes).unwrap_err(), Error::Signature);
    let archive_len = bytes.len() - TRAILER_LEN;
    for i in (0..archive_len).chain(archive_len + 16..bytes.len()) {
        let mut changed = bytes.clone();
        changed[i] ^= 0x10;
        assert_eq!(verifier.verify(&changed).unwrap_err(), Error::Signature, "byte {i}");
    }
    let mut bare = bytes[..archive_len].to_vec();
    bare.extend_from_slice(&signer.sign_bare(&bytes[..archive_len]));
    assert_eq!(verifier.verify(&bare).unwrap_err(), Error::Signature);
    // The stand-in signer's other calls agree with its verifier.
    assert_eq!(signed_by(&signer, &bytes[..archive_len]), bytes);
}

#[cfg(feature = "fuzz-stand-in")]
fn signed_by(signer: &Signer, archive: &[u8]) -> Vec<u8> {
    let mut out = archive.to_vec();
    out.extend_from_slice(&signer.sign(archive));
    out
}
