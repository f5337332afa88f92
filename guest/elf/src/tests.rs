//! Host tests on two real program images: guest/programs' `sample`, linked at 0x1_0000
//! for rv64 and rv32 (tests/data/rebuild.sh).

extern crate std;

use super::*;
use std::vec::Vec;

const RV64: &[u8] = include_bytes!("../tests/data/sample-rv64.elf");
const RV32: &[u8] = include_bytes!("../tests/data/sample-rv32.elf");

fn fixtures() -> [(&'static [u8], Class); 2] {
    [(RV64, Class::Elf64), (RV32, Class::Elf32)]
}

fn error(image: &[u8], class: Class) -> Error {
    check(image, class.user_range()).map(|p| p.entry).unwrap_err()
}

#[test]
fn the_fixtures_pass() {
    for (image, class) in fixtures() {
        let program = check(image, class.user_range()).unwrap();
        assert_eq!(program.class, class);
        assert_eq!(program.entry, 0x1_0000);
        let segments: Vec<_> = program.segments().collect();
        assert_eq!(segments.len(), 2, "{class:?}");
        let (text, bss) = (segments[0], segments[1]);
        assert_eq!(text.vaddr, 0x1_0000);
        assert!(text.executable() && text.readable() && !text.writable());
        assert_eq!(text.data.len() as u64, text.memsz);
        assert_eq!(&text.data[..2], &image[0x1000..0x1002]);
        assert!(bss.writable() && !bss.executable() && bss.data.is_empty());
        assert_eq!(bss.memsz, 0x4000);
        assert!(check_class(image, class).is_ok());
    }
    assert_eq!(check_class(RV64, Class::Elf32).unwrap_err(), Error::Class);
    assert_eq!(check_class(RV32, Class::Elf64).unwrap_err(), Error::Class);
    assert_eq!(Class::NATIVE, Class::Elf64);
    // An rv32 image is also inside the rv64 range.
    assert!(check(RV32, USER_RV64).is_ok());
}

#[test]
fn segment_vaddr_corruption() {
    for (image, class) in fixtures() {
        let user = class.user_range();
        for vaddr in [0, 0x1000, user.start - 1, user.end, user.end - 1, user.end - 0x40, 0x8020_0000] {
            if user.contains(&vaddr) && user.contains(&(vaddr + 0x42)) {
                continue;
            }
            let bad = corrupt::segment_vaddr(image, vaddr).unwrap();
            assert_eq!(error(&bad, class), Error::SegmentVaddr, "{class:?} {vaddr:#x}");
        }
    }
    assert_eq!(error(&corrupt::segment_vaddr(RV64, 0xffff_ffc0_8020_0000).unwrap(), Class::Elf64), Error::SegmentVaddr);
    assert_eq!(error(&corrupt::segment_vaddr(RV64, u64::MAX - 0x20).unwrap(), Class::Elf64), Error::SegmentVaddr);
    assert_eq!(corrupt::segment_vaddr(RV32, 1 << 32), None);
}

#[test]
fn entry_corruption() {
    for (image, class) in fixtures() {
        // Before the text, just past it, inside the writable segment, far away.
        for value in [0, 0xfffe, 0x1_0042, 0x1_0050, 0x1_2000, 0x8020_0000, u64::from(u32::MAX)] {
            let bad = corrupt::entry(image, value).unwrap();
            assert_eq!(error(&bad, class), Error::Entry, "{class:?} {value:#x}");
        }
        // Still inside the text: accepted.
        assert!(check(&corrupt::entry(image, 0x1_0040).unwrap(), class.user_range()).is_ok());
    }
    assert_eq!(corrupt::entry(RV32, 1 << 32), None);
}

#[test]
fn truncate_corruption() {
    for (image, class) in fixtures() {
        let l = class.layout();
        let table_end = Header::read(image).map(|h| h.phoff + h.phnum * l.phdr_size).unwrap();
        for len in (0..table_end).chain([4, 16, l.ehsize - 1, l.ehsize, table_end - 1]) {
            let bad = corrupt::truncate(image, len).unwrap();
            assert_eq!(error(&bad, class), Error::Truncate, "{class:?} {len}");
        }
        assert_eq!(corrupt::truncate(image, image.len()), None);
    }
}

#[test]
fn segment_flags_corruption() {
    for (image, class) in fixtures() {
        for flags in ["rwx", "wx", "xw"] {
            let bad = corrupt::segment_flags(image, flags).unwrap();
            assert_eq!(error(&bad, class), Error::SegmentFlags, "{class:?} {flags}");
        }
        // Text that is no longer executable: the entry is then outside every one.
        assert_eq!(error(&corrupt::segment_flags(image, "r").unwrap(), class), Error::Entry);
        assert!(check(&corrupt::segment_flags(image, "rx").unwrap(), class.user_range()).is_ok());
        assert!(check(&corrupt::segment_flags(image, "x").unwrap(), class.user_range()).is_ok());
        assert_eq!(corrupt::segment_flags(image, "rwz"), None);
    }
}

#[test]
fn truncate_segment_data_corruption() {
    for (image, class) in fixtures() {
        for n in [1, 2, 0x41, 0x42] {
            let bad = corrupt::truncate_segment_data(image, n).unwrap();
            assert_eq!(bad.len(), 0x1042 - n);
            assert_eq!(error(&bad, class), Error::TruncateSegmentData, "{class:?} {n}");
        }
        assert_eq!(corrupt::truncate_segment_data(image, 0), None);
        assert_eq!(corrupt::truncate_segment_data(image, 0x43), None);
    }
}

fn put(image: &mut [u8], at: usize, bytes: &[u8]) {
    image[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The offset of program header `i`.
fn phdr(image: &[u8], i: usize) -> usize {
    let header = Header::read(image).unwrap();
    header.phoff + i * header.class.layout().phdr_size
}

#[test]
fn the_other_rules() {
    for (image, class) in fixtures() {
        let l = class.layout();
        let with = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut bad = image.to_vec();
            change(&mut bad);
            error(&bad, class)
        };
        let word = |v: u64| v.to_le_bytes()[..l.word].to_vec();
        assert_eq!(with(&|b| b[0] = 0), Error::Magic);
        assert_eq!(with(&|b| b[6] = 2), Error::Magic);
        assert_eq!(with(&|b| put(b, 20, &2u32.to_le_bytes())), Error::Magic);
        assert_eq!(with(&|b| b[4] = 0), Error::Class);
        assert_eq!(with(&|b| b[4] = 3), Error::Class);
        assert_eq!(with(&|b| b[5] = 2), Error::Endian);
        assert_eq!(with(&|b| put(b, 18, &62u16.to_le_bytes())), Error::Machine);
        assert_eq!(with(&|b| put(b, 16, &3u16.to_le_bytes())), Error::Type);
        assert_eq!(with(&|b| put(b, l.phentsize, &40u16.to_le_bytes())), Error::ProgramHeaders);
        assert_eq!(with(&|b| put(b, l.phnum, &0u16.to_le_bytes())), Error::ProgramHeaders);
        assert_eq!(with(&|b| put(b, l.phnum, &65u16.to_le_bytes())), Error::ProgramHeaders);
        // The table (4 headers) one byte past the end.
        let near_end = (image.len() - 4 * l.phdr_size + 1) as u64;
        assert_eq!(with(&|b| put(b, l.phoff, &word(near_end))), Error::Truncate);
        assert_eq!(with(&|b| put(b, l.phoff, &word(u64::from(u32::MAX)))), Error::Truncate);
        // Every PT_LOAD turned into PT_NOTE.
        let no_loads = |b: &mut Vec<u8>| {
            for i in 0..2 {
                let at = phdr(b, i);
                put(b, at, &4u32.to_le_bytes());
            }
        };
        assert_eq!(with(&no_loads), Error::NoSegments);
        // The writable segment moved over the text.
        let overlap = |b: &mut Vec<u8>| {
            let at = phdr(b, 1) + l.p_vaddr;
            put(b, at, &word(0x1_0040));
        };
        assert_eq!(with(&overlap), Error::SegmentOverlap);
        let after = |b: &mut Vec<u8>| {
            let at = phdr(b, 1) + l.p_vaddr;
            put(b, at, &word(0x1_0042));
        };
        assert!(check(
            &{
                let mut b = image.to_vec();
                after(&mut b);
                b
            },
            class.user_range()
        )
        .is_ok());
        // memsz < filesz.
        let short_mem = |b: &mut Vec<u8>| {
            let at = phdr(b, 0) + l.p_memsz;
            put(b, at, &word(0x41));
        };
        assert_eq!(with(&short_mem), Error::SegmentMemsz);
        // File data offset far past the end, or overflowing.
        let far = |b: &mut Vec<u8>| {
            let at = phdr(b, 0) + l.p_offset;
            put(b, at, &word(u64::from(u32::MAX) - 0x10));
        };
        assert_eq!(with(&far), Error::TruncateSegmentData);
        // A segment whose memsz runs past the range (ELF64: past the address space).
        let wrap = |b: &mut Vec<u8>| {
            let at = phdr(b, 1) + l.p_memsz;
            put(b, at, &word(u64::MAX));
        };
        assert_eq!(with(&wrap), Error::SegmentVaddr);
    }
}

#[test]
fn any_cut_or_scramble_is_refused_or_sound() {
    for (image, class) in fixtures() {
        for len in 0..image.len() {
            let cut = &image[..len];
            match check(cut, class.user_range()) {
                // Cutting only the section headers or what follows the data is harmless.
                Ok(_) => assert!(len >= 0x1042, "{class:?} {len}"),
                Err(_) => assert!(len < 0x1042, "{class:?} {len}"),
            }
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Scramble the headers (where the checks look) and make sure nothing panics
        // and whatever passes is sound.
        for _ in 0..20_000 {
            let mut bad = image.to_vec();
            for _ in 0..1 + next() % 3 {
                let i = (next() % 0x100) as usize;
                bad[i] ^= 1 << (next() % 8);
            }
            if let Ok(program) = check(&bad, class.user_range()) {
                let user = class.user_range();
                assert!(program.segments().all(|s| user.start <= s.vaddr && s.vaddr + s.memsz <= user.end));
                assert!(program.segments().all(|s| !(s.writable() && s.executable())));
                assert!(program.segments().any(|s| s.executable() && s.range().contains(&program.entry)));
            }
        }
    }
}

#[test]
fn describe_is_distinct_per_error() {
    let all = [
        Error::Truncate,
        Error::Magic,
        Error::Class,
        Error::Endian,
        Error::Machine,
        Error::Type,
        Error::ProgramHeaders,
        Error::NoSegments,
        Error::SegmentVaddr,
        Error::SegmentFlags,
        Error::SegmentMemsz,
        Error::TruncateSegmentData,
        Error::SegmentOverlap,
        Error::Entry,
    ];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.describe(), b.describe());
        }
    }
}
