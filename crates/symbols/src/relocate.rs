//! Where the kernel ran against where it was linked, and a report's frames looked up.

use testbench_triage::Frame;

use crate::{Error, Located, Symbols};

/// Where the offset between run and link addresses came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetFrom {
    /// The console's `Kernel Offset: 0x… from 0x…` line (`Kernel Offset: disabled` is 0).
    Console,
    /// The frames that print an address and a function the symbol table has once:
    /// `agreeing` of the `of` such frames gave this offset.
    Frames { agreeing: usize, of: usize },
    /// Neither said: the kernel is taken to run where it was linked.
    Unknown,
}

/// The offset a kernel ran at: a run-time address is its link address plus `offset`
/// (modulo 2^64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    pub offset: u64,
    pub from: OffsetFrom,
}

const KERNEL_OFFSET: &[u8] = b"Kernel Offset: ";

/// The offset a console's first `Kernel Offset: 0x… from 0x…` line gives (Linux prints
/// it on a panic when the kernel was placed at random: x86_64, arm64, riscv64), 0 for
/// `Kernel Offset: disabled`; None when the console has no such line.
pub fn kernel_offset(console: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(console, KERNEL_OFFSET)?;
    let rest = &console[at + KERNEL_OFFSET.len()..];
    if rest.starts_with(b"disabled") {
        return Some(0);
    }
    let digits = rest.strip_prefix(b"0x")?;
    let end = digits.iter().position(|b| !b.is_ascii_hexdigit()).unwrap_or(digits.len());
    if end == 0 || end > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&digits[..end]).ok()?, 16).ok()
}

/// The offset the kernel of `console` ran at: the console's `Kernel Offset:` line, else
/// the offset most of `frames` agree on (a frame's address less its function's link
/// address and its offset, for each frame that prints both and whose function the
/// symbol table has once, or once with the printed size), else 0.
pub fn relocation(symbols: &Symbols, console: &[u8], frames: &[Frame]) -> Relocation {
    if let Some(offset) = kernel_offset(console) {
        return Relocation { offset, from: OffsetFrom::Console };
    }
    let mut votes: Vec<(u64, usize)> = Vec::new();
    let mut of = 0;
    for frame in frames.iter().filter(|f| f.module.is_none()) {
        let (Some(address), Some(name), Some(offset)) = (frame.address, frame.function.as_deref(), frame.offset) else {
            continue;
        };
        let Some(link) = symbols.link_address(name, frame.size) else { continue };
        of += 1;
        let delta = address.wrapping_sub(link.wrapping_add(offset));
        match votes.iter_mut().find(|(d, _)| *d == delta) {
            Some((_, count)) => *count += 1,
            None => votes.push((delta, 1)),
        }
    }
    // The most agreed on; of equals, the first seen.
    let best = votes.iter().fold(None::<(u64, usize)>, |best, &(d, n)| match best {
        Some((_, m)) if m >= n => best,
        _ => Some((d, n)),
    });
    match best {
        Some((offset, agreeing)) => Relocation { offset, from: OffsetFrom::Frames { agreeing, of } },
        None => Relocation { offset: 0, from: OffsetFrom::Unknown },
    }
}

/// One frame of a report, looked up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbolized {
    /// The link-time address the frame stands for (its printed address less the
    /// offset, or its function's link address plus its offset); None for a frame of a
    /// module (`[name]`: not in this ELF) or whose function the symbol table lacks.
    pub address: Option<u64>,
    /// Its frames, innermost inlined first ([`Symbols::lookup`]); empty when not found.
    pub located: Vec<Located>,
}

/// The first `limit` frames of a report looked up in `symbols`. A frame after the first
/// is a return address: it is looked up one byte before, in the call that returns
/// there (as debuggers do); the first is where the CPU was, and so is a later frame
/// that points at the same place (riscv's and arm64's call traces start with it again).
pub fn symbolize(
    symbols: &Symbols,
    frames: &[Frame],
    relocation: Relocation,
    limit: usize,
) -> Result<Vec<Symbolized>, Error> {
    let mut out = Vec::with_capacity(frames.len().min(limit));
    let first = frames.first().and_then(|frame| link_address_of(symbols, frame, relocation));
    for frame in frames.iter().take(limit) {
        let address = link_address_of(symbols, frame, relocation);
        let located = match address {
            Some(address) if address != first.unwrap_or(address) && address > 0 => symbols.lookup(address - 1)?,
            Some(address) => symbols.lookup(address)?,
            None => Vec::new(),
        };
        out.push(Symbolized { address, located });
    }
    Ok(out)
}

/// Where in the ELF `frame` points: its address less the offset, when the offset is
/// known or the frame names no function the table has; else its function's link address
/// plus its offset; else its address as printed (a kernel that runs where it was linked).
fn link_address_of(symbols: &Symbols, frame: &Frame, relocation: Relocation) -> Option<u64> {
    if frame.module.is_some() {
        return None;
    }
    let by_name = || {
        let link = symbols.link_address(frame.function.as_deref()?, frame.size)?;
        Some(link.wrapping_add(frame.offset.unwrap_or(0)))
    };
    match frame.address {
        Some(address) if relocation.from != OffsetFrom::Unknown => Some(address.wrapping_sub(relocation.offset)),
        Some(address) => by_name().or(Some(address)),
        None => by_name(),
    }
}
