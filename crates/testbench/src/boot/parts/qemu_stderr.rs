//! QEMU's own words on a failing boot: when QEMU said something on its stderr that the
//! verdict does not already quote (QEMU ran on, and the boot failed on what followed),
//! the boot's result notes its last line and how many there were. A peer helper that
//! could not be started, a device QEMU refused at run time, a warning about the host:
//! each is often the cause of the failure the console shows, and it was only in
//! `qemu-stderr.log`.

use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec};

/// The file QEMU's stderr is kept in, in the boot's directory (stages.rs writes it).
pub const STDERR_LOG: &str = "qemu-stderr.log";

/// How much of the file's end is read (the file keeps QEMU's first 256 KiB and last
/// 64 KiB).
const TAIL_BYTES: u64 = 64 * 1024;

/// Every boot's QEMU stderr, read on a failure.
pub struct QemuStderr;

impl PartSpec for QemuStderr {
    fn name(&self) -> String {
        "qemu-stderr".into()
    }

    fn attach(&self, _place: &BootPlace) -> Result<Attached, AttachError> {
        Ok(Attached { parts: vec![Box::new(QemuStderr)], ..Attached::default() })
    }
}

impl Part for QemuStderr {
    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        let Some(failure) = ended.failure else { return Ok(Evidence::default()) };
        let text = tail(&ended.dir.join(STDERR_LOG));
        Ok(note(&text, failure).map(Evidence::note).unwrap_or_default())
    }
}

/// The last `TAIL_BYTES` of a file, as text; empty when it cannot be read.
fn tail(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return String::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES))).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(TAIL_BYTES).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The note for QEMU's stderr `text` beside a failure whose reason is `failure`: none
/// when QEMU said nothing or the reason already quotes its last line.
fn note(text: &str, failure: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let last = lines.last()?;
    if failure.contains(last) {
        return None;
    }
    let count = if lines.len() == 1 { "1 line".to_string() } else { format!("{} lines", lines.len()) };
    Some(format!("QEMU said on stderr ({count}, {STDERR_LOG}), last: {}", testbench_judge::quote(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing boot names what QEMU said last, unless its reason already quotes it;
    /// a passing one, or a QEMU that said nothing, gets no note.
    #[test]
    fn qemus_last_words_are_noted_on_a_failure_that_does_not_quote_them() {
        let slirp = "qemu-system-riscv64: Slirp: fork_exec: Failed to execute child process \"/x/testbench\" (No such file or directory)\n";
        let noted = note(slirp, "forbidden line at 0.45s matched forbid[0] 'FAIL'").unwrap();
        assert_eq!(
            noted,
            format!(
                "QEMU said on stderr (1 line, qemu-stderr.log), last: {}",
                testbench_judge::quote(slirp.trim_end())
            )
        );
        let twice = format!("a warning\n\n{slirp}");
        assert!(note(&twice, "x")
            .unwrap()
            .starts_with("QEMU said on stderr (2 lines, qemu-stderr.log), last: qemu-system-riscv64: Slirp"));
        assert_eq!(note("", "x"), None);
        assert_eq!(note("  \n", "x"), None);
        let quoted = "QEMU exited with status 1: qemu-system-riscv64: -icount x: Invalid parameter 'x'";
        assert_eq!(note("qemu-system-riscv64: -icount x: Invalid parameter 'x'\n", quoted), None);

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STDERR_LOG), slirp).unwrap();
        let (quiet, failed) = (
            Ended { dir: dir.path(), root: dir.path(), passed: true, failure: None },
            Ended { dir: dir.path(), root: dir.path(), passed: false, failure: Some("timed out") },
        );
        let mut part = QemuStderr;
        assert_eq!(part.finish(&quiet).unwrap(), Evidence::default());
        assert_eq!(part.finish(&failed).unwrap().notes.len(), 1);
    }
}
