//! A stage: the directory tree a recipe's ext4 or FAT partition is packed from, read
//! the one way both file systems take it (byte order of names, directories and regular
//! files only).

use std::path::{Path, PathBuf};

use crate::{io_err, refused, DiskError};

/// A directory's entries sorted by name: only directories and regular files.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<(std::ffi::OsString, PathBuf, std::fs::FileType)>, DiskError> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir, "read a stage directory"))? {
        let entry = entry.map_err(io_err(dir, "read a stage directory"))?;
        let kind = entry.file_type().map_err(io_err(&entry.path(), "read a stage entry's type"))?;
        if !kind.is_dir() && !kind.is_file() {
            return Err(refused(
                &entry.path(),
                "a stage holds only directories and regular files (no links, devices or sockets)",
            ));
        }
        entries.push((entry.file_name(), entry.path(), kind));
    }
    entries.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
    Ok(entries)
}
