//! A boot case's `[guest]` table (a guest the bench does not build) and the firmware a
//! boot runs under.

use std::path::PathBuf;

use super::raw::RawGuest;
use crate::common::{path_field, Ctx, Refusals};
use crate::{Arch, CaseError, ExternalGuest, Firmware, GuestImage, Overlay};

/// The most files `guest.overlay` adds, and the most bytes one may hold: an overlay brings
/// keys and configuration, not a root file system. The bench reads each file to this
/// bound when it packs the overlay (this crate reads no file).
const OVERLAY_FILES_MAX: usize = 64;
pub const OVERLAY_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// `guest.overlay`: each entry's host path, its place in the guest (relative, no `..`,
/// named once) and its mode (permission bits alone); every refusal of each entry, in the
/// order of its fields.
fn overlay(ctx: &Ctx, raw: &RawGuest) -> Result<Vec<Overlay>, CaseError> {
    let entries = raw.overlay.as_deref().unwrap_or(&[]);
    let mut refused = Refusals::new();
    if entries.len() > OVERLAY_FILES_MAX {
        refused.push(
            ctx.err("guest.overlay", format!("{} files is not accepted: at most {OVERLAY_FILES_MAX}", entries.len())),
        );
    }
    let mut out: Vec<Option<Overlay>> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let field = |name: &str| format!("guest.overlay[{index}].{name}");
        let from = refused.keep(
            entry
                .from
                .as_deref()
                .ok_or_else(|| ctx.err(field("from"), "required: the file's path on the host"))
                .and_then(|from| path_field(ctx, &field("from"), from)),
        );
        let to = refused.keep(match entry.to.as_deref() {
            None => Err(ctx.err(field("to"), "required: the file's path in the guest, such as \"etc/motd\"")),
            Some(to) => {
                let normal = !to.is_empty()
                    && !to.starts_with('/')
                    && !to.ends_with('/')
                    && to.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
                    && !to.contains('\0');
                if !normal {
                    Err(ctx.err(field("to"), format!("{to:?} is not accepted: a path relative to the initramfs's root, without \".\", \"..\" or empty parts, such as \"etc/ssh/sshd_config\"")))
                } else if entries[..index].iter().any(|other| other.to.as_deref() == Some(to)) {
                    // Against the text of every entry before it: named twice whether
                    // or not that entry's other fields are accepted.
                    Err(ctx.err(field("to"), format!("{to:?} is named twice")))
                } else {
                    Ok(to.to_string())
                }
            }
        });
        let mode = refused.keep(match entry.mode {
            None => Ok(0o644),
            Some(mode @ 0..=0o7777) => Ok(mode as u32),
            Some(mode) => Err(ctx.err(
                field("mode"),
                format!("{mode:#o} is not accepted: permission bits, 0o0 to 0o7777, such as 0o600"),
            )),
        });
        out.push(from.zip(to).zip(mode).map(|((from, to), mode)| Overlay { from, to, mode }));
    }
    refused.end(ctx, out.into_iter().collect())
}

pub(crate) fn firmware(ctx: &Ctx, field: &str, value: Option<&str>) -> Result<Firmware, CaseError> {
    match value {
        None | Some("default") => Ok(Firmware::Default),
        Some("none") => Ok(Firmware::None),
        Some("bios") => Ok(Firmware::Bios),
        Some("uefi") => Ok(Firmware::Uefi),
        Some("") => Err(ctx.err(
            field,
            "empty: \"default\" (QEMU's own for the width), \"none\", \"bios\", \"uefi\", or a path to an image",
        )),
        Some(path) => Ok(Firmware::Path(PathBuf::from(path))),
    }
}

/// The firmware against the widths it runs on: a BIOS is x86_64's alone, UEFI is built
/// for x86_64 (OVMF) and aarch64 (AAVMF) and not yet for riscv (U-Boot's EFI on OpenSBI),
/// and the reference guest boots from OpenSBI or nothing.
pub(crate) fn firmware_widths(
    ctx: &Ctx,
    field: &str,
    firmware: &Firmware,
    widths: &[Arch],
    built: bool,
) -> Vec<CaseError> {
    let mut refused = Vec::new();
    let named = |firmware: &Firmware| if *firmware == Firmware::Bios { "bios" } else { "uefi" };
    match firmware {
        Firmware::Bios | Firmware::Uefi if built => refused.push(ctx.err(
            field,
            format!("\"{}\" is not accepted for the reference guest: it boots from OpenSBI (\"default\"), \"none\" or a path", named(firmware)),
        )),
        Firmware::Bios => {
            if let Some(other) = widths.iter().find(|a| **a != Arch::X86_64) {
                refused.push(ctx.err(
                    field,
                    format!("\"bios\" is not accepted on {other}: a PC BIOS (SeaBIOS) exists on x86_64 only; \"uefi\" on aarch64, \"default\" or a path"),
                ));
            }
        }
        Firmware::Uefi => {
            if let Some(riscv) = widths.iter().find(|a| a.has_reference_guest()) {
                refused.push(ctx.err(
                    field,
                    format!("\"uefi\" is not built yet on {riscv} (U-Boot's EFI on OpenSBI): on x86_64 (OVMF) and aarch64 (AAVMF) only; a path to a firmware image"),
                ));
            }
        }
        Firmware::Default | Firmware::None | Firmware::Path(_) => {}
    }
    refused
}

/// A guest booted from an image or a CD: how it boots depends on its firmware: on
/// x86_64 SeaBIOS (`"default"`, `"bios"`) or OVMF (`"uefi"`); on aarch64 only UEFI reads a
/// disk (QEMU's own default loads a kernel and nothing else); on riscv only a firmware
/// image the case names (OpenSBI alone boots no disk). `"none"` boots nothing anywhere.
pub(crate) fn media_firmware(ctx: &Ctx, firmware: &Firmware, widths: &[Arch]) -> Vec<CaseError> {
    let mut refused = Vec::new();
    let field = "guest.firmware";
    match firmware {
        Firmware::None => refused.push(ctx.err(
            field,
            "\"none\" is not accepted with guest.image or guest.cdrom: a firmware boots them (\"default\", \"bios\" or \"uefi\" on x86_64, \"uefi\" on aarch64)",
        )),
        Firmware::Default => {
            for arch in widths.iter().filter(|a| **a != Arch::X86_64) {
                refused.push(ctx.err(
                    field,
                    format!("\"default\" boots no disk on {arch} (QEMU's own loads a -kernel only): \"uefi\" on aarch64, a firmware image's path on riscv"),
                ));
            }
        }
        Firmware::Bios | Firmware::Uefi | Firmware::Path(_) => {}
    }
    refused
}

/// `guest.image`, `guest.cdrom` and `guest.keep`, once the table boots from them: the
/// fields that belong to a kernel QEMU loads (`initrd`, `append`, `overlay`) refused.
fn media(ctx: &Ctx, raw: &RawGuest, refused: &mut Refusals) -> Option<GuestImage> {
    let image = refused.keep(raw.image.as_deref().map(|p| path_field(ctx, "guest.image", p)).transpose());
    let cdrom = refused.keep(raw.cdrom.as_deref().map(|p| path_field(ctx, "guest.cdrom", p)).transpose());
    let mut fine = true;
    for (name, given) in [
        ("guest.initrd", raw.initrd.is_some()),
        ("guest.append", raw.append.is_some()),
        ("guest.overlay", raw.overlay.is_some()),
    ] {
        if given {
            fine = false;
            refused.push(ctx.err(
                name,
                "only with kernel or recipe: a guest booted from guest.image or guest.cdrom is loaded by its own boot loader, which reads its own",
            ));
        }
    }
    if raw.keep.is_some() && raw.image.is_none() {
        fine = false;
        refused.push(ctx.err("guest.keep", "only with guest.image: a CD is never written"));
    }
    let (image, cdrom) = (image?, cdrom?);
    fine.then_some(GuestImage::Media { image, cdrom, keep: raw.keep.unwrap_or(false) })
}

/// A `[guest]` table: every refusal of its fields, in the order of [`GUEST`], each
/// argument of `qemu_args` and each entry of `overlay`.
pub(crate) fn external_guest(ctx: &Ctx, raw: &RawGuest) -> Result<ExternalGuest, CaseError> {
    let mut refused = Refusals::new();
    let on_media = raw.image.is_some() || raw.cdrom.is_some();
    let image = match (&raw.kernel, &raw.recipe) {
        // One boot source: a kernel QEMU loads, a recipe that makes one, or the media a
        // firmware boots.
        (Some(_), _) | (_, Some(_)) if on_media => {
            let (source, medium) = (
                if raw.kernel.is_some() { "kernel" } else { "recipe" },
                if raw.image.is_some() { "guest.image" } else { "guest.cdrom" },
            );
            refused.push(ctx.err(
                medium,
                format!("a [guest] boots from one source: kernel (QEMU loads it), recipe (the bench builds a kernel and an initramfs), or image and/or cdrom (the firmware boots them); this one names guest.{source} too"),
            ));
            None
        }
        (None, None) if on_media => media(ctx, raw, &mut refused),
        (Some(_), Some(_)) => {
            refused.push(
                ctx.err(
                    "guest.recipe",
                    "a [guest] names either kernel (an image) or recipe (a guest recipe), not both",
                ),
            );
            None
        }
        (None, None) => {
            refused.push(ctx.err(
                "guest.kernel",
                "required: the kernel image's path (or guest.recipe, a guest recipe, or guest.image or guest.cdrom, which the firmware boots)",
            ));
            None
        }
        (Some(kernel), None) => {
            let kernel = refused.keep(path_field(ctx, "guest.kernel", kernel));
            let initrd =
                refused.keep(raw.initrd.as_deref().map(|initrd| path_field(ctx, "guest.initrd", initrd)).transpose());
            kernel.zip(initrd).map(|(kernel, initrd)| GuestImage::Files { kernel, initrd })
        }
        (None, Some(recipe)) => {
            let recipe = refused.keep(path_field(ctx, "guest.recipe", recipe));
            if raw.initrd.is_some() {
                refused.push(ctx.err("guest.initrd", "a recipe makes its own initramfs: give initrd only with kernel"));
            }
            recipe.filter(|_| raw.initrd.is_none()).map(GuestImage::Recipe)
        }
    };
    let firmware = refused.keep(firmware(ctx, "guest.firmware", raw.firmware.as_deref()));
    let machine = raw.machine.clone();
    if let Some(machine) = machine.as_ref().filter(|m| m.trim().is_empty() || m.contains(char::is_whitespace)) {
        refused.push(ctx.err(
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
            refused.push(ctx.err(format!("guest.qemu_args[{index}]"), format!("{arg:?} is set by the bench (console, monitor and the guest's images are its own); use guest.kernel, guest.initrd, guest.append, guest.firmware, guest.image, guest.cdrom")));
        }
    }
    let overlay = refused.keep(overlay(ctx, raw));
    let symbols = refused.keep(raw.symbols.as_deref().map(|path| path_field(ctx, "guest.symbols", path)).transpose());
    let made = || {
        Some(ExternalGuest {
            image: image?,
            append: raw.append.clone(),
            firmware: firmware?,
            machine,
            qemu_args,
            overlay: overlay?,
            symbols: symbols?,
        })
    };
    refused.end(ctx, made())
}
