//! Kind "gate": a source gate over a tree. Its raw form and its list of fields sit side by
//! side; a test holds them together (`kinds::tests`).

use std::path::Path;

use serde::Deserialize;

use crate::common::{below_root, Ctx};
use crate::fields::{field, Field, Shape, PATH};
use crate::{CaseError, Gate, GateCase};

/// The fields of kind "gate" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    field("gate", Shape::Str, "a gate's name, such as \"no-cruft\""),
    field("tree", Shape::Str, PATH),
    field("config", Shape::Str, "a path, relative to tree"),
];

/// Kind "gate" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGate {
    pub gate: Option<String>,
    pub tree: Option<String>,
    pub config: Option<String>,
}

/// Stage two: every field's meaning checked, the typed case made.
pub(crate) fn validate(ctx: &Ctx, raw: RawGate) -> Result<GateCase, CaseError> {
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
