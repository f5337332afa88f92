//! Kind "scripts": oracle scripts, after their tools are checked and their build commands
//! run. Its raw form and its list of fields sit side by side; a test holds them together
//! (`kinds::tests`).

use serde::Deserialize;

use crate::common::{below_root, names, Ctx, Refusals, HOST_TIMEOUT_SECS};
use crate::fields::{field, Field, Shape, TIMEOUT_SECS, TOOLS};
use crate::{CaseError, ScriptsCase};

/// The fields of kind "scripts" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    TOOLS,
    field("build", Shape::StrList, "a list of shell commands"),
    field("scripts", Shape::StrList, "a list of scripts' paths"),
    TIMEOUT_SECS,
];

/// Kind "scripts" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScripts {
    pub tools: Option<Vec<String>>,
    pub build: Option<Vec<String>>,
    pub scripts: Option<Vec<String>>,
    pub timeout_secs: Option<f64>,
}

/// Stage two: every field's meaning checked, the typed case made.
/// Every refusal kept, in the file's order ([`Refusals`]).
pub(crate) fn validate(ctx: &Ctx, raw: RawScripts) -> Result<ScriptsCase, CaseError> {
    let mut refused = Refusals::new();
    let tools = refused.keep(names(ctx, "tools", raw.tools.as_deref().unwrap_or(&[]), "a program name on the path"));
    let build = raw.build.clone().unwrap_or_default();
    for (index, command) in build.iter().enumerate() {
        if command.trim().is_empty() {
            refused.push(ctx.err(format!("build[{index}]"), "empty: a shell command"));
        }
    }
    let scripts = raw.scripts.clone().unwrap_or_default();
    if scripts.is_empty() {
        refused.push(ctx.err("scripts", "required: the scripts to run, in order, each judged by its exit status"));
    }
    for (index, script) in scripts.iter().enumerate() {
        refused.keep(below_root(ctx, &format!("scripts[{index}]"), script));
    }
    let timeout = refused.keep(ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(HOST_TIMEOUT_SECS)));
    refused.end(ctx, tools.zip(timeout).map(|(tools, timeout)| ScriptsCase { tools, build, scripts, timeout }))
}
