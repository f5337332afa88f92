//! The case model: one TOML file per case, parsed in two stages.
//!
//! Stage one checks every field's name and shape against what the case's kind accepts
//! (`fields`: a misspelt field is refused with the nearest accepted name, a wrong type
//! with what the field takes, in words), then reads the file with serde (each kind's raw
//! struct, with `deny_unknown_fields` still, so nothing is ever silently dropped). Stage
//! two turns the raw form into a [`Case`] whose types carry the preconditions the runner
//! relies on (a compiled regex, a non-empty list of hart counts per width, a deadline
//! that is a real duration, a disk whose GPT fits, a dial through a forwarded port, a
//! peer's address a number the network holds).
//!
//! The modules, each using only those before it (and this file's types):
//! - `common`: the error builder, regexes, deadlines, names and paths, and the words
//!   of messages (the nearest name, a number, a value shown short);
//! - `fields`: a field's shape and what it takes, in words; the check of a table's
//!   fields; the fields several kinds share;
//! - `session`: the `[[session]]` tables and their steps, which kinds `boot` and
//!   `ssh-loopback` both read;
//! - `kinds`: one module per kind (`boot`, `host_tests`, `build`, `scripts`, `gate`,
//!   `ssh_loopback`), each with its raw struct beside its list of fields and its stage two;
//! - `validate`: the entry point, [`parse`]: the common fields, then the kind's.
//!
//! Every refusal names the file, the field and what is accepted, and happens here, before
//! anything builds. A file's refusals come together, in the file's order: stage one's
//! all, or else stage two's all (`common::Refusals`; a check that needs a refused
//! field's value is left out). A field that a later feature of the bench will bring is refused with
//! "not supported yet", never ignored.
//!
//! The devices (`[disk]`, `[vault]`, `[userland]`, `[net]`) are typed here as
//! [`Disks`] and [`NetSpec`]; making the disks, the ports and the capture is the bench's.
//!
//! Architecture invariant: this crate does no I/O. Whether a path a case names exists is
//! the bench's question (it asks before anything builds), using [`Case::paths`].

mod common;
mod fields;
mod kinds;
pub use kinds::boot::idle::{IDLE_EXCEPTIONS, IDLE_INTERRUPTS, IDLE_TOTALS};
pub use kinds::OVERLAY_FILE_BYTES_MAX;
mod session;
mod validate;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

pub use common::{did_you_mean, nearest, number_text};
pub use validate::parse;

/// A guest width the bench boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    Rv64,
    Rv32,
    X86_64,
    Aarch64,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Rv64, Arch::Rv32, Arch::X86_64, Arch::Aarch64];
    /// The widths the reference guest (the bench's own kernel, loader and programs) is
    /// built for.
    pub const REFERENCE: [Arch; 2] = [Arch::Rv64, Arch::Rv32];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Rv64 => "rv64",
            Arch::Rv32 => "rv32",
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|arch| arch.name() == name)
    }

    /// The accepted names, quoted and listed for messages: `"rv64", "rv32", ...`.
    pub fn accepted() -> String {
        Arch::ALL.map(|arch| format!("{:?}", arch.name())).join(", ")
    }

    /// Whether the reference guest exists for this width.
    pub fn has_reference_guest(self) -> bool {
        Arch::REFERENCE.contains(&self)
    }

    /// The rustup target the reference guest's crates are built for (its widths only).
    pub fn target_triple(self) -> Option<&'static str> {
        match self {
            Arch::Rv64 => Some("riscv64gc-unknown-none-elf"),
            Arch::Rv32 => Some("riscv32imac-unknown-none-elf"),
            Arch::X86_64 | Arch::Aarch64 => None,
        }
    }

    /// The QEMU system emulator for this width, unless the environment names another.
    pub fn default_qemu(self) -> &'static str {
        match self {
            Arch::Rv64 => "qemu-system-riscv64",
            Arch::Rv32 => "qemu-system-riscv32",
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Aarch64 => "qemu-system-aarch64",
        }
    }

    /// The environment variable that replaces [`Arch::default_qemu`] with a custom build.
    pub fn qemu_env_var(self) -> &'static str {
        match self {
            Arch::Rv64 => "TESTBENCH_QEMU_RV64",
            Arch::Rv32 => "TESTBENCH_QEMU_RV32",
            Arch::X86_64 => "TESTBENCH_QEMU_X86_64",
            Arch::Aarch64 => "TESTBENCH_QEMU_AARCH64",
        }
    }

    /// The machine a boot gets unless its `[guest]` names one: `virt` on riscv and
    /// aarch64, `q35` on x86_64.
    pub fn default_machine(self) -> &'static str {
        match self {
            Arch::X86_64 => "q35",
            Arch::Rv64 | Arch::Rv32 | Arch::Aarch64 => "virt",
        }
    }

    /// The `-cpu` a boot gets unless its `qemu_args` give one: aarch64's `virt` defaults
    /// to a 32-bit Cortex-A15, which boots no arm64 kernel, so it gets `max`.
    pub fn default_cpu(self) -> Option<&'static str> {
        match self {
            Arch::Aarch64 => Some("max"),
            Arch::Rv64 | Arch::Rv32 | Arch::X86_64 => None,
        }
    }

    /// Whether QEMU builds a device tree for this width's default machine (riscv and
    /// aarch64 `virt` do; x86_64's `q35` describes itself with ACPI tables).
    pub fn has_device_tree(self) -> bool {
        !matches!(self, Arch::X86_64)
    }

    /// Whether this width's devices sit on virtio-mmio transports (the `virt` machines)
    /// rather than on PCI (`q35`).
    pub fn virtio_mmio(self) -> bool {
        !matches!(self, Arch::X86_64)
    }

    /// The width of the host the bench was built for, if it is one the bench boots (KVM
    /// runs only guests of this width). The bench asks it (`accel = "kvm"`, the KVM
    /// probe); no case's validation does, so a case file means the same on every host.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Aarch64),
            "riscv64" => Some(Arch::Rv64),
            _ => None,
        }
    }
}

/// `accel`: how QEMU runs the guest's instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Accel {
    /// QEMU's translator, on every width (and the only one icount runs under).
    Tcg,
    /// The host's KVM: the guest's width must be the host's, and the run's probe must
    /// have booted under it.
    Kvm,
    /// KVM when the run's probe proved it usable for the width, TCG otherwise (and
    /// always TCG under icount).
    #[default]
    Auto,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
            Accel::Auto => "auto",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The most harts a case may ask for. OpenSBI on QEMU `virt` handles more, but a boot
/// asking for more than this on a bench machine is a typo, not a test.
pub const SMP_MAX: u32 = 64;

/// A regex together with the text the case wrote, so messages can quote it.
#[derive(Clone, Debug)]
pub struct Pattern {
    /// Where it came from: `expect[2]`, `forbid[0]`, `input[1].after`, `must_fail`.
    pub label: String,
    pub regex: Regex,
}

impl Pattern {
    pub fn source(&self) -> &str {
        self.regex.as_str()
    }
}

/// A validated case.
#[derive(Clone, Debug)]
pub struct Case {
    /// The file's stem.
    pub name: String,
    /// The file the case came from, as the bench was given it (for messages).
    pub file: PathBuf,
    pub description: String,
    /// `false`: the case runs only when the filter is its whole name.
    pub whole_run: bool,
    pub kind: Kind,
    /// A self-check: the case passes only if it fails with a reason this matches.
    pub must_fail: Option<Pattern>,
    /// A self-check: the case passes only if it fails with this kind of failure (one of
    /// [`FAILURE_KINDS`]), and with a reason `must_fail` matches when it has one.
    pub must_fail_kind: Option<String>,
}

/// The kinds of failure a verdict names, and `must_fail = { kind = "..." }` takes: the
/// console judge's, a part's (`device`), a crash report's (`crash`), the bench's own checks across boots (`repeat`,
/// `replay`), what stopped a case before its run (`build`, `host-lack`), each host
/// kind's own, and a boot a `--slurm` task never reported (`unreported`).
pub const FAILURE_KINDS: &[&str] = &[
    "forbidden",
    "timed-out",
    "program-failed",
    "no-output",
    "guest-ended",
    "no-power-off",
    "reset",
    "power-off-unproven",
    "wrong-status",
    "killed",
    "exit-status",
    "reporter",
    "distinct",
    "device",
    "crash",
    "repeat",
    "replay",
    "build",
    "host-lack",
    "host-tests",
    "scripts",
    "gate",
    "ssh-loopback",
    "unreported",
];

#[derive(Clone, Debug)]
pub enum Kind {
    Boot(Box<BootCase>),
    HostTests(HostTestsCase),
    Build(BuildCase),
    Scripts(ScriptsCase),
    Gate(GateCase),
    SshLoopback(SshLoopbackCase),
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Boot(_) => "boot",
            Kind::HostTests(_) => "host-tests",
            Kind::Build(_) => "build",
            Kind::Scripts(_) => "scripts",
            Kind::Gate(_) => "gate",
            Kind::SshLoopback(_) => "ssh-loopback",
        }
    }
}

/// Host tests of a cargo workspace: built once, then run as one job or fanned out.
#[derive(Clone, Debug)]
pub struct HostTestsCase {
    /// Relative to the workspace root, below it, holding a Cargo.toml ("." by default).
    pub workspace: PathBuf,
    pub features: Vec<String>,
    /// Host programs the tests run: each must be an executable on the path.
    pub tools: Vec<String>,
    pub fanout: Option<Fanout>,
    /// Set for every job; `{cores}` becomes the job's count of cores.
    pub vars: Vec<(String, String)>,
    /// Cores each job asks for (default 1).
    pub cores: u32,
    /// Each job's deadline.
    pub timeout: Duration,
    /// Values known to pass only past the deadline; reported, never hidden.
    pub late: Vec<String>,
    /// Run the tests under Miri (`cargo +nightly miri test`), which stops at the first
    /// undefined behaviour a test reaches and names it.
    pub miri: bool,
}

#[derive(Clone, Debug)]
pub enum Fanout {
    /// One job per line the shell command `values` prints, each running test target
    /// `test` with the line in the variable `env`.
    Value { values: String, env: String, test: String },
    /// One job per test target named.
    File { tests: Vec<String> },
    /// One job per libtest test of every test binary, those `filter` takes and `skip` does not.
    Test { filter: Option<Pattern>, skip: Vec<String> },
}

/// A binary of the guest workspace built for each width, and scanned.
#[derive(Clone, Debug)]
pub struct BuildCase {
    pub arch: Vec<Arch>,
    pub package: String,
    pub bin: String,
    /// "release" or "checked".
    pub profile: String,
    pub features: Vec<String>,
    /// Byte strings the built file must not hold anywhere.
    pub forbid_in_binary: Vec<String>,
}

/// Oracle scripts: tools checked, build commands run, then scripts in order.
#[derive(Clone, Debug)]
pub struct ScriptsCase {
    pub tools: Vec<String>,
    /// Shell commands that must all exit 0, together within 600 s.
    pub build: Vec<String>,
    /// Run in order from the workspace root, each judged by its exit status.
    pub scripts: Vec<String>,
    /// The scripts' shared deadline, counted from the end of the build.
    pub timeout: Duration,
}

/// A source gate over a tree.
#[derive(Clone, Debug)]
pub struct GateCase {
    pub gate: Gate,
    /// The root of the tree checked, relative to the workspace root ("." by default).
    pub tree: PathBuf,
    /// The gate's configuration, relative to `tree`; each gate has a default file name.
    pub config: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    UnsafeBudget,
    SizeBudget,
    NoCruft,
    Formatting,
    Vendor,
    Docs,
    ImportCycles,
    Deadlines,
}

impl Gate {
    pub const ALL: [Gate; 8] = [
        Gate::UnsafeBudget,
        Gate::SizeBudget,
        Gate::NoCruft,
        Gate::Formatting,
        Gate::Vendor,
        Gate::Docs,
        Gate::ImportCycles,
        Gate::Deadlines,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Gate::UnsafeBudget => "unsafe-budget",
            Gate::SizeBudget => "size-budget",
            Gate::NoCruft => "no-cruft",
            Gate::Formatting => "formatting",
            Gate::Vendor => "vendor",
            Gate::Docs => "docs",
            Gate::ImportCycles => "import-cycles",
            Gate::Deadlines => "deadlines",
        }
    }

    /// The configuration a gate reads unless the case names another.
    pub fn default_config(self) -> &'static str {
        match self {
            Gate::UnsafeBudget => "unsafe-budget.toml",
            Gate::SizeBudget => "size-budget.toml",
            Gate::NoCruft => "no-cruft.toml",
            Gate::Formatting => "formatting.toml",
            Gate::Vendor => "vendor",
            Gate::Docs => "docs",
            Gate::ImportCycles => "import-cycles.toml",
            Gate::Deadlines => "tests/data/deadlines.toml",
        }
    }
}

/// Why a boot case runs on the host's clock (`clock = "host"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostClock {
    /// One of [`HOST_CLOCK_REASONS`]' names.
    pub reason: String,
    /// `clock_note`: what was seen under icount, in the case's words.
    pub note: Option<String>,
}

/// The reasons a case may give for the host's clock, each with what it means.
pub use kinds::boot::clock::HOST_REASONS as HOST_CLOCK_REASONS;

/// A boot case: what to boot, how, and what its console must show.
#[derive(Clone, Debug)]
pub struct BootCase {
    pub arch: Vec<Arch>,
    /// Hart counts per width, each list non-empty; one boot per count.
    pub smp: Vec<(Arch, Vec<u32>)>,
    /// The counts stand under `--smp N`.
    pub keep_smp: bool,
    /// The deadline under `--smp N` instead of `timeout`.
    pub timeout_smp: Option<Duration>,
    pub memory_mib: u32,
    pub timeout: Duration,
    /// Passed to QEMU's `-icount` as written: the case's own, or the default of guest
    /// time (`kinds/boot/clock.rs`); None only with `host_clock`.
    pub icount: Option<String>,
    /// `clock = "host"`: why the case runs on the host's clock.
    pub host_clock: Option<HostClock>,
    /// `accel`: TCG, KVM, or KVM where the run's probe proved it (TCG under icount).
    pub accel: Accel,
    /// QEMU `-seed`, which fills the device tree's `/chosen/rng-seed`.
    pub qemu_seed: Option<u64>,
    /// QEMU `-rtc base=`: "utc", "localtime" or a date (and time). None under icount is
    /// the bench's pinned date (see the bench's qemu module).
    pub rtc_base: Option<String>,
    /// Boot twice; the two consoles must be the same byte for byte.
    pub repeat_exactly: bool,
    /// Features of the reference kernel the bench builds.
    pub kernel_features: Vec<String>,
    /// Build the trusted base with the checked profile.
    pub debug_assertions: bool,
    pub expect: Vec<Pattern>,
    pub forbid: Vec<Pattern>,
    /// `true`: after the last expect the guest must power off with `poweroff_status`.
    pub poweroff: bool,
    pub poweroff_status: i32,
    /// How many times the guest resets in the one QEMU run (`-no-reboot` only at 0): QMP's
    /// guest RESET events are counted, one more fails the boot at once, one fewer fails
    /// its end.
    pub reboots: u32,
    /// The first line expected after each reset (empty, or `reboots` patterns): the i-th
    /// can match only after the i-th reset, and every `expect` belongs to the first boot.
    pub reboot_expect: Vec<Pattern>,
    pub inputs: Vec<Input>,
    pub guest: Guest,
    /// Drops only PANIC from the always-forbidden list (a case that expects a panic).
    pub allow_panic: bool,
    /// Edits of the device tree QEMU builds for this boot, applied in order.
    pub device_tree: Vec<DtEdit>,
    /// Boot twice; the first capture of each must differ between the boots.
    pub distinct_across_boots: Vec<Pattern>,
    /// Within one boot: two or more matching lines, no capture twice.
    pub distinct: Vec<Pattern>,
    /// The reference guest: the program whose done() is the verdict (rule F).
    pub reporter: Option<String>,
    /// The reference guest: what the bench does to the signed bundle.
    pub hostile: Hostile,
    /// The reference guest: data entries packed into the bundle.
    pub files: Vec<BundleFile>,
    /// `[disk]`, `[vault]` and `[userland]`, each on its fixed virtio-mmio slot.
    pub disks: Disks,
    /// `[net]`: a virtio-net card on QEMU's user-mode network (`restrict=on`, `ipv6=off`).
    pub net: Option<NetSpec>,
    /// `[[session]]`: logins over `net.forward`'s port 22, started once every expect matched.
    pub sessions: Vec<Session>,
    /// Console patterns matched in order from the sessions' start to the deadline (only
    /// with sessions).
    pub expect_after: Vec<Pattern>,
    /// Byte strings that must be nowhere in the guest's RAM at the verdict, each with its
    /// label (`ram_forbid[0]`).
    pub ram_forbid: Vec<(String, Vec<u8>)>,
    /// `memory = true`: every program's stack and heap measured in the guest's RAM at
    /// the verdict.
    pub memory: Option<MemorySpec>,
    /// A window at rest after the expects and sessions, measured from outside.
    pub idle: Option<IdleSpec>,
    /// A command that judges the console log once the boot has passed.
    pub post_check: Option<PostCheck>,
    /// `[triage]`: which rules read the console for crash reports, and which kinds of
    /// crash end the boot as a failure.
    pub triage: Triage,
}

/// The kinds of crash report the bench reads from a console (testbench-triage's
/// `CrashKind` names, checked equal there), in its order.
pub const CRASH_KINDS: &[&str] = &[
    "panic",
    "oops",
    "bug",
    "warning",
    "kasan",
    "kfence",
    "kmsan",
    "kcsan",
    "ubsan",
    "lockdep",
    "rcu-stall",
    "hung-task",
    "soft-lockup",
    "hard-lockup",
    "out-of-memory",
    "memory-leak",
    "general-protection",
    "page-fault",
    "illegal-instruction",
    "assertion",
];

/// The kinds of crash that do not fail a boot unless `[triage] forbid` names them: a
/// kernel prints them and goes on (a driver's WARNING, the OOM killer at work, a leak
/// kmemleak found), and a case may cause them on purpose. Every other kind fails it.
pub const CRASH_KINDS_ALLOWED: &[&str] = &["warning", "out-of-memory", "memory-leak"];

/// Which crash rules read a boot's console.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriageRules {
    Linux,
    Xv6,
    Reference,
    Generic,
}

/// A boot case's `[triage]` (docs/triage.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Triage {
    /// `None` with `off = false`: the rules follow the guest (the reference kernel's for
    /// the guest the bench builds, Linux's for a recipe's, the generic ones otherwise).
    pub rules: Option<TriageRules>,
    /// `rules = "off"`: no crash is read, and none ends the boot.
    pub off: bool,
    /// The kinds that fail the boot (from [`CRASH_KINDS`]): every kind but
    /// [`CRASH_KINDS_ALLOWED`], with `forbid` added and `allow` taken out.
    pub fatal: Vec<String>,
}

impl Default for Triage {
    fn default() -> Triage {
        let fatal = CRASH_KINDS.iter().filter(|k| !CRASH_KINDS_ALLOWED.contains(k)).map(|k| k.to_string()).collect();
        Triage { rules: None, off: false, fatal }
    }
}

/// `memory = true` on a reference-guest boot case (docs/ram.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySpec {
    /// `heap_fits = true`: a heap passes when its peak leaves an eighth of its cap
    /// unused, rather than when its cap is twice its peak.
    pub heap_fits: bool,
}

/// A boot case's `post_check`: `command` then `args` then the console log's path, run
/// from the workspace root; its exit status is the verdict.
#[derive(Clone, Debug)]
pub struct PostCheck {
    /// The program (a path relative to the workspace root when it holds a `/`, else a
    /// name on the path) and its first arguments; empty for a built-in oracle.
    pub command: Vec<String>,
    /// A built-in oracle instead of a command: `"sched"`, the reference kernel's scheduler.
    pub oracle: Option<String>,
    pub args: Vec<String>,
    pub timeout: Duration,
}

/// A boot case's `[idle]`.
#[derive(Clone, Debug)]
pub struct IdleSpec {
    /// The window's length (host clock).
    pub window: Duration,
    /// The console line the window waits for, besides the expects and sessions.
    pub after: Option<Pattern>,
    /// Ceilings per second, by rate name (`s_timer`, `interrupts`, `host_cores`, ...).
    pub max: Vec<(String, f64)>,
}

impl BootCase {
    /// The hart counts this case boots on `arch` (the case's own; `--smp` is the bench's).
    pub fn smp_for(&self, arch: Arch) -> &[u32] {
        self.smp.iter().find(|(a, _)| *a == arch).map(|(_, counts)| counts.as_slice()).unwrap_or(&[1])
    }
}

/// A boot case's disks. Each sits on its own virtio-mmio slot whatever else the case has:
/// `disk` on bus 0 (`disk0`), `userland` on bus 1 (`disk1`), `vault` on bus 4 (`disk2`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disks {
    /// `[disk]`: the writable data disk.
    pub disk: Option<DiskSpec>,
    /// `[vault]`: a second writable disk; only with `disk`.
    pub vault: Option<DiskSpec>,
    /// `[userland]`: a disk attached `readonly=on`, so QEMU refuses every write; never kept.
    pub userland: Option<DiskSpec>,
}

impl Disks {
    /// The disks the case has, with their table's name (`disk`, `vault`, `userland`).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &DiskSpec)> {
        [("disk", &self.disk), ("vault", &self.vault), ("userland", &self.userland)]
            .into_iter()
            .filter_map(|(name, spec)| spec.as_ref().map(|spec| (name, spec)))
    }
}

/// One disk: how it is made for each boot, whether the second boot keeps the first's, and
/// the hostile flip after packing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskSpec {
    pub layout: DiskLayout,
    /// The second of the case's two boots (`distinct_across_boots`) boots the disk the
    /// first left; never on `[userland]`.
    pub keep: bool,
    /// One bit of this file's data flipped after packing (a recipe's disk only).
    pub flip: Option<FileFlip>,
    /// One bit of this partition's file-system header flipped after packing (a recipe's
    /// disk only).
    pub flip_header: Option<String>,
    /// A self-check's tampering (with `keep` and `must_fail`): between the boots the kept
    /// disk is resized to this many KiB, so the second boot must refuse it.
    pub resize_kept_kib: Option<u64>,
}

/// How a disk is made, afresh for every boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskLayout {
    /// `size_kib` of zeros.
    Zeroed { size_kib: u64 },
    /// A GPT of `count` equal partitions, written by the bench, on `size_kib` of zeros.
    Partitions { size_kib: u64, count: u32 },
    /// A disk recipe (TOML), relative to the workspace root or absolute, packed by the bench.
    Recipe(PathBuf),
    /// A disk image the case gives (relative to the workspace root or absolute), copied
    /// into each boot's directory: the file itself is never written.
    /// `format`: as the case says it, or None: told from the image's first bytes.
    Image { path: PathBuf, format: Option<ImageFormat> },
}

/// A disk image's format (`[disk] image`, `[guest] image`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ImageFormat {
    Raw,
    Qcow2,
}

impl ImageFormat {
    /// QEMU's name for it (`-drive format=`).
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Raw => "raw",
            ImageFormat::Qcow2 => "qcow2",
        }
    }
}

impl DiskLayout {
    /// The disk's size in KiB, when the case gives it (a recipe gives its own).
    pub fn size_kib(&self) -> Option<u64> {
        match self {
            DiskLayout::Zeroed { size_kib } | DiskLayout::Partitions { size_kib, .. } => Some(*size_kib),
            DiskLayout::Recipe(_) | DiskLayout::Image { .. } => None,
        }
    }
}

/// `flip = { partition, file }`: the file, by its path in the partition's staged tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileFlip {
    /// The GPT name of a partition of the disk's recipe.
    pub partition: String,
    /// The file's path inside that partition's tree (`hello.txt`, `etc/motd`).
    pub file: String,
}

/// `[net]`: a virtio-net card on QEMU's user-mode network, with `restrict=on` and
/// `ipv6=off`. An empty table is a card that reaches nothing.
#[derive(Clone, Debug, Default)]
pub struct NetSpec {
    /// Guest TCP ports the host reaches (each through a host port the bench picks), each once.
    pub forward: Vec<u16>,
    /// Prefixes the guest must never send a SYN into, checked on the capture (a case with
    /// peers only).
    pub self_forbidden: Vec<Ipv4Net>,
    /// Self-check only (the case has `must_fail`): the capture is cut before it is read.
    pub truncate_capture: bool,
    /// Each must match the one-line decoding of at least one frame of the capture.
    pub capture_expect: Vec<Pattern>,
    /// `[[net.peer]]`: hosts the guest may connect to; none expects nothing when any is given.
    pub peers: Vec<Peer>,
    /// `[[net.dial]]`: the bench's connections into the guest, each through a forwarded port.
    pub dials: Vec<Dial>,
    /// `[net.poke]`: one UDP datagram into the guest.
    pub poke: Option<Poke>,
    /// The only host key the sessions' ssh accepts (only with sessions).
    pub host_key: Option<HostKey>,
}

/// `net.host_key`: a public key as a known_hosts line gives it after the host, its type
/// and its base64, which decodes to a key of that type. No comment follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostKey {
    /// One of [`HostKey::KINDS`].
    pub kind: String,
    pub base64: String,
}

impl HostKey {
    /// The host key types a case may pin.
    pub const KINDS: [&'static str; 5] =
        ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"];

    /// The key as a known_hosts line holds it after the host: `type base64`.
    pub fn line(&self) -> String {
        format!("{} {}", self.kind, self.base64)
    }
}

impl NetSpec {
    /// The network a case with peers widens slirp's to (`net=10.0.0.0/16`).
    pub const WIDE: Ipv4Net = Ipv4Net { addr: 0x0a00_0000, prefix: 16 };
    /// The guest's own /24, where its address, the gateway and the resolver stay.
    pub const GUEST: Ipv4Net = Ipv4Net { addr: 0x0a00_0200, prefix: 24 };
    /// The guest's own address, slirp's first DHCP lease.
    pub const GUEST_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
    /// Slirp's gateway and host, seen from the guest.
    pub const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
    /// Slirp's resolver.
    pub const DNS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 3);

    /// The host ports a boot of this case binds: one per forward, and one for the poke.
    pub fn host_ports(&self) -> usize {
        self.forward.len() + usize::from(self.poke.is_some())
    }
}

/// An IPv4 prefix `a.b.c.d/n` whose host bits are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    /// The network's address, as a number (host bits zero).
    pub addr: u32,
    /// 0 to 32.
    pub prefix: u8,
}

impl Ipv4Net {
    /// The mask of the prefix's bits.
    pub fn mask(self) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0)
    }

    pub fn network(self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr)
    }

    pub fn contains(self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.mask() == self.addr
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}

/// `[[net.peer]]`: a guestfwd to the bench's own binary, which records each connection
/// before it echoes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// In 10.0.0.0/16, outside the guest's own 10.0.2.0/24.
    pub addr: SocketAddrV4,
    /// Exactly how many connections the guest makes to it (0 to 1000).
    pub connections: u32,
}

/// `[[net.dial]]`: the bench connects into the guest through a forwarded port, retrying
/// until one connection echoes `expect` for `send`.
#[derive(Clone, Debug)]
pub struct Dial {
    /// A port of `forward`.
    pub port: u16,
    /// Sent as written; 1 byte to 64 KiB.
    pub send: String,
    /// What must come back; never empty.
    pub expect: String,
    /// Dial only once a shown console line matches this.
    pub after: Option<Pattern>,
    /// Then hold the connection until the guest closes it.
    pub until_closed: bool,
}

/// `[net.poke]`: one UDP datagram to the guest's `port`, sent once, when a shown console
/// line first matches `after`.
#[derive(Clone, Debug)]
pub struct Poke {
    pub port: u16,
    /// 1 to 1472 bytes, so it fits one Ethernet frame unfragmented.
    pub payload: String,
    pub after: Pattern,
}

/// Typed on the console once a shown line matches `after`.
#[derive(Clone, Debug)]
pub struct Input {
    pub after: Pattern,
    /// Sent as written: a case that wants Enter writes `\n` (or `\r`) itself.
    pub send: String,
}

/// Hostile inputs to the loader: each must make it refuse the bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hostile {
    /// Flip one byte of the bundle after signing.
    pub tamper_bundle: bool,
    /// Sign the archive alone, without the domain string and the length.
    pub sign_bare_archive: bool,
    /// Hand the loader only this many bytes of the signed bundle.
    pub short_initrd: Option<u64>,
}

/// An edit of one device-tree property, found by its path; no byte moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DtEdit {
    /// The property becomes FDT_NOP tokens.
    Drop { path: String },
    /// The value keeps its first `to` bytes; the rest becomes FDT_NOP tokens.
    Shrink { path: String, to: u32 },
    /// The value's cells, as many as it has.
    Set { path: String, words: Vec<u32> },
}

/// A data entry of the bundle.
#[derive(Clone, Debug)]
pub struct BundleFile {
    pub name: String,
    pub from: FileSource,
    /// For a JSON manifest read from a path: entries merged into its `servers` list by
    /// name (each replaces the members it gives, or is appended when none has its name).
    pub servers: Vec<toml::Table>,
}

#[derive(Clone, Debug)]
pub enum FileSource {
    /// A file, relative to the workspace root or absolute.
    Path(PathBuf),
    /// Any programs form, a corrupted one included.
    Program(Program),
}

/// One of a case's programs, with the budgets its `programs` line names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramEntry {
    pub program: Program,
    pub budgets: Vec<String>,
}

/// What a boot case boots.
#[derive(Clone, Debug)]
pub enum Guest {
    /// The bench builds it: the reference guest's loader, its kernel and a signed bundle
    /// of the programs (never empty), the first in init's place.
    Built { programs: Vec<ProgramEntry>, firmware: Firmware },
    /// A guest the bench does not build: an image, or a recipe that makes one.
    External(ExternalGuest),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// A binary of the guest workspace's test programs (package `programs`).
    TestProgram(String),
    /// Any binary of the guest workspace, optionally with features.
    Package { package: String, bin: String, features: Vec<String> },
    /// A prebuilt ELF, relative to the workspace root or absolute.
    Path(PathBuf),
    /// A test program the bench corrupts before packing it (a hostile input).
    Corrupt { bin: String, with: Corruption },
}

/// How a hostile-input case breaks a good program image.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Corruption {
    /// The first loadable segment's virtual address.
    SegmentVaddr(u64),
    /// The entry point.
    Entry(u64),
    /// The file cut to this many bytes.
    Truncate(u64),
    /// The first loadable segment's flags, as letters of rwx.
    SegmentFlags(String),
    /// The section table dropped and the file cut this many bytes before the end of the
    /// last loadable segment's data.
    TruncateSegmentData(u64),
}

impl Program {
    /// The entry name the program is packed under.
    pub fn entry_name(&self) -> String {
        match self {
            Program::TestProgram(bin) => bin.clone(),
            Program::Package { bin, .. } => bin.clone(),
            Program::Corrupt { bin, .. } => bin.clone(),
            Program::Path(path) => path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Firmware {
    /// QEMU's own for the width: OpenSBI on riscv (`-bios default`), SeaBIOS on x86_64,
    /// none on aarch64 (QEMU loads the kernel and answers PSCI itself).
    Default,
    /// No firmware (`-bios none`): the kernel starts in M-mode.
    None,
    /// A PC BIOS: QEMU's SeaBIOS, x86_64 only (the same image as `Default` there, named).
    Bios,
    /// UEFI from Debian's EDK2 packages: OVMF on x86_64, AAVMF on aarch64, its variables
    /// store copied into each boot's directory.
    Uefi,
    /// An image the case names.
    Path(PathBuf),
}

#[derive(Clone, Debug)]
pub struct ExternalGuest {
    pub image: GuestImage,
    /// The kernel command line; for a recipe, the recipe's own unless the case gives one.
    pub append: Option<String>,
    pub firmware: Firmware,
    /// QEMU `-machine`; None is the width's default ([`Arch::default_machine`]).
    pub machine: Option<String>,
    pub qemu_args: Vec<String>,
    /// Files added to the guest's initramfs as a second archive appended to it, which a
    /// Linux kernel unpacks over the first (a recipe's or the case's `initrd`).
    pub overlay: Vec<Overlay>,
    /// The kernel's ELF with DWARF (`symbols`): a crash's backtrace is symbolized
    /// against it. Whether it is there, a regular file, is asked by the bench
    /// ([`Case::paths`]); whether it is an ELF with DWARF, when a crash is symbolized.
    pub symbols: Option<PathBuf>,
}

/// One `guest.overlay` file: the host's `from` at the guest's `to`, with `mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlay {
    pub from: PathBuf,
    /// Relative, normal components only.
    pub to: String,
    pub mode: u32,
}

#[derive(Clone, Debug)]
pub enum GuestImage {
    Files {
        kernel: PathBuf,
        initrd: Option<PathBuf>,
    },
    /// A guest recipe (TOML) the bench builds into a kernel and an initramfs.
    Recipe(PathBuf),
    /// What people ship: a disk image (raw or qcow2, the first disk) and/or an ISO (a
    /// CD), booted by the firmware, no `-kernel`. At least one of the two is there. The
    /// image is written only when `keep` says so (otherwise QEMU's snapshot mode); a CD is
    /// never written.
    Media {
        image: Option<PathBuf>,
        cdrom: Option<PathBuf>,
        keep: bool,
    },
}

/// Where the test keys live, relative to the workspace root: `<key>` and `<key>.pub`,
/// public and marked not for production.
pub const TEST_KEYS: &str = "tests/keys";

/// `[[session]]`: one login by the host's ssh, driven by its steps, in a boot case (to
/// the guest's port 22) or an ssh-loopback case (to a server ssh starts itself).
#[derive(Clone, Debug)]
pub struct Session {
    /// The login name.
    pub user: String,
    /// Unique in the case; names the session's log. `user` unless the case gives one.
    pub name: String,
    /// The test key: `tests/keys/<key>` and its `.pub`. `user` up to any '+' or '.' unless
    /// the case gives one.
    pub key: String,
    /// ssh's input is a pseudo-terminal the bench opens at 80x24 (ssh gets `-tt`).
    pub pty: bool,
    /// Never in the session's output (stdout and stderr), until ssh exits.
    pub forbid: Vec<Pattern>,
    /// More ssh arguments, before the host; none that [`Session`]'s guarantees refuse.
    pub ssh_args: Vec<String>,
    /// A remote command in place of a shell.
    pub command: Option<String>,
    /// Never empty; only marks follow an `Exit` or `Ended`, of which there is at most one;
    /// a `Within` is followed by a step that is not one.
    pub steps: Vec<Step>,
}

impl Session {
    /// The private key's path, relative to the workspace root.
    pub fn private_key(&self) -> PathBuf {
        PathBuf::from(TEST_KEYS).join(&self.key)
    }

    /// The public key's path, relative to the workspace root.
    pub fn public_key(&self) -> PathBuf {
        PathBuf::from(TEST_KEYS).join(format!("{}.pub", self.key))
    }
}

/// One step of a session, in order.
#[derive(Clone, Debug)]
pub enum Step {
    /// A regex over the session's output since the last match; its groups are kept for
    /// the sends after it.
    Expect(Pattern),
    /// Typed into ssh's input.
    Send(SendText),
    /// Sets a mark other sessions wait for; some other session waits on it or not.
    Mark(String),
    /// Waits until another session set this mark (one that some other session sets).
    Wait(String),
    /// With `pty`: the terminal's new size, then SIGWINCH to ssh. Each 1 to 1000.
    Resize { cols: u16, rows: u16 },
    /// The next step must finish within this, and before the deadline.
    Within(Duration),
    /// Close the input, read until ssh exits, require this status.
    Exit(u8),
    /// Input left open, read until ssh exits on its own, require this status.
    Ended(u8),
}

/// A send's text: pieces as written and the last expect's groups (`$1`..`$9`; `$$` is a
/// `$`). Every group it names is one the latest expect before it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendText {
    /// As the case wrote it.
    pub source: String,
    pub pieces: Vec<SendPiece>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendPiece {
    Text(String),
    /// 1 to 9.
    Group(usize),
}

impl SendText {
    /// The text to type, given the latest expect's captures by number (`groups[n]` for
    /// `$n`; a group that took no part in the match is empty).
    pub fn expand(&self, groups: &[Option<&str>]) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                SendPiece::Text(text) => text.as_str(),
                SendPiece::Group(n) => groups.get(*n).copied().flatten().unwrap_or(""),
            })
            .collect()
    }
}

/// The server an ssh-loopback case's sessions log in to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// OpenSSH's sshd, `sshd -i` in the Debian riscv64 guest, which logs in only root.
    OpenSsh,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::OpenSsh => "openssh",
        }
    }
}

/// Sessions against a server that each session's ssh starts as its ProxyCommand.
#[derive(Clone, Debug)]
pub struct SshLoopbackCase {
    pub server: Server,
    /// Only rv64: the OpenSSH server is Debian's riscv64 guest.
    pub arch: Vec<Arch>,
    pub timeout: Duration,
    /// Test keys the server authorizes for root: `tests/keys/<name>.pub`, at least one.
    pub authorized_keys: Vec<String>,
    /// Each matched by some line of the server's log, in order.
    pub server_log: Vec<Pattern>,
    /// Matched by no line of the server's log.
    pub server_log_forbid: Vec<Pattern>,
    /// At least one; each logs in as root.
    pub sessions: Vec<Session>,
}

/// A path a case names, with the field that named it and what must be there, for the
/// bench's check before anything builds.
#[derive(Clone, Debug)]
pub struct NamedPath {
    pub field: String,
    pub path: PathBuf,
    pub kind: PathKind,
    /// What the field names, in words ("a kernel image"), for the refusal.
    pub what: &'static str,
}

/// What a named path must be. A FIFO, a socket or a device never is: reading one could
/// block the bench forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    /// A regular file (or a symbolic link to one).
    File,
    /// A directory (or a symbolic link to one).
    Dir,
}

impl NamedPath {
    fn file(field: impl Into<String>, path: &std::path::Path, what: &'static str) -> NamedPath {
        NamedPath { field: field.into(), path: path.to_owned(), kind: PathKind::File, what }
    }
}

impl Case {
    /// The boot case, if this is one.
    pub fn as_boot(&self) -> Option<&BootCase> {
        match &self.kind {
            Kind::Boot(boot) => Some(boot),
            _ => None,
        }
    }

    /// The widths the case runs on; empty for a case that runs on the host alone.
    pub fn arch(&self) -> &[Arch] {
        match &self.kind {
            Kind::Boot(boot) => &boot.arch,
            Kind::Build(build) => &build.arch,
            Kind::SshLoopback(loopback) => &loopback.arch,
            _ => &[],
        }
    }

    /// The firmware the boot runs under, and the field that chose it. A missing firmware
    /// image is the host's lack, not the case's mistake, so it is checked at boot time
    /// (failing the case, or skipping it under `--allow-skip`), not with [`Case::paths`].
    pub fn firmware(&self) -> Option<(&Firmware, &'static str)> {
        match &self.as_boot()?.guest {
            Guest::Built { firmware, .. } => Some((firmware, "firmware")),
            Guest::External(guest) => Some((&guest.firmware, "guest.firmware")),
        }
    }

    /// Every input path the case names, with its field and what must be there: they are
    /// checked before anything builds. The firmware is not among them (see
    /// [`Case::firmware`]).
    pub fn paths(&self) -> Vec<NamedPath> {
        let mut paths = Vec::new();
        let boot = match &self.kind {
            Kind::Boot(boot) => boot,
            Kind::HostTests(host) => {
                paths.push(NamedPath::file("workspace", &host.workspace.join("Cargo.toml"), "a Cargo.toml"));
                return paths;
            }
            Kind::Gate(gate) => {
                paths.push(NamedPath {
                    field: "tree".into(),
                    path: gate.tree.clone(),
                    kind: PathKind::Dir,
                    what: "the tree the gate reads",
                });
                return paths;
            }
            Kind::SshLoopback(loopback) => {
                for (index, key) in loopback.authorized_keys.iter().enumerate() {
                    let path = PathBuf::from(TEST_KEYS).join(format!("{key}.pub"));
                    paths.push(NamedPath::file(format!("authorized_keys[{index}]"), &path, "a public test key"));
                }
                session_keys(&loopback.sessions, &mut paths);
                return paths;
            }
            Kind::Build(_) | Kind::Scripts(_) => return paths,
        };
        if let Some(program) = boot.post_check.as_ref().and_then(|p| p.command.first()).filter(|p| p.contains('/')) {
            paths.push(NamedPath::file(
                "post_check.command[0]",
                std::path::Path::new(program),
                "the post-check program",
            ));
        }
        match &boot.guest {
            Guest::Built { programs, .. } => {
                for (index, entry) in programs.iter().enumerate() {
                    if let Program::Path(path) = &entry.program {
                        paths.push(NamedPath::file(format!("programs[{index}].path"), path, "a program's ELF file"));
                    }
                }
                for (index, file) in boot.files.iter().enumerate() {
                    match &file.from {
                        FileSource::Path(path) | FileSource::Program(Program::Path(path)) => {
                            paths.push(NamedPath::file(format!("file[{index}].from"), path, "a file to pack"))
                        }
                        FileSource::Program(_) => {}
                    }
                }
            }
            Guest::External(guest) => {
                match &guest.image {
                    GuestImage::Files { kernel, initrd } => {
                        paths.push(NamedPath::file("guest.kernel", kernel, "a kernel image"));
                        if let Some(initrd) = initrd {
                            paths.push(NamedPath::file("guest.initrd", initrd, "an initrd image"));
                        }
                    }
                    GuestImage::Recipe(recipe) => paths.push(NamedPath::file("guest.recipe", recipe, "a guest recipe")),
                    GuestImage::Media { image, cdrom, .. } => {
                        if let Some(image) = image {
                            paths.push(NamedPath::file("guest.image", image, "a disk image"));
                        }
                        if let Some(cdrom) = cdrom {
                            paths.push(NamedPath::file("guest.cdrom", cdrom, "an ISO image"));
                        }
                    }
                }
                if let Some(symbols) = &guest.symbols {
                    paths.push(NamedPath::file("guest.symbols", symbols, "the kernel's ELF with DWARF"));
                }
                for (index, file) in guest.overlay.iter().enumerate() {
                    let field = format!("guest.overlay[{index}].from");
                    paths.push(NamedPath::file(field, &file.from, "a file for the guest's initramfs"));
                }
            }
        }
        for (table, disk) in boot.disks.iter() {
            match &disk.layout {
                DiskLayout::Recipe(recipe) => {
                    paths.push(NamedPath::file(format!("{table}.recipe"), recipe, "a disk recipe"))
                }
                DiskLayout::Image { path, .. } => {
                    paths.push(NamedPath::file(format!("{table}.image"), path, "a disk image (raw or qcow2)"))
                }
                _ => {}
            }
        }
        session_keys(&boot.sessions, &mut paths);
        paths
    }
}

/// Each session's test key, both halves, named by `session[i].key`.
fn session_keys(sessions: &[Session], paths: &mut Vec<NamedPath>) {
    for (index, session) in sessions.iter().enumerate() {
        let field = format!("session[{index}].key");
        paths.push(NamedPath::file(field.clone(), &session.private_key(), "a private test key"));
        paths.push(NamedPath::file(field, &session.public_key(), "a public test key"));
    }
}

/// A case the bench refuses, with where and why: the first refusal, and the file's
/// others after it in the file's order (each shown on a line of its own).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}{}", self.also.iter().map(|e| format!("\n{e}")).collect::<String>())]
pub struct CaseError {
    pub file: String,
    /// The field, as a path into the file (`smp.rv64`, `expect[2]`), or `toml` for syntax.
    pub field: String,
    pub message: String,
    /// The same file's further refusals, in the file's order.
    pub also: Vec<CaseError>,
}

impl CaseError {
    /// Several refusals of one file as one error: the first, the others after it. None
    /// when there are none.
    pub(crate) fn all(mut errors: Vec<CaseError>) -> Option<CaseError> {
        if errors.is_empty() {
            return None;
        }
        let mut first = errors.remove(0);
        let mut also = std::mem::take(&mut first.also);
        for mut error in errors {
            let more = std::mem::take(&mut error.also);
            also.push(error);
            also.extend(more);
        }
        first.also = also;
        Some(first)
    }

    /// Each refusal on its own, `file: field: message`, in the file's order.
    pub fn each(&self) -> Vec<String> {
        std::iter::once(CaseError { also: Vec::new(), ..self.clone() })
            .chain(self.also.iter().cloned())
            .map(|e| e.to_string())
            .collect()
    }
}
