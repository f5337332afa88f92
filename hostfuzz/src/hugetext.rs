//! The runner's code on huge pages. `fork` copies no page-table entry of a file mapping
//! that was never written, so every child of the fork server takes page faults on the
//! binary's code and read-only data as it runs: 8 of the 17 faults of an `isolation`
//! input, 17 of fdt's 27, each a trap and up to 16 entries mapped. Here the runner moves
//! every whole, 2 MiB-aligned stretch of its binary's read-only mappings (code and
//! read-only data) onto anonymous memory backed by one transparent huge page, once,
//! before its first fork: `fork` then copies that stretch as a single entry (a huge page
//! shared read-only), the children take no fault on it, and their exit drops one entry.
//!
//! Each stretch is copied, byte for byte, into a fresh huge page, made read-only and
//! executable, and moved over the original with `mremap` (`MREMAP_FIXED`), which replaces
//! the old mapping in one step: the code running, this function's included, reads the
//! same bytes before and after. Read-only data that shares a stretch with code becomes
//! executable too (in the runner and its children only). Where the kernel has no
//! transparent huge pages, or gives a 4 KiB page where a huge one was asked, the stretch
//! is left as it was and nothing else changes. It costs ~1 ms at start, and 2 MiB of
//! memory a stretch that the children share. `HOSTFUZZ_HUGE_TEXT=0` turns it off (a
//! profiler then sees the binary's symbols on every address); `HOSTFUZZ_HUGE_TEXT=report`
//! says on stderr how many stretches moved.
//!
//! A stretch may also cover holes between the binary's segments (unmapped, nothing else
//! in them), which the huge page fills with zeros, but never a writable mapping nor
//! another file's. `cargo hostfuzz` links the runner with 2 MiB segment alignment
//! (`-z max-page-size=0x200000`, `.cargo/config.toml`) so that its writable data starts
//! in a stretch of its own and every stretch of code qualifies.

/// A huge page's size (x86_64, aarch64 with 4 KiB pages, riscv64: a PMD entry).
const HUGE: usize = 2 << 20;

/// What [`remap`] did: the stretches moved, and those left as they were.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub huge: usize,
    pub left: usize,
}

/// Moves the binary's 2 MiB stretches of code and read-only data onto huge pages, once
/// per process; the later calls do nothing. Call it first thing, with one thread running
/// (`main` does, unless `HOSTFUZZ_HUGE_TEXT=0`).
pub fn remap() -> Moved {
    static ONCE: std::sync::OnceLock<Moved> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return Moved::default();
        };
        let mut moved = Moved::default();
        for (at, parts) in stretches(&maps, remap as *const () as usize) {
            if move_stretch(at, &parts) {
                moved.huge += 1;
            } else {
                moved.left += 1;
            }
        }
        moved
    })
}

/// A mapping, from a line of `/proc/self/maps`.
struct Row<'a> {
    lo: usize,
    hi: usize,
    writable: bool,
    path: &'a str,
}

fn rows(maps: &str) -> Vec<Row<'_>> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let (range, perms) = (fields.next()?, fields.next()?);
            let path = fields.nth(3).unwrap_or("");
            let (lo, hi) = range.split_once('-')?;
            let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
            Some(Row { lo, hi, writable: perms.as_bytes().get(1) == Some(&b'w'), path })
        })
        .collect()
}

/// The 2 MiB-aligned stretches that hold some of the read-only mappings of the file that
/// maps `inside` (an address of our code) and nothing else but unmapped holes (between
/// the binary's segments): each stretch's start, with the parts of it mapped, `(start,
/// end)` each.
fn stretches(maps: &str, inside: usize) -> Vec<(usize, Vec<(usize, usize)>)> {
    let rows = rows(maps);
    let Some(ours) = rows.iter().find(|r| r.lo <= inside && inside < r.hi && r.path.starts_with('/')) else {
        return Vec::new();
    };
    let mut starts: Vec<usize> = Vec::new();
    for row in rows.iter().filter(|r| r.path == ours.path && !r.writable) {
        let mut at = row.lo & !(HUGE - 1);
        while at < row.hi {
            if !starts.contains(&at) {
                starts.push(at);
            }
            at += HUGE;
        }
    }
    starts
        .into_iter()
        .filter_map(|at| {
            let end = at.checked_add(HUGE)?;
            let inside: Vec<&Row> = rows.iter().filter(|r| r.lo < end && r.hi > at).collect();
            inside
                .iter()
                .all(|r| r.path == ours.path && !r.writable)
                .then(|| (at, inside.iter().map(|r| (r.lo.max(at), r.hi.min(end))).collect()))
        })
        .collect()
}

/// Moves `[at, at + HUGE)` onto a huge page holding the same bytes in `parts` (the rest
/// of it unmapped before, zeros after); false (nothing changed) if the kernel gave no
/// huge page or a call failed.
fn move_stretch(at: usize, parts: &[(usize, usize)]) -> bool {
    // SAFETY: a fresh private anonymous mapping, twice the size so that a 2 MiB-aligned
    // stretch lies inside; it overlaps nothing of ours.
    let area = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if area == libc::MAP_FAILED {
        return false;
    }
    let fresh = (area as usize).next_multiple_of(HUGE);
    let unmap = |what: usize, len: usize| {
        // SAFETY: a part of the fresh mapping above, no longer wanted.
        unsafe { libc::munmap(what as *mut libc::c_void, len) };
    };
    // The parts of the area outside the aligned stretch.
    unmap(area as usize, fresh - area as usize);
    unmap(fresh + HUGE, area as usize + HUGE - fresh);
    // SAFETY: `fresh` is ours, HUGE bytes, 2 MiB-aligned; each part is a readable,
    // read-only mapping of our binary inside `[at, at + HUGE)`, mapped until the mremap
    // below, and lands at the same offset in `fresh`.
    let ok = unsafe {
        libc::madvise(fresh as *mut libc::c_void, HUGE, libc::MADV_HUGEPAGE) == 0
            && {
                for &(lo, hi) in parts {
                    std::ptr::copy_nonoverlapping(lo as *const u8, (fresh + lo - at) as *mut u8, hi - lo);
                }
                is_huge(fresh)
            }
            && libc::mprotect(fresh as *mut libc::c_void, HUGE, libc::PROT_READ | libc::PROT_EXEC) == 0
    };
    if !ok {
        unmap(fresh, HUGE);
        return false;
    }
    // SAFETY: moves our fresh copy over `[at, at + HUGE)`, which it replaces in one step
    // (the old mapping is unmapped by the same call); the bytes there are the same
    // before and after, so code running from there, this function's included, goes on.
    let to = unsafe {
        libc::mremap(
            fresh as *mut libc::c_void,
            HUGE,
            HUGE,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            at as *mut libc::c_void,
        )
    };
    if to as usize != at {
        unmap(fresh, HUGE);
        return false;
    }
    true
}

/// Whether the page at `at` (2 MiB-aligned, just written) is a huge one: its
/// `AnonHugePages` in `/proc/self/smaps`, read for that mapping.
fn is_huge(at: usize) -> bool {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return false;
    };
    let header = |l: &str| {
        l.split_ascii_whitespace()
            .next()
            .and_then(|r| r.split_once('-'))
            .is_some_and(|(a, b)| !a.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_hexdigit()))
    };
    let head = format!("{at:x}-");
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
    lines.next().is_some()
        && lines.take_while(|l| !header(l)).any(|l| {
            l.strip_prefix("AnonHugePages:")
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
                .is_some_and(|kb| kb * 1024 >= HUGE)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
555555554000-555555556000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f00000c3000 r--p 00000000 fe:00 42                         /bin/runner
7f00002c3000-7f00004e4000 r-xp 000c3000 fe:00 42                         /bin/runner
7f00006e4000-7f00006fa000 r--p 002e4000 fe:00 42                         /bin/runner
7f00008fa000-7f00008fd000 rw-p 002fa000 fe:00 42                         /bin/runner
7f00008fd000-7f0000906000 rw-p 00000000 00:00 0
7ffd604a5000-7ffd604c6000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn every_stretch_of_code_and_read_only_data_with_holes_qualifies_and_writable_data_does_not() {
        let got = stretches(MAPS, 0x7f00_0030_0000);
        let want: Vec<(usize, Vec<(usize, usize)>)> = vec![
            (0x7f00_0000_0000, vec![(0x7f00_0000_0000, 0x7f00_000c_3000)]),
            (0x7f00_0020_0000, vec![(0x7f00_002c_3000, 0x7f00_0040_0000)]),
            (0x7f00_0040_0000, vec![(0x7f00_0040_0000, 0x7f00_004e_4000)]),
            (0x7f00_0060_0000, vec![(0x7f00_006e_4000, 0x7f00_006f_a000)]),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_stretch_shared_with_writable_data_or_another_mapping_is_left() {
        // The binary linked with 4 KiB alignment: its data follows its code closely.
        let packed = "\
7f0000000000-7f00000c3000 r--p 00000000 fe:00 42                         /bin/runner
7f00000c3000-7f00002e1000 r-xp 000c3000 fe:00 42                         /bin/runner
7f00002e1000-7f00002f8000 r--p 002e1000 fe:00 42                         /bin/runner
7f00002f8000-7f00002fb000 rw-p 002f8000 fe:00 42                         /bin/runner
";
        let got = stretches(packed, 0x7f00_0010_0000);
        assert_eq!(got.iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![0x7f00_0000_0000]);
        // Another mapping in a hole of the first stretch: that one is left too.
        let crowded = format!("{packed}7f0000100000-7f0000101000 rw-p 00000000 00:00 0\n");
        let mut rows: Vec<&str> = crowded.lines().collect();
        rows.sort_by_key(|l| usize::from_str_radix(&l[..12], 16).unwrap_or(0));
        assert_eq!(stretches(&rows.join("\n"), 0x7f00_0010_0000), vec![]);
    }

    #[test]
    fn no_stretch_when_the_address_is_in_no_file_mapping() {
        assert_eq!(stretches(MAPS, 0x5555_5555_4100), vec![]);
        assert_eq!(stretches("", 0x7f00_0030_0000), vec![]);
    }
}
