//! The program checks (`guest/elf`). Half the inputs build a small ELF32 or ELF64 from
//! the decisions (one to four `PT_LOAD` segments in the user range, the entry in the
//! executable one; any field now and then replaced by an edge value); the rest take a
//! fixture of `guest/elf/tests/data` and apply one of the crate's own corruptions with
//! arguments near the edges, or flip bytes. Then `elf::check` runs against the class's
//! user range.
//!
//! Findings: a panic, or an accepted image that breaks a rule when read again here, by a
//! parser of this file's own: a segment outside the user range or of a bad size, data
//! past the image, writable and executable, overlapping, or the entry outside every
//! executable segment.

use crate::{Decisions, Finding};
use elf::{Class, PF_R, PF_W, PF_X};
use std::ops::Range;

const FIXTURES: [&[u8]; 2] = [
    include_bytes!("../../../guest/elf/tests/data/sample-rv64.elf"),
    include_bytes!("../../../guest/elf/tests/data/sample-rv32.elf"),
];

fn put(image: &mut [u8], at: usize, size: usize, value: u64) {
    image[at..at + size].copy_from_slice(&value.to_le_bytes()[..size]);
}

fn get(image: &[u8], at: usize, size: usize) -> Option<u64> {
    let bytes = image.get(at..at.checked_add(size)?)?;
    let mut out = [0u8; 8];
    out[..size].copy_from_slice(bytes);
    Some(u64::from_le_bytes(out))
}

/// A value near one of the edges that matter to the checks.
fn edge(d: &mut Decisions, user: &Range<u64>, word: usize) -> u64 {
    let max = if word == 4 { u64::from(u32::MAX) } else { u64::MAX };
    let base = *d.choose(&[user.start, user.end, 0, max, user.end / 2, 0x1000]);
    // Mostly a page or two away, sometimes within a header's size of the edge.
    let within = *d.choose(&[0x2000, 0x40]);
    let delta = d.below(within) as u64;
    let value = if d.bool() { base.wrapping_sub(delta) } else { base.wrapping_add(delta) };
    value & max
}

/// A field's value: mostly `ordinary`, sometimes an edge value.
fn field(d: &mut Decisions, ordinary: u64, user: &Range<u64>, word: usize) -> u64 {
    if d.u8() >= 0xf0 {
        edge(d, user, word)
    } else {
        ordinary
    }
}

/// An image built from the decisions.
fn build(d: &mut Decisions) -> Vec<u8> {
    let class = *d.choose(&[Class::Elf64, Class::Elf32]);
    let user = class.user_range();
    let (word, ehsize, phsize) = match class {
        Class::Elf64 => (8, 64, 56),
        Class::Elf32 => (4, 52, 32),
    };
    let phnum = 1 + d.below(4);
    // Now and then the table is longer than the loads, to the limit or one past it, the
    // rest PT_NULL: how the phnum limit is reached.
    let rows = phnum + *d.choose(&[0, 0, 0, 0, 0, 0, elf::MAX_PHNUM - phnum, elf::MAX_PHNUM + 1 - phnum]);
    let mut image = vec![0u8; ehsize + rows * phsize];
    image[..4].copy_from_slice(b"\x7fELF");
    image[4] = if class == Class::Elf64 { 2 } else { 1 };
    image[5] = 1;
    image[6] = 1;
    if d.u8() >= 0xf0 {
        // Now and then the class, data encoding or version byte another value.
        let at = 4 + d.below(3);
        image[at] = d.u8();
    }
    put(&mut image, 16, 2, field(d, 2, &user, 2) & 0xffff);
    put(&mut image, 18, 2, 243);
    put(&mut image, 20, 4, 1);
    let phoff = field(d, ehsize as u64, &user, word);
    let (entry_at, phoff_at, phentsize_at) = if word == 8 { (24, 32, 54) } else { (24, 28, 42) };
    put(&mut image, phoff_at, word, phoff);
    put(&mut image, phentsize_at, 2, phsize as u64);
    put(&mut image, phentsize_at + 2, 2, field(d, rows as u64, &user, 2) & 0xffff);
    let (p_offset, p_vaddr, p_filesz, p_memsz, p_flags) =
        if word == 8 { (8, 16, 32, 40, 4) } else { (4, 8, 16, 20, 24) };
    let mut vaddr = user.start + 0x1000 * d.below(16) as u64;
    let mut entry = None;
    for i in 0..phnum {
        let at = ehsize + i * phsize;
        let filesz = d.below(64);
        let memsz = filesz as u64 + d.below(0x3000) as u64;
        let flags = *d.choose(&[PF_R | PF_X, PF_R, PF_R | PF_W, PF_X, PF_W | PF_X, 0]);
        let offset = image.len();
        let data = d.bytes(filesz);
        image.extend_from_slice(&data);
        put(&mut image, at, 4, field(d, 1, &user, 4) & 0xffff_ffff);
        put(&mut image, at + p_offset, word, field(d, offset as u64, &user, word));
        put(&mut image, at + p_vaddr, word, field(d, vaddr, &user, word));
        put(&mut image, at + p_filesz, word, field(d, filesz as u64, &user, word));
        put(&mut image, at + p_memsz, word, field(d, memsz, &user, word));
        put(&mut image, at + p_flags, 4, u64::from(flags));
        if flags & PF_X != 0 && entry.is_none() && memsz > 0 {
            entry = Some(vaddr + d.below(memsz as usize) as u64);
        }
        // The next segment a page or more on, or (sometimes) overlapping this one.
        let gap = if d.u8() >= 0xf0 { 0 } else { memsz.next_multiple_of(0x1000) + 0x1000 * d.below(4) as u64 };
        vaddr += gap;
    }
    let entry = field(d, entry.unwrap_or(user.start), &user, word);
    put(&mut image, entry_at, word, entry);
    image
}

/// A fixture with one of the crate's corruptions, or bytes flipped.
fn corrupt_fixture(d: &mut Decisions) -> Option<Vec<u8>> {
    let image = *d.choose(&FIXTURES);
    let user = if image[4] == 2 { elf::USER_RV64 } else { elf::USER_RV32 };
    let word = if image[4] == 2 { 8 } else { 4 };
    match d.below(6) {
        0 => elf::corrupt::segment_vaddr(image, edge(d, &user, word)),
        1 => elf::corrupt::entry(image, edge(d, &user, word)),
        // Mostly within the headers, sometimes within the identification.
        2 => {
            let within = *d.choose(&[image.len() + 1, 128, 20]);
            elf::corrupt::truncate(image, d.below(within))
        }
        3 => {
            const FLAGS: [&str; 7] = ["rwx", "wx", "r", "rx", "x", "rw", ""];
            let flags = FLAGS[d.below(FLAGS.len())];
            elf::corrupt::segment_flags(image, flags)
        }
        4 => elf::corrupt::truncate_segment_data(image, 1 + d.below(256)),
        _ => {
            let mut out = image.to_vec();
            for _ in 0..1 + d.below(4) {
                // Mostly in the headers, where the checks look.
                let within = if d.bool() { out.len() } else { 256.min(out.len()) };
                let at = d.below(within);
                out[at] ^= d.u8().max(1);
            }
            Some(out)
        }
    }
}

/// The rules an accepted image keeps, read again from its bytes.
fn recheck(image: &[u8], program: &elf::Program<'_>) -> Result<(), String> {
    let word = if image.get(4) == Some(&2) { 8 } else { 4 };
    let user = if word == 8 { elf::USER_RV64 } else { elf::USER_RV32 };
    if !matches!(image.get(4), Some(1 | 2)) || (word == 8) != (program.class == Class::Elf64) {
        return Err(format!("class {:?}, program says {:?}", image.get(4), program.class));
    }
    // The identification and the header's fixed fields.
    let ehsize = if word == 8 { 64 } else { 52 };
    if image.len() < ehsize {
        return Err(format!("{} bytes, shorter than the ELF header", image.len()));
    }
    let ident = (&image[..4], image[5], image[6]);
    if ident != (&b"\x7fELF"[..], 1, 1) {
        return Err(format!("identification {ident:x?} (magic, little-endian, version 1)"));
    }
    let fixed = (get(image, 16, 2), get(image, 18, 2), get(image, 20, 4));
    if fixed != (Some(2), Some(243), Some(1)) {
        return Err(format!("e_type, e_machine, e_version {fixed:?}: not ET_EXEC, EM_RISCV, 1"));
    }
    let (phoff_at, phnum_at, phsize) = if word == 8 { (32, 56, 56) } else { (28, 44, 32) };
    let phentsize = get(image, phnum_at - 2, 2);
    if phentsize != Some(phsize as u64) {
        return Err(format!("e_phentsize {phentsize:?}"));
    }
    let (p_offset, p_vaddr, p_filesz, p_memsz, p_flags) =
        if word == 8 { (8, 16, 32, 40, 4) } else { (4, 8, 16, 20, 24) };
    let entry = get(image, 24, word).ok_or("entry unreadable")?;
    if entry != program.entry {
        return Err(format!("entry {entry:#x}, program says {:#x}", program.entry));
    }
    let phoff = get(image, phoff_at, word).ok_or("phoff")? as usize;
    let phnum = get(image, phnum_at, 2).ok_or("phnum")? as usize;
    if phnum > elf::MAX_PHNUM {
        return Err(format!("e_phnum {phnum} past the limit {}", elf::MAX_PHNUM));
    }
    let mut loads: Vec<(Range<u64>, u32)> = Vec::new();
    for i in 0..phnum {
        let at = phoff + i * phsize;
        let read = |off: usize, size: usize| get(image, at + off, size).ok_or(format!("phdr {i} unreadable"));
        if read(0, 4)? != 1 {
            continue;
        }
        let (offset, vaddr, filesz, memsz) =
            (read(p_offset, word)?, read(p_vaddr, word)?, read(p_filesz, word)?, read(p_memsz, word)?);
        let flags = read(p_flags, 4)? as u32;
        let end = vaddr.checked_add(memsz).ok_or(format!("segment {i}: {vaddr:#x} + {memsz:#x} overflows"))?;
        if vaddr < user.start || end > user.end {
            return Err(format!("segment {i}: {vaddr:#x}..{end:#x} outside the user range"));
        }
        // A segment without file data has no offset to check.
        let past_end = filesz > 0 && offset.checked_add(filesz).is_none_or(|e| e > image.len() as u64);
        if filesz > memsz || past_end {
            return Err(format!("segment {i}: offset {offset:#x} filesz {filesz:#x} memsz {memsz:#x}"));
        }
        if flags & PF_W != 0 && flags & PF_X != 0 {
            return Err(format!("segment {i}: writable and executable"));
        }
        if let Some((other, _)) = loads.iter().find(|(r, _)| r.start < end && vaddr < r.end) {
            return Err(format!("segment {i}: {vaddr:#x}..{end:#x} overlaps {other:#x?}"));
        }
        loads.push((vaddr..end, flags));
    }
    if loads.is_empty() || loads.len() != program.segments().count() {
        return Err(format!("{} PT_LOAD here, {} in the program", loads.len(), program.segments().count()));
    }
    if !loads.iter().any(|(r, flags)| flags & PF_X != 0 && r.contains(&entry)) {
        return Err(format!("entry {entry:#x} outside every executable segment"));
    }
    Ok(())
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let image = match d.below(2) {
        0 => build(d),
        _ => match corrupt_fixture(d) {
            Some(image) => image,
            None => {
                d.end("corruption not applicable");
                return Ok(());
            }
        },
    };
    let user = if image.get(4) == Some(&1) { elf::USER_RV32 } else { elf::USER_RV64 };
    // check_class accepts only the class asked for.
    for class in [Class::Elf64, Class::Elf32] {
        if let Ok(program) = elf::check_class(&image, class) {
            let byte = image.get(4).copied();
            if program.class != class || byte != Some(if class == Class::Elf64 { 2 } else { 1 }) {
                let detail = format!("asked for {class:?}, EI_CLASS {byte:?}");
                return Err(Finding::oracle("check_class accepted another class", detail));
            }
        }
    }
    match elf::check(&image, user) {
        Ok(program) => {
            recheck(&image, &program).map_err(|e| Finding::oracle("an accepted image breaks a rule", e))?;
            d.end("accepted");
        }
        Err(e) => d.end(e.describe()),
    }
    Ok(())
}
