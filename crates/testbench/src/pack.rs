//! Packing a case's programs for the guest the bench built.
//!
//! Until the signed boot bundle exists (the reference-guest work), the programs travel
//! as QEMU's `-initrd`: an uncompressed newc archive, one regular file per program under
//! its entry name, in the case's order. The smoke guest lists what it finds there (name,
//! size, FNV-1a 64 of the bytes), so a case proves the bench packed what cargo built.

use testbench_recipe::newc::{write_newc, Entry};

pub fn programs_archive(programs: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let entries: Vec<Entry> =
        programs.iter().map(|(name, data)| Entry::file(name.clone(), 0o755, data.clone())).collect();
    write_newc(&entries).map_err(|e| format!("failed to pack the programs: {e}"))
}
