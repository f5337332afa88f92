//! Packing a recipe: the table, then each partition as its file system says.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use testbench_process::Cmd;

use crate::stage::sorted_entries;
use crate::table::{self, partition_guid};
use crate::{fat, io_err, refused, under, DiskError, DiskRecipe, Fs, Layout, PartitionPlace};

/// The one time stamp a pack writes: 2000-01-01 00:00:00 UTC, in seconds since 1970.
pub const FIXED_TIME: u64 = 946_684_800;

const MKE2FS_DEADLINE: Duration = Duration::from_secs(120);
pub(crate) const DEBUGFS_DEADLINE: Duration = Duration::from_secs(60);

/// Pack `recipe` (paths relative to `root`) into a new disk at `out_path`, using
/// `scratch_dir` (which must exist) for each ext4 partition's copy of its stage, its
/// image and a `debugfs` script (`N-stage/`, `N.ext4`, `N.debugfs` for the partition of
/// index N), removed once the partition is on the disk. Returns where each partition sits.
pub fn pack(recipe: &DiskRecipe, root: &Path, out_path: &Path, scratch_dir: &Path) -> Result<Layout, DiskError> {
    let parts: Vec<(String, Fs)> = recipe.partitions.iter().map(|p| (p.name.clone(), p.fs)).collect();
    let layout = table::partitioned(out_path, recipe.size_kib, &parts)?;
    let image = OpenOptions::new().read(true).write(true).open(out_path).map_err(io_err(out_path, "open the disk"))?;
    for (index, (part, place)) in recipe.partitions.iter().zip(&layout.partitions).enumerate() {
        match part.fs {
            Fs::Raw => {
                if let Some(file) = &part.file {
                    let path = under(root, file);
                    let bytes = std::fs::read(&path).map_err(io_err(&path, "read the raw partition's file"))?;
                    if bytes.len() as u64 > place.length {
                        return Err(refused(
                            out_path,
                            format!(
                                "partition `{}`: `{}` is {} bytes, the partition {}",
                                place.name,
                                file.display(),
                                bytes.len(),
                                place.length
                            ),
                        ));
                    }
                    image.write_all_at(&bytes, place.offset).map_err(io_err(out_path, "write a raw partition"))?;
                }
            }
            Fs::Ext4 => {
                let stage = under(root, part.stage.as_deref().expect("a checked recipe's ext4 has a stage"));
                let made = ext4(&stage, scratch_dir, index, place)?;
                copy_in(&made, &image, out_path, place)?;
                // What the scratch directory held for this partition goes once it is in.
                for leftover in [made, scratch_dir.join(format!("{index}.debugfs"))] {
                    std::fs::remove_file(&leftover).map_err(io_err(&leftover, "remove a scratch file"))?;
                }
                let copy = scratch_dir.join(format!("{index}-stage"));
                std::fs::remove_dir_all(&copy).map_err(io_err(&copy, "remove the scratch copy"))?;
            }
            Fs::Fat => {
                let stage = under(root, part.stage.as_deref().expect("a checked recipe's fat has a stage"));
                fat::write(&image, out_path, place, &stage)?;
            }
        }
    }
    image.sync_all().map_err(io_err(out_path, "write the disk"))?;
    Ok(layout)
}

/// A tool of e2fsprogs: on the path, or in the sbin directories a user's path may lack.
pub(crate) fn tool(name: &str) -> PathBuf {
    testbench_process::on_path(name)
        .or_else(|| ["/usr/sbin", "/sbin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file()))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Run `cmd` to its end; a failure (or, with `quiet_stderr`, anything on stderr but
/// e2fsprogs' banner) is an error quoting stderr.
pub(crate) fn run(cmd: Cmd, quiet_stderr: bool) -> Result<Vec<u8>, DiskError> {
    let command = cmd.display();
    let out = cmd.output().map_err(|e| DiskError::Tool { command: command.clone(), message: e.to_string() })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("debugfs 1.") && !l.starts_with("mke2fs 1."))
        .collect();
    if !out.status.success() || (quiet_stderr && !complaints.is_empty()) {
        let message = format!("exited with {}: {}", out.status, complaints.join(" / "));
        return Err(DiskError::Tool { command, message });
    }
    Ok(out.stdout)
}

/// Make the ext4 image of `stage` for `place` in the scratch directory: a copy of the
/// stage with fixed times, `mke2fs -d` with fixed time, UUID and hash seed, then every
/// inode's change time fixed by `debugfs -w`.
fn ext4(stage: &Path, scratch: &Path, index: usize, place: &PartitionPlace) -> Result<PathBuf, DiskError> {
    let copy = scratch.join(format!("{index}-stage"));
    if copy.exists() {
        std::fs::remove_dir_all(&copy).map_err(io_err(&copy, "clear the scratch copy"))?;
    }
    std::fs::create_dir_all(&copy).map_err(io_err(&copy, "make the scratch copy"))?;
    let entries = copy_tree(stage, &copy)?;
    fix_metadata(&copy)?;
    let made = scratch.join(format!("{index}.ext4"));
    let file = File::create(&made).map_err(io_err(&made, "create the ext4 image"))?;
    file.set_len(place.length).map_err(io_err(&made, "size the ext4 image"))?;
    drop(file);
    let uuid = partition_guid(index).to_string();
    let cmd = Cmd::new(tool("mke2fs"), "mke2fs to make an ext4 partition", MKE2FS_DEADLINE)
        .env("E2FSPROGS_FAKE_TIME", FIXED_TIME.to_string())
        .env("LC_ALL", "C")
        .args(["-q", "-F", "-t", "ext4", "-T", "default", "-U", &uuid])
        .arg("-E")
        .arg(format!("root_owner=0:0,hash_seed={uuid},nodiscard,no_copy_xattrs"))
        .arg("-d")
        .arg(&copy)
        .arg(&made);
    run(cmd, false)?;
    // `mke2fs -d` numbers the root 2, lost+found 11, the stage's entries from 12 on. It
    // copies each one's change time (which no one can set) and owner (the user packing)
    // from the copy: both are set here. `@N` is N seconds (a bare number is a date).
    let mut script = String::new();
    for inode in [2].into_iter().chain(11..=11 + entries) {
        script.push_str(&format!("sif <{inode}> ctime @{FIXED_TIME}\nsif <{inode}> uid 0\nsif <{inode}> gid 0\n"));
    }
    let script_path = scratch.join(format!("{index}.debugfs"));
    std::fs::write(&script_path, script).map_err(io_err(&script_path, "write the debugfs script"))?;
    let cmd = Cmd::new(tool("debugfs"), "debugfs to fix the ext4 inodes' change times", DEBUGFS_DEADLINE)
        .env("E2FSPROGS_FAKE_TIME", FIXED_TIME.to_string())
        .arg("-w")
        .arg("-f")
        .arg(&script_path)
        .arg(&made);
    run(cmd, true)?;
    Ok(made)
}

/// Copy the tree under `from` into `to` (entries in byte order of their names), refusing
/// anything but directories and regular files. Returns how many entries it copied.
fn copy_tree(from: &Path, to: &Path) -> Result<u64, DiskError> {
    let mut count = 0;
    for (name, path, kind) in sorted_entries(from)? {
        let target = to.join(&name);
        if kind.is_dir() {
            std::fs::create_dir(&target).map_err(io_err(&target, "make a directory in the scratch copy"))?;
            count += 1 + copy_tree(&path, &target)?;
        } else {
            std::fs::copy(&path, &target).map_err(io_err(&path, "copy into the scratch copy"))?;
            count += 1;
        }
    }
    Ok(count)
}

/// Give `dir` and everything under it the pack's metadata, children before their
/// directory: mode 0755 for directories and for files their owner may run, 0644 for the
/// other files (so the checkout's umask does not count), then [`FIXED_TIME`] as access
/// and modification time.
fn fix_metadata(dir: &Path) -> Result<(), DiskError> {
    for (_, path, kind) in sorted_entries(dir)? {
        if kind.is_dir() {
            fix_metadata(&path)?;
        } else {
            set_metadata(&path, false)?;
        }
    }
    set_metadata(dir, true)
}

fn set_metadata(path: &Path, is_dir: bool) -> Result<(), DiskError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_err(io_err(path, "read its mode"))?.permissions().mode();
    let mode = if is_dir || mode & 0o100 != 0 { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_err(path, "set its mode"))?;
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(FIXED_TIME);
    let file = File::open(path).map_err(io_err(path, "open to set its times"))?;
    file.set_times(std::fs::FileTimes::new().set_accessed(when).set_modified(when))
        .map_err(io_err(path, "set its times"))
}

/// Copy the made image into its partition, skipping blocks of zeros (the disk is fresh).
fn copy_in(made: &Path, image: &File, image_path: &Path, place: &PartitionPlace) -> Result<(), DiskError> {
    let mut from = File::open(made).map_err(io_err(made, "read the ext4 image"))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = from.read(&mut buffer).map_err(io_err(made, "read the ext4 image"))?;
        if n == 0 {
            break;
        }
        if at + n as u64 > place.length {
            return Err(refused(image_path, format!("partition `{}`: the ext4 image outgrew it", place.name)));
        }
        if buffer[..n].iter().any(|&b| b != 0) {
            image
                .write_all_at(&buffer[..n], place.offset + at)
                .map_err(io_err(image_path, "write an ext4 partition"))?;
        }
        at += n as u64;
    }
    Ok(())
}
