//! Stage two for the kinds that run on the host: host-tests, build, scripts and gate.

use std::path::{Component, Path, PathBuf};

use crate::raw::RawCase;
use crate::validate::{arch_list, is_feature_name, path_field, Ctx};
use crate::{BuildCase, CaseError, Fanout, Gate, GateCase, HostTestsCase, ScriptsCase};

/// The fields each kind takes besides description, kind, whole_run and must_fail.
pub(crate) fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "boot" => &[
            "arch",
            "programs",
            "smp",
            "keep_smp",
            "timeout_secs_smp",
            "memory_mib",
            "timeout_secs",
            "icount",
            "qemu_seed",
            "rtc_base",
            "repeat_exactly",
            "kernel_features",
            "debug_assertions",
            "expect",
            "forbid",
            "poweroff",
            "poweroff_status",
            "input",
            "firmware",
            "guest",
            "reporter",
            "allow_panic",
            "tamper_bundle",
            "sign_bare_archive",
            "short_initrd",
            "device_tree",
            "distinct_across_boots",
            "distinct",
            "file",
        ],
        "host-tests" => &[
            "workspace",
            "features",
            "tools",
            "fanout",
            "values",
            "env",
            "test",
            "tests",
            "filter",
            "skip",
            "vars",
            "cores",
            "timeout_secs",
            "late",
        ],
        "build" => &["arch", "package", "bin", "profile", "features", "forbid_in_binary"],
        "scripts" => &["tools", "build", "scripts", "timeout_secs"],
        "gate" => &["gate", "tree", "config"],
        _ => &[],
    }
}

/// A host job's deadline unless the case sets one: ten minutes.
const HOST_TIMEOUT_SECS: f64 = 600.0;
/// The most cores one job may ask for.
const CORES_MAX: i64 = 256;

/// A relative path that stays below the workspace root.
fn below_root(ctx: &Ctx, field: &str, value: &str) -> Result<PathBuf, CaseError> {
    let path = path_field(ctx, field, value)?;
    let escapes =
        path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)));
    if escapes {
        return Err(ctx.err(field, format!("{value:?} is not accepted: a relative path below the workspace root")));
    }
    Ok(path)
}

fn names(ctx: &Ctx, field: &str, list: &[String], what: &str) -> Result<Vec<String>, CaseError> {
    for (index, item) in list.iter().enumerate() {
        if item.trim().is_empty() || item.chars().any(char::is_whitespace) {
            return Err(ctx.err(format!("{field}[{index}]"), format!("{item:?} is not accepted: {what}")));
        }
        if list[..index].contains(item) {
            return Err(ctx.err(format!("{field}[{index}]"), format!("{item:?} is named twice")));
        }
    }
    Ok(list.to_vec())
}

fn features(ctx: &Ctx, list: Option<&Vec<String>>) -> Result<Vec<String>, CaseError> {
    let list = list.cloned().unwrap_or_default();
    for (index, feature) in list.iter().enumerate() {
        if !is_feature_name(feature) {
            return Err(
                ctx.err(format!("features[{index}]"), format!("{feature:?} is not accepted: a Cargo feature name"))
            );
        }
    }
    Ok(list)
}

pub(crate) fn host_tests(ctx: &Ctx, raw: &RawCase) -> Result<HostTestsCase, CaseError> {
    let workspace = below_root(ctx, "workspace", raw.workspace.as_deref().unwrap_or("."))?;
    let tools = names(ctx, "tools", raw.tools.as_deref().unwrap_or(&[]), "a program name on the path")?;
    // The fields that belong to one fanout or another, and whether the case sets each.
    let fanout_fields = [
        ("values", raw.values.is_some()),
        ("env", raw.env.is_some()),
        ("test", raw.test.is_some()),
        ("tests", raw.tests.is_some()),
        ("filter", raw.filter.is_some()),
        ("skip", raw.skip.is_some()),
    ];
    let fanout = match raw.fanout.as_deref() {
        None => {
            for (field, set) in fanout_fields.into_iter().chain([("late", raw.late.is_some())]) {
                if set {
                    return Err(ctx.err(field, "only with a fanout (\"value\", \"file\" or \"test\")"));
                }
            }
            None
        }
        Some(mode) => {
            let only = |allowed: &[&str]| -> Result<(), CaseError> {
                for (field, set) in fanout_fields {
                    if set && !allowed.contains(&field) {
                        return Err(ctx.err(
                            field,
                            format!("not a field of fanout = {mode:?}; its fields: {}", allowed.join(", ")),
                        ));
                    }
                }
                Ok(())
            };
            match mode {
                "value" => {
                    only(&["values", "env", "test"])?;
                    let values = raw.values.clone().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                        ctx.err(
                            "values",
                            "required with fanout = \"value\": a shell command printing one value per line",
                        )
                    })?;
                    let env = raw.env.clone().filter(|e| is_env_name(e)).ok_or_else(|| {
                        ctx.err("env", "required with fanout = \"value\": the variable each job's value is passed in")
                    })?;
                    let test = raw.test.clone().filter(|t| is_feature_name(t)).ok_or_else(|| {
                        ctx.err("test", "required with fanout = \"value\": the test target every job runs")
                    })?;
                    Some(Fanout::Value { values, env, test })
                }
                "file" => {
                    only(&["tests"])?;
                    let tests = names(ctx, "tests", raw.tests.as_deref().unwrap_or(&[]), "a test target name")?;
                    if tests.is_empty() {
                        return Err(ctx.err("tests", "required with fanout = \"file\": the test targets, one job each"));
                    }
                    Some(Fanout::File { tests })
                }
                "test" => {
                    only(&["filter", "skip"])?;
                    let filter = raw.filter.as_deref().map(|f| ctx.regex("filter".into(), f)).transpose()?;
                    let skip = names(ctx, "skip", raw.skip.as_deref().unwrap_or(&[]), "a test's full name")?;
                    Some(Fanout::Test { filter, skip })
                }
                other => {
                    return Err(ctx.err("fanout", format!("{other:?} is not accepted: \"value\", \"file\" or \"test\"")))
                }
            }
        }
    };
    let mut vars = Vec::new();
    for (key, value) in raw.vars.clone().unwrap_or_default() {
        if !is_env_name(&key) {
            return Err(ctx.err(format!("vars.{key}"), "not accepted: an environment variable name (A-Z, 0-9, _)"));
        }
        vars.push((key, value));
    }
    let cores = match raw.cores.unwrap_or(1) {
        n @ 1..=CORES_MAX => n as u32,
        n => return Err(ctx.err("cores", format!("{n} is not accepted: 1 to {CORES_MAX}"))),
    };
    let late = names(ctx, "late", raw.late.as_deref().unwrap_or(&[]), "a job's value or test name")?;
    Ok(HostTestsCase {
        workspace,
        features: features(ctx, raw.features.as_ref())?,
        tools,
        fanout,
        vars,
        cores,
        timeout: ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(HOST_TIMEOUT_SECS))?,
        late,
    })
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

pub(crate) fn build(ctx: &Ctx, raw: &RawCase) -> Result<BuildCase, CaseError> {
    let arch = arch_list(ctx, raw.arch.as_ref())?;
    let package = raw
        .package
        .clone()
        .filter(|p| is_feature_name(p))
        .ok_or_else(|| ctx.err("package", "required: a package of the guest workspace"))?;
    let bin = raw
        .bin
        .clone()
        .filter(|b| is_feature_name(b))
        .ok_or_else(|| ctx.err("bin", "required: the binary to build"))?;
    let profile = raw.profile.clone().unwrap_or_else(|| "release".into());
    if profile != "release" && profile != "checked" {
        return Err(ctx.err("profile", format!("{profile:?} is not accepted: \"release\" or \"checked\"")));
    }
    let forbid_in_binary = raw.forbid_in_binary.clone().unwrap_or_default();
    for (index, needle) in forbid_in_binary.iter().enumerate() {
        if needle.is_empty() {
            return Err(ctx.err(format!("forbid_in_binary[{index}]"), "empty: a byte string the binary must not hold"));
        }
    }
    Ok(BuildCase { arch, package, bin, profile, features: features(ctx, raw.features.as_ref())?, forbid_in_binary })
}

pub(crate) fn scripts(ctx: &Ctx, raw: &RawCase) -> Result<ScriptsCase, CaseError> {
    let tools = names(ctx, "tools", raw.tools.as_deref().unwrap_or(&[]), "a program name on the path")?;
    let build = raw.build.clone().unwrap_or_default();
    for (index, command) in build.iter().enumerate() {
        if command.trim().is_empty() {
            return Err(ctx.err(format!("build[{index}]"), "empty: a shell command"));
        }
    }
    let scripts = raw.scripts.clone().unwrap_or_default();
    if scripts.is_empty() {
        return Err(ctx.err("scripts", "required: the scripts to run, in order, each judged by its exit status"));
    }
    for (index, script) in scripts.iter().enumerate() {
        below_root(ctx, &format!("scripts[{index}]"), script)?;
    }
    let timeout = ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(HOST_TIMEOUT_SECS))?;
    Ok(ScriptsCase { tools, build, scripts, timeout })
}

pub(crate) fn gate(ctx: &Ctx, raw: &RawCase) -> Result<GateCase, CaseError> {
    let names: Vec<&str> = Gate::ALL.iter().map(|g| g.name()).collect();
    let name = raw.gate.as_deref().ok_or_else(|| ctx.err("gate", format!("required: one of {}", names.join(", "))))?;
    let gate = Gate::ALL
        .into_iter()
        .find(|g| g.name() == name)
        .ok_or_else(|| ctx.err("gate", format!("{name:?} is not accepted: one of {}", names.join(", "))))?;
    let tree = below_root(ctx, "tree", raw.tree.as_deref().unwrap_or("."))?;
    let config = match raw.config.as_deref() {
        Some(config) => below_root(ctx, "config", config)?,
        None => Path::new(gate.default_config()).to_path_buf(),
    };
    Ok(GateCase { gate, tree, config })
}
