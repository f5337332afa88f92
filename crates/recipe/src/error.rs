use std::path::PathBuf;

/// Everything that can go wrong loading a recipe or building its image.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("recipe {path}: cannot read it: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// TOML syntax, a missing field, an unknown field or a value of the wrong type.
    #[error("recipe {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A field that parsed but holds a value the recipe cannot use.
    #[error("recipe {path}: field `{field}`: {message}")]
    Invalid { path: PathBuf, field: String, message: String },
    #[error("package {package}: downloading {url}: {source}")]
    Fetch { package: String, url: String, source: crate::fetch::FetchError },
    /// The mirror answered 404 (or 410) for a pinned .deb: the suite moved on and the
    /// pool no longer holds this version. Says the command that re-pins the recipe.
    #[error("recipe {}: package {package} version {version} is no longer on the mirror ({url} answered HTTP {code}); re-pin the recipe to the suite's current versions with `{}` and review the diff it prints", recipe.display(), crate::repin_command(recipe))]
    Gone { recipe: PathBuf, package: String, version: String, url: String, code: u16 },
    #[error("package {package}: sha256 mismatch: the recipe expects {expected}, the download is {got} (the file was not kept)")]
    Checksum { package: String, expected: String, got: String },
    #[error("package {package}: dpkg-deb -x {deb} failed ({status}): {stderr}")]
    Unpack { package: String, deb: PathBuf, status: String, stderr: String },
    #[error("package {package}: has no file {path}")]
    MissingFile { package: String, path: String },
    #[error("package {package}: {path} is {what}, not a regular file")]
    NotAFile { package: String, path: String, what: String },
    #[error("package {package}: kernel file {path}: {message}")]
    Kernel { package: String, path: String, message: String },
    #[error("building the initramfs: {0}")]
    Newc(#[from] crate::newc::NewcError),
    /// Neither `TESTBENCH_CACHE`, `XDG_CACHE_HOME` nor `HOME` names a folder for the
    /// shared cache.
    #[error("no cache folder: set TESTBENCH_CACHE (an absolute path) or HOME ({why})")]
    NoCacheDir { why: String },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

impl RecipeError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecipeError {
        let context = context.into();
        move |source| RecipeError::Io { context, source }
    }
}
