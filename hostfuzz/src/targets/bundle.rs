//! The bundle verifier (`guest/bundle`). A generator packs a valid bundle from the
//! decisions (a kernel, a first program, up to four more entries, their names and data)
//! and signs it with the development seed; the intact bundle must verify with exactly
//! those entries. Then a few bytes change as the decisions say, and either
//!
//! - the signed bundle is verified again: any change that verifies is a forgery, as the
//!   signature covers every byte; or
//! - (one input in two) the changed archive is signed again, so the strict parser behind
//!   the signature sees it: what it accepts must still keep the format's rules.
//!
//! Any panic is a finding too.
//!
//! Two targets run this: `bundle` with Ed25519, as the guest verifies, and
//! `bundle-format` with guest/bundle's fuzzing stand-in (feature `fuzz-stand-in`: SHA-512
//! over a marker, the key and the same message, in the same trailer, through the same
//! `Verifier::verify`). Ed25519's arithmetic is ~85% of `bundle`'s time an input; the
//! stand-in leaves a campaign's time to the format, the trailer and the verifier's own
//! code, whose every check it reaches the same way (a change that verifies is a forgery
//! for either: a hash over the whole message catches a byte left out of it as Ed25519
//! does). What only `bundle` proves: the Ed25519 path itself.
//!
//! The keys are read once, in the runner before its first fork ([`prepare`]): a child
//! signs with the prepared [`Signer`] and verifies with the prepared [`Verifier`], the
//! same code as `bundle::sign` and `bundle::verify` without the key's work at each call.

use crate::{Decisions, Finding};
use bundle::{Kind, Signer, Verifier, DEV_PUBLIC_KEY, DEV_SEED, TRAILER_LEN};
use std::sync::LazyLock;

/// The development keys, Ed25519: the signing key derived once, the public key
/// decompressed and checked once.
static ED25519: LazyLock<(Signer, Verifier)> = LazyLock::new(|| {
    let verifier = Verifier::new(&DEV_PUBLIC_KEY).expect("the development public key is a valid key");
    (Signer::new(&DEV_SEED), verifier)
});
/// The development keys' fuzzing stand-in.
static STAND_IN: LazyLock<(Signer, Verifier)> =
    LazyLock::new(|| (Signer::stand_in(&DEV_SEED), Verifier::stand_in(&DEV_PUBLIC_KEY)));

/// Reads the keys, in the runner: its children inherit them.
pub fn prepare() {
    LazyLock::force(&ED25519);
    LazyLock::force(&STAND_IN);
}

/// An entry: name, kind, data.
type Packed = (String, Kind, Vec<u8>);

/// A name for the next entry, none of `taken`'s nor a fixed entry's: the decisions' own
/// if free; on a clash, the first free `entry-N` from `N` = the entries so far. (A retry
/// with more decisions would spin once the input has run out: past its end every try
/// reads the same zeros, the same name.)
fn name(d: &mut Decisions, taken: &[Packed]) -> String {
    let len = 1 + d.below(bundle::NAME_LEN);
    let name: String = (0..len).map(|_| (b'!' + d.below(94) as u8) as char).collect();
    let free = |n: &str| !taken.iter().any(|(t, _, _)| t == n) && !["kernel", "logsrv"].contains(&n);
    if free(&name) {
        return name;
    }
    (taken.len()..).map(|i| format!("entry-{i}")).find(|n| free(n)).expect("fewer entries than names")
}

fn entries(d: &mut Decisions) -> Vec<Packed> {
    let mut out: Vec<Packed> = Vec::new();
    let len = d.below(512);
    out.push(("kernel".to_owned(), Kind::Kernel, d.bytes(len)));
    let len = d.below(256);
    out.push(("logsrv".to_owned(), Kind::FirstProgram, d.bytes(len)));
    for _ in 0..d.below(5) {
        let kind = *d.choose(&[Kind::Program, Kind::Data]);
        let name = name(d, &out);
        let len = d.below(128);
        out.push((name, kind, d.bytes(len)));
    }
    // The table's order is the decisions' too.
    for i in (1..out.len()).rev() {
        let j = d.below(i + 1);
        out.swap(i, j);
    }
    out
}

/// Changes `bytes` as the decisions say (at least one byte differs, or the length).
fn mutate(d: &mut Decisions, bytes: &mut Vec<u8>) {
    for _ in 0..1 + d.below(4) {
        // The entries the table holds (as far as the bytes go): the table ops' targets.
        let count = bytes.get(8..12).map_or(0, |c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize);
        let rows = count.min(bytes.len().saturating_sub(bundle::HEADER_LEN) / bundle::ENTRY_LEN);
        match d.below(19) {
            0..=11 => {
                let at = d.below(bytes.len());
                bytes[at] ^= d.u8().max(1);
            }
            12 | 13 if bytes.len() >= 4 => {
                // A little-endian u32 field set to a nearby value (counts, offsets, lengths).
                let at = d.below(bytes.len().saturating_sub(3)) & !3;
                let delta = *d.choose(&[1u32, u32::MAX, 8, 4, 0x100, 0x8000_0000]);
                let old = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
                bytes[at..at + 4].copy_from_slice(&old.wrapping_add(delta).to_le_bytes());
            }
            14 => {
                // Anywhere, or within the archive's header.
                let within = *d.choose(&[bytes.len(), 24.min(bytes.len())]);
                let len = d.below(within);
                bytes.truncate(len);
                if bytes.is_empty() {
                    return;
                }
            }
            15 => {
                let len = 1 + d.below(16);
                bytes.extend(d.bytes(len));
            }
            16 if rows > 0 => {
                // An entry's name field zeroed: the empty name.
                let at = bundle::HEADER_LEN + bundle::ENTRY_LEN * d.below(rows);
                bytes[at..at + bundle::NAME_LEN].fill(0);
            }
            17 if rows > 0 => {
                // An entry's kind set: a second kernel or first program, or no kind at all.
                let at = bundle::HEADER_LEN + bundle::ENTRY_LEN * d.below(rows) + bundle::NAME_LEN;
                let kind = *d.choose(&[1u32, 2, 3, 4, 0, 5]);
                bytes[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            }
            _ if rows > 1 => {
                // One entry's name copied over another's: a duplicate.
                let from = bundle::HEADER_LEN + bundle::ENTRY_LEN * d.below(rows);
                let to = bundle::HEADER_LEN + bundle::ENTRY_LEN * d.below(rows);
                bytes.copy_within(from..from + bundle::NAME_LEN, to);
            }
            _ => {
                let at = d.below(bytes.len());
                bytes[at] ^= 1;
            }
        }
    }
}

/// The format's rules on the archive's own bytes (read here, not through the parser):
/// header, each table entry as stored, the canonical layout of the data.
fn raw_rules(archive: &[u8], count: usize) -> Result<(), String> {
    let word = |at: usize| archive.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if archive.get(..8) != Some(&b"TBBUNDL1"[..]) {
        return Err(format!("magic {:x?}", archive.get(..8)));
    }
    if word(8) != Some(count as u32) || word(12) != Some(0) {
        return Err(format!("header count {:?} for {count} entries, reserved {:?}", word(8), word(12)));
    }
    let mut end = bundle::HEADER_LEN + bundle::ENTRY_LEN * count;
    for i in 0..count {
        let at = bundle::HEADER_LEN + bundle::ENTRY_LEN * i;
        let name = archive.get(at..at + bundle::NAME_LEN).ok_or(format!("entry {i} past the end"))?;
        let used = name.iter().position(|&b| b == 0).unwrap_or(bundle::NAME_LEN);
        if name[used..].iter().any(|&b| b != 0) {
            return Err(format!("entry {i}: bytes after the name's NUL"));
        }
        let field = |o: usize| word(at + bundle::NAME_LEN + o).ok_or(format!("entry {i} past the end"));
        let (kind, offset, len, reserved) = (field(0)?, field(4)?, field(8)?, field(12)?);
        if !(1..=4).contains(&kind) || reserved != 0 {
            return Err(format!("entry {i}: kind {kind}, reserved {reserved}"));
        }
        let start = end.next_multiple_of(bundle::DATA_ALIGN);
        if offset as usize != start {
            return Err(format!("entry {i}: data at {offset}, the layout says {start}"));
        }
        if archive.get(end..start).is_none_or(|pad| pad.iter().any(|&b| b != 0)) {
            return Err(format!("entry {i}: padding {end}..{start} not zero"));
        }
        end = start + len as usize;
    }
    if end != archive.len() {
        return Err(format!("data ends at {end}, the archive at {}", archive.len()));
    }
    Ok(())
}

fn same_entries(verified: &bundle::Bundle<'_>, packed: &[Packed]) -> bool {
    verified.entries().count() == packed.len()
        && verified.entries().zip(packed).all(|(e, (n, k, data))| e.name == n && e.kind == *k && e.data == &data[..])
}

/// The format's rules, checked on an accepted archive independently of the parser.
fn rules(verified: &bundle::Bundle<'_>) -> Result<(), String> {
    let archive = verified.archive();
    let mut names = Vec::new();
    let (mut kernels, mut firsts) = (0, 0);
    for e in verified.entries() {
        let at = e.data.as_ptr() as usize - archive.as_ptr() as usize;
        if at != e.offset || e.offset + e.data.len() > archive.len() {
            return Err(format!("{:?}: data at {at}, offset {}", e.name, e.offset));
        }
        if e.name.is_empty() || e.name.len() > bundle::NAME_LEN || !e.name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("name {:?}", e.name));
        }
        if names.contains(&e.name) {
            return Err(format!("duplicate name {:?}", e.name));
        }
        names.push(e.name);
        kernels += usize::from(e.kind == Kind::Kernel);
        firsts += usize::from(e.kind == Kind::FirstProgram);
    }
    if kernels != 1 || firsts != 1 || names.is_empty() {
        return Err(format!("{kernels} kernels, {firsts} first programs"));
    }
    if verified.kernel().kind != Kind::Kernel || verified.first_program().kind != Kind::FirstProgram {
        return Err("kernel() or first_program() of the wrong kind".to_owned());
    }
    raw_rules(archive, verified.entries().count())
}

/// One run, Ed25519.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let (signer, verifier) = &*ED25519;
    run_with(d, signer, verifier)
}

/// One run, the stand-in signature.
pub fn run_format(d: &mut Decisions) -> Result<(), Finding> {
    let (signer, verifier) = &*STAND_IN;
    run_with(d, signer, verifier)
}

fn run_with(d: &mut Decisions, signer: &Signer, verifier: &Verifier) -> Result<(), Finding> {
    let packed = entries(d);
    let list: Vec<(&str, Kind, &[u8])> = packed.iter().map(|(n, k, data)| (n.as_str(), *k, &data[..])).collect();
    let signed = match signer.pack_signed(&list) {
        Ok(signed) => signed,
        Err(e) => return Err(Finding::oracle("a valid entry list refused by pack", e.describe())),
    };
    match verifier.verify(&signed) {
        Ok(verified) if same_entries(&verified, &packed) => {}
        Ok(_) => return Err(Finding::oracle("an intact bundle verified with other entries", "")),
        Err(e) => return Err(Finding::oracle("an intact bundle refused", e.describe())),
    }
    if d.bool() {
        // The archive changed and signed again: the parser's rules, past the signature.
        let mut archive = signed[..signed.len() - TRAILER_LEN].to_vec();
        mutate(d, &mut archive);
        let trailer = signer.sign(&archive);
        archive.extend_from_slice(&trailer);
        match verifier.verify(&archive) {
            Ok(verified) => {
                rules(&verified).map_err(|e| Finding::oracle("a re-signed archive accepted against the rules", e))?;
                d.end("re-signed: accepted");
            }
            Err(e) => d.end(e.describe()),
        }
        return Ok(());
    }
    let mut changed = signed.clone();
    mutate(d, &mut changed);
    if changed == signed {
        d.end("mutation undone");
        return Ok(());
    }
    match verifier.verify(&changed) {
        Ok(_) => Err(Finding::new("forgery", "a changed bundle verified", format!("{} bytes", changed.len()))),
        Err(e) => {
            d.end(e.describe());
            Ok(())
        }
    }
}
