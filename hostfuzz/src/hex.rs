//! Saved inputs: lowercase hex, 64 digits a line; whitespace is ignored when read back.

/// `bytes` as hex lines.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2 + bytes.len() / 32 + 1);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 && i % 32 == 0 {
            out.push('\n');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out.push('\n');
    out
}

/// The bytes of hex `text`, or why it is not hex.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err(format!("an odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).map_err(|_| "not ASCII".to_owned())?;
            u8::from_str_radix(pair, 16).map_err(|_| format!("{pair:?} is not a hex byte"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;
    use crate::targets::canary;

    #[test]
    fn hex_round_trip() {
        let bytes: Vec<u8> = (0..=255).chain(0..77).collect();
        assert_eq!(decode(&encode(&bytes)), Ok(bytes));
        assert_eq!(decode(&encode(&[])), Ok(vec![]));
        assert_eq!(decode("abc").unwrap_err(), "an odd number of hex digits (3)");
        assert_eq!(decode("zz").unwrap_err(), "\"zz\" is not a hex byte");
    }

    #[test]
    fn replay_round_trip() {
        // A canary finding saved as hex and read back fails the same way.
        let input = [0u8, 0, 0, 0, 0xf5, 0xff, 7];
        let first = in_process(canary::run, &input);
        let again = in_process(canary::run, &decode(&encode(&input)).unwrap());
        assert_eq!(first, again);
        assert_eq!(first.finding().map(|f| f.detail.as_str()), Some("at read 2"));
    }
}
