//! `--prebuild DIR`: every selected boot case's pieces built once per width into DIR
//! (prebuilt.rs has the directory's format and its checks).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use testbench_case::{Arch, Case};

use super::prepare::prepare;
use crate::build::Builder;
use crate::case_result::Blocked;
use crate::cli::Options;
use crate::error::{BenchError, Finished};
use crate::prebuilt::{fingerprint, Entry, Index, BENCH, INDEX};
use crate::report::Reporter;
use crate::workspace::Workspace;

fn io(what: &str, path: &Path, error: std::io::Error) -> BenchError {
    BenchError::io(format!("--prebuild: {what} {}", path.display()), error)
}

/// Build every selected boot case for each width it boots (the widths one after
/// another, each renamed into place when whole), copy the bench in and write the index.
pub fn make(
    dir: &Path,
    ws: &Workspace,
    selected: &[&Case],
    options: &Options,
    reporter: &Reporter,
    run_dir: Option<&Path>,
) -> Result<Finished, BenchError> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let dir = dir.canonicalize().map_err(|e| io("resolving", dir, e))?;
    let refused = |why: String| BenchError::Refused(vec![format!("--prebuild {}: {why}", dir.display())]);
    let at_start = fingerprint(&ws.root, Some(&dir)).map_err(|e| refused(e.to_string()))?;
    reporter.note(
        crate::events::Note::Prebuild,
        &format!("prebuilding into {} from {}", dir.display(), at_start.describe()),
    );
    // A --slurm run prebuilds inside its own run directory, and logs its builds there.
    let run_dir = match run_dir {
        Some(dir) => dir.to_path_buf(),
        None => crate::rundir::create(&ws.root)?,
    };
    let mut builder = Builder::new(&ws.root, &run_dir);
    let mut recipes = HashMap::new();
    let boots: Vec<&Case> = selected.iter().copied().filter(|c| c.as_boot().is_some()).collect();
    let widths: Vec<Arch> = Arch::ALL
        .into_iter()
        .filter(|arch| options.arch.is_none_or(|only| only == *arch))
        .filter(|arch| boots.iter().any(|case| case.arch().contains(arch)))
        .collect();
    let workspace = ws.root.canonicalize().unwrap_or_else(|_| ws.root.clone());
    let cases = boots.iter().map(|case| (case.name.clone(), crate::prebuilt::case_digest(&case.file))).collect();
    let mut index = Index { workspace, fingerprint: at_start.clone(), cases, widths: BTreeMap::new() };
    let (mut ready, mut failed) = (0, 0);
    for arch in widths {
        let tmp = dir.join(format!(".{arch}.tmp"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| io("creating", &tmp, e))?;
        let (entries, made, broken) = build_width(arch, &boots, ws, &tmp, &mut builder, &mut recipes, reporter);
        (ready, failed) = (ready + made, failed + broken);
        // Only the stored files stay; what the packing left beside them goes.
        for leftover in std::fs::read_dir(&tmp).map_err(|e| io("reading", &tmp, e))?.flatten() {
            if leftover.file_name() != "files" {
                let _ = std::fs::remove_dir_all(leftover.path()).or_else(|_| std::fs::remove_file(leftover.path()));
            }
        }
        let now = fingerprint(&ws.root, Some(&dir)).map_err(|e| refused(e.to_string()))?;
        if now != at_start {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(refused(format!(
                "the tree changed while {arch} was being built ({}); nothing of {arch} was put in place",
                now.difference(&at_start)
            )));
        }
        let place = dir.join(arch.name());
        let _ = std::fs::remove_dir_all(&place);
        std::fs::rename(&tmp, &place).map_err(|e| io("putting in place", &place, e))?;
        index.widths.insert(arch.name().to_string(), entries);
    }
    let bench = write_bench_and_index(&dir, &index)?;
    reporter.note(
        crate::events::Note::Prebuild,
        &format!(
            "prebuilt {ready} (case, width) pair(s), {failed} failed, in {:.1}s; boot them with: {} --prebuilt {}",
            started.elapsed().as_secs_f64(),
            bench.display(),
            dir.display()
        ),
    );
    Ok(Finished::Passed)
}

/// Every selected case of one width prepared into `tmp`: each (case, width)'s entry, and
/// how many were made and how many failed (each failure said, and kept as its result).
#[allow(clippy::too_many_arguments)]
fn build_width(
    arch: Arch,
    boots: &[&Case],
    ws: &Workspace,
    tmp: &Path,
    builder: &mut Builder,
    recipes: &mut super::prepare::Recipes,
    reporter: &Reporter,
) -> (BTreeMap<String, Entry>, usize, usize) {
    let (mut made, mut broken) = (0, 0);
    let mut entries = BTreeMap::new();
    for case in boots.iter().filter(|case| case.arch().contains(&arch)) {
        let prepared = prepare(case, arch, ws, tmp, builder, recipes, reporter);
        let entry = match prepared.map_err(|b| match b {
            Blocked::Build(why) | Blocked::HostLack(why) | Blocked::Trouble(why) => why,
        }) {
            Ok(pieces) => {
                pieces.to_entry(tmp, arch.name()).unwrap_or_else(|why| Entry::Failed { why: why.to_string() })
            }
            Err(why) => Entry::Failed { why },
        };
        match &entry {
            Entry::Ready { .. } => made += 1,
            Entry::Failed { why } => {
                broken += 1;
                reporter.note(
                    crate::events::Note::Prebuild,
                    &format!("{arch} {}: the build failed, kept as its result: {why}", case.name),
                );
            }
        }
        entries.insert(case.name.clone(), entry);
    }
    (entries, made, broken)
}

/// The bench's own binary copied in and the index written, each renamed into place when
/// whole; the copy's path.
fn write_bench_and_index(dir: &Path, index: &Index) -> Result<PathBuf, BenchError> {
    let exe = std::env::current_exe().map_err(|e| BenchError::io("--prebuild: finding the bench's own binary", e))?;
    let bench = dir.join(BENCH);
    let bench_tmp = dir.join(format!(".{BENCH}.tmp"));
    std::fs::copy(&exe, &bench_tmp).map_err(|e| io("copying the bench to", &bench_tmp, e))?;
    std::fs::rename(&bench_tmp, &bench).map_err(|e| io("putting in place", &bench, e))?;
    // The stamp plugin beside it, as beside the bench (boot/stamps.rs): a prebuilt boot
    // settles in the guest's time as a built one does.
    let plugin = exe.with_file_name(crate::boot::stamps::PLUGIN);
    if plugin.is_file() {
        let copy = dir.join(crate::boot::stamps::PLUGIN);
        let copy_tmp = dir.join(format!(".{}.tmp", crate::boot::stamps::PLUGIN));
        std::fs::copy(&plugin, &copy_tmp).map_err(|e| io("copying the stamp plugin to", &copy_tmp, e))?;
        std::fs::rename(&copy_tmp, &copy).map_err(|e| io("putting in place", &copy, e))?;
    }
    let text = serde_json::to_string_pretty(index).expect("an index serializes");
    let index_tmp = dir.join(format!(".{INDEX}.tmp"));
    std::fs::write(&index_tmp, text).map_err(|e| io("writing", &index_tmp, e))?;
    std::fs::rename(&index_tmp, dir.join(INDEX)).map_err(|e| io("putting in place", &dir.join(INDEX), e))?;
    Ok(bench)
}
