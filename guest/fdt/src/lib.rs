//! A small, bounds-checked reader for the flattened device tree (DTB, v17).
//!
//! Portable: `no_std`, no allocation, no `unsafe`; it builds for the bare-metal guest
//! targets and for the host (where it is unit-tested). Every read goes through
//! `slice::get` and checked arithmetic, so any input, however broken, yields an
//! [`Error`] or a value, never a panic, and every walk ends (each token advances).
//!
//! ```text
//! let fdt = Fdt::new(bytes)?;
//! let seed = fdt.property("/chosen/rng-seed")?;              // Option<&[u8]>
//! let freq = fdt.u32("/cpus/timebase-frequency")?;            // Option<u32>
//! let start = fdt.cells("/chosen/linux,initrd-start")?;       // Option<u64>, 1 or 2 cells
//! ```

#![no_std]
#![forbid(unsafe_code)]

/// The magic number at the start of every tree.
pub const MAGIC: u32 = 0xd00d_feed;
/// The length of the v17 header.
pub const HEADER_LEN: usize = 40;
/// Trees claiming to be larger than this are refused (QEMU's are a few KiB).
pub const MAX_TOTAL_SIZE: usize = 1 << 20;

const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_NOP: u32 = 4;
const FDT_END: u32 = 9;

/// What went wrong and where (a byte offset from the start of the tree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// A short, stable description ("bad magic", "unknown token", ...).
    pub what: &'static str,
    /// The byte offset from the start of the tree the problem was found at.
    pub offset: usize,
}

fn err<T>(what: &'static str, offset: usize) -> Result<T, Error> {
    Err(Error { what, offset })
}

/// The big-endian u32 at `offset` of `bytes`, if it is there.
fn be32(bytes: &[u8], offset: usize) -> Option<u32> {
    let b = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn align4(n: usize) -> Option<usize> {
    Some(n.checked_add(3)? & !3)
}

/// The NUL-terminated string at the start of `bytes` (without the NUL).
fn c_str(bytes: &[u8]) -> Option<&[u8]> {
    let end = bytes.iter().position(|&b| b == 0)?;
    bytes.get(..end)
}

/// A property value of exactly one cell (a big-endian u32).
pub fn read_u32(value: &[u8]) -> Option<u32> {
    match value.len() {
        4 => be32(value, 0),
        _ => None,
    }
}

/// A property value of exactly two cells (a big-endian u64).
pub fn read_u64(value: &[u8]) -> Option<u64> {
    match value.len() {
        8 => Some((u64::from(be32(value, 0)?) << 32) | u64::from(be32(value, 4)?)),
        _ => None,
    }
}

/// A property value holding one number of 1 or 2 cells (as `linux,initrd-start` does,
/// depending on the firmware).
pub fn read_cells(value: &[u8]) -> Option<u64> {
    read_u32(value).map(u64::from).or_else(|| read_u64(value))
}

/// Checks a tree's header (its first [`HEADER_LEN`] bytes, or more) and returns the
/// tree's total size: what a caller holding only an address needs to know before it
/// makes the whole tree a slice.
pub fn total_size(header: &[u8]) -> Result<usize, Error> {
    if header.len() < HEADER_LEN {
        return err("short header", 0);
    }
    if be32(header, 0) != Some(MAGIC) {
        return err("bad magic", 0);
    }
    let total = be32(header, 4).map_or(0, |t| t as usize);
    if !(HEADER_LEN..=MAX_TOTAL_SIZE).contains(&total) {
        return err("bad totalsize", 4);
    }
    Ok(total)
}

/// A checked tree: its header is sound and both blocks lie inside it.
#[derive(Clone, Copy, Debug)]
pub struct Fdt<'a> {
    off_struct: usize,
    structs: &'a [u8],
    strings: &'a [u8],
}

impl<'a> Fdt<'a> {
    /// Checks the header of the tree at the start of `bytes` (magic, total size within
    /// `bytes`, version 17 compatible, both blocks inside the tree). Bytes past the
    /// header's total size are ignored.
    pub fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let total = total_size(bytes)?;
        let Some(tree) = bytes.get(..total) else {
            return err("totalsize past the end", 4);
        };
        let field = |offset: usize| be32(tree, offset).map_or(0, |v| v as usize);
        let (version, last_comp) = (field(20), field(24));
        if version < 17 || last_comp > 17 {
            return err("unsupported version", 20);
        }
        let (off_struct, off_strings, size_strings, size_struct) = (field(8), field(12), field(32), field(36));
        let Some(structs) = off_struct.checked_add(size_struct).and_then(|e| tree.get(off_struct..e)) else {
            return err("struct block out of bounds", 8);
        };
        let Some(strings) = off_strings.checked_add(size_strings).and_then(|e| tree.get(off_strings..e)) else {
            return err("strings block out of bounds", 12);
        };
        Ok(Fdt { off_struct, structs, strings })
    }

    /// The value of the property at `path`: node names separated by `/`, starting with
    /// `/` (the root), the last component the property's name, e.g. `/chosen/rng-seed`
    /// or `/cpus/timebase-frequency`. A node component matches a node's full name
    /// (`cpu@0`) or, when it has no `@`, the name before the node's `@` (`memory` matches
    /// `memory@80000000`); the first match in tree order wins. `Ok(None)` when the tree
    /// is sound as far as walked and has no such property; an `Err` when the walk meets
    /// a malformed tree before finding it.
    pub fn property(&self, path: &str) -> Result<Option<&'a [u8]>, Error> {
        let Some(rest) = path.as_bytes().strip_prefix(b"/") else {
            return Ok(None);
        };
        // `nodes` node components, then the property's name.
        let nodes = rest.iter().filter(|&&b| b == b'/').count();
        let component = |i: usize| rest.split(|&b| b == b'/').nth(i).unwrap_or(b"");
        let prop_name = component(nodes);
        if prop_name.is_empty() || (0..nodes).any(|i| component(i).is_empty()) {
            return Ok(None);
        }

        let mut pos = 0usize;
        // The depth of the node being read: the root is 1, its children 2, ...
        let mut depth = 0usize;
        // How many node components the open nodes match, counted from the root's children.
        let mut matched = 0usize;
        loop {
            let at = self.off_struct.saturating_add(pos);
            let Some(token) = be32(self.structs, pos) else {
                return err("struct block ends without FDT_END", at);
            };
            pos += 4;
            match token {
                FDT_BEGIN_NODE => {
                    let Some(name) = self.structs.get(pos..).and_then(c_str) else {
                        return err("unterminated node name", at);
                    };
                    let Some(next) = align4(pos + name.len() + 1) else {
                        return err("node name overflows", at);
                    };
                    pos = next;
                    depth += 1;
                    if depth == 1 && !name.is_empty() {
                        return err("root node has a name", at);
                    }
                    if depth >= 2 && matched == depth - 2 && matched < nodes && node_matches(component(matched), name) {
                        matched += 1;
                    }
                }
                FDT_END_NODE => {
                    if depth == 0 {
                        return err("unbalanced FDT_END_NODE", at);
                    }
                    matched = matched.min(depth.saturating_sub(2));
                    depth -= 1;
                }
                FDT_PROP => {
                    let (Some(len), Some(nameoff)) = (be32(self.structs, pos), be32(self.structs, pos + 4)) else {
                        return err("short property header", at);
                    };
                    let start = pos + 8;
                    let Some(value) = start.checked_add(len as usize).and_then(|end| self.structs.get(start..end))
                    else {
                        return err("property value out of bounds", at);
                    };
                    let Some(next) = align4(start + value.len()) else {
                        return err("property overflows", at);
                    };
                    pos = next;
                    if depth == 0 {
                        return err("property outside the root node", at);
                    }
                    if matched == nodes && depth == nodes + 1 {
                        let Some(name) = self.strings.get(nameoff as usize..).and_then(c_str) else {
                            return err("property name out of bounds", at);
                        };
                        if name == prop_name {
                            return Ok(Some(value));
                        }
                    }
                }
                FDT_NOP => {}
                FDT_END => {
                    if depth != 0 {
                        return err("FDT_END inside a node", at);
                    }
                    return Ok(None);
                }
                _ => return err("unknown token", at),
            }
        }
    }

    /// The property at `path` as one cell; an `Err` when its length is not 4 bytes.
    pub fn u32(&self, path: &str) -> Result<Option<u32>, Error> {
        self.number(path, read_u32)
    }

    /// The property at `path` as two cells; an `Err` when its length is not 8 bytes.
    pub fn u64(&self, path: &str) -> Result<Option<u64>, Error> {
        self.number(path, read_u64)
    }

    /// The property at `path` as a number of 1 or 2 cells; an `Err` for other lengths.
    pub fn cells(&self, path: &str) -> Result<Option<u64>, Error> {
        self.number(path, read_cells)
    }

    fn number<T>(&self, path: &str, read: fn(&[u8]) -> Option<T>) -> Result<Option<T>, Error> {
        match self.property(path)? {
            None => Ok(None),
            Some(value) => match read(value) {
                Some(n) => Ok(Some(n)),
                None => err("property has the wrong length", self.offset_of(value)),
            },
        }
    }

    /// The offset from the tree's start of `value`, a slice of the struct block.
    fn offset_of(&self, value: &[u8]) -> usize {
        let within = (value.as_ptr() as usize).wrapping_sub(self.structs.as_ptr() as usize);
        self.off_struct.saturating_add(within)
    }
}

/// Whether the path component `want` names the node called `name`.
fn node_matches(want: &[u8], name: &[u8]) -> bool {
    if want == name {
        return true;
    }
    !want.contains(&b'@') && name.split(|&b| b == b'@').next() == Some(want)
}

#[cfg(test)]
mod tests;
