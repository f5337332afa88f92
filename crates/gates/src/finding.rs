//! What every gate reports.

use std::fmt;
use std::path::PathBuf;

/// One thing a gate found wrong. Displayed as `path:line: code: message` (the line and
/// the code only when there is one), so an editor can jump to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the root of the tree checked.
    pub path: PathBuf,
    pub line: Option<usize>,
    /// A short rule name or code (`C3`, `over-ceiling`, `dead-code-allow`), stable so
    /// self-check cases can match it.
    pub code: String,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}: {}", self.code, self.message)
    }
}

/// A gate's configuration it cannot use: the file, the field, what is accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub field: String,
    pub message: String,
}
