//! Guest images from Debian's packages.
//!
//! A guest recipe is a TOML file naming Debian binary packages (pinned by version,
//! sha256 and pool path), the files to take from them, and an `/init` script. [`load`]
//! parses and validates one without touching the network; [`build`] downloads the
//! packages (cached by sha256), unpacks them with `dpkg-deb -x`, and writes the kernel
//! and an uncompressed newc initramfs (see [`newc`]) into a cache folder keyed by the
//! sha256 of the recipe file's bytes (and of its `[init] script_file`'s, when it has
//! one); [`user_cache_root`] is the per-user folder every clone shares. [`repin`]
//! re-pins a recipe to its suite's current index (`scripts/repin`). See
//! `guests/README.md` for the schema.

mod build;
mod cache;
mod error;
mod fetch;
pub mod newc;
mod recipe;
pub mod repin;

pub use build::{
    build, build_with, kernel_format, kernel_image, unpack, Image, DEBS_DIR, DONE_FILE, INITRD_FILE, KERNEL_FILE,
};
pub use cache::{cache_root_from, repin_command, user_cache_root, CACHE_ENV};
pub use error::RecipeError;
pub use fetch::{fetch_deb, sha256_file, Fetch, FetchError, HttpFetch};
pub use recipe::{
    hex, load, parse, Arch, FileMap, Init, Package, Recipe, Symlink, Target, DEFAULT_MIRROR, DEFAULT_SUITE,
    SCRIPT_FILE_KEY_TAG,
};
