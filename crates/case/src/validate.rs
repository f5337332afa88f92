//! The entry point: a case file's text to a [`Case`]. It reads what every case has (the
//! common fields, [`COMMON`] and [`RawCommon`]), then hands the rest to its kind
//! (`kinds`), refusing with the file, the field and what is accepted.

use std::path::PathBuf;

use serde::Deserialize;

use crate::common::{did_you_mean, nearest, quoted, Ctx};
use crate::fields::{check_table, field, names, Field, Shape, BOOL, LATER};
use crate::kinds::KINDS;
use crate::{Case, CaseError, Pattern, FAILURE_KINDS};

/// The fields every kind takes, in the order messages name them.
pub(crate) const COMMON: &[Field] = &[
    field("description", Shape::Str, "one line saying what the case proves, as a string"),
    field("kind", Shape::Str, "one of \"boot\", \"host-tests\", \"build\", \"scripts\", \"gate\", \"ssh-loopback\""),
    field("whole_run", Shape::Bool, BOOL),
    field(
        "must_fail",
        Shape::Any,
        "a regex the failure's reason must match, as a string, or a table { kind = \"<a failure kind>\", reason = \"<regex>\" } (reason optional)",
    ),
];

/// The common fields as serde reads them: those of [`COMMON`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCommon {
    pub description: Option<String>,
    pub kind: Option<String>,
    pub whole_run: Option<bool>,
    pub must_fail: Option<toml::Value>,
}

/// Parse a case file's text. `file` is the path shown in messages; the case's name is its stem.
pub fn parse(file: &str, text: &str) -> Result<Case, CaseError> {
    let ctx = Ctx::new(file);
    let path = PathBuf::from(file);
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .filter(|stem| !stem.is_empty())
        .ok_or_else(|| ctx.err("file name", "a case file is named <case>.toml"))?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(
            ctx.err("file name", format!("case name {name:?} is not accepted: letters, digits, '-' and '_' only"))
        );
    }
    // Stage one: the TOML itself, then every field's name and shape, in words.
    let mut table: toml::Table = toml::from_str(text).map_err(|error| {
        let line = error.span().map(|span| 1 + text[..span.start.min(text.len())].matches('\n').count());
        let field = match line {
            Some(line) => format!("line {line}"),
            None => "toml".to_string(),
        };
        ctx.err(field, error.message().trim().to_string())
    })?;
    // The common fields first: they say which kind reads the rest.
    let common_names = names(COMMON);
    let common: toml::Table = table
        .iter()
        .filter(|(key, _)| common_names.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    check_table(&ctx, &common, COMMON, "", "every case", &|_| None)?;
    let common: RawCommon = ctx.read(common)?;
    let description = common
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| ctx.err("description", "required: one line saying what the case proves"))?;
    let kinds: Vec<&str> = KINDS.iter().map(|(name, _)| *name).collect();
    let kind = common.kind.ok_or_else(|| ctx.err("kind", format!("required: one of {}", quoted(&kinds))))?;
    let kind = kind.as_str();
    if !kinds.contains(&kind) {
        let near = did_you_mean(&nearest(kind, kinds.iter().copied()));
        let near = if near.is_empty() { String::new() } else { format!("; {near}") };
        return Err(ctx.err("kind", format!("{kind:?} is not accepted: one of {}{near}", quoted(&kinds))));
    }
    if let Some(later) = LATER.iter().find(|name| table.contains_key(**name)) {
        return Err(ctx.err(*later, "not supported yet by this bench"));
    }
    // The fields of this kind, and only those, are named: never another kind's.
    let elsewhere = |key: &str| -> Option<String> {
        let owners: Vec<String> = KINDS
            .iter()
            .filter(|(other, fields)| *other != kind && fields.iter().any(|f| f.name == key))
            .map(|(other, _)| format!("{other:?}"))
            .collect();
        (!owners.is_empty()).then(|| format!("it is a field of kind {}", owners.join(", ")))
    };
    let whose = format!("kind {kind:?}");
    let fields = COMMON.iter().chain(crate::kinds::fields_of(kind));
    check_table(&ctx, &table, fields, "", &whose, &elsewhere)?;
    for key in common_names {
        table.remove(key);
    }
    let raw = crate::kinds::read(&ctx, kind, table)?;

    // Stage two: what the fields mean.
    let (must_fail, must_fail_kind) = match &common.must_fail {
        Some(value) => must_fail_of(&ctx, value)?,
        None => (None, None),
    };
    let self_check = must_fail.is_some() || must_fail_kind.is_some();
    let kind = crate::kinds::validate(&ctx, raw, self_check)?;
    let whole_run = common.whole_run.unwrap_or(true);
    Ok(Case { name, file: path, description, whole_run, kind, must_fail, must_fail_kind })
}

/// `must_fail`: the reason's pattern as a string, or a table naming the failure's kind
/// (one of [`FAILURE_KINDS`]) and, optionally, the reason's pattern.
fn must_fail_of(ctx: &Ctx, value: &toml::Value) -> Result<(Option<Pattern>, Option<String>), CaseError> {
    const TAKES: &str = "a regex as a string, or a table { kind = \"<a failure kind>\", reason = \"<regex>\" }";
    let table = match value {
        toml::Value::String(source) => return Ok((Some(ctx.regex("must_fail".into(), source)?), None)),
        toml::Value::Table(table) => table,
        other => return Err(ctx.err("must_fail", format!("{} is not accepted: {TAKES}", a_value(other)))),
    };
    if let Some(unknown) = table.keys().find(|key| *key != "kind" && *key != "reason") {
        return Err(ctx.err(format!("must_fail.{unknown}"), "not a field of must_fail: kind and reason only"));
    }
    let reason = match table.get("reason") {
        None => None,
        Some(toml::Value::String(source)) => Some(ctx.regex("must_fail.reason".into(), source)?),
        Some(other) => {
            return Err(ctx.err("must_fail.reason", format!("{} is not accepted: a regex, as a string", a_value(other))))
        }
    };
    let kinds = quoted(FAILURE_KINDS);
    let kind = match table.get("kind") {
        Some(toml::Value::String(kind)) if FAILURE_KINDS.contains(&kind.as_str()) => kind.clone(),
        Some(toml::Value::String(kind)) => {
            let near = did_you_mean(&nearest(kind, FAILURE_KINDS.iter().copied()));
            let message = match near.is_empty() {
                true => format!("{kind:?} is not accepted: one of {kinds}"),
                false => format!("{kind:?} is not accepted; {near} One of {kinds}"),
            };
            return Err(ctx.err("must_fail.kind", message));
        }
        Some(other) => {
            return Err(ctx.err("must_fail.kind", format!("{} is not accepted: one of {kinds}", a_value(other))))
        }
        None => return Err(ctx.err("must_fail.kind", format!("required in a must_fail table: one of {kinds}"))),
    };
    Ok((reason, Some(kind)))
}

/// A TOML value's type with its article, for messages: "an integer", "a boolean".
fn a_value(value: &toml::Value) -> String {
    let name = value.type_str();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {name}")
}

#[cfg(test)]
mod every_field {
    use super::*;
    use crate::fields::Shape;

    /// The least case of each kind that parses.
    fn minimal(kind: &str) -> toml::Table {
        let text = match kind {
            "boot" => "arch = [\"rv64\"]\nprograms = [\"logsrv\"]\nexpect = ['x']\n",
            "build" => "arch = [\"rv64\"]\npackage = \"smoke\"\nbin = \"smoke\"\n",
            "scripts" => "scripts = [\"x\"]\n",
            "gate" => "gate = \"docs\"\n",
            "ssh-loopback" => "server = \"openssh\"\nauthorized_keys = [\"alice\"]\n[[session]]\nuser = \"root\"\nsteps = [{ exit = 0 }]\n",
            _ => "",
        };
        let mut table: toml::Table = toml::from_str(text).unwrap();
        table.insert("description".into(), "d".into());
        table.insert("kind".into(), kind.into());
        table
    }

    #[test]
    fn a_value_of_the_wrong_type_in_any_field_is_refused_in_words_never_in_serdes() {
        let date = toml::Value::Datetime("1979-05-27".parse().unwrap());
        let mut checked = 0;
        for (kind, fields) in KINDS {
            let base = minimal(kind);
            assert!(crate::parse("tests/c.toml", &toml::to_string(&base).unwrap()).is_ok(), "{kind}");
            for field in COMMON.iter().chain(fields) {
                if field.shape == Shape::Any {
                    continue;
                }
                let mut values = vec![date.clone()];
                if matches!(field.shape, Shape::StrList | Shape::IntegerList | Shape::TableList) {
                    values.push(toml::Value::Array(vec![date.clone()]));
                }
                for value in values {
                    let mut table = base.clone();
                    table.insert(field.name.to_string(), value);
                    let text = toml::to_string(&table).unwrap();
                    let error = crate::parse("tests/c.toml", &text).expect_err(&text).to_string();
                    assert!(
                        error.contains(" is not accepted: ") && error.contains(field.accepted),
                        "kind {kind}, field {}: {error}",
                        field.name
                    );
                    assert!(!error.contains("invalid type") && !error.contains("expected"), "{error}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "{checked}");
    }

    #[test]
    fn the_common_fields_and_their_raw_struct_agree() {
        assert_eq!(names(COMMON), crate::fields::serde_names::<RawCommon>());
    }
}
