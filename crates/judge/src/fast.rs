//! The fast path: judges a block of whole lines by searching all of them at once.
//!
//! Each pattern is rewritten so that it can run over many lines joined by '\n'
//! ("line mode"): `\A` and `\z` become line anchors, and capture groups are dropped.
//! A match of the rewritten pattern in the joined text is only a *candidate*: the line
//! where it starts is then checked with the original pattern, exactly as the per-line
//! rules say. The rewrite is such that every line that matches the original pattern
//! has a match of the rewritten one starting in it (a line's edges look the same to
//! every assertion as a '\n' does), and the search always resumes at the line after a
//! candidate, so no line is missed: the search finds the leftmost match, and a true
//! match in a later line can only be preceded by candidates that are checked one by
//! one. False candidates (a pattern that can match across '\n') cost time only.

use regex_automata::meta;
use regex_syntax::hir::{Hir, HirKind, Look, Repetition};

/// The line-mode searchers for a [`Config`](crate::Config).
#[derive(Clone)]
pub(crate) struct Engine {
    /// All forbid and always-forbidden patterns at once; None when there are none.
    pub forbid: Option<Finder>,
    pub expects: Vec<Finder>,
    pub inputs: Vec<Finder>,
}

/// Literals at least this long make a prefilter; shorter ones would hit too often.
const MIN_LITERAL: usize = 3;

/// Finds candidate lines for a group of patterns: by literals that every match of some
/// of them must contain, and by a line-mode regex for the others.
#[derive(Clone)]
pub(crate) struct Finder {
    literals: Option<Literals>,
    regex: Option<meta::Regex>,
}

#[derive(Clone)]
enum Literals {
    One(Box<memchr::memmem::Finder<'static>>),
    Many(aho_corasick::AhoCorasick),
}

impl Literals {
    fn new(mut lits: Vec<Vec<u8>>) -> Option<Literals> {
        lits.sort();
        lits.dedup();
        if lits.len() == 1 {
            return Some(Literals::One(Box::new(memchr::memmem::Finder::new(&lits[0]).into_owned())));
        }
        // Leftmost-first: the packed (SIMD) searchers support it, and a hit is the
        // leftmost one, which is what the candidate search needs.
        aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(&lits)
            .ok()
            .map(Literals::Many)
    }

    fn find(&self, hay: &[u8]) -> Option<usize> {
        match self {
            Literals::One(f) => f.find(hay),
            Literals::Many(ac) => ac.find(hay).map(|m| m.start()),
        }
    }
}

/// A set of literals one of which every match of `h` contains, or None.
fn required(h: &Hir) -> Option<Vec<Vec<u8>>> {
    match h.kind() {
        HirKind::Literal(l) => Some(vec![l.0.to_vec()]),
        HirKind::Capture(c) => required(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub),
        HirKind::Concat(v) => v.iter().filter_map(required).max_by_key(|set| (shortest(set), usize::MAX - set.len())),
        HirKind::Alternation(v) => {
            let mut all = Vec::new();
            for sub in v {
                all.extend(required(sub)?);
            }
            Some(all)
        }
        _ => None,
    }
}

fn shortest(set: &[Vec<u8>]) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

impl Finder {
    fn new(hirs: Vec<Hir>) -> Option<Finder> {
        let mut lits = Vec::new();
        let mut rest = Vec::new();
        for h in hirs {
            match required(&h) {
                Some(set) if shortest(&set) >= MIN_LITERAL && set.len() <= 64 => lits.extend(set),
                _ => rest.push(h),
            }
        }
        let literals = if lits.is_empty() { None } else { Some(Literals::new(lits)?) };
        let regex = if rest.is_empty() { None } else { Some(build(&Hir::alternation(rest))?) };
        Some(Finder { literals, regex })
    }
}

/// Where a [`Finder`]'s two parts next hit, remembered between calls so that a part
/// that hits rarely is not searched again from every candidate of the other.
#[derive(Default)]
pub(crate) struct Scan {
    /// (searched from, hit or usize::MAX for none before the end)
    literal: Option<(usize, usize)>,
    regex: Option<(usize, usize)>,
}

impl Scan {
    /// The start of the line holding the first hit at or after `from` (a line start)
    /// and before `to`, and the end of that line.
    pub fn next(&mut self, f: &Finder, buf: &[u8], from: usize, to: usize) -> Option<(usize, usize)> {
        if from >= to || to > buf.len() {
            return None;
        }
        let mut best = usize::MAX;
        if let Some(lits) = &f.literals {
            let hit = match self.literal {
                Some((f0, hit)) if f0 <= from && hit >= from => hit,
                _ => {
                    let hit = lits.find(&buf[from..to]).map_or(usize::MAX, |p| from + p);
                    self.literal = Some((from, hit));
                    hit
                }
            };
            best = best.min(hit);
        }
        if let Some(re) = &f.regex {
            let hit = match self.regex {
                Some((f0, hit)) if f0 <= from && hit >= from => hit,
                _ => {
                    let input = regex_automata::Input::new(buf).range(from..to);
                    let hit = re.find(input).map_or(usize::MAX, |m| m.start());
                    self.regex = Some((from, hit));
                    hit
                }
            };
            best = best.min(hit);
        }
        if best >= to {
            return None;
        }
        Some((line_start(buf, best).max(from), line_end(buf, best)))
    }
}

/// Rewrites a pattern's syntax tree for line mode (see the module doc).
fn line_mode(h: Hir) -> Hir {
    match h.into_kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(l) => Hir::literal(l.0),
        HirKind::Class(c) => Hir::class(c),
        HirKind::Look(Look::Start) => Hir::look(Look::StartLF),
        HirKind::Look(Look::End) => Hir::look(Look::EndLF),
        HirKind::Look(l) => Hir::look(l),
        HirKind::Repetition(r) => Hir::repetition(Repetition { sub: Box::new(line_mode(*r.sub)), ..r }),
        HirKind::Capture(c) => line_mode(*c.sub),
        HirKind::Concat(v) => Hir::concat(v.into_iter().map(line_mode).collect()),
        HirKind::Alternation(v) => Hir::alternation(v.into_iter().map(line_mode).collect()),
    }
}

fn parse(re: &regex::Regex) -> Option<Hir> {
    // The same syntax options as `regex::Regex::new`.
    let hir = regex_syntax::ParserBuilder::new().build().parse(re.as_str()).ok()?;
    Some(line_mode(hir))
}

fn build(hir: &Hir) -> Option<meta::Regex> {
    meta::Regex::builder()
        .configure(meta::Regex::config().which_captures(regex_automata::nfa::thompson::WhichCaptures::Implicit))
        .build_from_hir(hir)
        .ok()
}

impl Engine {
    /// None when a pattern cannot be rewritten or built (the judge then uses the
    /// per-line path for everything, which is always right).
    pub fn new(cfg: &crate::Config) -> Option<Engine> {
        let forbid_hirs: Vec<Hir> =
            cfg.forbid.iter().chain(&cfg.always_forbidden).map(|p| parse(&p.regex)).collect::<Option<_>>()?;
        let forbid = if forbid_hirs.is_empty() { None } else { Some(Finder::new(forbid_hirs)?) };
        let one = |p: &crate::Pattern| Finder::new(vec![parse(&p.regex)?]);
        let expects = cfg.expect.iter().map(one).collect::<Option<_>>()?;
        let inputs = cfg.inputs.iter().map(|i| one(&i.after)).collect::<Option<_>>()?;
        Some(Engine { forbid, expects, inputs })
    }
}

/// The start of the line in `buf` that holds offset `p` (a line ends with '\n').
#[inline]
pub(crate) fn line_start(buf: &[u8], p: usize) -> usize {
    memchr::memrchr(b'\n', &buf[..p]).map_or(0, |i| i + 1)
}

/// The offset of the '\n' that ends the line holding offset `p`.
#[inline]
pub(crate) fn line_end(buf: &[u8], p: usize) -> usize {
    memchr::memchr(b'\n', &buf[p..]).map_or(buf.len(), |i| p + i)
}
