//! The crash reports of a running boot's console, read as the console arrives
//! (`testbench-triage`'s [`Scanner`]): a report of a kind the case lets fail the boot
//! ends the boot at once, with a [`FailureKind::Crash`] failure naming its title. The
//! boot ends at the report's end; or, when the guest says nothing for [`QUIET`] after a
//! report began (it hung, or stopped printing mid-trace), at that point; or when the
//! console closes or the deadline passes with the report still open: never later.
//!
//! The crash named under the verdict (its guilty frame and console line) is read again
//! from `console.log` once the boot is over (crate::crash), like any failing boot's.

use std::time::{Duration, Instant};

use testbench_judge::{Failure, FailureKind};
use testbench_triage::{CrashKind, Guest as Rules, Report, Scanner};

/// How long the console may stay silent inside a fatal report before the boot ends on
/// it: a guest that panicked and hangs prints nothing more, and one still printing its
/// trace prints it faster than this.
pub const QUIET: Duration = Duration::from_secs(3);

/// The most of a console read for crashes, as for the crash named afterwards.
const READ_LIMIT: u64 = crate::crash::READ_LIMIT;

/// How a boot's console is read for crashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashPlan {
    /// The rules that read it; `None`: `[triage] rules = "off"`, nothing is read.
    pub rules: Option<Rules>,
    /// The kinds that fail the boot.
    pub fatal: Vec<CrashKind>,
}

impl CrashPlan {
    /// A case's plan: its `[triage]`, its guest's rules unless it names some.
    pub fn of(boot: &testbench_case::BootCase) -> CrashPlan {
        let triage = &boot.triage;
        let rules = match (triage.off, triage.rules) {
            (true, _) => None,
            (false, Some(rules)) => Some(match rules {
                testbench_case::TriageRules::Linux => Rules::Linux,
                testbench_case::TriageRules::Xv6 => Rules::Xv6,
                testbench_case::TriageRules::Reference => Rules::Reference,
                testbench_case::TriageRules::Generic => Rules::Generic,
            }),
            (false, None) => Some(crate::crash::rules_for(boot)),
        };
        let fatal = triage.fatal.iter().filter_map(|name| CrashKind::from_name(name)).collect();
        CrashPlan { rules, fatal }
    }
}

/// One boot's reading.
pub struct Watch {
    rules: Rules,
    scanner: Scanner,
    fatal: Vec<CrashKind>,
    start: Instant,
    read: u64,
    /// When the fatal report still open ends the boot if nothing more comes.
    quiet_at: Option<Instant>,
}

impl Watch {
    /// The watch for a boot whose guest started at `start`; none when nothing is read or
    /// nothing would fail it.
    pub fn new(plan: &CrashPlan, start: Instant) -> Option<Watch> {
        let rules = plan.rules?;
        if plan.fatal.is_empty() {
            return None;
        }
        Some(Watch { rules, scanner: Scanner::new(rules), fatal: plan.fatal.clone(), start, read: 0, quiet_at: None })
    }

    /// The console's next bytes, come at `at`: the failure a fatal report they end is.
    pub fn feed(&mut self, bytes: &[u8], at: Instant) -> Option<Failure> {
        let room = READ_LIMIT.saturating_sub(self.read);
        let bytes = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
        if bytes.is_empty() {
            return None;
        }
        self.read += bytes.len() as u64;
        let ended = self.scanner.feed(bytes);
        if let Some(report) = ended.iter().find(|r| self.fatal.contains(&r.kind)) {
            return Some(self.failure(report, at, "ended"));
        }
        self.quiet_at = self.scanner.pending().filter(|p| self.fatal.contains(&p.kind)).map(|_| at + QUIET);
        None
    }

    /// A report of a kind that fails the boot has begun and not yet ended.
    pub fn inside_fatal(&self) -> bool {
        self.quiet_at.is_some()
    }

    /// When [`Watch::poll`] has something to say, if ever.
    pub fn wake_at(&self) -> Option<Instant> {
        self.quiet_at
    }

    /// The fatal report still open, once the console has been quiet [`QUIET`] inside it.
    pub fn poll(&mut self, now: Instant) -> Option<Failure> {
        match self.quiet_at {
            // Said at the report's last output, not at the quiet time's end.
            Some(at) if now >= at => self.close(at - QUIET, "no more output"),
            _ => None,
        }
    }

    /// The fatal report still open when the boot ends otherwise (the console closed, the
    /// deadline passed): it is the verdict.
    pub fn close(&mut self, now: Instant, why: &str) -> Option<Failure> {
        self.quiet_at = None;
        let scanner = std::mem::replace(&mut self.scanner, Scanner::new(self.rules));
        let reports = scanner.finish();
        let report = reports.iter().find(|r| self.fatal.contains(&r.kind))?;
        Some(self.failure(report, now, why))
    }

    fn failure(&self, report: &Report, at: Instant, how: &str) -> Failure {
        let at = at.saturating_duration_since(self.start);
        let mut message = format!("crash at {:.2}s: {} ({}", at.as_secs_f64(), report.title, report.kind.name());
        if let Some(name) = report.guilty_frame.as_ref().and_then(|frame| frame.name()) {
            if !report.title.ends_with(&format!(" in {}", testbench_triage::title_name(name))) {
                message.push_str(&format!(" in {name}"));
            }
        }
        if how != "ended" {
            message.push_str(&format!(", the boot ended on it: {how}"));
        }
        if let Some(corrupted) = &report.corrupted {
            message.push_str(&format!("; corrupted: {corrupted}"));
        }
        message.push(')');
        Failure::new(FailureKind::Crash, at, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rules: Rules, fatal: &[CrashKind]) -> CrashPlan {
        CrashPlan { rules: Some(rules), fatal: fatal.to_vec() }
    }

    const OOPS: &str =
        "[    1.400000] Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000\n\
[    1.400100] Oops [#1]\n\
[    1.400200] epc : sysrq_handle_crash+0x1e/0x28\n\
[    1.400300] [<ffffffff8071a2b6>] sysrq_handle_crash+0x1e/0x28\n\
[    1.400400] [<ffffffff8071a8c4>] __handle_sysrq+0xa4/0x1a0\n\
[    1.400500] [<ffffffff8071ae2a>] write_sysrq_trigger+0x7a/0x98\n\
[    1.400600] ---[ end trace 0000000000000000 ]---\n";

    #[test]
    fn a_fatal_report_fails_the_boot_at_its_end_and_a_kind_the_case_allows_does_not() {
        let start = Instant::now();
        let mut watch = Watch::new(&plan(Rules::Linux, &[CrashKind::PageFault, CrashKind::Oops]), start).unwrap();
        assert_eq!(watch.feed(b"[    0.100000] Linux version 6.12\n", start), None);
        let (head, tail) = OOPS.split_at(OOPS.find("[    1.400400]").unwrap());
        assert_eq!(watch.feed(head.as_bytes(), start), None, "not before its end");
        assert!(watch.wake_at().is_some(), "an open fatal report sets the quiet timer");
        let failure = watch.feed(tail.as_bytes(), start + Duration::from_millis(1400)).expect("a crash");
        assert_eq!(failure.kind, FailureKind::Crash);
        assert!(failure.message.starts_with("crash at 1.40s: "), "{}", failure.message);
        assert!(failure.message.contains("in sysrq_handle_crash ("), "{}", failure.message);
        // The same console with those kinds allowed: nothing ends the boot.
        let mut allowed = Watch::new(&plan(Rules::Linux, &[CrashKind::Warning]), start).unwrap();
        assert_eq!(allowed.feed(OOPS.as_bytes(), start), None);
        assert_eq!(allowed.close(start, "the console closed"), None);
        // Nothing read, or nothing fatal: no watch at all.
        assert!(Watch::new(&CrashPlan { rules: None, fatal: vec![CrashKind::Oops] }, start).is_none());
        assert!(Watch::new(&plan(Rules::Linux, &[]), start).is_none());
    }

    #[test]
    fn the_case_crates_crash_kinds_are_the_triage_crates() {
        let names: Vec<&str> = CrashKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, testbench_case::CRASH_KINDS);
        for name in testbench_case::CRASH_KINDS_ALLOWED {
            assert!(CrashKind::from_name(name).is_some(), "{name}");
        }
        // A case with no [triage]: every kind but the allowed ones fails its boot.
        let fatal = testbench_case::Triage::default().fatal;
        assert_eq!(fatal.len(), CrashKind::ALL.len() - testbench_case::CRASH_KINDS_ALLOWED.len());
        assert!(fatal.iter().all(|k| !testbench_case::CRASH_KINDS_ALLOWED.contains(&k.as_str())));
    }

    #[test]
    fn a_report_the_guest_stops_inside_ends_the_boot_once_quiet() {
        let start = Instant::now();
        let mut watch = Watch::new(&plan(Rules::Linux, &[CrashKind::PageFault, CrashKind::Oops]), start).unwrap();
        let cut = &OOPS[..OOPS.find("[    1.400400]").unwrap()];
        assert_eq!(watch.feed(cut.as_bytes(), start), None);
        let quiet = watch.wake_at().expect("the quiet timer");
        assert_eq!(quiet, start + QUIET);
        assert_eq!(watch.poll(start + QUIET / 2), None, "not before the quiet time");
        let failure = watch.poll(quiet).expect("the crash, once quiet");
        assert!(failure.message.contains("the boot ended on it: no more output"), "{}", failure.message);
        // Its time is the report's last output's, not the quiet time's end.
        assert!(failure.message.starts_with("crash at 0.00s: "), "{}", failure.message);
        assert_eq!(failure.at, Duration::ZERO);
        assert_eq!(watch.wake_at(), None);
    }

    #[test]
    fn the_reference_kernels_panic_line_is_a_crash() {
        let start = Instant::now();
        let mut watch = Watch::new(&plan(Rules::Reference, &[CrashKind::Panic]), start).unwrap();
        assert_eq!(watch.feed(b"harts 1\n", start), None);
        let failure = watch
            .feed(b"PANIC index out of bounds at kernel/src/proc.rs:10:5\nnext\n", start)
            .or_else(|| watch.close(start, "the console closed"))
            .expect("the kernel's panic");
        assert!(failure.message.contains("panic: index out of bounds"), "{}", failure.message);
    }
}
