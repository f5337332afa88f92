//! `[idle]`: the machine at rest, measured from outside the guest (docs/idle.md).
//!
//! A part of the boot with no QEMU argument of its own: it holds the verdict and
//! starts after every other holder (the sessions) has released it, and after the
//! `after` line when the case names one. Its thread then opens a window of the case's
//! `seconds` (host clock): QEMU's own trap log for the window alone (`logfile`, then
//! `log int`, over QMP's human monitor; `log none` at its end), and QEMU's user and
//! system CPU time from `/proc/<pid>/stat` at both ends. The log's lines
//! (`riscv_cpu_do_interrupt: hart:H, async:A, ... desc=NAME`) are counted per hart for
//! interrupts and over all harts for exceptions; every rate is per second of the
//! window. The result's `[idle]` line gives them all; a rate over its ceiling (`max`), or
//! a window that measured nothing (no log, no trap on any hart, no host CPU time),
//! fails the boot.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use testbench_case::IdleSpec;

use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Live, Part, PartEvent, PartSpec, Phase};
use crate::qemu::qmp::{QmpClient, QmpError};

/// Why the window at rest could not be measured, or what it measured that fails the boot
/// (each message starts `[idle]`, but the attach error's, which `attach_all` prefixes).
#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    #[error("{}: the window's log path holds a space, which QEMU's monitor cannot take", .0.display())]
    SpaceInLog(PathBuf),
    #[error(
        "[idle]: the {:.1} s window does not fit in the {:.1} s left before the case's deadline (raise timeout_secs)",
        .window.as_secs_f64(),
        .left.as_secs_f64()
    )]
    NoRoom { window: Duration, left: Duration },
    #[error("[idle]: the boot ended during the window")]
    Ended,
    /// A monitor command that got no answer.
    #[error(transparent)]
    Qmp(#[from] QmpError),
    /// QEMU's monitor complained of a command.
    #[error("[idle]: QEMU's monitor said to `{command}`: {complaint}")]
    Monitor { command: String, complaint: String },
    /// QEMU's `/proc/<pid>/stat` could not be read.
    #[error("[idle]: {path}: {source}")]
    Stat { path: String, source: std::io::Error },
    #[error("[idle]: {path}: no utime and stime in {text:?}")]
    NoTicks { path: String, text: String },
    #[error("[idle]: the window measured nothing: QEMU wrote no trap log ({}: {source})", .path.display())]
    NoLog { path: PathBuf, source: std::io::Error },
    #[error("[idle]: {}: {source}", .path.display())]
    ReadLog { path: PathBuf, source: std::io::Error },
    /// The window's line (`Rates::line`) with no trap in it.
    #[error("[idle]: the window measured nothing: no trap on any hart in QEMU's log ({line})")]
    NoTraps { line: String },
    #[error("[idle]: the window measured nothing: QEMU took no host CPU time ({line})")]
    NoCpu { line: String },
    /// A rate over its ceiling (`idle.max.<name>`), and whose it is.
    #[error("[idle]: {name} {rate:.4}/s ({whose}) is over its ceiling {ceiling}/s (idle.max.{name}) ({line})")]
    OverCeiling { name: String, rate: f64, whose: String, ceiling: f64, line: String },
}

/// The window's trap log, in the boot's directory.
pub const IDLE_LOG: &str = "idle-int.log";
/// A human monitor command answers at once.
const HMP_BOUND: Duration = Duration::from_secs(10);

/// A case's `[idle]`, planned once.
pub struct Idle {
    spec: IdleSpec,
}

impl Idle {
    pub fn new(spec: IdleSpec) -> Idle {
        Idle { spec }
    }
}

impl PartSpec for Idle {
    fn name(&self) -> String {
        "[idle]".into()
    }

    fn attach(&self, place: &BootPlace) -> Result<Attached, AttachError> {
        let log = place.dir.join(IDLE_LOG);
        if log.to_string_lossy().chars().any(char::is_whitespace) {
            // QEMU's human monitor reads the file name up to a space.
            return Err(IdleError::SpaceInLog(log).into());
        }
        let lines = vec![format!(
            "a {:.1} s window at rest{}, traps logged to {IDLE_LOG}",
            self.spec.window.as_secs_f64(),
            self.spec.after.as_ref().map_or(String::new(), |a| format!(" after '{}'", a.source()))
        )];
        let part = Window { spec: self.spec.clone(), log: log.clone(), ready: false, seen: false, thread: None };
        Ok(Attached { args: Vec::new(), files: vec![log], log: lines, parts: vec![Box::new(part)] })
    }
}

struct Window {
    spec: IdleSpec,
    log: PathBuf,
    /// The expects have matched and the other holders have released.
    ready: bool,
    /// The `after` line has come.
    seen: bool,
    thread: Option<JoinHandle<()>>,
}

impl Window {
    fn start(&mut self, at: &Live) {
        if self.thread.is_some() {
            return;
        }
        let (qmp, events, stop) = (at.qmp.clone(), at.events.clone(), at.stop.clone());
        let (pid, deadline, log, spec) = (at.pid, at.deadline, self.log.clone(), self.spec.clone());
        self.thread = Some(std::thread::spawn(move || {
            let measured = window(&qmp, pid, &log, spec.window, deadline, &|| stop.load(Ordering::SeqCst));
            let event = match measured.and_then(|rates| judge(&rates, &spec.max).map(|_| rates.line())) {
                Ok(line) => {
                    let _ = events.send(crate::boot::Event::Part(PartEvent::Note(line)));
                    PartEvent::Released
                }
                Err(error) => PartEvent::Failed(error.to_string()),
            };
            let _ = events.send(crate::boot::Event::Part(event));
        }));
    }
}

impl Part for Window {
    fn triggers(&self) -> Vec<testbench_judge::Pattern> {
        self.spec
            .after
            .iter()
            .map(|p| testbench_judge::Pattern { label: "idle.after".into(), regex: p.regex.clone() })
            .collect()
    }

    /// The window follows the sessions: it holds the verdict from their release on.
    fn holds_from(&self) -> Option<Phase> {
        Some(Phase::Released)
    }

    fn on(&mut self, phase: Phase, at: &Live) {
        if phase != Phase::Released {
            return;
        }
        self.ready = true;
        if self.spec.after.is_none() || self.seen {
            self.start(at);
        }
    }

    fn triggered(&mut self, _which: usize, at: &Live) {
        self.seen = true;
        if self.ready {
            self.start(at);
        }
    }

    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
            return Ok(Evidence::default());
        }
        let waited = match (&self.spec.after, self.ready) {
            (Some(after), true) => {
                format!("[idle]: the window never started: idle.after '{}' never came", after.source())
            }
            _ => "[idle]: the window never started: the expects and sessions never all ended".into(),
        };
        if ended.passed {
            Err(Broken(waited))
        } else {
            Ok(Evidence::note(waited))
        }
    }
}

/// One window at rest: QEMU's trap log and its CPU time over `length`, or why it could
/// not be measured. `stopped` ends the wait early (the boot ended).
fn window(
    qmp: &QmpClient,
    pid: u32,
    log: &Path,
    length: Duration,
    deadline: Instant,
    stopped: &dyn Fn() -> bool,
) -> Result<Rates, IdleError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if length >= left {
        return Err(IdleError::NoRoom { window: length, left });
    }
    let _ = std::fs::remove_file(log);
    hmp(qmp, &format!("logfile {}", log.display()))?;
    let before = cpu_ticks(pid)?;
    hmp(qmp, "log int")?;
    let opened = Instant::now();
    while opened.elapsed() < length {
        if stopped() {
            let _ = hmp(qmp, "log none");
            return Err(IdleError::Ended);
        }
        std::thread::sleep(Duration::from_millis(50).min(length.saturating_sub(opened.elapsed())));
    }
    hmp(qmp, "log none")?;
    let seconds = opened.elapsed().as_secs_f64();
    let after = cpu_ticks(pid)?;
    // Naming another file closes the window's, so that every line is on disk.
    hmp(qmp, "logfile /dev/null")?;
    let counts = Counts::read(log)?;
    Ok(Rates { seconds, counts, ticks: after.saturating_sub(before), ticks_per_second: clock_ticks() })
}

/// A human monitor command; its answer, empty on success, is QEMU's complaint otherwise.
fn hmp(qmp: &QmpClient, command: &str) -> Result<(), IdleError> {
    let answer =
        qmp.execute("human-monitor-command", Some(serde_json::json!({ "command-line": command })), HMP_BOUND)?;
    match answer.as_str().map(str::trim) {
        Some("") | None => Ok(()),
        Some(complaint) => Err(IdleError::Monitor { command: command.into(), complaint: complaint.into() }),
    }
}

/// QEMU's user and system time so far, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64, IdleError> {
    let path = format!("/proc/{pid}/stat");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(IdleError::Stat { path, source }),
    };
    parse_ticks(&text).ok_or(IdleError::NoTicks { path, text })
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15; the command name, in
/// parentheses, may hold spaces, so they are counted from the last `)`).
fn parse_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// The traps of one window, counted.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    /// Interrupts by hart, then by name.
    interrupts: BTreeMap<u32, BTreeMap<String, u64>>,
    /// Exceptions by name, every hart's.
    exceptions: BTreeMap<String, u64>,
    /// Lines of the log that were not traps.
    other: u64,
}

impl Counts {
    fn read(path: &Path) -> Result<Counts, IdleError> {
        let file = std::fs::File::open(path).map_err(|source| IdleError::NoLog { path: path.to_owned(), source })?;
        let mut counts = Counts::default();
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line.map_err(|source| IdleError::ReadLog { path: path.to_owned(), source })?;
            counts.add(&String::from_utf8_lossy(&line));
        }
        Ok(counts)
    }

    /// One line of QEMU's log: `riscv_cpu_do_interrupt: hart:0, async:1, cause:..., desc=s_timer`.
    fn add(&mut self, line: &str) {
        let field = |key: &str| -> Option<&str> {
            let at = line.find(key)? + key.len();
            let rest = &line[at..];
            Some(rest[..rest.find([',', ' ']).unwrap_or(rest.len())].trim())
        };
        let parsed = line.starts_with("riscv_cpu_do_interrupt:").then(|| {
            let hart: u32 = field("hart:")?.parse().ok()?;
            let interrupt = field("async:")? == "1";
            let name = field("desc=")?.to_string();
            Some((hart, interrupt, name))
        });
        match parsed.flatten() {
            Some((hart, true, name)) => *self.interrupts.entry(hart).or_default().entry(name).or_default() += 1,
            Some((_, false, name)) => *self.exceptions.entry(name).or_default() += 1,
            None if line.trim().is_empty() => {}
            None => self.other += 1,
        }
    }
}

/// A window's counts and its length: every rate per second.
#[derive(Debug)]
struct Rates {
    seconds: f64,
    counts: Counts,
    ticks: u64,
    ticks_per_second: u64,
}

impl Rates {
    fn per_second(&self, count: u64) -> f64 {
        count as f64 / self.seconds
    }

    fn host_cores(&self) -> f64 {
        self.ticks as f64 / self.ticks_per_second.max(1) as f64 / self.seconds
    }

    /// The busiest hart's rate of `name` (an interrupt's name, or None for all of them),
    /// with the hart.
    fn busiest(&self, name: Option<&str>) -> (f64, Option<u32>) {
        let mut best = (0.0, None);
        for (hart, names) in &self.counts.interrupts {
            let count: u64 =
                names.iter().filter(|(n, _)| name.is_none_or(|want| want == n.as_str())).map(|(_, c)| c).sum();
            let rate = self.per_second(count);
            if best.1.is_none() || rate > best.0 {
                best = (rate, Some(*hart));
            }
        }
        best
    }

    /// The `[idle]` line of the case's result.
    fn line(&self) -> String {
        let mut parts = Vec::new();
        for (hart, names) in &self.counts.interrupts {
            let list: Vec<String> = names.iter().map(|(n, c)| format!("{n} {:.2}/s", self.per_second(*c))).collect();
            parts.push(format!("hart {hart}: {}", list.join(", ")));
        }
        if self.counts.interrupts.is_empty() {
            parts.push("no interrupts".into());
        }
        let exceptions: Vec<String> =
            self.counts.exceptions.iter().map(|(n, c)| format!("{n} {:.2}/s", self.per_second(*c))).collect();
        parts.push(if exceptions.is_empty() {
            "no exceptions".into()
        } else {
            format!("exceptions (all harts): {}", exceptions.join(", "))
        });
        format!(
            "[idle] {:.2} s at rest (host clock): {}; QEMU {:.4} host cores ({} ticks at {}/s)",
            self.seconds,
            parts.join("; "),
            self.host_cores(),
            self.ticks,
            self.ticks_per_second
        )
    }
}

/// A window that measured nothing fails; so does a rate over its ceiling. The error
/// holds the `[idle]` line.
fn judge(rates: &Rates, max: &[(String, f64)]) -> Result<(), IdleError> {
    let line = rates.line();
    // No trap at all is a log that did not work or a guest that did not run. No timer
    // interrupt alone is not: a kernel that waits with interrupts masked (the reference
    // kernel) wakes on its timer without taking a trap, which QEMU does not log.
    if rates.counts.interrupts.is_empty() && rates.counts.exceptions.is_empty() {
        return Err(IdleError::NoTraps { line });
    }
    if rates.ticks == 0 {
        return Err(IdleError::NoCpu { line });
    }
    for (name, ceiling) in max {
        let (rate, whose) = match name.as_str() {
            "host_cores" => (rates.host_cores(), "QEMU".to_string()),
            "interrupts" => {
                let (rate, hart) = rates.busiest(None);
                (rate, hart.map_or("no hart".into(), |h| format!("hart {h}")))
            }
            "exceptions" => (rates.per_second(rates.counts.exceptions.values().sum()), "all harts".into()),
            name if testbench_case::IDLE_INTERRUPTS.contains(&name) => {
                let (rate, hart) = rates.busiest(Some(name));
                (rate, hart.map_or("no hart".into(), |h| format!("hart {h}")))
            }
            name => (rates.per_second(rates.counts.exceptions.get(name).copied().unwrap_or(0)), "all harts".into()),
        };
        if rate > *ceiling {
            return Err(IdleError::OverCeiling { name: name.clone(), rate, whose, ceiling: *ceiling, line });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(log: &str, seconds: f64, ticks: u64) -> Rates {
        let mut counts = Counts::default();
        for line in log.lines() {
            counts.add(line);
        }
        Rates { seconds, counts, ticks, ticks_per_second: 100 }
    }

    const LOG: &str = "\
riscv_cpu_do_interrupt: hart:0, async:1, cause:8000000000000005, epc:0xffffffff80a1b2c4, tval:0x0, desc=s_timer
riscv_cpu_do_interrupt: hart:0, async:1, cause:8000000000000005, epc:0xffffffff80a1b2c4, tval:0x0, desc=s_timer
riscv_cpu_do_interrupt: hart:1, async:1, cause:8000000000000005, epc:0xffffffff80a1b2c4, tval:0x0, desc=s_timer
riscv_cpu_do_interrupt: hart:1, async:1, cause:8000000000000001, epc:0xffffffff80a1b2c4, tval:0x0, desc=s_software
riscv_cpu_do_interrupt: hart:0, async:0, cause:0000000000000009, epc:0xffffffff80a1b2c4, tval:0x0, desc=supervisor_ecall
riscv_cpu_do_interrupt: hart:1, async:0, cause:0000000000000008, epc:0x0000003fb0c1d2e4, tval:0x0, desc=user_ecall
some other line QEMU logged
";

    #[test]
    fn traps_are_counted_per_hart_and_rates_are_per_second() {
        let r = rates(LOG, 2.0, 3);
        assert_eq!(r.counts.interrupts[&0]["s_timer"], 2);
        assert_eq!(r.counts.interrupts[&1]["s_software"], 1);
        assert_eq!(r.counts.exceptions["user_ecall"], 1);
        assert_eq!(r.counts.other, 1);
        assert_eq!(
            r.line(),
            "[idle] 2.00 s at rest (host clock): hart 0: s_timer 1.00/s; hart 1: s_software 0.50/s, s_timer 0.50/s; \
             exceptions (all harts): supervisor_ecall 0.50/s, user_ecall 0.50/s; QEMU 0.0150 host cores (3 ticks at 100/s)"
        );
        assert!(judge(&r, &[("s_timer".into(), 1.0), ("interrupts".into(), 1.0), ("host_cores".into(), 0.02)]).is_ok());
    }

    #[test]
    fn a_rate_over_its_ceiling_fails_naming_it_and_the_hart() {
        let r = rates(LOG, 2.0, 3);
        let error = judge(&r, &[("interrupts".into(), 0.9)]).unwrap_err();
        assert!(matches!(&error, IdleError::OverCeiling { name, .. } if name == "interrupts"), "{error:?}");
        let error = error.to_string();
        assert!(
            error.starts_with("[idle]: interrupts 1.0000/s (hart 0) is over its ceiling 0.9/s (idle.max.interrupts)"),
            "{error}"
        );
        let error = judge(&r, &[("user_ecall".into(), 0.25)]).unwrap_err().to_string();
        assert!(error.starts_with("[idle]: user_ecall 0.5000/s (all harts) is over its ceiling 0.25/s"), "{error}");
        let error = judge(&r, &[("host_cores".into(), 0.01)]).unwrap_err().to_string();
        assert!(error.starts_with("[idle]: host_cores 0.0150/s (QEMU) is over its ceiling 0.01/s"), "{error}");
    }

    #[test]
    fn a_window_that_measured_nothing_fails_rather_than_passes() {
        let empty = judge(&rates("some other line QEMU logged\n", 10.0, 5), &[]).unwrap_err();
        assert!(matches!(empty, IdleError::NoTraps { .. }), "{empty:?}");
        let empty = empty.to_string();
        assert!(empty.starts_with("[idle]: the window measured nothing: no trap on any hart in QEMU's log"), "{empty}");
        // Traps but no timer interrupt: a kernel that waits with interrupts masked.
        let masked = LOG.lines().filter(|l| l.contains("async:0")).collect::<Vec<_>>().join("\n");
        assert!(judge(&rates(&masked, 10.0, 5), &[]).is_ok());
        let no_cpu = judge(&rates(LOG, 10.0, 0), &[]).unwrap_err();
        assert!(matches!(no_cpu, IdleError::NoCpu { .. }), "{no_cpu:?}");
        let no_cpu = no_cpu.to_string();
        assert!(no_cpu.contains("QEMU took no host CPU time"), "{no_cpu}");
        let missing = Counts::read(Path::new("/nonexistent/idle-int.log")).unwrap_err();
        assert!(matches!(missing, IdleError::NoLog { .. }), "{missing:?}");
        let missing = missing.to_string();
        assert!(missing.starts_with("[idle]: the window measured nothing: QEMU wrote no trap log"), "{missing}");
    }

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces() {
        let stat = "4242 (qemu (sys) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 317 42 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_ticks(stat), Some(359));
        assert_eq!(parse_ticks("garbage"), None);
        assert!(cpu_ticks(std::process::id()).is_ok());
    }
}
