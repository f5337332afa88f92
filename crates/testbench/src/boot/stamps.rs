//! The settle time in guest time: a boot in guest time that never powers off ends a
//! count of the guest's instructions after its last expect, not a time of the host's.
//!
//! QEMU loads the bench's plugin (`crates/stamp-plugin`), which stamps each byte the guest
//! sends on its UART with the guest's instruction count and sends it on a socket in the
//! run's private directory. Such a boot's judge reads the console from those stamps: each
//! byte at its guest time (the count times icount's 2^shift ns), the settle time's end
//! seen when a stamp (a byte or a tick) reaches it, and `console.log` is the stamped
//! bytes up to there, the same on every run of a pinned seed. QEMU's serial output is kept
//! whole in `serial.log`.
//!
//! Only a boot whose console is a memory-mapped UART the plugin knows (QEMU's virt
//! machines: riscv's 16550, aarch64's PL011; x86_64's is port I/O, which no plugin memory
//! callback sees), with no typed input (it is recorded, with sleep on), sessions, resets
//! or power-off, and a numeric `shift`: the others keep the host's settle time.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use testbench_case::Arch;
use testbench_stamp::{Model, Record, RECORD_LEN};

use super::event::Event;

/// The plugin's file, beside the bench's binary (the launcher builds both).
pub const PLUGIN: &str = "libtestbench_stamp_plugin.so";

/// How a boot is stamped: the plugin, the UART it follows, icount's shift.
#[derive(Clone, Debug)]
pub struct StampSpec {
    pub plugin: PathBuf,
    pub uart: u64,
    pub model: Model,
    pub shift: u32,
}

/// Why a boot keeps the host's settle time, when it could have the guest's.
pub const NO_PLUGIN: &str = "the stamp plugin is not built beside the bench";

impl StampSpec {
    /// The stamp of a boot of `arch` on QEMU's `machine` under `icount`, when its console
    /// can be stamped; `plugin_dir` holds the plugin.
    pub fn for_boot(arch: Arch, machine: &str, icount: &str, plugin_dir: &Path) -> Result<StampSpec, &'static str> {
        if machine.split(',').next() != Some("virt") {
            return Err("its machine is not QEMU's virt, whose UART the plugin knows");
        }
        let (model, uart) = match arch {
            Arch::Rv64 | Arch::Rv32 => (Model::Ns16550, 0x1000_0000),
            Arch::Aarch64 => (Model::Pl011, 0x0900_0000),
            Arch::X86_64 => return Err("x86_64's UART is port I/O, which the plugin does not see"),
        };
        let shift = icount
            .split(',')
            .find_map(|option| option.strip_prefix("shift="))
            .or_else(|| icount.split(',').next().filter(|first| !first.contains('=')))
            .and_then(|shift| shift.parse::<u32>().ok())
            .filter(|shift| *shift <= 10)
            .ok_or("its icount has no shift from 0 to 10 (shift=auto follows the host)")?;
        let plugin = plugin_dir.join(PLUGIN);
        if !plugin.is_file() {
            return Err(NO_PLUGIN);
        }
        Ok(StampSpec { plugin, uart, model, shift })
    }

    /// QEMU's arguments that load the plugin, sending on `socket`.
    pub fn qemu_args(&self, socket: &Path) -> [String; 2] {
        let plugin = format!(
            "{},socket={},uart={:#x},model={}",
            self.plugin.display(),
            socket.display(),
            self.uart,
            self.model.name()
        );
        ["-plugin".to_string(), plugin]
    }

    /// The guest's time at a stamp.
    pub fn time(&self, record: Record) -> Duration {
        testbench_stamp::guest_time(record.insns(), self.shift)
    }
}

/// The socket the plugin connects to, listening before QEMU starts.
pub fn listen(path: &Path) -> std::io::Result<UnixListener> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// How many records one event carries at most.
const BATCH: usize = 4096;

/// Reads the plugin's records into the boot's channel, as [`Event::Stamps`], then
/// [`Event::StampsEnd`] when the plugin closes its end (QEMU exited). The plugin must
/// connect by `deadline` (QEMU loads it before the guest starts): one that does not is
/// said as such, and the boot fails on it (a QEMU that ignored `-plugin` would otherwise
/// leave the judge without a byte).
pub fn spawn_reader(listener: UnixListener, sender: SyncSender<Event>, deadline: Instant) {
    std::thread::spawn(move || {
        let Some(stream) = accept(&listener, deadline) else {
            let _ = sender.send(Event::StampsEnd { connected: false });
            return;
        };
        read_records(stream, &sender);
        let _ = sender.send(Event::StampsEnd { connected: true });
    });
}

fn accept(listener: &UnixListener, deadline: Instant) -> Option<UnixStream> {
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, _)) => return stream.set_nonblocking(false).ok().map(|()| stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    }
    None
}

fn read_records(mut stream: UnixStream, sender: &SyncSender<Event>) {
    let mut buffer = vec![0u8; BATCH * RECORD_LEN];
    let mut held = 0;
    loop {
        let n = match stream.read(&mut buffer[held..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        held += n;
        let whole = held - held % RECORD_LEN;
        let records: Vec<Record> = buffer[..whole]
            .chunks_exact(RECORD_LEN)
            .filter_map(|bytes| Record::decode(bytes.try_into().expect("a record's length")))
            .collect();
        buffer.copy_within(whole..held, 0);
        held -= whole;
        if !records.is_empty() && sender.send(Event::Stamps(records)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_is_stamped_on_the_virt_uarts_with_a_numeric_shift_and_the_plugin_built() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(StampSpec::for_boot(Arch::Rv64, "virt", "shift=3,sleep=off", dir.path()).unwrap_err(), NO_PLUGIN);
        std::fs::write(dir.path().join(PLUGIN), b"").unwrap();
        let rv64 = StampSpec::for_boot(Arch::Rv64, "virt", "shift=3,sleep=off", dir.path()).unwrap();
        assert_eq!((rv64.uart, rv64.model, rv64.shift), (0x1000_0000, Model::Ns16550, 3));
        let arm = StampSpec::for_boot(Arch::Aarch64, "virt,gic-version=3", "5", dir.path()).unwrap();
        assert_eq!((arm.uart, arm.model, arm.shift), (0x0900_0000, Model::Pl011, 5));
        assert!(StampSpec::for_boot(Arch::X86_64, "q35", "shift=3", dir.path()).is_err());
        assert!(StampSpec::for_boot(Arch::Rv64, "sifive_u", "shift=3", dir.path()).is_err());
        assert!(StampSpec::for_boot(Arch::Rv64, "virt", "shift=auto", dir.path()).is_err());
        let socket = Path::new("/tmp/d/boot-1.st");
        assert_eq!(
            rv64.qemu_args(socket)[1],
            format!("{},socket=/tmp/d/boot-1.st,uart=0x10000000,model=16550", dir.path().join(PLUGIN).display())
        );
        assert_eq!(rv64.time(Record::Tick { insns: 125_000 }), Duration::from_millis(1));
    }
}
