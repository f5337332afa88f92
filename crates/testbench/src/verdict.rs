//! A case's verdict, typed from the judge to every sink ([`Verdict`]), and what kind of
//! failure a case had ([`FailKind`]): the console judge's own kinds, a part's (`device`), the bench's checks across boots (`repeat`,
//! `replay`), what stopped a case before it ran (`build`, `host-lack`), and each host
//! kind's. A case's `must_fail = { kind = "..." }` names one (the case crate's
//! `FAILURE_KINDS` is the same list in words, checked below).

use serde::{Deserialize, Serialize};
use testbench_judge::FailureKind;

/// The kind of a failure, as reports and `must_fail` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailKind {
    Forbidden,
    TimedOut,
    ProgramFailed,
    NoOutput,
    GuestEnded,
    NoPowerOff,
    Reset,
    PowerOffUnproven,
    WrongStatus,
    Killed,
    ExitStatus,
    Reporter,
    Distinct,
    /// A part's check, from outside the guest (a disk, the network, a session, the RAM,
    /// the post-check).
    Device,
    /// A crash report on the console ended the boot (boot/crash_watch.rs).
    Crash,
    /// Two boots of a case that must repeat (or differ) did not.
    Repeat,
    /// A replay differs from its recording.
    Replay,
    /// What a case boots could not be built.
    Build,
    /// The host lacks what the case needs (QEMU, a firmware, KVM, ssh).
    HostLack,
    HostTests,
    Scripts,
    Gate,
    SshLoopback,
    /// A `--slurm` task ended without reporting the boot (its job died, or its save was lost).
    Unreported,
}

impl FailKind {
    /// Every kind, in the order the case crate's `FAILURE_KINDS` lists them.
    pub const ALL: [FailKind; 24] = [
        FailKind::Forbidden,
        FailKind::TimedOut,
        FailKind::ProgramFailed,
        FailKind::NoOutput,
        FailKind::GuestEnded,
        FailKind::NoPowerOff,
        FailKind::Reset,
        FailKind::PowerOffUnproven,
        FailKind::WrongStatus,
        FailKind::Killed,
        FailKind::ExitStatus,
        FailKind::Reporter,
        FailKind::Distinct,
        FailKind::Device,
        FailKind::Crash,
        FailKind::Repeat,
        FailKind::Replay,
        FailKind::Build,
        FailKind::HostLack,
        FailKind::HostTests,
        FailKind::Scripts,
        FailKind::Gate,
        FailKind::SshLoopback,
        FailKind::Unreported,
    ];

    /// The kind's name, as a case's `must_fail` and the JSON events give it.
    pub fn name(self) -> &'static str {
        testbench_case::FAILURE_KINDS[FailKind::ALL.iter().position(|k| *k == self).expect("every kind is listed")]
    }

    /// The judge's kind of failure.
    pub fn of_judge(kind: FailureKind) -> FailKind {
        match kind {
            FailureKind::Forbidden => FailKind::Forbidden,
            FailureKind::TimedOut => FailKind::TimedOut,
            FailureKind::ProgramFailed => FailKind::ProgramFailed,
            FailureKind::NoOutput => FailKind::NoOutput,
            FailureKind::GuestEnded => FailKind::GuestEnded,
            FailureKind::NoPowerOff => FailKind::NoPowerOff,
            FailureKind::Reset => FailKind::Reset,
            FailureKind::PowerOffUnproven => FailKind::PowerOffUnproven,
            FailureKind::WrongStatus => FailKind::WrongStatus,
            FailureKind::Killed => FailKind::Killed,
            FailureKind::ExitStatus => FailKind::ExitStatus,
            FailureKind::Reporter => FailKind::Reporter,
            FailureKind::Distinct => FailKind::Distinct,
            FailureKind::Device => FailKind::Device,
            FailureKind::Crash => FailKind::Crash,
        }
    }

    /// A host kind's own failure (its tests, its scripts, its gate's findings...).
    pub fn of_host(kind: &testbench_case::Kind) -> FailKind {
        match kind {
            testbench_case::Kind::HostTests(_) => FailKind::HostTests,
            testbench_case::Kind::Build(_) => FailKind::Build,
            testbench_case::Kind::Scripts(_) => FailKind::Scripts,
            testbench_case::Kind::Gate(_) => FailKind::Gate,
            testbench_case::Kind::SshLoopback(_) => FailKind::SshLoopback,
            testbench_case::Kind::Boot(_) => FailKind::Device,
        }
    }
}

/// A console line a failure points at: its number in `console.log` (from 1) and its
/// shown form, quoted (`testbench_judge::Place`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    pub line: u64,
    pub quote: String,
}

/// The crash a failing boot's console shows (`testbench_triage`'s first report): its
/// kind, its stable title, the guilty frame and where the report starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crash {
    /// The crash's kind in a word (`panic`, `oops`, `warning`, `kasan`...).
    pub kind: String,
    pub title: String,
    /// The guilty frame: its function, and the source place where the kernel printed one.
    pub frame: Option<String>,
    /// The report's first line in `console.log` (from 1).
    pub line: u64,
    /// How many lines the report spans (0 from a save made before it was kept).
    #[serde(default)]
    pub lines: u64,
    /// Why the report cannot be trusted to name its bug (cut, interleaved), when it cannot.
    pub corrupted: Option<String>,
    /// The report's frames symbolized against the kernel's ELF (crate::crash::MAX_TRACE
    /// frames at most; an inlined call a frame of its own, before its caller); empty when
    /// no ELF is known or the report printed no frame.
    #[serde(default)]
    pub trace: Vec<SymFrame>,
    /// Why the frames are not symbolized, when an ELF was named and could not be read
    /// (missing, not an ELF, no DWARF where DWARF was asked for).
    #[serde(default)]
    pub trace_error: Option<String>,
}

/// One frame of a crash's symbolized backtrace, as `addr2line -fi` would print it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymFrame {
    /// Which frame of the report it is (from 0): an inlined call shares its caller's.
    pub frame: u32,
    /// The ELF's address the frame was looked up at (its printed address less the
    /// kernel's offset, or its function's address plus its offset), in hex (`0x…`: a
    /// kernel address does not fit a JSON reader's double); None for a frame not in the
    /// ELF (a module's) or whose function the ELF does not have.
    #[serde(with = "hex_address")]
    pub address: Option<u64>,
    /// The function (the printed one where the ELF does not know the frame).
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Inlined into the frame that follows it.
    pub inlined: bool,
}

impl SymFrame {
    /// `#N 0xADDR function at file:line`, with ` (inlined)` for an inlined call.
    pub fn shown(&self) -> String {
        let mut text = format!("#{}", self.frame);
        if let Some(address) = self.address {
            text.push_str(&format!(" {address:#x}"));
        }
        text.push(' ');
        text.push_str(self.function.as_deref().unwrap_or("??"));
        if let Some(file) = &self.file {
            text.push_str(&format!(" at {file}"));
            if let Some(line) = self.line {
                text.push_str(&format!(":{line}"));
            }
        }
        if self.inlined {
            text.push_str(" (inlined)");
        }
        text
    }
}

/// An address as `"0x…"` text in JSON.
mod hex_address {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(address: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match address {
            Some(address) => s.serialize_str(&format!("{address:#x}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|text| {
            let digits = text.strip_prefix("0x").unwrap_or(&text);
            u64::from_str_radix(digits, 16).map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}

impl Crash {
    /// The crash in a line: its title, the guilty frame, where the report starts, and
    /// why it cannot be trusted, when it cannot.
    pub fn shown(&self) -> String {
        let mut text = self.title.clone();
        if let Some(frame) = self.frame.as_ref().filter(|frame| !self.title.contains(frame.as_str())) {
            text.push_str(&format!(" (guilty frame {frame})"));
        }
        text.push_str(&format!(", console.log line {}", self.line));
        if let Some(why) = &self.corrupted {
            text.push_str(&format!("; corrupted: {why}"));
        }
        text
    }
}

/// A failure: its kind, its reason in words, the console line that made it, when one
/// did, and the crash the console shows, when it shows one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    pub kind: FailKind,
    pub reason: String,
    #[serde(default)]
    pub place: Option<Place>,
    #[serde(default)]
    pub crash: Option<Box<Crash>>,
}

impl Failed {
    pub fn new(kind: FailKind, reason: impl Into<String>) -> Failed {
        Failed { kind, reason: reason.into(), place: None, crash: None }
    }

    /// The same failure, its reason said of one boot of two (`second boot: ...`).
    pub fn prefixed(self, prefix: &str) -> Failed {
        Failed { reason: format!("{prefix}{}", self.reason), ..self }
    }

    /// The same failure with another reason (cut for a report, or with what a
    /// `must_fail` wanted).
    pub fn with_reason(self, reason: String) -> Failed {
        Failed { reason, ..self }
    }
}

impl From<testbench_judge::Failure> for Failed {
    fn from(failure: testbench_judge::Failure) -> Failed {
        Failed {
            kind: FailKind::of_judge(failure.kind),
            reason: failure.message,
            place: failure.place.map(|p| Place { line: p.line, quote: p.quote }),
            crash: None,
        }
    }
}

/// What a case's run is worth, as every sink is told it: the one type from the case's
/// `must_fail` and `--allow-skip` to the terminal, the JSON events, JUnit, `report.html`
/// and a `--slurm` task's save.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Pass,
    /// A `must_fail` case that failed as it must: its failure (the reason cut to the
    /// line its pattern took, the evidence a person reads).
    ExpectedFailure(Failed),
    Fail(Failed),
    /// A `must_fail` case that passed: what its `must_fail` wanted, in words.
    Unfailed(String),
    /// The host lacks what it needs, and `--allow-skip` says so: why.
    Skip(String),
    /// The bench itself could not run it: why. Not a failure of the case; the run exits 3.
    Trouble(String),
}

impl Verdict {
    /// Whether it counts as the case's failure (a failure, or a self-check that passed).
    pub fn is_failure(&self) -> bool {
        matches!(self, Verdict::Fail(_) | Verdict::Unfailed(_))
    }

    /// The reason a person reads, for any verdict but a pass.
    pub fn reason(&self) -> Option<std::borrow::Cow<'_, str>> {
        use std::borrow::Cow;
        match self {
            Verdict::Pass => None,
            Verdict::ExpectedFailure(failed) | Verdict::Fail(failed) => Some(Cow::Borrowed(&failed.reason)),
            Verdict::Unfailed(wanted) => Some(Cow::Owned(format!("passed, but must_fail wanted {wanted}"))),
            Verdict::Skip(why) | Verdict::Trouble(why) => Some(Cow::Borrowed(why)),
        }
    }

    /// The failure, for a failure or a failure a self-check wanted.
    pub fn failed(&self) -> Option<&Failed> {
        match self {
            Verdict::ExpectedFailure(failed) | Verdict::Fail(failed) => Some(failed),
            _ => None,
        }
    }

    /// The same verdict with its reason passed through `edit` (a report cuts it).
    pub fn map_reason(self, edit: impl Fn(&str) -> String) -> Verdict {
        match self {
            Verdict::Pass => Verdict::Pass,
            Verdict::ExpectedFailure(f) => Verdict::ExpectedFailure(Failed { reason: edit(&f.reason), ..f }),
            Verdict::Fail(f) => Verdict::Fail(Failed { reason: edit(&f.reason), ..f }),
            Verdict::Unfailed(wanted) => Verdict::Unfailed(edit(&wanted)),
            Verdict::Skip(why) => Verdict::Skip(edit(&why)),
            Verdict::Trouble(why) => Verdict::Trouble(edit(&why)),
        }
    }
}

/// What a failure says of its cause (docs/history.md), from the evidence the run has:
/// a second boot of it (runner/classify.rs), or what stopped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Under icount with a pinned seed, booted again it failed with the same console bytes.
    Deterministic,
    /// Booted again (alone, with the same seed) it passed.
    HostDependent,
    /// The bench's own trouble or a host's lack, not the kernel's.
    BenchOrHost,
}

impl Class {
    /// The class's name, as every report and the history give it.
    pub fn name(self) -> &'static str {
        match self {
            Class::Deterministic => "deterministic",
            Class::HostDependent => "host-dependent",
            Class::BenchOrHost => "bench-or-host",
        }
    }

    /// The class a verdict has on its own: a host's lack, a task that never reported,
    /// the bench's trouble.
    pub fn of_verdict(verdict: &Verdict) -> Option<Class> {
        match verdict {
            Verdict::Trouble(_) => Some(Class::BenchOrHost),
            Verdict::Fail(failed) if matches!(failed.kind, FailKind::HostLack | FailKind::Unreported) => {
                Some(Class::BenchOrHost)
            }
            _ => None,
        }
    }
}

/// The failures of a run that name the same crash: one bug, however many boots hit it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CrashGroup {
    pub title: String,
    /// The crash's kind in a word (`panic`, `hung-task`...).
    pub kind: String,
    /// Each boot that hit it, by its label, in the order they finished.
    pub boots: Vec<String>,
    /// Their seeds, where they had one (a sweep's), in the order they finished.
    pub seeds: Vec<u64>,
    /// The line that replays the first of them.
    pub first_replay: String,
}

/// How many of a group's seeds (or labels) a line names before `…`.
const GROUP_NAMES_SHOWN: usize = 8;

impl CrashGroup {
    /// The group in a line: `TITLE — 9 boots (seeds 3, 7, 12, …), first replay: …`.
    pub fn shown(&self) -> String {
        let count = self.boots.len();
        let names: Vec<String> = match self.seeds.len() == count {
            true => self.seeds.iter().map(u64::to_string).collect(),
            false => self.boots.clone(),
        };
        let mut list = names.iter().take(GROUP_NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if names.len() > GROUP_NAMES_SHOWN {
            list.push_str(", …");
        }
        let what = if self.seeds.len() == count {
            if count == 1 {
                "seed "
            } else {
                "seeds "
            }
        } else {
            ""
        };
        format!(
            "{} — {count} boot{} ({what}{list}), first replay: {}",
            self.title,
            if count == 1 { "" } else { "s" },
            self.first_replay
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's kinds and the words a case file takes are one list: each kind's serde
    /// name is its name in the case crate, in the same order.
    #[test]
    fn the_kinds_are_the_case_crates_words() {
        let names: Vec<String> =
            FailKind::ALL.iter().map(|k| serde_json::to_value(k).unwrap().as_str().unwrap().to_string()).collect();
        assert_eq!(names, testbench_case::FAILURE_KINDS);
        assert_eq!(FailKind::TimedOut.name(), "timed-out");
        assert_eq!(FailKind::SshLoopback.name(), "ssh-loopback");
    }

    /// A symbolized trace's addresses are `0x…` text in JSON and read back the same (a
    /// `--slurm` task's save); a crash saved before traces existed reads with none.
    #[test]
    fn a_trace_reads_back_as_it_was_saved_and_an_older_crash_reads_without_one() {
        let frame = |address, inlined| SymFrame {
            frame: 3,
            address,
            function: Some("vfs_write".into()),
            file: Some("fs/read_write.c".into()),
            line: Some(590),
            inlined,
        };
        let crash = Crash {
            kind: "oops".into(),
            title: "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash".into(),
            frame: Some("sysrq_handle_crash".into()),
            line: 3,
            lines: 9,
            corrupted: None,
            trace: vec![frame(Some(0xffff_ffff_8123_4567), true), frame(None, false)],
            trace_error: None,
        };
        let json = serde_json::to_value(&crash).unwrap();
        assert_eq!(json["trace"][0]["address"], "0xffffffff81234567");
        assert_eq!(json["trace"][1]["address"], serde_json::Value::Null);
        assert_eq!(serde_json::from_value::<Crash>(json).unwrap(), crash);
        assert_eq!(crash.trace[0].shown(), "#3 0xffffffff81234567 vfs_write at fs/read_write.c:590 (inlined)");
        assert_eq!(crash.trace[1].shown(), "#3 vfs_write at fs/read_write.c:590");
        let older = r#"{"kind":"panic","title":"kernel panic: x","frame":null,"line":1,"corrupted":null}"#;
        let older: Crash = serde_json::from_str(older).unwrap();
        assert!(older.trace.is_empty() && older.trace_error.is_none());
    }
}
