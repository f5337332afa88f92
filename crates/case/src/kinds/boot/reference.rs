//! Stage two for what a boot case says about the reference guest and its hostile inputs:
//! programs with budgets and corruptions, the reporter, bundle files, the bundle's own
//! tampering, device-tree edits and distinctness.

use super::raw::RawBoot;
use crate::common::{did_you_mean, is_feature_name, nearest, path_field, shown, Ctx, Refusals};
use crate::{BundleFile, CaseError, Corruption, DtEdit, FileSource, Hostile, Program, ProgramEntry};

/// The most bytes of an entry name (the bundle's name field).
const ENTRY_NAME_MAX: usize = 32;

const PROGRAM_FORMS: &str =
    "a test-program name (\"checker\"), { bin, budgets }, { package, bin, features, budgets }, { path, budgets }, or { corrupt, with, budgets }";

fn string(ctx: &Ctx, field: &str, table: &toml::Table, key: &str) -> Result<String, CaseError> {
    match table.get(key) {
        Some(toml::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(ctx.err(format!("{field}.{key}"), "required: a non-empty string")),
    }
}

fn number(ctx: &Ctx, field: &str, value: &toml::Value) -> Result<u64, CaseError> {
    let parsed = match value {
        toml::Value::Integer(n) if *n >= 0 => Some(*n as u64),
        toml::Value::String(s) => match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
            None => s.replace('_', "").parse().ok(),
        },
        _ => None,
    };
    parsed.ok_or_else(|| {
        ctx.err(field, format!("{} is not accepted: a number from 0, or a \"0x…\" hex string", shown(value)))
    })
}

fn names_list(ctx: &Ctx, field: &str, value: Option<&toml::Value>, what: &str) -> Result<Vec<String>, CaseError> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let items = value.as_array().ok_or_else(|| ctx.err(field, format!("not accepted: a list of {what}")))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str() {
            Some(name) if !name.is_empty() && !name.contains(char::is_whitespace) => Ok(name.to_string()),
            _ => Err(ctx.err(format!("{field}[{i}]"), format!("{} is not accepted: one of {what}", shown(item)))),
        })
        .collect()
}

fn corruption(ctx: &Ctx, field: &str, value: Option<&toml::Value>) -> Result<Corruption, CaseError> {
    let accepted = "a table with one of segment-vaddr, entry, truncate, segment-flags, truncate-segment-data";
    let table = value.and_then(toml::Value::as_table).ok_or_else(|| ctx.err(field, format!("required: {accepted}")))?;
    if table.len() != 1 {
        return Err(ctx.err(field, format!("{} keys are not accepted: {accepted}", table.len())));
    }
    let (key, value) = table.iter().next().expect("one key");
    let at = format!("{field}.{key}");
    Ok(match key.as_str() {
        "segment-vaddr" => Corruption::SegmentVaddr(number(ctx, &at, value)?),
        "entry" => Corruption::Entry(number(ctx, &at, value)?),
        "truncate" => Corruption::Truncate(number(ctx, &at, value)?),
        "truncate-segment-data" => Corruption::TruncateSegmentData(number(ctx, &at, value)?),
        "segment-flags" => match value.as_str() {
            Some(flags) if !flags.is_empty() && flags.chars().all(|c| "rwx".contains(c)) => {
                Corruption::SegmentFlags(flags.to_string())
            }
            _ => return Err(ctx.err(at, format!("{} is not accepted: letters of rwx, such as \"rwx\"", shown(value)))),
        },
        other => return Err(ctx.err(at, format!("{other:?} is not accepted: {accepted}"))),
    })
}

/// One programs entry: a name, or a table told apart by its keys.
pub(crate) fn program_entry(ctx: &Ctx, field: &str, value: &toml::Value) -> Result<ProgramEntry, CaseError> {
    match value {
        toml::Value::String(name) if is_feature_name(name) => {
            Ok(ProgramEntry { program: Program::TestProgram(name.clone()), budgets: Vec::new() })
        }
        toml::Value::String(name) => {
            Err(ctx.err(field, format!("{name:?} is not a binary name; accepted: {PROGRAM_FORMS}")))
        }
        toml::Value::Table(table) => {
            let budgets = names_list(ctx, &format!("{field}.budgets"), table.get("budgets"), "root, system, users")?;
            let mut keys: Vec<&str> = table.keys().map(String::as_str).filter(|k| *k != "budgets").collect();
            keys.sort();
            for later in ["erlang", "otp", "zeros", "workspace"] {
                if keys.contains(&later) {
                    return Err(ctx.err(format!("{field}.{later}"), "not supported yet by this bench"));
                }
            }
            const KEYS: [&str; 7] = ["bin", "package", "features", "path", "corrupt", "with", "budgets"];
            if let Some(unknown) = keys.iter().find(|k| !KEYS.contains(k)) {
                let near = did_you_mean(&nearest(unknown, KEYS));
                let near = if near.is_empty() { ".".to_string() } else { format!("; {near}") };
                return Err(ctx.err(
                    format!("{field}.{unknown}"),
                    format!("not a key of a programs entry{near} Accepted: {PROGRAM_FORMS}"),
                ));
            }
            let program = match keys.as_slice() {
                ["bin"] => Program::TestProgram(string(ctx, field, table, "bin")?),
                ["path"] => {
                    Program::Path(path_field(ctx, &format!("{field}.path"), &string(ctx, field, table, "path")?)?)
                }
                ["corrupt", "with"] => Program::Corrupt {
                    bin: string(ctx, field, table, "corrupt")?,
                    with: corruption(ctx, &format!("{field}.with"), table.get("with"))?,
                },
                ["bin", "package"] | ["bin", "features", "package"] => {
                    let features =
                        names_list(ctx, &format!("{field}.features"), table.get("features"), "Cargo feature names")?;
                    if let Some(bad) = features.iter().position(|f| !is_feature_name(f)) {
                        return Err(ctx.err(format!("{field}.features[{bad}]"), "not accepted: a Cargo feature name"));
                    }
                    Program::Package {
                        package: string(ctx, field, table, "package")?,
                        bin: string(ctx, field, table, "bin")?,
                        features,
                    }
                }
                _ => return Err(ctx.err(field, format!("keys {keys:?} are not accepted: {PROGRAM_FORMS}"))),
            };
            Ok(ProgramEntry { program, budgets })
        }
        other => Err(ctx.err(field, format!("{} is not accepted: {PROGRAM_FORMS}", other.type_str()))),
    }
}

/// `programs`: every refusal of its entries, each entry's in turn (within one entry, its
/// first); the checks of entry names only once every entry is accepted.
pub(crate) fn programs(ctx: &Ctx, raw: &RawBoot) -> Result<Vec<ProgramEntry>, CaseError> {
    let mut refused = Refusals::new();
    let entries: Vec<Option<ProgramEntry>> = raw
        .programs
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .enumerate()
        .map(|(index, value)| refused.keep(program_entry(ctx, &format!("programs[{index}]"), value)))
        .collect();
    let Some(entries) = entries.into_iter().collect::<Option<Vec<ProgramEntry>>>() else {
        return refused.end(ctx, None);
    };
    for (index, entry) in entries.iter().enumerate() {
        let name = entry.program.entry_name();
        if !valid_entry_name(&name) {
            refused.push(ctx.err(
                format!("programs[{index}]"),
                format!("the entry name {name:?} is not accepted: printable ASCII without spaces, at most {ENTRY_NAME_MAX} bytes"),
            ));
        } else if entries[..index].iter().any(|e| e.program.entry_name() == name) {
            refused.push(ctx.err(format!("programs[{index}]"), format!("the entry name {name:?} is packed twice")));
        } else if name == "kernel" || name == "programs" {
            refused.push(ctx.err(format!("programs[{index}]"), format!("{name:?} is the bench's own entry name")));
        }
    }
    if entries.is_empty() {
        refused.push(ctx.err("programs", "empty: name at least the first program, which runs in init's place"));
    }
    if entries.first().is_some_and(|first| !first.budgets.is_empty()) {
        refused.push(ctx.err(
            "programs[0].budgets",
            "the first program runs in init's place with every budget; budgets are for the programs it starts",
        ));
    }
    refused.end(ctx, Some(entries))
}

fn valid_entry_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= ENTRY_NAME_MAX && name.bytes().all(|b| b.is_ascii_graphic())
}

/// The reporter, hostile inputs and bundle files: only for the reference guest.
pub(crate) fn reference_fields(
    ctx: &Ctx,
    raw: &RawBoot,
    programs: &[ProgramEntry],
) -> Result<(Option<String>, Hostile, Vec<BundleFile>), CaseError> {
    if programs.is_empty() {
        for (field, set) in [
            ("reporter", raw.reporter.is_some()),
            ("tamper_bundle", raw.tamper_bundle.is_some()),
            ("sign_bare_archive", raw.sign_bare_archive.is_some()),
            ("short_initrd", raw.short_initrd.is_some()),
            ("file", raw.file.is_some()),
        ] {
            if set {
                return Err(ctx.err(field, "only with programs: it belongs to the reference guest's signed bundle"));
            }
        }
    }
    let reporter = match &raw.reporter {
        None => None,
        Some(name) => {
            let later: Vec<String> = programs.iter().skip(1).map(|p| p.program.entry_name()).collect();
            if later.is_empty() {
                return Err(ctx.err(
                    "reporter",
                    format!(
                        "{name:?} is not accepted: the first program starts no other, and a reporter is one it starts"
                    ),
                ));
            }
            if !later.contains(name) {
                return Err(ctx.err(
                    "reporter",
                    format!("{name:?} is not accepted: one of the programs the first starts ({})", later.join(", ")),
                ));
            }
            Some(name.clone())
        }
    };
    let short_initrd = match raw.short_initrd {
        None => None,
        Some(n) if n > 0 => Some(n as u64),
        Some(n) => return Err(ctx.err("short_initrd", format!("{n} is not accepted: a number of bytes above 0"))),
    };
    let hostile = Hostile {
        tamper_bundle: raw.tamper_bundle.unwrap_or(false),
        sign_bare_archive: raw.sign_bare_archive.unwrap_or(false),
        short_initrd,
    };
    let mut files: Vec<BundleFile> = Vec::new();
    for (index, table) in raw.file.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("file[{index}]");
        for key in table.keys() {
            if key != "name" && key != "from" && key != "servers" {
                return Err(ctx.err(format!("{field}.{key}"), "not accepted: a [[file]] has name, from and servers"));
            }
        }
        let name = string(ctx, &field, table, "name")?;
        if !valid_entry_name(&name) {
            return Err(ctx.err(
                format!("{field}.name"),
                format!("{name:?} is not accepted: printable ASCII without spaces, at most {ENTRY_NAME_MAX} bytes"),
            ));
        }
        if name == "kernel"
            || files.iter().any(|f| f.name == name)
            || programs.iter().any(|p| p.program.entry_name() == name)
        {
            return Err(ctx.err(format!("{field}.name"), format!("{name:?} names another entry of the bundle")));
        }
        let from = match table.get("from") {
            Some(toml::Value::String(path)) => FileSource::Path(path_field(ctx, &format!("{field}.from"), path)?),
            Some(value @ toml::Value::Table(_)) => {
                FileSource::Program(program_entry(ctx, &format!("{field}.from"), value)?.program)
            }
            _ => return Err(ctx.err(format!("{field}.from"), format!("required: a path, or {PROGRAM_FORMS}"))),
        };
        let mut servers = Vec::new();
        if let Some(value) = table.get("servers") {
            let list = value.as_array().ok_or_else(|| {
                ctx.err(format!("{field}.servers"), "not accepted: a list of tables, each with a name")
            })?;
            for (i, entry) in list.iter().enumerate() {
                match entry.as_table() {
                    Some(t) if t.get("name").and_then(toml::Value::as_str).is_some_and(|n| !n.is_empty()) => {
                        servers.push(t.clone())
                    }
                    _ => {
                        return Err(ctx.err(format!("{field}.servers[{i}]"), "not accepted: a table with a name"));
                    }
                }
            }
            let from_path = matches!(from, FileSource::Path(_) | FileSource::Program(Program::Path(_)));
            if !from_path {
                return Err(ctx.err(format!("{field}.servers"), "only for a manifest read from a path"));
            }
        }
        files.push(BundleFile { name, from, servers });
    }
    Ok((reporter, hostile, files))
}

pub(crate) fn device_tree(ctx: &Ctx, raw: &RawBoot) -> Result<Vec<DtEdit>, CaseError> {
    let accepted =
        "{ drop = \"/path/prop\" }, { shrink = \"/path/prop\", to = N }, or { set = \"/path/prop\", words = [...] }";
    let mut edits = Vec::new();
    for (index, table) in raw.device_tree.as_deref().unwrap_or(&[]).iter().enumerate() {
        let field = format!("device_tree[{index}]");
        let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
        keys.sort();
        let path = |key: &str| -> Result<String, CaseError> {
            let path = string(ctx, &field, table, key)?;
            if !path.starts_with('/') || path.ends_with('/') || path.len() < 2 {
                return Err(ctx.err(
                    format!("{field}.{key}"),
                    format!("{path:?} is not accepted: a property's path such as \"/chosen/rng-seed\""),
                ));
            }
            Ok(path)
        };
        let edit = match keys.as_slice() {
            ["drop"] => DtEdit::Drop { path: path("drop")? },
            ["shrink", "to"] => {
                let to =
                    table.get("to").and_then(toml::Value::as_integer).filter(|n| (0..=u32::MAX as i64).contains(n));
                let to = to.ok_or_else(|| ctx.err(format!("{field}.to"), "not accepted: a number of bytes from 0"))?;
                DtEdit::Shrink { path: path("shrink")?, to: to as u32 }
            }
            ["set", "words"] => {
                let words = table
                    .get("words")
                    .and_then(toml::Value::as_array)
                    .ok_or_else(|| ctx.err(format!("{field}.words"), "required: a list of 32-bit cells"))?;
                let words = words
                    .iter()
                    .enumerate()
                    .map(|(i, w)| {
                        w.as_integer().filter(|n| (0..=u32::MAX as i64).contains(n)).map(|n| n as u32).ok_or_else(
                            || {
                                ctx.err(
                                    format!("{field}.words[{i}]"),
                                    format!("{} is not accepted: a 32-bit cell", shown(w)),
                                )
                            },
                        )
                    })
                    .collect::<Result<Vec<u32>, _>>()?;
                if words.is_empty() {
                    return Err(ctx.err(format!("{field}.words"), "empty: the property's cells, as many as it has"));
                }
                DtEdit::Set { path: path("set")?, words }
            }
            _ => return Err(ctx.err(field, format!("keys {keys:?} are not accepted: {accepted}"))),
        };
        edits.push(edit);
    }
    Ok(edits)
}
