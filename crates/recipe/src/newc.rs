//! A writer for the "newc" (SVR4, no CRC) cpio format, the one Linux unpacks as an
//! initramfs.
//!
//! Every header is the magic `070701` followed by 13 fields of 8 upper-case hex digits
//! (ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor,
//! rdevminor, namesize, check), then the NUL-terminated name padded with NULs so that
//! header + name is a multiple of 4, then the data padded with NULs to a multiple of 4.
//! The archive ends with an entry named `TRAILER!!!`.
//!
//! The output is deterministic: mtime, uid, gid and device numbers are 0, inode numbers
//! count up from 1 in the order entries are written, and the parent directories an
//! entry needs are written (mode 0755) just before it, once each.

use std::collections::BTreeSet;
use std::io::{self, Write};

/// File type bits of `st_mode`.
pub const S_IFREG: u32 = 0o100_000;
/// Directory type bits of `st_mode`.
pub const S_IFDIR: u32 = 0o040_000;
/// Symbolic link type bits of `st_mode`.
pub const S_IFLNK: u32 = 0o120_000;

/// The length of a newc header: the 6-byte magic and 13 fields of 8 hex digits.
pub const HEADER_LEN: usize = 110;
/// The magic every header starts with.
pub const MAGIC: &[u8; 6] = b"070701";
/// The name of the entry that ends the archive.
pub const TRAILER: &str = "TRAILER!!!";

/// One thing to put in the archive. Names are paths relative to the archive root;
/// a leading `/` or `./` is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file; `mode` holds the permission bits only (e.g. `0o755`).
    File { name: String, mode: u32, data: Vec<u8> },
    /// A directory; `mode` holds the permission bits only.
    Dir { name: String, mode: u32 },
    /// A symbolic link pointing at `target` (stored as the link's data).
    Symlink { name: String, target: String },
}

impl Entry {
    /// A regular file.
    pub fn file(name: impl Into<String>, mode: u32, data: impl Into<Vec<u8>>) -> Entry {
        Entry::File { name: name.into(), mode, data: data.into() }
    }
    /// A directory.
    pub fn dir(name: impl Into<String>, mode: u32) -> Entry {
        Entry::Dir { name: name.into(), mode }
    }
    /// A symbolic link.
    pub fn symlink(name: impl Into<String>, target: impl Into<String>) -> Entry {
        Entry::Symlink { name: name.into(), target: target.into() }
    }
    /// The entry's name as given.
    pub fn name(&self) -> &str {
        match self {
            Entry::File { name, .. } | Entry::Dir { name, .. } | Entry::Symlink { name, .. } => name,
        }
    }
}

/// Why an entry could not be written.
#[derive(Debug, thiserror::Error)]
pub enum NewcError {
    #[error("cpio entry name {name:?}: {why}")]
    BadName { name: String, why: &'static str },
    #[error("cpio entry {name:?} is written twice")]
    Duplicate { name: String },
    #[error("cpio entry {name:?}: {parent:?} is not a directory in the archive")]
    ParentNotDir { name: String, parent: String },
    #[error("cpio entry {name:?}: mode {mode:#o} has bits outside 0o7777")]
    BadMode { name: String, mode: u32 },
    #[error("cpio entry {name:?}: {len} bytes is more than a newc entry can hold (4 GiB - 1)")]
    TooLarge { name: String, len: usize },
    #[error("writing the cpio archive: {0}")]
    Io(#[from] io::Error),
}

/// Checks and normalises an entry name: drops a leading `/` or `./`, refuses empty
/// names, empty components, `.` and `..` components, NUL bytes and the trailer's name.
pub fn normalize_name(name: &str) -> Result<String, NewcError> {
    let bad = |why| NewcError::BadName { name: name.to_string(), why };
    let mut s = name;
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    let s = s.trim_start_matches('/');
    let s = s.strip_suffix('/').unwrap_or(s);
    if s.is_empty() {
        return Err(bad("is empty (the archive root needs no entry)"));
    }
    if s.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    for comp in s.split('/') {
        match comp {
            "" => return Err(bad("has an empty path component (`//`)")),
            "." | ".." => return Err(bad("has a `.` or `..` component")),
            _ => {}
        }
    }
    if s == TRAILER {
        return Err(bad("is the name that marks the end of the archive"));
    }
    Ok(s.to_string())
}

/// Streams entries into a newc archive. Call [`NewcWriter::finish`] to write the
/// trailer; an archive without it is incomplete.
pub struct NewcWriter<W: Write> {
    out: W,
    next_ino: u32,
    dirs: BTreeSet<String>,
    names: BTreeSet<String>,
    written: u64,
}

impl<W: Write> NewcWriter<W> {
    /// A writer with nothing written yet.
    pub fn new(out: W) -> Self {
        NewcWriter { out, next_ino: 1, dirs: BTreeSet::new(), names: BTreeSet::new(), written: 0 }
    }

    /// Writes one entry, after any parent directories it needs that are not yet written.
    pub fn add(&mut self, entry: &Entry) -> Result<(), NewcError> {
        match entry {
            Entry::File { name, mode, data } => self.file(name, *mode, data),
            Entry::Dir { name, mode } => self.dir(name, *mode),
            Entry::Symlink { name, target } => self.symlink(name, target),
        }
    }

    /// Writes a regular file with permission bits `mode`.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> Result<(), NewcError> {
        let name = self.prepare(name, mode)?;
        self.names.insert(name.clone());
        self.entry(&name, S_IFREG | mode, 1, data)
    }

    /// Writes a directory with permission bits `mode`. A directory already written
    /// (for instance as the parent of an earlier entry) is not written again.
    pub fn dir(&mut self, name: &str, mode: u32) -> Result<(), NewcError> {
        let name = self.prepare_dir(name, mode)?;
        if self.dirs.contains(&name) {
            return Ok(());
        }
        self.dirs.insert(name.clone());
        self.names.insert(name.clone());
        self.entry(&name, S_IFDIR | mode, 2, &[])
    }

    /// Writes a symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> Result<(), NewcError> {
        let name = self.prepare(name, 0o777)?;
        if target.is_empty() || target.contains('\0') {
            return Err(NewcError::BadName { name, why: "has an empty symlink target or one with a NUL byte" });
        }
        self.names.insert(name.clone());
        self.entry(&name, S_IFLNK | 0o777, 1, target.as_bytes())
    }

    /// Writes the trailer, flushes, and gives back the output.
    pub fn finish(mut self) -> Result<W, NewcError> {
        self.header(0, 0, 1, 0, TRAILER)?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn prepare_dir(&mut self, name: &str, mode: u32) -> Result<String, NewcError> {
        let norm = normalize_name(name)?;
        check_mode(&norm, mode)?;
        if self.names.contains(&norm) && !self.dirs.contains(&norm) {
            return Err(NewcError::Duplicate { name: norm });
        }
        self.parents(&norm)?;
        Ok(norm)
    }

    fn prepare(&mut self, name: &str, mode: u32) -> Result<String, NewcError> {
        let norm = normalize_name(name)?;
        check_mode(&norm, mode)?;
        if self.names.contains(&norm) {
            return Err(NewcError::Duplicate { name: norm });
        }
        self.parents(&norm)?;
        Ok(norm)
    }

    /// Writes the missing parent directories of `name`, outermost first.
    fn parents(&mut self, name: &str) -> Result<(), NewcError> {
        let mut end = 0;
        while let Some(i) = name[end..].find('/') {
            let parent = &name[..end + i];
            if !self.dirs.contains(parent) {
                if self.names.contains(parent) {
                    return Err(NewcError::ParentNotDir { name: name.to_string(), parent: parent.to_string() });
                }
                self.dirs.insert(parent.to_string());
                self.names.insert(parent.to_string());
                self.entry(parent, S_IFDIR | 0o755, 2, &[])?;
            }
            end += i + 1;
        }
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, data: &[u8]) -> Result<(), NewcError> {
        let size =
            u32::try_from(data.len()).map_err(|_| NewcError::TooLarge { name: name.to_string(), len: data.len() })?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.header(ino, mode, nlink, size, name)?;
        self.out.write_all(data)?;
        let pad = pad4(data.len());
        self.out.write_all(&[0u8; 3][..pad])?;
        self.written += (data.len() + pad) as u64;
        Ok(())
    }

    fn header(&mut self, ino: u32, mode: u32, nlink: u32, size: u32, name: &str) -> Result<(), NewcError> {
        let namesize = name.len() + 1;
        let fields: [u32; 13] = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime
            size,
            0, // devmajor
            0, // devminor
            0, // rdevmajor
            0, // rdevminor
            namesize as u32,
            0, // check
        ];
        let mut head = Vec::with_capacity(HEADER_LEN + namesize + 3);
        head.extend_from_slice(MAGIC);
        for f in fields {
            head.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        head.extend_from_slice(name.as_bytes());
        head.push(0);
        let pad = pad4(HEADER_LEN + namesize);
        head.extend_from_slice(&[0u8; 3][..pad]);
        self.out.write_all(&head)?;
        self.written += head.len() as u64;
        Ok(())
    }
}

fn check_mode(name: &str, mode: u32) -> Result<(), NewcError> {
    if mode & !0o7777 != 0 {
        return Err(NewcError::BadMode { name: name.to_string(), mode });
    }
    Ok(())
}

/// How many NUL bytes bring `len` up to a multiple of 4.
pub fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Writes `entries` (with their parent directories) and the trailer into a new buffer.
pub fn write_newc(entries: &[Entry]) -> Result<Vec<u8>, NewcError> {
    let mut w = NewcWriter::new(Vec::new());
    for e in entries {
        w.add(e)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry as read back: (ino, mode, nlink, name, data).
    #[derive(Debug, PartialEq)]
    struct Read {
        ino: u32,
        mode: u32,
        uid: u32,
        gid: u32,
        nlink: u32,
        mtime: u32,
        name: String,
        data: Vec<u8>,
    }

    /// A small, strict newc reader: checks the magic, that every header and every data
    /// block starts 4-aligned, that padding is NUL, and that nothing follows the trailer.
    fn read_newc(buf: &[u8]) -> Vec<Read> {
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            assert_eq!(pos % 4, 0, "header at {pos} is not 4-aligned");
            let head = &buf[pos..pos + HEADER_LEN];
            assert_eq!(&head[..6], MAGIC, "bad magic at {pos}");
            let field = |i: usize| {
                let s = std::str::from_utf8(&head[6 + 8 * i..14 + 8 * i]).unwrap();
                assert!(s.bytes().all(|b| b.is_ascii_hexdigit()), "field {s:?}");
                u32::from_str_radix(s, 16).unwrap()
            };
            let namesize = field(11) as usize;
            let size = field(6) as usize;
            for i in [7, 8, 9, 10, 12] {
                assert_eq!(field(i), 0, "field {i} should be 0");
            }
            let name_start = pos + HEADER_LEN;
            let name_bytes = &buf[name_start..name_start + namesize];
            assert_eq!(*name_bytes.last().unwrap(), 0, "name not NUL-terminated");
            let name = std::str::from_utf8(&name_bytes[..namesize - 1]).unwrap().to_string();
            let mut data_start = name_start + namesize;
            while data_start & 3 != 0 {
                assert_eq!(buf[data_start], 0, "name padding not NUL");
                data_start += 1;
            }
            let data = buf[data_start..data_start + size].to_vec();
            pos = data_start + size;
            while pos & 3 != 0 {
                assert_eq!(buf[pos], 0, "data padding not NUL");
                pos += 1;
            }
            if name == TRAILER {
                assert_eq!(pos, buf.len(), "bytes after the trailer");
                return out;
            }
            out.push(Read {
                ino: field(0),
                mode: field(1),
                uid: field(2),
                gid: field(3),
                nlink: field(4),
                mtime: field(5),
                name,
                data,
            });
        }
    }

    fn sample() -> Vec<Entry> {
        vec![
            Entry::dir("proc", 0o555),
            Entry::file("/bin/busybox", 0o755, b"\x7fELF not really".to_vec()),
            Entry::symlink("bin/sh", "busybox"),
            Entry::file("./etc/deep/dir/conf", 0o644, b"a=1\n".to_vec()),
            Entry::file("init", 0o755, b"#!/bin/sh\necho hi\n".to_vec()),
            Entry::file("empty", 0o600, Vec::new()),
        ]
    }

    #[test]
    fn round_trip() {
        let buf = write_newc(&sample()).unwrap();
        let got = read_newc(&buf);
        let names: Vec<_> = got.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "proc",
                "bin",
                "bin/busybox",
                "bin/sh",
                "etc",
                "etc/deep",
                "etc/deep/dir",
                "etc/deep/dir/conf",
                "init",
                "empty"
            ]
        );
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.ino, i as u32 + 1, "inode numbers count up in order");
            assert_eq!((r.uid, r.gid, r.mtime), (0, 0, 0));
        }
        assert_eq!(got[0].mode, S_IFDIR | 0o555);
        assert_eq!(got[0].nlink, 2);
        assert_eq!(got[1].mode, S_IFDIR | 0o755);
        assert_eq!(got[2].mode, S_IFREG | 0o755);
        assert_eq!(got[2].data, b"\x7fELF not really");
        assert_eq!(got[3].mode, S_IFLNK | 0o777);
        assert_eq!(got[3].data, b"busybox");
        assert_eq!(got[7].data, b"a=1\n");
        assert_eq!(got[8].data, b"#!/bin/sh\necho hi\n");
        assert_eq!(got[9].mode, S_IFREG | 0o600);
        assert!(got[9].data.is_empty());
    }

    #[test]
    fn padding_for_every_name_and_data_length() {
        // Names of length 1..=8 and data of length 0..=8 exercise every residue mod 4.
        for nlen in 1..=8 {
            for dlen in 0..=8 {
                let name = "n".repeat(nlen);
                let data = vec![0xAB; dlen];
                let buf = write_newc(&[Entry::file(name.as_str(), 0o644, data.clone())]).unwrap();
                assert_eq!(buf.len() % 4, 0);
                // header + name + NUL, padded; then data, padded.
                let first = HEADER_LEN + nlen + 1;
                let first = first + pad4(first);
                let second = dlen + pad4(dlen);
                let trailer = HEADER_LEN + TRAILER.len() + 1;
                let trailer = trailer + pad4(trailer);
                assert_eq!(buf.len(), first + second + trailer, "nlen {nlen} dlen {dlen}");
                let got = read_newc(&buf);
                assert_eq!(got.len(), 1);
                assert_eq!(got[0].name, name);
                assert_eq!(got[0].data, data);
            }
        }
    }

    #[test]
    fn exact_header_bytes() {
        let buf = write_newc(&[Entry::file("a", 0o644, b"xyz".to_vec())]).unwrap();
        let fields = [
            "00000001", "000081A4", "00000000", "00000000", "00000001", "00000000", "00000003", "00000000", "00000000",
            "00000000", "00000000", "00000002", "00000000",
        ];
        let expect_head = format!("070701{}", fields.concat());
        assert_eq!(&buf[..HEADER_LEN], expect_head.as_bytes());
        // name "a\0" padded to offset 112, then the data "xyz" padded to 116.
        assert_eq!(&buf[110..112], b"a\0");
        assert_eq!(&buf[112..116], b"xyz\0");
        assert_eq!(&buf[116..122], MAGIC);
    }

    #[test]
    fn deterministic() {
        let a = write_newc(&sample()).unwrap();
        let b = write_newc(&sample()).unwrap();
        assert_eq!(a, b);
        // The streaming writer gives the same bytes.
        let mut w = NewcWriter::new(Vec::new());
        for e in sample() {
            w.add(&e).unwrap();
        }
        assert_eq!(w.finish().unwrap(), a);
    }

    #[test]
    fn empty_archive_is_only_the_trailer() {
        let buf = write_newc(&[]).unwrap();
        assert!(read_newc(&buf).is_empty());
        assert_eq!(buf.len(), 124);
    }

    #[test]
    fn refusals() {
        let cases: &[(&[Entry], &str)] = &[
            (&[Entry::file("", 0o644, vec![])], "is empty"),
            (&[Entry::file("a/../b", 0o644, vec![])], "`..`"),
            (&[Entry::file("a//b", 0o644, vec![])], "empty path component"),
            (&[Entry::file("TRAILER!!!", 0o644, vec![])], "end of the archive"),
            (&[Entry::file("a", 0o100644, vec![])], "outside 0o7777"),
            (&[Entry::file("a", 0o644, vec![]), Entry::file("a", 0o644, vec![])], "written twice"),
            (&[Entry::file("a", 0o644, vec![]), Entry::file("a/b", 0o644, vec![])], "not a directory"),
            (&[Entry::file("a", 0o644, vec![]), Entry::dir("a", 0o755)], "written twice"),
            (&[Entry::symlink("l", "")], "empty symlink target"),
        ];
        for (entries, want) in cases {
            let err = write_newc(entries).unwrap_err().to_string();
            assert!(err.contains(want), "{entries:?}: {err:?} lacks {want:?}");
        }
    }

    #[test]
    fn dir_after_implicit_parent_is_not_repeated() {
        let buf = write_newc(&[
            Entry::file("dev/null-placeholder", 0o644, vec![]),
            Entry::dir("dev", 0o755),
            Entry::dir("/dev/", 0o755),
        ])
        .unwrap();
        let got = read_newc(&buf);
        assert_eq!(got.len(), 2);
    }

    /// `cpio -t` (GNU cpio) lists what we wrote. A host without cpio fails the test:
    /// `scripts/setup` installs it (its "cpio and fdisk" step).
    #[test]
    fn gnu_cpio_lists_it() {
        use std::process::{Command, Stdio};
        let mut child = Command::new("cpio")
            .args(["-t", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot run cpio ({error}): scripts/setup installs it (its \"cpio and fdisk\" step)")
            });
        let buf = write_newc(&sample()).unwrap();
        child.stdin.take().unwrap().write_all(&buf).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let listed = String::from_utf8(out.stdout).unwrap();
        let names: Vec<_> = read_newc(&buf).into_iter().map(|r| r.name).collect();
        assert_eq!(listed.lines().collect::<Vec<_>>(), names);
    }
}
