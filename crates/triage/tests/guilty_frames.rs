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
