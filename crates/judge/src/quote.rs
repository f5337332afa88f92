//! Quoting console text in a message: at most a few hundred bytes, and a marker that
//! says what was cut.

use std::borrow::Cow;
use std::ops::Range;

/// How many bytes of one console line a verdict, a report line, JSON or JUnit quotes.
pub const QUOTE_LIMIT: usize = 240;

/// `text` as it is when it is at most [`QUOTE_LIMIT`] bytes; else its start, cut at a
/// character boundary, and a marker with how many bytes were cut: `start [... 123 bytes cut]`.
pub fn quote(text: &str) -> Cow<'_, str> {
    quote_with(text, QUOTE_LIMIT)
}

/// As [`quote`], with another limit (in bytes of `text` kept; the marker is extra).
pub fn quote_with(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let end = floor_boundary(text, limit);
    if end == 0 {
        return Cow::Owned(marker(text.len()));
    }
    Cow::Owned(format!("{} {}", &text[..end], marker(text.len() - end)))
}

/// At most `limit` bytes of `text` around the bytes `at` (a match, say), with a marker
/// on each side that was cut: `[... 100 bytes cut] around it [... 20 bytes cut]`. The
/// window starts at `at.start` when `at` is longer than `limit`.
pub fn quote_around(text: &str, at: Range<usize>, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let at_start = floor_boundary(text, at.start.min(text.len()));
    let at_end = at.end.clamp(at_start, text.len());
    let slack = limit.saturating_sub(at_end - at_start);
    let mut start = at_start.saturating_sub(slack / 2);
    let end = (start + limit).min(text.len());
    start = start.min(end.saturating_sub(limit));
    // Whole characters only: the window may shrink by up to three bytes on each side.
    let start = ceil_boundary(text, start);
    let end = floor_boundary(text, end).max(start);
    let mut out = String::with_capacity(end - start + 64);
    if start > 0 {
        out.push_str(&marker(start));
        out.push(' ');
    }
    out.push_str(&text[start..end]);
    if end < text.len() {
        out.push(' ');
        out.push_str(&marker(text.len() - end));
    }
    Cow::Owned(out)
}

fn marker(cut: usize) -> String {
    format!("[... {cut} bytes cut]")
}

/// The largest character boundary at or before `i`.
fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest character boundary at or after `i`.
fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole() {
        assert!(matches!(quote("hello"), Cow::Borrowed("hello")));
        let exact = "x".repeat(QUOTE_LIMIT);
        assert_eq!(quote(&exact), exact.as_str());
    }

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let long = "a".repeat(1 << 20);
        let q = quote(&long);
        assert_eq!(q, format!("{} [... {} bytes cut]", "a".repeat(QUOTE_LIMIT), (1 << 20) - QUOTE_LIMIT));
        assert!(q.len() < QUOTE_LIMIT + 40);
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "é".repeat(1000); // two bytes each
        let q = quote_with(&text, 7);
        assert_eq!(q, format!("ééé [... {} bytes cut]", 2000 - 6));
        let q = quote_around(&text, 1001..1003, 7);
        assert!(q.starts_with("[... ") && q.ends_with(" bytes cut]"), "{q}");
    }

    #[test]
    fn around_keeps_the_match_in_view() {
        let mut text = "x".repeat(10_000);
        text.replace_range(5000..5005, "PANIC");
        let q = quote_around(&text, 5000..5005, 20);
        assert_eq!(q, format!("[... 4993 bytes cut] {}PANIC{} [... 4987 bytes cut]", "x".repeat(7), "x".repeat(8)));
        // At the very start and end.
        let q = quote_around(&text, 0..1, 10);
        assert_eq!(q, format!("{} [... 9990 bytes cut]", "x".repeat(10)));
        let q = quote_around(&text, 9999..10_000, 10);
        assert_eq!(q, format!("[... 9990 bytes cut] {}", "x".repeat(10)));
        // A match longer than the window: the window starts where it starts.
        let q = quote_around(&text, 100..9000, 10);
        assert_eq!(q, format!("[... 100 bytes cut] {} [... 9890 bytes cut]", "x".repeat(10)));
    }

    #[test]
    fn out_of_range_is_harmless() {
        let text = "y".repeat(100);
        assert_eq!(
            quote_around(&text, Range { start: 500, end: 400 }, 10),
            format!("[... 90 bytes cut] {}", "y".repeat(10))
        );
        assert_eq!(quote_with("", 0), "");
        assert_eq!(quote_with("ab", 0), "[... 2 bytes cut]");
    }
}
