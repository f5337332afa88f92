//! A boot case's `[guest]` table (a guest the bench does not build) and the firmware a
//! boot runs under.

use std::path::PathBuf;

use super::raw::RawGuest;
use crate::common::{path_field, Ctx};
use crate::{CaseError, ExternalGuest, Firmware, GuestImage, Overlay};

/// The most files `guest.overlay` adds, and the most bytes one may hold: an overlay brings
/// keys and configuration, not a root file system. The bench reads each file to this
/// bound when it packs the overlay (this crate reads no file).
const OVERLAY_FILES_MAX: usize = 64;
pub const OVERLAY_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// `guest.overlay`: each entry's host path, its place in the guest (relative, no `..`,
/// named once) and its mode (permission bits alone).
fn overlay(ctx: &Ctx, raw: &RawGuest) -> Result<Vec<Overlay>, CaseError> {
    let entries = raw.overlay.as_deref().unwrap_or(&[]);
    if entries.len() > OVERLAY_FILES_MAX {
        return Err(
            ctx.err("guest.overlay", format!("{} files is not accepted: at most {OVERLAY_FILES_MAX}", entries.len()))
        );
    }
    let mut out: Vec<Overlay> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let field = |name: &str| format!("guest.overlay[{index}].{name}");
        let from =
            entry.from.as_deref().ok_or_else(|| ctx.err(field("from"), "required: the file's path on the host"))?;
        let from = path_field(ctx, &field("from"), from)?;
        let to = entry
            .to
            .as_deref()
            .ok_or_else(|| ctx.err(field("to"), "required: the file's path in the guest, such as \"etc/motd\""))?;
        let normal = !to.is_empty()
            && !to.starts_with('/')
            && !to.ends_with('/')
            && to.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
            && !to.contains('\0');
        if !normal {
            return Err(ctx.err(field("to"), format!("{to:?} is not accepted: a path relative to the initramfs's root, without \".\", \"..\" or empty parts, such as \"etc/ssh/sshd_config\"")));
        }
        if out.iter().any(|o| o.to == to) {
            return Err(ctx.err(field("to"), format!("{to:?} is named twice")));
        }
        let mode = match entry.mode {
            None => 0o644,
            Some(mode @ 0..=0o7777) => mode as u32,
            Some(mode) => {
                return Err(ctx.err(
                    field("mode"),
                    format!("{mode:#o} is not accepted: permission bits, 0o0 to 0o7777, such as 0o600"),
                ))
            }
        };
        out.push(Overlay { from, to: to.to_string(), mode });
    }
    Ok(out)
}

pub(crate) fn firmware(ctx: &Ctx, field: &str, value: Option<&str>) -> Result<Firmware, CaseError> {
    match value {
        None | Some("default") => Ok(Firmware::Default),
        Some("none") => Ok(Firmware::None),
        Some("") => Err(ctx.err(field, "empty: \"default\" (QEMU's OpenSBI), \"none\", or a path to an image")),
        Some(path) => Ok(Firmware::Path(PathBuf::from(path))),
    }
}

pub(crate) fn external_guest(ctx: &Ctx, raw: &RawGuest) -> Result<ExternalGuest, CaseError> {
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
    let machine = raw.machine.clone();
    if let Some(machine) = machine.as_ref().filter(|m| m.trim().is_empty() || m.contains(char::is_whitespace)) {
        return Err(ctx.err(
            "guest.machine",
            format!("{machine:?} is not accepted: a QEMU machine option string such as \"virt\" or \"virt,aclint=on\" (without it: q35 on x86_64, virt elsewhere)"),
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
        overlay: overlay(ctx, raw)?,
    })
}
