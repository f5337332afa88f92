//! The entry point: a case file's text to a [`Case`]. It reads what every case has (the
//! common fields, [`COMMON`] and [`RawCommon`]), then hands the rest to its kind
//! (`kinds`), refusing with the file, the field and what is accepted.

use std::path::PathBuf;

use serde::Deserialize;

use crate::common::{did_you_mean, nearest, quoted, Ctx, Refusals};
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
        return Err(ctx.err(
            "file name",
            format!("case name {name:?} is not accepted: ASCII letters and digits, '-' and '_' only"),
        ));
    }
    // Stage one: the TOML itself, then every field's name and shape, in words. Every
    // refusal of the top level is gathered, in the file's order, before it stops.
    control_characters(&ctx, text)?;
    let mut table: toml::Table = toml::from_str(text).map_err(|error| syntax_error(&ctx, text, &error))?;
    let ctx = Ctx::with_keys(file, text);
    let mut refused: Vec<CaseError> = Vec::new();
    // The common fields first: they say which kind reads the rest.
    let common_names = names(COMMON);
    let common: toml::Table = table
        .iter()
        .filter(|(key, _)| common_names.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for key in common_names {
        table.remove(key);
    }
    let common = check_table(&ctx, &common, COMMON, "", "every case", &|_| None)
        .and_then(|()| ctx.read::<RawCommon>(common))
        .map_err(|error| refused.push(error))
        .ok();
    let description =
        match common.as_ref().map(|c| c.description.as_deref()) {
            None => None,
            Some(None) => {
                refused.push(ctx.err("description", "required: one line saying what the case proves"));
                None
            }
            Some(Some(blank)) if blank.trim().is_empty() => {
                refused.push(ctx.err(
                    "description",
                    format!("{blank:?} is not accepted: blank; one line saying what the case proves"),
                ));
                None
            }
            Some(Some(description)) => Some(description.to_string()),
        };
    let kinds: Vec<&str> = KINDS.iter().map(|(name, _)| *name).collect();
    let kind = match common.as_ref().map(|c| c.kind.as_deref()) {
        None => None,
        Some(None) => {
            refused.push(ctx.err("kind", format!("required: one of {}", quoted(&kinds))));
            None
        }
        Some(Some(kind)) if !kinds.contains(&kind) => {
            let near = did_you_mean(&nearest(kind, kinds.iter().copied()));
            let near = if near.is_empty() { String::new() } else { format!("; {near}") };
            refused.push(ctx.err("kind", format!("{kind:?} is not accepted: one of {}{near}", quoted(&kinds))));
            None
        }
        Some(Some(kind)) => kinds.iter().copied().find(|k| *k == kind),
    };
    for later in LATER {
        if table.remove(later).is_some() {
            refused.push(ctx.err(later, "not supported yet by this bench"));
        }
    }
    // The fields of this kind, and only those, are named: never another kind's. (A
    // kind refused or missing leaves the rest unchecked: what it takes is not known.)
    if let Some(kind) = kind {
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
        if let Err(error) = check_table(&ctx, &table, fields, "", &whose, &elsewhere) {
            refused.push(error);
        }
        refused.extend(crate::kinds::check_nested(&ctx, kind, &table));
    }
    // Stage one's refusals end the collection: stage two reads the fields through serde,
    // which takes only a table whose every name and shape stage one accepted (a field
    // dropped for its shape would read as missing and be refused for what the file does not say).
    ctx.all(refused)?;
    let (Some(common), Some(description), Some(kind)) = (common, description, kind) else {
        unreachable!("each is refused above when it is not there")
    };
    let raw = crate::kinds::read(&ctx, kind, table)?;

    // Stage two: what the fields mean. Every refusal of it is gathered too, in the
    // file's order: `must_fail`'s beside the kind's (whose fields a refused `must_fail`
    // still marks a self-check: the person meant one).
    let mut refused = Refusals::new();
    let self_check = common.must_fail.is_some();
    let must_fail = match &common.must_fail {
        Some(value) => refused.keep(must_fail_of(&ctx, value)),
        None => Some((None, None)),
    };
    let kind = refused.keep(crate::kinds::validate(&ctx, raw, self_check));
    let ((must_fail, must_fail_kind), kind) = refused.end(&ctx, must_fail.zip(kind))?;
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
    // Each of the table's refusals: its keys by name (the TOML reader keeps no order
    // within a table, as for every table below the top level), a missing kind last.
    let mut refused = Refusals::new();
    let mut reason = Some(None);
    let mut kind = None;
    let kinds = quoted(FAILURE_KINDS);
    for (key, value) in table {
        match (key.as_str(), value) {
            ("reason", toml::Value::String(source)) => {
                reason = refused.keep(ctx.regex("must_fail.reason".into(), source)).map(Some)
            }
            ("reason", other) => {
                reason = None;
                refused.push(
                    ctx.err("must_fail.reason", format!("{} is not accepted: a regex, as a string", a_value(other))),
                );
            }
            ("kind", toml::Value::String(name)) if FAILURE_KINDS.contains(&name.as_str()) => kind = Some(name.clone()),
            ("kind", toml::Value::String(name)) => {
                let near = did_you_mean(&nearest(name, FAILURE_KINDS.iter().copied()));
                let message = match near.is_empty() {
                    true => format!("{name:?} is not accepted: one of {kinds}"),
                    false => format!("{name:?} is not accepted; {near} One of {kinds}"),
                };
                refused.push(ctx.err("must_fail.kind", message));
            }
            ("kind", other) => {
                refused.push(ctx.err("must_fail.kind", format!("{} is not accepted: one of {kinds}", a_value(other))))
            }
            (unknown, _) => {
                refused.push(ctx.err(format!("must_fail.{unknown}"), "not a field of must_fail: kind and reason only"))
            }
        }
    }
    if !table.contains_key("kind") {
        refused.push(ctx.err("must_fail.kind", format!("required in a must_fail table: one of {kinds}")));
    }
    let (reason, kind) = refused.end(ctx, reason.zip(kind))?;
    Ok((reason, Some(kind)))
}

/// A TOML value's type with its article, for messages: "an integer", "a boolean".
fn a_value(value: &toml::Value) -> String {
    let name = value.type_str();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {name}")
}

/// How deep TOML arrays and inline tables may nest: the `toml` crate refuses deeper
/// (a case needs three at most).
const TOML_NESTING_MAX: usize = 79;

/// A control character other than a tab or a line's end: TOML takes none, and a
/// terminal would not show one in a message. Refused with its place, before the TOML.
fn control_characters(ctx: &Ctx, text: &str) -> Result<(), CaseError> {
    let at = text
        .char_indices()
        .find(|(i, c)| c.is_control() && *c != '\t' && *c != '\n' && !(*c == '\r' && text[i + 1..].starts_with('\n')));
    let Some((index, c)) = at else { return Ok(()) };
    let (line, column) = place(text, index);
    let what = if c == '\0' { "a NUL byte".to_string() } else { format!("the control character {c:?}") };
    Err(ctx.err(
        format!("line {line}, column {column}"),
        format!("{what} is not accepted: a case file is TOML text, where only a tab and a line's end are control characters"),
    ))
}

/// `index` within `text` and on a character's first byte.
fn boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The 1-based line and column (in characters) of byte `index` of `text`.
fn place(text: &str, index: usize) -> (usize, usize) {
    let index = boundary(text, index);
    let start = text[..index].rfind('\n').map_or(0, |nl| nl + 1);
    (1 + text[..index].matches('\n').count(), 1 + text[start..index].chars().count())
}

/// The line of `text` holding byte `index`, with a caret under its column, each on a
/// line of its own indented alike (a long line is cut around the column).
fn snippet(text: &str, index: usize) -> String {
    const AROUND: usize = 60;
    let index = boundary(text, index);
    let start = text[..index].rfind('\n').map_or(0, |nl| nl + 1);
    let end = text[index..].find('\n').map_or(text.len(), |nl| index + nl);
    let line: Vec<char> =
        text[start..end].trim_end_matches('\r').chars().map(|c| if c == '\t' { ' ' } else { c }).collect();
    let column = text[start..index].chars().count();
    let from = column.saturating_sub(AROUND).min(line.len());
    let to = (column + AROUND).min(line.len());
    let head = if from > 0 { "..." } else { "" };
    let tail = if to < line.len() { "..." } else { "" };
    let shown: String = line[from..to.max(from)].iter().collect();
    format!("    {head}{shown}{tail}\n    {}^", " ".repeat(head.len() + column - from))
}

/// A TOML syntax error with its line, column and the line itself, in words: the
/// `toml` crate's messages that name no field nor limit are said whole.
fn syntax_error(ctx: &Ctx, text: &str, error: &toml::de::Error) -> CaseError {
    let Some(span) = error.span() else { return ctx.err("toml", error.message().trim().to_string()) };
    let (line, column) = place(text, span.start);
    let message = error.message().trim();
    let message = match message {
        "number too large to fit in target type" => too_large(text, span.start),
        "recursion limit exceeded" => format!(
            "arrays and inline tables nested more than {TOML_NESTING_MAX} deep are not accepted (the most the TOML reader takes; a case needs three)"
        ),
        other => other.lines().collect::<Vec<_>>().join("; "),
    };
    ctx.err(format!("line {line}, column {column}"), format!("{message}:\n{}", snippet(text, span.start)))
}

/// "number too large" with the field it is for (the key before it on its line) and
/// what TOML and the field take.
fn too_large(text: &str, index: usize) -> String {
    let index = boundary(text, index);
    let start = text[..index].rfind('\n').map_or(0, |nl| nl + 1);
    let before = &text[start..index];
    let key = before.rfind('=').map(|eq| {
        let left = before[..eq].trim_end();
        let from =
            left.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')).map_or(0, |i| i + 1);
        &left[from..]
    });
    let value: String =
        text[index..].chars().take_while(|c| c.is_ascii_alphanumeric() || "+-_.".contains(*c)).collect();
    let range = "TOML integers are from -9223372036854775808 to 9223372036854775807";
    let too_large = format!("{value} is not accepted: a number too large ({range})");
    match key.filter(|k| !k.is_empty()) {
        None => too_large,
        Some(key) => {
            let field = COMMON.iter().chain(KINDS.iter().flat_map(|(_, fields)| fields.iter())).find(|f| f.name == key);
            match field {
                Some(field) => format!("{key}: {too_large}; {key} is {}", field.accepted),
                None => format!("{key}: {too_large}"),
            }
        }
    }
}

#[cfg(test)]
mod toml_errors {
    fn refusal(text: &str) -> String {
        crate::parse("tests/c.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn every_refusal_of_the_top_level_comes_in_the_files_order() {
        let text = "kind = \"boot\"\nzzz = 1\ndescription = \"  \"\naaa = 2\ntimeout_secs = \"30\"\nrepeat = 3\n";
        let error = crate::parse("tests/c.toml", text).unwrap_err();
        let fields: Vec<&str> =
            std::iter::once(error.field.as_str()).chain(error.also.iter().map(|e| e.field.as_str())).collect();
        assert_eq!(fields, ["zzz", "description", "aaa", "timeout_secs", "repeat"], "{error}");
        let each = error.each();
        assert_eq!(each.len(), 5);
        assert!(each[0].starts_with("tests/c.toml: zzz: not a field of kind \"boot\""), "{each:?}");
        assert!(each[3].starts_with("tests/c.toml: timeout_secs: \"30\" is not accepted: "), "{each:?}");
        assert_eq!(error.to_string(), each.join("\n"));
        // And the tables within it, each after the top level's refusals before it.
        let nested = "kind = \"boot\"\ndescription = \"d\"\nbogus = 1\n[[input]]\nafter = 'x'\nsnd = 'y'\n[guest]\nkernl = \"k\"\n";
        let error = crate::parse("tests/c.toml", nested).unwrap_err();
        let fields: Vec<&str> =
            std::iter::once(error.field.as_str()).chain(error.also.iter().map(|e| e.field.as_str())).collect();
        assert_eq!(fields, ["bogus", "input[0].snd", "guest.kernl"], "{error}");
    }

    /// Each refusal's field, in the order given.
    fn fields(error: &crate::CaseError) -> Vec<&str> {
        std::iter::once(error.field.as_str()).chain(error.also.iter().map(|e| e.field.as_str())).collect()
    }

    #[test]
    fn every_refusal_of_what_the_fields_mean_comes_in_the_files_order() {
        // Three mistakes stage two finds, written in the reverse of the order it checks them.
        let text = "description = \"d\"\nkind = \"boot\"\nexpect = ['(unclosed']\nprograms = [\"logsrv\"]\nqemu_seed = -1\narch = [\"rv64\"]\nmemory_mib = 1\n";
        let error = crate::parse("tests/c.toml", text).unwrap_err();
        assert_eq!(fields(&error), ["expect[0]", "qemu_seed", "memory_mib"], "{error}");
        let each = error.each();
        assert!(each[0].starts_with("tests/c.toml: expect[0]: not a valid regex:\n"), "{each:?}");
        assert_eq!(each[1], "tests/c.toml: qemu_seed: -1 is not accepted: a number from 0");
        assert_eq!(each[2], "tests/c.toml: memory_mib: 1 is not accepted: 16 to 16384");
        // Every bad item of a list, and must_fail's beside the kind's, each in its place.
        let more = "must_fail = { kind = \"nope\", reason = 3 }\ndescription = \"d\"\nkind = \"boot\"\nexpect = ['(', 'ok', '[']\nprograms = [\"logsrv\"]\narch = [\"rv64\"]\ntimeout_secs = 0\n";
        let error = crate::parse("tests/c.toml", more).unwrap_err();
        assert_eq!(
            fields(&error),
            ["must_fail.kind", "must_fail.reason", "expect[0]", "expect[2]", "timeout_secs"],
            "{error}"
        );
        // Another kind's alike.
        let gate = "config = \"/etc\"\ndescription = \"d\"\nkind = \"gate\"\ngate = \"nope\"\ntree = \"..\"\n";
        let error = crate::parse("tests/c.toml", gate).unwrap_err();
        assert_eq!(fields(&error), ["config", "gate", "tree"], "{error}");
    }

    #[test]
    fn every_refusal_of_a_list_of_tables_and_of_a_table_comes_each_in_turn() {
        let text = "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [\"logsrv\", \"logsrv\"]\nexpect = ['x']\npost_check = { command = [\"x\", \"\"], timeout_secs = 4000 }\n[[session]]\nsteps = [{ exit = 0 }]\n[[session]]\nuser = \"root\"\nsteps = []\n";
        let error = crate::parse("tests/c.toml", text).unwrap_err();
        assert_eq!(
            fields(&error),
            ["programs[1]", "post_check.command[1]", "post_check.timeout_secs", "session[0].user", "session[1].steps"],
            "{error}"
        );
        // [net]: each list's items, each peer; a dial's port is not checked against a
        // forward list that is refused.
        let net = "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [\"logsrv\"]\nexpect = ['x']\n[net]\nforward = [0, 22]\ncapture_expect = ['(']\n[[net.peer]]\naddr = \"nope\"\nconnections = 1\n[[net.dial]]\nport = 99\nsend = \"x\"\nexpect = \"y\"\n";
        let error = crate::parse("tests/c.toml", net).unwrap_err();
        assert_eq!(fields(&error), ["net.forward[0]", "net.peer[0].addr", "net.capture_expect[0]"], "{error}");
    }

    /// The fields of the refusals of a boot case with `more` after its required fields.
    fn boot_fields(more: &str) -> Vec<String> {
        let text = format!("description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['x']\n{more}");
        let error = crate::parse("tests/c.toml", &text).expect_err(&text);
        fields(&error).into_iter().map(str::to_string).collect()
    }

    /// A [guest] table and port 22 forwarded, for sessions.
    const SSH: &str = "[guest]\nrecipe = \"g.toml\"\n[net]\nforward = [22]\n";

    #[test]
    fn every_refusal_within_one_session_comes_field_by_field_then_step_by_step() {
        // The fields in the order of SESSION, then each step; a send's group is not
        // checked against an expect that is refused, nor the key the user would give.
        let session = "[[session]]\nuser = \"-root\"\nname = \"..\"\nforbid = ['(']\ncommand = \" \"\n\
                       steps = [{ expect = '[' }, { send = \"$1\" }, { exit = 300 }, { send = \"x\" }, { exit = 0 }, { mark = \"m m\" }]\n";
        assert_eq!(
            boot_fields(&format!("{SSH}{session}")),
            [
                "session[0].user",
                "session[0].name",
                "session[0].forbid[0]",
                "session[0].command",
                "session[0].steps[0].expect",
                "session[0].steps[2].exit",
                "session[0].steps[3].send",
                "session[0].steps[4].exit",
                "session[0].steps[5].mark",
            ]
        );
        let text = format!("description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['x']\n{SSH}{session}");
        let said = crate::parse("tests/c.toml", &text).unwrap_err().to_string();
        assert!(
            said.contains("steps[4].exit: a second end: session[0].steps[2].exit ended this session already"),
            "{said}"
        );
        // Steps whose key is refused count for no rule of order; a within out of order
        // is refused for that and for its value, and bounds nothing.
        let steps = "[[session]]\nuser = \"root\"\nkey = \"alice\"\n\
                     steps = [{ within = 1 }, {}, { within = 2 }, { within = 0 }, { expect = 'x', send = \"y\" }, { exit = 0 }]\n";
        assert_eq!(
            boot_fields(&format!("{SSH}{steps}")),
            ["session[0].steps[1]", "session[0].steps[3].within", "session[0].steps[3].within", "session[0].steps[4]"]
        );
    }

    #[test]
    fn every_refusal_within_one_peer_dial_or_poke_comes_in_turn() {
        let net = "programs = [\"logsrv\"]\n[net]\nforward = [7]\n\
                   [[net.peer]]\naddr = \"10.0.2.9:7\"\nconnections = 1001\n\
                   [[net.peer]]\naddr = \"10.0.9.100:7\"\nconnections = 1\n\
                   [[net.dial]]\nport = 0\nsend = \"\"\nafter = '('\n\
                   [[net.dial]]\nport = 22\nsend = \"x\"\nexpect = \"y\"\n\
                   [net.poke]\nport = 70000\npayload = \"\"\nafter = '['\n";
        // A dial's port is checked against forward only once it is a port.
        assert_eq!(
            boot_fields(net),
            [
                "net.peer[0].addr",
                "net.peer[0].connections",
                "net.dial[0].port",
                "net.dial[0].send",
                "net.dial[0].expect",
                "net.dial[0].after",
                "net.dial[1].port",
                "net.poke.port",
                "net.poke.payload",
                "net.poke.after",
            ]
        );
    }

    #[test]
    fn every_refusal_within_one_disk_table_comes_in_turn() {
        // A GPT's room is not measured with a size refused; flip's own fields are checked
        // beside the refusal of its place.
        let disks = "programs = [\"logsrv\"]\n\
                     [disk]\nsize_kib = 5\npartitions = 0\nkeep = true\nflip = { partition = \"a\", file = \"b\" }\nresize_kept_kib = 3\n\
                     [vault]\nrecipe = \" \"\npartitions = 2\nflip = { partition = \"\", file = \"../x\" }\n";
        assert_eq!(
            boot_fields(disks),
            [
                "disk.size_kib",
                "disk.partitions",
                "disk.keep",
                "disk.flip",
                "disk.resize_kept_kib",
                "vault.partitions",
                "vault.recipe",
                "vault.flip.partition",
                "vault.flip.file",
            ]
        );
    }

    #[test]
    fn every_refusal_within_guest_comes_in_turn() {
        let guest = "[guest]\nkernel = \" \"\ninitrd = \"\"\nfirmware = \"\"\nmachine = \"a b\"\n\
                     qemu_args = [\"-serial\", \"x\", \"--kernel\"]\n\
                     overlay = [{ to = \"/etc\", mode = 0o10000 }, { from = \"a\", to = \"etc/x\" }, { from = \"b\", to = \"etc/x\" }]\n\
                     symbols = \" \"\n";
        assert_eq!(
            boot_fields(guest),
            [
                "guest.kernel",
                "guest.initrd",
                "guest.firmware",
                "guest.machine",
                "guest.qemu_args[0]",
                "guest.qemu_args[2]",
                "guest.overlay[0].from",
                "guest.overlay[0].to",
                "guest.overlay[0].mode",
                "guest.overlay[2].to",
                "guest.symbols",
            ]
        );
    }

    #[test]
    fn every_refusal_within_idle_comes_in_turn() {
        // [idle]'s fields, then each rate of max by its name's place in the alphabet; a
        // rate with an unknown name has its ceiling checked too.
        let idle = "programs = [\"logsrv\"]\nclock = \"host\"\nclock_reason = \"host-time\"\n[idle]\nseconds = 0.5\nafter = '('\nmax = { u_timer = -3, s_timr = -1, interrupts = 2 }\n";
        assert_eq!(
            boot_fields(idle),
            ["idle.seconds", "idle.after", "idle.max.s_timr", "idle.max.s_timr", "idle.max.u_timer"]
        );
    }

    #[test]
    fn every_refusal_within_triage_comes_in_turn_naming_what_is_accepted() {
        let triage = "programs = [\"logsrv\"]\n[triage]\nrules = \"linx\"\nallow = [\"warning\", \"opps\"]\nforbid = [\"warning\", \"rcu-stal\"]\n";
        assert_eq!(boot_fields(triage), ["triage.rules", "triage.allow[1]", "triage.forbid[1]", "triage.forbid[0]"]);
        let text = format!("description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['x']\n{triage}");
        let each = crate::parse("tests/c.toml", &text).unwrap_err().each();
        assert!(
            each[0].starts_with("tests/c.toml: triage.rules: \"linx\" is not accepted; did you mean `linux`?"),
            "{each:?}"
        );
        assert!(each[0].ends_with("One of \"linux\", \"xv6\", \"reference\", \"generic\", \"off\""), "{each:?}");
        assert!(each[1].contains("\"opps\" is not accepted; did you mean `oops`?"), "{each:?}");
        assert!(each[3].contains("\"warning\" is in triage.allow too"), "{each:?}");
        let off = "programs = [\"logsrv\"]\n[triage]\nrules = \"off\"\nallow = [\"oops\"]\n";
        assert_eq!(boot_fields(off), ["triage.rules"]);
        let unknown = "programs = [\"logsrv\"]\n[triage]\nrule = \"linux\"\n";
        assert_eq!(boot_fields(unknown), ["triage.rule"]);
    }

    #[test]
    fn every_refusal_within_one_programs_entry_comes_in_turn() {
        // Budgets, keys not supported yet and unknown keys, then the form's fields; the
        // form is not told from keys of which one is refused, nor the features' names
        // checked in a list refused.
        let programs = "programs = [\"logsrv\", { package = \"p\", bin = \"\", features = [\"a b\", \"ok\"], budgets = [\"root\", \"\"] }, { bin = \"b\", erlang = 1, pth = \"x\" }, { corrupt = \"\", with = { entry = -1 } }]\n";
        assert_eq!(
            boot_fields(programs),
            [
                "programs[1].budgets[1]",
                "programs[1].features[0]",
                "programs[1].bin",
                "programs[2].erlang",
                "programs[2].pth",
                "programs[3].corrupt",
                "programs[3].with.entry",
            ]
        );
    }

    #[test]
    fn every_refusal_within_one_file_comes_in_turn() {
        // A [[file]]'s servers are not checked against a from that is refused.
        let files = "programs = [\"logsrv\"]\n\
                     [[file]]\nname = \"kernel\"\nfrom = \"\"\nservers = [{ name = \"\" }]\n\
                     [[file]]\nname = \"a b\"\nfrom = { bin = \"x\" }\nservers = [{ name = \"s\" }]\n";
        assert_eq!(
            boot_fields(files),
            ["file[0].name", "file[0].from", "file[0].servers[0]", "file[1].name", "file[1].servers"]
        );
    }

    #[test]
    fn every_refusal_within_one_device_tree_edit_comes_in_turn() {
        let edits = "programs = [\"logsrv\"]\n\
                     device_tree = [{ shrink = \"x\", to = -1 }, { set = \"/\", words = [1, -2, 4294967296] }, { drop = \"/a/b\" }]\n";
        assert_eq!(
            boot_fields(edits),
            [
                "device_tree[0].shrink",
                "device_tree[0].to",
                "device_tree[1].set",
                "device_tree[1].words[1]",
                "device_tree[1].words[2]",
            ]
        );
    }

    #[test]
    fn a_refused_field_leaves_the_checks_that_need_its_value_unchecked() {
        // smp names a width arch would have had; idle's window is measured against the
        // deadline: neither is refused for what the person did not write.
        let text = "description = \"d\"\nkind = \"boot\"\narch = [\"rv65\"]\nsmp = { rv64 = [2] }\nprograms = [\"logsrv\"]\nexpect = ['x']\ntimeout_secs = 0\nclock = \"host\"\nclock_reason = \"host-time\"\n[idle]\nseconds = 10\n";
        let error = crate::parse("tests/c.toml", text).unwrap_err();
        assert_eq!(fields(&error), ["arch[0]", "timeout_secs"], "{error}");
    }

    #[test]
    fn a_syntax_error_keeps_its_line_column_and_the_line_with_a_caret() {
        assert_eq!(
            refusal("description = \"x\"\nkind = \"boot\narch = []\n"),
            "tests/c.toml: line 2, column 13: invalid basic string:\n    kind = \"boot\n                ^"
        );
    }

    #[test]
    fn a_number_too_large_names_its_field_and_the_range() {
        assert_eq!(
            refusal("description = \"x\"\nkind = \"boot\"\ntimeout_secs = 99999999999999999999\n"),
            "tests/c.toml: line 3, column 16: timeout_secs: 99999999999999999999 is not accepted: a number too large (TOML integers are from -9223372036854775808 to 9223372036854775807); timeout_secs is a number of seconds, such as 30 or 2.5:\n    timeout_secs = 99999999999999999999\n                   ^"
        );
    }

    #[test]
    fn nesting_too_deep_names_the_limit() {
        let deep = format!("a = {}{}\n", "[".repeat(80), "]".repeat(80));
        let said = refusal(&deep);
        assert!(
            said.starts_with(
                "tests/c.toml: line 1, column 84: arrays and inline tables nested more than 79 deep are not accepted"
            ),
            "{said}"
        );
        let fine = format!("description = \"x\"\nkind = \"boot\"\na = {}{}\n", "[".repeat(79), "]".repeat(79));
        assert!(!refusal(&fine).contains("nested"), "79 deep is TOML the reader takes");
    }

    #[test]
    fn a_nul_byte_or_a_control_character_is_named_with_its_place() {
        assert_eq!(
            refusal("description = \"x\"\n\0kind = \"boot\"\n"),
            "tests/c.toml: line 2, column 1: a NUL byte is not accepted: a case file is TOML text, where only a tab and a line's end are control characters"
        );
        assert!(refusal("a = \"\u{1b}[0m\"\n")
            .starts_with("tests/c.toml: line 1, column 6: the control character '\\u{1b}' is not accepted"));
        // A line's end may be CRLF.
        assert!(!refusal("description = \"x\"\r\nkind = \"nope\"\r\n").contains("control character"));
    }

    #[test]
    fn a_blank_description_is_not_a_missing_one() {
        assert_eq!(
            refusal("description = \"  \"\nkind = \"boot\"\n"),
            "tests/c.toml: description: \"  \" is not accepted: blank; one line saying what the case proves"
        );
        assert_eq!(
            refusal("kind = \"boot\"\n"),
            "tests/c.toml: description: required: one line saying what the case proves"
        );
    }

    #[test]
    fn a_name_outside_ascii_is_refused_saying_ascii() {
        assert_eq!(
            crate::parse("tests/cas-é.toml", "").unwrap_err().to_string(),
            "tests/cas-é.toml: file name: case name \"cas-é\" is not accepted: ASCII letters and digits, '-' and '_' only"
        );
    }
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
