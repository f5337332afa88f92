//! Kind "gate": a source gate over a tree. Its raw form and its list of fields sit side by
//! side; a test holds them together (`kinds::tests`).

use std::path::Path;

use serde::Deserialize;

use crate::common::{below_root, Ctx, Refusals};
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
/// Every refusal kept, in the file's order ([`Refusals`]).
pub(crate) fn validate(ctx: &Ctx, raw: RawGate) -> Result<GateCase, CaseError> {
    let mut refused = Refusals::new();
    let names: Vec<&str> = Gate::ALL.iter().map(|g| g.name()).collect();
    let gate = refused.keep(match raw.gate.as_deref() {
        None => Err(ctx.err("gate", format!("required: one of {}", names.join(", ")))),
        Some(name) => Gate::ALL
            .into_iter()
            .find(|g| g.name() == name)
            .ok_or_else(|| ctx.err("gate", format!("{name:?} is not accepted: one of {}", names.join(", ")))),
    });
    let tree = refused.keep(below_root(ctx, "tree", raw.tree.as_deref().unwrap_or(".")));
    // Without a gate, only a config the case names is checked (the default is the gate's).
    let config = match raw.config.as_deref() {
        Some(config) => refused.keep(below_root(ctx, "config", config)),
        None => gate.map(|gate| Path::new(gate.default_config()).to_path_buf()),
    };
    let made = || Some(GateCase { gate: gate?, tree: tree?, config: config? });
    refused.end(ctx, made())
}
