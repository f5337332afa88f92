//! One boot as a short chain of stages: [`launch`] (the parts attached, the device tree
//! edited, QEMU started paused and its guest started over QMP), [`Running::run_loop`]
//! (one loop over one bounded channel of [`Event`]s until a verdict), [`Running::check_pass`]
//! (the parts that judge the machine itself once the console passed: the RAM),
//! [`Running::stop`] (QEMU ended, the console read to its end) and [`Running::collect`]
//! (QEMU's exit judged, every part's evidence, the marks).
//!
//! The loop: console bytes (each chunk and its arrival time to the judge, what the judge
//! says to type typed, the triggers it fired handed to the parts), QMP events (kept in
//! `qmp-events.log`), parts' events, and the loop's timers (the judge's settle time, the
//! deadline). It ends when the judge has a verdict, a part fails, the console closes
//! (QEMU exits), or the deadline passes. A verdict ends the boot at once (QEMU is
//! killed): no boot waits out its deadline once its verdict is known.
//!
//! The console's way to the judge stays bounded: the channel holds a few chunks; when
//! the loop falls behind, the reader waits and so does QEMU. Its log keeps the bytes
//! exactly as they came, its first 8 MiB and its last 1 MiB (`testbench-console`).

use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use testbench_console::{ConsoleEvent, ConsoleLog};
use testbench_judge::{Ending, ExitStatus, Failure, FailureKind, Judge, Shutdown, Verdict};

use super::crash_watch::Watch;
use super::event::{Event, PartEvent};
use super::live_parts::LiveParts;
use super::part::{attach_all, AttachedSet, BootPlace, Passing};
use super::parts::console::{self, QmpLog};
use super::stamps::StampSpec;
use super::{BootSpec, Judged, Trouble};
use crate::process::shell_quote;
use crate::qemu::qmp::{QmpClient, QmpEvent};
use crate::qemu::{
    last_lines, RecordReplay, EXIT_DEADLINE, QMP_DEADLINE, QMP_EXIT_GRACE, QMP_READER_BOUND, STDERR_TAIL_LINES,
};

/// How many events the channel holds: the console's chunks (see `testbench-console`)
/// and a few more, so that QMP and parts do not wait behind a full console.
const CHANNEL_EVENTS: usize = testbench_console::CHANNEL_CHUNKS + 4;

/// How long QEMU's stderr may take to close once QEMU has ended.
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// Boot once, through every stage. Call from the thread that will wait for QEMU (see
/// `process`).
pub fn run(spec: &BootSpec, root: &Path) -> Result<Judged, Trouble> {
    std::fs::create_dir_all(&spec.dir).map_err(|e| Trouble::file("create", &spec.dir, e))?;
    let mut boot = match launch(spec, root)? {
        Launched::Running(boot) => boot,
        Launched::Refused(verdict) => return Ok(Judged { verdict, captures: Vec::new(), notes: Vec::new() }),
    };
    let ended = boot.run_loop();
    let closed = matches!(ended, Loop::Closed);
    let ended = boot.crash_left_open(ended);
    let verdict = boot.check_pass(ended);
    if !closed {
        // The verdict is known, or the deadline passed: nothing QEMU does now can
        // change the verdict.
        boot.stop();
    } else if verdict.is_some() {
        // The console closed inside a crash, which is the verdict: QEMU's exit is not
        // judged, only waited for.
        boot.reap();
    }
    boot.collect(verdict, closed)
}

/// How the loop ended.
#[derive(Clone, Copy)]
enum Loop {
    /// The judge or a part gave the verdict (kept in [`Running::verdict`]).
    Verdict,
    /// QEMU closed the console (it exited).
    Closed,
    /// The boot's deadline passed.
    Deadline,
}

/// What [`launch`] gave: a running boot, or the verdict of a boot that could not start
/// (a part refused to attach: a kept disk that is not what a fresh one would be).
enum Launched<'a> {
    Running(Box<Running<'a>>),
    Refused(Verdict),
}

/// A boot from QEMU's start to its verdict.
struct Running<'a> {
    spec: &'a BootSpec,
    root: &'a Path,
    child: Child,
    stdin: Option<ChildStdin>,
    sender: Option<SyncSender<Event>>,
    events: Receiver<Event>,
    /// The console's log, open until [`Running::collect`] finishes it.
    console: Option<ConsoleLog<std::fs::File>>,
    /// The thread that keeps QEMU's stderr, until [`Running::exited`] joins it.
    stderr: Option<JoinHandle<String>>,
    /// QEMU's QMP connection, when QEMU made it before it exited.
    qmp: Option<Arc<QmpClient>>,
    judge: Judge,
    /// The console's crash reports, when the case reads them (crash_watch.rs).
    crashes: Option<Watch>,
    /// A failure reached while a fatal crash report was still being printed: the
    /// verdict once the report ends (or the console goes quiet, closes, or the deadline
    /// passes), so that the console holds the whole report.
    held: Option<Verdict>,
    parts: LiveParts,
    qmp_log: QmpLog,
    notes: Vec<String>,
    start: Instant,
    deadline: Instant,
    /// The verdict the loop reached, if it reached one.
    verdict: Option<Verdict>,
    /// A boot whose console the stamp plugin reads (stamps.rs): `console.log` is its,
    /// and `console` above keeps QEMU's serial output whole, in `serial.log`.
    stamped: Option<Stamped>,
    /// `--gdb`: the debugger's stops, which the boot's deadline does not count.
    debugger: Option<Debugger>,
}

/// A `--gdb` boot's debugger: while the guest is stopped (from its start until the
/// debugger continues it, and at each stop after) the boot's deadline waits, and the
/// stop has a deadline of its own, `--gdb-wait`.
struct Debugger {
    wait: Duration,
    /// Since when the guest has been stopped (QMP's `STOP`), until `RESUME`.
    stopped_since: Option<Instant>,
    /// The debugger has continued the guest at least once.
    continued: bool,
}

/// The stamped console: its log, and how a stamp's count is the guest's time.
struct Stamped {
    spec: StampSpec,
    log: ConsoleLog<std::fs::File>,
    /// The plugin's socket closed: no stamp comes after.
    ended: bool,
    /// Stamps taken, and QEMU's serial bytes seen: bytes and no stamp at the console's
    /// end is a plugin that was never loaded.
    stamps: u64,
    serial_bytes: u64,
}

/// How long the stamps still in flight when QEMU's console closed may take to come.
const STAMPS_DRAIN: Duration = Duration::from_secs(2);

/// Attach the parts, edit the device tree, start QEMU paused with the serial console on
/// a pipe, and start the guest on the QMP connection the bench holds.
fn launch<'a>(spec: &'a BootSpec, root: &'a Path) -> Result<Launched<'a>, Trouble> {
    let (attached, dtb) = match attach(spec, root) {
        Ok(ready) => ready,
        Err(message) => {
            let failure = Failure::new(FailureKind::Device, Duration::ZERO, message);
            return Ok(Launched::Refused(Verdict::Fail(failure)));
        }
    };
    let qmp = spec.qmp_dir.listen().map_err(|e| Trouble::Qmp(format!("failed to listen for QMP: {e}")))?;
    let machine = &spec.machine;
    let (stamp_args, stamp_listener) = stamp_socket(spec, &qmp)?;
    let cover_args = machine.cover.as_ref().map(|c| c.qemu_args(&spec.dir.join(crate::coverage::FILE)).to_vec());
    let debugger = gdb_session(spec, &qmp)?;
    let gdb_args = debugger.as_ref().map(|session| session.args.clone()).unwrap_or_default();
    machine.ready_files(&spec.dir).map_err(|(path, e)| Trouble::file("write", &path, e))?;
    let cmd = machine.command(&super::machine::Start {
        root,
        dir: &spec.dir,
        deadline: spec.plan.timeout,
        qmp: &[qmp.qemu_args(), stamp_args, cover_args.unwrap_or_default(), gdb_args].concat(),
        machine: &machine.machine,
        dtb: dtb.as_deref(),
        rr: machine.rr.as_ref(),
        parts: &attached.args,
    });
    let line = format!("cd {} && {}\n", shell_quote(&root.display().to_string()), cmd.display());
    let path = spec.dir.join("command-line");
    std::fs::write(&path, line).map_err(|e| Trouble::file("write", &path, e))?;
    if machine.rr == Some(RecordReplay::Record) {
        super::recording::keep(machine, root, &spec.dir)?;
    }
    let (console, stamped) = console_logs(spec)?;
    let mut judge = spec.plan.judge.clone();
    let parts = LiveParts::new(attached.parts, &mut judge);
    let mut child = cmd.spawn_piped().map_err(|e| Trouble::Qemu(e.to_string()))?;
    let (sender, events) = std::sync::mpsc::sync_channel(CHANNEL_EVENTS);
    testbench_console::spawn_reader_into(child.stdout.take().expect("stdout is piped"), sender.clone(), Event::Console);
    let stderr = console::read_stderr(child.stderr.take().expect("stderr is piped"), spec.dir.join("qemu-stderr.log"));
    if let Some(listener) = stamp_listener {
        super::stamps::spawn_reader(listener, sender.clone(), Instant::now() + QMP_DEADLINE);
    }
    let qmp = start_guest(qmp, &mut child, &sender, debugger.is_none())?;
    if let Some(session) = &debugger {
        tell(spec, session)?;
    }
    let start = Instant::now();
    Ok(Launched::Running(Box::new(Running {
        spec,
        root,
        stdin: child.stdin.take(),
        child,
        sender: Some(sender),
        events,
        console: Some(console),
        stderr: Some(stderr),
        qmp,
        judge: Judge::new(judge),
        crashes: Watch::new(&spec.plan.crash, start),
        held: None,
        parts,
        qmp_log: QmpLog::default(),
        notes: Vec::new(),
        start,
        deadline: start + spec.plan.timeout,
        verdict: None,
        stamped,
        debugger: spec.gdb.map(|wait| Debugger { wait, stopped_since: Some(start), continued: false }),
    })))
}

/// A `--gdb` boot's session (gdb.rs): the gdbstub's socket beside the QMP one, in the
/// run's private directory (checked), the ELF the crash is symbolized against, and the
/// snapshot overlay of a replay; none for another boot.
fn gdb_session(spec: &BootSpec, qmp: &crate::qemu::qmp::QmpListener) -> Result<Option<super::gdb::Session>, Trouble> {
    let Some(wait) = spec.gdb else { return Ok(None) };
    let socket = qmp.sibling(super::gdb::SOCKET_EXTENSION);
    let elf = spec.plan.crash_elf.as_ref().map(crate::crash::KernelElf::path);
    let replay = matches!(spec.machine.rr, Some(RecordReplay::Replay(_)));
    Ok(Some(super::gdb::prepare(spec.machine.arch, &socket, &spec.dir, elf, replay, wait)?))
}

/// What the person at the debugger is told: on stderr (stdout may be JSON), and kept in
/// the boot's directory.
fn tell(spec: &BootSpec, session: &super::gdb::Session) -> Result<(), Trouble> {
    eprint!("{}", session.told);
    let path = spec.dir.join(super::gdb::ATTACH_FILE);
    std::fs::write(&path, format!("{}\n", session.attach)).map_err(|e| Trouble::file("write", &path, e))
}

/// The boot's console log, and a stamped boot's: then `console.log` is the stamped
/// console's and QEMU's serial output is kept whole in `serial.log`. Unbuffered: each
/// chunk (up to 64 KiB) is one write, and the log is there to be read (tail -f) while the
/// boot runs.
fn console_logs(spec: &BootSpec) -> Result<(ConsoleLog<std::fs::File>, Option<Stamped>), Trouble> {
    let log = |name: &str| {
        let path = spec.dir.join(name);
        std::fs::File::create(&path).map(ConsoleLog::new).map_err(|e| Trouble::file("create", &path, e))
    };
    let Some(stamp) = &spec.machine.stamp else { return Ok((log("console.log")?, None)) };
    Ok((
        log("serial.log")?,
        Some(Stamped { spec: stamp.clone(), log: log("console.log")?, ended: false, stamps: 0, serial_bytes: 0 }),
    ))
}

/// A stamped boot's plugin arguments and the socket it connects to, beside the QMP one
/// in the run's private directory; none for another boot.
fn stamp_socket(
    spec: &BootSpec,
    qmp: &crate::qemu::qmp::QmpListener,
) -> Result<(Vec<String>, Option<std::os::unix::net::UnixListener>), Trouble> {
    let Some(stamp) = &spec.machine.stamp else { return Ok((Vec::new(), None)) };
    let path = qmp.sibling("st");
    let listener = super::stamps::listen(&path)
        .map_err(|e| Trouble::Qemu(format!("failed to listen for the stamp plugin at {}: {e}", path.display())))?;
    Ok((stamp.qemu_args(&path).to_vec(), Some(listener)))
}

/// Every part attached to this boot, and the device tree edited for their arguments: or
/// why the boot fails before QEMU starts (a kept disk that is not what a fresh one would
/// be, a stage too big for its partition, an edit the tree does not take).
fn attach(spec: &BootSpec, root: &Path) -> Result<(AttachedSet, Option<std::path::PathBuf>), String> {
    let place = BootPlace {
        arch: spec.machine.arch,
        root,
        dir: &spec.dir,
        first_boot: spec.first_boot.as_deref(),
        recorded: spec.machine.rr.is_some(),
    };
    let attached = attach_all(&spec.plan.parts, &place).map_err(|e| e.to_string())?;
    if spec.machine.dt_edits.is_empty() {
        return Ok((attached, None));
    }
    let dtb = spec.machine.edited_tree(root, &spec.dir, &attached.args).map_err(|e| e.to_string())?;
    Ok((attached, Some(dtb)))
}

/// The guest started on the QMP connection the bench holds; QMP's events go to the boot's
/// channel. A QEMU that exited first (bad arguments, say) is judged later by its exit and
/// its stderr (no connection then); one that neither connects nor exits is killed, and the
/// boot is the bench's trouble, said. QEMU connects before it builds the machine, so one
/// that fails then (ROM regions overlapping, say) closes the connection just before it
/// exits: it is given a moment to exit before the connection's end is called the bench's
/// trouble.
fn start_guest(
    qmp: crate::qemu::qmp::QmpListener,
    child: &mut Child,
    sender: &SyncSender<Event>,
    start: bool,
) -> Result<Option<Arc<QmpClient>>, Trouble> {
    let qmp_events = sender.clone();
    let sink = move |event| {
        let _ = qmp_events.send(Event::Qmp(event));
    };
    match qmp.start_guest(child, Instant::now() + QMP_DEADLINE, start, sink) {
        Ok(client) => Ok(Some(Arc::new(client))),
        Err(error) => match crate::process::wait_deadline(child, QMP_EXIT_GRACE) {
            Ok(Some(_)) => Ok(None),
            _ => Err(Trouble::Qmp(error.to_string())),
        },
    }
}

impl Running<'_> {
    /// The time since the guest started.
    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// A part's failure, now.
    fn part_failure(&self, message: String) -> Verdict {
        Verdict::Fail(Failure::new(FailureKind::Device, self.now(), message))
    }

    /// The boot's one loop, until a verdict, the console's end or the deadline.
    fn run_loop(&mut self) -> Loop {
        loop {
            let now = Instant::now();
            if let Some(verdict) = self.debugger_gave_up(now) {
                self.verdict = Some(verdict);
                return Loop::Verdict;
            }
            let stopped = self.debugger.as_ref().and_then(|d| d.stopped_since.map(|since| since + d.wait));
            if stopped.is_none() && now >= self.deadline {
                return Loop::Deadline;
            }
            // A `--gdb` boot's parts start with its guest, at the debugger's first continue.
            let guest_started = self.debugger.as_ref().is_none_or(|d| d.continued);
            if self.held.is_none() && guest_started {
                if let Some(live) = self.live() {
                    // Parts take part only in a boot whose guest the bench started (QMP).
                    self.parts.advance(self.judge.expects_done(), &live);
                }
            }
            let crash_wake = self.crashes.as_ref().and_then(Watch::wake_at);
            // A stamped boot's settle time ends in the guest's time, when a stamp reaches it.
            let judge_wake = self.judge.wake_at().filter(|_| self.held.is_none() && self.stamped.is_none());
            let judge_wake = judge_wake.map(|at| self.start + at);
            let deadline = stopped.unwrap_or(self.deadline);
            let wake = judge_wake.unwrap_or(deadline).min(deadline);
            let wake = crash_wake.map_or(wake, |at| at.min(wake));
            let event = self.events.recv_timeout(wake.saturating_duration_since(now));
            let verdict = match event {
                Ok(Event::Console(ConsoleEvent::Closed)) | Err(RecvTimeoutError::Disconnected) => return self.closed(),
                Ok(Event::Console(ConsoleEvent::Bytes(chunk))) if self.stamped.is_some() => self.keep_serial(&chunk),
                Ok(Event::Console(ConsoleEvent::Bytes(chunk))) if self.held.is_some() => self.finish_report(&chunk),
                Ok(Event::Stamps(records)) => self.take_stamps(records),
                Ok(Event::StampsEnd { connected }) => self.stamps_ended(connected),
                Ok(Event::Console(ConsoleEvent::Bytes(chunk))) => self.take_console(&chunk),
                // While a crash report is held open, a reset (panic=-1's) is its sequel: the
                // crash stays the verdict.
                Ok(Event::Qmp(event)) => self.take_qmp(&event).filter(|_| self.held.is_none()),
                Ok(Event::Part(_)) if self.held.is_some() => None,
                Ok(Event::Part(event)) => self.take_part_event(event),
                Err(RecvTimeoutError::Timeout) => {
                    let crash = self.crashes.as_mut().and_then(|watch| watch.poll(Instant::now()));
                    match (self.held.is_some(), crash) {
                        (true, Some(crash)) => Some(self.release_held(crash)),
                        (true, None) => None,
                        (false, crash) => crash.map(Verdict::Fail).or_else(|| self.poll_judge()),
                    }
                }
            };
            match verdict {
                // A verdict reached while a fatal crash report is being printed waits for
                // the report's end (bounded by its quiet time and the deadline): a failure,
                // so that the console holds the whole report it then names; a pass, which
                // the crash then fails.
                Some(verdict) if self.held.is_none() && self.crashes.as_ref().is_some_and(Watch::inside_fatal) => {
                    self.held = Some(verdict);
                }
                Some(verdict) => {
                    self.verdict = Some(verdict);
                    return Loop::Verdict;
                }
                None => {}
            }
        }
    }

    /// The judge polled on the host's clock: never for a stamped boot, whose settle time
    /// ends only when a stamp reaches it.
    fn poll_judge(&mut self) -> Option<Verdict> {
        if self.stamped.is_some() {
            return None;
        }
        self.judge.poll(self.now())
    }

    /// QEMU's serial output of a stamped boot: kept whole in `serial.log`, judged from
    /// the stamps.
    fn keep_serial(&mut self, chunk: &testbench_console::Chunk) -> Option<Verdict> {
        if let Some(log) = self.console.as_mut() {
            let _ = log.write(&chunk.bytes);
        }
        if let Some(stamped) = self.stamped.as_mut() {
            stamped.serial_bytes += chunk.bytes.len() as u64;
        }
        None
    }

    /// The stamps, in order: each byte to `console.log`, the judge (at its guest time)
    /// and the crash watch; the settle time's end when a stamp reaches it, and then
    /// nothing more of the console is kept.
    fn take_stamps(&mut self, records: Vec<testbench_stamp::Record>) -> Option<Verdict> {
        let mut stamped = self.stamped.take()?;
        stamped.stamps += records.len() as u64;
        let verdict = records.into_iter().find_map(|record| self.take_stamp(&mut stamped, record));
        self.stamped = Some(stamped);
        verdict
    }

    fn take_stamp(&mut self, stamped: &mut Stamped, record: testbench_stamp::Record) -> Option<Verdict> {
        let at = stamped.spec.time(record);
        if self.held.is_none() && self.judge.wake_at().is_some_and(|end| at >= end) {
            return self.judge.poll(at);
        }
        let testbench_stamp::Record::Byte { byte, .. } = record else { return None };
        let _ = stamped.log.write(&[byte]);
        let chunk = testbench_console::Chunk { bytes: vec![byte], at: Instant::now() };
        if self.held.is_some() {
            // Its log is console.log (written above), not QEMU's serial.log.
            return self.report_goes_on(&chunk);
        }
        let step = self.judge.feed(at, &[byte]);
        self.after_judge(&chunk, step.verdict, &step.triggered)
    }

    /// The plugin's socket closed: no stamp comes after. One that never connected fails
    /// the boot, naming it: the judge reads nothing else.
    fn stamps_ended(&mut self, connected: bool) -> Option<Verdict> {
        if let Some(stamped) = self.stamped.as_mut() {
            stamped.ended = true;
        }
        (!connected).then(|| {
            self.part_failure(format!(
                "the stamp plugin never connected: QEMU did not load {} (the console in guest time is read from it; serial.log has QEMU's output)",
                self.spec.machine.stamp.as_ref().map_or(String::new(), |s| s.plugin.display().to_string())
            ))
        })
    }

    /// QEMU closed its console. A stamped boot first takes the stamps still in flight
    /// (bounded by [`STAMPS_DRAIN`]): the last bytes may judge the boot.
    fn closed(&mut self) -> Loop {
        let drain_until = Instant::now() + STAMPS_DRAIN;
        while self.stamped.as_ref().is_some_and(|s| !s.ended) {
            let verdict = match self.events.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
                Ok(Event::Stamps(records)) => self.take_stamps(records),
                Ok(Event::StampsEnd { connected: true }) | Err(_) => break,
                Ok(Event::StampsEnd { connected: false }) => self.stamps_ended(false),
                Ok(Event::Qmp(event)) => {
                    self.qmp_log.note(&event);
                    None
                }
                Ok(Event::Console(_) | Event::Part(_)) => None,
            };
            if let Some(verdict) = verdict.filter(|_| self.held.is_none()) {
                self.verdict = Some(verdict);
                return Loop::Verdict;
            }
        }
        if self.stamped.as_ref().is_some_and(|s| s.stamps == 0 && s.serial_bytes > 0) {
            self.verdict = self.stamps_ended(false);
            return Loop::Verdict;
        }
        Loop::Closed
    }

    /// A QMP event: to its log; a guest's reset (RESET with `guest` true) to the judge.
    /// It comes only in a case that expects resets: elsewhere `-no-reboot` makes a reset
    /// a SHUTDOWN, and QEMU exits.
    fn take_qmp(&mut self, event: &QmpEvent) -> Option<Verdict> {
        self.qmp_log.note(event);
        self.debugger_saw(event);
        match event {
            QmpEvent::Event { name, data } if name == "RESET" && data["guest"] == true => {
                self.judge.guest_reset(self.now())
            }
            _ => None,
        }
    }

    /// A `--gdb` boot's stops and continues: the time stopped is added to the boot's
    /// deadline when the guest runs again.
    fn debugger_saw(&mut self, event: &QmpEvent) {
        let (Some(debugger), QmpEvent::Event { name, .. }) = (self.debugger.as_mut(), event) else { return };
        let now = Instant::now();
        match name.as_str() {
            "STOP" if debugger.stopped_since.is_none() => debugger.stopped_since = Some(now),
            "RESUME" => {
                if let Some(since) = debugger.stopped_since.take() {
                    self.deadline += now.saturating_duration_since(since);
                }
                debugger.continued = true;
            }
            _ => {}
        }
    }

    /// A `--gdb` boot whose guest stayed stopped past `--gdb-wait`: the failure that says
    /// so (no debugger continued it, or it stayed stopped in one).
    fn debugger_gave_up(&self, now: Instant) -> Option<Verdict> {
        let debugger = self.debugger.as_ref()?;
        let since = debugger.stopped_since?;
        if now < since + debugger.wait {
            return None;
        }
        let secs = debugger.wait.as_secs();
        let message = if debugger.continued {
            format!(
                "--gdb: the guest stayed stopped in the debugger longer than --gdb-wait ({secs}s); the boot ends there"
            )
        } else {
            let attach = self.spec.dir.join(super::gdb::ATTACH_FILE);
            format!(
                "--gdb: no debugger continued the guest within --gdb-wait ({secs}s): none attached, or none said continue (the attach command: {})",
                attach.display()
            )
        };
        Some(Verdict::Fail(Failure::new(FailureKind::TimedOut, self.now(), message)))
    }

    /// A console chunk while a failure waits for the crash report being printed: to the
    /// log and the crash watch only; the held failure once the report has ended.
    fn finish_report(&mut self, chunk: &testbench_console::Chunk) -> Option<Verdict> {
        if let Some(log) = self.console.as_mut() {
            let _ = log.write(&chunk.bytes);
        }
        self.report_goes_on(chunk)
    }

    /// The crash watch fed while a failure waits for the report: the held failure once
    /// the report has ended.
    fn report_goes_on(&mut self, chunk: &testbench_console::Chunk) -> Option<Verdict> {
        let ended = self.crashes.as_mut().and_then(|watch| watch.feed(&chunk.bytes, chunk.at));
        match ended {
            Some(crash) => Some(self.release_held(crash)),
            None if !self.crashes.as_ref().is_some_and(Watch::inside_fatal) => self.held.take(),
            None => None,
        }
    }

    /// The held verdict once the report it waited for ended as `crash`: a failure stays
    /// the verdict (the crash is named under it); a pass gives way to the crash.
    fn release_held(&mut self, crash: Failure) -> Verdict {
        match self.held.take() {
            Some(Verdict::Fail(failure)) => Verdict::Fail(failure),
            _ => Verdict::Fail(crash),
        }
    }

    /// A boot whose console closed, or whose deadline passed, inside a fatal crash report
    /// ends on that crash: it is the verdict.
    fn crash_left_open(&mut self, ended: Loop) -> Loop {
        let why = match ended {
            Loop::Verdict => return ended,
            Loop::Closed => "the console closed",
            Loop::Deadline => "the deadline passed",
        };
        let crash = self.crashes.as_mut().and_then(|watch| watch.close(Instant::now(), why));
        match (self.held.take(), crash) {
            // A failure that waited for the report is the verdict, however it ended.
            (Some(held @ Verdict::Fail(_)), _) => self.verdict = Some(held),
            (_, Some(crash)) => self.verdict = Some(Verdict::Fail(crash)),
            (Some(held), None) => self.verdict = Some(held),
            (None, None) => return ended,
        }
        Loop::Verdict
    }

    /// What a part's live methods are given; none when QEMU never connected over QMP.
    fn live(&self) -> Option<super::part::Live> {
        let (qmp, sender) = (self.qmp.as_ref()?, self.sender.as_ref()?);
        Some(super::part::Live {
            start: self.start,
            deadline: self.deadline,
            events: sender.clone(),
            stop: self.parts.stop.clone(),
            qmp: qmp.clone(),
            pid: self.child.id(),
        })
    }

    /// One console chunk: to the log and the judge, what it says to type typed, the
    /// triggers it fired to their parts.
    fn take_console(&mut self, chunk: &testbench_console::Chunk) -> Option<Verdict> {
        let (stdin, log) = (&mut self.stdin, self.console.as_mut().expect("the console log is open"));
        let taken = testbench_console::take_chunk(chunk, &mut self.judge, log, self.start, |text| {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(text).and_then(|_| stdin.flush());
            }
        });
        self.after_judge(chunk, taken.verdict, &taken.triggered)
    }

    /// What follows the judge's reading of console bytes, read from QEMU's output or
    /// from the stamps alike: the triggers it fired to their parts, the bytes to the crash
    /// watch, and the verdict. A crash fails the boot even in the chunk that made the
    /// judge's pass; the judge's own failure, when it has one, came first.
    fn after_judge(
        &mut self,
        chunk: &testbench_console::Chunk,
        judged: Option<Verdict>,
        triggered: &[usize],
    ) -> Option<Verdict> {
        if let Some(live) = self.live() {
            self.parts.triggered(triggered, &live);
        }
        let crash = self.crashes.as_mut().and_then(|watch| watch.feed(&chunk.bytes, chunk.at));
        match (judged, crash) {
            (Some(Verdict::Fail(failure)), _) => Some(Verdict::Fail(failure)),
            (_, Some(crash)) => Some(Verdict::Fail(crash)),
            (verdict, None) => verdict,
        }
    }

    /// A part's event: a note kept, a release counted (the last one releases the judge),
    /// or a failure that is the verdict.
    fn take_part_event(&mut self, event: PartEvent) -> Option<Verdict> {
        match event {
            PartEvent::Note(note) => self.notes.push(note),
            PartEvent::Released => {
                if self.parts.release() {
                    self.judge.release(self.now());
                }
            }
            PartEvent::Failed(message) => return Some(self.part_failure(message)),
        }
        None
    }

    /// A pass is also the machine's: each part that judges it while QEMU still has the
    /// guest (the RAM) has its say, in order, until one fails. The guest may run on
    /// meanwhile: its console and QMP's events are drained into their logs, or a full
    /// channel would stall QMP's reader and the part's next command with it.
    fn check_pass(&mut self, ended: Loop) -> Option<Verdict> {
        let verdict = self.verdict.take();
        if !matches!(ended, Loop::Verdict) || verdict != Some(Verdict::Pass) {
            return verdict;
        }
        for index in 0..self.parts.parts.len() {
            let passing = Passing { dir: &self.spec.dir, qmp: self.qmp.as_deref(), deadline: self.deadline };
            let part = &mut self.parts.parts[index];
            let log = self.console.as_mut().expect("the console log is open");
            let checked =
                console::drain_while(&self.events, log, &mut self.qmp_log, &mut self.notes, || part.on_pass(&passing));
            match checked {
                Ok(evidence) => self.notes.extend(evidence.notes),
                Err(broken) => return Some(self.part_failure(broken.0)),
            }
        }
        Some(Verdict::Pass)
    }

    /// End QEMU once the verdict is known. A boot that is not recorded is killed. A
    /// recorded one is asked to stop (SIGTERM), since QEMU completes the recording only
    /// when it exits (a killed QEMU leaves one that cannot be replayed), and so is a
    /// covered one (the coverage plugin writes its file as QEMU exits); a replayed one
    /// runs on to the recording's end by itself. Either way the console is read to its
    /// end, so that console.log holds what a replay of the recording shows.
    fn stop(&mut self) {
        let grace = match &self.spec.machine.rr {
            None if self.spec.machine.cover.is_none() => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            None | Some(RecordReplay::Record) => {
                let pid = rustix::process::Pid::from_child(&self.child);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                EXIT_DEADLINE
            }
            Some(RecordReplay::Replay(_)) => self.spec.plan.timeout + EXIT_DEADLINE,
        };
        let deadline = Instant::now() + grace;
        while let Ok(event) = self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            match event {
                Event::Console(ConsoleEvent::Bytes(chunk)) => {
                    if let Some(log) = self.console.as_mut() {
                        let _ = log.write(&chunk.bytes);
                    }
                }
                Event::Console(ConsoleEvent::Closed) => break,
                Event::Qmp(_) | Event::Part(_) | Event::Stamps(_) | Event::StampsEnd { .. } => {}
            }
        }
        if !matches!(crate::process::wait_deadline(&mut self.child, EXIT_DEADLINE), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Wait for a QEMU that closed its console (killed if it does not exit in time).
    fn reap(&mut self) {
        if !matches!(crate::process::wait_deadline(&mut self.child, EXIT_DEADLINE), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The verdict made whole: QEMU's exit judged when the console closed (or the
    /// deadline's when nothing gave one), every part's evidence, the marks and logs.
    fn collect(mut self, verdict: Option<Verdict>, closed: bool) -> Result<Judged, Trouble> {
        // The log's head is on disk; a tail that cannot be written is lost, not the verdict.
        let mut console = self.console.take().and_then(|log| log.finish().ok());
        if let Some(stamped) = self.stamped.take() {
            console = stamped.log.finish().ok();
        }
        let at = self.now();
        let verdict = match verdict {
            Some(verdict) => verdict,
            None if closed => self.exited(console.as_mut())?,
            None => self.judge.end(self.spec.plan.timeout, Ending::TimedOut { deadline: self.spec.plan.timeout }),
        };
        // Parts' threads still sending find no one, and end: the boot's receiver goes (a
        // thread blocked on a full channel would otherwise never end, and `finish` joins
        // the parts' threads).
        drop(self.sender.take());
        let (_, closed_channel) = std::sync::mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.events, closed_channel));
        self.qmp_log.write(&self.spec.dir);
        self.await_stderr();
        let verdict = self.parts.finish(verdict, at, (&self.spec.dir, self.root), &mut self.notes);
        console::write_marks(&self.spec.dir, &self.judge);
        Ok(Judged { verdict, captures: self.judge.captures().to_vec(), notes: self.notes })
    }

    /// QEMU's stderr whole on disk before the parts read it: its reader ends when the pipe
    /// closes, which QEMU's end brings (a child QEMU started, a peer helper, may hold it a
    /// moment longer: it is given [`STDERR_SETTLE`], then the file is read as it is).
    fn await_stderr(&mut self) {
        let Some(thread) = self.stderr.take() else { return };
        let settle = Instant::now() + STDERR_SETTLE;
        while !thread.is_finished() && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(5));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }

    /// The judge's verdict on a QEMU that closed the console: its exit status, how the
    /// guest ended over QMP, and its stderr's last lines (appended to the console log when
    /// the verdict is not a pass).
    fn exited(&mut self, console: Option<&mut std::fs::File>) -> Result<Verdict, Trouble> {
        drop(self.stdin.take());
        let status = crate::process::wait_deadline(&mut self.child, EXIT_DEADLINE).map_err(Trouble::Wait)?;
        let stderr_text = self.stderr.take().and_then(|thread| thread.join().ok()).unwrap_or_default();
        let status = status.ok_or(Trouble::NoExit(EXIT_DEADLINE))?;
        let shutdown = match &self.qmp {
            Some(client) => {
                console::note_strangers(&self.spec.dir, &client.strangers());
                // 2 s here once gave "no SHUTDOWN event" on a loaded host where the same
                // case beside it passed: a starved reader, most likely (never proven).
                client.finish(QMP_READER_BOUND)
            }
            None => Shutdown::NoEvent,
        };
        let status = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
            (Some(code), _) => ExitStatus::Code(code),
            (None, Some(signal)) => ExitStatus::Signal(signal),
            (None, None) => ExitStatus::Code(-1),
        };
        let tail = last_lines(&stderr_text, STDERR_TAIL_LINES);
        let ending = Ending::Exited { status, shutdown, stderr_tail: tail.clone() };
        let verdict = self.judge.end(self.now(), ending);
        if let Some(console) = console.filter(|_| !tail.is_empty() && verdict != Verdict::Pass) {
            console::append_stderr_tail(console, &tail);
        }
        Ok(verdict)
    }
}
