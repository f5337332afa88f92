//! [`Machine`]: QEMU's command line for one boot, as values: the machine, firmware,
//! kernel and the case's settings, then the console on stdio, QMP's arguments, the
//! parts' arguments and the case's own. Also the device tree QEMU builds for that line,
//! dumped and edited when the case edits it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_case::{Arch, Firmware};

use crate::process::Cmd;
use crate::qemu::{last_lines, qemu_binary, rtc_argument, RecordReplay, STDERR_TAIL_LINES};

/// Why the case's device tree could not be made: QEMU's dump, an edit, the packing.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("failed to dump the device tree: {0}")]
    Dump(#[source] crate::process::CmdError),
    /// QEMU ran and refused: the last lines of its stderr.
    #[error("QEMU could not dump the device tree ({status}): {tail}")]
    DumpFailed { status: std::process::ExitStatus, tail: String },
    #[error("failed to read {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// `device_tree[index]` that does not apply to QEMU's tree.
    #[error("device_tree[{index}]: {source}")]
    Edit { index: usize, source: crate::fdt_edit::FdtEditError },
    #[error("device_tree: packing QEMU's tree: {0}")]
    Pack(#[source] crate::fdt_edit::FdtEditError),
    #[error("failed to write {}: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// What QEMU is asked to be for one boot; built by the runner.
#[derive(Clone)]
pub struct Machine {
    pub arch: Arch,
    pub machine: String,
    /// QEMU's accelerator for this boot, decided once per run (`qemu/accel.rs`).
    pub accel: crate::qemu::accel::ChosenAccel,
    pub firmware: Firmware,
    /// The kernel QEMU loads (`-kernel`); None for a guest the firmware boots from
    /// `media`.
    pub kernel: Option<PathBuf>,
    /// The disk image and CD the firmware boots (`guest.image`, `guest.cdrom`).
    pub media: Option<super::media::Media>,
    pub initrd: Option<PathBuf>,
    pub append: Option<String>,
    pub smp: u32,
    pub memory_mib: u32,
    pub icount: Option<String>,
    pub seed: Option<u64>,
    /// The case's `rtc_base`; under icount None is `qemu::PINNED_RTC_BASE`.
    pub rtc_base: Option<String>,
    /// QEMU's record/replay of this boot (under icount only).
    pub rr: Option<RecordReplay>,
    pub extra_args: Vec<String>,
    /// Edits of the device tree QEMU builds for this command line (then booted with -dtb).
    pub dt_edits: Vec<testbench_case::DtEdit>,
    /// The case expects guest resets (`reboots`): QEMU resets the machine instead of
    /// exiting (no `-no-reboot`), and the judge counts QMP's RESET events.
    pub reboots: bool,
    /// The console stamped with the guest's instruction count (`stamps.rs`): its plugin
    /// is loaded at the boot's start (the arguments come with the socket, from stages).
    pub stamp: Option<super::stamps::StampSpec>,
    /// `--coverage`: the coverage plugin, loaded at the boot's start, writing
    /// `coverage.bin` in the boot's directory when QEMU exits (`coverage/`).
    pub cover: Option<crate::coverage::CoverSpec>,
}

/// What one start of QEMU adds to the machine: where it runs, for how long, and the
/// arguments that differ between the boot and the device tree's dump.
pub struct Start<'a> {
    /// The workspace root: QEMU's working directory.
    pub root: &'a Path,
    /// The boot's directory (a recording is kept there).
    pub dir: &'a Path,
    /// The process wrapper's deadline for this QEMU.
    pub deadline: Duration,
    /// QMP's arguments (`-S`, the socket), none for the dump.
    pub qmp: &'a [String],
    /// `-machine`'s value (the dump adds `dumpdtb=`).
    pub machine: &'a str,
    /// The edited tree to boot with.
    pub dtb: Option<&'a Path>,
    pub rr: Option<&'a RecordReplay>,
    /// The parts' arguments, in slot order.
    pub parts: &'a [String],
}

/// Dumping the device tree is a QEMU start that exits at once.
const DUMP_DEADLINE: Duration = Duration::from_secs(30);

impl Machine {
    /// QEMU's tree for this command line (its parts' arguments included), edited, in
    /// `dir`; the path to boot with -dtb.
    pub fn edited_tree(&self, root: &Path, dir: &Path, parts: &[String]) -> Result<PathBuf, TreeError> {
        self.ready_files(dir).map_err(|(path, source)| TreeError::Write { path, source })?;
        let dumped = dir.join("qemu.dtb");
        let machine = format!("{},dumpdtb={}", self.machine, dumped.display());
        let start =
            Start { root, dir, deadline: DUMP_DEADLINE, qmp: &[], machine: &machine, dtb: None, rr: None, parts };
        let dump = self.command(&start).deadline(DUMP_DEADLINE, "QEMU to dump the device tree");
        let output = dump.output().map_err(TreeError::Dump)?;
        if !output.status.success() {
            let tail = last_lines(&String::from_utf8_lossy(&output.stderr), STDERR_TAIL_LINES).join(" | ");
            return Err(TreeError::DumpFailed { status: output.status, tail });
        }
        let mut tree = std::fs::read(&dumped).map_err(|source| TreeError::Read { path: dumped.clone(), source })?;
        for (index, edit) in self.dt_edits.iter().enumerate() {
            crate::fdt_edit::apply(&mut tree, edit).map_err(|source| TreeError::Edit { index, source })?;
        }
        crate::fdt_edit::pack(&mut tree).map_err(TreeError::Pack)?;
        let edited = dir.join("edited.dtb");
        std::fs::write(&edited, &tree).map_err(|source| TreeError::Write { path: edited.clone(), source })?;
        Ok(edited)
    }

    /// The command line: the machine, firmware, kernel, the case's settings, the
    /// console on stdio, QMP's arguments, the parts' arguments, the case's own.
    pub fn command(&self, start: &Start) -> Cmd {
        let Start { root, dir, deadline, qmp: qmp_args, machine, dtb, rr, parts } = *start;
        let qemu = qemu_binary(self.arch);
        // riscv's QEMU names its OpenSBI "default"; x86_64's loads SeaBIOS and aarch64's
        // virt runs the kernel itself (PSCI in QEMU) when no -bios is given.
        let bios = match (&self.firmware, self.arch.has_reference_guest()) {
            (Firmware::Default, true) => Some("default".to_string()),
            (Firmware::None, true) => Some("none".to_string()),
            (Firmware::Default | Firmware::None, false) => None,
            // SeaBIOS is x86_64's default; UEFI comes as pflash drives (`boot_args`).
            (Firmware::Bios | Firmware::Uefi, _) => None,
            (Firmware::Path(path), _) => Some(root.join(path).display().to_string()),
        };
        let mut cmd = Cmd::new(&qemu, format!("{qemu} to boot"), deadline).cwd(root).args([
            "-machine",
            machine,
            "-accel",
            self.accel.name(),
        ]);
        let cpu_given = self.extra_args.iter().any(|arg| arg == "-cpu" || arg == "--cpu");
        if let Some(cpu) = self.arch.default_cpu().filter(|_| !cpu_given) {
            cmd = cmd.args(["-cpu", cpu]);
        }
        if let Some(bios) = bios {
            cmd = cmd.args(["-bios", &bios]);
        }
        if let Some(kernel) = &self.kernel {
            cmd = cmd.arg("-kernel").arg(kernel);
        }
        cmd = cmd.args(self.boot_args(dir));
        if let Some(dtb) = dtb {
            cmd = cmd.arg("-dtb").arg(dtb);
        }
        if let Some(initrd) = &self.initrd {
            cmd = cmd.arg("-initrd").arg(initrd);
        }
        if let Some(append) = &self.append {
            cmd = cmd.args(["-append", append]);
        }
        cmd = cmd.args(["-smp", &self.smp.to_string(), "-m", &format!("{}M", self.memory_mib)]);
        if let Some(icount) = &self.icount {
            let icount = match rr {
                Some(rr) => format!("{icount},{}", rr.icount_suboptions(dir)),
                None => icount.clone(),
            };
            cmd = cmd.args(["-icount", &icount]);
        }
        if let Some(rtc) = rtc_argument(self.icount.is_some(), self.rtc_base.as_deref()) {
            cmd = cmd.args(["-rtc", &rtc]);
        }
        if let Some(seed) = self.seed {
            cmd = cmd.args(["-seed", &seed.to_string()]);
        }
        cmd = cmd.args(["-nodefaults", "-display", "none", "-serial", "stdio"]);
        if !self.reboots {
            cmd = cmd.arg("-no-reboot");
        }
        cmd.args(qmp_args).args(parts).args(&self.extra_args)
    }
}

impl Machine {
    /// The firmware's and the boot media's arguments: UEFI's pflash drives, SeaBIOS's
    /// console on the serial port when it boots media (so its lines are judged), the
    /// image and the CD.
    fn boot_args(&self, dir: &Path) -> Vec<String> {
        let mut args = Vec::new();
        if self.firmware == Firmware::Uefi {
            args.extend(super::media::uefi_args(self.arch, dir));
        }
        if let Some(media) = &self.media {
            if self.arch == Arch::X86_64 && matches!(self.firmware, Firmware::Default | Firmware::Bios) {
                args.extend(super::media::sercon_args(dir));
            }
            args.extend(media.args(self.arch));
        }
        args
    }

    /// The files [`Machine::boot_args`] names in the boot's directory, written before
    /// QEMU starts: the boot's own copy of UEFI's variables, SeaBIOS's console port.
    pub fn ready_files(&self, dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
        if self.firmware == Firmware::Uefi {
            super::media::copy_uefi_vars(self.arch, dir)?;
        }
        if self.media.is_some() && self.arch == Arch::X86_64 {
            super::media::write_sercon(dir)?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A boot of the reference guest at `/ws`, as the runner plans one (other modules'
    /// tests start from it too).
    pub(crate) fn spec() -> Machine {
        Machine {
            arch: Arch::Rv64,
            machine: "virt".into(),
            accel: crate::qemu::accel::ChosenAccel::Tcg,
            firmware: Firmware::Default,
            kernel: Some("/ws/target/testbench/run-1-2/c/build/loader".into()),
            media: None,
            initrd: Some("/ws/target/testbench/run-1-2/c/rv64/bundle".into()),
            append: None,
            smp: 1,
            memory_mib: 256,
            icount: None,
            seed: None,
            rtc_base: None,
            rr: None,
            extra_args: Vec::new(),
            dt_edits: Vec::new(),
            reboots: false,
            stamp: None,
            cover: None,
        }
    }

    /// The boot's directory in these tests.
    const DIR: &str = "/ws/target/testbench/run-1-2/c/rv64-smp1";

    /// The machine's command line for a boot at `/ws` in [`DIR`].
    fn line(spec: &Machine, qmp: &[String], dtb: Option<&Path>, rr: Option<&RecordReplay>, parts: &[String]) -> String {
        let (root, dir) = (Path::new("/ws"), Path::new(DIR));
        let deadline = Duration::from_secs(30);
        spec.command(&Start { root, dir, deadline, qmp, machine: &spec.machine, dtb, rr, parts }).display()
    }

    /// The command line as the boot's `command-line` file holds it, with the QEMU binary
    /// (which `TESTBENCH_QEMU_RV64` may replace) named by its role.
    fn shown(spec: &Machine, dtb: Option<&Path>) -> String {
        let qmp = ["-S", "-chardev", "socket,id=testbench-qmp,path=[QMP],server=off"].map(String::from);
        let line = line(spec, &qmp, dtb, spec.rr.as_ref(), &[]);
        let qemu = crate::process::shell_quote(&qemu_binary(spec.arch));
        // One option a line (no value here holds " -").
        line.replacen(&qemu, "[QEMU]", 1).replace(" -", "\n  -")
    }

    #[test]
    fn command_lines_are_what_they_were() {
        let plain = spec();
        insta::assert_snapshot!("reference-guest", shown(&plain, None));
        let pinned =
            Machine { icount: Some("shift=3".into()), seed: Some(7), rr: Some(RecordReplay::Record), ..spec() };
        insta::assert_snapshot!("icount-seed-pinned-rtc-recorded", shown(&pinned, None));
        let external = Machine {
            arch: Arch::Rv32,
            firmware: Firmware::Path("guests/fw.bin".into()),
            kernel: Some("/ws/images/Image".into()),
            initrd: None,
            append: Some("console=ttyS0 quiet".into()),
            rtc_base: Some("2021-06-30".into()),
            extra_args: vec!["-device".into(), "virtio-rng-device".into()],
            ..spec()
        };
        insta::assert_snapshot!("external-guest-dtb", shown(&external, Some(Path::new("/ws/edited.dtb"))));
        // x86_64: q35, SeaBIOS (no -bios), KVM when the run's probe proved it.
        let x86 = Machine {
            arch: Arch::X86_64,
            machine: "q35".into(),
            accel: crate::qemu::accel::ChosenAccel::Kvm,
            kernel: Some("/ws/images/bzImage".into()),
            initrd: Some("/ws/images/initrd.cpio".into()),
            append: Some("console=ttyS0 panic=-1".into()),
            ..spec()
        };
        insta::assert_snapshot!("x86_64-guest", shown(&x86, None));
        // aarch64: virt with -cpu max unless the case names a CPU; no firmware.
        let arm = Machine {
            arch: Arch::Aarch64,
            kernel: Some("/ws/images/Image".into()),
            initrd: Some("/ws/images/initrd.cpio".into()),
            append: Some("console=ttyAMA0".into()),
            ..spec()
        };
        insta::assert_snapshot!("aarch64-guest", shown(&arm, None));
        let arm_cpu = Machine { extra_args: vec!["-cpu".into(), "cortex-a57".into()], ..arm };
        assert!(!shown(&arm_cpu, None).contains("max"), "a case's own -cpu replaces the default");
    }

    /// A guest the firmware boots: no -kernel; SeaBIOS with its console on the serial
    /// port and the image in snapshot mode on q35's AHCI; OVMF's and AAVMF's code
    /// read-only with the boot's own variables; a kept qcow2 image and a CD on aarch64's
    /// PCI.
    #[test]
    fn media_and_firmware_command_lines_are_what_they_were() {
        use crate::boot::media::{ImageFormat, Media};
        let media = |keep, cdrom: Option<&str>| Media {
            image: Some(("/ws/tests/data/images/boot.img".into(), ImageFormat::Raw)),
            cdrom: cdrom.map(PathBuf::from),
            keep,
        };
        let bios = Machine {
            arch: Arch::X86_64,
            machine: "q35".into(),
            firmware: Firmware::Bios,
            kernel: None,
            initrd: None,
            media: Some(media(false, None)),
            ..spec()
        };
        let shown_bios = shown(&bios, None);
        assert!(!shown_bios.contains("-kernel"), "{shown_bios}");
        insta::assert_snapshot!("x86_64-image-bios", shown_bios);
        let cd = Machine {
            media: Some(Media { image: None, cdrom: Some("/ws/cd.iso".into()), keep: false }),
            firmware: Firmware::Default,
            ..bios.clone()
        };
        insta::assert_snapshot!("x86_64-cdrom-default", shown(&cd, None));
        let uefi = Machine { firmware: Firmware::Uefi, ..bios.clone() };
        let shown_uefi = shown(&uefi, None);
        assert!(!shown_uefi.contains("sercon"), "OVMF has its own serial console: {shown_uefi}");
        insta::assert_snapshot!("x86_64-image-uefi", shown_uefi);
        let arm = Machine {
            arch: Arch::Aarch64,
            machine: "virt".into(),
            firmware: Firmware::Uefi,
            kernel: None,
            initrd: None,
            media: Some(media(true, Some("/ws/cd.iso"))),
            ..spec()
        };
        insta::assert_snapshot!("aarch64-image-cdrom-uefi-kept", shown(&arm, None));
    }

    /// Every device on its slot: the data disk (slot 0), the read-only disk (slot 1),
    /// the card (slot 2) with a forward, a poke, a peer and the capture, the vault
    /// (slot 4); host ports from a lease, so the line is the same every time.
    #[test]
    fn a_command_line_with_every_device_is_what_it_was() {
        every_device(Arch::Rv64, "");
        every_device(Arch::X86_64, "-x86_64");
        every_device(Arch::Aarch64, "-aarch64");
    }

    fn every_device(arch: Arch, suffix: &str) {
        use testbench_case::{DiskLayout, DiskSpec, NetSpec, Peer, Poke};
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("boot");
        std::fs::create_dir(&dir).unwrap();
        let disk = |layout| DiskSpec { layout, keep: false, flip: None, flip_header: None, resize_kept_kib: None };
        let lease = testbench_net::PortSource::Lease(testbench_net::Lease { lo: 40000, hi: 40009 });
        let ports = crate::boot::parts::net::Ports::from_source(lease, 1, 2).unwrap();
        let after = testbench_case::Pattern { label: "net.poke.after".into(), regex: regex::Regex::new("x").unwrap() };
        let net = NetSpec {
            forward: vec![7],
            peers: vec![Peer { addr: "10.0.9.100:7".parse().unwrap(), connections: 1 }],
            poke: Some(Poke { port: 47000, payload: "p".into(), after }),
            ..NetSpec::default()
        };
        let devices: Vec<std::sync::Arc<dyn crate::boot::PartSpec>> = vec![
            std::sync::Arc::new(crate::boot::parts::disk::Disk::new(
                "disk",
                disk(DiskLayout::Zeroed { size_kib: 4 }),
                None,
            )),
            std::sync::Arc::new(crate::boot::parts::disk::Disk::new(
                "userland",
                disk(DiskLayout::Zeroed { size_kib: 4 }),
                None,
            )),
            std::sync::Arc::new(crate::boot::parts::disk::Disk::new(
                "vault",
                disk(DiskLayout::Partitions { size_kib: 1024, count: 1 }),
                None,
            )),
            std::sync::Arc::new(crate::boot::parts::net::Net::new(net, ports, None).unwrap()),
        ];
        let place =
            crate::boot::BootPlace { arch, root: Path::new("/ws"), dir: &dir, first_boot: None, recorded: false };
        let attached = crate::boot::part::attach_all(&devices, &place).unwrap();
        let plain = Machine { arch, machine: arch.default_machine().into(), ..spec() };
        let qmp = ["-S".to_string()];
        let line = line(&plain, &qmp, None, None, &attached.args);
        let exe = std::env::current_exe().unwrap().display().to_string();
        let line = line
            .replacen(&crate::process::shell_quote(&qemu_binary(plain.arch)), "[QEMU]", 1)
            .replace(&dir.display().to_string(), "[BOOT]")
            .replace(&exe, "[BENCH]")
            .replace(" --", " \u{0}")
            .replace(" -", "\n  -")
            .replace('\u{0}', "--");
        insta::assert_snapshot!(format!("every-device{suffix}"), line);
        let log =
            std::fs::read_to_string(dir.join("devices.log")).unwrap().replace(&dir.display().to_string(), "[BOOT]");
        insta::assert_snapshot!(format!("every-device-log{suffix}"), log);
    }
}
