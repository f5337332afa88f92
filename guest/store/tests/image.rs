//! The store image the bench packs into a raw partition (tests/data/disks/store.toml, the
//! cases store-packed and store-packed-flipped) is exactly what the store writes: a
//! format on the partition's geometry (512-byte sectors, 40..=2007 of a 1 MiB GPT disk:
//! 1968 sectors) and one record, up to the head. `STORE_IMAGE_WRITE=1` writes it again.

use std::collections::BTreeMap;
use store::{BlockDevice, IoError, Store};

const SECTORS: u64 = 1968;
const IMAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/disks/store.img");

struct Ram(BTreeMap<u64, Vec<u8>>);

impl BlockDevice for Ram {
    fn sector_size(&self) -> usize {
        512
    }
    fn sector_count(&self) -> u64 {
        SECTORS
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.copy_from_slice(self.0.get(&sector).map_or(&[0; 512][..], |s| s));
        Ok(())
    }
    fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        self.0.insert(sector, buf.to_vec());
        Ok(())
    }
    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}

#[test]
fn the_packed_image_is_what_the_store_writes() {
    let mut ram = Ram(BTreeMap::new());
    let mut store = Store::format(&mut ram).unwrap();
    store.append(1, b"packed by the bench").unwrap();
    let head = store.commit().head;
    let image: Vec<u8> = (0..head).flat_map(|s| ram.0[&s].clone()).collect();
    if std::env::var_os("STORE_IMAGE_WRITE").is_some() {
        std::fs::write(IMAGE, &image).unwrap();
    }
    let packed = std::fs::read(IMAGE).expect("tests/data/disks/store.img (STORE_IMAGE_WRITE=1 writes it)");
    assert!(packed == image, "tests/data/disks/store.img is not what the store writes: STORE_IMAGE_WRITE=1 writes it");
}
