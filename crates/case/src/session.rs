//! `[[session]]`, read alike by every kind that logs in (`boot`, `ssh-loopback`): its
//! fields beside its raw form ([`SESSION`], [`RawSession`]), each step's
//! ([`STEP`], [`RawStep`]), stage one ([`check`]) and stage two ([`sessions`]), which
//! checks each session and what sessions share: names, and marks and the waits on them.
//! `ssh_args` has its own module, `session/ssh_args.rs`.
//!
//! This module uses `common` and `fields` and the crate's types; the kinds use it.

mod ssh_args;

use serde::Deserialize;

use crate::common::{did_you_mean, nearest, Ctx, Refusals};
use crate::fields::{check_table, field, Field, Shape, BOOL, REGEXES, SECONDS};
use crate::{CaseError, SendPiece, SendText, Session, Step};

/// The fields of a `[[session]]` table, in the order messages name them.
pub(crate) const SESSION: &[Field] = &[
    field("user", Shape::Str, "the login name, such as \"root\""),
    field("name", Shape::Str, "the session's name, unique in the case, such as \"first\""),
    field("key", Shape::Str, "the name of a test key in tests/keys, such as \"alice\""),
    field("pty", Shape::Bool, BOOL),
    field("forbid", Shape::StrList, REGEXES),
    field("ssh_args", Shape::StrList, "a list of ssh arguments, such as [\"-o\", \"ConnectTimeout=5\"]"),
    field("command", Shape::Str, "a remote command, as a string, such as \"echo hi\""),
    field("steps", Shape::TableList, "a list of steps, such as [{ expect = '\\$ $' }, { exit = 0 }]"),
];

/// A `[[session]]` table as serde reads it: the fields of [`SESSION`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSession {
    pub user: Option<String>,
    pub name: Option<String>,
    pub key: Option<String>,
    pub pty: Option<bool>,
    pub forbid: Option<Vec<String>>,
    pub ssh_args: Option<Vec<String>>,
    pub command: Option<String>,
    pub steps: Option<Vec<RawStep>>,
}

/// The fields of a step, of which it has exactly one.
pub(crate) const STEP: &[Field] = &[
    field("expect", Shape::Str, "a regex over the session's output, as a string"),
    field("send", Shape::Str, "the text to type, as a string (add \\n for Enter; $1 to $9, $$)"),
    field("mark", Shape::Str, "a mark's name, such as \"a-ready\""),
    field("wait", Shape::Str, "the name of another session's mark"),
    field("resize", Shape::IntegerList, "[columns, rows], each 1 to 1000, such as [132, 43]"),
    field("within", Shape::Seconds, SECONDS),
    field("exit", Shape::Integer, "an exit status, a whole number from 0 to 255"),
    field("ended", Shape::Integer, "an exit status, a whole number from 0 to 255"),
];

/// A step as serde reads it: the fields of [`STEP`], in its order.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    pub expect: Option<String>,
    pub send: Option<String>,
    pub mark: Option<String>,
    pub wait: Option<String>,
    pub resize: Option<Vec<i64>>,
    pub within: Option<f64>,
    pub exit: Option<i64>,
    pub ended: Option<i64>,
}

/// The most characters of a login name, a session's name, a key's and a mark's.
const NAME_MAX: usize = 64;

/// The largest terminal side `resize` sets.
const TERMINAL_MAX: i64 = 1000;

/// Stage one for each `[[session]]` and each of its steps: their fields checked in words.
pub(crate) fn check(ctx: &Ctx, table: &toml::Table) -> Result<(), CaseError> {
    let Some(toml::Value::Array(sessions)) = table.get("session") else { return Ok(()) };
    for (index, session) in sessions.iter().enumerate() {
        let toml::Value::Table(session) = session else { continue };
        check_table(ctx, session, SESSION, &format!("session[{index}]."), "[[session]]", &|_| None)?;
        let Some(toml::Value::Array(steps)) = session.get("steps") else { continue };
        for (at, step) in steps.iter().enumerate() {
            if let toml::Value::Table(step) = step {
                check_table(ctx, step, STEP, &format!("session[{index}].steps[{at}]."), "a step", &|_| None)?;
            }
        }
    }
    Ok(())
}

/// Whether `name` is 1 to 64 of letters, digits, '.', '_', '+' and '-', and neither "."
/// nor "..": a login name, a session's name (which names its log) or a mark's.
fn is_name(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        && name != "."
        && name != ".."
}

/// A test key's name, checked: `tests/keys/<key>` and `<key>.pub` must stay in tests/keys.
pub(crate) fn key_name(ctx: &Ctx, field: &str, key: &str) -> Result<String, CaseError> {
    if !is_key_name(key) {
        return Err(ctx.err(field, format!("{key:?} is not accepted: {KEY_WORDS}")));
    }
    if let Some(stem) = key.strip_suffix(".pub") {
        return Err(ctx.err(
            field,
            format!("{key:?} is not accepted: name the key, {stem:?}, whose halves are tests/keys/{stem} and tests/keys/{stem}.pub"),
        ));
    }
    Ok(key.to_string())
}

/// A key's name: 1 to 64 of letters, digits, '.', '_' and '-', starting with a letter, a
/// digit or '_', so that `tests/keys/<key>` stays in tests/keys and is not hidden.
fn is_key_name(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !name.starts_with(['.', '-'])
}

/// What a key's name is, in words.
const KEY_WORDS: &str =
    "a test key's name in tests/keys, 1 to 64 of letters, digits, '.', '_' and '-', not starting with '.' or '-'";

const NAME_WORDS: &str = "1 to 64 of letters, digits, '.', '_', '+' and '-', neither \".\" nor \"..\"";

/// Stage two of every `[[session]]` of a case: each checked, then what they share (names,
/// marks, waits). Every refusal is kept, each session's in turn (within one session, its
/// first); the checks across sessions come only once each session is accepted, as they
/// read every one.
pub(crate) fn sessions(ctx: &Ctx, raw: Option<&[RawSession]>) -> Result<Vec<Session>, CaseError> {
    let mut refused = Refusals::new();
    let sessions: Vec<Option<Session>> =
        raw.unwrap_or(&[]).iter().enumerate().map(|(index, raw)| refused.keep(session(ctx, index, raw))).collect();
    let Some(sessions) = sessions.into_iter().collect::<Option<Vec<Session>>>() else {
        return refused.end(ctx, None);
    };
    for (index, session) in sessions.iter().enumerate() {
        if let Some(first) = sessions[..index].iter().position(|other| other.name == session.name) {
            let given = raw.unwrap_or(&[])[index].name.is_some();
            let whose = if given { String::new() } else { " (its user's, as it names none)".to_string() };
            refused.push(ctx.err(
                format!("session[{index}].name"),
                format!("{:?}{whose} is session[{first}]'s name too: a session's name is unique in the case, as it names the session's log; give one a name", session.name),
            ));
        }
    }
    // Every mark is set by one step; every wait is on a mark another session sets.
    let mut marks: Vec<(&str, usize, usize)> = Vec::new();
    for (index, session) in sessions.iter().enumerate() {
        for (at, step) in session.steps.iter().enumerate() {
            if let Step::Mark(mark) = step {
                if let Some((_, i, a)) = marks.iter().find(|(m, _, _)| m == mark) {
                    refused.push(ctx.err(
                        format!("session[{index}].steps[{at}].mark"),
                        format!("{mark:?} is set by session[{i}].steps[{a}].mark too: a mark is set by one step, so that a wait on it waits for one thing"),
                    ));
                    continue;
                }
                marks.push((mark, index, at));
            }
        }
    }
    for (index, session) in sessions.iter().enumerate() {
        for (at, step) in session.steps.iter().enumerate() {
            let Step::Wait(mark) = step else { continue };
            let field = format!("session[{index}].steps[{at}].wait");
            match marks.iter().find(|(m, _, _)| m == mark) {
                None => {
                    let near = did_you_mean(&nearest(mark, marks.iter().map(|(m, _, _)| *m)));
                    let near = if near.is_empty() { String::new() } else { format!("; {near}") };
                    refused.push(ctx.err(
                        field,
                        format!("{mark:?} is set by no session's mark: a wait on it could never end{near}"),
                    ));
                }
                Some((_, i, a)) if *i == index => refused.push(ctx.err(
                    field,
                    format!("{mark:?} is this session's own mark (session[{i}].steps[{a}].mark): a wait is for another session's mark"),
                )),
                Some(_) => {}
            }
        }
    }
    refused.end(ctx, Some(sessions))
}

/// One session's own fields and steps: every refusal of them, in the order of [`SESSION`]
/// (the TOML reader keeps no order of keys within a table), then each step's in turn.
fn session(ctx: &Ctx, index: usize, raw: &RawSession) -> Result<Session, CaseError> {
    let at = |key: &str| format!("session[{index}].{key}");
    let mut refused = Refusals::new();
    let user = refused.keep(match raw.user.as_deref() {
        None => Err(ctx.err(at("user"), "required: the login name, such as \"root\"")),
        Some(user) if !is_name(user) || user.starts_with('-') => Err(
            ctx.err(at("user"), format!("{user:?} is not accepted: a login name, {NAME_WORDS}, not starting with '-'"))
        ),
        Some(user) => Ok(user.to_string()),
    });
    let name = match raw.name.as_deref() {
        // The default is the user's name: none to give when the user is refused.
        None => user.clone(),
        Some(name) if !is_name(name) => {
            refused.push(ctx.err(at("name"), format!("{name:?} is not accepted: a session's name, {NAME_WORDS}")));
            None
        }
        Some(name) => Some(name.to_string()),
    };
    let key = match raw.key.as_deref() {
        // The default key is read from the user's name: not checked when the user is refused.
        None => user.as_deref().and_then(|user| {
            let key = user.split(['+', '.']).next().unwrap_or_default();
            refused.keep(if key.is_empty() {
                Err(ctx.err(
                    at("key"),
                    format!("required here: a key defaults to the user up to any '+' or '.', and {user:?} gives none"),
                ))
            } else {
                Ok(key.to_string())
            })
        }),
        Some(key) => refused.keep(key_name(ctx, &at("key"), key)),
    };
    let pty = raw.pty.unwrap_or(false);
    let forbid = refused.keep(ctx.patterns(&at("forbid"), raw.forbid.as_deref().unwrap_or(&[])));
    let ssh_args = raw.ssh_args.clone().unwrap_or_default();
    let ssh_args_checked = refused.keep(ssh_args::check(ctx, &at("ssh_args"), &ssh_args));
    let command = refused.keep(match raw.command.as_deref() {
        Some(command) if command.trim().is_empty() => {
            Err(ctx.err(at("command"), "empty: a remote command, or no command for a shell"))
        }
        command => Ok(command.map(str::to_string)),
    });
    let steps = match raw.steps.as_deref() {
        None => {
            refused.push(ctx.err(
                at("steps"),
                "required: the session's steps, such as [{ expect = '\\$ $' }, { send = \"exit\\n\" }, { ended = 0 }]",
            ));
            None
        }
        Some([]) => {
            refused.push(ctx.err(at("steps"), "empty: a session has at least one step"));
            None
        }
        Some(steps) => refused.keep(self::steps(ctx, index, steps, pty)),
    };
    let made = || {
        ssh_args_checked?;
        Some(Session {
            user: user?,
            name: name?,
            key: key?,
            pty,
            forbid: forbid?,
            ssh_args,
            command: command?,
            steps: steps?,
        })
    };
    refused.end(ctx, made())
}

/// A session's steps in order, each with exactly one key, and the rules of their order:
/// every step's refusal, each in turn. A refused step still counts for the rules of
/// order by its key (an exit refused for its status still ends the session); a step
/// whose key is refused (none or two) counts for none of them.
fn steps(ctx: &Ctx, index: usize, raw: &[RawStep], pty: bool) -> Result<Vec<Step>, CaseError> {
    let keys: Vec<&str> = STEP.iter().map(|f| f.name).collect();
    let mut refused = Refusals::new();
    let mut steps = Vec::new();
    // The latest expect: its field and its count of groups, or `None` when there is
    // none; `Err` when it is refused, so a send's groups cannot be checked against it.
    let mut last_expect: Result<Option<(String, usize)>, ()> = Ok(None);
    // The exit or ended step; the within that waits for its step.
    let mut end: Option<String> = None;
    let mut within: Option<String> = None;
    for (at, raw) in raw.iter().enumerate() {
        let path = format!("session[{index}].steps[{at}]");
        let given = [
            raw.expect.is_some(),
            raw.send.is_some(),
            raw.mark.is_some(),
            raw.wait.is_some(),
            raw.resize.is_some(),
            raw.within.is_some(),
            raw.exit.is_some(),
            raw.ended.is_some(),
        ];
        let named: Vec<&str> = keys.iter().zip(given).filter(|(_, g)| *g).map(|(k, _)| *k).collect();
        let kind = match named.as_slice() {
            [one] => *one,
            [] => {
                refused.push(ctx.err(path, format!("an empty step: a step has exactly one of {}", keys.join(", "))));
                // What the step is is unknown: a within before it bounds it, whatever it is.
                within = None;
                steps.push(None);
                continue;
            }
            [first, second, ..] => {
                refused.push(ctx.err(
                    path,
                    format!(
                        "both {first} and {second}: a step has exactly one of {}; write each a step of its own",
                        keys.join(", ")
                    ),
                ));
                within = None;
                steps.push(None);
                continue;
            }
        };
        let field = format!("{path}.{kind}");
        let mut order = Ok(());
        if let Some(end) = &end {
            if kind == "exit" || kind == "ended" {
                order =
                    Err(ctx.err(&field, format!("a second end: {end} ended this session already, and ssh exits once")));
            } else if kind != "mark" {
                order = Err(ctx.err(
                    &field,
                    format!("after {end} only marks may follow: ssh has exited, so there is nothing to read, type or wait for"),
                ));
            }
        }
        if let Some(bound) = within.as_ref().filter(|_| order.is_ok()) {
            if kind == "within" {
                order =
                    Err(ctx.err(&field, format!("{bound} bounds the next step, and this is another within; give one")));
            }
        }
        within = None;
        // A step out of order is refused for that, and its value checked still; it sets
        // no bound and no end of its own (a later refusal names the first end).
        let in_order = refused.keep(order).is_some();
        let status = |status: i64| match u8::try_from(status) {
            Ok(status) => Ok(status),
            Err(_) => Err(ctx.err(&field, format!("{status} is not accepted: an exit status, 0 to 255"))),
        };
        let step = match raw {
            RawStep { expect: Some(source), .. } => match ctx.regex(field.clone(), source) {
                Ok(pattern) => {
                    last_expect = Ok(Some((field.clone(), pattern.regex.captures_len() - 1)));
                    Ok(Step::Expect(pattern))
                }
                Err(error) => {
                    last_expect = Err(());
                    Err(error)
                }
            },
            RawStep { send: Some(text), .. } => {
                send(ctx, &field, text, last_expect.as_ref().map(Option::as_ref)).map(Step::Send)
            }
            RawStep { mark: Some(mark), .. } | RawStep { wait: Some(mark), .. } => {
                if !is_name(mark) {
                    Err(ctx.err(field, format!("{mark:?} is not accepted: a mark's name, {NAME_WORDS}")))
                } else if kind == "mark" {
                    Ok(Step::Mark(mark.clone()))
                } else {
                    Ok(Step::Wait(mark.clone()))
                }
            }
            RawStep { resize: Some(size), .. } => resize(ctx, &field, size, pty),
            RawStep { within: Some(secs), .. } => {
                if in_order {
                    within = Some(field.clone());
                }
                ctx.seconds(&field, *secs).map(Step::Within)
            }
            RawStep { exit: Some(code), .. } => {
                if in_order {
                    end = Some(field.clone());
                }
                status(*code).map(Step::Exit)
            }
            RawStep { ended: Some(code), .. } => {
                if in_order {
                    end = Some(field.clone());
                }
                status(*code).map(Step::Ended)
            }
            _ => unreachable!("a step has exactly one key, checked above"),
        };
        let step = refused.keep(step);
        steps.push(step.filter(|_| in_order));
    }
    if let Some(bound) = within {
        refused.push(ctx.err(bound, "the last step: a within bounds the step after it, and none follows"));
    }
    refused.end(ctx, steps.into_iter().collect())
}

/// A resize step's `[columns, rows]`: only in a session with a terminal (`pty`).
fn resize(ctx: &Ctx, field: &str, size: &[i64], pty: bool) -> Result<Step, CaseError> {
    if !pty {
        return Err(ctx.err(
            field,
            "only with pty = true: it resizes the terminal the bench opens for ssh, which a session without pty has not",
        ));
    }
    let words = "[columns, rows], each 1 to 1000, such as [132, 43]";
    let [cols, rows] = size else {
        return Err(ctx.err(field, format!("{} numbers are not accepted: {words}", size.len())));
    };
    for (side, value) in [cols, rows].into_iter().enumerate() {
        if !(1..=TERMINAL_MAX).contains(value) {
            return Err(ctx.err(format!("{field}[{side}]"), format!("{value} is not accepted: {words}")));
        }
    }
    Ok(Step::Resize { cols: *cols as u16, rows: *rows as u16 })
}

/// A send's text in pieces: `$1` to `$9` a group of the latest expect before it, which
/// must have it; `$$` a `$`; any other `$` refused.
/// `last_expect` is `Err` when that expect is refused: the groups are then not checked.
fn send(
    ctx: &Ctx,
    field: &str,
    text: &str,
    last_expect: Result<Option<&(String, usize)>, &()>,
) -> Result<SendText, CaseError> {
    if text.is_empty() {
        return Err(ctx.err(field, "empty: the text to type, as written (add \\n for Enter)"));
    }
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '$' {
            literal.push(c);
            continue;
        }
        match chars.next() {
            Some('$') => literal.push('$'),
            Some(digit @ '1'..='9') => {
                let group = digit as usize - '0' as usize;
                match last_expect {
                    // Checked against an expect that is refused: skipped.
                    Err(()) => {}
                    Ok(None) => {
                        return Err(ctx.err(
                            field,
                            format!("${group} is not accepted: it types a group of the latest expect before it, and no expect comes before it in this session"),
                        ))
                    }
                    Ok(Some((expect, groups))) if group > *groups => {
                        let has = match groups {
                            0 => "no group".to_string(),
                            1 => "1 group".to_string(),
                            n => format!("{n} groups"),
                        };
                        return Err(ctx.err(
                            field,
                            format!("${group} is not accepted: the latest expect before it, {expect}, has {has}"),
                        ));
                    }
                    Ok(Some(_)) => {}
                }
                if !literal.is_empty() {
                    pieces.push(SendPiece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(SendPiece::Group(group));
            }
            other => {
                let shown = match other {
                    Some(c) => format!("${c}"),
                    None => "$".to_string(),
                };
                return Err(ctx.err(
                    field,
                    format!("{shown:?} is not accepted: in a send, $1 to $9 type the latest expect's groups and $$ types a $"),
                ));
            }
        }
    }
    if !literal.is_empty() {
        pieces.push(SendPiece::Text(literal));
    }
    Ok(SendText { source: text.to_string(), pieces })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Case, SendPiece, Session, Step};

    const BASE: &str = "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['login']\n\
                        [guest]\nrecipe = \"guests/debian-openssh.toml\"\n[net]\nforward = [22]\n";

    /// A boot case with port 22 forwarded and `sessions` after it.
    fn text(sessions: &str) -> String {
        format!("{BASE}{sessions}")
    }

    fn parsed(sessions: &str) -> Case {
        let text = text(sessions);
        crate::parse("tests/c.toml", &text).unwrap_or_else(|error| panic!("{error}\n{text}"))
    }

    fn refused(sessions: &str) -> String {
        let text = text(sessions);
        crate::parse("tests/c.toml", &text).expect_err(&text).to_string()
    }

    /// One session of `user` with these steps, and `more` of its fields.
    fn one(more: &str, steps: &str) -> String {
        format!("[[session]]\nuser = \"root\"\nkey = \"alice\"\n{more}\nsteps = [{steps}]\n")
    }

    fn sessions(case: &Case) -> &[Session] {
        &case.as_boot().unwrap().sessions
    }

    #[test]
    fn a_session_with_every_field_and_step_parses_to_its_typed_form() {
        let case = parsed(&format!(
            "{}{}",
            one(
                "name = \"first\"\npty = true\nforbid = ['secret']\nssh_args = [\"-v\", \"-o\", \"ConnectTimeout=5\", \"-W\", \"host:9\"]\ncommand = \"sh -i\"",
                "{ expect = '(\\w+)@(\\w+)' }, { send = \"echo $2$1 $$HOME\\n\" }, { mark = \"a-ready\" }, { wait = \"b-ready\" }, \
                 { resize = [132, 43] }, { within = 2.5 }, { expect = '\\$ $' }, { exit = 0 }, { mark = \"a-gone\" }",
            ),
            "[[session]]\nuser = \"bob+x.y\"\nsteps = [{ mark = \"b-ready\" }, { wait = \"a-gone\" }, { ended = 255 }]\n",
        ));
        let [first, second] = sessions(&case) else { panic!("two sessions") };
        assert_eq!((first.user.as_str(), first.name.as_str(), first.key.as_str()), ("root", "first", "alice"));
        assert!(first.pty);
        assert_eq!(first.forbid[0].label, "session[0].forbid[0]");
        assert_eq!(first.ssh_args, ["-v", "-o", "ConnectTimeout=5", "-W", "host:9"]);
        assert_eq!(first.command.as_deref(), Some("sh -i"));
        assert_eq!(first.private_key(), std::path::Path::new("tests/keys/alice"));
        assert_eq!(first.public_key(), std::path::Path::new("tests/keys/alice.pub"));
        let Step::Expect(expect) = &first.steps[0] else { panic!("{:?}", first.steps[0]) };
        assert_eq!((expect.label.as_str(), expect.source()), ("session[0].steps[0].expect", "(\\w+)@(\\w+)"));
        let Step::Send(send) = &first.steps[1] else { panic!("{:?}", first.steps[1]) };
        assert_eq!(
            send.pieces,
            [
                SendPiece::Text("echo ".into()),
                SendPiece::Group(2),
                SendPiece::Group(1),
                SendPiece::Text(" $HOME\n".into())
            ]
        );
        assert_eq!(send.expand(&[Some("root@guest"), Some("root"), Some("guest")]), "echo guestroot $HOME\n");
        assert_eq!(send.expand(&[Some("x"), None]), "echo  $HOME\n");
        assert!(matches!(&first.steps[2], Step::Mark(m) if m == "a-ready"));
        assert!(matches!(&first.steps[3], Step::Wait(m) if m == "b-ready"));
        assert!(matches!(first.steps[4], Step::Resize { cols: 132, rows: 43 }));
        assert!(matches!(first.steps[5], Step::Within(d) if d == Duration::from_millis(2500)));
        assert!(matches!(first.steps[7], Step::Exit(0)));
        assert!(matches!(&first.steps[8], Step::Mark(m) if m == "a-gone"));
        // The name defaults to the user; the key to the user up to any '+' or '.'.
        assert_eq!((second.user.as_str(), second.name.as_str(), second.key.as_str()), ("bob+x.y", "bob+x.y", "bob"));
        assert!(!second.pty && second.forbid.is_empty() && second.ssh_args.is_empty() && second.command.is_none());
        assert!(matches!(second.steps[2], Step::Ended(255)));
        let paths: Vec<String> =
            case.paths().iter().map(|p| format!("{} {} {}", p.field, p.path.display(), p.what)).collect();
        assert_eq!(
            paths,
            [
                "guest.recipe guests/debian-openssh.toml a guest recipe",
                "session[0].key tests/keys/alice a private test key",
                "session[0].key tests/keys/alice.pub a public test key",
                "session[1].key tests/keys/bob a private test key",
                "session[1].key tests/keys/bob.pub a public test key",
            ]
        );
    }

    #[test]
    fn sessions_need_port_22_and_only_sessions_take_expect_after_and_a_host_key() {
        let top = "description = \"d\"\nkind = \"boot\"\narch = [\"rv64\"]\nexpect = ['login']\n";
        let guest = "[guest]\nrecipe = \"g.toml\"\n";
        let session = one("", "{ exit = 0 }");
        let parse = |text: String| crate::parse("tests/c.toml", &text).map_err(|e| e.to_string());
        assert_eq!(
            parse(format!("{top}{guest}{session}")).unwrap_err(),
            "tests/c.toml: net.forward: required with [[session]]: [net] forward = [22], the guest port the sessions' ssh reaches sshd through"
        );
        assert_eq!(
            parse(format!("{top}{guest}[net]\nforward = [7]\n{session}")).unwrap_err(),
            "tests/c.toml: net.forward: 22 is missing: the sessions' ssh reaches the guest's sshd through its forwarded port 22"
        );
        assert_eq!(
            parse(format!("{top}expect_after = ['x']\n{guest}[net]\nforward = [22]\n")).unwrap_err(),
            "tests/c.toml: expect_after: only with [[session]]: it is matched on the console from the sessions' start to the deadline"
        );
        assert_eq!(
            parse(format!("{top}{guest}[net]\nforward = [22]\nhost_key = \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIElG9eTMkkn9/IOklrcjD32B0PfoMuVP2GLvyfaAxtT9\"\n")).unwrap_err(),
            "tests/c.toml: net.host_key: only with [[session]]: it is the host key the sessions' ssh accepts"
        );
        assert!(parse(format!("{top}expect_after = ['(']\n{guest}[net]\nforward = [22]\n{session}"))
            .unwrap_err()
            .starts_with("tests/c.toml: expect_after[0]: not a valid regex:\n"));
        let case = parse(format!(
            "{top}expect_after = ['Accepted', 'session closed']\n{guest}[net]\nforward = [7, 22]\n{session}"
        ))
        .unwrap();
        let boot = case.as_boot().unwrap();
        let labels: Vec<(&str, &str)> = boot.expect_after.iter().map(|p| (p.label.as_str(), p.source())).collect();
        assert_eq!(labels, [("expect_after[0]", "Accepted"), ("expect_after[1]", "session closed")]);
        assert_eq!(boot.sessions.len(), 1);
        // A case without sessions has none, and no expect_after.
        let case = parse(format!("{top}{guest}")).unwrap();
        assert!(case.as_boot().unwrap().sessions.is_empty() && case.as_boot().unwrap().expect_after.is_empty());
    }

    #[test]
    fn the_user_name_and_key_are_names_and_each_name_is_the_cases_once() {
        let with = |fields: &str| refused(&format!("[[session]]\n{fields}\nsteps = [{{ exit = 0 }}]\n"));
        assert_eq!(with(""), "tests/c.toml: session[0].user: required: the login name, such as \"root\"");
        for bad in ["", "-root", "a b", "x/y", ".", "..", &"a".repeat(65), "é"] {
            assert_eq!(
                with(&format!("user = {bad:?}")),
                format!("tests/c.toml: session[0].user: {bad:?} is not accepted: a login name, 1 to 64 of letters, digits, '.', '_', '+' and '-', neither \".\" nor \"..\", not starting with '-'")
            );
        }
        for bad in ["", "a/b", "..", &"n".repeat(65)] {
            assert_eq!(
                with(&format!("user = \"root\"\nname = {bad:?}")),
                format!("tests/c.toml: session[0].name: {bad:?} is not accepted: a session's name, 1 to 64 of letters, digits, '.', '_', '+' and '-', neither \".\" nor \"..\"")
            );
        }
        for bad in ["", ".hidden", "-k", "../alice", "a/b", "a+b", &"k".repeat(65)] {
            assert_eq!(
                with(&format!("user = \"root\"\nkey = {bad:?}")),
                format!("tests/c.toml: session[0].key: {bad:?} is not accepted: a test key's name in tests/keys, 1 to 64 of letters, digits, '.', '_' and '-', not starting with '.' or '-'")
            );
        }
        assert_eq!(
            with("user = \"root\"\nkey = \"alice.pub\""),
            "tests/c.toml: session[0].key: \"alice.pub\" is not accepted: name the key, \"alice\", whose halves are tests/keys/alice and tests/keys/alice.pub"
        );
        assert_eq!(
            with("user = \"+root\""),
            "tests/c.toml: session[0].key: required here: a key defaults to the user up to any '+' or '.', and \"+root\" gives none"
        );
        let case = parsed(&format!("[[session]]\nuser = \"{}\"\nsteps = [{{ exit = 0 }}]\n", "u".repeat(64)));
        assert_eq!(sessions(&case)[0].key, "u".repeat(64));
        assert_eq!(
            refused(&format!("{}{}", one("", "{ exit = 0 }"), one("", "{ exit = 0 }"))),
            "tests/c.toml: session[1].name: \"root\" (its user's, as it names none) is session[0]'s name too: a session's name is unique in the case, as it names the session's log; give one a name"
        );
        assert_eq!(
            refused(&format!("{}{}", one("name = \"a\"", "{ exit = 0 }"), one("name = \"a\"", "{ exit = 0 }"))),
            "tests/c.toml: session[1].name: \"a\" is session[0]'s name too: a session's name is unique in the case, as it names the session's log; give one a name"
        );
        parsed(&format!("{}{}", one("", "{ exit = 0 }"), one("name = \"second\"", "{ exit = 0 }")));
        assert!(refused(&one("forbid = ['(']", "{ exit = 0 }"))
            .starts_with("tests/c.toml: session[0].forbid[0]: not a valid regex:\n"));
        assert_eq!(
            refused(&one("command = \" \"", "{ exit = 0 }")),
            "tests/c.toml: session[0].command: empty: a remote command, or no command for a shell"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_in_a_session_or_a_step_is_refused_in_words() {
        let date = "1979-05-27";
        for field in super::SESSION {
            let error = refused(&format!("[[session]]\n{} = {date}\n", field.name));
            assert_eq!(
                error,
                format!("tests/c.toml: session[0].{}: the date {date} is not accepted: {}", field.name, field.accepted)
            );
        }
        for field in super::STEP {
            let error = refused(&one("", &format!("{{ {} = {date} }}", field.name)));
            assert_eq!(
                error,
                format!(
                    "tests/c.toml: session[0].steps[0].{}: the date {date} is not accepted: {}",
                    field.name, field.accepted
                )
            );
        }
    }

    #[test]
    fn a_step_has_exactly_one_key() {
        assert_eq!(
            refused("[[session]]\nuser = \"root\"\n"),
            "tests/c.toml: session[0].steps: required: the session's steps, such as [{ expect = '\\$ $' }, { send = \"exit\\n\" }, { ended = 0 }]"
        );
        assert_eq!(refused(&one("", "")), "tests/c.toml: session[0].steps: empty: a session has at least one step");
        assert_eq!(
            refused(&one("", "{ mark = \"m\" }, {}")),
            "tests/c.toml: session[0].steps[1]: an empty step: a step has exactly one of expect, send, mark, wait, resize, within, exit, ended"
        );
        assert_eq!(
            refused(&one("", "{ expect = 'x', send = \"y\" }")),
            "tests/c.toml: session[0].steps[0]: both expect and send: a step has exactly one of expect, send, mark, wait, resize, within, exit, ended; write each a step of its own"
        );
        assert_eq!(
            refused(&one("", "{ exit = 0 }, { expct = 'x' }")),
            "tests/c.toml: session[0].steps[1].expct: not a field of a step; did you mean `expect`? Accepted: expect, send, mark, wait, resize, within, exit, ended"
        );
        assert_eq!(
            refused(&one("", "{ within = \"5\" }")),
            "tests/c.toml: session[0].steps[0].within: \"5\" is not accepted: a number of seconds, such as 30 or 2.5"
        );
        assert_eq!(
            refused(&one("", "\"exit\"")),
            "tests/c.toml: session[0].steps[0]: \"exit\" is not accepted: session[0].steps is a list of steps, such as [{ expect = '\\$ $' }, { exit = 0 }]"
        );
        assert_eq!(
            refused("[session]\nuser = \"root\"\n"),
            "tests/c.toml: session: a table is not accepted: [[session]] tables, each with user and steps"
        );
        assert_eq!(
            refused("[[session]]\nuser = \"root\"\nsteps = []\npyt = true\n"),
            "tests/c.toml: session[0].pyt: not a field of [[session]]; did you mean `pty`? Accepted: user, name, key, pty, forbid, ssh_args, command, steps"
        );
    }

    #[test]
    fn each_step_holds_what_it_takes() {
        assert!(refused(&one("", "{ expect = '[' }"))
            .starts_with("tests/c.toml: session[0].steps[0].expect: not a valid regex:\n"));
        assert_eq!(
            refused(&one("", "{ send = \"\" }")),
            "tests/c.toml: session[0].steps[0].send: empty: the text to type, as written (add \\n for Enter)"
        );
        for bad in ["", "a b", "..", "x/y"] {
            for kind in ["mark", "wait"] {
                assert_eq!(
                    refused(&one("", &format!("{{ {kind} = {bad:?} }}"))),
                    format!("tests/c.toml: session[0].steps[0].{kind}: {bad:?} is not accepted: a mark's name, 1 to 64 of letters, digits, '.', '_', '+' and '-', neither \".\" nor \"..\"")
                );
            }
        }
        assert_eq!(
            refused(&one("", "{ resize = [80, 24] }")),
            "tests/c.toml: session[0].steps[0].resize: only with pty = true: it resizes the terminal the bench opens for ssh, which a session without pty has not"
        );
        for (bad, count) in [("[80]", 1), ("[80, 24, 1]", 3), ("[]", 0)] {
            assert_eq!(
                refused(&one("pty = true", &format!("{{ resize = {bad} }}"))),
                format!("tests/c.toml: session[0].steps[0].resize: {count} numbers are not accepted: [columns, rows], each 1 to 1000, such as [132, 43]")
            );
        }
        for (bad, side, value) in [("[0, 24]", 0, 0), ("[80, 1001]", 1, 1001), ("[-1, 24]", 0, -1)] {
            assert_eq!(
                refused(&one("pty = true", &format!("{{ resize = {bad} }}"))),
                format!("tests/c.toml: session[0].steps[0].resize[{side}]: {value} is not accepted: [columns, rows], each 1 to 1000, such as [132, 43]")
            );
        }
        parsed(&one("pty = true", "{ resize = [1, 1000] }"));
        for bad in ["0", "0.0005", "86401", "-1"] {
            assert_eq!(
                refused(&one("", &format!("{{ within = {bad} }}, {{ exit = 0 }}"))),
                format!("tests/c.toml: session[0].steps[0].within: {bad} is not accepted: a number of seconds from 0.001 (1 ms) to 86400 (a day), such as 30 or 2.5")
            );
        }
        for kind in ["exit", "ended"] {
            for bad in [-1, 256] {
                assert_eq!(
                    refused(&one("", &format!("{{ {kind} = {bad} }}"))),
                    format!(
                        "tests/c.toml: session[0].steps[0].{kind}: {bad} is not accepted: an exit status, 0 to 255"
                    )
                );
            }
        }
    }

    #[test]
    fn a_send_types_only_groups_the_latest_expect_has() {
        assert_eq!(
            refused(&one("", "{ send = \"$1\" }")),
            "tests/c.toml: session[0].steps[0].send: $1 is not accepted: it types a group of the latest expect before it, and no expect comes before it in this session"
        );
        assert_eq!(
            refused(&one("", "{ expect = '(a)(b)' }, { expect = 'c' }, { send = \"$1\" }")),
            "tests/c.toml: session[0].steps[2].send: $1 is not accepted: the latest expect before it, session[0].steps[1].expect, has no group"
        );
        assert_eq!(
            refused(&one("", "{ expect = '(a)' }, { mark = \"m\" }, { send = \"$1 $2\" }")),
            "tests/c.toml: session[0].steps[2].send: $2 is not accepted: the latest expect before it, session[0].steps[0].expect, has 1 group"
        );
        assert_eq!(
            refused(&one("", "{ expect = '(a)(?P<b>b)(?:c)' }, { send = \"$3\" }")),
            "tests/c.toml: session[0].steps[1].send: $3 is not accepted: the latest expect before it, session[0].steps[0].expect, has 2 groups"
        );
        for (bad, shown) in [("$0", "$0"), ("$HOME", "$H"), ("a $", "$"), ("${1}", "${")] {
            assert_eq!(
                refused(&one("", &format!("{{ expect = '(a)' }}, {{ send = {bad:?} }}"))),
                format!("tests/c.toml: session[0].steps[1].send: {shown:?} is not accepted: in a send, $1 to $9 type the latest expect's groups and $$ types a $")
            );
        }
        // A session's groups are its own: another session's expect gives this one none.
        assert_eq!(
            refused(&format!("{}{}", one("name = \"a\"", "{ expect = '(a)' }"), one("name = \"b\"", "{ send = \"$1\" }"))),
            "tests/c.toml: session[1].steps[0].send: $1 is not accepted: it types a group of the latest expect before it, and no expect comes before it in this session"
        );
        let case = parsed(&one("", "{ expect = '(a)(b)(c)(d)(e)(f)(g)(h)(i)' }, { send = \"$9$10$$1\" }"));
        let Step::Send(send) = &sessions(&case)[0].steps[1] else { panic!() };
        assert_eq!(send.pieces, [SendPiece::Group(9), SendPiece::Group(1), SendPiece::Text("0$1".into())]);
    }

    #[test]
    fn steps_come_in_an_order_that_can_end() {
        assert_eq!(
            refused(&one("", "{ exit = 0 }, { send = \"x\" }")),
            "tests/c.toml: session[0].steps[1].send: after session[0].steps[0].exit only marks may follow: ssh has exited, so there is nothing to read, type or wait for"
        );
        assert_eq!(
            refused(&one("", "{ ended = 0 }, { mark = \"m\" }, { within = 1 }")),
            "tests/c.toml: session[0].steps[2].within: after session[0].steps[0].ended only marks may follow: ssh has exited, so there is nothing to read, type or wait for"
        );
        assert_eq!(
            refused(&one("", "{ exit = 0 }, { ended = 0 }")),
            "tests/c.toml: session[0].steps[1].ended: a second end: session[0].steps[0].exit ended this session already, and ssh exits once"
        );
        assert_eq!(
            refused(&one("", "{ expect = 'x' }, { within = 5 }")),
            "tests/c.toml: session[0].steps[1].within: the last step: a within bounds the step after it, and none follows"
        );
        assert_eq!(
            refused(&one("", "{ within = 5 }, { within = 6 }, { exit = 0 }")),
            "tests/c.toml: session[0].steps[1].within: session[0].steps[0].within bounds the next step, and this is another within; give one"
        );
        // A session may end with no exit or ended step, and with marks after its end.
        parsed(&one("", "{ within = 5 }, { expect = 'x' }"));
        parsed(&one("", "{ exit = 0 }, { mark = \"a\" }, { mark = \"b\" }"));
    }

    #[test]
    fn every_wait_is_on_a_mark_another_session_sets_once() {
        assert_eq!(
            refused(&format!("{}{}", one("name = \"a\"", "{ wait = \"b-redy\" }"), one("name = \"b\"", "{ mark = \"b-ready\" }"))),
            "tests/c.toml: session[0].steps[0].wait: \"b-redy\" is set by no session's mark: a wait on it could never end; did you mean `b-ready`?"
        );
        assert_eq!(
            refused(&one("", "{ wait = \"never\" }")),
            "tests/c.toml: session[0].steps[0].wait: \"never\" is set by no session's mark: a wait on it could never end"
        );
        assert_eq!(
            refused(&one("", "{ mark = \"m\" }, { wait = \"m\" }")),
            "tests/c.toml: session[0].steps[1].wait: \"m\" is this session's own mark (session[0].steps[0].mark): a wait is for another session's mark"
        );
        assert_eq!(
            refused(&format!("{}{}", one("name = \"a\"", "{ mark = \"m\" }"), one("name = \"b\"", "{ exit = 0 }, { mark = \"m\" }"))),
            "tests/c.toml: session[1].steps[1].mark: \"m\" is set by session[0].steps[0].mark too: a mark is set by one step, so that a wait on it waits for one thing"
        );
        // Two sessions each waiting for the other's later mark never end, and that is the
        // run's to show (a self-check fails on the mark it never got), not the parser's.
        parsed(&format!(
            "{}{}",
            one("name = \"a\"", "{ wait = \"b\" }, { mark = \"a\" }"),
            one("name = \"b\"", "{ wait = \"a\" }, { mark = \"b\" }")
        ));
    }

    #[test]
    fn ssh_args_keep_the_benchs_guarantees() {
        let args = |list: &str| refused(&one(&format!("ssh_args = {list}"), "{ exit = 0 }"));
        let host_key = "the bench decides which host key ssh accepts (net.host_key pins one)";
        let key = "the session logs in with its test key (key) alone";
        let destination = "the bench gives ssh the user (user), the host and the port";
        let host_user = "nothing of the host user's reaches the guest, which is the thing under test";
        let foreground = "ssh stays in the foreground, under the bench's process wrapper, one connection per session";
        let input = "ssh's input is the bench's (send), from pipes or the terminal pty asks for";
        let host_command = "ssh runs no command on the host";
        let terminal = "pty says whether ssh gets a terminal";
        let log = "ssh's diagnostics stay in the session's output, which forbid judges and the log keeps";
        let no_login = "ssh would exit without logging in";
        let config = "ssh reads no configuration but the bench's options and these";
        for (letter, why) in [
            ("F", config),
            ("i", key),
            ("I", key),
            ("l", destination),
            ("p", destination),
            ("J", destination),
            ("A", host_user),
            ("X", host_user),
            ("K", host_user),
            ("Y", host_user),
            ("f", foreground),
            ("M", foreground),
            ("S", foreground),
            ("O", foreground),
            ("n", input),
            ("t", terminal),
            ("T", terminal),
            ("E", log),
            ("y", log),
            ("G", no_login),
            ("V", no_login),
            ("Q", no_login),
        ] {
            assert_eq!(
                args(&format!("[\"-4\", \"-{letter}\", \"x\"]")),
                format!("tests/c.toml: session[0].ssh_args[1]: -{letter} is not accepted: {why}")
            );
            // In a cluster of flags too.
            assert_eq!(
                args(&format!("[\"-v{letter}\", \"x\"]")),
                format!("tests/c.toml: session[0].ssh_args[0]: -{letter} is not accepted: {why}")
            );
        }
        for (option, why) in [
            ("UserKnownHostsFile=/dev/null", host_key),
            ("GlobalKnownHostsFile /x", host_key),
            ("stricthostkeychecking=no", host_key),
            ("HostKeyAlias=x", host_key),
            ("VerifyHostKeyDNS=yes", host_key),
            ("UpdateHostKeys=yes", host_key),
            ("KnownHostsCommand=/bin/true", host_command),
            ("IdentityFile=~/.ssh/id_ed25519", key),
            ("IdentitiesOnly=no", key),
            ("IdentityAgent=SSH_AUTH_SOCK", key),
            ("CertificateFile=x", key),
            ("PKCS11Provider=x", key),
            ("SecurityKeyProvider=x", key),
            ("AddKeysToAgent=yes", key),
            ("Include=~/.ssh/config", config),
            ("HostName=example.org", destination),
            ("Port=2222", destination),
            ("User=alice", destination),
            ("ProxyJump=jump", destination),
            ("ProxyCommand=nc %h %p", host_command),
            ("LocalCommand=touch x", host_command),
            ("PermitLocalCommand=yes", host_command),
            ("ForwardAgent=yes", host_user),
            ("ForwardX11=yes", host_user),
            ("ForwardX11Trusted=yes", host_user),
            ("GSSAPIDelegateCredentials=yes", host_user),
            ("GSSAPIAuthentication=yes", key),
            ("ForkAfterAuthentication=yes", foreground),
            ("ControlMaster=auto", foreground),
            ("ControlPath=/tmp/c", foreground),
            ("ControlPersist=yes", foreground),
            ("BatchMode=no", input),
            ("StdinNull=yes", input),
            ("RequestTTY=force", terminal),
            ("RemoteCommand=id", "command gives the remote command"),
        ] {
            let name = option.split(['=', ' ']).next().unwrap();
            assert_eq!(
                args(&format!("[\"-o\", {option:?}]")),
                format!("tests/c.toml: session[0].ssh_args[1]: -o {name} is not accepted: {why}")
            );
            assert_eq!(
                args(&format!("[\"-C\", \"-o{option}\"]")),
                format!("tests/c.toml: session[0].ssh_args[1]: -o {name} is not accepted: {why}")
            );
        }
        assert_eq!(
            args("[\"-o\", \" \\\"ProxyCommand\\\" nc\"]"),
            format!("tests/c.toml: session[0].ssh_args[1]: -o ProxyCommand is not accepted: {host_command}")
        );
        assert_eq!(
            args("[\"-o\", \"= ProxyCommand=nc\"]"),
            format!("tests/c.toml: session[0].ssh_args[1]: -o ProxyCommand is not accepted: {host_command}")
        );
        assert_eq!(
            args("[\"-v\", \"guest\"]"),
            "tests/c.toml: session[0].ssh_args[1]: \"guest\" is not accepted: ssh would take it for the destination; an option starts with '-', its value after it"
        );
        for bad in ["", "-"] {
            assert_eq!(
                args(&format!("[{bad:?}]")),
                format!("tests/c.toml: session[0].ssh_args[0]: {bad:?} is not accepted: ssh would take it for the destination; an option starts with '-', its value after it")
            );
        }
        assert_eq!(
            args("[\"--\"]"),
            "tests/c.toml: session[0].ssh_args[0]: \"--\" is not accepted: it ends ssh's options, and the bench's arguments follow"
        );
        assert_eq!(
            args("[\"-P\", \"x\"]"),
            "tests/c.toml: session[0].ssh_args[0]: -P is not accepted: not an option of ssh (OpenSSH 9.2)"
        );
        assert_eq!(
            args("[\"-v\", \"-c\"]"),
            "tests/c.toml: session[0].ssh_args[1]: -c is not accepted last: its value must follow it in ssh_args, or ssh would take the bench's next argument for it"
        );
        // What is left is the case's to try: values that look like options stay values.
        let case = parsed(&one(
            "ssh_args = [\"-vvv\", \"-4\", \"-c\", \"aes128-ctr\", \"-oConnectTimeout=5\", \"-W\", \"-i\", \"-L\", \"1:h:2\", \"-Nq\", \"-s\", \"-e\", \"none\", \"-o\", \"PubkeyAuthentication=no\", \"-m\", \"hmac-sha2-256\", \"-b\", \"127.0.0.1\"]",
            "{ exit = 255 }",
        ));
        assert_eq!(sessions(&case)[0].ssh_args.len(), 19);
    }
}
