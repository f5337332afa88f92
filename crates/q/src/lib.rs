//! q, the one-machine scheduler (docs/q.md): a daemon that leases real cores, a quiet
//! core set, host ports and named locks to the commands `q run` starts, so that many
//! runs of the bench (and anything else) share one machine without oversubscribing it.
//!
//! | module | what it holds |
//! |---|---|
//! | `sched.rs` | the rules: who starts, on which cores and ports, what the others wait for |
//! | `place.rs` | the daemon's private directory, its socket's peer check, a process's start time |
//! | `daemon.rs` | the daemon: connections, the lease's end with its client, the saved state and its adoption on restart |
//! | `client.rs` | `q run`, `q ls`, `q log`, `q stop`: asking, waiting, pinning and running the command |
//!
//! The protocol is one JSON object per line over the daemon's Unix socket, whose
//! directory only its owner may enter and whose peers must be that same user.

pub mod client;
pub mod daemon;
pub mod place;
pub mod sched;

use serde::{Deserialize, Serialize};

/// The longest line either side reads: anything longer ends the connection.
pub const MAX_LINE: u64 = 64 * 1024;

/// What a client asks the daemon, first line of a connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Run {
        name: String,
        cwd: String,
        ask: sched::Ask,
    },
    Ls,
    Log,
    /// End the daemon as a kill would (its running jobs' leases left for a daemon started
    /// again to adopt, its waiting jobs told it went away), its state saved and its
    /// socket removed first.
    Stop,
}

/// What a running job's client tells the daemon after its grant.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    Started(i32),
    Exit(i32),
}

/// What the daemon answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Wait(String),
    Granted { job: sched::JobId, grant: sched::Grant, waited_ms: u64 },
    Refused(String),
    Text(String),
}

/// Read one line of at most [`MAX_LINE`] bytes; `None` at the end of the stream.
pub fn read_line(reader: &mut impl std::io::BufRead) -> std::io::Result<Option<String>> {
    use std::io::{BufRead, Read};
    let mut line = String::new();
    let n = reader.take(MAX_LINE).read_line(&mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with('\n') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a line longer than 64 KiB, or cut short"));
    }
    Ok(Some(line))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
