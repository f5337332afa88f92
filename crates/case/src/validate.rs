//! Stage two: from the raw form to a [`Case`], refusing with the file, the field and what
//! is accepted.

use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

use crate::fields::{GUEST, INPUT, TOP};
use crate::raw::{RawCase, RawGuest, LATER_FIELDS};
use crate::{
    Arch, BootCase, Case, CaseError, ExternalGuest, Firmware, Guest, GuestImage, Input, Kind, Pattern, SMP_MAX,
};

/// The kinds of case.
const KINDS: [&str; 5] = ["boot", "host-tests", "build", "scripts", "gate"];

/// Fields every kind takes.
pub(crate) const COMMON_FIELDS: [&str; 4] = ["description", "kind", "whole_run", "must_fail"];

/// The longest deadline a case may set: a day. Anything longer is a typo for a unit.
const TIMEOUT_SECS_MAX: f64 = 86_400.0;

/// The shortest: a millisecond. A deadline shorter is a typo too, and one that would
/// print as "timed out after 0s".
const TIMEOUT_SECS_MIN: f64 = 0.001;

/// The most guest RAM a case may ask for, in MiB (QEMU `virt` on this class of host).
const MEMORY_MIB_MAX: i64 = 16_384;

pub(crate) struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, field: impl Into<String>, message: impl Into<String>) -> CaseError {
        CaseError { file: self.file.to_string(), field: field.into(), message: message.into() }
    }

    pub(crate) fn regex(&self, label: String, source: &str) -> Result<Pattern, CaseError> {
        match Regex::new(source) {
            Ok(regex) => Ok(Pattern { label, regex }),
            Err(error) => {
                // The regex crate's message is several lines: the pattern, a caret under
                // the column at fault, then the error. Keep them as they are, each line
                // indented alike, so the caret stays under its column.
                let text = error.to_string();
                let body = text.strip_prefix("regex parse error:").unwrap_or(&text).trim_start_matches('\n');
                let body: Vec<String> = body.lines().map(|line| format!("    {line}")).collect();
                Err(self.err(label, format!("not a valid regex:\n{}", body.join("\n"))))
            }
        }
    }

    pub(crate) fn patterns(&self, field: &str, sources: &[String]) -> Result<Vec<Pattern>, CaseError> {
        sources.iter().enumerate().map(|(index, source)| self.regex(format!("{field}[{index}]"), source)).collect()
    }

    pub(crate) fn seconds(&self, field: &str, secs: f64) -> Result<Duration, CaseError> {
        if !(secs.is_finite() && (TIMEOUT_SECS_MIN..=TIMEOUT_SECS_MAX).contains(&secs)) {
            return Err(self.err(
                field,
                format!(
                    "{} is not accepted: a number of seconds from {TIMEOUT_SECS_MIN} (1 ms) to {TIMEOUT_SECS_MAX} (a day), such as 30 or 2.5",
                    crate::fields::number_text(secs)
                ),
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }
}

/// Parse a case file's text. `file` is the path shown in messages; the case's name is its stem.
pub fn parse(file: &str, text: &str) -> Result<Case, CaseError> {
    let ctx = Ctx { file };
    let path = PathBuf::from(file);
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .filter(|stem| !stem.is_empty())
        .ok_or_else(|| ctx.err("file name", "a case file is named <case>.toml"))?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(
            ctx.err("file name", format!("case name {name:?} is not accepted: letters, digits, '-' and '_' only"))
        );
    }
    // Stage one: the TOML itself, then every field's name and shape, in words.
    let table: toml::Table = toml::from_str(text).map_err(|error| {
        let line = error.span().map(|span| 1 + text[..span.start.min(text.len())].matches('\n').count());
        let field = match line {
            Some(line) => format!("line {line}"),
            None => "toml".to_string(),
        };
        ctx.err(field, error.message().trim().to_string())
    })?;
    let common: Vec<&str> = COMMON_FIELDS.to_vec();
    crate::fields::check_table(&ctx, &only(&table, &common), TOP, &common, "", "every case", &|_| None)?;
    let description = table
        .get("description")
        .and_then(toml::Value::as_str)
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| ctx.err("description", "required: one line saying what the case proves"))?
        .to_string();
    let kind = table
        .get("kind")
        .and_then(toml::Value::as_str)
        .ok_or_else(|| ctx.err("kind", format!("required: one of {}", quoted(&KINDS))))?
        .to_string();
    let kind = kind.as_str();
    if !KINDS.contains(&kind) {
        let near = crate::fields::did_you_mean(&crate::fields::nearest(kind, KINDS));
        let near = if near.is_empty() { String::new() } else { format!("; {near}") };
        return Err(ctx.err("kind", format!("{kind:?} is not accepted: one of {}{near}", quoted(&KINDS))));
    }
    if let Some(later) = LATER_FIELDS.iter().find(|name| table.contains_key(**name)) {
        return Err(ctx.err(*later, "not supported yet by this bench"));
    }
    // The fields of this kind, and only those, are named: never another kind's.
    let accepted: Vec<&str> = COMMON_FIELDS.iter().chain(crate::kinds::fields_of(kind)).copied().collect();
    let elsewhere = |key: &str| -> Option<String> {
        let owners: Vec<String> = KINDS
            .iter()
            .filter(|other| **other != kind && crate::kinds::fields_of(other).contains(&key))
            .map(|other| format!("{other:?}"))
            .collect();
        (!owners.is_empty()).then(|| format!("it is a field of kind {}", owners.join(", ")))
    };
    let whose = format!("kind {kind:?}");
    crate::fields::check_table(&ctx, &table, TOP, &accepted, "", &whose, &elsewhere)?;
    if let Some(toml::Value::Table(guest)) = table.get("guest") {
        let names: Vec<&str> = GUEST.iter().map(|f| f.name).collect();
        crate::fields::check_table(&ctx, guest, GUEST, &names, "guest.", "[guest]", &|_| None)?;
    }
    if let Some(toml::Value::Array(inputs)) = table.get("input") {
        let names: Vec<&str> = INPUT.iter().map(|f| f.name).collect();
        for (index, input) in inputs.iter().enumerate() {
            if let toml::Value::Table(input) = input {
                let prefix = format!("input[{index}].");
                crate::fields::check_table(&ctx, input, INPUT, &names, &prefix, "[[input]]", &|_| None)?;
                for name in &names {
                    if !input.contains_key(*name) {
                        return Err(ctx.err(format!("{prefix}{name}"), "required: each [[input]] has after and send"));
                    }
                }
            }
        }
    }
    // Every name and shape is checked above, so serde's own words are a last resort.
    let mut table = table;
    table.remove("description");
    table.remove("kind");
    let raw: RawCase = toml::Value::Table(table)
        .try_into()
        .map_err(|error: toml::de::Error| ctx.err("toml", error.message().trim().to_string()))?;

    let must_fail = raw.must_fail.as_deref().map(|source| ctx.regex("must_fail".into(), source)).transpose()?;
    let kind = match kind {
        "boot" => Kind::Boot(Box::new(boot_case(&ctx, &raw)?)),
        "host-tests" => Kind::HostTests(crate::kinds::host_tests(&ctx, &raw)?),
        "build" => Kind::Build(crate::kinds::build(&ctx, &raw)?),
        "scripts" => Kind::Scripts(crate::kinds::scripts(&ctx, &raw)?),
        _ => Kind::Gate(crate::kinds::gate(&ctx, &raw)?),
    };
    Ok(Case { name, file: path, description, whole_run: raw.whole_run.unwrap_or(true), kind, must_fail })
}

/// The entries of `table` whose keys are in `keys`.
fn only(table: &toml::Table, keys: &[&str]) -> toml::Table {
    table.iter().filter(|(k, _)| keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
}

fn boot_case(ctx: &Ctx, raw: &RawCase) -> Result<BootCase, CaseError> {
    let arch = arch_list(ctx, raw.arch.as_ref())?;
    let smp = smp(ctx, raw.smp.as_ref(), &arch)?;
    let timeout = ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(60.0))?;
    let timeout_smp = raw.timeout_secs_smp.map(|secs| ctx.seconds("timeout_secs_smp", secs)).transpose()?;
    let memory_mib = match raw.memory_mib.unwrap_or(256) {
        mib @ 16..=MEMORY_MIB_MAX => mib as u32,
        mib => return Err(ctx.err("memory_mib", format!("{mib} is not accepted: 16 to {MEMORY_MIB_MAX}"))),
    };
    if let Some(icount) = &raw.icount {
        if icount.trim().is_empty() || icount.chars().any(|c| c.is_whitespace()) {
            return Err(ctx.err("icount", format!("{icount:?} is not accepted: QEMU's -icount option string without spaces, such as \"shift=3,sleep=off\"")));
        }
        crate::repeat::icount_without_rr(ctx, icount)?;
    }
    let qemu_seed = match raw.qemu_seed {
        None => None,
        Some(seed) if seed >= 0 => Some(seed as u64),
        Some(seed) => return Err(ctx.err("qemu_seed", format!("{seed} is not accepted: a number from 0"))),
    };
    let kernel_features = raw.kernel_features.clone().unwrap_or_default();
    for (index, feature) in kernel_features.iter().enumerate() {
        if !is_feature_name(feature) {
            return Err(ctx.err(
                format!("kernel_features[{index}]"),
                format!("{feature:?} is not accepted: a Cargo feature name"),
            ));
        }
    }

    let expect = ctx.patterns("expect", raw.expect.as_deref().unwrap_or(&[]))?;
    let forbid = ctx.patterns("forbid", raw.forbid.as_deref().unwrap_or(&[]))?;
    let poweroff = raw.poweroff.unwrap_or(false);
    let poweroff_status = match (raw.poweroff_status, poweroff) {
        (None, _) => 0,
        (Some(_), false) => {
            return Err(
                ctx.err("poweroff_status", "only with poweroff = true: it is the status the power-off must give")
            )
        }
        (Some(status @ 0..=255), true) => status as i32,
        (Some(status), true) => {
            return Err(ctx.err("poweroff_status", format!("{status} is not accepted: an exit status, 0 to 255")))
        }
    };
    if expect.is_empty() && !poweroff {
        return Err(ctx.err("expect", "empty with poweroff = false: a boot case needs at least one expect or poweroff = true, or it proves nothing"));
    }
    let mut inputs = Vec::new();
    for (index, input) in raw.input.as_deref().unwrap_or(&[]).iter().enumerate() {
        if input.send.is_empty() {
            return Err(
                ctx.err(format!("input[{index}].send"), "empty: the text to type, as written (add \\n for Enter)")
            );
        }
        inputs
            .push(Input { after: ctx.regex(format!("input[{index}].after"), &input.after)?, send: input.send.clone() });
    }
    let guest = match (&raw.guest, &raw.programs) {
        (Some(_), Some(_)) => return Err(ctx.err("guest", "a boot case has either programs (the bench builds the guest) or a [guest] table (a guest it does not build), not both")),
        (Some(guest), None) => {
            if raw.firmware.is_some() {
                return Err(ctx.err("firmware", "with a [guest] table the firmware is guest.firmware"));
            }
            if !kernel_features.is_empty() || raw.debug_assertions.is_some() {
                let field = if kernel_features.is_empty() { "debug_assertions" } else { "kernel_features" };
                return Err(ctx.err(field, "only for a guest the bench builds: a [guest] kernel is built elsewhere"));
            }
            Guest::External(external_guest(ctx, guest)?)
        }
        (None, None) => {
            return Err(ctx.err(
                "programs",
                "required: the programs the reference guest runs (the first in init's place), or a [guest] table for a guest the bench does not build",
            ))
        }
        (None, Some(_)) => Guest::Built {
            programs: crate::reference::programs(ctx, raw)?,
            firmware: firmware(ctx, "firmware", raw.firmware.as_deref())?,
        },
    };
    let built_programs: &[crate::ProgramEntry] = match &guest {
        Guest::Built { programs, .. } => programs,
        Guest::External(_) => &[],
    };
    if matches!(guest, Guest::External(_)) && (raw.reporter.is_some() || raw.file.is_some()) {
        let field = if raw.reporter.is_some() { "reporter" } else { "file" };
        return Err(ctx.err(field, "only with programs: it belongs to the reference guest's signed bundle"));
    }
    let (reporter, hostile, files) = crate::reference::reference_fields(ctx, raw, built_programs)?;
    let device_tree = crate::reference::device_tree(ctx, raw)?;
    let distinct_across_boots =
        ctx.patterns("distinct_across_boots", raw.distinct_across_boots.as_deref().unwrap_or(&[]))?;
    let distinct = ctx.patterns("distinct", raw.distinct.as_deref().unwrap_or(&[]))?;
    let rtc_base = crate::repeat::rtc_base(ctx, raw.rtc_base.as_ref())?;
    let repeat_exactly =
        crate::repeat::repeat_exactly(ctx, raw.repeat_exactly, poweroff, !distinct_across_boots.is_empty())?;

    Ok(BootCase {
        arch,
        smp,
        keep_smp: raw.keep_smp.unwrap_or(false),
        timeout_smp,
        memory_mib,
        timeout,
        icount: raw.icount.clone(),
        qemu_seed,
        rtc_base,
        repeat_exactly,
        kernel_features,
        debug_assertions: raw.debug_assertions.unwrap_or(false),
        expect,
        forbid,
        poweroff,
        poweroff_status,
        inputs,
        guest,
        allow_panic: raw.allow_panic.unwrap_or(false),
        device_tree,
        distinct_across_boots,
        distinct,
        reporter,
        hostile,
        files,
    })
}

pub(crate) fn arch_list(ctx: &Ctx, names: Option<&Vec<String>>) -> Result<Vec<Arch>, CaseError> {
    let names = names.ok_or_else(|| ctx.err("arch", "required: a list of \"rv64\", \"rv32\""))?;
    if names.is_empty() {
        return Err(ctx.err(
            "arch",
            "empty: name at least one of \"rv64\", \"rv32\" (leave a width out rather than booting it zero times)",
        ));
    }
    let mut arch = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let one = Arch::from_name(name).ok_or_else(|| {
            ctx.err(format!("arch[{index}]"), format!("{name:?} is not accepted: \"rv64\" or \"rv32\""))
        })?;
        if arch.contains(&one) {
            return Err(ctx.err(format!("arch[{index}]"), format!("{name:?} is named twice")));
        }
        arch.push(one);
    }
    Ok(arch)
}

pub(crate) fn is_feature_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn smp_list(ctx: &Ctx, field: &str, value: &toml::Value) -> Result<Vec<u32>, CaseError> {
    let accepted = format!("a list of hart counts, each 1 to {SMP_MAX}, such as [1, 2]");
    let list = value
        .as_array()
        .ok_or_else(|| ctx.err(field, format!("{} is not accepted: {accepted}", crate::fields::shown(value))))?;
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
                return Err(ctx.err(
                    format!("{field}[{index}]"),
                    format!("{} is not accepted: {accepted}", crate::fields::shown(count)),
                ))
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

fn firmware(ctx: &Ctx, field: &str, value: Option<&str>) -> Result<Firmware, CaseError> {
    match value {
        None | Some("default") => Ok(Firmware::Default),
        Some("none") => Ok(Firmware::None),
        Some("") => Err(ctx.err(field, "empty: \"default\" (QEMU's OpenSBI), \"none\", or a path to an image")),
        Some(path) => Ok(Firmware::Path(PathBuf::from(path))),
    }
}

pub(crate) fn path_field(ctx: &Ctx, field: &str, value: &str) -> Result<PathBuf, CaseError> {
    if value.trim().is_empty() {
        return Err(ctx.err(field, "empty: a path, relative to the workspace root or absolute"));
    }
    Ok(PathBuf::from(value))
}

fn external_guest(ctx: &Ctx, raw: &RawGuest) -> Result<ExternalGuest, CaseError> {
    let image = match (&raw.kernel, &raw.recipe) {
        (Some(_), Some(_)) => {
            return Err(ctx
                .err("guest.recipe", "a [guest] names either kernel (an image) or recipe (a guest recipe), not both"))
        }
        (None, None) => {
            return Err(ctx.err("guest.kernel", "required: the kernel image's path (or guest.recipe, a guest recipe)"))
        }
        (Some(kernel), None) => GuestImage::Files {
            kernel: path_field(ctx, "guest.kernel", kernel)?,
            initrd: raw.initrd.as_deref().map(|initrd| path_field(ctx, "guest.initrd", initrd)).transpose()?,
        },
        (None, Some(recipe)) => {
            if raw.initrd.is_some() {
                return Err(ctx.err("guest.initrd", "a recipe makes its own initramfs: give initrd only with kernel"));
            }
            GuestImage::Recipe(path_field(ctx, "guest.recipe", recipe)?)
        }
    };
    let machine = raw.machine.clone().unwrap_or_else(|| "virt".to_string());
    if machine.trim().is_empty() || machine.contains(char::is_whitespace) {
        return Err(ctx.err(
            "guest.machine",
            format!("{machine:?} is not accepted: a QEMU machine option string such as \"virt\" or \"virt,aclint=on\""),
        ));
    }
    let qemu_args = raw.qemu_args.clone().unwrap_or_default();
    // The bench owns these: letting a case set them would break the verdict's plumbing.
    const OWNED: [&str; 12] = [
        "-serial",
        "-chardev",
        "-qmp",
        "-mon",
        "-monitor",
        "-nographic",
        "-daemonize",
        "-kernel",
        "-bios",
        "-initrd",
        "-append",
        "-no-reboot",
    ];
    for (index, arg) in qemu_args.iter().enumerate() {
        let flag = arg.strip_prefix('-').map(|rest| format!("-{}", rest.trim_start_matches('-'))).unwrap_or_default();
        if OWNED.contains(&flag.as_str()) {
            return Err(ctx.err(format!("guest.qemu_args[{index}]"), format!("{arg:?} is set by the bench (console, monitor and the guest's images are its own); use guest.kernel, guest.initrd, guest.append, guest.firmware")));
        }
    }
    Ok(ExternalGuest {
        image,
        append: raw.append.clone(),
        firmware: firmware(ctx, "guest.firmware", raw.firmware.as_deref())?,
        machine,
        qemu_args,
    })
}
