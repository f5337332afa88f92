//! The judge's part in a case with sessions: the verdict held until the bench releases
//! it (the sessions ended), and `expect_after` matched in order on the lines after the
//! last expect.

use std::time::Duration;

use testbench_judge::{Config, Ending, FailureKind, Judge, Pattern, Verdict};

fn pattern(label: &str, re: &str) -> Pattern {
    Pattern::new(label, re).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config() -> Config {
    Config {
        expect: vec![pattern("expect[0]", "^ready$")],
        expect_after: vec![pattern("expect_after[0]", "^accepted alice$"), pattern("expect_after[1]", "^closed$")],
        hold: true,
        ..Config::default()
    }
}

#[test]
fn a_held_verdict_passes_only_after_the_release_and_every_expect_after() {
    let mut judge = Judge::new(config());
    // The line that matches the last expect is not also an expect_after's.
    assert!(judge.feed(ms(0), b"accepted alice\nready\n").verdict.is_none());
    assert!(judge.expects_done());
    assert!(judge.feed(ms(10), b"accepted alice\nclosed\n").verdict.is_none());
    // Long past the settle time, still held: no pass before the release.
    assert_eq!(judge.poll(ms(5000)), None);
    assert_eq!(judge.wake_at(), None);
    judge.release(ms(6000));
    assert_eq!(judge.wake_at(), Some(ms(6050)));
    assert_eq!(judge.poll(ms(6049)), None);
    assert_eq!(judge.poll(ms(6050)), Some(Verdict::Pass));
}

#[test]
fn expect_after_is_in_order_and_a_miss_names_the_first_unmatched() {
    let mut judge = Judge::new(config());
    judge.feed(ms(0), b"ready\nclosed\naccepted alice\n");
    judge.release(ms(100));
    assert_eq!(judge.poll(ms(10_000)), None, "expect_after[1] came before [0]: not matched in order");
    let Verdict::Fail(failure) = judge.end(ms(20_000), Ending::TimedOut { deadline: ms(20_000) }) else {
        panic!("a pass with expect_after[1] unmatched")
    };
    assert_eq!(failure.kind, FailureKind::TimedOut);
    assert_eq!(failure.message, "timed out after 20s waiting for expect_after[1] '^closed$'");
}

#[test]
fn a_deadline_before_the_release_says_it_waited_for_the_sessions() {
    let mut judge = Judge::new(Config { expect_after: Vec::new(), ..config() });
    judge.feed(ms(0), b"ready\n");
    let Verdict::Fail(failure) = judge.end(ms(30_000), Ending::TimedOut { deadline: ms(30_000) }) else {
        panic!("a pass while the sessions had not ended")
    };
    assert_eq!(failure.message, "timed out after 30s waiting for the sessions to end");
}
