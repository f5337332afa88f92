//! The five corruptions a hostile-input case applies to a good image (feature
//! `corrupt`, host only). Each returns the corrupted copy, which [`crate::check`] refuses
//! with exactly its error, or `None` when the image (or the argument) does not allow
//! it: the image is not a RISC-V ELF with a `PT_LOAD` segment, a value does not fit
//! the class, ...

use crate::{le, Class, Header, PF_R, PF_W, PF_X, PT_LOAD};
use std::vec::Vec;

/// `e_shoff`, `e_shnum`, `e_shstrndx` of the ELF header.
fn section_fields(class: Class) -> [(usize, usize); 3] {
    match class {
        Class::Elf32 => [(32, 4), (48, 2), (50, 2)],
        Class::Elf64 => [(40, 8), (60, 2), (62, 2)],
    }
}

/// `p_paddr` of a program header.
fn p_paddr(class: Class) -> usize {
    match class {
        Class::Elf32 => 12,
        Class::Elf64 => 24,
    }
}

fn put(bytes: &mut [u8], offset: usize, size: usize, value: u64) -> Option<()> {
    if size < 8 && value >> (8 * size) != 0 {
        return None;
    }
    bytes.get_mut(offset..offset.checked_add(size)?)?.copy_from_slice(&value.to_le_bytes()[..size]);
    Some(())
}

/// The offsets of the `PT_LOAD` program headers, in order.
fn loads(image: &[u8], header: &Header) -> Vec<usize> {
    let size = header.class.layout().phdr_size;
    (0..header.phnum)
        .map(|i| header.phoff + i * size)
        .filter(|&at| le(image, at, 4) == Some(u64::from(PT_LOAD)))
        .collect()
}

/// The first `PT_LOAD` segment moved to `vaddr` (`p_vaddr` and `p_paddr`): refused
/// with `segment-vaddr` when `vaddr..vaddr + memsz` is outside the user range.
pub fn segment_vaddr(image: &[u8], vaddr: u64) -> Option<Vec<u8>> {
    let header = Header::read(image).ok()?;
    let l = header.class.layout();
    let at = *loads(image, &header).first()?;
    let mut out = image.to_vec();
    put(&mut out, at + l.p_vaddr, l.word, vaddr)?;
    put(&mut out, at + p_paddr(header.class), l.word, vaddr)?;
    Some(out)
}

/// The entry set to `value`: refused with `entry` when `value` is outside every
/// executable segment.
pub fn entry(image: &[u8], value: u64) -> Option<Vec<u8>> {
    let header = Header::read(image).ok()?;
    let l = header.class.layout();
    let mut out = image.to_vec();
    put(&mut out, l.entry, l.word, value)?;
    Some(out)
}

/// The first `len` bytes: refused with `truncate` when `len` is less than the end of
/// the program header table. `None` when `len` is not less than the image's length.
pub fn truncate(image: &[u8], len: usize) -> Option<Vec<u8>> {
    (len < image.len()).then(|| image[..len].to_vec())
}

/// The first `PT_LOAD` segment's flags set to `flags`, any of the letters `r`, `w`,
/// `x`: refused with `segment-flags` for `"rwx"` (or any with both `w` and `x`).
pub fn segment_flags(image: &[u8], flags: &str) -> Option<Vec<u8>> {
    let mut value = 0u64;
    for c in flags.chars() {
        value |= u64::from(match c {
            'r' => PF_R,
            'w' => PF_W,
            'x' => PF_X,
            _ => return None,
        });
    }
    let header = Header::read(image).ok()?;
    let at = *loads(image, &header).first()?;
    let mut out = image.to_vec();
    put(&mut out, at + header.class.layout().p_flags, 4, value)?;
    Some(out)
}

/// The section header table dropped (`e_shoff`, `e_shnum`, `e_shstrndx` set to 0) and
/// the image cut `n` bytes before the end of the file data of the loadable segment
/// whose data ends last: refused with `truncate-segment-data`. `n` must be 1 up to
/// that segment's file size.
pub fn truncate_segment_data(image: &[u8], n: usize) -> Option<Vec<u8>> {
    let header = Header::read(image).ok()?;
    let l = header.class.layout();
    let word = |at: usize| le(image, at, l.word);
    let (end, filesz) = loads(image, &header)
        .into_iter()
        .filter_map(|at| Some((word(at + l.p_offset)?, word(at + l.p_filesz)?)))
        .filter(|&(_, filesz)| filesz > 0)
        .map(|(offset, filesz)| (offset.saturating_add(filesz), filesz))
        .max()?;
    if n == 0 || n as u64 > filesz || end > image.len() as u64 {
        return None;
    }
    let mut out = image[..end as usize - n].to_vec();
    for (at, size) in section_fields(header.class) {
        put(&mut out, at, size, 0)?;
    }
    Some(out)
}
