//! What the engine keeps of a session's output, each part bounded: the unmatched
//! output an `expect` searches, each stream's current line for the `forbid` patterns,
//! and the last bytes for messages.

use crate::pattern::{Matcher, Pattern};

/// The most unmatched output kept for `expect`. Past it the oldest output is dropped,
/// keeping the newest half ([`UNMATCHED_KEEP`]), so the search does not start over on
/// every new byte.
pub const UNMATCHED_LIMIT: usize = 1 << 20;
/// What is kept of the unmatched output when it passes [`UNMATCHED_LIMIT`].
pub const UNMATCHED_KEEP: usize = UNMATCHED_LIMIT / 2;
/// The most of one line kept for quoting a forbidden match (and for the slow path).
/// Matching itself sees every byte of the line however long it is.
pub const LINE_KEEP: usize = 64 << 10;
/// How much of the session's last output messages quote from.
const LAST_KEEP: usize = 4 << 10;

/// A match of an `expect`: its text and its groups (index 0 the whole match).
pub(crate) struct Found {
    pub text: Vec<u8>,
    pub groups: Vec<Option<Vec<u8>>>,
}

/// The output received since the end of the previous match, and the current `expect`'s
/// matcher over it.
pub(crate) struct Unmatched {
    buf: Vec<u8>,
    /// Where the unmatched output starts in `buf`: 0 at the output's start, or 1 after a
    /// match or a cut (`buf[0]` is then the byte before it, so `^` matches there only
    /// after a line end).
    begin: usize,
    matcher: Option<Matcher>,
    /// Bytes dropped since the last match (or the start).
    pub dropped: u64,
    /// The most `buf` ever held.
    pub peak: usize,
}

impl Unmatched {
    pub(crate) fn new() -> Unmatched {
        Unmatched { buf: Vec::new(), begin: 0, matcher: None, dropped: 0, peak: 0 }
    }

    /// Output arrived. Returns how many bytes the bound dropped now.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> u64 {
        self.buf.extend_from_slice(bytes);
        self.peak = self.peak.max(self.buf.len());
        let mut cut = 0;
        if self.buf.len() - self.begin > UNMATCHED_LIMIT {
            let keep_from = self.buf.len() - UNMATCHED_KEEP;
            cut = (keep_from - self.begin) as u64;
            self.dropped += cut;
            self.buf.drain(..keep_from - 1);
            self.begin = 1;
            if let Some(m) = self.matcher.as_mut() {
                m.restart(Some(self.buf[0]));
                m.feed(&self.buf[1..]);
            }
        } else if let Some(m) = self.matcher.as_mut() {
            m.feed(bytes);
        }
        cut
    }

    /// Start looking for `pattern` in what is kept and in what comes.
    pub(crate) fn begin_expect(&mut self, pattern: &Pattern) {
        let mut m = Matcher::new(pattern);
        m.restart(self.look_behind());
        m.feed(&self.buf[self.begin..]);
        self.matcher = Some(m);
    }

    fn look_behind(&self) -> Option<u8> {
        if self.begin == 0 {
            None
        } else {
            Some(self.buf[0])
        }
    }

    /// The current pattern's match in the output so far, if there is one; the output up
    /// to its end is then consumed.
    pub(crate) fn check(&mut self) -> Option<Found> {
        let m = self.matcher.as_mut()?;
        if !m.at_end() {
            return None;
        }
        let spans = m.pattern().captures(&self.buf, self.begin..self.buf.len())?;
        let (start, end) = spans[0]?;
        let groups = spans.iter().map(|g| g.map(|(s, e)| self.buf[s..e].to_vec())).collect();
        let text = self.buf[start..end].to_vec();
        // The match's last byte stays as the byte before the unmatched output, so that
        // the next expect's `^` matches at a line's start, not where this match ended.
        if end > 0 {
            self.buf.drain(..end - 1);
            self.begin = 1;
        }
        self.matcher = None;
        self.dropped = 0;
        Some(Found { text, groups })
    }

    /// Stop looking (the step ended without a match).
    pub(crate) fn end_expect(&mut self) {
        self.matcher = None;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.begin
    }
}

/// One `forbid` pattern over one stream's lines. A line ends at '\n'; one '\r' before
/// it is not part of it. A match is found as soon as the bytes after it arrive (the
/// pattern's look-ahead), or at the end of its line, or at the end of the stream.
pub(crate) struct LineCheck {
    matcher: Matcher,
    /// The line's last bytes (at most 2 × [`LINE_KEEP`]), for quoting.
    line: Vec<u8>,
    /// Bytes of the current line no longer in `line`.
    line_cut: u64,
    /// A '\r' held back: it is part of the line only if no '\n' follows.
    cr: bool,
    pub peak: usize,
}

impl LineCheck {
    pub(crate) fn new(pattern: &Pattern) -> LineCheck {
        LineCheck { matcher: Matcher::new(pattern), line: Vec::new(), line_cut: 0, cr: false, peak: 0 }
    }

    /// Output arrived on this check's stream: the forbidden text quoted, if it matched.
    pub(crate) fn push(&mut self, mut data: &[u8]) -> Option<String> {
        while !data.is_empty() {
            match memchr::memchr(b'\n', data) {
                Some(i) => {
                    self.extend(&data[..i]);
                    self.cr = false;
                    if let Some(quote) = self.end_line() {
                        return Some(quote);
                    }
                    data = &data[i + 1..];
                }
                None => {
                    self.extend(data);
                    return self.mid_line();
                }
            }
        }
        None
    }

    /// The stream ended: its last line, if it had no '\n', is a line too.
    pub(crate) fn finish(&mut self) -> Option<String> {
        self.cr = false;
        if self.line.is_empty() && self.line_cut == 0 {
            return None;
        }
        self.end_line()
    }

    fn extend(&mut self, mut segment: &[u8]) {
        if self.cr && !segment.is_empty() {
            self.cr = false;
            self.add(b"\r");
        }
        if let Some(rest) = segment.strip_suffix(b"\r") {
            self.cr = true;
            segment = rest;
        }
        self.add(segment);
    }

    fn add(&mut self, bytes: &[u8]) {
        self.matcher.feed(bytes);
        self.line.extend_from_slice(bytes);
        if self.line.len() > 2 * LINE_KEEP {
            let cut = self.line.len() - LINE_KEEP;
            self.line.drain(..cut);
            self.line_cut += cut as u64;
        }
        self.peak = self.peak.max(self.line.len());
    }

    fn mid_line(&mut self) -> Option<String> {
        let found = if self.matcher.fallback() {
            // The regex over the kept line, the last byte as look-ahead only.
            let len = self.line.len();
            len > 0
                && self
                    .matcher
                    .pattern()
                    .captures(&self.line, 0..len - 1)
                    .is_some_and(|g| g[0].is_some_and(|(_, e)| e < len))
        } else {
            self.matcher.seen()
        };
        found.then(|| self.quote(false))
    }

    fn end_line(&mut self) -> Option<String> {
        let found = if self.matcher.fallback() {
            self.matcher.pattern().captures(&self.line, 0..self.line.len()).is_some()
        } else {
            self.matcher.at_end()
        };
        let quote = found.then(|| self.quote(true));
        self.line.clear();
        self.line_cut = 0;
        self.matcher.restart(None);
        quote
    }

    /// The match in the kept line with some of the line around it, escaped.
    fn quote(&self, line_ended: bool) -> String {
        let end = if line_ended { self.line.len() } else { self.line.len().saturating_sub(1) };
        let span = self.matcher.pattern().captures(&self.line, 0..end).and_then(|g| g[0]);
        match span {
            Some((s, e)) => {
                let from = s.saturating_sub(60);
                let to = (e + 60).min(self.line.len());
                let mut text = String::new();
                if from > 0 || self.line_cut > 0 {
                    text.push_str("...");
                }
                text.push_str(&escape(&self.line[from..to]));
                if to < self.line.len() {
                    text.push_str("...");
                }
                text
            }
            // The match began before the kept part of a very long line.
            None => format!("...{}", escape(&self.line[self.line.len().saturating_sub(120)..])),
        }
    }
}

/// The session's last output (both streams as they arrived), for messages.
pub(crate) struct Last {
    buf: Vec<u8>,
}

impl Last {
    pub(crate) fn new() -> Last {
        Last { buf: Vec::new() }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(LAST_KEEP)..];
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > 2 * LAST_KEEP {
            self.buf.drain(..self.buf.len() - LAST_KEEP);
        }
    }

    /// The last output, escaped and quoted from its end: `'...'`, or `no output`.
    pub(crate) fn quoted(&self) -> String {
        if self.buf.is_empty() {
            return "no output".to_string();
        }
        let text = escape(&self.buf);
        let len = text.len();
        format!("last output: '{}'", testbench_judge::quote_around(&text, len..len, testbench_judge::QUOTE_LIMIT))
    }
}

/// Bytes as text for a message or a note: lossy UTF-8, with line ends, tabs and other
/// control characters written as escapes (`\n`, `\r`, `\t`, `\x1b`).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbid(pattern: &str, pieces: &[&[u8]]) -> Option<String> {
        let mut check = LineCheck::new(&Pattern::new(pattern).unwrap());
        for piece in pieces {
            if let Some(q) = check.push(piece) {
                return Some(q);
            }
        }
        check.finish()
    }

    #[test]
    fn a_forbidden_word_split_across_writes_is_found() {
        assert_eq!(forbid("secret", &[b"the sec", b"ret is out\n"]).as_deref(), Some("the secret is out"));
        assert_eq!(forbid("secret", &[b"sec", b"ret"]).as_deref(), Some("secret"));
        assert_eq!(forbid("secret", &[b"sec\n", b"ret\n"]), None);
    }

    #[test]
    fn line_anchors_hold_and_one_cr_before_a_newline_is_dropped() {
        assert!(forbid("^root$", &[b"x\nroo", b"t\r", b"\nz"]).is_some());
        assert!(forbid("^root$", &[b"xroot\n"]).is_none());
        // `$` is not taken at the end of a piece: the line goes on.
        assert!(forbid("secret$", &[b"secret", b"ive\n"]).is_none());
        assert!(forbid("a\rb", &[b"a\r", b"b\n"]).is_some());
        // A lone '\r' ends a line for the anchors, as in an expect.
        assert!(forbid("^b$", &[b"a\rb\n"]).is_some());
        assert!(forbid("^a$", &[b"a\rb\n"]).is_some());
    }

    #[test]
    fn a_long_line_is_matched_whole_but_kept_bounded() {
        let mut check = LineCheck::new(&Pattern::new("needle").unwrap());
        let hay = vec![b'x'; 1 << 20];
        for _ in 0..8 {
            assert_eq!(check.push(&hay), None);
        }
        assert_eq!(check.push(b"nee"), None);
        // Found with the byte after it, its look-ahead.
        let quote = check.push(b"dle ").unwrap();
        assert!(quote.starts_with("...") && quote.ends_with("needle "), "{quote}");
        assert!(check.peak <= 2 * LINE_KEEP + (1 << 20));
    }

    #[test]
    fn unmatched_output_is_bounded_and_matches_after_a_cut() {
        let mut u = Unmatched::new();
        u.begin_expect(&Pattern::new("^x|end (\\d+)").unwrap());
        let chunk = vec![b'x'; 64 << 10];
        // `^x` matched at the very start.
        u.push(&chunk);
        assert_eq!(u.check().unwrap().text, b"x");
        u.begin_expect(&Pattern::new("^y|end (\\d+)").unwrap());
        for _ in 0..40 {
            u.push(&chunk);
            assert!(u.check().is_none());
            assert!(u.len() <= UNMATCHED_LIMIT);
        }
        assert!(u.dropped > 0);
        u.push(b"the end 42");
        let found = u.check().unwrap();
        assert_eq!(found.groups[1].as_deref(), Some(&b"42"[..]));
        assert_eq!(u.len(), 0);
        assert!(u.peak <= UNMATCHED_LIMIT + (64 << 10) + 1);
    }

    /// After a match, the next expect's `^` still means a line's start: not where the
    /// match ended mid-line, but after its line's end.
    #[test]
    fn caret_after_a_match_is_still_a_lines_start() {
        let mut u = Unmatched::new();
        u.begin_expect(&Pattern::new("id ").unwrap());
        u.push(b"id 42\n42 ok\n");
        assert_eq!(u.check().unwrap().text, b"id ");
        u.begin_expect(&Pattern::new("^42.*").unwrap());
        assert_eq!(u.check().unwrap().text, b"42 ok");
        // A match that ends its line: the next line starts a line.
        u.begin_expect(&Pattern::new("^x$").unwrap());
        u.push(b"x\r\n");
        assert_eq!(u.check().unwrap().text, b"x");
        u.begin_expect(&Pattern::new("^y").unwrap());
        u.push(b"\r\ny");
        assert_eq!(u.check().unwrap().text, b"y");
    }

    #[test]
    fn escapes_are_readable() {
        assert_eq!(escape(b"a\r\n\x1b[0m\t\\"), "a\\r\\n\\x1b[0m\\t\\\\");
        assert_eq!(escape(b"\xff"), "\u{fffd}");
    }
}
