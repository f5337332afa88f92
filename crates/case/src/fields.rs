//! What each field of a case file holds, in words: the shape check that runs before serde,
//! so that a wrong type or a misspelt name is refused with the field, what it accepts and
//! the nearest accepted name, never with serde's "expected f64" or a list of every field
//! of every kind.
//!
//! The fields themselves are listed where they are read: the common ones in `validate`,
//! each kind's beside its raw struct in `kinds`.

use crate::common::{did_you_mean, nearest, shown, Ctx};
use crate::CaseError;

/// The TOML shape a field takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Bool,
    /// An integer or a float.
    Seconds,
    Integer,
    Str,
    /// A list of strings.
    StrList,
    /// A list of integers.
    IntegerList,
    /// A list of anything (checked by the field's own validation).
    List,
    Table,
    /// A list of tables (`[[input]]`, `[[file]]`, inline tables).
    TableList,
    /// A table of strings.
    StrMap,
    /// Checked by the field's own validation.
    Any,
}

/// A field: its name, its shape and what it accepts, in words.
pub(crate) struct Field {
    pub name: &'static str,
    pub shape: Shape,
    pub accepted: &'static str,
}

pub(crate) const fn field(name: &'static str, shape: Shape, accepted: &'static str) -> Field {
    Field { name, shape, accepted }
}

/// What the fields of several kinds take, in words: one text, so a field reads alike in
/// every kind that has it.
pub(crate) const BOOL: &str = "true or false";
pub(crate) const SECONDS: &str = "a number of seconds, such as 30 or 2.5";
pub(crate) const REGEXES: &str = "a list of regexes, such as ['^ready$']";
pub(crate) const FEATURE_NAMES: &str = "a list of Cargo feature names, such as [\"fast\"]";
pub(crate) const PATH: &str = "a path, relative to the workspace root";
pub(crate) const SESSIONS: &str = "[[session]] tables, each with user and steps";

/// Fields that several kinds take, each defined once.
pub(crate) const ARCH: Field =
    field("arch", Shape::StrList, "a list of widths: \"rv64\", \"rv32\", \"x86_64\", \"aarch64\"");
pub(crate) const TIMEOUT_SECS: Field = field("timeout_secs", Shape::Seconds, SECONDS);
pub(crate) const FEATURES: Field = field("features", Shape::StrList, FEATURE_NAMES);
pub(crate) const TOOLS: Field = field("tools", Shape::StrList, "a list of program names on the path, such as [\"sh\"]");

/// Fields of features the bench will bring later: a case using one is refused as "not
/// supported yet" (before its fields are checked), rather than as a misspelling.
pub(crate) const LATER: [&str; 3] = ["launch", "late_cores", "grant"];

/// The names of `fields`, in order.
pub(crate) fn names(fields: &[Field]) -> Vec<&'static str> {
    fields.iter().map(|f| f.name).collect()
}

fn fits(shape: Shape, value: &toml::Value) -> Result<(), Option<usize>> {
    use toml::Value as V;
    let each = |items: &Vec<V>, ok: fn(&V) -> bool| match items.iter().position(|item| !ok(item)) {
        None => Ok(()),
        Some(index) => Err(Some(index)),
    };
    match (shape, value) {
        (Shape::Any, _)
        | (Shape::Bool, V::Boolean(_))
        | (Shape::Seconds, V::Integer(_) | V::Float(_))
        | (Shape::Integer, V::Integer(_))
        | (Shape::Str, V::String(_))
        | (Shape::List, V::Array(_))
        | (Shape::Table, V::Table(_)) => Ok(()),
        (Shape::StrList, V::Array(items)) => each(items, |v| v.is_str()),
        (Shape::IntegerList, V::Array(items)) => each(items, |v| v.is_integer()),
        (Shape::TableList, V::Array(items)) => each(items, |v| v.is_table()),
        (Shape::StrMap, V::Table(table)) => match table.values().any(|v| !v.is_str()) {
            false => Ok(()),
            true => Err(None),
        },
        _ => Err(None),
    }
}

/// Check the keys of one table against the fields it accepts, every refusal of the table
/// gathered (the top level's in the file's order): an unknown key is refused with the
/// nearest accepted name and the accepted names;
/// a known key whose value has the wrong shape is refused with what the field accepts, in
/// words. `prefix` is the table's own path (`guest.`, `input[0].`); `whose` says whose
/// fields they are ("kind \"boot\"", "`[guest]`"); `elsewhere` may say who else takes a key.
pub(crate) fn check_table<'f>(
    ctx: &Ctx,
    table: &toml::Table,
    fields: impl IntoIterator<Item = &'f Field>,
    prefix: &str,
    whose: &str,
    elsewhere: &dyn Fn(&str) -> Option<String>,
) -> Result<(), CaseError> {
    let fields: Vec<&Field> = fields.into_iter().collect();
    let accepted: Vec<&str> = fields.iter().map(|f| f.name).collect();
    let mut errors = Vec::new();
    for (key, value) in table {
        let at = format!("{prefix}{key}");
        let Some(field) = fields.iter().find(|f| f.name == key) else {
            let mut message = format!("not a field of {whose}");
            if let Some(other) = elsewhere(key) {
                message.push_str(&format!(" ({other})"));
            }
            if nearest(key, accepted.iter().copied()).is_empty() {
                message.push('.');
            }
            let near = did_you_mean(&nearest(key, accepted.iter().copied()));
            if !near.is_empty() {
                message.push_str(&format!("; {near}"));
            }
            message.push_str(&format!(" Accepted: {}", accepted.join(", ")));
            errors.push(ctx.err(at, message));
            continue;
        };
        match fits(field.shape, value) {
            Ok(()) => {}
            Err(None) => errors.push(ctx.err(at, format!("{} is not accepted: {}", shown(value), field.accepted))),
            Err(Some(index)) => {
                let item = &value.as_array().expect("a list")[index];
                errors.push(ctx.err(
                    format!("{at}[{index}]"),
                    format!("{} is not accepted: {at} is {}", shown(item), field.accepted),
                ));
            }
        }
    }
    ctx.all(errors)
}

/// The field names serde reads for `T`, in declaration order, for the tests that hold each
/// raw struct and its list of fields together.
#[cfg(test)]
pub(crate) fn serde_names<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{self, value::Error, Visitor};

    struct Names<'a>(&'a mut Option<&'static [&'static str]>);

    impl<'de> de::Deserializer<'de> for Names<'_> {
        type Error = Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Error> {
            *self.0 = Some(fields);
            Err(de::Error::custom("names taken"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    let mut names = None;
    let _ = T::deserialize(Names(&mut names));
    names.expect("a struct with named fields")
}
