//! Cargo builds of what a boot case boots, each distinct build once per run.
//!
//! A run takes the tree as it was when it began: once a build of one package, binary,
//! target, profile and feature set has been made, every later case asking for it takes
//! the same artifact without running cargo again (a failed build is kept too, and every
//! case asking for it fails with cargo's own message).
//!
//! The artifact packed is the executable cargo's JSON messages name for this build,
//! copied at once into the run's own directory. Builds with different features use
//! target directories of their own, and the copy is what the boot reads, so a second
//! run in the same worktree rebuilding the shared target/ never changes what this run
//! boots.
//!
//! What a person sees: one line per build cargo actually did (`built <what> in <time>`),
//! nothing for a build cargo found fresh. Every cargo command line, and how it went, is
//! in the run directory's `build.log`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbench_case::Arch;

use crate::error::BenchError;
use crate::process::Cmd;

/// Where the guest workspace lives, relative to the workspace root.
pub const GUEST_MANIFEST: &str = "guest/Cargo.toml";
/// The reference guest: the loader and the kernel (each package's binary has its name).
pub const LOADER_PACKAGE: &str = "loader";
pub const REFERENCE_KERNEL_PACKAGE: &str = "kernel";
/// The package whose binaries a bare programs entry names.
pub const PROGRAMS_PACKAGE: &str = "programs";

/// The reference kernel is built with frame pointers, for its panic handler's backtrace
/// (guest/kernel/src/backtrace.rs): cargo's own `target.<triple>.rustflags`, given on the
/// kernel's command line only (a profile cannot carry rustflags on stable cargo), so no
/// other guest build changes. Every crate of the kernel's build gets it; the core library
/// the toolchain ships already keeps frame pointers.
pub const KERNEL_RUSTFLAGS: &str = "['-C', 'force-frame-pointers=yes']";

/// A cargo build cannot hang a run forever: ten minutes is far past any build here.
const BUILD_DEADLINE: Duration = Duration::from_secs(600);

/// The cargo the bench runs: the one that runs the bench (`CARGO`), or `cargo` on the path.
pub fn cargo() -> PathBuf {
    std::env::var_os("CARGO").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("cargo"))
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Profile {
    Release,
    /// Release with debug assertions and overflow checks (the guest workspace's `checked`).
    Checked,
}

impl Profile {
    pub fn name(&self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Checked => "checked",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BuildKey {
    pub arch: Arch,
    pub package: String,
    pub bin: String,
    pub profile: Profile,
    /// Sorted and without duplicates, so one feature set is one key.
    pub features: Vec<String>,
}

impl BuildKey {
    pub fn new(arch: Arch, package: &str, bin: &str, profile: Profile, features: &[String]) -> BuildKey {
        let mut features = features.to_vec();
        features.sort();
        features.dedup();
        BuildKey { arch, package: package.into(), bin: bin.into(), profile, features }
    }

    /// A name for directories: the package, the profile and the feature set.
    pub fn slug(&self) -> String {
        let features = if self.features.is_empty() { "default".to_string() } else { self.features.join("+") };
        format!("{}-{}-{}", self.package, self.profile.name(), features)
    }

    pub fn describe(&self) -> String {
        let features =
            if self.features.is_empty() { String::new() } else { format!(" --features {}", self.features.join(",")) };
        format!("{} {} ({}, {}{})", self.package, self.bin, self.arch, self.profile.name(), features)
    }
}

#[derive(Clone, Debug)]
pub struct Artifact {
    /// The run's own copy of the executable cargo reported.
    pub path: PathBuf,
}

pub struct Builder {
    root: PathBuf,
    run_dir: PathBuf,
    cargo: PathBuf,
    made: HashMap<BuildKey, Result<Artifact, Arc<BenchError>>>,
    /// How many times cargo ran, for the report and the build-once test.
    pub cargo_runs: usize,
    /// Build the reference kernel with DWARF line tables (`--coverage` maps the
    /// addresses it ran to lines), into a target directory of its own: the kernel every
    /// other run boots has none (its bundle, and the guest's time to verify it, unchanged).
    pub line_tables: bool,
}

impl Builder {
    pub fn new(root: &Path, run_dir: &Path) -> Builder {
        Builder {
            root: root.to_owned(),
            run_dir: run_dir.to_owned(),
            cargo: cargo(),
            made: HashMap::new(),
            cargo_runs: 0,
            line_tables: false,
        }
    }

    /// The artifact for `key`, building it if this run has not yet. A build that failed
    /// gives its error, shared: every case asking for it fails with it.
    pub fn get(&mut self, key: &BuildKey, log: &mut dyn FnMut(&str)) -> Result<Artifact, Arc<BenchError>> {
        if let Some(made) = self.made.get(key) {
            return made.clone();
        }
        let result = self.build(key, log).map_err(Arc::new);
        self.made.insert(key.clone(), result.clone());
        result
    }

    fn build(&mut self, key: &BuildKey, log: &mut dyn FnMut(&str)) -> Result<Artifact, BenchError> {
        let start = Instant::now();
        let Some(triple) = key.arch.target_triple() else {
            return Err(BenchError::Refused(vec![format!(
                "{}: the guest workspace builds for rv64 and rv32 only, not {}",
                key.describe(),
                key.arch
            )]));
        };
        let line_tables = self.line_tables && key.package == REFERENCE_KERNEL_PACKAGE;
        let slug = if line_tables { format!("{}-lines", key.slug()) } else { key.slug() };
        let target_dir = self.root.join("target/guest").join(slug);
        let mut cmd = Cmd::new(&self.cargo, format!("cargo to build {}", key.describe()), BUILD_DEADLINE)
            .cwd(&self.root)
            .args(["build", "--manifest-path"])
            .arg(self.root.join(GUEST_MANIFEST))
            .args(["--target", triple, "--profile", key.profile.name(), "-p", &key.package, "--bin", &key.bin])
            .args(["--message-format", "json-render-diagnostics", "--target-dir"])
            .arg(&target_dir)
            // The bench's own `cargo run` must not steer the guest's build.
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS");
        if !key.features.is_empty() {
            cmd = cmd.args(["--features", &key.features.join(",")]);
        }
        if key.package == REFERENCE_KERNEL_PACKAGE {
            cmd = cmd.arg("--config").arg(format!("target.{triple}.rustflags={KERNEL_RUSTFLAGS}"));
        }
        if line_tables {
            cmd = cmd.arg("--config").arg(format!("profile.{}.debug=\"line-tables-only\"", key.profile.name()));
        }
        let command = cmd.display();
        let env = crate::fresh::build_env();
        self.record(&format!("build: {command}"));
        if let Some(executable) = crate::fresh::check(&target_dir, &command, &env) {
            self.record("  fresh by the bench's stamp (nothing changed since cargo's last build): cargo not run");
            return self.take(key, &executable);
        }
        self.cargo_runs += 1;
        let started = std::time::SystemTime::now();
        let output = cmd.output().inspect_err(|error| self.record(&format!("  failed: {error}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            self.record(&format!("  failed ({}):\n{}", output.status, stderr.trim_end()));
            return Err(BenchError::Build {
                what: key.describe(),
                status: output.status,
                stderr: stderr.trim_end().to_string(),
            });
        }
        let executable = executable_from_messages(&output.stdout, &key.bin)
            .ok_or_else(|| BenchError::NoExecutable { what: key.describe(), bin: key.bin.clone() })?;
        let guest = self.root.join(GUEST_MANIFEST);
        let guest = guest.parent().unwrap_or(&self.root);
        crate::fresh::write(&target_dir, &self.root, guest, &command, &env, &executable, started);
        let artifact = self.take(key, &executable)?;
        let took = start.elapsed().as_secs_f64();
        if compiled_anything(&output.stdout) {
            self.record(&format!("  built in {took:.1}s"));
            log(&format!("built {} in {took:.1}s", key.describe()));
        } else {
            self.record(&format!("  fresh (nothing to compile), {took:.1}s"));
        }
        Ok(artifact)
    }

    /// Copy the build's executable into the run's own directory.
    fn take(&self, key: &BuildKey, executable: &Path) -> Result<Artifact, BenchError> {
        let dir = self.run_dir.join("build").join(key.arch.name()).join(key.slug());
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::at("create", &dir, e))?;
        let copy = dir.join(&key.bin);
        std::fs::copy(executable, &copy)
            .map_err(|e| BenchError::io(format!("failed to copy {} to {}", executable.display(), copy.display()), e))?;
        Ok(Artifact { path: copy })
    }

    /// Append a line to the run's build.log (a log that cannot be written loses nothing
    /// the verdict needs, so its errors are ignored).
    fn record(&self, line: &str) {
        record_build(&self.run_dir, line);
    }
}

/// Append a line to a run directory's build.log (host-tests builds keep their cargo
/// command lines there too, not on the terminal).
pub fn record_build(run_dir: &Path, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(run_dir.join(BUILD_LOG)) {
        let _ = writeln!(file, "{line}");
    }
}

/// The run directory's log of every cargo command line and how it went.
pub const BUILD_LOG: &str = "build.log";

/// Whether cargo compiled anything: an artifact its JSON messages do not call fresh.
pub fn compiled_anything(stdout: &[u8]) -> bool {
    stdout.split(|&b| b == b'\n').any(|line| {
        serde_json::from_slice::<serde_json::Value>(line)
            .is_ok_and(|m| m["reason"] == "compiler-artifact" && m["fresh"] != true)
    })
}

/// The executable of `bin` that cargo's JSON messages report, if any.
pub fn executable_from_messages(stdout: &[u8], bin: &str) -> Option<PathBuf> {
    let mut found = None;
    for line in stdout.split(|&b| b == b'\n') {
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
        if message["reason"] != "compiler-artifact" || message["target"]["name"] != bin {
            continue;
        }
        if !message["target"]["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == "bin")) {
            continue;
        }
        if let Some(path) = message["executable"].as_str() {
            found = Some(PathBuf::from(path));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_is_the_one_cargo_reports_for_the_bin() {
        let messages =
            br#"{"reason":"compiler-artifact","target":{"name":"other","kind":["bin"]},"executable":"/t/other"}
not json at all
{"reason":"compiler-artifact","target":{"name":"smoke","kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"name":"smoke","kind":["bin"]},"executable":"/t/a/smoke"}
{"reason":"build-finished","success":true}
"#;
        assert_eq!(executable_from_messages(messages, "smoke"), Some(PathBuf::from("/t/a/smoke")));
        assert_eq!(executable_from_messages(messages, "absent"), None);
    }

    #[test]
    fn a_build_is_fresh_when_cargo_calls_every_artifact_fresh() {
        let fresh = br#"{"reason":"compiler-artifact","fresh":true,"target":{"name":"a","kind":["lib"]}}
{"reason":"compiler-artifact","fresh":true,"target":{"name":"smoke","kind":["bin"]},"executable":"/t/smoke"}
{"reason":"build-finished","success":true}
"#;
        assert!(!compiled_anything(fresh));
        let built = br#"{"reason":"compiler-artifact","fresh":true,"target":{"name":"a","kind":["lib"]}}
{"reason":"compiler-artifact","fresh":false,"target":{"name":"smoke","kind":["bin"]},"executable":"/t/smoke"}
"#;
        assert!(compiled_anything(built));
    }

    #[test]
    fn one_feature_set_is_one_key_whatever_its_order() {
        let a = BuildKey::new(Arch::Rv64, "smoke", "smoke", Profile::Release, &["b".into(), "a".into(), "b".into()]);
        let b = BuildKey::new(Arch::Rv64, "smoke", "smoke", Profile::Release, &["a".into(), "b".into()]);
        assert_eq!(a, b);
        assert_eq!(a.slug(), "smoke-release-a+b");
    }
}
