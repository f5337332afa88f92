//! The kinds of case, each in a module of its own holding its raw form (serde), its list
//! of fields in words (checked before serde) and its stage two (the typed case):
//! `boot`, `host_tests`, `build`, `scripts`, `gate`, `ssh_loopback`. A kind's module
//! depends on `common`, `fields`, `session` (the `[[session]]` tables two kinds share) and
//! the crate's types alone, never on another kind's nor on `validate` (which reads the
//! common fields, then calls [`read`] and [`validate`] here).

pub(crate) mod boot;
mod build;
mod gate;
mod host_tests;
mod scripts;
mod ssh_loopback;
pub use boot::OVERLAY_FILE_BYTES_MAX;

use crate::common::Ctx;
use crate::fields::Field;
use crate::{CaseError, Kind};

/// Every kind, in the order messages name them, with the fields it takes besides the
/// common ones.
pub(crate) const KINDS: [(&str, &[Field]); 6] = [
    ("boot", boot::FIELDS),
    ("host-tests", host_tests::FIELDS),
    ("build", build::FIELDS),
    ("scripts", scripts::FIELDS),
    ("gate", gate::FIELDS),
    ("ssh-loopback", ssh_loopback::FIELDS),
];

/// The fields `kind` takes besides the common ones (none for a kind that is not one).
pub(crate) fn fields_of(kind: &str) -> &'static [Field] {
    KINDS.iter().find(|(name, _)| *name == kind).map(|(_, fields)| *fields).unwrap_or(&[])
}

/// A case's kind-specific fields as serde read them.
pub(crate) enum RawKind {
    Boot(Box<boot::raw::RawBoot>),
    HostTests(host_tests::RawHostTests),
    Build(build::RawBuild),
    Scripts(scripts::RawScripts),
    Gate(gate::RawGate),
    SshLoopback(ssh_loopback::RawSshLoopback),
}

/// Stage one's end for a case of kind `kind` (one of [`KINDS`]) whose top-level names and
/// shapes are checked: its inner tables checked in words, then `table` (the case without
/// the common fields) read by serde.
pub(crate) fn read(ctx: &Ctx, kind: &str, table: toml::Table) -> Result<RawKind, CaseError> {
    Ok(match kind {
        "boot" => RawKind::Boot(Box::new(boot::read(ctx, table)?)),
        "host-tests" => RawKind::HostTests(ctx.read(table)?),
        "build" => RawKind::Build(ctx.read(table)?),
        "scripts" => RawKind::Scripts(ctx.read(table)?),
        "gate" => RawKind::Gate(ctx.read(table)?),
        "ssh-loopback" => RawKind::SshLoopback(ssh_loopback::read(ctx, table)?),
        other => unreachable!("kind {other:?} is checked against KINDS first"),
    })
}

/// The refusals of the tables within a case of `kind` (stage one below the top level),
/// every table's, so that they come with the top level's.
pub(crate) fn check_nested(ctx: &Ctx, kind: &str, table: &toml::Table) -> Vec<CaseError> {
    match kind {
        "boot" => boot::check(ctx, table),
        "ssh-loopback" => crate::session::check(ctx, table).err().into_iter().collect(),
        _ => Vec::new(),
    }
}

/// Stage two: the kind's meaning checked, its typed form made. `self_check`: the case has
/// `must_fail` (a common field, which a kind's own fields may need).
pub(crate) fn validate(ctx: &Ctx, raw: RawKind, self_check: bool) -> Result<Kind, CaseError> {
    Ok(match raw {
        RawKind::Boot(raw) => Kind::Boot(Box::new(boot::validate(ctx, *raw, self_check)?)),
        RawKind::HostTests(raw) => Kind::HostTests(host_tests::validate(ctx, raw)?),
        RawKind::Build(raw) => Kind::Build(build::validate(ctx, raw)?),
        RawKind::Scripts(raw) => Kind::Scripts(scripts::validate(ctx, raw)?),
        RawKind::Gate(raw) => Kind::Gate(gate::validate(ctx, raw)?),
        RawKind::SshLoopback(raw) => Kind::SshLoopback(ssh_loopback::validate(ctx, raw)?),
    })
}

#[cfg(test)]
mod tests {
    use super::boot::raw::{
        RawBoot, RawDial, RawDisk, RawFlip, RawGuest, RawIdle, RawInput, RawNet, RawOverlay, RawPeer, RawPoke,
        RawPostCheck, RawTriage, DIAL, DISK, FLIP, GUEST, IDLE, INPUT, NET, OVERLAY, PEER, POKE, POST_CHECK, TRIAGE,
    };
    use super::*;
    use crate::fields::{names, serde_names};
    use crate::session::{RawSession, RawStep, SESSION, STEP};

    /// Each raw struct and its list of fields name the same fields in the same order, so
    /// a field added to one and not the other fails here (and a field is never accepted
    /// by the check in words and then refused by serde, or the other way round).
    #[test]
    fn each_raw_struct_and_its_list_of_fields_agree() {
        let pairs: [(&str, &[Field], &[&str]); 20] = [
            ("boot", boot::FIELDS, serde_names::<RawBoot>()),
            ("host-tests", host_tests::FIELDS, serde_names::<host_tests::RawHostTests>()),
            ("build", build::FIELDS, serde_names::<build::RawBuild>()),
            ("scripts", scripts::FIELDS, serde_names::<scripts::RawScripts>()),
            ("gate", gate::FIELDS, serde_names::<gate::RawGate>()),
            ("ssh-loopback", ssh_loopback::FIELDS, serde_names::<ssh_loopback::RawSshLoopback>()),
            ("[guest]", GUEST, serde_names::<RawGuest>()),
            ("[idle]", IDLE, serde_names::<RawIdle>()),
            ("post_check", POST_CHECK, serde_names::<RawPostCheck>()),
            ("[triage]", TRIAGE, serde_names::<RawTriage>()),
            ("guest.overlay", OVERLAY, serde_names::<RawOverlay>()),
            ("[[input]]", INPUT, serde_names::<RawInput>()),
            ("[disk]", DISK, serde_names::<RawDisk>()),
            ("disk.flip", FLIP, serde_names::<RawFlip>()),
            ("[net]", NET, serde_names::<RawNet>()),
            ("[[net.peer]]", PEER, serde_names::<RawPeer>()),
            ("[[net.dial]]", DIAL, serde_names::<RawDial>()),
            ("[net.poke]", POKE, serde_names::<RawPoke>()),
            ("[[session]]", SESSION, serde_names::<RawSession>()),
            ("a step", STEP, serde_names::<RawStep>()),
        ];
        for (whose, fields, serde) in pairs {
            assert_eq!(names(fields), serde, "{whose}: the list of fields and the raw struct differ");
        }
        for ((kind, fields), (whose, listed, _)) in KINDS.iter().zip(&pairs) {
            assert_eq!((kind, names(fields)), (whose, names(listed)), "KINDS names each kind's own fields");
        }
    }

    /// A field that two kinds take means the same in both: one shape, one text.
    #[test]
    fn a_field_of_two_kinds_reads_alike_in_both() {
        for (kind, fields) in KINDS {
            for field in fields {
                for (other, theirs) in KINDS {
                    if let Some(same) = theirs.iter().find(|f| f.name == field.name) {
                        assert_eq!(
                            (field.shape, field.accepted),
                            (same.shape, same.accepted),
                            "{} in {kind} and {other}",
                            field.name
                        );
                    }
                }
            }
        }
    }
}
