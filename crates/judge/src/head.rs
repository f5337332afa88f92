//! The patterns as an over-long line's head sees them.
//!
//! The head (a line's first [`LINE_LIMIT`](crate::LINE_LIMIT) bytes, judged when the
//! line grows past them) is not the line's end: more of the line follows it. So an
//! end-of-text anchor (`$`, `\z`, and `(?m)$`, which within one line matches only at its
//! end) must not match at the cut. Each pattern with such an anchor is rewritten with
//! the anchor made a class that matches nothing; the rest of the pattern is left as it
//! is, capture groups included. A pattern without one is its own head pattern.

use regex::Regex;
use regex_syntax::hir::{Capture, Hir, HirKind, Look, Repetition};

/// The rules that judge an over-long line's head (forbids judge every piece as a line,
/// which can only fail more).
#[derive(Clone, Copy)]
pub(crate) enum HeadRule {
    Expect,
    ExpectAfter,
    Input,
    Trigger,
    Distinct,
    Capture,
}

/// Each head rule's patterns as a head sees them, index for index with the config's.
#[derive(Clone)]
pub(crate) struct Heads {
    expect: Vec<Regex>,
    expect_after: Vec<Regex>,
    inputs: Vec<Regex>,
    triggers: Vec<Regex>,
    distinct: Vec<Regex>,
    capture: Vec<Regex>,
}

/// Each head rule's patterns as the judge's configuration has them, index for index (the
/// judge gives them; this module knows no configuration).
pub(crate) struct Sources<'a> {
    pub expect: Vec<&'a Regex>,
    pub expect_after: Vec<&'a Regex>,
    pub inputs: Vec<&'a Regex>,
    pub triggers: Vec<&'a Regex>,
    pub distinct: Vec<&'a Regex>,
    pub capture: Vec<&'a Regex>,
}

impl Heads {
    pub(crate) fn new(sources: &Sources) -> Heads {
        let all = |patterns: &[&Regex]| patterns.iter().map(|re| open_ended(re)).collect();
        Heads {
            expect: all(&sources.expect),
            expect_after: all(&sources.expect_after),
            inputs: all(&sources.inputs),
            triggers: all(&sources.triggers),
            distinct: all(&sources.distinct),
            capture: all(&sources.capture),
        }
    }

    pub(crate) fn get(&self, rule: HeadRule, index: usize) -> &Regex {
        let list = match rule {
            HeadRule::Expect => &self.expect,
            HeadRule::ExpectAfter => &self.expect_after,
            HeadRule::Input => &self.inputs,
            HeadRule::Trigger => &self.triggers,
            HeadRule::Distinct => &self.distinct,
            HeadRule::Capture => &self.capture,
        };
        &list[index]
    }
}

/// `re` as a head sees it. When the rewritten pattern cannot be built (or its capture
/// groups would not be the original's), a pattern that never matches is given: the head
/// then takes nothing for that rule, which can fail a boot, never pass one.
pub(crate) fn open_ended(re: &Regex) -> Regex {
    let Ok(hir) = regex_syntax::ParserBuilder::new().build().parse(re.as_str()) else {
        return never();
    };
    if !has_end(&hir) {
        return re.clone();
    }
    match Regex::new(&open(&hir).to_string()) {
        Ok(open) if open.captures_len() == re.captures_len() && open.capture_names().eq(re.capture_names()) => open,
        _ => never(),
    }
}

/// A pattern that matches nothing.
fn never() -> Regex {
    Regex::new(&Hir::fail().to_string()).expect("the empty class is a valid pattern")
}

fn is_end(look: Look) -> bool {
    matches!(look, Look::End | Look::EndLF | Look::EndCRLF)
}

fn has_end(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Look(look) => is_end(*look),
        HirKind::Repetition(r) => has_end(&r.sub),
        HirKind::Capture(c) => has_end(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_end),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
    }
}

/// `h` with every end anchor made a class that matches nothing.
fn open(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Look(look) if is_end(*look) => Hir::fail(),
        HirKind::Repetition(r) => Hir::repetition(Repetition { sub: Box::new(open(&r.sub)), ..r.clone() }),
        HirKind::Capture(c) => Hir::capture(Capture { sub: Box::new(open(&c.sub)), ..c.clone() }),
        HirKind::Concat(v) => Hir::concat(v.iter().map(open).collect()),
        HirKind::Alternation(v) => Hir::alternation(v.iter().map(open).collect()),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => h.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pattern: &str) -> Regex {
        open_ended(&Regex::new(pattern).unwrap())
    }

    #[test]
    fn an_end_anchor_never_matches_at_the_cut_and_the_rest_still_does() {
        for pattern in ["a$", r"a\z", "(?m)a$", "(a+)+$", "x|a$", "(?:a$)?b", r"(?i)A\w*$", r"\ba(?-u:\b)$", "[^x]$"] {
            let re = head(pattern);
            assert!(!re.is_match("aaaa"), "{pattern} -> {re}");
        }
        // The rest of a pattern with an anchor still matches what does not need it.
        assert!(head("x|a$").is_match("..x.."));
        assert!(head("(?:a$)?b").is_match("b"));
        assert!(head("^boot").is_match("boot and more"));
        assert!(head(r"(?i)ÉTÉ|z$").is_match("un été"), "Unicode and case folding survive the rewrite");
        assert_eq!(head("^boot").as_str(), "^boot", "a pattern without an end anchor is its own");
    }

    #[test]
    fn capture_groups_keep_their_numbers_and_names() {
        let re = head(r"(?P<word>\w+) (x$|(\d+))");
        assert_eq!(re.captures_len(), 4);
        let caps = re.captures("abc 42").unwrap();
        assert_eq!((&caps["word"], &caps[3]), ("abc", "42"));
    }
}
