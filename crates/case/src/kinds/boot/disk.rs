//! A boot case's disks: `[disk]` (writable), `[vault]` (a second writable disk, only
//! beside `[disk]`) and `[userland]` (attached read-only). Each is zeroed (`size_kib`),
//! a GPT of equal partitions on zeros (`size_kib` and `partitions`), a disk recipe
//! (`recipe`), or a disk image the case gives (`image`, raw or qcow2 by `format`, copied
//! into each boot); `keep` carries the first boot's disk into the second; `flip` and
//! `flip_header` flip one bit of a recipe's disk after packing.

use std::path::{Component, Path};

use super::raw::{RawDisk, DISK, FLIP};
use crate::common::{path_field, Ctx, Refusals};
use crate::fields::check_table;
use crate::{CaseError, DiskLayout, DiskSpec, Disks, FileFlip, ImageFormat};

/// The disk tables, in the order messages name them.
pub(crate) const TABLES: [&str; 3] = ["disk", "vault", "userland"];

/// The largest disk, in KiB: 16 GiB. A larger one on a bench machine is a typo.
const SIZE_KIB_MAX: i64 = 16 * 1024 * 1024;

/// The most partitions a GPT the bench writes holds (its 128 entries).
const PARTITIONS_MAX: i64 = 128;

/// A GPT at each end of the disk: the protective MBR (front only), the header and 32
/// sectors of entries, 34 sectors in all, taken at both ends; each rounded up to 4 KiB,
/// the alignment of every partition.
const GPT_END_KIB: i64 = (34 * 512 + 4095) / 4096 * 4;

/// The least a partition of a GPT the bench writes holds: 4 KiB.
const PARTITION_MIN_KIB: i64 = 4;

/// The most UTF-16 units of a GPT partition name.
const PARTITION_NAME_MAX: usize = 36;

/// The least `size_kib` that holds a GPT of `count` partitions.
fn gpt_min_kib(count: i64) -> i64 {
    2 * GPT_END_KIB + count * PARTITION_MIN_KIB
}

/// Stage one for the disk tables and each one's `flip`: their fields checked in words.
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Result<(), CaseError> {
    for name in TABLES {
        if let Some(toml::Value::Table(disk)) = table.get(name) {
            check_table(ctx, disk, DISK, &format!("{name}."), &format!("[{name}]"), &|_| None)?;
            if let Some(toml::Value::Table(flip)) = disk.get("flip") {
                check_table(ctx, flip, FLIP, &format!("{name}.flip."), &format!("{name}.flip"), &|_| None)?;
            }
        }
    }
    Ok(())
}

/// Stage two: the three disk tables. `two_boots`: the case boots twice, as
/// `distinct_across_boots` has it, which `keep` needs.
pub(crate) fn disks(
    ctx: &Ctx,
    disk: Option<&RawDisk>,
    vault: Option<&RawDisk>,
    userland: Option<&RawDisk>,
    two_boots: bool,
    self_check: bool,
) -> Result<Disks, CaseError> {
    // Each table's refusals, every table's (each is a top-level key: in the file's order).
    let mut refused = Refusals::new();
    if vault.is_some() && disk.is_none() {
        refused.push(ctx.err("vault", "only with [disk]: the vault is a second writable disk, beside the first"));
    }
    let mut one = |name: &str, raw: Option<&RawDisk>| {
        refused.keep(raw.map(|raw| spec(ctx, name, raw, two_boots, self_check)).transpose())
    };
    let (disk, vault, userland) = (one("disk", disk), one("vault", vault), one("userland", userland));
    let made = || Some(Disks { disk: disk?, vault: vault?, userland: userland? });
    refused.end(ctx, made())
}

/// One disk table: every refusal of its fields, in the order of [`DISK`].
fn spec(ctx: &Ctx, name: &str, raw: &RawDisk, two_boots: bool, self_check: bool) -> Result<DiskSpec, CaseError> {
    let at = |key: &str| format!("{name}.{key}");
    let mut refused = Refusals::new();
    // Where the disk comes from: exactly one of size_kib, recipe and image.
    let sources: Vec<&str> =
        [("size_kib", raw.size_kib.is_some()), ("recipe", raw.recipe.is_some()), ("image", raw.image.is_some())]
            .into_iter()
            .filter_map(|(key, given)| given.then_some(key))
            .collect();
    // Whether the disk is a recipe's: unknown when it names two sources or none, and then
    // what is only for a recipe is not checked against it.
    let recipe = match sources.as_slice() {
        [one] => Some(*one == "recipe"),
        _ => None,
    };
    if raw.format.is_some() && raw.image.is_none() {
        refused.push(ctx.err(at("format"), "only with image: it says the format of the image file the case gives"));
    }
    let layout = match (raw.size_kib, &raw.recipe, &raw.image) {
        _ if sources.len() > 1 => {
            refused.push(ctx.err(
                at(sources[1]),
                format!(
                    "a disk is one of size_kib (zeros, or a GPT with partitions), recipe (a disk recipe) or image (a disk image file), not {}",
                    sources.join(" and ")
                ),
            ));
            None
        }
        (None, None, None) => {
            refused.push(ctx.err(
                at("size_kib"),
                format!("required: the disk's size in KiB (or {name}.recipe, a disk recipe, or {name}.image, a disk image file)"),
            ));
            None
        }
        (Some(size_kib), _, _) => {
            let size_ok = (4..=SIZE_KIB_MAX).contains(&size_kib) && size_kib % 4 == 0;
            if !size_ok {
                refused.push(ctx.err(
                    at("size_kib"),
                    format!(
                        "{size_kib} is not accepted: a size in KiB from 4 to {SIZE_KIB_MAX} (16 GiB), a multiple of 4"
                    ),
                ));
            }
            let count = match raw.partitions {
                None => Some(None),
                Some(count) if !(1..=PARTITIONS_MAX).contains(&count) => {
                    refused.push(ctx.err(
                        at("partitions"),
                        format!("{count} is not accepted: a number of equal GPT partitions, 1 to {PARTITIONS_MAX}"),
                    ));
                    None
                }
                Some(count) => Some(Some(count)),
            };
            // The GPT's room is measured only with a size and a count accepted.
            match count.filter(|_| size_ok) {
                None => None,
                Some(None) => Some(DiskLayout::Zeroed { size_kib: size_kib as u64 }),
                Some(Some(count)) if size_kib < gpt_min_kib(count) => {
                    let least = gpt_min_kib(count);
                    let each = if count == 1 { "the partition" } else { "each partition" };
                    refused.push(ctx.err(
                        at("size_kib"),
                        format!("{size_kib} is not accepted with partitions = {count}: a GPT of {count} needs at least {least} KiB (the GPT's 34 sectors at each end, {GPT_END_KIB} KiB each once aligned to 4 KiB, and {each} {PARTITION_MIN_KIB} KiB or more)"),
                    ));
                    None
                }
                Some(Some(count)) => Some(DiskLayout::Partitions { size_kib: size_kib as u64, count: count as u32 }),
            }
        }
        (None, Some(recipe), _) => {
            if raw.partitions.is_some() {
                refused.push(ctx.err(at("partitions"), "only with size_kib: a disk recipe lists its own partitions"));
            }
            refused.keep(path_field(ctx, &at("recipe"), recipe)).map(DiskLayout::Recipe)
        }
        (None, None, Some(image)) => {
            if raw.partitions.is_some() {
                refused.push(ctx.err(at("partitions"), "only with size_kib: an image has its own partitions"));
            }
            let format = match raw.format.as_deref() {
                None => Some(None),
                Some("raw") => Some(Some(ImageFormat::Raw)),
                Some("qcow2") => Some(Some(ImageFormat::Qcow2)),
                Some(other) => {
                    refused.push(ctx.err(at("format"), format!("{other:?} is not accepted: raw or qcow2")));
                    None
                }
            };
            let path = refused.keep(path_field(ctx, &at("image"), image));
            path.zip(format).map(|(path, format)| DiskLayout::Image { path, format })
        }
    };
    let keep = raw.keep.unwrap_or(false);
    if keep && name == "userland" {
        refused.push(ctx.err(
            at("keep"),
            "not accepted on [userland]: it is attached read-only, so no boot changes it and there is nothing to keep",
        ));
    } else if keep && !two_boots {
        refused.push(ctx.err(
            at("keep"),
            "only with distinct_across_boots: a kept disk is made for the first of the case's two boots and booted again, as it was left, by the second",
        ));
    }
    let flip = match &raw.flip {
        None => Some(None),
        Some(_) if recipe == Some(false) => {
            refused.push(ctx.err(at("flip"), "only with recipe: it names a file in a partition of a disk recipe"));
            None
        }
        Some(flip) => {
            let partition = refused.keep(partition_name(ctx, &at("flip.partition"), flip.partition.as_deref()));
            let file = refused.keep(match flip.file.as_deref() {
                None => Err(ctx.err(at("flip.file"), "required: a file's path in that partition's tree")),
                Some(file) if !inside_tree(file) => Err(ctx.err(
                    at("flip.file"),
                    format!("{file:?} is not accepted: a relative path inside the partition's tree, without \"..\", such as \"hello.txt\" or \"etc/motd\""),
                )),
                Some(file) => Ok(file.to_string()),
            });
            partition.zip(file).map(|(partition, file)| Some(FileFlip { partition, file }))
        }
    };
    let flip_header = match &raw.flip_header {
        None => Some(None),
        Some(_) if recipe == Some(false) => {
            refused.push(ctx.err(at("flip_header"), "only with recipe: it names a partition of a disk recipe"));
            None
        }
        Some(_) if raw.flip.is_some() => {
            refused.push(ctx.err(
                at("flip_header"),
                format!("not with {name}.flip: one flipped bit per disk, so what the guest detects has one cause"),
            ));
            None
        }
        Some(partition) => refused.keep(partition_name(ctx, &at("flip_header"), Some(partition))).map(Some),
    };
    let resize_kept_kib = refused.keep(match raw.resize_kept_kib {
        None => Ok(None),
        Some(_) if !keep => Err(ctx.err(at("resize_kept_kib"), "only with keep: it resizes the disk the first boot left")),
        Some(_) if !self_check => Err(ctx.err(
            at("resize_kept_kib"),
            "only with must_fail: it hands the second boot a kept disk that is not what a fresh one would be, so the case is a self-check that expects the bench to refuse it",
        )),
        Some(kib) if !(4..=SIZE_KIB_MAX).contains(&kib) || kib % 4 != 0 => Err(ctx.err(
            at("resize_kept_kib"),
            format!("{kib} is not accepted: a size in KiB from 4 to {SIZE_KIB_MAX} (16 GiB), a multiple of 4"),
        )),
        Some(kib) => Ok(Some(kib as u64)),
    });
    let made = || {
        Some(DiskSpec {
            layout: layout?,
            keep,
            flip: flip?,
            flip_header: flip_header?,
            resize_kept_kib: resize_kept_kib?,
        })
    };
    refused.end(ctx, made())
}

/// A GPT partition's name: not empty, at most 36 UTF-16 units.
fn partition_name(ctx: &Ctx, field: &str, name: Option<&str>) -> Result<String, CaseError> {
    match name {
        None => Err(ctx.err(field, "required: the name of a partition of the recipe")),
        Some(name) if name.trim().is_empty() || name.encode_utf16().count() > PARTITION_NAME_MAX => Err(ctx.err(
            field,
            format!("{name:?} is not accepted: a GPT partition's name, 1 to {PARTITION_NAME_MAX} characters"),
        )),
        Some(name) => Ok(name.to_string()),
    }
}

/// A relative path that stays inside a tree, naming something in it.
fn inside_tree(file: &str) -> bool {
    let path = Path::new(file);
    !file.trim().is_empty()
        && !path.is_absolute()
        && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && path.components().any(|c| matches!(c, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::{Case, DiskLayout, DiskSpec, FileFlip};

    const BASE: &str =
        "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nprograms = [\"logsrv\"]\nexpect = ['x']\n";

    /// A boot case with `top` among its top-level fields and `tables` after them.
    fn text(top: &str, tables: &str) -> String {
        format!("{BASE}{top}\n{tables}")
    }

    fn parsed(top: &str, tables: &str) -> Case {
        let text = text(top, tables);
        crate::parse("tests/c.toml", &text).unwrap_or_else(|error| panic!("{error}\n{text}"))
    }

    fn refused(top: &str, tables: &str) -> String {
        let text = text(top, tables);
        crate::parse("tests/c.toml", &text).expect_err(&text).to_string()
    }

    const TWO_BOOTS: &str = "distinct_across_boots = ['id (\\d+)']";

    #[test]
    fn a_case_with_every_disk_parses_to_its_typed_form_and_names_its_recipes() {
        let case = parsed(
            TWO_BOOTS,
            "[disk]\nsize_kib = 4096\npartitions = 2\nkeep = true\n\
             [vault]\nrecipe = \"tests/data/disks/vault.toml\"\nflip = { partition = \"data\", file = \"etc/motd\" }\n\
             [userland]\nrecipe = \"tests/data/disks/ro.toml\"\nflip_header = \"root\"\n",
        );
        let disks = &case.as_boot().unwrap().disks;
        assert_eq!(
            disks.disk,
            Some(DiskSpec {
                layout: DiskLayout::Partitions { size_kib: 4096, count: 2 },
                keep: true,
                flip: None,
                flip_header: None,
                resize_kept_kib: None
            })
        );
        assert_eq!(
            disks.vault,
            Some(DiskSpec {
                layout: DiskLayout::Recipe(PathBuf::from("tests/data/disks/vault.toml")),
                keep: false,
                flip: Some(FileFlip { partition: "data".into(), file: "etc/motd".into() }),
                flip_header: None,
                resize_kept_kib: None
            })
        );
        assert_eq!(
            disks.userland,
            Some(DiskSpec {
                layout: DiskLayout::Recipe(PathBuf::from("tests/data/disks/ro.toml")),
                keep: false,
                flip: None,
                flip_header: Some("root".into()),
                resize_kept_kib: None
            })
        );
        assert_eq!(disks.iter().map(|(name, _)| name).collect::<Vec<_>>(), ["disk", "vault", "userland"]);
        let paths: Vec<(String, PathBuf, crate::PathKind)> =
            case.paths().into_iter().map(|p| (p.field, p.path, p.kind)).collect();
        assert_eq!(
            paths,
            [
                ("vault.recipe".into(), "tests/data/disks/vault.toml".into(), crate::PathKind::File),
                ("userland.recipe".into(), "tests/data/disks/ro.toml".into(), crate::PathKind::File),
            ]
        );

        let zeroed = parsed("", "[disk]\nsize_kib = 4\n");
        let disk = zeroed.as_boot().unwrap().disks.disk.clone().unwrap();
        assert_eq!(disk.layout, DiskLayout::Zeroed { size_kib: 4 });
        assert_eq!(disk.layout.size_kib(), Some(4));
        assert!(zeroed.paths().is_empty());
        assert_eq!(parsed("", "").as_boot().unwrap().disks, Default::default());
    }

    #[test]
    fn resizing_a_kept_disk_is_a_self_checks_tampering_only() {
        assert_eq!(
            refused(TWO_BOOTS, "[disk]\nsize_kib = 4096\nresize_kept_kib = 8192\n"),
            "tests/c.toml: disk.resize_kept_kib: only with keep: it resizes the disk the first boot left"
        );
        assert!(refused(TWO_BOOTS, "[disk]\nsize_kib = 4096\nkeep = true\nresize_kept_kib = 8192\n")
            .starts_with("tests/c.toml: disk.resize_kept_kib: only with must_fail: "));
        let case = parsed(
            &format!("{TWO_BOOTS}\nmust_fail = 'refused'"),
            "[disk]\nsize_kib = 4096\nkeep = true\nresize_kept_kib = 8192\n",
        );
        assert_eq!(case.as_boot().unwrap().disks.disk.as_ref().unwrap().resize_kept_kib, Some(8192));
    }

    #[test]
    fn a_disk_image_is_a_path_its_format_told_by_its_header_unless_given() {
        let disk = |tables: &str| parsed("", tables).as_boot().unwrap().disks.disk.clone().unwrap().layout;
        assert_eq!(
            disk("[disk]\nimage = \"fs.img\"\n"),
            DiskLayout::Image { path: PathBuf::from("fs.img"), format: None }
        );
        assert_eq!(
            disk("[disk]\nimage = \"/abs/fs.qcow2\"\nformat = \"qcow2\"\n"),
            DiskLayout::Image { path: PathBuf::from("/abs/fs.qcow2"), format: Some(crate::ImageFormat::Qcow2) }
        );
        assert_eq!(
            refused("", "[disk]\nimage = \"fs.img\"\nformat = \"vmdk\"\n"),
            "tests/c.toml: disk.format: \"vmdk\" is not accepted: raw or qcow2"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4\nformat = \"raw\"\n"),
            "tests/c.toml: disk.format: only with image: it says the format of the image file the case gives"
        );
        assert_eq!(
            refused("", "[disk]\nimage = \"fs.img\"\npartitions = 2\n"),
            "tests/c.toml: disk.partitions: only with size_kib: an image has its own partitions"
        );
        assert!(
            refused("", "[disk]\nimage = \"fs.img\"\nflip_header = \"a\"\n").contains("flip_header: only with recipe")
        );
    }

    #[test]
    fn a_disk_is_sized_a_recipe_or_an_image_never_two_nor_none() {
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4096\nrecipe = \"d.toml\"\n"),
            "tests/c.toml: disk.recipe: a disk is one of size_kib (zeros, or a GPT with partitions), recipe (a disk recipe) or image (a disk image file), not size_kib and recipe"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"d.toml\"\nimage = \"fs.img\"\n"),
            "tests/c.toml: disk.image: a disk is one of size_kib (zeros, or a GPT with partitions), recipe (a disk recipe) or image (a disk image file), not recipe and image"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4\n[vault]\nkeep = false\n"),
            "tests/c.toml: vault.size_kib: required: the disk's size in KiB (or vault.recipe, a disk recipe, or vault.image, a disk image file)"
        );
        assert_eq!(
            refused("", "[userland]\nrecipe = \" \"\n"),
            "tests/c.toml: userland.recipe: empty: a path, relative to the workspace root or absolute"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"d.toml\"\npartitions = 2\n"),
            "tests/c.toml: disk.partitions: only with size_kib: a disk recipe lists its own partitions"
        );
    }

    #[test]
    fn a_size_is_4_kib_to_16_gib_in_steps_of_4_and_holds_its_gpt() {
        for bad in [0, 2, 4095, 16_777_220, -4] {
            assert_eq!(
                refused("", &format!("[disk]\nsize_kib = {bad}\n")),
                format!("tests/c.toml: disk.size_kib: {bad} is not accepted: a size in KiB from 4 to 16777216 (16 GiB), a multiple of 4")
            );
        }
        assert!(crate::parse("tests/c.toml", &text("", "[disk]\nsize_kib = 16777216\n")).is_ok());
        for bad in [0, 129] {
            assert_eq!(
                refused("", &format!("[disk]\nsize_kib = 4096\npartitions = {bad}\n")),
                format!(
                    "tests/c.toml: disk.partitions: {bad} is not accepted: a number of equal GPT partitions, 1 to 128"
                )
            );
        }
        assert_eq!(
            refused("", "[disk]\nsize_kib = 44\npartitions = 2\n"),
            "tests/c.toml: disk.size_kib: 44 is not accepted with partitions = 2: a GPT of 2 needs at least 48 KiB (the GPT's 34 sectors at each end, 20 KiB each once aligned to 4 KiB, and each partition 4 KiB or more)"
        );
        assert_eq!(
            refused("", "[vault]\nsize_kib = 40\npartitions = 1\n"),
            "tests/c.toml: vault: only with [disk]: the vault is a second writable disk, beside the first\ntests/c.toml: vault.size_kib: 40 is not accepted with partitions = 1: a GPT of 1 needs at least 44 KiB (the GPT's 34 sectors at each end, 20 KiB each once aligned to 4 KiB, and the partition 4 KiB or more)"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = 40\npartitions = 1\n"),
            "tests/c.toml: disk.size_kib: 40 is not accepted with partitions = 1: a GPT of 1 needs at least 44 KiB (the GPT's 34 sectors at each end, 20 KiB each once aligned to 4 KiB, and the partition 4 KiB or more)"
        );
        for (size_kib, count) in [(44, 1), (48, 2), (552, 128)] {
            let case = parsed("", &format!("[disk]\nsize_kib = {size_kib}\npartitions = {count}\n"));
            let layout = &case.as_boot().unwrap().disks.disk.as_ref().unwrap().layout;
            assert_eq!(*layout, DiskLayout::Partitions { size_kib, count: count as u32 });
        }
        assert!(refused("", "[disk]\nsize_kib = 548\npartitions = 128\n").contains("needs at least 552 KiB"));
    }

    #[test]
    fn keep_needs_two_boots_and_is_never_on_the_read_only_disk() {
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4096\nkeep = true\n"),
            "tests/c.toml: disk.keep: only with distinct_across_boots: a kept disk is made for the first of the case's two boots and booted again, as it was left, by the second"
        );
        assert_eq!(
            refused(TWO_BOOTS, "[userland]\nrecipe = \"ro.toml\"\nkeep = true\n"),
            "tests/c.toml: userland.keep: not accepted on [userland]: it is attached read-only, so no boot changes it and there is nothing to keep"
        );
        let case = parsed(TWO_BOOTS, "[disk]\nsize_kib = 4\n[vault]\nsize_kib = 8\nkeep = true\n");
        assert!(case.as_boot().unwrap().disks.vault.as_ref().unwrap().keep);
    }

    #[test]
    fn flips_are_for_a_recipes_disk_one_per_disk() {
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4096\nflip = { partition = \"data\", file = \"a\" }\n"),
            "tests/c.toml: disk.flip: only with recipe: it names a file in a partition of a disk recipe"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4096\nflip_header = \"data\"\n"),
            "tests/c.toml: disk.flip_header: only with recipe: it names a partition of a disk recipe"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"d.toml\"\nflip_header = \"data\"\nflip = { partition = \"data\", file = \"a\" }\n"),
            "tests/c.toml: disk.flip_header: not with disk.flip: one flipped bit per disk, so what the guest detects has one cause"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"d.toml\"\nflip = { partition = \"data\" }\n"),
            "tests/c.toml: disk.flip.file: required: a file's path in that partition's tree"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"d.toml\"\nflip = { file = \"a\" }\n"),
            "tests/c.toml: disk.flip.partition: required: the name of a partition of the recipe"
        );
        for bad in ["../a", "/etc/motd", "", ".", "a/../../b"] {
            assert_eq!(
                refused("", &format!("[disk]\nrecipe = \"d.toml\"\nflip = {{ partition = \"data\", file = {bad:?} }}\n")),
                format!("tests/c.toml: disk.flip.file: {bad:?} is not accepted: a relative path inside the partition's tree, without \"..\", such as \"hello.txt\" or \"etc/motd\"")
            );
        }
        let long = "p".repeat(37);
        assert_eq!(
            refused("", &format!("[userland]\nrecipe = \"d.toml\"\nflip_header = \"{long}\"\n")),
            format!("tests/c.toml: userland.flip_header: \"{long}\" is not accepted: a GPT partition's name, 1 to 36 characters")
        );
    }

    #[test]
    fn a_misspelt_or_mistyped_key_of_a_disk_is_refused_in_words() {
        assert_eq!(
            refused("", "[disk]\nsise_kib = 4096\n"),
            "tests/c.toml: disk.sise_kib: not a field of [disk]; did you mean `size_kib`? Accepted: size_kib, partitions, recipe, image, format, keep, flip, flip_header, resize_kept_kib"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = 4\n[userland]\nrecipe = \"r.toml\"\nflip_heder = \"a\"\n"),
            "tests/c.toml: userland.flip_heder: not a field of [userland]; did you mean `flip_header`? Accepted: size_kib, partitions, recipe, image, format, keep, flip, flip_header, resize_kept_kib"
        );
        assert_eq!(
            refused("", "[vault]\nrecipe = \"r.toml\"\nflip = { partition = \"a\", fiel = \"b\" }\n"),
            "tests/c.toml: vault.flip.fiel: not a field of vault.flip; did you mean `file`? Accepted: partition, file"
        );
        assert_eq!(
            refused("", "[disk]\nsize_kib = \"4096\"\n"),
            "tests/c.toml: disk.size_kib: \"4096\" is not accepted: the disk's size in KiB, a multiple of 4, such as 4096"
        );
        assert_eq!(
            refused("", "[disk]\nrecipe = \"r.toml\"\nflip = \"hello.txt\"\n"),
            "tests/c.toml: disk.flip: \"hello.txt\" is not accepted: { partition = \"name\", file = \"path in its tree\" }"
        );
        assert_eq!(
            refused("disk = 4096", ""),
            "tests/c.toml: disk: 4096 is not accepted: a [disk] table, with size_kib or recipe"
        );
        // Every key of every disk table, given a date, is refused in words, never in serde's.
        let date = "1979-05-27";
        for table in super::TABLES {
            for field in super::DISK.iter().chain(super::FLIP) {
                let inner = if super::FLIP.iter().any(|f| f.name == field.name) {
                    format!("recipe = \"r.toml\"\nflip = {{ {} = {date} }}\n", field.name)
                } else {
                    format!("{} = {date}\n", field.name)
                };
                let error = refused(
                    "",
                    &format!("[disk]\nsize_kib = 4\n[{table}]\n{inner}")
                        .replace("[disk]\nsize_kib = 4\n[disk]", "[disk]"),
                );
                assert!(
                    error.contains(&format!(" is not accepted: {}", field.accepted)) && !error.contains("invalid type"),
                    "{table}.{}: {error}",
                    field.name
                );
            }
        }
    }
}
