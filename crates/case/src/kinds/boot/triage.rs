//! A boot case's `[triage]`: which rules read its console for crash reports (`rules`),
//! and which kinds of crash fail the boot (`allow` takes kinds out of the default ones,
//! `forbid` adds some).

use super::raw::{RawTriage, TRIAGE};
use crate::common::{did_you_mean, nearest, quoted, Ctx, Refusals};
use crate::fields::check_table;
use crate::{CaseError, Triage, TriageRules, CRASH_KINDS};

/// The names `rules` takes.
const RULES: &[&str] = &["linux", "xv6", "reference", "generic", "off"];

/// Stage one: the fields of `[triage]` checked in words.
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Result<(), CaseError> {
    let Some(toml::Value::Table(triage)) = table.get("triage") else { return Ok(()) };
    check_table(ctx, triage, TRIAGE, "triage.", "[triage]", &|_| None)
}

/// Stage two: every refusal of `[triage]`'s fields, in the order of [`TRIAGE`].
pub(crate) fn triage(ctx: &Ctx, raw: Option<&RawTriage>, allow_panic: bool) -> Result<Triage, CaseError> {
    let mut triage = Triage::default();
    if allow_panic {
        // A case that expects a panic: its PANIC line is allowed, and so is its report.
        triage.fatal.retain(|kind| kind != "panic");
    }
    let Some(raw) = raw else { return Ok(triage) };
    let mut refused = Refusals::new();
    match raw.rules.as_deref() {
        None => {}
        Some("linux") => triage.rules = Some(TriageRules::Linux),
        Some("xv6") => triage.rules = Some(TriageRules::Xv6),
        Some("reference") => triage.rules = Some(TriageRules::Reference),
        Some("generic") => triage.rules = Some(TriageRules::Generic),
        Some("off") => triage.off = true,
        Some(other) => refused.push(ctx.err("triage.rules", not_one_of(other, RULES))),
    }
    let allow = kinds(ctx, &mut refused, "allow", raw.allow.as_deref());
    let forbid = kinds(ctx, &mut refused, "forbid", raw.forbid.as_deref());
    for (index, kind) in forbid.iter().enumerate() {
        if allow.contains(kind) {
            refused.push(ctx.err(
                format!("triage.forbid[{index}]"),
                format!("{kind:?} is in triage.allow too: a kind either fails the boot or does not"),
            ));
        }
    }
    if triage.off && (raw.allow.is_some() || raw.forbid.is_some()) {
        refused.push(ctx.err("triage.rules", "\"off\" reads no crash: allow and forbid would have nothing to act on"));
    }
    triage.fatal.retain(|kind| !allow.contains(kind));
    for kind in forbid {
        if !triage.fatal.contains(&kind) {
            triage.fatal.push(kind);
        }
    }
    // In CRASH_KINDS's order, whatever order the file named them in.
    triage.fatal.sort_by_key(|kind| CRASH_KINDS.iter().position(|k| k == kind));
    refused.end(ctx, Some(triage))
}

/// The kinds of a list, each one of [`CRASH_KINDS`]; a refused one is left out.
fn kinds(ctx: &Ctx, refused: &mut Refusals, field: &str, names: Option<&[String]>) -> Vec<String> {
    let mut kept = Vec::new();
    for (index, name) in names.unwrap_or(&[]).iter().enumerate() {
        if CRASH_KINDS.contains(&name.as_str()) {
            kept.push(name.clone());
        } else {
            refused.push(ctx.err(format!("triage.{field}[{index}]"), not_one_of(name, CRASH_KINDS)));
        }
    }
    kept
}

fn not_one_of(name: &str, names: &[&str]) -> String {
    let near = did_you_mean(&nearest(name, names.iter().copied()));
    match near.is_empty() {
        true => format!("{name:?} is not accepted: one of {}", quoted(names)),
        false => format!("{name:?} is not accepted; {near} One of {}", quoted(names)),
    }
}
