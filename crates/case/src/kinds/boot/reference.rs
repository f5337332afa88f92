//! Stage two for what a boot case says about the reference guest and its hostile inputs:
//! programs with budgets and corruptions, the reporter, bundle files, the bundle's own
//! tampering, device-tree edits and distinctness.

use super::raw::RawBoot;
use crate::common::{did_you_mean, is_feature_name, nearest, path_field, shown, Ctx, Refusals};
use crate::{BundleFile, CaseError, Corruption, DtEdit, FileSource, Hostile, Program, ProgramEntry};

/// The most bytes of an entry name (the bundle's name field).
const ENTRY_NAME_MAX: usize = 32;

/// The keys of a programs entry that a later feature of the bench will bring.
const LATER: [&str; 4] = ["erlang", "otp", "zeros", "workspace"];

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

/// A list of names: every item that is not one refused, in the list's order.
fn names_list(ctx: &Ctx, field: &str, value: Option<&toml::Value>, what: &str) -> Result<Vec<String>, CaseError> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let items = value.as_array().ok_or_else(|| ctx.err(field, format!("not accepted: a list of {what}")))?;
    let mut refused = Refusals::new();
    let names: Vec<Option<String>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            refused.keep(match item.as_str() {
                Some(name) if !name.is_empty() && !name.contains(char::is_whitespace) => Ok(name.to_string()),
                _ => Err(ctx.err(format!("{field}[{i}]"), format!("{} is not accepted: one of {what}", shown(item)))),
            })
        })
        .collect();
    refused.end(ctx, names.into_iter().collect())
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

/// One programs entry: a name, or a table told apart by its keys; every refusal of a
/// table's, in the order they are checked: its budgets, each key not supported yet, each
/// key unknown, then its form's fields.
pub(crate) fn program_entry(ctx: &Ctx, field: &str, value: &toml::Value) -> Result<ProgramEntry, CaseError> {
    match value {
        toml::Value::String(name) if is_feature_name(name) => {
            Ok(ProgramEntry { program: Program::TestProgram(name.clone()), budgets: Vec::new() })
        }
        toml::Value::String(name) => {
            Err(ctx.err(field, format!("{name:?} is not a binary name; accepted: {PROGRAM_FORMS}")))
        }
        toml::Value::Table(table) => {
            let mut refused = Refusals::new();
            let budgets =
                refused.keep(names_list(ctx, &format!("{field}.budgets"), table.get("budgets"), "root, system, users"));
            let mut keys: Vec<&str> = table.keys().map(String::as_str).filter(|k| *k != "budgets").collect();
            keys.sort();
            let mut keys_known = true;
            for later in LATER {
                if keys.contains(&later) {
                    refused.push(ctx.err(format!("{field}.{later}"), "not supported yet by this bench"));
                    keys_known = false;
                }
            }
            const KEYS: [&str; 7] = ["bin", "package", "features", "path", "corrupt", "with", "budgets"];
            for unknown in
                keys.iter().filter(|k| !KEYS.contains(k) && !["erlang", "otp", "zeros", "workspace"].contains(k))
            {
                let near = did_you_mean(&nearest(unknown, KEYS));
                let near = if near.is_empty() { ".".to_string() } else { format!("; {near}") };
                refused.push(ctx.err(
                    format!("{field}.{unknown}"),
                    format!("not a key of a programs entry{near} Accepted: {PROGRAM_FORMS}"),
                ));
                keys_known = false;
            }
            // The entry's form is told by its keys: not when one of them is refused.
            let program = if keys_known { program_form(ctx, field, table, &keys, &mut refused) } else { None };
            let made = || Some(ProgramEntry { program: program?, budgets: budgets? });
            refused.end(ctx, made())
        }
        other => Err(ctx.err(field, format!("{} is not accepted: {PROGRAM_FORMS}", other.type_str()))),
    }
}

/// A programs entry's program, told by its `keys` (sorted, without budgets): every
/// refusal of its fields kept in `refused`.
fn program_form(ctx: &Ctx, field: &str, table: &toml::Table, keys: &[&str], refused: &mut Refusals) -> Option<Program> {
    match keys {
        ["bin"] => refused.keep(string(ctx, field, table, "bin")).map(Program::TestProgram),
        ["path"] => refused
            .keep(string(ctx, field, table, "path").and_then(|path| path_field(ctx, &format!("{field}.path"), &path)))
            .map(Program::Path),
        ["corrupt", "with"] => {
            let bin = refused.keep(string(ctx, field, table, "corrupt"));
            let with = refused.keep(corruption(ctx, &format!("{field}.with"), table.get("with")));
            bin.zip(with).map(|(bin, with)| Program::Corrupt { bin, with })
        }
        ["bin", "package"] | ["bin", "features", "package"] => {
            let features = refused.keep(names_list(
                ctx,
                &format!("{field}.features"),
                table.get("features"),
                "Cargo feature names",
            ));
            // Each name's form is checked only once it is a name (names_list's own check).
            let features = features.and_then(|features| {
                let bad: Vec<usize> = (0..features.len()).filter(|&i| !is_feature_name(&features[i])).collect();
                for bad in &bad {
                    refused.push(ctx.err(format!("{field}.features[{bad}]"), "not accepted: a Cargo feature name"));
                }
                bad.is_empty().then_some(features)
            });
            let package = refused.keep(string(ctx, field, table, "package"));
            let bin = refused.keep(string(ctx, field, table, "bin"));
            let made = || Some(Program::Package { package: package?, bin: bin?, features: features? });
            made()
        }
        _ => {
            refused.push(ctx.err(field, format!("keys {keys:?} are not accepted: {PROGRAM_FORMS}")));
            None
        }
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

/// The reporter, hostile inputs and bundle files: only for the reference guest. Every
/// refusal, each field's in turn, each `[[file]]`'s on its own and within one, each of
/// its keys'.
pub(crate) fn reference_fields(
    ctx: &Ctx,
    raw: &RawBoot,
    programs: &[ProgramEntry],
) -> Result<(Option<String>, Hostile, Vec<BundleFile>), CaseError> {
    let mut refused = Refusals::new();
    if programs.is_empty() {
        for (field, set) in [
            ("reporter", raw.reporter.is_some()),
            ("tamper_bundle", raw.tamper_bundle.is_some()),
            ("sign_bare_archive", raw.sign_bare_archive.is_some()),
            ("short_initrd", raw.short_initrd.is_some()),
            ("file", raw.file.is_some()),
        ] {
            if set {
                refused.push(ctx.err(field, "only with programs: it belongs to the reference guest's signed bundle"));
            }
        }
        // Without programs, there is no bundle to check these fields against.
        return refused.end(ctx, Some((None, Hostile::default(), Vec::new())));
    }
    let reporter = refused.keep(match &raw.reporter {
        None => Ok(None),
        Some(name) => {
            let later: Vec<String> = programs.iter().skip(1).map(|p| p.program.entry_name()).collect();
            if later.is_empty() {
                Err(ctx.err(
                    "reporter",
                    format!(
                        "{name:?} is not accepted: the first program starts no other, and a reporter is one it starts"
                    ),
                ))
            } else if !later.contains(name) {
                Err(ctx.err(
                    "reporter",
                    format!("{name:?} is not accepted: one of the programs the first starts ({})", later.join(", ")),
                ))
            } else {
                Ok(Some(name.clone()))
            }
        }
    });
    let short_initrd = refused.keep(match raw.short_initrd {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(n as u64)),
        Some(n) => Err(ctx.err("short_initrd", format!("{n} is not accepted: a number of bytes above 0"))),
    });
    let hostile = short_initrd.map(|short_initrd| Hostile {
        tamper_bundle: raw.tamper_bundle.unwrap_or(false),
        sign_bare_archive: raw.sign_bare_archive.unwrap_or(false),
        short_initrd,
    });
    // The names accepted so far, each file's whether or not the rest of it is.
    let mut names: Vec<String> = Vec::new();
    let mut files: Vec<Option<BundleFile>> = Vec::new();
    for (index, table) in raw.file.as_deref().unwrap_or(&[]).iter().enumerate() {
        files.push(bundle_file(ctx, &format!("file[{index}]"), table, programs, &mut names, &mut refused));
    }
    let made = || Some((reporter?, hostile?, files.into_iter().collect::<Option<Vec<BundleFile>>>()?));
    refused.end(ctx, made())
}

/// One `[[file]]`: every refusal of it kept in `refused`, its keys' in turn (name, from,
/// servers); its name, once accepted, joins `names`.
fn bundle_file(
    ctx: &Ctx,
    field: &str,
    table: &toml::Table,
    programs: &[ProgramEntry],
    names: &mut Vec<String>,
    refused: &mut Refusals,
) -> Option<BundleFile> {
    for key in table.keys() {
        if key != "name" && key != "from" && key != "servers" {
            refused.push(ctx.err(format!("{field}.{key}"), "not accepted: a [[file]] has name, from and servers"));
        }
    }
    let name = refused.keep(string(ctx, field, table, "name").and_then(|name| {
        if !valid_entry_name(&name) {
            Err(ctx.err(
                format!("{field}.name"),
                format!("{name:?} is not accepted: printable ASCII without spaces, at most {ENTRY_NAME_MAX} bytes"),
            ))
        } else if name == "kernel" || names.contains(&name) || programs.iter().any(|p| p.program.entry_name() == name) {
            Err(ctx.err(format!("{field}.name"), format!("{name:?} names another entry of the bundle")))
        } else {
            Ok(name)
        }
    }));
    if let Some(name) = &name {
        names.push(name.clone());
    }
    let from = refused.keep(match table.get("from") {
        Some(toml::Value::String(path)) => path_field(ctx, &format!("{field}.from"), path).map(FileSource::Path),
        Some(value @ toml::Value::Table(_)) => {
            program_entry(ctx, &format!("{field}.from"), value).map(|entry| FileSource::Program(entry.program))
        }
        _ => Err(ctx.err(format!("{field}.from"), format!("required: a path, or {PROGRAM_FORMS}"))),
    });
    let servers = match table.get("servers") {
        None => Some(Vec::new()),
        Some(value) => match value.as_array() {
            None => {
                refused.push(ctx.err(format!("{field}.servers"), "not accepted: a list of tables, each with a name"));
                None
            }
            Some(list) => {
                let mut servers = Vec::new();
                let mut every = true;
                for (i, entry) in list.iter().enumerate() {
                    match entry.as_table() {
                        Some(t) if t.get("name").and_then(toml::Value::as_str).is_some_and(|n| !n.is_empty()) => {
                            servers.push(t.clone())
                        }
                        _ => {
                            refused.push(ctx.err(format!("{field}.servers[{i}]"), "not accepted: a table with a name"));
                            every = false;
                        }
                    }
                }
                // Whether from is read from a path: not checked when from is refused.
                let from_path = from
                    .as_ref()
                    .map(|from| matches!(from, FileSource::Path(_) | FileSource::Program(Program::Path(_))));
                if from_path == Some(false) {
                    refused.push(ctx.err(format!("{field}.servers"), "only for a manifest read from a path"));
                    every = false;
                }
                every.then_some(servers)
            }
        },
    };
    let made = || Some(BundleFile { name: name?, from: from?, servers: servers? });
    made()
}

/// `device_tree`: every refusal of each edit, in turn; within one, its path's before its
/// other key's (in the order the edit is written: `{ shrink, to }`, `{ set, words }`).
pub(crate) fn device_tree(ctx: &Ctx, raw: &RawBoot) -> Result<Vec<DtEdit>, CaseError> {
    let accepted =
        "{ drop = \"/path/prop\" }, { shrink = \"/path/prop\", to = N }, or { set = \"/path/prop\", words = [...] }";
    let mut refused = Refusals::new();
    let mut edits: Vec<Option<DtEdit>> = Vec::new();
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
            ["drop"] => refused.keep(path("drop")).map(|path| DtEdit::Drop { path }),
            ["shrink", "to"] => {
                let path = refused.keep(path("shrink"));
                let to =
                    table.get("to").and_then(toml::Value::as_integer).filter(|n| (0..=u32::MAX as i64).contains(n));
                let to = refused
                    .keep(to.ok_or_else(|| ctx.err(format!("{field}.to"), "not accepted: a number of bytes from 0")));
                path.zip(to).map(|(path, to)| DtEdit::Shrink { path, to: to as u32 })
            }
            ["set", "words"] => {
                let path = refused.keep(path("set"));
                let words = refused.keep(
                    table
                        .get("words")
                        .and_then(toml::Value::as_array)
                        .ok_or_else(|| ctx.err(format!("{field}.words"), "required: a list of 32-bit cells")),
                );
                let words = words.and_then(|words| {
                    let cells: Vec<Option<u32>> = words
                        .iter()
                        .enumerate()
                        .map(|(i, w)| {
                            refused.keep(
                                w.as_integer()
                                    .filter(|n| (0..=u32::MAX as i64).contains(n))
                                    .map(|n| n as u32)
                                    .ok_or_else(|| {
                                        ctx.err(
                                            format!("{field}.words[{i}]"),
                                            format!("{} is not accepted: a 32-bit cell", shown(w)),
                                        )
                                    }),
                            )
                        })
                        .collect();
                    cells.into_iter().collect::<Option<Vec<u32>>>()
                });
                let words = match words {
                    Some(words) if words.is_empty() => {
                        refused
                            .push(ctx.err(format!("{field}.words"), "empty: the property's cells, as many as it has"));
                        None
                    }
                    words => words,
                };
                path.zip(words).map(|(path, words)| DtEdit::Set { path, words })
            }
            _ => {
                refused.push(ctx.err(field, format!("keys {keys:?} are not accepted: {accepted}")));
                None
            }
        };
        edits.push(edit);
    }
    refused.end(ctx, edits.into_iter().collect())
}
