//! Kind "build": a binary of the guest workspace built for each width, and scanned. Its
//! raw form and its list of fields sit side by side; a test holds them together
//! (`kinds::tests`).

use serde::Deserialize;

use crate::common::{arch_list, features, is_feature_name, Ctx, Refusals};
use crate::fields::{field, Field, Shape, ARCH, FEATURES};
use crate::{BuildCase, CaseError};

/// The fields of kind "build" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    ARCH,
    field("package", Shape::Str, "a package of the guest workspace"),
    field("bin", Shape::Str, "a binary's name"),
    field("profile", Shape::Str, "\"release\" or \"checked\""),
    FEATURES,
    field("forbid_in_binary", Shape::StrList, "a list of byte strings, such as [\"password\"]"),
];

/// Kind "build" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBuild {
    pub arch: Option<Vec<String>>,
    pub package: Option<String>,
    pub bin: Option<String>,
    pub profile: Option<String>,
    pub features: Option<Vec<String>>,
    pub forbid_in_binary: Option<Vec<String>>,
}

/// Stage two: every field's meaning checked, the typed case made.
/// Every refusal kept, in the file's order ([`Refusals`]).
pub(crate) fn validate(ctx: &Ctx, raw: RawBuild) -> Result<BuildCase, CaseError> {
    let mut refused = Refusals::new();
    let arch = refused.keep(arch_list(ctx, raw.arch.as_ref()));
    if let Some(index) = arch.as_ref().and_then(|arch| arch.iter().position(|a| !a.has_reference_guest())) {
        let name = arch.as_ref().map_or("", |arch| arch[index].name());
        refused.push(ctx.err(
            format!("arch[{index}]"),
            format!("{name:?} is not accepted here: the guest workspace builds for \"rv64\" and \"rv32\" only"),
        ));
    }
    let package = refused.keep(
        raw.package
            .clone()
            .filter(|p| is_feature_name(p))
            .ok_or_else(|| ctx.err("package", "required: a package of the guest workspace")),
    );
    let bin = refused.keep(
        raw.bin.clone().filter(|b| is_feature_name(b)).ok_or_else(|| ctx.err("bin", "required: the binary to build")),
    );
    let profile = raw.profile.clone().unwrap_or_else(|| "release".into());
    if profile != "release" && profile != "checked" {
        refused.push(ctx.err("profile", format!("{profile:?} is not accepted: \"release\" or \"checked\"")));
    }
    let features = refused.keep(features(ctx, raw.features.as_ref()));
    let forbid_in_binary = raw.forbid_in_binary.clone().unwrap_or_default();
    for (index, needle) in forbid_in_binary.iter().enumerate() {
        if needle.is_empty() {
            refused
                .push(ctx.err(format!("forbid_in_binary[{index}]"), "empty: a byte string the binary must not hold"));
        }
    }
    let made = || {
        Some(BuildCase { arch: arch?, package: package?, bin: bin?, profile, features: features?, forbid_in_binary })
    };
    refused.end(ctx, made())
}
