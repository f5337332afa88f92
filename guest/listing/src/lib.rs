//! The `programs` entry as the log server reads it: one line per program, the program's
//! entry name then the budgets it gets.
//!
//! Portable: `no_std`, no allocation, no `unsafe`; it builds for the bare-metal guest
//! targets and for the host (where it is unit-tested and fuzzed by `hostfuzz`).
//!
//! What [`parse`] accepts:
//!
//! - at most [`MAX_LEN`] bytes (more is refused at line 0);
//! - one trailing `"\n"` is dropped (once); what is left is split at every `"\n"` into
//!   lines numbered from 1; an empty entry (or a lone `"\n"`) is a listing of no programs;
//! - at most [`MAX_PROGRAMS`] lines, one per place (`abi::FIRST_PLACE..=LAST_PLACE`): the
//!   next line is refused as one too many;
//! - each line is checked in this order, the first failure refusing it:
//!   1. every byte printable ASCII (`0x20..0x7f`: a tab or a `"\r"` is refused);
//!   2. the words are the pieces between single spaces; the first, the entry name, is
//!      1 to `abi::NAME_LEN` bytes (so an empty line, or one starting with a space, has
//!      no entry name);
//!   3. the bundle has a program of that name (the caller's `has_program`, asked once
//!      per line, in line order);
//!   4. every other word is a budget, one of [`BUDGETS`], each at most once, in any order
//!      (an empty word, from two spaces or a trailing space, is an unknown budget `""`).
//!
//! The budgets are checked, not returned: they grant nothing yet. A refusal is the line
//! and a [`Why`], whose `Display` is the log server's text after
//! `[server] refused programs line N: `.
//!
//! ```text
//! match listing::parse(bytes, |name| is_program(name)) {
//!     Ok(listing) => for name in listing.names() { start(name.as_str()) },
//!     Err(r) => refuse(r.line, format_args!("{}", r.why)),
//! }
//! ```

#![no_std]
#![forbid(unsafe_code)]

use abi::{FIRST_PLACE, LAST_PLACE, NAME_LEN};
use core::fmt;

/// Programs a listing may name: one per place.
pub const MAX_PROGRAMS: usize = (LAST_PLACE - FIRST_PLACE + 1) as usize;
/// The longest entry read.
pub const MAX_LEN: usize = 2048;
/// The budget names a line may give.
pub const BUDGETS: [&str; 3] = ["root", "system", "users"];

/// A program's entry name: 1 to `abi::NAME_LEN` printable ASCII bytes, no space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    bytes: [u8; NAME_LEN],
    len: usize,
}

impl Name {
    /// No name (a placeholder for an array's unused places).
    pub const EMPTY: Name = Name { bytes: [0; NAME_LEN], len: 0 };

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The name (always ASCII).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or("?")
    }
}

/// An accepted listing: the programs' names in line order.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    names: [Name; MAX_PROGRAMS],
    count: usize,
}

impl Listing {
    /// The names, in line order (none for an empty entry).
    pub fn names(&self) -> &[Name] {
        &self.names[..self.count]
    }
}

/// Why a line was refused; `Display` gives the log server's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why<'a> {
    /// The entry is longer than [`MAX_LEN`] (its length); line 0.
    TooLong(usize),
    /// A byte outside `0x20..0x7f` (the first such byte of the line).
    NotPrintable(u8),
    /// The first word is empty or longer than `abi::NAME_LEN`.
    NoEntryName,
    /// The bundle has no program of this name.
    NoProgram(&'a str),
    /// A word that is not one of [`BUDGETS`].
    UnknownBudget(&'a str),
    /// A budget given a second time.
    BudgetTwice(&'a str),
    /// A line past the [`MAX_PROGRAMS`]th.
    TooMany,
}

impl fmt::Display for Why<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::TooLong(len) => write!(f, "the entry has {len} bytes, more than {MAX_LEN}"),
            Why::NotPrintable(b) => write!(f, "byte {b:#04x} is not printable ASCII"),
            Why::NoEntryName => f.write_str("no entry name"),
            Why::NoProgram(name) => write!(f, "the bundle has no program {name}"),
            Why::UnknownBudget(budget) => write!(f, "unknown budget {budget:?}"),
            Why::BudgetTwice(budget) => write!(f, "budget {budget} named twice"),
            Why::TooMany => write!(f, "more than {MAX_PROGRAMS} programs"),
        }
    }
}

/// A refused listing: the line (from 1; 0 for the entry as a whole) and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal<'a> {
    /// The line refused.
    pub line: usize,
    /// Why.
    pub why: Why<'a>,
}

/// Reads a `programs` entry (the rules are in the crate's doc). `has_program(name)` says
/// whether the bundle has a program of that name; it is asked once for each line whose
/// name passed the earlier checks, in line order, and never after a refusal.
pub fn parse(bytes: &[u8], mut has_program: impl FnMut(&str) -> bool) -> Result<Listing, Refusal<'_>> {
    if bytes.len() > MAX_LEN {
        return Err(Refusal { line: 0, why: Why::TooLong(bytes.len()) });
    }
    let mut listing = Listing { names: [Name::EMPTY; MAX_PROGRAMS], count: 0 };
    let text = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if text.is_empty() {
        return Ok(listing);
    }
    for (k, line) in text.split(|&b| b == b'\n').enumerate() {
        let refuse = |why| Refusal { line: k + 1, why };
        if listing.count == MAX_PROGRAMS {
            return Err(refuse(Why::TooMany));
        }
        listing.names[listing.count] = check_line(line, &mut has_program).map_err(refuse)?;
        listing.count += 1;
    }
    Ok(listing)
}

/// Checks one line; returns its entry name.
fn check_line<'a>(line: &'a [u8], has_program: &mut impl FnMut(&str) -> bool) -> Result<Name, Why<'a>> {
    if let Some(&b) = line.iter().find(|b| !(0x20..0x7f).contains(*b)) {
        return Err(Why::NotPrintable(b));
    }
    // Printable ASCII is UTF-8.
    let text = core::str::from_utf8(line).unwrap_or("");
    let mut words = text.split(' ');
    let name = words.next().unwrap_or("");
    if name.is_empty() || name.len() > NAME_LEN {
        return Err(Why::NoEntryName);
    }
    if !has_program(name) {
        return Err(Why::NoProgram(name));
    }
    let mut seen = [false; BUDGETS.len()];
    for budget in words {
        let Some(k) = BUDGETS.iter().position(|b| *b == budget) else {
            return Err(Why::UnknownBudget(budget));
        };
        if seen[k] {
            return Err(Why::BudgetTwice(budget));
        }
        seen[k] = true;
    }
    let mut out = Name { bytes: [0; NAME_LEN], len: name.len() };
    out.bytes[..name.len()].copy_from_slice(name.as_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests;
