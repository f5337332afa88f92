//! What the boots need, made ready: each (case, width)'s build (each distinct build once)
//! or recipe image, the QEMU probe and firmware check of each width, and the `BootSpec`
//! of each planned boot with its judge's configuration.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use testbench_case::{Arch, BootCase, Case, Firmware, Guest, GuestImage, ProgramEntry};
use testbench_judge::{Config as JudgeConfig, Input as JudgeInput, Pattern as JudgePattern, ServerDone};

use super::intake::OverlayError;
use super::plan::PlannedBoot;
use crate::boot::{BootSpec, Machine, Plan};
use crate::build::{BuildKey, Builder, Profile, LOADER_PACKAGE};
use crate::case_result::Blocked;
use crate::config::Config;
use crate::qemu::accel::ChosenAccel;
use crate::qemu::qmp::QmpDir;
use crate::qemu::{Probe, RecordReplay};
use crate::report::Reporter;
use crate::workspace::Workspace;

/// After the last expect the bench keeps reading this long (a checked build: `SETTLE_CHECKED`).
pub const SETTLE: Duration = Duration::from_millis(50);
pub const SETTLE_CHECKED: Duration = Duration::from_secs(1);

/// What each (case, width) boots, once built.
#[derive(Clone)]
pub struct Prepared {
    /// None for a guest the firmware boots from `media`.
    kernel: Option<PathBuf>,
    media: Option<crate::boot::media::Media>,
    initrd: Option<PathBuf>,
    append: Option<String>,
    firmware: Firmware,
    machine: String,
    /// TCG until the probes are joined ([`block_on_host_lacks`] decides).
    accel: ChosenAccel,
    extra_args: Vec<String>,
    /// The reference kernel's ELF built for it (a crash's frames are symbolized against it).
    kernel_elf: Option<PathBuf>,
}

/// A guest recipe that could not be read or built: the same failure for every case that
/// names it.
#[derive(Debug, thiserror::Error)]
pub enum RecipeFailed {
    #[error("{0}")]
    Load(testbench_recipe::RecipeError),
    #[error("guest recipe {}: {error}", path.display())]
    Build { path: PathBuf, error: testbench_recipe::RecipeError },
}

/// The run's guest images, made once per recipe (or its failure, shared).
pub type Recipes = HashMap<PathBuf, Result<testbench_recipe::Image, Arc<RecipeFailed>>>;

impl Prepared {
    /// What a prebuilt directory keeps of it: its files stored in the width's directory
    /// (`width_dir`, named `width` in DIR), the rest as it is.
    pub fn to_entry(
        &self,
        width_dir: &Path,
        width: &str,
    ) -> Result<crate::prebuilt::Entry, crate::prebuilt::StoreError> {
        let store = |path: &Path| crate::prebuilt::store(width_dir, width, path);
        Ok(crate::prebuilt::Entry::Ready {
            kernel: self.kernel.as_deref().map(store).transpose()?,
            media: self.media.clone(),
            initrd: self.initrd.as_deref().map(store).transpose()?,
            append: self.append.clone(),
            firmware: match &self.firmware {
                Firmware::Default => "default".into(),
                Firmware::None => "none".into(),
                Firmware::Bios => "bios".into(),
                Firmware::Uefi => "uefi".into(),
                Firmware::Path(path) => format!("path:{}", path.display()),
            },
            machine: self.machine.clone(),
            extra_args: self.extra_args.clone(),
        })
    }

    /// A prebuilt directory's entry as the boots take it (its paths below `dir`).
    pub fn from_entry(entry: &crate::prebuilt::Entry, dir: &Path) -> Result<Prepared, Blocked> {
        match entry {
            crate::prebuilt::Entry::Failed { why } => {
                Err(Blocked::Build(format!("{why}\n(this build failed when {} was prebuilt)", dir.display())))
            }
            crate::prebuilt::Entry::Ready { kernel, media, initrd, append, firmware, machine, extra_args } => {
                Ok(Prepared {
                    kernel: kernel.as_ref().map(|k| dir.join(k)),
                    media: media.clone(),
                    initrd: initrd.as_ref().map(|i| dir.join(i)),
                    append: append.clone(),
                    firmware: match firmware.as_str() {
                        "default" => Firmware::Default,
                        "none" => Firmware::None,
                        "bios" => Firmware::Bios,
                        "uefi" => Firmware::Uefi,
                        other => Firmware::Path(other.strip_prefix("path:").unwrap_or(other).into()),
                    },
                    machine: machine.clone(),
                    accel: ChosenAccel::Tcg,
                    extra_args: extra_args.clone(),
                    kernel_elf: None,
                })
            }
        }
    }
}

/// The place the log server gives a program: 2 for the first it starts, and so on.
fn place_of(programs: &[ProgramEntry], name: &str) -> Option<u32> {
    programs.iter().skip(1).position(|p| p.program.entry_name() == name).map(|i| i as u32 + 2)
}

fn judge_config(boot: &BootCase, config: &Config) -> JudgeConfig {
    let pattern = |p: &testbench_case::Pattern| JudgePattern { label: p.label.clone(), regex: p.regex.clone() };
    let mut expect: Vec<JudgePattern> = boot.expect.iter().map(pattern).collect();
    let mut server_done = None;
    if let Guest::Built { programs, .. } = &boot.guest {
        if !programs.is_empty() {
            // Rule F: the log server's one done line, naming the reporter's place, is the
            // verdict; the bench waits for it as the last expect.
            let reporter_place = boot.reporter.as_deref().and_then(|name| place_of(programs, name));
            if let Some(place) = reporter_place {
                expect.push(JudgePattern {
                    label: "reporter".into(),
                    regex: regex::Regex::new(&format!(r"^\[server\] done: {place}$")).expect("a fixed pattern"),
                });
            }
            server_done = Some(ServerDone { reporter_place });
        }
    }
    // Every expect belongs to the first boot; each reboot_expect to the boot after its reset.
    let mut expect_resets = vec![0; expect.len()];
    for (reset, p) in (1..).zip(&boot.reboot_expect) {
        expect.push(pattern(p));
        expect_resets.push(reset);
    }
    JudgeConfig {
        expect,
        forbid: boot.forbid.iter().map(pattern).collect(),
        always_forbidden: config
            .always_forbidden
            .iter()
            .filter(|text| !(boot.allow_panic && text.as_str() == "PANIC"))
            .map(|text| JudgePattern {
                label: "always-forbidden".into(),
                regex: regex::Regex::new(&regex::escape(text)).expect("an escaped literal is a regex"),
            })
            .collect(),
        inputs: boot
            .inputs
            .iter()
            .map(|i| JudgeInput { after: pattern(&i.after), send: i.send.as_bytes().to_vec() })
            .collect(),
        poweroff: boot.poweroff,
        poweroff_status: boot.poweroff_status,
        settle: if is_checked(boot) { SETTLE_CHECKED } else { SETTLE },
        server_done,
        distinct: boot.distinct.iter().map(pattern).collect(),
        capture: boot.distinct_across_boots.iter().map(pattern).collect(),
        triggers: Vec::new(),
        expect_after: boot.expect_after.iter().map(pattern).collect(),
        hold: false,
        reboots: boot.reboots,
        expect_resets,
    }
}

fn is_checked(boot: &BootCase) -> bool {
    boot.debug_assertions
}

/// A boot to run, and whether its case asks for two boots the same byte for byte.
pub type BootJob = (BootSpec, bool);

/// A planned boot's case is a boot case: `plan` takes no other.
pub fn boot_of(case: &Case) -> &BootCase {
    case.as_boot().expect("only boot cases are planned as boots")
}

/// Build (or take from this run's builds) what one case boots on one width.
pub fn prepare(
    case: &Case,
    arch: Arch,
    ws: &Workspace,
    run_dir: &Path,
    builder: &mut Builder,
    recipes: &mut Recipes,
    reporter: &Reporter,
) -> Result<Prepared, Blocked> {
    let boot = boot_of(case);
    let mut log = |line: &str| reporter.note(crate::events::Note::Build, line);
    match &boot.guest {
        Guest::Built { programs, firmware } => {
            let bundle = crate::pack::reference_bundle(case, programs, arch, ws, run_dir, builder, &mut log)
                .map_err(|e| Blocked::Build(e.to_string()))?;
            let profile = if boot.debug_assertions { Profile::Checked } else { Profile::Release };
            let loader = builder
                .get(&BuildKey::new(arch, LOADER_PACKAGE, LOADER_PACKAGE, profile, &[]), &mut log)
                .map_err(|e| Blocked::Build(e.to_string()))?;
            let kernel_elf = crate::pack::reference_kernel(case, arch, builder, &mut log)
                .map_err(|e| Blocked::Build(e.to_string()))?;
            Ok(Prepared {
                kernel: Some(loader.path),
                media: None,
                initrd: Some(bundle),
                append: None,
                firmware: firmware.clone(),
                machine: arch.default_machine().into(),
                accel: ChosenAccel::Tcg,
                extra_args: Vec::new(),
                kernel_elf: Some(kernel_elf),
            })
        }
        Guest::External(guest) => {
            let (kernel, initrd, recipe_append, media) = match &guest.image {
                GuestImage::Files { kernel, initrd } => {
                    (Some(ws.root.join(kernel)), initrd.as_ref().map(|i| ws.root.join(i)), None, None)
                }
                GuestImage::Media { image, cdrom, keep } => {
                    // The format was checked at intake (`check_inputs`); read again here,
                    // the header names what QEMU is told.
                    let image = match image {
                        Some(image) => {
                            let full = ws.root.join(image);
                            let format = crate::boot::media::image_format(&full)
                                .map_err(|e| Blocked::Build(format!("guest.image: {e}")))?;
                            Some((full, format))
                        }
                        None => None,
                    };
                    let cdrom = cdrom.as_ref().map(|c| ws.root.join(c));
                    (None, None, None, Some(crate::boot::media::Media { image, cdrom, keep: *keep }))
                }
                GuestImage::Recipe(recipe) => {
                    let full = ws.root.join(recipe);
                    let image = recipes
                        .entry(full.clone())
                        .or_insert_with(|| {
                            let failed = |error| Arc::new(RecipeFailed::Build { path: full.clone(), error });
                            let recipe = testbench_recipe::load(&full).map_err(|e| Arc::new(RecipeFailed::Load(e)))?;
                            let mut recipe_log = |line: &str| reporter.note(crate::events::Note::GuestImage, line);
                            // The user's cache, shared by every clone: packages by sha256,
                            // images by the recipe's hash.
                            let cache = testbench_recipe::user_cache_root().map_err(failed)?;
                            testbench_recipe::build(&recipe, &cache, &mut recipe_log).map_err(failed)
                        })
                        .clone()
                        .map_err(|e| Blocked::Build(e.to_string()))?;
                    (Some(image.kernel), Some(image.initrd), Some(image.append), None)
                }
            };
            let initrd = if guest.overlay.is_empty() {
                initrd
            } else {
                Some(
                    with_overlay(case, arch, initrd.as_deref(), &guest.overlay, ws, run_dir)
                        .map_err(|e| Blocked::Build(e.to_string()))?,
                )
            };
            Ok(Prepared {
                kernel,
                media,
                initrd,
                append: guest.append.clone().or(recipe_append),
                firmware: guest.firmware.clone(),
                machine: guest.machine.clone().unwrap_or_else(|| arch.default_machine().into()),
                accel: ChosenAccel::Tcg,
                extra_args: guest.qemu_args.clone(),
                kernel_elf: None,
            })
        }
    }
}

/// The case's initramfs with `guest.overlay` appended as a second newc archive (Linux
/// unpacks each archive of the concatenation over the ones before it), written once per
/// (case, width) into the run's directory; the guest's own image is never changed.
fn with_overlay(
    case: &Case,
    arch: Arch,
    initrd: Option<&Path>,
    overlay: &[testbench_case::Overlay],
    ws: &Workspace,
    run_dir: &Path,
) -> Result<PathBuf, OverlayError> {
    use testbench_recipe::newc::{pad4, write_newc, Entry};
    let mut bytes = match initrd {
        Some(path) => {
            std::fs::read(path).map_err(|source| OverlayError::Initrd { path: path.to_path_buf(), source })?
        }
        None => Vec::new(),
    };
    // The next archive's header starts on a multiple of 4, as the kernel looks for it.
    bytes.resize(bytes.len() + pad4(bytes.len()), 0);
    let mut entries = Vec::new();
    for (index, file) in overlay.iter().enumerate() {
        let data = super::intake::read_overlay_file(&ws.root.join(&file.from))
            .map_err(|e| OverlayError::At { field: format!("guest.overlay[{index}].from"), error: Box::new(e) })?;
        entries.push(Entry::file(file.to.clone(), file.mode, data));
    }
    bytes.extend(write_newc(&entries).map_err(OverlayError::Pack)?);
    let dir = run_dir.join("overlays");
    std::fs::create_dir_all(&dir).map_err(|source| OverlayError::Io { path: dir.clone(), source })?;
    let path = dir.join(format!("{}-{arch}.cpio", case.name));
    std::fs::write(&path, bytes).map_err(|source| OverlayError::Io { path: path.clone(), source })?;
    Ok(path)
}

/// What the boots need, from a prebuilt directory's index (`--prebuilt`): nothing is
/// built or packed; a (case, width) the directory does not hold cannot boot, saying so.
pub fn from_index(
    boots: &[PlannedBoot],
    selected: &[&Case],
    index: &crate::prebuilt::Index,
    dir: &Path,
) -> HashMap<(usize, Arch), Result<Prepared, Blocked>> {
    let mut prepared = HashMap::new();
    for boot in boots {
        let case = selected[boot.case];
        let entry = index.widths.get(boot.arch.name()).and_then(|cases| cases.get(&case.name));
        let edited = index.cases.get(&case.name).is_some_and(|d| *d != crate::prebuilt::case_digest(&case.file));
        let ready = match entry {
            Some(_) if edited => Err(Blocked::Build(format!(
                "not prebuilt: {} was edited since {} was prebuilt: prebuild again",
                case.file.display(),
                dir.display()
            ))),
            Some(entry) => Prepared::from_entry(entry, dir),
            None => Err(Blocked::Build(format!(
                "not prebuilt: {} holds no {} build of {} (it was prebuilt without it: prebuild again with it selected)",
                dir.display(),
                boot.arch,
                case.name
            ))),
        };
        prepared.insert((boot.case, boot.arch), ready);
    }
    prepared
}

/// Build what the boots need, each (case, width) once and each distinct build once.
pub fn prepare_all(
    boots: &[PlannedBoot],
    selected: &[&Case],
    ws: &Workspace,
    run_dir: &Path,
    builder: &mut Builder,
    reporter: &Reporter,
) -> HashMap<(usize, Arch), Result<Prepared, Blocked>> {
    let mut prepared: HashMap<(usize, Arch), Result<Prepared, Blocked>> = HashMap::new();
    let mut recipes = Recipes::new();
    for boot in boots {
        let key = (boot.case, boot.arch);
        if let std::collections::hash_map::Entry::Vacant(slot) = prepared.entry(key) {
            let case = selected[boot.case];
            slot.insert(prepare(case, boot.arch, ws, run_dir, builder, &mut recipes, reporter));
        }
    }
    prepared
}

/// The probe of each width's QEMU, started once, before its first boot, on a thread of
/// its own (it runs while the host cases run and the guests build); with it, KVM's probe
/// boot when a boot of the width may run under KVM (`qemu/accel.rs`), its image in
/// `run_dir`.
pub fn start_probes(
    boots: &[PlannedBoot],
    selected: &[&Case],
    run_dir: &Path,
) -> Vec<(Arch, std::thread::JoinHandle<Probe>)> {
    let mut probe_threads = Vec::new();
    for boot in boots {
        if !probe_threads.iter().any(|(arch, _)| *arch == boot.arch) {
            let arch = boot.arch;
            let kvm = boots.iter().filter(|b| b.arch == arch).any(|b| {
                let case = boot_of(selected[b.case]);
                crate::qemu::accel::wants_kvm(case.accel, case.icount.is_some(), arch)
            });
            let dir = run_dir.to_path_buf();
            probe_threads.push((
                arch,
                std::thread::spawn(move || {
                    let cache = dir.parent().map(|testbench| testbench.join("qemu-probes"));
                    let mut probe = match &cache {
                        Some(cache) => crate::qemu::probe_cached(arch, cache),
                        None => crate::qemu::probe(arch),
                    };
                    if kvm && probe.version.is_ok() {
                        probe.kvm = Some(crate::qemu::accel::probe_kvm(arch, &dir));
                    }
                    probe
                }),
            ));
        }
    }
    probe_threads
}

/// Join the probes and check each firmware once: a width whose QEMU cannot run, or a
/// missing firmware, blocks the boot whatever it built.
pub fn block_on_host_lacks(
    prepared: &mut HashMap<(usize, Arch), Result<Prepared, Blocked>>,
    probe_threads: Vec<(Arch, std::thread::JoinHandle<Probe>)>,
    selected: &[&Case],
    ws: &Workspace,
    reporter: &Reporter,
) {
    let mut probes: HashMap<Arch, Probe> = HashMap::new();
    for (arch, thread) in probe_threads {
        let probe = thread.join().unwrap_or_else(|_| Probe {
            version: Err(crate::qemu::VersionError::Panicked(arch)),
            firmware_dirs: Ok(Vec::new()),
            kvm: None,
        });
        if let Ok(version) = &probe.version {
            reporter.note(crate::events::Note::QemuProbed, &format!("qemu {arch}: {version}"));
        }
        probes.insert(arch, probe);
    }
    let mut firmware_checks: HashMap<(Arch, Firmware), Result<(), String>> = HashMap::new();
    let mut choices: std::collections::BTreeSet<(Arch, &str, String)> = std::collections::BTreeSet::new();
    for ((index, arch), result) in prepared.iter_mut() {
        let case = selected[*index];
        let probe = &probes[arch];
        let lack = match &probe.version {
            Err(complaint) => Some(complaint.to_string()),
            Ok(_) => {
                let (firmware, field) = case.firmware().expect("a planned boot's case is a boot case");
                firmware_checks
                    .entry((*arch, firmware.clone()))
                    .or_insert_with(|| {
                        crate::qemu::check_firmware(*arch, firmware, &ws.root, field, &probe.firmware_dirs)
                            .map_err(|e| e.to_string())
                    })
                    .clone()
                    .err()
            }
        };
        // A failed build stays the verdict: a host lack must not hide a broken build.
        if let (Some(lack), Ok(_)) = (lack, &*result) {
            *result = Err(Blocked::HostLack(lack));
        }
        if let Ok(ready) = result {
            let boot = boot_of(case);
            match crate::qemu::accel::choose(boot.accel, boot.icount.is_some(), *arch, probe.kvm.as_ref()) {
                Ok((chosen, why)) => {
                    ready.accel = chosen;
                    choices.insert((*arch, chosen.name(), why));
                }
                Err(lack) => *result = Err(Blocked::HostLack(lack.to_string())),
            }
        }
    }
    // The run says which accelerator each width's boots run under, and why.
    for (arch, chosen, why) in choices {
        reporter.note(crate::events::Note::Accel, &format!("accel {arch}: {chosen} ({why})"));
    }
}

/// Each planned boot's job, in the planned order: its `BootSpec`, or why it cannot boot.
pub fn jobs(
    boots: &[PlannedBoot],
    selected: &[&Case],
    prepared: &HashMap<(usize, Arch), Result<Prepared, Blocked>>,
    ws: &Workspace,
    qmp_dir: Option<&Arc<QmpDir>>,
    ports: &crate::boot::parts::net::Ports,
) -> Vec<Result<BootJob, Blocked>> {
    boots
        .iter()
        .map(|boot| {
            let case = selected[boot.case];
            let parts = crate::boot::parts::for_case(boot_of(case), boot.arch, &ws.root, ports);
            let prepared = prepared[&(boot.case, boot.arch)].clone().and_then(|p| Ok((p, parts?)));
            let spec = prepared.map(|(p, parts)| BootSpec {
                machine: Machine {
                    stamp: stamp_of(boot_of(case), boot, &p.machine),
                    arch: boot.arch,
                    machine: p.machine,
                    accel: p.accel,
                    firmware: p.firmware,
                    kernel: p.kernel,
                    media: p.media,
                    initrd: p.initrd,
                    append: p.append,
                    smp: boot.smp,
                    memory_mib: boot_of(case).memory_mib,
                    icount: boot_of(case).icount.clone(),
                    seed: boot.seed,
                    rtc_base: boot_of(case).rtc_base.clone(),
                    rr: boot.rr.clone().ok().flatten(),
                    extra_args: p.extra_args,
                    dt_edits: boot_of(case).device_tree.clone(),
                    reboots: boot_of(case).reboots > 0,
                    cover: None,
                },
                plan: Plan {
                    judge: judge_of(case, boot, ws),
                    parts,
                    timeout: replay_deadline(boot),
                    crash: crate::boot::crash_watch::CrashPlan::of(boot_of(case)),
                    crash_elf: crate::crash::kernel_elf(boot_of(case), &ws.root, p.kernel_elf.as_deref()),
                },
                dir: boot.dir.clone(),
                first_boot: None,
                qmp_dir: qmp_dir.cloned().expect("a run with boots has its QMP socket directory"),
                gdb: None,
            });
            spec.map(|spec| (spec, boot_of(case).repeat_exactly))
        })
        .collect()
}

/// The stamped console of a boot whose settle time is the guest's (`boot/stamps.rs`): in
/// guest time, not recorded, ended by its settle time (no power-off, typed input, sessions
/// or resets), on a UART the plugin follows, with the plugin built beside the bench.
/// Every other boot keeps the host's settle time (docs/verdicts.md).
fn stamp_of(case: &BootCase, boot: &PlannedBoot, machine: &str) -> Option<crate::boot::stamps::StampSpec> {
    let icount = case.icount.as_deref()?;
    let settles = !case.poweroff && case.inputs.is_empty() && case.sessions.is_empty() && case.expect_after.is_empty();
    if !settles || case.reboots > 0 || !matches!(boot.rr, Ok(None)) {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    crate::boot::stamps::StampSpec::for_boot(boot.arch, machine, icount, exe.parent()?).ok()
}

/// How much longer than its case's deadline a replay may run: QEMU replays a recording
/// slower than it recorded it (an xv6 boot recorded in 20 s replayed in 39), and the
/// replay ends by itself where the recording ended, so its verdict is judged on the whole
/// recording rather than cut at the case's deadline on the host's clock.
const REPLAY_SLACK: u32 = 4;

/// A boot's deadline: the case's, or for a replay [`REPLAY_SLACK`] times it.
fn replay_deadline(boot: &PlannedBoot) -> std::time::Duration {
    match boot.rr {
        Ok(Some(RecordReplay::Replay(_))) => boot.timeout * REPLAY_SLACK,
        _ => boot.timeout,
    }
}

/// A boot's judge: the case's console rules; a replayed boot types nothing (the
/// recording types the input; QEMU takes none from the bench).
fn judge_of(case: &Case, boot: &PlannedBoot, ws: &Workspace) -> testbench_judge::Config {
    let mut judge = judge_config(boot_of(case), &ws.config);
    if matches!(boot.rr, Ok(Some(RecordReplay::Replay(_)))) {
        judge.inputs.clear();
    }
    judge
}

/// Each boot's coverage planned: the kernel ELF its addresses map through (the crash
/// symbolizer's: the reference kernel the bench built, or `[guest] symbols`; else an
/// external kernel that is itself an ELF with line tables), the plugin loaded with its
/// ranges; a boot with no such ELF boots without it, and the summary names it.
pub fn coverage(jobs: &mut [Result<BootJob, Blocked>], plugin: &Path) -> crate::coverage::Collector {
    let mut collector = crate::coverage::Collector::default();
    for (spec, _) in jobs.iter_mut().flatten() {
        let elf = match &spec.plan.crash_elf {
            Some(elf) => elf.path().to_owned(),
            None => match &spec.machine.kernel {
                Some(kernel) => kernel.clone(),
                // A guest booted from an image has no kernel file to read ranges from.
                None => {
                    let why = "booted from guest.image or guest.cdrom: give the kernel's ELF with line tables as [guest] symbols";
                    collector.uncovered.insert(spec.dir.clone(), why.to_string());
                    continue;
                }
            },
        };
        match crate::coverage::CoverSpec::for_elf(plugin, &elf) {
            Ok(cover) => {
                collector.covered.insert(spec.dir.clone(), elf);
                spec.machine.cover = Some(cover);
            }
            Err(why) => {
                let why = match &spec.plan.crash_elf {
                    Some(_) => why,
                    None => format!("{why} (give the kernel's ELF with line tables as [guest] symbols)"),
                };
                collector.uncovered.insert(spec.dir.clone(), why);
            }
        }
    }
    collector
}
