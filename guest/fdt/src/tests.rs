//! Host tests: trees built by a tiny writer, then cut short and scrambled.

extern crate std;

use super::*;
use std::vec::Vec;

/// A tiny FDT writer: nodes and properties in order, then `finish`.
struct Writer {
    structs: Vec<u8>,
    strings: Vec<u8>,
}

impl Writer {
    fn new() -> Self {
        Writer { structs: Vec::new(), strings: Vec::new() }
    }

    fn token(&mut self, token: u32) {
        self.structs.extend_from_slice(&token.to_be_bytes());
    }

    fn pad(&mut self) {
        while self.structs.len() % 4 != 0 {
            self.structs.push(0);
        }
    }

    fn begin(&mut self, name: &str) -> &mut Self {
        self.token(FDT_BEGIN_NODE);
        self.structs.extend_from_slice(name.as_bytes());
        self.structs.push(0);
        self.pad();
        self
    }

    fn end(&mut self) -> &mut Self {
        self.token(FDT_END_NODE);
        self
    }

    fn prop(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let nameoff = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        self.token(FDT_PROP);
        self.structs.extend_from_slice(&(value.len() as u32).to_be_bytes());
        self.structs.extend_from_slice(&nameoff.to_be_bytes());
        self.structs.extend_from_slice(value);
        self.pad();
        self
    }

    fn finish(&mut self) -> Vec<u8> {
        self.token(FDT_END);
        let rsvmap = HEADER_LEN;
        let off_struct = rsvmap + 16;
        let off_strings = off_struct + self.structs.len();
        let total = off_strings + self.strings.len();
        let mut out = Vec::new();
        for field in [
            MAGIC,
            total as u32,
            off_struct as u32,
            off_strings as u32,
            rsvmap as u32,
            17,
            16,
            0,
            self.strings.len() as u32,
            self.structs.len() as u32,
        ] {
            out.extend_from_slice(&field.to_be_bytes());
        }
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(&self.structs);
        out.extend_from_slice(&self.strings);
        out
    }
}

/// A tree shaped like QEMU virt's, cut down.
fn sample() -> Vec<u8> {
    Writer::new()
        .begin("")
        .prop("#address-cells", &2u32.to_be_bytes())
        .prop("model", b"riscv-virtio,qemu\0")
        .begin("memory@80000000")
        .prop("device_type", b"memory\0")
        .prop("reg", &[0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0])
        .end()
        .begin("cpus")
        .prop("timebase-frequency", &10_000_000u32.to_be_bytes())
        .begin("cpu@0")
        .prop("reg", &0u32.to_be_bytes())
        .end()
        .begin("cpu@1")
        .prop("reg", &1u32.to_be_bytes())
        .end()
        .end()
        .begin("chosen-not")
        .prop("rng-seed", b"wrong")
        .end()
        .begin("chosen")
        .prop("bootargs", b"\0")
        .prop("rng-seed", &[0xab; 32])
        .prop("linux,initrd-start", &0x8800_0000u32.to_be_bytes())
        .prop("linux,initrd-end", &0x1_8800_1000u64.to_be_bytes())
        .end()
        .end()
        .finish()
}

#[test]
fn finds_properties_by_path() {
    let tree = sample();
    let fdt = Fdt::new(&tree).unwrap();
    assert_eq!(fdt.property("/chosen/rng-seed").unwrap(), Some(&[0xab; 32][..]));
    assert_eq!(fdt.u32("/cpus/timebase-frequency").unwrap(), Some(10_000_000));
    assert_eq!(fdt.cells("/chosen/linux,initrd-start").unwrap(), Some(0x8800_0000));
    assert_eq!(fdt.cells("/chosen/linux,initrd-end").unwrap(), Some(0x1_8800_1000));
    assert_eq!(fdt.u64("/chosen/linux,initrd-end").unwrap(), Some(0x1_8800_1000));
    assert_eq!(fdt.property("/model").unwrap(), Some(&b"riscv-virtio,qemu\0"[..]));
    assert_eq!(fdt.u32("/#address-cells").unwrap(), Some(2));
    assert_eq!(fdt.u32("/cpus/cpu@1/reg").unwrap(), Some(1));
    // Without a unit address, the first node of that name wins.
    assert_eq!(fdt.u32("/cpus/cpu/reg").unwrap(), Some(0));
    assert_eq!(fdt.property("/memory/device_type").unwrap(), Some(&b"memory\0"[..]));
    assert_eq!(fdt.property("/chosen/bootargs").unwrap(), Some(&b"\0"[..]));
}

#[test]
fn missing_paths_are_none() {
    let tree = sample();
    let fdt = Fdt::new(&tree).unwrap();
    for path in [
        "/chosen/nothing",
        "/nothing/rng-seed",
        "/rng-seed",
        "/cpus/reg",
        "/cpus/cpu@2/reg",
        "/chosen/rng-seed/deeper",
        "chosen/rng-seed",
        "",
        "/",
        "//rng-seed",
        "/chosen/",
        "/cpu@0/reg",
    ] {
        assert_eq!(fdt.property(path).unwrap(), None, "{path}");
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let tree = sample();
    let fdt = Fdt::new(&tree).unwrap();
    assert_eq!(fdt.u32("/chosen/rng-seed").unwrap_err().what, "property has the wrong length");
    assert_eq!(fdt.u64("/cpus/timebase-frequency").unwrap_err().what, "property has the wrong length");
    assert_eq!(fdt.cells("/chosen/bootargs").unwrap_err().what, "property has the wrong length");
    assert_eq!(read_cells(&[1, 2, 3]), None);
    assert_eq!(read_u32(&[0, 0, 1, 0]), Some(256));
    assert_eq!(read_u64(&[0, 0, 0, 1, 0, 0, 0, 2]), Some((1 << 32) | 2));
}

#[test]
fn header_checks() {
    let tree = sample();
    assert_eq!(total_size(&tree), Ok(tree.len()));
    assert_eq!(total_size(&tree[..39]).unwrap_err().what, "short header");
    let mut bad = tree.clone();
    bad[0] = 0;
    assert_eq!(Fdt::new(&bad).unwrap_err().what, "bad magic");
    let mut bad = tree.clone();
    bad[4..8].copy_from_slice(&0x0100_0000u32.to_be_bytes());
    assert_eq!(Fdt::new(&bad).unwrap_err().what, "bad totalsize");
    assert_eq!(Fdt::new(&tree[..tree.len() - 1]).unwrap_err().what, "totalsize past the end");
    let mut bad = tree.clone();
    bad[20..24].copy_from_slice(&16u32.to_be_bytes());
    assert_eq!(Fdt::new(&bad).unwrap_err().what, "unsupported version");
    let mut bad = tree.clone();
    bad[36..40].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(Fdt::new(&bad).unwrap_err().what, "struct block out of bounds");
    let mut bad = tree.clone();
    bad[12..16].copy_from_slice(&(tree.len() as u32).to_be_bytes());
    assert_eq!(Fdt::new(&bad).unwrap_err().what, "strings block out of bounds");
    // Trailing bytes past totalsize are ignored.
    let mut longer = tree.clone();
    longer.extend_from_slice(&[0xff; 64]);
    assert!(Fdt::new(&longer).unwrap().property("/chosen/rng-seed").unwrap().is_some());
}

#[test]
fn malformed_structure_is_an_error() {
    let bad_token = Writer::new().begin("").token_then(7).finish();
    assert_eq!(walk_error(&bad_token), "unknown token");
    let unbalanced = Writer::new().begin("").end().end().finish();
    assert_eq!(walk_error(&unbalanced), "unbalanced FDT_END_NODE");
    let open = Writer::new().begin("").begin("a").end().finish();
    assert_eq!(walk_error(&open), "FDT_END inside a node");
    let named_root = Writer::new().begin("x").end().finish();
    assert_eq!(walk_error(&named_root), "root node has a name");
    let outside = Writer::new().prop("p", b"").finish();
    assert_eq!(walk_error(&outside), "property outside the root node");
    let mut bad_name = Writer::new();
    bad_name.begin("").prop("q", b"");
    bad_name.structs.truncate(bad_name.structs.len() - 4);
    bad_name.structs.extend_from_slice(&1000u32.to_be_bytes());
    let bad_name = bad_name.end().finish();
    assert_eq!(walk_error(&bad_name), "property name out of bounds");
    let mut huge = Writer::new();
    huge.begin("").prop("q", b"");
    let len_at = huge.structs.len() - 8;
    huge.structs[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    let huge = huge.end().finish();
    assert_eq!(walk_error(&huge), "property value out of bounds");
}

fn walk_error(tree: &[u8]) -> &'static str {
    Fdt::new(tree).unwrap().property("/q").unwrap_err().what
}

impl Writer {
    fn token_then(&mut self, token: u32) -> &mut Self {
        self.token(token);
        self
    }
}

#[test]
fn every_truncation_is_refused_without_panicking() {
    let tree = sample();
    for len in 0..tree.len() {
        assert!(Fdt::new(&tree[..len]).is_err(), "length {len}");
    }
    // Shrinking the struct block instead (totalsize kept) cuts the walk short.
    for cut in 1..=tree.len() / 4 {
        let mut bad = tree.clone();
        let size = u32::from_be_bytes([bad[36], bad[37], bad[38], bad[39]]);
        bad[36..40].copy_from_slice(&size.saturating_sub(cut as u32 * 4).to_be_bytes());
        if let Ok(fdt) = Fdt::new(&bad) {
            let _ = fdt.property("/chosen/linux,initrd-end");
        }
    }
}

/// Garbage: random bytes, and the sample with random bytes flipped. Nothing may panic.
#[test]
fn garbage_never_panics() {
    let tree = sample();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut bad = tree.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % bad.len() as u64) as usize;
            bad[i] ^= 1 << (next() % 8);
        }
        probe(&bad);
    }
    for _ in 0..2_000 {
        let len = (next() % 256) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if junk.len() >= 8 {
            junk[..4].copy_from_slice(&MAGIC.to_be_bytes());
            junk[4..8].copy_from_slice(&(len as u32).to_be_bytes());
        }
        probe(&junk);
    }
}

fn probe(bytes: &[u8]) {
    let _ = total_size(bytes);
    if let Ok(fdt) = Fdt::new(bytes) {
        for path in ["/chosen/rng-seed", "/cpus/timebase-frequency", "/chosen/linux,initrd-start", "/x"] {
            let _ = fdt.property(path);
            let _ = fdt.cells(path);
        }
    }
}
