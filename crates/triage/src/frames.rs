//! Backtrace frames: how a line names one, and which frames are the kernel's own
//! reporting and common helpers (never the guilty frame).

/// One frame of a backtrace, as the console printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The function, as printed (`do_ipv6_setsockopt.isra.8`); None for a frame printed as
    /// an address only (xv6's backtrace).
    pub function: Option<String>,
    /// The offset into the function and the function's size (`+0x12/0x34`).
    pub offset: Option<u64>,
    pub size: Option<u64>,
    /// The module, for a frame printed `func+0x1/0x2 [module]`.
    pub module: Option<String>,
    /// The raw address, when the line printed one (`[<ffffffff81234567>]`, `RIP: 0010:[<…>]`,
    /// xv6's `0x0000000080002a4c`).
    pub address: Option<u64>,
    /// A source location printed with it (the reference kernel's `at src/proc.rs:676:9`).
    pub location: Option<String>,
    /// False for a frame x86 marks unreliable (`? func+0x1/0x2`): never the guilty frame.
    pub reliable: bool,
}

impl Frame {
    /// The function's name without the compiler's clone suffixes (`.isra.8`, `.cold.3`,
    /// `.constprop.0`, `.part.1`, `.llvm.123`): the name a title uses, stable across builds.
    pub fn name(&self) -> Option<&str> {
        self.function.as_deref().map(base_name)
    }
}

/// `name` without a compiler clone suffix: everything from the first '.' that follows a
/// character of the name (a leading '.' is kept).
pub fn base_name(name: &str) -> &str {
    match name.char_indices().skip(1).find(|&(_, c)| c == '.') {
        Some((i, _)) => &name[..i],
        None => name,
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$'
}

fn hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The first `function+0xOFF/0xSIZE` a line holds, with what surrounds it: a `[<addr>]`
/// before it, a `[module]` after it, a `? ` marking it unreliable. None when the line
/// names no such frame. Works for every width's format (x86 `Call Trace:` lines, arm64
/// `Call trace:` lines, riscv `[<addr>] func+0x1/0x2`, `RIP:`, `pc :`, `epc :`, lockdep's
/// `at: func+0x1/0x2`).
pub fn parse_frame(line: &str) -> Option<Frame> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(p) = memchr::memmem::find(&b[from..], b"+0x").map(|p| p + from) {
        from = p + 3;
        // The name: the run of name bytes before '+'.
        let mut s = p;
        while s > 0 && is_name_byte(b[s - 1]) {
            s -= 1;
        }
        if s == p || !(b[s].is_ascii_alphabetic() || b[s] == b'_' || b[s] == b'.') {
            continue;
        }
        // The offset and size.
        let rest = &line[p + 1..];
        let off_end = rest.find(|c: char| !(c.is_ascii_hexdigit() || c == 'x')).unwrap_or(rest.len());
        let offset = hex(&rest[..off_end]);
        if offset.is_none() {
            continue;
        }
        let after = &rest[off_end..];
        let (size, after) = match after.strip_prefix('/') {
            Some(a) => {
                let e = a.find(|c: char| !(c.is_ascii_hexdigit() || c == 'x')).unwrap_or(a.len());
                (hex(&a[..e]), &a[e..])
            }
            None => (None, after),
        };
        let module = after
            .strip_prefix(" [")
            .and_then(|m| m.split_once(']'))
            .map(|(m, _)| m)
            .filter(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'))
            .map(str::to_string);
        let before = line[..s].trim_end();
        let reliable = !before.ends_with('?');
        let address = before
            .trim_end_matches('?')
            .trim_end()
            .rsplit_once("[<")
            .and_then(|(_, a)| a.strip_suffix(">]"))
            .and_then(hex);
        return Some(Frame {
            function: Some(line[s..p].to_string()),
            offset,
            size,
            module,
            address,
            location: None,
            reliable,
        });
    }
    None
}

/// Functions that report, print, trap or dispatch, and common library routines that
/// take the blame for their callers. A frame whose function (its base name) is one of
/// these, or starts with one of [`HELPER_PREFIXES`], is never a report's guilty frame.
/// **This is the one list**; add a name here, not at a use.
pub const HELPERS: &[&str] = &[
    // printing a report
    "dump_stack",
    "dump_stack_lvl",
    "__dump_stack",
    "show_stack",
    "show_trace_log_lvl",
    "show_regs",
    "panic",
    "vpanic",
    "nmi_panic",
    "__warn",
    "__warn_printk",
    "warn_slowpath_fmt",
    "warn_slowpath_null",
    "warn_slowpath_common",
    "report_bug",
    "print_report",
    "print_address_description",
    "print_circular_bug",
    "print_usage_bug",
    "print_lock",
    "print_bad_irq_dependency",
    "print_deadlock_bug",
    "print_unlock_imbalance_bug",
    "print_irqtrace_events",
    "print_cpu_stall",
    "print_other_cpu_stall",
    "rcu_dump_cpu_stacks",
    "debug_print_object",
    "bad_page",
    "dump_page",
    "fail_dump",
    "should_fail",
    "should_fail_ex",
    "warn_alloc",
    "dump_header",
    "out_of_memory",
    "oom_kill_process",
    "pagefault_out_of_memory",
    "check_memory_region",
    "check_memory_region_inline",
    "memory_is_poisoned",
    "object_err",
    "check_object",
    "check_bytes_and_report",
    "ubsan_epilogue",
    "ubsan_prologue",
    // traps and faults
    "do_trap",
    "do_error_trap",
    "handle_bug",
    "handle_invalid_op",
    "die",
    "__die",
    "die_kernel_fault",
    "oops_end",
    "page_fault_oops",
    "no_context",
    "__bad_area_nosemaphore",
    "bad_area_nosemaphore",
    "bad_area",
    "__do_kernel_fault",
    "do_kern_addr_fault",
    "do_user_addr_fault",
    "do_page_fault",
    "handle_page_fault",
    "do_mem_abort",
    "do_translation_fault",
    "do_bad_area",
    "do_sp_pc_abort",
    "do_undefinstr",
    "do_trap_ecall_u",
    "do_trap_insn_illegal",
    "do_trap_break",
    "do_trap_unknown",
    "do_general_protection",
    "do_divide_error",
    "do_invalid_op",
    "invalid_op",
    "general_protection",
    "page_fault",
    "divide_error",
    "async_page_fault",
    "fixup_exception",
    "ex_handler_default",
    "bug_handler",
    "brk_handler",
    "call_break_hook",
    "kernelmode_fixup_or_oops",
    "handle_exception",
    "ret_from_exception",
    "noist_exc_debug",
    // sleeping and locking primitives
    "__schedule",
    "schedule",
    "schedule_timeout",
    "schedule_preempt_disabled",
    "io_schedule",
    "io_schedule_timeout",
    "__might_sleep",
    "___might_sleep",
    "__might_fault",
    "__might_resched",
    "might_fault",
    "lock_acquire",
    "lock_release",
    "lock_acquired",
    "lock_contended",
    "__lock_acquire",
    "__lock_release",
    "lock_is_held_type",
    "check_noncircular",
    "check_prev_add",
    "check_prevs_add",
    "validate_chain",
    "mark_lock",
    "mark_held_locks",
    "__mutex_lock",
    "__mutex_lock_common",
    "__mutex_lock_slowpath",
    "mutex_lock",
    "mutex_lock_nested",
    "mutex_lock_interruptible",
    "mutex_lock_interruptible_nested",
    "mutex_lock_killable",
    "mutex_lock_killable_nested",
    "mutex_lock_io_nested",
    "mutex_unlock",
    "__mutex_unlock_slowpath",
    "down",
    "down_read",
    "down_write",
    "down_read_killable",
    "down_write_killable",
    "down_interruptible",
    "down_timeout",
    "__down",
    "__down_common",
    "__down_read",
    "__down_write",
    "__down_read_common",
    "__down_write_common",
    "rwsem_down_read_slowpath",
    "rwsem_down_write_slowpath",
    "rwsem_down_read_failed",
    "rwsem_down_write_failed",
    "call_rwsem_down_read_failed",
    "call_rwsem_down_write_failed",
    "up_read",
    "up_write",
    "wait_for_completion",
    "wait_for_completion_timeout",
    "wait_for_completion_killable",
    "wait_for_completion_interruptible",
    "__wait_for_common",
    "wait_for_common",
    "do_wait_for_common",
    "_raw_spin_lock",
    "_raw_spin_lock_irq",
    "_raw_spin_lock_irqsave",
    "_raw_spin_lock_bh",
    "_raw_spin_unlock",
    "_raw_spin_unlock_irq",
    "_raw_spin_unlock_irqrestore",
    "_raw_spin_unlock_bh",
    "_raw_read_lock",
    "_raw_write_lock",
    "_raw_read_lock_bh",
    "_raw_write_lock_bh",
    "_raw_read_lock_irqsave",
    "_raw_write_lock_irqsave",
    "do_raw_spin_lock",
    "do_raw_spin_unlock",
    "do_raw_read_lock",
    "do_raw_write_lock",
    "queued_spin_lock_slowpath",
    "native_queued_spin_lock_slowpath",
    "__pv_queued_spin_lock_slowpath",
    "spin_dump",
    "spin_bug",
    "debug_spin_lock_before",
    "rcu_read_lock",
    "rcu_read_unlock",
    "__rcu_read_lock",
    "__rcu_read_unlock",
    "rcu_lockdep_current_cpu_online",
    "lockdep_rcu_suspicious",
    "__synchronize_srcu",
    "refcount_warn_saturate",
    "refcount_inc",
    "refcount_dec",
    "refcount_sub_and_test",
    "refcount_inc_not_zero",
    "refcount_dec_and_test",
    "refcount_add",
    "refcount_add_not_zero",
    "refcount_sub_and_test_checked",
    "refcount_dec_and_test_checked",
    "refcount_inc_checked",
    "__refcount_add",
    "__refcount_inc",
    "__refcount_sub_and_test",
    "__refcount_dec_and_test",
    // the library routines that take the blame for their callers
    "memcpy",
    "memmove",
    "memset",
    "memcmp",
    "__memcpy",
    "__memmove",
    "__memset",
    "memcpy_erms",
    "memcpy_orig",
    "memset_erms",
    "memset_orig",
    "strcmp",
    "strncmp",
    "strlen",
    "strnlen",
    "strcpy",
    "strncpy",
    "strscpy",
    "strlcpy",
    "strchr",
    "strrchr",
    "strstr",
    "kmemdup",
    "memdup_user",
    "_copy_from_user",
    "_copy_to_user",
    "__copy_from_user",
    "__copy_to_user",
    "copy_from_user",
    "copy_to_user",
    "copyin",
    "copyout",
    "__arch_copy_from_user",
    "__arch_copy_to_user",
    "raw_copy_from_user",
    "raw_copy_to_user",
    "copy_user_generic_unrolled",
    "copy_user_enhanced_fast_string",
    "copy_user_generic_string",
    "rep_movs_alternative",
    "instrument_copy_from_user",
    "instrument_copy_to_user",
    "check_copy_size",
    "__check_object_size",
    "check_object_size",
    "__list_add",
    "__list_add_valid",
    "__list_del_entry",
    "__list_del_entry_valid",
    "__list_add_valid_or_report",
    "__list_del_entry_valid_or_report",
    "list_del",
    "debug_object_activate",
    "debug_object_assert_init",
    "debug_object_free",
    "debug_object_init",
    "debug_check_no_obj_freed",
    "__debug_check_no_obj_freed",
    "debug_check_no_locks_freed",
    "kobject_put",
    "kobject_get",
    "kref_put",
    "kref_get",
    "__kmalloc",
    "__kmalloc_node",
    "__kmalloc_track_caller",
    "__kmalloc_node_track_caller",
    "kmalloc",
    "kmalloc_trace",
    "kmalloc_node",
    "kzalloc",
    "kfree",
    "kmem_cache_alloc",
    "kmem_cache_alloc_trace",
    "kmem_cache_alloc_node",
    "kmem_cache_free",
    "slab_alloc",
    "slab_alloc_node",
    "slab_free",
    "slab_free_hook",
    "slab_free_freelist_hook",
    "__slab_free",
    "___slab_alloc",
    "__slab_alloc",
    "cache_free_debugcheck",
    "cache_alloc_debugcheck_after",
    "do_slab_free",
    "kmalloc_large",
    "vmalloc",
    "__vmalloc",
    "__vmalloc_node",
    "__vmalloc_node_range",
    "vfree",
    "kvmalloc_node",
    "kvfree",
    "alloc_pages",
    "__alloc_pages",
    "__alloc_pages_nodemask",
    "__alloc_pages_slowpath",
    "alloc_pages_current",
    "__get_free_pages",
    "__free_pages",
    "free_pages",
    "__put_page",
    "put_page",
    // timer and interrupt entry, the context a stall or lockup is seen from
    "nmi_cpu_backtrace",
    "nmi_trigger_cpumask_backtrace",
    "arch_trigger_cpumask_backtrace",
    "trigger_single_cpu_backtrace",
    "rcu_check_callbacks",
    "rcu_sched_clock_irq",
    "rcu_pending",
    "check_cpu_stall",
    "rcu_check_gp_kthread_starvation",
    "update_process_times",
    "tick_sched_handle",
    "tick_sched_timer",
    "tick_periodic",
    "tick_handle_periodic",
    "__hrtimer_run_queues",
    "__run_hrtimer",
    "hrtimer_interrupt",
    "local_apic_timer_interrupt",
    "smp_apic_timer_interrupt",
    "apic_timer_interrupt",
    "sysvec_apic_timer_interrupt",
    "asm_sysvec_apic_timer_interrupt",
    "__sysvec_apic_timer_interrupt",
    "watchdog_timer_fn",
    "watchdog_overflow_callback",
    "__perf_event_overflow",
    "perf_event_overflow",
    "handle_irq",
    "handle_irq_event",
    "handle_edge_irq",
    "handle_level_irq",
    "handle_percpu_devid_irq",
    "generic_handle_irq",
    "generic_handle_domain_irq",
    "handle_domain_irq",
    "do_IRQ",
    "common_interrupt",
    "asm_common_interrupt",
    "irq_exit",
    "irq_exit_rcu",
    "__irq_exit_rcu",
    "do_softirq",
    "__do_softirq",
    "do_softirq_own_stack",
    "invoke_softirq",
    "call_timer_fn",
    "expire_timers",
    "__run_timers",
    "run_timer_softirq",
    "gic_handle_irq",
    "el1_irq",
    "el1_interrupt",
    "el1h_64_irq_handler",
    "el1h_64_irq",
    "el0_svc",
    "el0_svc_common",
    "el0_svc_handler",
    "el0t_64_sync",
    "el0t_64_sync_handler",
    "do_el0_svc",
    "invoke_syscall",
    "riscv_intc_irq",
    "handle_riscv_irq",
    "do_irq",
    "call_on_irq_stack",
    "csd_lock_wait",
    "smp_call_function_many_cond",
    "on_each_cpu_cond_mask",
    // reaching the kernel from user space and starting threads
    "do_syscall_64",
    "do_syscall_x64",
    "do_syscall_32_irqs_on",
    "do_fast_syscall_32",
    "do_int80_syscall_32",
    "entry_SYSCALL_64_after_hwframe",
    "entry_SYSCALL_64_fastpath",
    "entry_SYSCALL_64",
    "entry_SYSENTER_compat",
    "entry_SYSENTER_compat_after_hwframe",
    "entry_INT80_compat",
    "ret_from_fork",
    "ret_from_fork_asm",
    "kthread",
    "worker_thread",
    "process_one_work",
    "process_scheduled_works",
    "smpboot_thread_fn",
    "rcu_core",
    "rcu_core_si",
    "rcu_do_batch",
    "rcu_process_callbacks",
    "do_one_initcall",
    "kernel_init",
    "kernel_init_freeable",
    "start_kernel",
    "secondary_start_kernel",
    "x86_64_start_kernel",
    "x86_64_start_reservations",
    "start_secondary",
    "cpu_startup_entry",
    "do_idle",
    "default_idle",
    "default_idle_call",
    "cpuidle_enter",
    "cpuidle_enter_state",
    "arch_cpu_idle",
    "native_safe_halt",
    "syscall_exit_to_user_mode",
    "exit_to_user_mode_prepare",
    "exit_to_usermode_loop",
    "prepare_exit_to_usermode",
    "syscall_return_slowpath",
    "task_work_run",
    "get_signal",
    "do_signal",
    "arch_do_signal_or_restart",
    "do_exit",
    "do_group_exit",
    "__do_sys_exit_group",
    "__se_sys_exit_group",
    "__x64_sys_exit_group",
    // more routines that report on their callers' behalf (found measuring against
    // syzkaller's data: each the frame above the one a person would blame)
    "__x86_indirect_thunk_rax",
    "__x86_indirect_thunk_rbx",
    "__x86_indirect_thunk_rcx",
    "__x86_indirect_thunk_rdx",
    "__x86_indirect_thunk_rsi",
    "__x86_indirect_thunk_rdi",
    "__x86_indirect_thunk_r8",
    "__x86_indirect_thunk_r11",
    "__x86_return_thunk",
    "context_switch",
    "__switch_to",
    "__switch_to_asm",
    "preempt_schedule_common",
    "preempt_schedule_irq",
    "preempt_schedule",
    "schedule_timeout_uninterruptible",
    "schedule_timeout_interruptible",
    "schedule_timeout_killable",
    "__rt_mutex_slowlock",
    "rt_mutex_slowlock",
    "__wait_rcu_gp",
    "wait_rcu_gp",
    "bit_wait_io",
    "bit_wait",
    "__wait_on_bit",
    "__wait_on_bit_lock",
    "out_of_line_wait_on_bit",
    "out_of_line_wait_on_bit_lock",
    "wait_on_page_bit_common",
    "wait_on_page_bit",
    "folio_wait_bit_common",
    "folio_wait_bit",
    "__folio_lock",
    "folio_unlock",
    "unlock_page",
    "__flush_work",
    "flush_work",
    "kthread_stop",
    "ldsem_down_write",
    "ldsem_down_read",
    "finish_wait",
    "prepare_to_wait_event",
    "__wake_up_common",
    "__wake_up_common_lock",
    "mutex_remove_waiter",
    "mutex_optimistic_spin",
    "osq_lock",
    "do_raw_spin_trylock",
    "_atomic_dec_and_lock",
    "_atomic_dec_and_lock_irqsave",
    "__local_bh_enable_ip",
    "local_bh_enable",
    "__fortify_report",
    "__fortify_panic",
    "fortify_panic",
    "__stack_chk_fail",
    "skb_panic",
    "skb_over_panic",
    "skb_under_panic",
    "usercopy_warn",
    "usercopy_abort",
    "__check_heap_object",
    "check_heap_object",
    "__phys_addr",
    "__virt_to_phys",
    "__virt_addr_valid",
    "kmalloc_slab",
    "kmalloc_order",
    "kmalloc_order_trace",
    "kmalloc_large_node",
    "free_large_kmalloc",
    "__alloc_frozen_pages_noprof",
    "__alloc_pages_noprof",
    "alloc_pages_mpol",
    "alloc_page_interleave",
    "post_alloc_hook",
    "should_failslab",
    "__should_failslab",
    "should_fail_alloc_page",
    "register_lock_class",
    "__this_cpu_preempt_check",
    "check_preemption_disabled",
    "debug_smp_processor_id",
    "debug_lockdep_rcu_enabled",
    "rcu_is_watching",
    "rcu_read_lock_held",
    "rcu_dynticks_curr_cpu_in_eqs",
    "sched_show_task",
    "_sched_show_task",
    "dump_backtrace",
    "arch_stack_walk",
    "stack_trace_consume_entry",
    "stack_trace_save",
    "save_trace",
    "unwind_next_frame",
    "__unwind_start",
    "__read_once_word_nocheck",
    "read_word_at_a_time",
    "work_is_static_object",
    "timer_is_static_object",
    "fixup_bug",
    "write_comp_data",
    "__sanitizer_cov_trace_pc",
    "qlist_free_all",
    "lock_timer_base",
    "string",
    "hex_string",
    "pointer",
    "vsnprintf",
    "snprintf",
    "sprintf",
    "scnprintf",
    "vscnprintf",
    "strnstr",
    "strncpy_from_user",
    "copy_from_iter",
    "_copy_to_iter",
    "_copy_from_iter",
    "copyout_mc",
    "atomic_read",
    "atomic_inc",
    "atomic_dec",
    "atomic_dec_and_test",
    "atomic_long_read",
    "refcount_inc_not_zero_checked",
    "refcount_sub_and_test_checked",
    "rb_erase",
    "rb_erase_cached",
    "rb_next",
    "rb_first",
    "rb_insert_color",
    "__rb_insert_augmented",
    "__rb_erase_color",
    "klist_next",
    "xas_start",
    "xas_load",
    "xa_find",
    "crc_itu_t",
    "test_and_clear_bit",
    "test_and_set_bit",
    "set_bit",
    "clear_bit",
    "console_unlock",
    "assertfail",
    "kfree_skb",
    "kfree_skb_list",
    "ref_tracker_dir_exit",
    "ref_tracker_free",
    "perf_trace_lock",
    "perf_trace_lock_acquire",
    "rhashtable_lookup_fast",
    "device_del",
    "sysfs_remove_group",
    "sysfs_remove_file_ns",
    "kobject_del",
    "kobject_add_internal",
    "devres_release_all",
    "add_uevent_var",
    "usb_kill_urb",
    "usb_kill_anchored_urbs",
    "usb_start_wait_urb",
    "usb_submit_urb",
    "drain_workqueue",
    "__queue_work",
    "queue_work_on",
    "ida_free",
    "cleanup_srcu_struct",
    "drop_nlink",
    "__hwasan_tag_mismatch",
];

/// Prefixes of helper names (see [`HELPERS`]).
pub const HELPER_PREFIXES: &[&str] = &[
    "kasan_",
    "__kasan_",
    "__asan_",
    "asan_",
    "kmsan_",
    "__msan_",
    "kfence_",
    "__hwasan_",
    "__reiserfs_panic",
    "__kfence_",
    "kcsan_",
    "__kcsan_",
    "__tsan_",
    "__ubsan_",
    "ubsan_",
    "__sanitizer_",
    "lockdep_",
    "exc_",
    "asm_exc_",
    "__exc_",
    "do_trap_",
    "el1_",
    "el1h_",
    "__warn_",
    "warn_slowpath",
    "__report_",
    "report_",
    "do_el1_",
    "__se_sys_",
    "__x64_sys_",
    "__ia32_sys_",
    "__ia32_compat_sys_",
    "__arm64_sys_",
    "__riscv_sys_",
];

/// Whether `function` is one of the reporting and common helpers (its base name).
pub fn is_helper(function: &str) -> bool {
    let name = base_name(function);
    HELPERS.contains(&name) || HELPER_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_frames_with_and_without_marks() {
        let f = parse_frame(" ? do_ipv6_setsockopt.isra.8+0x3c5/0x39d0 [ipv6]").unwrap();
        assert_eq!(f.function.as_deref(), Some("do_ipv6_setsockopt.isra.8"));
        assert_eq!(f.name(), Some("do_ipv6_setsockopt"));
        assert_eq!((f.offset, f.size), (Some(0x3c5), Some(0x39d0)));
        assert_eq!(f.module.as_deref(), Some("ipv6"));
        assert!(!f.reliable);
        let f = parse_frame("RIP: 0010:[<ffffffff82d4e304>]  [<ffffffff82d4e304>] __memset+0x24/0x30").unwrap();
        assert_eq!(f.function.as_deref(), Some("__memset"));
        assert_eq!(f.address, Some(0xffff_ffff_82d4_e304));
        assert!(f.reliable);
    }

    #[test]
    fn riscv_and_arm64_frames() {
        let f = parse_frame("[<ffffffff80745a2e>] sysrq_handle_crash+0x1e/0x2a").unwrap();
        assert_eq!(f.function.as_deref(), Some("sysrq_handle_crash"));
        assert_eq!(f.address, Some(0xffff_ffff_8074_5a2e));
        let f = parse_frame("pc : sysrq_handle_crash+0x24/0x30").unwrap();
        assert_eq!(f.function.as_deref(), Some("sysrq_handle_crash"));
        assert_eq!(f.address, None);
    }

    #[test]
    fn lines_that_name_no_frame() {
        assert_eq!(parse_frame("Read of size 8 at addr ffff88801234 by task a/1"), None);
        assert_eq!(parse_frame("x+0xzz/0x1"), None);
        assert_eq!(parse_frame("+0x12/0x34"), None);
        assert_eq!(parse_frame("9abc+0x12/0x34"), None);
    }

    #[test]
    fn helpers_by_name_and_prefix() {
        assert!(is_helper("dump_stack"));
        assert!(is_helper("kasan_report.cold.9"));
        assert!(is_helper("__asan_load8"));
        assert!(!is_helper("sysrq_handle_crash"));
        assert!(!is_helper("panic_smth_else"));
    }
}
