//! Downloads, the shared cache and re-pinning against a local HTTP mirror this test
//! starts on 127.0.0.1 (std's TcpListener; no Debian mirror is reached): a pool that
//! answers, one that answers 404, one that serves wrong bytes, and a `Packages.gz`
//! index with newer versions.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use testbench_recipe::{build_with, cache_root_from, hex, load, repin, HttpFetch, RecipeError};

/// A fresh, empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("testbench-recipe-mirror-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sha(b: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(b))
}

/// A tiny HTTP/1.1 server: GET of a path it holds gives 200 and the bytes, any other 404.
struct Mirror {
    addr: SocketAddr,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Mirror {
    fn start(files: HashMap<String, Vec<u8>>) -> Mirror {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let files = Arc::new(Mutex::new(files));
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, r, s) = (files.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                r.fetch_add(1, Ordering::SeqCst);
                serve(conn, &f);
            }
        });
        Mirror { addr, files, requests, stop, thread: Some(thread) }
    }

    fn url(&self) -> String {
        format!("http://{}/debian", self.addr)
    }

    fn put(&self, path: &str, body: Vec<u8>) {
        self.files.lock().unwrap().insert(format!("/debian/{path}"), body);
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Stops accepting and closes the port: a connection after this is refused.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(mut conn: TcpStream, files: &Mutex<HashMap<String, Vec<u8>>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
    let body = files.lock().unwrap().get(&path).cloned();
    let _ = match body {
        Some(b) => conn
            .write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", b.len()).as_bytes(),
            )
            .and_then(|_| conn.write_all(&b)),
        None => conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

/// Builds a .deb holding `files` (path, bytes) with `dpkg-deb -b`.
fn make_deb(dir: &Path, name: &str, version: &str, files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let root = dir.join(format!("src-{name}-{version}"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: {version}\nArchitecture: riscv64\nMaintainer: t <t@example.org>\nDescription: test\n"),
    )
    .unwrap();
    for (path, data) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
    }
    let out = dir.join(format!("{name}-{version}.deb"));
    let st =
        Command::new("dpkg-deb").args(["--root-owner-group", "-Zgzip", "-b"]).arg(&root).arg(&out).output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    std::fs::read(out).unwrap()
}

/// A fake RISC-V Image: the `RSC\x05` magic at offset 56.
fn fake_image(tag: &[u8]) -> Vec<u8> {
    let mut k = vec![0u8; 128];
    k[56..60].copy_from_slice(b"RSC\x05");
    k[100..100 + tag.len()].copy_from_slice(tag);
    k
}

const KERNEL: &str = "linux-image-6.1.5+deb13-riscv64";

fn kernel_pool(abi: &str, version: &str) -> String {
    format!("pool/main/l/linux/linux-image-{abi}+deb13-riscv64_{version}_riscv64.deb")
}

fn tools_pool(version: &str) -> String {
    format!("pool/main/f/fake-tools/fake-tools_{version}_riscv64.deb")
}

/// A recipe pinning the kernel 6.1.5-1 and fake-tools 1.0-1, with comments to keep.
fn recipe_text(mirror: &str, kernel_sha: &str, tools_sha: &str) -> String {
    format!(
        r##"# A test guest. Pins come from the local mirror's index.
description = "fake"
arch = "rv64"
append = "console=ttyS0"
mirror = "{mirror}"
suite = "testing-suite"

# The kernel: its name carries the ABI.
[[package]]
name = "{KERNEL}"
version = "6.1.5-1"   # kept as the index says
arch = "riscv64"
sha256 = "{kernel_sha}"
pool = "{}"
files = [{{ from = "boot/vmlinux-6.1.5+deb13-riscv64", to = "kernel" }}]

[[package]]
name = "fake-tools"
version = "1.0-1"
arch = "riscv64"
sha256 = "{tools_sha}"
pool = "{}"
files = [{{ from = "usr/bin/tool", to = "bin/tool" }}]

[init]
script = "#!/bin/sh\necho hello\n"
"##,
        kernel_pool("6.1.5", "6.1.5-1"),
        tools_pool("1.0-1"),
    )
}

struct Pool {
    dir: PathBuf,
    kernel: Vec<u8>,
    tools: Vec<u8>,
}

fn pool(name: &str) -> Pool {
    let dir = scratch(name);
    let kernel = make_deb(&dir, KERNEL, "6.1.5-1", &[("boot/vmlinux-6.1.5+deb13-riscv64", fake_image(b"K615"))]);
    let tools = make_deb(&dir, "fake-tools", "1.0-1", &[("usr/bin/tool", b"tool 1.0".to_vec())]);
    Pool { dir, kernel, tools }
}

fn write_recipe(p: &Pool, mirror: &str, tools_sha: &str) -> PathBuf {
    let path = p.dir.join("guest.toml");
    std::fs::write(&path, recipe_text(mirror, &sha(&p.kernel), tools_sha)).unwrap();
    path
}

/// A mirror that answers: the first build downloads both packages; with the mirror
/// stopped, a second cache root's image (a new recipe key, same packages) is built from
/// the shared debs alone: offline, nothing downloaded.
#[test]
fn a_mirror_that_answers_fills_the_cache_and_then_is_not_needed() {
    let p = pool("answers");
    let mut mirror = Mirror::start(HashMap::new());
    mirror.put(&kernel_pool("6.1.5", "6.1.5-1"), p.kernel.clone());
    mirror.put(&tools_pool("1.0-1"), p.tools.clone());
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let recipe = load(&path).unwrap();
    assert_eq!(recipe.suite, "testing-suite");
    let cache = p.dir.join("cache");
    let img = build_with(&recipe, &cache, &mut HttpFetch::default(), &mut |_| {}).unwrap();
    assert!(!img.from_cache);
    assert_eq!(mirror.requests(), 2);
    assert_eq!(std::fs::read(&img.kernel).unwrap(), fake_image(b"K615"));
    for deb in [&p.kernel, &p.tools] {
        assert_eq!(std::fs::read(cache.join("debs").join(format!("{}.deb", sha(deb)))).unwrap(), *deb);
    }

    mirror.stop();
    // The image itself: found by the recipe's hash.
    let again = build_with(&recipe, &cache, &mut HttpFetch::default(), &mut |_| {}).unwrap();
    assert!(again.from_cache);
    // An edited recipe (new key) builds from the cached debs with the mirror gone.
    std::fs::write(&path, format!("{}# edited\n", std::fs::read_to_string(&path).unwrap())).unwrap();
    let edited = load(&path).unwrap();
    assert_ne!(edited.key, recipe.key);
    let mut logs = Vec::new();
    let offline = build_with(&edited, &cache, &mut HttpFetch::default(), &mut |l| logs.push(l.to_string())).unwrap();
    assert!(!offline.from_cache);
    assert_eq!(std::fs::read(&offline.initrd).unwrap(), std::fs::read(&img.initrd).unwrap());
    assert_eq!(logs.iter().filter(|l| l.contains(": cached ")).count(), 2, "{logs:?}");
    assert!(!logs.iter().any(|l| l.contains("downloading")), "{logs:?}");
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// A pool that answers 404: the error names the recipe, the package, the pinned version
/// and the command that re-pins it; nothing is left in the cache.
#[test]
fn a_pool_that_answers_404_names_the_pin_and_the_repin_command() {
    let p = pool("gone");
    let mirror = Mirror::start(HashMap::new());
    mirror.put(&tools_pool("1.0-1"), p.tools.clone());
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let recipe = load(&path).unwrap();
    let cache = p.dir.join("cache");
    let err = build_with(&recipe, &cache, &mut HttpFetch::default(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(&err, RecipeError::Gone { recipe, package, version, code: 404, .. }
            if recipe == &path && package == KERNEL && version == "6.1.5-1"),
        "{err:?}"
    );
    let url = format!("{}/{}", mirror.url(), kernel_pool("6.1.5", "6.1.5-1"));
    assert_eq!(
        err.to_string(),
        format!(
            "recipe {0}: package {KERNEL} version 6.1.5-1 is no longer on the mirror ({url} answered HTTP 404); re-pin the recipe to the suite's current versions with `scripts/repin {0}` and review the diff it prints",
            path.display()
        )
    );
    assert_eq!(std::fs::read_dir(cache.join("debs")).unwrap().count(), 0);
    assert!(!cache.join(&recipe.key).exists());
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// A pool that serves wrong bytes: refused naming the expected and the actual sha256;
/// the bad download is not kept.
#[test]
fn a_pool_that_serves_wrong_bytes_is_refused_naming_both_sums() {
    let p = pool("wrong");
    let mirror = Mirror::start(HashMap::new());
    let wrong = b"these are not the bytes the pin names".to_vec();
    mirror.put(&kernel_pool("6.1.5", "6.1.5-1"), wrong.clone());
    mirror.put(&tools_pool("1.0-1"), p.tools.clone());
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let recipe = load(&path).unwrap();
    let cache = p.dir.join("cache");
    let err = build_with(&recipe, &cache, &mut HttpFetch::default(), &mut |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "package {KERNEL}: sha256 mismatch: the recipe expects {}, the download is {} (the file was not kept)",
            sha(&p.kernel),
            sha(&wrong)
        )
    );
    assert_eq!(std::fs::read_dir(cache.join("debs")).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// A `Packages` paragraph as the archive writes it.
fn paragraph(name: &str, version: &str, filename: &str, body: &[u8]) -> String {
    format!(
        "Package: {name}\nVersion: {version}\nInstalled-Size: 1\nMaintainer: t <t@example.org>\nArchitecture: riscv64\nDescription: test\n a longer description line\nFilename: {filename}\nSize: {}\nSHA256: {}\n\n",
        body.len(),
        sha(body)
    )
}

fn gzip(text: &str) -> Vec<u8> {
    use flate2::{write::GzEncoder, Compression};
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap()
}

/// Re-pinning against a fake index with a newer kernel (a new ABI, so a new package name
/// and new file paths) and a binNMU of the tools: the TOML is rewritten with comments and
/// layout kept, the diff shows exactly those lines, and the re-pinned recipe builds from
/// the mirror. The `repin` binary (what scripts/repin runs) does the same end to end.
#[test]
fn repin_rewrites_versions_sums_and_pools_and_keeps_comments() {
    let p = pool("repin");
    let new_kernel = make_deb(
        &p.dir,
        "linux-image-6.1.9+deb13-riscv64",
        "6.1.9-1",
        &[("boot/vmlinux-6.1.9+deb13-riscv64", fake_image(b"K619"))],
    );
    let new_tools = make_deb(&p.dir, "fake-tools", "1.0-1+b1", &[("usr/bin/tool", b"tool 1.0 b1".to_vec())]);
    let mirror = Mirror::start(HashMap::new());
    let index = [
        // The old kernel still listed (as trixie lists two ABIs for a while), the newer one,
        // an unrelated package and the tools' binNMU.
        paragraph(KERNEL, "6.1.5-1", &kernel_pool("6.1.5", "6.1.5-1"), &p.kernel),
        paragraph("linux-image-6.1.9+deb13-riscv64", "6.1.9-1", &kernel_pool("6.1.9", "6.1.9-1"), &new_kernel),
        paragraph("other", "9-1", "pool/main/o/other/other_9-1_riscv64.deb", b"x"),
        paragraph("fake-tools", "1.0-1+b1", &tools_pool("1.0-1+b1"), &new_tools),
    ]
    .concat();
    mirror.put("dists/testing-suite/main/binary-riscv64/Packages.gz", gzip(&index));
    mirror.put(&kernel_pool("6.1.9", "6.1.9-1"), new_kernel.clone());
    mirror.put(&tools_pool("1.0-1+b1"), new_tools.clone());
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let before = std::fs::read_to_string(&path).unwrap();

    let r = repin::repin(&mut HttpFetch::default(), &path).unwrap();
    assert_eq!(r.old_text, before);
    assert_eq!(
        r.changes.iter().map(|c| (c.new_name.as_str(), c.new_version.as_str())).collect::<Vec<_>>(),
        [("linux-image-6.1.9+deb13-riscv64", "6.1.9-1"), ("fake-tools", "1.0-1+b1")]
    );
    let expected = before
        .replace(KERNEL, "linux-image-6.1.9+deb13-riscv64")
        .replace("6.1.5+deb13-riscv64", "6.1.9+deb13-riscv64")
        .replace("6.1.5-1", "6.1.9-1")
        .replace(&sha(&p.kernel), &sha(&new_kernel))
        .replace("1.0-1", "1.0-1+b1")
        .replace(&sha(&p.tools), &sha(&new_tools));
    assert_eq!(r.new_text, expected);
    assert!(r.new_text.contains("version = \"6.1.9-1\"   # kept as the index says\n"), "{}", r.new_text);
    let diff = r.diff();
    let changed: Vec<&str> =
        diff.lines().filter(|l| l.starts_with(['+', '-']) && !l.starts_with("+++") && !l.starts_with("---")).collect();
    // Kernel: name, version, sha256, pool, files; tools: version, sha256, pool (each - and +).
    assert_eq!(changed.len(), 16, "{diff}");
    assert!(diff.contains(&format!("-sha256 = \"{}\"", sha(&p.tools))), "{diff}");
    assert!(diff.contains(&format!("+pool = \"{}\"", tools_pool("1.0-1+b1"))), "{diff}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "repin() alone writes nothing");

    // The binary: writes the file, prints the changes and the diff.
    let out = Command::new(env!("CARGO_BIN_EXE_repin")).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{}: {KERNEL} 6.1.5-1 -> linux-image-6.1.9+deb13-riscv64 6.1.9-1", path.display())),
        "{stdout}"
    );
    assert!(stdout.contains(&diff), "{stdout}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    // Run again: nothing to do.
    let out = Command::new(env!("CARGO_BIN_EXE_repin")).arg(&path).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}: every pin is current\n", path.display()));

    // The re-pinned recipe builds from the mirror.
    let img = build_with(&load(&path).unwrap(), &p.dir.join("cache"), &mut HttpFetch::default(), &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(&img.kernel).unwrap(), fake_image(b"K619"));
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// A pinned package the index no longer lists under any name: refused naming it and the
/// index, nothing written.
#[test]
fn repin_refuses_a_package_the_index_does_not_hold() {
    let p = pool("repin-missing");
    let mirror = Mirror::start(HashMap::new());
    let index = paragraph(KERNEL, "6.1.5-1", &kernel_pool("6.1.5", "6.1.5-1"), &p.kernel);
    mirror.put("dists/testing-suite/main/binary-riscv64/Packages.gz", gzip(&index));
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let before = std::fs::read_to_string(&path).unwrap();
    let err = repin::repin(&mut HttpFetch::default(), &path).unwrap_err();
    let url = format!("{}/dists/testing-suite/main/binary-riscv64/Packages.gz", mirror.url());
    assert_eq!(
        err.to_string(),
        format!("recipe {}: package[1] fake-tools (riscv64) is not in {url}, neither by its name nor renamed with a new upstream version (as a kernel's ABI is); edit it by hand", path.display())
    );
    let out = Command::new(env!("CARGO_BIN_EXE_repin")).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// An index whose entry does not agree with itself (a Filename that is not the
/// package's): the re-pinned text does not validate, so it is refused and nothing written.
#[test]
fn repin_writes_nothing_when_the_repinned_recipe_does_not_validate() {
    let p = pool("repin-invalid");
    let mirror = Mirror::start(HashMap::new());
    let index = [
        paragraph(KERNEL, "6.1.5-1", &kernel_pool("6.1.5", "6.1.5-1"), &p.kernel),
        paragraph("fake-tools", "1.0-2", "pool/main/f/fake-tools/other_1.0-2_riscv64.deb", b"y"),
    ]
    .concat();
    mirror.put("dists/testing-suite/main/binary-riscv64/Packages.gz", gzip(&index));
    let path = write_recipe(&p, &mirror.url(), &sha(&p.tools));
    let before = std::fs::read_to_string(&path).unwrap();
    let err = repin::repin(&mut HttpFetch::default(), &path).unwrap_err();
    assert!(matches!(err, repin::RepinError::Invalid { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("recipe {}: the re-pinned text does not validate, nothing written: ", path.display())),
        "{msg}"
    );
    assert!(msg.contains("field `package[1].pool`"), "{msg}");
    let out = Command::new(env!("CARGO_BIN_EXE_repin")).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// Where the shared cache is: TESTBENCH_CACHE, else XDG_CACHE_HOME/testbench, else
/// ~/.cache/testbench; a relative TESTBENCH_CACHE is refused.
#[test]
fn the_cache_root_follows_the_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| std::ffi::OsString::from(v))
    };
    let all = &[("TESTBENCH_CACHE", "/c/tb"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
    assert_eq!(cache_root_from(env(all)).unwrap(), PathBuf::from("/c/tb"));
    assert_eq!(
        cache_root_from(env(&[("TESTBENCH_CACHE", ""), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap(),
        PathBuf::from("/x/testbench")
    );
    assert_eq!(
        cache_root_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])).unwrap(),
        PathBuf::from("/h/.cache/testbench")
    );
    let err = cache_root_from(env(&[("TESTBENCH_CACHE", "tb"), ("HOME", "/h")])).unwrap_err();
    assert_eq!(err.to_string(), "no cache folder: set TESTBENCH_CACHE (an absolute path) or HOME (TESTBENCH_CACHE=tb is relative; accepted is an absolute path)");
    assert!(matches!(cache_root_from(env(&[])).unwrap_err(), RecipeError::NoCacheDir { .. }));
}
