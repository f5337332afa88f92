//! One boot: QEMU started, its console judged, its devices beside it, all from one loop
//! over one channel of events.
//!
//! Step by step: attach the case's devices to this boot (their files made in the
//! boot's directory, their host ports taken), then dump and edit the device tree if the
//! case edits it, with the same devices on its command line; write the full command line
//! into the boot's directory; listen for QEMU's QMP connection in the run's private
//! socket directory; start QEMU paused (`-S`) with the serial console on a pipe and the
//! parent-death signal set; accept QEMU's own QMP connection, negotiate and only then
//! start the guest (qmp.rs: no event can be lost). From then on the boot is one loop
//! over one bounded channel of [`Event`]s: console bytes (each chunk and its arrival time
//! to the judge, what the judge says to type typed, the triggers it fired handed to the
//! devices' hooks), QMP events, device events, and the loop's timers (the judge's settle
//! time, the deadline). It ends when the judge has a verdict, a device fails, the
//! console closes (QEMU exits), or the deadline passes. A verdict ends the boot at once
//! (QEMU is killed): no boot waits out its deadline once its verdict is known. Then the
//! devices judge what they saw from outside the guest.
//!
//! The console's way to the judge stays bounded: the channel holds a few chunks; when
//! the loop falls behind, the reader waits and so does QEMU. Its log keeps the bytes
//! exactly as they came, its first 8 MiB and its last 1 MiB, saying what it dropped
//! between them (`testbench-console`). QEMU's stderr has its own file, bounded the same
//! way; its last lines are appended to the console log when the verdict is about QEMU's
//! exit.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbench_console::{ConsoleEvent, ConsoleLog};
use testbench_judge::{Ending, ExitStatus, Failure, FailureKind, Judge, Shutdown, Verdict};

use super::devices::{attach_all, BootPlace, DeviceEvent, Hook, HookStart};
use super::qmp::{QmpClient, QmpEvent};
use super::{
    last_lines, BootSpec, Rr, EXIT_DEADLINE, QMP_DEADLINE, QMP_EXIT_GRACE, STDERR_LOG_HEAD, STDERR_LOG_TAIL,
    STDERR_TAIL_LINES,
};
use crate::command::shell_quote;

/// One event of a boot, on the boot's one channel.
pub enum Event {
    /// The console's bytes, or its end.
    Console(ConsoleEvent),
    /// What QEMU said over QMP on its own.
    Qmp(QmpEvent),
    /// A device's thread reporting.
    Device(DeviceEvent),
}

/// How many events the channel holds: the console's chunks (see `testbench-console`)
/// and a few more, so that QMP and devices do not wait behind a full console.
const CHANNEL_EVENTS: usize = testbench_console::CHANNEL_CHUNKS + 4;

/// How one boot went: the verdict, what the judge's capture patterns took, and the
/// notes its devices left for the case's result.
pub struct BootOutcome {
    pub verdict: Verdict,
    pub captures: Vec<Option<String>>,
    pub notes: Vec<String>,
}

/// QEMU's QMP events as they came, for the boot's `qmp-events.log`: the first
/// [`QMP_LOG_EVENTS`] of them, each quoted short.
#[derive(Default)]
struct QmpLog {
    lines: Vec<String>,
    dropped: usize,
}

const QMP_LOG_EVENTS: usize = 200;

impl QmpLog {
    fn note(&mut self, event: &QmpEvent) {
        if self.lines.len() >= QMP_LOG_EVENTS {
            self.dropped += 1;
            return;
        }
        self.lines.push(match event {
            QmpEvent::Event { name, data } => format!("{name} {}", testbench_judge::quote(&data.to_string())),
            QmpEvent::Closed => "(QEMU closed the connection)".into(),
        });
    }

    fn write(&self, dir: &Path) {
        if self.lines.is_empty() {
            return;
        }
        let mut text = self.lines.join("\n");
        if self.dropped > 0 {
            text.push_str(&format!("\n({} more events not kept)", self.dropped));
        }
        text.push('\n');
        let _ = std::fs::write(dir.join("qmp-events.log"), text);
    }
}

/// How the loop ended.
enum Ended {
    Verdict(Verdict),
    Closed,
    Deadline,
}

/// The devices' hooks in one boot, with the judge's triggers mapped back to them.
struct Hooks {
    hooks: Vec<Box<dyn Hook>>,
    /// For each of the judge's triggers, past the case's own: (hook, its trigger).
    triggers: Vec<(usize, usize)>,
    stop: Arc<AtomicBool>,
}

impl Hooks {
    fn new(hooks: Vec<Box<dyn Hook>>, judge: &mut testbench_judge::Config) -> Hooks {
        let mut triggers = Vec::new();
        for (index, hook) in hooks.iter().enumerate() {
            for (which, pattern) in hook.triggers().into_iter().enumerate() {
                judge.triggers.push(pattern);
                triggers.push((index, which));
            }
        }
        Hooks { hooks, triggers, stop: Arc::new(AtomicBool::new(false)) }
    }

    /// The devices' own verdict once the console's is a pass; their notes either way.
    fn finish(&mut self, dir: &Path, verdict: Verdict, at: Duration, notes: &mut Vec<String>) -> Verdict {
        self.stop.store(true, Ordering::SeqCst);
        let mut verdict = verdict;
        for hook in &mut self.hooks {
            match hook.finish(dir, verdict == Verdict::Pass) {
                Ok(more) => notes.extend(more),
                Err(message) => verdict = Verdict::Fail(Failure { kind: FailureKind::Device, at, message }),
            }
        }
        // A device's failure that is already the verdict (it reported it while the boot
        // ran) is not repeated among the notes.
        if let Verdict::Fail(failure) = &verdict {
            notes.retain(|note| *note != failure.message);
        }
        verdict
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl BootSpec {
    /// Boot once. Call from the thread that will wait for QEMU (see `command`).
    pub fn run(&self, root: &Path) -> Result<BootOutcome, String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("failed to create {}: {e}", self.dir.display()))?;
        let place = BootPlace { arch: self.arch, root, dir: &self.dir, first_boot: self.first_boot.as_deref() };
        // A device that cannot be attached (a kept disk that is not what a fresh one
        // would be, a stage too big for its partition) fails the boot before QEMU starts.
        let devices = match attach_all(&self.devices, &place) {
            Ok(devices) => devices,
            Err(message) => {
                let verdict = Verdict::Fail(Failure { kind: FailureKind::Device, at: Duration::ZERO, message });
                return Ok(BootOutcome { verdict, captures: Vec::new(), notes: Vec::new() });
            }
        };
        let dtb = if self.dt_edits.is_empty() { None } else { Some(self.edited_tree(root, &devices.args)?) };
        let qmp = self.qmp_dir.listen().map_err(|e| format!("failed to listen for QMP: {e}"))?;
        let cmd =
            self.command_with(root, &qmp.qemu_args(), &self.machine, dtb.as_deref(), self.rr.as_ref(), &devices.args);
        let command_line = cmd.display();
        std::fs::write(
            self.dir.join("command-line"),
            format!("cd {} && {command_line}\n", shell_quote(&root.display().to_string())),
        )
        .map_err(|e| format!("failed to write the command line: {e}"))?;
        let console_file = std::fs::File::create(self.dir.join("console.log"))
            .map_err(|e| format!("failed to create console.log: {e}"))?;
        // Unbuffered: each chunk (up to 64 KiB) is one write, and the log is there to be
        // read (tail -f) while the boot runs.
        let mut console = ConsoleLog::new(console_file);
        let mut judge_config = self.judge.clone();
        let mut hooks = Hooks::new(devices.hooks, &mut judge_config);
        let holding = hooks.hooks.iter().filter(|h| h.holds()).count();
        // The holders that start only once the others have released (the window at rest).
        let first_holders = hooks.hooks.iter().filter(|h| h.holds() && !h.after_others()).count();
        judge_config.hold |= holding > 0;

        let mut child = cmd.spawn_piped().map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take();
        let (sender, events) = std::sync::mpsc::sync_channel(CHANNEL_EVENTS);
        testbench_console::spawn_reader_into(
            child.stdout.take().expect("stdout is piped"),
            sender.clone(),
            Event::Console,
        );
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let stderr_path = self.dir.join("qemu-stderr.log");
        let stderr_thread = std::thread::spawn(move || read_stderr(stderr_pipe, &stderr_path));

        // The guest starts only on the connection the bench holds. A QEMU that exited
        // first (bad arguments, say) is judged below by its exit and its stderr; one
        // that neither connects nor exits is killed, and the boot fails saying so. QEMU
        // connects before it builds the machine, so one that fails then (ROM regions
        // overlapping, say) closes the connection just before it exits: it is given a
        // moment to exit before the connection's end is called the bench's trouble.
        let qmp_events = sender.clone();
        let sink = move |event| {
            let _ = qmp_events.send(Event::Qmp(event));
        };
        let client = match qmp.start_guest(&mut child, Instant::now() + QMP_DEADLINE, sink) {
            Ok(client) => Some(Arc::new(client)),
            Err(error) => match crate::command::wait_deadline(&mut child, QMP_EXIT_GRACE) {
                Ok(Some(_)) => None,
                _ => return Err(error),
            },
        };
        let start = Instant::now();
        let deadline = start + self.timeout;
        // Hooks take part only in a boot whose guest the bench started (QMP).
        let pid = child.id();
        let hook_start = |qmp: &Arc<QmpClient>| HookStart {
            start,
            deadline,
            events: sender.clone(),
            stop: hooks.stop.clone(),
            qmp: qmp.clone(),
            pid,
        };
        if let Some(qmp) = &client {
            for index in 0..hooks.hooks.len() {
                let at = hook_start(qmp);
                hooks.hooks[index].started(&at);
            }
        }
        let mut qmp_log = QmpLog::default();
        let mut judge = Judge::new(judge_config);
        let mut notes = Vec::new();
        let (mut told_expects, mut released, mut told_others) = (false, 0, false);
        let own_triggers = self.judge.triggers.len();
        let ended = loop {
            let now = Instant::now();
            if now >= deadline {
                break Ended::Deadline;
            }
            if !told_expects && judge.expects_done() {
                // Every expect has matched: the hooks that wait for it (sessions) start.
                told_expects = true;
                if let Some(qmp) = &client {
                    for hook in &mut hooks.hooks {
                        hook.expects_matched(&hook_start(qmp));
                    }
                }
            }
            if told_expects && !told_others && released >= first_holders {
                // The first holders are done (or there are none): the hooks that follow them start.
                told_others = true;
                if let Some(qmp) = &client {
                    for hook in hooks.hooks.iter_mut().filter(|h| h.after_others()) {
                        hook.others_done(&hook_start(qmp));
                    }
                }
            }
            let wake = judge.wake_at().map(|at| start + at).unwrap_or(deadline).min(deadline);
            match events.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Event::Console(ConsoleEvent::Bytes(chunk))) => {
                    let taken = testbench_console::take_chunk(&chunk, &mut judge, &mut console, start, |text| {
                        if let Some(stdin) = stdin.as_mut() {
                            let _ = stdin.write_all(text).and_then(|_| stdin.flush());
                        }
                    });
                    if let Some(qmp) = &client {
                        for fired in taken.triggered.into_iter().filter_map(|t| t.checked_sub(own_triggers)) {
                            let (hook, which) = hooks.triggers[fired];
                            hooks.hooks[hook].triggered(which, &hook_start(qmp));
                        }
                    }
                    if let Some(verdict) = taken.verdict {
                        break Ended::Verdict(verdict);
                    }
                }
                Ok(Event::Console(ConsoleEvent::Closed)) => break Ended::Closed,
                Ok(Event::Qmp(event)) => qmp_log.note(&event),
                Ok(Event::Device(DeviceEvent::Note(note))) => notes.push(note),
                Ok(Event::Device(DeviceEvent::Released)) => {
                    released += 1;
                    if released == holding {
                        judge.release(Instant::now().saturating_duration_since(start));
                    }
                }
                Ok(Event::Device(DeviceEvent::Failed(message))) => {
                    let at = Instant::now().saturating_duration_since(start);
                    break Ended::Verdict(Verdict::Fail(Failure { kind: FailureKind::Device, at, message }));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(verdict) = judge.poll(Instant::now().saturating_duration_since(start)) {
                        break Ended::Verdict(verdict);
                    }
                }
                // Every sender is the reader's, QMP's or a device's thread; the reader
                // says Closed before it goes.
                Err(RecvTimeoutError::Disconnected) => break Ended::Closed,
            }
        };
        let (verdict, console_closed) = match ended {
            Ended::Verdict(verdict) => (Some(verdict), false),
            Ended::Closed => (None, true),
            Ended::Deadline => (None, false),
        };
        // A pass is also the RAM's: read while the guest still runs, before QEMU stops.
        let verdict = match (verdict, &self.memory) {
            (Some(Verdict::Pass), Some(check)) => {
                let checked = match &client {
                    // The guest runs on between dumps: its console and QMP's events are
                    // drained meanwhile (into the log, not the judge), or a full channel
                    // would stall QMP's reader and the next `stop` with it.
                    Some(qmp) => drain_while(&events, &mut console, &mut qmp_log, &mut notes, || {
                        super::ram::memory(qmp, &self.dir, self.memory_mib, check, deadline)
                    }),
                    None => Err("memory: no QMP connection to read the guest's RAM over".to_string()),
                };
                Some(ram_verdict(checked, &mut notes, start))
            }
            (verdict, _) => verdict,
        };
        let verdict = match verdict {
            Some(Verdict::Pass) if !self.ram_forbid.is_empty() => {
                let checked = match &client {
                    Some(qmp) => super::ram::check(qmp, &self.dir, self.arch, self.memory_mib, &self.ram_forbid),
                    None => Err("ram_forbid: no QMP connection to read the guest's RAM over".to_string()),
                };
                Some(ram_verdict(checked.map(|note| vec![note]), &mut notes, start))
            }
            verdict => verdict,
        };
        if !console_closed {
            // The verdict is known, or the deadline passed: nothing QEMU does now can
            // change the verdict. QEMU is stopped (a recorded one so that its recording
            // is whole) and what it still prints goes to the log.
            self.stop(&mut child, &events, &mut console);
        }
        // The log's head is on disk; a tail that cannot be written is lost, not the verdict.
        let mut console = console.finish().ok();
        let at = Instant::now().saturating_duration_since(start);

        let verdict = match verdict {
            Some(verdict) => verdict,
            None if console_closed => {
                drop(stdin.take());
                let status = crate::command::wait_deadline(&mut child, EXIT_DEADLINE)
                    .map_err(|e| format!("failed to wait for QEMU: {e}"))?;
                let stderr_text = stderr_thread.join().unwrap_or_default();
                let status = match status {
                    Some(status) => status,
                    None => {
                        return Err(format!(
                            "QEMU closed the console but had not exited {EXIT_DEADLINE:?} later; killed it"
                        ))
                    }
                };
                let shutdown = match client {
                    Some(client) => {
                        let strangers = client.strangers();
                        if !strangers.is_empty() {
                            let _ = std::fs::write(
                                self.dir.join("qmp.log"),
                                format!("refused QMP connections (not the bench's QEMU): {}\n", strangers.join(", ")),
                            );
                        }
                        client.finish(Duration::from_secs(2))
                    }
                    None => Shutdown::NoEvent,
                };
                let status = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                    (Some(code), _) => ExitStatus::Code(code),
                    (None, Some(signal)) => ExitStatus::Signal(signal),
                    (None, None) => ExitStatus::Code(-1),
                };
                let tail = last_lines(&stderr_text, STDERR_TAIL_LINES);
                let verdict = judge.end(
                    Instant::now().duration_since(start),
                    Ending::Exited { status, shutdown, stderr_tail: tail.clone() },
                );
                if let Some(console) = console.as_mut().filter(|_| !tail.is_empty() && verdict != Verdict::Pass) {
                    let _ = writeln!(console, "\n--- testbench: the last lines of QEMU's stderr ---");
                    for line in &tail {
                        let _ = writeln!(console, "{line}");
                    }
                    let _ = console.flush();
                }
                verdict
            }
            None => judge.end(self.timeout, Ending::TimedOut { deadline: self.timeout }),
        };
        // Devices' threads still sending find no one, and end.
        drop(events);
        qmp_log.write(&self.dir);
        drop(sender);
        let verdict = hooks.finish(&self.dir, verdict, at, &mut notes);
        // The console is whole now: a post-check judges it, once the boot has passed.
        let verdict = match (&self.post_check, verdict) {
            (Some(check), Verdict::Pass) => match super::post_check::run(check, root, &self.dir) {
                Ok(note) => {
                    notes.push(note);
                    Verdict::Pass
                }
                Err(message) => Verdict::Fail(Failure { kind: FailureKind::Device, at, message }),
            },
            (_, verdict) => verdict,
        };
        write_marks(&self.dir, &judge);
        Ok(BootOutcome { verdict, captures: judge.captures().to_vec(), notes })
    }

    /// Ends QEMU once the verdict is known. A boot that is not recorded is killed. A
    /// recorded one is asked to stop (SIGTERM), since QEMU completes the recording only
    /// when it exits (a killed QEMU leaves one that cannot be replayed); a replayed one
    /// runs on to the recording's end by itself. Either way the console is read to its
    /// end, so that console.log holds what a replay of the recording shows.
    fn stop(&self, child: &mut std::process::Child, events: &Receiver<Event>, console: &mut ConsoleLog<std::fs::File>) {
        let grace = match &self.rr {
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Some(Rr::Record) => {
                let pid = rustix::process::Pid::from_child(child);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                EXIT_DEADLINE
            }
            Some(Rr::Replay(_)) => self.timeout + EXIT_DEADLINE,
        };
        let deadline = Instant::now() + grace;
        while let Ok(event) = events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            match event {
                Event::Console(ConsoleEvent::Bytes(chunk)) => {
                    let _ = console.write(&chunk.bytes);
                }
                Event::Console(ConsoleEvent::Closed) => break,
                Event::Qmp(_) | Event::Device(_) => {}
            }
        }
        if !matches!(crate::command::wait_deadline(child, EXIT_DEADLINE), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A RAM check's verdict on a boot that passed: its notes kept, or its failure.
fn ram_verdict(checked: Result<Vec<String>, String>, notes: &mut Vec<String>, start: Instant) -> Verdict {
    match checked {
        Ok(more) => {
            notes.extend(more);
            Verdict::Pass
        }
        Err(message) => {
            let at = Instant::now().saturating_duration_since(start);
            Verdict::Fail(Failure { kind: FailureKind::Device, at, message })
        }
    }
}

/// Run `work` on a thread of its own while this one takes the boot's events: console bytes to the log,
/// QMP events to their log, devices' notes kept (their other events come too late to
/// change a verdict already reached).
fn drain_while<T: Send>(
    events: &Receiver<Event>,
    console: &mut ConsoleLog<std::fs::File>,
    qmp_log: &mut QmpLog,
    notes: &mut Vec<String>,
    work: impl FnOnce() -> T + Send,
) -> T {
    std::thread::scope(|scope| {
        let worker = scope.spawn(work);
        while !worker.is_finished() {
            match events.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Console(ConsoleEvent::Bytes(chunk))) => {
                    let _ = console.write(&chunk.bytes);
                }
                Ok(Event::Qmp(event)) => qmp_log.note(&event),
                Ok(Event::Device(DeviceEvent::Note(note))) => notes.push(note),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                // Every sender gone: nothing more to take; the work ends on its own deadlines.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// QEMU's stderr into `path`, its head and tail kept (see `STDERR_LOG_HEAD`); returns
/// what the file kept, as text.
fn read_stderr(mut pipe: impl Read, path: &Path) -> String {
    let Ok(file) = std::fs::File::create(path) else {
        // Nowhere to keep it: drain the pipe so QEMU never waits on it.
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        return String::new();
    };
    let mut log = ConsoleLog::with_sizes(std::io::BufWriter::new(file), STDERR_LOG_HEAD, STDERR_LOG_TAIL);
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let _ = log.write(&buffer[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    drop(log.finish());
    std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
}

/// The lines the judge's rules took, as `marks.json` beside `console.log` (the run's
/// HTML report marks them): a few entries per pattern at most.
fn write_marks(dir: &Path, judge: &Judge) {
    let marks: Vec<_> = judge
        .marks()
        .iter()
        .map(|m| serde_json::json!({ "line": m.line, "rule": m.rule.name(), "label": m.label, "pattern": m.pattern }))
        .collect();
    let text = serde_json::json!({ "lines": judge.lines_seen(), "marks": marks });
    let _ = std::fs::write(dir.join(MARKS_FILE), format!("{text}\n"));
}

/// Where a boot's marks are kept, in its directory.
pub const MARKS_FILE: &str = "marks.json";
