//! The recipe file: its raw serde form and the validated [`Recipe`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::RecipeError;

/// The mirror used when a recipe names none.
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The Debian suite whose index `scripts/repin` reads when a recipe names none.
pub const DEFAULT_SUITE: &str = "trixie";

mod raw {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Recipe {
        pub description: String,
        pub arch: String,
        pub append: String,
        pub mirror: Option<String>,
        pub suite: Option<String>,
        #[serde(default)]
        pub package: Vec<Package>,
        pub init: Init,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Package {
        pub name: String,
        pub version: String,
        pub arch: String,
        pub sha256: String,
        pub pool: String,
        pub files: Vec<File>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct File {
        pub from: String,
        pub to: String,
        pub mode: Option<u32>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Init {
        pub script: Option<String>,
        pub script_file: Option<String>,
        #[serde(default)]
        pub directories: Vec<String>,
        #[serde(default)]
        pub symlinks: Vec<Symlink>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Symlink {
        pub path: String,
        pub target: String,
    }
}

/// The machine width a guest boots on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Arch {
    Rv64,
    Rv32,
    X86_64,
    Aarch64,
}

impl Arch {
    /// The QEMU system emulator for this width.
    pub fn qemu(self) -> &'static str {
        match self {
            Arch::Rv64 => "qemu-system-riscv64",
            Arch::Rv32 => "qemu-system-riscv32",
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Aarch64 => "qemu-system-aarch64",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arch::Rv64 => "rv64",
            Arch::Rv32 => "rv32",
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        })
    }
}

/// A validated recipe.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// The file it was loaded from (for messages).
    pub path: PathBuf,
    /// The image cache key: hex sha256 of the recipe file's exact bytes, or, with
    /// `[init] script_file`, of the recipe's and the script's bytes (see [`parse`]).
    pub key: String,
    pub description: String,
    pub arch: Arch,
    /// The kernel command line a case gets by default.
    pub append: String,
    /// Base URL of the Debian mirror, without a trailing `/`.
    pub mirror: String,
    /// The suite of `mirror` the pins come from (`dists/<suite>/`): what `scripts/repin`
    /// reads. Downloads do not use it (they name the pool path).
    pub suite: String,
    pub packages: Vec<Package>,
    pub init: Init,
}

/// One Debian binary package and the files taken from it.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub arch: String,
    /// Lower-case hex sha256 of the .deb, as in the `SHA256:` field of `Packages`.
    pub sha256: String,
    /// The `Filename:` field of `Packages`: the .deb's path under the mirror.
    pub pool: String,
    pub files: Vec<FileMap>,
}

impl Package {
    /// The .deb's URL on `mirror`.
    pub fn url(&self, mirror: &str) -> String {
        format!("{mirror}/{}", self.pool)
    }
}

/// One file taken from a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMap {
    /// Path inside the package, relative (no leading `/`).
    pub from: String,
    pub to: Target,
    /// Permission bits in the initramfs; `None` keeps the package's.
    pub mode: Option<u32>,
}

/// Where a taken file goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The image booted with `-kernel`.
    Kernel,
    /// A path inside the initramfs, relative to its root.
    Initramfs(String),
}

/// The initramfs's own parts.
#[derive(Debug, Clone)]
pub struct Init {
    /// Written as `/init`, mode 0755: `[init] script`, or the text of `script_file`.
    pub script: String,
    /// With `[init] script_file`: the file the script was read from (the recipe's
    /// folder joined with the field).
    pub script_file: Option<PathBuf>,
    /// Empty directories to make (mode 0755), e.g. mount points.
    pub directories: Vec<String>,
    pub symlinks: Vec<Symlink>,
}

#[derive(Debug, Clone)]
pub struct Symlink {
    pub path: String,
    pub target: String,
}

/// Reads and validates a recipe; touches no network.
pub fn load(path: &Path) -> Result<Recipe, RecipeError> {
    let bytes = std::fs::read(path).map_err(|source| RecipeError::Read { path: path.to_path_buf(), source })?;
    parse(path, &bytes)
}

/// Validates recipe text; `path` names it in errors, and an `[init] script_file` is
/// read relative to its folder (the only file read).
///
/// The cache key is the sha256 of `bytes` exactly when the script is inline. With
/// `script_file` it is the sha256 of [`SCRIPT_FILE_KEY_TAG`], the recipe's length (8
/// bytes, big-endian), its bytes, the script's length (likewise) and its bytes: an
/// edit to either file gives a new key, and no pair of files gives the key of another
/// pair or of an inline recipe's bytes.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Recipe, RecipeError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| RecipeError::Parse { path: path.to_path_buf(), message: format!("not UTF-8 text: {e}") })?;
    let raw: raw::Recipe = toml::from_str(text)
        .map_err(|e| RecipeError::Parse { path: path.to_path_buf(), message: e.to_string().trim_end().to_string() })?;
    let v = Validator { path };
    let recipe = v.recipe(raw)?;
    let key = match &recipe.init.script_file {
        None => hex(&Sha256::digest(bytes)),
        Some(_) => {
            let script = recipe.init.script.as_bytes();
            let mut h = Sha256::new();
            h.update(SCRIPT_FILE_KEY_TAG);
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
            h.update((script.len() as u64).to_be_bytes());
            h.update(script);
            hex(&h.finalize())
        }
    };
    Ok(Recipe { key, ..recipe })
}

/// What the cache key of a recipe with `[init] script_file` hashes first (see [`parse`]).
pub const SCRIPT_FILE_KEY_TAG: &[u8] = b"testbench-recipe: recipe and script_file\0";

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// What an init script must start with.
const SHEBANG: &str = "must start with \"#!\" and an interpreter inside the initramfs, e.g. \"#!/bin/busybox sh\"";

struct Validator<'a> {
    path: &'a Path,
}

impl Validator<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> RecipeError {
        RecipeError::Invalid { path: self.path.to_path_buf(), field: field.into(), message: message.into() }
    }

    fn recipe(&self, raw: raw::Recipe) -> Result<Recipe, RecipeError> {
        if raw.description.trim().is_empty() {
            return Err(self.err("description", "is empty; say what the guest is"));
        }
        let arch = match raw.arch.as_str() {
            "rv64" => Arch::Rv64,
            "rv32" => Arch::Rv32,
            "x86_64" => Arch::X86_64,
            "aarch64" => Arch::Aarch64,
            other => {
                return Err(self.err(
                    "arch",
                    format!(
                    "{other:?} is not a width this bench boots; accepted: \"rv64\", \"rv32\", \"x86_64\", \"aarch64\""
                ),
                ))
            }
        };
        if raw.append.contains(['\n', '\r', '\0']) {
            return Err(self.err("append", "holds a newline or NUL; a kernel command line is one line"));
        }
        let mirror = match raw.mirror {
            None => DEFAULT_MIRROR.to_string(),
            Some(m) => {
                let rest = m.strip_prefix("http://").ok_or_else(|| {
                    self.err(
                        "mirror",
                        format!("{m:?}: accepted is a plain http:// URL such as {DEFAULT_MIRROR:?} (every .deb is checked by sha256, so no TLS is used)"),
                    )
                })?;
                if rest.trim_end_matches('/').is_empty() || rest.contains(char::is_whitespace) {
                    return Err(self.err("mirror", format!("{m:?} has no host, or holds whitespace")));
                }
                m.trim_end_matches('/').to_string()
            }
        };
        let suite = match raw.suite {
            None => DEFAULT_SUITE.to_string(),
            Some(s) => {
                let ok = !s.is_empty()
                    && s.starts_with(|c: char| c.is_ascii_lowercase())
                    && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c));
                if !ok {
                    return Err(self.err(
                        "suite",
                        format!("{s:?}: accepted is a suite or codename of the mirror's dists/ folder, a-z 0-9 - . starting with a letter (e.g. \"trixie\", \"trixie-updates\", \"sid\")"),
                    ));
                }
                s
            }
        };
        if raw.package.is_empty() {
            return Err(self.err("package", "no [[package]] tables; at least the one holding the kernel is needed"));
        }
        let mut packages = Vec::new();
        for (i, p) in raw.package.into_iter().enumerate() {
            packages.push(self.package(i, p)?);
        }
        let init = self.init(raw.init)?;

        // Every initramfs path is written once; exactly one file is the kernel.
        let mut seen: Vec<(String, String)> = Vec::new(); // (path, field)
        let mut kernels = Vec::new();
        for (i, p) in packages.iter().enumerate() {
            for (j, f) in p.files.iter().enumerate() {
                let field = format!("package[{i}].files[{j}].to");
                match &f.to {
                    Target::Kernel => kernels.push(field),
                    Target::Initramfs(to) => seen.push((to.clone(), field)),
                }
            }
        }
        for (j, d) in init.directories.iter().enumerate() {
            seen.push((d.clone(), format!("init.directories[{j}]")));
        }
        for (j, s) in init.symlinks.iter().enumerate() {
            seen.push((s.path.clone(), format!("init.symlinks[{j}].path")));
        }
        for (k, (path, field)) in seen.iter().enumerate() {
            if let Some((_, first)) = seen[..k].iter().find(|(p, _)| p == path) {
                return Err(self.err(
                    field.clone(),
                    format!("{path:?} is already written by `{first}`; each initramfs path is written once"),
                ));
            }
            // A path cannot be both a file or link and the parent of another path.
            if let Some((_, under)) = seen.iter().find(|(p, _)| p.starts_with(&format!("{path}/"))) {
                if !field.starts_with("init.directories") {
                    return Err(self.err(
                        field.clone(),
                        format!("{path:?} is a file or link, but `{under}` puts something inside it"),
                    ));
                }
            }
        }
        match kernels.len() {
            1 => {}
            0 => {
                return Err(self.err(
                    "package[].files[].to",
                    "no file has to = \"kernel\"; exactly one file must be the kernel image",
                ))
            }
            _ => {
                return Err(
                    self.err(kernels[1].clone(), format!("a second kernel; `{}` is already the kernel", kernels[0]))
                )
            }
        }

        Ok(Recipe {
            path: self.path.to_path_buf(),
            key: String::new(),
            description: raw.description,
            arch,
            append: raw.append,
            mirror,
            suite,
            packages,
            init,
        })
    }

    fn package(&self, i: usize, p: raw::Package) -> Result<Package, RecipeError> {
        let f = |name: &str| format!("package[{i}].{name}");
        let name_ok = p.name.len() >= 2
            && p.name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && p.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
        if !name_ok {
            return Err(self.err(
                f("name"),
                format!("{:?} is not a Debian package name (accepted: 2 or more of a-z 0-9 + - ., starting with a letter or digit)", p.name),
            ));
        }
        let version_ok = !p.version.is_empty()
            && p.version.starts_with(|c: char| c.is_ascii_digit())
            && p.version.chars().all(|c| c.is_ascii_alphanumeric() || ".+-~:".contains(c));
        if !version_ok {
            return Err(self.err(
                f("version"),
                format!("{:?} is not a Debian version (accepted: [epoch:]upstream[-revision], starting with a digit, of A-Z a-z 0-9 . + - ~ :)", p.version),
            ));
        }
        let arch_ok =
            !p.arch.is_empty() && p.arch.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !arch_ok {
            return Err(self.err(
                f("arch"),
                format!("{:?} is not a Debian architecture (accepted: e.g. \"riscv64\", \"all\")", p.arch),
            ));
        }
        if p.sha256.len() != 64 || !p.sha256.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) {
            return Err(self.err(
                f("sha256"),
                format!(
                    "{:?}: accepted is 64 lower-case hex digits (the SHA256 field of the Packages index)",
                    p.sha256
                ),
            ));
        }
        // The pool path is the `Filename:` field of the Packages index. Its directory
        // depends on the source package, which the binary name does not tell, so the
        // recipe states it; its file name must agree with name, version and arch.
        let upstream = p.version.split_once(':').map_or(p.version.as_str(), |(_, v)| v);
        let file = format!("{}_{}_{}.deb", p.name, upstream, p.arch);
        let pool_ok = p.pool.starts_with("pool/")
            && !p.pool.contains("//")
            && p.pool.split('/').all(|c| c != ".." && c != ".")
            && !p.pool.contains(|c: char| c.is_whitespace() || c == '?' || c == '#');
        if !pool_ok {
            return Err(self.err(
                f("pool"),
                format!("{:?}: accepted is the Filename field of the Packages index, a relative path starting with \"pool/\" (no `..`, `//`, whitespace, `?` or `#`)", p.pool),
            ));
        }
        if p.pool.rsplit('/').next() != Some(file.as_str()) {
            return Err(self.err(
                f("pool"),
                format!("{:?} does not end in {file:?}, the file name Debian gives {} {} for {} (name_version-without-epoch_arch.deb)", p.pool, p.name, p.version, p.arch),
            ));
        }
        if p.files.is_empty() {
            return Err(self.err(f("files"), "is empty; take at least one file"));
        }
        let mut files = Vec::new();
        for (j, raw) in p.files.into_iter().enumerate() {
            let ff = |name: &str| format!("package[{i}].files[{j}].{name}");
            let from = self
                .rel_path(&ff("from"), raw.from.trim_start_matches("./").trim_start_matches('/'))
                .map_err(|m| self.err(ff("from"), m.to_string()))?;
            let to = if raw.to == "kernel" {
                if raw.mode.is_some() {
                    return Err(
                        self.err(ff("mode"), "has no meaning for to = \"kernel\" (the kernel is not in the initramfs)")
                    );
                }
                Target::Kernel
            } else {
                let to = self.rel_path(&ff("to"), &raw.to).map_err(|m| {
                    self.err(ff("to"), format!("{m}; accepted: \"kernel\" or a relative path inside the initramfs"))
                })?;
                if to == "init" {
                    return Err(self.err(ff("to"), "\"init\" is written from [init].script; take the file elsewhere"));
                }
                Target::Initramfs(to)
            };
            if let Some(mode) = raw.mode {
                if mode & !0o7777 != 0 {
                    return Err(self.err(
                        ff("mode"),
                        format!("{mode:#o}: accepted are permission bits 0o0 to 0o7777, e.g. 0o755"),
                    ));
                }
            }
            files.push(FileMap { from, to, mode: raw.mode });
        }
        Ok(Package { name: p.name, version: p.version, arch: p.arch, sha256: p.sha256, pool: p.pool, files })
    }

    fn init(&self, raw: raw::Init) -> Result<Init, RecipeError> {
        let (script, script_file) = match (raw.script, raw.script_file) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    "init",
                    "has both `script` and `script_file`; accepted: exactly one of them (the /init text, or a file beside the recipe holding it)",
                ))
            }
            (None, None) => {
                return Err(self.err(
                    "init",
                    "has neither `script` nor `script_file`; accepted: exactly one of them (the /init text, or a file beside the recipe holding it)",
                ))
            }
            (Some(script), None) => {
                if !script.starts_with("#!") {
                    return Err(self.err("init.script", SHEBANG));
                }
                (script, None)
            }
            (None, Some(name)) => {
                let (script, file) = self.script_file(&name)?;
                (script, Some(file))
            }
        };
        let mut directories = Vec::new();
        for (j, d) in raw.directories.iter().enumerate() {
            let field = format!("init.directories[{j}]");
            let d = self
                .rel_path(&field, d.trim_start_matches('/'))
                .map_err(|m| self.err(&field, format!("{m}; accepted: a path such as \"proc\"")))?;
            if d == "init" {
                return Err(self.err(field, "\"init\" is the init script"));
            }
            directories.push(d);
        }
        let mut symlinks = Vec::new();
        for (j, s) in raw.symlinks.iter().enumerate() {
            let field = format!("init.symlinks[{j}].path");
            let path = self
                .rel_path(&field, s.path.trim_start_matches('/'))
                .map_err(|m| self.err(&field, format!("{m}; accepted: a path such as \"bin/sh\"")))?;
            if path == "init" {
                return Err(self.err(field, "\"init\" is the init script"));
            }
            if s.target.is_empty() || s.target.contains('\0') {
                return Err(self.err(
                    format!("init.symlinks[{j}].target"),
                    "is empty or holds a NUL; accepted: any non-empty link target, e.g. \"busybox\"",
                ));
            }
            symlinks.push(Symlink { path, target: s.target.clone() });
        }
        Ok(Init { script, script_file, directories, symlinks })
    }

    /// Reads `[init] script_file`: a relative path from the recipe's folder to a regular
    /// UTF-8 file starting with `#!`.
    fn script_file(&self, name: &str) -> Result<(String, PathBuf), RecipeError> {
        const FIELD: &str = "init.script_file";
        const ACCEPTED: &str =
            "accepted: a relative path, from the recipe's folder, of a regular file starting with \"#!\" (e.g. \"debian-devices.sh\")";
        let rel = self.rel_path(FIELD, name).map_err(|m| self.err(FIELD, format!("{m}; {ACCEPTED}")))?;
        let file = self.path.parent().unwrap_or(Path::new("")).join(&rel);
        let meta = std::fs::symlink_metadata(&file)
            .map_err(|e| self.err(FIELD, format!("{name:?} ({}): cannot read it: {e}; {ACCEPTED}", file.display())))?;
        if !meta.is_file() {
            let what = if meta.file_type().is_symlink() { "a symlink" } else { "a directory or special file" };
            return Err(self.err(FIELD, format!("{name:?} ({}) is {what}; {ACCEPTED}", file.display())));
        }
        let bytes = std::fs::read(&file)
            .map_err(|e| self.err(FIELD, format!("{name:?} ({}): cannot read it: {e}; {ACCEPTED}", file.display())))?;
        let script = String::from_utf8(bytes)
            .map_err(|e| self.err(FIELD, format!("{name:?} ({}) is not UTF-8 text: {e}", file.display())))?;
        if !script.starts_with("#!") {
            return Err(self.err(FIELD, format!("{name:?} ({}) {SHEBANG}", file.display())));
        }
        Ok((script, file))
    }

    /// A relative path of plain components.
    fn rel_path(&self, _field: &str, p: &str) -> Result<String, RelPathError> {
        if p.is_empty() {
            return Err(RelPathError::Empty);
        }
        if p.starts_with('/') {
            return Err(RelPathError::Absolute(p.to_string()));
        }
        if p.contains('\0') {
            return Err(RelPathError::Nul(p.to_string()));
        }
        let p = p.strip_suffix('/').unwrap_or(p);
        if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(RelPathError::Component(p.to_string()));
        }
        if p == crate::newc::TRAILER {
            return Err(RelPathError::Trailer(p.to_string()));
        }
        Ok(p.to_string())
    }
}

/// A recipe's path that is not a relative path of plain components (the field's error
/// message starts with it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RelPathError {
    #[error("is empty")]
    Empty,
    #[error("{0:?} is absolute")]
    Absolute(String),
    #[error("{0:?} holds a NUL")]
    Nul(String),
    #[error("{0:?} has an empty, `.` or `..` component")]
    Component(String),
    #[error("{0:?} is the cpio trailer's name")]
    Trailer(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initramfs_paths_are_plain_components_or_refused_by_kind() {
        let v = Validator { path: Path::new("r.toml") };
        assert_eq!(v.rel_path("f", "bin/sh/"), Ok("bin/sh".to_string()));
        assert_eq!(v.rel_path("f", ""), Err(RelPathError::Empty));
        assert_eq!(v.rel_path("f", "/bin"), Err(RelPathError::Absolute("/bin".into())));
        assert_eq!(v.rel_path("f", "a\0b"), Err(RelPathError::Nul("a\0b".into())));
        for bad in ["a//b", "./a", "a/../b"] {
            assert_eq!(v.rel_path("f", bad), Err(RelPathError::Component(bad.into())));
        }
        let trailer = v.rel_path("f", crate::newc::TRAILER).unwrap_err();
        assert_eq!(trailer, RelPathError::Trailer(crate::newc::TRAILER.into()));
        assert_eq!(trailer.to_string(), format!("{:?} is the cpio trailer's name", crate::newc::TRAILER));
    }
}
