//! A boot's console for the report: `console.log` read to a bound, its lines numbered as
//! the judge numbered them (across the cut `ConsoleLog` makes in a long console), the
//! judge's marks (`marks.json`) placed, and the window of lines a person is shown: the
//! first and last few, and every marked line with a few around it.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

/// The most of a console log read: the log keeps a head and a tail (crates/console),
/// and the bench may append QEMU's stderr tail after them.
const READ_LIMIT: u64 = testbench_console::LOG_HEAD + testbench_console::LOG_TAIL as u64 + 256 * 1024;
/// The most marks read from a boot's `marks.json`, and the most bytes of it.
const MARKS_LIMIT: usize = 1000;
const MARKS_BYTES: u64 = 1 << 20;

/// A line a rule of the judge took (one entry of `marks.json`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Mark {
    pub line: u64,
    pub rule: String,
    pub label: String,
    pub pattern: String,
}

#[derive(Deserialize)]
struct MarksFile {
    marks: Vec<Mark>,
}

/// The marks the judge left in a boot's directory, in line order (none when the file
/// is absent or not the bench's).
pub fn read_marks(dir: &Path) -> Vec<Mark> {
    let Ok(file) = std::fs::File::open(dir.join(crate::boot::MARKS_FILE)) else { return Vec::new() };
    let mut text = String::new();
    if file.take(MARKS_BYTES).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    let mut marks = serde_json::from_str::<MarksFile>(&text).map(|f| f.marks).unwrap_or_default();
    marks.truncate(MARKS_LIMIT);
    marks.sort_by_key(|m| m.line);
    marks
}

/// Where the log dropped the middle of a long console: the lines before the cut, the
/// lines dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cut {
    head_lines: usize,
    dropped_lines: u64,
    dropped_bytes: u64,
}

/// A console log as read for the report.
pub struct Log {
    bytes: Vec<u8>,
    /// The file's size, and whether all of it was read.
    pub size: u64,
    cut: Option<Cut>,
    /// How many lines (a line per '\n'; text after the last '\n' is a line too).
    lines: usize,
    /// Where every `CHECKPOINT`th line starts: a line is found from the one before it,
    /// so a log of millions of short lines costs no index of millions of entries.
    checkpoints: Vec<usize>,
}

/// Every how many lines [`Log`] keeps where one starts.
const CHECKPOINT: usize = 256;

/// The words `ConsoleLog::finish` writes where it cut (at exactly its head's size).
const CUT_NOTE: &[u8] = b"\n--- testbench: ";

impl Log {
    pub fn read(path: &Path) -> Option<Log> {
        let file = std::fs::File::open(path).ok()?;
        let size = file.metadata().ok()?.len();
        let mut bytes = Vec::new();
        file.take(READ_LIMIT).read_to_end(&mut bytes).ok()?;
        Some(Log::from_bytes(bytes, size, testbench_console::LOG_HEAD as usize))
    }

    /// A log whose cut, when there is one, is at byte `head` (the log's head size):
    /// there and only there, so a console that prints the note itself is not taken
    /// for a cut.
    fn from_bytes(bytes: Vec<u8>, size: u64, head: usize) -> Log {
        let cut = bytes.get(head..).filter(|rest| rest.starts_with(CUT_NOTE)).and_then(|rest| {
            let end = rest[1..].iter().position(|&b| b == b'\n')? + 1;
            let note = std::str::from_utf8(&rest[1..end]).ok()?;
            let words: Vec<&str> = note.split(' ').collect();
            let dropped_bytes = words.get(2)?.parse().ok()?;
            let dropped_lines = words.get(4)?.trim_start_matches('(').parse().ok()?;
            let head_lines = bytes[..head].iter().filter(|&&b| b == b'\n').count();
            Some(Cut { head_lines, dropped_lines, dropped_bytes })
        });
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        let lines = newlines + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
        let mut checkpoints = vec![0];
        let mut seen = 0;
        for (at, _) in bytes.iter().enumerate().filter(|(_, &b)| b == b'\n') {
            seen += 1;
            if seen % CHECKPOINT == 0 {
                checkpoints.push(at + 1);
            }
        }
        Log { bytes, size, cut, lines, checkpoints }
    }

    /// How many lines the file has.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The bytes of the file's line `index` (from 0), without its '\n'.
    pub fn line(&self, index: usize) -> &[u8] {
        let mut start = self.checkpoints[index / CHECKPOINT];
        for _ in 0..index % CHECKPOINT {
            start += self.bytes[start..].iter().position(|&b| b == b'\n').map_or(0, |p| p + 1);
        }
        let end = self.bytes[start..].iter().position(|&b| b == b'\n').map_or(self.bytes.len(), |p| start + p);
        &self.bytes[start..end]
    }

    /// The judge's number (from 1) of the file's line `index`; None for the bench's note
    /// of the cut.
    pub fn number(&self, index: usize) -> Option<u64> {
        match self.cut {
            None => Some(index as u64 + 1),
            Some(cut) if index <= cut.head_lines => Some(index as u64 + 1),
            Some(cut) if index == cut.head_lines + 1 => None,
            Some(cut) => Some(index as u64 + cut.dropped_lines - 1),
        }
    }

    /// The file's line that holds the judge's line `number`, or None when the log
    /// dropped it.
    pub fn index_of(&self, number: u64) -> Option<usize> {
        let index = match self.cut {
            None => number.checked_sub(1)?,
            Some(cut) if number <= cut.head_lines as u64 + 1 => number.checked_sub(1)?,
            Some(cut) if number > cut.head_lines as u64 + cut.dropped_lines => number + 1 - cut.dropped_lines,
            Some(_) => return None,
        };
        usize::try_from(index).ok().filter(|&i| i < self.lines())
    }

    /// What the log itself left out, in words, when it cut the console.
    pub fn cut_note(&self) -> Option<String> {
        self.cut.map(|cut| {
            format!(
                "the log itself dropped {} bytes ({} lines) of the console after its line {}",
                cut.dropped_bytes,
                cut.dropped_lines,
                cut.head_lines + 1
            )
        })
    }

    /// How many bytes of the file were read.
    pub fn bytes_read(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the whole file was read.
    pub fn whole(&self) -> bool {
        self.bytes.len() as u64 >= self.size
    }
}

/// The file lines to show: the first `head`, the last `tail`, and `context` lines either
/// side of each marked one, as sorted, disjoint ranges.
pub fn window(lines: usize, marked: &[usize], head: usize, tail: usize, context: usize) -> Vec<std::ops::Range<usize>> {
    let mut ranges: Vec<std::ops::Range<usize>> = vec![0..head.min(lines), lines.saturating_sub(tail)..lines];
    for &m in marked.iter().filter(|&&m| m < lines) {
        ranges.push(m.saturating_sub(context)..(m + context + 1).min(lines));
    }
    ranges.retain(|r| !r.is_empty());
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_ends_and_the_marked_lines_with_context() {
        assert_eq!(window(5, &[], 3, 3, 2), vec![0..5]);
        assert_eq!(window(1000, &[500, 502, 998], 10, 10, 3), [0..10, 497..506, 990..1000]);
        assert_eq!(window(0, &[], 10, 10, 3), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(window(100, &[7, 4000], 5, 0, 2), vec![0..10]);
    }

    #[test]
    fn every_line_is_found_from_the_checkpoint_before_it() {
        let mut bytes: Vec<u8> = (0..1000).flat_map(|i| format!("l{i}\n").into_bytes()).collect();
        bytes.extend_from_slice(b"no newline");
        let log = Log::from_bytes(bytes.clone(), bytes.len() as u64, usize::MAX);
        assert_eq!(log.lines(), 1001);
        for i in [0, 1, 255, 256, 257, 511, 512, 999] {
            assert_eq!(log.line(i), format!("l{i}").as_bytes());
        }
        assert_eq!(log.line(1000), b"no newline");
        let log = Log::from_bytes(b"a\n\nb\n".to_vec(), 5, usize::MAX);
        assert_eq!((log.lines(), log.line(1), log.line(2)), (3, &b""[..], &b"b"[..]));
        assert_eq!(Log::from_bytes(Vec::new(), 0, usize::MAX).lines(), 0);
    }

    #[test]
    fn line_numbers_follow_the_judge_across_the_logs_cut() {
        // A head of 12 bytes (3 lines and the start of a 4th), 5 lines dropped, a tail.
        let mut bytes = b"one\ntwo\nthr\nfo".to_vec();
        let head = bytes.len();
        bytes.extend_from_slice(b"\n--- testbench: 40 bytes (5 lines) of the console dropped here; ... ---\n");
        bytes.extend_from_slice(b"ne nine\nten\n");
        let size = bytes.len() as u64;
        let log = Log::from_bytes(bytes, size, head);
        // one two thr fo | note | "ne nine" (the end of line 9) ten
        assert_eq!(log.lines(), 7);
        let numbers: Vec<Option<u64>> = (0..7).map(|i| log.number(i)).collect();
        assert_eq!(numbers, [Some(1), Some(2), Some(3), Some(4), None, Some(9), Some(10)]);
        assert_eq!(log.line(5), b"ne nine");
        assert_eq!(log.index_of(10), Some(6));
        assert_eq!(log.index_of(4), Some(3));
        assert_eq!(log.index_of(6), None, "a dropped line");
        assert_eq!(log.index_of(11), None, "past the end");
        assert!(log.cut_note().unwrap().contains("40 bytes (5 lines)"));

        // The note printed by the guest elsewhere is console text, not a cut.
        let fake = b"a\n\n--- testbench: 40 bytes (5 lines) of the console dropped here\nb".to_vec();
        let log = Log::from_bytes(fake.clone(), fake.len() as u64, 1000);
        assert_eq!((log.lines(), log.cut_note()), (4, None));
        assert_eq!((log.number(2), log.number(3)), (Some(3), Some(4)));
    }
}
