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
pub(crate) struct Engine {
    /// All forbid and always-forbidden patterns as one alternation; None when there are none.
    pub forbid: Option<meta::Regex>,
    pub expects: Vec<meta::Regex>,
    pub inputs: Vec<meta::Regex>,
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
        let forbid = if forbid_hirs.is_empty() { None } else { Some(build(&Hir::alternation(forbid_hirs))?) };
        let one = |p: &crate::Pattern| build(&parse(&p.regex)?);
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

/// The leftmost match of `re` in `buf[from..to]` (seeing the whole of `buf` for
/// assertions), as the start of the line it starts in, and the end of that line.
#[inline]
pub(crate) fn candidate(re: &meta::Regex, buf: &[u8], from: usize, to: usize) -> Option<(usize, usize)> {
    if from >= to || to > buf.len() {
        return None;
    }
    let m = re.find(regex_automata::Input::new(buf).range(from..to))?;
    if m.start() >= to {
        return None;
    }
    Some((line_start(buf, m.start()).max(from), line_end(buf, m.start())))
}
