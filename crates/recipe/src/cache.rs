//! Where the shared cache lives: one folder per user, used by every clone on the machine.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::RecipeError;

/// The variable that names the cache folder outright.
pub const CACHE_ENV: &str = "TESTBENCH_CACHE";

/// The cache root for this user: `$TESTBENCH_CACHE`, else `$XDG_CACHE_HOME/testbench`,
/// else `$HOME/.cache/testbench`. It holds `debs/<sha256>.deb` (downloads, by content)
/// and `<recipe key>/` (built images, by the recipe's content hash), so a second clone
/// finds what the first fetched and built.
pub fn user_cache_root() -> Result<PathBuf, RecipeError> {
    cache_root_from(|name| std::env::var_os(name))
}

/// [`user_cache_root`] with the environment given (tests pass their own).
///
/// An empty variable counts as unset. `TESTBENCH_CACHE` must be absolute (a relative
/// one would give each clone, or each working directory, its own cache): refused
/// otherwise. A relative `XDG_CACHE_HOME` is ignored, as the XDG base directory
/// specification says.
pub fn cache_root_from(var: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, RecipeError> {
    let get = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = get(CACHE_ENV) {
        if !dir.is_absolute() {
            return Err(RecipeError::NoCacheDir {
                why: format!("{CACHE_ENV}={} is relative; accepted is an absolute path", dir.display()),
            });
        }
        return Ok(dir);
    }
    if let Some(xdg) = get("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return Ok(xdg.join("testbench"));
    }
    match get("HOME") {
        Some(home) if home.is_absolute() => Ok(home.join(".cache").join("testbench")),
        Some(home) => Err(RecipeError::NoCacheDir { why: format!("HOME={} is relative", home.display()) }),
        None => Err(RecipeError::NoCacheDir { why: format!("{CACHE_ENV}, XDG_CACHE_HOME and HOME are all unset") }),
    }
}

/// The command that re-pins `recipe` (in [`RecipeError::Gone`]'s message).
pub fn repin_command(recipe: &Path) -> String {
    format!("scripts/repin {}", recipe.display())
}
