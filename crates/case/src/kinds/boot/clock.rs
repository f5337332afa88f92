//! A boot case's clock: guest time (QEMU's `-icount`) unless the case says why not.
//!
//! Under icount the guest's time is a count of its instructions, so a boot repeats
//! whatever else runs on the host, and a pinned seed replays it byte for byte. A case
//! stays on the host's clock only with `clock = "host"` and a `clock_reason` from
//! [`HostReason`]'s short list; `"unexplained"` (it fails under icount for a reason not
//! yet understood) needs a `clock_note` saying what was seen.

use super::raw::RawBoot;
use crate::common::{did_you_mean, nearest, Ctx, Refusals};
use crate::HostClock;

/// The icount a case in guest time runs under unless it names its own: 2^3 ns an
/// instruction, and an idle guest's time jumps to its next timer at once (sleep=off).
pub const DEFAULT_ICOUNT: &str = "shift=3,sleep=off";

/// The same with sleep on, for a boot with typed input: QEMU's record/replay, which
/// the bench records such a boot under, never delivered typed input under sleep=off.
pub const DEFAULT_ICOUNT_TYPED: &str = "shift=3";

/// Why a case runs on the host's clock: each is a reason icount cannot serve it.
pub const HOST_REASONS: &[(&str, &str)] = &[
    ("disk", "a disk whose completions come from the host's I/O"),
    ("host-sockets", "the host's sockets: a network peer, a forwarded port or an SSH session"),
    ("typed-input", "typed input the width's UART loses under icount"),
    ("host-time", "what it measures is the host's time (an idle window, host CPU, microseconds)"),
    ("mttcg", "harts that must run at once on host threads (multi-threaded TCG; icount runs them in turn)"),
    ("kvm", "the host's KVM, which counts no instructions"),
    ("unexplained", "it fails under icount for a reason not yet understood (clock_note says what was seen)"),
];

/// `clock`, `clock_reason`, `clock_note` and `icount` read together: the icount string
/// the boot runs under (None: the host's clock) and, on the host's clock, why.
pub(crate) fn clock(ctx: &Ctx, raw: &RawBoot, refused: &mut Refusals) -> (Option<String>, Option<HostClock>) {
    let reasons = || HOST_REASONS.iter().map(|(name, _)| format!("{name:?}")).collect::<Vec<_>>().join(", ");
    match raw.clock.as_deref() {
        None | Some("guest") => {
            if raw.clock_reason.is_some() || raw.clock_note.is_some() {
                let field = if raw.clock_reason.is_some() { "clock_reason" } else { "clock_note" };
                refused.push(ctx.err(field, "only with clock = \"host\": it says why the case leaves guest time"));
            }
            let default = if raw.input.as_deref().is_some_and(|inputs| !inputs.is_empty()) {
                DEFAULT_ICOUNT_TYPED
            } else {
                DEFAULT_ICOUNT
            };
            (Some(raw.icount.clone().unwrap_or_else(|| default.to_string())), None)
        }
        Some("host") => {
            if raw.icount.is_some() {
                refused.push(ctx.err("icount", "not with clock = \"host\": icount is guest time"));
            }
            let reason = match raw.clock_reason.as_deref() {
                None => {
                    refused.push(ctx.err(
                        "clock_reason",
                        format!("missing: clock = \"host\" needs a reason, one of {}", reasons()),
                    ));
                    None
                }
                Some(reason) if HOST_REASONS.iter().any(|(name, _)| *name == reason) => Some(reason.to_string()),
                Some(other) => {
                    let names: Vec<&str> = HOST_REASONS.iter().map(|(name, _)| *name).collect();
                    let hint = did_you_mean(&nearest(other, names.iter().copied()));
                    let hint = if hint.is_empty() { String::new() } else { format!(" ({hint})") };
                    refused.push(
                        ctx.err("clock_reason", format!("{other:?} is not accepted{hint}: one of {}", reasons())),
                    );
                    None
                }
            };
            let note = raw.clock_note.clone().filter(|note| !note.trim().is_empty());
            if reason.as_deref() == Some("unexplained") && note.is_none() {
                refused.push(ctx.err(
                    "clock_note",
                    "missing: clock_reason = \"unexplained\" needs a note saying what was seen under icount",
                ));
            }
            (None, reason.map(|reason| HostClock { reason, note }))
        }
        Some(other) => {
            refused.push(ctx.err(
                "clock",
                format!("{other:?} is not accepted: \"guest\" (the default: icount) or \"host\" with a clock_reason"),
            ));
            (None, None)
        }
    }
}
