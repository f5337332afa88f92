//! Titles that do not drift, reports that are cut or interleaved, two reports in one
//! console, and feeding in chunks equal to feeding whole (a property test on random
//! consoles and random cuts).

use testbench_triage::{reports, Corruption, Guest, Report, Scanner};

const OOPS: &str = "\
[   12.873410] BUG: kernel NULL pointer dereference, address: 0000000000000000
[   12.873812] #PF: supervisor write access in kernel mode
[   12.874000] PGD 0 P4D 0
[   12.874100] Oops: 0002 [#1] PREEMPT SMP NOPTI
[   12.874225] CPU: 0 PID: 1 Comm: sh Not tainted 6.1.0-18-amd64 #1  Debian 6.1.76-1
[   12.874300] RIP: 0010:sysrq_handle_crash+0x16/0x20
[   12.874400] RSP: 0018:ffffb3a1c0013e18 EFLAGS: 00010246
[   12.875100] Call Trace:
[   12.875200]  <TASK>
[   12.875300]  ? __die+0x1f/0x70
[   12.875400]  ? page_fault_oops+0x171/0x4e0
[   12.875500]  ? exc_page_fault+0x77/0x170
[   12.875600]  __handle_sysrq.cold+0x43/0x11e
[   12.875700]  write_sysrq_trigger+0x24/0x40
[   12.876300]  </TASK>
[   12.876400] ---[ end trace 0000000000000000 ]---
";

/// The same report as another boot prints it: other times, addresses, PID, CPU,
/// caller ids, offsets and clone suffixes.
const OOPS_DRIFTED: &str = "\
[  933.000001][ T4411] BUG: kernel NULL pointer dereference, address: 0000000000000008
[  933.000002][ T4411] #PF: supervisor write access in kernel mode
[  933.000003][ T4411] PGD 1f3c2067 P4D 1f3c2067 PUD 0
[  933.000004][ T4411] Oops: 0002 [#3] PREEMPT SMP PTI
[  933.000005][ T4411] CPU: 3 PID: 4411 Comm: bash Tainted: G        W          6.8.0 #7
[  933.000006][ T4411] RIP: 0010:sysrq_handle_crash.isra.0+0x1a/0x30
[  933.000007][ T4411] RSP: 0018:ffffc90001bb7e20 EFLAGS: 00010282
[  933.000008][ T4411] Call Trace:
[  933.000009][ T4411]  <TASK>
[  933.000010][ T4411]  __handle_sysrq+0x9b/0x190
[  933.000011][ T4411]  </TASK>
[  933.000012][ T4411] ---[ end trace 1f2e3d4c5b6a7988 ]---
";

#[test]
fn titles_do_not_drift() {
    let a = reports(OOPS.as_bytes(), Guest::Linux);
    let b = reports(OOPS_DRIFTED.as_bytes(), Guest::Linux);
    assert_eq!(a[0].title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
    assert_eq!(a[0].title, b[0].title);
    let w1 =
        "WARNING: CPU: 0 PID: 1 at lib/list.c:12 list_thing+0x1/0x2\nCall Trace:\n f+0x1/0x2\n---[ end trace 1 ]---\n";
    let w2 = "[ 1.2] WARNING: CPU: 15 PID: 3321 at lib/list.c:97 list_thing.cold+0x99/0x200 [listmod]\n[ 1.3] Call Trace:\n[ 1.4]  g+0x1/0x2\n[ 1.5] ---[ end trace 2 ]---\n";
    assert_eq!(reports(w1.as_bytes(), Guest::Linux)[0].title, "WARNING in list_thing");
    assert_eq!(reports(w2.as_bytes(), Guest::Linux)[0].title, "WARNING in list_thing");
    let p1 = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n";
    let p2 = "[    7.5][    T1] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(8,3)\n";
    assert_eq!(
        reports(p1.as_bytes(), Guest::Linux)[0].title,
        "kernel panic: VFS: Unable to mount root fs on unknown-block(NUM,NUM)"
    );
    assert_eq!(reports(p1.as_bytes(), Guest::Linux)[0].title, reports(p2.as_bytes(), Guest::Linux)[0].title);
    let h1 = "INFO: task a:1 blocked for more than 120 seconds.\nCall Trace:\n schedule+0x1/0x2\n stuck_fn+0x1/0x2\n";
    let h2 = "INFO: task kworker/u4:2:39 blocked for more than 5 seconds.\nCall Trace:\n schedule+0x9/0x20\n stuck_fn+0x7/0x8\n";
    assert_eq!(reports(h1.as_bytes(), Guest::Linux)[0].title, "INFO: task hung in stuck_fn");
    assert_eq!(reports(h1.as_bytes(), Guest::Linux)[0].title, reports(h2.as_bytes(), Guest::Linux)[0].title);
}

#[test]
fn a_report_the_console_cuts_is_corrupted() {
    // Cut after its first trace frame: whole enough, the end not seen.
    let cut = &OOPS[..OOPS.find("[   12.875700]").unwrap()];
    let r = &reports(cut.as_bytes(), Guest::Linux)[0];
    assert_eq!(r.corrupted, None);
    assert!(!r.end_seen);
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
    // Cut after its RIP line, before its trace: the title still names the function,
    // and the report is corrupted.
    let cut = &OOPS[..OOPS.find("Call Trace").unwrap()];
    let r = &reports(cut.as_bytes(), Guest::Linux)[0];
    assert_eq!(r.corrupted, Some(Corruption::Cut));
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
    // Cut before any frame of its own: corrupted.
    let cut = &OOPS[..OOPS.find("[   12.874300]").unwrap()];
    let r = &reports(cut.as_bytes(), Guest::Linux)[0];
    assert_eq!(r.corrupted, Some(Corruption::Cut));
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in corrupted");
    // Whole, its end seen.
    assert!(reports(OOPS.as_bytes(), Guest::Linux)[0].end_seen);
    // Cut before any frame: the title says so.
    let r = &reports(b"[ 1.0] general protection fault: 0000 [#1] SMP\n[ 1.1] CPU: 0 PID: 1\n", Guest::Linux)[0];
    assert_eq!(r.title, "general protection fault in corrupted");
    assert!(r.is_corrupted());
}

#[test]
fn other_output_inside_a_report_is_corrupted() {
    let at = OOPS.find("[   12.875600]").unwrap();
    let console = format!("{}hello from user space\n{}", &OOPS[..at], &OOPS[at..]);
    let r = &reports(console.as_bytes(), Guest::Linux)[0];
    assert_eq!(r.corrupted, Some(Corruption::Interleaved { at }));
    assert_eq!(r.range, 0..console.len());
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
    // More lines of user space than GAP_LIMIT: the stamped report goes on around them.
    let at = OOPS.find("[   12.874225]").unwrap();
    let console = format!("{}{}{}", &OOPS[..at], "executing program\n".repeat(10), &OOPS[at..]);
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].corrupted, Some(Corruption::Interleaved { at }));
    assert!(got[0].end_seen);
}

#[test]
fn two_reports_in_one_console() {
    let warn = "[    5.0] WARNING: CPU: 0 PID: 9 at fs/a.c:1 first_fn+0x1/0x2\n[    5.1] Call Trace:\n[    5.2]  caller+0x1/0x2\n[    5.3] ---[ end trace 0000000000000000 ]---\n";
    let console = format!("boot line\n{warn}user line\n{OOPS}after\n");
    let got = reports(console.as_bytes(), Guest::Linux);
    let titles: Vec<_> = got.iter().map(|r| r.title.as_str()).collect();
    assert_eq!(
        titles,
        ["WARNING in first_fn", "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash"]
    );
    assert_eq!(&console[got[0].range.clone()], warn);
    assert_eq!(&console[got[1].range.clone()], OOPS);
    assert!(got.iter().all(|r| r.corrupted.is_none()));
}

#[test]
fn a_report_is_yielded_when_its_end_is_seen_and_pending_before() {
    let mut s = Scanner::new(Guest::Linux);
    let first_line = OOPS.find('\n').unwrap() + 1;
    assert!(s.feed(&OOPS.as_bytes()[..first_line]).is_empty());
    let p = s.pending().expect("the first line opens a report");
    assert_eq!((p.start, p.end), (0, first_line));
    let got = s.feed(&OOPS.as_bytes()[first_line..]);
    assert_eq!(got.len(), 1, "the end marker ends it at once");
    assert!(s.pending().is_none());
    assert!(s.finish().is_empty());
}

const PIECES: &[&str] = &[
    OOPS,
    "[   41.2] WARNING: CPU: 1 PID: 312 at net/core/dev.c:3345 skb_warn+0x1f0/0x2c0\n",
    "Kernel panic - not syncing: Fatal exception\n",
    "---[ end trace 0000000000000000 ]---\n",
    "INFO: task a:1 blocked for more than 120 seconds.\n",
    "Call Trace:\n",
    " schedule+0x1/0x2\n",
    " ? helper+0x1/0x2\n",
    "[<ffffffff8075a1ea>] f+0x1e/0x2a\n",
    "==================================================================\n",
    "BUG: KASAN: use-after-free in g+0x1/0x2\n",
    "Read of size 8 at addr ffff by task x/1\n",
    "panic: ilock: no type\n",
    "backtrace:\n0x0000000080002a4c\n",
    "PANIC boom at src/main.rs:1:2\r\n",
    "  #0 0x0000000080800d06 (core)\r\n  #1 0x00000000808028f6\r\n",
    "end of backtrace\r\n",
    "[pid 2] [p] PANIC at src/main.rs:1:2\r\n",
    "ordinary output\n",
    "login: ",
    "\n",
    "\u{1b}[31mred\u{1b}[0m\n",
    "\u{fffd}\u{fffd}\n",
    "------------[ cut here ]------------\n",
];

fn key(r: &Report) -> String {
    format!("{r:?}")
}

#[test]
fn chunked_feeding_equals_whole_feeding() {
    let mut rng = fastrand::Rng::with_seed(0x7269_6167_6174);
    for _ in 0..250 {
        let mut console = Vec::new();
        for _ in 0..rng.usize(..40) {
            let piece = PIECES[rng.usize(..PIECES.len())].as_bytes();
            if rng.usize(..10) == 0 {
                // A piece cut short, a long line, or a stray byte.
                match rng.usize(..3) {
                    0 => console.extend_from_slice(&piece[..rng.usize(..piece.len() + 1)]),
                    1 => console.extend(std::iter::repeat_n(b'a', rng.usize(..3000))),
                    _ => console.push(rng.usize(..256) as u8),
                }
            } else {
                console.extend_from_slice(piece);
            }
        }
        for guest in [Guest::Linux, Guest::Xv6, Guest::Reference, Guest::Generic] {
            let whole: Vec<String> = reports(&console, guest).iter().map(key).collect();
            let mut s = Scanner::new(guest);
            let mut got = Vec::new();
            let mut at = 0;
            while at < console.len() {
                let most = if rng.usize(..2) == 0 { 8 } else { 400 };
                let n = 1 + rng.usize(..most);
                let end = (at + n).min(console.len());
                got.extend(s.feed(&console[at..end]));
                at = end;
            }
            got.extend(s.finish());
            let got: Vec<String> = got.iter().map(key).collect();
            assert_eq!(got, whole, "{guest:?} on {:?}", String::from_utf8_lossy(&console));
            for r in reports(&console, guest) {
                assert!(r.range.start < r.range.end && r.range.end <= console.len());
            }
        }
    }
}

fn title(console: &str) -> String {
    reports(console.as_bytes(), Guest::Linux).first().map(|r| r.title.clone()).unwrap_or_default()
}

#[test]
fn names_that_drift_between_kernels_read_alike() {
    // RCU's grace-period waits, merged and renamed across kernels.
    let a = "INFO: task a:1 blocked for more than 120 seconds.\nCall Trace:\n schedule+0x1/0x2\n synchronize_sched+0x1/0x2\n";
    let b = "INFO: task a:1 blocked for more than 120 seconds.\nCall Trace:\n schedule+0x1/0x2\n synchronize_rcu_expedited.cold+0x1/0x2\n";
    assert_eq!(title(a), "INFO: task hung in synchronize_rcu");
    assert_eq!(title(a), title(b));
    // A system call's entry points, whatever the kernel's wrapper.
    let s1 = "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [a:1]\nCall Trace:\n futex_wait+0x1/0x2\n do_futex+0x1/0x2\n __x64_sys_futex+0x1/0x2\n do_syscall_64+0x1/0x2\n";
    let s2 = "BUG: soft lockup - CPU#3 stuck for 23s! [b:7]\nCall Trace:\n futex_wait+0x1/0x2\n do_futex+0x1/0x2\n SyS_futex+0x1/0x2\n entry_SYSCALL_64_fastpath+0x1/0x2\n";
    assert_eq!(title(s1), "BUG: soft lockup in sys_futex");
    assert_eq!(title(s1), title(s2));
    // A task and its pid are no part of a title.
    let l1 = "[ BUG: syz-executor/31761 still has locks held! ]\nCall Trace:\n pipe_lock+0x1/0x2\n";
    let l2 = "[ BUG: kworker/u4:2/39 still has locks held! ]\nCall Trace:\n pipe_lock+0x1/0x2\n";
    assert_eq!(title(l1), "BUG: still has locks held in pipe_lock");
    assert_eq!(title(l1), title(l2));
}

#[test]
fn a_report_glued_to_other_output_is_found() {
    let console = "syzkaller login: [   35.1] BUG: using smp_processor_id() in preemptible [00000000] code: a/3344\n[   35.2] Call Trace:\n[   35.3]  debug_smp_processor_id+0x1/0x2\n[   35.4]  get_cache_size+0x1/0x2\n";
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got[0].title, "BUG: using smp_processor_id() in preemptible code in get_cache_size");
    assert_eq!(got[0].range.start, 0);
    let glued = "2018/01/09 14:28:48 BUG: memory leak\nunreferenced object 0xffff (size 32):\n  backtrace:\n    [<ffffffff8146b7c8>] kmemleak_alloc+0x1/0x2\n    [<ffffffff8146b7c9>] new_thing+0x1/0x2\n";
    assert_eq!(title(glued), "memory leak in new_thing");
}

#[test]
fn a_free_form_warning_line_is_a_report_only_with_a_backtrace() {
    assert!(reports(
        b"[    1.0] WARNING: fbcon: Driver 'x' missed to adjust virtual screen size\n[    1.1] ok\n",
        Guest::Linux
    )
    .is_empty());
    let traced =
        "WARNING: bad unlock balance detected!\nCall Trace:\n dump_stack+0x1/0x2\n ipmr_mfc_seq_stop+0x1/0x2\n";
    assert_eq!(title(traced), "WARNING: bad unlock balance in ipmr_mfc_seq_stop");
}

#[test]
fn another_tasks_lines_inside_a_report_neither_end_nor_corrupt_it() {
    let other = "[ 1418.060540][ T4436] vhci_hcd: disconnect device\n".repeat(6);
    let console = format!(
        "[ 1418.056449][ T6604] Unable to handle kernel paging request at virtual address dfffa00000000003\n\
         {other}\
         [ 1418.097299][ T6604] Internal error: Oops: 96000004 [#1] PREEMPT SMP\n\
         [ 1418.103355][ T6604] pc : selinux_socket_sendmsg+0x28/0x58\n\
         [ 1418.104161][ T6604] lr : selinux_socket_sendmsg+0x18/0x58\n\
         [ 1418.110000][ T6604] Call trace:\n\
         [ 1418.110100][ T6604]  selinux_socket_sendmsg+0x28/0x58\n\
         [ 1418.110200][ T6604]  security_socket_sendmsg+0x54/0x90\n\
         [ 1418.110300][ T6604] ---[ end trace 0000000000000000 ]---\n"
    );
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].title, "BUG: unable to handle kernel paging request in selinux_socket_sendmsg");
    assert_eq!(got[0].corrupted, None);
    assert!(got[0].end_seen);
}

#[test]
fn a_short_word_before_a_colon_is_not_a_register() {
    // A console with no timestamps: "init: ..." between the trace's lines is someone
    // else's output, while "RAX:", "x29:", "s11:" and arm's "dd40:" are the report's.
    let console = "\
BUG: kernel NULL pointer dereference, address: 0000000000000000
RIP: 0010:sysrq_handle_crash+0x16/0x20
RAX: 0000000000000000 RBX: ffff888004a2c000
x29: ffff80000a6b3c60 x28: ffff0000c1b2a200
s11: 0000000000000000 t3 : ffffffff8075a1cc
dd40:                   977bdda0 8062eec8
Call Trace:
init: starting pid 42
 __handle_sysrq+0x43/0x11e
---[ end trace 0000000000000000 ]---
";
    let r = &reports(console.as_bytes(), Guest::Linux)[0];
    let at = console.find("init:").unwrap();
    assert_eq!(r.corrupted, Some(Corruption::Interleaved { at }));
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
}

#[test]
fn a_non_ascii_word_before_a_colon_inside_a_report_is_read() {
    // Found by the crash_reports fuzz target: the register test cut a word at its first
    // byte, inside a multi-byte character.
    let console = "[  250.000000] INFO: task sync:1203 blocked for more than 5 seconds.\n\u{fffd}: .\né: x\n";
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].title, "INFO: task hung in corrupted");
}
