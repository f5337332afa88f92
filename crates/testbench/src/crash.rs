//! The crash a failing boot's console shows, named on its verdict: `console.log` read
//! (its first [`READ_LIMIT`] bytes) by `testbench_triage` with the rules of the case's
//! guest, and the first report that names a bug taken (the first report at all when
//! every one is corrupted). Only a failing boot is read: a pass names no crash.
//!
//! When the kernel's ELF is known ([`KernelElf`]: the reference kernel the bench built,
//! or a case's `[guest] symbols`), the report's frames are symbolized against it by
//! `testbench_symbols` (the offset the kernel ran at read from the console or the
//! frames; the ELF loaded once per run and kept): the crash's `trace`.

use std::io::Read;
use std::path::{Path, PathBuf};

use testbench_case::{BootCase, Guest, GuestImage};
use testbench_triage::{Guest as Rules, Report};

use crate::verdict::{Crash, SymFrame};

/// The most of a console read for its crash: a boot's console is never judged past
/// this either way, and a crash that matters is its first.
pub const READ_LIMIT: u64 = 64 << 20;

/// The most frames of a report symbolized.
pub const MAX_TRACE: usize = 64;

/// The kernel's ELF a crash's frames are looked up in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelElf {
    /// The reference kernel the bench built: its symbol table at least (its release
    /// build carries no DWARF, so its frames get functions without lines).
    Built(PathBuf),
    /// A case's `[guest] symbols`: it must have DWARF.
    Named(PathBuf),
}

impl KernelElf {
    pub fn path(&self) -> &Path {
        match self {
            KernelElf::Built(path) | KernelElf::Named(path) => path,
        }
    }
}

/// The ELF a case's crashes are symbolized against: its `[guest] symbols` (below
/// `root`), or for the guest the bench builds the kernel it built (`built_kernel`).
pub fn kernel_elf(boot: &BootCase, root: &Path, built_kernel: Option<&Path>) -> Option<KernelElf> {
    match &boot.guest {
        Guest::Built { .. } => built_kernel.map(|path| KernelElf::Built(path.to_owned())),
        Guest::External(external) => external.symbols.as_ref().map(|path| KernelElf::Named(root.join(path))),
    }
}

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

/// The crash in the console at `path`, if it shows one (or none, when it cannot be
/// read), its frames symbolized against `elf` when one is given.
pub fn in_console(path: &Path, rules: Rules, elf: Option<&KernelElf>) -> Option<Crash> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(READ_LIMIT).read_to_end(&mut bytes).ok()?;
    of_console(&bytes, rules, elf)
}

/// The crash `console` shows: its first report that is not corrupted, else its first;
/// the report's frames symbolized against `elf` when one is given.
pub fn of_console(console: &[u8], rules: Rules, elf: Option<&KernelElf>) -> Option<Crash> {
    let reports = testbench_triage::reports(console, rules);
    let report = reports.iter().find(|r| !r.is_corrupted()).or(reports.first())?;
    let (trace, trace_error) = match elf {
        Some(elf) if report.frames.iter().any(|f| f.function.is_some() || f.address.is_some()) => {
            match trace(console, report, elf, rules) {
                Ok(trace) => (trace, None),
                Err(error) => (Vec::new(), Some(error)),
            }
        }
        _ => (Vec::new(), None),
    };
    let start = report.range.start.min(console.len());
    // A guilty frame printed as an address alone (the reference kernel's, xv6's) is named
    // by its symbolized function (the outermost, not an inlined call).
    let guilty_index = report.guilty_frame.as_ref().and_then(|g| {
        report.frames.iter().position(|f| f.address.is_some() && f.address == g.address && f.function == g.function)
    });
    let symbolized = |index: usize| {
        trace.iter().filter(|f| f.frame as usize == index && !f.inlined).find_map(|f| f.function.clone())
    };
    // A frame the rules passed over as past its caller's end (`+0x0` just below a call
    // that never returns) is, symbolized a byte before, the function that made that call:
    // the guilty one, when it is not a helper.
    let caller_past_its_end = guilty_index.filter(|&g| g > 0).and_then(|g| {
        let skipped = &report.frames[g - 1];
        let below = g.checked_sub(2).and_then(|i| report.frames[i].name()).is_some_and(testbench_triage::is_noreturn);
        (skipped.offset == Some(0) && below).then(|| symbolized(g - 1)).flatten()
    });
    let caller_past_its_end = caller_past_its_end.filter(|name| !testbench_triage::is_helper(name));
    let frame = report.guilty_frame.as_ref().map(|frame| {
        let name = caller_past_its_end
            .or_else(|| frame.name().map(str::to_string))
            .or_else(|| guilty_index.and_then(symbolized))
            .unwrap_or_else(|| format!("{:#x}", frame.address.unwrap_or(0)));
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
        lines: report_lines(console, &report.range),
        corrupted: report.corrupted.as_ref().map(ToString::to_string),
        trace,
        trace_error,
    })
}

/// How many lines `range` of `console` spans (a last line without its newline counts).
fn report_lines(console: &[u8], range: &std::ops::Range<usize>) -> u64 {
    let bytes = &console[range.start.min(console.len())..range.end.min(console.len())];
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// The report's first [`MAX_TRACE`] frames looked up in `elf` (kept warm across the run
/// by `testbench_symbols::cached`), each inlined call a frame of its own before its
/// caller; a frame the ELF does not have keeps the function it was printed with. The
/// frames with neither a function nor an address (a source place alone) are left out.
fn trace(console: &[u8], report: &Report, elf: &KernelElf, rules: Rules) -> Result<Vec<SymFrame>, String> {
    let symbols = testbench_symbols::cached(elf.path()).map_err(|e| e.to_string())?;
    if let KernelElf::Named(_) = elf {
        symbols.require_dwarf().map_err(|e| e.to_string())?;
    }
    // The reference kernel prints call sites (a return address less 2: inside the call,
    // guest/kernel/src/backtrace.rs), not return addresses; the symbolizer looks a
    // return address up one byte before, so each is given one byte after (the first,
    // looked up as it is, is then still inside its call).
    let call_sites: Vec<testbench_triage::Frame>;
    let printed = match rules {
        Rules::Reference => {
            call_sites = report
                .frames
                .iter()
                .map(|f| testbench_triage::Frame { address: f.address.map(|a| a.wrapping_add(1)), ..f.clone() })
                .collect();
            &call_sites
        }
        _ => &report.frames,
    };
    let relocation = testbench_symbols::relocation(&symbols, console, printed);
    let frames = testbench_symbols::symbolize(&symbols, printed, relocation, MAX_TRACE).map_err(|e| e.to_string())?;
    let shift = u64::from(matches!(rules, Rules::Reference));
    let mut trace = Vec::new();
    for (index, (printed, found)) in report.frames.iter().zip(frames).enumerate() {
        if printed.function.is_none() && printed.address.is_none() {
            continue;
        }
        let frame = index as u32;
        let address = found.address.map(|a| a.wrapping_sub(shift));
        if found.located.is_empty() {
            trace.push(SymFrame {
                frame,
                address,
                function: printed.function.clone(),
                file: None,
                line: None,
                inlined: false,
            });
        }
        for located in found.located {
            // A file the symbol table names beside a local symbol, where DWARF said
            // nothing, is only worth showing when it is a source path (Rust names its
            // codegen units there: `kernel.70aa4c86-cgu.0`).
            let file = located.file.filter(|file| located.line.is_some() || file.contains('/'));
            trace.push(SymFrame {
                frame,
                address,
                function: located.function.or_else(|| printed.function.clone()),
                file,
                line: located.line,
                inlined: located.inlined,
            });
        }
    }
    Ok(trace)
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
        let crash = of_console(console, Rules::Linux, None).expect("the oops");
        assert_eq!(crash.line, 3, "{crash:?}");
        assert!(crash.title.contains("sysrq_handle_crash"), "{crash:?}");
        assert_eq!(crash.frame.as_deref(), Some("sysrq_handle_crash"), "{crash:?}");
        assert_eq!(crash.corrupted, None, "{crash:?}");
        assert_eq!(of_console(b"[    0.1] all is well\n", Rules::Linux, None), None);
    }

    /// A small C program with two inlined calls, built by the host's `cc` into `dir`
    /// (`flags` say whether with DWARF).
    fn program(dir: &Path, flags: &[&str]) -> PathBuf {
        let source = dir.join("prog.c");
        std::fs::write(
            &source,
            "volatile int counter;\n\
             static inline __attribute__((always_inline)) int twice(int x) {\n\
                 counter += x;\n\
                 return counter * 2 + 1;\n\
             }\n\
             __attribute__((noinline)) int crash_here(int x) {\n\
                 volatile int *p = (volatile int *)0;\n\
                 if (x > 3)\n\
                     *p = twice(x);\n\
                 return twice(x + 1) + x;\n\
             }\n\
             __attribute__((noinline)) int caller(int x) {\n\
                 int y = crash_here(x);\n\
                 return y + 1;\n\
             }\n\
             int main(int argc, char **argv) {\n\
                 (void)argv;\n\
                 return caller(argc);\n\
             }\n",
        )
        .unwrap();
        let elf = dir.join(if flags.contains(&"-g") { "prog" } else { "prog-no-dwarf" });
        let output =
            crate::process::Cmd::new("cc", "cc to build the test program", std::time::Duration::from_secs(120))
                .args(flags)
                .args(["-fno-pie", "-no-pie", "-o"])
                .arg(&elf)
                .arg(&source)
                .output()
                .expect("this test needs the host's C compiler, cc");
        assert!(output.status.success(), "cc: {}", String::from_utf8_lossy(&output.stderr));
        elf
    }

    /// A riscv oops whose kernel ran 0x10000000 above where it was linked, read with the
    /// program's ELF: each frame gets its function and file:line (an inlined call first),
    /// the return address its call's line, a module's frame its printed name alone; with
    /// an ELF without DWARF given as `[guest] symbols`, the trace says why it is not
    /// symbolized, and as the reference kernel's, it gets functions without lines.
    #[test]
    fn a_crashs_frames_are_symbolized_against_the_kernels_elf() {
        let dir = tempfile::tempdir().unwrap();
        let elf = program(dir.path(), &["-g", "-O2"]);
        let symbols = testbench_symbols::Symbols::open(&elf).unwrap();
        let function = |name: &str| symbols.functions().iter().find(|s| s.name == name).unwrap().clone();
        let (crash, caller, main) = (function("crash_here"), function("caller"), function("main"));
        // Where the CPU was: inside an inlined twice().
        let pc = (0..crash.size).find(|&off| symbols.lookup(crash.address + off).unwrap().len() == 2).unwrap();
        let delta = 0x1000_0000;
        let console = format!(
            "[    8.100000] Run /init as init process\n\
             [    8.103721] Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000\n\
             [    8.104588] Oops [#1]\n\
             [    8.104803] Modules linked in: virtio_net\n\
             [    8.105101] CPU: 0 PID: 143 Comm: sh Not tainted 6.12.0 #1\n\
             [    8.106011] epc : crash_here+{pc:#x}/{cs:#x}\n\
             [    8.106330]  ra : caller+0x9/{ls:#x}\n\
             [    8.107900] [<{a:016x}>] crash_here+{pc:#x}/{cs:#x}\n\
             [    8.108200] [<{b:016x}>] caller+0x9/{ls:#x}\n\
             [    8.108500] [<{c:016x}>] main+0x5/{ms:#x}\n\
             [    8.108800] [<ffffffff812f1e20>] virtnet_poll+0x4e/0x9e [virtio_net]\n\
             [    8.110300] ---[ end trace 0000000000000000 ]---\n",
            cs = crash.size,
            ls = caller.size,
            ms = main.size,
            a = crash.address + pc + delta,
            b = caller.address + 9 + delta,
            c = main.address + 5 + delta,
        );
        let named = KernelElf::Named(elf.clone());
        let found = of_console(console.as_bytes(), Rules::Linux, Some(&named)).expect("the oops");
        assert_eq!(found.frame.as_deref(), Some("crash_here"), "{found:?}");
        assert_eq!(found.trace_error, None, "{found:?}");
        let shown: Vec<(u32, Option<&str>, Option<u64>, bool)> =
            found.trace.iter().map(|f| (f.frame, f.function.as_deref(), f.address, f.inlined)).collect();
        let at = |s: &testbench_symbols::Symbol, off: u64| Some(s.address + off);
        assert_eq!(
            shown,
            [
                (0, Some("twice"), at(&crash, pc), true),
                (0, Some("crash_here"), at(&crash, pc), false),
                (1, Some("caller"), at(&caller, 9), false),
                (2, Some("twice"), at(&crash, pc), true),
                (2, Some("crash_here"), at(&crash, pc), false),
                (3, Some("caller"), at(&caller, 9), false),
                (4, Some("main"), at(&main, 5), false),
                (5, Some("virtnet_poll"), None, false),
            ],
            "{:#?}",
            found.trace
        );
        // Lines as the crate finds them: the return addresses' one byte before.
        let line = |address: u64| symbols.lookup(address).unwrap().last().and_then(|l| l.line);
        assert_eq!(found.trace[1].line, line(crash.address + pc), "{:#?}", found.trace);
        assert_eq!(found.trace[2].line, line(caller.address + 8), "{:#?}", found.trace);
        assert_eq!(found.trace[6].line, line(main.address + 4), "{:#?}", found.trace);
        assert!(found.trace[..7].iter().all(|f| f.file.as_deref().is_some_and(|file| file.ends_with("prog.c"))));
        assert!(found.trace[0].line.is_some() && found.trace[7].file.is_none());

        let bare = program(dir.path(), &["-O2"]);
        let refused = of_console(console.as_bytes(), Rules::Linux, Some(&KernelElf::Named(bare.clone()))).unwrap();
        assert!(refused.trace.is_empty());
        let why = refused.trace_error.unwrap_or_default();
        assert!(why.starts_with(&format!("{}: has no DWARF", bare.display())), "{why}");
        let built = of_console(console.as_bytes(), Rules::Linux, Some(&KernelElf::Built(bare))).unwrap();
        assert_eq!(built.trace_error, None);
        assert_eq!(built.trace[0].function.as_deref(), Some("crash_here"), "{:#?}", built.trace);
        assert!(built.trace.iter().all(|f| f.line.is_none()), "{:#?}", built.trace);
    }
}
