//! The console's side of a boot, the one part the loop itself drives (stages.rs): the
//! judge's marks kept beside the log, QEMU's stderr kept and its last lines appended to
//! a failing console, QEMU's QMP events logged, and the console drained while another
//! part works on a passing boot.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use testbench_console::{ConsoleEvent, ConsoleLog};
use testbench_judge::Judge;

use crate::boot::event::{Event, PartEvent};
use crate::qemu::qmp::QmpEvent;
use crate::qemu::{STDERR_LOG_HEAD, STDERR_LOG_TAIL};

/// Where a boot's marks are kept, in its directory.
pub const MARKS_FILE: &str = "marks.json";

/// QEMU's QMP events as they came, for the boot's `qmp-events.log`: the first
/// [`QMP_LOG_EVENTS`] of them, each quoted short.
#[derive(Default)]
pub struct QmpLog {
    lines: Vec<String>,
    dropped: usize,
}

const QMP_LOG_EVENTS: usize = 200;

impl QmpLog {
    pub fn note(&mut self, event: &QmpEvent) {
        if self.lines.len() >= QMP_LOG_EVENTS {
            self.dropped += 1;
            return;
        }
        self.lines.push(match event {
            QmpEvent::Event { name, data } => format!("{name} {}", testbench_judge::quote(&data.to_string())),
            QmpEvent::Closed => "(QEMU closed the connection)".into(),
        });
    }

    pub fn write(&self, dir: &Path) {
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

/// QMP connections refused because their peer was not the bench's QEMU, kept in the
/// boot's `qmp.log`.
pub fn note_strangers(dir: &Path, strangers: &[String]) {
    if !strangers.is_empty() {
        let text = format!("refused QMP connections (not the bench's QEMU): {}\n", strangers.join(", "));
        let _ = std::fs::write(dir.join("qmp.log"), text);
    }
}

/// QEMU's last stderr lines, at the end of a failing boot's console log.
pub fn append_stderr_tail(console: &mut std::fs::File, tail: &[String]) {
    let _ = writeln!(console, "\n--- testbench: the last lines of QEMU's stderr ---");
    for line in tail {
        let _ = writeln!(console, "{line}");
    }
    let _ = console.flush();
}

/// Run `work` on a thread of its own while this one takes the boot's events: console
/// bytes to the log, QMP events to their log, parts' notes kept (their other events come
/// too late to change a verdict already reached).
pub fn drain_while<T: Send>(
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
                Ok(Event::Part(PartEvent::Note(note))) => notes.push(note),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                // Every sender gone: nothing more to take; the work ends on its own deadlines.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// QEMU's stderr into `path` on a thread of its own, its head and tail kept (see
/// `STDERR_LOG_HEAD`); the thread gives what the file kept, as text.
pub fn read_stderr(pipe: impl Read + Send + 'static, path: PathBuf) -> JoinHandle<String> {
    std::thread::spawn(move || keep_stderr(pipe, &path))
}

fn keep_stderr(mut pipe: impl Read, path: &Path) -> String {
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
pub fn write_marks(dir: &Path, judge: &Judge) {
    let marks: Vec<_> = judge
        .marks()
        .iter()
        .map(|m| serde_json::json!({ "line": m.line, "rule": m.rule.name(), "label": m.label, "pattern": m.pattern }))
        .collect();
    let text = serde_json::json!({ "lines": judge.lines_seen(), "marks": marks });
    let _ = std::fs::write(dir.join(MARKS_FILE), format!("{text}\n"));
}
