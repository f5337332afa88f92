//! Kind "host-tests": host tests of a cargo workspace, built once, then run as one job or
//! fanned out. Its raw form and its list of fields sit side by side; a test holds them
//! together (`kinds::tests`).

use serde::Deserialize;

use crate::common::{below_root, features, is_feature_name, names, Ctx, Refusals, HOST_TIMEOUT_SECS};
use crate::fields::{field, Field, Shape, BOOL, FEATURES, PATH, TIMEOUT_SECS, TOOLS};
use crate::{CaseError, Fanout, HostTestsCase};

/// The fields of kind "host-tests" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    field("workspace", Shape::Str, PATH),
    FEATURES,
    TOOLS,
    field("fanout", Shape::Str, "\"value\", \"file\" or \"test\""),
    field("values", Shape::Str, "a shell command printing one value per line"),
    field("env", Shape::Str, "an environment variable name, such as \"CASE\""),
    field("test", Shape::Str, "a test target's name"),
    field("tests", Shape::StrList, "a list of test targets' names"),
    field("filter", Shape::Str, "a regex, as a string"),
    field("skip", Shape::StrList, "a list of tests' full names"),
    field("vars", Shape::StrMap, "a table of strings, such as { RUST_LOG = \"debug\" }"),
    field("cores", Shape::Integer, "a whole number of cores, such as 2"),
    TIMEOUT_SECS,
    field("late", Shape::StrList, "a list of jobs' values or test names"),
    field("miri", Shape::Bool, BOOL),
];

/// Kind "host-tests" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHostTests {
    pub workspace: Option<String>,
    pub features: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub fanout: Option<String>,
    pub values: Option<String>,
    pub env: Option<String>,
    pub test: Option<String>,
    pub tests: Option<Vec<String>>,
    pub filter: Option<String>,
    pub skip: Option<Vec<String>>,
    pub vars: Option<std::collections::BTreeMap<String, String>>,
    pub cores: Option<i64>,
    pub timeout_secs: Option<f64>,
    pub late: Option<Vec<String>>,
    pub miri: Option<bool>,
}

/// The most cores one job may ask for.
const CORES_MAX: i64 = 256;

/// Stage two: every field's meaning checked, the typed case made.
/// Every refusal kept, in the file's order ([`Refusals`]); a fanout that is refused
/// leaves its fields unchecked (what they mean is the fanout's), and `miri` with it.
pub(crate) fn validate(ctx: &Ctx, raw: RawHostTests) -> Result<HostTestsCase, CaseError> {
    let mut refused = Refusals::new();
    let workspace = refused.keep(below_root(ctx, "workspace", raw.workspace.as_deref().unwrap_or(".")));
    let tools = refused.keep(names(ctx, "tools", raw.tools.as_deref().unwrap_or(&[]), "a program name on the path"));
    let fanout = refused.keep(fanout(ctx, &raw));
    let mut vars = Vec::new();
    for (key, value) in raw.vars.clone().unwrap_or_default() {
        if !is_env_name(&key) {
            refused.push(ctx.err(format!("vars.{key}"), "not accepted: an environment variable name (A-Z, 0-9, _)"));
        }
        vars.push((key, value));
    }
    let cores = refused.keep(match raw.cores.unwrap_or(1) {
        n @ 1..=CORES_MAX => Ok(n as u32),
        n => Err(ctx.err("cores", format!("{n} is not accepted: 1 to {CORES_MAX}"))),
    });
    let late = refused.keep(names(ctx, "late", raw.late.as_deref().unwrap_or(&[]), "a job's value or test name"));
    let miri = raw.miri.unwrap_or(false);
    if miri && matches!(fanout, Some(Some(Fanout::Value { .. } | Fanout::Test { .. }))) {
        refused.push(ctx.err(
            "miri",
            "true only without a fanout or with fanout = \"file\": under Miri a job is `cargo miri test` of one test target, not a test binary run with a value or a test name",
        ));
    }
    let features = refused.keep(features(ctx, raw.features.as_ref()));
    let timeout = refused.keep(ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(HOST_TIMEOUT_SECS)));
    let made = || {
        Some(HostTestsCase {
            workspace: workspace?,
            features: features?,
            tools: tools?,
            fanout: fanout?,
            vars,
            cores: cores?,
            timeout: timeout?,
            late: late?,
            miri,
        })
    };
    refused.end(ctx, made())
}

/// `fanout` and the fields of the fanout it names, every refusal of them.
fn fanout(ctx: &Ctx, raw: &RawHostTests) -> Result<Option<Fanout>, CaseError> {
    let mut refused = Refusals::new();
    // The fields that belong to one fanout or another, and whether the case sets each.
    let fanout_fields = [
        ("values", raw.values.is_some()),
        ("env", raw.env.is_some()),
        ("test", raw.test.is_some()),
        ("tests", raw.tests.is_some()),
        ("filter", raw.filter.is_some()),
        ("skip", raw.skip.is_some()),
    ];
    let Some(mode) = raw.fanout.as_deref() else {
        for (field, set) in fanout_fields.into_iter().chain([("late", raw.late.is_some())]) {
            if set {
                refused.push(ctx.err(field, "only with a fanout (\"value\", \"file\" or \"test\")"));
            }
        }
        return refused.end(ctx, Some(None));
    };
    let mut only = |allowed: &[&str]| {
        for (field, set) in fanout_fields {
            if set && !allowed.contains(&field) {
                refused.push(
                    ctx.err(field, format!("not a field of fanout = {mode:?}; its fields: {}", allowed.join(", "))),
                );
            }
        }
    };
    let fanout = match mode {
        "value" => {
            only(&["values", "env", "test"]);
            let values = refused.keep(raw.values.clone().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                ctx.err("values", "required with fanout = \"value\": a shell command printing one value per line")
            }));
            let env = refused.keep(raw.env.clone().filter(|e| is_env_name(e)).ok_or_else(|| {
                ctx.err("env", "required with fanout = \"value\": the variable each job's value is passed in")
            }));
            let test =
                refused.keep(raw.test.clone().filter(|t| is_feature_name(t)).ok_or_else(|| {
                    ctx.err("test", "required with fanout = \"value\": the test target every job runs")
                }));
            let made = || Some(Fanout::Value { values: values?, env: env?, test: test? });
            made()
        }
        "file" => {
            only(&["tests"]);
            let tests = refused.keep(names(ctx, "tests", raw.tests.as_deref().unwrap_or(&[]), "a test target name"));
            if tests.as_ref().is_some_and(Vec::is_empty) {
                refused.push(ctx.err("tests", "required with fanout = \"file\": the test targets, one job each"));
            }
            tests.map(|tests| Fanout::File { tests })
        }
        "test" => {
            only(&["filter", "skip"]);
            let filter = refused.keep(raw.filter.as_deref().map(|f| ctx.regex("filter".into(), f)).transpose());
            let skip = refused.keep(names(ctx, "skip", raw.skip.as_deref().unwrap_or(&[]), "a test's full name"));
            filter.zip(skip).map(|(filter, skip)| Fanout::Test { filter, skip })
        }
        other => {
            refused.push(ctx.err("fanout", format!("{other:?} is not accepted: \"value\", \"file\" or \"test\"")));
            None
        }
    };
    refused.end(ctx, fanout.map(Some))
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
