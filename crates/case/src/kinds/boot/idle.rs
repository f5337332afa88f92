//! A boot case's `[idle]`: a window of `seconds` at rest, after every expect and session
//! (and the `after` line, when given), in which the bench counts the guest's traps from
//! QEMU's own log and QEMU's host CPU time; `max` holds ceilings by rate name.

use std::time::Duration;

use super::raw::{RawIdle, IDLE};
use crate::common::{nearest, Ctx, Refusals};
use crate::fields::check_table;
use crate::{CaseError, IdleSpec};

/// The interrupts QEMU's RISC-V trap log names (`desc=`): a ceiling on one is the
/// busiest hart's rate.
pub const IDLE_INTERRUPTS: &[&str] = &[
    "u_software",
    "s_software",
    "vs_software",
    "m_software",
    "u_timer",
    "s_timer",
    "vs_timer",
    "m_timer",
    "u_external",
    "s_external",
    "vs_external",
    "m_external",
];

/// The exceptions QEMU's RISC-V trap log names: a ceiling on one is every hart's rate.
pub const IDLE_EXCEPTIONS: &[&str] = &[
    "misaligned_fetch",
    "fault_fetch",
    "illegal_instruction",
    "breakpoint",
    "misaligned_load",
    "fault_load",
    "misaligned_store",
    "fault_store",
    "user_ecall",
    "supervisor_ecall",
    "hypervisor_ecall",
    "machine_ecall",
    "exec_page_fault",
    "load_page_fault",
    "store_page_fault",
    "double_trap",
    "sw_check",
    "hw_error",
    "guest_exec_page_fault",
    "guest_load_page_fault",
    "guest_store_page_fault",
];

/// The rates that sum others: the busiest hart's interrupts, every hart's exceptions, and
/// QEMU's host CPU time per second of the window.
pub const IDLE_TOTALS: &[&str] = &["interrupts", "exceptions", "host_cores"];

/// The longest window.
const SECONDS_MAX: f64 = 600.0;

/// Stage one: the fields of `[idle]` checked in words.
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Result<(), CaseError> {
    let Some(toml::Value::Table(idle)) = table.get("idle") else { return Ok(()) };
    check_table(ctx, idle, IDLE, "idle.", "[idle]", &|_| None)
}

/// Stage two of `[idle]`: every refusal of its fields, in the order of [`IDLE`], and of
/// each rate of `max` (in the order of its names: the TOML reader keeps no other).
pub(crate) fn idle(ctx: &Ctx, raw: Option<&RawIdle>, timeout: Duration) -> Result<Option<IdleSpec>, CaseError> {
    let Some(raw) = raw else { return Ok(None) };
    let mut refused = Refusals::new();
    let window = refused.keep(match raw.seconds {
        None => Err(ctx.err("idle.seconds", "required: the window's length in seconds, 1 to 600, such as 10")),
        Some(seconds) if !(1.0..=SECONDS_MAX).contains(&seconds) => {
            Err(ctx.err("idle.seconds", format!("{seconds} is not accepted: 1 to {SECONDS_MAX} seconds")))
        }
        Some(seconds) if Duration::from_secs_f64(seconds) >= timeout => Err(ctx.err(
            "idle.seconds",
            format!(
                "{seconds} s does not fit in the case's timeout_secs ({} s): the boot, the expects and the window share it",
                timeout.as_secs_f64()
            ),
        )),
        Some(seconds) => Ok(Duration::from_secs_f64(seconds)),
    });
    let after = refused.keep(raw.after.as_ref().map(|source| ctx.regex("idle.after".into(), source)).transpose());
    let mut max = Vec::new();
    for (name, value) in raw.max.iter().flatten() {
        let field = format!("idle.max.{name}");
        let known = IDLE_INTERRUPTS.iter().chain(IDLE_EXCEPTIONS).chain(IDLE_TOTALS);
        if !known.clone().any(|k| k == name) {
            let near = nearest(name, known.copied());
            let hint = match near.first() {
                Some(near) => format!(" (did you mean {near:?}?)"),
                None => String::new(),
            };
            refused.push(ctx.err(
                &field,
                format!(
                    "{name:?} is not a rate the bench measures{hint}: a trap QEMU names (such as \"s_timer\", \"user_ecall\"), \"interrupts\", \"exceptions\" or \"host_cores\""
                ),
            ));
        }
        // The ceiling is a number whatever it names: checked beside its name.
        match value {
            toml::Value::Integer(n) if *n >= 0 => max.push((name.clone(), *n as f64)),
            toml::Value::Float(f) if f.is_finite() && *f >= 0.0 => max.push((name.clone(), *f)),
            other => {
                refused.push(ctx.err(field, format!("{other} is not accepted: a ceiling per second, a number from 0")))
            }
        }
    }
    let made = || Some(Some(IdleSpec { window: window?, after: after?, max }));
    refused.end(ctx, made())
}
