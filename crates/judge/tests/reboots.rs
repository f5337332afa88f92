//! Reboots: a boot that expects N guest resets in one QEMU run ([`Judge::guest_reset`]),
//! judged on both paths (the fast one and the reference).

use std::time::Duration;

use testbench_judge::{Config, Ending, ExitStatus, FailureKind, Judge, Pattern, Shutdown, Verdict};

fn pattern(label: &str, regex: &str) -> Pattern {
    Pattern::new(label, regex).unwrap()
}

/// Two resets: the first boot's line, then one line expected first after each reset.
fn config(reboots: u32) -> Config {
    let mut expect = vec![pattern("expect[0]", "^boot 1 of 3$")];
    let mut expect_resets = vec![0];
    for n in 0..reboots {
        expect.push(pattern(&format!("reboot_expect[{n}]"), &format!("^boot {} of 3$", n + 2)));
        expect_resets.push(n + 1);
    }
    Config { expect, expect_resets, reboots, poweroff: true, ..Config::default() }
}

fn judges(config: Config) -> [Judge; 2] {
    [Judge::new(config.clone()), Judge::reference(config)]
}

fn powered_off() -> Ending {
    Ending::Exited { status: ExitStatus::Code(0), shutdown: Shutdown::PowerOff, stderr_tail: Vec::new() }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn failure(verdict: Option<Verdict>) -> (FailureKind, String) {
    match verdict {
        Some(Verdict::Fail(f)) => (f.kind, f.message),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn each_boots_line_matches_only_after_its_reset_and_the_run_passes_at_the_power_off() {
    for mut judge in judges(config(2)) {
        // The second boot's line printed before any reset does not count for it.
        assert_eq!(judge.feed(ms(1), b"boot 1 of 3\nboot 2 of 3\n").verdict, None);
        assert_eq!(judge.guest_reset(ms(2)), None);
        assert!(!judge.expects_done());
        judge.feed(ms(3), b"boot 2 of 3\n");
        assert_eq!(judge.guest_reset(ms(4)), None);
        judge.feed(ms(5), b"boot 3 of 3\n");
        assert!(judge.expects_done());
        assert_eq!(judge.resets(), 2);
        assert_eq!(judge.end(ms(6), powered_off()), Verdict::Pass);
    }
}

#[test]
fn a_reset_more_than_expected_fails_at_once() {
    for mut judge in judges(config(1)) {
        judge.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(judge.guest_reset(ms(2)), None);
        judge.feed(ms(3), b"boot 2 of 3\n");
        let (kind, message) = failure(judge.guest_reset(ms(4)));
        assert_eq!(kind, FailureKind::Reset);
        assert_eq!(message, "guest reset a 2nd time; the case expects 1 (reboots = 1)");
    }
    let mut judge = Judge::new(Config { expect: vec![pattern("expect[0]", "^a$")], ..Config::default() });
    judge.feed(ms(1), b"a\n");
    let (_, message) = failure(judge.guest_reset(ms(2)));
    assert_eq!(message, "guest reset a 1st time; the case expects none (no reboots)");
}

#[test]
fn a_reset_fewer_than_expected_fails_the_end() {
    for mut judge in judges(Config { expect_resets: Vec::new(), ..config(0) }) {
        let mut judge_two = Judge::new(Config { reboots: 2, ..config(0) });
        judge.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(judge.end(ms(2), powered_off()), Verdict::Pass, "no reboots asked: the control");
        judge_two.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(judge_two.guest_reset(ms(2)), None);
        let (kind, message) = failure(Some(judge_two.end(ms(3), powered_off())));
        assert_eq!(kind, FailureKind::Reset);
        assert_eq!(message, "guest ended after 1 reset; the case expects 2 (reboots = 2)");
        let mut waiting = Judge::new(Config { reboots: 1, poweroff: false, ..config(0) });
        waiting.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(waiting.poll(ms(10_000)), None, "no pass by the settle time before the reset");
        let (_, message) = failure(Some(waiting.end(ms(20_000), Ending::TimedOut { deadline: ms(20_000) })));
        assert_eq!(message, "timed out after 20s waiting for the 1st reset; the case expects 1 (reboots = 1)");
    }
}

#[test]
fn a_reset_while_a_line_of_the_boot_before_is_pending_fails_naming_it() {
    for mut judge in judges(config(2)) {
        judge.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(judge.guest_reset(ms(2)), None);
        // The second boot printed, but not its line, and the guest reset again.
        judge.feed(ms(3), b"Linux version 6.12\n");
        let (kind, message) = failure(judge.guest_reset(ms(4)));
        assert_eq!(kind, FailureKind::Reset);
        assert_eq!(
            message,
            "guest reset (the 2nd of 2) while waiting for reboot_expect[0] '^boot 2 of 3$', a line of the boot before it"
        );
    }
}

#[test]
fn resets_with_no_output_between_them_are_one_reset() {
    for mut judge in judges(config(1)) {
        judge.feed(ms(1), b"boot 1 of 3\n");
        assert_eq!(judge.guest_reset(ms(2)), None);
        // x86's Linux: the ACPI reset register, then the keyboard controller.
        assert_eq!(judge.guest_reset(ms(3)), None);
        assert_eq!(judge.resets(), 1);
        judge.feed(ms(4), b"boot 2 of 3\n");
        assert!(judge.expects_done());
        // Once the next boot has printed, a reset is a reset again.
        let (_, message) = failure(judge.guest_reset(ms(5)));
        assert_eq!(message, "guest reset a 2nd time; the case expects 1 (reboots = 1)");
    }
}
