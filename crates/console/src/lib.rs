//! # testbench-console: the console's way from QEMU to the judge, bounded
//!
//! One boot's console goes: QEMU's stdout (a pipe) → a reader thread ([`spawn_reader`])
//! → a bounded channel of [`CHANNEL_CHUNKS`] chunks of at most [`READ_CHUNK`] bytes →
//! the boot's loop ([`judge_console`]), which hands each chunk with its arrival time to
//! the [`Judge`], types what the judge says into the guest, and writes the chunk to
//! `console.log` through a [`ConsoleLog`].
//!
//! Nothing on this way grows with the console: when the judge falls behind, the channel
//! fills, the reader blocks on it, QEMU's pipe fills and QEMU waits for it. No byte is
//! lost and none is buffered without bound. `console.log` keeps the first [`LOG_HEAD`]
//! bytes and the last [`LOG_TAIL`] and says, where the cut is, what it dropped.
//!
//! The crate knows nothing of QEMU: the source is any [`Read`], the log any [`Write`],
//! so tests and the fuzz target ([`replay`]) drive the same code the bench runs.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use testbench_judge::{Judge, Verdict};

/// The most bytes the reader takes from the pipe at once.
pub const READ_CHUNK: usize = 64 * 1024;
/// How many chunks the channel holds before the reader waits.
pub const CHANNEL_CHUNKS: usize = 4;
/// `console.log` keeps this many bytes from the start of the console ...
pub const LOG_HEAD: u64 = 8 * 1024 * 1024;
/// ... and this many from its end (held in memory until the boot ends).
pub const LOG_TAIL: usize = 1024 * 1024;

/// Console bytes as the reader took them, and when.
pub struct Chunk {
    pub at: Instant,
    pub bytes: Vec<u8>,
}

/// What the reader thread sends: console bytes as they came, then the console's end.
pub enum ConsoleEvent {
    Bytes(Chunk),
    /// The source ended (QEMU closed its stdout or exited) or failed.
    Closed,
}

/// Starts a thread that reads `source` until it ends (or fails) and sends what it reads
/// into a channel of [`CHANNEL_CHUNKS`] chunks, waiting while the channel is full. The
/// thread ends when the source ends or the receiver is dropped.
pub fn spawn_reader<R: Read + Send + 'static>(source: R) -> Receiver<ConsoleEvent> {
    spawn_joinable(source).0
}

fn spawn_joinable<R: Read + Send + 'static>(source: R) -> (Receiver<ConsoleEvent>, std::thread::JoinHandle<()>) {
    let (sender, receiver) = mpsc::sync_channel(CHANNEL_CHUNKS);
    let thread = spawn_reader_into(source, sender, |event| event);
    (receiver, thread)
}

/// The same reader, sending into a channel of the caller's events (`wrap` makes one of
/// a [`ConsoleEvent`]), so a boot's loop can take the console and its other sources
/// (QMP, devices, sessions) from one channel. The channel's bound is the caller's: a
/// `sync_channel` keeps the console's way bounded.
pub fn spawn_reader_into<R, E>(
    source: R,
    sender: SyncSender<E>,
    wrap: fn(ConsoleEvent) -> E,
) -> std::thread::JoinHandle<()>
where
    R: Read + Send + 'static,
    E: Send + 'static,
{
    std::thread::spawn(move || {
        read_into(source, &sender, wrap);
        let _ = sender.send(wrap(ConsoleEvent::Closed));
    })
}

fn read_into<R: Read, E>(mut source: R, sender: &SyncSender<E>, wrap: fn(ConsoleEvent) -> E) {
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        match source.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let chunk = Chunk { at: Instant::now(), bytes: buffer[..n].to_vec() };
                if sender.send(wrap(ConsoleEvent::Bytes(chunk))).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

/// How [`judge_console`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The judge gave its verdict.
    Verdict(Verdict),
    /// The console closed (QEMU exited or closed its stdout) with no verdict yet.
    Closed,
    /// The deadline passed with no verdict.
    Deadline,
}

/// What one chunk did: the verdict when it gave one, the triggers it fired.
pub struct Taken {
    pub verdict: Option<Verdict>,
    pub triggered: Vec<usize>,
}

/// One chunk's way: to the log, to the judge (its time counted from `start`), and what
/// the judge says to type to `type_in`. The boot's loop (the bench's, or
/// [`judge_console`]) calls it for every chunk.
pub fn take_chunk<W: Write>(
    chunk: &Chunk,
    judge: &mut Judge,
    log: &mut ConsoleLog<W>,
    start: Instant,
    mut type_in: impl FnMut(&[u8]),
) -> Taken {
    // A log that cannot be written does not stop the judging.
    let _ = log.write(&chunk.bytes);
    let step = judge.feed(chunk.at.saturating_duration_since(start), &chunk.bytes);
    for text in &step.send {
        type_in(text);
    }
    Taken { verdict: step.verdict, triggered: step.triggered }
}

/// A console-only loop: each chunk through [`take_chunk`], the judge polled when its
/// settle time ends, until a verdict, the console's end, or `deadline`.
pub fn judge_console<W: Write>(
    receiver: &Receiver<ConsoleEvent>,
    judge: &mut Judge,
    log: &mut ConsoleLog<W>,
    start: Instant,
    deadline: Instant,
    mut type_in: impl FnMut(&[u8]),
) -> Ended {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ended::Deadline;
        }
        let wake = judge.wake_at().map(|at| start + at).unwrap_or(deadline).min(deadline);
        match receiver.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(ConsoleEvent::Bytes(chunk)) => {
                if let Some(verdict) = take_chunk(&chunk, judge, log, start, &mut type_in).verdict {
                    return Ended::Verdict(verdict);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(verdict) = judge.poll(Instant::now().saturating_duration_since(start)) {
                    return Ended::Verdict(verdict);
                }
            }
            Ok(ConsoleEvent::Closed) | Err(RecvTimeoutError::Disconnected) => return Ended::Closed,
        }
    }
}

/// A console log that keeps its head and its tail: the first `head` bytes go straight
/// to the writer, the last `tail` bytes after them are kept in memory, and
/// [`ConsoleLog::finish`] writes what was dropped between the two, then the tail.
pub struct ConsoleLog<W: Write> {
    out: W,
    head: u64,
    head_left: u64,
    tail: VecDeque<u8>,
    tail_max: usize,
    dropped_bytes: u64,
    dropped_lines: u64,
}

impl<W: Write> ConsoleLog<W> {
    /// A log with the bench's sizes, [`LOG_HEAD`] and [`LOG_TAIL`].
    pub fn new(out: W) -> ConsoleLog<W> {
        ConsoleLog::with_sizes(out, LOG_HEAD, LOG_TAIL)
    }

    pub fn with_sizes(out: W, head: u64, tail: usize) -> ConsoleLog<W> {
        ConsoleLog {
            out,
            head,
            head_left: head,
            tail: VecDeque::new(),
            tail_max: tail,
            dropped_bytes: 0,
            dropped_lines: 0,
        }
    }

    /// Logs console bytes: to the head while it has room, then to the tail.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.head_left > 0 {
            let n = bytes.len().min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
            self.head_left -= n as u64;
            let (head, rest) = bytes.split_at(n);
            bytes = rest;
            self.out.write_all(head)?;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        if bytes.len() >= self.tail_max {
            // The whole tail is replaced: drop what it held and the start of `bytes`.
            let (front, back) = self.tail.as_slices();
            let (a, b) = (counted(front), counted(back));
            self.drop_count(a);
            self.drop_count(b);
            self.tail.clear();
            let cut = bytes.len() - self.tail_max;
            self.drop_count(counted(&bytes[..cut]));
            self.tail.extend(&bytes[cut..]);
            return Ok(());
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
        if over > 0 {
            let (front, back) = self.tail.as_slices();
            let a = over.min(front.len());
            let (a, b) = (counted(&front[..a]), counted(&back[..over - a]));
            self.drop_count(a);
            self.drop_count(b);
            self.tail.drain(..over);
        }
        self.tail.extend(bytes);
        Ok(())
    }

    fn drop_count(&mut self, (bytes, lines): (u64, u64)) {
        self.dropped_bytes += bytes;
        self.dropped_lines += lines;
    }

    /// Bytes dropped between the head and the tail so far, and the '\n's among them.
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped_bytes, self.dropped_lines)
    }

    /// Writes the cut (when there is one) and the tail; returns the writer, for what the
    /// bench appends after the console (QEMU's stderr tail).
    pub fn finish(mut self) -> io::Result<W> {
        if self.dropped_bytes > 0 {
            write!(
                self.out,
                "\n--- testbench: {} bytes ({} lines) of the console dropped here; this log keeps the first {} and \
                 the last {} bytes ---\n",
                self.dropped_bytes, self.dropped_lines, self.head, self.tail_max
            )?;
        }
        let (front, back) = self.tail.as_slices();
        self.out.write_all(front)?;
        self.out.write_all(back)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// How many bytes, and '\n's among them.
fn counted(bytes: &[u8]) -> (u64, u64) {
    (bytes.len() as u64, memchr::memchr_iter(b'\n', bytes).count() as u64)
}

/// The fuzz target's and the tests' way through the same plumbing: `input` is read by
/// the reader thread from a source that hands it out in the pieces `cuts` says (a cut
/// `c` is a read of `16 c + 1` bytes, 1 to 4081, in turn; the whole rest when `cuts` is
/// empty), through the bounded
/// channel, judged by `judge` and logged with the given sizes. Returns how the loop
/// ended (the boot's end is the caller's), what was typed, and the log's bytes.
pub fn replay(
    input: &[u8],
    cuts: &[u8],
    judge: &mut Judge,
    log_head: u64,
    log_tail: usize,
) -> (Ended, Vec<Vec<u8>>, Vec<u8>) {
    let source = Pieces { data: input.to_vec(), at: 0, cuts: cuts.to_vec(), turn: 0 };
    let (receiver, reader) = spawn_joinable(source);
    let mut log = ConsoleLog::with_sizes(Vec::new(), log_head, log_tail);
    let mut typed = Vec::new();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(3600);
    let ended = judge_console(&receiver, judge, &mut log, start, deadline, |text| typed.push(text.to_vec()));
    drop(receiver);
    // The reader ends at the source's end, or at its next send once nothing receives.
    let _ = reader.join();
    let log = log.finish().unwrap_or_default();
    (ended, typed, log)
}

/// A source that hands out its bytes in the pieces its cuts say.
struct Pieces {
    data: Vec<u8>,
    at: usize,
    cuts: Vec<u8>,
    turn: usize,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.data.len() - self.at;
        let want = if self.cuts.is_empty() {
            left
        } else {
            self.turn += 1;
            self.cuts[(self.turn - 1) % self.cuts.len()] as usize * 16 + 1
        };
        let n = want.min(left).min(buf.len());
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use testbench_judge::{Config, Ending, FailureKind, Pattern};

    fn log_of(chunks: &[&[u8]], head: u64, tail: usize) -> String {
        let mut log = ConsoleLog::with_sizes(Vec::new(), head, tail);
        for c in chunks {
            log.write(c).unwrap();
        }
        String::from_utf8(log.finish().unwrap()).unwrap()
    }

    #[test]
    fn a_small_console_is_logged_whole() {
        assert_eq!(log_of(&[b"one\n", b"two\n"], 100, 100), "one\ntwo\n");
    }

    #[test]
    fn a_big_console_keeps_its_head_and_tail_and_says_what_was_dropped() {
        let lines: Vec<String> = (0..1000).map(|i| format!("{i:04}\n")).collect(); // 5 bytes each
        let chunks: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let log = log_of(&chunks, 20, 15);
        let want = String::from(
            "0000\n0001\n0002\n0003\n\n--- testbench: 4965 bytes (993 lines) of the console dropped here; this log \
             keeps the first 20 and the last 15 bytes ---\n0997\n0998\n0999\n",
        );
        assert_eq!(log, want);
        // Cut into other pieces, the same log.
        let all: Vec<u8> = lines.concat().into_bytes();
        for size in [1, 3, 7, 15, 16, 100, 5000] {
            let chunks: Vec<&[u8]> = all.chunks(size).collect();
            assert_eq!(log_of(&chunks, 20, 15), want, "chunks of {size}");
        }
    }

    #[test]
    fn the_log_of_a_big_console_is_bounded() {
        let mut log = ConsoleLog::new(io::sink());
        let chunk = vec![b'x'; READ_CHUNK];
        for _ in 0..(64 << 20) / READ_CHUNK {
            log.write(&chunk).unwrap();
        }
        assert!(log.tail.len() <= LOG_TAIL && log.tail.capacity() <= 2 * LOG_TAIL);
        assert_eq!(log.dropped(), ((64 << 20) - LOG_HEAD - LOG_TAIL as u64, 0));
    }

    /// A source that counts what was read from it and never ends.
    struct Endless(Arc<AtomicUsize>);

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            buf.fill(b'z');
            self.0.fetch_add(buf.len(), Ordering::SeqCst);
            Ok(buf.len())
        }
    }

    /// Waits (10 s at most) until `read` reaches `want`.
    fn wait_for(read: &AtomicUsize, want: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while read.load(Ordering::SeqCst) < want {
            assert!(
                Instant::now() < deadline,
                "the reader read {} of {want} bytes in 10 s",
                read.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_reader_waits_when_the_judge_does_not_take() {
        let read = Arc::new(AtomicUsize::new(0));
        let receiver = spawn_reader(Endless(read.clone()));
        // The channel's chunks, and the one the reader holds while it waits to send it.
        let full = (CHANNEL_CHUNKS + 1) * READ_CHUNK;
        wait_for(&read, full);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read.load(Ordering::SeqCst), full, "the reader went on reading with no one taking");
        // Taking a chunk lets it read one more, and no more.
        let _ = receiver.recv().unwrap();
        wait_for(&read, full + READ_CHUNK);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read.load(Ordering::SeqCst), full + READ_CHUNK);
        drop(receiver);
    }

    fn config() -> Config {
        Config {
            expect: vec![Pattern::new("expect[0]", "^ready$").unwrap()],
            forbid: vec![Pattern::new("forbid[0]", "PANIC").unwrap()],
            poweroff: true,
            ..Config::default()
        }
    }

    #[test]
    fn replay_judges_and_logs_what_it_reads() {
        let input = b"boot\nPA\x1b[0mNIC\nready\n";
        for cuts in [&[][..], &[0], &[2, 5]] {
            let mut judge = Judge::new(config());
            let (ended, typed, log) = replay(input, cuts, &mut judge, 1 << 20, 1 << 20);
            assert!(typed.is_empty());
            // The loop stops at the verdict: the log holds what was read until then.
            assert!(input.starts_with(&log) && log.len() >= 15, "{log:?}");
            match ended {
                Ended::Verdict(Verdict::Fail(f)) => assert_eq!(f.kind, FailureKind::Forbidden),
                other => panic!("cuts {cuts:?}: {other:?}"),
            }
        }
        let mut judge = Judge::new(config());
        let (ended, _, _) = replay(b"boot\nready\n", &[3], &mut judge, 1 << 20, 1 << 20);
        assert_eq!(ended, Ended::Closed);
        let v = judge.end(Duration::from_secs(1), Ending::TimedOut { deadline: Duration::from_secs(1) });
        assert!(v.to_string().contains("waiting for power-off"), "{v}");
    }
}
