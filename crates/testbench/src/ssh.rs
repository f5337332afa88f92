//! The host's OpenSSH client, as the sessions run it: asked once per run what it takes
//! (`ssh -V`, and `ssh -G` for `WarnWeakCrypto`), and the command line of one session:
//! no configuration file, no agent, the case's test key alone, host keys pinned or
//! knowingly not checked, every wait bounded.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::process::Cmd;

/// `ssh -V` and `ssh -G` answer at once; ten seconds is an ssh that cannot run.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// How long ssh waits for the server's banner (its `ConnectTimeout`, which covers the
/// identification exchange too).
pub const BANNER_TIMEOUT_SECS: u32 = 30;

/// The same through a proxy that boots the server (ssh-loopback's QEMU): the wait covers
/// the guest's boot, which a loaded host has seen take over 30 s. The case's deadline
/// still bounds the session.
pub const PROXIED_BANNER_TIMEOUT_SECS: u32 = 90;

/// The option OpenSSH 10.1 brought with its warning about key exchanges that are not
/// post-quantum; an older ssh has neither the warning nor the option.
const WARN_WEAK_CRYPTO: &str = "WarnWeakCrypto=no-pq-kex";

/// What the host's ssh is and takes, asked once per run.
#[derive(Clone, Debug)]
pub struct Client {
    /// `ssh -V`'s line (OpenSSH prints it on stderr).
    pub version: String,
    /// Whether `ssh -G` parses `WarnWeakCrypto`.
    pub warn_weak_crypto: bool,
}

/// Why the host's ssh cannot serve the sessions.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("ssh is not on the path: the sessions run the host's OpenSSH client (apt-get install openssh-client)")]
    NotOnPath,
    /// `ssh -V` did not start or did not end.
    #[error("ssh -V: {0}")]
    Version(#[source] crate::process::CmdError),
    /// `ssh -V`'s line, which is not OpenSSH's.
    #[error("ssh -V says {0:?}: the sessions need OpenSSH's client")]
    NotOpenSsh(String),
    /// `ssh -G` did not start or did not end.
    #[error("ssh -G: {0}")]
    Parse(#[source] crate::process::CmdError),
}

/// A test key that could not be read, or its private copy not written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", .path.display())]
pub struct KeyCopyError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl Client {
    /// The run's one answer from the host's ssh ([`Client::probe`], asked at the first
    /// case that needs it): every case of the run gets the same (the error shared).
    pub fn once() -> Result<Client, Arc<ProbeError>> {
        static ONCE: std::sync::OnceLock<Result<Client, Arc<ProbeError>>> = std::sync::OnceLock::new();
        ONCE.get_or_init(|| Client::probe().map_err(Arc::new)).clone()
    }

    /// Ask the host's ssh; the error says why it cannot serve the sessions.
    pub fn probe() -> Result<Client, ProbeError> {
        Client::probe_at(&crate::process::on_path("ssh").ok_or(ProbeError::NotOnPath)?)
    }

    /// Ask the ssh at `ssh`.
    fn probe_at(ssh: &Path) -> Result<Client, ProbeError> {
        let out =
            Cmd::new(ssh, "ssh -V".to_string(), PROBE_DEADLINE).arg("-V").output().map_err(ProbeError::Version)?;
        let version = String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").trim().to_string();
        if !version.starts_with("OpenSSH") {
            return Err(ProbeError::NotOpenSsh(version));
        }
        // Parsed as the sessions run ssh: with no configuration file.
        let parsed =
            Cmd::new(ssh, format!("ssh -G -F /dev/null -o {WARN_WEAK_CRYPTO} testbench.invalid"), PROBE_DEADLINE)
                .args(["-G", "-F", "/dev/null", "-o", WARN_WEAK_CRYPTO, "testbench.invalid"])
                .output()
                .map_err(ProbeError::Parse)?;
        Ok(Client { version, warn_weak_crypto: parsed.status.success() })
    }

    /// What the run's output says of `WarnWeakCrypto`, once.
    pub fn note(&self) -> String {
        if self.warn_weak_crypto {
            format!("ssh: {}; sessions pass {WARN_WEAK_CRYPTO}", self.version)
        } else {
            format!(
                "ssh: {}; sessions do not pass {WARN_WEAK_CRYPTO}: this ssh does not take it (`ssh -G` refuses \
                 it), and has no such warning to quiet",
                self.version
            )
        }
    }
}

/// Where one session's ssh connects.
#[derive(Clone)]
pub enum Route {
    /// A host port QEMU forwards to the guest's port 22.
    Port(u16),
    /// A server ssh starts itself (`ProxyCommand`, run by ssh through the shell, after
    /// its `%` tokens are expanded): the ssh-loopback kind's route.
    Proxy(String),
}

/// The host key ssh accepts.
#[derive(Clone)]
pub enum HostKeys {
    /// Only this key (a `known_hosts` file holding it for the session's host).
    Pinned { known_hosts: PathBuf },
    /// Any key, knowingly: the case pins none (`net.host_key`).
    Any,
}

/// One session's ssh command line.
pub struct Invocation<'a> {
    pub client: &'a Client,
    pub user: &'a str,
    /// The private key, a copy with mode 0600.
    pub key: &'a Path,
    pub route: Route,
    pub host_keys: HostKeys,
    pub pty: bool,
    pub ssh_args: &'a [String],
    pub command: Option<&'a str>,
}

/// The host name a session's ssh connects to: the forwarded port's address, or a name
/// for the proxied server that ssh never resolves.
pub const PROXY_HOST: &str = "testbench-guest";

impl Invocation<'_> {
    /// The arguments after `ssh`.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["-F".into(), "/dev/null".into()];
        args.push(if self.pty { "-tt" } else { "-T" }.into());
        args.extend(["-i".into(), self.key.display().to_string()]);
        // The case's own arguments before the bench's options: ssh keeps the first value
        // of an option, so a case's `-o ConnectTimeout=10` is the one ssh uses. What the
        // bench guarantees a case cannot set (crates/case's ssh_args refuses it).
        args.extend(self.ssh_args.iter().cloned());
        let mut option = |text: String| {
            args.push("-o".into());
            args.push(text);
        };
        for fixed in [
            "IdentitiesOnly=yes",
            "IdentityAgent=none",
            "BatchMode=yes",
            "PasswordAuthentication=no",
            "KbdInteractiveAuthentication=no",
            "GlobalKnownHostsFile=/dev/null",
            "UpdateHostKeys=no",
            "ServerAliveInterval=0",
        ] {
            option(fixed.into());
        }
        let banner = match self.route {
            Route::Port(_) => BANNER_TIMEOUT_SECS,
            Route::Proxy(_) => PROXIED_BANNER_TIMEOUT_SECS,
        };
        option(format!("ConnectTimeout={banner}"));
        match &self.host_keys {
            HostKeys::Pinned { known_hosts } => {
                option(format!("UserKnownHostsFile={}", known_hosts.display()));
                option("StrictHostKeyChecking=yes".into());
            }
            HostKeys::Any => {
                option("UserKnownHostsFile=/dev/null".into());
                option("StrictHostKeyChecking=no".into());
                option("LogLevel=ERROR".into());
            }
        }
        if self.client.warn_weak_crypto {
            option(WARN_WEAK_CRYPTO.into());
        }
        let host = match &self.route {
            Route::Port(port) => {
                args.extend(["-p".into(), port.to_string()]);
                "127.0.0.1".to_string()
            }
            Route::Proxy(command) => {
                args.extend(["-o".into(), format!("ProxyCommand={command}")]);
                PROXY_HOST.to_string()
            }
        };
        args.push(format!("{}@{host}", self.user));
        if let Some(command) = self.command {
            args.push(command.to_string());
        }
        args
    }
}

/// The `known_hosts` line that pins `key` (`type base64`) for a route's host.
pub fn known_hosts_line(route: &Route, key: &str) -> String {
    match route {
        Route::Port(port) => format!("[127.0.0.1]:{port} {key}\n"),
        Route::Proxy(_) => format!("{PROXY_HOST} {key}\n"),
    }
}

/// Copy a test key into `dir` with mode 0600 (git keeps no modes; ssh refuses a private
/// key others can read); the copy's path.
pub fn private_copy(key: &Path, dir: &Path, name: &str) -> Result<PathBuf, KeyCopyError> {
    use std::os::unix::fs::OpenOptionsExt;
    let bytes = std::fs::read(key).map_err(|source| KeyCopyError { path: key.to_owned(), source })?;
    let copy = dir.join(format!("{name}.key"));
    let _ = std::fs::remove_file(&copy);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&copy)
        .map_err(|source| KeyCopyError { path: copy.clone(), source })?;
    std::io::Write::write_all(&mut file, &bytes).map_err(|source| KeyCopyError { path: copy.clone(), source })?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_command_line_reads_no_configuration_and_pins_the_host_key() {
        let client = Client { version: "OpenSSH_9.2p1".into(), warn_weak_crypto: false };
        let key = Path::new("/run/s/alice.key");
        let pinned = Invocation {
            client: &client,
            user: "root",
            key,
            route: Route::Port(40022),
            host_keys: HostKeys::Pinned { known_hosts: "/run/s/known_hosts".into() },
            pty: true,
            ssh_args: &[],
            command: Some("stty size"),
        };
        insta::assert_snapshot!("pinned-pty-command", pinned.args().join(" "));
        let newer = Client { warn_weak_crypto: true, ..client.clone() };
        let proxied = Invocation {
            client: &newer,
            user: "root",
            key,
            route: Route::Proxy("qemu-system-riscv64 -nic none".into()),
            host_keys: HostKeys::Any,
            pty: false,
            ssh_args: &["-v".to_string()],
            command: None,
        };
        insta::assert_snapshot!("proxied-any-key", proxied.args().join(" "));
        // A case's option comes before the bench's default of it: ssh keeps the first.
        let shorter = Invocation { ssh_args: &["-o".to_string(), "ConnectTimeout=10".to_string()], ..pinned };
        let args = shorter.args();
        let at = |word: &str| args.iter().position(|a| a == word).unwrap();
        assert!(at("ConnectTimeout=10") < at(&format!("ConnectTimeout={BANNER_TIMEOUT_SECS}")), "{args:?}");
        assert_eq!(known_hosts_line(&Route::Port(40022), "ssh-ed25519 AAAA"), "[127.0.0.1]:40022 ssh-ed25519 AAAA\n");
    }

    /// This machine's ssh is OpenSSH 9.2, which has no WarnWeakCrypto: the probe says so.
    #[test]
    fn the_probe_asks_the_hosts_ssh_whether_it_takes_warn_weak_crypto() {
        let client = Client::probe().expect("the host's ssh (scripts/setup installs openssh-client)");
        assert!(client.version.starts_with("OpenSSH_"), "{client:?}");
        let major: u32 = client.version["OpenSSH_".len()..].split('.').next().unwrap().parse().unwrap();
        let minor: u32 = client.version["OpenSSH_".len()..]
            .split('.')
            .nth(1)
            .unwrap()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap();
        assert_eq!(client.warn_weak_crypto, (major, minor) >= (10, 1), "{client:?}");
        assert!(client.note().contains(if client.warn_weak_crypto { "pass" } else { "do not pass" }));
    }

    /// An ssh that takes `WarnWeakCrypto` (OpenSSH 10.1 and later; here a stand-in that
    /// answers as one does) is found to, and the note says the sessions pass it; one that
    /// refuses it is found not to.
    #[test]
    fn an_ssh_that_takes_warn_weak_crypto_is_found_to() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let fake = |name: &str, g_status: u32| {
            let path = tmp.path().join(name);
            let script = format!(
                "#!/bin/sh\ncase \"$1\" in -V) echo 'OpenSSH_10.2p1, OpenSSL 3.5.1' >&2 ;; -G) case \"$*\" in *WarnWeakCrypto=no-pq-kex*) exit {g_status} ;; esac ;; esac\nexit 0\n"
            );
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        };
        let newer = Client::probe_at(&fake("ssh-new", 0)).unwrap();
        assert!(newer.warn_weak_crypto && newer.version.starts_with("OpenSSH_10.2p1"), "{newer:?}");
        assert_eq!(newer.note(), "ssh: OpenSSH_10.2p1, OpenSSL 3.5.1; sessions pass WarnWeakCrypto=no-pq-kex");
        let refusing = Client::probe_at(&fake("ssh-refuses", 255)).unwrap();
        assert!(!refusing.warn_weak_crypto, "{refusing:?}");
        assert!(refusing.note().contains("do not pass WarnWeakCrypto=no-pq-kex"), "{}", refusing.note());
    }

    #[test]
    fn a_private_key_copy_is_for_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("k");
        std::fs::write(&source, "key").unwrap();
        let copy = private_copy(&source, tmp.path(), "alice").unwrap();
        assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&copy).unwrap(), b"key");
        let missing = private_copy(&tmp.path().join("absent"), tmp.path(), "bob").unwrap_err();
        assert_eq!(missing.path, tmp.path().join("absent"));
        assert_eq!(missing.source.kind(), std::io::ErrorKind::NotFound);
        assert!(missing.to_string().starts_with(&format!("{}: ", tmp.path().join("absent").display())), "{missing}");
    }
}
