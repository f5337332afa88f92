//! The device-tree reader (`guest/fdt`). A generator builds a plausible tree from the
//! decisions — the nodes and properties a QEMU `virt` tree has, plus nested nodes of its
//! own — and, for about one input in eight, corrupts it (bytes, header fields, tokens,
//! property lengths, truncation). The reader then looks up every property the generator
//! wrote and a few paths of the decisions' choosing.
//!
//! Findings: a panic; a value slice outside the tree's bytes; and, for a tree left
//! intact, a refusal or a value other than the one written.

use crate::{Decisions, Finding};

const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;
/// The header, then one empty memory reservation entry.
const STRUCT_AT: usize = fdt::HEADER_LEN + 16;

/// A tree under construction: the structure block, the strings block, and what it holds.
#[derive(Default)]
struct Tree {
    structs: Vec<u8>,
    strings: Vec<u8>,
    /// The open nodes' path components.
    path: Vec<String>,
    /// Every property written: its path and value.
    props: Vec<(String, Vec<u8>)>,
    /// Where each property's length field is (in the structure block).
    len_fields: Vec<usize>,
}

impl Tree {
    fn token(&mut self, token: u32) {
        self.structs.extend_from_slice(&token.to_be_bytes());
    }

    fn pad(&mut self) {
        while self.structs.len() % 4 != 0 {
            self.structs.push(0);
        }
    }

    fn begin(&mut self, name: &str) {
        self.token(BEGIN_NODE);
        self.structs.extend_from_slice(name.as_bytes());
        self.structs.push(0);
        self.pad();
        self.path.push(name.split('@').next().unwrap_or("").to_owned());
    }

    fn end(&mut self) {
        self.token(END_NODE);
        self.path.pop();
    }

    fn prop(&mut self, name: &str, value: &[u8]) {
        let nameoff = self.string(name);
        self.token(PROP);
        self.len_fields.push(self.structs.len());
        self.structs.extend_from_slice(&(value.len() as u32).to_be_bytes());
        self.structs.extend_from_slice(&(nameoff as u32).to_be_bytes());
        self.structs.extend_from_slice(value);
        self.pad();
        // The root's components are skipped: it is "" in `path`.
        let mut path = String::new();
        for component in self.path.iter().skip(1) {
            path.push('/');
            path.push_str(component);
        }
        path.push('/');
        path.push_str(name);
        // The reader returns the first match in tree order: keep only the first.
        if !self.props.iter().any(|(p, _)| *p == path) {
            self.props.push((path, value.to_vec()));
        }
    }

    /// The offset of `name` in the strings block (shared, as dtc does).
    fn string(&mut self, name: &str) -> usize {
        let mut at = 0;
        for s in self.strings.split(|&b| b == 0) {
            if s == name.as_bytes() && at < self.strings.len() {
                return at;
            }
            at += s.len() + 1;
        }
        let at = self.strings.len();
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        at
    }

    /// The whole blob: header, reservation block, structure block, strings block.
    fn blob(&self) -> Vec<u8> {
        let strings_at = STRUCT_AT + self.structs.len();
        let total = strings_at + self.strings.len();
        let fields = [
            fdt::MAGIC,
            total as u32,
            STRUCT_AT as u32,
            strings_at as u32,
            fdt::HEADER_LEN as u32,
            17,
            16,
            0,
            self.strings.len() as u32,
            self.structs.len() as u32,
        ];
        let mut out: Vec<u8> = fields.iter().flat_map(|f| f.to_be_bytes()).collect();
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(&self.structs);
        out.extend_from_slice(&self.strings);
        out
    }
}

fn cells(value: u64, two: bool) -> Vec<u8> {
    if two {
        value.to_be_bytes().to_vec()
    } else {
        (value as u32).to_be_bytes().to_vec()
    }
}

const PROP_NAMES: &[&str] =
    &["reg", "compatible", "status", "interrupts", "clock-frequency", "#address-cells", "ranges"];

/// Nodes of the generator's own under the current node, down to `depth` more levels.
fn own_nodes(d: &mut Decisions, tree: &mut Tree, next: &mut usize, depth: usize) {
    for _ in 0..d.below(4) {
        let name = format!("dev{next}@{:x}", d.u32());
        *next += 1;
        tree.begin(&name);
        for _ in 0..d.below(4) {
            let name = *d.choose(PROP_NAMES);
            let len = d.below(24);
            let value = d.bytes(len);
            tree.prop(name, &value);
            if d.u8() == 0xff {
                tree.token(NOP);
            }
        }
        if depth > 0 && d.bool() {
            own_nodes(d, tree, next, depth - 1);
        }
        tree.end();
    }
}

/// A tree whose header and blocks are sound but whose structure breaks one rule (the
/// generator's own corruptions, so each structural check is reached).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quirk {
    None,
    RootNamed,
    PropertyOutsideRoot,
    EndInsideNode,
    ExtraEndNode,
    UnknownToken,
}

/// A tree shaped like QEMU `virt`'s, its values from the decisions.
fn generate(d: &mut Decisions, quirk: Quirk) -> Tree {
    let mut tree = Tree::default();
    tree.begin(if quirk == Quirk::RootNamed { "x" } else { "" });
    tree.prop("#address-cells", &2u32.to_be_bytes());
    tree.prop("#size-cells", &2u32.to_be_bytes());
    tree.prop("compatible", b"riscv-virtio\0");
    tree.begin("chosen");
    let seed_len = 16 + d.below(48);
    let seed = d.bytes(seed_len);
    tree.prop("rng-seed", &seed);
    let two = !d.bool();
    let start = d.u64();
    tree.prop("linux,initrd-start", &cells(start, two));
    tree.prop("linux,initrd-end", &cells(start.wrapping_add(u64::from(d.u32())), two));
    tree.prop("bootargs", b"\0");
    tree.end();
    tree.begin("cpus");
    tree.prop("timebase-frequency", &(10_000_000 ^ d.u32()).to_be_bytes());
    for hart in 0..1 + d.below(4) {
        tree.begin(&format!("cpu@{hart}"));
        tree.prop("reg", &(hart as u32).to_be_bytes());
        tree.prop("compatible", b"riscv\0");
        tree.end();
    }
    tree.end();
    tree.begin("memory@80000000");
    let mut reg = 0x8000_0000u64.to_be_bytes().to_vec();
    reg.extend_from_slice(&(u64::from(d.u32()) << 12).to_be_bytes());
    tree.prop("reg", &reg);
    tree.end();
    let mut next = 0;
    own_nodes(d, &mut tree, &mut next, 3);
    if quirk == Quirk::UnknownToken {
        tree.token(*d.choose(&[0, 5, 8, 10, 0x100, u32::MAX]));
    }
    if quirk != Quirk::EndInsideNode {
        tree.end();
    }
    match quirk {
        Quirk::PropertyOutsideRoot => tree.prop("stray", b"\0"),
        Quirk::ExtraEndNode => tree.token(END_NODE),
        _ => {}
    }
    tree.token(END);
    tree
}

/// Breaks the blob in one of several ways; `false` when it left it as it was.
fn corrupt(d: &mut Decisions, blob: &mut Vec<u8>, tree: &Tree) -> bool {
    let before = blob.clone();
    // Earlier corruptions may have cut the blob: every write below stays inside it.
    let set = |blob: &mut Vec<u8>, at: usize, value: u32| {
        if let Some(field) = blob.get_mut(at..at + 4) {
            field.copy_from_slice(&value.to_be_bytes());
        }
    };
    match d.below(6) {
        0 => {
            let at = d.below(blob.len());
            let flip = d.u8().max(1);
            if let Some(byte) = blob.get_mut(at) {
                *byte ^= flip;
            }
        }
        1 => {
            // A header field (magic, totalsize, the offsets, versions, the sizes).
            let field = d.below(10) * 4;
            let old = blob.get(field..field + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let len = blob.len() as u32;
            let value = match d.below(4) {
                0 => old.wrapping_add(u32::from(d.u8())).wrapping_sub(128),
                1 => d.u32(),
                // The edges the header checks draw: the versions', the sizes' and offsets'.
                _ if field == 20 || field == 24 => *d.choose(&[16, 17, 18]),
                _ => *d.choose(&[0, 16, 39, 40, len, len + 1, 1 << 20, (1 << 20) + 1, u32::MAX]),
            };
            set(blob, field, value);
        }
        2 => {
            let len = d.below(blob.len());
            blob.truncate(len);
        }
        3 => {
            // A token overwritten by another (unbalancing the tree, or unknown).
            let tokens = tree.structs.len() / 4;
            let at = STRUCT_AT + 4 * d.below(tokens);
            let any = d.u32();
            let token = *d.choose(&[END_NODE, BEGIN_NODE, PROP, END, NOP, any]);
            set(blob, at, token);
        }
        4 => {
            // A property's length (or, just past it, its name offset).
            if !tree.len_fields.is_empty() {
                let at = STRUCT_AT + *d.choose(&tree.len_fields) + 4 * d.below(2);
                let (any, small) = (d.u32(), u32::from(d.u8()));
                let value = *d.choose(&[u32::MAX, u32::MAX - 3, 0x8000_0000, any, small]);
                set(blob, at, value);
            }
        }
        _ => {
            // Garbage appended, the header's sizes left alone.
            let len = 1 + d.below(16);
            blob.extend(d.bytes(len));
        }
    }
    *blob != before
}

/// `inner` lies inside `outer` (the same memory).
fn inside(inner: &[u8], outer: &[u8]) -> bool {
    let (start, end) = (outer.as_ptr() as usize, outer.as_ptr() as usize + outer.len());
    let at = inner.as_ptr() as usize;
    inner.is_empty() || (at >= start && at + inner.len() <= end)
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// What `total_size` may accept: a whole header with the magic and a size in bounds.
fn size_rules(blob: &[u8], total: usize) -> Result<(), String> {
    if blob.len() < fdt::HEADER_LEN || be32(blob, 0) != Some(fdt::MAGIC) {
        return Err(format!("{} bytes, magic {:x?}", blob.len(), be32(blob, 0)));
    }
    if !(fdt::HEADER_LEN..=fdt::MAX_TOTAL_SIZE).contains(&total) || be32(blob, 4) != Some(total as u32) {
        return Err(format!("totalsize {total}, the header says {:?}", be32(blob, 4)));
    }
    Ok(())
}

/// What `Fdt::new` may accept, read here from the header: the size rules, the tree
/// within the bytes, version 17 compatible, both blocks inside the tree. The structure
/// and strings blocks.
fn header_rules(blob: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let total = be32(blob, 4).unwrap_or(0) as usize;
    size_rules(blob, total)?;
    let tree = blob.get(..total).ok_or(format!("totalsize {total} past the {} bytes", blob.len()))?;
    let field = |at: usize| be32(tree, at).unwrap_or(0) as usize;
    if field(20) < 17 || field(24) > 17 {
        return Err(format!("version {}, last compatible {}", field(20), field(24)));
    }
    let block = |off: usize, size: usize| tree.get(off..off + size).ok_or(format!("block {off}+{size} past {total}"));
    Ok((block(field(8), field(36))?, block(field(12), field(32))?))
}

/// Where the structure block first breaks a rule that every walk checks (a token past
/// the block, an unterminated name, a named root, an unbalanced FDT_END_NODE, a
/// property cut short or outside the root, FDT_END inside a node, an unknown token), as
/// an offset into it; `None` when it is sound up to its FDT_END. Read here, to the
/// standard, not through the reader.
fn first_break(structs: &[u8]) -> Option<usize> {
    let (mut at, mut depth) = (0usize, 0usize);
    loop {
        let token = be32(structs, at)?;
        let here = at;
        let broken = Some(here);
        at += 4;
        match token {
            BEGIN_NODE => {
                let len = structs.get(at..)?.iter().position(|&b| b == 0);
                let Some(len) = len else { return broken };
                if depth == 0 && len > 0 {
                    return broken;
                }
                depth += 1;
                at = (at + len + 1).next_multiple_of(4);
            }
            END_NODE if depth == 0 => return broken,
            END_NODE => depth -= 1,
            PROP => {
                let Some(len) = be32(structs, at) else { return broken };
                if be32(structs, at + 4).is_none() || depth == 0 || structs.len() < at + 8 + len as usize {
                    return broken;
                }
                at = (at + 8 + len as usize).next_multiple_of(4);
            }
            NOP => {}
            END if depth == 0 => return None,
            _ => return broken,
        }
        if at > structs.len() {
            return Some(here);
        }
    }
}

/// Whether `Fdt::property` walks the tree for `path` (or answers `None` from the path
/// alone): a `/`, then non-empty components.
fn walks(path: &str) -> bool {
    path.strip_prefix('/').is_some_and(|rest| rest.split('/').all(|c| !c.is_empty()))
}

/// The rules a walk's answer keeps: a value only from a sound stretch of the structure
/// block, under the path's property name; `None` only from a sound block. `broken` is
/// the block's [`first_break`], found once for all the walks of an input.
fn walk_rules(
    path: &str,
    value: Option<&[u8]>,
    structs: &[u8],
    strings: &[u8],
    broken: Option<usize>,
) -> Result<(), String> {
    let Some(value) = value else {
        return match broken {
            Some(at) if walks(path) => Err(format!("{path}: not found, but the block breaks at {at}")),
            _ => Ok(()),
        };
    };
    if !inside(value, structs) {
        return Err(format!("{path}: value outside the structure block"));
    }
    let prop = (value.as_ptr() as usize - structs.as_ptr() as usize).wrapping_sub(12);
    if broken.is_some_and(|at| at < prop) || be32(structs, prop) != Some(PROP) {
        return Err(format!("{path}: a value at {prop}, but the block breaks at {broken:?}"));
    }
    let nameoff = be32(structs, prop + 8).unwrap_or(u32::MAX) as usize;
    let name = strings.get(nameoff..).and_then(|s| s.split(|&b| b == 0).next().filter(|n| n.len() < s.len()));
    if name != path.rsplit('/').next().map(str::as_bytes) {
        return Err(format!("{path}: the value's property is named {name:?}"));
    }
    Ok(())
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let quirk = if d.u8() >= 0xf8 {
        *d.choose(&[
            Quirk::RootNamed,
            Quirk::PropertyOutsideRoot,
            Quirk::EndInsideNode,
            Quirk::ExtraEndNode,
            Quirk::UnknownToken,
        ])
    } else {
        Quirk::None
    };
    let tree = generate(d, quirk);
    let mut blob = tree.blob();
    let mut corrupted = quirk != Quirk::None;
    if d.u8() >= 0xe0 {
        for _ in 0..1 + d.below(3) {
            corrupted |= corrupt(d, &mut blob, &tree);
        }
    }
    if let Ok(total) = fdt::total_size(&blob) {
        size_rules(&blob, total).map_err(|e| Finding::oracle("total_size accepted a bad header", e))?;
    }
    let reader = match fdt::Fdt::new(&blob) {
        Ok(reader) => reader,
        Err(e) if corrupted => {
            d.end(e.what);
            return Ok(());
        }
        Err(e) => return Err(Finding::oracle("an intact tree refused", format!("{} at {}", e.what, e.offset))),
    };
    let mut paths: Vec<String> = tree.props.iter().map(|(p, _)| p.clone()).collect();
    for _ in 0..d.below(4) {
        let mut path = d.choose(&tree.props).0.clone();
        let cut = d.below(path.len() + 1);
        path.truncate(cut);
        paths.push(path);
    }
    paths.extend(["/", "//x", "/chosen/", "/cpus/cpu/reg", "/memory/reg"].map(String::from));
    let (structs, strings) = header_rules(&blob).map_err(|e| Finding::oracle("Fdt::new accepted a bad header", e))?;
    let broken = first_break(structs);
    let mut walk_error = None;
    for path in &paths {
        let found = reader.property(path);
        if let Ok(value) = found {
            walk_rules(path, value, structs, strings, broken)
                .map_err(|e| Finding::oracle("a walk answered past a broken structure block", e))?;
        }
        // The numbers: a value of exactly their length.
        let value = found.ok().flatten();
        let number = |n: Option<u64>, lens: &[usize]| match (n, value) {
            (None, _) => true,
            (Some(n), Some(v)) => lens.contains(&v.len()) && v.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)) == n,
            (Some(_), None) => false,
        };
        let numbers = (reader.u32(path), reader.u64(path), reader.cells(path));
        let ok = number(numbers.0.ok().flatten().map(u64::from), &[4])
            && number(numbers.1.ok().flatten(), &[8])
            && number(numbers.2.ok().flatten(), &[4, 8]);
        if !ok {
            let detail = format!("{path}: {value:x?} read as {numbers:x?}");
            return Err(Finding::oracle("a number read from a value of another length", detail));
        }
        match found {
            Ok(Some(value)) if !inside(value, &blob) => {
                return Err(Finding::oracle("a value outside the tree", format!("{path}: {} bytes", value.len())));
            }
            Ok(value) if !corrupted => {
                if let Some((_, expected)) = tree.props.iter().find(|(p, _)| p == path) {
                    if value != Some(expected.as_slice()) {
                        return Err(Finding::oracle("an intact tree's value differs", format!("{path}: {value:?}")));
                    }
                }
            }
            Ok(_) => {}
            Err(e) if !corrupted => {
                return Err(Finding::oracle(
                    "an intact tree's walk failed",
                    format!("{path}: {} at {}", e.what, e.offset),
                ));
            }
            Err(e) => walk_error = Some(e.what),
        }
    }
    d.end(match (corrupted, walk_error) {
        (false, _) => "intact: every value read back",
        (true, None) => "corrupted, still read",
        (true, Some(what)) => what,
    });
    Ok(())
}
