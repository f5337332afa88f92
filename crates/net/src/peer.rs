//! The peer helper: what the bench's own binary does when QEMU starts it for a
//! connection the guest made to a peer (`guestfwd=tcp:ADDR:PORT-cmd:COMMAND`).
//!
//! slirp starts the command once per connection, with the connection (one end of a
//! socketpair) as its standard input, output *and error*: anything the helper writes to
//! stderr reaches the guest, so the binary must print nothing in this mode. [`serve`]
//! records the connection as a new file in the boot's record directory, made durable
//! (fsync of the file and of the directory) before a single byte is echoed, and then
//! echoes until the guest closes, within a bound on bytes and an idle deadline.
//!
//! What it proves: a record exists for every connection slirp handed the helper, so
//! [`count`] after the boot is the number of connections the guest opened to the peer.
//! What it cannot: a connection the guest opened while the helper could not start
//! (slirp failing to spawn it) leaves no record; the capture's SYN count is the
//! independent witness of the same number.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::SocketAddrV4;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// The most bytes one connection echoes; past it the helper stops (and the guest sees
/// the connection close).
pub const ECHO_LIMIT: u64 = 1 << 20;
/// How long the helper waits for the guest's next byte before it ends the connection.
pub const IDLE_DEADLINE: Duration = Duration::from_secs(60);
/// The most records one peer may have in a directory (a bound on the name search).
pub const MAX_RECORDS: u32 = 100_000;
/// The longest peer name.
pub const MAX_NAME: usize = 64;

/// A peer's name as it appears in the names of its records: 1 to 64 of `A-Za-z0-9._`.
/// (`-` is kept out so a name and its record number never blur.)
pub fn check_name(peer_name: &str) -> Result<(), PeerNameError> {
    if peer_name.is_empty()
        || peer_name.len() > MAX_NAME
        || !peer_name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
    {
        return Err(PeerNameError { name: peer_name.to_string() });
    }
    Ok(())
}

/// A peer name [`check_name`] refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("peer name {:?}: it takes 1 to {MAX_NAME} of the characters A-Z a-z 0-9 . _", testbench_judge::quote(name))]
pub struct PeerNameError {
    pub name: String,
}

/// The peers' connections not as the case says ([`check_counts`]).
#[derive(Debug, thiserror::Error)]
pub enum PeerCountError {
    /// A peer's records could not be counted.
    #[error("peer {addr}: its records in {} could not be counted: {source}", dir.display())]
    Uncountable { addr: SocketAddrV4, dir: PathBuf, source: io::Error },
    /// Peers whose records are not as many as their connections: every one, a line each.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Mismatch(Vec<CountMismatch>),
}

/// One peer whose records are not as many as the connections it expects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("peer {addr} expects {want} connection{}; the helper recorded {got}", if *want == 1 { "" } else { "s" })]
pub struct CountMismatch {
    pub addr: SocketAddrV4,
    pub want: u32,
    pub got: usize,
}

/// A peer's name made from its address, e.g. `10.0.9.100_7`.
pub fn name_for(addr: std::net::SocketAddrV4) -> String {
    format!("{}_{}", addr.ip(), addr.port())
}

/// Records one connection to `peer_name` in `record_dir`, then echoes `stdin` to `stdout`
/// until `stdin` ends, at most [`ECHO_LIMIT`] bytes, each read within [`IDLE_DEADLINE`].
/// For the real helper pass the connection's descriptor itself (e.g. a `File` made from a
/// duplicate of fd 0), not a buffered `Stdin`: the idle deadline polls the descriptor.
pub fn serve<R: Read + AsFd, W: Write>(record_dir: &Path, peer_name: &str, stdin: R, stdout: W) -> io::Result<()> {
    serve_with(record_dir, peer_name, stdin, stdout, ECHO_LIMIT, IDLE_DEADLINE)
}

/// [`serve`] with its bounds given.
pub fn serve_with<R: Read + AsFd, W: Write>(
    record_dir: &Path,
    peer_name: &str,
    mut stdin: R,
    mut stdout: W,
    echo_limit: u64,
    idle: Duration,
) -> io::Result<()> {
    check_name(peer_name).map_err(io::Error::other)?;
    record(record_dir, peer_name)?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut echoed: u64 = 0;
    loop {
        wait_readable(&stdin, idle)?;
        let room = (echo_limit - echoed).min(buf.len() as u64) as usize;
        if room == 0 {
            return Err(io::Error::other(format!(
                "peer {peer_name}: echoed {echoed} bytes, the bound; connection ended"
            )));
        }
        let n = match stdin.read(&mut buf[..room]) {
            Ok(0) => return stdout.flush(),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stdout.write_all(&buf[..n])?;
        stdout.flush()?;
        echoed += n as u64;
    }
}

/// Waits until `fd` has something to read (or its end), at most `idle`.
fn wait_readable(fd: &impl AsFd, idle: Duration) -> io::Result<()> {
    let deadline = Instant::now() + idle;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("waiting for the guest's next byte: none for {idle:?} (idle deadline)"),
            ));
        }
        let timeout = Timespec { tv_sec: left.as_secs() as _, tv_nsec: left.subsec_nanos() as _ };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Creates `record_dir/<peer>-<n>` with the first free `n` (never an existing file),
/// writes when and who, and makes it durable.
fn record(record_dir: &Path, peer_name: &str) -> io::Result<()> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    for n in 0..MAX_RECORDS {
        let path = record_dir.join(format!("{peer_name}-{n}"));
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(e.kind(), format!("recording a connection as {}: {e}", path.display())))
            }
        };
        let text = format!(
            "peer {peer_name}\nconnection {n}\nunix_time {}.{:09}\npid {}\n",
            now.as_secs(),
            now.subsec_nanos(),
            std::process::id()
        );
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        File::open(record_dir)?.sync_all()?;
        return Ok(());
    }
    Err(io::Error::other(format!("peer {peer_name}: {MAX_RECORDS} records already in {}", record_dir.display())))
}

/// How many connections `peer_name` has recorded in `record_dir`: the files named
/// `<peer>-<n>`. An unreadable directory is an error, never 0.
pub fn count(record_dir: &Path, peer_name: &str) -> io::Result<usize> {
    check_name(peer_name).map_err(io::Error::other)?;
    let prefix = format!("{peer_name}-");
    let mut n = 0;
    for entry in std::fs::read_dir(record_dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(num) = name.strip_prefix(&prefix) {
            if !num.is_empty() && num.len() <= 10 && num.bytes().all(|b| b.is_ascii_digit()) {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// After the boot: each peer's records against its `connections`, every mismatch named
/// (`peer 10.0.9.100:7 expects 1 connection; the helper recorded 2`). Records are
/// counted under [`name_for`] of the peer's address.
pub fn check_counts(record_dir: &Path, peers: &[(SocketAddrV4, u32)]) -> Result<(), PeerCountError> {
    let mut wrong = Vec::new();
    for &(addr, want) in peers {
        let got = count(record_dir, &name_for(addr)).map_err(|source| PeerCountError::Uncountable {
            addr,
            dir: record_dir.to_path_buf(),
            source,
        })?;
        if got as u64 != u64::from(want) {
            wrong.push(CountMismatch { addr, want, got });
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(PeerCountError::Mismatch(wrong))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("testbench-net-peer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn names() {
        assert!(check_name("10.0.9.100_7").is_ok());
        assert_eq!(name_for("10.0.9.100:7".parse().unwrap()), "10.0.9.100_7");
        for bad in ["", "a-b", "a/b", "..\u{e9}", &"x".repeat(65)] {
            let error = check_name(bad).unwrap_err();
            assert_eq!(error, PeerNameError { name: bad.to_string() });
            let error = error.to_string();
            assert!(error.ends_with("it takes 1 to 64 of the characters A-Z a-z 0-9 . _"), "{bad}: {error}");
        }
    }

    #[test]
    fn records_before_it_echoes_then_echoes() {
        let dir = scratch("echo");
        let (mut guest, helper) = UnixStream::pair().unwrap();
        let d = dir.clone();
        let t = std::thread::spawn(move || {
            let out = helper.try_clone().unwrap();
            serve(&d, "p", helper, out)
        });
        guest.write_all(b"hello\n").unwrap();
        let mut got = [0u8; 6];
        guest.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello\n");
        // The record was there before the echo came back.
        assert_eq!(count(&dir, "p").unwrap(), 1);
        let text = std::fs::read_to_string(dir.join("p-0")).unwrap();
        assert!(text.starts_with("peer p\nconnection 0\nunix_time "), "{text}");
        guest.shutdown(std::net::Shutdown::Write).unwrap();
        t.join().unwrap().unwrap();
        let mut rest = Vec::new();
        guest.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }

    #[test]
    fn nothing_echoes_without_a_record() {
        // A record directory that does not exist: the helper fails before any echo.
        let dir = scratch("norecord").join("missing");
        let (mut guest, helper) = UnixStream::pair().unwrap();
        guest.write_all(b"hello").unwrap();
        let out = helper.try_clone().unwrap();
        let err = serve(&dir, "p", helper, out).unwrap_err();
        assert!(err.to_string().contains("recording a connection as"), "{err}");
        guest.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 8];
        let r = guest.read(&mut buf);
        assert!(!matches!(r, Ok(n) if n > 0), "an echo came without a record: {r:?}");
    }

    #[test]
    fn each_connection_its_own_record() {
        let dir = scratch("many");
        for _ in 0..3 {
            let (guest, helper) = UnixStream::pair().unwrap();
            drop(guest);
            serve(&dir, "a", helper, io::sink()).unwrap();
        }
        let (guest, helper) = UnixStream::pair().unwrap();
        drop(guest);
        serve(&dir, "a_b", helper, io::sink()).unwrap();
        std::fs::write(dir.join("a-x"), "").unwrap(); // not a record
        assert_eq!(count(&dir, "a").unwrap(), 3);
        assert_eq!(count(&dir, "a_b").unwrap(), 1);
        assert_eq!(count(&dir, "c").unwrap(), 0);
        assert_eq!(count(&dir.join("missing"), "a").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn counts_against_connections() {
        let dir = scratch("check");
        let a: std::net::SocketAddrV4 = "10.0.9.100:7".parse().unwrap();
        let b: std::net::SocketAddrV4 = "10.0.9.101:7".parse().unwrap();
        for _ in 0..2 {
            let (guest, helper) = UnixStream::pair().unwrap();
            drop(guest);
            serve(&dir, &name_for(a), helper, io::sink()).unwrap();
        }
        assert!(check_counts(&dir, &[(a, 2), (b, 0)]).is_ok());
        let wrong = check_counts(&dir, &[(a, 1), (b, 1)]).unwrap_err();
        let PeerCountError::Mismatch(mismatches) = &wrong else { panic!("not a mismatch: {wrong}") };
        assert_eq!(
            mismatches,
            &[CountMismatch { addr: a, want: 1, got: 2 }, CountMismatch { addr: b, want: 1, got: 0 }]
        );
        assert_eq!(
            wrong.to_string(),
            "peer 10.0.9.100:7 expects 1 connection; the helper recorded 2\n\
             peer 10.0.9.101:7 expects 1 connection; the helper recorded 0"
        );
        let err = check_counts(&dir.join("gone"), &[(a, 0)]).unwrap_err();
        assert!(
            matches!(&err, PeerCountError::Uncountable { addr, source, .. } if *addr == a && source.kind() == io::ErrorKind::NotFound)
        );
        assert!(err.to_string().starts_with("peer 10.0.9.100:7: its records in "), "{err}");
    }

    #[test]
    fn bounded_in_bytes() {
        let dir = scratch("bytes");
        let (mut guest, helper) = UnixStream::pair().unwrap();
        guest.write_all(&[7u8; 3000]).unwrap();
        let mut out = Vec::new();
        let err = serve_with(&dir, "p", helper, &mut out, 1000, Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("echoed 1000 bytes, the bound"), "{err}");
        assert_eq!(out.len(), 1000);
    }

    #[test]
    fn bounded_in_idle_time() {
        let dir = scratch("idle");
        let (_guest, helper) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let err = serve_with(&dir, "p", helper, io::sink(), 1000, Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("none for 100ms (idle deadline)"), "{err}");
        assert!(start.elapsed() >= Duration::from_millis(100));
        assert_eq!(count(&dir, "p").unwrap(), 1);
    }
}
