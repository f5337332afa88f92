//! Reads the data entry `bundle-file` in small pieces and again whole, compares the two
//! byte for byte and prints its length and FNV-1a 64 hash, which the bench computes
//! over what it packed: `filereader: bundle-file <len> bytes fnv1a64 <16 hex>`.

#![no_std]
#![no_main]

rt::program!("filereader", main);

const ENTRY: &[u8] = b"bundle-file";
const MAX: usize = 4096;

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn main(_pid: u32, _badge: u32) {
    let len = match rt::entry_info(ENTRY) {
        Ok((len, abi::KIND_DATA)) if len <= MAX => len,
        Ok((len, _)) => {
            rt::log!("[filereader] FAIL: bundle-file is not data of at most {MAX} bytes ({len})");
            rt::exit(1)
        }
        Err(e) => {
            rt::log!("[filereader] FAIL: no bundle-file: {}", e.name());
            rt::exit(1)
        }
    };
    let mut whole = [0u8; MAX];
    let mut pieces = [0u8; MAX];
    if rt::entry_read(ENTRY, 0, &mut whole[..len]) != Ok(len) {
        rt::log!("[filereader] FAIL: short read");
        rt::exit(1);
    }
    let mut at = 0;
    while at < len {
        let n = rt::entry_read(ENTRY, at, &mut pieces[at..(at + 7).min(len)]).unwrap_or(0);
        if n == 0 {
            rt::log!("[filereader] FAIL: read at {at} returned nothing");
            rt::exit(1);
        }
        at += n;
    }
    if whole[..len] != pieces[..len] {
        rt::log!("[filereader] FAIL: the two reads differ");
        rt::exit(1);
    }
    rt::log!("filereader: bundle-file {len} bytes fnv1a64 {:016x}", fnv1a64(&whole[..len]));
}
