//! The sink that keeps the run's results: the history opened (and migrated) before
//! anything builds, so a path or a database it cannot use is refused up front; the tree's
//! commit and whether it was dirty read then too (the tree the run builds); every report
//! appended in one transaction when the run ends (or when it stops on the way, with the
//! reports it had).
//!
//! What a boot's row says of what it booted comes from the boot's own files: its
//! `command-line` names the kernel QEMU loaded (hashed, once per file a run) and whether
//! it ran under `-icount`; QEMU's version is the width's probe, from the run's probe cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::Digest;
use testbench_history::{History, Record};

use crate::error::BenchError;
use crate::report::{BootReport, RunEnd, Sink};
use crate::verdict::Verdict;

/// How long each git question about the tree may take.
const GIT_DEADLINE: Duration = Duration::from_secs(30);

/// The tree a run builds: its commit, and whether it had changes (None: not a git tree).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tree {
    pub commit: Option<String>,
    pub dirty: Option<bool>,
}

impl Tree {
    /// `git rev-parse HEAD` and `git status --porcelain` in `root`; a tree git cannot
    /// answer for is kept without them.
    pub fn of(root: &Path) -> Tree {
        let git = |args: &[&str]| {
            crate::process::Cmd::new("git", format!("git {}", args.join(" ")), GIT_DEADLINE)
                .cwd(root)
                .args(args)
                .output()
                .ok()
                .filter(|out| out.status.success())
                .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let Some(commit) = git(&["rev-parse", "HEAD"]) else { return Tree::default() };
        let dirty = git(&["status", "--porcelain=v1", "--untracked-files=normal"]).map(|status| !status.is_empty());
        Tree { commit: Some(commit), dirty }
    }
}

/// What a boot's `command-line` says it booted.
#[derive(Debug, PartialEq)]
struct Booted {
    kernel: Option<PathBuf>,
    icount: bool,
}

/// Shell words as `process::shell_quote` writes them: single-quoted where they had to
/// be, a quote inside one written `'\''`.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut started) = (Vec::new(), String::new(), false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => (quoted, started) = (!quoted, true),
            '\\' if !quoted => word.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            c => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The `file=` of a `-drive` option whose `id=` is `id` (QEMU's option syntax: options
/// split at single commas, a doubled comma is one in a value).
fn drive_file(option: &str, id: &str) -> Option<PathBuf> {
    let parts = crate::qemu::option_parts(option);
    let id = format!("id={id}");
    parts.contains(&id).then_some(())?;
    parts.iter().find_map(|p| p.strip_prefix("file=")).map(PathBuf::from)
}

/// What booted (`-kernel PATH`; for a guest the firmware boots, its disk image, else its
/// CD, by the drive ids the bench gives them) and the clock (`-icount`) of a boot's QEMU
/// command line as the bench wrote it. The history's `kernel_sha256` is that file's.
fn booted(command_line: &str) -> Booted {
    let words = shell_words(command_line);
    let drive =
        |id: &str| words.windows(2).filter(|pair| pair[0] == "-drive").find_map(|pair| drive_file(&pair[1], id));
    let kernel = words
        .windows(2)
        .find(|pair| pair[0] == "-kernel")
        .map(|pair| PathBuf::from(&pair[1]))
        .or_else(|| drive(crate::boot::media::IMAGE_DRIVE))
        .or_else(|| drive(crate::boot::media::CDROM_DRIVE));
    Booted { kernel, icount: words.iter().any(|w| w == "-icount") }
}

/// The history, and what every row of this run shares.
pub struct Keeper {
    history: History,
    tree: Tree,
    host: String,
    /// The run's QEMU probe cache (`target/testbench/qemu-probes`), once the run's
    /// directory is known.
    probes: PathBuf,
    kept: bool,
    kernels: HashMap<PathBuf, Option<String>>,
    versions: HashMap<String, Option<String>>,
    /// The cases directory's `quarantine.toml` and its `leave_after`, when it has one.
    quarantine: Option<(PathBuf, u32)>,
}

impl Keeper {
    /// The run's history: `--history PATH`, refused (exit 2) when it cannot be used, or
    /// the workspace's, which the bench could not use when it cannot (exit 3).
    pub fn for_run(
        ws: &crate::workspace::Workspace,
        options: &crate::cli::Options,
        quarantine: Option<&crate::quarantine::Quarantine>,
    ) -> Result<Keeper, BenchError> {
        let path = super::path(&ws.root, options.history.as_deref());
        let mut keeper = Keeper::open(&path, &ws.root).map_err(|e| match options.history {
            Some(_) => BenchError::Refused(vec![format!("--history: {e}")]),
            None => BenchError::History(e),
        })?;
        keeper.quarantine = quarantine.map(|q| (q.path.clone(), q.leave_after));
        Ok(keeper)
    }

    /// Open the history at `path` (made when missing, migrated when older).
    pub fn open(path: &Path, root: &Path) -> Result<Keeper, testbench_history::HistoryError> {
        let history = History::open(path)?;
        Ok(Keeper {
            history,
            tree: Tree::of(root),
            host: crate::rundir::hostname(),
            probes: PathBuf::new(),
            kept: false,
            kernels: HashMap::new(),
            versions: HashMap::new(),
            quarantine: None,
        })
    }

    fn kernel_sha256(&mut self, kernel: &Path) -> Option<String> {
        let hash = |path: &Path| {
            let mut file = std::fs::File::open(path).ok()?;
            let mut digest = sha2::Sha256::new();
            std::io::copy(&mut file, &mut digest).ok()?;
            Some(digest.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>())
        };
        self.kernels.entry(kernel.to_path_buf()).or_insert_with(|| hash(kernel)).clone()
    }

    fn qemu_version(&mut self, width: &str) -> Option<String> {
        let probes = &self.probes;
        let probe = |width: &str| {
            let arch = testbench_case::Arch::from_name(width)?;
            crate::qemu::probe_cached(arch, probes).version.ok()
        };
        self.versions.entry(width.to_string()).or_insert_with(|| probe(width)).clone()
    }

    /// A report as the history keeps it.
    fn record(&mut self, report: &BootReport, run: &str, finished: i64) -> Record {
        let boot = report.smp.is_some();
        let booted = boot
            .then(|| std::fs::read_to_string(report.dir.join("command-line")).ok())
            .flatten()
            .map(|line| booted(&line));
        let kernel = booted.as_ref().and_then(|b| b.kernel.clone());
        let width = report.arch.clone().unwrap_or_else(|| "host".to_string());
        let failed = report.verdict.failed();
        Record {
            run: run.to_string(),
            finished,
            case: report.case.clone(),
            harts: report.smp,
            seed: report.seed,
            verdict: verdict(&report.verdict),
            fail_kind: failed.map(|f| f.kind.name().to_string()),
            crash_title: failed.and_then(|f| f.crash.as_ref()).map(|c| c.title.clone()),
            class: report.class.map(|c| c.name().to_string()),
            duration: report.duration,
            commit: self.tree.commit.clone(),
            dirty: self.tree.dirty,
            kernel_sha256: kernel.and_then(|k| self.kernel_sha256(&k)),
            qemu_version: if boot { self.qemu_version(&width) } else { None },
            host: self.host.clone(),
            clock: booted.map(|b| if b.icount { "icount" } else { "host" }.to_string()),
            rerun_alone: boot && crate::rundir::first_attempt_dir(&report.dir).is_dir(),
            quarantined: report.quarantined.is_some(),
            width,
        }
    }

    /// Append every report, once.
    fn keep(&mut self, reports: &[BootReport], run_dir: &Path) -> Result<(), BenchError> {
        if std::mem::replace(&mut self.kept, true) || reports.is_empty() {
            return Ok(());
        }
        self.probes = run_dir.parent().unwrap_or(run_dir).join("qemu-probes");
        let run = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let finished = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let records: Vec<Record> = reports.iter().map(|r| self.record(r, &run, finished)).collect();
        self.history.append(&records)?;
        for line in self.may_leave(reports)? {
            eprintln!("note: {line}");
        }
        Ok(())
    }

    /// The quarantined cases (at a width and hart count) whose last `leave_after` results
    /// in the history all passed: each said as a line that it can leave quarantine.
    fn may_leave(&self, reports: &[BootReport]) -> Result<Vec<String>, BenchError> {
        let Some((file, leave_after)) = &self.quarantine else { return Ok(Vec::new()) };
        let mut lines: Vec<String> = Vec::new();
        for report in reports.iter().filter(|r| r.quarantined.is_some()) {
            let width = report.arch.as_deref().unwrap_or("host");
            let all = self.history.series(&report.case, *leave_after as usize)?;
            let series = all.iter().find(|s| s.case == report.case && s.width == width && s.harts == report.smp);
            let line = match series {
                Some(s) if s.window == *leave_after as usize && s.passed == s.window => format!(
                    "{}: {} passed its last {leave_after} runs in the history: it can leave quarantine (remove its entry)",
                    file.display(),
                    report.label()
                ),
                _ => continue,
            };
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        Ok(lines)
    }
}

fn verdict(verdict: &Verdict) -> testbench_history::Verdict {
    use testbench_history::Verdict as Kept;
    match verdict {
        Verdict::Pass => Kept::Pass,
        Verdict::ExpectedFailure(_) => Kept::ExpectedFailure,
        Verdict::Fail(_) => Kept::Fail,
        Verdict::Unfailed(_) => Kept::Unfailed,
        Verdict::Skip(_) => Kept::Skip,
        Verdict::Trouble(_) => Kept::Trouble,
    }
}

impl Sink for Keeper {
    /// A run stopped on the way keeps the results it had.
    fn refused(&mut self, _errors: &[String], all: &[BootReport]) -> Result<(), BenchError> {
        let run_dir = all.first().and_then(|r| r.dir.ancestors().find(|a| is_run_dir(a))).map(Path::to_path_buf);
        self.keep(all, &run_dir.unwrap_or_default())
    }

    fn run_finished(&mut self, end: &mut RunEnd) -> Result<(), BenchError> {
        self.keep(end.reports, end.run_dir)
    }
}

/// Whether `dir` is a run's directory (`run-PID-SECS`).
fn is_run_dir(dir: &Path) -> bool {
    dir.file_name().is_some_and(|name| name.to_string_lossy().starts_with("run-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boots_kernel_and_clock_are_read_from_its_command_line() {
        let line = "cd /w && qemu-system-riscv64 -machine virt -kernel '/w/a b/loader' -initrd /w/b.bin -icount shift=3,sleep=off -seed 7";
        let found = booted(line);
        assert_eq!(found, Booted { kernel: Some(PathBuf::from("/w/a b/loader")), icount: true });
        assert_eq!(shell_words(&crate::process::shell_quote("it's a b")), ["it's a b"]);
        let line = "cd /w && qemu-system-riscv64 -machine virt -kernel /w/loader -initrd /w/b.bin -seed 7";
        assert_eq!(booted(line), Booted { kernel: Some(PathBuf::from("/w/loader")), icount: false });
        assert_eq!(booted("qemu -icount shift=0").kernel, None);
    }

    /// A guest the firmware boots from media: its image is what the history hashes, else
    /// its CD; a drive of the case's own (another id) is not taken for it.
    #[test]
    fn a_media_boots_image_or_cd_is_read_from_its_command_line() {
        let both = "cd /w && qemu-system-x86_64 -drive 'file=/w/x,,y.img,format=raw,if=none,id=testbench-image,snapshot=on' -device ide-hd,drive=testbench-image -drive file=/w/cd.iso,format=raw,if=none,id=testbench-cdrom,media=cdrom,readonly=on";
        assert_eq!(booted(both).kernel, Some(PathBuf::from("/w/x,y.img")));
        let cd =
            "cd /w && qemu -drive file=/w/own.img,id=mine -drive file=/w/cd.iso,format=raw,if=none,id=testbench-cdrom";
        assert_eq!(booted(cd).kernel, Some(PathBuf::from("/w/cd.iso")));
        assert_eq!(booted("qemu -drive file=/w/own.img,id=mine").kernel, None);
        assert!(booted("qemu -icount shift=0").icount);
    }

    #[test]
    fn every_result_of_a_run_lands_in_the_history_once() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("target/testbench/run-1-2");
        let boot_dir = run_dir.join("crashes/rv64-smp1");
        std::fs::create_dir_all(&boot_dir).unwrap();
        let kernel = tmp.path().join("kernel");
        std::fs::write(&kernel, b"abc").unwrap();
        std::fs::write(
            boot_dir.join("command-line"),
            format!("cd / && qemu -kernel {} -icount shift=3", kernel.display()),
        )
        .unwrap();
        let mut crashed = crate::report::a_crashed_boot();
        crashed.dir = boot_dir;
        crashed.arch = Some("no-such-width".into());
        let path = tmp.path().join("h.sqlite");
        let mut keeper = Keeper::open(&path, tmp.path()).unwrap();
        let reports = vec![crashed];
        keeper.keep(&reports, &run_dir).unwrap();
        keeper.keep(&reports, &run_dir).unwrap();
        let history = History::open(&path).unwrap();
        assert_eq!(history.count().unwrap(), 1, "kept once");
        let series = history.series("crashes", 20).unwrap();
        let failure = series[0].first_failure_after.as_ref().unwrap();
        assert_eq!(failure.run, "run-1-2");
        assert_eq!(failure.fail_kind.as_deref(), Some("timed-out"));
        assert_eq!(
            failure.crash_title.as_deref(),
            Some(crate::report::a_crashed_boot().verdict.failed().unwrap().crash.as_ref().unwrap().title.as_str())
        );
        let record = keeper.record(&reports[0], "r", 0);
        // sha256("abc")
        assert_eq!(
            record.kernel_sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(record.clock.as_deref(), Some("icount"));
        assert!(!record.rerun_alone);
    }

    #[test]
    fn a_history_that_cannot_be_used_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("not-a-db");
        std::fs::write(
            &path,
            "text, and more than a hundred bytes of it so that SQLite reads a header and finds it is not one.....",
        )
        .unwrap();
        let error = Keeper::open(&path, tmp.path()).err().expect("refused");
        assert!(error.to_string().starts_with(&format!("the history {}", path.display())), "{error}");
    }
}
