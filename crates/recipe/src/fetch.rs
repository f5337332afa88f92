//! Downloading .deb files: the injectable [`Fetch`], its HTTP form, and the
//! sha256-checked download cache.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::recipe::{hex, Package};
use crate::RecipeError;

/// Something that copies the body at `url` into `out`. The bench uses [`HttpFetch`];
/// tests put in their own.
pub trait Fetch {
    /// Copies the body; on failure says what went wrong (and, for a deadline, which one
    /// and how long it waited).
    fn fetch(&mut self, url: &str, out: &mut dyn Write) -> Result<u64, FetchError>;
}

/// What an error of a download's transport or body is, carried as the source.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A download that did not finish ([`Fetch::fetch`]).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The mirror answered, with an error status: the host is fine, the pin or the
    /// mirror is not.
    #[error("the server answered HTTP {code} {text}")]
    Status { code: u16, text: String },
    #[error("no connection within the connect deadline of {secs}s: {source}")]
    ConnectDeadline { secs: u64, source: Cause },
    #[error("could not connect: {0}")]
    Connect(#[source] Cause),
    #[error("the overall deadline of {secs}s passed after {got} bytes{}", source.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    Deadline { secs: u64, got: u64, source: Option<Cause> },
    #[error("failed after {:.1}s and {got} bytes: {source}", waited.as_secs_f64())]
    Failed { waited: Duration, got: u64, source: Cause },
    #[error("writing the download: {0}")]
    Write(#[source] io::Error),
}

/// Plain-HTTP download with a connect deadline and an overall deadline.
#[derive(Debug, Clone)]
pub struct HttpFetch {
    /// How long to wait for the TCP connection (and DNS).
    pub connect_timeout: Duration,
    /// How long the whole download, headers and body, may take.
    pub deadline: Duration,
}

impl Default for HttpFetch {
    fn default() -> Self {
        HttpFetch { connect_timeout: Duration::from_secs(30), deadline: Duration::from_secs(900) }
    }
}

impl Fetch for HttpFetch {
    fn fetch(&mut self, url: &str, out: &mut dyn Write) -> Result<u64, FetchError> {
        let agent = ureq::AgentBuilder::new().timeout_connect(self.connect_timeout).timeout(self.deadline).build();
        let start = Instant::now();
        let describe = |source: Cause, got: u64| {
            let waited = start.elapsed();
            if waited >= self.deadline {
                FetchError::Deadline { secs: self.deadline.as_secs(), got, source: Some(source) }
            } else {
                FetchError::Failed { waited, got, source }
            }
        };
        let resp = match agent.get(url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                return Err(FetchError::Status { code, text: r.status_text().to_string() })
            }
            Err(ureq::Error::Transport(t)) => {
                use ureq::ErrorKind::*;
                return Err(match t.kind() {
                    Dns | ConnectionFailed if start.elapsed() >= self.connect_timeout => {
                        FetchError::ConnectDeadline { secs: self.connect_timeout.as_secs(), source: Box::new(t) }
                    }
                    Dns | ConnectionFailed => FetchError::Connect(Box::new(t)),
                    _ => describe(Box::new(t), 0),
                });
            }
        };
        let mut body = resp.into_reader();
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0u64;
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(describe(Box::new(e), got)),
            };
            out.write_all(&buf[..n]).map_err(FetchError::Write)?;
            got += n as u64;
            if start.elapsed() > self.deadline {
                return Err(FetchError::Deadline { secs: self.deadline.as_secs(), got, source: None });
            }
        }
        Ok(got)
    }
}

/// Hex sha256 of a file's contents.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

struct HashingWriter<W: Write> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A name no other process or thread picks at the same time.
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Gives the path of `pkg`'s .deb in `debs_dir` (named `<sha256>.deb`), downloading it
/// from `mirror` only if no good copy is there. A cached copy is re-hashed on every use;
/// a bad one is removed and fetched again. A download is written to a temporary file of
/// `debs_dir` and renamed into place once its sha256 is the recipe's, so a reader (in
/// this clone or another sharing the folder) never sees half a file; one whose sha256
/// differs is deleted and reported as [`RecipeError::Checksum`]. A 404 or 410 is
/// [`RecipeError::Gone`], naming `recipe` and the command that re-pins it.
pub fn fetch_deb(
    fetch: &mut dyn Fetch,
    recipe: &Path,
    pkg: &Package,
    mirror: &str,
    debs_dir: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf, RecipeError> {
    let dest = debs_dir.join(format!("{}.deb", pkg.sha256));
    if dest.exists() {
        let got = sha256_file(&dest).map_err(RecipeError::io(format!("hashing {}", dest.display())))?;
        if got == pkg.sha256 {
            log(&format!("{}: cached {}", pkg.name, dest.display()));
            return Ok(dest);
        }
        log(&format!("{}: cached {} has sha256 {got}; removing it and downloading again", pkg.name, dest.display()));
        fs::remove_file(&dest).map_err(RecipeError::io(format!("removing {}", dest.display())))?;
    }
    fs::create_dir_all(debs_dir).map_err(RecipeError::io(format!("creating {}", debs_dir.display())))?;
    let url = pkg.url(mirror);
    let part = debs_dir.join(format!(".{}.{}.part", pkg.sha256, unique_suffix()));
    log(&format!("{}: downloading {url}", pkg.name));
    let start = Instant::now();
    let result = (|| {
        let file = File::create(&part).map_err(RecipeError::io(format!("creating {}", part.display())))?;
        let mut w = HashingWriter { inner: BufWriter::new(file), hash: Sha256::new() };
        let n = fetch.fetch(&url, &mut w).map_err(|source| match source {
            FetchError::Status { code: code @ (404 | 410), .. } => RecipeError::Gone {
                recipe: recipe.to_path_buf(),
                package: pkg.name.clone(),
                version: pkg.version.clone(),
                url: url.clone(),
                code,
            },
            source => RecipeError::Fetch { package: pkg.name.clone(), url: url.clone(), source },
        })?;
        w.flush().map_err(RecipeError::io(format!("writing {}", part.display())))?;
        let got = hex(&w.hash.finalize());
        if got != pkg.sha256 {
            return Err(RecipeError::Checksum { package: pkg.name.clone(), expected: pkg.sha256.clone(), got });
        }
        Ok(n)
    })();
    match result {
        Ok(n) => {
            fs::rename(&part, &dest).map_err(|e| {
                let _ = fs::remove_file(&part);
                RecipeError::io(format!("renaming {} to {}", part.display(), dest.display()))(e)
            })?;
            log(&format!("{}: {n} bytes in {:.1}s, sha256 ok", pkg.name, start.elapsed().as_secs_f64()));
            Ok(dest)
        }
        Err(e) => {
            let _ = fs::remove_file(&part);
            Err(e)
        }
    }
}
