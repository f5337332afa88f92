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
        // x86 marks a frame it cannot vouch for `? f+0x1/0x2`, powerpc `f+0x1/0x2 (unreliable)`.
        let reliable = !before.ends_with('?') && !line.trim_end().ends_with("(unreliable)");
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
    "mark_lock_irq",
    "valid_state",
    "mark_usage",
    "print_irq_inversion_bug",
    "check_usage_backwards",
    "check_usage_forwards",
    "print_lock",
    "print_bad_irq_dependency",
    "print_deadlock_bug",
    "print_unlock_imbalance_bug",
    "print_irqtrace_events",
    "print_cpu_stall",
    "print_other_cpu_stall",
    "rcu_dump_cpu_stacks",
    "dump_cpu_task",
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
    "percpu_rwsem_wait",
    "__percpu_down_read",
    "percpu_down_read",
    "percpu_down_write",
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
    "do_tag_check_fault",
    "__lock_page",
    "lock_page",
    "__folio_lock_killable",
    "__wait_on_buffer",
    "wait_on_buffer",
    "__filemap_fdatawait_range",
    "filemap_fdatawait_range",
    "filemap_fdatawait_keep_errors",
    "__cancel_work_timer",
    "__cancel_work_sync",
    "cancel_work_sync",
    "cancel_delayed_work_sync",
    "del_timer_sync",
    "timer_delete_sync",
    "rcu_barrier",
    "usb_control_msg",
    "usb_bulk_msg",
    "usb_interrupt_msg",
    "console_lock",
    "lock_downgrade",
    "reacquire_held_locks",
    "look_up_lock_class",
    "hlock_class",
    "lock_sock_nested",
    "kobject_init_and_add",
    "kobject_add",
    "kobject_add_varg",
    "kobject_uevent_env",
    "kobject_uevent",
    "device_release",
    "dpm_sysfs_remove",
    "krealloc",
    "__vmalloc_node_range_memcg",
    "__vmalloc_node_range_noprof",
    "kvmalloc_node_noprof",
    "__kvmalloc_node_noprof",
    "kmalloc_array",
    "kcalloc",
    "memdup_user_nul",
    "___kmalloc_large_node",
    "__kmalloc_large_node",
    "__kmalloc_large_node_noprof",
    "__kmalloc_noprof",
    "__kmalloc_cache_noprof",
    "kmalloc_trace_noprof",
    "print_tainted",
    "walk_stackframe",
    "fast_dput",
    "dput",
    "mark_buffer_dirty",
    "__mark_inode_dirty",
    "tty_ldisc_lock_pair_timeout",
    "__schedule_bug",
    "_raw_spin_trylock",
    "__wake_up",
    "device_remove_file",
    "device_destroy",
    "device_unregister",
    "get_device_parent",
    "vprintk_emit",
    "vprintk_func",
    "dev_vprintk_emit",
    "dev_printk_emit",
    "__dev_printk",
    "dev_printk",
    "_dev_info",
    "_dev_err",
    "_dev_warn",
    "_dev_notice",
    "__netdev_printk",
    "netdev_info",
    "netdev_err",
    "netdev_warn",
    // unregistering a network device: its driver's or namespace's teardown asked
    "rollback_registered_many",
    "rollback_registered",
    "unregister_netdevice_queue",
    "unregister_netdevice_many",
    "unregister_netdev",
    // queueing an RCU callback or a work item: the caller's object
    "call_rcu",
    "__call_rcu",
    "__call_rcu_common",
    "call_rcu_sched",
    "call_rcu_bh",
    "kvfree_call_rcu",
    "queue_delayed_work_on",
    // dropping an inode reference: the caller's inode
    "iput",
    // deleting a timer synchronously: its callers own the timer
    "lock_timer_base",
    "__try_to_del_timer_sync",
    "__timer_delete_sync",
    "sk_stop_timer_sync",
    "vprintk",
    "vprintk_default",
    "printk",
    "_printk",
    "irqentry_exit",
    "irqentry_exit_cond_resched",
    "get_taint",
    "del_timer",
    "timer_delete",
    "__mod_timer",
    "mod_timer",
    "destroy_workqueue",
    "_cond_resched",
    "__cond_resched",
    "retint_kernel",
    "___preempt_schedule",
    "preempt_schedule_thunk",
    "trace_hardirqs_on",
    "trace_hardirqs_off",
    "kthread_should_stop",
    "vzalloc",
    "vmalloc_user",
    "quarantine_reduce",
    "tty_ldisc_ref_wait",
    "system_call_fastpath",
    "int_ret_from_sys_call",
    "ret_fast_syscall",
    "stub_execve",
    "irqentry_exit_to_user_mode",
    "common_interrupt_return",
    "ret_from_intr",
    "restore_regs_and_return_to_kernel",
    "swapgs_restore_regs_and_return_to_usermode",
    "__vunmap",
    "__free_pages_ok",
    "__kmalloc_reserve",
    "device_add",
    "proc_register",
    "release_sock",
    "__seqprop_assert",
    "skb_put",
    "skb_push",
    "skb_pull",
    "__skb_put",
    "__skb_push",
    "flush_workqueue",
    "__flush_workqueue",
    "down_trylock",
    "try_to_grab_pending",
    "alloc_inode",
    "kstrdup",
    "kstrndup",
    "kstrdup_const",
    "radix_tree_node_alloc",
    "sock_kmalloc",
    "sk_prot_alloc",
    "create_object",
    "__create_object",
    "slab_post_alloc_hook",
    "debug_objects_mem_init",
    "vprintk_store",
    "va_format",
    "hex_dump_to_buffer",
    "print_hex_dump",
    "crc16",
    "crc32_le",
    "xas_find",
    "__try_to_del_timer_sync",
    "try_to_del_timer_sync",
    "exiting_irq",
    "insert_work",
    "__queue_delayed_work",
    "kernel_fpu_begin_mask",
    "_stext",
    "put_device",
    "proc_create_data",
    "call_rcu_sched",
    "do_nanosleep",
    "hrtimer_nanosleep",
    "aes_encrypt",
    "aes_decrypt",
    "crc32_le_base",
    "crc32c",
    "simple_copy_to_iter",
    "copy_page_to_iter",
    "copy_page_from_iter",
    "handle_overflow",
];

/// Functions that never return: a return address just below one of them in a trace can
/// lie past its caller's end (`scan.rs`).
pub const NORETURN: &[&str] =
    &["panic", "nmi_panic", "do_exit", "do_group_exit", "make_task_dead", "kthread_exit", "__stack_chk_fail", "die"];

/// Whether `name` is a function that never returns ([`NORETURN`]).
pub fn is_noreturn(name: &str) -> bool {
    NORETURN.contains(&base_name(name))
}

/// Helpers whose WARNING is about their caller's use of them (`usb_submit_urb` on an
/// URB whose pipe does not match its endpoint): the title names both, `caller/checker`.
/// Each is in [`HELPERS`] too, so the caller is the guilty frame.
pub const CHECKERS: &[&str] = &["usb_submit_urb"];

/// Prefixes of helper names (see [`HELPERS`]).
pub const HELPER_PREFIXES: &[&str] = &[
    "kasan_",
    "__kasan_",
    "__asan_",
    "asan_",
    "kmsan_",
    "__msan_",
    "kfence_",
    "kmemleak_",
    "kmem_cache_alloc",
    "__kmem_cache_alloc",
    "__kmalloc",
    "kmalloc_",
    "kzalloc",
    "kvmalloc",
    "kvzalloc",
    "pcpu_mem_",
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
    // The tracing twin of the APIC timer entry (4.x, `…_entry_after_kaiser_bti` too).
    "smp_trace_apic_timer_interrupt",
    "__se_sys_",
    "__x64_sys_",
    "__ia32_sys_",
    "__ia32_compat_sys_",
    "__arm64_sys_",
    "__riscv_sys_",
];

/// The layers that hand work on to the code that does it (a system call to its file's
/// operation, a socket call to its protocol, a work item to its function): a stall is
/// titled by the frame below them. Used for stalls only (see `stall_frame`).
pub const DISPATCH: &[&str] = &[
    "proc_reg_write",
    "proc_reg_read",
    "proc_reg_unlocked_ioctl",
    "full_proxy_write",
    "full_proxy_read",
    "full_proxy_unlocked_ioctl",
    "compat_blkdev_ioctl",
    "asm_call_on_stack",
    "asm_call_irq_on_stack",
    "asm_call_sysvec_on_stack",
    "run_on_irqstack_cond",
    "__handle_domain_irq",
    "handle_domain_irq",
    "irq_exit_rcu",
    "sysvec_apic_timer_interrupt",
    "asm_sysvec_apic_timer_interrupt",
    "apic_timer_interrupt",
    "smp_apic_timer_interrupt",
    "__irq_exit_rcu",
    "do_softirq_own_stack",
    "call_on_irq_stack",
    "net_rx_action",
    "__napi_poll",
    "blkdev_ioctl",
    "block_ioctl",
    "vm_mmap_pgoff",
    "do_mmap",
    "mmap_region",
    "inet_sendmsg",
    "inet_recvmsg",
    "inet6_sendmsg",
    "inet6_recvmsg",
    "vfs_read",
    "vfs_write",
    "__vfs_read",
    "__vfs_write",
    "vfs_readv",
    "vfs_writev",
    "do_iter_read",
    "do_iter_write",
    "do_iter_readv_writev",
    "new_sync_read",
    "new_sync_write",
    "do_readv",
    "do_writev",
    "do_preadv",
    "do_pwritev",
    "vfs_ioctl",
    "do_vfs_ioctl",
    "ksys_ioctl",
    "ksys_read",
    "ksys_write",
    "ksys_pread64",
    "ksys_pwrite64",
    "sock_sendmsg",
    "sock_recvmsg",
    "__sock_sendmsg",
    "sock_sendmsg_nosec",
    "sock_recvmsg_nosec",
    "sock_write_iter",
    "sock_read_iter",
    "____sys_sendmsg",
    "___sys_sendmsg",
    "__sys_sendmsg",
    "____sys_recvmsg",
    "___sys_recvmsg",
    "__sys_recvmsg",
    "__sys_sendto",
    "__sys_recvfrom",
    "sock_ioctl",
    "sock_do_ioctl",
    "sock_common_setsockopt",
    "sock_common_getsockopt",
    "__sys_setsockopt",
    "__sys_getsockopt",
    "do_sock_setsockopt",
    "compat_sys_ioctl",
    "netlink_unicast",
    "netlink_rcv_skb",
    "netlink_sendmsg",
    "genl_rcv",
    "genl_rcv_msg",
    "genl_family_rcv_msg",
    "rtnetlink_rcv",
    "rtnetlink_rcv_msg",
    "nfnetlink_rcv",
    "nfnetlink_rcv_msg",
    "do_sys_open",
    "do_sys_openat2",
    "do_filp_open",
    "path_openat",
    "vfs_open",
    "do_dentry_open",
    "call_write_iter",
    "call_read_iter",
    "__fput",
    "____fput",
    "fput",
    "filp_close",
    "__close_fd",
    "do_exit",
    "mmput",
    "exit_mmap",
    "net_rx_action",
    "__napi_poll",
    "napi_poll",
    "process_backlog",
    "__netif_receive_skb",
    "__netif_receive_skb_core",
    "__netif_receive_skb_one_core",
    "netif_receive_skb",
    "netif_receive_skb_internal",
    "__netif_receive_skb_list_core",
    "tasklet_action",
    "tasklet_action_common",
    "handle_softirqs",
    "call_timer_fn",
    "__run_timers",
    "run_timer_softirq",
    "expire_timers",
    "process_one_work",
    "worker_thread",
    "kthread",
    "ret_from_fork",
    "do_syscall_64",
    "entry_SYSCALL_64_after_hwframe",
    "__do_fast_syscall_32",
    "do_fast_syscall_32",
    "el0_svc_common",
    "do_el0_svc",
    "invoke_syscall",
    "el0_svc",
    "el0t_64_sync_handler",
    "el0t_64_sync",
    "__x64_sys_ioctl",
    "__se_sys_ioctl",
    "__do_sys_ioctl",
    "__arm64_sys_ioctl",
    "SyS_ioctl",
    "__x64_sys_write",
    "__x64_sys_read",
    "__x64_sys_sendmsg",
    "__x64_sys_sendto",
    "__x64_sys_recvmsg",
    "__x64_sys_recvfrom",
    "__x64_sys_writev",
    "__x64_sys_readv",
    "__x64_sys_openat",
    "__x64_sys_close",
    "__x64_sys_setsockopt",
    "__x64_sys_getsockopt",
    "__x64_sys_exit_group",
    "__do_sys_exit_group",
    "__se_sys_exit_group",
    "__x64_sys_exit",
    "SyS_write",
    "SyS_read",
    "SyS_sendmsg",
    "SyS_sendto",
    "SyS_setsockopt",
    "SyS_getsockopt",
    "SyS_exit_group",
    "sys_write",
    "sys_read",
    "sys_ioctl",
    "__arm64_sys_write",
    "__arm64_sys_read",
    "__arm64_sys_sendmsg",
    "__arm64_sys_sendto",
    "do_group_exit",
    "get_signal",
    "do_signal",
    "exit_to_user_mode_loop",
    "exit_to_usermode_loop",
    "task_work_run",
    "syscall_exit_to_user_mode",
    "irq_exit",
    "irq_exit_rcu",
    "__irq_exit_rcu",
    "do_softirq",
    "__do_softirq",
    "do_softirq_own_stack",
    "__local_bh_enable_ip",
    "local_bh_enable",
    "rcu_core",
    "rcu_do_batch",
    "smpboot_thread_fn",
    "run_ksoftirqd",
    "entry_SYSCALL_64_after_swapgs",
    "entry_SYSCALL_64_fastpath",
    "entry_SYSENTER_compat",
    "sysenter_flags_fixed",
    "sysenter_dispatch",
    "entry_SYSCALL_compat",
    "entry_INT80_compat",
    "do_int80_syscall_32",
    "do_syscall_32_irqs_on",
    "__do_page_fault",
    "do_page_fault",
    "do_user_addr_fault",
    "exc_page_fault",
    "page_fault",
    "asm_exc_page_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "async_page_fault",
    "__x64_sys_sendmsg",
    "__se_sys_sendmsg",
    "__do_sys_sendmsg",
    "__x64_sys_writev",
    "compat_SyS_writev",
    "compat_sys_writev",
    "do_compat_writev",
    "compat_writev",
    // A page fault hands on to the mapping's `vm_ops->fault` (`ext4_filemap_fault`).
    "__do_fault",
    "do_fault",
    "do_read_fault",
    "do_shared_fault",
    "do_cow_fault",
    // The hrtimer softirq runs each expired timer's callback: the callback is the work.
    "__hrtimer_run_queues",
    "hrtimer_run_softirq",
    // A netlink dump runs the family's `dumpit` callback.
    "netlink_dump",
    "__netlink_dump_start",
    "netlink_dump_start",
    "genl_family_rcv_msg_dumpit",
    "genl_family_rcv_msg_doit",
    "genl_lock_dumpit",
    // The system call table's switch (6.9 on): it calls the one system call's entry.
    "x64_sys_call",
    "ia32_sys_call",
];

/// The system calls that only hand work on to a file's, a socket's or a device's
/// operation (by their title names, see [`title_name`]).
pub const DISPATCH_SYSCALLS: &[&str] = &[
    "sys_ioctl",
    "sys_compat_ioctl",
    "sys_read",
    "sys_write",
    "sys_readv",
    "sys_writev",
    "sys_pread64",
    "sys_pwrite64",
    "sys_preadv",
    "sys_pwritev",
    "sys_sendmsg",
    "sys_sendto",
    "sys_recvmsg",
    "sys_recvfrom",
    "sys_open",
    "sys_openat",
    "sys_setsockopt",
    "sys_getsockopt",
    "sys_mmap",
    "sys_mmap_pgoff",
    "sys_splice",
    "sys_sendfile64",
    "sys_close",
];

/// Whether `function` is a dispatch layer ([`DISPATCH`], [`DISPATCH_SYSCALLS`]).
pub fn is_dispatch(function: &str) -> bool {
    let name = base_name(function);
    // A 32-bit compat ioctl handler converts its argument and calls the native one
    // (`kvm_vm_compat_ioctl` into `kvm_vm_ioctl`).
    name.ends_with("_compat_ioctl")
        || DISPATCH.contains(&name)
        || DISPATCH_SYSCALLS.contains(&title_name(name).as_str())
}

/// The name a title uses: a system call's entry points (`__do_sys_futex`, `__x64_sys_futex`,
/// `SyS_futex`, `__se_sys_futex`) all read `sys_futex`.
pub fn title_name(name: &str) -> String {
    // A CPU waiting on the others: one name for the family (`_many`, `_single`, `_cond`).
    if name.starts_with("smp_call_function") {
        return "smp_call_function".to_string();
    }
    // The flavours of an RCU grace-period wait, merged and renamed across kernels.
    if matches!(
        name,
        "synchronize_sched"
            | "synchronize_rcu_expedited"
            | "synchronize_sched_expedited"
            | "synchronize_rcu_bh"
            | "synchronize_rcu_normal"
            | "synchronize_srcu"
            | "__synchronize_srcu"
            | "synchronize_srcu_expedited"
    ) {
        return "synchronize_rcu".to_string();
    }
    for p in [
        "__do_sys_",
        "__se_sys_",
        "__x64_sys_",
        "__ia32_sys_",
        "__ia32_compat_sys_",
        "__x64_compat_sys_",
        "__arm64_sys_",
        "__arm64_compat_sys_",
        "__riscv_sys_",
        "compat_SyS_",
        "compat_sys_",
        "SyS_",
        "SYSC_",
    ] {
        if let Some(rest) = name.strip_prefix(p) {
            return format!("sys_{rest}");
        }
    }
    name.to_string()
}

/// Whether `function` allocates on its caller's behalf, by the kernel's naming: a name
/// that says so (`sk_alloc`, `__alloc_skb`, `htab_map_alloc`), the string duplicators
/// and formatters that return an allocation (`kstrdup`, `kvasprintf_const`), and the
/// libraries that allocate their own nodes for the caller's entry (`idr_`,
/// `radix_tree_`, `kobject_` naming, `pcpu_` chunks), and the page allocator's own
/// steps. A memory leak's title skips them, and so does a bad page found on allocation.
pub fn is_allocating(function: &str) -> bool {
    let name = base_name(function);
    name.contains("alloc")
        || matches!(name, "get_page_from_freelist" | "prep_new_page" | "__set_page_owner")
        || ["kstrdup", "kmemdup", "kvasprintf", "kasprintf", "kobject_", "idr_", "radix_tree_", "pcpu_"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// Whether `function` is the OOM killer or the page-fault path that reached the
/// allocator for a user page (an out-of-memory report's layers, never its culprit).
pub fn is_oom_path(function: &str) -> bool {
    let name = base_name(function);
    matches!(
        name,
        "dump_header"
            | "oom_kill_process"
            | "out_of_memory"
            | "pagefault_out_of_memory"
            | "handle_mm_fault"
            | "__handle_mm_fault"
            | "handle_pte_fault"
            | "do_anonymous_page"
            | "do_fault"
            | "do_pte_missing"
            | "do_user_addr_fault"
            | "exc_page_fault"
            | "asm_exc_page_fault"
            | "handle_page_fault"
            | "do_page_fault"
            | "handle_exception"
            | "do_mem_abort"
            | "do_translation_fault"
            | "el0_da"
            | "el0t_64_sync_handler"
            | "el0t_64_sync"
    )
}

/// Whether `function` is one of the reporting and common helpers (its base name).
pub fn is_helper(function: &str) -> bool {
    // The list is long (hundreds of names) and asked for every frame a report's title
    // looks at: a set, built once.
    static SET: std::sync::OnceLock<std::collections::HashSet<&'static str>> = std::sync::OnceLock::new();
    let name = base_name(function);
    let set = SET.get_or_init(|| HELPERS.iter().copied().collect());
    set.contains(name) || HELPER_PREFIXES.iter().any(|p| name.starts_with(p))
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
