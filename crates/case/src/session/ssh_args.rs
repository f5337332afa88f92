//! A session's `ssh_args`: more arguments for ssh, before the host, read as OpenSSH
//! 9.2's ssh reads its options. None may undo what the bench guarantees of a session:
//! only the pinned host key is accepted, the session logs in with its test key alone and
//! nothing of the host user's (configuration, agent, display) takes part, ssh goes to the
//! bench's host and port as the case's user, stays in the foreground on the bench's
//! pipes and terminal, runs no command on the host, and its diagnostics stay in the
//! session's output. Whatever else ssh takes is the case's to try.

use crate::common::Ctx;
use crate::CaseError;

/// ssh's options that take a value (`ssh` with no arguments lists them).
const WITH_VALUE: &str = "BbcDEeFIiJLlmOopQRSWw";

/// ssh's options that take none.
const FLAGS: &str = "46AaCfGgKkMNnqsTtVvXxYy";

const HOST_KEY: &str = "the bench decides which host key ssh accepts (net.host_key pins one)";
const KEY: &str = "the session logs in with its test key (key) alone";
const CONFIG: &str = "ssh reads no configuration but the bench's options and these";
const DESTINATION: &str = "the bench gives ssh the user (user), the host and the port";
const HOST_USER: &str = "nothing of the host user's reaches the guest, which is the thing under test";
const FOREGROUND: &str = "ssh stays in the foreground, under the bench's process wrapper, one connection per session";
const INPUT: &str = "ssh's input is the bench's (send), from pipes or the terminal pty asks for";
const HOST_COMMAND: &str = "ssh runs no command on the host";
const TERMINAL: &str = "pty says whether ssh gets a terminal";
const REMOTE_COMMAND: &str = "command gives the remote command";
const LOG: &str = "ssh's diagnostics stay in the session's output, which forbid judges and the log keeps";
const NO_LOGIN: &str = "ssh would exit without logging in";

/// Why an option letter is refused, if it is.
fn refused_letter(letter: char) -> Option<&'static str> {
    Some(match letter {
        'F' => CONFIG,
        'i' | 'I' => KEY,
        'l' | 'p' | 'J' => DESTINATION,
        'A' | 'X' | 'Y' | 'K' => HOST_USER,
        'f' | 'M' | 'S' | 'O' => FOREGROUND,
        'n' => INPUT,
        't' | 'T' => TERMINAL,
        'E' | 'y' => LOG,
        'G' | 'V' | 'Q' => NO_LOGIN,
        _ => return None,
    })
}

/// Why an `-o` option is refused, if it is; `name` in lower case (ssh's are
/// case-insensitive).
fn refused_option(name: &str) -> Option<&'static str> {
    Some(match name {
        "userknownhostsfile"
        | "globalknownhostsfile"
        | "stricthostkeychecking"
        | "hostkeyalias"
        | "verifyhostkeydns"
        | "updatehostkeys" => HOST_KEY,
        "knownhostscommand" => HOST_COMMAND,
        "identityfile"
        | "identitiesonly"
        | "identityagent"
        | "certificatefile"
        | "pkcs11provider"
        | "securitykeyprovider"
        | "addkeystoagent" => KEY,
        "include" => CONFIG,
        "hostname" | "port" | "user" | "proxyjump" => DESTINATION,
        "proxycommand" | "localcommand" | "permitlocalcommand" => HOST_COMMAND,
        "forwardagent" | "forwardx11" | "forwardx11trusted" | "gssapidelegatecredentials" => HOST_USER,
        // Kerberos logs in as the host user's ticket says, not with the test key.
        gssapi if gssapi.starts_with("gssapi") => KEY,
        "forkafterauthentication" | "controlmaster" | "controlpath" | "controlpersist" => FOREGROUND,
        "batchmode" | "stdinnull" => INPUT,
        "requesttty" => TERMINAL,
        "remotecommand" => REMOTE_COMMAND,
        _ => return None,
    })
}

/// Refuse an argument that ssh would read as the destination, an option ssh has not, an
/// option whose value is missing (ssh would take the bench's next argument for it), and
/// the options that undo a guarantee, each with the guarantee.
pub(super) fn check(ctx: &Ctx, field: &str, args: &[String]) -> Result<(), CaseError> {
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        let at = format!("{field}[{index}]");
        if arg == "--" {
            return Err(ctx.err(at, "\"--\" is not accepted: it ends ssh's options, and the bench's arguments follow"));
        }
        let Some(letters) = arg.strip_prefix('-').filter(|rest| !rest.is_empty()) else {
            return Err(ctx.err(
                at,
                format!("{arg:?} is not accepted: ssh would take it for the destination; an option starts with '-', its value after it"),
            ));
        };
        for (offset, letter) in letters.char_indices() {
            if FLAGS.contains(letter) {
                if let Some(why) = refused_letter(letter) {
                    return Err(ctx.err(at, format!("-{letter} is not accepted: {why}")));
                }
                continue;
            }
            if !WITH_VALUE.contains(letter) {
                return Err(ctx.err(at, format!("-{letter} is not accepted: not an option of ssh (OpenSSH 9.2)")));
            }
            if let Some(why) = refused_letter(letter) {
                return Err(ctx.err(at, format!("-{letter} is not accepted: {why}")));
            }
            let attached = &letters[offset + letter.len_utf8()..];
            let (value, value_at) = if !attached.is_empty() {
                (attached, at)
            } else if let Some(next) = args.get(index + 1) {
                index += 1;
                (next.as_str(), format!("{field}[{index}]"))
            } else {
                return Err(ctx.err(
                    at,
                    format!("-{letter} is not accepted last: its value must follow it in ssh_args, or ssh would take the bench's next argument for it"),
                ));
            };
            if letter == 'o' {
                let name = value
                    .trim_start_matches(|c: char| c.is_whitespace() || c == '=')
                    .split(|c: char| c == '=' || c.is_whitespace())
                    .next()
                    .unwrap_or_default()
                    .trim_matches('"');
                if let Some(why) = refused_option(&name.to_ascii_lowercase()) {
                    return Err(ctx.err(value_at, format!("-o {name} is not accepted: {why}")));
                }
            }
            break;
        }
        index += 1;
    }
    Ok(())
}
