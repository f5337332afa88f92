//! What each field of a case file holds, in words: the shape check that runs before serde,
//! so that a wrong type or a misspelt name is refused with the field, what it accepts and
//! the nearest accepted name, never with serde's "expected f64" or a list of every field
//! of every kind.

use crate::validate::Ctx;
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

const fn field(name: &'static str, shape: Shape, accepted: &'static str) -> Field {
    Field { name, shape, accepted }
}

const BOOL: &str = "true or false";
const SECONDS: &str = "a number of seconds, such as 30 or 2.5";
const REGEXES: &str = "a list of regexes, such as ['^ready$']";
const FEATURES: &str = "a list of Cargo feature names, such as [\"fast\"]";
const PATH: &str = "a path, relative to the workspace root";
const TOOLS: &str = "a list of program names on the path, such as [\"sh\"]";

/// Every top-level field of a case file, of every kind.
pub(crate) const TOP: &[Field] = &[
    field("description", Shape::Str, "one line saying what the case proves, as a string"),
    field("kind", Shape::Str, "one of \"boot\", \"host-tests\", \"build\", \"scripts\", \"gate\""),
    field("whole_run", Shape::Bool, BOOL),
    field("must_fail", Shape::Str, "a regex the failure's reason must match, as a string"),
    field("arch", Shape::StrList, "a list of widths, such as [\"rv64\", \"rv32\"]"),
    field("programs", Shape::List, "a list of programs, such as [\"logsrv\", { bin = \"checker\" }]"),
    field("smp", Shape::Any, "a list of hart counts, such as [1, 2], or one per width"),
    field("keep_smp", Shape::Bool, BOOL),
    field("timeout_secs_smp", Shape::Seconds, SECONDS),
    field("memory_mib", Shape::Integer, "a whole number of MiB, such as 256"),
    field("timeout_secs", Shape::Seconds, SECONDS),
    field("icount", Shape::Str, "QEMU's -icount option string, such as \"shift=3,sleep=off\""),
    field("qemu_seed", Shape::Integer, "a whole number from 0, such as 7"),
    field("rtc_base", Shape::Any, "where the guest's RTC starts: \"utc\", \"localtime\" or a date or date-time"),
    field("repeat_exactly", Shape::Bool, "true or false"),
    field("kernel_features", Shape::StrList, FEATURES),
    field("debug_assertions", Shape::Bool, BOOL),
    field("expect", Shape::StrList, REGEXES),
    field("forbid", Shape::StrList, REGEXES),
    field("poweroff", Shape::Bool, BOOL),
    field("poweroff_status", Shape::Integer, "an exit status, a whole number from 0 to 255"),
    field("input", Shape::TableList, "[[input]] tables, each with after and send"),
    field("firmware", Shape::Str, "\"default\", \"none\", or a path to an image"),
    field("guest", Shape::Table, "a [guest] table, with kernel or recipe"),
    field("reporter", Shape::Str, "the name of a program the first one starts"),
    field("allow_panic", Shape::Bool, BOOL),
    field("tamper_bundle", Shape::Bool, BOOL),
    field("sign_bare_archive", Shape::Bool, BOOL),
    field("short_initrd", Shape::Integer, "a whole number of bytes above 0"),
    field("device_tree", Shape::TableList, "a list of edits, such as [{ drop = \"/chosen/rng-seed\" }]"),
    field("distinct_across_boots", Shape::StrList, REGEXES),
    field("distinct", Shape::StrList, REGEXES),
    field("file", Shape::TableList, "[[file]] tables, each with name and from"),
    field("workspace", Shape::Str, PATH),
    field("features", Shape::StrList, FEATURES),
    field("tools", Shape::StrList, TOOLS),
    field("fanout", Shape::Str, "\"value\", \"file\" or \"test\""),
    field("values", Shape::Str, "a shell command printing one value per line"),
    field("env", Shape::Str, "an environment variable name, such as \"CASE\""),
    field("test", Shape::Str, "a test target's name"),
    field("tests", Shape::StrList, "a list of test targets' names"),
    field("filter", Shape::Str, "a regex, as a string"),
    field("skip", Shape::StrList, "a list of tests' full names"),
    field("vars", Shape::StrMap, "a table of strings, such as { RUST_LOG = \"debug\" }"),
    field("cores", Shape::Integer, "a whole number of cores, such as 2"),
    field("late", Shape::StrList, "a list of jobs' values or test names"),
    field("package", Shape::Str, "a package of the guest workspace"),
    field("bin", Shape::Str, "a binary's name"),
    field("profile", Shape::Str, "\"release\" or \"checked\""),
    field("forbid_in_binary", Shape::StrList, "a list of byte strings, such as [\"password\"]"),
    field("build", Shape::StrList, "a list of shell commands"),
    field("scripts", Shape::StrList, "a list of scripts' paths"),
    field("gate", Shape::Str, "a gate's name, such as \"no-cruft\""),
    field("tree", Shape::Str, PATH),
    field("config", Shape::Str, "a path, relative to tree"),
    // Fields of features the bench will bring later: read only to be refused as "not
    // supported yet" (validate.rs), never listed as accepted.
    field("launch", Shape::Any, ""),
    field("post_check", Shape::Any, ""),
    field("memory", Shape::Any, ""),
    field("expect_after", Shape::Any, ""),
    field("disk", Shape::Any, ""),
    field("net", Shape::Any, ""),
    field("session", Shape::Any, ""),
    field("late_cores", Shape::Any, ""),
    field("grant", Shape::Any, ""),
];

/// The fields of a `[guest]` table.
pub(crate) const GUEST: &[Field] = &[
    field("kernel", Shape::Str, "the kernel image's path"),
    field("recipe", Shape::Str, "a guest recipe's path"),
    field("initrd", Shape::Str, "an initrd's path"),
    field("append", Shape::Str, "the kernel command line, as a string"),
    field("firmware", Shape::Str, "\"default\", \"none\", or a path to an image"),
    field("machine", Shape::Str, "a QEMU machine option string, such as \"virt\""),
    field("qemu_args", Shape::StrList, "a list of QEMU arguments, such as [\"-device\", \"virtio-rng-device\"]"),
];

/// The fields of an `[[input]]` table.
pub(crate) const INPUT: &[Field] = &[
    field("after", Shape::Str, "a regex a shown line must match, as a string"),
    field("send", Shape::Str, "the text to type, as a string (add \\n for Enter)"),
];

/// The names in `candidates` nearest to `word` by edit distance (transpositions count
/// one), if any is near enough to be a typo of it: at most a third of its length, and at
/// most 3 edits, and never all of it. Several as near are all given, in order.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    let mut best: Vec<(usize, &str)> = Vec::new();
    for candidate in candidates {
        let distance = strsim::damerau_levenshtein(word, candidate);
        if distance == 0 || distance > limit || distance >= candidate.chars().count() {
            continue;
        }
        match best.first() {
            Some((d, _)) if distance > *d => {}
            Some((d, _)) if distance < *d => best = vec![(distance, candidate)],
            _ => {
                if !best.iter().any(|(_, c)| *c == candidate) {
                    best.push((distance, candidate))
                }
            }
        }
    }
    best.into_iter().map(|(_, c)| c).take(3).collect()
}

/// "; did you mean `a`?" (or "`a` or `b`"), or nothing.
pub fn did_you_mean(near: &[&str]) -> String {
    match near {
        [] => String::new(),
        names => {
            let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("did you mean {}?", quoted.join(" or "))
        }
    }
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
        (Shape::TableList, V::Array(items)) => each(items, |v| v.is_table()),
        (Shape::StrMap, V::Table(table)) => match table.values().any(|v| !v.is_str()) {
            false => Ok(()),
            true => Err(None),
        },
        _ => Err(None),
    }
}

/// Check the keys of one table against the fields it accepts (`accepted`, a subset of
/// `catalogue`'s names): an unknown key is refused with the nearest accepted name and the
/// accepted names; a known key whose value has the wrong shape is refused with what the
/// field accepts, in words. `prefix` is the table's own path (`guest.`, `input[0].`);
/// `whose` says whose fields they are ("kind \"boot\"", "[guest]").
pub(crate) fn check_table(
    ctx: &Ctx,
    table: &toml::Table,
    catalogue: &[Field],
    accepted: &[&str],
    prefix: &str,
    whose: &str,
    elsewhere: &dyn Fn(&str) -> Option<String>,
) -> Result<(), CaseError> {
    for (key, value) in table {
        let at = format!("{prefix}{key}");
        let Some(field) = catalogue.iter().find(|f| f.name == key).filter(|f| accepted.contains(&f.name)) else {
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
            return Err(ctx.err(at, message));
        };
        match fits(field.shape, value) {
            Ok(()) => {}
            Err(None) => return Err(ctx.err(at, format!("{} is not accepted: {}", shown(value), field.accepted))),
            Err(Some(index)) => {
                let item = &value.as_array().expect("a list")[index];
                return Err(ctx.err(
                    format!("{at}[{index}]"),
                    format!("{} is not accepted: {at} is {}", shown(item), field.accepted),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_names_are_typos_not_strangers() {
        assert_eq!(nearest("expext", ["expect", "forbid", "arch"]), ["expect"]);
        assert_eq!(nearest("bench-bot", ["bench-boot", "bench-host-tests", "bench-reset"]), ["bench-boot"]);
        assert_eq!(nearest("tiemout_secs", ["timeout_secs", "timeout_secs_smp"]), ["timeout_secs"]);
        assert!(nearest("zzz", ["arch", "smp"]).is_empty());
        assert_eq!(did_you_mean(&["a", "b"]), "did you mean `a` or `b`?");
    }

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

#[cfg(test)]
mod every_field {
    use super::*;

    /// The least case of each kind that parses.
    fn minimal(kind: &str) -> toml::Table {
        let text = match kind {
            "boot" => "arch = [\"rv64\"]\nprograms = [\"logsrv\"]\nexpect = ['x']\n",
            "build" => "arch = [\"rv64\"]\npackage = \"smoke\"\nbin = \"smoke\"\n",
            "scripts" => "scripts = [\"x\"]\n",
            "gate" => "gate = \"docs\"\n",
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
        for kind in ["boot", "host-tests", "build", "scripts", "gate"] {
            let base = minimal(kind);
            assert!(crate::parse("tests/c.toml", &toml::to_string(&base).unwrap()).is_ok(), "{kind}");
            let names = crate::validate::COMMON_FIELDS.iter().chain(crate::kinds::fields_of(kind));
            for name in names {
                let field = TOP.iter().find(|f| f.name == *name).unwrap_or_else(|| panic!("{name} is not in TOP"));
                if field.shape == Shape::Any {
                    continue;
                }
                let mut values = vec![date.clone()];
                if matches!(field.shape, Shape::StrList | Shape::TableList) {
                    values.push(toml::Value::Array(vec![date.clone()]));
                }
                for value in values {
                    let mut table = base.clone();
                    table.insert(name.to_string(), value);
                    let text = toml::to_string(&table).unwrap();
                    let error = crate::parse("tests/c.toml", &text).expect_err(&text).to_string();
                    assert!(
                        error.contains(" is not accepted: ") && error.contains(field.accepted),
                        "kind {kind}, field {name}: {error}"
                    );
                    assert!(!error.contains("invalid type") && !error.contains("expected"), "{error}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "{checked}");
    }
}
