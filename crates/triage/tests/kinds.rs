//! One console excerpt per kind and per width, written here in the shape the kernels
//! print them (not copied from anyone's test data), with the title, kind, guilty frame
//! and corrupted flag each must give.

use testbench_triage::{reports, Corruption, CrashKind, Guest, Report};

fn one(console: &str, guest: Guest) -> Report {
    let got = reports(console.as_bytes(), guest);
    assert_eq!(got.len(), 1, "one report expected, got {got:#?}");
    got.into_iter().next().unwrap()
}

fn check(console: &str, kind: CrashKind, title: &str, guilty: Option<&str>) -> Report {
    let r = one(console, Guest::Linux);
    assert_eq!(r.title, title);
    assert_eq!(r.kind, kind);
    assert_eq!(r.guilty_frame.as_ref().and_then(|f| f.name()), guilty);
    r
}

pub const X86_WARNING: &str = "\
[   41.201030] ------------[ cut here ]------------
[   41.201544] WARNING: CPU: 1 PID: 312 at net/core/dev.c:3345 skb_warn_bad_offload+0x1f0/0x2c0
[   41.202100] Modules linked in:
[   41.202400] CPU: 1 PID: 312 Comm: poc Not tainted 6.1.0-18-amd64 #1  Debian 6.1.76-1
[   41.202999] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014
[   41.203500] RIP: 0010:skb_warn_bad_offload+0x1f0/0x2c0
[   41.203900] Code: 48 c7 c7 a0 b1 4e 82 e8 11 22 33 44 <0f> 0b 5b 5d c3 cc cc cc cc
[   41.204300] RSP: 0018:ffffc90000b7fb08 EFLAGS: 00010286
[   41.204700] RAX: 0000000000000000 RBX: ffff888004a2c000 RCX: 0000000000000027
[   41.205100] RDX: ffff88803ec1f1a8 RSI: 0000000000000001 RDI: ffff88803ec1f1a0
[   41.205500] Call Trace:
[   41.205600]  <TASK>
[   41.205700]  ? __warn+0x7d/0xc0
[   41.205800]  ? skb_warn_bad_offload+0x1f0/0x2c0
[   41.205900]  ? report_bug+0xe2/0x150
[   41.206000]  ? handle_bug+0x41/0x70
[   41.206100]  ? exc_invalid_op+0x13/0x60
[   41.206200]  ? asm_exc_invalid_op+0x16/0x20
[   41.206300]  __skb_gso_segment+0x10a/0x190
[   41.206400]  validate_xmit_skb+0x16c/0x2f0
[   41.206500]  __dev_queue_xmit+0x4a5/0xc90
[   41.206600]  packet_sendmsg+0x1167/0x1a30
[   41.206700]  __sys_sendto+0x1f6/0x210
[   41.206800]  __x64_sys_sendto+0x24/0x30
[   41.206900]  do_syscall_64+0x58/0xc0
[   41.207000]  entry_SYSCALL_64_after_hwframe+0x64/0xce
[   41.207100]  </TASK>
[   41.207200] ---[ end trace 0000000000000000 ]---
";

#[test]
fn x86_warning() {
    let r = check(X86_WARNING, CrashKind::Warning, "WARNING in skb_warn_bad_offload", Some("skb_warn_bad_offload"));
    assert_eq!(r.corrupted, None);
    assert_eq!(r.range, 0..X86_WARNING.len());
    assert!(r.frames.iter().any(|f| f.name() == Some("packet_sendmsg")));
}

/// Debian's amd64 kernel after `echo c > /proc/sysrq-trigger`.
pub const X86_SYSRQ: &str = "\
[   12.873410] sysrq: Trigger a crash
[   12.873812] Kernel panic - not syncing: sysrq triggered crash
[   12.874225] CPU: 0 PID: 1 Comm: sh Not tainted 6.1.0-18-amd64 #1  Debian 6.1.76-1
[   12.874700] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014
[   12.875100] Call Trace:
[   12.875200]  <TASK>
[   12.875300]  dump_stack_lvl+0x44/0x5c
[   12.875400]  panic+0x118/0x2ef
[   12.875500]  sysrq_handle_crash+0x16/0x20
[   12.875600]  __handle_sysrq.cold+0x43/0x11e
[   12.875700]  write_sysrq_trigger+0x24/0x40
[   12.875800]  proc_reg_write+0x56/0xa0
[   12.875900]  vfs_write+0xc7/0x3c0
[   12.876000]  ksys_write+0x6b/0xf0
[   12.876100]  do_syscall_64+0x58/0xc0
[   12.876200]  entry_SYSCALL_64_after_hwframe+0x64/0xce
[   12.876300]  </TASK>
[   12.876400] Kernel Offset: 0x2a000000 from 0xffffffff81000000 (relocation range: 0xffffffff80000000-0xffffffffbfffffff)
[   12.876500] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---
";

#[test]
fn x86_sysrq_panic() {
    let r = check(X86_SYSRQ, CrashKind::Panic, "kernel panic: sysrq triggered crash", Some("sysrq_handle_crash"));
    assert_eq!(r.corrupted, None);
    assert_eq!(&X86_SYSRQ[r.range.clone()][..14], "[   12.873812]");
}

/// Debian's arm64 kernel: a NULL dereference, then the panic of `panic_on_oops`.
pub const ARM64_NULL: &str = "\
[    9.512332] Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000
[    9.513010] Mem abort info:
[    9.513200]   ESR = 0x0000000096000045
[    9.513400]   EC = 0x25: DABT (current EL), IL = 32 bits
[    9.513700] Data abort info:
[    9.513900]   ISV = 0, ISS = 0x00000045
[    9.514100] user pgtable: 4k pages, 48-bit VAs, pgdp=0000000041a3c000
[    9.514400] Internal error: Oops: 0000000096000045 [#1] SMP
[    9.514700] Modules linked in:
[    9.514900] CPU: 2 PID: 187 Comm: sh Not tainted 6.1.0-18-arm64 #1  Debian 6.1.76-1
[    9.515200] Hardware name: linux,dummy-virt (DT)
[    9.515400] pstate: 60400005 (nZCv daif +PAN -UAO -TCO -DIT -SSBS BTYPE=--)
[    9.515700] pc : sysrq_handle_crash+0x24/0x30
[    9.515900] lr : __handle_sysrq+0x94/0x1b0
[    9.516100] sp : ffff80000a6b3c60
[    9.516300] x29: ffff80000a6b3c60 x28: ffff0000c1b2a200 x27: 0000000000000000
[    9.516600] x26: 0000000000000000 x25: 0000000000000000 x24: 0000000000000000
[    9.516900] Call trace:
[    9.517000]  sysrq_handle_crash+0x24/0x30
[    9.517100]  __handle_sysrq+0x94/0x1b0
[    9.517200]  write_sysrq_trigger+0x7c/0xa0
[    9.517300]  proc_reg_write+0xac/0x100
[    9.517400]  vfs_write+0xd8/0x2a0
[    9.517500]  ksys_write+0x78/0x110
[    9.517600]  __arm64_sys_write+0x24/0x30
[    9.517700]  invoke_syscall+0x50/0x120
[    9.517800]  el0_svc_common.constprop.0+0x4c/0xf4
[    9.517900]  do_el0_svc+0x34/0xd0
[    9.518000]  el0_svc+0x34/0xd4
[    9.518100]  el0t_64_sync_handler+0xf4/0x120
[    9.518200]  el0t_64_sync+0x18c/0x190
[    9.518300] Code: d2800001 b9000820 d5033e9f 52800020 (39000020)
[    9.518400] ---[ end trace 0000000000000000 ]---
";

#[test]
fn arm64_null_dereference() {
    let r = check(
        ARM64_NULL,
        CrashKind::PageFault,
        "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash",
        Some("sysrq_handle_crash"),
    );
    assert_eq!(r.corrupted, None);
}

/// Debian's riscv64 kernel: the same crash, riscv's trace format.
pub const RISCV_NULL: &str = "\
[    8.103721] Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000
[    8.104588] Oops [#1]
[    8.104803] Modules linked in:
[    8.105101] CPU: 0 PID: 143 Comm: sh Not tainted 6.1.0-18-riscv64 #1  Debian 6.1.76-1
[    8.105702] Hardware name: riscv-virtio,qemu (DT)
[    8.106011] epc : sysrq_handle_crash+0x1e/0x2a
[    8.106330]  ra : __handle_sysrq+0xa6/0x1a4
[    8.106640] epc : ffffffff8075a1ea ra : ffffffff8075a89a sp : ff20000000613d40
[    8.107100]  gp : ffffffff81a2b7e8 tp : ff6000000213e200 t0 : ffffffff8075a1cc
[    8.107500] status: 0000000200000120 badaddr: 0000000000000000 cause: 000000000000000f
[    8.107900] [<ffffffff8075a1ea>] sysrq_handle_crash+0x1e/0x2a
[    8.108200] [<ffffffff8075a89a>] __handle_sysrq+0xa6/0x1a4
[    8.108500] [<ffffffff8075af3a>] write_sysrq_trigger+0x64/0x78
[    8.108800] [<ffffffff802f1e20>] proc_reg_write+0x4e/0x9e
[    8.109100] [<ffffffff80272c5e>] vfs_write+0xb2/0x2e6
[    8.109400] [<ffffffff80272f6a>] ksys_write+0x60/0xe0
[    8.109700] [<ffffffff80272ff6>] sys_write+0x10/0x18
[    8.110000] [<ffffffff80003cb6>] ret_from_syscall+0x0/0x2
[    8.110300] ---[ end trace 0000000000000000 ]---
";

#[test]
fn riscv64_null_dereference() {
    let r = check(
        RISCV_NULL,
        CrashKind::PageFault,
        "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash",
        Some("sysrq_handle_crash"),
    );
    assert_eq!(r.corrupted, None);
    let first = r.frames.iter().find(|f| f.address.is_some()).unwrap();
    assert_eq!(first.address, Some(0xffff_ffff_8075_a1ea));
    assert_eq!((first.offset, first.size), (Some(0x1e), Some(0x2a)));
}

pub const KASAN: &str = "\
[  102.110000] ==================================================================
[  102.110500] BUG: KASAN: use-after-free in ext4_find_entry+0x1a3c/0x1b10
[  102.111000] Read of size 8 at addr ffff88806b4c2d18 by task cat/2231
[  102.111500] 
[  102.111600] CPU: 3 PID: 2231 Comm: cat Not tainted 6.6.0 #4
[  102.111700] Call Trace:
[  102.111800]  <TASK>
[  102.111900]  dump_stack_lvl+0xd9/0x150
[  102.112000]  print_report+0xc1/0x5e0
[  102.112100]  kasan_report+0xba/0xf0
[  102.112200]  __asan_load8+0x7e/0xb0
[  102.112300]  ext4_find_entry+0x1a3c/0x1b10
[  102.112400]  ext4_lookup+0x12a/0x5a0
[  102.112500]  __lookup_slow+0x24c/0x460
[  102.112600]  </TASK>
[  102.112700] 
[  102.112800] Allocated by task 2229:
[  102.112900]  kasan_save_stack+0x22/0x40
[  102.113000]  __kmalloc+0x5a/0x190
[  102.113100]  ext4_htree_store_dirent+0x8f/0x5a0
[  102.113200] 
[  102.113300] Freed by task 2229:
[  102.113400]  kasan_save_stack+0x22/0x40
[  102.113500]  kfree+0xd6/0x1c0
[  102.113600]  free_rb_tree_fname+0x6e/0xa0
[  102.113700] 
[  102.113800] The buggy address belongs to the object at ffff88806b4c2d00
[  102.113900]  which belongs to the cache kmalloc-64 of size 64
[  102.114000] ==================================================================
";

#[test]
fn kasan() {
    let r = check(KASAN, CrashKind::Kasan, "KASAN: use-after-free Read in ext4_find_entry", Some("ext4_find_entry"));
    assert_eq!(r.corrupted, None);
    assert!(r.frames.iter().any(|f| f.name() == Some("free_rb_tree_fname")), "the other stacks are kept as frames");
}

#[test]
fn kfence() {
    let console = "\
[   55.200000] ==================================================================
[   55.200100] BUG: KFENCE: out-of-bounds read in test_out_of_bounds_read+0xa8/0x22b
[   55.200200] 
[   55.200300] Out-of-bounds read at 0xffff8c3f2e291fff (1B left of kfence-#72):
[   55.200400]  test_out_of_bounds_read+0xa8/0x22b
[   55.200500]  kunit_try_run_case+0x51/0x85
[   55.200600] 
[   55.200700] kfence-#72: 0xffff8c3f2e292000-0xffff8c3f2e29201f, size=32, cache=kmalloc-32
[   55.200800] 
[   55.200900] CPU: 0 PID: 120 Comm: kunit_try_catch Not tainted 6.6.0 #1
[   55.201000] ==================================================================
";
    let r = check(
        console,
        CrashKind::Kfence,
        "KFENCE: out-of-bounds read in test_out_of_bounds_read",
        Some("test_out_of_bounds_read"),
    );
    assert_eq!(r.corrupted, None);
}

#[test]
fn ubsan() {
    let console = "\
[    3.310000] ================================================================================
[    3.310100] UBSAN: shift-out-of-bounds in fs/ext4/super.c:4190:25
[    3.310200] shift exponent 4294967295 is too large for 32-bit type 'int'
[    3.310300] CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.6.0 #1
[    3.310400] Call Trace:
[    3.310500]  <TASK>
[    3.310600]  dump_stack_lvl+0x48/0x70
[    3.310700]  __ubsan_handle_shift_out_of_bounds+0x157/0x2f0
[    3.310800]  ext4_fill_super+0x2b39/0x2c20
[    3.310900]  get_tree_bdev+0x16f/0x260
[    3.311000]  </TASK>
[    3.311100] ================================================================================
";
    let r = check(console, CrashKind::Ubsan, "UBSAN: shift-out-of-bounds in ext4_fill_super", Some("ext4_fill_super"));
    assert_eq!(r.corrupted, None);
}

#[test]
fn lockdep_possible_deadlock() {
    let console = "\
[   70.100000] ======================================================
[   70.100100] WARNING: possible circular locking dependency detected
[   70.100200] 6.6.0 #1 Not tainted
[   70.100300] ------------------------------------------------------
[   70.100400] poc/411 is trying to acquire lock:
[   70.100500] ffff888012345678 (&sb->s_type->i_mutex_key#9){+.+.}-{3:3}, at: ext4_xattr_set+0x11a/0x2c0
[   70.100600] 
[   70.100700] but task is already holding lock:
[   70.100800] ffff888087654321 (jbd2_handle){++++}-{0:0}, at: start_this_handle+0xfa6/0x1490
[   70.100900] 
[   70.101000] which lock already depends on the new lock.
[   70.101100] 
[   70.101200] the existing dependency chain (in reverse order) is:
[   70.101300] 
[   70.101400] -> #1 (jbd2_handle){++++}-{0:0}:
[   70.101500]        start_this_handle+0xfee/0x1490
[   70.101600]        jbd2__journal_start+0x3a0/0x770
[   70.101700] 
[   70.101800] stack backtrace:
[   70.101900] CPU: 1 PID: 411 Comm: poc Not tainted 6.6.0 #1
[   70.102000] Call Trace:
[   70.102100]  <TASK>
[   70.102200]  dump_stack_lvl+0x125/0x1b0
[   70.102300]  check_noncircular+0x2e6/0x3c0
[   70.102400]  __lock_acquire+0x2e3d/0x5de0
[   70.102500]  lock_acquire+0x1ae/0x520
[   70.102600]  down_write+0x92/0x200
[   70.102700]  ext4_xattr_set+0x11a/0x2c0
[   70.102800]  </TASK>
[   70.102900] random: crng init done
[   70.103000] random: 7 urandom warning(s) missed due to ratelimiting
[   70.103100] systemd[1]: Started Journal Service.
[   70.103200] EXT4-fs (sda): re-mounted.
";
    let r = check(console, CrashKind::Lockdep, "possible deadlock in ext4_xattr_set", Some("ext4_xattr_set"));
    assert_eq!(r.corrupted, None);
    assert!(console[r.range.clone()].ends_with("</TASK>\n"), "ends at its last line: {:?}", &console[r.range.clone()]);
}

#[test]
fn rcu_stall() {
    let console = "\
[  300.200000] rcu: INFO: rcu_preempt self-detected stall on CPU
[  300.200100] rcu: \t0-....: (2100 ticks this GP) idle=b5c/1/0x4000000000000000 softirq=1234/1234 fqs=1050
[  300.200200] \t(t=2100 jiffies g=3145 q=17 ncpus=2)
[  300.200300] CPU: 0 PID: 77 Comm: spin Not tainted 6.6.0 #1
[  300.200400] RIP: 0010:busy_loop_ioctl+0x35/0x60
[  300.200500] Code: 00 00 00 eb fe 66 90
[  300.200600] RSP: 0018:ffffc900003dfe58 EFLAGS: 00000246
[  300.200700] Call Trace:
[  300.200800]  <IRQ>
[  300.200900]  rcu_dump_cpu_stacks+0xed/0x170
[  300.201000]  rcu_sched_clock_irq+0x53e/0xa90
[  300.201100]  update_process_times+0x63/0xa0
[  300.201200]  </IRQ>
[  300.201300]  <TASK>
[  300.201400]  busy_loop_ioctl+0x35/0x60
[  300.201500]  __x64_sys_ioctl+0x8f/0xd0
[  300.201600]  do_syscall_64+0x3f/0x90
[  300.201700]  entry_SYSCALL_64_after_hwframe+0x6e/0xd8
[  300.201800]  </TASK>
";
    let r = check(console, CrashKind::RcuStall, "INFO: rcu detected stall in busy_loop_ioctl", Some("busy_loop_ioctl"));
    // The console ends inside it, after its backtrace: whole enough, its end not seen.
    assert_eq!(r.corrupted, None);
    assert!(!r.end_seen);
}

#[test]
fn hung_task() {
    let console = "\
[  250.000000] INFO: task sync:1203 blocked for more than 5 seconds.
[  250.000100]       Not tainted 6.1.0-18-amd64 #1 Debian 6.1.76-1
[  250.000200] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
[  250.000300] task:sync            state:D stack:0     pid:1203  ppid:1      flags:0x00004002
[  250.000400] Call Trace:
[  250.000500]  <TASK>
[  250.000600]  __schedule+0x34d/0x9e0
[  250.000700]  schedule+0x5a/0xd0
[  250.000800]  io_schedule+0x42/0x70
[  250.000900]  hang_in_d_state+0x4d/0x60 [dstate]
[  250.001000]  vfs_read+0xb1/0x2c0
[  250.001100]  </TASK>
[  250.001200] sh: line 1: echo: done
[  250.001300] login: 
[  250.001400] more user output
[  250.001500] and more
";
    let r = check(console, CrashKind::HungTask, "INFO: task hung in hang_in_d_state", Some("hang_in_d_state"));
    assert_eq!(r.guilty_frame.unwrap().module.as_deref(), Some("dstate"));
    assert_eq!(r.corrupted, None);
}

#[test]
fn riscv64_hung_task_in_a_frozen_filesystem_is_blamed_past_the_per_cpu_rwsem() {
    // The shape Debian's riscv64 kernel prints for a write into a frozen ext4
    // (tests/linux-hung-task.toml): the per-CPU rwsem's wait is a locking helper.
    let console = "\
[    7.408010] INFO: task init:146 blocked for more than 2 seconds.
[    7.408809]       Not tainted 6.12.117+deb13-riscv64 #1 Debian 6.12.117-1
[    7.409241] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
[    7.409822] task:init            state:D stack:0     pid:146   tgid:146   ppid:1      flags:0x00000002
[    7.410607] Call Trace:
[    7.411138] [<ffffffff80a7854c>] __schedule+0x3a6/0xbd2
[    7.412571] [<ffffffff80a78d9c>] schedule+0x24/0xd4
[    7.412865] [<ffffffff80091a56>] percpu_rwsem_wait+0xba/0x14e
[    7.413203] [<ffffffff80a7cabc>] __percpu_down_read+0x40/0xb2
[    7.413533] [<ffffffff803426c4>] mnt_want_write+0xb8/0xf4
[    7.413894] [<ffffffff8032bdf2>] path_openat+0x3ec/0xfce
[    7.414056] [<ffffffff8032ca5c>] do_filp_open+0x88/0x10e
[    7.414620] [<ffffffff80a8138a>] handle_exception+0x14a/0x156
testbench-guest: the next line
";
    let r = one(console, Guest::Linux);
    assert_eq!(r.kind, CrashKind::HungTask);
    assert_eq!(r.title, "INFO: task hung in mnt_want_write");
    assert_eq!(r.guilty_frame.as_ref().and_then(|f| f.name()), Some("mnt_want_write"));
}

#[test]
fn soft_and_hard_lockup() {
    let soft = "\
[   88.000000] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [spin:155]
[   88.000100] Modules linked in:
[   88.000200] CPU: 1 PID: 155 Comm: spin Not tainted 6.6.0 #1
[   88.000300] RIP: 0010:spin_forever+0x10/0x20
[   88.000400] Call Trace:
[   88.000500]  <TASK>
[   88.000600]  spin_forever+0x10/0x20
[   88.000700]  proc_spin_write+0x33/0x50
[   88.000710]  proc_reg_write+0x56/0xa0
[   88.000720]  vfs_write+0xc7/0x3c0
[   88.000730]  ksys_write+0x6b/0xf0
[   88.000740]  do_syscall_64+0x58/0xc0
[   88.000750]  entry_SYSCALL_64_after_hwframe+0x64/0xce
[   88.000800]  </TASK>
[   88.000900] x
[   88.001000] y
[   88.001100] z
[   88.001200] w
";
    // A stall is titled by where the CPU was sent: the outermost frame below the
    // system call's dispatch layers, not the loop the timer found it in.
    check(soft, CrashKind::SoftLockup, "BUG: soft lockup in proc_spin_write", Some("proc_spin_write"));
    let hard = "\
[   99.000000] watchdog: Watchdog detected hard LOCKUP on cpu 0
[   99.000100] CPU: 0 PID: 160 Comm: irqoff Not tainted 6.6.0 #1
[   99.000200] RIP: 0010:irqoff_loop+0x8/0x10
[   99.000300] Call Trace:
[   99.000400]  irqoff_loop+0x8/0x10
[   99.000500] ---[ end trace 0000000000000000 ]---
";
    check(hard, CrashKind::HardLockup, "BUG: hard lockup in irqoff_loop", Some("irqoff_loop"));
}

#[test]
fn out_of_memory_and_gpf_and_kernel_bug() {
    let oom = "\
[   10.000000] Out of memory: Killed process 99 (hog) total-vm:1048576kB, anon-rss:900000kB
[   10.000100] CPU: 0 PID: 99 Comm: hog Not tainted 6.6.0 #1
[   10.000200] Call Trace:
[   10.000300]  dump_stack_lvl+0x44/0x5c
[   10.000400]  dump_header+0x4a/0x211
[   10.000500]  out_of_memory+0x113/0x590
[   10.000600]  __alloc_pages_slowpath+0xb97/0xd10
[   10.000700]  hog_fault+0x21/0x40
[   10.000800] ---[ end trace 0000000000000000 ]---
";
    check(oom, CrashKind::OutOfMemory, "out of memory in hog_fault", Some("hog_fault"));
    let gpf = "\
[   20.000000] general protection fault, probably for non-canonical address 0xdffffc0000000003: 0000 [#1] PREEMPT SMP KASAN
[   20.000100] KASAN: null-ptr-deref in range [0x0000000000000018-0x000000000000001f]
[   20.000200] CPU: 1 PID: 5 Comm: kworker/1:0 Not tainted 6.6.0 #1
[   20.000300] RIP: 0010:tcp_retransmit_timer+0x1b2/0x2c0
[   20.000400] Call Trace:
[   20.000500]  tcp_write_timer_handler+0x5c/0x80
[   20.000600] ---[ end trace 0000000000000000 ]---
";
    check(
        gpf,
        CrashKind::GeneralProtection,
        "general protection fault in tcp_retransmit_timer",
        Some("tcp_retransmit_timer"),
    );
    let bug = "\
[   30.000000] ------------[ cut here ]------------
[   30.000100] kernel BUG at mm/slub.c:4231!
[   30.000200] invalid opcode: 0000 [#1] PREEMPT SMP
[   30.000300] CPU: 0 PID: 7 Comm: poc Not tainted 6.6.0 #1
[   30.000400] RIP: 0010:kfree+0x1c3/0x1d0
[   30.000500] Call Trace:
[   30.000600]  free_thing+0x12/0x20
[   30.000700] ---[ end trace 0000000000000000 ]---
";
    check(bug, CrashKind::Bug, "kernel BUG in free_thing", Some("free_thing"));
}

#[test]
fn riscv_illegal_instruction() {
    let console = "\
[    5.000000] Oops - illegal instruction [#1]
[    5.000100] CPU: 0 PID: 1 Comm: init Not tainted 6.1.0 #1
[    5.000200] epc : bad_insn_func+0x0/0x4
[    5.000300]  ra : caller_of_bad+0x1c/0x30
[    5.000400] [<ffffffff80001000>] bad_insn_func+0x0/0x4
[    5.000500] [<ffffffff80001100>] caller_of_bad+0x1c/0x30
[    5.000600] ---[ end trace 0000000000000000 ]---
";
    check(console, CrashKind::IllegalInstruction, "illegal instruction in bad_insn_func", Some("bad_insn_func"));
}

#[test]
fn xv6_panic_with_and_without_backtrace() {
    let r = one("hart 1 starting\ninit: starting sh\npanic: ilock: no type\n", Guest::Xv6);
    assert_eq!(r.title, "panic: ilock: no type");
    assert_eq!(r.kind, CrashKind::Panic);
    assert!(r.frames.is_empty());
    assert_eq!(r.corrupted, None);
    let console = "panic: virtio_disk_intr status\nbacktrace:\n0x0000000080002a4c\n0x00000000800028b0\n$ \n";
    let r = one(console, Guest::Xv6);
    assert_eq!(r.title, "panic: virtio_disk_intr status");
    let addrs: Vec<_> = r.frames.iter().map(|f| f.address).collect();
    assert_eq!(addrs, [Some(0x8000_2a4c), Some(0x8000_28b0)]);
    assert_eq!(
        &console[r.range],
        "panic: virtio_disk_intr status\nbacktrace:\n0x0000000080002a4c\n0x00000000800028b0\n"
    );
}

#[test]
fn reference_kernel_panic_line() {
    let console =
        "harts 2\nPANIC trap in the kernel: scause 0xd sepc 0xffffffc080201234 stval 0x0 at src/proc.rs:676:9\r\n";
    let r = one(console, Guest::Reference);
    assert_eq!(r.title, "panic: trap in the kernel: scause ADDR sepc ADDR stval ADDR");
    assert_eq!(r.kind, CrashKind::Panic);
    assert_eq!(r.guilty_frame.unwrap().location.as_deref(), Some("src/proc.rs:676:9"));
    // The kernel's PANIC line is followed by its backtrace: a console that ends after
    // the line alone cut the report.
    assert_eq!(r.corrupted, Some(Corruption::Cut));
    assert!(!r.end_seen);
    let r = one("PANIC assertion failed: len <= cap at src/mm.rs:88:5\r\n", Guest::Reference);
    assert_eq!(r.kind, CrashKind::Assertion);
    assert_eq!(r.title, "panic: assertion failed: len <= cap");
}

/// The reference kernel's panic as `panic-test` printed it on riscv64 (the end of a
/// console of reference-panic-backtrace): the PANIC line, the backtrace of call sites
/// (`core::panicking::panic_fmt` marked as the core library's, then `third`, `second`,
/// `first`, `run`, `kmain`, `_start`), the end line.
pub const REFERENCE_PANIC: &str = "\
kernel: disk: none on virtio-mmio slot 0\r
kernel: net: none on virtio-mmio slot 2\r
PANIC panic-test: three calls deep at kernel/src/panic_test.rs:38:9\r
backtrace:\r
  #0 0x0000000080800d20 (core)\r
  #1 0x000000008080290e\r
  #2 0x0000000080802942\r
  #3 0x000000008080289e\r
  #4 0x00000000808027da\r
  #5 0x0000000080808b3c\r
  #6 0x000000008080001e\r
end of backtrace\r
";

#[test]
fn reference_kernel_backtrace() {
    let r = one(REFERENCE_PANIC, Guest::Reference);
    assert_eq!(r.title, "panic: panic-test: three calls deep");
    assert_eq!(r.kind, CrashKind::Panic);
    let addrs: Vec<_> = r.frames.iter().map(|f| f.address.unwrap()).collect();
    assert_eq!(addrs, [0x8080_0d20, 0x8080_290e, 0x8080_2942, 0x8080_289e, 0x8080_27da, 0x8080_8b3c, 0x8080_001e]);
    // The first frame outside the core library's panic machinery, at the PANIC line's
    // source place.
    let guilty = r.guilty_frame.unwrap();
    assert_eq!(guilty.address, Some(0x8080_290e));
    assert_eq!(guilty.location.as_deref(), Some("kernel/src/panic_test.rs:38:9"));
    assert_eq!(r.corrupted, None);
    assert!(r.end_seen);
    let start = REFERENCE_PANIC.find("PANIC").unwrap();
    assert_eq!(r.range, start..REFERENCE_PANIC.len());
    // riscv32's addresses, and an end line that says why the walk stopped.
    let rv32 = "PANIC boom at src/main.rs:1:2\r\nbacktrace:\r\n  #0 0x80800a10 (core)\r\n  #1 0x80800b20 (core)\r\n  #2 0x80801c30\r\nend of backtrace: no frame record of this hart's stack at fp 0x10\r\nafter\r\n";
    let r = one(rv32, Guest::Reference);
    assert_eq!(r.frames.len(), 3);
    assert_eq!(r.guilty_frame.unwrap().address, Some(0x8080_1c30));
    assert_eq!((r.corrupted, r.end_seen), (None, true));
    assert_eq!(&rv32[r.range], &rv32[..rv32.find("after").unwrap()]);
    // Only the core library's frames: no guilty address, the source place stays.
    let machinery = "PANIC boom at src/main.rs:1:2\nbacktrace:\n  #0 0x80800a10 (core)\nend of backtrace\n";
    let guilty = one(machinery, Guest::Reference).guilty_frame.unwrap();
    assert_eq!((guilty.address, guilty.location.as_deref()), (None, Some("src/main.rs:1:2")));
}

#[test]
fn a_reference_backtrace_cut_or_interleaved_is_corrupted() {
    // The console ends inside the backtrace (the boot was ended at the PANIC line).
    let cut = &REFERENCE_PANIC[..REFERENCE_PANIC.find("  #3").unwrap()];
    let r = one(cut, Guest::Reference);
    assert_eq!(r.corrupted, Some(Corruption::Cut));
    assert!(!r.end_seen);
    assert_eq!(r.frames.len(), 3);
    assert_eq!(r.guilty_frame.unwrap().address, Some(0x8080_290e));
    // Other output takes over before the end line.
    let taken = format!("{cut}one\r\ntwo\r\nthree\r\nfour\r\nfive\r\n");
    let r = one(&taken, Guest::Reference);
    assert_eq!(r.corrupted, Some(Corruption::Cut));
    assert_eq!(&taken[r.range], &cut[cut.find("PANIC").unwrap()..]);
    // Another hart's line inside it: the report runs on to its end line, interleaved.
    let inside = REFERENCE_PANIC.replace("  #3", "kernel: harts 2\r\n  #3");
    let r = one(&inside, Guest::Reference);
    let at = inside.find("kernel: harts").unwrap();
    assert_eq!(r.corrupted, Some(Corruption::Interleaved { at }));
    assert_eq!(r.frames.len(), 7);
    assert!(r.end_seen);
    // The next report before the end line cuts the first.
    let two = format!("{cut}PANIC again at src/main.rs:3:4\r\n");
    let got = reports(two.as_bytes(), Guest::Reference);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].corrupted, Some(Corruption::Cut));
    assert_eq!(got[0].title, "panic: panic-test: three calls deep");
}

#[test]
fn a_programs_panic_on_the_reference_guest_is_its_one_line() {
    // Behind its prefix: a program's panic, which prints no backtrace.
    let console = "[pid 2] [panicker] PANIC on purpose\r\n[server] panicker place 2 pid 3 exited with status 101\r\n";
    let r = one(console, Guest::Reference);
    assert_eq!(r.title, "panic: on purpose");
    assert_eq!((r.corrupted, r.end_seen), (None, true));
    assert!(r.frames.is_empty());
}

#[test]
fn generic_guest_reads_only_panic_bug_and_warning() {
    let console = format!("{}\n{X86_WARNING}", "INFO: task x:1 blocked for more than 5 seconds.");
    let got = reports(console.as_bytes(), Guest::Generic);
    let titles: Vec<_> = got.iter().map(|r| r.title.as_str()).collect();
    assert_eq!(titles, ["WARNING in skb_warn_bad_offload"]);
    let got = reports(b"boot\npanic: out of frames\n", Guest::Generic);
    assert_eq!(got[0].title, "panic: out of frames");
    // A BUG line is read whatever kind its words make it.
    let got = reports(
        X86_SYSRQ
            .replace(
                "Kernel panic - not syncing: sysrq triggered crash",
                "BUG: kernel NULL pointer dereference, address: 0",
            )
            .as_bytes(),
        Guest::Generic,
    );
    assert_eq!(got[0].title, "BUG: unable to handle kernel NULL pointer dereference in sysrq_handle_crash");
}

#[test]
fn no_crash_no_report() {
    let console = "[    0.000000] Linux version 6.1.0\n[    1.0] Run /init as init process\nhello\nPANICKY is a word\n";
    assert!(reports(console.as_bytes(), Guest::Linux).is_empty());
    assert!(reports(b"", Guest::Linux).is_empty());
}

#[test]
fn kasan_before_4_14_names_the_access_on_its_first_line() {
    let head = "[   59.534220] ==================================================================\n[   59.541645] BUG: KASAN: slab-out-of-bounds in gup_huge_pmd+0x739/0x770 at addr ffff8800b46111c0\n";
    let trace =
        "[   59.541700] Call Trace:\n[   59.541800]  dump_stack+0x1/0x2\n[   59.541900]  gup_huge_pmd+0x739/0x770\n";
    let r = one(&format!("{head}{trace}"), Guest::Linux);
    assert_eq!(r.title, "KASAN: slab-out-of-bounds in gup_huge_pmd at addr ADDR");
    let read = "[   59.541650] Read of size 8 by task a/1\n";
    let r = one(&format!("{head}{read}{trace}"), Guest::Linux);
    assert_eq!(r.title, "KASAN: slab-out-of-bounds Read in gup_huge_pmd");
}

#[test]
fn a_stall_inside_a_softirq_is_titled_by_its_handler() {
    let console = "\
[  300.200000] rcu: INFO: rcu_preempt self-detected stall on CPU
[  300.200700] Call Trace:
[  300.200800]  <IRQ>
[  300.200900]  rcu_dump_cpu_stacks+0xed/0x170
[  300.201000]  rcu_sched_clock_irq+0x53e/0xa90
[  300.201100]  update_process_times+0x63/0xa0
[  300.201110]  hrtimer_interrupt+0x1/0x2
[  300.201120]  sysvec_apic_timer_interrupt+0x1/0x2
[  300.201130]  asm_sysvec_apic_timer_interrupt+0x1/0x2
[  300.201140]  ip6_route_input+0x1/0x2
[  300.201150]  ipv6_rcv+0x1/0x2
[  300.201160]  __netif_receive_skb_one_core+0x1/0x2
[  300.201170]  process_backlog+0x1/0x2
[  300.201180]  net_rx_action+0x1/0x2
[  300.201190]  __do_softirq+0x1/0x2
[  300.201200]  </IRQ>
[  300.201300]  <TASK>
[  300.201400]  tun_get_user+0x35/0x60
[  300.201500]  __x64_sys_write+0x8f/0xd0
[  300.201800]  </TASK>
";
    check(console, CrashKind::RcuStall, "INFO: rcu detected stall in ipv6_rcv", Some("ipv6_rcv"));
}

#[test]
fn a_return_address_at_a_functions_first_byte_is_never_the_guilty_frame() {
    // Debian's riscv64 kernel on `echo c > /proc/sysrq-trigger` (tests/linux-crash-sysrq):
    // sysrq_handle_crash ends with its call to panic(), so the return address is the
    // next function's first byte.
    let console = "\
[    1.945992] Kernel panic - not syncing: sysrq triggered crash
[    1.949825] CPU: 0 UID: 0 PID: 1 Comm: init Not tainted 6.12.117+deb13-riscv64 #1  Debian 6.12.117-1
[    1.950289] Call Trace:
[    1.950516] [<ffffffff80007020>] dump_backtrace+0x28/0x30
[    1.950847] [<ffffffff80a65ed2>] show_stack+0x38/0x44
[    1.950946] [<ffffffff80a73ede>] dump_stack_lvl+0x5a/0x7c
[    1.951042] [<ffffffff80a73f18>] dump_stack+0x18/0x20
[    1.951132] [<ffffffff80a66214>] panic+0x11a/0x35a
[    1.951221] [<ffffffff806f7f90>] sysrq_reset_seq_param_set+0x0/0x7e
[    1.951332] [<ffffffff806f864c>] __handle_sysrq+0xa4/0x188
[    1.951797] [<ffffffff806f8d7c>] write_sysrq_trigger+0xaa/0xc6
";
    let r = one(console, Guest::Linux);
    assert_eq!(r.title, "kernel panic: sysrq triggered crash");
    assert_eq!(r.guilty_frame.as_ref().and_then(|f| f.name()), Some("__handle_sysrq"));
    // The frame is still in the trace, for a symbolizer to look up a byte before.
    assert!(r.frames.iter().any(|f| f.name() == Some("sysrq_reset_seq_param_set")));
}

/// Debian's riscv64 kernel (6.12) killing a user program that doubled a string until
/// memory ran out (the bench's `linux-oom-*` cases): the report starts at `invoked
/// oom-killer`, runs through the memory state and ends at `Out of memory: Killed`.
/// The stack is a user page fault through the allocator: no kernel frame is guilty.
const RISCV64_OOM: &str = include_str!("data/riscv64-oom.txt");

#[test]
fn riscv64_out_of_memory_from_a_user_page_fault() {
    let r = check(RISCV64_OOM, CrashKind::OutOfMemory, "out of memory", None);
    assert_eq!(r.corrupted, None, "{r:#?}");
    let text = &RISCV64_OOM[r.range.clone()];
    assert!(text.starts_with("[    3.117554] awk invoked oom-killer:"), "{text}");
    assert!(text.contains("Out of memory: Killed process 129 (awk)"), "{text}");
    assert!(!text.contains("testbench-guest"), "{text}");
    assert!(text.trim_end().ends_with("oom_score_adj:0"), "the report ends at the killer's verdict: {text}");
    assert!(r.end_seen);
}
