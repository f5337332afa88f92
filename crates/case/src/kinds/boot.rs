//! Kind "boot": what to boot, how, and what its console must show. Its fields and its raw
//! form are in `boot/raw.rs`; the `[guest]` table in `boot/guest.rs`; what the case says
//! about the reference guest (programs, the bundle, hostile inputs, device-tree edits) in
//! `boot/reference.rs`; the devices in `boot/disk.rs` (`[disk]`, `[vault]`, `[userland]`)
//! and `boot/net.rs` (`[net]` with its peers, dials and poke, and `boot/host_key.rs` for
//! its `host_key`). Its `[[session]]` tables are read by `session.rs`, which kind
//! "ssh-loopback" shares.
//!
//! Adding a boot field: its line in `raw::FIELDS` and in `raw::RawBoot` (same place in
//! both), its typed form in `BootCase` (lib.rs), and its check in [`validate`], which
//! builds the `BootCase`; a check of its own (a few functions) goes in a module beside
//! these, `boot/<name>.rs`, declared below.

pub(crate) mod clock;
mod disk;
mod guest;
pub use guest::OVERLAY_FILE_BYTES_MAX;
mod host_key;
pub(crate) mod idle;
mod net;
pub(crate) mod raw;
mod reference;
mod repeat;
pub(crate) mod triage;

use crate::common::{arch_list, is_feature_name, shown, Ctx, Refusals};
use crate::fields::{check_table, names};
use crate::{Accel, Arch, BootCase, CaseError, ExternalGuest, Guest, Input, SMP_MAX};
use raw::{RawBoot, GUEST, INPUT, OVERLAY};

pub(crate) use raw::FIELDS;

/// The most guest RAM a case may ask for, in MiB (QEMU `virt` on this class of host).
const MEMORY_MIB_MAX: i64 = 16_384;

/// Stage one for the tables within a boot case (`[guest]`, each `[[input]]`, the devices'
/// tables and those inside them), whose fields are checked in words like the top level's,
/// then the whole read by serde.
pub(crate) fn read(ctx: &Ctx, table: toml::Table) -> Result<RawBoot, CaseError> {
    ctx.all(check(ctx, &table))?;
    ctx.read(table)
}

/// The refusals of the tables within a boot case: each table's every refusal, one table
/// after another (a table's refusal does not hide the next table's).
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Vec<CaseError> {
    let guest = || -> Result<(), CaseError> {
        if let Some(toml::Value::Table(guest)) = table.get("guest") {
            check_table(ctx, guest, GUEST, "guest.", "[guest]", &|_| None)?;
            if let Some(toml::Value::Array(items)) = guest.get("overlay") {
                for (index, item) in items.iter().enumerate() {
                    if let toml::Value::Table(item) = item {
                        check_table(
                            ctx,
                            item,
                            OVERLAY,
                            &format!("guest.overlay[{index}]."),
                            "a guest.overlay entry",
                            &|_| None,
                        )?;
                    }
                }
            }
        }
        Ok(())
    };
    let inputs = || -> Result<(), CaseError> {
        if let Some(toml::Value::Array(inputs)) = table.get("input") {
            for (index, input) in inputs.iter().enumerate() {
                if let toml::Value::Table(input) = input {
                    let prefix = format!("input[{index}].");
                    check_table(ctx, input, INPUT, &prefix, "[[input]]", &|_| None)?;
                    for name in names(INPUT) {
                        if !input.contains_key(name) {
                            return Err(
                                ctx.err(format!("{prefix}{name}"), "required: each [[input]] has after and send")
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    };
    let post_check = || -> Result<(), CaseError> {
        match table.get("post_check") {
            Some(toml::Value::Table(post)) => {
                check_table(ctx, post, raw::POST_CHECK, "post_check.", "post_check", &|_| None)
            }
            _ => Ok(()),
        }
    };
    [
        guest(),
        inputs(),
        disk::check(ctx, table),
        net::check(ctx, table),
        crate::session::check(ctx, table),
        idle::check(ctx, table),
        post_check(),
        triage::check(ctx, table),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect()
}

/// Stage two of a boot case: every field's meaning checked, the [`BootCase`] made.
/// `self_check`: the case has `must_fail` (a self-check, which some hostile fields need).
///
/// Every refusal is kept, in the file's order. A check that needs a refused field's
/// value is skipped (it could only refuse what the person did not write): `smp` without
/// `arch` (and the checks of widths then see none); `idle` without `timeout_secs`; the
/// reference guest's fields, `ram_forbid` and `memory` without the guest (`programs` or
/// `[guest]`); what sessions need without `session`, `expect_after` and `[net]`.
pub(crate) fn validate(ctx: &Ctx, raw: RawBoot, self_check: bool) -> Result<BootCase, CaseError> {
    let mut refused = Refusals::new();
    let arch = refused.keep(arch_list(ctx, raw.arch.as_ref()));
    let widths: &[Arch] = arch.as_deref().unwrap_or(&[]);
    let smp = arch.as_ref().and_then(|arch| refused.keep(smp(ctx, raw.smp.as_ref(), arch)));
    let timeout = refused.keep(ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(60.0)));
    let timeout_smp = refused.keep(raw.timeout_secs_smp.map(|secs| ctx.seconds("timeout_secs_smp", secs)).transpose());
    let memory_mib = refused.keep(match raw.memory_mib.unwrap_or(256) {
        mib @ 16..=MEMORY_MIB_MAX => Ok(mib as u32),
        mib => Err(ctx.err("memory_mib", format!("{mib} is not accepted: 16 to {MEMORY_MIB_MAX}"))),
    });
    if let Some(icount) = &raw.icount {
        if icount.trim().is_empty() || icount.chars().any(|c| c.is_whitespace()) {
            refused.push(ctx.err("icount", format!("{icount:?} is not accepted: QEMU's -icount option string without spaces, such as \"shift=3,sleep=off\"")));
        } else {
            refused.keep(repeat::icount_without_rr(ctx, icount));
        }
    }
    let (icount, host_clock) = clock::clock(ctx, &raw, &mut refused);
    let accel = refused.keep(accel(ctx, raw.accel.as_deref(), icount.is_some()));
    let qemu_seed = refused.keep(match raw.qemu_seed {
        None => Ok(None),
        Some(seed) if seed >= 0 => Ok(Some(seed as u64)),
        Some(seed) => Err(ctx.err("qemu_seed", format!("{seed} is not accepted: a number from 0"))),
    });
    let kernel_features = raw.kernel_features.clone().unwrap_or_default();
    for (index, feature) in kernel_features.iter().enumerate() {
        if !is_feature_name(feature) {
            refused.push(ctx.err(
                format!("kernel_features[{index}]"),
                format!("{feature:?} is not accepted: a Cargo feature name"),
            ));
        }
    }

    let expect = refused.keep(ctx.patterns("expect", raw.expect.as_deref().unwrap_or(&[])));
    let forbid = refused.keep(ctx.patterns("forbid", raw.forbid.as_deref().unwrap_or(&[])));
    let poweroff = raw.poweroff.unwrap_or(false);
    let poweroff_status = refused.keep(match (raw.poweroff_status, poweroff) {
        (None, _) => Ok(0),
        (Some(_), false) => {
            Err(ctx.err("poweroff_status", "only with poweroff = true: it is the status the power-off must give"))
        }
        (Some(status @ 0..=255), true) => Ok(status as i32),
        (Some(status), true) => {
            Err(ctx.err("poweroff_status", format!("{status} is not accepted: an exit status, 0 to 255")))
        }
    });
    let (reboots, reboot_expect) = reboots(ctx, &raw, &mut refused);
    if raw.expect.as_deref().unwrap_or(&[]).is_empty() && !poweroff {
        refused.push(ctx.err("expect", "empty with poweroff = false: a boot case needs at least one expect or poweroff = true, or it proves nothing"));
    }
    let mut inputs = Vec::new();
    for (index, input) in raw.input.as_deref().unwrap_or(&[]).iter().enumerate() {
        if input.send.is_empty() {
            refused.push(
                ctx.err(format!("input[{index}].send"), "empty: the text to type, as written (add \\n for Enter)"),
            );
        }
        if let Some(after) = refused.keep(ctx.regex(format!("input[{index}].after"), &input.after)) {
            inputs.push(Input { after, send: input.send.clone() });
        }
    }
    let guest = match (&raw.guest, &raw.programs) {
        (Some(_), Some(_)) => {
            refused.push(ctx.err("guest", "a boot case has either programs (the bench builds the guest) or a [guest] table (a guest it does not build), not both"));
            None
        }
        (Some(guest), None) => {
            if raw.firmware.is_some() {
                refused.push(ctx.err("firmware", "with a [guest] table the firmware is guest.firmware"));
            }
            if !kernel_features.is_empty() || raw.debug_assertions.is_some() {
                let field = if kernel_features.is_empty() { "debug_assertions" } else { "kernel_features" };
                refused.push(ctx.err(field, "only for a guest the bench builds: a [guest] kernel is built elsewhere"));
            }
            refused.keep(guest::external_guest(ctx, guest)).map(Guest::External)
        }
        (None, None) => {
            refused.push(ctx.err(
                "programs",
                "required: the programs the reference guest runs (the first in init's place), or a [guest] table for a guest the bench does not build",
            ));
            None
        }
        (None, Some(_)) if widths.iter().any(|a| !a.has_reference_guest()) => {
            let other: Vec<_> = widths.iter().filter(|a| !a.has_reference_guest()).map(|a| a.name()).collect();
            refused.push(ctx.err(
                "programs",
                format!(
                    "the reference guest the bench builds exists for rv64 and rv32 only, and arch names {}: boot a guest the bench does not build there with a [guest] table",
                    other.join(" and ")
                ),
            ));
            None
        }
        (None, Some(_)) => {
            let programs = refused.keep(reference::programs(ctx, &raw));
            let firmware = refused.keep(guest::firmware(ctx, "firmware", raw.firmware.as_deref()));
            programs.zip(firmware).map(|(programs, firmware)| Guest::Built { programs, firmware })
        }
    };
    match &guest {
        Some(Guest::Built { firmware, .. }) => {
            for error in guest::firmware_widths(ctx, "firmware", firmware, widths, true) {
                refused.push(error);
            }
        }
        Some(Guest::External(external)) => {
            for error in guest::firmware_widths(ctx, "guest.firmware", &external.firmware, widths, false) {
                refused.push(error);
            }
            if let crate::GuestImage::Media { .. } = external.image {
                for error in guest::media_firmware(ctx, &external.firmware, widths) {
                    refused.push(error);
                }
            }
        }
        None => {}
    }
    if let Some(Guest::External(ExternalGuest { firmware: crate::Firmware::None, .. })) = &guest {
        if widths.contains(&Arch::X86_64) {
            refused.push(ctx.err(
                "guest.firmware",
                "\"none\" is not accepted on x86_64: q35 starts in its BIOS, which loads the -kernel; \"default\" (QEMU's SeaBIOS) or a path to an image",
            ));
        }
    }
    let built_programs: &[crate::ProgramEntry] = match &guest {
        Some(Guest::Built { programs, .. }) => programs,
        Some(Guest::External(_)) | None => &[],
    };
    let reference = match &guest {
        Some(Guest::External(_)) if raw.reporter.is_some() || raw.file.is_some() => {
            let field = if raw.reporter.is_some() { "reporter" } else { "file" };
            refused.push(ctx.err(field, "only with programs: it belongs to the reference guest's signed bundle"));
            None
        }
        Some(_) => refused.keep(reference::reference_fields(ctx, &raw, built_programs)),
        None => None,
    };
    let device_tree = refused.keep(reference::device_tree(ctx, &raw));
    let edits = device_tree.as_ref().is_some_and(|edits| !edits.is_empty());
    if let Some(flat) = widths.iter().find(|a| !a.has_device_tree()).filter(|_| edits) {
        refused.push(ctx.err(
            "device_tree",
            format!(
                "no device tree to edit on {flat}: its machine ({}) describes itself to the guest with ACPI tables, not a device tree",
                flat.default_machine()
            ),
        ));
    }
    let two_boots = raw.distinct_across_boots.as_deref().is_some_and(|d| !d.is_empty());
    let distinct_across_boots =
        refused.keep(ctx.patterns("distinct_across_boots", raw.distinct_across_boots.as_deref().unwrap_or(&[])));
    let distinct = refused.keep(ctx.patterns("distinct", raw.distinct.as_deref().unwrap_or(&[])));
    let rtc_base = refused.keep(repeat::rtc_base(ctx, raw.rtc_base.as_ref()));
    let repeat_exactly = refused.keep(repeat::repeat_exactly(ctx, raw.repeat_exactly, poweroff, two_boots));
    let disks = refused.keep(disk::disks(
        ctx,
        raw.disk.as_ref(),
        raw.vault.as_ref(),
        raw.userland.as_ref(),
        two_boots,
        self_check,
    ));
    let net = refused.keep(net::net(ctx, raw.net.as_ref(), self_check));
    let sessions = refused.keep(crate::session::sessions(ctx, raw.session.as_deref()));
    let expect_after = refused.keep(ctx.patterns("expect_after", raw.expect_after.as_deref().unwrap_or(&[])));
    if let (Some(sessions), Some(expect_after), Some(net)) = (&sessions, &expect_after, &net) {
        refused.keep(sessions_need(ctx, sessions, expect_after, net.as_ref()));
    }
    let ram_forbid = raw.ram_forbid.as_deref().unwrap_or(&[]);
    let ram_forbid = guest.as_ref().and_then(|guest| refused.keep(ram_forbid_of(ctx, ram_forbid, poweroff, guest)));
    let memory = guest.as_ref().and_then(|guest| refused.keep(memory(ctx, &raw, poweroff, guest)));
    let idle = timeout.and_then(|timeout| refused.keep(idle::idle(ctx, raw.idle.as_ref(), timeout)));
    if raw.idle.is_some() && host_clock.is_none() {
        refused.push(ctx.err(
            "idle",
            "only on the host's clock (clock = \"host\", clock_reason = \"host-time\"): the window counts traps and host CPU over the host's seconds, and in guest time an idle guest's clock jumps ahead",
        ));
    }
    let post_check = refused.keep(post_check(ctx, raw.post_check.as_ref()));
    let triage = refused.keep(triage::triage(ctx, raw.triage.as_ref(), raw.allow_panic.unwrap_or(false)));
    if raw.idle.is_some() && poweroff {
        refused.push(
            ctx.err("idle", "not with poweroff = true: the window measures a guest at rest, which must still run"),
        );
    }

    let made = || {
        let (reporter, hostile, files) = reference?;
        Some(BootCase {
            arch: arch?,
            smp: smp?,
            keep_smp: raw.keep_smp.unwrap_or(false),
            timeout_smp: timeout_smp?,
            memory_mib: memory_mib?,
            timeout: timeout?,
            icount,
            host_clock,
            accel: accel?,
            qemu_seed: qemu_seed?,
            rtc_base: rtc_base?,
            repeat_exactly: repeat_exactly?,
            kernel_features,
            debug_assertions: raw.debug_assertions.unwrap_or(false),
            expect: expect?,
            forbid: forbid?,
            poweroff,
            poweroff_status: poweroff_status?,
            reboots: reboots?,
            reboot_expect: reboot_expect?,
            inputs,
            guest: guest?,
            allow_panic: raw.allow_panic.unwrap_or(false),
            device_tree: device_tree?,
            distinct_across_boots: distinct_across_boots?,
            distinct: distinct?,
            reporter,
            hostile,
            files,
            disks: disks?,
            net: net?,
            sessions: sessions?,
            expect_after: expect_after?,
            ram_forbid: ram_forbid?,
            memory: memory?,
            idle: idle?,
            post_check: post_check?,
            triage: triage?,
        })
    };
    refused.end(ctx, made())
}

/// The most resets a case may expect in one run.
const REBOOTS_MAX: i64 = 16;

/// `reboots` and `reboot_expect`: a count from 0 to [`REBOOTS_MAX`], and either no
/// `reboot_expect` or one pattern per reset (each the first line of the boot after it).
fn reboots(ctx: &Ctx, raw: &RawBoot, refused: &mut Refusals) -> (Option<u32>, Option<Vec<crate::Pattern>>) {
    let count = refused.keep(match raw.reboots.unwrap_or(0) {
        n @ 0..=REBOOTS_MAX => Ok(n as u32),
        n => {
            Err(ctx.err("reboots", format!("{n} is not accepted: how many times the guest resets, 0 to {REBOOTS_MAX}")))
        }
    });
    let lines = raw.reboot_expect.as_deref().unwrap_or(&[]);
    let patterns = refused.keep(ctx.patterns("reboot_expect", lines));
    if let Some(n) = count {
        if !lines.is_empty() && lines.len() != n as usize {
            let what = if n == 0 {
                "only with reboots: the first line expected after each reset".to_string()
            } else {
                format!("{} patterns for reboots = {n}: one per reset, the first line expected after it", lines.len())
            };
            refused.push(ctx.err("reboot_expect", what));
        }
    }
    (count, patterns)
}

/// `accel`: "tcg", "kvm" or "auto" (the default). KVM runs no icount. That KVM runs only
/// guests of the host's width is the host's matter: the bench asks it before anything
/// builds (`runner/intake.rs`), so what a case file says never depends on the machine
/// that reads it.
fn accel(ctx: &Ctx, value: Option<&str>, icount: bool) -> Result<Accel, CaseError> {
    let accel = match value {
        None | Some("auto") => Accel::Auto,
        Some("tcg") => Accel::Tcg,
        Some("kvm") => Accel::Kvm,
        Some(other) => {
            return Err(ctx.err(
                "accel",
                format!("{other:?} is not accepted: \"tcg\", \"kvm\" or \"auto\" (KVM when the host proves it usable, TCG otherwise)"),
            ))
        }
    };
    if accel == Accel::Kvm && icount {
        return Err(ctx.err(
            "accel",
            "\"kvm\" in guest time is not accepted: icount counts instructions in QEMU's translator, so it needs \"tcg\" (\"auto\" picks TCG under icount), or clock = \"host\" with clock_reason = \"kvm\"",
        ));
    }
    Ok(accel)
}

/// What sessions need of a boot case, and what needs sessions: port 22 forwarded, and
/// The limits the scheduler oracle takes (`post_check.args` with `oracle = "sched"`).
pub const SCHED_LIMITS: &[&str] = &["pick_p99_us", "pick_max_us", "min_picks"];

/// `post_check`: a program and its arguments, none empty, or a built-in oracle and its
/// limits; the deadline up to an hour.
fn post_check(ctx: &Ctx, raw: Option<&raw::RawPostCheck>) -> Result<Option<crate::PostCheck>, CaseError> {
    let Some(raw) = raw else { return Ok(None) };
    // Every refusal of the table; the oracle's limits only when the oracle is accepted.
    let mut refused = Refusals::new();
    let chosen = refused.keep(match (raw.command.as_deref(), raw.oracle.as_deref()) {
        (Some(_), Some(_)) => Err(ctx.err("post_check.oracle", "a command or a built-in oracle, not both")),
        (None, Some("sched")) => Ok((Vec::new(), Some("sched".to_string()))),
        (None, Some(other)) => Err(ctx.err(
            "post_check.oracle",
            format!("{other:?} is not accepted: \"sched\", the reference kernel's scheduler oracle"),
        )),
        (None | Some([]), None) => Err(ctx.err(
            "post_check.command",
            "required: the program and its first arguments, such as [\"scripts/oracles/printk-times\"], or oracle = \"sched\"",
        )),
        (Some(command), None) => Ok((command.to_vec(), None)),
    });
    let args = raw.args.clone().unwrap_or_default();
    let command = raw.command.clone().unwrap_or_default();
    for (field, list) in [("command", &command), ("args", &args)] {
        if let Some(index) = list.iter().position(|word| word.is_empty() || word.contains('\0')) {
            refused.push(
                ctx.err(format!("post_check.{field}[{index}]"), "empty or holding a NUL: a word of a command line"),
            );
        }
    }
    if chosen.as_ref().is_some_and(|(_, oracle)| oracle.is_some()) {
        for (index, arg) in args.iter().enumerate() {
            let ok = arg.split_once('=').is_some_and(|(name, value)| {
                SCHED_LIMITS.contains(&name) && value.parse::<f64>().is_ok_and(|v| v.is_finite() && v >= 0.0)
            });
            if !ok {
                refused.push(ctx.err(
                    format!("post_check.args[{index}]"),
                    format!("{arg:?} is not accepted: a limit NAME=NUMBER, NAME one of {}", SCHED_LIMITS.join(", ")),
                ));
            }
        }
    }
    let timeout = refused.keep(ctx.seconds("post_check.timeout_secs", raw.timeout_secs.unwrap_or(60.0)));
    if timeout.is_some_and(|timeout| timeout > std::time::Duration::from_secs(3600)) {
        refused
            .push(ctx.err("post_check.timeout_secs", "at most 3600: an oracle that runs longer is a bench of its own"));
    }
    let made =
        chosen.zip(timeout).map(|((command, oracle), timeout)| crate::PostCheck { command, oracle, args, timeout });
    refused.end(ctx, made.map(Some))
}

/// `memory = true` and `heap_fits`: the reference guest's stacks and heaps measured in
/// its RAM at the verdict (docs/ram.md), so while it still runs.
fn memory(ctx: &Ctx, raw: &RawBoot, poweroff: bool, guest: &Guest) -> Result<Option<crate::MemorySpec>, CaseError> {
    let heap_fits = raw.heap_fits.unwrap_or(false);
    if raw.memory != Some(true) {
        if raw.heap_fits.is_some() {
            return Err(ctx.err("heap_fits", "only with memory = true: it relaxes the heap rule of that measure"));
        }
        return Ok(None);
    }
    if poweroff {
        return Err(ctx.err(
            "memory",
            "not with poweroff = true: the bench reads the guest's RAM at the verdict, while the guest still runs",
        ));
    }
    if let Guest::External(_) = guest {
        return Err(ctx.err(
            "memory",
            "only on the reference guest (programs = [...]), whose kernel paints each stack and whose runtime writes \
             each heap record; any guest can use ram_forbid, and docs/ram.md says how another guest can paint",
        ));
    }
    Ok(Some(crate::MemorySpec { heap_fits }))
}

/// The most strings `ram_forbid` takes: each is a pass over the guest's RAM.
const RAM_FORBID_MAX: usize = 16;

/// `ram_forbid`: byte strings of 8 to 4096 bytes (a shorter one turns up in hundreds of
/// MiB by chance), named once, read from the virt machine's RAM while the guest still
/// runs at the verdict (so not with `poweroff = true`).
fn ram_forbid_of(
    ctx: &Ctx,
    strings: &[String],
    poweroff: bool,
    guest: &Guest,
) -> Result<Vec<(String, Vec<u8>)>, CaseError> {
    if strings.is_empty() {
        return Ok(Vec::new());
    }
    if poweroff {
        return Err(ctx.err(
            "ram_forbid",
            "not with poweroff = true: the bench reads the guest's RAM at the verdict, while the guest still runs",
        ));
    }
    if let Guest::External(ExternalGuest { machine: Some(machine), .. }) = guest {
        return Err(ctx.err(
            "ram_forbid",
            format!(
                "only on a width's default machine (where the bench knows the RAM's address), not guest.machine = {machine:?}"
            ),
        ));
    }
    if strings.len() > RAM_FORBID_MAX {
        return Err(ctx.err("ram_forbid", format!("{} strings: at most {RAM_FORBID_MAX}", strings.len())));
    }
    let mut needles: Vec<(String, Vec<u8>)> = Vec::new();
    for (index, text) in strings.iter().enumerate() {
        let field = format!("ram_forbid[{index}]");
        if !(8..=4096).contains(&text.len()) {
            return Err(ctx.err(
                field,
                format!(
                    "{} bytes is not accepted: 8 to 4096 bytes (a shorter string turns up in a guest's RAM by chance)",
                    text.len()
                ),
            ));
        }
        if strings[..index].contains(text) {
            return Err(ctx.err(field, format!("{text:?} is named twice")));
        }
        needles.push((field, text.as_bytes().to_vec()));
    }
    Ok(needles)
}

/// `expect_after` and `net.host_key` only beside a session.
fn sessions_need(
    ctx: &Ctx,
    sessions: &[crate::Session],
    expect_after: &[crate::Pattern],
    net: Option<&crate::NetSpec>,
) -> Result<(), CaseError> {
    if sessions.is_empty() {
        if !expect_after.is_empty() {
            return Err(ctx.err(
                "expect_after",
                "only with [[session]]: it is matched on the console from the sessions' start to the deadline",
            ));
        }
        if net.is_some_and(|net| net.host_key.is_some()) {
            return Err(ctx.err("net.host_key", "only with [[session]]: it is the host key the sessions' ssh accepts"));
        }
        return Ok(());
    }
    match net {
        None => Err(ctx.err(
            "net.forward",
            "required with [[session]]: [net] forward = [22], the guest port the sessions' ssh reaches sshd through",
        )),
        Some(net) if !net.forward.contains(&22) => Err(ctx.err(
            "net.forward",
            "22 is missing: the sessions' ssh reaches the guest's sshd through its forwarded port 22",
        )),
        Some(_) => Ok(()),
    }
}

fn smp_list(ctx: &Ctx, field: &str, value: &toml::Value) -> Result<Vec<u32>, CaseError> {
    let accepted = format!("a list of hart counts, each 1 to {SMP_MAX}, such as [1, 2]");
    let list =
        value.as_array().ok_or_else(|| ctx.err(field, format!("{} is not accepted: {accepted}", shown(value))))?;
    if list.is_empty() {
        return Err(
            ctx.err(field, format!("empty: {accepted} (leave a width out of arch rather than booting it zero times)"))
        );
    }
    let mut counts = Vec::new();
    for (index, count) in list.iter().enumerate() {
        match count.as_integer() {
            Some(n) if (1..=SMP_MAX as i64).contains(&n) => {
                if counts.contains(&(n as u32)) {
                    return Err(ctx.err(format!("{field}[{index}]"), format!("{n} is named twice")));
                }
                counts.push(n as u32);
            }
            _ => {
                return Err(
                    ctx.err(format!("{field}[{index}]"), format!("{} is not accepted: {accepted}", shown(count)))
                )
            }
        }
    }
    Ok(counts)
}

fn smp(ctx: &Ctx, value: Option<&toml::Value>, arch: &[Arch]) -> Result<Vec<(Arch, Vec<u32>)>, CaseError> {
    match value {
        None => Ok(arch.iter().map(|a| (*a, vec![1])).collect()),
        Some(toml::Value::Table(table)) => {
            for key in table.keys() {
                match Arch::from_name(key) {
                    Some(one) if arch.contains(&one) => {}
                    _ => {
                        let names: Vec<_> = arch.iter().map(|a| a.name()).collect();
                        return Err(ctx.err(
                            format!("smp.{key}"),
                            format!("not one of the case's arch: accepted keys are {}", names.join(", ")),
                        ));
                    }
                }
            }
            arch.iter()
                .map(|one| match table.get(one.name()) {
                    Some(list) => Ok((*one, smp_list(ctx, &format!("smp.{}", one.name()), list)?)),
                    None => Ok((*one, vec![1])),
                })
                .collect()
        }
        Some(list) => {
            let counts = smp_list(ctx, "smp", list)?;
            Ok(arch.iter().map(|a| (*a, counts.clone())).collect())
        }
    }
}
