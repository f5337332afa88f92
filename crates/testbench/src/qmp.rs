//! How a guest ended, learnt from QEMU itself over QMP.
//!
//! Under `-no-reboot` QEMU exits with status 0 both when the guest powers off and when it
//! resets, so the exit status cannot tell a guest that reset from one that powered off.
//! QEMU's `SHUTDOWN` event can (`reason` "guest-shutdown" or "guest-reset"). The bench
//! listens on a Unix socket before it starts QEMU, QEMU connects to it as a client while
//! it starts (so there is no window in which the bench must race to connect), and this
//! module reads the events until QEMU closes the connection at its exit.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testbench_judge::Shutdown;

pub struct QmpListener {
    listener: UnixListener,
    path: PathBuf,
}

static SOCKET_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl QmpListener {
    /// A socket in the temporary directory: a run directory's path can be longer than a
    /// Unix socket path may be (108 bytes).
    pub fn new() -> std::io::Result<QmpListener> {
        let n = SOCKET_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("testbench-{}-{n}.qmp", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        Ok(QmpListener { listener, path })
    }

    /// QEMU's arguments that connect its QMP monitor to this socket.
    pub fn qemu_args(&self) -> Vec<String> {
        vec![
            "-chardev".into(),
            format!("socket,id=testbench-qmp,path={},server=off", self.path.display()),
            "-mon".into(),
            "chardev=testbench-qmp,mode=control".into(),
        ]
    }

    /// Accept QEMU's connection on a thread of its own and record the shutdown reason.
    /// The thread ends when QEMU closes the connection, or after `deadline` without one.
    pub fn watch(self, deadline: Duration) -> QmpWatch {
        let shutdown = Arc::new(Mutex::new(Shutdown::Unknown));
        let seen = shutdown.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            let stream = loop {
                // Read the flag before trying: a connection QEMU made before it exited is
                // still in the backlog, and one more accept takes it.
                let give_up = stopped.load(Ordering::Acquire) || start.elapsed() > deadline;
                match self.listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                        if give_up {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => return,
                }
            };
            let _ = read_events(stream, &seen);
        });
        QmpWatch { shutdown, stop, handle: Some(handle) }
    }
}

impl Drop for QmpListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn read_events(stream: UnixStream, seen: &Mutex<Shutdown>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut writer = stream.try_clone()?;
    let reader = BufReader::new(stream);
    let mut greeted = false;
    for line in reader.lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if !greeted && message.get("QMP").is_some() {
            // Events flow only once capabilities are negotiated.
            writer.write_all(b"{\"execute\":\"qmp_capabilities\"}\n")?;
            greeted = true;
            continue;
        }
        if message["event"] == "SHUTDOWN" {
            let how = shutdown_from_event(&message["data"]);
            *seen.lock().unwrap() = how;
        }
    }
    Ok(())
}

/// QEMU's SHUTDOWN reasons: "guest-shutdown" (a power-off), "guest-reset" (a reset under
/// -no-reboot), "guest-panic", and host-side reasons ("host-signal", "host-qmp-quit").
pub fn shutdown_from_event(data: &serde_json::Value) -> Shutdown {
    match data["reason"].as_str() {
        Some("guest-shutdown") => Shutdown::PowerOff,
        Some("guest-reset") | Some("subsystem-reset") | Some("snapshot-load") => Shutdown::Reset,
        _ => Shutdown::Unknown,
    }
}

pub struct QmpWatch {
    shutdown: Arc<Mutex<Shutdown>>,
    /// Set once QEMU has exited: a connection not made by then never will be.
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl QmpWatch {
    /// How the guest ended, once QEMU has exited (waits at most `bound` for the reader).
    pub fn finish(mut self, bound: Duration) -> Shutdown {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let start = Instant::now();
            while !handle.is_finished() && start.elapsed() < bound {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        *self.shutdown.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_reasons_map_to_power_off_and_reset() {
        let parse = |reason: &str| shutdown_from_event(&serde_json::json!({ "guest": true, "reason": reason }));
        assert_eq!(parse("guest-shutdown"), Shutdown::PowerOff);
        assert_eq!(parse("guest-reset"), Shutdown::Reset);
        assert_eq!(parse("host-signal"), Shutdown::Unknown);
    }
}
