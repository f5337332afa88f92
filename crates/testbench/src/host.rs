//! The cases that run on the host: host tests (with their fanout), build cases (with
//! their binary scan), oracle scripts and source gates.
//!
//! Each returns a verdict (`Ok(())` or the reason it failed) or why it could not run at
//! all (`Blocked`): a host lack, which `--allow-skip` may turn into a skip, or a build
//! failure, which is a failure whatever the case's `must_fail` says.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testbench_case::{Arch, BuildCase, Fanout, GateCase, HostTestsCase, ScriptsCase};

use crate::build::{cargo, BuildKey, Builder, Profile};
use crate::case_result::Blocked;
use crate::process::Cmd;

/// Building a workspace's tests has no deadline of the case's own; this one only catches
/// a hung cargo.
const TEST_BUILD_DEADLINE: Duration = Duration::from_secs(1800);
/// A fanout's `values` command lists values; it has a minute.
const VALUES_DEADLINE: Duration = Duration::from_secs(60);
/// A scripts case's build commands, together.
const SCRIPTS_BUILD_DEADLINE: Duration = Duration::from_secs(600);
/// A late value's job may run this many times its deadline.
const LATE_FACTOR: u32 = 4;
/// A failures block longer than this keeps its first lines and its list of names.
const FAILURES_BLOCK_MAX_LINES: usize = 400;

/// Where a host case writes its logs: `<run>/<case>/`.
pub struct HostContext<'a> {
    pub root: &'a Path,
    pub dir: PathBuf,
}

pub use crate::case_result::HostResult;

/// The first of `tools` that is not an executable on the path.
pub fn missing_tool(tools: &[String]) -> Option<String> {
    tools.iter().find(|tool| crate::process::on_path(tool).is_none()).cloned()
}

// ---------------------------------------------------------------------------------------
// host-tests

/// One test executable cargo built for the case.
#[derive(Clone, Debug)]
struct TestBinary {
    /// The cargo target's name (an integration test file's stem, or the package's lib).
    target: String,
    executable: PathBuf,
    /// The package's directory: tests run from it, as cargo test runs them.
    package_dir: PathBuf,
}

#[derive(Clone, Debug)]
struct Job {
    /// The value, file or test this job runs (its name in the log).
    value: String,
    binary: TestBinary,
    args: Vec<String>,
    env: Vec<(String, String)>,
    late: bool,
}

fn test_binaries(stdout: &[u8]) -> Vec<TestBinary> {
    let mut binaries = Vec::new();
    for line in stdout.split(|&b| b == b'\n') {
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let (Some(executable), Some(manifest)) = (message["executable"].as_str(), message["manifest_path"].as_str())
        else {
            continue;
        };
        binaries.push(TestBinary {
            target: message["target"]["name"].as_str().unwrap_or("").to_string(),
            executable: PathBuf::from(executable),
            package_dir: Path::new(manifest).parent().map(Path::to_path_buf).unwrap_or_default(),
        });
    }
    binaries
}

/// The part of a libtest run's output that says what failed: from the first `failures:`
/// line to the `test result:` line, and cargo's line naming the binary that failed.
/// Never cargo's trailing warnings.
pub fn failures_block(stdout: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut block: Vec<&str> = Vec::new();
    if let Some(start) = lines.iter().position(|l| *l == "failures:") {
        let end = lines[start..]
            .iter()
            .position(|l| l.starts_with("test result:"))
            .map(|e| start + e)
            .unwrap_or(lines.len() - 1);
        block = lines[start..=end].to_vec();
        if block.len() > FAILURES_BLOCK_MAX_LINES {
            // Keep the first panics, then the names list (the second `failures:`) and the result.
            let names_at =
                block.iter().skip(1).position(|l| *l == "failures:").map(|p| p + 1).unwrap_or(block.len() - 1);
            let tail: Vec<&str> = block[names_at..].to_vec();
            let head_len = FAILURES_BLOCK_MAX_LINES.saturating_sub(tail.len()).max(20);
            let mut kept: Vec<&str> = block[..head_len.min(names_at)].to_vec();
            kept.push("    [... more failures cut; every failed test's name follows ...]");
            kept.extend(tail);
            block = kept;
        }
    } else if let Some(result) = lines.iter().rev().find(|l| l.starts_with("test result:")) {
        block.push(result);
    }
    let err: Vec<&str> = stderr.lines().map(str::trim).collect();
    for (index, line) in err.iter().enumerate() {
        if line.starts_with("error: test failed") || line.contains("process didn't exit successfully") {
            block.push(line);
        }
        // Miri's verdict on a test (undefined behaviour, or an operation it cannot run),
        // with the line of the test's code it stopped at.
        if line.starts_with("error: Undefined Behavior:") || line.starts_with("error: unsupported operation:") {
            block.push(line);
            if let Some(at) = err[index + 1..].iter().take(3).find(|l| l.starts_with("--> ")) {
                block.push(at);
            }
        }
    }
    block.join("\n")
}

fn substitute_cores(value: &str, cores: u32) -> String {
    value.replace("{cores}", &cores.to_string())
}

pub fn run_host_tests(
    case_name: &str,
    host: &HostTestsCase,
    ctx: &HostContext,
    log: &mut dyn FnMut(&str),
) -> HostResult {
    if let Some(tool) = missing_tool(&host.tools) {
        return Err(Blocked::HostLack(format!("tool {tool:?} is not an executable on the path (tools)")));
    }
    std::fs::create_dir_all(&ctx.dir)
        .map_err(|e| Blocked::Build(format!("failed to create {}: {e}", ctx.dir.display())))?;
    let workspace = ctx.root.join(&host.workspace);
    let features: Vec<String> =
        if host.features.is_empty() { Vec::new() } else { vec!["--features".into(), host.features.join(",")] };
    if host.miri {
        return run_under_miri(case_name, host, ctx, &workspace, &features, log);
    }

    // Build every test once, first.
    let start = Instant::now();
    let build =
        Cmd::new(cargo(), format!("cargo to build the tests of {}", host.workspace.display()), TEST_BUILD_DEADLINE)
            .cwd(&workspace)
            .args(["test", "--no-run", "--message-format", "json-render-diagnostics"])
            .args(&features);
    let output = build_tests(build, "cargo", host, ctx)?;
    let binaries = test_binaries(&output.stdout);
    let built = format!("built the tests of {} in {:.1}s", host.workspace.display(), start.elapsed().as_secs_f64());
    if crate::build::compiled_anything(&output.stdout) {
        log(&built);
    }
    if let Some(run_dir) = ctx.dir.parent() {
        crate::build::record_build(run_dir, &format!("  {built}"));
    }

    let Some(fanout) = &host.fanout else {
        // One job: cargo test as a person runs it, now that everything is built.
        return Ok(run_all_tests(host, ctx, &workspace, &features, log));
    };
    let jobs = fanout_jobs(fanout, &binaries, host, ctx)?;
    judge_jobs(case_name, &jobs, host, ctx, log)
}

/// A host-tests case without fanout: `cargo test` as a person runs it, its tests built;
/// pass, or the failures' block.
fn run_all_tests(
    host: &HostTestsCase,
    ctx: &HostContext,
    workspace: &Path,
    features: &[String],
    log: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let env: Vec<(String, String)> =
        host.vars.iter().map(|(k, v)| (k.clone(), substitute_cores(v, host.cores))).collect();
    let mut cmd = Cmd::new(cargo(), format!("the tests of {}", host.workspace.display()), host.timeout)
        .cwd(workspace)
        .args(["test", "--quiet"])
        .args(features);
    for (key, value) in &env {
        cmd = cmd.env(key, value);
    }
    let started = Instant::now();
    match cmd.output() {
        Err(error) => Err(format!("{error} (timeout_secs)")),
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let _ = std::fs::write(ctx.dir.join("cargo-test.log"), format!("{stdout}\n--- stderr\n{stderr}"));
            log(&format!("cargo test took {:.1}s", started.elapsed().as_secs_f64()));
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("cargo test failed ({}):\n{}", out.status, failures_block(&stdout, &stderr)))
            }
        }
    }
}

/// A fanout's jobs: one per value of the values command, per test file, or per test of
/// every test binary (its filter and skips applied).
fn fanout_jobs(
    fanout: &Fanout,
    binaries: &[TestBinary],
    host: &HostTestsCase,
    ctx: &HostContext,
) -> Result<Vec<Job>, Blocked> {
    let find = |target: &str| binaries.iter().find(|b| b.target == target).cloned();
    let mut jobs = Vec::new();
    match fanout {
        Fanout::Value { values, env, test } => {
            let binary = find(test).ok_or_else(|| {
                Blocked::Build(format!("test: cargo built no test target {test:?} in {}", host.workspace.display()))
            })?;
            let out = Cmd::new("sh", "the values command", VALUES_DEADLINE)
                .cwd(ctx.root)
                .args(["-c", values])
                .output()
                .map_err(|e| Blocked::Build(e.to_string()))?;
            if !out.status.success() {
                return Err(Blocked::Build(format!(
                    "values: `{values}` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            for value in String::from_utf8_lossy(&out.stdout).lines().map(str::trim).filter(|v| !v.is_empty()) {
                jobs.push(Job {
                    value: value.to_string(),
                    binary: binary.clone(),
                    args: Vec::new(),
                    env: vec![(env.clone(), value.to_string())],
                    late: false,
                });
            }
        }
        Fanout::File { tests } => {
            for test in tests {
                let binary = find(test).ok_or_else(|| {
                    Blocked::Build(format!(
                        "tests: cargo built no test target {test:?} in {}",
                        host.workspace.display()
                    ))
                })?;
                jobs.push(Job { value: test.clone(), binary, args: Vec::new(), env: Vec::new(), late: false });
            }
        }
        Fanout::Test { filter, skip } => {
            for binary in binaries {
                let out = Cmd::new(&binary.executable, "a test binary to list its tests", VALUES_DEADLINE)
                    .cwd(&binary.package_dir)
                    .args(["--list", "--format", "terse"])
                    .output()
                    .map_err(|e| Blocked::Build(e.to_string()))?;
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    let Some(name) = line.strip_suffix(": test") else { continue };
                    if filter.as_ref().is_some_and(|f| !f.regex.is_match(name)) || skip.iter().any(|s| s == name) {
                        continue;
                    }
                    jobs.push(Job {
                        value: format!("{}::{name}", binary.target),
                        binary: binary.clone(),
                        args: vec!["--exact".into(), name.to_string()],
                        env: Vec::new(),
                        late: false,
                    });
                }
            }
        }
    }
    Ok(jobs)
}

/// Run the build of a case's tests, its command line recorded in the run's build log:
/// cargo's output, or the build's failure with its stderr (`tool` names who failed).
fn build_tests(
    build: Cmd,
    tool: &str,
    host: &HostTestsCase,
    ctx: &HostContext,
) -> Result<crate::process::Output, Blocked> {
    if let Some(run_dir) = ctx.dir.parent() {
        crate::build::record_build(run_dir, &format!("build: {}", build.display()));
    }
    let output = build.output().map_err(|e| Blocked::Build(e.to_string()))?;
    if !output.status.success() {
        return Err(Blocked::Build(format!(
            "{tool} failed to build the tests of {} ({}):\n{}",
            host.workspace.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        )));
    }
    Ok(output)
}

/// Under Miri (`miri = true`): check that the nightly toolchain has Miri, build the tests
/// (and Miri's sysroot) once, then run `cargo +nightly miri test` once, or once per test
/// target of `fanout = "file"`. Miri stops a test at the first undefined behaviour it
/// reaches and names it; that message is the job's failure.
fn run_under_miri(
    case_name: &str,
    host: &HostTestsCase,
    ctx: &HostContext,
    workspace: &Path,
    features: &[String],
    log: &mut dyn FnMut(&str),
) -> HostResult {
    const INSTALL: &str = "rustup component add miri rust-src --toolchain nightly";
    // The rustup proxy picks the toolchain from +nightly; what the bench's own cargo run
    // set for its toolchain must not reach it.
    let miri_cmd = |what: String, deadline: Duration| {
        Cmd::new("cargo", what, deadline)
            .cwd(workspace)
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC")
            .env_remove("RUSTDOC")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .args(["+nightly", "miri"])
    };
    let probe = miri_cmd("cargo +nightly miri --version".into(), VALUES_DEADLINE).arg("--version").output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return Err(Blocked::HostLack(format!(
                "Miri is not installed for the nightly toolchain ({}: {}); run: {INSTALL}",
                out.status,
                String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").trim()
            )))
        }
        Err(error) => {
            return Err(Blocked::HostLack(format!("cargo +nightly miri cannot run ({error}); run: {INSTALL}")))
        }
    }
    let start = Instant::now();
    let build = miri_cmd(format!("cargo miri to build the tests of {}", host.workspace.display()), TEST_BUILD_DEADLINE)
        .args(["test", "--no-run"])
        .args(features);
    build_tests(build, "cargo miri", host, ctx)?;
    log(&format!(
        "{case_name}: built the tests of {} for Miri in {:.1}s",
        host.workspace.display(),
        start.elapsed().as_secs_f64()
    ));
    let job = |value: &str, target: &[&str]| {
        let mut args: Vec<String> = ["+nightly", "miri", "test", "--quiet"].map(String::from).to_vec();
        args.extend(features.iter().cloned());
        args.extend(target.iter().map(|a| a.to_string()));
        Job {
            value: value.to_string(),
            binary: TestBinary {
                target: value.to_string(),
                executable: "cargo".into(),
                package_dir: workspace.to_path_buf(),
            },
            args,
            env: Vec::new(),
            late: false,
        }
    };
    let jobs: Vec<Job> = match &host.fanout {
        None => vec![job("miri", &[])],
        Some(Fanout::File { tests }) => tests.iter().map(|t| job(t, &["--test", t])).collect(),
        Some(_) => unreachable!("the case refuses miri with another fanout"),
    };
    judge_jobs(case_name, &jobs, host, ctx, log)
}

/// Run the jobs and make the case's result: every failure, every job past its deadline,
/// every stale `late` entry.
fn judge_jobs(
    case_name: &str,
    jobs: &[Job],
    host: &HostTestsCase,
    ctx: &HostContext,
    log: &mut dyn FnMut(&str),
) -> HostResult {
    let mut jobs = jobs.to_vec();
    let mut problems = Vec::new();
    for late in &host.late {
        match jobs.iter_mut().find(|j| j.value == *late) {
            Some(job) => job.late = true,
            None => problems.push(format!("late entry {late:?} names no job")),
        }
    }
    if jobs.is_empty() {
        problems.push("the fanout made no jobs".to_string());
    }
    let mut results = run_jobs(&jobs, host, ctx);
    let mut summary = String::new();
    rerun_alone(&jobs, &mut results, host, ctx, &mut summary, log);
    let mut late_known = Vec::new();
    for (job, (result, took)) in jobs.iter().zip(&results) {
        let word = match result {
            JobResult::Pass if job.late => {
                problems.push(format!("late value {:?} passed within its bound: remove it from late", job.value));
                "PASS (late entry is stale)"
            }
            JobResult::Pass => "PASS",
            JobResult::PassLate => {
                late_known.push(job.value.clone());
                "LATE"
            }
            JobResult::PastDeadline => {
                problems.push(format!("{} ran past its deadline of {:?}", job.value, host.timeout));
                "PAST DEADLINE"
            }
            JobResult::Fail(block) => {
                problems.push(format!("{} failed:\n{block}", job.value));
                "FAIL"
            }
            JobResult::Trouble(message) => {
                problems.push(format!("{}: {message}", job.value));
                "ERROR"
            }
        };
        summary.push_str(&format!("{:<8.2}s {word:<6} {}\n", took.as_secs_f64(), job.value));
    }
    let _ = std::fs::write(ctx.dir.join(format!("{case_name}.log")), &summary);
    if !late_known.is_empty() {
        log(&format!("{case_name}: caught late, known: {}", late_known.join(", ")));
    }
    if problems.is_empty() {
        Ok(Ok(()))
    } else {
        Ok(Err(format!("{} of {} jobs failed:\n{}", problems.len(), jobs.len(), problems.join("\n"))))
    }
}

enum JobResult {
    Pass,
    PassLate,
    PastDeadline,
    Fail(String),
    Trouble(String),
}

fn file_name_for(value: &str) -> String {
    value.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

/// How many jobs run at once: as many as the cores this process may use (a q lease's,
/// when under q: its affinity) have room for, each asking for `cores`.
fn slots(host: &HostTestsCase) -> usize {
    let machine = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    (machine / host.cores).max(1) as usize
}

/// A job that ran past its deadline while another job of the case ran beside it may have
/// been slowed by that job: it runs again, alone, once every job has ended, and its
/// result is the rerun's; both are said (in the case's log and the run's output). A job
/// that failed otherwise, or ran with none beside it, is not rerun.
fn rerun_alone(
    jobs: &[Job],
    results: &mut [(JobResult, Duration)],
    host: &HostTestsCase,
    ctx: &HostContext,
    summary: &mut String,
    log: &mut dyn FnMut(&str),
) {
    if slots(host) < 2 || jobs.len() < 2 {
        return;
    }
    for (job, result) in jobs.iter().zip(results.iter_mut()) {
        if !matches!(result.0, JobResult::PastDeadline) {
            continue;
        }
        let started = Instant::now();
        let again = run_job(job, host, ctx);
        let word = match &again {
            JobResult::Pass | JobResult::PassLate => "passed alone",
            JobResult::PastDeadline => "ran past it alone too",
            JobResult::Fail(_) | JobResult::Trouble(_) => "failed alone",
        };
        let line = format!("{}: past its deadline of {:?} beside other jobs; {word}", job.value, host.timeout);
        summary.push_str(&format!("{line}\n"));
        log(&line);
        *result = (again, started.elapsed());
    }
}

/// Run the jobs, [`slots`] at once.
fn run_jobs(jobs: &[Job], host: &HostTestsCase, ctx: &HostContext) -> Vec<(JobResult, Duration)> {
    let slots = slots(host);
    let next = Arc::new(Mutex::new(0usize));
    let results: Arc<Mutex<BTreeMap<usize, (JobResult, Duration)>>> = Arc::new(Mutex::new(BTreeMap::new()));
    std::thread::scope(|scope| {
        for _ in 0..slots.min(jobs.len().max(1)) {
            let next = next.clone();
            let results = results.clone();
            scope.spawn(move || loop {
                let index = {
                    let mut next = next.lock().unwrap();
                    let index = *next;
                    *next += 1;
                    index
                };
                let Some(job) = jobs.get(index) else { break };
                let started = Instant::now();
                let result = run_job(job, host, ctx);
                results.lock().unwrap().insert(index, (result, started.elapsed()));
            });
        }
    });
    let mut results = Arc::try_unwrap(results).ok().expect("every job thread has ended").into_inner().unwrap();
    (0..jobs.len())
        .map(|i| results.remove(&i).unwrap_or((JobResult::Trouble("never ran".into()), Duration::ZERO)))
        .collect()
}

fn run_job(job: &Job, host: &HostTestsCase, ctx: &HostContext) -> JobResult {
    let deadline = if job.late { host.timeout * LATE_FACTOR } else { host.timeout };
    let mut cmd = Cmd::new(&job.binary.executable, format!("job {}", job.value), deadline)
        .cwd(&job.binary.package_dir)
        .args(&job.args)
        .env("RUST_TEST_THREADS", host.cores.to_string());
    for (key, value) in &host.vars {
        cmd = cmd.env(key, substitute_cores(value, host.cores));
    }
    for (key, value) in &job.env {
        cmd = cmd.env(key, value);
    }
    if job.late {
        cmd = cmd.env("TESTBENCH_LATE", "1");
    }
    let started = Instant::now();
    let output = cmd.output();
    let took = started.elapsed();
    let log_path = ctx.dir.join(format!("{}.log", file_name_for(&job.value)));
    match output {
        Err(crate::process::CmdError::Deadline { .. }) => {
            let _ = std::fs::write(&log_path, format!("killed at its deadline of {deadline:?}\n"));
            JobResult::PastDeadline
        }
        Err(error) => JobResult::Trouble(error.to_string()),
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if let Ok(mut file) = std::fs::File::create(&log_path) {
                let _ = write!(file, "{}\n{stdout}\n--- stderr\n{stderr}", cmd.display());
            }
            match (out.status.success(), job.late) {
                (true, true) if took > host.timeout => JobResult::PassLate,
                (true, _) => JobResult::Pass,
                (false, _) => JobResult::Fail(format!(
                    "{}\n(exit {}; log {})",
                    failures_block(&stdout, &stderr),
                    out.status,
                    log_path.display()
                )),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// build

/// Build the binary for `arch` and scan it. A build error is the verdict here (a build
/// case's must_fail may match it), so it is returned as a failure, not as `Blocked`.
pub fn run_build(case: &BuildCase, arch: Arch, builder: &mut Builder, log: &mut dyn FnMut(&str)) -> HostResult {
    let profile = if case.profile == "checked" { Profile::Checked } else { Profile::Release };
    let key = BuildKey::new(arch, &case.package, &case.bin, profile, &case.features);
    let artifact = match builder.get(&key, log) {
        Ok(artifact) => artifact,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let bytes = std::fs::read(&artifact.path)
        .map_err(|e| Blocked::Build(format!("failed to read {}: {e}", artifact.path.display())))?;
    for needle in &case.forbid_in_binary {
        if let Some(offset) = find_bytes(&bytes, needle.as_bytes()) {
            return Ok(Err(format!(
                "forbidden bytes {needle:?} at offset {offset:#x} of {} {} ({arch}): {}",
                case.package,
                case.bin,
                context_around(&bytes, offset, needle.len())
            )));
        }
    }
    Ok(Ok(()))
}

pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// The bytes around a find, printable ASCII kept and the rest escaped.
pub fn context_around(bytes: &[u8], offset: usize, len: usize) -> String {
    let start = offset.saturating_sub(16);
    let end = (offset + len + 16).min(bytes.len());
    let mut text = String::from("\"");
    for &b in &bytes[start..end] {
        match b {
            b'"' | b'\\' => text.push_str(&format!("\\{}", b as char)),
            0x20..=0x7e => text.push(b as char),
            _ => text.push_str(&format!("\\x{b:02x}")),
        }
    }
    text.push('"');
    text
}

// ---------------------------------------------------------------------------------------
// scripts

pub fn run_scripts(case: &ScriptsCase, ctx: &HostContext, log: &mut dyn FnMut(&str)) -> HostResult {
    // A missing tool fails even under --allow-skip: an oracle that does not run catches nothing.
    if let Some(tool) = missing_tool(&case.tools) {
        return Err(Blocked::Build(format!(
            "tool {tool:?} is not an executable on the path (tools); an oracle that does not run catches nothing"
        )));
    }
    std::fs::create_dir_all(&ctx.dir).map_err(|e| Blocked::Build(e.to_string()))?;
    let mut record = String::new();
    let build_start = Instant::now();
    for (index, command) in case.build.iter().enumerate() {
        let left = SCRIPTS_BUILD_DEADLINE.saturating_sub(build_start.elapsed());
        let started = Instant::now();
        let out = Cmd::new("sh", format!("build[{index}] `{command}`"), left)
            .cwd(ctx.root)
            .args(["-c", command])
            .output()
            .map_err(|e| Blocked::Build(format!("{e} (the build has {SCRIPTS_BUILD_DEADLINE:?} in all)")))?;
        record.push_str(&format!(
            "build[{index}] `{command}`: {:.2}s, {}\n",
            started.elapsed().as_secs_f64(),
            out.status
        ));
        if !out.status.success() {
            let _ = std::fs::write(ctx.dir.join("scripts.log"), &record);
            return Err(Blocked::Build(format!(
                "build[{index}] `{command}` failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            )));
        }
    }
    log(&format!("scripts build took {:.2}s", build_start.elapsed().as_secs_f64()));
    let scripts_start = Instant::now();
    let mut verdict = Ok(());
    for (index, script) in case.scripts.iter().enumerate() {
        let left = case.timeout.saturating_sub(scripts_start.elapsed());
        let started = Instant::now();
        let out = Cmd::new(ctx.root.join(script), format!("scripts[{index}] {script}"), left).cwd(ctx.root).output();
        match out {
            Err(crate::process::CmdError::Deadline { .. }) => {
                let message = format!(
                    "scripts[{index}] {script}: no end within timeout_secs = {} (counted from the end of the build); killed it",
                    testbench_judge::secs(case.timeout)
                );
                record.push_str(&format!("{message}\n"));
                verdict = Err(message);
                break;
            }
            Err(error) => {
                record.push_str(&format!("scripts[{index}] {script}: {error}\n"));
                verdict = Err(format!("scripts[{index}] {script}: {error}"));
                break;
            }
            Ok(out) => {
                let took = started.elapsed().as_secs_f64();
                record.push_str(&format!("scripts[{index}] {script}: {took:.2}s, {}\n", out.status));
                let _ = std::fs::write(
                    ctx.dir.join(format!("script-{index}.log")),
                    format!(
                        "{}\n--- stderr\n{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ),
                );
                if !out.status.success() {
                    let tail = crate::qemu::last_lines(&String::from_utf8_lossy(&out.stderr), 5).join(" | ");
                    verdict = Err(format!("scripts[{index}] {script} failed ({}): {tail}", out.status));
                    break;
                }
            }
        }
    }
    let _ = std::fs::write(ctx.dir.join("scripts.log"), &record);
    Ok(verdict)
}

// ---------------------------------------------------------------------------------------
// gates

pub fn run_gate(case: &GateCase, ctx: &HostContext, log: &mut dyn FnMut(&str)) -> HostResult {
    let tree = ctx.root.join(&case.tree);
    let findings = crate::gates::run(case.gate, &tree, &case.config, log)?;
    if findings.is_empty() {
        Ok(Ok(()))
    } else {
        Ok(Err(findings.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failures_block_keeps_the_panics_the_names_and_cargos_line_not_its_warnings() {
        let stdout = "running 3 tests\ntest a ... ok\ntest b ... FAILED\n\nfailures:\n\n---- b stdout ----\nthread 'b' panicked at src/lib.rs:3:5:\nboom\n\nfailures:\n    b\n\ntest result: FAILED. 1 passed; 1 failed\n\n";
        let stderr = "   Compiling x\nerror: test failed, to rerun pass `-p x --lib`\nwarning: unused import\n";
        let block = failures_block(stdout, stderr);
        assert!(block.starts_with("failures:\n"), "{block}");
        assert!(block.contains("panicked at src/lib.rs:3:5:\nboom"), "{block}");
        assert!(block.contains("test result: FAILED. 1 passed; 1 failed"), "{block}");
        assert!(block.ends_with("error: test failed, to rerun pass `-p x --lib`"), "{block}");
        assert!(!block.contains("warning"), "{block}");
        assert!(!block.contains("test a ... ok"), "{block}");
    }

    #[test]
    fn a_failures_block_keeps_miris_verdict_and_where_it_stopped() {
        let stdout = "running 2 tests\n.";
        let stderr = "error: Undefined Behavior: Data race detected between (1) retag write on thread `a` and (2) retag write on thread `b` at alloc1+0x20\n  --> tests/lock.rs:36:21\n   |\n   = help: this indicates a bug\nerror: test failed, to rerun pass `--test lock`\n";
        let block = failures_block(stdout, stderr);
        assert!(block.contains("error: Undefined Behavior: Data race detected between (1)"), "{block}");
        assert!(block.contains("--> tests/lock.rs:36:21"), "{block}");
        assert!(!block.contains("help"), "{block}");
    }

    #[test]
    fn a_long_failures_block_keeps_its_first_panics_and_every_name() {
        let mut stdout = String::from("failures:\n\n");
        for i in 0..500 {
            stdout.push_str(&format!("---- t{i} stdout ----\npanicked {i}\n"));
        }
        stdout.push_str("\nfailures:\n");
        for i in 0..500 {
            stdout.push_str(&format!("    t{i}\n"));
        }
        stdout.push_str("\ntest result: FAILED. 0 passed; 500 failed\n");
        let block = failures_block(&stdout, "");
        assert!(block.contains("panicked 0"), "the first panic is kept");
        assert!(block.contains("    t499"), "every name is kept");
        assert!(block.contains("more failures cut"));
        assert!(block.ends_with("test result: FAILED. 0 passed; 500 failed"));
    }

    #[test]
    fn a_scan_quotes_the_offset_and_what_is_around_it() {
        let bytes = b"\x7fELF....some text TRACE: here\x00\x01";
        let offset = find_bytes(bytes, b"TRACE:").unwrap();
        assert_eq!(offset, 18);
        assert_eq!(
            context_around(bytes, offset, 6),
            "\"LF....some text TRACE: here\\x00\\x01\"",
            "16 bytes either side"
        );
        assert_eq!(find_bytes(bytes, b"absent"), None);
    }

    #[test]
    fn a_missing_tool_is_named() {
        assert_eq!(missing_tool(&["sh".into(), "no-such-tool-anywhere".into()]), Some("no-such-tool-anywhere".into()));
        assert_eq!(missing_tool(&["sh".into()]), None);
    }
}
