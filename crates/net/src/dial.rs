//! Dials: the bench connects into the guest through a forwarded port, sends, and needs
//! the echo.
//!
//! slirp listens on the host port from QEMU's start and accepts a host connection
//! before it knows whether the guest listens: when the guest answers its SYN with a
//! reset, slirp closes the host side; while the guest's card is not up yet (slirp's ARP
//! for the guest goes unanswered) slirp keeps the host side open and silent. So a
//! connection that is refused, reset, or closed before the expected bytes came, or that
//! stays silent for [`QUIET`], is dropped and retried, one attempt every 100 ms, until
//! the deadline. The first connection whose received bytes contain `expect` passes (read at
//! most [`READ_LIMIT`] bytes per connection; `contains`, not "starts with", so a greeting
//! before the echo does not fail it). With `until_closed` the bench then holds that
//! connection, writing nothing, until the guest closes it, and reports how long.
//!
//! A dial is a host-clock wait: its times are the host's, and a failure beside other
//! work is no verdict until it fails alone. What a pass proves: something behind the
//! forward echoed `expect` to `send` on one connection. What it cannot: that the guest's
//! own service did it rather than anything else the guest runs on that port.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::text::quoted;

/// The time between the starts of two attempts.
pub const RETRY: Duration = Duration::from_millis(100);
/// The most bytes one connection is read for `expect`.
pub const READ_LIMIT: usize = 64 * 1024;
/// How long a connection may stay silent (nothing received since the send or the last
/// byte) before it is dropped for a fresh one. While the guest's card is down slirp
/// resends its SYN (or its ARP for the guest) only after about 6 s and then 18 s (seen on
/// QEMU 10.0 with libslirp 4.7), so a fresh connection reaches a guest that just came up
/// sooner than waiting on the old one.
pub const QUIET: Duration = Duration::from_secs(3);
/// The longest wait for one connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a blocked read looks at the deadline and the cancel flag.
const SLICE: Duration = Duration::from_millis(50);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DialOutcome {
    /// One connection echoed `expect`: after `attempts` connects, `echoed_after` from
    /// `start`; with `until_closed`, held for `held` until the guest closed it.
    Pass { attempts: u32, echoed_after: Duration, held: Option<Duration> },
    /// No connection echoed by the deadline (or the held one outlived it, or the dial
    /// was cancelled): the reason quotes what came.
    Fail { reason: String, attempts: u32 },
}

/// What the last connection did, for the failure's reason.
enum Last {
    Nothing,
    Refused(io::Error),
    Came { bytes: Vec<u8>, how: &'static str },
}

/// Dials `addr` until one connection echoes `expect` for `send` (see the module's docs),
/// from now until `deadline`; times are reported from `start`. An empty `expect` is met
/// by the first byte that comes. `cancel` ends the dial
/// (a failure) at the next look, within about 50 ms.
pub fn run(
    addr: SocketAddr,
    send: &[u8],
    expect: &[u8],
    until_closed: bool,
    start: Instant,
    deadline: Instant,
    cancel: &AtomicBool,
) -> DialOutcome {
    let mut attempts: u32 = 0;
    let mut last = Last::Nothing;
    // The latest connection that sent anything, for the evidence when a later one sent nothing.
    let mut came: Option<(u32, Vec<u8>)> = None;
    let what = format!("a dial to {addr} for the echo {}", quoted(expect));
    loop {
        let now = Instant::now();
        if cancel.load(Ordering::Relaxed) {
            return fail(format!("{what}: cancelled"), attempts, &last, &came);
        }
        if now >= deadline {
            return fail(
                format!("{what}: no echo by the deadline ({:?} from the start)", deadline - start),
                attempts,
                &last,
                &came,
            );
        }
        let attempt_start = now;
        attempts += 1;
        let timeout = CONNECT_TIMEOUT.min(deadline - now).max(Duration::from_millis(1));
        match TcpStream::connect_timeout(&addr, timeout) {
            Err(e) => last = Last::Refused(e),
            Ok(stream) => match exchange(&stream, send, expect, deadline, cancel) {
                Exchange::Echoed => {
                    let echoed_at = Instant::now();
                    let echoed_after = echoed_at - start;
                    if !until_closed {
                        let _ = stream.shutdown(Shutdown::Both);
                        return DialOutcome::Pass { attempts, echoed_after, held: None };
                    }
                    return match hold(&stream, deadline, cancel) {
                        Held::Closed => DialOutcome::Pass { attempts, echoed_after, held: Some(echoed_at.elapsed()) },
                        Held::Open(why) => DialOutcome::Fail {
                            reason: format!(
                                "{what}: echoed after {echoed_after:?} (attempt {attempts}), then held {:?}: {why}",
                                echoed_at.elapsed()
                            ),
                            attempts,
                        },
                    };
                }
                Exchange::Ended { bytes, how } => {
                    if !bytes.is_empty() {
                        came = Some((attempts, bytes.clone()));
                    }
                    last = Last::Came { bytes, how };
                }
                Exchange::Stopped { bytes } => {
                    if !bytes.is_empty() {
                        came = Some((attempts, bytes.clone()));
                    }
                    last = Last::Came { bytes, how: "still open" };
                    continue; // the deadline or the cancel: the loop's head says which
                }
            },
        }
        // The next attempt starts RETRY after this one started.
        sleep_until((attempt_start + RETRY).min(deadline), cancel);
    }
}

fn fail(head: String, attempts: u32, last: &Last, came: &Option<(u32, Vec<u8>)>) -> DialOutcome {
    let mut tail = match last {
        Last::Nothing => "no attempt was made".to_string(),
        Last::Refused(e) => format!("the last connect failed: {e}"),
        Last::Came { bytes, how } if bytes.is_empty() => format!("the last connection sent nothing ({how})"),
        Last::Came { bytes, how } => {
            format!("the last connection sent {} bytes ({how}): {}", bytes.len(), quoted(bytes))
        }
    };
    if let Some((n, bytes)) = came {
        if *n != attempts {
            tail.push_str(&format!(
                "; attempt {n} was the last to send anything, {} bytes: {}",
                bytes.len(),
                quoted(bytes)
            ));
        }
    }
    let s = if attempts == 1 { "" } else { "s" };
    DialOutcome::Fail { reason: format!("{head}; {attempts} attempt{s}; {tail}"), attempts }
}

enum Exchange {
    Echoed,
    /// The connection ended (closed, reset, or full) before the echo.
    Ended {
        bytes: Vec<u8>,
        how: &'static str,
    },
    /// The deadline passed or the dial was cancelled with the connection open.
    Stopped {
        bytes: Vec<u8>,
    },
}

fn exchange(mut stream: &TcpStream, send: &[u8], expect: &[u8], deadline: Instant, cancel: &AtomicBool) -> Exchange {
    let _ = stream.set_nodelay(true);
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    if stream.set_write_timeout(Some(left)).is_err() || stream.write_all(send).is_err() {
        return Exchange::Ended { bytes: Vec::new(), how: "the write failed" };
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut last_byte = Instant::now();
    loop {
        if got.windows(expect.len().max(1)).any(|w| w == expect) || (expect.is_empty() && !got.is_empty()) {
            return Exchange::Echoed;
        }
        if got.len() >= READ_LIMIT {
            return Exchange::Ended { bytes: got, how: "64 KiB without the echo, given up" };
        }
        if cancel.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Exchange::Stopped { bytes: got };
        }
        let room = (READ_LIMIT - got.len()).min(buf.len());
        match read_slice(stream, &mut buf[..room], deadline) {
            Ok(0) => return Exchange::Ended { bytes: got, how: "closed" },
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                last_byte = Instant::now();
            }
            Err(e) if is_timeout(&e) && last_byte.elapsed() >= QUIET => {
                return Exchange::Ended { bytes: got, how: "silent for 3 s, dropped" };
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Exchange::Ended { bytes: got, how: "reset" },
        }
    }
}

enum Held {
    Closed,
    Open(String),
}

/// Holds the connection, writing nothing and discarding what comes, until the guest
/// closes it (end of stream or reset) or the deadline passes.
fn hold(stream: &TcpStream, deadline: Instant, cancel: &AtomicBool) -> Held {
    let mut buf = [0u8; 4096];
    let mut discarded: u64 = 0;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Held::Open(format!("cancelled with the connection still open ({discarded} more bytes came)"));
        }
        if Instant::now() >= deadline {
            return Held::Open(format!("still open at the deadline ({discarded} more bytes came)"));
        }
        match read_slice(stream, &mut buf, deadline) {
            Ok(0) => return Held::Closed,
            Ok(n) => discarded += n as u64,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Held::Closed,
        }
    }
}

/// One read that waits at most [`SLICE`] (less near the deadline).
fn read_slice(mut stream: &TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
    let wait = SLICE.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(wait))?;
    stream.read(buf)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

fn sleep_until(when: Instant, cancel: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= when || cancel.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((when - now).min(SLICE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};
    use std::sync::Arc;

    fn free_port() -> u16 {
        crate::ports::pick_free(1, false).unwrap().0[0]
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
    }

    #[test]
    fn refused_then_reset_then_echoed() {
        let port = free_port();
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        // Nobody listens at first: the first attempts are refused.
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(250));
            let listener = TcpListener::bind(addr(port)).unwrap();
            // As slirp does when the guest is not listening yet: accept, then close.
            let (c, _) = listener.accept().unwrap();
            drop(c);
            // Accept, take the bytes, answer with something else, then close.
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 6];
            c.read_exact(&mut buf).unwrap();
            c.write_all(b"nope").unwrap();
            drop(c);
            // Then echo.
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 6];
            c.read_exact(&mut buf).unwrap();
            c.write_all(b"banner ").unwrap();
            c.write_all(&buf).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        let out = run(addr(port), b"hello\n", b"hello\n", false, start, start + Duration::from_secs(20), &cancel);
        server.join().unwrap();
        match out {
            DialOutcome::Pass { attempts, echoed_after, held: None } => {
                assert!(attempts >= 4, "{attempts}");
                assert!(echoed_after >= Duration::from_millis(250));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn never_echoed_fails_with_what_came() {
        let listener = TcpListener::bind(addr(0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut conns = Vec::new();
            listener.set_nonblocking(true).unwrap();
            let end = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < end {
                if let Ok((mut c, _)) = listener.accept() {
                    c.write_all(b"wrong\x00answer\n").unwrap();
                    conns.push(c); // kept open: the dial must give up at its deadline
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"hello\n", b"hello\n", false, start, start + Duration::from_millis(600), &cancel);
        server.join().unwrap();
        let DialOutcome::Fail { reason, attempts } = out else { panic!("{out:?}") };
        assert_eq!(attempts, 1, "{reason}");
        assert!(
            reason
                .starts_with(&format!("a dial to 127.0.0.1:{port} for the echo \"hello\\n\": no echo by the deadline")),
            "{reason}"
        );
        assert!(
            reason.ends_with("1 attempt; the last connection sent 13 bytes (still open): \"wrong\\x00answer\\n\""),
            "{reason}"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_silent_connection_is_dropped_for_a_fresh_one() {
        // As slirp while the guest's card is down: accepted, then nothing.
        let listener = TcpListener::bind(addr(0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (silent, _) = listener.accept().unwrap();
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 2];
            c.read_exact(&mut buf).unwrap();
            c.write_all(&buf).unwrap();
            drop(silent);
            std::thread::sleep(Duration::from_millis(100));
        });
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"hi", b"hi", false, start, start + Duration::from_secs(30), &cancel);
        server.join().unwrap();
        let DialOutcome::Pass { attempts: 2, echoed_after, .. } = out else { panic!("{out:?}") };
        assert!(echoed_after >= QUIET, "{echoed_after:?}");
    }

    #[test]
    fn the_last_bytes_that_came_are_kept_as_evidence() {
        // One wrong answer, then nobody listens: the failure still quotes the answer.
        let listener = TcpListener::bind(addr(0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap(); // nothing unread: the close is a FIN, not a reset
            c.write_all(b"nope").unwrap();
        });
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"hello", b"hello", false, start, start + Duration::from_millis(600), &cancel);
        server.join().unwrap();
        let DialOutcome::Fail { reason, attempts } = out else { panic!("{out:?}") };
        assert!(attempts >= 2, "{reason}");
        assert!(reason.contains("the last connect failed: Connection refused"), "{reason}");
        assert!(reason.ends_with("; attempt 1 was the last to send anything, 4 bytes: \"nope\""), "{reason}");
    }

    #[test]
    fn nobody_listening_fails_naming_the_refusal() {
        let port = free_port();
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"x", b"x", false, start, start + Duration::from_millis(350), &cancel);
        let DialOutcome::Fail { reason, attempts } = out else { panic!("{out:?}") };
        assert!((1..=5).contains(&attempts), "{attempts}: {reason}");
        assert!(reason.contains("the last connect failed: Connection refused"), "{reason}");
    }

    /// Echoes five bytes on one connection, keeps it `open_for`, closes it, and says when.
    fn echo_server(open_for: Duration) -> (u16, std::thread::JoinHandle<Instant>) {
        let listener = TcpListener::bind(addr(0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap();
            c.write_all(&buf).unwrap();
            std::thread::sleep(open_for);
            let closed_at = Instant::now();
            drop(c);
            closed_at
        });
        (port, t)
    }

    #[test]
    fn held_until_the_guest_closes() {
        let (port, t) = echo_server(Duration::from_millis(300));
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"hello", b"hello", true, start, start + Duration::from_secs(20), &cancel);
        let returned_at = Instant::now();
        let closed_at = t.join().unwrap();
        let DialOutcome::Pass { attempts: 1, held: Some(held), echoed_after } = out else { panic!("{out:?}") };
        // The dial came back only once the other side had closed.
        assert!(returned_at >= closed_at);
        assert!(echoed_after + held <= returned_at - start, "{echoed_after:?} + {held:?}");
    }

    #[test]
    fn held_past_the_deadline_fails() {
        let (port, t) = echo_server(Duration::from_millis(1500));
        let cancel = AtomicBool::new(false);
        let start = Instant::now();
        let out = run(addr(port), b"hello", b"hello", true, start, start + Duration::from_millis(500), &cancel);
        let DialOutcome::Fail { reason, attempts: 1 } = out else { panic!("{out:?}") };
        assert!(reason.contains("(attempt 1), then held"), "{reason}");
        assert!(reason.ends_with("still open at the deadline (0 more bytes came)"), "{reason}");
        t.join().unwrap();
    }

    #[test]
    fn cancel_ends_the_dial() {
        let port = free_port();
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c.store(true, Ordering::Relaxed);
        });
        let start = Instant::now();
        let out = run(addr(port), b"x", b"x", false, start, start + Duration::from_secs(30), &cancel);
        t.join().unwrap();
        let DialOutcome::Fail { reason, .. } = out else { panic!("{out:?}") };
        assert!(reason.contains(": cancelled;"), "{reason}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
