//! The guilty-frame rules grown against the misses of the syzkaller comparison
//! (docs/triage.md, "Measured"): each test a short console excerpt written here in the
//! shape the kernel prints it (not copied from anyone's test data).

use testbench_triage::{reports, Guest, Report};

fn one(console: &str) -> Report {
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got.len(), 1, "one report expected, got {got:#?}");
    got.into_iter().next().unwrap()
}

fn title(console: &str) -> String {
    one(console).title
}

const STALL_HEAD: &str = "\
[  300.200000] rcu: INFO: rcu_preempt self-detected stall on CPU
[  300.200100] Call Trace:
[  300.200200]  <IRQ>
[  300.200300]  dump_stack_lvl+0x1/0x2
[  300.200400]  rcu_dump_cpu_stacks+0x1/0x2
[  300.200500]  rcu_sched_clock_irq+0x1/0x2
[  300.200600]  update_process_times+0x1/0x2
[  300.200700]  hrtimer_interrupt+0x1/0x2
[  300.200800]  sysvec_apic_timer_interrupt+0x1/0x2
[  300.200900]  </IRQ>
[  300.201000]  <TASK>
";

#[test]
fn a_stall_in_a_compat_ioctl_is_titled_by_the_native_ioctl_it_calls() {
    let console = format!(
        "{STALL_HEAD}\
[  300.201100]  kvm_vm_ioctl+0x1/0x2
[  300.201200]  kvm_vm_compat_ioctl+0x1/0x2
[  300.201300]  __ia32_compat_sys_ioctl+0x1/0x2
[  300.201400]  __do_fast_syscall_32+0x1/0x2
[  300.201500]  </TASK>
"
    );
    assert_eq!(title(&console), "INFO: rcu detected stall in kvm_vm_ioctl");
}

#[test]
fn a_stall_in_a_page_fault_is_titled_by_the_mappings_fault_handler() {
    let console = format!(
        "{STALL_HEAD}\
[  300.201100]  filemap_fault+0x1/0x2
[  300.201200]  ext4_filemap_fault+0x1/0x2
[  300.201300]  __do_fault+0x1/0x2
[  300.201400]  handle_mm_fault+0x1/0x2
[  300.201500]  do_user_addr_fault+0x1/0x2
[  300.201600]  exc_page_fault+0x1/0x2
[  300.201700]  asm_exc_page_fault+0x1/0x2
[  300.201800]  </TASK>
"
    );
    assert_eq!(title(&console), "INFO: rcu detected stall in ext4_filemap_fault");
}

#[test]
fn a_stall_in_the_hrtimer_softirq_is_titled_by_the_timers_callback() {
    let console = "\
[  300.200000] rcu: INFO: rcu_preempt self-detected stall on CPU
[  300.200100] Call Trace:
[  300.200300]  dump_stack_lvl+0x1/0x2
[  300.200400]  rcu_dump_cpu_stacks+0x1/0x2
[  300.201100]  consume_skb+0x1/0x2
[  300.201200]  hwsim_beacon_tx+0x1/0x2
[  300.201300]  hwsim_beacon+0x1/0x2
[  300.201400]  __hrtimer_run_queues+0x1/0x2
[  300.201500]  hrtimer_run_softirq+0x1/0x2
[  300.201600]  handle_softirqs+0x1/0x2
[  300.201700]  run_ksoftirqd+0x1/0x2
[  300.201800]  smpboot_thread_fn+0x1/0x2
[  300.201900]  kthread+0x1/0x2
[  300.202000]  ret_from_fork+0x1/0x2
";
    assert_eq!(title(console), "INFO: rcu detected stall in hwsim_beacon");
}

#[test]
fn the_tracing_timer_entry_and_dump_cpu_task_are_never_a_stalls_frame() {
    // 4.x kernels with the tracing APIC entry print no <IRQ> marks: the timer's frames
    // sit in the trace with the stalled task's.
    let console = "\
[  300.200000] INFO: rcu_sched self-detected stall on CPU
[  300.200100] Call Trace:
[  300.200200]  dump_cpu_task+0x1/0x2
[  300.200300]  rcu_dump_cpu_stacks+0x1/0x2
[  300.200400]  update_process_times+0x1/0x2
[  300.200500]  tick_sched_handle+0x1/0x2
[  300.200600]  hrtimer_interrupt+0x1/0x2
[  300.200700]  smp_trace_apic_timer_interrupt+0x1/0x2
[  300.200800]  smp_trace_apic_timer_interrupt_entry_after_kaiser_bti+0x1/0x2
[  300.200900]  kvm_vcpu_compat_ioctl+0x1/0x2
[  300.201000]  compat_SyS_ioctl+0x1/0x2
[  300.201100]  sysenter_dispatch+0x1/0x2
";
    assert_eq!(title(console), "INFO: rcu detected stall in kvm_vcpu_compat_ioctl");
}

#[test]
fn a_stall_in_a_netlink_dump_is_titled_by_the_familys_dumpit() {
    let console = format!(
        "{STALL_HEAD}\
[  300.201100]  xa_find+0x1/0x2
[  300.201200]  foo_nl_port_get_dumpit+0x1/0x2
[  300.201300]  netlink_dump+0x1/0x2
[  300.201400]  __netlink_dump_start+0x1/0x2
[  300.201500]  genl_family_rcv_msg_dumpit+0x1/0x2
[  300.201600]  genl_rcv_msg+0x1/0x2
[  300.201700]  netlink_rcv_skb+0x1/0x2
[  300.201800]  genl_rcv+0x1/0x2
[  300.201900]  netlink_unicast+0x1/0x2
[  300.202000]  netlink_sendmsg+0x1/0x2
[  300.202100]  __sys_sendto+0x1/0x2
[  300.202200]  __x64_sys_sendto+0x1/0x2
[  300.202300]  x64_sys_call+0x1/0x2
[  300.202400]  do_syscall_64+0x1/0x2
[  300.202500]  entry_SYSCALL_64_after_hwframe+0x1/0x2
[  300.202600]  </TASK>
"
    );
    assert_eq!(title(&console), "INFO: rcu detected stall in foo_nl_port_get_dumpit");
}

#[test]
fn the_6_9_system_call_switch_is_no_stalls_frame() {
    let console = format!(
        "{STALL_HEAD}\
[  300.201100]  foo_newlink+0x1/0x2
[  300.201200]  rtnetlink_rcv_msg+0x1/0x2
[  300.201300]  netlink_rcv_skb+0x1/0x2
[  300.201400]  netlink_unicast+0x1/0x2
[  300.201500]  netlink_sendmsg+0x1/0x2
[  300.201600]  ____sys_sendmsg+0x1/0x2
[  300.201700]  ___sys_sendmsg+0x1/0x2
[  300.201800]  __sys_sendmsg+0x1/0x2
[  300.201900]  x64_sys_call+0x1/0x2
[  300.202000]  do_syscall_64+0x1/0x2
[  300.202100]  </TASK>
"
    );
    assert_eq!(title(&console), "INFO: rcu detected stall in foo_newlink");
}

#[test]
fn a_warning_after_cut_here_cut_before_its_trace_is_corrupted_and_names_no_frame() {
    // The console ends right after the WARNING line: its `at file:line func` is where
    // the check sits, not a backtrace.
    let console = "\
[   41.201030] ------------[ cut here ]------------
[   41.201544] WARNING: CPU: 1 PID: 312 at fs/foo.c:241 foo_free_context+0x118/0x180
";
    let r = one(console);
    assert_eq!(r.title, "WARNING in corrupted");
    assert!(r.is_corrupted(), "{r:#?}");
}

#[test]
fn a_warning_whose_unwinder_gave_up_inside_panic_is_corrupted() {
    // arm32's unwinder printing only the panic machinery, then the console ends.
    let console = "\
------------[ cut here ]------------
WARNING: CPU: 0 PID: 2587 at drivers/foo/foo-core.c:1848 foo_transfer+0x310/0x380
Kernel panic - not syncing: panic_on_warn set ...

CPU: 0 PID: 2587 Comm: poc Not tainted 4.17.0 #11
Hardware name: ARM-Versatile Express
[<8011218c>] (unwind_backtrace) from [<8010e300>] (show_stack+0x18/0x1c)
[<8010e300>] (show_stack) from [<80b12478>] (dump_stack+0xa0/0xc0)
[<80b12478>] (dump_stack) from [<801349a8>] (panic+0x104/0x2cc)
[<801349a8>] (panic) from [<8013479c>] (warn_slowpath_fmt+0x0/0x5c)
[<8013479c>] (warn_slowpath_fmt) from [<00000000>] (  (null))
";
    let r = one(console);
    assert_eq!(r.title, "WARNING in corrupted");
    assert!(r.is_corrupted(), "{r:#?}");
}

#[test]
fn a_warning_with_its_trace_keeps_the_frame_its_line_names() {
    let console = "\
[   41.201030] ------------[ cut here ]------------
[   41.201544] WARNING: CPU: 1 PID: 312 at fs/foo.c:241 foo_free_context+0x118/0x180
[   41.205500] Call Trace:
[   41.206300]  foo_release+0x1/0x2
[   41.206400]  __fput+0x1/0x2
[   41.207200] ---[ end trace 0000000000000000 ]---
";
    let r = one(console);
    assert_eq!(r.title, "WARNING in foo_free_context");
    assert!(!r.is_corrupted(), "{r:#?}");
}

/// A WARNING at `file:line func` with a short trace below it.
fn warning_at(file: &str, func: &str, caller: &str) -> String {
    format!(
        "\
[   41.201030] ------------[ cut here ]------------
[   41.201544] WARNING: CPU: 1 PID: 312 at {file}:100 {func}+0x119a/0x13c0
[   41.203500] RIP: 0010:{func}+0x119a/0x13c0
[   41.205500] Call Trace:
[   41.206300]  {caller}+0xd5/0x130
[   41.206400]  foo_probe+0x1/0x2
[   41.207200] ---[ end trace 0000000000000000 ]---
"
    )
}

#[test]
fn a_usb_submit_urb_warning_names_its_caller_and_itself() {
    let r = one(&warning_at("drivers/usb/core/urb.c", "usb_submit_urb", "foo_open"));
    assert_eq!(r.title, "WARNING in foo_open/usb_submit_urb");
    assert_eq!(r.guilty_frame.as_ref().and_then(|f| f.name()), Some("foo_open"));
}

#[test]
fn the_allocators_size_checks_are_kmalloc_bugs_and_their_frees_are_not() {
    assert_eq!(title(&warning_at("mm/util.c", "kvmalloc_node", "foo_alloc")), "WARNING: kmalloc bug in foo_alloc");
    assert_eq!(
        title(&warning_at("mm/slab_common.c", "kmalloc_slab", "foo_alloc")),
        "WARNING: kmalloc bug in foo_alloc"
    );
    assert_eq!(title(&warning_at("mm/slab.h", "kfree", "foo_destroy")), "WARNING in foo_destroy");
}

#[test]
fn a_vmalloc_of_zero_bytes_is_titled_so() {
    let got = title(&warning_at("mm/vmalloc.c", "__vmalloc_node_range", "foo_init"));
    assert_eq!(got, "WARNING: zero-size vmalloc in foo_init");
}

#[test]
fn a_memory_leak_is_titled_by_the_first_caller_that_keeps_the_allocation() {
    let leak = |frames: &str| {
        title(&format!(
            "BUG: memory leak\nunreferenced object 0xffff888012345678 (size 64):\n  comm \"poc\", pid 312, jiffies 4294942110\n  backtrace:\n{frames}"
        ))
    };
    let sock = "    [<ffffffff8146b7c8>] kmem_cache_alloc+0x1/0x2\n    [<ffffffff8146b7c9>] sk_prot_alloc+0x1/0x2\n    [<ffffffff8146b7ca>] sk_alloc+0x1/0x2\n    [<ffffffff8146b7cb>] foo_create+0x1/0x2\n    [<ffffffff8146b7cc>] __sock_create+0x1/0x2\n";
    assert_eq!(leak(sock), "memory leak in foo_create");
    let name = "    [<ffffffff8146b7c8>] __kmalloc_track_caller+0x1/0x2\n    [<ffffffff8146b7c9>] kstrdup+0x1/0x2\n    [<ffffffff8146b7ca>] kvasprintf_const+0x1/0x2\n    [<ffffffff8146b7cb>] kobject_set_name_vargs+0x1/0x2\n    [<ffffffff8146b7cc>] kobject_init_and_add+0x1/0x2\n    [<ffffffff8146b7cd>] foo_sysfs_add+0x1/0x2\n";
    assert_eq!(leak(name), "memory leak in foo_sysfs_add");
    let id = "    [<ffffffff8146b7c8>] kmem_cache_alloc+0x1/0x2\n    [<ffffffff8146b7c9>] radix_tree_node_alloc+0x1/0x2\n    [<ffffffff8146b7ca>] idr_get_free+0x1/0x2\n    [<ffffffff8146b7cb>] idr_alloc_cyclic+0x1/0x2\n    [<ffffffff8146b7cc>] foo_new_node+0x1/0x2\n";
    assert_eq!(leak(id), "memory leak in foo_new_node");
}

#[test]
fn an_irq_safe_to_unsafe_lock_order_is_titled_where_the_lock_became_irq_safe() {
    let console = "\
[  414.269022] =====================================================
[  414.275945] WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected
[  414.283395] 6.1.0 #1 Not tainted
[  414.288763] -----------------------------------------------------
[  414.295696] poc/312 [HC0[0]:SC0[0]:HE0:SE1] is trying to acquire:
[  414.303773] ffff8880120b9168 (&foo->lock){.?.+}-{2:2}, at: foo_notify+0x14b/0x460
[  414.312640] 
[  414.312640] and this task is already holding:
[  414.320004] ffff88806a4a6028 (&bar->lock){....}-{2:2}, at: bar_pass+0xf6/0x970
[  414.330538] which would create a new lock dependency:
[  414.336470]  (&bar->lock){....}-{2:2} -> (&foo->lock){.?.+}-{2:2}
[  414.344585] 
[  414.344585] but this new dependency connects a HARDIRQ-irq-safe lock:
[  414.354037]  (&baz->lock){-.-.}-{2:2}
[  414.354071] 
[  414.354071] ... which became HARDIRQ-irq-safe at:
[  414.367173]   lock_acquire+0x29d/0x740
[  414.371795]   _raw_spin_lock_irqsave+0x39/0x50
[  414.377106]   baz_event+0x7b/0xb0
[  414.388967]   baz_interrupt+0x2c/0x80
[  414.535760] 
[  414.535760] to a HARDIRQ-irq-unsafe lock:
[  414.542912]  (&foo->lock){.?.+}-{2:2}
[  414.542947] 
[  414.542947] ... which became HARDIRQ-irq-unsafe at:
[  414.555588]   lock_acquire+0x29d/0x740
[  414.562763]   _raw_read_lock+0x5b/0x70
[  414.567362]   foo_notify+0x14b/0x460
[  414.571868]   foo_shutdown+0xd2/0x160
[  414.600000] 
[  414.600000] other info that might help us debug this:
[  414.700000] stack backtrace:
[  414.700100] Call Trace:
[  414.700200]  dump_stack_lvl+0x1/0x2
[  414.700300]  lock_acquire+0x1/0x2
[  414.700400]  _raw_read_lock+0x1/0x2
[  414.700500]  foo_notify+0x1/0x2
[  414.700600]  foo_shutdown+0x1/0x2
";
    assert_eq!(title(console), "possible deadlock in baz_event");
}

const CIRCULAR_HEAD: &str = "\
[  127.525803] ======================================================
[  127.532093] WARNING: possible circular locking dependency detected
[  127.538376] 6.1.0 #1 Not tainted
[  127.542228] ------------------------------------------------------
[  127.548509] poc/312 is trying to acquire lock:
[  127.554094] ffff888012345678 (&foo->mutex){+.+.}-{3:3}, at: foo_reread+0x1e/0x40
[  127.562560] 
[  127.562560] but task is already holding lock:
[  127.568495] ffff888012345679 (&bar->mutex){+.+.}-{3:3}, at: bar_ioctl+0x109/0x140
[  127.577221] 
[  127.577221] which lock already depends on the new lock.
";

#[test]
fn a_lockdep_report_cut_after_its_lock_sites_is_corrupted() {
    let r = one(CIRCULAR_HEAD);
    assert_eq!(r.title, "possible deadlock in foo_reread");
    assert!(r.is_corrupted(), "the `at:` lines are lock sites, not a backtrace: {r:#?}");
}

#[test]
fn a_lockdep_report_cut_inside_its_dependency_chain_is_whole_enough() {
    let console = format!(
        "{CIRCULAR_HEAD}\
[  127.585502] 
[  127.585502] the existing dependency chain (in reverse order) is:
[  127.593087] 
[  127.593087] -> #1 (&bar->mutex){{+.+.}}-{{3:3}}:
[  127.599124]        __lock_acquire+0x328f/0x4620
[  127.603759]        lock_acquire+0x1d5/0x580
[  127.608048]        __mutex_lock+0x16f/0x1870
[  127.616972]        bar_release+0x6b/0x180
[  127.621000]        __fput+0x602/0x7c0
"
    );
    let r = one(&console);
    assert_eq!(r.title, "possible deadlock in foo_reread");
    assert!(!r.is_corrupted(), "{r:#?}");
}

#[test]
fn a_task_hung_in_an_srcu_grace_period_wait_reads_synchronize_rcu() {
    let hung = |wait: &str| {
        title(&format!(
            "\
[  250.000000] INFO: task kworker/u4:2:54 blocked for more than 143 seconds.
[  250.000100]       Not tainted 6.1.0 #1
[  250.000200] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
[  250.000300] task:kworker/u4:2    state:D stack:0     pid:54    ppid:2      flags:0x00004000
[  250.000400] Call Trace:
[  250.000500]  <TASK>
[  250.000600]  __schedule+0x1/0x2
[  250.000700]  schedule+0x1/0x2
[  250.000800]  schedule_timeout+0x1/0x2
[  250.000900]  wait_for_completion+0x1/0x2
{wait}\
[  250.001100]  foo_destroy_workfn+0x1/0x2
[  250.001200]  process_one_work+0x1/0x2
[  250.001300]  </TASK>
"
        ))
    };
    assert_eq!(hung("[  250.001000]  __synchronize_srcu+0x1/0x2\n"), "INFO: task hung in synchronize_rcu");
    let both = "[  250.001000]  __synchronize_srcu+0x1/0x2\n[  250.001050]  synchronize_srcu+0x1/0x2\n";
    assert_eq!(hung(both), "INFO: task hung in synchronize_rcu");
}

#[test]
fn a_kasan_report_inside_a_device_printk_blames_the_driver_that_printed() {
    let console = "\
[  102.110000] ==================================================================
[  102.110500] BUG: KASAN: slab-out-of-bounds in string+0x1f6/0x220
[  102.111000] Read of size 1 at addr ffff88806b4c2d18 by task kworker/0:1/12
[  102.111600] CPU: 0 PID: 12 Comm: kworker/0:1 Not tainted 6.1.0 #1
[  102.111700] Call Trace:
[  102.111900]  dump_stack_lvl+0x1/0x2
[  102.112000]  print_report+0x1/0x2
[  102.112100]  kasan_report+0x1/0x2
[  102.112200]  string+0x1f6/0x220
[  102.112300]  vsnprintf+0x1/0x2
[  102.112400]  vscnprintf+0x1/0x2
[  102.112500]  vprintk_store+0x1/0x2
[  102.112600]  vprintk_emit+0x1/0x2
[  102.112700]  dev_vprintk_emit+0x1/0x2
[  102.112800]  dev_printk_emit+0x1/0x2
[  102.112900]  _dev_info+0x1/0x2
[  102.113000]  foo_usb_probe+0x1/0x2
[  102.113100]  usb_probe_interface+0x1/0x2
[  102.120000] ==================================================================
";
    assert_eq!(title(console), "KASAN: slab-out-of-bounds Read in foo_usb_probe");
}

#[test]
fn a_kasan_report_in_a_synchronous_timer_delete_blames_the_timers_owner() {
    let console = "\
[  102.110000] ==================================================================
[  102.110500] BUG: KASAN: slab-use-after-free in lock_timer_base+0x1d9/0x220
[  102.111000] Read of size 4 at addr ffff88806b4c2d18 by task poc/312
[  102.111600] CPU: 0 PID: 312 Comm: poc Not tainted 6.1.0 #1
[  102.111700] Call Trace:
[  102.111900]  dump_stack_lvl+0x1/0x2
[  102.112000]  print_report+0x1/0x2
[  102.112100]  kasan_report+0x1/0x2
[  102.112200]  lock_timer_base+0x1d9/0x220
[  102.112300]  __try_to_del_timer_sync+0x1/0x2
[  102.112400]  __timer_delete_sync+0x1/0x2
[  102.112500]  sk_stop_timer_sync+0x1/0x2
[  102.112600]  foo_del_add_timer+0x1/0x2
[  102.112700]  foo_close+0x1/0x2
[  102.120000] ==================================================================
";
    assert_eq!(title(console), "KASAN: slab-use-after-free Read in foo_del_add_timer");
}

#[test]
fn a_stack_guard_page_hit_is_titled_by_the_work_that_overran_the_stack() {
    let console = "\
[  500.100000] BUG: TASK stack guard page was hit at ffffc900190cfff8 (stack is ffffc900190d0000..ffffc900190d8000)
[  500.100100] stack guard page: 0000 [#1] PREEMPT SMP KASAN
[  500.100200] CPU: 1 PID: 312 Comm: poc Not tainted 6.1.0 #1
[  500.100300] RIP: 0010:psi_group_change+0x8/0xb0
[  500.100400] Call Trace:
[  500.100500]  <TASK>
[  500.100600]  psi_task_switch+0x1/0x2
[  500.100700]  __schedule+0x1/0x2
[  500.100800]  preempt_schedule_irq+0x1/0x2
[  500.100900]  foo_compute_features+0x1/0x2
[  500.101000]  foo_netdev_event+0x1/0x2
[  500.101100]  notifier_call_chain+0x1/0x2
[  500.101200]  foo_changelink+0x1/0x2
[  500.101300]  rtnl_newlink+0x1/0x2
[  500.101400]  rtnetlink_rcv_msg+0x1/0x2
[  500.101500]  netlink_rcv_skb+0x1/0x2
[  500.101600]  netlink_unicast+0x1/0x2
[  500.101700]  netlink_sendmsg+0x1/0x2
[  500.101800]  __sys_sendmsg+0x1/0x2
[  500.101900]  do_syscall_64+0x1/0x2
[  500.102000]  entry_SYSCALL_64_after_hwframe+0x1/0x2
[  500.102100]  </TASK>
[  500.102200] ---[ end trace 0000000000000000 ]---
";
    assert_eq!(title(console), "BUG: stack guard page was hit in rtnl_newlink");
}

#[test]
fn a_dentry_still_in_use_at_unmount_is_one_stable_title() {
    let console = "\
[   20.143962] BUG: Dentry ffff888119d8a000{i=0,n=.index}  still in use (1) [unmount of ramfs ramfs]
[   20.175803] ------------[ cut here ]------------
[   20.202650] WARNING: CPU: 0 PID: 367 at fs/dcache.c:1616 umount_check+0x18d/0x1d0
[   20.352222] RIP: 0010:umount_check+0x18d/0x1d0
[   20.400000] Call Trace:
[   20.400100]  d_walk+0x1/0x2
[   20.400200]  shrink_dcache_for_umount+0x1/0x2
[   20.400300]  generic_shutdown_super+0x1/0x2
[   20.500000] ---[ end trace 0000000000000000 ]---
";
    let got = reports(console.as_bytes(), Guest::Linux);
    assert_eq!(got[0].title, "BUG: Dentry still in use in unmount");
    assert!(!got[0].is_corrupted(), "{got:#?}");
    let other = console.replace("ffff888119d8a000{i=0,n=.index}", "ffff880175978600{i=8bb9,n=lo}");
    assert_eq!(reports(other.as_bytes(), Guest::Linux)[0].title, got[0].title);
}

#[test]
fn a_bad_page_found_on_allocation_blames_the_first_caller_past_the_allocator() {
    let console = "\
[  100.000000] BUG: Bad page state in process poc  pfn:7071f
[  100.000100] page:ffffea0001c1c7c0 refcount:0 mapcount:0 mapping:0000000000000000 index:0x0 pfn:0x7071f
[  100.000200] page dumped because: nonzero _refcount
[  100.000300] CPU: 0 PID: 312 Comm: poc Not tainted 6.1.0 #1
[  100.000400] Call Trace:
[  100.000500]  <TASK>
[  100.000600]  dump_stack_lvl+0x1/0x2
[  100.000700]  bad_page+0x1/0x2
[  100.000800]  __set_page_owner+0x1/0x2
[  100.000900]  post_alloc_hook+0x1/0x2
[  100.001000]  get_page_from_freelist+0x1/0x2
[  100.001100]  __alloc_pages+0x1/0x2
[  100.001200]  alloc_pages_bulk+0x1/0x2
[  100.001300]  page_pool_alloc_pages+0x1/0x2
[  100.001400]  foo_test_run_batch+0x1/0x2
[  100.001500]  __sys_bpf+0x1/0x2
[  100.001600]  </TASK>
";
    assert_eq!(title(console), "BUG: Bad page state in foo_test_run_batch");
}

#[test]
fn the_mms_teardown_checks_and_lockdeps_limits_name_no_frame() {
    let rss = "[  100.000000] BUG: Bad rss-counter state mm:ffff88005fac4300 idx:0 val:15\n[  100.100000] poc: done\n";
    let r = one(rss);
    assert_eq!(r.title, "BUG: Bad rss-counter state");
    assert!(!r.is_corrupted(), "check_mm prints the one line: {r:#?}");
    let limit = "\
[  100.000000] BUG: MAX_STACK_TRACE_ENTRIES too low!
[  100.000100] turning off the locking correctness validator.
[  100.000200] CPU: 0 PID: 312 Comm: poc Not tainted 6.1.0 #1
[  100.000300] Call Trace:
[  100.000400]  dump_stack_lvl+0x1/0x2
[  100.000500]  save_trace+0x1/0x2
[  100.000600]  __lock_acquire+0x1/0x2
[  100.000700]  foo_close+0x1/0x2
";
    assert_eq!(title(limit), "BUG: MAX_STACK_TRACE_ENTRIES too low!");
}

#[test]
fn an_inconsistent_lock_state_is_titled_by_its_own_backtrace_not_where_the_use_was_registered() {
    let console = "\
[ 1336.881000] ================================
[ 1336.881100] WARNING: inconsistent lock state
[ 1336.881200] 6.0.0 #1 Not tainted
[ 1336.881300] --------------------------------
[ 1336.881400] inconsistent {IN-HARDIRQ-W} -> {HARDIRQ-ON-W} usage.
[ 1336.881500] poc/9712 [HC0[0]:SC0[0]:HE1:SE1] takes:
[ 1336.881600] ffff0000d10c2577 (&foo_table[i]){?.-.}-{2:2}, at: _atomic_dec_and_lock+0xc8/0x130
[ 1336.881722] {IN-HARDIRQ-W} state was registered at:
[ 1336.881800]   lock_acquire+0x100/0x1f8
[ 1336.881900]   _raw_spin_lock_irqsave+0x6c/0xb4
[ 1336.882000]   foo_wake_bit+0x88/0x254
[ 1336.882100]   foo_irq+0x64/0xa8
[ 1336.882200] irq event stamp: 1234
[ 1336.882300] 
[ 1336.882300] other info that might help us debug this:
[ 1336.882400] stack backtrace:
[ 1336.882500] CPU: 1 PID: 9712 Comm: poc Not tainted 6.0.0 #1
[ 1336.882600] Call trace:
[ 1336.882700]  dump_stack+0x1c/0x58
[ 1336.882800]  print_usage_bug+0x39c/0x3cc
[ 1336.882900]  mark_lock_irq+0x4a8/0x4b4
[ 1336.883000]  mark_lock+0x154/0x1b4
[ 1336.883100]  __lock_acquire+0x5f8/0x30a4
[ 1336.883200]  lock_acquire+0x100/0x1f8
[ 1336.883300]  _raw_spin_lock+0x54/0x6c
[ 1336.883400]  _atomic_dec_and_lock+0xc8/0x130
[ 1336.883500]  iput+0x50/0x324
[ 1336.883600]  foo_fill_super+0x1254/0x14a4
[ 1336.883700]  get_tree_bdev+0x1e8/0x2a0
";
    assert_eq!(title(console), "inconsistent lock state in foo_fill_super");
}

#[test]
fn a_stall_in_the_network_receive_path_is_titled_by_the_protocol_handler() {
    let console = format!(
        "{STALL_HEAD}\
[  300.201100]  ip6_rcv_finish+0x1/0x2
[  300.201200]  ipv6_rcv+0x1/0x2
[  300.201300]  __netif_receive_skb_core+0x1/0x2
[  300.201400]  __netif_receive_skb+0x1/0x2
[  300.201500]  netif_receive_skb+0x1/0x2
[  300.201600]  tun_get_user+0x1/0x2
[  300.201700]  tun_chr_write_iter+0x1/0x2
[  300.201800]  vfs_write+0x1/0x2
[  300.201900]  ksys_write+0x1/0x2
[  300.202000]  do_syscall_64+0x1/0x2
[  300.202100]  </TASK>
"
    );
    assert_eq!(title(&console), "INFO: rcu detected stall in ipv6_rcv");
}

#[test]
fn a_warning_while_unregistering_a_netdev_blames_the_driver_that_asked() {
    let r = one(&warning_at("net/core/dev.c", "rollback_registered_many", "unregister_netdev").replace(
        "[   41.206400]  foo_probe+0x1/0x2\n",
        "[   41.206350]  foo_dev_remove+0x1/0x2\n[   41.206400]  usb_unbind_interface+0x1/0x2\n",
    ));
    assert_eq!(r.title, "WARNING in foo_dev_remove");
}

#[test]
fn another_tasks_report_starting_inside_the_open_one_does_not_cut_it() {
    let console = "\
[   34.404245][ T3083] Unable to handle kernel paging request at virtual address 00616161616161a1
[   34.406713][ T3083] Mem abort info:
[   34.415404][ T3080] Unable to handle kernel paging request at virtual address 00616161616161a1
[   34.417606][ T3080] Mem abort info:
[   34.423545][ T3083] Internal error: Oops: 0000000096000004 [#1] PREEMPT SMP
[   34.429489][ T3083] CPU: 0 PID: 3083 Comm: udevd Not tainted 6.1.0 #0
[   34.434950][ T3083] pc : __kmem_cache_alloc_node+0x17c/0x350
[   34.434965][ T3083] lr : __kmem_cache_alloc_node+0x80/0x350
[   34.435000][ T3083] Call trace:
[   34.435100][ T3083]  __kmem_cache_alloc_node+0x17c/0x350
[   34.435200][ T3083]  __kmalloc_node+0xbc/0x14c
[   34.435300][ T3083]  foo_xattr_alloc+0x50/0x90
[   34.435400][ T3083]  foo_initxattrs+0x44/0xf0
[   34.435500][ T3083] Code: 54000a61 b9402a80 f9400281 8b000328 (f8606b3b)
[   34.435600][ T3083] ---[ end trace 0000000000000000 ]---
";
    let r = &reports(console.as_bytes(), Guest::Linux)[0];
    assert_eq!(r.title, "BUG: unable to handle kernel paging request in foo_xattr_alloc");
    assert!(!r.is_corrupted(), "{r:#?}");
}

#[test]
fn a_fault_in_an_indirect_call_thunk_blames_the_caller_even_a_dispatcher() {
    let console = "\
[  100.000000] general protection fault, probably for non-canonical address 0xdffffc0000000000: 0000 [#1] PREEMPT SMP KASAN
[  100.000100] CPU: 0 PID: 0 Comm: swapper/0 Not tainted 6.1.0 #1
[  100.000200] RIP: 0010:__x86_indirect_thunk_rax+0x10/0x20
[  100.000300] Call Trace:
[  100.000400]  <IRQ>
[  100.000500]  run_timer_softirq+0x53d/0xe70
[  100.000600]  __do_softirq+0x305/0xba7
[  100.000700]  irq_exit+0x1ac/0x1d0
[  100.000800]  </IRQ>
[  100.000900]  foo_copy_range+0xb82/0x20f0
[  100.001000]  copy_process+0x1/0x2
[  100.001100] ---[ end trace 0000000000000000 ]---
";
    assert_eq!(title(console), "general protection fault in run_timer_softirq");
}

#[test]
fn a_powerpc_frame_marked_unreliable_is_never_guilty() {
    let line = "[c00000000f0bfa30] [c0000000018f6b08] __rela_dyn_start+0x308828/0x345288 (unreliable)";
    assert!(!testbench_triage::parse_frame(line).expect("a frame").reliable);
    let console = "\
[  250.000000] INFO: task poc:312 blocked for more than 143 seconds.
[  250.000100]       Not tainted 6.1.0 #1
[  250.000300] task:poc             state:D stack:0     pid:312   ppid:1      flags:0x00040000
[  250.000400] Call Trace:
[  250.000500] [c00000000f0bfa30] [c0000000018f6b08] __rela_dyn_start+0x308828/0x345288 (unreliable)
[  250.000600] [c00000000f0bfc10] [c00000000001f0ac] __switch_to+0x43c/0x6d0
[  250.000700] [c00000000f0bfc70] [c0000000012b8a5c] __schedule+0x3cc/0xed0
[  250.000800] [c00000000f0bfd40] [c0000000012b95c0] schedule+0x50/0xd0
[  250.000900] [c00000000f0bfdb0] [c0000000012c2fdc] schedule_timeout+0x36c/0x810
[  250.001000] [c00000000f0bfe80] [c0000000012ba03c] wait_for_common+0xfc/0x220
[  250.001100] [c00000000f0bff00] [c0000000006a9b58] foo_exit_aio+0x188/0x2a0
[  250.001200] [c00000000f0bff80] [c000000000157b4c] mmput+0xbc/0x260
";
    assert_eq!(title(console), "INFO: task hung in foo_exit_aio");
}

#[test]
fn an_odebug_warning_in_call_rcu_blames_the_rcu_heads_owner() {
    let console = "\
[   41.201030] ------------[ cut here ]------------
[   41.201100] ODEBUG: activate active (active state 1) object type: rcu_head hint: 0x0
[   41.201544] WARNING: CPU: 1 PID: 312 at lib/debugobjects.c:291 debug_print_object+0x166/0x220
[   41.203500] RIP: 0010:debug_print_object+0x166/0x220
[   41.205500] Call Trace:
[   41.206300]  debug_object_activate+0x49b/0x730
[   41.206400]  __call_rcu.constprop.67+0xf2/0xef0
[   41.206500]  call_rcu_sched+0x12/0x20
[   41.206600]  foo_release+0x34d/0x560
[   41.206700]  sock_release+0x8d/0x1e0
[   41.207200] ---[ end trace 0000000000000000 ]---
";
    assert_eq!(title(console), "WARNING: ODEBUG bug in foo_release");
}

#[test]
fn scheduling_while_atomic_blames_the_caller_of_schedule() {
    let atomic = |callers: &str| {
        title(&format!(
            "\
[  100.000000] BUG: scheduling while atomic: poc/312/0x00000002
[  100.000100] Preemption disabled at:
[  100.000200] [<ffffffff81234567>] foo_fpu_begin+0x64/0x260
[  100.000300] CPU: 0 PID: 312 Comm: poc Not tainted 6.1.0 #1
[  100.000400] Call Trace:
[  100.000500]  <TASK>
[  100.000600]  dump_stack_lvl+0x1/0x2
[  100.000700]  __schedule_bug+0x1/0x2
[  100.000800]  __schedule+0x1/0x2
[  100.000900]  schedule+0x1/0x2
{callers}\
[  100.001500]  </TASK>
"
        ))
    };
    let user = "[  100.001000]  exit_to_user_mode_prepare+0x1/0x2\n[  100.001100]  syscall_exit_to_user_mode+0x1/0x2\n[  100.001200]  do_syscall_64+0x1/0x2\n";
    assert_eq!(atomic(user), "BUG: scheduling while atomic in exit_to_user_mode_prepare");
    let lock = "[  100.001000]  rwsem_down_write_slowpath+0x1/0x2\n[  100.001100]  down_write+0x1/0x2\n[  100.001200]  foo_recursive_removal+0x1/0x2\n";
    assert_eq!(atomic(lock), "BUG: scheduling while atomic in foo_recursive_removal");
}

#[test]
fn a_jump_to_an_address_no_function_holds_blames_the_caller_even_a_dispatcher() {
    let console = "\
[  100.000000] BUG: kernel NULL pointer dereference, address: 0000000000000286
[  100.000100] #PF: supervisor instruction fetch in kernel mode
[  100.000200] Oops: 0010 [#1] PREEMPT SMP KASAN
[  100.000300] CPU: 0 PID: 12 Comm: kworker/0:1 Not tainted 6.1.0 #1
[  100.000400] Workqueue: events foo_work
[  100.000500] RIP: 0010:0x286
[  100.000600] Code: Unable to access opcode bytes at 0x25c.
[  100.000700] Call Trace:
[  100.000800]  <TASK>
[  100.000900]  process_one_work+0xbf3/0x1bc0
[  100.001000]  worker_thread+0x223/0x1860
[  100.001100]  kthread+0x35e/0x430
[  100.001200]  ret_from_fork+0x2a/0x40
[  100.001300]  </TASK>
[  100.001400] ---[ end trace 0000000000000000 ]---
";
    let r = one(console);
    assert_eq!(r.title, "BUG: unable to handle kernel NULL pointer dereference in process_one_work");
    assert!(!r.is_corrupted(), "{r:#?}");
}
