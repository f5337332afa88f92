//! GNU `addr2line -fi`, the reference this crate is held to: one process given every
//! address on its standard input, its answers read back per address. The tests and the
//! `addr2line_compare` example compare [`crate::Symbols::lookup`] with it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use testbench_process::{wait_deadline, Cmd, CmdError};

/// One frame as GNU `addr2line -fi` prints it: `??` where it knows no function or file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GnuFrame {
    pub function: String,
    pub file: String,
    /// None for `?` and 0 (no line).
    pub line: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum GnuError {
    #[error(transparent)]
    Cmd(#[from] CmdError),
    #[error("{}: cannot be written: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{command}: its output cannot be read: {source}")]
    Read { command: String, source: std::io::Error },
    #[error("{command}: did not end within {}s", timeout.as_secs())]
    Timeout { command: String, timeout: Duration },
    #[error("{command}: {status}: {stderr}")]
    Failed { command: String, status: ExitStatus, stderr: String },
    #[error("{command}: answered {got} addresses of {asked}")]
    Count { command: String, got: usize, asked: usize },
}

/// `PROGRAM -fi -a -e ELF` (`addr2line` for GNU's; `llvm-addr2line` takes the same
/// arguments and answers in the same form) given `addresses` on its standard input
/// (written first to `scratch/addresses`), each address's frames read back in order,
/// within `timeout`.
pub fn addr2line_fi(
    program: &str,
    elf: &Path,
    addresses: &[u64],
    scratch: &Path,
    timeout: Duration,
) -> Result<Vec<Vec<GnuFrame>>, GnuError> {
    let list = scratch.join("addresses");
    let text: String = addresses.iter().map(|a| format!("{a:#x}\n")).collect();
    std::fs::write(&list, text).map_err(|source| GnuError::Write { path: list.clone(), source })?;
    let input = std::fs::File::open(&list).map_err(|source| GnuError::Write { path: list.clone(), source })?;
    let cmd = Cmd::new(program, program, timeout).args(["-f", "-i", "-a", "-e"]).arg(elf);
    let command = cmd.display();
    let mut child = cmd.spawn_with_stdin(input)?;
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.as_mut().map(|s| s.read_to_string(&mut text)).transpose().map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.as_mut().map(|s| s.read_to_string(&mut text));
        text
    });
    let status = match wait_deadline(&mut child, timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(GnuError::Timeout { command, timeout });
        }
        Err(source) => return Err(GnuError::Read { command, source }),
    };
    let text = out
        .join()
        .unwrap_or_else(|_| Ok(String::new()))
        .map_err(|source| GnuError::Read { command: command.clone(), source })?;
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        return Err(GnuError::Failed { command, status, stderr: stderr.trim().to_string() });
    }
    let answers = parse(&text);
    if answers.len() != addresses.len() {
        return Err(GnuError::Count { command, got: answers.len(), asked: addresses.len() });
    }
    Ok(answers)
}

/// `addr2line -fi -a`'s output: after each `0x…` address line, its frames as pairs of
/// lines (the function, then `file:line`, maybe with ` (discriminator N)`).
pub fn parse(output: &str) -> Vec<Vec<GnuFrame>> {
    let mut answers: Vec<Vec<GnuFrame>> = Vec::new();
    let mut lines = output.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            answers.push(Vec::new());
            continue;
        }
        let Some(frames) = answers.last_mut() else { continue };
        let place = lines.next().unwrap_or("??:0");
        let place = place.split(" (discriminator").next().unwrap_or(place);
        let (file, line_number) = place.rsplit_once(':').unwrap_or((place, "0"));
        frames.push(GnuFrame {
            function: line.to_string(),
            file: file.to_string(),
            line: line_number.parse().ok().filter(|&n| n != 0),
        });
    }
    answers
}
