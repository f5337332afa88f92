//! The bench's own settings for this workspace: `testbench.toml` at the workspace root.
//!
//! ```toml
//! [console]
//! # Every boot case forbids these (literal text, matched anywhere in a line, both as it
//! # came and as it is shown). The last is the reference guest's invariant line.
//! always_forbidden = ["PANIC", "TEST FAILED", "WARNING: INSECURE", "INVARIANT BROKEN"]
//! ```

use std::path::Path;

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

pub fn load(root: &Path) -> Result<Config, String> {
    let path = root.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("{}: {error}", path.display())),
    };
    parse(&text).map_err(|message| format!("{}: {message}", path.display()))
}

pub fn parse(text: &str) -> Result<Config, String> {
    let raw: Raw = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
    let always_forbidden = raw
        .console
        .and_then(|c| c.always_forbidden)
        .unwrap_or_else(|| DEFAULT_ALWAYS_FORBIDDEN.iter().map(|s| s.to_string()).collect());
    if let Some(index) = always_forbidden.iter().position(|s| s.trim().is_empty()) {
        return Err(format!("console.always_forbidden[{index}]: empty: literal text a console line must never hold"));
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
        assert!(parse("[console]\nalways_forbidden = [\"\"]").unwrap_err().contains("always_forbidden[0]"));
        assert!(parse("[consol]").unwrap_err().contains("unknown field"));
    }
}
