//! Over-long lines: the judge holds at most its line limit for one line, judges a longer
//! line in overlapping pieces so that no forbidden word hides across a cut, and quotes
//! at most a few hundred bytes of any line in a verdict.

use std::time::Duration;

use testbench_judge::{
    Config, Ending, FailureKind, Input, Judge, Pattern, Verdict, LINE_LIMIT, LINE_OVERLAP, QUOTE_LIMIT,
};

const T: Duration = Duration::from_millis(100);

fn forbid(re: &str) -> Config {
    Config { forbid: vec![Pattern::new("forbid[0]", re).unwrap()], poweroff: true, ..Config::default() }
}

/// Feeds `bytes` in chunks of `chunk` bytes (the console reader's size is 64 KiB).
fn feed_all(judge: &mut Judge, bytes: &[u8], chunk: usize) -> Option<Verdict> {
    for piece in bytes.chunks(chunk) {
        if let Some(v) = judge.feed(T, piece).verdict {
            return Some(v);
        }
    }
    None
}

fn ended(mut judge: Judge, bytes: &[u8], chunk: usize) -> Verdict {
    match feed_all(&mut judge, bytes, chunk) {
        Some(v) => v,
        None => judge.end(T, Ending::TimedOut { deadline: Duration::from_secs(1) }),
    }
}

fn assert_forbidden(v: &Verdict, what: &str) {
    match v {
        Verdict::Fail(f) if f.kind == FailureKind::Forbidden => {}
        other => panic!("{what}: want a forbidden line, got {other}"),
    }
}

#[test]
fn memory_for_one_line_is_bounded_by_the_limit() {
    let mut judge = Judge::new(forbid("PANIC"));
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..256 {
        // 16 MiB, no newline
        assert!(judge.feed(T, &chunk).verdict.is_none());
        assert!(
            judge.line_bytes_held() <= LINE_LIMIT,
            "the judge holds {} bytes of one line (limit {LINE_LIMIT})",
            judge.line_bytes_held()
        );
    }
    // The same fed a byte at a time for a while, and in one call of 16 MiB.
    let mut judge = Judge::new(forbid("PANIC"));
    for _ in 0..(3 * LINE_LIMIT) {
        judge.feed(T, b"y");
    }
    assert!(judge.line_bytes_held() <= LINE_LIMIT);
    let mut judge = Judge::new(Config { poweroff: false, ..forbid("PANIC") });
    judge.feed(T, &vec![b'z'; 16 << 20]);
    assert!(judge.line_bytes_held() <= LINE_LIMIT);
    assert_eq!(judge.end(T, Ending::TimedOut { deadline: T }), Verdict::Pass);
}

/// Where the pieces of a line are cut: piece k covers [k*(L-O), k*(L-O)+L).
fn cuts() -> Vec<usize> {
    (1..4).map(|k| k * (LINE_LIMIT - LINE_OVERLAP) + LINE_OVERLAP).collect()
}

#[test]
fn a_forbidden_word_is_seen_across_every_cut() {
    let word = b"PANIC";
    let line_len = 4 * LINE_LIMIT;
    for cut in cuts() {
        for at in cut - word.len() - 2..cut + 3 {
            let mut line = vec![b'.'; line_len];
            line[at..at + word.len()].copy_from_slice(word);
            line.push(b'\n');
            for chunk in [4096, 64 * 1024, line.len()] {
                let v = ended(Judge::new(forbid("PANIC")), &line, chunk);
                assert_forbidden(&v, &format!("PANIC at byte {at}, chunks of {chunk}"));
                let v = ended(Judge::reference(forbid("PANIC")), &line, chunk);
                assert_forbidden(&v, &format!("reference: PANIC at byte {at}, chunks of {chunk}"));
            }
        }
    }
}

#[test]
fn a_match_as_long_as_the_overlap_is_seen_wherever_it_lies() {
    // A match of exactly LINE_OVERLAP bytes: S, then word characters, then E.
    let re = format!("S[a-z]{{{}}}E", LINE_OVERLAP - 2);
    let mut m = vec![b'a'; LINE_OVERLAP];
    m[0] = b'S';
    m[LINE_OVERLAP - 1] = b'E';
    let cut = cuts()[0];
    for at in [cut - LINE_OVERLAP, cut - LINE_OVERLAP / 2, cut - 1, cut - LINE_OVERLAP + 1] {
        let mut line = vec![b'.'; 3 * LINE_LIMIT];
        line[at..at + LINE_OVERLAP].copy_from_slice(&m);
        line.push(b'\n');
        let v = ended(Judge::new(forbid(&re)), &line, 64 * 1024);
        assert_forbidden(&v, &format!("a {LINE_OVERLAP}-byte match at byte {at}"));
    }
    // The bound is tight: with an overlap two bytes shorter, the same match placed one
    // byte before the second piece's start lies whole in neither piece.
    let overlap = LINE_OVERLAP - 2;
    let at = LINE_LIMIT - overlap - 1;
    let mut line = vec![b'.'; 3 * LINE_LIMIT];
    line[at..at + LINE_OVERLAP].copy_from_slice(&m);
    line.push(b'\n');
    let judge = Judge::new(Config { poweroff: false, ..forbid(&re) }).with_line_limit(LINE_LIMIT, overlap);
    assert_eq!(ended(judge, &line, 64 * 1024), Verdict::Pass);
}

#[test]
fn a_word_split_by_an_escape_is_seen_across_a_cut() {
    let word = b"PA\x1b[0mNIC";
    let cut = cuts()[0];
    for at in cut - word.len()..cut + 1 {
        let mut line = vec![b'.'; 2 * LINE_LIMIT];
        line[at..at + word.len()].copy_from_slice(word);
        line.push(b'\n');
        let v = ended(Judge::new(forbid("PANIC")), &line, 4096);
        assert_forbidden(&v, &format!("PA-escape-NIC at byte {at}"));
    }
}

#[test]
fn a_forbidden_line_is_quoted_in_a_few_hundred_bytes() {
    // Under the line limit: judged whole, quoted around the match.
    let mut line = vec![b'x'; 60_000];
    line[30_000..30_005].copy_from_slice(b"PANIC");
    line.push(b'\n');
    let Verdict::Fail(f) = ended(Judge::new(forbid("PANIC")), &line, 4096) else { panic!("no failure") };
    assert!(f.message.len() < QUOTE_LIMIT + 200, "message of {} bytes", f.message.len());
    assert!(f.message.contains("PANIC [... ") || f.message.contains("PANICx"), "{}", f.message);
    assert!(f.message.contains(" bytes cut]"), "{}", f.message);
    // Far over it: 200 MB in the issue; 8 MiB here, the word near its end.
    let mut line = vec![b'x'; 8 << 20];
    let at = (8 << 20) - 1000;
    line[at..at + 5].copy_from_slice(b"PANIC");
    let Verdict::Fail(f) = ended(Judge::new(forbid("PANIC")), &line, 64 * 1024) else { panic!("no failure") };
    assert!(f.message.len() < QUOTE_LIMIT + 200, "message of {} bytes: {}", f.message.len(), &f.message[..300]);
    assert!(f.message.contains("PANIC"), "{}", f.message);
    assert!(f.message.contains("judged in pieces; this piece starts at its byte"), "{}", f.message);
}

#[test]
fn a_program_failure_line_is_quoted_short() {
    let mut cfg = Config { expect: vec![Pattern::new("expect[0]", "never").unwrap()], ..Config::default() };
    cfg.poweroff = true;
    let mut bytes = b"[prog] FAIL ".to_vec();
    bytes.extend(vec![b'y'; 50_000]);
    bytes.push(b'\n');
    let v = ended(Judge::new(cfg), &bytes, 4096);
    let Verdict::Fail(f) = v else { panic!("no failure") };
    assert_eq!(f.kind, FailureKind::ProgramFailed);
    assert!(f.message.len() < QUOTE_LIMIT + 200, "message of {} bytes", f.message.len());
}

#[test]
fn expects_and_inputs_see_only_the_head_of_an_over_long_line() {
    let cfg = Config {
        expect: vec![Pattern::new("expect[0]", "^boot").unwrap(), Pattern::new("expect[1]", "tail-word").unwrap()],
        inputs: vec![Input { after: Pattern::new("input[0]", "login:").unwrap(), send: b"root\n".to_vec() }],
        poweroff: true,
        ..Config::default()
    };
    // The head matches expect[0] and the input's trigger; `tail-word` lies past the head.
    let mut line = b"boot login: ".to_vec();
    line.extend(vec![b'.'; LINE_LIMIT]);
    line.extend_from_slice(b" tail-word\n");
    for chunk in [7, 4096, line.len()] {
        let mut judge = Judge::new(cfg.clone());
        let mut sent = Vec::new();
        for piece in line.chunks(chunk) {
            sent.extend(judge.feed(T, piece).send);
        }
        assert_eq!(sent, vec![b"root\n".to_vec()], "chunks of {chunk}");
        assert_eq!(judge.lines_seen(), 1, "an over-long line is one line");
        let v = judge.end(T, Ending::TimedOut { deadline: Duration::from_secs(1) });
        let Verdict::Fail(f) = v else { panic!("chunks of {chunk}: passed") };
        assert!(f.message.contains("waiting for expect[1] 'tail-word'"), "{}", f.message);
    }
}

/// The head of an over-long line is not the line's end: an expect anchored at the end
/// never matches at the cut (100 lines of 100,000 `a` then `!`: no line ends in `a`), nor
/// does a trigger's or a capture's, while a pattern that matches the head's text
/// without the anchor still does. (An input's `after` is also tried on a line still
/// being printed, as a prompt is: there the end of what came so far is its end.)
#[test]
fn an_end_anchor_never_matches_at_the_cut_of_an_over_long_line() {
    let mut console = Vec::new();
    for _ in 0..100 {
        console.extend(vec![b'a'; 100_000]);
        console.extend_from_slice(b"!\n");
    }
    let anchored = |re: &str| Config {
        expect: vec![Pattern::new("expect[0]", re).unwrap()],
        expect_after: vec![],
        distinct: vec![],
        capture: vec![Pattern::new("capture[0]", r"(a{3})\z").unwrap()],
        triggers: vec![Pattern::new("trigger[0]", "(?m)a$").unwrap()],
        ..Config::default()
    };
    for judge in [Judge::new(anchored("(a+)+$")), Judge::reference(anchored("(a+)+$"))] {
        for chunk in [4096, 65_536, console.len()] {
            let mut judge = judge.clone();
            let mut triggered = 0;
            for piece in console.chunks(chunk) {
                triggered += judge.feed(T, piece).triggered.len();
            }
            assert_eq!(triggered, 0, "chunks of {chunk}: a trigger took a cut");
            assert_eq!(judge.captures(), &[None], "chunks of {chunk}: a capture took a cut");
            let v = judge.end(T, Ending::TimedOut { deadline: Duration::from_secs(1) });
            let Verdict::Fail(f) = v else { panic!("chunks of {chunk}: (a+)+$ passed at a cut") };
            assert!(f.message.contains("waiting for expect[0] '(a+)+$'"), "{}", f.message);
        }
    }
    // Without the anchor the head still matches, and the last piece's real end still
    // counts for a forbid.
    let mut judge = Judge::new(Config { expect: vec![Pattern::new("expect[0]", "^a+").unwrap()], ..Config::default() });
    assert_eq!(feed_all(&mut judge, &console, 65_536), None);
    assert_eq!(judge.poll(Duration::from_secs(1)), Some(Verdict::Pass));
    assert_forbidden(&ended(Judge::new(forbid("a!$")), &console, 65_536), "a!$ at the line's real end");
}

#[test]
fn a_line_of_exactly_the_limit_is_whole() {
    let cfg = Config { expect: vec![Pattern::new("expect[0]", "end$").unwrap()], ..Config::default() };
    let mut line = vec![b'.'; LINE_LIMIT - 3];
    line.extend_from_slice(b"end\n");
    for chunk in [1000, LINE_LIMIT, LINE_LIMIT + 1] {
        let mut judge = Judge::new(cfg.clone());
        feed_all(&mut judge, &line, chunk);
        assert_eq!(judge.poll(Duration::from_secs(1)), Some(Verdict::Pass), "chunks of {chunk}");
    }
}

/// A trigger fires once, on the first shown line it matches, however the bytes are cut,
/// and never on a partial line (a poke waits for the whole line).
#[test]
fn a_trigger_fires_once_on_the_first_whole_line_it_matches() {
    let config = Config {
        triggers: vec![Pattern::new("net.poke.after", "^poke me$").unwrap()],
        poweroff: true,
        ..Config::default()
    };
    let mut judge = Judge::new(config);
    let step = judge.feed(Duration::ZERO, b"boot\npoke m");
    assert!(step.triggered.is_empty(), "a partial line fired: {:?}", step.triggered);
    let step = judge.feed(Duration::from_millis(1), b"e\n");
    assert_eq!(step.triggered, [0]);
    let step = judge.feed(Duration::from_millis(2), b"poke me\n\x1b[1mpoke me\x1b[0m\n");
    assert!(step.triggered.is_empty(), "a trigger fired twice: {:?}", step.triggered);
}
