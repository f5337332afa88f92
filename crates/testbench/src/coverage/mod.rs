//! `--coverage`: which lines of the kernel each boot reaches.
//!
//! Each boot whose kernel ELF has DWARF line tables (the reference kernel, built with
//! them for such a run; a case's `[guest] symbols`; an external kernel that is itself
//! such an ELF, as xv6's is) runs with the bench's coverage plugin
//! (`crates/cover-plugin`) loaded into QEMU, given the ELF's executable sections. QEMU
//! must exit for the plugin to write its file (`coverage.bin` in the boot's directory):
//! a boot that powers off does, and the bench ends any other with SIGTERM rather than
//! SIGKILL; a QEMU that must still be killed leaves no coverage, and the summary says so.
//!
//! After the boots, [`Collector::finish`] maps each file's addresses to source lines
//! through the ELF's line table (`testbench_symbols`), writes the boot's
//! `coverage.info` (lcov's tracefile format, which `genhtml` reads) and the run's merged
//! one, and sums the lines reached per source file: the run's summary, its HTML page's
//! coverage table, and `cargo testbench coverage --which FILE:LINE` ([`which`]).

pub mod which;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use testbench_cover::{Coverage, Range, MAX_ADDRESSES, MAX_RANGES};
use testbench_symbols::LineRow;

use crate::report::BootReport;

/// The plugin's file, beside the bench's binary (the launcher builds it with the bench).
pub const PLUGIN: &str = "libtestbench_cover_plugin.so";
/// The plugin's file in a boot's directory.
pub const FILE: &str = "coverage.bin";
/// The lcov tracefile of a boot (in its directory) and of the run (in the run's).
pub const LCOV: &str = "coverage.info";
/// The largest coverage file read: the most addresses the plugin writes, and its header.
const MAX_FILE: u64 = 24 + 8 * MAX_ADDRESSES as u64;

/// The coverage plugin beside the bench, or the host lack that names it.
pub fn plugin() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("--coverage: cannot find the bench's own binary: {e}"))?;
    let plugin = exe.with_file_name(PLUGIN);
    if plugin.is_file() {
        Ok(plugin)
    } else {
        Err(format!(
            "--coverage: the coverage plugin {} is not there (cargo testbench builds it beside the bench; by hand: cargo build --release -p testbench-cover-plugin)",
            plugin.display()
        ))
    }
}

/// How one boot is covered: the plugin and the kernel ELF's executable ranges.
#[derive(Clone, Debug)]
pub struct CoverSpec {
    pub plugin: PathBuf,
    pub ranges: Vec<Range>,
}

impl CoverSpec {
    /// The coverage of a boot of `elf`: refused, saying why, when the ELF cannot be read
    /// or has no line table to map addresses to.
    pub fn for_elf(plugin: &Path, elf: &Path) -> Result<CoverSpec, String> {
        let symbols = testbench_symbols::cached(elf).map_err(|e| e.to_string())?;
        symbols.require_dwarf().map_err(|e| e.to_string())?;
        let mut ranges: Vec<Range> = Vec::new();
        for &(start, end) in symbols.text_ranges() {
            match ranges.last_mut() {
                // Sections that touch (or lie within a page of each other) are one range.
                Some(last) if start <= last.end.saturating_add(4096) => last.end = last.end.max(end),
                _ => ranges.push(Range { start, end }),
            }
        }
        if ranges.is_empty() {
            return Err(format!("{}: has no executable section", elf.display()));
        }
        if ranges.len() > MAX_RANGES {
            // More scattered sections than the plugin takes: one range spans them all.
            let (start, end) = (ranges[0].start, ranges[ranges.len() - 1].end);
            ranges = vec![Range { start, end }];
        }
        Ok(CoverSpec { plugin: plugin.to_owned(), ranges })
    }

    /// QEMU's arguments that load the plugin, writing `out` when QEMU exits.
    pub fn qemu_args(&self, out: &Path) -> [String; 2] {
        let mut plugin = format!("{},out={}", self.plugin.display(), out.display());
        for range in &self.ranges {
            let _ = write!(plugin, ",range={range}");
        }
        ["-plugin".to_string(), plugin]
    }
}

/// Lines by source file: each line with code, and how many boots reached it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lines(pub BTreeMap<Arc<str>, BTreeMap<u32, u64>>);

impl Lines {
    /// One boot's lines: every line the table has (0), those an executed address is in (1).
    pub fn of(rows: &[LineRow], coverage: &Coverage) -> Lines {
        let mut files: BTreeMap<Arc<str>, BTreeMap<u32, u64>> = BTreeMap::new();
        for row in rows {
            files.entry(row.file.clone()).or_default().entry(row.line).or_insert(0);
        }
        for &address in &coverage.addresses {
            // The row whose range holds the address (rows are sorted by their start).
            let after = rows.partition_point(|row| row.start <= address);
            let Some(row) = after.checked_sub(1).map(|i| &rows[i]) else { continue };
            if address < row.start + row.len.max(1) {
                if let Some(count) = files.get_mut(&row.file).and_then(|lines| lines.get_mut(&row.line)) {
                    *count = 1;
                }
            }
        }
        Lines(files)
    }

    /// Another's counts added to these.
    pub fn merge(&mut self, other: &Lines) {
        for (file, lines) in &other.0 {
            let mine = self.0.entry(file.clone()).or_default();
            for (&line, &count) in lines {
                *mine.entry(line).or_insert(0) += count;
            }
        }
    }

    /// lcov's tracefile of the kernel's own sources ([`own_source`]: the toolchain's
    /// library is not the kernel's, and `genhtml` could not read its paths): per file
    /// `SF`, a `DA` per line, the found and hit counts.
    pub fn lcov(&self, test: &str) -> String {
        let mut out = String::new();
        for (file, lines) in self.0.iter().filter(|(file, _)| own_source(file)) {
            let _ = writeln!(out, "TN:{test}\nSF:{file}");
            for (line, count) in lines {
                let _ = writeln!(out, "DA:{line},{count}");
            }
            let hit = lines.values().filter(|&&c| c > 0).count();
            let _ = writeln!(out, "LF:{}\nLH:{hit}\nend_of_record", lines.len());
        }
        out
    }

    /// Per file of the kernel's own ([`own_source`]): lines with code, lines reached.
    pub fn per_file(&self) -> Vec<FileLines> {
        self.0
            .iter()
            .filter(|(file, _)| own_source(file))
            .map(|(file, lines)| FileLines {
                file: file.to_string(),
                lines: lines.len(),
                reached: lines.values().filter(|&&c| c > 0).count(),
            })
            .collect()
    }
}

/// A source file's line counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileLines {
    pub file: String,
    pub lines: usize,
    pub reached: usize,
}

/// Whether a DWARF file path is the kernel's own source, not the toolchain's library
/// (Rust's `/rustc/<hash>/library/…`, the crates cargo fetched).
pub fn own_source(file: &str) -> bool {
    !(file.starts_with("/rustc/") || file.contains("/.cargo/registry/") || file.contains("/.rustup/toolchains/"))
}

/// A run's coverage, summed.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The run's merged tracefile.
    pub lcov: PathBuf,
    /// Boots covered.
    pub boots: usize,
    /// Boots not covered, each with why (label: reason).
    pub uncovered: Vec<String>,
    /// The kernel's own files, by path.
    pub files: Vec<FileLines>,
    /// A boot's plugin followed less than it ran (its bounds).
    pub truncated: usize,
}

impl Summary {
    pub fn lines(&self) -> (usize, usize) {
        self.files.iter().fold((0, 0), |(l, r), f| (l + f.lines, r + f.reached))
    }

    /// The run's one line.
    pub fn line(&self) -> String {
        let (lines, reached) = self.lines();
        let percent = if lines == 0 { 0.0 } else { 100.0 * reached as f64 / lines as f64 };
        let mut text = format!(
            "coverage: {reached} of {lines} kernel source lines reached ({percent:.1}%) over {} boot(s), {} file(s): {}",
            self.boots,
            self.files.len(),
            self.lcov.display()
        );
        if !self.uncovered.is_empty() {
            let _ = write!(text, "; {} boot(s) not covered: {}", self.uncovered.len(), self.uncovered.join("; "));
        }
        if self.truncated > 0 {
            let _ = write!(text, "; {} boot(s) ran more code than the plugin follows (truncated)", self.truncated);
        }
        text
    }
}

/// The run's covered boots (by directory) and those that could not be, collected as
/// the boots are planned; read back after them.
#[derive(Debug, Default)]
pub struct Collector {
    /// Boot directory → the ELF its coverage maps through.
    pub covered: HashMap<PathBuf, PathBuf>,
    /// Boot directory → why it runs without the plugin.
    pub uncovered: HashMap<PathBuf, String>,
}

impl Collector {
    /// Each covered boot's file read and mapped, its `coverage.info` written, and the
    /// run's merged one; a boot whose file is missing or damaged is named with why.
    pub fn finish(&self, reports: &[BootReport], run_dir: &Path) -> Summary {
        let mut rows: HashMap<&Path, Result<Vec<LineRow>, String>> = HashMap::new();
        let mut merged = Lines::default();
        let mut summary = Summary { lcov: run_dir.join(LCOV), ..Summary::default() };
        for report in reports {
            let label = report.label();
            let Some(elf) = self.covered.get(&report.dir) else {
                if let Some(why) = self.uncovered.get(&report.dir) {
                    summary.uncovered.push(format!("{label}: {why}"));
                }
                continue;
            };
            let table = rows.entry(elf.as_path()).or_insert_with(|| {
                testbench_symbols::cached(elf)
                    .map_err(|e| e.to_string())
                    .and_then(|s| s.line_rows().map_err(|e| e.to_string()))
            });
            let table = match table {
                Ok(table) => table,
                Err(why) => {
                    summary.uncovered.push(format!("{label}: {why}"));
                    continue;
                }
            };
            // The boot whose result this is (a second boot of a failure, `.again`, is not counted).
            let file = report.dir.join(FILE);
            let coverage = match read(&file) {
                Ok(coverage) => coverage,
                Err(why) => {
                    summary.uncovered.push(format!("{label}: {why}"));
                    continue;
                }
            };
            summary.truncated += usize::from(coverage.truncated);
            let lines = Lines::of(table, &coverage);
            let name = test_name(&label);
            if let Err(error) = std::fs::write(report.dir.join(LCOV), lines.lcov(&name)) {
                summary.uncovered.push(format!("{label}: cannot write {}: {error}", report.dir.join(LCOV).display()));
                continue;
            }
            merged.merge(&lines);
            summary.boots += 1;
        }
        summary.files = merged.per_file();
        if let Err(error) = std::fs::write(&summary.lcov, merged.lcov("run")) {
            summary.uncovered.push(format!("the run's {} cannot be written: {error}", summary.lcov.display()));
        }
        summary
    }
}

/// Each boot's coverage planned: the kernel ELF its addresses map through (the crash
/// symbolizer's: the reference kernel the bench built, or `[guest] symbols`; else an
/// external kernel that is itself an ELF with line tables), the plugin loaded with its
/// ranges; a boot with no such ELF boots without it, and the summary names it.
pub fn plan(
    jobs: &mut [Result<crate::runner::prepare::BootJob, crate::case_result::Blocked>],
    plugin: &Path,
) -> Collector {
    let mut collector = Collector::default();
    for (spec, _) in jobs.iter_mut().flatten() {
        let elf = match &spec.plan.crash_elf {
            Some(elf) => elf.path().to_owned(),
            None => match &spec.machine.kernel {
                Some(kernel) => kernel.clone(),
                // A guest booted from an image has no kernel file to read ranges from.
                None => {
                    let why = "booted from guest.image or guest.cdrom: give the kernel's ELF with line tables as [guest] symbols";
                    collector.uncovered.insert(spec.dir.clone(), why.to_string());
                    continue;
                }
            },
        };
        match CoverSpec::for_elf(plugin, &elf) {
            Ok(cover) => {
                collector.covered.insert(spec.dir.clone(), elf);
                spec.machine.cover = Some(cover);
            }
            Err(why) => {
                let why = match &spec.plan.crash_elf {
                    Some(_) => why,
                    None => format!("{why} (give the kernel's ELF with line tables as [guest] symbols)"),
                };
                collector.uncovered.insert(spec.dir.clone(), why);
            }
        }
    }
    collector
}

/// A boot's coverage file, bounded and checked whole.
pub fn read(path: &Path) -> Result<Coverage, String> {
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{} was not written (QEMU did not exit by itself or on SIGTERM: killed at its deadline, or it never started)",
            path.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than the {MAX_FILE} bytes a coverage file may be", path.display()));
    }
    Coverage::decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// lcov's test name for a boot's label (`case rv64 smp2` → `case_rv64_smp2`): letters,
/// digits and underscores only, as `genhtml` wants them.
pub fn test_name(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(start: u64, len: u64, file: &str, line: u32) -> LineRow {
        LineRow { start, len, file: Arc::from(file), line }
    }

    #[test]
    fn an_address_reaches_the_line_whose_row_holds_it_and_no_other() {
        let rows = vec![
            row(0x100, 4, "/k/a.rs", 10),
            row(0x104, 8, "/k/a.rs", 11),
            row(0x200, 2, "/k/b.rs", 3),
            row(0x300, 2, "/rustc/0123/library/core/src/option.rs", 3),
        ];
        let lines = Lines::of(&rows, &Coverage { addresses: vec![0x108, 0x10c, 0x1ff], truncated: false });
        assert_eq!(lines.0[&Arc::<str>::from("/k/a.rs")], BTreeMap::from([(10, 0), (11, 1)]));
        assert_eq!(lines.0[&Arc::<str>::from("/k/b.rs")], BTreeMap::from([(3, 0)]));
        let mut merged = lines.clone();
        merged.merge(&lines);
        assert_eq!(merged.0[&Arc::<str>::from("/k/a.rs")][&11], 2);
        // The toolchain's library is counted, never written (genhtml cannot read its paths).
        assert_eq!(lines.0.len(), 3);
        assert_eq!(
            lines.lcov("t"),
            "TN:t\nSF:/k/a.rs\nDA:10,0\nDA:11,1\nLF:2\nLH:1\nend_of_record\nTN:t\nSF:/k/b.rs\nDA:3,0\nLF:1\nLH:0\nend_of_record\n"
        );
    }

    #[test]
    fn the_toolchains_library_is_not_the_kernels_own_source() {
        assert!(own_source("/work/main/guest/kernel/src/mm.rs"));
        assert!(own_source("/tmp/xv6/kernel/proc.c"));
        assert!(!own_source("/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/slice/mod.rs"));
        assert!(!own_source("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/spin-0.9.8/src/mutex.rs"));
    }

    #[test]
    fn a_missing_or_oversized_file_is_named_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read(&dir.path().join(FILE)).unwrap_err();
        assert!(missing.contains("was not written") && missing.contains("SIGTERM"), "{missing}");
        let damaged = dir.path().join("damaged.bin");
        std::fs::write(&damaged, b"TBCOVER1 not the rest").unwrap();
        let why = read(&damaged).unwrap_err();
        assert!(why.contains("damaged.bin") && why.contains("shorter than its"), "{why}");
        assert_eq!(test_name("boot-x rv64 smp2"), "boot_x_rv64_smp2");
    }
}
