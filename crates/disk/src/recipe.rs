//! A disk recipe: read, checked field by field, refused in words.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::table::{self, SIZE_KIB_MAX};
use crate::{did_you_mean, under, DiskError, Fs};

/// The longest GPT partition name, in UTF-16 code units (72 bytes in the entry).
pub const NAME_UNITS_MAX: usize = 36;

const TOP_FIELDS: [&str; 2] = ["size_kib", "partition"];
const PARTITION_FIELDS: [&str; 4] = ["name", "fs", "stage", "file"];

/// A checked recipe. Paths are as the recipe gives them, relative to the workspace root
/// `load` was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskRecipe {
    /// The recipe's own path, as `load` was given it (for messages).
    pub file: PathBuf,
    pub size_kib: u64,
    pub partitions: Vec<PartitionRecipe>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecipe {
    pub name: String,
    pub fs: Fs,
    /// ext4 and fat: the directory whose tree the file system holds.
    pub stage: Option<PathBuf>,
    /// raw only, optional: the bytes at the partition's start.
    pub file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecipe {
    size_kib: i64,
    #[serde(default)]
    partition: Vec<RawPartition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    name: String,
    fs: String,
    stage: Option<String>,
    file: Option<String>,
}

struct Ctx<'a> {
    file: &'a Path,
}

impl Ctx<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> DiskError {
        DiskError::Recipe { file: self.file.display().to_string(), field: field.into(), message: message.into() }
    }
}

impl DiskRecipe {
    /// Read and check the recipe at `root.join(path)`: its fields, that each stage is a
    /// directory and each file a file no larger than its partition, and that the disk
    /// gives every partition the room its file system needs.
    pub fn load(root: &Path, path: &Path) -> Result<DiskRecipe, DiskError> {
        let ctx = Ctx { file: path };
        let text =
            std::fs::read_to_string(under(root, path)).map_err(|e| ctx.err("file", format!("cannot read: {e}")))?;
        let table: toml::Table = toml::from_str(&text).map_err(|error| {
            // Where the syntax breaks, as crates/case says it: the line, or `toml`.
            let line = error.span().map(|span| 1 + text[..span.start.min(text.len())].matches('\n').count());
            let field = line.map_or_else(|| "toml".to_string(), |line| format!("line {line}"));
            ctx.err(field, error.message().trim().to_string())
        })?;
        check_shape(&ctx, &table)?;
        let raw: RawRecipe = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ctx.err("toml", e.message().trim().to_string()))?;
        validate(&ctx, root, raw)
    }

    /// The disk's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_kib * 1024
    }
}

fn unknown(ctx: &Ctx, prefix: &str, key: &str, accepted: &[&str]) -> DiskError {
    ctx.err(
        format!("{prefix}{key}"),
        format!("unknown field; accepted: {}{}", accepted.join(", "), did_you_mean(key, accepted)),
    )
}

/// Every key known and of its type, before serde reads the table (serde would name
/// neither the nearest key nor, for a type, the field's path).
fn check_shape(ctx: &Ctx, table: &toml::Table) -> Result<(), DiskError> {
    for (key, value) in table {
        match key.as_str() {
            "size_kib" if !value.is_integer() => {
                return Err(ctx.err("size_kib", format!("takes a whole number of KiB, not {}", value.type_str())))
            }
            "partition" => {
                let Some(list) = value.as_array() else {
                    return Err(ctx.err("partition", "takes a list of tables: [[partition]]"));
                };
                for (index, item) in list.iter().enumerate() {
                    let Some(part) = item.as_table() else {
                        return Err(ctx.err(format!("partition[{index}]"), "takes a table: [[partition]]"));
                    };
                    for (key, value) in part {
                        if !PARTITION_FIELDS.contains(&key.as_str()) {
                            return Err(unknown(ctx, &format!("partition[{index}]."), key, &PARTITION_FIELDS));
                        }
                        if !value.is_str() {
                            return Err(ctx.err(
                                format!("partition[{index}].{key}"),
                                format!("takes a string, not {}", value.type_str()),
                            ));
                        }
                    }
                    for required in ["name", "fs"] {
                        if !part.contains_key(required) {
                            return Err(ctx.err(format!("partition[{index}].{required}"), "missing"));
                        }
                    }
                }
            }
            "size_kib" => {}
            _ => return Err(unknown(ctx, "", key, &TOP_FIELDS)),
        }
    }
    if !table.contains_key("size_kib") {
        return Err(ctx.err("size_kib", "missing: the whole disk's size in KiB"));
    }
    if !table.contains_key("partition") {
        return Err(ctx.err("partition", "missing: a recipe needs at least one [[partition]]"));
    }
    Ok(())
}

fn validate(ctx: &Ctx, root: &Path, raw: RawRecipe) -> Result<DiskRecipe, DiskError> {
    if raw.size_kib < 1 || raw.size_kib as u64 > SIZE_KIB_MAX {
        return Err(ctx.err("size_kib", format!("{} is out of range: 1 to {SIZE_KIB_MAX}", raw.size_kib)));
    }
    let size_kib = raw.size_kib as u64;
    if raw.partition.is_empty() {
        return Err(ctx.err("partition", "empty: a recipe needs at least one [[partition]]"));
    }
    let mut partitions: Vec<PartitionRecipe> = Vec::new();
    for (index, part) in raw.partition.into_iter().enumerate() {
        let field = |name: &str| format!("partition[{index}].{name}");
        let units = part.name.encode_utf16().count();
        if units == 0 || units > NAME_UNITS_MAX {
            return Err(ctx.err(
                field("name"),
                format!("`{}` is {units} UTF-16 units long; a GPT name takes 1 to {NAME_UNITS_MAX}", part.name),
            ));
        }
        if part.name.contains('\0') {
            return Err(ctx.err(field("name"), "holds a NUL character, which ends a GPT name"));
        }
        if let Some(first) = partitions.iter().position(|p| p.name == part.name) {
            return Err(
                ctx.err(field("name"), format!("`{}` is also partition[{first}]'s name; names are unique", part.name))
            );
        }
        let Some(fs) = Fs::from_name(&part.fs) else {
            return Err(ctx.err(
                field("fs"),
                format!(
                    "unknown file system `{}`; accepted: {}{}",
                    part.fs,
                    Fs::NAMES.join(", "),
                    did_you_mean(&part.fs, &Fs::NAMES)
                ),
            ));
        };
        match (fs, &part.stage, &part.file) {
            (Fs::Raw, Some(_), _) => {
                return Err(
                    ctx.err(field("stage"), "a raw partition holds no tree; it takes `file`, the bytes at its start")
                )
            }
            (Fs::Ext4 | Fs::Fat, _, Some(_)) => {
                return Err(ctx
                    .err(field("file"), format!("only a raw partition takes `file`; {fs} takes `stage`, a directory")))
            }
            (Fs::Ext4 | Fs::Fat, None, _) => {
                return Err(
                    ctx.err(field("stage"), format!("missing: {fs} needs `stage`, a directory whose tree it holds"))
                )
            }
            _ => {}
        }
        if let Some(stage) = &part.stage {
            if !under(root, Path::new(stage)).is_dir() {
                return Err(
                    ctx.err(field("stage"), format!("`{stage}` is not a directory (relative to the workspace root)"))
                );
            }
        }
        if let Some(file) = &part.file {
            if !under(root, Path::new(file)).is_file() {
                return Err(ctx.err(field("file"), format!("`{file}` is not a file (relative to the workspace root)")));
            }
        }
        partitions.push(PartitionRecipe {
            name: part.name,
            fs,
            stage: part.stage.map(PathBuf::from),
            file: part.file.map(PathBuf::from),
        });
    }
    check_room(ctx, root, size_kib, &partitions)?;
    Ok(DiskRecipe { file: ctx.file.to_path_buf(), size_kib, partitions })
}

/// Each partition's need: its file system's smallest, or a raw file's size rounded up to
/// 4 KiB.
fn need(root: &Path, part: &PartitionRecipe) -> Result<u64, std::io::Error> {
    let mut need = part.fs.min_partition_bytes();
    if let Some(file) = &part.file {
        let len = std::fs::metadata(under(root, file))?.len();
        need = need.max(len.div_ceil(4096) * 4096);
    }
    Ok(need)
}

fn check_room(ctx: &Ctx, root: &Path, size_kib: u64, partitions: &[PartitionRecipe]) -> Result<(), DiskError> {
    let count = partitions.len() as u64;
    let mut needs = Vec::new();
    for (index, part) in partitions.iter().enumerate() {
        let need =
            need(root, part).map_err(|e| ctx.err(format!("partition[{index}].file"), format!("cannot read: {e}")))?;
        needs.push(need);
    }
    let most = needs.iter().copied().max().unwrap_or(0);
    let length = table::equal_partitions(size_kib * 1024, count).map(|(_, len)| len).unwrap_or(0);
    if length >= most {
        return Ok(());
    }
    let (index, part) = partitions.iter().enumerate().find(|(i, _)| needs[*i] > length).expect("one needs more");
    let smallest = table::smallest_size_kib(count, most);
    let what = match &part.file {
        Some(file) if needs[index] > part.fs.min_partition_bytes() => format!("its file `{}`", file.display()),
        _ => format!("{}", part.fs),
    };
    Err(ctx.err(
        "size_kib",
        format!(
            "{size_kib} is too small: each of {count} partition{} would get {} bytes, and partition[{index}] (`{}`) needs {} for {what}; the smallest size_kib that fits is {smallest}",
            if count == 1 { "" } else { "s" },
            length,
            part.name,
            needs[index],
        ),
    ))
}
