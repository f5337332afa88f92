//! Reads the disk the bench made: the GPT header (sector 1), the first partition entry,
//! then the partition's first sector, and prints where it lies and its first line:
//!
//!     diskpart: partition 1 sectors <first>..=<last> starts "<text>"
//!
//! (printable ASCII as it is, any other byte as \xNN, up to the first LF, at most 64
//! bytes), or `[diskpart] FAIL: ...`. The bench knows what it packed; the case pins it.

#![no_std]
#![no_main]

rt::program!("diskpart", main);

const SECTOR: usize = 512;

fn fail(what: &str, e: abi::Error) -> ! {
    rt::log!("[diskpart] FAIL: {what}: {}", e.name());
    rt::exit(1)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn read(sector: u64, buf: &mut [u8; SECTOR], sectors: usize) {
    match usize::try_from(sector) {
        Ok(s) if s < sectors => {
            rt::disk_read(s, buf).unwrap_or_else(|e| fail("read", e));
        }
        _ => {
            rt::log!("[diskpart] FAIL: sector {sector} is outside the disk");
            rt::exit(1)
        }
    }
}

fn main(_pid: u32, _badge: u32) {
    let (sectors, block) = rt::disk_info().unwrap_or_else(|e| fail("no disk", e));
    if block != SECTOR {
        rt::log!("[diskpart] FAIL: block size {block}, not {SECTOR}");
        rt::exit(1);
    }
    let mut buf = [0u8; SECTOR];
    read(1, &mut buf, sectors);
    if &buf[..8] != b"EFI PART" {
        rt::log!("[diskpart] FAIL: no GPT header in sector 1");
        rt::exit(1);
    }
    read(u64_at(&buf, 72), &mut buf, sectors);
    let (first, last) = (u64_at(&buf, 32), u64_at(&buf, 40));
    if first == 0 || last < first {
        rt::log!("[diskpart] FAIL: the first partition entry is empty ({first}..={last})");
        rt::exit(1);
    }
    read(first, &mut buf, sectors);
    let mut line = rt::Line::new();
    for &b in buf.iter().take(64).take_while(|&&b| b != b'\n') {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'"' {
            line.push(&[b]);
        } else {
            let hex = b"0123456789abcdef";
            line.push(&[b'\\', b'x', hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]);
        }
    }
    let text = core::str::from_utf8(line.as_bytes()).unwrap_or("");
    rt::log!("diskpart: partition 1 sectors {first}..={last} starts \"{text}\"");
}
