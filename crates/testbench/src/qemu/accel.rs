//! The accelerator each boot runs under: `accel = "tcg" | "kvm" | "auto"`.
//!
//! KVM is used only once it is proven: `/dev/kvm` existing is not enough (a host may
//! expose it and still fail ordinary guests), so the bench boots a tiny guest under it
//! once per run and width, before the first boot, and trusts KVM only if that guest ran
//! and reported through a device outside it. The run prints what it chose and why.
//!
//! The probe's guest is a 64 KiB firmware image QEMU loads with `-bios`: at the reset
//! vector it leaves real mode for 32-bit protected mode, turns on PAE paging and long
//! mode as an ordinary 64-bit kernel's start does, runs CPUID in long mode, and writes a
//! byte to an `isa-debug-exit` port, which makes QEMU exit with `(byte << 1) | 1`. Each
//! step a broken KVM fails on ends the probe differently: an exit status other than the
//! expected one, QEMU's own error, or the deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use testbench_case::{Accel, Arch};

use crate::process::Cmd;

/// The probe's guest runs in microseconds; the deadline covers QEMU's start on a loaded
/// host. A KVM that cannot run the guest mostly hangs it (on this project's machines,
/// at the far jump into protected mode), so a broken KVM costs the run this long, on the
/// probe's own thread while the guests build.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);
/// The byte the probe's guest writes to the debug-exit port once it ran in long mode.
const PROBE_BYTE: u8 = 0x2a;
/// The port the debug-exit device listens on.
const DEBUG_EXIT_PORT: u16 = 0xf4;

/// The accelerator a boot runs under, decided before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChosenAccel {
    Tcg,
    Kvm,
}

impl ChosenAccel {
    /// QEMU's `-accel` value.
    pub fn name(self) -> &'static str {
        match self {
            ChosenAccel::Tcg => "tcg",
            ChosenAccel::Kvm => "kvm",
        }
    }
}

/// What the run's probe found of KVM for one width: usable (how long the tiny boot
/// took), or why not.
pub type KvmProbe = Result<Duration, NoKvm>;

/// Why KVM cannot run a width's boots here, in the words the run prints.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoKvm {
    #[error("the host is {host}, not {arch}")]
    OtherWidth { host: &'static str, arch: Arch },
    #[error("the bench has no KVM probe guest for {0} yet")]
    NoProbeGuest(Arch),
    #[error("/dev/kvm cannot be opened for reading and writing: {0}")]
    Device(String),
    #[error("writing {}: {why}", path.display())]
    Image { path: std::path::PathBuf, why: String },
    #[error("the probe guest did not reach long mode under {accel} within {secs} s; QEMU was killed")]
    Deadline { accel: String, secs: u64 },
    #[error("the probe boot under {accel} failed: {why}")]
    Start { accel: String, why: String },
    /// The guest ran but did not report (its exit status, QEMU's last stderr lines).
    #[error("the probe guest did not report from long mode under {accel} ({status}, wanted exit status {want}){said}")]
    NoReport { accel: String, status: String, want: i32, said: String },
}

/// Why a case that insists on KVM cannot boot on a width.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvmRefused {
    #[error("accel = \"kvm\", but KVM is not usable here: {0}")]
    Unusable(NoKvm),
    #[error("accel = \"kvm\", but no KVM probe ran for {0}")]
    NotProbed(Arch),
}

/// Whether a case's boots on `arch` may want KVM (the probe runs only then).
pub fn wants_kvm(accel: Accel, icount: bool, arch: Arch) -> bool {
    accel != Accel::Tcg && !icount && Some(arch) == Arch::host()
}

/// Probe KVM for `arch` (the host's width) with the tiny boot, its image written into
/// `dir`.
pub fn probe_kvm(arch: Arch, dir: &Path) -> KvmProbe {
    if Some(arch) != Arch::host() {
        return Err(NoKvm::OtherWidth { host: std::env::consts::ARCH, arch });
    }
    if arch != Arch::X86_64 {
        return Err(NoKvm::NoProbeGuest(arch));
    }
    let kvm = Path::new("/dev/kvm");
    if let Err(error) = std::fs::OpenOptions::new().read(true).write(true).open(kvm) {
        return Err(NoKvm::Device(error.to_string()));
    }
    let image = dir.join("kvm-probe.bin");
    std::fs::write(&image, probe_image(PROBE_BYTE))
        .map_err(|e| NoKvm::Image { path: image.clone(), why: e.to_string() })?;
    boot_probe(arch, "kvm", &image)
}

/// Boot the probe image under `accel`: how long it took, or what went wrong.
fn boot_probe(arch: Arch, accel: &str, image: &Path) -> KvmProbe {
    let qemu = super::qemu_binary(arch);
    let start = Instant::now();
    let output = Cmd::new(&qemu, format!("{qemu} to boot the {accel} probe"), PROBE_DEADLINE)
        .args(["-accel", accel, "-machine", "q35", "-m", "16M", "-nodefaults", "-display", "none"])
        .arg("-bios")
        .arg(image)
        .args(["-device", &format!("isa-debug-exit,iobase={DEBUG_EXIT_PORT:#x},iosize=1"), "-no-reboot"])
        .output()
        .map_err(|e| match e {
            testbench_process::CmdError::Deadline { after, .. } => {
                NoKvm::Deadline { accel: accel.to_string(), secs: after.as_secs() }
            }
            other => NoKvm::Start { accel: accel.to_string(), why: other.to_string() },
        })?;
    let took = start.elapsed();
    let want = i32::from(PROBE_BYTE) << 1 | 1;
    match output.status.code() {
        Some(code) if code == want => Ok(took),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let said = super::last_lines(&stderr, 2).join(" | ");
            Err(NoKvm::NoReport {
                accel: accel.to_string(),
                status: output.status.to_string(),
                want,
                said: if said.is_empty() { String::new() } else { format!(": {said}") },
            })
        }
    }
}

/// Decide one case's accelerator on one width, given the run's probe of it (None when
/// no probe ran: not the host's width, or no boot wanted KVM). The reason is for the
/// run's output; an error is why a case that insists on KVM cannot boot.
pub fn choose(
    accel: Accel,
    icount: bool,
    arch: Arch,
    probe: Option<&KvmProbe>,
) -> Result<(ChosenAccel, String), KvmRefused> {
    match accel {
        Accel::Tcg => Ok((ChosenAccel::Tcg, "accel = \"tcg\"".into())),
        Accel::Kvm => match probe {
            Some(Ok(_)) => Ok((ChosenAccel::Kvm, "accel = \"kvm\", and the probe booted under KVM".into())),
            Some(Err(why)) => Err(KvmRefused::Unusable(why.clone())),
            None => Err(KvmRefused::NotProbed(arch)),
        },
        Accel::Auto if Some(arch) != Arch::host() => {
            Ok((ChosenAccel::Tcg, format!("auto: the host is {}, so KVM cannot run {arch}", std::env::consts::ARCH)))
        }
        Accel::Auto if icount => Ok((ChosenAccel::Tcg, "auto: icount runs only under TCG".into())),
        Accel::Auto => match probe {
            Some(Ok(took)) => {
                Ok((ChosenAccel::Kvm, format!("auto: the probe booted under KVM in {} ms", took.as_millis())))
            }
            Some(Err(why)) => Ok((ChosenAccel::Tcg, format!("auto: KVM is not usable ({why})"))),
            None => Ok((ChosenAccel::Tcg, format!("auto: no KVM probe ran for {arch}"))),
        },
    }
}

/// The probe's firmware image: 64 KiB (the size QEMU's x86 `-bios` takes), its code at
/// the top, the reset vector jumping back to it; `byte` is what it writes to the
/// debug-exit port once in long mode.
pub fn probe_image(byte: u8) -> Vec<u8> {
    let mut image = vec![0xf4u8; SIZE]; // hlt everywhere else
    write_gdt(&mut image);
    let mut code: Vec<u8> = Vec::new();
    enter_protected_mode(&mut code);
    enter_long_mode(&mut code);
    // 64-bit long mode: a stack in low RAM, CPUID leaf 0 (must name a vendor: ebx != 0),
    // then out PROBE_BYTE to the debug-exit port; a zero ebx hangs instead (the deadline).
    // mov esp, 0x8000; xor eax, eax; cpuid; test ebx, ebx; jz hang
    code.extend([0xbc, 0x00, 0x80, 0x00, 0x00, 0x31, 0xc0, 0x0f, 0xa2, 0x85, 0xdb, 0x74, 0x04]);
    // mov al, PROBE_BYTE; out DEBUG_EXIT_PORT, al
    code.extend([0xb0, byte, 0xe6, DEBUG_EXIT_PORT as u8]);
    // hang: hlt; jmp hang
    code.extend([0xf4, 0xeb, 0xfd]);
    image[CODE..CODE + code.len()].copy_from_slice(&code);
    // The reset vector, 16 bytes below the top: jmp far 0xf000:0xf000 (real mode CS
    // 0xf000 has base 0xf0000 after the jump, but the code's linear addresses above are
    // computed for CS base 0xffff0000, which CS keeps until the first far jump): a near
    // jmp instead, staying in the reset CS.
    let reset = SIZE - 16;
    let rel = CODE as i32 - (reset as i32 + 3);
    image[reset] = 0xe9;
    image[reset + 1..reset + 3].copy_from_slice(&(rel as i16).to_le_bytes());
    image
}

// Everything the probe runs is in the image's last 4 KiB, mapped at 0xffff_f000 (and, in
// real mode, at 0xf000:0xf000). Tables live at fixed addresses in the image.
const SIZE: usize = 64 * 1024;
const BASE: u32 = 0xffff_0000;
/// The code's offset in the image.
const CODE: usize = 0xf000;
/// The GDT's offset.
const GDT: usize = 0xfe00;
/// The GDT's pseudo-descriptor's offset.
const GDT_PTR: usize = 0xfe40;

/// The linear address the next byte of `code` runs at.
fn at(code: &[u8]) -> u32 {
    BASE + CODE as u32 + code.len() as u32
}

/// The GDT and its pseudo-descriptor, at their offsets.
fn write_gdt(image: &mut [u8]) {
    // GDT: null, 32-bit code (0x08), data (0x10), 64-bit code (0x18).
    let gdt: [u64; 4] = [0, 0x00cf_9a00_0000_ffff, 0x00cf_9200_0000_ffff, 0x00af_9a00_0000_ffff];
    for (index, entry) in gdt.iter().enumerate() {
        image[GDT + index * 8..GDT + index * 8 + 8].copy_from_slice(&entry.to_le_bytes());
    }
    image[GDT_PTR..GDT_PTR + 2].copy_from_slice(&(gdt.len() as u16 * 8 - 1).to_le_bytes());
    image[GDT_PTR + 2..GDT_PTR + 6].copy_from_slice(&(BASE + GDT as u32).to_le_bytes());
}

/// From the reset's real mode into 32-bit protected mode, data segments set.
fn enter_protected_mode(code: &mut Vec<u8>) {
    // Real mode, CS base 0xffff0000: cli; lgdtl cs:GDT_PTR (operand-size prefix for the
    // 32-bit base).
    code.extend([0xfa, 0x66, 0x2e, 0x0f, 0x01, 0x16]);
    code.extend((GDT_PTR as u16).to_le_bytes());
    // mov eax, cr0; or al, 1; mov cr0, eax
    code.extend([0x0f, 0x20, 0xc0, 0x0c, 0x01, 0x0f, 0x22, 0xc0]);
    // ljmpl 0x08:protected (66 ea imm32 imm16)
    let protected_at = at(code) + 8;
    code.extend([0x66, 0xea]);
    code.extend(protected_at.to_le_bytes());
    code.extend(0x08u16.to_le_bytes());
    assert_eq!(at(code), protected_at);
    // 32-bit protected mode: data segments.
    // mov ax, 0x10; mov ds, ax; mov es, ax; mov ss, ax
    code.extend([0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0]);
}

/// Page tables built, PAE and long mode enabled, paging on, and the far jump into the
/// 64-bit code segment.
fn enter_long_mode(code: &mut Vec<u8>) {
    // Page tables in low RAM: PML4 at 0x1000 -> PDPT at 0x2000 -> PD at 0x3000, whose
    // first two entries map 0..4 MiB with 2 MiB pages; the PDPT's entry 3 maps the top
    // GiB (the image) through a second PD at 0x4000 whose last entry is a 2 MiB page at
    // 0xffe00000.
    // Clear 0x1000..0x5000: mov edi, 0x1000; mov ecx, 0x1000; xor eax, eax; rep stosd
    code.extend([0xbf, 0x00, 0x10, 0x00, 0x00, 0xb9, 0x00, 0x10, 0x00, 0x00, 0x31, 0xc0, 0xf3, 0xab]);
    let store = |code: &mut Vec<u8>, address: u32, value: u32| {
        // mov dword [address], value
        code.extend([0xc7, 0x05]);
        code.extend(address.to_le_bytes());
        code.extend(value.to_le_bytes());
    };
    store(code, 0x1000, 0x2003); // PML4[0] -> PDPT, present + writable
    store(code, 0x2000, 0x3003); // PDPT[0] -> PD low
    store(code, 0x2018, 0x4003); // PDPT[3] -> PD high
    store(code, 0x3000, 0x0000_0083); // PD low[0]: 0..2 MiB, large page
    store(code, 0x3008, 0x0020_0083); // PD low[1]: 2..4 MiB
    store(code, 0x4000 + 511 * 8, 0xffe0_0083); // PD high[511]: 0xffe00000..
                                                // mov eax, cr4; or eax, 0x20 (PAE); mov cr4, eax
    code.extend([0x0f, 0x20, 0xe0, 0x83, 0xc8, 0x20, 0x0f, 0x22, 0xe0]);
    // mov eax, 0x1000; mov cr3, eax
    code.extend([0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8]);
    // EFER.LME: mov ecx, 0xc0000080; rdmsr; or eax, 0x100; wrmsr
    code.extend([0xb9, 0x80, 0x00, 0x00, 0xc0, 0x0f, 0x32, 0x0d, 0x00, 0x01, 0x00, 0x00, 0x0f, 0x30]);
    // mov eax, cr0; or eax, 0x80000001 (PG | PE); mov cr0, eax
    code.extend([0x0f, 0x20, 0xc0, 0x0d, 0x01, 0x00, 0x00, 0x80, 0x0f, 0x22, 0xc0]);
    // ljmp 0x18:long
    let long_at = at(code) + 7;
    code.push(0xea);
    code.extend(long_at.to_le_bytes());
    code.extend(0x18u16.to_le_bytes());
    assert_eq!(at(code), long_at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_tcg_under_icount_and_off_the_hosts_width_and_when_the_probe_failed() {
        let ok: KvmProbe = Ok(Duration::from_millis(90));
        let failed: KvmProbe = Err(NoKvm::Device("no".into()));
        let host = Arch::host().unwrap_or(Arch::X86_64);
        let other = if host == Arch::Aarch64 { Arch::X86_64 } else { Arch::Aarch64 };
        assert_eq!(choose(Accel::Auto, true, host, Some(&ok)).unwrap().0, ChosenAccel::Tcg);
        assert_eq!(choose(Accel::Auto, false, other, None).unwrap().0, ChosenAccel::Tcg);
        assert_eq!(choose(Accel::Auto, false, host, Some(&failed)).unwrap().0, ChosenAccel::Tcg);
        assert!(choose(Accel::Auto, false, host, Some(&failed))
            .unwrap()
            .1
            .ends_with("(/dev/kvm cannot be opened for reading and writing: no)"));
        assert_eq!(choose(Accel::Auto, false, host, Some(&ok)).unwrap().0, ChosenAccel::Kvm);
        assert_eq!(choose(Accel::Tcg, false, host, Some(&ok)).unwrap().0, ChosenAccel::Tcg);
        assert_eq!(choose(Accel::Kvm, false, host, Some(&ok)).unwrap().0, ChosenAccel::Kvm);
        let refused = choose(Accel::Kvm, false, host, Some(&failed)).unwrap_err();
        assert_eq!(refused, KvmRefused::Unusable(NoKvm::Device("no".into())));
        assert!(refused.to_string().contains("not usable here: /dev/kvm cannot be opened"), "{refused}");
        assert_eq!(choose(Accel::Kvm, false, host, None).unwrap_err(), KvmRefused::NotProbed(host));
    }

    /// The probe guest is right: under TCG it reaches long mode and reports, so a probe
    /// that fails under KVM is KVM's failure. A guest that reports another byte is told
    /// apart from one that reports the expected one.
    #[test]
    fn the_probe_guest_reports_from_long_mode_under_tcg_and_a_wrong_report_is_refused() {
        let image = probe_image(PROBE_BYTE);
        assert_eq!(image.len(), 64 * 1024);
        assert_eq!(image[image.len() - 16], 0xe9);
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.bin");
        std::fs::write(&good, &image).unwrap();
        let took = boot_probe(Arch::X86_64, "tcg", &good).unwrap();
        assert!(took < PROBE_DEADLINE);
        let wrong = dir.path().join("wrong.bin");
        std::fs::write(&wrong, probe_image(PROBE_BYTE + 1)).unwrap();
        let refused = boot_probe(Arch::X86_64, "tcg", &wrong).unwrap_err();
        assert!(matches!(refused, NoKvm::NoReport { want: 85, .. }), "{refused:?}");
        assert!(refused.to_string().contains("wanted exit status 85"), "{refused}");
    }
}
