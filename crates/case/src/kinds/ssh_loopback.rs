//! Kind "ssh-loopback": sessions against a server that each session's ssh starts itself,
//! as its ProxyCommand, so nothing listens on a port. Its raw form and its list of fields
//! sit side by side; a test holds them together (`kinds::tests`). Its `[[session]]`
//! tables are `session.rs`'s, as in a boot case.

use serde::Deserialize;

use crate::common::{arch_list, Ctx, Refusals};
use crate::fields::{field, Field, Shape, ARCH, REGEXES, SESSIONS, TIMEOUT_SECS};
use crate::session::{self, RawSession};
use crate::{Arch, CaseError, Server, SshLoopbackCase};

/// The fields of kind "ssh-loopback" besides the common ones, in the order messages name them.
pub(crate) const FIELDS: &[Field] = &[
    field("server", Shape::Str, "the server the sessions log in to: \"openssh\""),
    ARCH,
    TIMEOUT_SECS,
    field("authorized_keys", Shape::StrList, "a list of test keys' names in tests/keys, such as [\"alice\"]"),
    field("server_log", Shape::StrList, REGEXES),
    field("server_log_forbid", Shape::StrList, REGEXES),
    field("session", Shape::TableList, SESSIONS),
];

/// Kind "ssh-loopback" as serde reads it: the fields of [`FIELDS`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSshLoopback {
    pub server: Option<String>,
    pub arch: Option<Vec<String>>,
    pub timeout_secs: Option<f64>,
    pub authorized_keys: Option<Vec<String>>,
    pub server_log: Option<Vec<String>>,
    pub server_log_forbid: Option<Vec<String>>,
    pub session: Option<Vec<RawSession>>,
}

/// The deadline unless the case sets one: each session boots a Debian guest of its own.
const TIMEOUT_SECS_DEFAULT: f64 = 120.0;

/// Stage one's end: each `[[session]]` checked in words, then the whole read by serde.
pub(crate) fn read(ctx: &Ctx, table: toml::Table) -> Result<RawSshLoopback, CaseError> {
    session::check(ctx, &table)?;
    ctx.read(table)
}

/// Stage two: every field's meaning checked, the typed case made.
/// Every refusal kept, in the file's order ([`Refusals`]).
pub(crate) fn validate(ctx: &Ctx, raw: RawSshLoopback) -> Result<SshLoopbackCase, CaseError> {
    let mut refused = Refusals::new();
    let server = refused.keep(match raw.server.as_deref() {
        None => Err(ctx.err("server", "required: \"openssh\", the only server this bench runs")),
        Some("openssh") => Ok(Server::OpenSsh),
        Some(other) => {
            Err(ctx.err("server", format!("{other:?} is not accepted: \"openssh\", the only server this bench runs")))
        }
    });
    let arch = match &raw.arch {
        None => Some(vec![Arch::Rv64]),
        Some(names) => refused.keep(arch_list(ctx, Some(names))),
    };
    if let Some(index) = arch.as_ref().and_then(|arch| arch.iter().position(|arch| *arch != Arch::Rv64)) {
        let name = arch.as_ref().map_or("", |arch| arch[index].name());
        refused.push(ctx.err(
            format!("arch[{index}]"),
            format!("{name:?} is not accepted: only \"rv64\": the OpenSSH server is Debian's riscv64 guest"),
        ));
    }
    let timeout = refused.keep(ctx.seconds("timeout_secs", raw.timeout_secs.unwrap_or(TIMEOUT_SECS_DEFAULT)));
    let authorized_keys =
        match raw.authorized_keys.as_deref() {
            None => {
                refused.push(ctx.err(
                    "authorized_keys",
                    "required: the test keys the server authorizes for root, such as [\"alice\"]",
                ));
                &[][..]
            }
            Some([]) => {
                refused.push(ctx.err("authorized_keys", "empty: name at least one test key, or no login can succeed"));
                &[][..]
            }
            Some(keys) => keys,
        };
    for (index, key) in authorized_keys.iter().enumerate() {
        let field = format!("authorized_keys[{index}]");
        if refused.keep(session::key_name(ctx, &field, key)).is_some() && authorized_keys[..index].contains(key) {
            refused.push(ctx.err(field, format!("{key:?} is named twice")));
        }
    }
    let server_log = refused.keep(ctx.patterns("server_log", raw.server_log.as_deref().unwrap_or(&[])));
    let server_log_forbid =
        refused.keep(ctx.patterns("server_log_forbid", raw.server_log_forbid.as_deref().unwrap_or(&[])));
    let sessions = refused.keep(session::sessions(ctx, raw.session.as_deref()));
    if sessions.as_ref().is_some_and(Vec::is_empty) {
        refused
            .push(ctx.err("session", "required: at least one [[session]]: the sessions are what a loopback case runs"));
    }
    for (index, one) in sessions.iter().flatten().enumerate() {
        if one.user != "root" {
            refused.push(ctx.err(
                format!("session[{index}].user"),
                format!(
                    "{:?} is not accepted: \"root\": against server = \"openssh\" the guest's sshd logs in only root",
                    one.user
                ),
            ));
        }
    }
    let made = || {
        Some(SshLoopbackCase {
            server: server?,
            arch: arch?,
            timeout: timeout?,
            authorized_keys: authorized_keys.to_vec(),
            server_log: server_log?,
            server_log_forbid: server_log_forbid?,
            sessions: sessions?,
        })
    };
    refused.end(ctx, made())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Arch, Case, Kind, Server, SshLoopbackCase, Step};

    const SESSION: &str = "[[session]]\nuser = \"root\"\nkey = \"alice\"\nsteps = [{ exit = 0 }]\n";

    fn text(top: &str, sessions: &str) -> String {
        format!("description = \"d\"\nkind = \"ssh-loopback\"\n{top}\n{sessions}")
    }

    fn parsed(top: &str, sessions: &str) -> Case {
        let text = text(top, sessions);
        crate::parse("tests/c.toml", &text).unwrap_or_else(|error| panic!("{error}\n{text}"))
    }

    fn refused(top: &str, sessions: &str) -> String {
        let text = text(top, sessions);
        crate::parse("tests/c.toml", &text).expect_err(&text).to_string()
    }

    const TOP: &str = "server = \"openssh\"\nauthorized_keys = [\"alice\"]";

    fn loopback_of(case: &Case) -> &SshLoopbackCase {
        match &case.kind {
            Kind::SshLoopback(loopback) => loopback,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_loopback_case_with_every_field_parses_to_its_typed_form() {
        let case = parsed(
            "server = \"openssh\"\narch = [\"rv64\"]\ntimeout_secs = 90\nauthorized_keys = [\"alice\", \"bob\"]\n\
             server_log = ['Accepted publickey for root', 'Failed publickey']\nserver_log_forbid = ['PAM']\nmust_fail = 'x'\nwhole_run = false",
            "[[session]]\nuser = \"root\"\nkey = \"alice\"\nname = \"a\"\npty = true\nsteps = [{ expect = '# $' }, { mark = \"in\" }, { exit = 0 }]\n\
             [[session]]\nuser = \"root\"\nkey = \"mallory\"\nname = \"m\"\nsteps = [{ wait = \"in\" }, { ended = 255 }]\n",
        );
        assert_eq!(case.kind.name(), "ssh-loopback");
        assert!(!case.whole_run && case.must_fail.is_some());
        assert_eq!(case.arch(), [Arch::Rv64]);
        let loopback = loopback_of(&case);
        assert_eq!(loopback.server, Server::OpenSsh);
        assert_eq!(loopback.server.name(), "openssh");
        assert_eq!(loopback.timeout, Duration::from_secs(90));
        assert_eq!(loopback.authorized_keys, ["alice", "bob"]);
        let labels: Vec<&str> =
            loopback.server_log.iter().chain(&loopback.server_log_forbid).map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["server_log[0]", "server_log[1]", "server_log_forbid[0]"]);
        assert_eq!(loopback.sessions.len(), 2);
        assert!(matches!(loopback.sessions[1].steps[0], Step::Wait(ref m) if m == "in"));
        let paths: Vec<String> =
            case.paths().iter().map(|p| format!("{} {} {}", p.field, p.path.display(), p.what)).collect();
        assert_eq!(
            paths,
            [
                "authorized_keys[0] tests/keys/alice.pub a public test key",
                "authorized_keys[1] tests/keys/bob.pub a public test key",
                "session[0].key tests/keys/alice a private test key",
                "session[0].key tests/keys/alice.pub a public test key",
                "session[1].key tests/keys/mallory a private test key",
                "session[1].key tests/keys/mallory.pub a public test key",
            ]
        );
        // The defaults: rv64, 120 s, no server log patterns.
        let case = parsed(TOP, SESSION);
        let loopback = loopback_of(&case);
        assert_eq!((loopback.arch.as_slice(), loopback.timeout), ([Arch::Rv64].as_slice(), Duration::from_secs(120)));
        assert!(loopback.server_log.is_empty() && loopback.server_log_forbid.is_empty());
    }

    #[test]
    fn the_server_is_openssh_on_rv64() {
        assert_eq!(
            refused("authorized_keys = [\"alice\"]", SESSION),
            "tests/c.toml: server: required: \"openssh\", the only server this bench runs"
        );
        assert_eq!(
            refused("server = \"redoubt-sshd-host\"\nauthorized_keys = [\"alice\"]", SESSION),
            "tests/c.toml: server: \"redoubt-sshd-host\" is not accepted: \"openssh\", the only server this bench runs"
        );
        assert_eq!(
            refused(&format!("{TOP}\narch = [\"rv64\", \"rv32\"]"), SESSION),
            "tests/c.toml: arch[1]: \"rv32\" is not accepted: only \"rv64\": the OpenSSH server is Debian's riscv64 guest"
        );
        assert_eq!(
            refused(&format!("{TOP}\narch = []"), SESSION),
            "tests/c.toml: arch: empty: name at least one of \"rv64\", \"rv32\", \"x86_64\", \"aarch64\" (leave a width out rather than booting it zero times)"
        );
        assert_eq!(
            refused(&format!("{TOP}\ntimeout_secs = 0"), SESSION),
            "tests/c.toml: timeout_secs: 0 is not accepted: a number of seconds from 0.001 (1 ms) to 86400 (a day), such as 30 or 2.5"
        );
    }

    #[test]
    fn the_server_authorizes_named_test_keys_for_root_alone() {
        assert_eq!(
            refused("server = \"openssh\"", SESSION),
            "tests/c.toml: authorized_keys: required: the test keys the server authorizes for root, such as [\"alice\"]"
        );
        assert_eq!(
            refused("server = \"openssh\"\nauthorized_keys = []", SESSION),
            "tests/c.toml: authorized_keys: empty: name at least one test key, or no login can succeed"
        );
        assert_eq!(
            refused("server = \"openssh\"\nauthorized_keys = [\"alice\", \"alice\"]", SESSION),
            "tests/c.toml: authorized_keys[1]: \"alice\" is named twice"
        );
        assert_eq!(
            refused("server = \"openssh\"\nauthorized_keys = [\"../alice\"]", SESSION),
            "tests/c.toml: authorized_keys[0]: \"../alice\" is not accepted: a test key's name in tests/keys, 1 to 64 of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
        );
        assert_eq!(
            refused("server = \"openssh\"\nauthorized_keys = [\"bob.pub\"]", SESSION),
            "tests/c.toml: authorized_keys[0]: \"bob.pub\" is not accepted: name the key, \"bob\", whose halves are tests/keys/bob and tests/keys/bob.pub"
        );
        assert_eq!(
            refused(TOP, ""),
            "tests/c.toml: session: required: at least one [[session]]: the sessions are what a loopback case runs"
        );
        assert_eq!(
            refused(TOP, &format!("{SESSION}[[session]]\nuser = \"alice\"\nsteps = [{{ exit = 0 }}]\n")),
            "tests/c.toml: session[1].user: \"alice\" is not accepted: \"root\": against server = \"openssh\" the guest's sshd logs in only root"
        );
        // The sessions are read as in a boot case.
        assert_eq!(
            refused(TOP, "[[session]]\nuser = \"root\"\nsteps = [{ wait = \"never\" }]\n"),
            "tests/c.toml: session[0].steps[0].wait: \"never\" is set by no session's mark: a wait on it could never end"
        );
        assert!(refused(&format!("{TOP}\nserver_log = ['(']"), SESSION)
            .starts_with("tests/c.toml: server_log[0]: not a valid regex:\n"));
        assert!(refused(&format!("{TOP}\nserver_log_forbid = ['(']"), SESSION)
            .starts_with("tests/c.toml: server_log_forbid[0]: not a valid regex:\n"));
    }

    #[test]
    fn a_field_of_a_boot_case_is_refused_in_words() {
        assert_eq!(
            refused(&format!("{TOP}\nexpect = ['x']"), SESSION),
            "tests/c.toml: expect: not a field of kind \"ssh-loopback\" (it is a field of kind \"boot\"). Accepted: description, kind, whole_run, must_fail, server, arch, timeout_secs, authorized_keys, server_log, server_log_forbid, session"
        );
        assert_eq!(
            refused(&format!("{TOP}\nserver_logs = ['x']"), SESSION),
            "tests/c.toml: server_logs: not a field of kind \"ssh-loopback\"; did you mean `server_log`? Accepted: description, kind, whole_run, must_fail, server, arch, timeout_secs, authorized_keys, server_log, server_log_forbid, session"
        );
        assert_eq!(
            refused(TOP, "[[session]]\nuser = \"root\"\nsteps = [{ exit = 0 }]\nforbidd = ['x']\n"),
            "tests/c.toml: session[0].forbidd: not a field of [[session]]; did you mean `forbid`? Accepted: user, name, key, pty, forbid, ssh_args, command, steps"
        );
    }
}
