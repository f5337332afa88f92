//! A boot case's `[guest]` table (a guest the bench does not build) and the firmware a
//! boot runs under.

use std::path::PathBuf;

use super::raw::RawGuest;
use crate::common::{path_field, Ctx};
use crate::{CaseError, ExternalGuest, Firmware, GuestImage};

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
