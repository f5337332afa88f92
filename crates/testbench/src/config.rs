//! The bench's own settings for this workspace: `testbench.toml` at the workspace root.
//!
//! ```toml
//! [console]
//! # Every boot case forbids these (literal text, matched anywhere in a line, both as it
//! # came and as it is shown). The last is the reference guest's invariant line.
//! always_forbidden = ["PANIC", "TEST FAILED", "WARNING: INSECURE", "INVARIANT BROKEN"]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub const FILE: &str = "testbench.toml";
pub const DEFAULT_ALWAYS_FORBIDDEN: [&str; 4] = ["PANIC", "TEST FAILED", "WARNING: INSECURE", "INVARIANT BROKEN"];

#[derive(Debug, Clone)]
pub struct Config {
    pub always_forbidden: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    console: Option<RawConsole>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConsole {
    always_forbidden: Option<Vec<String>>,
}

/// Why `testbench.toml` was refused: the file could not be read, or what it says.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", .path.display())]
    Parse { path: PathBuf, source: ParseError },
}

/// What in the settings' text is refused.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not TOML, or a field the settings do not have (toml's own words).
    #[error("{}", .0.message().trim())]
    Toml(#[from] toml::de::Error),
    /// An empty entry of `console.always_forbidden` (its index).
    #[error("console.always_forbidden[{0}]: empty: literal text a console line must never hold")]
    EmptyForbidden(usize),
}

pub fn load(root: &Path) -> Result<Config, LoadError> {
    let path = root.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(LoadError::Read { path, source }),
    };
    parse(&text).map_err(|source| LoadError::Parse { path, source })
}

pub fn parse(text: &str) -> Result<Config, ParseError> {
    let raw: Raw = toml::from_str(text)?;
    let always_forbidden = raw
        .console
        .and_then(|c| c.always_forbidden)
        .unwrap_or_else(|| DEFAULT_ALWAYS_FORBIDDEN.iter().map(|s| s.to_string()).collect());
    if let Some(index) = always_forbidden.iter().position(|s| s.trim().is_empty()) {
        return Err(ParseError::EmptyForbidden(index));
    }
    Ok(Config { always_forbidden })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_always_forbidden_list_defaults_and_can_be_replaced() {
        assert_eq!(parse("").unwrap().always_forbidden, DEFAULT_ALWAYS_FORBIDDEN);
        assert_eq!(parse("[console]\nalways_forbidden = [\"BUG:\"]").unwrap().always_forbidden, ["BUG:"]);
        let empty = parse("[console]\nalways_forbidden = [\"\"]").unwrap_err();
        assert!(matches!(empty, ParseError::EmptyForbidden(0)), "{empty:?}");
        assert!(empty.to_string().starts_with("console.always_forbidden[0]: empty"), "{empty}");
        let unknown = parse("[consol]").unwrap_err();
        assert!(matches!(unknown, ParseError::Toml(_)) && unknown.to_string().contains("unknown field"), "{unknown}");
    }
}
