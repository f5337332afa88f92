//! The `[[skip]]` list of the gates that check every crate or workspace they find
//! (import cycles, formatting): a directory whose crates or workspaces are left out, with
//! the reason. Read and judged here once, so each gate refuses and reports a skip alike.

use serde::Deserialize;
use toml::Spanned;

use crate::nocruft::{is_under, line_at, tree_path, ConfigFile};
use crate::{ConfigError, Finding};

/// One `[[skip]]` as the file writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSkip {
    root: String,
    #[serde(default)]
    reason: String,
}

/// One `[[skip]]`, its root checked.
pub(crate) struct Skip {
    pub(crate) root: String,
    /// The line of the file it starts on (findings about it point there).
    pub(crate) line: usize,
    pub(crate) reason: String,
}

/// The `[[skip]]` entries of the file `shown` (whose text is `text`): each root a tree
/// path, none named twice. `refuse` is the gate's own objection to a root (a checked
/// directory under it), said as the message; it is asked before the twice check.
pub(crate) fn parse_skips(
    shown: &str,
    text: &str,
    raw: Vec<Spanned<RawSkip>>,
    refuse: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Skip>, ConfigError> {
    let mut skips: Vec<Skip> = Vec::new();
    for (index, entry) in raw.into_iter().enumerate() {
        let line = line_at(text, entry.span().start);
        let field = format!("skip[{index}].root");
        let entry = entry.into_inner();
        let err = |message: String| ConfigError { file: shown.to_string(), field: field.clone(), message };
        let root = tree_path(&entry.root).map_err(|refused| err(refused.to_string()))?;
        if let Some(message) = refuse(&root) {
            return Err(err(message));
        }
        if skips.iter().any(|s| s.root == root) {
            return Err(err(format!("{root:?} is named twice: one [[skip]] per directory")));
        }
        skips.push(Skip { root, line, reason: entry.reason });
    }
    Ok(skips)
}

/// The findings on the skips themselves: `skip-without-reason` for a blank reason
/// (`left_out` says what the skip leaves out: "its crates are not checked"), and
/// `stale-skip` for one with none of `found` at or under it (`holds_no` names what it
/// should hold).
pub(crate) fn skip_findings(
    file: &ConfigFile,
    skips: &[Skip],
    found: &[String],
    left_out: &str,
    holds_no: &str,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (index, skip) in skips.iter().enumerate() {
        if skip.reason.trim().is_empty() {
            findings.push(file.finding(
                skip.line,
                "skip-without-reason",
                format!("skip[{index}] ({}) gives no reason: say why {left_out}", skip.root),
            ));
        }
        if !found.iter().any(|f| is_under(f, &skip.root)) {
            findings.push(file.finding(
                skip.line,
                "stale-skip",
                format!("skip[{index}] ({}) holds no {holds_no}: delete it", skip.root),
            ));
        }
    }
    findings
}
