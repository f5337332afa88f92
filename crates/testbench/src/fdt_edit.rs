//! Editing the device tree QEMU built for a boot, in place.
//!
//! The bench dumps the tree QEMU makes for the case's own command line
//! (`-machine …,dumpdtb=`), edits it here and boots it with `-dtb`, so the firmware, the
//! loader and the kernel see the one machine with that one difference. No byte moves:
//! a dropped property, or the cut-off tail of a shrunk one, becomes FDT_NOP tokens, so
//! every offset and the header stay true. Each edit must find its property.

use testbench_case::DtEdit;

const MAGIC: u32 = 0xd00d_feed;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

fn be32(bytes: &[u8], at: usize) -> Result<u32, String> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| format!("the tree ends inside a word at offset {at:#x}"))
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

/// Whether a node's name matches a path component: the whole name, or the part before `@`.
fn component_matches(name: &str, component: &str) -> bool {
    name == component || name.split_once('@').is_some_and(|(base, _)| base == component && !component.contains('@'))
}

fn find(tree: &[u8], path: &str) -> Result<Found, String> {
    if be32(tree, 0)? != MAGIC {
        return Err("not a flattened device tree (bad magic)".into());
    }
    let off_struct = be32(tree, 8)? as usize;
    let off_strings = be32(tree, 12)? as usize;
    let size_struct = be32(tree, 36)? as usize;
    let end = off_struct
        .checked_add(size_struct)
        .filter(|&e| e <= tree.len())
        .ok_or("the structure block runs past the tree")?;
    let (node_path, prop_name) = path.rsplit_once('/').ok_or("a property path starts with /")?;
    let wanted: Vec<&str> = node_path.split('/').filter(|c| !c.is_empty()).collect();
    // The names of the nodes we are inside, the root's being empty.
    let mut stack: Vec<String> = Vec::new();
    let mut at = off_struct;
    while at < end {
        let token = be32(tree, at)?;
        match token {
            BEGIN_NODE => {
                let name_start = at + 4;
                let nul =
                    tree[name_start..end].iter().position(|&b| b == 0).ok_or("a node name runs past the block")?;
                stack.push(String::from_utf8_lossy(&tree[name_start..name_start + nul]).into_owned());
                at = name_start + align4(nul + 1);
            }
            END_NODE => {
                stack.pop();
                at += 4;
            }
            PROP => {
                let len = be32(tree, at + 4)? as usize;
                let nameoff = be32(tree, at + 8)? as usize;
                let name_at = off_strings + nameoff;
                let name_end = tree
                    .get(name_at..)
                    .and_then(|s| s.iter().position(|&b| b == 0))
                    .ok_or("a property name runs past the strings")?;
                let name = String::from_utf8_lossy(&tree[name_at..name_at + name_end]);
                let in_node = stack.len() == wanted.len() + 1
                    && stack[1..].iter().zip(&wanted).all(|(have, want)| component_matches(have, want));
                if in_node && name == prop_name {
                    if at + 12 + len > end {
                        return Err(format!("{path}'s value runs past the structure block"));
                    }
                    return Ok(Found { token: at, len });
                }
                at += 12 + align4(len);
            }
            NOP => at += 4,
            END => break,
            other => return Err(format!("unknown token {other:#x} at offset {at:#x}")),
        }
    }
    Err(format!("no property {path} in the tree QEMU built"))
}

fn nop_fill(tree: &mut [u8], from: usize, to: usize) {
    for at in (from..to).step_by(4) {
        tree[at..at + 4].copy_from_slice(&NOP.to_be_bytes());
    }
}

/// Apply one edit; the error says what was not found or does not fit.
pub fn apply(tree: &mut [u8], edit: &DtEdit) -> Result<(), String> {
    match edit {
        DtEdit::Drop { path } => {
            let found = find(tree, path)?;
            nop_fill(tree, found.token, found.token + 12 + align4(found.len));
        }
        DtEdit::Shrink { path, to } => {
            let found = find(tree, path)?;
            let to = *to as usize;
            if to > found.len {
                return Err(format!("{path} has {} bytes, fewer than the {to} to shrink it to", found.len));
            }
            tree[found.token + 4..found.token + 8].copy_from_slice(&(to as u32).to_be_bytes());
            let value = found.token + 12;
            tree[value + to..value + align4(to)].fill(0);
            nop_fill(tree, value + align4(to), value + align4(found.len));
        }
        DtEdit::Set { path, words } => {
            let found = find(tree, path)?;
            if found.len != words.len() * 4 {
                return Err(format!("{path} has {} cells, not the {} given", found.len / 4, words.len()));
            }
            for (i, word) in words.iter().enumerate() {
                let at = found.token + 12 + i * 4;
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
/// free tail goes: no block moves.
pub fn pack(tree: &mut Vec<u8>) -> Result<(), String> {
    if be32(tree, 0)? != MAGIC {
        return Err("not a flattened device tree (bad magic)".into());
    }
    let field = |at: usize| be32(tree, at).map(|v| v as usize);
    let (off_struct, off_strings, off_rsvmap) = (field(8)?, field(12)?, field(16)?);
    let (size_strings, size_struct) = (field(32)?, field(36)?);
    // The memory reservation block: 16-byte entries up to the one of two zeros.
    let mut rsvmap_end = off_rsvmap;
    loop {
        let entry = tree.get(rsvmap_end..rsvmap_end + 16).ok_or("the memory reservation block runs past the tree")?;
        rsvmap_end += 16;
        if entry.iter().all(|&b| b == 0) {
            break;
        }
    }
    let end = [off_struct.checked_add(size_struct), off_strings.checked_add(size_strings), Some(rsvmap_end)]
        .into_iter()
        .try_fold(0usize, |end, block| block.map(|b| end.max(b)))
        .ok_or("a block's end overflows")?;
    let end = (end + 7) & !7;
    if end > tree.len() {
        return Err(format!("the tree's blocks end at {end:#x}, past its {:#x} bytes", tree.len()));
    }
    tree.truncate(end);
    tree[4..8].copy_from_slice(&(end as u32).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(pack(&mut short).unwrap_err().contains("past"), "a tree cut inside its blocks is refused");
    }

    #[test]
    fn a_dropped_property_becomes_nops_and_nothing_moves() {
        let mut t = tree();
        let before = t.len();
        apply(&mut t, &DtEdit::Drop { path: "/chosen/rng-seed".into() }).unwrap();
        assert_eq!(t.len(), before);
        assert!(find(&t, "/chosen/rng-seed").unwrap_err().contains("no property /chosen/rng-seed"));
        assert_eq!(find(&t, "/cpus/timebase-frequency").unwrap().len, 4, "the rest of the tree still reads");
    }

    #[test]
    fn a_shrunk_property_keeps_its_first_bytes() {
        let mut t = tree();
        apply(&mut t, &DtEdit::Shrink { path: "/chosen/rng-seed".into(), to: 8 }).unwrap();
        let found = find(&t, "/chosen/rng-seed").unwrap();
        assert_eq!(found.len, 8);
        assert_eq!(&t[found.token + 12..found.token + 20], &[0xaa; 8]);
        assert!(apply(&mut t, &DtEdit::Shrink { path: "/chosen/rng-seed".into(), to: 9 })
            .unwrap_err()
            .contains("fewer than"));
    }

    #[test]
    fn set_writes_as_many_cells_as_the_property_has() {
        let mut t = tree();
        apply(&mut t, &DtEdit::Set { path: "/cpus/timebase-frequency".into(), words: vec![0] }).unwrap();
        let found = find(&t, "/cpus/timebase-frequency").unwrap();
        assert_eq!(be32(&t, found.token + 12).unwrap(), 0);
        let wrong = apply(&mut t, &DtEdit::Set { path: "/cpus/timebase-frequency".into(), words: vec![0, 0] });
        assert!(wrong.unwrap_err().contains("has 1 cells, not the 2 given"));
    }

    #[test]
    fn an_edit_must_find_its_property() {
        let mut t = tree();
        let error = apply(&mut t, &DtEdit::Drop { path: "/chosen/no-such".into() }).unwrap_err();
        assert_eq!(error, "no property /chosen/no-such in the tree QEMU built");
    }
}
