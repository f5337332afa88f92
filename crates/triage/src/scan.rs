//! The scanner: console bytes in, in any cuts, reports out as soon as their end is seen.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use crate::frames::{
    is_allocating, is_dispatch, is_helper, is_noreturn, is_oom_path, parse_frame, title_name, Frame, CHECKERS,
};
use crate::rules::{self, Section, Start};
use crate::{Corruption, CrashKind, Guest, Report};

/// At most this many bytes of one line are read; the rest of a longer line is skipped
/// (its bytes still count in the report's range).
pub const LINE_KEEP: usize = 1024;
/// A report holds at most this many lines; at the next it ends, corrupted.
pub const MAX_LINES: usize = 2000;
/// A report keeps at most this many frames.
pub const MAX_FRAMES: usize = 256;
/// This many lines in a row that are no report's ends an open report (at its last own line).
pub const GAP_LIMIT: usize = 3;
/// This many lines with no printk stamp inside a stamped report (user space writing to the
/// console), or with another caller id, end it; fewer unstamped ones only make it
/// interleaved.
pub const FOREIGN_LIMIT: usize = 64;

/// Reads a console as it arrives ([`Scanner::feed`]) and yields each report once its end
/// is seen; [`Scanner::finish`] closes the report the console ended inside.
pub struct Scanner {
    guest: Guest,
    finder: &'static AhoCorasick,
    /// Bytes fed so far.
    pos: usize,
    /// Where the line being read started, and its first [`LINE_KEEP`] bytes.
    line_start: usize,
    partial: Vec<u8>,
    open: Option<Open>,
}

/// The report being read: what the bench needs to stop a boot at its first line when the
/// guest then hangs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub kind: CrashKind,
    /// Where the report starts in the console.
    pub start: usize,
    /// Where its last line so far ends.
    pub end: usize,
}

struct Open {
    start: Start,
    begin: usize,
    end: usize,
    lines: usize,
    frames: Vec<Frame>,
    /// Indices into `frames` that may be guilty (the report's own, reliable, outside
    /// interrupt context).
    own: Vec<usize>,
    others: bool,
    in_irq: bool,
    /// In a stall's interrupt context: the timer interrupt's entry was passed, and the
    /// frames below it (indices into `frames`), the context it interrupted.
    past_timer: bool,
    softirq: Vec<usize>,
    /// In lockdep's irq-safe -> irq-unsafe report: inside its `... which became
    /// X-irq-safe at:` trace, and that trace's frames (indices into `frames`).
    in_irq_safe: bool,
    irq_safe: Vec<usize>,
    /// The faulting PC line named no function (`RIP: 0010:0xffffffffffffffff`): a call
    /// through a bad pointer.
    pc_unnamed: bool,
    /// A frame of its own backtrace was read (not only the faulting `RIP:`/`pc :` line).
    traced: bool,
    /// Which of its lines is the start line (the line after "cut here" is, when one
    /// came first): the frame it names is no backtrace.
    start_line: usize,
    gap: usize,
    /// Where the current run of lines that are not the report's began, and whether
    /// one of them is someone else's (an unstamped line inside a stamped report, or any
    /// such line where the console has no stamps).
    gap_from: usize,
    foreign: bool,
    /// The caller id of its first line (`T123`, `C1`), when the console prints them.
    caller: Option<String>,
    /// Unstamped lines (or other callers' lines) seen inside this report.
    unstamped: usize,
    interleaved: Option<usize>,
    access: Option<&'static str>,
    stamped: bool,
    backtrace: bool,
}

enum Close {
    Marker,
    Quiet,
    Next,
    ConsoleEnd,
    TooLong,
}

impl Scanner {
    pub fn new(guest: Guest) -> Scanner {
        let finder = finder(guest);
        Scanner { guest, finder, pos: 0, line_start: 0, partial: Vec::new(), open: None }
    }

    /// The report being read, if one is open.
    pub fn pending(&self) -> Option<Pending> {
        self.open.as_ref().map(|o| Pending { kind: o.start.kind, start: o.begin, end: o.end })
    }

    /// Feeds the next bytes of the console; returns the reports they ended.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Report> {
        let mut out = Vec::new();
        let base = self.pos;
        self.pos += bytes.len();
        let mut i = 0;
        if base > self.line_start {
            match memchr::memchr(b'\n', bytes) {
                None => {
                    keep(&mut self.partial, bytes);
                    return out;
                }
                Some(n) => {
                    keep(&mut self.partial, &bytes[..n]);
                    let text = std::mem::take(&mut self.partial);
                    self.line(self.line_start, base + n + 1, &text, &mut out);
                    self.partial = text;
                    self.partial.clear();
                    i = n + 1;
                }
            }
        }
        let complete = memchr::memrchr(b'\n', &bytes[i..]).map_or(i, |p| i + p + 1);
        while i < complete {
            if self.open.is_none() {
                match self.finder.find(&bytes[i..complete]) {
                    None => {
                        break;
                    }
                    Some(m) => {
                        let hit = i + m.start();
                        i = memchr::memrchr(b'\n', &bytes[i..hit]).map_or(i, |p| i + p + 1);
                    }
                }
            }
            let e = memchr::memchr(b'\n', &bytes[i..complete]).map_or(complete, |p| i + p);
            let text = &bytes[i..e.min(i + LINE_KEEP)];
            self.line(base + i, base + e + 1, text, &mut out);
            i = e + 1;
        }
        // Every whole line is read; what is left is the start of the next one.
        self.line_start = base + complete;
        keep(&mut self.partial, &bytes[complete..]);
        out
    }

    /// The console has ended: the line it ended inside is read, and the report still
    /// open is closed (cut, unless its trace had ended).
    pub fn finish(mut self) -> Vec<Report> {
        let mut out = Vec::new();
        if self.pos > self.line_start {
            let text = std::mem::take(&mut self.partial);
            self.line(self.line_start, self.pos, &text, &mut out);
        }
        if let Some(open) = self.open.take() {
            out.extend(close(open, Close::ConsoleEnd));
        }
        out
    }

    fn line(&mut self, begin: usize, end: usize, raw: &[u8], out: &mut Vec<Report>) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = String::from_utf8_lossy(raw);
        let (s, stamped) = rules::strip_prefix(&text);
        let started = if self.finder.is_match(s) { rules::start(s, self.guest, self.finder) } else { None };
        // Another task's report starting inside the open one (`[ T3080]` inside a
        // `[ T3083]` report: two CPUs faulting at once) is that task's output beside it,
        // not this report's end: the open report goes on around it.
        let started = started.filter(|_| !self.open.as_ref().is_some_and(|o| o.other_caller(&text)));
        if let Some(st) = started {
            if let Some(open) = &mut self.open {
                if open.start.header.is_none() && !st.single {
                    // The line after "cut here" says what the report is.
                    let framed = st.framed;
                    open.start = Start { framed, ..st };
                    open.start_line = open.lines + 1;
                    open.add(s, end);
                    return;
                }
                if st.secondary && !open.start.single {
                    open.add(s, end);
                    // The OOM killer's verdict ends its own report.
                    if open.start.kind == CrashKind::OutOfMemory && rules::oom_end(s) {
                        let open = self.open.take().expect("checked above");
                        out.extend(close(open, Close::Marker));
                    }
                    return;
                }
                let open = self.open.take().expect("checked above");
                out.extend(close(open, Close::Next));
            }
            let mut open = Open {
                start: st,
                begin,
                end,
                lines: 0,
                frames: Vec::new(),
                own: Vec::new(),
                others: false,
                in_irq: false,
                traced: false,
                start_line: 1,
                past_timer: false,
                softirq: Vec::new(),
                in_irq_safe: false,
                pc_unnamed: false,
                irq_safe: Vec::new(),
                gap: 0,
                gap_from: 0,
                foreign: false,
                unstamped: 0,
                interleaved: None,
                access: None,
                // A first line glued to other output may carry its stamp inside.
                stamped: stamped || rules::stamp_inside(&text),
                caller: rules::caller(&text).map(str::to_string),
                backtrace: false,
            };
            open.add(s, end);
            self.open = Some(open);
            return;
        }
        let Some(open) = &mut self.open else { return };
        if open.start.single {
            // xv6 and the reference kernel: "backtrace:" and its frames may follow the
            // panic line.
            let t = s.trim();
            if t == "backtrace:" && open.lines == 1 {
                open.backtrace = true;
                open.lines += 1;
                open.end = end;
                open.gap = 0;
                return;
            }
            if open.start.traced_to_end {
                // The reference kernel's: `#N 0x…` frames, then its end line; anything
                // else before that line is someone else's output inside the report.
                if open.backtrace {
                    if let Some((f, core)) = rules::reference_frame(t) {
                        if open.frames.len() < MAX_FRAMES {
                            if !core {
                                open.own.push(open.frames.len());
                            }
                            open.frames.push(f);
                        }
                        open.lines += 1;
                        open.end = end;
                        open.gap = 0;
                        return;
                    }
                    if rules::reference_end(t) {
                        open.lines += 1;
                        open.end = end;
                        let open = self.open.take().expect("checked above");
                        out.extend(close(open, Close::Marker));
                        return;
                    }
                }
                open.interleaved.get_or_insert(begin);
                open.gap += 1;
                if open.gap > GAP_LIMIT {
                    let open = self.open.take().expect("checked above");
                    out.extend(close(open, Close::Quiet));
                }
                return;
            }
            if open.backtrace {
                if let Some(f) = rules::xv6_frame(t) {
                    if open.frames.len() < MAX_FRAMES {
                        open.frames.push(f);
                    }
                    open.lines += 1;
                    open.end = end;
                    return;
                }
            }
            let open = self.open.take().expect("checked above");
            out.extend(close(open, Close::Quiet));
            return;
        }
        if rules::end_marker(s) || (open.start.framed && rules::frame_line(s)) {
            open.add(s, end);
            let open = self.open.take().expect("checked above");
            out.extend(close(open, Close::Marker));
            return;
        }
        if s.trim().is_empty() {
            return;
        }
        if rules::body(s) {
            if open.foreign && open.interleaved.is_none() {
                open.interleaved = Some(open.gap_from);
            }
            open.add(s, end);
            if open.lines >= MAX_LINES {
                let open = self.open.take().expect("checked above");
                out.extend(close(open, Close::TooLong));
            }
            return;
        }
        if open.gap == 0 && !open.foreign {
            open.gap_from = begin;
        }
        // Another task's or CPU's line (its caller id differs from the report's): the
        // kernel printing beside the report, neither the report's nor an end of it.
        let other_caller = match (&open.caller, rules::caller(&text)) {
            (Some(mine), Some(theirs)) => mine != theirs,
            _ => false,
        };
        if other_caller || (open.stamped && !stamped) {
            // User space writing to the console inside a stamped report: someone
            // else's output; the kernel's report goes on around both (up to a limit).
            if !other_caller {
                open.foreign = true;
            }
            open.unstamped += 1;
            if open.unstamped > FOREIGN_LIMIT {
                let open = self.open.take().expect("checked above");
                out.extend(close(open, Close::Quiet));
            }
            return;
        }
        // A kernel line (stamped, in a stamped report) is not the report's but not
        // another's output inside it either: the kernel prints from other CPUs.
        if !open.stamped {
            open.foreign = true;
        }
        open.gap += 1;
        if open.gap > GAP_LIMIT {
            let open = self.open.take().expect("checked above");
            out.extend(close(open, Close::Quiet));
        }
    }
}

/// The trigger search of each guest, built once per process.
fn finder(guest: Guest) -> &'static AhoCorasick {
    static FINDERS: [OnceLock<AhoCorasick>; 4] = [const { OnceLock::new() }; 4];
    let i = match guest {
        Guest::Linux => 0,
        Guest::Xv6 => 1,
        Guest::Reference => 2,
        Guest::Generic => 3,
    };
    FINDERS[i].get_or_init(|| {
        AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(rules::triggers(guest))
            .expect("the trigger literals build an automaton")
    })
}

/// The frame a stall (RCU stall, soft lockup) is titled by: a CPU waiting on others in
/// `smp_call_function*`; else the outermost frame of the backtrace that is neither a
/// helper nor a generic dispatch layer ([`is_dispatch`]).
fn stall_frame<'a>(frames: impl DoubleEndedIterator<Item = &'a Frame> + Clone) -> Option<Frame> {
    if let Some(f) = frames.clone().find(|f| f.name().is_some_and(|n| n.starts_with("smp_call_function"))) {
        return Some(f.clone());
    }
    outermost(frames.clone()).or_else(|| innermost(frames)).cloned()
}

/// A stall inside the network stack's receive path (`__netif_receive_skb_core`, run
/// from a softirq or straight from a task that injects a packet, a `tun` write): the
/// protocol handler it delivered the packet to (`ipv6_rcv`, `br_handle_frame`), as
/// for a softirq the timer interrupted.
fn received<'a>(frames: impl Iterator<Item = &'a Frame>) -> Option<Frame> {
    const CORES: &[&str] = &["__netif_receive_skb_core", "__netif_receive_skb_list_core"];
    let frames: Vec<&Frame> = frames.collect();
    let core = frames.iter().rposition(|f| f.name().is_some_and(|n| CORES.contains(&n)))?;
    let usable = |f: &&&Frame| f.name().is_some_and(|n| !is_helper(n) && !is_dispatch(n));
    frames[..core].iter().rev().find(usable).map(|f| (*f).clone())
}

/// A fault inside a retpoline's indirect-call thunk (`__x86_indirect_thunk_rax`), or at a
/// PC that names no function (`RIP: 0010:0xffffffffffffffff`, before any own frame): a
/// call through a bad function pointer, made by the first frame of the trace, helper or
/// not (`run_timer_softirq` calling a freed timer's function).
fn indirect_caller<'a>(mut frames: impl Iterator<Item = &'a Frame>, pc_unnamed: bool) -> Option<Frame> {
    if pc_unnamed {
        return frames.find(|f| f.name().is_some()).cloned();
    }
    let first = frames.next()?;
    if !first.name().is_some_and(|n| n.starts_with("__x86_indirect_thunk_")) {
        return None;
    }
    frames.find(|f| f.name().is_some()).cloned()
}

/// The frame that called into the scheduler (`schedule`, `__schedule`,
/// `preempt_schedule*`, `schedule_timeout`…): the first frame past the last of them that
/// is not a helper (a lock's slow path), else the first past them even if it is one
/// (`exit_to_user_mode_prepare`: the return to user space rescheduling).
fn schedules_caller<'a>(frames: impl Iterator<Item = &'a Frame>) -> Option<Frame> {
    let frames: Vec<&Frame> = frames.filter(|f| f.name().is_some()).collect();
    let sched = |f: &&Frame| {
        f.name().is_some_and(|n| {
            n.starts_with("schedule") || n.starts_with("__schedule") || n.starts_with("preempt_schedule")
        })
    };
    let last = frames.iter().rposition(sched)?;
    let callers = &frames[last + 1..];
    let own = callers.iter().find(|f| f.name().is_some_and(|n| !is_helper(n)));
    own.or(callers.first()).map(|f| (*f).clone())
}

/// The outermost frame that is neither dispatch nor a helper (a system call's entry
/// counts: it is titled `sys_X`).
fn outermost<'a>(frames: impl DoubleEndedIterator<Item = &'a Frame>) -> Option<&'a Frame> {
    let syscall = |n: &str| title_name(n).starts_with("sys_");
    frames.rev().find(|f| f.name().is_some_and(|n| !is_dispatch(n) && (syscall(n) || !is_helper(n))))
}

/// The first frame that is not a helper; failing that, the system call the trace
/// entered by (its entry points are helpers only while a frame below them is named).
fn innermost<'a>(mut frames: impl Iterator<Item = &'a Frame> + Clone) -> Option<&'a Frame> {
    frames
        .clone()
        .find(|f| f.name().is_some_and(|n| !is_helper(n)))
        .or_else(|| frames.find(|f| f.name().is_some_and(|n| title_name(n).starts_with("sys_"))))
}

fn keep(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = LINE_KEEP.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

impl Open {
    /// Whether the line `text` carries a caller id other than the report's.
    fn other_caller(&self, text: &str) -> bool {
        matches!((&self.caller, rules::caller(text)), (Some(mine), Some(theirs)) if mine != theirs)
    }

    /// A line of the report.
    fn add(&mut self, s: &str, end: usize) {
        self.lines += 1;
        self.end = end;
        self.gap = 0;
        self.foreign = false;
        if self.access.is_none() {
            let t = s.trim_start();
            if t.starts_with("Read of size") || t.starts_with("Read at addr") {
                self.access = Some("Read");
            } else if t.starts_with("Write of size") || t.starts_with("Write at addr") {
                self.access = Some("Write");
            }
        }
        let t = s.trim_start();
        if t.starts_with("... which became") {
            self.in_irq_safe = t.ends_with("-irq-safe at:");
        } else if t.starts_with("to a ") {
            self.in_irq_safe = false;
        }
        match rules::section(s) {
            Some(Section::Others) => self.others = true,
            Some(Section::Own) => self.others = false,
            Some(Section::IrqIn) => {
                self.in_irq = true;
                self.past_timer = false;
            }
            Some(Section::IrqOut) => self.in_irq = false,
            None => {}
        }
        if self.frames.len() >= MAX_FRAMES {
            return;
        }
        let frame = parse_frame(s);
        self.pc_unnamed |= frame.is_none() && self.own.is_empty() && rules::pc_address_only(s);
        if let Some(f) = frame {
            // Interrupt context is the timer's that found a stall, never the stall; a
            // fault raised in an interrupt is that interrupt's.
            let stall = matches!(
                self.start.kind,
                CrashKind::RcuStall | CrashKind::SoftLockup | CrashKind::HardLockup | CrashKind::HungTask
            );
            let timers = self.in_irq && stall;
            // A return address at a function's first byte, just below a call that never
            // returns (`panic`, `do_exit`...), is the next function's: the call was its
            // caller's last instruction (riscv's `sysrq_handle_crash` into `panic`). Only
            // there: elsewhere +0x0 is where the CPU was (arm64 prints the running
            // function so at a trace's top).
            let below_noreturn = self.frames.last().and_then(Frame::name).is_some_and(is_noreturn);
            let past_its_caller = f.offset == Some(0) && below_noreturn && !rules::pc_line(s);
            let own = f.reliable && !self.others && !timers && !rules::not_a_trace_frame(s);
            if timers && f.reliable && !self.others {
                // In interrupt context, the frames below the timer interrupt's entry are
                // what the timer interrupted: a softirq that is the stall.
                if self.past_timer {
                    self.softirq.push(self.frames.len());
                } else if f.name().is_some_and(rules::timer_entry) {
                    self.past_timer = true;
                }
            }
            if self.in_irq_safe && f.reliable {
                self.irq_safe.push(self.frames.len());
            }
            if own && !past_its_caller {
                self.own.push(self.frames.len());
            }
            if !self.traced && self.is_backtrace(s, &f, own) {
                self.traced = true;
            }
            self.frames.push(f);
        }
    }

    /// Whether the frame `f` on line `s` shows the report printed a backtrace: one of
    /// its own frames; or for lockdep, a frame of the dependency chain it prints. Neither
    /// the faulting function's line, the frame the first line names (a WARNING's `at
    /// file:line func`) nor a lock's site is one; nor, for a report titled by its
    /// innermost frame, a frame of a trace of helpers only (the unwinder giving up
    /// inside `panic`).
    fn is_backtrace(&self, s: &str, f: &Frame, own: bool) -> bool {
        let chain = self.others && f.reliable && self.start.kind == CrashKind::Lockdep;
        let names_one = |n: &str| !is_helper(n) || title_name(n).starts_with("sys_");
        let counts = !self.start.in_frame || self.start.outermost || f.name().is_some_and(names_one);
        (own || chain) && !rules::pc_line(s) && !rules::lock_site(s) && self.lines != self.start_line && counts
    }
}

/// Why a report closed so cannot be trusted to name its bug, if it cannot.
fn corruption(open: &Open, how: &Close) -> Option<Corruption> {
    let st = &open.start;
    // A report is whole enough when it printed its own backtrace: a console that ends
    // after that (the guest hung or reset) does not make it corrupted; `end_seen` says
    // whether its end marker came.
    // The reference kernel's report is whole only at its backtrace's end line.
    let traced = (st.single && !st.traced_to_end) || open.traced;
    let corrupted = match how {
        Close::Marker => None,
        Close::TooLong => Some(Corruption::TooLong),
        _ if traced => None,
        _ if st.traced_to_end => Some(Corruption::Cut),
        Close::Quiet => Some(Corruption::NoTrace),
        Close::Next | Close::ConsoleEnd => Some(Corruption::Cut),
    };
    corrupted.or(open.interleaved.map(|at| Corruption::Interleaved { at }))
}

fn close(open: Open, how: Close) -> Option<Report> {
    let st = &open.start;
    if st.tentative && open.own.is_empty() {
        return None;
    }
    let own = || open.own.iter().map(|&i| &open.frames[i]);
    let guilty = if st.outermost {
        // A stall is where the CPU was sent, not where the timer found it: the
        // outermost frame of its own backtrace that is not dispatch (stall_frame).
        // A softirq the timer interrupted is the stall, unless a CPU waits on others.
        let softirq = || open.softirq.iter().map(|&i| &open.frames[i]);
        match stall_frame(own()) {
            Some(f) if f.name().is_some_and(|n| n.starts_with("smp_call_function")) => Some(f),
            f => outermost(softirq()).cloned().or_else(|| received(own())).or(f),
        }
    } else if st.traced_to_end {
        // The reference kernel's: the first frame of its backtrace outside the core
        // library (the panic machinery), at the source place its PANIC line names.
        match own().next() {
            Some(f) => Some(Frame { location: st.hint.as_ref().and_then(|h| h.location.clone()), ..f.clone() }),
            None => st.hint.clone(),
        }
    } else {
        let hint = st.hint.iter().find(|f| f.location.is_some() || f.name().is_some_and(|n| !is_helper(n)));
        // A leak is its allocation's first keeper, not the layers that allocate for it.
        let leak = st.past_allocators;
        // Out of memory: past the OOM killer and the page-fault path too; a user page
        // fault's report then blames no frame at all.
        let oom = st.kind == CrashKind::OutOfMemory;
        let layer = |name: &str| is_allocating(name) || (oom && is_oom_path(name));
        let keeper = || innermost(own().filter(|f| !f.name().is_some_and(layer))).cloned();
        let keeper = if leak { keeper() } else { None };
        // An irq-safe lock taken where an irq-unsafe one is held: the deadlock is the
        // interrupt that takes the safe lock, where lockdep saw it become irq-safe.
        let irq_safe = || innermost(open.irq_safe.iter().map(|&i| &open.frames[i])).cloned();
        let keeper = keeper.or_else(irq_safe).or_else(|| indirect_caller(own(), open.pc_unnamed));
        let keeper = keeper.or_else(|| st.schedules_caller.then(|| schedules_caller(own())).flatten());
        keeper.or_else(|| hint.or_else(|| innermost(own())).cloned())
    };
    let header = st.header.clone().unwrap_or_else(|| "WARNING".to_string());
    // KASAN before 4.14 named no access on its first line; with a `Read of size` line
    // after it the title takes the newer shape.
    let fixed = match (st.kind, open.access) {
        (CrashKind::Kasan, Some(_)) => None,
        _ => st.fixed.as_ref(),
    };
    let header = match (open.access, st.kind) {
        (Some(access), CrashKind::Kasan) => format!("{header} {access}"),
        _ => header,
    };
    let mut corrupted = corruption(&open, &how);
    // A WARNING cut before its backtrace: the function its line names is where the
    // check sits, often a helper checking its caller, and no trace says who called.
    let untraced = matches!(corrupted, Some(Corruption::Cut));
    let guilty = if untraced && st.in_frame && st.kind == CrashKind::Warning { None } else { guilty };
    // A checker that warns about its caller's use of it: the title names both.
    let checker =
        st.hint.as_ref().and_then(Frame::name).filter(|n| st.kind == CrashKind::Warning && CHECKERS.contains(n));
    let checker = checker.map_or(String::new(), |c| format!("/{c}"));
    // An out-of-memory report whose every frame is the allocator, the OOM killer or the
    // page-fault path: a user program's page fault, which no kernel function caused.
    let oom_layers = |f: &Frame| f.name().is_some_and(|n| is_allocating(n) || is_oom_path(n) || is_helper(n));
    let user_fault = st.kind == CrashKind::OutOfMemory && !open.frames.is_empty() && open.frames.iter().all(oom_layers);
    let guilty = if user_fault { None } else { guilty };
    let title = if let Some(fixed) = fixed {
        format!("{header} in {fixed}")
    } else if st.in_frame && !user_fault {
        match guilty.as_ref().and_then(Frame::name).map(title_name) {
            Some(name) => format!("{header} in {name}{checker}"),
            None => {
                corrupted.get_or_insert(Corruption::NoFrame);
                format!("{header} in corrupted{checker}")
            }
        }
    } else {
        header
    };
    Some(Report {
        kind: st.kind,
        title,
        guilty_frame: guilty,
        frames: open.frames,
        range: open.begin..open.end,
        corrupted,
        end_seen: matches!(how, Close::Marker) || (st.single && !st.traced_to_end && !matches!(how, Close::ConsoleEnd)),
    })
}
