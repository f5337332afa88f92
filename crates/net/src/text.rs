//! Bytes a message quotes: escaped to one printable line, then cut with
//! [`testbench_judge::quote`] (its marker counts the escaped text's bytes).

/// `bytes` as one printable, double-quoted line: printable ASCII as it is, `\n`, `\r`,
/// `\t`, `\\`, `\"` and `\xNN` for the rest, cut to a few hundred bytes with a marker of
/// what was cut. Callers hold `bytes` to their own bound (64 KiB at most here).
pub fn quoted(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 16);
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    let cut = testbench_judge::quote(&out);
    match cut.rfind(" [... ") {
        Some(i) if cut.len() < out.len() => format!("\"{}\"{}", &cut[..i], &cut[i..]),
        _ => format!("\"{cut}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_cuts() {
        assert_eq!(quoted(b"hello\n"), "\"hello\\n\"");
        assert_eq!(quoted(b"a\x00\xff\"\\"), "\"a\\x00\\xff\\\"\\\\\"");
        assert_eq!(quoted(b""), "\"\"");
        let q = quoted(&vec![b'x'; 100_000]);
        assert_eq!(q, format!("\"{}\" [... {} bytes cut]", "x".repeat(240), 100_000 - 240));
        let q = quoted(&[0u8; 1000]);
        assert_eq!(q, format!("\"{}\" [... {} bytes cut]", "\\x00".repeat(60), 4000 - 240));
    }
}
