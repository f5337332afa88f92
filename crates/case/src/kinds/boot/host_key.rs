//! `net.host_key`: the only host key the sessions' ssh accepts, as a known_hosts line
//! gives it after the host: a type the bench accepts and its base64, which decodes to a
//! key whose own type string is the same. A comment after it is refused: the field holds
//! what is pinned, and nothing the bench would read past.

use crate::common::{did_you_mean, nearest, quoted, Ctx};
use crate::{CaseError, HostKey};

const FIELD: &str = "net.host_key";

/// Stage two of `net.host_key`.
pub(crate) fn host_key(ctx: &Ctx, text: &str) -> Result<HostKey, CaseError> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let (kind, base64) = match words.as_slice() {
        [] => return Err(ctx.err(FIELD, "empty: a public key, its type and its base64, such as \"ssh-ed25519 AAAA…\"")),
        [kind] => {
            return Err(ctx.err(FIELD, format!("{kind:?} is not accepted: a public key is its type and its base64, and the base64 is missing")))
        }
        [kind, base64] => (*kind, *base64),
        [_, _, comment, ..] => {
            return Err(ctx.err(
                FIELD,
                format!("a comment after the key ({comment:?}…) is not accepted: give the type and the base64 alone, what ssh pins"),
            ))
        }
    };
    if kind == "ssh-dss" {
        return Err(ctx.err(
            FIELD,
            format!("\"ssh-dss\" is not accepted: OpenSSH's ssh has refused DSA host keys by default since 7.0; a host key type, one of {}", quoted(&HostKey::KINDS)),
        ));
    }
    if !HostKey::KINDS.contains(&kind) {
        let near = did_you_mean(&nearest(kind, HostKey::KINDS));
        let near = if near.is_empty() { String::new() } else { format!("; {near}") };
        return Err(ctx.err(
            FIELD,
            format!("{kind:?} is not accepted: a host key type, one of {}{near}", quoted(&HostKey::KINDS)),
        ));
    }
    let blob = decode(base64).map_err(|why| ctx.err(FIELD, format!("the key's base64 does not decode: {why}")))?;
    let inner = blob
        .get(..4)
        .map(|len| u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize)
        .and_then(|len| blob.get(4..4 + len))
        .ok_or_else(|| ctx.err(FIELD, "the key's base64 decodes to no key: it does not begin with the key's type"))?;
    if inner != kind.as_bytes() {
        return Err(ctx.err(
            FIELD,
            format!("the key inside is of type {:?}, not {kind:?} as the line says", String::from_utf8_lossy(inner)),
        ));
    }
    if blob.len() == 4 + inner.len() {
        return Err(ctx.err(FIELD, "the key's base64 holds its type alone, no key"));
    }
    Ok(HostKey { kind: kind.to_string(), base64: base64.to_string() })
}

/// Why a key's base64 does not decode ([`decode`]); bytes are counted from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum Base64Error {
    #[error("its length, {0}, is not a multiple of 4")]
    Length(usize),
    #[error("byte {0} is not base64")]
    NotBase64(usize),
    #[error("byte {0} follows padding")]
    AfterPadding(usize),
}

/// Standard base64 with its padding, as OpenSSH writes a key.
fn decode(text: &str) -> Result<Vec<u8>, Base64Error> {
    let bytes = text.as_bytes();
    if !bytes.chunks_exact(4).remainder().is_empty() {
        return Err(Base64Error::Length(bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.len() / 4;
    for (index, chunk) in bytes.chunks_exact(4).enumerate() {
        let mut word = 0u32;
        let mut padding = 0;
        for (offset, &byte) in chunk.iter().enumerate() {
            let value = match byte {
                b'A'..=b'Z' => byte - b'A',
                b'a'..=b'z' => byte - b'a' + 26,
                b'0'..=b'9' => byte - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' if index + 1 == chunks && offset >= 2 => {
                    padding += 1;
                    0
                }
                _ => return Err(Base64Error::NotBase64(index * 4 + offset + 1)),
            };
            if padding > 0 && byte != b'=' {
                return Err(Base64Error::AfterPadding(index * 4 + offset + 1));
            }
            word = word << 6 | u32::from(value);
        }
        let three = word.to_be_bytes();
        out.extend_from_slice(&three[1..4 - padding]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{decode, Base64Error};
    use crate::HostKey;

    /// tests/keys/guest-host.pub without its comment.
    const ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIElG9eTMkkn9/IOklrcjD32B0PfoMuVP2GLvyfaAxtT9";
    /// Keys made for this test by ssh-keygen, thrown away (only their public halves here).
    const OTHERS: [(&str, &str); 4] = [
        ("ecdsa-sha2-nistp256", "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBE3fdo59YEjJctugu6SguUOWsOKPRMgPB72oBBN3O7w0r5IpIFQxwd9ZLnSozCp+RFiXw4YfVxWILGuPit2M1ww="),
        ("ecdsa-sha2-nistp384", "AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBE2XlsDYjECqn+yq20KDjMT2vDuAPuncWkyxvLTrYp4RHe/eQbFAssHCwxswbzbOGrnkwiK/8ugTFM51UhxlRqgM19/fo6tQhsoMw/Ax7lqrL28TTtNgeK4bImQPgrjFAw=="),
        ("ecdsa-sha2-nistp521", "AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBABZ1ls+3/ELG0ZtKghEtdD3TmLK6yNi6FuUJklFxnBq6F0WiVL6zwrRNaVF/r7DqW9ZAXHTxDRW1hh2wQZvmQytbAH3pzKfdC8upWgeThvhsj4n3Xdd3G2p+aQGcRRGbhhFUApyXS0B3xC5WUSSpSIsZ4d6Bbp//Tdd2N/jrmlFTDKLVA=="),
        ("ssh-rsa", "AAAAB3NzaC1yc2EAAAADAQABAAAAgQDfu1B7vk7dw/AQxttsJvb/BUmLbYjSBOiEbrZINBshaqfTgVMo9RsNbYtg+sl43PQFrT4pjQfnSeLmivIopA+H28Phlu7Xcwv1C0DGU7P+srgonLC9i3LMNUHyu7WTzPSggPdr2cHxHeQW6g8EXZ9zJYEInFwl7fFwArdWpHUj2w=="),
    ];

    fn case(host_key: &str) -> Result<crate::Case, crate::CaseError> {
        let text = format!(
            "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['x']\n[guest]\nrecipe = \"g.toml\"\n\
             [net]\nforward = [22]\nhost_key = {host_key:?}\n[[session]]\nuser = \"root\"\nkey = \"alice\"\nsteps = [{{ exit = 0 }}]\n"
        );
        crate::parse("tests/c.toml", &text)
    }

    fn pinned(host_key: &str) -> HostKey {
        let case = case(host_key).unwrap_or_else(|error| panic!("{error}"));
        case.as_boot().unwrap().net.as_ref().unwrap().host_key.clone().expect("a host key")
    }

    fn refused(host_key: &str) -> String {
        case(host_key).expect_err(host_key).to_string()
    }

    #[test]
    fn a_host_key_is_a_type_and_a_base64_key_of_that_type() {
        let key = pinned(&format!("ssh-ed25519 {ED25519}"));
        assert_eq!(key, HostKey { kind: "ssh-ed25519".into(), base64: ED25519.into() });
        assert_eq!(key.line(), format!("ssh-ed25519 {ED25519}"));
        for (kind, base64) in OTHERS {
            assert_eq!(pinned(&format!("  {kind}\t{base64} ")).line(), format!("{kind} {base64}"));
        }
        assert_eq!(
            refused(""),
            "tests/c.toml: net.host_key: empty: a public key, its type and its base64, such as \"ssh-ed25519 AAAA…\""
        );
        assert_eq!(
            refused("ssh-ed25519"),
            "tests/c.toml: net.host_key: \"ssh-ed25519\" is not accepted: a public key is its type and its base64, and the base64 is missing"
        );
        assert_eq!(
            refused(&format!("ssh-ed25519 {ED25519} testbench guest-host")),
            "tests/c.toml: net.host_key: a comment after the key (\"testbench\"…) is not accepted: give the type and the base64 alone, what ssh pins"
        );
        assert_eq!(
            refused(&format!("ssh-ed2519 {ED25519}")),
            "tests/c.toml: net.host_key: \"ssh-ed2519\" is not accepted: a host key type, one of \"ssh-ed25519\", \"ecdsa-sha2-nistp256\", \"ecdsa-sha2-nistp384\", \"ecdsa-sha2-nistp521\", \"ssh-rsa\"; did you mean `ssh-ed25519`?"
        );
        assert_eq!(
            refused("ssh-dss AAAAB3NzaC1kc3MAAACBAPaPGUdl"),
            "tests/c.toml: net.host_key: \"ssh-dss\" is not accepted: OpenSSH's ssh has refused DSA host keys by default since 7.0; a host key type, one of \"ssh-ed25519\", \"ecdsa-sha2-nistp256\", \"ecdsa-sha2-nistp384\", \"ecdsa-sha2-nistp521\", \"ssh-rsa\""
        );
        assert_eq!(
            refused(&format!("ssh-ed25519 {}", &ED25519[1..])),
            "tests/c.toml: net.host_key: the key's base64 does not decode: its length, 67, is not a multiple of 4"
        );
        assert_eq!(
            refused("ssh-ed25519 AAAA*AAA"),
            "tests/c.toml: net.host_key: the key's base64 does not decode: byte 5 is not base64"
        );
        assert_eq!(
            refused(&format!("ssh-rsa {ED25519}")),
            "tests/c.toml: net.host_key: the key inside is of type \"ssh-ed25519\", not \"ssh-rsa\" as the line says"
        );
        assert_eq!(
            refused(&format!("ecdsa-sha2-nistp384 {}", OTHERS[0].1)),
            "tests/c.toml: net.host_key: the key inside is of type \"ecdsa-sha2-nistp256\", not \"ecdsa-sha2-nistp384\" as the line says"
        );
        // "Zm9vYmFy" is "foobar": no length and type at its head.
        assert_eq!(
            refused("ssh-ed25519 Zm9vYmFy"),
            "tests/c.toml: net.host_key: the key's base64 decodes to no key: it does not begin with the key's type"
        );
        // The length 11 and "ssh-ed25519", nothing after.
        assert_eq!(
            refused("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"),
            "tests/c.toml: net.host_key: the key's base64 holds its type alone, no key"
        );
    }

    #[test]
    fn base64_decodes_as_openssh_writes_it() {
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("Zm9v").unwrap(), b"foo");
        assert_eq!(decode("Zm8=").unwrap(), b"fo");
        assert_eq!(decode("Zg==").unwrap(), b"f");
        assert_eq!(decode("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        assert_eq!(decode("Zg="), Err(Base64Error::Length(3)));
        assert_eq!(decode("Z==="), Err(Base64Error::NotBase64(2)));
        assert_eq!(decode("Zg=a"), Err(Base64Error::AfterPadding(4)));
        assert_eq!(decode("Zg==Zm9v"), Err(Base64Error::NotBase64(3)));
        assert_eq!(decode("Zm9-"), Err(Base64Error::NotBase64(4)));
        assert_eq!(Base64Error::Length(3).to_string(), "its length, 3, is not a multiple of 4");
        assert_eq!(Base64Error::NotBase64(2).to_string(), "byte 2 is not base64");
        assert_eq!(Base64Error::AfterPadding(4).to_string(), "byte 4 follows padding");
    }
}
