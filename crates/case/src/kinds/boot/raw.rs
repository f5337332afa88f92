//! Kind "boot" as serde reads it, beside the lists of its fields in words: the top level
//! ([`RawBoot`], [`FIELDS`]), the `[guest]` table ([`RawGuest`], [`GUEST`]), each
//! `[[input]]` ([`RawInput`], [`INPUT`]), and the devices: `[disk]`, `[vault]` and
//! `[userland]` ([`RawDisk`], [`DISK`], with `flip` as [`RawFlip`], [`FLIP`]), `[net]`
//! ([`RawNet`], [`NET`]) with each `[[net.peer]]` ([`RawPeer`], [`PEER`]), each
//! `[[net.dial]]` ([`RawDial`], [`DIAL`]) and `[net.poke]` ([`RawPoke`], [`POKE`]); each
//! `[[session]]` is `session.rs`'s, which kind "ssh-loopback" reads too. Each struct and
//! its list name the same fields in the same order, which `kinds::tests` checks.
//!
//! A new boot field is one line in [`FIELDS`] (its shape and what it accepts, in words)
//! and one in [`RawBoot`], at the same place in both; its meaning is checked in
//! `kinds/boot.rs`.

use serde::Deserialize;

use crate::fields::{field, Field, Shape, ARCH, BOOL, FEATURE_NAMES, REGEXES, SECONDS, SESSIONS, TIMEOUT_SECS};
use crate::session::RawSession;

/// The fields of kind "boot" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    ARCH,
    field("programs", Shape::List, "a list of programs, such as [\"logsrv\", { bin = \"checker\" }]"),
    field("smp", Shape::Any, "a list of hart counts, such as [1, 2], or one per width"),
    field("keep_smp", Shape::Bool, BOOL),
    field("timeout_secs_smp", Shape::Seconds, SECONDS),
    field("memory_mib", Shape::Integer, "a whole number of MiB, such as 256"),
    TIMEOUT_SECS,
    field("clock", Shape::Str, "\"guest\" (the default: icount) or \"host\""),
    field("clock_reason", Shape::Str, "why the case runs on the host's clock, such as \"host-sockets\""),
    field("clock_note", Shape::Str, "what was seen under icount, as a sentence"),
    field("icount", Shape::Str, "QEMU's -icount option string, such as \"shift=3,sleep=off\""),
    field("accel", Shape::Str, "\"tcg\", \"kvm\" or \"auto\""),
    field("qemu_seed", Shape::Integer, "a whole number from 0, such as 7"),
    field("rtc_base", Shape::Any, "where the guest's RTC starts: \"utc\", \"localtime\" or a date or date-time"),
    field("repeat_exactly", Shape::Bool, BOOL),
    field("kernel_features", Shape::StrList, FEATURE_NAMES),
    field("debug_assertions", Shape::Bool, BOOL),
    field("expect", Shape::StrList, REGEXES),
    field("forbid", Shape::StrList, REGEXES),
    field("poweroff", Shape::Bool, BOOL),
    field("poweroff_status", Shape::Integer, "an exit status, a whole number from 0 to 255"),
    field("reboots", Shape::Integer, "how many times the guest resets in the run, a whole number from 0 to 16"),
    field("reboot_expect", Shape::StrList, REGEXES),
    field("input", Shape::TableList, "[[input]] tables, each with after and send"),
    field("firmware", Shape::Str, "\"default\", \"none\", \"bios\", \"uefi\", or a path to an image"),
    field("guest", Shape::Table, "a [guest] table, with kernel or recipe"),
    field("reporter", Shape::Str, "the name of a program the first one starts"),
    field("allow_panic", Shape::Bool, BOOL),
    field("tamper_bundle", Shape::Bool, BOOL),
    field("sign_bare_archive", Shape::Bool, BOOL),
    field("short_initrd", Shape::Integer, "a whole number of bytes above 0"),
    field("device_tree", Shape::TableList, "a list of edits, such as [{ drop = \"/chosen/rng-seed\" }]"),
    field("distinct_across_boots", Shape::StrList, REGEXES),
    field("distinct", Shape::StrList, REGEXES),
    field("file", Shape::TableList, "[[file]] tables, each with name and from"),
    field("disk", Shape::Table, "a [disk] table, with size_kib or recipe"),
    field("vault", Shape::Table, "a [vault] table, with size_kib or recipe, beside a [disk]"),
    field("userland", Shape::Table, "a [userland] table, with size_kib or recipe"),
    field("net", Shape::Table, "a [net] table (an empty one is a card that reaches nothing)"),
    field("expect_after", Shape::StrList, REGEXES),
    field("session", Shape::TableList, SESSIONS),
    field("memory", Shape::Bool, BOOL),
    field("heap_fits", Shape::Bool, BOOL),
    field("ram_forbid", Shape::StrList, "a list of byte strings, 8 to 4096 bytes each, such as ['tb-secret-42']"),
    field("idle", Shape::Table, "an [idle] table, with seconds"),
    field("post_check", Shape::Table, "a table with command, such as { command = [\"scripts/oracles/printk-times\"] }"),
    field("triage", Shape::Table, "a [triage] table, such as { rules = \"linux\", allow = [\"warning\"] }"),
];

/// Kind "boot" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBoot {
    pub arch: Option<Vec<String>>,
    /// Entries told apart by their keys (`kinds/boot/reference.rs`).
    pub programs: Option<Vec<toml::Value>>,
    /// A list, or a table of lists by width.
    pub smp: Option<toml::Value>,
    pub keep_smp: Option<bool>,
    pub timeout_secs_smp: Option<f64>,
    pub memory_mib: Option<i64>,
    pub timeout_secs: Option<f64>,
    pub clock: Option<String>,
    pub clock_reason: Option<String>,
    pub clock_note: Option<String>,
    pub icount: Option<String>,
    pub accel: Option<String>,
    pub qemu_seed: Option<i64>,
    /// A string or a TOML date-time (`boot/repeat.rs` checks it).
    pub rtc_base: Option<toml::Value>,
    pub repeat_exactly: Option<bool>,
    pub kernel_features: Option<Vec<String>>,
    pub debug_assertions: Option<bool>,
    pub expect: Option<Vec<String>>,
    pub forbid: Option<Vec<String>>,
    pub poweroff: Option<bool>,
    pub poweroff_status: Option<i64>,
    pub reboots: Option<i64>,
    pub reboot_expect: Option<Vec<String>>,
    pub input: Option<Vec<RawInput>>,
    pub firmware: Option<String>,
    pub guest: Option<RawGuest>,
    // The reference guest, hostile inputs, device-tree edits, distinctness.
    pub reporter: Option<String>,
    pub allow_panic: Option<bool>,
    pub tamper_bundle: Option<bool>,
    pub sign_bare_archive: Option<bool>,
    pub short_initrd: Option<i64>,
    /// Edits told apart by their keys (`kinds/boot/reference.rs`).
    pub device_tree: Option<Vec<toml::Table>>,
    pub distinct_across_boots: Option<Vec<String>>,
    pub distinct: Option<Vec<String>>,
    /// `[[file]]` entries, read by hand (`kinds/boot/reference.rs`).
    pub file: Option<Vec<toml::Table>>,
    // The devices (`kinds/boot/disk.rs`, `kinds/boot/net.rs`).
    pub disk: Option<RawDisk>,
    pub vault: Option<RawDisk>,
    pub userland: Option<RawDisk>,
    pub net: Option<RawNet>,
    // The sessions (`session.rs`, shared with kind "ssh-loopback").
    pub expect_after: Option<Vec<String>>,
    pub session: Option<Vec<RawSession>>,
    pub memory: Option<bool>,
    pub heap_fits: Option<bool>,
    pub ram_forbid: Option<Vec<String>>,
    pub idle: Option<RawIdle>,
    pub post_check: Option<RawPostCheck>,
    pub triage: Option<RawTriage>,
}

/// The fields of a `[guest]` table.
pub(crate) const GUEST: &[Field] = &[
    field("kernel", Shape::Str, "the kernel image's path"),
    field("recipe", Shape::Str, "a guest recipe's path"),
    field("image", Shape::Str, "a disk image's path (raw or qcow2), booted as the first disk through the firmware"),
    field("cdrom", Shape::Str, "an ISO 9660 image's path, booted as a CD through the firmware"),
    field("keep", Shape::Bool, "true to let the boot write to guest.image (by default it never does)"),
    field("initrd", Shape::Str, "an initrd's path"),
    field("append", Shape::Str, "the kernel command line, as a string"),
    field("firmware", Shape::Str, "\"default\", \"none\", or a path to an image"),
    field("machine", Shape::Str, "a QEMU machine option string, such as \"virt\""),
    field("qemu_args", Shape::StrList, "a list of QEMU arguments, such as [\"-device\", \"virtio-rng-device\"]"),
    field(
        "overlay",
        Shape::TableList,
        "a list of files added to the guest's initramfs, such as [{ from = \"tests/keys/guest-host\", to = \"etc/ssh/ssh_host_ed25519_key\", mode = 0o600 }]",
    ),
    field(
        "symbols",
        Shape::Str,
        "the path of the kernel's ELF with DWARF, which a crash's backtrace is symbolized against, such as Debian's usr/lib/debug/boot/vmlinux-…",
    ),
];

/// The fields of one `guest.overlay` entry; `mode` may be left out (0o644).
pub(crate) const OVERLAY: &[Field] = &[
    field("from", Shape::Str, "the file's path on the host, relative to the workspace root or absolute"),
    field("to", Shape::Str, "its path in the guest, relative to the initramfs's root, such as \"etc/motd\""),
    field("mode", Shape::Integer, "its permission bits, such as 0o600"),
];

/// One `guest.overlay` entry as serde reads it: the fields of [`OVERLAY`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOverlay {
    pub from: Option<String>,
    pub to: Option<String>,
    pub mode: Option<i64>,
}

/// A `[guest]` table as serde reads it: the fields of [`GUEST`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGuest {
    pub kernel: Option<String>,
    pub recipe: Option<String>,
    pub image: Option<String>,
    pub cdrom: Option<String>,
    pub keep: Option<bool>,
    pub initrd: Option<String>,
    pub append: Option<String>,
    pub firmware: Option<String>,
    pub machine: Option<String>,
    pub qemu_args: Option<Vec<String>>,
    pub overlay: Option<Vec<RawOverlay>>,
    pub symbols: Option<String>,
}

/// The fields of an `[[input]]` table, every one required.
pub(crate) const INPUT: &[Field] = &[
    field("after", Shape::Str, "a regex a shown line must match, as a string"),
    field("send", Shape::Str, "the text to type, as a string (add \\n for Enter)"),
];

/// An `[[input]]` table as serde reads it: the fields of [`INPUT`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInput {
    pub after: String,
    pub send: String,
}

/// The fields of a `[disk]`, `[vault]` or `[userland]` table (`keep` is refused on
/// `[userland]` in stage two, with the reason).
pub(crate) const DISK: &[Field] = &[
    field("size_kib", Shape::Integer, "the disk's size in KiB, a multiple of 4, such as 4096"),
    field("partitions", Shape::Integer, "a number of equal GPT partitions, 1 to 128"),
    field("recipe", Shape::Str, "a disk recipe's path, relative to the workspace root"),
    field(
        "image",
        Shape::Str,
        "a disk image's path (raw or qcow2), relative to the workspace root: copied into each boot, never written",
    ),
    field("format", Shape::Str, "raw or qcow2: the format of image (default: told from its first bytes)"),
    field("keep", Shape::Bool, BOOL),
    field("flip", Shape::Table, "{ partition = \"name\", file = \"path in its tree\" }"),
    field("flip_header", Shape::Str, "the name of a partition of the recipe"),
    field(
        "resize_kept_kib",
        Shape::Integer,
        "with keep and must_fail: the kept disk's new size in KiB between the boots",
    ),
];

/// A disk table as serde reads it: the fields of [`DISK`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDisk {
    pub size_kib: Option<i64>,
    pub partitions: Option<i64>,
    pub recipe: Option<String>,
    pub image: Option<String>,
    pub format: Option<String>,
    pub keep: Option<bool>,
    pub flip: Option<RawFlip>,
    pub flip_header: Option<String>,
    pub resize_kept_kib: Option<i64>,
}

/// The fields of a disk's `flip` table, both required.
pub(crate) const FLIP: &[Field] = &[
    field("partition", Shape::Str, "the name of a partition of the recipe"),
    field("file", Shape::Str, "a file's path in that partition's tree, such as \"hello.txt\""),
];

/// A disk's `flip` as serde reads it: the fields of [`FLIP`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlip {
    pub partition: Option<String>,
    pub file: Option<String>,
}

/// The fields of a `[net]` table.
pub(crate) const NET: &[Field] = &[
    field("forward", Shape::IntegerList, "a list of guest TCP ports, each 1 to 65535, such as [7, 22]"),
    field("self_forbidden", Shape::StrList, "a list of IPv4 prefixes, such as [\"10.0.2.0/24\", \"127.0.0.0/8\"]"),
    field("truncate_capture", Shape::Bool, BOOL),
    field(
        "capture_expect",
        Shape::StrList,
        "a list of regexes, each matching the one-line decoding of a frame in the capture",
    ),
    field("peer", Shape::TableList, "[[net.peer]] tables, each with addr and connections"),
    field("dial", Shape::TableList, "[[net.dial]] tables, each with port, send and expect"),
    field("poke", Shape::Table, "a [net.poke] table, with port, payload and after"),
    field("host_key", Shape::Str, "a public key, its type and its base64, such as \"ssh-ed25519 AAAA…\""),
];

/// A `[net]` table as serde reads it: the fields of [`NET`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNet {
    pub forward: Option<Vec<i64>>,
    pub self_forbidden: Option<Vec<String>>,
    pub truncate_capture: Option<bool>,
    pub capture_expect: Option<Vec<String>>,
    pub peer: Option<Vec<RawPeer>>,
    pub dial: Option<Vec<RawDial>>,
    pub poke: Option<RawPoke>,
    pub host_key: Option<String>,
}

/// The fields of a `[[net.peer]]` table, both required.
pub(crate) const PEER: &[Field] = &[
    field("addr", Shape::Str, "an IPv4 address and port in 10.0.0.0/16, such as \"10.0.9.100:7\""),
    field("connections", Shape::Integer, "a whole number of connections, 0 to 1000"),
];

/// A `[[net.peer]]` table as serde reads it: the fields of [`PEER`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPeer {
    pub addr: Option<String>,
    pub connections: Option<i64>,
}

/// The fields of a `[[net.dial]]` table (port, send and expect required).
pub(crate) const DIAL: &[Field] = &[
    field("port", Shape::Integer, "a port of net.forward, such as 7"),
    field("send", Shape::Str, "the text to send, as a string, such as \"hello\\n\""),
    field("expect", Shape::Str, "the text that must come back, as a string"),
    field("after", Shape::Str, "a regex a shown console line must match first, as a string"),
    field("until_closed", Shape::Bool, BOOL),
];

/// A `[[net.dial]]` table as serde reads it: the fields of [`DIAL`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDial {
    pub port: Option<i64>,
    pub send: Option<String>,
    pub expect: Option<String>,
    pub after: Option<String>,
    pub until_closed: Option<bool>,
}

/// The fields of the `[net.poke]` table, every one required.
pub(crate) const POKE: &[Field] = &[
    field("port", Shape::Integer, "the guest's UDP port, 1 to 65535"),
    field("payload", Shape::Str, "the datagram's bytes, as a string"),
    field("after", Shape::Str, "a regex a shown console line must match, as a string"),
];

/// The `[net.poke]` table as serde reads it: the fields of [`POKE`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPoke {
    pub port: Option<i64>,
    pub payload: Option<String>,
    pub after: Option<String>,
}

/// The fields of `[idle]`, in the order messages name them.
pub(crate) const IDLE: &[Field] = &[
    field("seconds", Shape::Seconds, "the window's length in seconds, 1 to 600, such as 10"),
    field("after", Shape::Str, "a regex: the console line the window waits for"),
    field("max", Shape::Table, "ceilings by rate name, such as { s_timer = 20, host_cores = 0.05 }"),
];

/// An `[idle]` table as serde reads it: the fields of [`IDLE`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIdle {
    pub seconds: Option<f64>,
    pub after: Option<String>,
    pub max: Option<toml::Table>,
}

/// The fields of `post_check`, in the order messages name them.
pub(crate) const POST_CHECK: &[Field] = &[
    field("command", Shape::StrList, "the program and its first arguments, such as [\"scripts/oracles/printk-times\"]"),
    field("oracle", Shape::Str, "a built-in oracle instead of a command: \"sched\""),
    field(
        "args",
        Shape::StrList,
        "more arguments, before the console log's path, such as [\"--max-gap\", \"5\"]; an oracle's limits, such as [\"pick_p99_us=50\"]",
    ),
    field("timeout_secs", Shape::Seconds, "how long the command may run, in seconds (default 60)"),
];

/// A `post_check` table as serde reads it: the fields of [`POST_CHECK`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPostCheck {
    pub command: Option<Vec<String>>,
    pub oracle: Option<String>,
    pub args: Option<Vec<String>>,
    pub timeout_secs: Option<f64>,
}

/// The fields of `[triage]`, in the order messages name them.
pub(crate) const TRIAGE: &[Field] = &[
    field("rules", Shape::Str, "\"linux\", \"xv6\", \"reference\", \"generic\" or \"off\""),
    field("allow", Shape::StrList, "crash kinds that do not fail the boot, such as [\"oops\"]"),
    field("forbid", Shape::StrList, "crash kinds that fail the boot besides the default ones, such as [\"warning\"]"),
];

/// A `[triage]` table as serde reads it: the fields of [`TRIAGE`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTriage {
    pub rules: Option<String>,
    pub allow: Option<Vec<String>>,
    pub forbid: Option<Vec<String>>,
}
