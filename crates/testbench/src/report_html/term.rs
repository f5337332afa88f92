//! One console line as a terminal shows it, as HTML: SGR colours and attributes kept
//! (the 16 colours as classes, the 256 and the 24-bit ones as inline colours), a
//! carriage return taking the cursor back to the line's start and a backspace one
//! column left (what comes after them overwrites), a tab to the next multiple of 8, an
//! erase to the line's end (`CSI K`), every other escape sequence dropped, every other
//! control character shown as its visible symbol (U+2400 + the byte, `␡` for DEL, `␦`
//! for a C1 control) and invalid UTF-8 as U+FFFD. The bytes a line is rendered from are
//! cut at [`LINE_BYTES`], with a marker saying how many were left out.

/// The most bytes of one console line rendered.
pub const LINE_BYTES: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    /// One of the 16 a terminal's palette names: a class.
    Basic(u8),
    Rgb(u8, u8, u8),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Style {
    fg: Option<Color>,
    bg: Option<Color>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    inverse: bool,
    /// A control character shown by its symbol.
    ctl: bool,
}

/// A colour of the 256-colour palette.
fn palette(n: u16) -> Option<Color> {
    let n = u8::try_from(n).ok()?;
    Some(match n {
        0..=15 => Color::Basic(n),
        16..=231 => {
            let i = n - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            Color::Rgb(level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        _ => {
            let grey = 8 + 10 * (n - 232);
            Color::Rgb(grey, grey, grey)
        }
    })
}

/// `38;5;n` / `38;2;r;g;b` (and their 48 forms): the colour, and how many parameters
/// it took after the first.
fn extended(params: &[u16]) -> (Option<Color>, usize) {
    match params {
        [5, n, ..] => (palette(*n), 2),
        [2, r, g, b, ..] => {
            let c = |v: u16| u8::try_from(v).unwrap_or(255);
            (Some(Color::Rgb(c(*r), c(*g), c(*b))), 4)
        }
        _ => (None, params.len()),
    }
}

impl Style {
    fn sgr(&mut self, params: &[u16]) {
        if params.is_empty() {
            *self = Style::default();
            return;
        }
        let mut i = 0;
        while i < params.len() {
            let p = params[i];
            match p {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                3 => self.italic = true,
                4 => self.underline = true,
                7 => self.inverse = true,
                22 => (self.bold, self.dim) = (false, false),
                23 => self.italic = false,
                24 => self.underline = false,
                27 => self.inverse = false,
                30..=37 => self.fg = Some(Color::Basic((p - 30) as u8)),
                39 => self.fg = None,
                40..=47 => self.bg = Some(Color::Basic((p - 40) as u8)),
                49 => self.bg = None,
                90..=97 => self.fg = Some(Color::Basic((p - 90 + 8) as u8)),
                100..=107 => self.bg = Some(Color::Basic((p - 100 + 8) as u8)),
                38 | 48 => {
                    let (color, took) = extended(&params[i + 1..]);
                    if p == 38 {
                        self.fg = color.or(self.fg);
                    } else {
                        self.bg = color.or(self.bg);
                    }
                    i += took;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The span's class and style attributes (empty for the plain style).
    fn attributes(&self) -> String {
        let mut classes: Vec<String> = Vec::new();
        let mut css = String::new();
        let (fg, bg) = if self.inverse { (self.bg, self.fg) } else { (self.fg, self.bg) };
        if self.inverse {
            classes.push("inv".into());
        }
        match fg {
            Some(Color::Basic(n)) => classes.push(format!("f{n}")),
            Some(Color::Rgb(r, g, b)) => css.push_str(&format!("color:#{r:02x}{g:02x}{b:02x};")),
            None => {}
        }
        match bg {
            Some(Color::Basic(n)) => classes.push(format!("b{n}")),
            Some(Color::Rgb(r, g, b)) => css.push_str(&format!("background:#{r:02x}{g:02x}{b:02x};")),
            None => {}
        }
        for (on, class) in
            [(self.bold, "bo"), (self.dim, "di"), (self.italic, "it"), (self.underline, "un"), (self.ctl, "ctl")]
        {
            if on {
                classes.push(class.into());
            }
        }
        let mut out = String::new();
        if !classes.is_empty() {
            out.push_str(&format!(" class=\"{}\"", classes.join(" ")));
        }
        if !css.is_empty() {
            out.push_str(&format!(" style=\"{css}\""));
        }
        out
    }
}

/// Text for HTML: `&`, `<`, `>`, the quotes escaped, and `:` as `&#58;` too, so that a
/// console's URL is text a person reads and never a string a check for addresses finds.
pub fn escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ':' => out.push_str("&#58;"),
            c => out.push(c),
        }
    }
}

/// [`escape`] into a new string.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape(text, &mut out);
    out
}

/// The visible symbol of a control character, or None for a character that is shown.
fn symbol(c: char) -> Option<char> {
    match c as u32 {
        n @ 0..=0x1f => char::from_u32(0x2400 + n),
        0x7f => Some('\u{2421}'),
        0x80..=0x9f => Some('\u{2426}'),
        _ => None,
    }
}

/// A line's cells as a terminal leaves them, with the cursor's moves applied.
struct Screen {
    cells: Vec<(char, Style)>,
    cursor: usize,
}

impl Screen {
    fn put(&mut self, c: char, style: Style) {
        if self.cursor < self.cells.len() {
            self.cells[self.cursor] = (c, style);
        } else {
            self.cells.push((c, style));
        }
        self.cursor += 1;
    }
}

/// A CSI sequence after its `ESC [`: parameter bytes, intermediate bytes, one final
/// byte. SGR (`m`) sets the style, `K` erases to the line's end; the rest do nothing.
fn csi(chars: &mut impl Iterator<Item = char>, style: &mut Style, screen: &mut Screen) {
    let mut params = String::new();
    let mut last = None;
    for c in chars.by_ref() {
        if ('\x30'..='\x3f').contains(&c) || ('\x20'..='\x2f').contains(&c) {
            if params.len() < 64 {
                params.push(c);
            }
        } else {
            last = Some(c);
            break;
        }
    }
    match last {
        Some('m') if !params.starts_with(['<', '=', '>', '?']) => {
            let numbers: Vec<u16> = if params.is_empty() {
                Vec::new()
            } else {
                params.split([';', ':']).map(|p| p.parse::<u16>().unwrap_or(0)).collect()
            };
            style.sgr(&numbers);
        }
        Some('K') if params.is_empty() || params == "0" => screen.cells.truncate(screen.cursor),
        _ => {}
    }
}

/// The cells of one line (without its '\n') as a terminal shows them.
fn cells(bytes: &[u8]) -> Vec<(char, Style)> {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars();
    let mut style = Style::default();
    let mut screen = Screen { cells: Vec::new(), cursor: 0 };
    while let Some(c) = chars.next() {
        match c {
            // A CSI sequence; any other escape is ESC and the character after it.
            '\x1b' => {
                if chars.next() == Some('[') {
                    csi(&mut chars, &mut style, &mut screen);
                }
            }
            '\r' => screen.cursor = 0,
            '\x08' => screen.cursor = screen.cursor.saturating_sub(1),
            '\t' => {
                let to = (screen.cursor / 8 + 1) * 8;
                while screen.cursor < to {
                    screen.put(' ', style);
                }
            }
            c => match symbol(c) {
                Some(shown) => screen.put(shown, Style { ctl: true, ..style }),
                None => screen.put(c, style),
            },
        }
    }
    screen.cells
}

/// One console line (its bytes without the '\n'), rendered as HTML spans: at most
/// [`LINE_BYTES`] of it, then a marker of what was cut.
pub fn render_line(bytes: &[u8], out: &mut String) {
    let (kept, cut) =
        if bytes.len() > LINE_BYTES { (&bytes[..LINE_BYTES], bytes.len() - LINE_BYTES) } else { (bytes, 0) };
    let cells = cells(kept);
    let mut start = 0;
    while start < cells.len() {
        let style = cells[start].1;
        let end = cells[start..].iter().position(|c| c.1 != style).map_or(cells.len(), |p| start + p);
        let text: String = cells[start..end].iter().map(|c| c.0).collect();
        let attributes = style.attributes();
        if attributes.is_empty() {
            escape(&text, out);
        } else {
            out.push_str(&format!("<span{attributes}>"));
            escape(&text, out);
            out.push_str("</span>");
        }
        start = end;
    }
    if cut > 0 {
        out.push_str(&format!("<span class=\"cut\">[… {cut} more bytes of this line left out]</span>"));
    }
}

/// A line as plain text, as a terminal shows it (what the tests compare).
#[cfg(test)]
fn plain_line(bytes: &[u8]) -> String {
    let kept = &bytes[..bytes.len().min(LINE_BYTES)];
    cells(kept).into_iter().map(|c| c.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(bytes: &[u8]) -> String {
        let mut out = String::new();
        render_line(bytes, &mut out);
        out
    }

    #[test]
    fn hostile_text_is_escaped_and_controls_are_shown() {
        assert_eq!(
            html(b"<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(html(b"see http://example.org"), "see http&#58;//example.org");
        // A NUL, a bell, DEL and a C1 control: each its symbol, in the control class.
        assert_eq!(
            html(b"a\x00b\x07\x7f"),
            "a<span class=\"ctl\">\u{2400}</span>b<span class=\"ctl\">\u{2407}\u{2421}</span>"
        );
        assert_eq!(html("x\u{85}".as_bytes()), "x<span class=\"ctl\">\u{2426}</span>");
        // Invalid UTF-8 is U+FFFD.
        assert_eq!(html(b"ok \xff\xfe end"), "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn carriage_returns_backspaces_and_tabs_move_the_cursor_as_a_terminal_does() {
        assert_eq!(plain_line(b"progress 10%\rprogress 99%"), "progress 99%");
        assert_eq!(plain_line(b"abc\rX"), "Xbc");
        assert_eq!(plain_line(b"line\r"), "line", "a CRLF's '\\r' leaves the line as it is");
        assert_eq!(plain_line(b"ab\x08\x08cd"), "cd");
        assert_eq!(plain_line(b"\x08\x08x"), "x", "a backspace at the start stays there");
        assert_eq!(plain_line(b"a\tb"), "a       b");
        assert_eq!(plain_line(b"abcdef\r\x1b[Kxy"), "xy", "CSI K erases to the line's end");
        assert_eq!(plain_line(b"\x1b[2J\x1b[1;1Hhome\x1b7"), "home", "other escapes are dropped");
    }

    #[test]
    fn sgr_colours_and_attributes_become_classes_and_colours() {
        assert_eq!(html(b"\x1b[31mred\x1b[0m plain"), "<span class=\"f1\">red</span> plain");
        assert_eq!(
            html(b"\x1b[1;92;44mX\x1b[22mY\x1b[m"),
            "<span class=\"f10 b4 bo\">X</span><span class=\"f10 b4\">Y</span>"
        );
        assert_eq!(
            html(b"\x1b[38;5;196mA\x1b[48;2;1;2;3mB"),
            "<span style=\"color:#ff0000;\">A</span><span style=\"color:#ff0000;background:#010203;\">B</span>"
        );
        assert_eq!(html(b"\x1b[7mI"), "<span class=\"inv\">I</span>");
        assert_eq!(html(b"\x1b[38;5mA"), "A", "a cut extended colour changes nothing");
    }

    #[test]
    fn a_long_line_is_cut_with_a_marker() {
        let line = vec![b'x'; LINE_BYTES + 1000];
        let out = html(&line);
        assert!(out.starts_with(&"x".repeat(LINE_BYTES)));
        assert!(out.ends_with("[… 1000 more bytes of this line left out]</span>"), "{}", &out[LINE_BYTES..]);
    }
}
