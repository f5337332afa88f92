//! The guest workspace's names (its packages, their binaries and features), read once
//! per run from `cargo metadata`, so that a case naming a binary, a package or a feature
//! that is not there is refused before anything builds, with the nearest name that is,
//! rather than by cargo after the kernel was built.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use testbench_case::{Case, FileSource, Guest, Kind, Program};

use crate::build::{cargo, GUEST_MANIFEST, PROGRAMS_PACKAGE, REFERENCE_KERNEL_PACKAGE};
use crate::process::Cmd;

/// `cargo metadata --no-deps --offline` reads manifests only: well under a second here.
const METADATA_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct GuestNames {
    packages: BTreeMap<String, Package>,
}

#[derive(Debug, Default)]
struct Package {
    bins: Vec<String>,
    features: Vec<String>,
}

/// Whether a case names anything of the guest workspace (so the run needs its names).
pub fn needed(case: &Case) -> bool {
    match &case.kind {
        Kind::Boot(boot) => matches!(boot.guest, Guest::Built { .. }),
        Kind::Build(_) => true,
        _ => false,
    }
}

/// Where the last answer is kept, with what it was read from.
const CACHE: &str = "target/testbench/guest-names.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    command: String,
    env: Vec<(String, String)>,
    inputs: Vec<(std::path::PathBuf, testbench_fresh::Stat)>,
    json: String,
}

/// What `cargo metadata --no-deps` reads: the guest workspace's manifests and lock file,
/// its directory and each member's (a new member), each member's `src/` and `src/bin/`
/// (a binary cargo finds by its file), and the cargo configuration files.
fn metadata_inputs(root: &Path) -> Vec<std::path::PathBuf> {
    let guest = root.join(GUEST_MANIFEST);
    let guest = guest.parent().unwrap_or(root).to_path_buf();
    let mut paths = vec![guest.clone(), guest.join("Cargo.toml"), guest.join("Cargo.lock")];
    for member in testbench_fresh::members(&guest) {
        paths.extend([
            member.join("Cargo.toml"),
            member.join("src"),
            member.join("src/bin"),
            member.join("src/main.rs"),
        ]);
        paths.push(member);
    }
    paths.extend(testbench_fresh::cargo_config_files(&[root, &guest]));
    paths
}

/// Run `cargo metadata` on the guest workspace once, under a deadline; or take its last
/// answer when nothing it reads has changed since (about 20 ms saved on every run).
/// Why the guest workspace's names could not be had (a refusal of the run, in these words).
#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    /// cargo did not start, or ran past its deadline.
    #[error("the guest workspace's names: {0}")]
    Command(#[from] crate::process::CmdError),
    /// `cargo metadata` ran and failed: its own message.
    #[error("the guest workspace's names: `{command}` failed ({status}):\n{stderr}")]
    Failed { command: String, status: std::process::ExitStatus, stderr: String },
    /// `cargo metadata` answered with what is not its format.
    #[error("the guest workspace's names: `{command}`: {source}")]
    Metadata { command: String, source: MetadataError },
}

/// What in `cargo metadata`'s answer is not its format.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("no packages in its output")]
    NoPackages,
}

pub fn read(root: &Path) -> Result<GuestNames, NamesError> {
    let cmd = Cmd::new(cargo(), "cargo metadata of the guest workspace", METADATA_DEADLINE)
        .cwd(root)
        .args(["metadata", "--manifest-path"])
        .arg(root.join(GUEST_MANIFEST))
        .args(["--no-deps", "--format-version", "1", "--offline"]);
    let (command, env, cache) = (cmd.display(), testbench_fresh::build_env(), root.join(CACHE));
    let kept: Option<Kept> = std::fs::read_to_string(&cache).ok().and_then(|t| serde_json::from_str(&t).ok());
    let unchanged = |k: &Kept| testbench_fresh::unchanged(k.inputs.iter().map(|(p, s)| (p.as_path(), s)));
    if let Some(kept) = kept.filter(|k| k.command == command && k.env == env && unchanged(k)) {
        if let Ok(names) = parse(kept.json.as_bytes()) {
            return Ok(names);
        }
    }
    let started = std::time::SystemTime::now();
    let output = cmd.output()?;
    if !output.status.success() {
        return Err(NamesError::Failed {
            command: cmd.display(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim_end().to_string(),
        });
    }
    let names = parse(&output.stdout).map_err(|source| NamesError::Metadata { command: cmd.display(), source })?;
    if let (Some(inputs), Ok(json)) =
        (testbench_fresh::snapshot(metadata_inputs(root), started, None), String::from_utf8(output.stdout))
    {
        let kept = Kept { command, env, inputs, json };
        let tmp = cache.with_extension(format!("tmp.{}", std::process::id()));
        if let Ok(text) = serde_json::to_string(&kept) {
            let _ = std::fs::create_dir_all(cache.parent().unwrap_or(root));
            if std::fs::write(&tmp, text).is_err() || std::fs::rename(&tmp, &cache).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
    Ok(names)
}

/// The names in `cargo metadata`'s JSON (format version 1).
pub fn parse(json: &[u8]) -> Result<GuestNames, MetadataError> {
    let value: serde_json::Value = serde_json::from_slice(json)?;
    let packages = value["packages"].as_array().ok_or(MetadataError::NoPackages)?;
    let mut names = GuestNames::default();
    for package in packages {
        let Some(name) = package["name"].as_str() else { continue };
        let bins = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == "bin")))
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect();
        let features = package["features"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default();
        names.packages.insert(name.to_string(), Package { bins, features });
    }
    Ok(names)
}

impl GuestNames {
    /// Every refusal for what `case` names of the guest workspace.
    pub fn check(&self, case: &Case) -> Vec<String> {
        let mut errors = Vec::new();
        let mut refuse = |field: String, message: String| {
            errors.push(format!("{}: {field}: {message}", case.file.display()));
        };
        match &case.kind {
            Kind::Boot(boot) => {
                let Guest::Built { programs, .. } = &boot.guest else { return Vec::new() };
                for (index, feature) in boot.kernel_features.iter().enumerate() {
                    if let Some(message) = self.feature(REFERENCE_KERNEL_PACKAGE, feature) {
                        refuse(format!("kernel_features[{index}]"), message);
                    }
                }
                for (index, entry) in programs.iter().enumerate() {
                    self.program(&format!("programs[{index}]"), &entry.program, &mut refuse);
                }
                for (index, file) in boot.files.iter().enumerate() {
                    if let FileSource::Program(program) = &file.from {
                        self.program(&format!("file[{index}].from"), program, &mut refuse);
                    }
                }
            }
            // A build case's features are left to cargo: its refusal is what such a case
            // may be about (tests/bench-build-error.toml).
            Kind::Build(build) => {
                if let Some((field, message)) = self.bin(&build.package, &build.bin, "package", "bin") {
                    refuse(field, message);
                }
            }
            _ => {}
        }
        errors
    }

    fn program(&self, field: &str, program: &Program, refuse: &mut dyn FnMut(String, String)) {
        match program {
            Program::TestProgram(bin) => {
                if let Some((_, message)) = self.bin(PROGRAMS_PACKAGE, bin, "", "") {
                    refuse(field.to_string(), message);
                }
            }
            Program::Corrupt { bin, .. } => {
                if let Some((_, message)) = self.bin(PROGRAMS_PACKAGE, bin, "", "") {
                    refuse(format!("{field}.corrupt"), message);
                }
            }
            Program::Package { package, bin, features } => {
                if let Some((at, message)) = self.bin(package, bin, "package", "bin") {
                    refuse(format!("{field}.{at}"), message);
                    return;
                }
                for (index, feature) in features.iter().enumerate() {
                    if let Some(message) = self.feature(package, feature) {
                        refuse(format!("{field}.features[{index}]"), message);
                    }
                }
            }
            Program::Path(_) => {}
        }
    }

    /// Why `bin` of `package` is not there (with the field at fault: `package_field` or
    /// `bin_field`), naming the nearest binary that is.
    fn bin(&self, package: &str, bin: &str, package_field: &str, bin_field: &str) -> Option<(String, String)> {
        let Some(found) = self.packages.get(package) else {
            let near = testbench_case::nearest(package, self.packages.keys().map(String::as_str));
            let with_bins: Vec<&str> =
                self.packages.iter().filter(|(_, p)| !p.bins.is_empty()).map(|(n, _)| n.as_str()).collect();
            return Some((
                package_field.to_string(),
                sentence(
                    format!("{package:?} is not a package of the guest workspace ({GUEST_MANIFEST})"),
                    &near,
                    format!("Its packages with binaries: {}", with_bins.join(", ")),
                ),
            ));
        };
        if found.bins.iter().any(|b| b == bin) {
            return None;
        }
        let nearest = match self.nearest_bin(bin, package) {
            None => String::new(),
            Some((near_package, near_bin)) if near_package == package => format!("; the nearest is `{near_bin}`"),
            Some((near_package, near_bin)) if package == PROGRAMS_PACKAGE && package_field.is_empty() => format!(
                "; the nearest is `{near_bin}` of package {near_package:?}: {{ package = \"{near_package}\", bin = \"{near_bin}\" }}"
            ),
            Some((near_package, near_bin)) => format!("; the nearest is `{near_bin}` of package {near_package:?}"),
        };
        let listed = if found.bins.is_empty() { "none".to_string() } else { found.bins.join(", ") };
        Some((
            bin_field.to_string(),
            format!(
                "{bin:?} is not a binary of the guest workspace's package {package:?}{nearest}. Its binaries: {listed}"
            ),
        ))
    }

    /// The binary nearest to `bin` by edit distance, of any package (`prefer`'s first on a
    /// tie), when one is near enough to be a typo of it (the bound of
    /// [`testbench_case::nearest`]): a name far from every binary gets no suggestion.
    fn nearest_bin(&self, bin: &str, prefer: &str) -> Option<(&str, &str)> {
        let all = || self.packages.iter().flat_map(|(package, found)| found.bins.iter().map(move |b| (package, b)));
        let near = testbench_case::nearest(bin, all().map(|(_, b)| b.as_str()));
        let mut taken: Vec<(&str, &str)> =
            all().filter(|(_, b)| near.contains(&b.as_str())).map(|(p, b)| (p.as_str(), b.as_str())).collect();
        taken.sort_by_key(|(package, b)| (near.iter().position(|n| n == b), *package != prefer));
        taken.into_iter().next()
    }

    /// Why `feature` is not a feature of `package`, if it is not.
    fn feature(&self, package: &str, feature: &str) -> Option<String> {
        let found = self.packages.get(package)?;
        if feature == "default" || found.features.iter().any(|f| f == feature) {
            return None;
        }
        let known: Vec<&str> = found.features.iter().map(String::as_str).filter(|f| *f != "default").collect();
        let near = testbench_case::nearest(feature, known.iter().copied());
        let listed = if known.is_empty() { "none".to_string() } else { known.join(", ") };
        Some(sentence(
            format!("{feature:?} is not a feature of the guest workspace's package {package:?}"),
            &near,
            format!("Its features: {listed}"),
        ))
    }
}

/// "head; did you mean `x`? tail", or "head. tail" when nothing is near.
fn sentence(head: String, near: &[&str], tail: String) -> String {
    match testbench_case::did_you_mean(near) {
        near if near.is_empty() => format!("{head}. {tail}"),
        near => format!("{head}; {near} {tail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_names_go_stale_with_a_new_binary_file_member_or_manifest_change() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let member = root.join("guest/m");
        std::fs::create_dir_all(member.join("src")).unwrap();
        std::fs::write(root.join("guest/Cargo.toml"), "[workspace]").unwrap();
        std::fs::write(member.join("Cargo.toml"), "[package]").unwrap();
        std::fs::write(member.join("src/main.rs"), "").unwrap();
        let later = std::time::SystemTime::now() + testbench_fresh::CLOCK_SLACK + Duration::from_secs(1);
        let seen = || testbench_fresh::snapshot(metadata_inputs(root), later, None).unwrap();
        let unchanged = |seen: &[(std::path::PathBuf, testbench_fresh::Stat)]| {
            testbench_fresh::unchanged(seen.iter().map(|(p, s)| (p.as_path(), s)))
        };
        let changes: [&dyn Fn(); 4] = [
            &|| std::fs::create_dir_all(member.join("src/bin")).unwrap(),
            &|| std::fs::write(member.join("src/bin/x.rs"), "").unwrap(),
            &|| std::fs::write(member.join("Cargo.toml"), "[package]\n[features]").unwrap(),
            &|| {
                std::fs::create_dir_all(root.join("guest/n")).unwrap();
                std::fs::write(root.join("guest/n/Cargo.toml"), "[package]").unwrap();
            },
        ];
        for (i, change) in changes.iter().enumerate() {
            let before = seen();
            assert!(unchanged(&before));
            change();
            assert!(!unchanged(&before), "change {i} was missed");
        }
    }

    const METADATA: &str = r#"{"packages":[
        {"name":"programs","features":{},"targets":[{"name":"checker","kind":["bin"]},{"name":"rng","kind":["bin"]},{"name":"logsrv","kind":["bin"]}]},
        {"name":"smoke","features":{"default":[],"echo":[],"status-3":[]},"targets":[{"name":"smoke","kind":["bin"]}]},
        {"name":"kernel","features":{},"targets":[{"name":"kernel","kind":["bin"]}]},
        {"name":"fdt","features":{},"targets":[{"name":"fdt","kind":["lib"]}]}
    ]}"#;

    fn case(programs: &str, extra: &str) -> Case {
        let text = format!(
            "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = {programs}\nexpect = ['x']\n{extra}"
        );
        testbench_case::parse("tests/c.toml", &text).unwrap()
    }

    #[test]
    fn an_answer_that_is_not_cargo_metadata_s_is_refused_with_what_is_wrong() {
        let not_json = parse(b"not json").unwrap_err();
        assert!(matches!(not_json, MetadataError::NotJson(_)), "{not_json:?}");
        assert!(not_json.to_string().starts_with("not JSON: "), "{not_json}");
        let no_packages = parse(b"{}").unwrap_err();
        assert!(matches!(no_packages, MetadataError::NoPackages), "{no_packages:?}");
        let refused = NamesError::Metadata { command: "cargo metadata".into(), source: no_packages };
        assert_eq!(refused.to_string(), "the guest workspace's names: `cargo metadata`: no packages in its output");
    }

    #[test]
    fn an_unknown_binary_package_or_feature_is_refused_with_the_nearest() {
        let names = parse(METADATA.as_bytes()).unwrap();
        assert!(names.check(&case("[\"logsrv\", \"checker\"]", "")).is_empty());
        let refused = names.check(&case("[\"logsrv\", \"chekcer\"]", ""));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("tests/c.toml: programs[1]: \"chekcer\" is not a binary of the guest workspace's package \"programs\"; the nearest is `checker`."),
            "{refused:?}"
        );
        let refused = names.check(&case("[\"smok\"]", ""));
        assert!(
            refused[0]
                .contains("the nearest is `smoke` of package \"smoke\": { package = \"smoke\", bin = \"smoke\" }"),
            "{refused:?}"
        );
        let refused = names.check(&case("[{ package = \"smoek\", bin = \"smoke\" }]", ""));
        assert!(
            refused[0].contains("programs[0].package: \"smoek\" is not a package")
                && refused[0].contains("did you mean `smoke`?"),
            "{refused:?}"
        );
        assert!(!refused[0].contains("fdt"), "a package without binaries is not offered: {refused:?}");
        let refused = names.check(&case("[{ package = \"smoke\", bin = \"smoke\", features = [\"ecoh\"] }]", ""));
        assert!(
            refused[0].contains("programs[0].features[0]: \"ecoh\" is not a feature")
                && refused[0].contains("did you mean `echo`?"),
            "{refused:?}"
        );
        // A name far from every binary gets none offered.
        let refused = names.check(&case("[\"zzzzzzzzzz\"]", ""));
        assert_eq!(
            refused,
            ["tests/c.toml: programs[0]: \"zzzzzzzzzz\" is not a binary of the guest workspace's package \"programs\". Its binaries: checker, rng, logsrv"],
        );
        let refused = names.check(&case("[\"logsrv\"]", "kernel_features = [\"fast\"]"));
        assert!(refused[0].contains("kernel_features[0]: \"fast\" is not a feature of the guest workspace's package \"kernel\". Its features: none"), "{refused:?}");
    }
}
