//! The virtio-blk driver (`guest/virtio`) against the hostile virtio-mmio block device of
//! `guest/worlds` (`worlds::virtio::blk`, the one `guest/virtio`'s host tests use); this
//! file draws its setup and its lies from the decisions and is its oracle. The decisions set the device's registers (magic, version, device id,
//! the features offered and those it adds after FEATURES_OK, whether it keeps
//! FEATURES_OK, a reset that never ends, a moving configuration generation, capacity,
//! blk_size, the queue's maximum and the size it reads back, DEVICE_NEEDS_RESET) and,
//! for each of one to eight requests (reads, writes, flushes, now and then outside the
//! disk or misaligned), what the device does: an honest answer, or silence, "no
//! notification" in the used ring's flags, a used index that jumps, a used element with
//! any id or length, fewer data bytes, other data bytes, any status byte or none, and
//! random bytes over the descriptor table and the available ring. A zero decision is the
//! honest choice: an all-zero input is an honest device and ordinary reads.
//!
//! The device keeps the books of what it did (`Answer`, the bytes it left, the write it
//! saw); the oracle judges the driver by them:
//! `Blk::new` and every request must answer exactly what the driver's documented checks
//! say for that device (the error and its values, or Ok), a refused device is left
//! FAILED, after a fatal refusal every request is `Broken`, a failed read leaves its
//! buffer zeroed, a read that returns Ok holds exactly the bytes the device wrote, a
//! write that returns Ok was seen by the device at its sector with its bytes, and every
//! descriptor the driver gives lies inside the driver's memory (its address plus length
//! fits in 64 bits), the right way round. `Dma::new` and `Segment::new` are also asked
//! for regions at the top of the address space, which they must refuse when they wrap.

use virtio::blk::{self, Blk};
use virtio::mmio::{status, F_VERSION_1, MAGIC};
use virtio::{Dma, Error, Segment};
use worlds::virtio::blk::{Answer, Block, Disk, Lies, Op, Request, UsedLen};
use worlds::virtio::{Arena, Memory, Port};

use crate::{Decisions, Finding};

/// The device address of the arena's first byte.
const BASE: u64 = 0x8000_0000;
/// The arena: the driver's memory, then at [`BUFFER_AT`] one data buffer.
pub(crate) const ARENA: usize = 0x8000;
const BUFFER_AT: usize = 0x1000;
/// The driver's queue is at most this size (blk.rs's QUEUE_SIZE).
const DRIVER_QUEUE: u32 = 8;
const WANTED: u64 = blk::F_RO | blk::F_BLK_SIZE | blk::F_FLUSH | F_VERSION_1;

/// A lie now and then: one decision in 32.
pub(crate) fn lie(d: &mut Decisions) -> bool {
    d.u8() >= 0xf8
}

/// One of `edges`, or (as often as any one of them) a random value.
pub(crate) fn any_u32(d: &mut Decisions, edges: &[u32]) -> u32 {
    let k = d.below(edges.len() + 1);
    edges.get(k).copied().unwrap_or_else(|| d.u32())
}

fn any_u64(d: &mut Decisions, edges: &[u64]) -> u64 {
    let k = d.below(edges.len() + 1);
    edges.get(k).copied().unwrap_or_else(|| d.u64())
}

/// The driver's refusals by name, for `HOSTFUZZ_STATS`.
pub(crate) fn name(e: Error) -> &'static str {
    match e {
        Error::BadMagic(_) => "BadMagic",
        Error::BadVersion(_) => "BadVersion",
        Error::WrongDevice(_) => "WrongDevice",
        Error::NoVersion1 => "NoVersion1",
        Error::FeaturesChanged(_) => "FeaturesChanged",
        Error::FeaturesRefused => "FeaturesRefused",
        Error::DeviceFailed => "DeviceFailed",
        Error::QueueUnavailable => "QueueUnavailable",
        Error::BadQueueSize(_) => "BadQueueSize",
        Error::AddressWrap => "AddressWrap",
        Error::BadMemory => "BadMemory",
        Error::BadChain => "BadChain",
        Error::QueueFull => "QueueFull",
        Error::UsedIndexJump(_) => "UsedIndexJump",
        Error::UsedIdOutOfRange(_) => "UsedIdOutOfRange",
        Error::UsedIdNotInFlight(_) => "UsedIdNotInFlight",
        Error::UsedLenTooLong { .. } => "UsedLenTooLong",
        Error::ConfigUnstable => "ConfigUnstable",
        Error::BadBlockSize(_) => "BadBlockSize",
        Error::CapacityOverflow(_) => "CapacityOverflow",
        Error::OutOfRange => "OutOfRange",
        Error::ReadOnly => "ReadOnly",
        Error::ShortRead(_) => "ShortRead",
        Error::NoMac => "NoMac",
        Error::BadMac(_) => "BadMac",
        Error::BadFrameLen(_) => "BadFrameLen",
        Error::UsedLenShort { .. } => "UsedLenShort",
        Error::Status(_) => "Status",
        Error::Timeout => "Timeout",
        Error::Broken => "Broken",
    }
}

/// The device's registers, as the decisions set them.
#[derive(Clone, Copy, Debug)]
struct Setup {
    magic: u32,
    version: u32,
    device_id: u32,
    offered: u64,
    /// Offered too once FEATURES_OK is set.
    features_after: u64,
    refuse_features: bool,
    stuck_in_reset: bool,
    /// How many reads of the configuration generation find it moved.
    generation_moves: u32,
    capacity: u64,
    blk_size: u32,
    queue_ready: bool,
    queue_max: u32,
    /// What a read of the write-only QueueNum answers (honest: 0, as QEMU); the driver
    /// never reads it, so no answer may change what it does.
    queue_num: Option<u32>,
    /// The status reads DEVICE_NEEDS_RESET once DRIVER_OK is set.
    needs_reset: bool,
}

impl Setup {
    fn draw(d: &mut Decisions) -> Setup {
        let magic = if lie(d) { any_u32(d, &[0, MAGIC.swap_bytes(), MAGIC ^ 1, u32::MAX]) } else { MAGIC };
        let version = if lie(d) { any_u32(d, &[1, 0, 3]) } else { 2 };
        let device_id = if lie(d) { any_u32(d, &[0, 1, 3]) } else { blk::DEVICE_ID };
        let mut offered = F_VERSION_1;
        if d.bool() {
            offered |= blk::F_BLK_SIZE;
        }
        if d.bool() {
            offered |= blk::F_FLUSH;
        }
        if d.u8() >= 0xe0 {
            offered |= blk::F_RO;
        }
        if lie(d) {
            offered ^= any_u64(d, &[F_VERSION_1, 1 << 40 | 1]);
        }
        let features_after = if lie(d) { any_u64(d, &[blk::F_RO, 1 << 40]) } else { 0 };
        let refuse_features = lie(d);
        let stuck_in_reset = d.rare();
        let generation_moves = if lie(d) { 1 + d.below(8) as u32 } else { 0 };
        let capacity = if lie(d) {
            any_u64(d, &[0, 1 << 55, u64::MAX, (1 << 55) - 1, (1 << 55) + 1, 1])
        } else {
            16 + d.below(240) as u64
        };
        let blk_size = if lie(d) {
            any_u32(d, &[0, 256, 520, 1000, 1536, 3072, 8192, u32::MAX, 0x8000_0200, 511])
        } else {
            *d.choose(&[512, 1024, 2048, 4096])
        };
        let queue_ready = lie(d);
        let queue_max = if lie(d) { any_u32(d, &[0, 3, 6, 12, 1, 2]) } else { *d.choose(&[128, 8, 16, 256, 4]) };
        let queue_num = if lie(d) { Some(any_u32(d, &[0, 16, 4, 7])) } else { None };
        let needs_reset = lie(d);
        Setup {
            magic,
            version,
            device_id,
            offered,
            features_after,
            refuse_features,
            stuck_in_reset,
            generation_moves,
            capacity,
            blk_size,
            queue_ready,
            queue_max,
            queue_num,
            needs_reset,
        }
    }

    /// What `Blk::new` must answer, by the driver's documented checks in their order:
    /// Ok with (features, capacity, block size, queue size), or the error and whether
    /// the device is left FAILED.
    fn expected(&self) -> Result<(u64, u64, u32, u32), (Error, bool)> {
        if self.magic != MAGIC {
            return Err((Error::BadMagic(self.magic), false));
        }
        if self.version != 2 {
            return Err((Error::BadVersion(self.version), false));
        }
        if self.device_id != blk::DEVICE_ID {
            return Err((Error::WrongDevice(self.device_id), false));
        }
        let failed = |e| Err((e, true));
        if self.stuck_in_reset {
            return failed(Error::DeviceFailed);
        }
        if self.offered & F_VERSION_1 == 0 {
            return failed(Error::NoVersion1);
        }
        let agreed = self.offered & WANTED;
        if self.refuse_features {
            return failed(Error::FeaturesRefused);
        }
        let new = self.features_after & !self.offered;
        if new != 0 {
            return failed(Error::FeaturesChanged(new));
        }
        if self.generation_moves > 7 {
            return failed(Error::ConfigUnstable);
        }
        let block = if agreed & blk::F_BLK_SIZE != 0 { self.blk_size } else { 512 };
        if !block.is_power_of_two() || !(512..=4096).contains(&block) {
            return failed(Error::BadBlockSize(block));
        }
        if self.capacity.checked_mul(512).is_none() {
            return failed(Error::CapacityOverflow(self.capacity));
        }
        if self.queue_ready || self.queue_max == 0 {
            return failed(Error::QueueUnavailable);
        }
        if !self.queue_max.is_power_of_two() {
            return failed(Error::BadQueueSize(self.queue_max));
        }
        let size = self.queue_max.min(DRIVER_QUEUE);
        if self.needs_reset {
            return failed(Error::DeviceFailed);
        }
        Ok((agreed, self.capacity, block, size))
    }

    /// The device the decisions set up, the driver's memory (`len` bytes of `arena`)
    /// its only region for now.
    fn device(&self, arena: &Arena, len: usize) -> Port<Block> {
        let mut transport = Block::transport(self.offered, self.queue_max);
        transport.magic = self.magic;
        transport.version = self.version;
        transport.device_id = self.device_id;
        transport.features_after = self.features_after;
        transport.refuse_features = self.refuse_features;
        transport.stuck_in_reset = self.stuck_in_reset;
        transport.generation_moves = self.generation_moves;
        transport.queue_ready = self.queue_ready;
        transport.queue_num = self.queue_num;
        transport.needs_reset = self.needs_reset;
        let mut block = Block::new(self.capacity, Disk::new(self.capacity, sector_bytes));
        block.blk_size = self.blk_size;
        Port::new(transport, Memory::keeping(vec![(BASE, arena.ptr(), len)]), block)
    }
}

/// How the device lies about one request. All `None`/false/0 is the honest answer.
fn plan(d: &mut Decisions) -> Lies {
    let mut p = Lies::default();
    // One request in eight lies.
    if d.u8() < 0xe0 {
        return p;
    }
    // A lying request: each way now and then, several at once sometimes.
    for _ in 0..1 + d.below(2) {
        match d.below(10) {
            0 => p.silent = true,
            1 => p.no_notify = true,
            2 => p.used_jump = any_u32(d, &[1, 2, 0xffff, 7]) as u16,
            3 => p.used_id = Some(any_u32(d, &[1, 2, 7, 8, 255, 256, u32::MAX, 0x1_0000])),
            4 => {
                // Which used length (the writable data bytes with or without the status
                // byte or one more, 0, u32::MAX, any), and a random value for "any".
                let (which, any) = (d.below(6), d.u32());
                p.used_len = match which {
                    0 => UsedLen::Is(any),
                    1 => UsedLen::DataPlus(0),
                    2 => UsedLen::DataPlus(2),
                    3 => UsedLen::Is(0),
                    4 => UsedLen::Is(u32::MAX),
                    _ => UsedLen::DataPlus(1),
                };
            }
            5 => p.status = Some(any_u32(d, &[1, 2, 0xff]) as u8),
            6 => p.no_status = true,
            7 => p.partial = Some(d.below(1 << 16)),
            8 => p.garbage = Some((d.below(1 << 16), 1 | d.u8())),
            _ => p.scribble = Some(d.u64()),
        }
    }
    p
}

/// Disk bytes before they are written: sector `sector`.
fn sector_bytes(sector: u64, out: &mut [u8]) {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (sector.wrapping_mul(0x9e37_79b9) >> 8) as u8 ^ (i as u8).wrapping_mul(7) ^ (i >> 8) as u8;
    }
}

/// What the driver must answer after the device's `answer` to a request `op` on a
/// queue of `size`, by its checks in their order.
fn answered(a: &Answer, op: Op, size: u32) -> Result<(), Error> {
    if a.delta == 0 {
        Err(Error::Timeout)
    } else if a.delta > 1 {
        Err(Error::UsedIndexJump(a.delta))
    } else if a.id >= size {
        Err(Error::UsedIdOutOfRange(a.id))
    } else if a.id != u32::from(a.head) {
        Err(Error::UsedIdNotInFlight(a.id))
    } else if u64::from(a.len) > a.writable {
        Err(Error::UsedLenTooLong { id: a.head, len: a.len, writable: a.writable })
    } else if a.status != blk::S_OK {
        Err(Error::Status(a.status))
    } else if op == Op::Read && a.len != a.data + 1 {
        Err(Error::ShortRead(a.len))
    } else {
        Ok(())
    }
}

/// The device's first violation, as a finding.
pub(crate) fn check<D>(port: &Port<D>) -> Result<(), Finding> {
    port.0.borrow_mut().mem.take_violation().map_or(Ok(()), |v| Err(Finding::oracle(v.what, v.detail)))
}

fn differ(what: &str, got: &Result<(), Error>, want: &Result<(), Error>, request: &Request) -> Finding {
    Finding::oracle(what, format!("{request:?}: the driver answered {got:?}, the device's books say {want:?}"))
}

/// `Segment::new` asked for a segment at the top of the address space.
fn segment_at_the_top(d: &mut Decisions) -> Result<(), Finding> {
    let addr = u64::MAX - d.below(0x1_0000) as u64;
    let len = any_u32(d, &[1, 0x1_0000, u32::MAX, 0]);
    let got = Segment::new(addr, len, d.bool());
    let want = if len == 0 {
        Err(Error::BadChain)
    } else if addr.checked_add(u64::from(len)).is_none() {
        Err(Error::AddressWrap)
    } else {
        Ok(())
    };
    if got.map(|_| ()) != want {
        return Err(Finding::oracle(
            "Segment::new answered otherwise",
            format!("{addr:#x}+{len}: {got:?}, not {want:?}"),
        ));
    }
    Ok(())
}

/// One run.
pub fn run(d: &mut Decisions) -> Result<(), Finding> {
    if lie(d) {
        segment_at_the_top(d)?;
    }
    let setup = Setup::draw(d);
    let arena = Arena::new(ARENA);
    let device = setup.device(&arena, blk::MEMORY);
    // SAFETY: the first MEMORY bytes of the arena, which outlives the driver (declared
    // before it); only the driver and the device reach them.
    let memory = unsafe { Dma::new(arena.ptr(), BASE, blk::MEMORY) }.expect("the driver's memory");
    let got = Blk::new(device.clone(), memory);
    check(&device)?;
    let want = setup.expected();
    let mut disk = match (got, want) {
        (Ok(disk), Ok((features, capacity, block, _))) => {
            if (disk.features(), disk.capacity(), disk.block_size()) != (features, capacity, block) {
                return Err(Finding::oracle(
                    "Blk::new read the device otherwise",
                    format!(
                        "{:#x}, {}, {} for {features:#x}, {capacity}, {block}",
                        disk.features(),
                        disk.capacity(),
                        disk.block_size()
                    ),
                ));
            }
            disk
        }
        (Err(e), Err((w, failed))) if e == w => {
            let status = device.model().transport.status;
            if failed && status & status::FAILED == 0 {
                return Err(Finding::oracle("a refused device was not set FAILED", format!("{e:?}")));
            }
            d.end(name(e));
            return Ok(());
        }
        (got, want) => {
            return Err(Finding::oracle(
                "Blk::new answered otherwise than the device's books",
                format!("got {:?}, want {want:?} for {setup:x?}", got.map(|_| ())),
            ));
        }
    };
    let (features, capacity, block, qsize) = want.expect("matched above");
    disk.set_poll_limit(2);
    let mut broken = false;
    let mut end = "every request answered";
    for _ in 0..1 + d.below(8) {
        let op = match d.below(8) {
            0..=4 => Op::Read,
            5 | 6 => Op::Write,
            _ => Op::Flush,
        };
        let spb = u64::from(block) / 512;
        let blocks = 1 + d.below(4);
        let mut len = blocks * block as usize;
        let mut sector = (d.below((capacity / spb).min(1 << 16) as usize) as u64) * spb;
        if lie(d) {
            sector = any_u64(
                d,
                &[
                    capacity.saturating_sub(blocks as u64 * spb),
                    capacity.saturating_sub(spb),
                    capacity,
                    u64::MAX - 3,
                    sector + 1,
                ],
            );
        }
        if lie(d) {
            len = any_u32(d, &[0, 512, block * 4 + 512, block - 512]) as usize % (0x4000 + 1024);
        }
        // The buffer's device address: now and then at the top of the address space.
        let mut buffer = BASE + BUFFER_AT as u64;
        if lie(d) {
            buffer = u64::MAX - d.below(0x8000) as u64;
        }
        let seed = d.u8();
        let lies = plan(d);
        // SAFETY: `len` bytes of the arena from BUFFER_AT (len <= 0x5000, the arena is
        // 0x8000): outlives the buffer; the driver's memory ends before BUFFER_AT.
        let dma = unsafe { Dma::new(arena.ptr().add(BUFFER_AT), buffer, len) };
        let mut dma = match dma {
            Err(e) if buffer.checked_add(len as u64).is_none() && e == Error::AddressWrap => continue,
            Ok(dma) if buffer.checked_add(len as u64).is_some() => dma,
            other => {
                return Err(Finding::oracle(
                    "Dma::new answered otherwise",
                    format!("{buffer:#x}+{len}: {:?}", other.err()),
                ))
            }
        };
        let fill: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed ^ 0xa5).collect();
        dma.write(0, &fill).expect("the buffer is len bytes");
        {
            let mut m = device.model();
            m.mem.regions.truncate(1);
            // SAFETY: as for the Dma above.
            m.mem.regions.push((buffer, unsafe { arena.ptr().add(BUFFER_AT) }, len));
        }
        let request = Request { op, sector, len, buffer };
        device.model().begin(request, lies);
        // What the driver must answer before the device has the request.
        let bad_range = len == 0
            || len as u64 % u64::from(block) != 0
            || sector % spb != 0
            || sector.checked_add(len as u64 / 512).is_none_or(|end| end > capacity);
        let before = match op {
            Op::Flush if features & blk::F_FLUSH == 0 => Some(Ok(())),
            Op::Write if features & blk::F_RO != 0 => Some(Err(Error::ReadOnly)),
            Op::Read | Op::Write if bad_range => Some(Err(Error::OutOfRange)),
            _ if broken => Some(Err(Error::Broken)),
            _ if (if op == Op::Flush { 2 } else { 3 }) > qsize => Some(Err(Error::QueueFull)),
            _ => None,
        };
        let got = match op {
            Op::Read => disk.read(sector, &mut dma),
            Op::Write => disk.write(sector, &dma),
            Op::Flush => disk.flush(),
        };
        check(&device)?;
        let m = device.model();
        let answer = m.device.answer.map(|a| answered(&a, op, m.transport.queues[0].num));
        let want = before.or(answer).unwrap_or(Err(Error::Timeout));
        if got != want {
            return Err(differ("a request answered otherwise than the device's books", &got, &want, &request));
        }
        if let Err(e) = got {
            if !broken {
                end = name(e);
            }
            if !matches!(e, Error::Status(_) | Error::OutOfRange | Error::ReadOnly | Error::Broken) {
                broken = true;
                if m.transport.status & status::FAILED == 0 {
                    return Err(Finding::oracle("a refused device was not set FAILED", format!("{e:?}")));
                }
            }
        }
        let mut now = vec![0u8; len];
        dma.read(0, &mut now).expect("the buffer is len bytes");
        match (op, got) {
            (Op::Read, Ok(())) if now != m.device.left => {
                return Err(Finding::oracle(
                    "an Ok read holds other bytes than the device wrote",
                    format!("{request:?}"),
                ));
            }
            (Op::Read, Err(e)) if e != Error::OutOfRange && now.iter().any(|&b| b != 0) => {
                return Err(Finding::oracle(
                    "a failed read left the device's bytes in its buffer",
                    format!("{request:?}"),
                ));
            }
            (Op::Write, Ok(())) if m.device.seen_write != Some((sector, fill.clone())) => {
                return Err(Finding::oracle("an Ok write the device did not see", format!("{request:?}")));
            }
            _ => {}
        }
    }
    d.end(end);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;

    /// The bytes of an honest device's registers (every lie and choice zero): the
    /// decisions `run` reads before its first request.
    const SETUP: usize = 31;

    /// An honest device, one read of one block at sector 0, the device lying in way
    /// `kind` of `plan` (its first choice for the lie's value).
    fn one_lying_read(kind: u32) -> Vec<u8> {
        let mut input = vec![0u8; SETUP];
        // One request: a read, one block, sector 0; no lie of the harness's; seed 0.
        input.extend_from_slice(&[0; 4 + 4 + 4 + 4 + 4]);
        // The device lies (0xff), in one way (0), this way: the least decision whose
        // below(10) is `kind`.
        input.push(0xff);
        input.extend_from_slice(&0u32.to_le_bytes());
        let x = ((u64::from(kind) << 32).div_ceil(10)) as u32;
        input.extend_from_slice(&x.to_le_bytes());
        input
    }

    fn ends(input: &[u8]) -> &'static str {
        let mut d = Decisions::new(input);
        assert_eq!(run(&mut d), Ok(()), "{input:x?}");
        d.end_reason()
    }

    #[test]
    fn the_all_zero_input_is_an_honest_device_and_passes() {
        assert_eq!(ends(&[]), "every request answered");
        assert_eq!(ends(&one_lying_read(9)[..SETUP]), "every request answered");
        assert!(in_process(run, &[0; 4096]).finding().is_none());
    }

    #[test]
    fn lying_devices_are_refused_with_the_drivers_errors() {
        // A magic of 0 (the first lie's first edge).
        let mut magic = vec![0u8, 0xff];
        magic.extend_from_slice(&[0; 4]);
        assert_eq!(ends(&magic), "BadMagic");
        for (kind, refusal) in [
            (0, "Timeout"),
            (1, "Timeout"),
            (2, "UsedIndexJump"),
            (3, "UsedIdNotInFlight"),
            (4, "ShortRead"),
            (5, "Status"),
            (6, "Status"),
            (7, "ShortRead"),
        ] {
            assert_eq!(ends(&one_lying_read(kind)), refusal, "lie {kind}");
        }
        // Other data bytes, said honestly, pass for data: the driver cannot tell, and the
        // oracle holds the read to the bytes the device wrote.
        assert_eq!(ends(&one_lying_read(8)), "every request answered");
    }
}
