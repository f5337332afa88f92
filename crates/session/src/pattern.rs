//! Patterns over bytes, and the incremental matcher that looks at each byte once.
//!
//! A [`Pattern`] is compiled twice from its source: a regex (regex-automata's `meta`,
//! configured as `regex::bytes::Regex` is: leftmost-first, any bytes, not only UTF-8),
//! which finds matches and their groups, and a lazy DFA of the same pattern, which a
//! [`Matcher`] steps byte by byte as output arrives. The DFA only says *whether* the
//! text seen so far holds a match; the regex, run once on that text, says where and
//! with which groups. So a session's output is read once however many small pieces it
//! comes in, and the answer is the regex's own.
//!
//! The DFA cannot always answer: a Unicode word boundary (`\b` in Unicode mode) on a
//! non-ASCII byte, a pattern too large for it, or its cache cleared while a state was
//! kept. Then the matcher falls back to running the regex over the kept text each time
//! it is asked, which gives the same answers more slowly.

use std::sync::Arc;

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::util::start;
use regex_automata::util::syntax;
use regex_automata::{meta, nfa::thompson, Anchored, Input};

/// A pattern over a session's output: its source (for messages) and its compiled forms.
#[derive(Clone, Debug)]
pub struct Pattern {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    source: String,
    regex: meta::Regex,
    dfa: Option<DFA>,
}

/// A pattern that does not compile ([`Pattern::new`]): its source and the regex's error.
#[derive(Debug, thiserror::Error)]
#[error("pattern '{pattern}': {error}")]
pub struct PatternError {
    pub pattern: String,
    #[source]
    pub error: Box<meta::BuildError>,
}

/// The most memory one compiled pattern (its NFA) may take.
const NFA_LIMIT: usize = 10 << 20;

impl Pattern {
    /// Compile `source` (regex syntax, as the `regex` crate takes it). The pattern
    /// matches bytes: `.` matches one UTF-8 encoded character, `(?-u:.)` any byte.
    ///
    /// `^` and `$` are line anchors, as a person reads them and as a console `expect`
    /// has them: multi-line and CRLF mode (`(?Rm)`) are on, so `^` matches at the
    /// text's start and after each line end, `$` before each line end and at the
    /// text's end, a line end being `\n`, `\r\n` (a terminal's, never split by an
    /// anchor) or a lone `\r`. `\A` and `\z` anchor at the text's start and end only;
    /// `(?-m)` in the pattern turns line anchors off.
    pub fn new(source: &str) -> Result<Pattern, PatternError> {
        let syntax = syntax::Config::new().utf8(false).multi_line(true).crlf(true);
        let regex = meta::Regex::builder()
            .syntax(syntax)
            .configure(
                meta::Config::new()
                    .match_kind(regex_automata::MatchKind::LeftmostFirst)
                    .utf8_empty(false)
                    .nfa_size_limit(Some(NFA_LIMIT)),
            )
            .build(source)
            .map_err(|error| PatternError { pattern: source.to_string(), error: Box::new(error) })?;
        // Without a DFA the matcher falls back to the regex: slower, same answers.
        let dfa = DFA::builder()
            .syntax(syntax)
            .thompson(thompson::Config::new().utf8(false).nfa_size_limit(Some(NFA_LIMIT)))
            .configure(DFA::config().unicode_word_boundary(true))
            .build(source)
            .ok();
        Ok(Pattern { inner: Arc::new(Inner { source: source.to_string(), regex, dfa }) })
    }

    /// The source text the pattern was compiled from.
    pub fn as_str(&self) -> &str {
        &self.inner.source
    }

    /// How many capture groups the pattern has, not counting the whole match.
    pub fn groups(&self) -> usize {
        self.inner.regex.group_info().group_len(regex_automata::PatternID::ZERO).saturating_sub(1)
    }

    /// The first match in `haystack[range]` (look-around sees the bytes outside the
    /// range), with every group's span: index 0 the whole match.
    pub(crate) fn captures(
        &self,
        haystack: &[u8],
        range: std::ops::Range<usize>,
    ) -> Option<Vec<Option<(usize, usize)>>> {
        let regex = &self.inner.regex;
        let mut caps = regex.create_captures();
        regex.search_captures(&Input::new(haystack).range(range), &mut caps);
        if !caps.is_match() {
            return None;
        }
        Some((0..caps.group_len()).map(|i| caps.get_group(i).map(|s| (s.start, s.end))).collect())
    }

    #[cfg(test)]
    pub(crate) fn has_dfa(&self) -> bool {
        self.inner.dfa.is_some()
    }
}

/// Steps a pattern's DFA over a text that grows at its end, from a start the caller
/// sets. Asked "is there a match yet?", it answers for the whole text so far, at the
/// cost of the bytes added since the last question.
pub(crate) struct Matcher {
    pattern: Pattern,
    cache: Option<Cache>,
    sid: Option<LazyStateID>,
    /// A match state was entered: a match ends before the last byte fed.
    seen: bool,
    /// No match can come however the text grows.
    dead: bool,
    /// The DFA gave up: the caller must run the regex itself.
    fallback: bool,
}

impl Matcher {
    pub(crate) fn new(pattern: &Pattern) -> Matcher {
        let cache = pattern.inner.dfa.as_ref().map(DFA::create_cache);
        let mut m = Matcher { pattern: pattern.clone(), cache, sid: None, seen: false, dead: false, fallback: false };
        m.restart(None);
        m
    }

    pub(crate) fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// Start over on a new text whose byte before its start is `look_behind` (`None`:
    /// the text starts there, and `^` matches).
    pub(crate) fn restart(&mut self, look_behind: Option<u8>) {
        self.seen = false;
        self.dead = false;
        self.sid = None;
        self.fallback = true;
        if let (Some(dfa), Some(cache)) = (self.pattern.inner.dfa.as_ref(), self.cache.as_mut()) {
            let config = start::Config::new().anchored(Anchored::No).look_behind(look_behind);
            if let Ok(sid) = dfa.start_state(cache, &config) {
                self.sid = Some(sid);
                self.fallback = false;
            }
        }
    }

    /// The text grew by `bytes`.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.fallback || self.seen || self.dead {
            return;
        }
        let (Some(dfa), Some(cache), Some(mut sid)) = (self.pattern.inner.dfa.as_ref(), self.cache.as_mut(), self.sid)
        else {
            self.fallback = true;
            return;
        };
        for &byte in bytes {
            sid = match dfa.next_state(cache, sid, byte) {
                Ok(next) => next,
                Err(_) => {
                    self.fallback = true;
                    return;
                }
            };
            if sid.is_tagged() {
                if sid.is_match() {
                    self.seen = true;
                    break;
                }
                if sid.is_dead() {
                    self.dead = true;
                    break;
                }
                if sid.is_quit() {
                    self.fallback = true;
                    return;
                }
            }
        }
        self.sid = Some(sid);
    }

    /// Whether the caller must run the regex itself to know.
    pub(crate) fn fallback(&self) -> bool {
        self.fallback
    }

    /// A match ends before the last byte fed (the DFA sees a match one byte late, with
    /// that byte as its look-ahead): it stands however the text goes on.
    pub(crate) fn seen(&self) -> bool {
        self.seen
    }

    /// Whether the text so far, taken as ending here, holds a match. `true` in fallback
    /// (the caller runs the regex to know).
    pub(crate) fn at_end(&mut self) -> bool {
        if self.fallback || self.seen {
            return true;
        }
        if self.dead {
            return false;
        }
        let (Some(dfa), Some(cache), Some(sid)) = (self.pattern.inner.dfa.as_ref(), self.cache.as_mut(), self.sid)
        else {
            return true;
        };
        let clears = cache.clear_count();
        let answer = match dfa.next_eoi_state(cache, sid) {
            Ok(eoi) => eoi.is_match(),
            Err(_) => {
                self.fallback = true;
                return true;
            }
        };
        // A cleared cache forgets the state kept for the next feed: go on with the regex.
        if cache.clear_count() != clears {
            self.fallback = true;
            return true;
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `text` in pieces of `step` bytes; answer as the matcher would at the end.
    fn matches_in_pieces(pattern: &Pattern, text: &[u8], step: usize) -> bool {
        let mut m = Matcher::new(pattern);
        for piece in text.chunks(step.max(1)) {
            m.feed(piece);
        }
        if m.at_end() && !m.fallback() {
            return true;
        }
        m.fallback() && pattern.captures(text, 0..text.len()).is_some()
    }

    #[test]
    fn the_matcher_agrees_with_the_regex_however_the_text_is_cut() {
        let cases: &[(&str, &[&str])] = &[
            (r"\$ $", &["$ ", "a$ b", "$", "x\n$ ", "$ \n"]),
            (r"id ([0-9a-f]+)", &["id 4f", "id ", "the id 9 is", "idd 4"]),
            (r"^login: ", &["login: ", "xlogin: ", "login:"]),
            (r"(?m)^ok$", &["a\nok\nb", "nok", "ok"]),
            (r"secret\b", &["secret", "secrets", "secret!", "é secret é"]),
            (r"", &["", "abc"]),
            (r"(?-u:\xff)x", &["\u{ff}x"]),
        ];
        for (source, texts) in cases {
            let pattern = Pattern::new(source).unwrap();
            for text in *texts {
                let truth = pattern.captures(text.as_bytes(), 0..text.len()).is_some();
                for step in 1..=text.len().max(1) {
                    assert_eq!(
                        matches_in_pieces(&pattern, text.as_bytes(), step),
                        truth,
                        "{source} on {text:?} by {step}"
                    );
                }
            }
        }
        // Bytes that are not UTF-8 are text like any other.
        let pattern = Pattern::new(r"(?-u:\xff)x").unwrap();
        assert!(matches_in_pieces(&pattern, b"\xffx", 1));
    }

    /// `^` and `$` anchor at every line's start and end, a line ending at `\n`, `\r\n`
    /// or a lone `\r`; the DFA fed in pieces says what the regex says.
    #[test]
    fn line_anchors_match_at_each_lines_start_and_end() {
        let pattern = Pattern::new("^hidden-42$").unwrap();
        // Line anchors keep the lazy DFA: each byte stepped once, no fallback.
        assert!(pattern.has_dfa());
        let mut m = Matcher::new(&pattern);
        m.feed(b"boot\r\nhidden-42\r\n");
        assert!(m.seen() && !m.fallback());
        let yes: &[&str] = &[
            "hidden-42\nriscv64\n",
            "boot\nhidden-42\nriscv64\n",
            "boot\r\nhidden-42\r\nriscv64\r\n",
            "boot\nhidden-42",
            "progress\rhidden-42\r\n",
        ];
        let no: &[&str] = &["xhidden-42\n", "hidden-421\n", "boot\nhidden-42 \r\n", "hidden-4\n2"];
        for (texts, want) in [(yes, true), (no, false)] {
            for text in texts {
                let found = pattern.captures(text.as_bytes(), 0..text.len());
                assert_eq!(found.is_some(), want, "{text:?}");
                if let Some(spans) = found {
                    let (s, e) = spans[0].unwrap();
                    assert_eq!(&text[s..e], "hidden-42", "{text:?}");
                }
                for step in 1..=text.len() {
                    assert_eq!(matches_in_pieces(&pattern, text.as_bytes(), step), want, "{text:?} by {step}");
                }
            }
        }
        // `^` is never between the `\r` and the `\n` of one line end, nor `$`.
        assert!(Pattern::new("^\n").unwrap().captures(b"a\r\n", 1..3).is_none());
        assert!(Pattern::new("\r$").unwrap().captures(b"a\r\n", 0..3).is_none());
        // `\A` and `\z` still anchor at the text's start and end.
        assert!(Pattern::new(r"\Aok").unwrap().captures(b"x\nok", 0..4).is_none());
        assert!(Pattern::new(r"ok\z").unwrap().captures(b"ok\nx", 0..4).is_none());
    }

    #[test]
    fn look_behind_keeps_caret_from_matching_mid_text() {
        let pattern = Pattern::new("^b").unwrap();
        let mut m = Matcher::new(&pattern);
        m.restart(Some(b'a'));
        m.feed(b"b");
        assert!(!m.at_end());
        assert!(pattern.captures(b"ab", 1..2).is_none());
        m.restart(None);
        m.feed(b"b");
        assert!(m.at_end());
    }

    #[test]
    fn unicode_word_boundaries_fall_back_on_non_ascii() {
        let pattern = Pattern::new(r"\bmot\b").unwrap();
        assert!(pattern.has_dfa());
        let mut m = Matcher::new(&pattern);
        m.feed("é mot".as_bytes());
        assert!(m.fallback());
        assert!(pattern.captures("é mot".as_bytes(), 0..6).is_some());
    }

    #[test]
    fn groups_are_counted_without_the_whole_match() {
        assert_eq!(Pattern::new("a(b)(c)?").unwrap().groups(), 2);
        assert_eq!(Pattern::new("abc").unwrap().groups(), 0);
        let refused = Pattern::new("(").unwrap_err();
        assert_eq!(refused.pattern, "(");
        assert!(refused.error.syntax_error().is_some(), "{refused}");
        assert_eq!(refused.to_string(), "pattern '(': error parsing pattern 0");
    }
}
