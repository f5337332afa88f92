//! Loaded ELFs kept warm across a run's boots: one load per file while it stays the same.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::{Error, Symbols};

/// A file as the cache knows it: its path, size and modification time (a rebuilt kernel
/// is another key, and is loaded afresh).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

type Loaded = Result<Arc<Symbols>, Arc<Error>>;

/// The ELFs a run has loaded (at most `capacity`, the least recently asked for dropped
/// first), each loaded once: two boots asking for one file at once wait for one load.
/// A file that failed to load keeps its error while it stays the same.
pub struct Cache {
    entries: Mutex<Vec<(Key, Arc<OnceLock<Loaded>>)>>,
    capacity: usize,
    loads: AtomicUsize,
}

impl Cache {
    pub const fn new(capacity: usize) -> Cache {
        Cache { entries: Mutex::new(Vec::new()), capacity, loads: AtomicUsize::new(0) }
    }

    /// The ELF at `path`, loaded now or kept from an earlier call while its path, size and
    /// modification time are the same.
    pub fn open(&self, path: &Path) -> Loaded {
        let metadata =
            std::fs::metadata(path).map_err(|source| Arc::new(Error::Unreadable { path: path.to_owned(), source }))?;
        let key = Key { path: path.to_owned(), len: metadata.len(), modified: metadata.modified().ok() };
        let cell = {
            let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let cell = match entries.iter().position(|(k, _)| *k == key) {
                Some(at) => entries.remove(at).1,
                None => Arc::new(OnceLock::new()),
            };
            // Another version of the same path is stale: it goes at once.
            entries.retain(|(k, _)| k.path != key.path);
            entries.push((key, cell.clone()));
            let over = entries.len().saturating_sub(self.capacity.max(1));
            entries.drain(..over);
            cell
        };
        cell.get_or_init(|| {
            self.loads.fetch_add(1, Ordering::Relaxed);
            Symbols::open(path).map(Arc::new).map_err(Arc::new)
        })
        .clone()
    }

    /// How many loads this cache has made (each a file read and parsed).
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::Relaxed)
    }
}

/// The process's cache (the bench's run: its boots share it), of four ELFs at most.
pub fn cached(path: &Path) -> Loaded {
    static CACHE: Cache = Cache::new(4);
    CACHE.open(path)
}
