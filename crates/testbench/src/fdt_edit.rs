//! Editing the device tree QEMU built for a boot, in place.
//!
//! The bench dumps the tree QEMU makes for the case's own command line
//! (`-machine …,dumpdtb=`), edits it here and boots it with `-dtb`, so the firmware, the
//! loader and the kernel see the one machine with that one difference. No byte moves:
//! a dropped property, or the cut-off tail of a shrunk one, becomes FDT_NOP tokens, so
//! every offset and the header stay true. Each edit must find its property.
//!
//! One parser: a property is found by the guest's own device-tree reader (`guest/fdt`,
//! by path, as the bundle and ELF crates are), the very walk the kernel reads the edited
//! tree with, host-tested and fuzzed (hostfuzz's `fdt` target). This module only writes
//! over what the reader found: a property's token, length and value sit at fixed places
//! before the value it returns. A writer such as `vm-fdt` builds a tree afresh, where an
//! edit here must leave every other byte where QEMU put it.

use testbench_case::DtEdit;

/// FDT_PROP: a property's token, then its length and name offset, then its value.
const PROP: u32 = 3;
/// FDT_NOP: a token every reader skips.
const NOP: u32 = 4;
/// A property's token, length and name offset: the bytes before its value.
const PROP_HEADER: usize = 12;

/// What an edit or a pack of QEMU's tree could not do.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FdtEditError {
    /// The guest's reader refused the tree before it found the property.
    #[error("the tree QEMU built does not read: {what} at offset {offset:#x}")]
    Unreadable { what: &'static str, offset: usize },
    #[error("no property {path} in the tree QEMU built")]
    NoProperty { path: String },
    #[error("{path} has {has} bytes, fewer than the {to} to shrink it to")]
    ShrinkPastEnd { path: String, has: usize, to: usize },
    #[error("{path} has {has} cells, not the {given} given")]
    CellCount { path: String, has: usize, given: usize },
    #[error("not a flattened device tree (bad magic)")]
    BadMagic,
    #[error("the tree ends inside a word at offset {at:#x}")]
    EndsInWord { at: usize },
    #[error("the memory reservation block runs past the tree")]
    ReservationsPastEnd,
    #[error("a block's end overflows")]
    BlockEndOverflows,
    #[error("the tree's blocks end at {end:#x}, past its {len:#x} bytes")]
    BlocksPastEnd { end: usize, len: usize },
}

impl From<fdt::Error> for FdtEditError {
    fn from(e: fdt::Error) -> FdtEditError {
        FdtEditError::Unreadable { what: e.what, offset: e.offset }
    }
}

fn be32(bytes: &[u8], at: usize) -> Result<u32, FdtEditError> {
    bytes.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok_or(FdtEditError::EndsInWord { at })
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A property found in the structure block.
#[derive(Debug)]
struct Found {
    /// Offset of its FDT_PROP token.
    token: usize,
    /// Its value's length.
    len: usize,
}

/// Finds the property at `path` (`/node/…/name`; a node component is a node's whole
/// name, or the part before its `@`; the first in tree order) with the guest's reader.
fn find(tree: &[u8], path: &str) -> Result<Found, FdtEditError> {
    if be32(tree, 0)? != fdt::MAGIC {
        return Err(FdtEditError::BadMagic);
    }
    // Empty node components (`/cpus//x`) name no node: the path without them.
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let wanted = format!("/{}", components.join("/"));
    let no_property = || FdtEditError::NoProperty { path: path.to_string() };
    let value = fdt::Fdt::new(tree)?.property(&wanted)?.ok_or_else(no_property)?;
    // The reader's value is a slice of `tree`: its place is the distance between them.
    let at = (value.as_ptr() as usize) - (tree.as_ptr() as usize);
    let token = at.checked_sub(PROP_HEADER).ok_or_else(no_property)?;
    debug_assert_eq!(be32(tree, token).ok(), Some(PROP), "a value the reader found follows its FDT_PROP");
    Ok(Found { token, len: value.len() })
}

fn nop_fill(tree: &mut [u8], from: usize, to: usize) {
    for at in (from..to).step_by(4) {
        tree[at..at + 4].copy_from_slice(&NOP.to_be_bytes());
    }
}

/// Apply one edit; the error says what was not found or does not fit.
pub fn apply(tree: &mut [u8], edit: &DtEdit) -> Result<(), FdtEditError> {
    match edit {
        DtEdit::Drop { path } => {
            let found = find(tree, path)?;
            nop_fill(tree, found.token, found.token + PROP_HEADER + align4(found.len));
        }
        DtEdit::Shrink { path, to } => {
            let found = find(tree, path)?;
            let to = *to as usize;
            if to > found.len {
                return Err(FdtEditError::ShrinkPastEnd { path: path.clone(), has: found.len, to });
            }
            tree[found.token + 4..found.token + 8].copy_from_slice(&(to as u32).to_be_bytes());
            let value = found.token + PROP_HEADER;
            tree[value + to..value + align4(to)].fill(0);
            nop_fill(tree, value + align4(to), value + align4(found.len));
        }
        DtEdit::Set { path, words } => {
            let found = find(tree, path)?;
            if found.len != words.len() * 4 {
                return Err(FdtEditError::CellCount { path: path.clone(), has: found.len / 4, given: words.len() });
            }
            for (i, word) in words.iter().enumerate() {
                let at = found.token + PROP_HEADER + i * 4;
                tree[at..at + 4].copy_from_slice(&word.to_be_bytes());
            }
        }
    }
    Ok(())
}

/// Cut the free space off the tree's end: its size becomes the end of its last block.
/// QEMU dumps `virt`'s tree with a 1 MiB `totalsize`, mostly free space; booted as it is
/// with `-dtb`, QEMU grows it further, and Debian's arm64 kernel then starts and prints
/// nothing (the same tree packed boots). Only the header's `totalsize` changes and the
/// free tail goes: no block moves. (The header's fields, not the structure: the guest's
/// reader has no use for the memory reservation block, so its end is found here.)
pub fn pack(tree: &mut Vec<u8>) -> Result<(), FdtEditError> {
    if be32(tree, 0)? != fdt::MAGIC {
        return Err(FdtEditError::BadMagic);
    }
    let field = |at: usize| be32(tree, at).map(|v| v as usize);
    let (off_struct, off_strings, off_rsvmap) = (field(8)?, field(12)?, field(16)?);
    let (size_strings, size_struct) = (field(32)?, field(36)?);
    // The memory reservation block: 16-byte entries up to the one of two zeros.
    let mut rsvmap_end = off_rsvmap;
    loop {
        let entry = tree.get(rsvmap_end..rsvmap_end + 16).ok_or(FdtEditError::ReservationsPastEnd)?;
        rsvmap_end += 16;
        if entry.iter().all(|&b| b == 0) {
            break;
        }
    }
    let end = [off_struct.checked_add(size_struct), off_strings.checked_add(size_strings), Some(rsvmap_end)]
        .into_iter()
        .try_fold(0usize, |end, block| block.map(|b| end.max(b)))
        .ok_or(FdtEditError::BlockEndOverflows)?;
    let end = (end + 7) & !7;
    if end > tree.len() {
        return Err(FdtEditError::BlocksPastEnd { end, len: tree.len() });
    }
    tree.truncate(end);
    tree[4..8].copy_from_slice(&(end as u32).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fdt::MAGIC;

    const BEGIN_NODE: u32 = 1;
    const END_NODE: u32 = 2;
    const END: u32 = 9;

    /// A tiny tree: / { cpus { timebase-frequency = <10000000>; }; chosen { rng-seed = [16 bytes]; }; }.
    fn tree() -> Vec<u8> {
        let strings = b"timebase-frequency\0rng-seed\0".to_vec();
        let mut s = Vec::new();
        let word = |s: &mut Vec<u8>, w: u32| s.extend_from_slice(&w.to_be_bytes());
        let name = |s: &mut Vec<u8>, n: &str| {
            s.extend_from_slice(n.as_bytes());
            s.push(0);
            while !s.len().is_multiple_of(4) {
                s.push(0);
            }
        };
        word(&mut s, BEGIN_NODE);
        name(&mut s, "");
        word(&mut s, BEGIN_NODE);
        name(&mut s, "cpus");
        word(&mut s, PROP);
        word(&mut s, 4);
        word(&mut s, 0);
        word(&mut s, 10_000_000);
        word(&mut s, END_NODE);
        word(&mut s, BEGIN_NODE);
        name(&mut s, "chosen");
        word(&mut s, PROP);
        word(&mut s, 16);
        word(&mut s, 19);
        s.extend_from_slice(&[0xaa; 16]);
        word(&mut s, END_NODE);
        word(&mut s, END_NODE);
        word(&mut s, END);
        let off_struct = 40usize;
        let off_strings = off_struct + s.len();
        let total = off_strings + strings.len();
        let mut t = Vec::new();
        for w in [
            MAGIC,
            total as u32,
            off_struct as u32,
            off_strings as u32,
            0,
            17,
            16,
            0,
            strings.len() as u32,
            s.len() as u32,
        ] {
            t.extend_from_slice(&w.to_be_bytes());
        }
        t.extend_from_slice(&s);
        t.extend_from_slice(&strings);
        t
    }

    #[test]
    fn a_packed_tree_loses_its_free_tail_and_keeps_every_block() {
        let mut t = tree();
        // The test tree's reservation block sits at offset 0 (inside the header, whose
        // words 0..4 are not zero), so give it a real one: 16 zero bytes after the
        // strings, as QEMU's order puts it first; here it is simply last.
        let rsv = t.len();
        t.extend_from_slice(&[0; 16]);
        t[16..20].copy_from_slice(&(rsv as u32).to_be_bytes());
        let used = t.len();
        t.resize(used + 4096, 0);
        t[4..8].copy_from_slice(&((used + 4096) as u32).to_be_bytes());
        pack(&mut t).unwrap();
        let packed = (used + 7) & !7;
        assert_eq!(t.len(), packed);
        assert_eq!(be32(&t, 4).unwrap() as usize, packed);
        apply(&mut t, &DtEdit::Set { path: "/cpus/timebase-frequency".into(), words: vec![1] }).unwrap();
        let mut short = t[..t.len() - 8].to_vec();
        assert_eq!(pack(&mut short), Err(FdtEditError::ReservationsPastEnd), "a tree cut inside its blocks is refused");
    }

    #[test]
    fn a_dropped_property_becomes_nops_and_nothing_moves() {
        let mut t = tree();
        let before = t.len();
        apply(&mut t, &DtEdit::Drop { path: "/chosen/rng-seed".into() }).unwrap();
        assert_eq!(t.len(), before);
        assert!(
            matches!(find(&t, "/chosen/rng-seed"), Err(FdtEditError::NoProperty { path }) if path == "/chosen/rng-seed")
        );
        assert_eq!(find(&t, "/cpus/timebase-frequency").unwrap().len, 4, "the rest of the tree still reads");
    }

    #[test]
    fn a_shrunk_property_keeps_its_first_bytes() {
        let mut t = tree();
        apply(&mut t, &DtEdit::Shrink { path: "/chosen/rng-seed".into(), to: 8 }).unwrap();
        let found = find(&t, "/chosen/rng-seed").unwrap();
        assert_eq!(found.len, 8);
        assert_eq!(&t[found.token + 12..found.token + 20], &[0xaa; 8]);
        let past = apply(&mut t, &DtEdit::Shrink { path: "/chosen/rng-seed".into(), to: 9 }).unwrap_err();
        assert_eq!(past, FdtEditError::ShrinkPastEnd { path: "/chosen/rng-seed".into(), has: 8, to: 9 });
        assert_eq!(past.to_string(), "/chosen/rng-seed has 8 bytes, fewer than the 9 to shrink it to");
    }

    #[test]
    fn set_writes_as_many_cells_as_the_property_has() {
        let mut t = tree();
        apply(&mut t, &DtEdit::Set { path: "/cpus/timebase-frequency".into(), words: vec![0] }).unwrap();
        let found = find(&t, "/cpus/timebase-frequency").unwrap();
        assert_eq!(be32(&t, found.token + 12).unwrap(), 0);
        let wrong = apply(&mut t, &DtEdit::Set { path: "/cpus/timebase-frequency".into(), words: vec![0, 0] });
        let wrong = wrong.unwrap_err();
        assert_eq!(wrong, FdtEditError::CellCount { path: "/cpus/timebase-frequency".into(), has: 1, given: 2 });
        assert_eq!(wrong.to_string(), "/cpus/timebase-frequency has 1 cells, not the 2 given");
    }

    #[test]
    fn an_edit_must_find_its_property() {
        let mut t = tree();
        let error = apply(&mut t, &DtEdit::Drop { path: "/chosen/no-such".into() }).unwrap_err();
        assert_eq!(error, FdtEditError::NoProperty { path: "/chosen/no-such".into() });
        assert_eq!(error.to_string(), "no property /chosen/no-such in the tree QEMU built");
        // A node component is the node's whole name: `cpu` is not `cpus`.
        let near = apply(&mut t, &DtEdit::Drop { path: "/cpu/timebase-frequency".into() }).unwrap_err();
        assert!(matches!(near, FdtEditError::NoProperty { .. }), "{near}");
    }

    #[test]
    fn empty_node_components_are_skipped_as_before() {
        let mut t = tree();
        apply(&mut t, &DtEdit::Set { path: "/cpus//timebase-frequency".into(), words: vec![7] }).unwrap();
        let found = find(&t, "/cpus/timebase-frequency").unwrap();
        assert_eq!(be32(&t, found.token + PROP_HEADER).unwrap(), 7);
    }

    #[test]
    fn a_tree_the_guests_reader_refuses_is_refused_with_its_words() {
        let mut t = tree();
        assert_eq!(
            apply(&mut t[..3].to_vec(), &DtEdit::Drop { path: "/chosen/rng-seed".into() }),
            Err(FdtEditError::EndsInWord { at: 0 })
        );
        t[0] = 0;
        assert_eq!(apply(&mut t, &DtEdit::Drop { path: "/chosen/rng-seed".into() }), Err(FdtEditError::BadMagic));
        // The root's first token turned into one no reader knows: the guest's reader
        // stops there, with its own words and the offset.
        let mut t = tree();
        t[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        t[40..44].copy_from_slice(&7u32.to_be_bytes());
        let error = apply(&mut t, &DtEdit::Drop { path: "/chosen/rng-seed".into() }).unwrap_err();
        assert_eq!(error, FdtEditError::Unreadable { what: "unknown token", offset: 40 });
        assert_eq!(error.to_string(), "the tree QEMU built does not read: unknown token at offset 0x28");
        // A version the reader does not take is refused before any walk.
        let mut t = tree();
        t[20..24].copy_from_slice(&16u32.to_be_bytes());
        let error = apply(&mut t, &DtEdit::Drop { path: "/chosen/rng-seed".into() }).unwrap_err();
        assert_eq!(error, FdtEditError::Unreadable { what: "unsupported version", offset: 20 });
    }
}
