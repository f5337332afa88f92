//! A QEMU TCG plugin (`-plugin libtestbench_stamp_plugin.so,socket=PATH,uart=0xADDR,model=16550`)
//! that counts the guest's instructions and, for each byte the guest sends on its UART,
//! writes a [`Record`] on the bench's Unix socket: the byte with the count when it was
//! stored, and a tick every [`TICK_INSNS`] instructions. The count is the plugin's own
//! (each translation block adds its length when it starts), so under icount it repeats
//! exactly from run to run with the guest.
//!
//! Written against QEMU's plugin API (version 4), declared once for the bench's plugins
//! in `crates/qemu-plugin-api`.

use std::ffi::{c_char, c_int, c_void};
use std::io::{BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use testbench_qemu_plugin_api::{self as api, *};
use testbench_stamp::{Model, Record, Uart, TICK_INSNS};

/// The API version this plugin is written for (QEMU refuses one it does not support).
#[no_mangle]
pub static qemu_plugin_version: c_int = api::VERSION;

/// Instructions the guest has executed (every hart's: under icount they run in turn).
static INSNS: AtomicU64 = AtomicU64::new(0);
/// The count at which the next tick is due.
static NEXT_TICK: AtomicU64 = AtomicU64::new(TICK_INSNS);
/// The UART followed, and the socket; None once the bench stopped reading.
static STATE: OnceLock<Mutex<State>> = OnceLock::new();

struct State {
    uart: Uart,
    out: Option<BufWriter<UnixStream>>,
}

fn send(state: &mut State, record: Record, flush: bool) {
    if let Some(out) = state.out.as_mut() {
        let sent = out.write_all(&record.encode()).and_then(|()| if flush { out.flush() } else { Ok(()) });
        if sent.is_err() {
            // The bench has gone: the guest runs on, unstamped.
            state.out = None;
        }
    }
}

extern "C" fn tb_exec(_vcpu: u32, insns: *mut c_void) {
    let now = INSNS.fetch_add(insns as u64, Relaxed) + insns as u64;
    let due = NEXT_TICK.load(Relaxed);
    if now >= due {
        NEXT_TICK.store(now - now % TICK_INSNS + TICK_INSNS, Relaxed);
        if let Some(state) = STATE.get() {
            send(&mut state.lock().unwrap_or_else(|e| e.into_inner()), Record::Tick { insns: now }, true);
        }
    }
}

extern "C" fn store(_vcpu: u32, info: u32, vaddr: u64, _userdata: *mut c_void) {
    // SAFETY: `info` and `vaddr` are the ones QEMU passed to this memory callback, and
    // the handle it returns is read before the callback returns, as the API requires.
    let (io, addr) = unsafe {
        let hwaddr = qemu_plugin_get_hwaddr(info, vaddr);
        if hwaddr.is_null() {
            return;
        }
        (qemu_plugin_hwaddr_is_io(hwaddr), qemu_plugin_hwaddr_phys_addr(hwaddr))
    };
    let Some(state) = STATE.get() else { return };
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if !io || !state.uart.owns(addr) {
        return;
    }
    // SAFETY: called from the memory callback whose access `info` describes; the low
    // eight bytes of the union are written for every width QEMU reports.
    let value = unsafe { qemu_plugin_mem_get_value(info).data.u64 };
    if let Some(byte) = state.uart.store(addr, value) {
        let insns = INSNS.load(Relaxed);
        send(&mut state, Record::Byte { insns, byte }, byte == b'\n');
    }
}

/// QEMU is exiting: what the socket's buffer still holds is sent (the guest's last bytes
/// before a power-off or a crash that ended QEMU).
extern "C" fn exiting(_id: u64, _userdata: *mut c_void) {
    if let Some(state) = STATE.get() {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = state.out.as_mut() {
            let _ = out.flush();
        }
    }
}

extern "C" fn translated(_id: u64, tb: *mut Tb) {
    // SAFETY: `tb` is the block QEMU is translating, valid for this callback; each
    // instruction handle is used only within it.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, NO_REGS, n as *mut c_void);
        for index in 0..n {
            let insn = qemu_plugin_tb_get_insn(tb, index);
            qemu_plugin_register_vcpu_mem_cb(insn, store, NO_REGS, MEM_W, std::ptr::null_mut());
        }
    }
}

/// The plugin's arguments: `socket=PATH`, `uart=0xADDR`, `model=16550|pl011`.
fn configure(args: &[String]) -> Result<State, String> {
    let get = |key: &str| args.iter().find_map(|a| a.strip_prefix(key).and_then(|v| v.strip_prefix('=')));
    let path = get("socket").ok_or("socket=PATH is missing")?;
    let base = get("uart").ok_or("uart=0xADDR is missing")?;
    let base = u64::from_str_radix(base.trim_start_matches("0x"), 16).map_err(|e| format!("uart={base}: {e}"))?;
    let model = get("model").ok_or("model=16550|pl011 is missing")?;
    let model = Model::from_name(model).ok_or_else(|| format!("model={model}: 16550 or pl011"))?;
    let stream = UnixStream::connect(path).map_err(|e| format!("socket={path}: {e}"))?;
    Ok(State { uart: Uart::new(model, base), out: Some(BufWriter::with_capacity(1 << 16, stream)) })
}

/// QEMU's entry point: reads the arguments, connects to the bench, and asks for every
/// translated block. A refusal is said on stderr, and QEMU does not start.
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
    let plugin = api::Plugin { name: "testbench stamp plugin", state: &STATE, configure, translated, exiting };
    // SAFETY: QEMU's own arguments, passed on.
    unsafe { api::install(&plugin, id, argc, argv) }
}
