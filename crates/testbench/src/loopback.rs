//! The ssh-loopback kind, `server = "openssh"`: each session's ssh starts its own server
//! as its `ProxyCommand`, a QEMU guest of `guests/debian-openssh.toml` in its serial mode,
//! whose stdio is a virtio-serial port on which the guest's `/init` runs `sshd -i`. So
//! nothing listens on a port, and the guest has no network and no host file system.
//!
//! Once per run, before the first such case ([`Loopback`]): the host's ssh asked
//! (`ssh.rs`), QEMU probed and its firmware found, the image built or found in the
//! recipe cache, then the probe: one login that runs `exit 0`, whose server must say it
//! is OpenSSH. What fails there fails (or, for a host lack, skips) every such case.
//!
//! Per case, in its directory: `initrd.cpio` (the image's initramfs followed by an
//! archive of the guest's host key and the case's authorized keys), `server.log`
//! (created empty before the first session; every session's sshd appends to it through
//! its guest's log port), `sessions/` (each session's transcript, its guest's console
//! `<name>.guest.log` and its QEMU's stderr), `command-lines`. After the sessions: the
//! keeper, then `server_log` and `server_log_forbid` judged on the server's log.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbench_case::{Arch, Firmware, Pattern, Session, SshLoopbackCase, Step as CaseStep, TEST_KEYS};
use testbench_session::SessionOutcome;

use crate::boot::parts::sessions::{notes_and_failures, run_all, session_cmd, spec_of, Run, SESSIONS_DIR};
use crate::case_result::{Blocked, HostResult};
use crate::process::shell_quote;
use crate::ssh::{Client, HostKeys, Invocation, Route};

/// The OpenSSH reference guest's recipe.
pub const RECIPE: &str = "guests/debian-openssh.toml";
/// The guest's host key (a test key): every loopback guest has it, and ssh accepts no other.
const HOST_KEY: &str = "guest-host";
/// The serial mode of the guest's `/init`.
const APPEND: &str = "console=ttyS0 panic=-1 quiet tb.sshd=serial";
const MEMORY_MIB: u32 = 512;
/// The case's file of the server's log, in its directory.
pub const SERVER_LOG: &str = "server.log";
/// The bench's own binary as ssh's `ProxyCommand`: `--loopback-proxy QEMU ARGS...` sets
/// its parent-death signal and becomes QEMU (main.rs), so a QEMU never outlives its ssh.
pub const PROXY_HELPER: &str = "--loopback-proxy";
/// The keeper gives the guests at least this long after the sessions end.
const KEEPER_GRACE: Duration = Duration::from_secs(5);
/// The probe's login: 30 s for the banner (ssh's `ConnectTimeout`), then the login.
const PROBE_DEADLINE: Duration = Duration::from_secs(60);
/// QEMU's trace events kept in each session's `<name>.qemu-stderr.log`: what the host
/// handed each port (`virtio_console_chr_read`: the session's input, on port 1, `ssh`),
/// what each port handed the host (`virtio_console_flush_buf`: port 2, `ssh-out`, the
/// session's output, port 3, `log`, the server's log), the ports' opens and throttling, and each
/// queue's notifications both ways. A session that hangs then says on which side its last
/// input or output stopped: read by QEMU and notified to the guest, or never read
/// (docs/sessions.md, "When a loopback session hangs").
const PORT_TRACE: &[&str] = &["virtio_console_*", "virtio_serial_*", "virtio_notify", "virtio_queue_notify"];
/// The most of a server log the bench reads; a log past it fails the case.
const SERVER_LOG_MAX: u64 = 16 << 20;

/// The run's loopback server, made ready at the first ssh-loopback case.
#[derive(Default)]
pub struct Loopback {
    server: Option<Result<Server, Blocked>>,
}

/// What every session's `ProxyCommand` starts, and the client that runs the sessions.
struct Server {
    qemu: String,
    kernel: PathBuf,
    /// The image's own initramfs, before a case's archive is appended.
    initrd: PathBuf,
    client: Client,
    ssh: PathBuf,
    /// This binary, the proxy helper.
    bench: PathBuf,
}

impl Loopback {
    /// Run one ssh-loopback case in `dir`: its verdict (or why it could not run), and the
    /// notes its result prints.
    pub fn run(
        &mut self,
        case: &SshLoopbackCase,
        root: &Path,
        run_dir: &Path,
        dir: &Path,
        log: &mut dyn FnMut(&str),
    ) -> (HostResult, Vec<String>) {
        let server = self.server.get_or_insert_with(|| Server::prepare(root, run_dir, log));
        match server {
            Err(blocked) => (Err(blocked.clone()), Vec::new()),
            Ok(server) => match server.run_case(case, root, dir, log) {
                Ok((verdict, notes)) => (Ok(verdict), notes),
                Err(error) => (Err(Blocked::Build(error.to_string())), Vec::new()),
            },
        }
    }
}

impl Server {
    /// The client, QEMU, the firmware, the image, then the probe.
    fn prepare(root: &Path, run_dir: &Path, log: &mut dyn FnMut(&str)) -> Result<Server, Blocked> {
        let client = Client::once().map_err(|lack| Blocked::HostLack(lack.to_string()))?;
        let ssh = crate::process::on_path("ssh").ok_or_else(|| Blocked::HostLack("ssh is not on the path".into()))?;
        let probe = crate::qemu::probe(Arch::Rv64);
        let version = probe.version.map_err(|e| Blocked::HostLack(format!("ssh-loopback: {e}")))?;
        crate::qemu::check_firmware(Arch::Rv64, &Firmware::Default, root, "firmware", &probe.firmware_dirs)
            .map_err(|e| Blocked::HostLack(format!("ssh-loopback: {e}")))?;
        let recipe_path = root.join(RECIPE);
        let recipe = testbench_recipe::load(&recipe_path).map_err(|e| Blocked::Build(e.to_string()))?;
        let mut recipe_log = |line: &str| log(&format!("guest-image: {line}"));
        let image = testbench_recipe::user_cache_root()
            .and_then(|cache| testbench_recipe::build(&recipe, &cache, &mut recipe_log))
            .map_err(|e| image_blocked(&recipe_path, e))?;
        let bench = std::env::current_exe()
            .map_err(|e| Blocked::Build(format!("ssh-loopback: the bench cannot name its own binary: {e}")))?;
        let server = Server {
            qemu: crate::qemu::qemu_binary(Arch::Rv64),
            kernel: image.kernel,
            initrd: image.initrd,
            client,
            ssh,
            bench,
        };
        log(&format!("ssh-loopback: {version}"));
        let started = Instant::now();
        let dir = run_dir.join("ssh-loopback-probe");
        let banner = server.probe(root, &dir).map_err(|e| {
            Blocked::Build(format!("ssh-loopback probe (one login running `exit 0`, logs in {}): {e}", dir.display()))
        })?;
        log(&format!(
            "ssh-loopback probe: the server says {banner}; a login ran `exit 0` in {:.2}s",
            started.elapsed().as_secs_f64()
        ));
        Ok(server)
    }

    /// One login that runs `exit 0` with the test key alice: its ssh must get the banner
    /// within 30 s and exit 0, the banner must be OpenSSH's (ssh -v says which), and the
    /// server's log must name OpenSSH's version. The banner's version, for the run's output.
    fn probe(&self, root: &Path, dir: &Path) -> Result<String, LoopbackError> {
        let session = Session {
            user: "root".into(),
            name: "probe".into(),
            key: "alice".into(),
            pty: false,
            forbid: Vec::new(),
            ssh_args: vec!["-v".into()],
            command: Some("exit 0".into()),
            steps: vec![CaseStep::Ended(0)],
        };
        let deadline = Instant::now() + PROBE_DEADLINE;
        let runs = self.ready(root, dir, std::slice::from_ref(&session), &["alice".to_string()])?;
        let runs = Arc::new(runs);
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes = run_all(&runs, &stop, deadline, &|_| {});
        let kept = keeper(&self.qemu, dir, (Instant::now() + KEEPER_GRACE).max(deadline));
        if let [SessionOutcome::Fail { reason }] = outcomes.as_slice() {
            return Err(LoopbackError::Probe(reason.clone()));
        }
        kept?;
        let transcript = std::fs::read(dir.join(SESSIONS_DIR).join("probe.log")).unwrap_or_default();
        let transcript = String::from_utf8_lossy(&transcript);
        let banner = regex::Regex::new(r"remote software version (OpenSSH_\S+)").expect("a fixed pattern");
        let Some(found) = banner.captures(&transcript) else {
            return Err(LoopbackError::NoBanner);
        };
        let server_log = read_server_log(&dir.join(SERVER_LOG))?;
        if !server_log.lines().any(|line| line.contains("sshd version OpenSSH_")) {
            return Err(LoopbackError::NoVersion);
        }
        Ok(found[1].to_string())
    }

    /// A case: its sessions, the keeper, the server's log. The verdict and the notes; the
    /// error is a case that could not start (a file it could not write).
    fn run_case(
        &self,
        case: &SshLoopbackCase,
        root: &Path,
        dir: &Path,
        log: &mut dyn FnMut(&str),
    ) -> Result<(Result<(), String>, Vec<String>), LoopbackError> {
        let deadline = Instant::now() + case.timeout;
        let runs = self.ready(root, dir, &case.sessions, &case.authorized_keys)?;
        log(&format!(
            "ssh-loopback: {} session(s), each against OpenSSH in a guest of its own; command lines in {}",
            runs.len(),
            dir.join("command-lines").display()
        ));
        let runs = Arc::new(runs);
        let stop = Arc::new(AtomicBool::new(false));
        let first = RefCell::new(None::<String>);
        let fail = |message: String| {
            first.borrow_mut().get_or_insert(message);
            // A session that fails stops the others.
            stop.store(true, Ordering::SeqCst);
        };
        let outcomes = run_all(&runs, &stop, deadline, &fail);
        let ended = Instant::now();
        let (mut notes, failures) = notes_and_failures(&runs, &outcomes);
        let kept = keeper(&self.qemu, dir, (ended + KEEPER_GRACE).max(deadline));
        let kept = kept.map_err(|killed| killed.to_string());
        if let Err(killed) = &kept {
            notes.push(killed.clone());
        }
        let verdict = match (first.into_inner().or_else(|| failures.first().cloned()), kept) {
            (Some(failure), _) => Err(failure),
            (None, Err(killed)) => Err(killed),
            (None, Ok(())) => {
                let text = read_server_log(&dir.join(SERVER_LOG)).map_err(|e| e.to_string());
                text.and_then(|text| judge_server_log(&text, &case.server_log, &case.server_log_forbid))
                    .map(|note| notes.push(note))
            }
        };
        if verdict.is_err() {
            notes.retain(|note| Some(note) != verdict.as_ref().err());
        }
        Ok((verdict, notes))
    }

    /// A case's files written and its sessions made ready: `initrd.cpio` with the host
    /// key and `keys` authorized, `server.log` empty, the pinned `known_hosts`, each key's
    /// private copy, and each session's ssh with its `ProxyCommand`.
    fn ready(&self, root: &Path, dir: &Path, sessions: &[Session], keys: &[String]) -> Result<Vec<Run>, LoopbackError> {
        let folder = dir.join(SESSIONS_DIR);
        std::fs::create_dir_all(&folder).map_err(|e| LoopbackError::io(&folder, e))?;
        let initrd = dir.join("initrd.cpio");
        write_initrd(&self.initrd, root, keys, &initrd)?;
        let server_log = dir.join(SERVER_LOG);
        std::fs::write(&server_log, b"").map_err(|e| LoopbackError::io(&server_log, e))?;
        let host_key = read_public_key(&root.join(TEST_KEYS).join(format!("{HOST_KEY}.pub")))?;
        let route_for = |name: &str| Route::Proxy(self.proxy_command(&initrd, &server_log, &folder, name));
        let known_hosts = folder.join("known_hosts");
        let line = crate::ssh::known_hosts_line(&Route::Proxy(String::new()), &host_key);
        std::fs::write(&known_hosts, line).map_err(|e| LoopbackError::io(&known_hosts, e))?;
        let host_keys = HostKeys::Pinned { known_hosts };
        let mut runs = Vec::new();
        let mut lines = Vec::new();
        for session in sessions {
            let key = crate::ssh::private_copy(&root.join(session.private_key()), &folder, &session.name)
                .map_err(|e| LoopbackError::Session(e.to_string()))?;
            let invocation = Invocation {
                client: &self.client,
                user: &session.user,
                key: &key,
                route: route_for(&session.name),
                host_keys: host_keys.clone(),
                pty: session.pty,
                ssh_args: &session.ssh_args,
                command: session.command.as_deref(),
            };
            let cmd = session_cmd(&self.ssh, &invocation, &session.name);
            lines.push(format!("session {}: {}", session.name, cmd.display()));
            runs.push(Run {
                spec: spec_of(session).map_err(|e| LoopbackError::Session(e.to_string()))?,
                cmd,
                log: folder.join(format!("{}.log", session.name)),
            });
        }
        let listing = dir.join("command-lines");
        std::fs::write(&listing, lines.join("\n") + "\n").map_err(|e| LoopbackError::io(&listing, e))?;
        Ok(runs)
    }

    /// The `ProxyCommand` of one session: this binary as the proxy helper, becoming QEMU
    /// with no network and no host file system, its stdin the virtio-serial port `ssh`, its
    /// stdout the port `ssh-out` (one port each way: see the comment at the ports), its port `log` appended to the case's server log, its console to the session's guest
    /// log, and its own stderr to a file (so that nothing of QEMU's reaches ssh's output).
    /// That file also gets QEMU's trace of the virtio-serial ports, each line stamped with
    /// its thread and wall-clock time ([`PORT_TRACE`]).
    /// Shell-quoted for the `/bin/sh -c` ssh runs it with, its `%` doubled for ssh's tokens.
    fn proxy_command(&self, initrd: &Path, server_log: &Path, folder: &Path, name: &str) -> String {
        let path = |p: &Path| crate::qemu::option_value(&p.display().to_string());
        let guest_log = folder.join(format!("{name}.guest.log"));
        let stderr = folder.join(format!("{name}.qemu-stderr.log"));
        let argv: Vec<String> = vec![
            self.bench.display().to_string(),
            PROXY_HELPER.into(),
            self.qemu.clone(),
            "-machine".into(),
            "virt".into(),
            "-smp".into(),
            "1".into(),
            "-m".into(),
            format!("{MEMORY_MIB}M"),
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-bios".into(),
            "default".into(),
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            APPEND.into(),
            "-nic".into(),
            "none".into(),
            "-chardev".into(),
            format!("file,id=console,path={}", path(&guest_log)),
            "-serial".into(),
            "chardev:console".into(),
            "-device".into(),
            "virtio-serial-device".into(),
            // The session's two directions on two ports: ssh's bytes in on `ssh` (QEMU's
            // stdin), the server's out on `ssh-out` (its stdout). Not both ways on one:
            // Linux's virtio console driver loses a wake-up when one open port is polled
            // through two descriptors (sshd -i polls its stdin and its stdout). The second
            // descriptor's poll takes the buffer the host has just filled before its
            // interrupt is served; the interrupt then finds nothing new and wakes no one,
            // and sshd sleeps in ppoll beside the bytes it waits for. (The write side's
            // twin of this race is what Lorenz Bauer's "virtio: console: fix lost wakeup
            // when device is written and polled", December 2025, fixes in `port_fops_poll`;
            // Debian's 6.12.117 does not have it.) With one port each way the input port is
            // polled through one descriptor, whose own poll returns the buffer it takes.
            // docs/sessions.md, "When a loopback session hangs", has the evidence.
            "-chardev".into(),
            "stdio,id=ssh,signal=off".into(),
            "-device".into(),
            "virtserialport,chardev=ssh,name=ssh".into(),
            "-chardev".into(),
            "file,id=sshout,path=/dev/stdout,append=on".into(),
            "-device".into(),
            "virtserialport,chardev=sshout,name=ssh-out".into(),
            "-chardev".into(),
            format!("file,id=log,path={},append=on", path(server_log)),
            "-device".into(),
            "virtserialport,chardev=log,name=log".into(),
            "-msg".into(),
            "timestamp=on".into(),
        ];
        let trace = PORT_TRACE.iter().flat_map(|events| ["-trace".to_string(), (*events).to_string()]);
        let argv: Vec<String> = argv.into_iter().chain(trace).collect();
        let words: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
        format!("{} 2>{}", words.join(" "), shell_quote(&stderr.display().to_string())).replace('%', "%%")
    }
}

/// A failed image build: the host's lack when the mirror did not answer or `dpkg-deb` is
/// missing (skipped under `--allow-skip`), a failure otherwise (a checksum that differs,
/// a mirror that answered with an error (a pin it no longer holds included: that error
/// names the re-pin command), a package without a file, no cache folder).
fn image_blocked(recipe: &Path, error: testbench_recipe::RecipeError) -> Blocked {
    use testbench_recipe::RecipeError;
    let message = format!("ssh-loopback: guest recipe {}: {error}", recipe.display());
    match &error {
        RecipeError::Fetch { source, .. } if !matches!(source, testbench_recipe::FetchError::Status { .. }) => {
            Blocked::HostLack(format!("{message} (the image is not built and the mirror did not answer)"))
        }
        RecipeError::Unpack { .. } if crate::process::on_path("dpkg-deb").is_none() => {
            Blocked::HostLack(format!("{message} (dpkg-deb is not on the path: apt-get install dpkg)"))
        }
        _ => Blocked::Build(message),
    }
}

/// What keeps a loopback case (or the run's probe) from running, or what the keeper had to
/// kill; in the words the case's result prints.
#[derive(Debug, thiserror::Error)]
enum LoopbackError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a public key (`type base64 comment`)", .0.display())]
    NotAPublicKey(PathBuf),
    #[error("the case's archive: {0}")]
    Archive(testbench_recipe::newc::NewcError),
    /// A session's key or steps that cannot be made ready.
    #[error("{0}")]
    Session(String),
    #[error("the server's log ({SERVER_LOG}) is past {} MiB: not judged", SERVER_LOG_MAX >> 20)]
    ServerLogTooBig,
    /// The probe's login failed: the session's reason.
    #[error("{0} (transcript: {SESSIONS_DIR}/probe.log)")]
    Probe(String),
    #[error("ssh -v never said the remote software is OpenSSH's")]
    NoBanner,
    #[error("the server's log ({SERVER_LOG}) never names OpenSSH's version")]
    NoVersion,
    #[error("keeper: {name} still ran {secs:.1}s after the sessions ended and was killed: {named}")]
    Kept { name: String, secs: f64, named: String },
}

impl LoopbackError {
    fn io(path: &Path, source: std::io::Error) -> LoopbackError {
        LoopbackError::Io { path: path.to_path_buf(), source }
    }
}

/// `type base64` of a public key file (its comment left out).
fn read_public_key(path: &Path) -> Result<String, LoopbackError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoopbackError::io(path, e))?;
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    match words.as_slice() {
        [kind, base64] => Ok(format!("{kind} {base64}")),
        _ => Err(LoopbackError::NotAPublicKey(path.to_path_buf())),
    }
}

/// The image's initramfs followed by a second archive: the guest's host key and
/// `/root/.ssh/authorized_keys` holding `keys` (each `tests/keys/<name>.pub`). Linux
/// unpacks the second over the first; `/init` sets the owners and modes sshd insists on.
fn write_initrd(image_initrd: &Path, root: &Path, keys: &[String], out: &Path) -> Result<(), LoopbackError> {
    use testbench_recipe::newc::{pad4, write_newc, Entry};
    let read = |path: &Path| std::fs::read(path).map_err(|e| LoopbackError::io(path, e));
    let mut bytes = read(image_initrd)?;
    bytes.resize(bytes.len() + pad4(bytes.len()), 0);
    let mut authorized = Vec::new();
    for key in keys {
        let mut line = read(&root.join(TEST_KEYS).join(format!("{key}.pub")))?;
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        authorized.extend(line);
    }
    let host_key = read(&root.join(TEST_KEYS).join(HOST_KEY))?;
    let entries = vec![
        Entry::file("etc/ssh/ssh_host_ed25519_key", 0o600, host_key),
        Entry::file("root/.ssh/authorized_keys", 0o600, authorized),
    ];
    bytes.extend(write_newc(&entries).map_err(LoopbackError::Archive)?);
    std::fs::write(out, bytes).map_err(|e| LoopbackError::io(out, e))
}

/// The server's log, whole, up to its bound.
fn read_server_log(path: &Path) -> Result<String, LoopbackError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| LoopbackError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(SERVER_LOG_MAX + 1).read_to_end(&mut bytes).map_err(|e| LoopbackError::io(path, e))?;
    if bytes.len() as u64 > SERVER_LOG_MAX {
        return Err(LoopbackError::ServerLogTooBig);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `server_log`: each pattern matched by a line after the one that matched the pattern
/// before it; `server_log_forbid`: matched by no line. The note says what matched where.
fn judge_server_log(text: &str, want: &[Pattern], forbid: &[Pattern]) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().map(|line| line.trim_end_matches('\r')).collect();
    for pattern in forbid {
        if let Some(at) = lines.iter().position(|line| pattern.regex.is_match(line)) {
            return Err(format!(
                "{} '{}' matched the server's log ({SERVER_LOG}) line {}: {:?}",
                pattern.label,
                pattern.source(),
                at + 1,
                testbench_judge::quote(lines[at])
            ));
        }
    }
    let mut from = 0;
    let mut matched = Vec::new();
    for pattern in want {
        match lines[from..].iter().position(|line| pattern.regex.is_match(line)) {
            Some(at) => {
                matched.push(format!("{} line {}", pattern.label, from + at + 1));
                from += at + 1;
            }
            None => {
                let after = if from == 0 { String::new() } else { format!(" after line {from}") };
                return Err(format!(
                    "{} '{}' matched no line of the server's log ({SERVER_LOG}, {} lines){after}",
                    pattern.label,
                    pattern.source(),
                    lines.len()
                ));
            }
        }
    }
    let matched = if matched.is_empty() { String::new() } else { format!("; {}", matched.join(", ")) };
    Ok(format!("server log: {} lines{matched}", lines.len()))
}

/// The keeper: every QEMU (`qemu`'s file name) whose command line names a file in `dir`
/// has until `until` to go; one still running then is killed, and named in the error.
/// A file *in* the folder: `dir/`, so that a case whose name starts with another's
/// (`ssh-loopback-selfcheck-server-log` and `...-server-log-forbid`) keeps its hands
/// off the other's guests.
fn keeper(qemu: &str, dir: &Path, until: Instant) -> Result<(), LoopbackError> {
    let name = Path::new(qemu).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let needle = format!("{}/", dir.display());
    let started = Instant::now();
    loop {
        let alive = processes_naming(&name, &needle);
        if alive.is_empty() {
            return Ok(());
        }
        if Instant::now() >= until {
            let mut named = Vec::new();
            for (pid, line) in alive {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
                named.push(format!("pid {} ({})", pid, testbench_judge::quote(&line)));
            }
            return Err(LoopbackError::Kept { name, secs: started.elapsed().as_secs_f64(), named: named.join("; ") });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes whose program's file name is `name` and one of whose arguments holds
/// `needle`, each with its command line (its words joined by spaces).
fn processes_naming(name: &str, needle: &str) -> Vec<(i32, String)> {
    use std::io::Read;
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(file) = std::fs::File::open(entry.path().join("cmdline")) else { continue };
        let mut bytes = Vec::new();
        if file.take(1 << 20).read_to_end(&mut bytes).is_err() {
            continue;
        }
        let words: Vec<String> = bytes
            .split(|&b| b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        let Some(program) = words.first() else { continue };
        if Path::new(program).file_name().is_some_and(|n| n.to_string_lossy() == name)
            && words[1..].iter().any(|w| w.contains(needle))
        {
            found.push((pid, words.join(" ")));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(label: &str, regex: &str) -> Pattern {
        Pattern { label: label.into(), regex: regex::Regex::new(regex).unwrap() }
    }

    #[test]
    fn the_server_log_is_judged_in_order_and_a_forbidden_line_names_itself() {
        let log = "Connection from UNKNOWN\r\nFailed publickey for root\r\nAccepted publickey for root\r\n";
        let want = [pattern("server_log[0]", "^Failed publickey"), pattern("server_log[1]", "^Accepted publickey")];
        let note = judge_server_log(log, &want, &[]).unwrap();
        assert_eq!(note, "server log: 3 lines; server_log[0] line 2, server_log[1] line 3");
        let reversed = [want[1].clone(), want[0].clone()];
        let error = judge_server_log(log, &reversed, &[]).unwrap_err();
        assert!(error.starts_with("server_log[0] '^Failed publickey' matched no line of the server's log (server.log, 3 lines) after line 3"), "{error}");
        let forbid = [pattern("server_log_forbid[0]", "Accepted")];
        let error = judge_server_log(log, &[], &forbid).unwrap_err();
        assert!(error.contains("line 3: \"Accepted publickey for root\""), "{error}");
        assert!(judge_server_log("", &want[..1], &[]).unwrap_err().contains("(server.log, 0 lines)"));
    }

    /// A process named like QEMU whose command line names the case's directory outlives
    /// the grace: the keeper kills it and names it; one that names another directory is
    /// left alone.
    #[test]
    fn the_keeper_kills_a_leftover_guest_and_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        // tail -f under QEMU's name (a symlink: tail ignores its argv[0]), following a
        // file in the case's directory, runs until killed.
        let fake = tmp.path().join("qemu-system-riscv64");
        std::os::unix::fs::symlink(crate::process::on_path("tail").unwrap(), &fake).unwrap();
        let case_dir = tmp.path().join("run-1").join("case");
        let other_dir = tmp.path().join("run-2").join("case");
        // A case of the same run whose name starts with this one's.
        let longer_dir = tmp.path().join("run-1").join("case-forbid");
        let spawn = |dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(SERVER_LOG), b"").unwrap();
            std::process::Command::new(&fake).arg("-f").arg(dir.join(SERVER_LOG)).spawn().unwrap()
        };
        let mut mine = spawn(&case_dir);
        let other = spawn(&other_dir);
        let longer = spawn(&longer_dir);
        std::thread::sleep(Duration::from_millis(200));
        let error = keeper("qemu-system-riscv64", &case_dir, Instant::now() + Duration::from_millis(300)).unwrap_err();
        assert!(matches!(&error, LoopbackError::Kept { name, .. } if name == "qemu-system-riscv64"), "{error:?}");
        let error = error.to_string();
        assert!(error.starts_with("keeper: qemu-system-riscv64 still ran"), "{error}");
        assert!(error.contains(&format!("pid {}", mine.id())) && error.contains("run-1/case/"), "{error}");
        assert!(!error.contains("run-2") && !error.contains("case-forbid"), "{error}");
        assert!(!mine.wait().unwrap().success());
        assert!(keeper("qemu-system-riscv64", &case_dir, Instant::now()).is_ok());
        for mut left in [other, longer] {
            assert!(left.try_wait().unwrap().is_none(), "the keeper killed another case's guest");
            left.kill().unwrap();
            left.wait().unwrap();
        }
    }
}
