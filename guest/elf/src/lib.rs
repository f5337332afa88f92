//! The checks the loader and the kernel apply to a program image before loading it.
//!
//! Portable: `no_std`, no allocation, no `unsafe`; builds for the bare-metal guest
//! targets and for the host. Accepted: ELF32 (rv32) or ELF64 (rv64), little-endian,
//! `EM_RISCV`, `ET_EXEC`, with 1 to [`MAX_PHNUM`] program headers of which at least one
//! is `PT_LOAD`. Every `PT_LOAD` segment must lie inside the user range, must not be
//! both writable and executable, must have `memsz >= filesz` and its file data inside
//! the image, and must not overlap another (byte ranges; two segments may share a
//! page). The entry must lie inside an executable `PT_LOAD` segment. Other program
//! headers (`PT_GNU_STACK`, `PT_RISCV_ATTRIBUTES`, ...) and the section headers are
//! ignored.
//!
//! The corruptions a hostile-input case applies to a good image are in [`corrupt`]
//! (feature `corrupt`, host only).

#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "corrupt")]
extern crate std;

#[cfg(feature = "corrupt")]
pub mod corrupt;

use core::ops::Range;

/// The user range of an rv64 program: every `PT_LOAD` segment lies inside it.
pub const USER_RV64: Range<u64> = 0x1_0000..0x40_0000_0000;
/// The user range of an rv32 program.
pub const USER_RV32: Range<u64> = 0x1_0000..0x8000_0000;
/// The most program headers an image may have.
pub const MAX_PHNUM: usize = 64;

/// `p_flags`: executable.
pub const PF_X: u32 = 1;
/// `p_flags`: writable.
pub const PF_W: u32 = 2;
/// `p_flags`: readable.
pub const PF_R: u32 = 4;

pub(crate) const PT_LOAD: u32 = 1;
const ET_EXEC: u16 = 2;
const EM_RISCV: u16 = 243;

/// An image's ELF class (its width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// ELF32: an rv32 program.
    Elf32,
    /// ELF64: an rv64 program.
    Elf64,
}

impl Class {
    /// The class of the target this crate is built for (rv32 or rv64; ELF64 on the host).
    pub const NATIVE: Class = if cfg!(target_pointer_width = "32") { Class::Elf32 } else { Class::Elf64 };

    /// The user range of programs of this class.
    pub fn user_range(self) -> Range<u64> {
        match self {
            Class::Elf32 => USER_RV32,
            Class::Elf64 => USER_RV64,
        }
    }
}

/// Why an image was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The ELF header or the program header table is cut short.
    Truncate,
    /// Not an ELF image (`\x7fELF`), or its `EI_VERSION`/`e_version` is not 1.
    Magic,
    /// `EI_CLASS` is neither ELF32 nor ELF64, or not the class asked for.
    Class,
    /// Not little-endian.
    Endian,
    /// `e_machine` is not `EM_RISCV`.
    Machine,
    /// `e_type` is not `ET_EXEC`.
    Type,
    /// `e_phentsize` is not the class's program header size, or `e_phnum` is 0 or more
    /// than [`MAX_PHNUM`].
    ProgramHeaders,
    /// No `PT_LOAD` segment.
    NoSegments,
    /// A `PT_LOAD` segment (vaddr..vaddr + memsz) not inside the user range.
    SegmentVaddr,
    /// A `PT_LOAD` segment both writable and executable.
    SegmentFlags,
    /// A `PT_LOAD` segment with memsz < filesz.
    SegmentMemsz,
    /// A `PT_LOAD` segment whose file data runs past the end of the image.
    TruncateSegmentData,
    /// Two `PT_LOAD` segments overlap.
    SegmentOverlap,
    /// The entry lies outside every executable `PT_LOAD` segment.
    Entry,
}

impl Error {
    /// A short, stable line fragment naming the rule.
    pub fn describe(&self) -> &'static str {
        match self {
            Error::Truncate => "truncate",
            Error::Magic => "magic",
            Error::Class => "class",
            Error::Endian => "endian",
            Error::Machine => "machine",
            Error::Type => "type",
            Error::ProgramHeaders => "program-headers",
            Error::NoSegments => "no-segments",
            Error::SegmentVaddr => "segment-vaddr",
            Error::SegmentFlags => "segment-flags",
            Error::SegmentMemsz => "segment-memsz",
            Error::TruncateSegmentData => "truncate-segment-data",
            Error::SegmentOverlap => "segment-overlap",
            Error::Entry => "entry",
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.describe())
    }
}

/// One `PT_LOAD` segment of a checked image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Where it is loaded.
    pub vaddr: u64,
    /// Its size in memory (`data`, then zeros up to `memsz`).
    pub memsz: u64,
    /// Its file data (`filesz` bytes).
    pub data: &'a [u8],
    /// `p_flags`: [`PF_R`], [`PF_W`], [`PF_X`].
    pub flags: u32,
}

impl Segment<'_> {
    /// The addresses it occupies: vaddr..vaddr + memsz (inside the user range).
    pub fn range(&self) -> Range<u64> {
        self.vaddr..self.vaddr + self.memsz
    }

    /// Whether [`PF_X`] is set.
    pub fn executable(&self) -> bool {
        self.flags & PF_X != 0
    }

    /// Whether [`PF_W`] is set.
    pub fn writable(&self) -> bool {
        self.flags & PF_W != 0
    }

    /// Whether [`PF_R`] is set.
    pub fn readable(&self) -> bool {
        self.flags & PF_R != 0
    }
}

/// A checked image: its entry and its `PT_LOAD` segments.
#[derive(Clone, Copy, Debug)]
pub struct Program<'a> {
    image: &'a [u8],
    header: Header,
    /// Its class.
    pub class: Class,
    /// The entry point (inside an executable segment).
    pub entry: u64,
}

impl<'a> Program<'a> {
    /// The `PT_LOAD` segments, in program header order.
    pub fn segments(&self) -> Segments<'a> {
        Segments { image: self.image, header: self.header, next: 0 }
    }
}

/// The `PT_LOAD` segments of a [`Program`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    image: &'a [u8],
    header: Header,
    next: usize,
}

impl<'a> Iterator for Segments<'a> {
    type Item = Segment<'a>;

    fn next(&mut self) -> Option<Segment<'a>> {
        while self.next < self.header.phnum {
            let i = self.next;
            self.next += 1;
            // Checked before, so this never fails; a failure would only end the walk.
            if let Ok(Some(segment)) = self.header.load(self.image, i) {
                return Some(segment);
            }
        }
        None
    }
}

/// The fields of the ELF header the checks use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub(crate) class: Class,
    entry: u64,
    pub(crate) phoff: usize,
    pub(crate) phnum: usize,
}

/// Field offsets of the ELF header and of a program header, per class.
pub(crate) struct Layout {
    pub(crate) ehsize: usize,
    pub(crate) word: usize,
    pub(crate) entry: usize,
    pub(crate) phoff: usize,
    pub(crate) phentsize: usize,
    pub(crate) phnum: usize,
    pub(crate) phdr_size: usize,
    pub(crate) p_offset: usize,
    pub(crate) p_vaddr: usize,
    pub(crate) p_filesz: usize,
    pub(crate) p_memsz: usize,
    pub(crate) p_flags: usize,
}

const ELF32: Layout = Layout {
    ehsize: 52,
    word: 4,
    entry: 24,
    phoff: 28,
    phentsize: 42,
    phnum: 44,
    phdr_size: 32,
    p_offset: 4,
    p_vaddr: 8,
    p_filesz: 16,
    p_memsz: 20,
    p_flags: 24,
};

const ELF64: Layout = Layout {
    ehsize: 64,
    word: 8,
    entry: 24,
    phoff: 32,
    phentsize: 54,
    phnum: 56,
    phdr_size: 56,
    p_offset: 8,
    p_vaddr: 16,
    p_filesz: 32,
    p_memsz: 40,
    p_flags: 4,
};

impl Class {
    pub(crate) fn layout(self) -> &'static Layout {
        match self {
            Class::Elf32 => &ELF32,
            Class::Elf64 => &ELF64,
        }
    }
}

pub(crate) fn le(bytes: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = bytes.get(offset..offset.checked_add(size)?)?;
    Some(b.iter().rev().fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)))
}

/// A class-sized word (u32 for ELF32, u64 for ELF64).
fn word(bytes: &[u8], offset: usize, class: Class) -> Option<u64> {
    le(bytes, offset, class.layout().word)
}

impl Header {
    /// The ELF header's checks: identification, machine, type, program header table.
    pub(crate) fn read(image: &[u8]) -> Result<Header, Error> {
        let ident = image.get(..16).ok_or(Error::Truncate)?;
        if ident[..4] != *b"\x7fELF" {
            return Err(Error::Magic);
        }
        let class = match ident[4] {
            1 => Class::Elf32,
            2 => Class::Elf64,
            _ => return Err(Error::Class),
        };
        if ident[5] != 1 {
            return Err(Error::Endian);
        }
        let l = class.layout();
        let field = |offset: usize, size: usize| le(image, offset, size).ok_or(Error::Truncate);
        if image.len() < l.ehsize {
            return Err(Error::Truncate);
        }
        if ident[6] != 1 || field(20, 4)? != 1 {
            return Err(Error::Magic);
        }
        if field(18, 2)? != u64::from(EM_RISCV) {
            return Err(Error::Machine);
        }
        if field(16, 2)? != u64::from(ET_EXEC) {
            return Err(Error::Type);
        }
        let entry = field(l.entry, l.word)?;
        let phoff = usize::try_from(field(l.phoff, l.word)?).map_err(|_| Error::Truncate)?;
        let phnum = field(l.phnum, 2)? as usize;
        if field(l.phentsize, 2)? != l.phdr_size as u64 || phnum == 0 || phnum > MAX_PHNUM {
            return Err(Error::ProgramHeaders);
        }
        let table_end = phnum.checked_mul(l.phdr_size).and_then(|size| phoff.checked_add(size));
        if table_end.is_none_or(|end| end > image.len()) {
            return Err(Error::Truncate);
        }
        Ok(Header { class, entry, phoff, phnum })
    }

    /// Program header `i` if it is `PT_LOAD`, with its own checks (all but the range).
    fn load<'a>(&self, image: &'a [u8], i: usize) -> Result<Option<Segment<'a>>, Error> {
        let l = self.class.layout();
        let at = self.phoff + i * l.phdr_size;
        let phdr = image.get(at..at + l.phdr_size).ok_or(Error::Truncate)?;
        let field = |offset: usize| word(phdr, offset, self.class).ok_or(Error::Truncate);
        if le(phdr, 0, 4) != Some(u64::from(PT_LOAD)) {
            return Ok(None);
        }
        let flags = le(phdr, l.p_flags, 4).ok_or(Error::Truncate)? as u32;
        let (offset, vaddr, filesz, memsz) =
            (field(l.p_offset)?, field(l.p_vaddr)?, field(l.p_filesz)?, field(l.p_memsz)?);
        if flags & PF_W != 0 && flags & PF_X != 0 {
            return Err(Error::SegmentFlags);
        }
        if memsz < filesz {
            return Err(Error::SegmentMemsz);
        }
        let data = if filesz == 0 {
            &[][..]
        } else {
            let end = offset.checked_add(filesz).ok_or(Error::TruncateSegmentData)?;
            usize::try_from(offset)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(start, end)| image.get(start..end))
                .ok_or(Error::TruncateSegmentData)?
        };
        Ok(Some(Segment { vaddr, memsz, data, flags }))
    }
}

/// Checks `image` for loading into the user range `user` (e.g. [`USER_RV64`]) and
/// returns its entry and `PT_LOAD` segments. Either class is accepted; see
/// [`check_class`] to insist on one.
pub fn check(image: &[u8], user: Range<u64>) -> Result<Program<'_>, Error> {
    let program = check_layout(image, user)?;
    if !program.segments().any(|s| s.executable() && s.range().contains(&program.entry)) {
        return Err(Error::Entry);
    }
    Ok(program)
}

/// Every check of [`check`] but the entry's: the header, and the segments inside the
/// user range, neither writable and executable, nor overlapping, their data in the
/// image. Only a kernel's test-only feature skips the entry's check (the reference
/// kernel's `spawn-unchecked-entry`, whose self-check proves the check is needed).
pub fn check_layout(image: &[u8], user: Range<u64>) -> Result<Program<'_>, Error> {
    let header = Header::read(image)?;
    let program = Program { image, header, class: header.class, entry: header.entry };
    let mut loads = 0;
    for i in 0..header.phnum {
        let Some(segment) = header.load(image, i)? else { continue };
        loads += 1;
        let end = segment.vaddr.checked_add(segment.memsz);
        if segment.vaddr < user.start || end.is_none_or(|end| end > user.end) {
            return Err(Error::SegmentVaddr);
        }
    }
    if loads == 0 {
        return Err(Error::NoSegments);
    }
    for (i, a) in program.segments().enumerate() {
        if program.segments().skip(i + 1).any(|b| a.vaddr < b.vaddr + b.memsz && b.vaddr < a.vaddr + a.memsz) {
            return Err(Error::SegmentOverlap);
        }
    }
    Ok(program)
}

/// [`check`], insisting on `class` and using its user range ([`Class::user_range`]).
/// The kernel calls `check_class(image, Class::NATIVE)`.
pub fn check_class(image: &[u8], class: Class) -> Result<Program<'_>, Error> {
    if Header::read(image)?.class != class {
        return Err(Error::Class);
    }
    check(image, class.user_range())
}

#[cfg(all(test, not(feature = "corrupt")))]
compile_error!("the elf tests need the `corrupt` feature: cargo test -p elf --features corrupt");
#[cfg(all(test, feature = "corrupt"))]
mod tests;
