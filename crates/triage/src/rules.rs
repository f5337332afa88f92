//! The rules: which line starts a report, of what kind, under what title; which lines
//! belong to an open report, which end it, and what a line says about its frames.

use std::sync::OnceLock;

use regex::Regex;

use crate::frames::{base_name, parse_frame, Frame};
use crate::{CrashKind, Guest};

/// A line that starts a report (or, inside one, adds to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Start {
    pub kind: CrashKind,
    /// The title before its frame (`WARNING`, `KASAN: use-after-free`); None for the
    /// `cut here` line, whose next line says what follows.
    pub header: Option<String>,
    /// Whether the title ends ` in <guilty frame>`.
    pub in_frame: bool,
    /// The frame the line itself names (a WARNING's `at file:line func+0x1/0x2`).
    pub hint: Option<Frame>,
    /// A fixed title frame the line names (KCSAN's `foo / bar`), not a frame to look up.
    pub fixed: Option<String>,
    /// The line is part of a report already open (an `Oops:` after `BUG: unable to
    /// handle`, `Kernel panic` after an oops), not a report of its own, when one is open.
    pub secondary: bool,
    /// The report ends at the next line of `=` (the sanitizers' frame).
    pub framed: bool,
    /// The report is this one line (plus a backtrace that follows, for xv6 and the
    /// reference kernel).
    pub single: bool,
    /// The reference kernel's own `PANIC` line: the report runs on to its backtrace's
    /// end line (`end of backtrace`), and is cut without it.
    pub traced_to_end: bool,
    /// The title blames the outermost own frame below the dispatch layers (stalls, a
    /// stack overrun), not the innermost.
    pub outermost: bool,
    /// A free-form `WARNING: <message>` line: many drivers print one that is no crash.
    /// It is a report only if a backtrace of its own follows.
    pub tentative: bool,
    /// The title blames the first frame past the layers that allocate (a leak, a bad
    /// page found on allocation): see [`crate::is_allocating`].
    pub past_allocators: bool,
    /// The title blames the caller of `schedule()` (scheduling while atomic: where the
    /// task chose to sleep), helper or not.
    pub schedules_caller: bool,
}

impl Start {
    fn new(kind: CrashKind, header: impl Into<String>) -> Start {
        Start {
            kind,
            header: Some(header.into()),
            in_frame: true,
            hint: None,
            fixed: None,
            secondary: false,
            framed: false,
            single: false,
            traced_to_end: false,
            tentative: false,
            past_allocators: matches!(kind, CrashKind::MemoryLeak),
            schedules_caller: false,
            outermost: matches!(kind, CrashKind::RcuStall | CrashKind::SoftLockup),
        }
    }
    fn whole(mut self) -> Start {
        self.in_frame = false;
        self
    }
    fn secondary(mut self) -> Start {
        self.secondary = true;
        self
    }
    fn framed(mut self) -> Start {
        self.framed = true;
        self
    }
    fn hint(mut self, line: &str) -> Start {
        self.hint = parse_frame(line);
        self
    }
}

/// Literal byte strings one of which every start line holds (case-sensitive): the fast
/// path skips every line with none of them.
pub(crate) fn triggers(guest: Guest) -> &'static [&'static str] {
    match guest {
        Guest::Linux => &[
            "panic",
            "PANIC",
            "BUG",
            "WARNING",
            "cut here",
            "handle",
            "protection fault",
            "opcode",
            "nstruction",
            "divide",
            "Oops",
            "Internal error",
            "INFO:",
            "LOCKUP",
            "Out of memory",
            "oom-killer",
            "stack segment",
            "UBSAN",
        ],
        Guest::Xv6 => &["panic"],
        Guest::Reference => &["PANIC"],
        Guest::Generic => &["panic", "PANIC", "BUG", "WARNING"],
    }
}

struct Res {
    warning_at: Regex,
    sanitizer: Regex,
    number: Regex,
    hex: Regex,
    task: Regex,
    keyed: Regex,
    reference: Regex,
}

fn res() -> &'static Res {
    static RES: OnceLock<Res> = OnceLock::new();
    RES.get_or_init(|| Res {
        warning_at: Regex::new(
            r"^WARNING: (?:CPU: ?\d+ PID: ?-?\d+ at |(?:\[.*\] )?(\S+\.\w+):\d+ at |at )(\S+\.\w+)?",
        )
        .expect("a valid pattern"),
        sanitizer: Regex::new(r"^(?:BUG: )?(KASAN|KMSAN|KFENCE|KCSAN): (.+?)(?: in | on |$)").expect("a valid pattern"),
        number: Regex::new(r"\b\d+\b").expect("a valid pattern"),
        hex: Regex::new(r"\b(?:0x)?[0-9a-fA-F]{8,}\b|\b0x[0-9a-fA-F]+\b").expect("a valid pattern"),
        keyed: Regex::new(r"\s\w+[:=]\S").expect("a valid pattern"),
        task: Regex::new(r"(?:^|\s)[\w.:/-]+/\d+\b").expect("a valid pattern"),
        reference: Regex::new(r"^PANIC (.*?)(?: at ([^\s:]+):(\d+):(\d+))?$").expect("a valid pattern"),
    })
}

/// A message made stable for a title: addresses become `ADDR`, numbers `NUM`, the
/// `key=value` and `[...]` tails and trailing dots go.
pub(crate) fn clean(msg: &str) -> String {
    let r = res();
    let mut m = msg.trim();
    for tail in [" ...", "...", "!", ".", ":"] {
        if let Some(s) = m.strip_suffix(tail) {
            m = s.trim_end();
        }
    }
    // A task named with its pid (`syz-executor/3321`, `kworker/1:0/17`) is no part of a
    // title.
    let m = r.task.replace_all(m, "");
    let m = r.hex.replace_all(&m, "ADDR");
    let m = r.number.replace_all(&m, "NUM");
    m.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The part after a `prefix` that is followed by `: `, or at the line's start.
fn after<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    s.strip_prefix(prefix)
}

/// Whether the line starts a report (or continues an open one), for `guest`.
pub(crate) fn start(s: &str, guest: Guest, finder: &aho_corasick::AhoCorasick) -> Option<Start> {
    if let Some(mut st) = start_at(s, guest) {
        // The reference kernel's PANIC line starts its line (a program's is behind its
        // prefix, `[pid 2] [name] PANIC …`) and is followed by its backtrace.
        st.traced_to_end = guest == Guest::Reference;
        return Some(st);
    }
    glued(s, guest, finder)
}

/// A report's first line glued to other output: after leading blanks, after a
/// console's `login: ` prompt, or from a printk timestamp inside the line.
fn glued(s: &str, guest: Guest, finder: &aho_corasick::AhoCorasick) -> Option<Start> {
    let t = s.trim_start();
    if t.len() != s.len() {
        if let Some(st) = start_at(t, guest) {
            return Some(st);
        }
    }
    if let Some((_, rest)) = s.split_once("login: ") {
        let rest = strip_prefix(rest).0;
        if let Some(st) = start_at(rest, guest).or_else(|| glued(rest, guest, finder)) {
            return Some(st);
        }
    }
    let b = s.as_bytes();
    for hit in finder.find_iter(s).filter(|m| m.start() > 0) {
        let at = hit.start();
        if !b[at - 1].is_ascii_alphanumeric() && b[at - 1] != b'_' {
            if let Some(st) = start_at(&s[at..], guest) {
                return Some(st);
            }
        }
    }
    for at in memchr::memchr_iter(b'[', b).filter(|&i| i > 0) {
        let (rest, stamped) = strip_prefix(&s[at..]);
        if stamped {
            if let Some(st) = start_at(rest, guest) {
                return Some(st);
            }
        }
    }
    None
}

fn start_at(s: &str, guest: Guest) -> Option<Start> {
    match guest {
        Guest::Linux => linux(s),
        Guest::Xv6 => xv6(s),
        Guest::Reference => reference(s),
        Guest::Generic => generic(s),
    }
}

fn xv6(s: &str) -> Option<Start> {
    let msg = s.strip_prefix("panic: ")?;
    let mut st = Start::new(CrashKind::Panic, format!("panic: {}", clean(msg))).whole();
    st.single = true;
    Some(st)
}

fn reference(s: &str) -> Option<Start> {
    let c = res().reference.captures(s)?;
    let msg = c.get(1).map_or("", |m| m.as_str());
    let kind = if msg.contains("assertion") { CrashKind::Assertion } else { CrashKind::Panic };
    let mut st = Start::new(kind, format!("panic: {}", clean(msg))).whole();
    st.single = true;
    if let Some(file) = c.get(2) {
        st.hint = Some(Frame {
            function: None,
            offset: None,
            size: None,
            module: None,
            address: None,
            location: Some(format!("{}:{}:{}", file.as_str(), &c[3], &c[4])),
            reliable: true,
        });
    }
    Some(st)
}

fn generic(s: &str) -> Option<Start> {
    // Linux's panic, BUG and WARNING lines, whatever kind their words make them
    // (`BUG: unable to handle …` is a page fault).
    let lines = ["Kernel panic", "BUG", "WARNING", "kernel BUG"];
    if let Some(st) = linux(s) {
        if lines.iter().any(|l| s.starts_with(l)) {
            return Some(st);
        }
    }
    if let Some(st) = reference(s) {
        return Some(st);
    }
    let msg = s.strip_prefix("panic: ").or_else(|| s.strip_prefix("PANIC: "))?;
    let mut st = Start::new(CrashKind::Panic, format!("panic: {}", clean(msg))).whole();
    st.single = true;
    Some(st)
}

/// Linux's report starts.
fn linux(s: &str) -> Option<Start> {
    let s = s.strip_prefix("NMI watchdog: ").or_else(|| s.strip_prefix("watchdog: ")).unwrap_or(s);
    let s = s.strip_prefix("rcu: ").unwrap_or(s);
    // Older lockdep: "[ INFO: inconsistent lock state ]", "[ BUG: held lock freed! ]".
    let s = match s.strip_prefix("[ ").and_then(|r| r.strip_suffix(" ]")) {
        Some(inner) if inner.starts_with("INFO: ") || inner.starts_with("BUG: ") => inner,
        _ => s,
    };
    // The OOM killer's report: "<comm> invoked oom-killer: gfp_mask=…", the allocating
    // task's stack, the memory state, and its end, "Out of memory: Killed process …"
    // (a secondary line). The title blames the first frame past the allocator, the OOM
    // killer and the page-fault path: none for a user page fault.
    if s.contains(" invoked oom-killer: ") {
        // Inside another report (another task's crash), it is that report's line.
        let mut st = Start::new(CrashKind::OutOfMemory, "out of memory").secondary();
        st.past_allocators = true;
        return Some(st);
    }
    let b = s.as_bytes();
    match b.first()? {
        b'K' => {
            let msg = after(s, "Kernel panic - not syncing: ")?;
            return Some(panic(msg).secondary());
        }
        b'-' if s.starts_with("------------[ cut here ]") => {
            let mut st = Start::new(CrashKind::Warning, "WARNING");
            st.header = None;
            return Some(st);
        }
        b'W' if s.starts_with("WARNING:") => return Some(warning(s)),
        b'W' if s.starts_with("Watchdog detected hard LOCKUP") => {
            return Some(Start::new(CrashKind::HardLockup, "BUG: hard lockup"))
        }
        b'B' if s.starts_with("BUG") => return bug(s),
        b'U' => {
            if let Some(rest) = s.strip_prefix("UBSAN: ") {
                let what = rest.split(" in ").next().unwrap_or(rest).trim();
                let what = if what.eq_ignore_ascii_case("undefined behaviour") { "undefined-behaviour" } else { what };
                return Some(Start::new(CrashKind::Ubsan, format!("UBSAN: {}", clean(what))).framed());
            }
            if s.starts_with("Unable to handle kernel NULL pointer dereference") {
                return Some(Start::new(CrashKind::PageFault, "BUG: unable to handle kernel NULL pointer dereference"));
            }
            if s.starts_with("Unable to handle kernel access to user memory") {
                return Some(Start::new(CrashKind::PageFault, "BUG: unable to handle kernel access to user memory"));
            }
            if s.starts_with("Unable to handle kernel") {
                return Some(Start::new(CrashKind::PageFault, "BUG: unable to handle kernel paging request"));
            }
            if s.starts_with("Unhandled fault") {
                return Some(Start::new(CrashKind::PageFault, "Unhandled fault"));
            }
        }
        b'g' if s.starts_with("general protection fault") => {
            return Some(Start::new(CrashKind::GeneralProtection, "general protection fault"))
        }
        b'k' if s.starts_with("kernel BUG at") => {
            let file = s["kernel BUG at".len()..].trim().split(':').next().unwrap_or("");
            let header = match file {
                "mm/usercopy.c" => "BUG: bad usercopy",
                "lib/list_debug.c" => "BUG: corrupted list",
                _ => "kernel BUG",
            };
            return Some(Start::new(CrashKind::Bug, header));
        }
        b'i' if s.starts_with("invalid opcode:") => {
            return Some(Start::new(CrashKind::IllegalInstruction, "invalid opcode").secondary())
        }
        b'd' if s.starts_with("divide error:") || s.starts_with("divide_error:") => {
            return Some(Start::new(CrashKind::Oops, "divide error"))
        }
        b's' if s.starts_with("stack segment: ") => {
            return Some(Start::new(CrashKind::GeneralProtection, "stack segment fault"))
        }
        b'O' => {
            if let Some(rest) = s.strip_prefix("Oops: ") {
                if rest.starts_with("general protection fault") {
                    return Some(Start::new(CrashKind::GeneralProtection, "general protection fault"));
                }
                if rest.starts_with("divide error") {
                    return Some(Start::new(CrashKind::Oops, "divide error"));
                }
                if rest.starts_with("stack segment") {
                    return Some(Start::new(CrashKind::GeneralProtection, "stack segment fault"));
                }
            }
            if s.starts_with("Oops - illegal instruction") || s.starts_with("Oops - undefined instruction") {
                return Some(Start::new(CrashKind::IllegalInstruction, "illegal instruction").secondary());
            }
            if s.starts_with("Oops") {
                return Some(Start::new(CrashKind::Oops, "Oops").secondary());
            }
            if s.starts_with("Out of memory") {
                return Some(Start::new(CrashKind::OutOfMemory, "out of memory").secondary());
            }
        }
        b'I' => {
            if let Some(rest) = s.strip_prefix("Internal error: ") {
                let st = if rest.contains("ndefined instruction") {
                    Start::new(CrashKind::IllegalInstruction, "illegal instruction")
                } else {
                    Start::new(CrashKind::Oops, "Internal error")
                };
                return Some(st.secondary());
            }
            if let Some(rest) = s.strip_prefix("INFO: ") {
                return info(rest);
            }
        }
        b'P' if s.starts_with("PANIC: double fault") => {
            return Some(Start::new(CrashKind::Oops, "PANIC: double fault"))
        }
        _ => {}
    }
    // SLUB's checks: "BUG kmalloc-8 (Tainted: G B): Object already free".
    if let Some(rest) = s.strip_prefix("BUG ") {
        if let Some((_, msg)) = rest.split_once("): ") {
            return Some(Start::new(CrashKind::Bug, format!("BUG: {}", clean(msg))).whole());
        }
    }
    if s.contains(" general protection fault") {
        return Some(Start::new(CrashKind::GeneralProtection, "general protection fault"));
    }
    None
}

fn panic(msg: &str) -> Start {
    let msg = msg.trim();
    if let Some(rest) = msg.strip_prefix("stack-protector: Kernel stack is corrupted in: ") {
        let mut st = Start::new(CrashKind::Panic, "kernel panic: stack is corrupted");
        st.hint = parse_frame(rest);
        return st;
    }
    if msg.starts_with("corrupted stack end detected inside scheduler") {
        // The task overran its stack: titled by the work it was doing, as a stall is.
        let mut st = Start::new(CrashKind::Panic, "kernel panic: corrupted stack end");
        st.outermost = true;
        return st;
    }
    let mut m = msg;
    for cut in [" exitcode=", " --- ", " in interrupt"] {
        if let Some(i) = m.find(cut) {
            m = &m[..i];
        }
    }
    if let Some(i) = m.find(" for ") {
        // "Couldn't open N_TTY ldisc for ptm1": the object named after "for" varies.
        if m[i..].split_whitespace().nth(1).is_some_and(|w| w.bytes().any(|b| b.is_ascii_digit())) {
            m = &m[..i];
        }
    }
    let cleaned = clean(m);
    let cleaned = if msg.contains("Attempted to kill init!") { "Attempted to kill init!".to_string() } else { cleaned };
    Start::new(CrashKind::Panic, format!("kernel panic: {cleaned}")).whole()
}

fn warning(s: &str) -> Start {
    let r = res();
    if let Some(c) = r.warning_at.captures(s) {
        let file = c.get(1).or(c.get(2)).map_or("", |m| m.as_str());
        let at = s.find(" at ").map_or(s, |i| &s[i + 4..]);
        let function = parse_frame(at).and_then(|f| f.function).unwrap_or_default();
        let header = match category(file, base_name(&function)) {
            Some(what) => format!("WARNING: {what}"),
            None => "WARNING".to_string(),
        };
        return Start::new(CrashKind::Warning, header).hint(at);
    }
    let msg = s["WARNING:".len()..].trim();
    let lockdep = |header: &str| Start::new(CrashKind::Lockdep, header);
    if msg.starts_with("possible circular locking dependency")
        || msg.starts_with("possible recursive locking")
        || msg.starts_with("possible irq lock inversion")
    {
        return lockdep("possible deadlock");
    }
    if msg.starts_with("inconsistent lock state") {
        return lockdep("inconsistent lock state");
    }
    if msg.contains("-safe -> ") && msg.contains("-unsafe lock order") {
        return lockdep("possible deadlock");
    }
    if msg.starts_with("suspicious RCU usage") {
        return lockdep("WARNING: suspicious RCU usage");
    }
    let m = msg.trim_end_matches(['!', '.']).trim_end();
    let m = m.strip_suffix(" detected").unwrap_or(m);
    let kind = if msg.contains("lock") { CrashKind::Lockdep } else { CrashKind::Warning };
    let mut st = Start::new(kind, format!("WARNING: {}", clean(m)));
    st.tentative = true;
    st
}

/// The kind of bug a WARNING is, by the file and function that warn: the helpers that
/// check their callers' use of a facility (the title then names the caller). The
/// allocators' size checks (`kmalloc_slab`, `kvmalloc_node` on a size too large) are a
/// kmalloc bug; a free's check in the same files is not; `__vmalloc_node_range` warns
/// on a size of zero.
fn category(file: &str, function: &str) -> Option<&'static str> {
    let file = file.trim_start_matches("./");
    Some(match file {
        "lib/debugobjects.c" => "ODEBUG bug",
        "mm/slab_common.c" | "mm/slab.h" | "mm/slub.c" | "mm/slab.c" if function.contains("free") => return None,
        "mm/slab_common.c" | "mm/slab.h" | "mm/slub.c" | "mm/slab.c" => "kmalloc bug",
        "mm/util.c" if function.starts_with("kvmalloc") => "kmalloc bug",
        "mm/vmalloc.c" if function == "__vmalloc_node_range" => "zero-size vmalloc",
        "lib/kobject.c" => "kobject bug",
        "mm/usercopy.c" => "bad usercopy",
        "lib/refcount.c" => "refcount bug",
        "fs/proc/generic.c" => "proc registration bug",
        f if f.starts_with("kernel/locking/") => "locking bug",
        _ => return None,
    })
}

/// A sanitizer's first line (`BUG: KASAN: use-after-free in f+0x1/0x2`), `c` its
/// `sanitizer` captures.
fn sanitizer(s: &str, c: &regex::Captures) -> Start {
    let tool = &c[1];
    let what = c[2].trim_end_matches(':');
    let what = if what.contains("double-free") || what.contains("invalid-free") { "invalid-free" } else { what };
    let kind = match tool {
        "KASAN" => CrashKind::Kasan,
        "KFENCE" => CrashKind::Kfence,
        "KMSAN" => CrashKind::Kmsan,
        _ => CrashKind::Kcsan,
    };
    let mut st = Start::new(kind, format!("{tool}: {what}")).framed();
    let rest = &s[c.get(0).map_or(0, |m| m.end())..];
    if kind == CrashKind::Kcsan {
        // "data-race in foo / bar": both functions name the report.
        let names: Vec<&str> = rest.split(" / ").map(|n| base_name(n.trim().split('+').next().unwrap_or(""))).collect();
        if names.iter().all(|n| !n.is_empty()) {
            st.fixed = Some(names.join(" / "));
        }
    } else if kind == CrashKind::Kasan && rest.contains(" at addr ") {
        // Before 4.14 KASAN named the access on the first line and no Read/Write:
        // `in f+0x1/0x2 at addr ffff…`; the title keeps that shape.
        // (A later `Read of size` line gives the newer shape: see `close`.)
        let f = rest.split_whitespace().next().unwrap_or("").split('+').next().unwrap_or("");
        st.fixed = Some(format!("{} at addr ADDR", clean(f)));
        st.hint = parse_frame(rest);
    } else if !rest.starts_with("address") && !rest.starts_with("addr ") {
        st.hint = parse_frame(rest).or_else(|| {
            let name = rest.split_whitespace().next()?;
            Some(Frame {
                function: Some(name.to_string()),
                offset: None,
                size: None,
                module: None,
                address: None,
                location: None,
                reliable: true,
            })
        });
    }
    st
}

/// The mm's page and counter checks, and lockdep's table limits (the message after
/// `BUG: `).
fn limit_or_mm_check(msg: &str) -> Option<Start> {
    if msg.starts_with("Bad page state") {
        // Found where a page is allocated or freed: the allocator's layers are not it.
        let mut st = Start::new(CrashKind::Bug, "BUG: Bad page state");
        st.past_allocators = true;
        return Some(st);
    }
    if msg.starts_with("Bad rss-counter state") || msg.starts_with("Bad page map") {
        // The mm's checks at teardown and unmap find what someone else left: the
        // frame that found it is not the bug.
        // (check_mm prints the rss-counter line alone, no trace follows it.)
        let map = msg.starts_with("Bad page map");
        let what = if map { "Bad page map" } else { "Bad rss-counter state" };
        let mut st = Start::new(CrashKind::Bug, format!("BUG: {what}")).whole();
        st.single = !map;
        return Some(st);
    }
    if msg.starts_with("MAX_") && msg.contains(" too low") {
        // Lockdep ran out of a table (`MAX_STACK_TRACE_ENTRIES too low!`): a limit, not
        // a bug of whoever took the lock then.
        let what = msg.split_whitespace().next().unwrap_or("");
        return Some(Start::new(CrashKind::Lockdep, format!("BUG: {what} too low!")).whole());
    }
    None
}

fn bug(s: &str) -> Option<Start> {
    let r = res();
    if let Some(c) = r.sanitizer.captures(s) {
        return Some(sanitizer(s, &c));
    }
    let msg = s.strip_prefix("BUG: ")?.trim();
    if msg.starts_with("unable to handle kernel NULL pointer dereference")
        || msg.starts_with("kernel NULL pointer dereference")
    {
        return Some(Start::new(CrashKind::PageFault, "BUG: unable to handle kernel NULL pointer dereference"));
    }
    if msg.starts_with("unable to handle") || msg.starts_with("Unable to handle kernel") {
        return Some(Start::new(CrashKind::PageFault, "BUG: unable to handle kernel paging request"));
    }
    if msg.starts_with("soft lockup") {
        return Some(Start::new(CrashKind::SoftLockup, "BUG: soft lockup"));
    }
    if msg.starts_with("memory leak") {
        return Some(Start::new(CrashKind::MemoryLeak, "memory leak"));
    }
    if msg.starts_with("Dentry ") && msg.contains(" still in use") {
        // `BUG: Dentry ADDR{i=…,n=…}  still in use (N) [unmount of FS DEV]`: one line
        // (the WARNING in umount_check that follows is a report of its own), found
        // at unmount; the dentry's address and name drift.
        let mut st = Start::new(CrashKind::Bug, "BUG: Dentry still in use");
        if msg.contains("[unmount of ") {
            st.fixed = Some("unmount".to_string());
        } else {
            st.in_frame = false;
        }
        st.single = true;
        return Some(st);
    }
    if msg.contains("stack guard page was hit") {
        // "TASK stack guard page", "IRQ stack guard page": one bug whichever stack.
        // The task overran its stack: titled by the work it was doing, as a stall is.
        let mut st = Start::new(CrashKind::Bug, "BUG: stack guard page was hit");
        st.outermost = true;
        return Some(st);
    }
    if let Some(st) = limit_or_mm_check(msg) {
        return Some(st);
    }
    if msg.starts_with("scheduling while atomic") {
        let mut st = Start::new(CrashKind::Bug, "BUG: scheduling while atomic");
        st.schedules_caller = true;
        return Some(st);
    }
    if msg.contains(" still has locks held") {
        return Some(Start::new(CrashKind::Lockdep, "BUG: still has locks held"));
    }
    let mut m = msg;
    for cut in [" at ", ": ", " on CPU", " in process", " [", " code:", " caller is", " on cpu", " pid:", " in "] {
        if let Some(i) = m.find(cut) {
            m = &m[..i];
        }
    }
    // A `key:value` or `key=value` word starts the message's variable part.
    let m = match r.keyed.find(m) {
        Some(k) => &m[..k.start()],
        None => m,
    };
    let m = m.trim_end_matches(['!', '.', ',', ':']).trim_end();
    let m = m.strip_suffix(" detected").unwrap_or(m);
    let m = if msg.contains(" in preemptible") && !m.contains("preemptible") {
        format!("{m} in preemptible code")
    } else {
        m.to_string()
    };
    Some(Start::new(CrashKind::Bug, format!("BUG: {}", clean(&m))))
}

fn info(rest: &str) -> Option<Start> {
    if rest.starts_with("task ") && rest.contains(" blocked") && rest.contains(" for more than ") {
        return Some(Start::new(CrashKind::HungTask, "INFO: task hung"));
    }
    if rest.starts_with("task ") && rest.contains("can't die") {
        return Some(Start::new(CrashKind::HungTask, "INFO: task can't die"));
    }
    if rest.starts_with("rcu_") && (rest.contains("detected stall") || rest.contains("detected expedited stall")) {
        return Some(Start::new(CrashKind::RcuStall, "INFO: rcu detected stall"));
    }
    if rest.starts_with("suspicious RCU usage") {
        // The kernel's word for it before 4.x; kept, as the kernel printed it.
        return Some(Start::new(CrashKind::Lockdep, "INFO: suspicious RCU usage"));
    }
    if rest.starts_with("possible circular locking")
        || rest.starts_with("possible recursive locking")
        || rest.starts_with("possible irq lock inversion")
    {
        return Some(Start::new(CrashKind::Lockdep, "possible deadlock"));
    }
    if rest.starts_with("inconsistent lock state") {
        return Some(Start::new(CrashKind::Lockdep, "inconsistent lock state"));
    }
    if rest.contains("-safe -> ") && rest.contains("-unsafe lock order detected") {
        return Some(Start::new(CrashKind::Lockdep, "possible deadlock"));
    }
    if rest.starts_with("trying to register non-static key") {
        return Some(Start::new(CrashKind::Lockdep, "INFO: trying to register non-static key"));
    }
    None
}

/// Whether `s` (a line of an open report, its prefix stripped) is one a kernel prints in
/// a report: a frame, a register, an indented line, a section heading. Other lines inside
/// a report are someone else's output.
pub(crate) fn body(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&first) = b.first() else { return true };
    if first == b' ' || first == b'\t' || first == b'[' || first == b'<' || first == b'#' {
        return true;
    }
    if b.len() >= 4 && (s.starts_with("====") || s.starts_with("----") || s.starts_with("-> #")) {
        return true;
    }
    // Registers: "RAX: ", "R10: ", "CR2: ", "pc : ", "x29: ", "epc : ", "s11: ", "r10: "
    // (not any short word before a colon: "init: ..." is someone else's).
    if let Some(colon) = s.find(':') {
        let name = s[..colon].trim_end();
        if (1..=5).contains(&name.len()) && colon <= 6 && register(name) {
            return true;
        }
    }
    if parse_frame(s).is_some() {
        return true;
    }
    const HEADS: &[&str] = &[
        "CPU",
        "Hardware name",
        "Call Trace",
        "Call trace",
        "Code:",
        "Modules linked in",
        "Workqueue",
        "task:",
        "Stack",
        "Oops",
        "Internal error",
        "Kernel Offset",
        "Kernel panic",
        "Rebooting",
        "Dumping ftrace",
        "Read of size",
        "Write of size",
        "Read at addr",
        "Write at addr",
        "Allocated by",
        "Freed by",
        "Last potentially",
        "Second to last",
        "The buggy address",
        "Memory state",
        "Bytes b4",
        "Object ",
        "Redzone",
        "Padding",
        "page:",
        "page_owner",
        "page last",
        "flags:",
        "raw:",
        "head:",
        "page dumped",
        "Disabling lock debugging",
        "Showing",
        "stack backtrace",
        "other info",
        "but task",
        "which lock",
        "the existing",
        "Chain exists",
        "Possible unsafe",
        "Possible interrupt",
        " *** DEADLOCK",
        "*** DEADLOCK",
        "lock(",
        "INFO:",
        "NMI backtrace",
        "Sending NMI",
        "rcu:",
        "\"echo 0",
        "Not tainted",
        "Tainted",
        "irq event stamp",
        "hardirqs",
        "softirqs",
        "IP:",
        "PGD",
        "PUD",
        "P4D",
        "RIP",
        "Mem abort info",
        "ESR",
        "EC =",
        "SET =",
        "FnV",
        "EA =",
        "S1PTW",
        "Data abort info",
        "ISV",
        "CM =",
        "user pgtable",
        "swapper pgtable",
        "pgd",
        "SMP",
        "Uninit",
        "Local variable",
        "CPU0",
        "Thread overran",
        "backtrace",
        "comm \"",
        "unreferenced object",
        "hex dump",
        "Freed in",
        "Allocated in",
        "BUG",
        "WARNING",
        "ODEBUG",
        "invalid opcode",
        "general protection",
        "KASAN",
        "KFENCE",
        "KMSAN",
        "UBSAN",
        "value changed",
        "Reported by",
        "shift exponent",
        "index ",
        "signed integer",
        "load of value",
        "member access",
        "Access of ",
        "Corrupted memory",
        "Out-of-bounds",
        "Use-after-free",
        "Invalid free",
        "kfence-#",
        "allocated by task",
        "freed by task",
        "in_atomic()",
        "preempt_count",
        "RCU used illegally",
        "rcu_scheduler_active",
        "no locks held",
        "1 lock held",
        "Preemption disabled",
        "Unable to handle",
        "Mem-Info",
        "active_anon",
        "Node ",
        "lowmem_reserve",
        "Free swap",
        "Total swap",
        "Tasks state",
        "oom-kill",
        "Out of memory",
        "sched: RT throttling",
        "epc",
        "status:",
        "badaddr",
        "cause:",
        "---[",
        "Mem abort",
        "Unhandled fault",
        "pstate",
        "Exception stack",
        "Process ",
        "Function entered",
        "pc :",
        "lr :",
        "sp :",
        ">",
        "Bytes ",
        "Pointer tag",
        "page_type",
        "This frame has",
        "Control:",
        "LR is at",
        "PC is at",
        "Allocated:",
        "Backtrace",
        "All QSes seen",
        "pgd =",
        "Flags:",
        "Process ",
        "memcg:",
        "rcu_sched",
        "rcu_preempt",
        "rcu_bh",
        "RCU grace-period",
        "Exception stack",
        "Freed:",
        "...",
        "DMA",
        "Normal",
        "Shutting down cpus",
        "write to",
        "read to",
        "write (marked)",
        "read (marked)",
        "race at",
        "Invalid read",
        "Invalid write",
        "(stack is not available)",
        "Unless rcu",
        "Sending NMI",
        "Task dump",
        "Stack dump",
        "Zone",
        "kasan:",
    ];
    if HEADS.iter().any(|h| s.starts_with(h)) || section(s).is_some() {
        return true;
    }
    // lockdep's "3 locks held by kworker/1:0/17:", "4 locks on stack by".
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    digits > 0 && (s[digits..].starts_with(" lock") || s[digits..].starts_with(" pages"))
}

/// A register's name as the kernels print them: x86's in capitals (`RAX`, `R10`, `CR2`,
/// `FS`), arm's and riscv's (`x29`, `pc`, `lr`, `sp`, `fp`, `ip`, `ra`, `gp`, `tp`, `t0`,
/// `s11`, `a7`, `r10`, `epc`).
fn register(name: &str) -> bool {
    let b = name.as_bytes();
    if b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) && b[0].is_ascii_uppercase() {
        return true;
    }
    // arm's stack dump: "dd40: 977bdda0 8062eec8 …", offsets in lowercase hex.
    if b.len() == 4 && b.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return true;
    }
    if matches!(name, "pc" | "lr" | "sp" | "fp" | "ip" | "ra" | "gp" | "tp" | "epc" | "psr" | "cpsr") {
        return true;
    }
    let (head, digits) = (b[0], &b[1..]);
    matches!(head, b'x' | b't' | b's' | b'a' | b'r') && !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// Whether the line ends the report it is in: the kernel's end-of-trace markers.
pub(crate) fn end_marker(s: &str) -> bool {
    s.starts_with("---[ end trace") || s.starts_with("---[ end Kernel panic")
}

/// Whether the line ends an out-of-memory report: the OOM killer's verdict,
/// `Out of memory: Killed process …` (`Memory cgroup out of memory: …` in a cgroup).
pub(crate) fn oom_end(s: &str) -> bool {
    s.starts_with("Out of memory: Killed process") || s.starts_with("Memory cgroup out of memory: Killed process")
}

/// The sanitizers' closing line (a run of `=`).
pub(crate) fn frame_line(s: &str) -> bool {
    s.len() >= 20 && s.bytes().all(|c| c == b'=')
}

/// Where a line moves the frames a report's guilty frame is looked for in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// Frames from here on are not the report's own (allocation stacks, other tasks,
    /// the dependency chains of lockdep, the grace-period kthread's stack).
    Others,
    /// Frames from here on are the report's own again (the stalled CPU's backtrace).
    Own,
    /// Interrupt context starts / ends.
    IrqIn,
    IrqOut,
}

pub(crate) fn section(s: &str) -> Option<Section> {
    const OTHERS: &[&str] = &[
        "Allocated by task",
        "Freed by task",
        "Last potentially related",
        "Second to last potentially",
        "Last call_rcu",
        "Second to last call_rcu",
        "The buggy address",
        "Memory state around",
        "the existing dependency chain",
        "other info that might help",
        "Showing all locks held",
        "Showing busy workqueues",
        "RCU grace-period kthread stack dump",
        "Uninit was created",
        "Uninit was stored",
        "Local variable",
        "allocated by task",
        "freed by task",
        "which lock already depends",
        "and this task is already holding",
        "but this lock was taken by another",
        "Sending NMI from CPU",
        "Stack dump where RCU GP kthread last ran",
        "rcu_preempt kthread starved",
        "rcu_sched kthread starved",
        "rcu_bh kthread starved",
    ];
    const OWN: &[&str] = &["NMI backtrace for cpu", "Task dump for CPU", "stack backtrace:"];
    let t = s.trim_start();
    let t = t.strip_prefix("rcu: ").unwrap_or(t);
    // lockdep's `{IN-HARDIRQ-W} state was registered at:`: where the lock's other use
    // was first seen, another stack.
    if OTHERS.iter().any(|h| t.starts_with(h)) || (t.starts_with('{') && t.ends_with("} state was registered at:")) {
        return Some(Section::Others);
    }
    if OWN.iter().any(|h| t.starts_with(h)) {
        return Some(Section::Own);
    }
    match t {
        "<IRQ>" | "<NMI>" | "<SOFTIRQ>" => Some(Section::IrqIn),
        "</IRQ>" | "</NMI>" | "<EOI>" | "</SOFTIRQ>" => Some(Section::IrqOut),
        _ => None,
    }
}

/// A frame-bearing line whose frame is not one of the trace's: arm64's `lr :`, riscv's
/// ` ra :`, a user-space `RIP: 0033:`.
pub(crate) fn not_a_trace_frame(s: &str) -> bool {
    let t = s.trim_start();
    t.starts_with("lr :")
        || t.starts_with("ra :")
        || t.starts_with("RIP: 0033:")
        || t.starts_with("LR is at")
        || t.starts_with("ODEBUG:")
        || t.starts_with("Register r")
        || t.contains(" hint: ")
}

/// A lockdep line naming where the lock it tries to take or holds was taken
/// (`(&buf->lock){+.+.}, at: func+0x1/0x2`): a frame, not a backtrace. (A list of held
/// locks, `#0: (…), at: func`, is what some reports print for a trace.)
pub(crate) fn lock_site(s: &str) -> bool {
    let t = s.trim_start();
    !t.starts_with('#') && (t.contains("}, at: ") || t.contains("), at: "))
}

/// A faulting PC line that names an address and no function (`RIP: 0010:0x286`,
/// `PC is at 0x0`): the CPU jumped somewhere no function is.
pub(crate) fn pc_address_only(s: &str) -> bool {
    let t = s.trim_start();
    let Some(rest) = ["RIP:", "IP:", "EIP:", "pc :", "epc :", "PC is at"].iter().find_map(|p| t.strip_prefix(p)) else {
        return false;
    };
    let rest = rest.trim_start();
    // x86's code segment, `0010:`, before the address.
    let rest = match rest.split_once(':') {
        Some((seg, addr)) if seg.len() == 4 && seg.bytes().all(|b| b.is_ascii_hexdigit()) => addr,
        _ => rest,
    };
    let word = rest.split_whitespace().next().unwrap_or("");
    word.starts_with("0x") || word.starts_with("[<")
}

/// A line that names the faulting instruction's function, not a frame of the trace:
/// `RIP:`, `IP:`, `EIP:`, `pc :`, `epc :`, `PC is at`.
pub(crate) fn pc_line(s: &str) -> bool {
    let t = s.trim_start();
    ["RIP:", "IP:", "EIP:", "pc :", "epc :", "PC is at"].iter().any(|p| t.starts_with(p))
}

/// xv6's backtrace lines: `backtrace:` and then `0x…` return addresses.
pub(crate) fn xv6_frame(s: &str) -> Option<Frame> {
    let h = s.trim().strip_prefix("0x")?;
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(Frame {
        function: None,
        offset: None,
        size: None,
        module: None,
        address: u64::from_str_radix(h, 16).ok(),
        location: None,
        reliable: true,
    })
}

/// A frame of the reference kernel's backtrace, `#N 0x<call site>` (trimmed), and
/// whether it is marked ` (core)`: a call site in the core library's code, the panic
/// machinery, never the guilty frame.
pub(crate) fn reference_frame(s: &str) -> Option<(Frame, bool)> {
    let rest = s.strip_prefix('#')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(" 0x")?;
    let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
    let (address, mark) = rest.split_at(hex);
    let core = match mark {
        "" => false,
        " (core)" => true,
        _ => return None,
    };
    if hex == 0 || hex > 16 {
        return None;
    }
    let frame = Frame {
        function: None,
        offset: None,
        size: None,
        module: None,
        address: u64::from_str_radix(address, 16).ok(),
        location: None,
        reliable: true,
    };
    Some((frame, core))
}

/// The reference kernel's backtrace's end line (trimmed): `end of backtrace`, with why
/// the walk stopped after a colon when it was not the chain's end.
pub(crate) fn reference_end(s: &str) -> bool {
    s == "end of backtrace" || s.starts_with("end of backtrace: ")
}

/// The caller id a line's printk prefix carries (`T123` of `[  1.2][ T123]`), if any.
pub(crate) fn caller(mut s: &str) -> Option<&str> {
    while let Some(rest) = s.strip_prefix('[') {
        let close = memchr::memchr(b']', &rest.as_bytes()[..rest.len().min(24)])?;
        let inner = rest[..close].trim_start();
        if inner.len() >= 2
            && (inner.starts_with('T') || inner.starts_with('C'))
            && inner[1..].bytes().all(|c| c.is_ascii_digit())
        {
            return Some(inner);
        }
        s = &rest[close + 1..];
    }
    None
}

/// The entry of the timer interrupt a stall is found from.
pub(crate) fn timer_entry(name: &str) -> bool {
    name.ends_with("apic_timer_interrupt")
        || name == "arch_timer_handler_virt"
        || name == "arch_timer_handler_phys"
        || name == "riscv_timer_interrupt"
        || name == "hrtimer_interrupt"
}

/// Whether a printk timestamp begins somewhere inside the line.
pub(crate) fn stamp_inside(s: &str) -> bool {
    memchr::memchr_iter(b'[', s.as_bytes()).any(|i| strip_prefix(&s[i..]).1)
}

/// The printk prefixes a line may carry, stripped: `<4>`, `[   12.345678]`,
/// `[  T123]`/`[    C1]` (caller ids). Says whether a timestamp was there.
pub(crate) fn strip_prefix(mut s: &str) -> (&str, bool) {
    let mut stamped = false;
    loop {
        let b = s.as_bytes();
        if b.len() >= 3 && b[0] == b'<' && b[1].is_ascii_digit() && b[2] == b'>' {
            s = &s[3..];
            continue;
        }
        if b.first() == Some(&b'[') {
            if let Some(close) = memchr::memchr(b']', &b[..b.len().min(24)]) {
                let inner = s[1..close].trim_start();
                let stamp =
                    !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_digit() || c == b'.') && inner.contains('.');
                let caller = inner.len() >= 2
                    && (inner.starts_with('T') || inner.starts_with('C'))
                    && inner[1..].bytes().all(|c| c.is_ascii_digit());
                if stamp || caller {
                    stamped |= stamp;
                    s = &s[close + 1..];
                    s = s.strip_prefix(' ').unwrap_or(s);
                    continue;
                }
            }
        }
        return (s, stamped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_stripped() {
        assert_eq!(strip_prefix("[  768.720843][ T1064] Call Trace:"), ("Call Trace:", true));
        assert_eq!(strip_prefix("[  768.720843][ T1064]  __schedule+0x9/0x1"), (" __schedule+0x9/0x1", true));
        assert_eq!(strip_prefix("<4>[    1.5] x"), ("x", true));
        assert_eq!(strip_prefix("[<ffffffff8000>] f+0x1/0x2"), ("[<ffffffff8000>] f+0x1/0x2", false));
    }

    #[test]
    fn cleaning_drops_numbers_and_addresses() {
        assert_eq!(
            clean("VFS: Unable to mount root fs on unknown-block(0,0)"),
            "VFS: Unable to mount root fs on unknown-block(NUM,NUM)"
        );
        assert_eq!(clean("bad address 0xdeadbeef here..."), "bad address ADDR here");
    }
}
