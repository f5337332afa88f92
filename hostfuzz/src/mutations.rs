//! `cargo hostfuzz --mutations [ID...]`: the proof that each harness bites
//! (docs/host-fuzzing.md, "Proof that the harnesses bite").
//!
//! `hostfuzz/mutations.toml` lists the checks of the code under test, one `[[mutation]]`
//! each: the text that makes the check (`find`, exactly once in `file`) and what removes
//! it (`replace`). The run validates the whole table first (nothing is built while it is
//! wrong), copies `guest/` and `hostfuzz/` to `<out>/mutants/tree/` (the tree itself is
//! never written), builds and runs the unmutated copy as the control, then for each
//! mutation restores the pristine files, applies its one patch, builds the copy's
//! `hostfuzz` (one shared target directory, so only the mutated crate and `hostfuzz`
//! rebuild) and runs its target for [`COUNT`] inputs from seed 1. A finding (or a hang)
//! is the check caught; a clean run is a mutation that SURVIVED: a harness that does not
//! bite. The table goes to stdout and, as Markdown, to `<out>/mutants/table.md`.
//!
//! Exit status: 0 every mutation caught, 1 one survived, 2 the table, the control, a
//! build or a deadline failed (the run proves nothing).

use crate::runner::Settings;
use crate::targets::TARGETS;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testbench_process::Cmd;

/// The table, from the repository's root.
pub const TABLE: &str = "hostfuzz/mutations.toml";
/// Inputs each mutant (and the control) gets, from seed 1.
pub const COUNT: u64 = 20_000;
/// A build's deadline (the first builds the guest's crates and ed25519 from nothing).
const BUILD_DEADLINE: Duration = Duration::from_secs(20 * 60);
/// A run's deadline: a mutant that has not ended by then is an error naming it.
const RUN_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// What the copy holds, from the repository's root (hostfuzz depends on the process
/// wrapper, crates/process, and the Slurm arrays, crates/slurm, by path).
const COPIED: [&str; 4] = ["guest", "hostfuzz", "crates/process", "crates/slurm"];

/// One check of the code under test, and the patch that removes it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// Its name (kebab-case).
    pub id: String,
    /// The hostfuzz target that must catch it.
    pub target: String,
    /// The file holding the check, from the repository's root (under `guest/`).
    pub file: String,
    /// The text that makes the check: exactly once in `file`.
    pub find: String,
    /// What replaces it: the check removed.
    pub replace: String,
    /// One line: which rule is removed.
    pub check: String,
    /// Run only when named (`--mutations ID...`) or with `--mutations all`, not by a bare
    /// `--mutations` (the one `./test` runs): a mutant whose build costs most of a minute
    /// (the kernel's own files, rebuilt with hostfuzz), which `./test`'s half hour cannot
    /// hold all of.
    #[serde(default)]
    pub by_name_only: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    mutation: Vec<Mutation>,
}

/// The table's text parsed (`what` names it in errors).
pub fn parse(text: &str, what: &str) -> Result<Vec<Mutation>, String> {
    let table: Table = toml::from_str(text).map_err(|e| format!("{what}: {e}"))?;
    Ok(table.mutation)
}

fn kebab(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('-')
        && !id.ends_with('-')
        && !id.contains("--")
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Every refusal of `table` against the tree at `root` and the target names `targets`,
/// each naming `what`, the mutation and the field; empty when the table is sound.
pub fn validate(root: &Path, table: &[Mutation], targets: &[&str], what: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    if table.is_empty() {
        errors.push(format!("{what}: no [[mutation]]"));
    }
    for m in table {
        let mut refuse = |field: &str, message: String| errors.push(format!("{what}: {}: {field}: {message}", m.id));
        if !kebab(&m.id) {
            refuse("id", "not kebab-case (a-z, 0-9 and single inner dashes)".to_owned());
        }
        if !seen.insert(m.id.as_str()) {
            refuse("id", "a second mutation with this id".to_owned());
        }
        if !targets.contains(&m.target.as_str()) {
            refuse("target", format!("no target {:?} (targets: {})", m.target, targets.join(", ")));
        }
        if m.check.trim().is_empty() || m.check.contains('\n') {
            refuse("check", "must be one non-empty line".to_owned());
        }
        let path = Path::new(&m.file);
        let under_guest = path.starts_with("guest")
            && path.components().all(|c| matches!(c, std::path::Component::Normal(_)))
            && path.components().count() > 1;
        if !under_guest {
            refuse("file", format!("{:?} is not a relative path under guest/", m.file));
            continue;
        }
        let text = match fs::read_to_string(root.join(path)) {
            Ok(text) => text,
            Err(e) => {
                refuse("file", format!("{}: {e}", root.join(path).display()));
                continue;
            }
        };
        if m.find == m.replace {
            refuse("replace", "the same as find: removes nothing".to_owned());
        }
        if let Err(e) = apply(&text, m) {
            refuse("find", e);
        }
    }
    errors
}

/// `text` with `m`'s one patch applied: its `find` must occur exactly once.
pub fn apply(text: &str, m: &Mutation) -> Result<String, String> {
    if m.find.is_empty() {
        return Err("empty".to_owned());
    }
    match text.matches(m.find.as_str()).count() {
        1 => Ok(text.replacen(m.find.as_str(), &m.replace, 1)),
        0 => Err(format!("not found in {}", m.file)),
        n => Err(format!("found {n} times in {} (must be once)", m.file)),
    }
}

/// Copies `from` to `to` (made anew), leaving out `target/` directories and `.git`.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    let mut entries: Vec<_> = fs::read_dir(from)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if name == "target" || name == ".git" {
                continue;
            }
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if kind.is_file() {
            fs::copy(entry.path(), to.join(&name))?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, to.join(&name))?;
        }
    }
    Ok(())
}

/// How a mutant's run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A finding after this many inputs, and what it was.
    Caught(u64, String),
    /// A hang after this many inputs.
    Hang(u64),
    /// Clean: the harness did not bite.
    Survived,
    /// The build failed, a deadline passed, or the run's output made no sense.
    Error(String),
}

/// Reads a mutant's run: its exit code and stdout.
pub fn judge(target: &str, code: Option<i32>, stdout: &str) -> Ending {
    let after = |label: &str| {
        let prefix = format!("{target}: {label} at seed 1 iteration ");
        stdout.lines().find_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (n, tail) = rest.split_once(':').unwrap_or((rest, ""));
            Some((n.trim().parse::<u64>().ok()? + 1, tail.trim().to_owned()))
        })
    };
    match code {
        Some(0) => Ending::Survived,
        Some(1) => match after("FINDING") {
            Some((n, what)) => Ending::Caught(n, what),
            None => Ending::Error("exit 1 without a FINDING line".to_owned()),
        },
        Some(3) => match after("HANG") {
            Some((n, _)) => Ending::Hang(n),
            None => Ending::Error("exit 3 without a HANG line".to_owned()),
        },
        other => Ending::Error(format!("exit status {other:?}")),
    }
}

/// Runs `command` with its output in `log`, killed past its deadline (which names what
/// it waited for). Returns the exit code.
fn run_logged(command: Cmd, log: &Path) -> Result<Option<i32>, String> {
    let file = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let status = command.status_to(file).map_err(|e| format!("{e} (log: {})", log.display()))?;
    Ok(status.code())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The mutants are built as `cargo hostfuzz` builds the runner (the alias in
/// .cargo/config.toml): linked static for the host's triple, so their forks cost what
/// the gate's do.
const BUILD_TARGET: &str = "x86_64-unknown-linux-gnu";
const BUILD_STATIC: &str = "target.x86_64-unknown-linux-gnu.rustflags=['-C', 'target-feature=+crt-static', '-C', 'link-arg=-Wl,-z,max-page-size=0x200000']";

/// The copy, its shared target directory and where each run writes.
struct Scratch {
    tree: PathBuf,
    target_dir: PathBuf,
    runs: PathBuf,
}

impl Scratch {
    fn build(&self, what: &str) -> Result<PathBuf, String> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let command = Cmd::new(cargo, format!("building {what}"), BUILD_DEADLINE)
            .args(["build", "--release", "--quiet", "--target", BUILD_TARGET, "--config", BUILD_STATIC])
            .arg("--manifest-path")
            .arg(self.tree.join("hostfuzz/Cargo.toml"))
            .cwd(self.tree.join("hostfuzz"))
            .env("CARGO_TARGET_DIR", &self.target_dir)
            // Incremental: a mutant changes one function of one crate, so the rebuild of
            // that crate and `hostfuzz` reuses every other codegen unit (about 1 s a
            // mutant instead of 6 here). The code is the same; only its split differs.
            .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "true");
        let log = self.runs.join(format!("{what}.build.log"));
        match run_logged(command, &log)? {
            Some(0) => Ok(self.target_dir.join(BUILD_TARGET).join("release/hostfuzz")),
            code => Err(format!("building {what} failed ({code:?}); {}:\n{}", log.display(), tail(&log, 20))),
        }
    }

    fn run(&self, binary: &Path, target: &str, what: &str) -> Ending {
        let out = self.runs.join(what);
        let _ = fs::remove_dir_all(&out);
        let command = Cmd::new(binary, format!("running {what} ({target})"), RUN_DEADLINE)
            // The generator alone: the kept regression inputs would find a check they were
            // kept for at once and prove nothing of the generator.
            .args(["--no-regressions", "--target", target, "--seed", "1", "--count", &COUNT.to_string()])
            .cwd(&self.tree)
            .env("HOSTFUZZ_SHRINK_SECS", "0")
            .env("HOSTFUZZ_OUT", &out)
            .env_remove("HOSTFUZZ_STATS");
        let log = self.runs.join(format!("{what}.log"));
        match run_logged(command, &log) {
            Ok(code) => judge(target, code, &fs::read_to_string(&log).unwrap_or_default()),
            Err(e) => Ending::Error(e),
        }
    }
}

/// The table as Markdown, one row a mutation.
pub fn markdown(rows: &[(&Mutation, Ending)]) -> String {
    let mut out = String::from("| id | target | check removed | inputs until found |\n| --- | --- | --- | --- |\n");
    for (m, result) in rows {
        let found = match result {
            Ending::Caught(n, what) => {
                let what = what.split(": ").take(2).collect::<Vec<_>>().join(": ");
                // A panic's location, from the copy's root.
                let what = match what.find("/guest/") {
                    Some(at) => format!("panic: {}", &what[at + 1..]),
                    None => what,
                };
                format!("{n} ({})", what.replace('|', "\\|"))
            }
            Ending::Hang(n) => format!("{n} (a hang)"),
            Ending::Survived => "**SURVIVED**".to_owned(),
            Ending::Error(e) => format!("ERROR: {}", e.lines().next().unwrap_or("").replace('|', "\\|")),
        };
        let _ = writeln!(out, "| `{}` | {} | {} | {found} |", m.id, m.target, m.check.replace('|', "\\|"));
    }
    out
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    }
}

/// `cargo hostfuzz --mutations [ID...]`: the exit status (module documentation).
/// The mutations a run takes: those named; with none named, every one but those run only
/// by name; with `all`, every one.
fn choose<'a>(table: &'a [Mutation], ids: &[String]) -> Vec<&'a Mutation> {
    let all = ids.iter().any(|id| id == "all");
    table.iter().filter(|m| all || ids.contains(&m.id) || (ids.is_empty() && !m.by_name_only)).collect()
}

pub fn main(ids: &[String], settings: &Settings) -> u8 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".")).to_path_buf();
    let table_path = root.join(TABLE);
    let text = match fs::read_to_string(&table_path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("hostfuzz: {TABLE}: {e}");
            return 2;
        }
    };
    let table = match parse(&text, TABLE) {
        Ok(table) => table,
        Err(e) => {
            eprintln!("hostfuzz: {e}");
            return 2;
        }
    };
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    let mut errors = validate(&root, &table, &names, TABLE);
    for id in ids.iter().filter(|id| *id != "all") {
        if !table.iter().any(|m| &m.id == id) {
            errors.push(format!("--mutations: no mutation {id:?} in {TABLE}"));
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("hostfuzz: {e}");
        }
        return 2;
    }
    let chosen = choose(&table, ids);
    let base = absolute(&settings.out).join("mutants");
    let scratch = Scratch { tree: base.join("tree"), target_dir: base.join("target"), runs: base.join("runs") };
    let started = Instant::now();
    let _ = fs::remove_dir_all(&scratch.tree);
    let _ = fs::remove_dir_all(&scratch.runs);
    for dir in COPIED {
        if let Err(e) = copy_tree(&root.join(dir), &scratch.tree.join(dir)) {
            eprintln!("hostfuzz: copying {dir}/ to {}: {e}", scratch.tree.display());
            return 2;
        }
    }
    if let Err(e) = fs::create_dir_all(&scratch.runs) {
        eprintln!("hostfuzz: {}: {e}", scratch.runs.display());
        return 2;
    }
    eprintln!("mutations: {} of {TABLE}, copy in {}", chosen.len(), scratch.tree.display());

    // The control: the unmutated copy must find nothing in the inputs the mutants get.
    eprintln!("mutations: building the control (the unmutated copy)");
    let binary = match scratch.build("control") {
        Ok(binary) => binary,
        Err(e) => {
            eprintln!("hostfuzz: {e}\nhostfuzz: the mutation run is void");
            return 2;
        }
    };
    let mut targets: Vec<&str> = chosen.iter().map(|m| m.target.as_str()).collect();
    targets.dedup();
    let targets: BTreeSet<&str> = targets.into_iter().collect();
    for target in &targets {
        let what = format!("control-{target}");
        match scratch.run(&binary, target, &what) {
            Ending::Survived => eprintln!("mutations: control: {target}: nothing found in {COUNT} inputs"),
            other => {
                eprintln!("hostfuzz: the unmutated {target} does not pass {COUNT} inputs from seed 1: {other:?}");
                eprintln!(
                    "hostfuzz: the mutation run is void (log: {})",
                    scratch.runs.join(format!("{what}.log")).display()
                );
                return 2;
            }
        }
    }

    let mut rows: Vec<(&Mutation, Ending)> = Vec::new();
    let mut dirty: Option<(PathBuf, String)> = None;
    for (i, m) in chosen.iter().enumerate() {
        let t0 = Instant::now();
        if let Some((path, pristine)) = dirty.take() {
            if let Err(e) = fs::write(&path, pristine) {
                eprintln!("hostfuzz: restoring {}: {e}", path.display());
                return 2;
            }
        }
        let path = scratch.tree.join(&m.file);
        let result = match fs::read_to_string(&path).map_err(|e| e.to_string()).and_then(|t| {
            let mutated = apply(&t, m)?;
            fs::write(&path, mutated).map_err(|e| e.to_string())?;
            Ok(t)
        }) {
            Err(e) => Ending::Error(format!("{TABLE}: {}: applying to {}: {e}", m.id, path.display())),
            Ok(pristine) => {
                dirty = Some((path, pristine));
                match scratch.build(&m.id) {
                    Ok(binary) => scratch.run(&binary, &m.target, &m.id),
                    Err(e) => Ending::Error(format!("{}: {e}", m.id)),
                }
            }
        };
        let shown = match &result {
            Ending::Caught(n, what) => format!("caught after {n} inputs: {what}"),
            Ending::Hang(n) => format!("caught after {n} inputs (a hang)"),
            Ending::Survived => format!("SURVIVED {COUNT} inputs"),
            Ending::Error(e) => format!("ERROR: {e}"),
        };
        eprintln!(
            "mutations: [{}/{}] {} ({}): {shown} ({:.0} s)",
            i + 1,
            chosen.len(),
            m.id,
            m.target,
            t0.elapsed().as_secs_f64()
        );
        rows.push((m, result));
    }
    if let Some((path, pristine)) = dirty {
        let _ = fs::write(path, pristine);
    }

    let width = rows.iter().map(|(m, _)| m.id.len()).max().unwrap_or(2);
    for (m, result) in &rows {
        let found = match result {
            Ending::Caught(n, _) => n.to_string(),
            Ending::Hang(n) => format!("{n} (hang)"),
            Ending::Survived => "SURVIVED".to_owned(),
            Ending::Error(_) => "ERROR".to_owned(),
        };
        println!("{:<width$}  {:<8} {:>12}  {}", m.id, m.target, found, m.check);
    }
    let md = base.join("table.md");
    if let Err(e) = fs::write(&md, markdown(&rows)) {
        eprintln!("hostfuzz: {}: {e}", md.display());
    }
    let survived = rows.iter().filter(|(_, r)| *r == Ending::Survived).count();
    let failed = rows.iter().filter(|(_, r)| matches!(r, Ending::Error(_))).count();
    println!(
        "mutations: {} caught, {survived} survived, {failed} errors of {} in {:.0} s; table: {}",
        rows.len() - survived - failed,
        rows.len(),
        started.elapsed().as_secs_f64(),
        md.display()
    );
    if failed > 0 {
        2
    } else if survived > 0 {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
    }

    fn mutation(id: &str, target: &str, file: &str, find: &str) -> Mutation {
        Mutation {
            id: id.to_owned(),
            target: target.to_owned(),
            file: file.to_owned(),
            find: find.to_owned(),
            replace: String::new(),
            check: "a check".to_owned(),
            by_name_only: false,
        }
    }

    #[test]
    fn a_bare_run_leaves_out_the_mutations_run_only_by_name_and_all_takes_them() {
        let slow = Mutation { by_name_only: true, ..mutation("slow", "kernel-mm", "guest/kernel/src/mm.rs", "x") };
        let table = vec![mutation("quick", "fdt", "guest/fdt/src/lib.rs", "x"), slow];
        let ids = |chosen: Vec<&Mutation>| chosen.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(choose(&table, &[])), ["quick"]);
        assert_eq!(ids(choose(&table, &["slow".to_owned()])), ["slow"]);
        assert_eq!(ids(choose(&table, &["all".to_owned()])), ["quick", "slow"]);
    }

    #[test]
    fn the_table_validates_against_the_tree() {
        let text = fs::read_to_string(root().join(TABLE)).unwrap();
        let table = parse(&text, TABLE).unwrap();
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        let errors = validate(&root(), &table, &names, TABLE);
        assert!(errors.is_empty(), "{}", errors.join("\n"));
        assert!(table.len() >= 20, "{} mutations", table.len());
    }

    #[test]
    fn validation_names_the_table_the_mutation_and_the_field() {
        let dir = std::env::temp_dir().join(format!("hostfuzz-mutations-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("guest/x/src")).unwrap();
        fs::write(dir.join("guest/x/src/lib.rs"), "if a { return Err(1); }\nlet b = c;\nlet b = c;\n").unwrap();
        let good = Mutation {
            replace: "".to_owned(),
            ..mutation("ok-one", "fdt", "guest/x/src/lib.rs", "if a { return Err(1); }\n")
        };
        let table = vec![
            good.clone(),
            mutation("twice", "fdt", "guest/x/src/lib.rs", "let b = c;"),
            mutation("never", "fdt", "guest/x/src/lib.rs", "nowhere"),
            mutation("no-target", "nope", "guest/x/src/lib.rs", "return Err"),
            mutation("no-file", "fdt", "guest/x/src/missing.rs", "x"),
            mutation("outside", "fdt", "hostfuzz/src/lib.rs", "x"),
            mutation("Bad_Id", "fdt", "guest/x/src/lib.rs", "if a"),
            mutation("ok-one", "fdt", "guest/x/src/lib.rs", "if a"),
        ];
        let errors = validate(&dir, &table, &["fdt", "elf"], "m.toml");
        let has = |needle: &str| errors.iter().any(|e| e.starts_with(needle));
        assert!(has("m.toml: twice: find: found 2 times in guest/x/src/lib.rs"), "{errors:#?}");
        assert!(has("m.toml: never: find: not found in guest/x/src/lib.rs"), "{errors:#?}");
        assert!(has("m.toml: no-target: target: no target \"nope\""), "{errors:#?}");
        assert!(has("m.toml: no-file: file: "), "{errors:#?}");
        assert!(has("m.toml: outside: file: "), "{errors:#?}");
        assert!(has("m.toml: Bad_Id: id: not kebab-case"), "{errors:#?}");
        assert!(has("m.toml: ok-one: id: a second mutation"), "{errors:#?}");
        assert_eq!(errors.len(), 7, "{errors:#?}");
        assert!(validate(&dir, std::slice::from_ref(&good), &["fdt"], "m.toml").is_empty());

        // The patch, on a copy: the tree it came from is left alone.
        copy_tree(&dir.join("guest"), &dir.join("copy/guest")).unwrap();
        fs::create_dir_all(dir.join("guest/target/x")).unwrap();
        let path = dir.join("copy/guest/x/src/lib.rs");
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(apply(&text, &good).unwrap(), "let b = c;\nlet b = c;\n");
        assert_eq!(apply(&text, &table[1]).unwrap_err(), "found 2 times in guest/x/src/lib.rs (must be once)");
        copy_tree(&dir.join("guest"), &dir.join("copy2/guest")).unwrap();
        assert!(!dir.join("copy2/guest/target").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_is_judged_from_its_exit_and_its_finding_line() {
        let found = "elf: FINDING at seed 1 iteration 41: oracle: an accepted image breaks a rule: x\n";
        assert_eq!(
            judge("elf", Some(1), found),
            Ending::Caught(42, "oracle: an accepted image breaks a rule: x".into())
        );
        assert_eq!(judge("fdt", Some(3), "fdt: HANG at seed 1 iteration 0: killed after 5s\n"), Ending::Hang(1));
        assert_eq!(judge("fdt", Some(0), "fdt: 20000 inputs from seed 1: nothing found\n"), Ending::Survived);
        assert!(matches!(judge("fdt", Some(1), "nothing"), Ending::Error(_)));
        assert!(matches!(judge("fdt", None, ""), Ending::Error(_)));
    }

    #[test]
    fn a_mutant_past_its_deadline_is_an_error_naming_it_and_its_log() {
        let dir = std::env::temp_dir().join(format!("hostfuzz-run-logged-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("m.log");
        let slow = Cmd::new("sh", "running m (fdt)", Duration::from_millis(200)).args(["-c", "echo started; sleep 5"]);
        let error = run_logged(slow, &log).unwrap_err();
        let written = fs::read_to_string(&log).unwrap();
        let quick = Cmd::new("sh", "running q (fdt)", Duration::from_secs(10)).args(["-c", "exit 3"]);
        let code = run_logged(quick, &dir.join("q.log")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert!(error.starts_with("running m (fdt): no end after 200ms"), "{error}");
        assert!(error.ends_with(&format!("(log: {})", log.display())), "{error}");
        assert_eq!(written, "started\n");
        assert_eq!(code, Some(3));
    }
}
