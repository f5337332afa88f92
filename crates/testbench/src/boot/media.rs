//! What people ship, booted through the firmware: a disk image (`guest.image`) and a CD
//! (`guest.cdrom`), their formats told from their first bytes, their QEMU drives, and the
//! UEFI firmware's files per width with the per-boot copy of its variables store.
//!
//! An image is never written unless the case says `keep`: the drive is opened with
//! QEMU's `snapshot=on`, which writes the boot's changes to a temporary overlay QEMU
//! deletes at exit and opens the image itself read-only (chosen over a qcow2 overlay in
//! the boot's directory: no `qemu-img` run per boot, nothing left behind, and boots that
//! share the image run at once without QEMU's write lock refusing the second). A CD is
//! read-only. A format QEMU could only guess, or one it would read differently from the
//! case's intent, is refused before anything boots (`header`).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use testbench_case::Arch;

/// An image's format, from its header: QEMU is told it (`format=`), so it never probes.
pub use testbench_case::ImageFormat;

/// The media a firmware boots, as the machine's command line takes them (absolute
/// paths).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    pub image: Option<(PathBuf, ImageFormat)>,
    pub cdrom: Option<PathBuf>,
    /// The boot writes to the image (`guest.keep`); otherwise `snapshot=on`.
    pub keep: bool,
}

/// Why an image or a CD cannot be booted: said before anything boots, with its field.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{} cannot be read: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is empty: a disk image holds at least a boot sector", .path.display())]
    Empty { path: PathBuf },
    #[error("{} is {what}, which the bench does not boot: a raw or qcow2 image (qemu-img convert -O qcow2 turns it into one)", .path.display())]
    Foreign { path: PathBuf, what: &'static str },
    #[error("{} is a qcow2 image of version {version}: QEMU opens versions 2 and 3", .path.display())]
    Qcow2Version { path: PathBuf, version: u32 },
    #[error("{} is not an ISO 9660 image (no \"CD001\" at byte 32769): a CD image such as xorriso writes", .path.display())]
    NotIso { path: PathBuf },
}

/// The magic numbers of image formats QEMU knows besides raw and qcow2: an image that
/// starts with one is refused, not booted as raw bytes.
const FOREIGN: [(&[u8], &str); 5] = [
    (b"KDMV", "a VMDK image"),
    (b"<<< ", "a VirtualBox VDI image"),
    (b"vhdxfile", "a VHDX image"),
    (b"conectix", "a VHD image"),
    (b"QED\0", "a QED image"),
];

/// The first `len` bytes of `path` (fewer when it is shorter).
fn head(path: &Path, len: usize) -> Result<Vec<u8>, MediaError> {
    let read = |source| MediaError::Read { path: path.to_path_buf(), source };
    let mut bytes = Vec::with_capacity(len);
    std::fs::File::open(path).map_err(read)?.take(len as u64).read_to_end(&mut bytes).map_err(read)?;
    Ok(bytes)
}

/// A disk image's format from its header: qcow2 (version 2 or 3) by its magic, a known
/// foreign format refused, anything else non-empty raw.
pub fn image_format(path: &Path) -> Result<ImageFormat, MediaError> {
    let bytes = head(path, 512)?;
    if bytes.is_empty() {
        return Err(MediaError::Empty { path: path.to_path_buf() });
    }
    if bytes.starts_with(b"QFI\xfb") {
        let version = bytes.get(4..8).map(|v| u32::from_be_bytes(v.try_into().expect("four bytes"))).unwrap_or(0);
        return match version {
            2 | 3 => Ok(ImageFormat::Qcow2),
            version => Err(MediaError::Qcow2Version { path: path.to_path_buf(), version }),
        };
    }
    if let Some((_, what)) = FOREIGN.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Err(MediaError::Foreign { path: path.to_path_buf(), what });
    }
    Ok(ImageFormat::Raw)
}

/// An ISO 9660 image: its first volume descriptor (sector 16 of 2048 bytes) says `CD001`.
pub fn check_iso(path: &Path) -> Result<(), MediaError> {
    let bytes = head(path, 16 * 2048 + 6)?;
    if bytes.get(16 * 2048 + 1..16 * 2048 + 6) == Some(b"CD001".as_slice()) {
        Ok(())
    } else {
        Err(MediaError::NotIso { path: path.to_path_buf() })
    }
}

/// A path in a `-drive` option: QEMU's option syntax doubles a comma.
fn drive_path(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}

/// The drive ids the bench gives the boot media (the history reads the image's path
/// back from the `command-line` by them).
pub const IMAGE_DRIVE: &str = "testbench-image";
pub const CDROM_DRIVE: &str = "testbench-cdrom";

impl Media {
    /// QEMU's arguments for the media: on x86_64 the q35's own AHCI controller (the
    /// image its first disk, the CD the next port), which SeaBIOS and OVMF both boot
    /// from; elsewhere a virtio-blk disk and a virtio-scsi CD on PCI, away from the
    /// virtio-mmio slots the devices use.
    pub fn args(&self, arch: Arch) -> Vec<String> {
        let mut args = Vec::new();
        let ahci = arch == Arch::X86_64;
        if let Some((path, format)) = &self.image {
            let snapshot = if self.keep { "" } else { ",snapshot=on" };
            args.push("-drive".into());
            args.push(format!("file={},format={},if=none,id={IMAGE_DRIVE}{snapshot}", drive_path(path), format.name()));
            args.push("-device".into());
            args.push(if ahci {
                format!("ide-hd,drive={IMAGE_DRIVE},bus=ide.0,bootindex=0")
            } else {
                format!("virtio-blk-pci,drive={IMAGE_DRIVE},bootindex=0")
            });
        }
        if let Some(path) = &self.cdrom {
            args.push("-drive".into());
            args.push(format!("file={},format=raw,if=none,id={CDROM_DRIVE},media=cdrom,readonly=on", drive_path(path)));
            if !ahci {
                args.extend(["-device".into(), "virtio-scsi-pci,id=testbench-scsi".into()]);
            }
            args.push("-device".into());
            args.push(if ahci {
                format!("ide-cd,drive={CDROM_DRIVE},bus=ide.1,bootindex=1")
            } else {
                format!("scsi-cd,drive={CDROM_DRIVE},bus=testbench-scsi.0,bootindex=1")
            });
        }
        args
    }
}

/// UEFI's firmware for a width, from Debian's packages: the code (read-only pflash) and
/// the variables store's template, copied into each boot's directory so no boot changes
/// another's (or the package's) variables. None: UEFI is not built for the width.
pub fn uefi_files(arch: Arch) -> Option<(&'static str, &'static str, &'static str)> {
    match arch {
        Arch::X86_64 => Some(("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf")),
        Arch::Aarch64 => Some(("/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd", "qemu-efi-aarch64")),
        Arch::Rv64 | Arch::Rv32 => None,
    }
}

/// The boot's copy of the UEFI variables store.
pub const UEFI_VARS: &str = "uefi-vars.fd";

/// QEMU's arguments for UEFI in the boot's directory `dir`: the code read-only, the
/// boot's own variables.
pub fn uefi_args(arch: Arch, dir: &Path) -> Vec<String> {
    let Some((code, _, _)) = uefi_files(arch) else { return Vec::new() };
    vec![
        "-drive".into(),
        format!("if=pflash,format=raw,unit=0,readonly=on,file={}", drive_path(Path::new(code))),
        "-drive".into(),
        format!("if=pflash,format=raw,unit=1,file={}", drive_path(&dir.join(UEFI_VARS))),
    ]
}

/// Copy the width's variables store into the boot's directory (again: each start of
/// QEMU for the boot begins from the package's template).
pub fn copy_uefi_vars(arch: Arch, dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    let Some((_, vars, _)) = uefi_files(arch) else { return Ok(()) };
    let to = dir.join(UEFI_VARS);
    std::fs::copy(vars, &to).map(|_| ()).map_err(|e| (to, e))
}

/// SeaBIOS's console on the serial port the bench reads (its `etc/sercon-port`, a
/// little-endian port number): the firmware's own lines (`Booting from Hard Disk...`,
/// `No bootable device.`) reach the judge, from the console's first byte. Written into
/// the boot's directory, as QEMU's `-fw_cfg` takes a file.
pub const SERCON_FILE: &str = "sercon-port";

pub fn sercon_args(dir: &Path) -> Vec<String> {
    vec!["-fw_cfg".into(), format!("name=etc/sercon-port,file={}", drive_path(&dir.join(SERCON_FILE)))]
}

pub fn write_sercon(dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    let to = dir.join(SERCON_FILE);
    std::fs::write(&to, 0x3f8u16.to_le_bytes()).map_err(|e| (to, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn image_formats_are_told_from_their_headers_and_foreign_ones_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let raw = file(tmp.path(), "raw", &[0u8; 512]);
        assert_eq!(image_format(&raw).unwrap(), ImageFormat::Raw);
        let qcow2 = file(tmp.path(), "q", b"QFI\xfb\0\0\0\x03rest");
        assert_eq!(image_format(&qcow2).unwrap(), ImageFormat::Qcow2);
        let old = file(tmp.path(), "q1", b"QFI\xfb\0\0\0\x01rest");
        assert!(matches!(image_format(&old), Err(MediaError::Qcow2Version { version: 1, .. })));
        let vmdk = file(tmp.path(), "v", b"KDMV\x01\0\0\0");
        let error = image_format(&vmdk).unwrap_err().to_string();
        assert!(error.contains("a VMDK image") && error.contains("qemu-img convert"), "{error}");
        let empty = file(tmp.path(), "e", b"");
        assert!(matches!(image_format(&empty), Err(MediaError::Empty { .. })));
        assert!(matches!(image_format(&tmp.path().join("absent")), Err(MediaError::Read { .. })));
    }

    #[test]
    fn an_iso_is_told_by_its_volume_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = vec![0u8; 17 * 2048];
        let not = file(tmp.path(), "not.iso", &bytes);
        assert!(matches!(check_iso(&not), Err(MediaError::NotIso { .. })));
        bytes[16 * 2048..16 * 2048 + 6].copy_from_slice(b"\x01CD001");
        let iso = file(tmp.path(), "yes.iso", &bytes);
        check_iso(&iso).unwrap();
        let short = file(tmp.path(), "short.iso", b"CD001");
        assert!(matches!(check_iso(&short), Err(MediaError::NotIso { .. })));
    }

    #[test]
    fn an_image_is_opened_in_snapshot_mode_unless_kept() {
        let media = Media {
            image: Some(("/i,mg/disk.qcow2".into(), ImageFormat::Qcow2)),
            cdrom: Some("/iso/cd.iso".into()),
            keep: false,
        };
        let args = media.args(Arch::X86_64).join(" ");
        assert_eq!(
            args,
            "-drive file=/i,,mg/disk.qcow2,format=qcow2,if=none,id=testbench-image,snapshot=on \
             -device ide-hd,drive=testbench-image,bus=ide.0,bootindex=0 \
             -drive file=/iso/cd.iso,format=raw,if=none,id=testbench-cdrom,media=cdrom,readonly=on \
             -device ide-cd,drive=testbench-cdrom,bus=ide.1,bootindex=1"
        );
        let kept = Media { keep: true, cdrom: None, ..media };
        assert!(!kept.args(Arch::Aarch64).join(" ").contains("snapshot"));
        assert!(kept.args(Arch::Aarch64).join(" ").contains("virtio-blk-pci,drive=testbench-image"));
    }
}
