//! What every stage and every kind shares: the error builder ([`Ctx`]), regexes and
//! deadlines, the shapes of names and paths, and the words messages are made of (the
//! nearest name, a number as a person writes it, a value shown short).
//!
//! This module depends on the crate's types alone; every other module may use it.

use std::path::{Component, PathBuf};
use std::time::Duration;

use regex::Regex;
/// The nearest name and its "did you mean": one rule with the disk recipes'.
pub use testbench_suggest::{did_you_mean, nearest};

use crate::{Arch, CaseError, Pattern};

/// The longest deadline a case may set: a day. Anything longer is a typo for a unit.
const TIMEOUT_SECS_MAX: f64 = 86_400.0;

/// The shortest: a millisecond. A deadline shorter is a typo too, and one that would
/// print as "timed out after 0s".
const TIMEOUT_SECS_MIN: f64 = 0.001;

/// A host job's deadline unless the case sets one (kinds "host-tests" and "scripts"): ten
/// minutes.
pub(crate) const HOST_TIMEOUT_SECS: f64 = 600.0;

/// Where refusals point: the case file as the bench was given it, and where each of its
/// top-level keys starts in it (so several refusals come in the file's order).
pub(crate) struct Ctx<'a> {
    file: &'a str,
    keys: Vec<(String, usize)>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str) -> Ctx<'a> {
        Ctx { file, keys: Vec::new() }
    }

    /// The same, knowing where the top-level keys of `text` start (none when it is not
    /// TOML: its syntax error is then the only refusal).
    pub(crate) fn with_keys(file: &'a str, text: &str) -> Ctx<'a> {
        type Keys = std::collections::BTreeMap<toml::Spanned<String>, serde::de::IgnoredAny>;
        let keys = toml::from_str::<Keys>(text)
            .map(|keys| keys.keys().map(|k| (k.get_ref().clone(), k.span().start)).collect())
            .unwrap_or_default();
        Ctx { file, keys }
    }

    pub(crate) fn err(&self, field: impl Into<String>, message: impl Into<String>) -> CaseError {
        CaseError { file: self.file.to_string(), field: field.into(), message: message.into(), also: Vec::new() }
    }

    /// Where a field's top-level key starts in the file; after every key when it is not
    /// there (a required field missing).
    fn place(&self, field: &str) -> usize {
        let key = field.split(['.', '[']).next().unwrap_or(field);
        self.keys.iter().find(|(k, _)| k == key).map_or(usize::MAX, |(_, at)| *at)
    }

    /// Several refusals of the file as one error, in the file's order (a field's place is
    /// its top-level key's; refusals within one key keep the order they came in).
    pub(crate) fn all(&self, errors: Vec<CaseError>) -> Result<(), CaseError> {
        let mut errors: Vec<CaseError> = errors
            .into_iter()
            .flat_map(|mut error| {
                let also = std::mem::take(&mut error.also);
                std::iter::once(error).chain(also)
            })
            .collect();
        errors.sort_by_key(|e| self.place(&e.field));
        match CaseError::all(errors) {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }

    pub(crate) fn regex(&self, label: String, source: &str) -> Result<Pattern, CaseError> {
        match Regex::new(source) {
            Ok(regex) => Ok(Pattern { label, regex }),
            Err(error) => {
                // The regex crate's message is several lines: the pattern, a caret under
                // the column at fault, then the error. Keep them as they are, each line
                // indented alike, so the caret stays under its column.
                let text = error.to_string();
                let body = text.strip_prefix("regex parse error:").unwrap_or(&text).trim_start_matches('\n');
                let body: Vec<String> = body.lines().map(|line| format!("    {line}")).collect();
                Err(self.err(label, format!("not a valid regex:\n{}", body.join("\n"))))
            }
        }
    }

    /// Each of a list's regexes, or every one of them that is not valid, in the list's order.
    pub(crate) fn patterns(&self, field: &str, sources: &[String]) -> Result<Vec<Pattern>, CaseError> {
        let mut refused = Refusals::new();
        let patterns: Vec<Option<Pattern>> = sources
            .iter()
            .enumerate()
            .map(|(index, source)| refused.keep(self.regex(format!("{field}[{index}]"), source)))
            .collect();
        refused.end(self, patterns.into_iter().collect())
    }

    pub(crate) fn seconds(&self, field: &str, secs: f64) -> Result<Duration, CaseError> {
        if !(secs.is_finite() && (TIMEOUT_SECS_MIN..=TIMEOUT_SECS_MAX).contains(&secs)) {
            return Err(self.err(
                field,
                format!(
                    "{} is not accepted: a number of seconds from {TIMEOUT_SECS_MIN} (1 ms) to {TIMEOUT_SECS_MAX} (a day), such as 30 or 2.5",
                    number_text(secs)
                ),
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }

    /// A table whose every name and shape is already checked, read by serde into `T`:
    /// serde's own words are a last resort here.
    pub(crate) fn read<T: serde::de::DeserializeOwned>(&self, table: toml::Table) -> Result<T, CaseError> {
        toml::Value::Table(table).try_into().map_err(|error: toml::de::Error| self.err("toml", error.message().trim()))
    }
}

/// The refusals of one case file, kept as its fields are checked one after another, so a
/// file with several mistakes hears of each in one run; [`Refusals::end`] gives them in
/// the file's order ([`Ctx::all`]). A check that is refused gives `None`: a later check
/// that needs its value is then skipped, since it could only refuse what the person
/// did not write (a `smp` table is not checked against an `arch` that is refused).
pub(crate) struct Refusals(Vec<CaseError>);

impl Refusals {
    pub(crate) fn new() -> Refusals {
        Refusals(Vec::new())
    }

    /// The check's value, or `None` with its refusal kept.
    pub(crate) fn keep<T>(&mut self, checked: Result<T, CaseError>) -> Option<T> {
        checked.map_err(|error| self.0.push(error)).ok()
    }

    pub(crate) fn push(&mut self, error: CaseError) {
        self.0.push(error);
    }

    /// Every refusal kept, in the file's order, or else what the checks `made`: `None`
    /// only when one of them was refused (a value is missing only beside its refusal).
    pub(crate) fn end<T>(self, ctx: &Ctx, made: Option<T>) -> Result<T, CaseError> {
        ctx.all(self.0)?;
        Ok(made.expect("a checked value is missing only where its refusal is kept"))
    }
}

/// Names quoted and joined: `"a", "b"`.
pub(crate) fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
}

/// A Cargo feature, package or binary name.
pub(crate) fn is_feature_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `arch`: the widths a case runs on, each once, at least one.
pub(crate) fn arch_list(ctx: &Ctx, names: Option<&Vec<String>>) -> Result<Vec<Arch>, CaseError> {
    let names = names.ok_or_else(|| ctx.err("arch", format!("required: a list of {}", Arch::accepted())))?;
    if names.is_empty() {
        return Err(ctx.err(
            "arch",
            format!(
                "empty: name at least one of {} (leave a width out rather than booting it zero times)",
                Arch::accepted()
            ),
        ));
    }
    let mut arch = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let one = Arch::from_name(name).ok_or_else(|| {
            ctx.err(format!("arch[{index}]"), format!("{name:?} is not accepted: one of {}", Arch::accepted()))
        })?;
        if arch.contains(&one) {
            return Err(ctx.err(format!("arch[{index}]"), format!("{name:?} is named twice")));
        }
        arch.push(one);
    }
    Ok(arch)
}

/// A path, relative to the workspace root or absolute, never empty.
pub(crate) fn path_field(ctx: &Ctx, field: &str, value: &str) -> Result<PathBuf, CaseError> {
    if value.trim().is_empty() {
        return Err(ctx.err(field, "empty: a path, relative to the workspace root or absolute"));
    }
    Ok(PathBuf::from(value))
}

/// A relative path that stays below the workspace root.
pub(crate) fn below_root(ctx: &Ctx, field: &str, value: &str) -> Result<PathBuf, CaseError> {
    let path = path_field(ctx, field, value)?;
    let escapes =
        path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)));
    if escapes {
        return Err(ctx.err(field, format!("{value:?} is not accepted: a relative path below the workspace root")));
    }
    Ok(path)
}

/// A list of names without spaces, each once; `what` says what one is.
pub(crate) fn names(ctx: &Ctx, field: &str, list: &[String], what: &str) -> Result<Vec<String>, CaseError> {
    for (index, item) in list.iter().enumerate() {
        if item.trim().is_empty() || item.chars().any(char::is_whitespace) {
            return Err(ctx.err(format!("{field}[{index}]"), format!("{item:?} is not accepted: {what}")));
        }
        if list[..index].contains(item) {
            return Err(ctx.err(format!("{field}[{index}]"), format!("{item:?} is named twice")));
        }
    }
    Ok(list.to_vec())
}

/// `features`: Cargo feature names.
pub(crate) fn features(ctx: &Ctx, list: Option<&Vec<String>>) -> Result<Vec<String>, CaseError> {
    let list = list.cloned().unwrap_or_default();
    for (index, feature) in list.iter().enumerate() {
        if !is_feature_name(feature) {
            return Err(
                ctx.err(format!("features[{index}]"), format!("{feature:?} is not accepted: a Cargo feature name"))
            );
        }
    }
    Ok(list)
}

/// A number as a person writes it: plain where plain is short, in exponent form where
/// the plain form would run to tens of digits (1e-300 stays 1e-300).
pub fn number_text(x: f64) -> String {
    let magnitude = x.abs();
    if x == 0.0 || !x.is_finite() || (1e-4..1e16).contains(&magnitude) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// A value as the case wrote it, short: strings quoted, numbers as written, a list or a
/// table by its kind (never pages of it).
pub(crate) fn shown(value: &toml::Value) -> String {
    const MAX: usize = 60;
    match value {
        toml::Value::String(s) => {
            let quoted = format!("{s:?}");
            if quoted.chars().count() <= MAX {
                quoted
            } else {
                format!("{}…\"", quoted.chars().take(MAX).collect::<String>())
            }
        }
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => number_text(*x),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => format!("the date {d}"),
        toml::Value::Array(_) => "a list".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_never_run_to_hundreds_of_digits() {
        assert_eq!(number_text(1e-300), "1e-300");
        assert_eq!(number_text(2.5), "2.5");
        assert_eq!(number_text(0.0005), "0.0005");
        assert_eq!(number_text(0.00005), "5e-5");
        assert_eq!(number_text(86401.0), "86401");
        assert_eq!(number_text(1e300), "1e300");
        assert_eq!(number_text(f64::NAN), "NaN");
    }
}
