//! A reader for uncompressed cpio "newc" archives (what `cpio -o -H newc` writes):
//! each entry is a 110-byte header of "070701" and 13 eight-digit ASCII-hex fields,
//! the NUL-terminated name (header + name padded to a multiple of 4), then the data
//! (padded to a multiple of 4). The archive ends at the entry named "TRAILER!!!".
//! Every read is bounds-checked; a bad archive gives the offset of the bad entry.

const HEADER_LEN: usize = 110;
const MAGIC: &[u8] = b"070701";
const TRAILER: &[u8] = b"TRAILER!!!";
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;

// Field indices (each field is 8 hex digits after the 6-byte magic).
const F_MODE: usize = 1;
const F_FILESIZE: usize = 6;
const F_NAMESIZE: usize = 11;

fn hex_field(header: &[u8], index: usize) -> Option<u32> {
    let start = MAGIC.len() + index * 8;
    let digits = header.get(start..start + 8)?;
    let mut value = 0u32;
    for &d in digits {
        let nibble = (d as char).to_digit(16)?;
        value = (value << 4) | nibble;
    }
    Some(value)
}

fn align4(n: usize) -> Option<usize> {
    Some(n.checked_add(3)? & !3)
}

/// Calls `f(name, data)` for each regular file, in archive order, and returns how many
/// there were; or `Err(offset)` of the first malformed entry (or of the end of the
/// archive when it has no trailer).
pub fn for_each_file(archive: &[u8], mut f: impl FnMut(&[u8], &[u8])) -> Result<usize, usize> {
    let mut offset = 0usize;
    let mut count = 0usize;
    loop {
        let header = archive.get(offset..offset.checked_add(HEADER_LEN).ok_or(offset)?);
        let header = header.ok_or(offset)?;
        if &header[..MAGIC.len()] != MAGIC {
            return Err(offset);
        }
        let mode = hex_field(header, F_MODE).ok_or(offset)?;
        let file_size = hex_field(header, F_FILESIZE).ok_or(offset)? as usize;
        let name_size = hex_field(header, F_NAMESIZE).ok_or(offset)? as usize;
        let name_start = offset + HEADER_LEN;
        let name_end = name_start.checked_add(name_size).ok_or(offset)?;
        let name = archive.get(name_start..name_end).ok_or(offset)?;
        // The name includes its NUL terminator.
        let Some((&0, name)) = name.split_last() else {
            return Err(offset);
        };
        let data_start = align4(name_end).ok_or(offset)?;
        let data_end = data_start.checked_add(file_size).ok_or(offset)?;
        let data = archive.get(data_start..data_end).ok_or(offset)?;
        if name == TRAILER {
            return Ok(count);
        }
        if mode & S_IFMT == S_IFREG {
            f(name, data);
            count += 1;
        }
        offset = align4(data_end).ok_or(offset)?;
    }
}

/// FNV-1a, 64-bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
