//! # testbench-triage: crash reports read from a kernel's console
//!
//! Bytes in, reports out: [`reports`] reads a whole console, a [`Scanner`] reads one as it
//! arrives and yields each report as soon as its end is seen. **No I/O**: no file,
//! network, process or clock; every function is total (no input makes it panic; the
//! fuzz target `crash_reports` holds it to that).
//!
//! A [`Report`] has its [`CrashKind`], a title stable across the drift of kernel output,
//! its frames and guilty frame, the byte range of the whole report in the console, and
//! a [`Corruption`] when it is cut or interleaved with other output. The guest kind
//! ([`Guest`]) picks the rules. docs/triage.md is the full account; in short:
//!
//! ## Lines
//!
//! The console is split on '\n'; a trailing '\r' is dropped, bytes past [`LINE_KEEP`] of
//! a line are not read (they still count in ranges), invalid UTF-8 is read lossily.
//! Each line loses its printk prefixes (`<4>`, `[  12.345678]`, `[ T123]`, `[  C1]`)
//! before any rule sees it. A line with none of the guest's trigger literals (one
//! Aho-Corasick search over the whole block) is skipped without being looked at while
//! no report is open: that is what makes the parser fast on a healthy console. A
//! report's first line glued to other output is found after leading blanks, after a
//! `login: ` prompt, at a trigger word that starts a word, or at a printk timestamp
//! inside the line.
//!
//! ## Titles
//!
//! A title is a fixed header for the kind (`WARNING`, `KASAN: use-after-free Read`,
//! `BUG: unable to handle kernel NULL pointer dereference`, `INFO: task hung`,
//! `kernel panic: <message>`), then ` in <function>` for the kinds that have a guilty
//! frame. What drifts never reaches a title: timestamps and caller ids are stripped
//! with the prefix, addresses, offsets, PIDs, CPU numbers, register dumps and the
//! file:line of a WARNING are not part of the header, a panic message keeps its words
//! with hex numbers as `ADDR` and decimal ones as `NUM`, and a function loses its
//! compiler clone suffix (`.isra.8`, `.cold`, `.constprop.0`). A kind that wants a frame
//! and finds none says `in corrupted` and the report is corrupted ([`Corruption::NoFrame`]).
//!
//! ## Guilty frame
//!
//! The frame the start line names (a WARNING's `at file:line func+0x1/0x2`, KASAN's
//! `in func`), else the first frame of the report's own backtrace (its `RIP:`/`pc :`/
//! `epc :` line, then `Call Trace:` lines in order), that is reliable (not `? func`), for
//! a stall, lockup or hung task not in interrupt context (`<IRQ>`…`</IRQ>`, the timer's),
//! not in a section about other stacks (KASAN's
//! `Allocated by task`, lockdep's dependency chain, held locks), and not one of the
//! reporting and common helpers ([`HELPERS`], [`HELPER_PREFIXES`]: the one list). A
//! stall (RCU stall, soft lockup) is titled by where the CPU was sent instead: a wait in
//! `smp_call_function*`, else the outermost own frame that is neither a helper nor a
//! dispatch layer ([`DISPATCH`], [`DISPATCH_SYSCALLS`]: the VFS, block and socket layers,
//! the dispatching system calls, the softirq and work-queue runners); when the timer
//! interrupt found the CPU in a softirq, that softirq's handler. With no frame left
//! outside the helpers, a report blames the system call it entered by.
//!
//! ## Where a report ends
//!
//! At `---[ end trace`, `---[ end Kernel panic`, the sanitizers' closing `=====` line,
//! the reference kernel's `end of backtrace` (its report is cut without it);
//! before the next report's first line (a line that only continues the open report —
//! `Oops:` after `BUG: unable to handle`, `Kernel panic` inside an oops — is absorbed);
//! after [`GAP_LIMIT`] lines in a row that no report prints (the report then ends at its
//! last line; in a stamped report only stamped lines count, and [`FOREIGN_LIMIT`]
//! unstamped ones end it too; another caller id's lines, `[ T4436]` inside a `[ T6604]`
//! report, do not corrupt it and count only toward [`FOREIGN_LIMIT`]); at [`MAX_LINES`]. [`Report::end_seen`] says whether its end marker came.
//! A free-form `WARNING: <message>` line is a report only if a backtrace of its own
//! follows (drivers print many that are no crash).
//!
//! ## Corrupted
//!
//! A report is corrupted when it cannot be trusted to name its bug: it ended (the console
//! ended, the next report began) before a frame of its own backtrace (the faulting
//! `RIP:`/`pc :` line, a lockdep lock site `…, at: func` and, for a kind titled by its
//! innermost frame, a trace of helpers only are not one; a WARNING so cut says
//! `in corrupted`)
//! ([`Corruption::Cut`]), or other output ended it first ([`Corruption::NoTrace`]); its
//! kind names a frame and none outside the helpers was printed ([`Corruption::NoFrame`],
//! the title says `in corrupted`); someone else's output came between its lines
//! ([`Corruption::Interleaved`]: a line with no printk timestamp inside a report whose
//! lines have one, or where the console has none, a line no report prints); or it ran
//! past [`MAX_LINES`]. A stamped kernel line that is not the report's (another CPU's
//! message) is not interleaving: the kernel prints from every CPU. A report whose
//! backtrace was printed and whose end was not (the guest hung or reset) is not
//! corrupted; `end_seen` is false.

mod frames;
mod rules;
mod scan;

use std::fmt;
use std::ops::Range;

pub use frames::{
    base_name, is_allocating, is_dispatch, is_helper, is_noreturn, parse_frame, title_name, Frame, CHECKERS, DISPATCH,
    DISPATCH_SYSCALLS, HELPERS, HELPER_PREFIXES, NORETURN,
};
pub use scan::{Pending, Scanner, FOREIGN_LIMIT, GAP_LIMIT, LINE_KEEP, MAX_FRAMES, MAX_LINES};

/// Which rules read the console.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Guest {
    /// Linux on any width: x86_64, arm64 and riscv backtraces.
    Linux,
    /// xv6: `panic: <msg>`, and the `backtrace:` of return addresses some versions print.
    Xv6,
    /// The bench's own reference kernel: `PANIC <msg> at <file>:<line>:<col>`, its
    /// `backtrace:` of `#N 0x…` call sites (` (core)` on the panic machinery's) and its
    /// `end of backtrace` line.
    Reference,
    /// A guest the bench knows nothing of: panic, BUG and WARNING lines only.
    Generic,
}

/// What kind of crash a report is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CrashKind {
    Panic,
    Oops,
    Bug,
    Warning,
    Kasan,
    Kfence,
    Kmsan,
    Kcsan,
    Ubsan,
    /// Lockdep: possible deadlock, inconsistent lock state, suspicious RCU usage.
    Lockdep,
    RcuStall,
    HungTask,
    SoftLockup,
    HardLockup,
    OutOfMemory,
    MemoryLeak,
    GeneralProtection,
    /// A kernel page fault: NULL pointer dereference or paging request.
    PageFault,
    IllegalInstruction,
    /// A guest's own assertion (the reference kernel's `assertion … failed` panics).
    Assertion,
}

impl CrashKind {
    /// Every kind, in the order of the enum.
    pub const ALL: [CrashKind; 20] = [
        CrashKind::Panic,
        CrashKind::Oops,
        CrashKind::Bug,
        CrashKind::Warning,
        CrashKind::Kasan,
        CrashKind::Kfence,
        CrashKind::Kmsan,
        CrashKind::Kcsan,
        CrashKind::Ubsan,
        CrashKind::Lockdep,
        CrashKind::RcuStall,
        CrashKind::HungTask,
        CrashKind::SoftLockup,
        CrashKind::HardLockup,
        CrashKind::OutOfMemory,
        CrashKind::MemoryLeak,
        CrashKind::GeneralProtection,
        CrashKind::PageFault,
        CrashKind::IllegalInstruction,
        CrashKind::Assertion,
    ];

    /// The kind [`CrashKind::name`] names.
    pub fn from_name(name: &str) -> Option<CrashKind> {
        CrashKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// A short lowercase name (`kasan`, `page-fault`), for JSON and grouping.
    pub fn name(self) -> &'static str {
        match self {
            CrashKind::Panic => "panic",
            CrashKind::Oops => "oops",
            CrashKind::Bug => "bug",
            CrashKind::Warning => "warning",
            CrashKind::Kasan => "kasan",
            CrashKind::Kfence => "kfence",
            CrashKind::Kmsan => "kmsan",
            CrashKind::Kcsan => "kcsan",
            CrashKind::Ubsan => "ubsan",
            CrashKind::Lockdep => "lockdep",
            CrashKind::RcuStall => "rcu-stall",
            CrashKind::HungTask => "hung-task",
            CrashKind::SoftLockup => "soft-lockup",
            CrashKind::HardLockup => "hard-lockup",
            CrashKind::OutOfMemory => "out-of-memory",
            CrashKind::MemoryLeak => "memory-leak",
            CrashKind::GeneralProtection => "general-protection",
            CrashKind::PageFault => "page-fault",
            CrashKind::IllegalInstruction => "illegal-instruction",
            CrashKind::Assertion => "assertion",
        }
    }
}

impl fmt::Display for CrashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a report is not whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// The console ended, or another report began, before the report printed a frame
    /// of its own backtrace.
    Cut,
    /// Lines of other output came between the report's lines; the first at this byte.
    Interleaved { at: usize },
    /// It ended (other output followed) before any backtrace.
    NoTrace,
    /// Its kind names a guilty frame, and no frame outside the helpers was printed.
    NoFrame,
    /// It ran past [`MAX_LINES`].
    TooLong,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::Cut => f.write_str("cut before its end"),
            Corruption::Interleaved { at } => write!(f, "other output inside it (from byte {at})"),
            Corruption::NoTrace => f.write_str("no backtrace"),
            Corruption::NoFrame => f.write_str("no frame outside the reporting helpers"),
            Corruption::TooLong => write!(f, "over {MAX_LINES} lines"),
        }
    }
}

/// One crash report found in a console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub kind: CrashKind,
    /// The stable title (see the crate doc).
    pub title: String,
    pub guilty_frame: Option<Frame>,
    /// The frames the report printed, in order (at most [`MAX_FRAMES`]).
    pub frames: Vec<Frame>,
    /// The bytes of the whole report in the console: its first line's start to its
    /// last line's end (the '\n' included).
    pub range: Range<usize>,
    /// None for a report whole enough to trust: its start, its own backtrace, no one
    /// else's output inside.
    pub corrupted: Option<Corruption>,
    /// Its end was seen: an end marker (`---[ end trace`, `---[ end Kernel panic`, the
    /// sanitizers' closing line, the reference kernel's `end of backtrace`), or for xv6
    /// and a one-line `PANIC` the line after it.
    /// False for a report the console ended inside, or that other output or the next
    /// report ended.
    pub end_seen: bool,
}

impl Report {
    pub fn is_corrupted(&self) -> bool {
        self.corrupted.is_some()
    }
}

/// Every report in a whole console, in order.
pub fn reports(console: &[u8], guest: Guest) -> Vec<Report> {
    let mut scanner = Scanner::new(guest);
    let mut out = scanner.feed(console);
    out.extend(scanner.finish());
    out
}
