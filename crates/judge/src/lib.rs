//! # testbench-judge: judges a kernel's serial console
//!
//! The bench boots a kernel under QEMU and hands everything the guest prints on its
//! serial console to a [`Judge`], with the time each piece arrived. The judge says
//! what to type into the guest ([`Config::inputs`]) and, once it is known, the
//! [`Verdict`]: did the boot print what it must, in order, never print what it must
//! not, and end the way it must.
//!
//! **This crate does no I/O and never reads a clock.** Bytes and times come in,
//! verdicts go out: every time is passed in by the caller as the time since the boot
//! started. That keeps it testable on the host, replayable from a saved log, and
//! fuzzable. Every function is total: no input makes it panic.
//!
//! ## Lines
//!
//! The console is split into lines on '\n'. Each line is seen in two forms:
//! - its *raw text* ([`raw_text`]): the bytes as they came, lossy UTF-8, one trailing
//!   '\r' removed;
//! - its *shown* form ([`shown`]): what a terminal shows. CSI sequences
//!   (`ESC [ params final`) are removed whole, any other ESC with the character after
//!   it, every other control character but TAB (and DEL) is removed — a '\r' too, it
//!   does not take the line back to its start — and trailing spaces and tabs are
//!   trimmed.
//!
//! A partial line (no '\n' yet) is kept across [`Judge::feed`] calls. It is checked
//! against the pending input's pattern (so a prompt without a newline gets its
//! answer) in its shown form with its trailing spaces and tabs kept
//! ([`shown_partial`]: a prompt is a line still being written, `'^\$ $'` matches
//! `$ `), and judged as a whole line, trimmed, by [`Judge::end`]. Expects and
//! forbids see only whole lines, trimmed.
//!
//! ## Long lines
//!
//! The judge holds at most [`LINE_LIMIT`] bytes of one line. A longer line is judged in
//! pieces of `LINE_LIMIT` bytes, each starting `LINE_LIMIT - LINE_OVERLAP` bytes after
//! the one before (so consecutive pieces share [`LINE_OVERLAP`] bytes; where a line is
//! cut depends on the line only, not on how it was fed). Its first piece, the *head*, is
//! judged by every rule when the line grows past the limit, as a line that goes on (an
//! end anchor, `$` or `\z`, never matches at its cut); every later piece only by the
//! forbid rules, on its raw text and shown form. Every run
//! of at most `LINE_OVERLAP` bytes of a line lies whole in one piece, so a forbid match
//! that long is always seen. [`Judge::with_line_limit`] sets other sizes (the tests use
//! small ones).
//!
//! ## Rules
//!
//! 1. A line whose raw text or shown form matches a `forbid` or `always_forbidden`
//!    pattern fails the boot at once, whatever else is going on (before, between and
//!    after the expects, during the settle time, while waiting for power-off). A word
//!    split by an escape (`PA\x1b[0mNIC`) is caught through the shown form, a pattern
//!    for a raw escape (`\x1b`) through the raw text.
//! 2. The `expect` patterns must match shown lines, in order; one line satisfies at
//!    most one expect. A line that is forbidden satisfies none.
//! 3. Input *i* fires once, at the first shown line (whole, or the current partial
//!    line) matching its `after` that is seen after input *i−1* fired; one line fires
//!    at most one input.
//! 4. The first shown line matching `^(\[pid N\] )?\[[^\]\s]+\] FAIL` (a test program's
//!    failure report, bare or behind the log server's prefix) is remembered: if the boot then times out or ends while an expect is
//!    pending, that line is given first as the cause.
//! 5. With [`Config::server_done`] (a boot of the reference guest's log server), a line
//!    whose raw text or shown form starts `[server] done:` is a verdict line: there must be
//!    exactly one, and it must read `[server] done: <reporter's place>`; any other, and any
//!    at all in a case with no reporter, fails the boot at once. [`Config::distinct`] and
//!    [`Config::capture`] keep what lines captured. These rules keep state across lines,
//!    so a judge that has any of them runs the per-line path (its consoles are small).
//! 6. After the last expect (time 0 when there are none): with `poweroff`, the judge
//!    waits for QEMU to exit and checks how the guest ended; without it, it passes once
//!    `settle` has passed since the line that matched the last expect
//!    ([`Judge::wake_at`] tells when to [`Judge::poll`]). Bytes fed at the very time of
//!    the last expect are judged even with no settle time.
//!
//! ## Marks
//!
//! [`Judge::marks`] names the lines the rules took, by number (from 1, a line per
//! '\n'): each expect's and `expect_after`'s line, each input's and trigger's, the
//! forbidden line, the first `[name] FAIL` line, with the pattern's label and text. They
//! are at most one per pattern (and one forbidden, one FAIL line), so they cost nothing
//! that grows with the console; the fast path counts a block's lines only to place one.
//! The bench keeps them beside the console log for the run's HTML report.
//!
//! ## Messages
//!
//! The bench's self-checks match these with anchored regexes; keep them exactly.
//! `{secs:.2}` is seconds with two decimals; `{d}` is a duration in seconds trimmed
//! of trailing zeros (`3s`, `2.5s`); `{status}` is `status N` or `signal N`; `{regex}`
//! is the pattern's source text; `{stderr}` is QEMU's stderr tail joined with `" | "`
//! (`(none)` when empty, in the NoOutput message).
//!
//! | kind | message |
//! | --- | --- |
//! | Forbidden | `forbidden line at {secs:.2}s matched {label} '{regex}': {shown line}`, the line quoted (below); for a piece of an over-long line after its head, followed by ` (a line over {limit} bytes, judged in pieces; this piece starts at its byte {n})` |
//! | TimedOut | `timed out after {d} waiting for {label} '{regex}'` |
//! | NoOutput | `qemu exited with {status} before the guest printed a line; stderr: {stderr}` |
//! | GuestEnded | `guest ended ({how}) while waiting for {label} '{regex}'`, see below |
//! | ProgramFailed | `{first FAIL line}; then ` + the TimedOut or GuestEnded message |
//! | NoPowerOff | `timed out after {d} waiting for power-off` |
//! | Reset | `guest reset instead of powering off`; with `reboots` ([`Judge::guest_reset`]): `guest reset a {nth} time; the case expects {n} (reboots = {n})` (or `none (no reboots)`), `guest reset (the {nth} of {n}) while waiting for {label} '{regex}', a line of the boot before it`, `guest ended after {k} reset(s); the case expects {n} (reboots = {n})`, `timed out after {d} waiting for the {nth} reset; the case expects {n} (reboots = {n})` |
//! | WrongStatus | `powered off with status {n}, expected {m}` |
//! | Killed | `qemu killed by signal {n}` |
//! | ExitStatus | `qemu exited with {status} after the last expect` |
//! | Reporter | `a [server] done: line at {secs:.2}s in a case with no reporter: {line}`, `a second [server] done: line at {secs:.2}s: {line}`, `a [server] done: line at {secs:.2}s that is not the reporter's (place {p}): {line}` |
//! | Distinct | `{label} '{regex}' captured '{text}' twice, again at {secs:.2}s: {line}`, `{label} '{regex}' matched {n} lines, two or more wanted`, `{label} '{regex}' matched no line` |
//!
//! GuestEnded in full: `guest ended ({how}) while waiting for {label} '{regex}'`, where
//! `{how}` is `powered off, status N`, `reset`, or `qemu exited, {status}` (also for a
//! power-off by a signal), followed by `; stderr: {stderr}` when the status is not
//! `status 0` and the stderr tail is not empty. A pass displays as `pass`.
//!
//! Every console line (and stderr line, capture or `[name] FAIL` line) a message quotes
//! is cut to [`QUOTE_LIMIT`] bytes by [`quote`], with a marker `[... N bytes cut]` where
//! bytes were cut; a forbidden line is quoted around the match ([`quote_around`]).
//!
//! ## Speed
//!
//! The judge reads well over 500 MB/s of console: whole lines are judged a block at a
//! time by searching the block's shown text (and the raw text of the few lines whose
//! raw text differs) with line-mode versions of the patterns, and checking only the
//! candidate lines with the original patterns (see the `fast` module). The
//! per-line path ([`Judge::reference`]) gives the same verdicts and is what the tests
//! hold the fast path to.

mod fast;
mod head;
mod judge;
mod normalize;
mod quote;

pub use judge::{
    secs, Config, Ending, ExitStatus, Failure, FailureKind, Input, Judge, Mark, Pattern, Place, Rule, ServerDone,
    Shutdown, Step, Verdict, LINE_LIMIT, LINE_OVERLAP,
};
pub use normalize::{raw_text, shown, shown_into, shown_partial};
pub use quote::{quote, quote_around, quote_with, QUOTE_LIMIT};
