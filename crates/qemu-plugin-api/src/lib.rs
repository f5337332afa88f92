//! QEMU's TCG plugin API (version 4, QEMU 9.2 and later), declared here for the few
//! functions the bench's two plugins call (`crates/stamp-plugin`, `crates/cover-plugin`):
//! the API has no Rust crate made for it that needs no header at build time, and its C
//! header is not in Debian's QEMU packages. The functions are QEMU's own, resolved when
//! QEMU loads a plugin; each plugin keeps its own entry point (`qemu_plugin_install`) and
//! version (`qemu_plugin_version`, [`VERSION`]).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock};

/// The API version the declarations are written for (QEMU refuses one it does not support).
pub const VERSION: c_int = 4;

/// Opaque handles of QEMU's plugin API.
#[repr(C)]
pub struct Tb {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct Insn {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct HwAddr {
    _opaque: [u8; 0],
}

/// `qemu_plugin_mem_value`: the value of a load or store, by its width.
#[repr(C)]
pub struct MemValue {
    pub kind: c_int,
    pub data: MemData,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub union MemData {
    pub u8: u8,
    pub u16: u16,
    pub u32: u32,
    pub u64: u64,
    pub u128: [u64; 2],
}

/// `QEMU_PLUGIN_CB_NO_REGS` and `QEMU_PLUGIN_MEM_W`.
pub const NO_REGS: c_int = 0;
pub const MEM_W: c_int = 2;

extern "C" {
    pub fn qemu_plugin_register_vcpu_tb_trans_cb(id: u64, cb: extern "C" fn(u64, *mut Tb));
    pub fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    pub fn qemu_plugin_tb_vaddr(tb: *const Tb) -> u64;
    pub fn qemu_plugin_tb_get_insn(tb: *const Tb, index: usize) -> *mut Insn;
    pub fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
    pub fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut Tb,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut Insn,
        cb: extern "C" fn(u32, u32, u64, *mut c_void),
        flags: c_int,
        rw: c_int,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_get_hwaddr(info: u32, vaddr: u64) -> *mut HwAddr;
    pub fn qemu_plugin_hwaddr_is_io(hwaddr: *const HwAddr) -> bool;
    pub fn qemu_plugin_hwaddr_phys_addr(hwaddr: *const HwAddr) -> u64;
    pub fn qemu_plugin_mem_get_value(info: u32) -> MemValue;
    pub fn qemu_plugin_register_atexit_cb(id: u64, cb: extern "C" fn(u64, *mut c_void), userdata: *mut c_void);
}

/// The arguments QEMU passes a plugin's `qemu_plugin_install` (`-plugin FILE,key=value,…`).
///
/// # Safety
///
/// `argv` holds `argc` NUL-terminated strings, as QEMU passes them.
pub unsafe fn args(argc: c_int, argv: *const *const c_char) -> Vec<String> {
    (0..argc.max(0) as usize)
        // SAFETY: the caller's promise: `argc` valid C strings in `argv`.
        .map(|i| unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy().into_owned())
        .collect()
}

/// What a plugin is, for [`install`]: its name in a refusal, where its state is kept,
/// what makes that state from its arguments, and its two callbacks (every translated
/// block, QEMU's exit).
pub struct Plugin<S: 'static> {
    pub name: &'static str,
    pub state: &'static OnceLock<Mutex<S>>,
    pub configure: fn(&[String]) -> Result<S, String>,
    pub translated: extern "C" fn(u64, *mut Tb),
    pub exiting: extern "C" fn(u64, *mut c_void),
}

/// A plugin's `qemu_plugin_install`, once for both: its arguments read and given to
/// `configure`, the state kept, `translated` asked for every translated block and
/// `exiting` for QEMU's exit. A refusal is said on stderr under the plugin's name, and
/// QEMU does not start (the nonzero return).
///
/// # Safety
///
/// `id`, `argc` and `argv` are what QEMU passed the plugin's `qemu_plugin_install`.
pub unsafe fn install<S>(plugin: &Plugin<S>, id: u64, argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: the caller's promise: QEMU passes `argc` valid C strings in `argv`.
    let args = unsafe { args(argc, argv) };
    match (plugin.configure)(&args) {
        Ok(made) => {
            let _ = plugin.state.set(Mutex::new(made));
            // SAFETY: `id` is this plugin's, as QEMU passed it.
            unsafe {
                qemu_plugin_register_vcpu_tb_trans_cb(id, plugin.translated);
                qemu_plugin_register_atexit_cb(id, plugin.exiting, std::ptr::null_mut());
            }
            0
        }
        Err(why) => {
            eprintln!("{}: {why}", plugin.name);
            1
        }
    }
}
