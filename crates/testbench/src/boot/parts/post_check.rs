//! `post_check`: a command of the workspace that judges a boot's console log once the
//! boot has passed (docs/oracles.md). It runs from the workspace root through the one
//! process wrapper, as `command... args... <boot>/console.log`, under its own deadline;
//! its exit status is the verdict, and its output (stdout, then stderr) is kept in the
//! boot's `post-check.log`, whose last lines a failure quotes.

use std::path::Path;
use std::time::Instant;

use testbench_case::PostCheck;

use crate::boot::{AttachError, Attached, BootPlace, Broken, Ended, Evidence, Part, PartSpec};
use crate::command::Cmd;

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
        Ok(Evidence::note(run(&self.check, ended.root, ended.dir)?))
    }
}

/// The file of the command's output, in the boot's directory.
pub const POST_CHECK_LOG: &str = "post-check.log";
/// How many of the output's last lines a failure quotes.
const QUOTED_LINES: usize = 8;

/// Run the check on `dir`'s console log: the note for a pass, or the failure.
pub fn run(check: &PostCheck, root: &Path, dir: &Path) -> Result<String, String> {
    let console = dir.join("console.log");
    if let Some(oracle) = &check.oracle {
        // Built in: the same code `cargo testbench --oracle` runs by hand on a kept log.
        let text = std::fs::read(&console).map_err(|e| format!("post_check: {}: {e}", console.display()))?;
        let verdict = crate::oracles::run(oracle, &String::from_utf8_lossy(&text), &check.args);
        let log = dir.join(POST_CHECK_LOG);
        let by_hand = format!(
            "cargo testbench {} {oracle} {} {}",
            crate::oracles::ORACLE_FLAG,
            console.display(),
            check.args.join(" ")
        );
        let _ = std::fs::write(&log, format!("$ {}\n{}\n", by_hand.trim_end(), verdict.as_ref().unwrap_or_else(|e| e)));
        return verdict.map(|summary| format!("post_check: {summary}"));
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
    let out = cmd.output().map_err(|e| format!("post_check: {shown}: {e}"))?;
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
    Err(format!(
        "post_check: {shown} {}: {} (its output: {POST_CHECK_LOG})",
        match out.status.code() {
            Some(code) => format!("exited {code}"),
            None => format!("ended by {}", out.status),
        },
        if tail.is_empty() { "no output".into() } else { testbench_judge::quote(&tail).into_owned() }
    ))
}
