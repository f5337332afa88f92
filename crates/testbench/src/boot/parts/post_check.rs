//! `post_check`: a command of the workspace that judges a boot's console log once the
//! boot has passed (docs/oracles.md). It runs from the workspace root through the one
//! process wrapper, as `command... args... <boot>/console.log`, under its own deadline;
//! its exit status is the verdict, and its output (stdout, then stderr) is kept in the
//! boot's `post-check.log`, whose last lines a failure quotes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use testbench_case::PostCheck;

use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec};
use crate::process::Cmd;

/// A case's `post_check`, planned once.
pub struct PostCheckSpec {
    check: PostCheck,
}

impl PostCheckSpec {
    pub fn new(check: PostCheck) -> PostCheckSpec {
        PostCheckSpec { check }
    }
}

impl PartSpec for PostCheckSpec {
    fn name(&self) -> String {
        "post_check".into()
    }

    fn attach(&self, _place: &BootPlace) -> Result<Attached, AttachError> {
        let part = Judged { check: self.check.clone() };
        Ok(Attached { parts: vec![Box::new(part)], ..Attached::default() })
    }
}

/// The post-check of one boot: it runs once QEMU has ended and every other part passed.
struct Judged {
    check: PostCheck,
}

impl Part for Judged {
    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        if !ended.passed {
            return Ok(Evidence::default());
        }
        Ok(Evidence::note(run(&self.check, ended.root, ended.dir).map_err(|e| Broken(e.to_string()))?))
    }
}

/// The file of the command's output, in the boot's directory.
pub const POST_CHECK_LOG: &str = "post-check.log";
/// How many of the output's last lines a failure quotes.
const QUOTED_LINES: usize = 8;

/// Why the post-check fails the boot: the console log unread, an oracle's verdict, a
/// program that did not run, or one that ran and failed.
#[derive(Debug, thiserror::Error)]
pub enum PostCheckError {
    #[error("post_check: {}: {source}", .path.display())]
    Console { path: PathBuf, source: std::io::Error },
    /// A built-in oracle's failing verdict, in its words.
    #[error("{0}")]
    Oracle(String),
    /// The program did not start or ran past its timeout (`shown`: its command line).
    #[error("post_check: {shown}: {source}")]
    Run { shown: String, source: crate::process::CmdError },
    /// The program ran and failed (`how`: its exit), with the last lines it wrote (quoted).
    #[error("post_check: {shown} {how}: {tail} (its output: {POST_CHECK_LOG})")]
    Failed { shown: String, how: String, tail: String },
}

/// Run the check on `dir`'s console log: the note for a pass, or the failure.
pub fn run(check: &PostCheck, root: &Path, dir: &Path) -> Result<String, PostCheckError> {
    let console = dir.join("console.log");
    if let Some(oracle) = &check.oracle {
        // Built in: the same code `cargo testbench --oracle` runs by hand on a kept log.
        let text =
            std::fs::read(&console).map_err(|source| PostCheckError::Console { path: console.clone(), source })?;
        let verdict = crate::oracles::run(oracle, &String::from_utf8_lossy(&text), &check.args);
        let log = dir.join(POST_CHECK_LOG);
        let by_hand = format!(
            "cargo testbench {} {oracle} {} {}",
            crate::oracles::ORACLE_FLAG,
            console.display(),
            check.args.join(" ")
        );
        let _ = std::fs::write(&log, format!("$ {}\n{}\n", by_hand.trim_end(), verdict.as_ref().unwrap_or_else(|e| e)));
        return verdict.map(|summary| format!("post_check: {summary}")).map_err(PostCheckError::Oracle);
    }
    let program =
        if check.command[0].contains('/') { root.join(&check.command[0]) } else { check.command[0].clone().into() };
    let cmd = Cmd::new(&program, "the post-check", check.timeout)
        .cwd(root)
        .args(&check.command[1..])
        .args(&check.args)
        .arg(&console);
    let shown = cmd.display();
    let started = Instant::now();
    let out = match cmd.output() {
        Ok(out) => out,
        Err(source) => return Err(PostCheckError::Run { shown, source }),
    };
    let log = dir.join(POST_CHECK_LOG);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::write(&log, format!("$ {shown}\n{text}"));
    let took = started.elapsed().as_secs_f64();
    if out.status.success() {
        let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no output)");
        return Ok(format!("post_check: exit 0 in {took:.2}s: {}", testbench_judge::quote(last)));
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(QUOTED_LINES)..].join(" | ");
    Err(PostCheckError::Failed {
        shown,
        how: match out.status.code() {
            Some(code) => format!("exited {code}"),
            None => format!("ended by {}", out.status),
        },
        tail: if tail.is_empty() { "no output".into() } else { testbench_judge::quote(&tail).into_owned() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &[&str]) -> PostCheck {
        PostCheck {
            command: command.iter().map(|w| w.to_string()).collect(),
            oracle: None,
            args: Vec::new(),
            timeout: std::time::Duration::from_secs(10),
        }
    }

    #[test]
    fn a_post_check_that_fails_or_cannot_run_says_which() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("console.log"), "boot\n").unwrap();
        let failed = run(&check(&["sh", "-c", "echo no; exit 3", "sh"]), tmp.path(), tmp.path()).unwrap_err();
        assert!(matches!(&failed, PostCheckError::Failed { how, .. } if how == "exited 3"), "{failed:?}");
        assert!(failed.to_string().ends_with("exited 3: no (its output: post-check.log)"), "{failed}");
        let absent = run(&check(&["./no-such-check"]), tmp.path(), tmp.path()).unwrap_err();
        assert!(matches!(absent, PostCheckError::Run { .. }), "{absent:?}");
        assert!(absent.to_string().starts_with("post_check: "), "{absent}");
        let passed = run(&check(&["true"]), tmp.path(), tmp.path()).unwrap();
        assert!(passed.starts_with("post_check: exit 0 in "), "{passed}");
    }
}
