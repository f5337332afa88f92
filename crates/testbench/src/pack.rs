//! Packing the reference guest's signed boot bundle for one case and width.
//!
//! The bundle holds the kernel, the first program (in init's place), the programs it
//! starts, the `programs` listing (one line per later program: its entry name, then the
//! budgets the case gives it) and the case's `[[file]]` data entries. It is packed and
//! signed with the guest's own `bundle` crate and its development seed, the code the
//! loader verifies with, so the two never disagree on the format.
//!
//! Hostile inputs happen here, after the honest build: a corrupted program image (with
//! the guest's own `elf` corruptions), a flipped byte after signing, an archive signed
//! without its domain and length, a bundle cut short.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bundle::Kind;
use testbench_case::{Arch, Case, Corruption, FileSource, Program, ProgramEntry};

use crate::build::{BuildKey, Builder, Profile, PROGRAMS_PACKAGE, REFERENCE_KERNEL_PACKAGE};
use crate::error::BenchError;
use crate::workspace::Workspace;

/// Why a case's bundle could not be made: its builds, its files, the packing.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// A build the bundle needs failed (shared with every case that needs it).
    #[error(transparent)]
    Build(#[from] Arc<BenchError>),
    #[error("failed to read {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// A `[[file]]`'s source (its name in the bundle).
    #[error("failed to read {} (file {name}): {source}", .path.display())]
    ReadFile { path: PathBuf, name: String, source: std::io::Error },
    /// The case's corruption that the image does not have what it needs for.
    #[error("the corruption {with:?} does not apply to {bin} ({arch}, {len} bytes)")]
    Corruption { with: Corruption, bin: String, arch: Arch, len: usize },
    /// `file[index].servers` that could not be merged into its manifest.
    #[error("file[{index}].servers: {source}")]
    Servers { index: usize, source: MergeError },
    /// The guest's `bundle` crate refused the entries.
    #[error("failed to pack the bundle: {}", .0.describe())]
    Pack(bundle::Error),
    #[error("failed to create {}: {source}", .path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("failed to write {}: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("failed to write the programs listing: {0}")]
    Listing(#[source] std::io::Error),
}

/// Why a `servers` list could not be merged into a JSON manifest.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("the file is not a JSON manifest: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("the manifest has no `servers` list to merge into")]
    NoServers,
    /// A case's entry that JSON cannot hold.
    #[error("cannot be JSON: {0}")]
    Entry(#[source] serde_json::Error),
    /// The manifest's entry of that name (JSON), which is not an object.
    #[error("the manifest's entry {0} is not an object")]
    NotObject(serde_json::Value),
    #[error("{0}")]
    Write(#[source] serde_json::Error),
}

/// The bytes of one program, built (or read) and corrupted as the case says.
fn program_bytes(
    program: &Program,
    arch: Arch,
    ws: &Workspace,
    builder: &mut Builder,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<u8>, PackError> {
    let built = |package: &str, bin: &str, features: &[String], builder: &mut Builder, log: &mut dyn FnMut(&str)| {
        builder.get(&BuildKey::new(arch, package, bin, Profile::Release, features), log).map(|a| a.path)
    };
    let path = match program {
        Program::TestProgram(bin) | Program::Corrupt { bin, .. } => built(PROGRAMS_PACKAGE, bin, &[], builder, log)?,
        Program::Package { package, bin, features } => built(package, bin, features, builder, log)?,
        Program::Path(path) => ws.root.join(path),
    };
    let image = match std::fs::read(&path) {
        Ok(image) => image,
        Err(source) => return Err(PackError::Read { path, source }),
    };
    let Program::Corrupt { bin, with } = program else { return Ok(image) };
    let corrupted = match with {
        Corruption::SegmentVaddr(vaddr) => elf::corrupt::segment_vaddr(&image, *vaddr),
        Corruption::Entry(entry) => elf::corrupt::entry(&image, *entry),
        Corruption::Truncate(len) => elf::corrupt::truncate(&image, *len as usize),
        Corruption::SegmentFlags(flags) => elf::corrupt::segment_flags(&image, flags),
        Corruption::TruncateSegmentData(n) => elf::corrupt::truncate_segment_data(&image, *n as usize),
    };
    corrupted.ok_or_else(|| PackError::Corruption { with: with.clone(), bin: bin.clone(), arch, len: image.len() })
}

/// A JSON manifest with the case's `servers` entries merged in by name: an entry replaces
/// the members it gives in the manifest's entry of its name, or is appended after the rest
/// when none has it. Cases that differ in one entry share one manifest file this way.
pub fn merge_servers(manifest: &[u8], servers: &[toml::Table]) -> Result<Vec<u8>, MergeError> {
    let mut json: serde_json::Value = serde_json::from_slice(manifest).map_err(MergeError::NotJson)?;
    let list = json.get_mut("servers").and_then(serde_json::Value::as_array_mut).ok_or(MergeError::NoServers)?;
    for entry in servers {
        let entry = serde_json::to_value(entry).map_err(MergeError::Entry)?;
        let name = entry["name"].clone();
        match list.iter_mut().find(|s| s["name"] == name) {
            Some(existing) => {
                let (Some(target), Some(members)) = (existing.as_object_mut(), entry.as_object()) else {
                    return Err(MergeError::NotObject(name));
                };
                for (key, value) in members {
                    target.insert(key.clone(), value.clone());
                }
            }
            None => list.push(entry),
        }
    }
    serde_json::to_vec_pretty(&json).map_err(MergeError::Write)
}

/// The `programs` entry: one line per program after the first.
pub fn programs_listing(programs: &[ProgramEntry]) -> String {
    let mut listing = String::new();
    for entry in programs.iter().skip(1) {
        listing.push_str(&entry.program.entry_name());
        for budget in &entry.budgets {
            listing.push(' ');
            listing.push_str(budget);
        }
        listing.push('\n');
    }
    listing
}

/// The reference kernel's ELF a case boots on `arch`, built once per run (the run's copy:
/// the bundle packs it, and a crash's frames are symbolized against it).
pub fn reference_kernel(
    case: &Case,
    arch: Arch,
    builder: &mut Builder,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf, PackError> {
    let boot = case.as_boot().expect("a bundle is packed for a boot case");
    let profile = if boot.debug_assertions { Profile::Checked } else { Profile::Release };
    let kernel_key =
        BuildKey::new(arch, REFERENCE_KERNEL_PACKAGE, REFERENCE_KERNEL_PACKAGE, profile, &boot.kernel_features);
    Ok(builder.get(&kernel_key, log)?.path)
}

/// Build, pack, sign (and break, if the case says so) the bundle; its path in the run.
pub fn reference_bundle(
    case: &Case,
    programs: &[ProgramEntry],
    arch: Arch,
    ws: &Workspace,
    run_dir: &Path,
    builder: &mut Builder,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf, PackError> {
    let boot = case.as_boot().expect("a bundle is packed for a boot case");
    let kernel_path = reference_kernel(case, arch, builder, log)?;
    let kernel = match std::fs::read(&kernel_path) {
        Ok(kernel) => kernel,
        Err(source) => return Err(PackError::Read { path: kernel_path, source }),
    };

    let mut images = Vec::new();
    for entry in programs {
        images.push((entry.program.entry_name(), program_bytes(&entry.program, arch, ws, builder, log)?));
    }
    let mut files = Vec::new();
    for (index, file) in boot.files.iter().enumerate() {
        let mut bytes = match &file.from {
            FileSource::Path(path) | FileSource::Program(Program::Path(path)) => {
                let full = ws.root.join(path);
                match std::fs::read(&full) {
                    Ok(bytes) => bytes,
                    Err(source) => return Err(PackError::ReadFile { path: full, name: file.name.clone(), source }),
                }
            }
            FileSource::Program(program) => program_bytes(program, arch, ws, builder, log)?,
        };
        if !file.servers.is_empty() {
            bytes = merge_servers(&bytes, &file.servers).map_err(|source| PackError::Servers { index, source })?;
        }
        files.push((file.name.clone(), bytes));
    }
    let listing = programs_listing(programs);

    let mut entries: Vec<(&str, Kind, &[u8])> = vec![("kernel", Kind::Kernel, &kernel)];
    for (index, (name, bytes)) in images.iter().enumerate() {
        entries.push((name, if index == 0 { Kind::FirstProgram } else { Kind::Program }, bytes));
    }
    // A [[file]] named `programs` replaces the listing the bench writes.
    if !files.iter().any(|(name, _)| name == "programs") {
        entries.push(("programs", Kind::Data, listing.as_bytes()));
    }
    for (name, bytes) in &files {
        entries.push((name, Kind::Data, bytes));
    }

    let mut signed = if boot.hostile.sign_bare_archive {
        let mut archive = bundle::pack(&entries).map_err(PackError::Pack)?;
        let trailer = bundle::sign_bare(&archive, &bundle::DEV_SEED);
        archive.extend_from_slice(&trailer);
        archive
    } else {
        bundle::pack_signed(&entries, &bundle::DEV_SEED).map_err(PackError::Pack)?
    };
    if boot.hostile.tamper_bundle {
        // One byte in the middle of the archive, after signing.
        let at = (signed.len() - bundle::TRAILER_LEN) / 2;
        signed[at] ^= 0x01;
    }
    if let Some(short) = boot.hostile.short_initrd {
        signed.truncate(short as usize);
    }
    let dir = run_dir.join("build").join(arch.name());
    std::fs::create_dir_all(&dir).map_err(|source| PackError::Create { path: dir.clone(), source })?;
    let path = dir.join(format!("{}-bundle.bin", case.name));
    std::fs::write(&path, &signed).map_err(|source| PackError::Write { path: path.clone(), source })?;
    std::fs::write(dir.join(format!("{}-programs.txt", case.name)), &listing).map_err(PackError::Listing)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_s_servers_merge_into_its_manifest_by_name() {
        let manifest = br#"{"servers": [{"name": "a", "args": ["x"], "pages": 4}, {"name": "b"}], "other": 1}"#;
        let servers: Vec<toml::Table> = toml::from_str::<toml::Table>(
            "[[s]]\nname = \"a\"\nargs = [\"y\", \"z\"]\n[[s]]\nname = \"c\"\nargs = []\n",
        )
        .unwrap()["s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_table().unwrap().clone())
            .collect();
        let merged: serde_json::Value = serde_json::from_slice(&merge_servers(manifest, &servers).unwrap()).unwrap();
        assert_eq!(
            merged,
            serde_json::json!({"servers": [
                {"name": "a", "args": ["y", "z"], "pages": 4},
                {"name": "b"},
                {"name": "c", "args": []}
            ], "other": 1})
        );
        let none = merge_servers(b"{}", &servers).unwrap_err();
        assert!(matches!(none, MergeError::NoServers) && none.to_string().contains("no `servers` list"), "{none}");
        let bad = merge_servers(b"not json", &servers).unwrap_err();
        assert!(matches!(bad, MergeError::NotJson(_)) && bad.to_string().contains("not a JSON manifest"), "{bad}");
        // An entry with no name finds the manifest's entry with none: a number, not an object.
        let unnamed = vec![toml::Table::new()];
        let scalar = merge_servers(br#"{"servers": [1]}"#, &unnamed).unwrap_err();
        assert!(matches!(scalar, MergeError::NotObject(serde_json::Value::Null)), "{scalar:?}");
        assert_eq!(scalar.to_string(), "the manifest's entry null is not an object");
    }

    #[test]
    fn the_listing_has_a_line_per_later_program_with_its_budgets() {
        let entry = |name: &str, budgets: &[&str]| ProgramEntry {
            program: Program::TestProgram(name.into()),
            budgets: budgets.iter().map(|b| b.to_string()).collect(),
        };
        let programs = [entry("logsrv", &[]), entry("checker", &["system", "users"]), entry("rng", &[])];
        assert_eq!(programs_listing(&programs), "checker system users\nrng\n");
    }

    #[test]
    fn a_bundle_the_bench_signs_is_one_the_loaders_code_verifies() {
        let entries: Vec<(&str, Kind, &[u8])> =
            vec![("kernel", Kind::Kernel, b"k"), ("logsrv", Kind::FirstProgram, b"p"), ("programs", Kind::Data, b"")];
        let signed = bundle::pack_signed(&entries, &bundle::DEV_SEED).unwrap();
        let verified = bundle::verify(&signed, &bundle::DEV_PUBLIC_KEY).unwrap();
        assert_eq!(verified.first_program().name, "logsrv");
        let mut tampered = signed.clone();
        tampered[(signed.len() - bundle::TRAILER_LEN) / 2] ^= 1;
        assert_eq!(bundle::verify(&tampered, &bundle::DEV_PUBLIC_KEY).err(), Some(bundle::Error::Signature));
    }
}
