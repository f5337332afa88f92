//! A QEMU TCG plugin (`-plugin libtestbench_cover_plugin.so,out=PATH,range=0xLO-0xHI,…`)
//! that records which of the kernel's instructions ran, for the bench's `--coverage`.
//!
//! Each translation block whose first instruction lies in a range the bench gives (the
//! kernel ELF's executable sections) is looked up by its address and length in a table
//! of the blocks seen; the first time, its instructions' addresses are kept, and the
//! block's execution callback sets its flag. A block translated again (after a flush)
//! finds its entry. Code outside the ranges (user programs, firmware) gets no callback
//! at all. When QEMU exits, the addresses of the instructions of every block that ran
//! are written once, sorted and each once, in the format of `testbench-cover`, so the
//! file is the same on every run that executes the same code.
//!
//! Bounded: at most `MAX_BLOCKS` blocks are followed and `MAX_ADDRESSES` addresses
//! written; past either the file says it is truncated.
//!
//! Written against QEMU's plugin API (version 4), declared once for the bench's plugins
//! in `crates/qemu-plugin-api`.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use testbench_cover::{Coverage, Range, MAX_ADDRESSES, MAX_BLOCKS, MAX_RANGES};
use testbench_qemu_plugin_api::{self as api, *};

/// The API version this plugin is written for.
#[no_mangle]
pub static qemu_plugin_version: c_int = api::VERSION;

/// One block followed: its instructions' addresses and whether it ran. Boxed and never
/// freed while QEMU runs: its flag's address is the execution callback's argument.
struct Block {
    ran: AtomicBool,
    insns: Box<[u64]>,
}

struct State {
    out: PathBuf,
    ranges: Vec<Range>,
    /// (first address, instructions) → the block.
    blocks: HashMap<(u64, usize), &'static Block>,
    /// Blocks past `MAX_BLOCKS` were not followed.
    truncated: bool,
}

static STATE: OnceLock<Mutex<State>> = OnceLock::new();

extern "C" fn ran(_vcpu: u32, block: *mut c_void) {
    // SAFETY: `block` is the address of a `Block` leaked in `translated`, never freed.
    let block = unsafe { &*(block as *const Block) };
    if !block.ran.load(Relaxed) {
        block.ran.store(true, Relaxed);
    }
}

extern "C" fn translated(_id: u64, tb: *mut Tb) {
    let Some(state) = STATE.get() else { return };
    // SAFETY: `tb` is the block QEMU is translating, valid for this callback.
    let (start, n) = unsafe { (qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb)) };
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if n == 0 || !state.ranges.iter().any(|r| r.contains(start)) {
        return;
    }
    let block = match state.blocks.get(&(start, n)) {
        Some(block) => *block,
        None if state.blocks.len() >= MAX_BLOCKS => {
            state.truncated = true;
            return;
        }
        None => {
            // SAFETY: each instruction handle is read within this callback.
            let insns = (0..n).map(|i| unsafe { qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i)) }).collect();
            let block: &'static Block = Box::leak(Box::new(Block { ran: AtomicBool::new(false), insns }));
            state.blocks.insert((start, n), block);
            block
        }
    };
    // SAFETY: `tb` is being translated; the userdata outlives QEMU's use of it.
    unsafe { qemu_plugin_register_vcpu_tb_exec_cb(tb, ran, NO_REGS, block as *const Block as *mut c_void) };
}

/// QEMU is exiting: the instructions of every block that ran, written once.
extern "C" fn exiting(_id: u64, _userdata: *mut c_void) {
    let Some(state) = STATE.get() else { return };
    let state = state.lock().unwrap_or_else(|e| e.into_inner());
    let mut addresses: Vec<u64> =
        state.blocks.values().filter(|b| b.ran.load(Relaxed)).flat_map(|b| b.insns.iter().copied()).collect();
    addresses.sort_unstable();
    addresses.dedup();
    let mut truncated = state.truncated;
    if addresses.len() > MAX_ADDRESSES {
        addresses.truncate(MAX_ADDRESSES);
        truncated = true;
    }
    let bytes = Coverage { addresses, truncated }.encode();
    // Written beside, then renamed: a file the bench finds is whole.
    let partial = state.out.with_extension("partial");
    if let Err(error) = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, &state.out)) {
        eprintln!("testbench cover plugin: cannot write {}: {error}", state.out.display());
    }
}

/// The plugin's arguments: `out=PATH` and one `range=0xLO-0xHI` or more.
fn configure(args: &[String]) -> Result<State, String> {
    let mut out = None;
    let mut ranges = Vec::new();
    for arg in args {
        match arg.split_once('=') {
            Some(("out", path)) => out = Some(PathBuf::from(path)),
            Some(("range", range)) => ranges.push(Range::parse(range).map_err(|e| format!("range={e}"))?),
            _ => return Err(format!("{arg}: not out=PATH or range=0xLO-0xHI")),
        }
    }
    let out = out.ok_or("out=PATH is missing")?;
    if ranges.is_empty() || ranges.len() > MAX_RANGES {
        return Err(format!("{} ranges: give from 1 to {MAX_RANGES}", ranges.len()));
    }
    // The file is written at exit: a directory that cannot take it is said now.
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(format!("out={}: its directory does not exist", out.display()));
    }
    Ok(State { out, ranges, blocks: HashMap::new(), truncated: false })
}

/// QEMU's entry point: reads the arguments and asks for every translated block. A
/// refusal is said on stderr, and QEMU does not start.
///
/// # Safety
///
/// Called by QEMU once, with `argv` holding `argc` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: u64,
    _info: *const c_void,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let plugin = api::Plugin { name: "testbench cover plugin", state: &STATE, configure, translated, exiting };
    // SAFETY: QEMU's own arguments, passed on.
    unsafe { api::install(&plugin, id, argc, argv) }
}
