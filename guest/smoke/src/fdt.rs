//! A small, bounds-checked reader for the flattened device tree (DTB, v17) that only
//! looks at the properties of `/chosen` the smoke guest reports. Every read goes
//! through `slice::get`, so a bad tree yields an `Error`, never a panic.

const MAGIC: u32 = 0xd00d_feed;
const HEADER_LEN: usize = 40;
/// Refuse trees claiming to be larger than this (QEMU's are a few KiB).
const MAX_TOTAL_SIZE: usize = 1 << 20;

const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_NOP: u32 = 4;
const FDT_END: u32 = 9;

/// What went wrong and where (a byte offset from the start of the tree).
#[derive(Clone, Copy, Debug)]
pub struct Error {
    pub what: &'static str,
    pub offset: usize,
}

fn err<T>(what: &'static str, offset: usize) -> Result<T, Error> {
    Err(Error { what, offset })
}

/// The `/chosen` properties the guest cares about.
#[derive(Default)]
pub struct Chosen<'a> {
    pub rng_seed: Option<&'a [u8]>,
    pub initrd_start: Option<u64>,
    pub initrd_end: Option<u64>,
}

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
    Some(&bytes[..end])
}

/// A property holding one number of 1 or 2 cells (big-endian u32s).
fn cells(value: &[u8]) -> Option<u64> {
    match value.len() {
        4 => be32(value, 0).map(u64::from),
        8 => Some((u64::from(be32(value, 0)?) << 32) | u64::from(be32(value, 4)?)),
        _ => None,
    }
}

/// Makes the tree at physical address `addr` a slice, after checking its header.
///
/// # Safety
/// `addr` must be the device-tree address the firmware passed in a1: readable memory
/// that stays unchanged while the slice lives.
pub unsafe fn from_addr(addr: usize) -> Result<&'static [u8], Error> {
    if addr == 0 || addr % 4 != 0 {
        return err("bad address", 0);
    }
    // SAFETY: the caller promises the header at `addr` is readable; the header is
    // HEADER_LEN bytes and nothing writes to it.
    let header = unsafe { core::slice::from_raw_parts(addr as *const u8, HEADER_LEN) };
    if be32(header, 0) != Some(MAGIC) {
        return err("bad magic", 0);
    }
    let total = be32(header, 4).unwrap_or(0) as usize;
    if !(HEADER_LEN..=MAX_TOTAL_SIZE).contains(&total) {
        return err("bad totalsize", 4);
    }
    // SAFETY: the header says the tree is `total` bytes long, all placed by the
    // firmware in RAM; the caller promises it is readable and left alone.
    Ok(unsafe { core::slice::from_raw_parts(addr as *const u8, total) })
}

/// Reads the properties of `/chosen` out of a whole tree.
pub fn chosen(fdt: &[u8]) -> Result<Chosen<'_>, Error> {
    let field = |offset: usize| be32(fdt, offset).map(|v| v as usize);
    let (Some(off_struct), Some(off_strings), Some(size_strings), Some(size_struct)) =
        (field(8), field(12), field(32), field(36))
    else {
        return err("short header", 0);
    };
    let Some(structs) = off_struct.checked_add(size_struct).and_then(|e| fdt.get(off_struct..e)) else {
        return err("struct block out of bounds", 8);
    };
    let Some(strings) = off_strings.checked_add(size_strings).and_then(|e| fdt.get(off_strings..e)) else {
        return err("strings block out of bounds", 12);
    };

    let mut chosen = Chosen::default();
    let mut pos = 0usize;
    let mut depth = 0usize;
    let mut in_chosen = false;
    loop {
        let at = off_struct + pos;
        let Some(token) = be32(structs, pos) else {
            return err("struct block ends without FDT_END", at);
        };
        pos += 4;
        match token {
            FDT_BEGIN_NODE => {
                let Some(name) = structs.get(pos..).and_then(c_str) else {
                    return err("unterminated node name", at);
                };
                let Some(next) = align4(pos + name.len() + 1) else {
                    return err("node name overflows", at);
                };
                pos = next;
                depth += 1;
                // The root is depth 1; its child `chosen` is depth 2.
                in_chosen = depth == 2 && name == b"chosen";
            }
            FDT_END_NODE => {
                if depth == 0 {
                    return err("unbalanced FDT_END_NODE", at);
                }
                if in_chosen && depth == 2 {
                    // Everything needed is read; the rest of the tree does not matter.
                    return Ok(chosen);
                }
                depth -= 1;
            }
            FDT_PROP => {
                let (Some(len), Some(nameoff)) = (be32(structs, pos), be32(structs, pos + 4)) else {
                    return err("short property header", at);
                };
                let start = pos + 8;
                let Some(value) = start.checked_add(len as usize).and_then(|end| structs.get(start..end)) else {
                    return err("property value out of bounds", at);
                };
                let Some(next) = align4(start + value.len()) else {
                    return err("property overflows", at);
                };
                pos = next;
                if in_chosen && depth == 2 {
                    let Some(name) = strings.get(nameoff as usize..).and_then(c_str) else {
                        return err("property name out of bounds", at);
                    };
                    match name {
                        b"rng-seed" => chosen.rng_seed = Some(value),
                        b"linux,initrd-start" => chosen.initrd_start = cells(value),
                        b"linux,initrd-end" => chosen.initrd_end = cells(value),
                        _ => {}
                    }
                }
            }
            FDT_NOP => {}
            FDT_END => return Ok(chosen),
            _ => return err("unknown token", at),
        }
    }
}
