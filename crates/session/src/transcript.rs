//! A session's transcript: its output as it came, and the engine's notes between.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// The most output a transcript keeps; what comes after is counted, not written.
pub const TRANSCRIPT_LIMIT: u64 = 8 << 20;

pub(crate) struct Transcript {
    file: File,
    start: Instant,
    written: u64,
    dropped: u64,
    /// The last thing written ended a line (a note starts on a line of its own).
    at_line_start: bool,
}

impl Transcript {
    pub(crate) fn create(path: &Path, start: Instant) -> std::io::Result<Transcript> {
        let file = File::create(path)?;
        Ok(Transcript { file, start, written: 0, dropped: 0, at_line_start: true })
    }

    /// A chunk of output, as it came, while the bound lasts.
    pub(crate) fn output(&mut self, at: Instant, bytes: &[u8]) {
        let room = TRANSCRIPT_LIMIT.saturating_sub(self.written) as usize;
        let kept = &bytes[..bytes.len().min(room)];
        if !kept.is_empty() {
            // A transcript that cannot be written loses its text, not the session.
            let _ = self.file.write_all(kept);
            self.written += kept.len() as u64;
            self.at_line_start = kept.ends_with(b"\n");
        }
        if kept.len() < bytes.len() {
            if self.dropped == 0 {
                self.note(
                    at,
                    &format!("output past the first {} MiB is not kept in this transcript", TRANSCRIPT_LIMIT >> 20),
                );
            }
            self.dropped += (bytes.len() - kept.len()) as u64;
        }
    }

    /// A note `[+1.234s] text` on a line of its own, the time since the case's start.
    pub(crate) fn note(&mut self, at: Instant, text: &str) {
        let secs = at.saturating_duration_since(self.start).as_secs_f64();
        let lead = if self.at_line_start { "" } else { "\n" };
        let _ = self.file.write_all(format!("{lead}[+{secs:.3}s] {text}\n").as_bytes());
        self.at_line_start = true;
    }

    /// Say how much output the bound left out, if any.
    pub(crate) fn close(&mut self, at: Instant) {
        if self.dropped > 0 {
            let dropped = self.dropped;
            self.note(at, &format!("{dropped} bytes of output were not kept in this transcript (its bound)"));
        }
        let _ = self.file.flush();
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}
