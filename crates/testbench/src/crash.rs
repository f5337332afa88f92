//! The crash a failing boot's console shows, named on its verdict: `console.log` read
//! (its first [`READ_LIMIT`] bytes) by `testbench_triage` with the rules of the case's
//! guest, and the first report that names a bug taken (the first report at all when
//! every one is corrupted). Only a failing boot is read: a pass names no crash.

use std::io::Read;
use std::path::Path;

use testbench_case::{BootCase, Guest, GuestImage};
use testbench_triage::Guest as Rules;

use crate::verdict::Crash;

/// The most of a console read for its crash: a boot's console is never judged past
/// this either way, and a crash that matters is its first.
pub const READ_LIMIT: u64 = 64 << 20;

/// Which rules read a case's console: the reference kernel's for the guest the bench
/// builds, Linux's for a guest a recipe makes (Debian's kernel), the generic panic, BUG
/// and WARNING rules for any other kernel.
pub fn rules_for(boot: &BootCase) -> Rules {
    match &boot.guest {
        Guest::Built { .. } => Rules::Reference,
        Guest::External(external) => match &external.image {
            GuestImage::Recipe(_) => Rules::Linux,
            _ => Rules::Generic,
        },
    }
}

/// The crash in the console at `path`, if it shows one (or none, when it cannot be read).
pub fn in_console(path: &Path, rules: Rules) -> Option<Crash> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(READ_LIMIT).read_to_end(&mut bytes).ok()?;
    of_console(&bytes, rules)
}

/// The crash `console` shows: its first report that is not corrupted, else its first.
pub fn of_console(console: &[u8], rules: Rules) -> Option<Crash> {
    let reports = testbench_triage::reports(console, rules);
    let report = reports.iter().find(|r| !r.is_corrupted()).or(reports.first())?;
    let start = report.range.start.min(console.len());
    let frame = report.guilty_frame.as_ref().map(|frame| {
        let name = frame.name().map_or_else(|| format!("{:#x}", frame.address.unwrap_or(0)), str::to_string);
        match &frame.location {
            Some(location) => format!("{name} at {location}"),
            None => name,
        }
    });
    Some(Crash {
        kind: report.kind.name().to_string(),
        title: report.title.clone(),
        frame,
        line: 1 + console[..start].iter().filter(|&&b| b == b'\n').count() as u64,
        corrupted: report.corrupted.as_ref().map(ToString::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Linux oops after other lines: its kind, title, guilty frame and first line; a
    /// console with no crash names none.
    #[test]
    fn a_consoles_first_crash_is_named_with_its_line() {
        let console = b"[    0.000000] Linux version 6.12\n\
[    1.000000] init: started\n\
[    2.000000] BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
[    2.000001] #PF: supervisor write access in kernel mode\n\
[    2.000002] Oops: 0002 [#1] PREEMPT SMP NOPTI\n\
[    2.000003] CPU: 0 PID: 1 Comm: sh Not tainted 6.12.0 #1\n\
[    2.000004] RIP: 0010:sysrq_handle_crash+0x16/0x20\n\
[    2.000005] Call Trace:\n\
[    2.000006]  <TASK>\n\
[    2.000007]  __handle_sysrq+0x9b/0x190\n\
[    2.000008]  write_sysrq_trigger+0x2b/0x40\n\
[    2.000009]  proc_reg_write+0x5a/0xa0\n\
[    2.000010]  vfs_write+0xf5/0x3f0\n\
[    2.000011]  ksys_write+0x6b/0xf0\n\
[    2.000012]  do_syscall_64+0x82/0x170\n\
[    2.000013]  entry_SYSCALL_64_after_hwframe+0x76/0x7e\n\
[    2.000014]  </TASK>\n\
[    2.000015] ---[ end trace 0000000000000000 ]---\n";
        let crash = of_console(console, Rules::Linux).expect("the oops");
        assert_eq!(crash.line, 3, "{crash:?}");
        assert!(crash.title.contains("sysrq_handle_crash"), "{crash:?}");
        assert_eq!(crash.frame.as_deref(), Some("sysrq_handle_crash"), "{crash:?}");
        assert_eq!(crash.corrupted, None, "{crash:?}");
        assert_eq!(of_console(b"[    0.1] all is well\n", Rules::Linux), None);
    }
}
