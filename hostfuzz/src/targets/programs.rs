//! The log server's `programs` listing (`guest/listing`). A generator makes the bundle's
//! program names (one to six: names the bench's programs have, or made-up ones up to
//! `abi::NAME_LEN` bytes) and a listing of up to fifteen lines, each a bundle program's
//! name and a few budgets in any order; one listing in four is then damaged, one to
//! three times: a byte that is not printable, an unknown or a repeated budget, a program
//! the bundle lacks, too many lines, an empty line, a name too long, spaces where they do
//! not belong, a different ending, an entry near or past its longest, a byte flipped. `listing::parse`
//! reads it, asking the bundle through a callback.
//!
//! Findings: a panic, or any difference from this file's own reading of the rules
//! (`oracle`, written on std strings): accepted or refused, the line, the reason and its
//! text, the names accepted, and which names the callback was asked for.

use crate::{Decisions, Finding};
use std::collections::HashSet;

const NAME_LEN: usize = 32;
const MAX_PROGRAMS: usize = 15;
const MAX_LEN: usize = 2048;
const BUDGETS: [&str; 3] = ["root", "system", "users"];
/// Names the bench's programs have.
const COMMON: [&str; 8] = ["checker", "rng", "forger", "filereader", "hog", "panicker", "forge-done", "sample"];
/// What made-up names are mostly made of.
const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_.";

/// Why a listing is refused, as the oracle sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    TooLong,
    NotPrintable,
    NoEntryName,
    NoProgram,
    UnknownBudget,
    BudgetTwice,
    TooMany,
}

impl Kind {
    fn of(why: &listing::Why) -> Kind {
        use listing::Why;
        match why {
            Why::TooLong(_) => Kind::TooLong,
            Why::NotPrintable(_) => Kind::NotPrintable,
            Why::NoEntryName => Kind::NoEntryName,
            Why::NoProgram(_) => Kind::NoProgram,
            Why::UnknownBudget(_) => Kind::UnknownBudget,
            Why::BudgetTwice(_) => Kind::BudgetTwice,
            Why::TooMany => Kind::TooMany,
        }
    }

    /// The end reason, for `HOSTFUZZ_STATS`.
    fn end(self) -> &'static str {
        match self {
            Kind::TooLong => "refused: the entry is too long",
            Kind::NotPrintable => "refused: not printable ASCII",
            Kind::NoEntryName => "refused: no entry name",
            Kind::NoProgram => "refused: the bundle has no such program",
            Kind::UnknownBudget => "refused: unknown budget",
            Kind::BudgetTwice => "refused: budget named twice",
            Kind::TooMany => "refused: more than 15 programs",
        }
    }
}

/// The oracle's verdict: the names, or the line, the reason and the log server's text.
type Verdict = Result<Vec<String>, (usize, Kind, String)>;

/// The rules, read again: the whole entry, then line by line, each check in turn.
/// Returns the verdict and the names the bundle is asked about, in order.
fn oracle(bytes: &[u8], bundle: &HashSet<String>) -> (Verdict, Vec<String>) {
    let mut asked = Vec::new();
    if bytes.len() > MAX_LEN {
        let text = format!("the entry has {} bytes, more than {MAX_LEN}", bytes.len());
        return (Err((0, Kind::TooLong, text)), asked);
    }
    let text = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut names = Vec::new();
    if text.is_empty() {
        return (Ok(names), asked);
    }
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        if names.len() == MAX_PROGRAMS {
            return (Err((number, Kind::TooMany, "more than 15 programs".to_owned())), asked);
        }
        if let Some(&b) = line.iter().find(|&&b| !(b == b' ' || b.is_ascii_graphic())) {
            let text = format!("byte 0x{b:02x} is not printable ASCII");
            return (Err((number, Kind::NotPrintable, text)), asked);
        }
        let line = String::from_utf8(line.to_vec()).expect("printable ASCII");
        let words: Vec<&str> = line.split(' ').collect();
        let name = words[0];
        if name.is_empty() || name.len() > NAME_LEN {
            return (Err((number, Kind::NoEntryName, "no entry name".to_owned())), asked);
        }
        asked.push(name.to_owned());
        if !bundle.contains(name) {
            let text = format!("the bundle has no program {name}");
            return (Err((number, Kind::NoProgram, text)), asked);
        }
        let mut seen = HashSet::new();
        for &word in &words[1..] {
            if !BUDGETS.contains(&word) {
                // Debug quoting: within printable ASCII only `"` and `\` are escaped.
                let quoted = word.replace('\\', "\\\\").replace('"', "\\\"");
                return (Err((number, Kind::UnknownBudget, format!("unknown budget \"{quoted}\""))), asked);
            }
            if !seen.insert(word) {
                return (Err((number, Kind::BudgetTwice, format!("budget {word} named twice"))), asked);
            }
        }
        names.push(name.to_owned());
    }
    (Ok(names), asked)
}

/// A program name: mostly one the bench's programs have, else made up.
fn name(d: &mut Decisions) -> String {
    if !d.bool() {
        return (*d.choose(&COMMON)).to_owned();
    }
    let len = 1 + d.below(NAME_LEN);
    (0..len)
        .map(|_| {
            // Now and then any printable byte but the space.
            let b = if d.u8() >= 0xf0 { 0x21 + d.below(94) as u8 } else { *d.choose(NAME_CHARS) };
            char::from(b)
        })
        .collect()
}

/// A well-formed line: a bundle program and up to three budgets, each once, in any order.
fn line(d: &mut Decisions, bundle: &[String]) -> Vec<u8> {
    let mut words = vec![d.choose(bundle).as_str()];
    let mut left = BUDGETS.to_vec();
    for _ in 0..d.below(4) {
        words.push(left.remove(d.below(left.len())));
    }
    words.join(" ").into_bytes()
}

/// Damage done to the joined bytes.
#[derive(Default)]
struct Later {
    /// Bits to flip: where (modulo the length) and which.
    flips: Vec<(usize, u8)>,
    /// A length to pad the entry to, with a long word at the end of its last line.
    pad_to: Option<usize>,
}

/// One change that may break the listing: to a line, to the lines, or to the joined bytes.
fn damage(d: &mut Decisions, lines: &mut Vec<Vec<u8>>, bundle: &mut Vec<String>, later: &mut Later) {
    if lines.is_empty() {
        lines.push(line(d, bundle));
    }
    let k = d.below(lines.len());
    let line_k = &mut lines[k];
    match d.below(11) {
        0 => {
            // A byte that is not printable (or, now and then, a newline).
            let b = *d.choose(&[0x00, 0x01, 0x09, 0x0d, 0x7f, 0x1b, 0x0a, 0x80, 0xc3, 0xff]);
            line_k.insert(d.below(line_k.len() + 1), b);
        }
        1 => {
            let word = *d.choose(&["admin", "ROOT", "Root", "user", "root,", "rootsystem", "systems", "\"q\\"]);
            line_k.push(b' ');
            line_k.extend_from_slice(word.as_bytes());
        }
        2 => {
            let budget = d.choose(&BUDGETS).as_bytes();
            for _ in 0..1 + usize::from(d.bool()) {
                line_k.push(b' ');
                line_k.extend_from_slice(budget);
            }
        }
        3 => {
            // A program the bundle most likely lacks, before the line's budgets.
            let mut other = name(d).into_bytes();
            if d.bool() {
                other.push(*d.choose(b"x2-"));
            }
            let rest = line_k.iter().position(|&b| b == b' ').unwrap_or(line_k.len());
            line_k.splice(..rest, other);
        }
        4 => {
            let want = MAX_PROGRAMS + 1 + d.below(3);
            while lines.len() < want {
                lines.push(line(d, bundle));
            }
        }
        5 => lines.insert(k, Vec::new()),
        6 => {
            // A name too long, which the bundle sometimes claims to hold anyway.
            let long: String = (0..NAME_LEN + 1 + d.below(8)).map(|_| char::from(*d.choose(NAME_CHARS))).collect();
            *line_k = long.clone().into_bytes();
            if d.bool() {
                bundle.push(long);
            }
        }
        7 => match d.below(4) {
            0 => line_k.insert(0, b' '),
            1 => line_k.push(b' '),
            2 => {
                let at = line_k.iter().position(|&b| b == b' ').unwrap_or(line_k.len());
                line_k.insert(at, b' ');
            }
            _ => line_k.iter_mut().filter(|b| **b == b' ').for_each(|b| *b = b'\t'),
        },
        8 => lines.push(d.choose(&["", "\r", " "]).as_bytes().to_vec()),
        9 => {
            // An entry near MAX_LEN, on either side, or anywhere up to twice it.
            let edge = if d.bool() { MAX_LEN / 2 + d.below(2 * MAX_LEN) } else { MAX_LEN - 2 + d.below(5) };
            later.pad_to = Some(edge);
        }
        _ => later.flips.push((d.below(usize::MAX), 1 << d.below(8))),
    }
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    let mut bundle: Vec<String> = (0..1 + d.below(6)).map(|_| name(d)).collect();
    let count = if d.u8() >= 0xf8 { 0 } else { 1 + d.below(MAX_PROGRAMS) };
    let mut lines: Vec<Vec<u8>> = (0..count).map(|_| line(d, &bundle)).collect();
    let mut later = Later::default();
    if d.u8() >= 0xc0 {
        for _ in 0..1 + d.below(3) {
            damage(d, &mut lines, &mut bundle, &mut later);
        }
    }
    let mut bytes = lines.join(&b'\n');
    let newline = !d.bool();
    if let Some(len) = later.pad_to {
        let word = len.saturating_sub(bytes.len() + usize::from(newline) + 1);
        if word > 0 {
            bytes.push(b' ');
            bytes.resize(bytes.len() + word, b'x');
        }
    }
    if newline {
        bytes.push(b'\n');
    }
    for (at, bit) in later.flips {
        if !bytes.is_empty() {
            let at = at % bytes.len();
            bytes[at] ^= bit;
        }
    }
    let bundle: HashSet<String> = bundle.into_iter().collect();

    let mut asked = Vec::new();
    let got = listing::parse(&bytes, |name| {
        asked.push(name.to_owned());
        bundle.contains(name)
    });
    let (want, want_asked) = oracle(&bytes, &bundle);
    // The entry in a finding: its start, and its length when cut.
    let shown = || {
        let cut = String::from_utf8_lossy(&bytes[..bytes.len().min(160)]).into_owned();
        if bytes.len() > 160 {
            format!("{cut:?}... ({} bytes)", bytes.len())
        } else {
            format!("{cut:?}")
        }
    };
    match (got, want) {
        (Ok(listing), Ok(names)) => {
            let got: Vec<&str> = listing.names().iter().map(|n| n.as_str()).collect();
            if got != names {
                return Err(Finding::oracle("accepted other names", format!("{got:?}, oracle {names:?}: {}", shown())));
            }
            if listing.names().iter().any(|n| n.as_bytes() != n.as_str().as_bytes()) {
                return Err(Finding::oracle("a name's bytes and text differ", format!("{got:?}")));
            }
            d.end(match names.len() {
                0 => "accepted: no programs",
                MAX_PROGRAMS => "accepted: 15 programs",
                _ => "accepted: 1 to 14 programs",
            });
        }
        (Ok(listing), Err((line, kind, text))) => {
            let got = listing.names().len();
            return Err(Finding::oracle(
                "accepted a listing the rules refuse",
                format!("{got} programs; oracle: line {line} {kind:?}: {text}: {}", shown()),
            ));
        }
        (Err(r), Ok(names)) => {
            return Err(Finding::oracle(
                "refused a listing the rules accept",
                format!("line {} {}; oracle: {names:?}: {}", r.line, r.why, shown()),
            ));
        }
        (Err(r), Err((line, kind, text))) => {
            if r.line != line || Kind::of(&r.why) != kind {
                return Err(Finding::oracle(
                    "refused for another line or reason",
                    format!("line {} {:?}; oracle: line {line} {kind:?}: {}", r.line, r.why, shown()),
                ));
            }
            if r.why.to_string() != text {
                return Err(Finding::oracle(
                    "refused with another text",
                    format!("{:?}, oracle {text:?}", r.why.to_string()),
                ));
            }
            d.end(kind.end());
        }
    }
    if asked != want_asked {
        return Err(Finding::oracle("asked the bundle about other names", format!("{asked:?}, oracle {want_asked:?}")));
    }
    Ok(())
}
