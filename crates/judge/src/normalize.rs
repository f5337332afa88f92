//! A console line as a terminal shows it ([`shown`]) and as it came ([`raw_text`]).

const ESC: u8 = 0x1b;

/// True for the bytes [`shown`] removes on their own: the ASCII controls other than
/// TAB (0x00–0x1F except 0x09) and DEL (0x7F). A '\n' counts too: callers pass lines
/// without it, and block callers check for it separately.
#[inline(always)]
fn is_removed_ctrl(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// Whether `bytes` holds a byte that [`shown`] would remove or that starts an escape:
/// an ASCII control other than TAB and '\n', or DEL. Written as a branch-free fold over
/// fixed chunks so that the compiler vectorises it.
#[inline]
pub(crate) fn has_ctrl(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(64);
    for c in &mut chunks {
        let mut acc = false;
        for &b in c {
            acc |= ((b < 0x20) & (b != b'\t') & (b != b'\n')) | (b == 0x7f);
        }
        if acc {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| ((b < 0x20) & (b != b'\t') & (b != b'\n')) | (b == 0x7f))
}

/// The length of the UTF-8 character that starts at `bytes[0]`, or 1 when the bytes
/// there are not a valid UTF-8 sequence (so one byte is taken). `bytes` is not empty.
fn char_len(bytes: &[u8]) -> usize {
    let n = match bytes[0] {
        0x00..=0x7f => return 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 1,
    };
    if bytes.len() >= n && std::str::from_utf8(&bytes[..n]).is_ok() {
        n
    } else {
        1
    }
}

/// Appends to `out` the bytes of `raw` (one line, without its '\n') that a terminal
/// would show, before UTF-8 decoding, with trailing spaces and tabs trimmed.
///
/// The rules, applied left to right:
/// - ESC '[' starts a CSI sequence, removed whole: ESC, '[', any bytes 0x20–0x3F
///   (parameter and intermediate bytes), then one final byte 0x40–0x7E if one comes
///   next. A CSI still open at the end of the line runs to the end. A byte that is
///   neither (another control, a non-ASCII byte) ends the CSI and is then treated on
///   its own.
/// - Any other ESC is removed with the one character after it (a whole UTF-8
///   character when a valid one follows, else one byte). An ESC at the end of the line
///   is removed alone.
/// - Every other ASCII control but TAB (0x00–0x1F except 0x09) and DEL (0x7F) is
///   removed. A carriage return is only removed: it does not take the line back to its
///   start, since the bench looks at what was printed, not what stays on the screen.
/// - Trailing spaces and tabs are trimmed.
pub fn shown_into(raw: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    shown_untrimmed_into(raw, out);
    let kept = out[start..].iter().rposition(|&b| b != b' ' && b != b'\t').map_or(0, |p| p + 1);
    out.truncate(start + kept);
}

/// [`shown_into`] without the trimming: what a terminal shows of a line still being
/// written, its trailing blanks kept (a prompt such as `$ ` ends with one).
fn shown_untrimmed_into(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        // Copy the run of ordinary bytes up to the next control byte at once.
        let run = raw[i..].iter().position(|&b| is_removed_ctrl(b)).unwrap_or(raw.len() - i);
        out.extend_from_slice(&raw[i..i + run]);
        i += run;
        if i >= raw.len() {
            break;
        }
        if raw[i] != ESC {
            i += 1;
            continue;
        }
        i += 1; // the ESC
        if i >= raw.len() {
            break;
        }
        if raw[i] == b'[' {
            i += 1;
            while i < raw.len() && (0x20..=0x3f).contains(&raw[i]) {
                i += 1;
            }
            if i < raw.len() && (0x40..=0x7e).contains(&raw[i]) {
                i += 1;
            }
        } else {
            i += char_len(&raw[i..]);
        }
    }
}

/// The line as a terminal shows it: see [`shown_into`] for the rules. Input is one
/// line's bytes without its '\n'; bytes that are not UTF-8 become U+FFFD.
pub fn shown(raw: &[u8]) -> String {
    let mut buf = Vec::with_capacity(raw.len());
    shown_into(raw, &mut buf);
    match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A partial line (no '\n' yet) as a terminal shows it so far: the rules of [`shown`]
/// but the trimming, so a prompt keeps its trailing space. Input patterns see a partial
/// line in this form.
pub fn shown_partial(raw: &[u8]) -> String {
    let mut buf = Vec::with_capacity(raw.len());
    shown_untrimmed_into(raw, &mut buf);
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The line as it came: lossy UTF-8, with one trailing '\r' removed. Input is one
/// line's bytes without its '\n'.
pub fn raw_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(strip_cr(raw)).into_owned()
}

/// `raw` without one trailing '\r'.
#[inline]
pub(crate) fn strip_cr(raw: &[u8]) -> &[u8] {
    raw.strip_suffix(b"\r").unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_kept() {
        assert_eq!(shown(b"hello world"), "hello world");
        assert_eq!(shown(b""), "");
        assert_eq!(shown(b"a\tb"), "a\tb");
    }

    #[test]
    fn csi_is_removed_whole() {
        assert_eq!(shown(b"\x1b[1;31mred\x1b[0m text"), "red text");
        assert_eq!(shown(b"PA\x1b[0mNIC"), "PANIC");
        assert_eq!(shown(b"a\x1b[?25lb"), "ab");
        assert_eq!(shown(b"a\x1b[2 qb"), "ab", "intermediate byte");
    }

    #[test]
    fn unterminated_csi_runs_to_the_end() {
        assert_eq!(shown(b"text\x1b[1;3"), "text");
        assert_eq!(shown(b"text\x1b["), "text");
    }

    #[test]
    fn csi_ended_by_a_foreign_byte() {
        assert_eq!(shown(b"a\x1b[1\x07b"), "ab");
        assert_eq!(shown("a\x1b[1éb".as_bytes()), "aéb");
    }

    #[test]
    fn other_escape_takes_one_character() {
        assert_eq!(shown(b"a\x1bcb"), "ab");
        assert_eq!(shown(b"a\x1b(Bb"), "aBb", "ESC ( takes only the '('");
        assert_eq!(shown("a\x1béb".as_bytes()), "ab", "a whole UTF-8 character");
        assert_eq!(shown(b"a\x1b"), "a");
        assert_eq!(shown(b"a\x1b\x1bb"), "ab");
    }

    #[test]
    fn controls_are_removed_but_tab() {
        assert_eq!(shown(b"a\x00b\x07c\x7fd\x08e"), "abcde");
        assert_eq!(shown(b"\tx"), "\tx");
    }

    #[test]
    fn carriage_return_is_only_removed() {
        assert_eq!(shown(b"progress 10%\rprogress 20%\r"), "progress 10%progress 20%");
    }

    #[test]
    fn trailing_blanks_are_trimmed() {
        assert_eq!(shown(b"login:  \t "), "login:");
        assert_eq!(shown(b"x \x1b[0m "), "x");
        assert_eq!(shown(b"   "), "");
        assert_eq!(shown(b"  lead"), "  lead");
    }

    #[test]
    fn a_partial_line_keeps_its_trailing_blanks() {
        assert_eq!(shown_partial(b"$ "), "$ ");
        assert_eq!(shown_partial(b"\x1b[1m$\x1b[0m \t"), "$ \t");
        assert_eq!(shown_partial(b"login: \r"), "login: ");
        assert_eq!(shown(b"$ "), "$", "a whole line is still trimmed");
    }

    #[test]
    fn invalid_utf8_is_lossy() {
        assert_eq!(shown(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(raw_text(b"a\xffb\r"), "a\u{fffd}b");
    }

    #[test]
    fn raw_text_keeps_escapes_and_strips_one_cr() {
        assert_eq!(raw_text(b"\x1b[1mx\r"), "\x1b[1mx");
        assert_eq!(raw_text(b"x\r\r"), "x\r");
        assert_eq!(raw_text(b"x  "), "x  ");
    }

    #[test]
    fn has_ctrl_agrees_with_the_rules() {
        assert!(!has_ctrl(b"plain\ttext\nmore"));
        assert!(has_ctrl(b"x\r"));
        assert!(has_ctrl(b"x\x7f"));
        let mut long = vec![b'a'; 200];
        assert!(!has_ctrl(&long));
        long[150] = 0x1b;
        assert!(has_ctrl(&long));
    }
}
