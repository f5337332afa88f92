//! What a run found.

use std::fmt;

/// A finding: `kind` and `what` say which failure it is (the shrinker keeps an input only
/// while both stay the same); `detail` is what varies between inputs failing the same way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The family: "panic", "crash", "oracle", "forgery", "canary", "nondeterminism".
    pub kind: String,
    /// Which check failed (a panic's file:line, an oracle's rule).
    pub what: String,
    /// The rest: values, a panic's message.
    pub detail: String,
}

impl Finding {
    /// A finding of `kind` about `what`.
    pub fn new(kind: &str, what: &str, detail: impl Into<String>) -> Finding {
        Finding { kind: kind.to_owned(), what: what.to_owned(), detail: detail.into() }
    }

    /// An oracle's finding: the code under test accepted or returned something it must not.
    pub fn oracle(what: &str, detail: impl Into<String>) -> Finding {
        Finding::new("oracle", what, detail)
    }

    /// What makes two findings the same failure: kind and what.
    pub fn signature(&self) -> (&str, &str) {
        (&self.kind, &self.what)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.what)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}
