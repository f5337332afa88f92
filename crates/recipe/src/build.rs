//! Turning a recipe into a cached kernel + initramfs.

use std::fs::{self, File};
use std::io::{BufWriter, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_process::{Cmd, CmdError};

use crate::fetch::{fetch_deb, unique_suffix, Fetch, HttpFetch};
use crate::newc::NewcWriter;
use crate::recipe::{Arch, Package, Recipe, Target};
use crate::RecipeError;

/// File names inside an image directory.
pub const KERNEL_FILE: &str = "kernel";
pub const INITRD_FILE: &str = "initrd.cpio";
/// Written last, before the directory is renamed into place.
pub const DONE_FILE: &str = "done";
/// The folder of `cache_root` holding downloaded .debs by sha256.
pub const DEBS_DIR: &str = "debs";

/// A built guest image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Booted with `-kernel`.
    pub kernel: PathBuf,
    /// Given as `-initrd`: an uncompressed newc cpio archive.
    pub initrd: PathBuf,
    /// The recipe's default kernel command line.
    pub append: String,
    pub arch: Arch,
    /// True when this call found the image already built.
    pub from_cache: bool,
}

/// Builds (or finds) the image for `recipe` under `cache_root`, downloading over HTTP.
pub fn build(recipe: &Recipe, cache_root: &Path, log: &mut dyn FnMut(&str)) -> Result<Image, RecipeError> {
    build_with(recipe, cache_root, &mut HttpFetch::default(), log)
}

/// [`build`] with the downloader given.
///
/// The image lives in `cache_root/<recipe.key>/`. It is built in a fresh temporary
/// folder of `cache_root`, the `done` marker written last, and the folder renamed into
/// place; a process that loses a race to another building the same recipe drops its
/// own copy and uses the winner's.
pub fn build_with(
    recipe: &Recipe,
    cache_root: &Path,
    fetch: &mut dyn Fetch,
    log: &mut dyn FnMut(&str),
) -> Result<Image, RecipeError> {
    let dir = cache_root.join(&recipe.key);
    if is_complete(&dir) {
        log(&format!("image cached in {}", dir.display()));
        return Ok(image(recipe, &dir, true));
    }
    fs::create_dir_all(cache_root).map_err(RecipeError::io(format!("creating {}", cache_root.display())))?;
    let tmp = cache_root.join(format!(".tmp-{}-{}", &recipe.key[..16], unique_suffix()));
    fs::create_dir(&tmp).map_err(RecipeError::io(format!("creating {}", tmp.display())))?;
    let guard = RemoveOnDrop(Some(tmp.clone()));

    build_into(recipe, cache_root, &tmp, fetch, log)?;

    match fs::rename(&tmp, &dir) {
        Ok(()) => {
            drop(guard.disarm());
            log(&format!("image built in {}", dir.display()));
            return Ok(image(recipe, &dir, false));
        }
        Err(_) if is_complete(&dir) => {
            log(&format!("another process finished {} first; using its image", dir.display()));
            return Ok(image(recipe, &dir, false));
        }
        Err(_) => {}
    }
    // Something incomplete sits at `dir` (made by hand, or an older layout): move it
    // aside and try once more.
    let stale = cache_root.join(format!(".stale-{}", unique_suffix()));
    if fs::rename(&dir, &stale).is_ok() {
        let _ = fs::remove_dir_all(&stale);
    }
    match fs::rename(&tmp, &dir) {
        Ok(()) => {
            drop(guard.disarm());
            Ok(image(recipe, &dir, false))
        }
        Err(_) if is_complete(&dir) => Ok(image(recipe, &dir, false)),
        Err(e) => Err(RecipeError::io(format!("renaming {} to {}", tmp.display(), dir.display()))(e)),
    }
}

fn is_complete(dir: &Path) -> bool {
    dir.join(DONE_FILE).is_file() && dir.join(KERNEL_FILE).is_file() && dir.join(INITRD_FILE).is_file()
}

fn image(recipe: &Recipe, dir: &Path, from_cache: bool) -> Image {
    Image {
        kernel: dir.join(KERNEL_FILE),
        initrd: dir.join(INITRD_FILE),
        append: recipe.append.clone(),
        arch: recipe.arch,
        from_cache,
    }
}

struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    fn disarm(mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_dir_all(p);
        }
    }
}

/// One file bound for the initramfs.
struct Taken {
    to: String,
    mode: u32,
    data: Vec<u8>,
}

fn build_into(
    recipe: &Recipe,
    cache_root: &Path,
    tmp: &Path,
    fetch: &mut dyn Fetch,
    log: &mut dyn FnMut(&str),
) -> Result<(), RecipeError> {
    let debs = cache_root.join(DEBS_DIR);
    let mut taken = Vec::new();
    let mut kernel_written = false;
    for (i, pkg) in recipe.packages.iter().enumerate() {
        let deb = fetch_deb(fetch, &recipe.path, pkg, &recipe.mirror, &debs, log)?;
        let root = tmp.join(format!("pkg-{i}"));
        unpack(pkg, &deb, &root)?;
        for f in &pkg.files {
            let src = root.join(&f.from);
            let (data, pkg_mode) = read_taken(pkg, &f.from, &src)?;
            match &f.to {
                Target::Kernel => {
                    let kernel = kernel_image(recipe.arch, pkg, &f.from, data, log)?;
                    let dest = tmp.join(KERNEL_FILE);
                    fs::write(&dest, kernel).map_err(RecipeError::io(format!("writing {}", dest.display())))?;
                    kernel_written = true;
                }
                Target::Initramfs(to) => {
                    taken.push(Taken { to: to.clone(), mode: f.mode.unwrap_or(pkg_mode & 0o7777), data })
                }
            }
        }
        fs::remove_dir_all(&root).map_err(RecipeError::io(format!("removing {}", root.display())))?;
    }
    debug_assert!(kernel_written, "validation guarantees one kernel");

    let initrd = tmp.join(INITRD_FILE);
    let file = File::create(&initrd).map_err(RecipeError::io(format!("creating {}", initrd.display())))?;
    let mut w = NewcWriter::new(BufWriter::new(file));
    for d in &recipe.init.directories {
        w.dir(d, 0o755)?;
    }
    for t in &taken {
        w.file(&t.to, t.mode, &t.data)?;
    }
    for s in &recipe.init.symlinks {
        w.symlink(&s.path, &s.target)?;
    }
    w.file("init", 0o755, recipe.init.script.as_bytes())?;
    let size = w.written();
    let out = w.finish()?;
    let file =
        out.into_inner().map_err(|e| RecipeError::io(format!("writing {}", initrd.display()))(e.into_error()))?;
    file.sync_all().map_err(RecipeError::io(format!("syncing {}", initrd.display())))?;
    log(&format!("initramfs: {} files, {size} bytes", taken.len() + 1));

    let done = tmp.join(DONE_FILE);
    fs::write(&done, format!("recipe {}\nsha256 {}\n", recipe.path.display(), recipe.key))
        .map_err(RecipeError::io(format!("writing {}", done.display())))?;
    Ok(())
}

/// How long one `dpkg-deb -x` may take: the largest package a recipe takes (a kernel's
/// modules, tens of MB compressed) unpacks in seconds.
pub const UNPACK_DEADLINE: Duration = Duration::from_secs(300);

/// Unpacks `deb` into `root` with `dpkg-deb -x`, killed past [`UNPACK_DEADLINE`].
pub fn unpack(pkg: &Package, deb: &Path, root: &Path) -> Result<(), RecipeError> {
    unpack_within(pkg, deb, root, UNPACK_DEADLINE)
}

fn unpack_within(pkg: &Package, deb: &Path, root: &Path, deadline: Duration) -> Result<(), RecipeError> {
    let what = format!("dpkg-deb to unpack {} ({})", pkg.name, deb.display());
    let out = Cmd::new("dpkg-deb", what, deadline).arg("-x").arg(deb).arg(root).output().map_err(|e| {
        let (status, stderr) = match e {
            CmdError::Spawn { source, .. } => {
                ("not started".into(), format!("cannot run dpkg-deb (is the dpkg package installed?): {source}"))
            }
            CmdError::Deadline { .. } => ("killed at its deadline".into(), e.to_string()),
            CmdError::Wait { .. } => ("not waited for".into(), e.to_string()),
        };
        RecipeError::Unpack { package: pkg.name.clone(), deb: deb.to_path_buf(), status, stderr }
    })?;
    if !out.status.success() {
        return Err(RecipeError::Unpack {
            package: pkg.name.clone(),
            deb: deb.to_path_buf(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Reads a named file out of an unpacked package, with its permission bits.
fn read_taken(pkg: &Package, from: &str, src: &Path) -> Result<(Vec<u8>, u32), RecipeError> {
    let meta = match fs::symlink_metadata(src) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RecipeError::MissingFile { package: pkg.name.clone(), path: from.to_string() })
        }
        Err(e) => return Err(RecipeError::io(format!("reading {}", src.display()))(e)),
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(src).unwrap_or_default();
        return Err(RecipeError::NotAFile {
            package: pkg.name.clone(),
            path: from.to_string(),
            what: format!("a symlink to {} (name its target instead)", target.display()),
        });
    }
    if !meta.is_file() {
        return Err(RecipeError::NotAFile {
            package: pkg.name.clone(),
            path: from.to_string(),
            what: "a directory or special file".into(),
        });
    }
    let data = fs::read(src).map_err(RecipeError::io(format!("reading {}", src.display())))?;
    Ok((data, meta.permissions().mode()))
}

/// Makes sure the kernel is something `arch`'s QEMU loads with `-kernel` (see
/// [`kernel_format`]), gunzipping it first if the package ships it gzip'd (any width:
/// the image written is always the decompressed one).
pub fn kernel_image(
    arch: Arch,
    pkg: &Package,
    from: &str,
    data: Vec<u8>,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<u8>, RecipeError> {
    let err = |message: String| RecipeError::Kernel { package: pkg.name.clone(), path: from.to_string(), message };
    let data = if data.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&data[..])
            .read_to_end(&mut out)
            .map_err(|e| err(format!("is gzip'd but does not decompress: {e}")))?;
        log(&format!("{}: {from} is gzip'd; decompressed {} to {} bytes", pkg.name, data.len(), out.len()));
        out
    } else {
        data
    };
    match kernel_format(arch, &data) {
        Some(kind) => {
            log(&format!("{}: kernel {from} is {kind}", pkg.name));
            Ok(data)
        }
        None => Err(err(format!(
            "is not {} (after any gunzip), so {}'s -kernel cannot load it",
            accepted_kernels(arch),
            arch.qemu()
        ))),
    }
}

/// The kernel files `arch`'s QEMU loads with `-kernel`, for messages.
fn accepted_kernels(arch: Arch) -> &'static str {
    match arch {
        Arch::Rv64 | Arch::Rv32 => "an ELF, a RISC-V Image or a uImage",
        Arch::X86_64 => "a bzImage or an ELF",
        Arch::Aarch64 => "an arm64 Image, an ELF or a uImage",
    }
}

/// What kind of kernel file `data` is, if `arch`'s QEMU can load it with `-kernel`:
/// on riscv an ELF, a RISC-V `Image` (EFI-stub ones included) or a uImage; on x86_64 a
/// bzImage (`HdrS` at 0x202) or an ELF (QEMU boots one with a PVH note); on aarch64 an
/// arm64 `Image` (`ARM\x64` at 56, EFI-stub ones included), an ELF or a uImage.
pub fn kernel_format(arch: Arch, data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x7fELF") {
        return Some("an ELF file");
    }
    let efi = data.starts_with(b"MZ");
    match arch {
        Arch::Rv64 | Arch::Rv32 => {
            if data.len() >= 64 && &data[56..60] == b"RSC\x05" {
                return Some(if efi { "a RISC-V Image with an EFI stub" } else { "a RISC-V Image" });
            }
            if data.len() >= 64 && &data[48..56] == b"RISCV\0\0\0" {
                return Some("a RISC-V Image (old magic)");
            }
        }
        Arch::X86_64 => {
            if data.len() >= 0x206 && &data[0x202..0x206] == b"HdrS" {
                return Some("a bzImage");
            }
            return None;
        }
        Arch::Aarch64 => {
            if data.len() >= 64 && &data[56..60] == b"ARM\x64" {
                return Some(if efi { "an arm64 Image with an EFI stub" } else { "an arm64 Image" });
            }
        }
    }
    if data.starts_with(&[0x27, 0x05, 0x19, 0x56]) {
        return Some("a uImage");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A .deb that never ends (a FIFO nobody writes): dpkg-deb is killed at the deadline,
    /// and the error says what was waited for.
    #[test]
    fn an_unpack_past_its_deadline_is_killed_and_says_what_it_waited_for() {
        let dir = std::env::temp_dir().join(format!("testbench-recipe-unpack-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("never.deb");
        let _ = fs::remove_file(&fifo);
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let pkg = Package {
            name: "never".into(),
            version: "1".into(),
            arch: "riscv64".into(),
            sha256: String::new(),
            pool: String::new(),
            files: Vec::new(),
        };
        let error = unpack_within(&pkg, &fifo, &dir.join("root"), Duration::from_millis(300)).unwrap_err();
        fs::remove_dir_all(&dir).unwrap();
        let message = error.to_string();
        assert!(message.contains("(killed at its deadline)"), "{message}");
        assert!(message.contains("dpkg-deb to unpack never ("), "{message}");
        assert!(message.contains("no end after 300ms"), "{message}");
    }
}
