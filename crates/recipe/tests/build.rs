//! `build` end to end without the network: .debs are made here with `dpkg-deb -b` and
//! served by a fake [`Fetch`].

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use testbench_recipe::{
    build_with, fetch_deb, hex, newc, parse, sha256_file, Fetch, FetchError, HttpFetch, Recipe, RecipeError,
};

const MIRROR: &str = "http://mirror.invalid/debian";

/// A fresh, empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("testbench-recipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fake RISC-V Image: the `RSC\x05` magic at offset 56.
fn fake_image() -> Vec<u8> {
    let mut k = vec![0u8; 128];
    k[56..60].copy_from_slice(b"RSC\x05");
    k[100..104].copy_from_slice(b"KERN");
    k
}

/// Builds a .deb holding `files` (path, mode, bytes) with `dpkg-deb -b`.
fn make_deb(dir: &Path, name: &str, version: &str, files: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join(format!("src-{name}"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: {version}\nArchitecture: riscv64\nMaintainer: t <t@example.org>\nDescription: test\n"),
    )
    .unwrap();
    for (path, mode, data) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    let out = dir.join(format!("{name}.deb"));
    let st =
        Command::new("dpkg-deb").args(["--root-owner-group", "-Zgzip", "-b"]).arg(&root).arg(&out).output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    std::fs::read(out).unwrap()
}

/// Serves fixed bodies by URL and counts requests.
#[derive(Clone, Default)]
struct FakeFetch {
    bodies: Arc<HashMap<String, Vec<u8>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Fetch for FakeFetch {
    fn fetch(&mut self, url: &str, out: &mut dyn Write) -> Result<u64, FetchError> {
        self.calls.lock().unwrap().push(url.to_string());
        let body = self.bodies.get(url).ok_or(FetchError::Status { code: 404, text: "Not Found".into() })?;
        out.write_all(body).map_err(FetchError::Write)?;
        Ok(body.len() as u64)
    }
}

impl FakeFetch {
    fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

struct Fixture {
    dir: PathBuf,
    kernel_deb: Vec<u8>,
    tools_deb: Vec<u8>,
}

fn fixture(name: &str, kernel: Vec<u8>) -> Fixture {
    let dir = scratch(name);
    let kernel_deb = make_deb(&dir, "fake-kernel", "6.1-1", &[("boot/vmlinux-6.1", 0o644, kernel)]);
    let tools_deb = make_deb(
        &dir,
        "fake-tools",
        "1.0-2",
        &[("usr/bin/tool", 0o755, b"\x7fELF tool".to_vec()), ("etc/tool.conf", 0o640, b"x = 1\n".to_vec())],
    );
    Fixture { dir, kernel_deb, tools_deb }
}

fn pool(name: &str, version: &str) -> String {
    format!("pool/main/f/{name}/{name}_{version}_riscv64.deb")
}

fn recipe_text(f: &Fixture, tools_sha: &str, tools_files: &str) -> String {
    format!(
        r##"description = "fake"
arch = "rv64"
append = "console=ttyS0"
mirror = "{MIRROR}"
[[package]]
name = "fake-kernel"
version = "6.1-1"
arch = "riscv64"
sha256 = "{}"
pool = "{}"
files = [{{ from = "boot/vmlinux-6.1", to = "kernel" }}]
[[package]]
name = "fake-tools"
version = "1.0-2"
arch = "riscv64"
sha256 = "{tools_sha}"
pool = "{}"
files = [{tools_files}]
[init]
directories = ["proc"]
symlinks = [{{ path = "bin/sh", target = "tool" }}]
script = "#!/bin/sh\necho hello\n"
"##,
        sha(&f.kernel_deb),
        pool("fake-kernel", "6.1-1"),
        pool("fake-tools", "1.0-2"),
    )
}

const TOOLS_FILES: &str =
    r#"{ from = "usr/bin/tool", to = "bin/tool" }, { from = "etc/tool.conf", to = "etc/tool.conf", mode = 0o600 }"#;

fn sha(b: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(b))
}

fn fetcher(f: &Fixture) -> FakeFetch {
    let mut m = HashMap::new();
    m.insert(format!("{MIRROR}/{}", pool("fake-kernel", "6.1-1")), f.kernel_deb.clone());
    m.insert(format!("{MIRROR}/{}", pool("fake-tools", "1.0-2")), f.tools_deb.clone());
    FakeFetch { bodies: Arc::new(m), ..Default::default() }
}

fn recipe(f: &Fixture, text: &str) -> Recipe {
    parse(&f.dir.join("r.toml"), text.as_bytes()).unwrap()
}

/// (name, mode, data) of every entry of a newc archive, trailer excluded.
fn list_cpio(buf: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let h = &buf[pos..pos + newc::HEADER_LEN];
        assert_eq!(&h[..6], newc::MAGIC);
        let field = |i: usize| {
            u32::from_str_radix(std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap(), 16).unwrap() as usize
        };
        let (size, namesize) = (field(6), field(11));
        let name = std::str::from_utf8(&buf[pos + 110..pos + 110 + namesize - 1]).unwrap().to_string();
        let data_at = pos + 110 + namesize;
        let data_at = data_at + newc::pad4(data_at);
        pos = data_at + size + newc::pad4(size);
        if name == newc::TRAILER {
            assert_eq!(pos, buf.len());
            return out;
        }
        out.push((name, field(1) as u32, buf[data_at..data_at + size].to_vec()));
    }
}

fn leftovers(cache: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    if let Ok(rd) = std::fs::read_dir(cache.join("debs")) {
        v.extend(rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with('.')));
    }
    v
}

#[test]
fn builds_caches_and_is_deterministic() {
    let f = fixture("build", fake_image());
    let text = recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES);
    let r = recipe(&f, &text);
    let cache = f.dir.join("cache");
    let mut fetch = fetcher(&f);
    let mut logs = Vec::new();
    let img = build_with(&r, &cache, &mut fetch, &mut |m| logs.push(m.to_string())).unwrap();
    assert!(!img.from_cache);
    assert_eq!(img.append, "console=ttyS0");
    assert_eq!(img.kernel, cache.join(&r.key).join("kernel"));
    assert_eq!(std::fs::read(&img.kernel).unwrap(), fake_image());
    assert!(cache.join(&r.key).join("done").is_file());
    assert_eq!(fetch.calls(), 2);
    assert!(logs.iter().any(|l| l.contains("RISC-V Image")), "{logs:?}");

    let cpio = std::fs::read(&img.initrd).unwrap();
    let entries = list_cpio(&cpio);
    let summary: Vec<(&str, u32)> = entries.iter().map(|(n, m, _)| (n.as_str(), *m)).collect();
    assert_eq!(
        summary,
        [
            ("proc", 0o40755),
            ("bin", 0o40755),
            ("bin/tool", 0o100755), // mode kept from the package
            ("etc", 0o40755),
            ("etc/tool.conf", 0o100600), // mode from the recipe
            ("bin/sh", 0o120777),
            ("init", 0o100755),
        ]
    );
    assert_eq!(entries[2].2, b"\x7fELF tool");
    assert_eq!(entries[5].2, b"tool");
    assert_eq!(entries[6].2, b"#!/bin/sh\necho hello\n");
    assert!(leftovers(&cache).is_empty(), "{:?}", leftovers(&cache));

    // Second build: from the cache, nothing fetched.
    let again = build_with(&r, &cache, &mut fetch, &mut |_| {}).unwrap();
    assert!(again.from_cache);
    assert_eq!(again.initrd, img.initrd);
    assert_eq!(fetch.calls(), 2);

    // A recipe edit that keeps the packages builds a new image without downloading.
    let edited = recipe(&f, &format!("{text}# edited\n"));
    assert_ne!(edited.key, r.key);
    let img2 = build_with(&edited, &cache, &mut fetch, &mut |_| {}).unwrap();
    assert!(!img2.from_cache);
    assert_eq!(fetch.calls(), 2);
    // Same contents give the same bytes.
    assert_eq!(std::fs::read(&img2.initrd).unwrap(), cpio);

    // A fresh cache root gives byte-identical output too.
    let img3 = build_with(&r, &f.dir.join("cache2"), &mut fetcher(&f), &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(&img3.initrd).unwrap(), cpio);
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn sha_mismatch_names_package_expected_got_and_keeps_nothing() {
    let f = fixture("mismatch", fake_image());
    let wrong = "0".repeat(64);
    let r = recipe(&f, &recipe_text(&f, &wrong, TOOLS_FILES));
    let cache = f.dir.join("cache");
    let err = build_with(&r, &cache, &mut fetcher(&f), &mut |_| {}).unwrap_err();
    match &err {
        RecipeError::Checksum { package, expected, got } => {
            assert_eq!(package, "fake-tools");
            assert_eq!(expected, &wrong);
            assert_eq!(got, &sha(&f.tools_deb));
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("fake-tools") && msg.contains(&wrong) && msg.contains(&sha(&f.tools_deb)));
    // The bad download is gone, the good one stays, no temp folders are left, no image.
    assert!(!cache.join("debs").join(format!("{wrong}.deb")).exists());
    assert!(cache.join("debs").join(format!("{}.deb", sha(&f.kernel_deb))).exists());
    assert!(leftovers(&cache).is_empty(), "{:?}", leftovers(&cache));
    assert!(!cache.join(&r.key).exists());
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn fetch_deb_checks_a_local_file_directly() {
    let dir = scratch("fetchdeb");
    let body = b"not really a deb".to_vec();
    let good = sha(&body);
    let text = format!(
        r##"description = "x"
arch = "rv64"
append = ""
[[package]]
name = "pk"
version = "1"
arch = "all"
sha256 = "{good}"
pool = "pool/main/p/pk/pk_1_all.deb"
files = [{{ from = "k", to = "kernel" }}]
[init]
script = "#!/bin/sh"
"##
    );
    let r = parse(Path::new("x.toml"), text.as_bytes()).unwrap();
    let pkg = &r.packages[0];
    let mut m = HashMap::new();
    m.insert(pkg.url(&r.mirror), body.clone());
    let mut fetch = FakeFetch { bodies: Arc::new(m), ..Default::default() };
    let debs = dir.join("debs");
    let p = fetch_deb(&mut fetch, &r.path, pkg, &r.mirror, &debs, &mut |_| {}).unwrap();
    assert_eq!(p, debs.join(format!("{good}.deb")));
    assert_eq!(sha256_file(&p).unwrap(), good);
    // Cached: not fetched again.
    fetch_deb(&mut fetch, &r.path, pkg, &r.mirror, &debs, &mut |_| {}).unwrap();
    assert_eq!(fetch.calls(), 1);
    // A corrupted cached copy is replaced.
    std::fs::write(&p, b"corrupt").unwrap();
    let mut logs = Vec::new();
    fetch_deb(&mut fetch, &r.path, pkg, &r.mirror, &debs, &mut |l| logs.push(l.to_string())).unwrap();
    assert_eq!(fetch.calls(), 2);
    assert_eq!(std::fs::read(&p).unwrap(), body);
    assert!(logs.iter().any(|l| l.contains("downloading again")), "{logs:?}");
    // A 404 names the recipe, the package, its version, the URL and the re-pin command.
    let mut empty = FakeFetch::default();
    std::fs::remove_file(&p).unwrap();
    let err = fetch_deb(&mut empty, &r.path, pkg, &r.mirror, &debs, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&err, RecipeError::Gone { package, version, code: 404, .. } if package == "pk" && version == "1"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "recipe x.toml: package pk version 1 is no longer on the mirror (http://deb.debian.org/debian/pool/main/p/pk/pk_1_all.deb answered HTTP 404); re-pin the recipe to the suite's current versions with `scripts/repin x.toml` and review the diff it prints"
    );
    assert_eq!(std::fs::read_dir(&debs).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_file_names_package_and_path_only() {
    let f = fixture("missing", fake_image());
    let files = r#"{ from = "usr/bin/nope", to = "bin/nope" }"#;
    let r = recipe(&f, &recipe_text(&f, &sha(&f.tools_deb), files));
    let cache = f.dir.join("cache");
    let err = build_with(&r, &cache, &mut fetcher(&f), &mut |_| {}).unwrap_err();
    assert_eq!(err.to_string(), "package fake-tools: has no file usr/bin/nope");
    assert!(leftovers(&cache).is_empty());
    assert!(!cache.join(&r.key).exists());
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn directory_is_not_a_file() {
    let f = fixture("dir", fake_image());
    let files = r#"{ from = "usr/bin", to = "bin/x" }"#;
    let r = recipe(&f, &recipe_text(&f, &sha(&f.tools_deb), files));
    let err = build_with(&r, &f.dir.join("cache"), &mut fetcher(&f), &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("package fake-tools: usr/bin is a directory"), "{err}");
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn gzipped_kernel_is_decompressed() {
    use flate2::{write::GzEncoder, Compression};
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&fake_image()).unwrap();
    let f = fixture("gzip", gz.finish().unwrap());
    let r = recipe(&f, &recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES));
    let mut logs = Vec::new();
    let img = build_with(&r, &f.dir.join("cache"), &mut fetcher(&f), &mut |m| logs.push(m.to_string())).unwrap();
    assert_eq!(std::fs::read(&img.kernel).unwrap(), fake_image());
    assert!(logs.iter().any(|l| l.contains("gzip'd; decompressed")), "{logs:?}");
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn unloadable_kernel_is_refused() {
    let f = fixture("badkernel", b"plain text, not a kernel".repeat(10));
    let r = recipe(&f, &recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES));
    let err = build_with(&r, &f.dir.join("cache"), &mut fetcher(&f), &mut |_| {}).unwrap_err().to_string();
    assert!(err.starts_with("package fake-kernel: kernel file boot/vmlinux-6.1: is not an ELF"), "{err}");
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn dpkg_deb_failure_carries_its_stderr() {
    let f = fixture("notadeb", fake_image());
    let junk = b"this is not an ar archive".to_vec();
    let mut text = recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES);
    text = text.replace(&sha(&f.tools_deb), &sha(&junk));
    let r = recipe(&f, &text);
    let mut fetch = fetcher(&f);
    let mut m = (*fetch.bodies).clone();
    m.insert(format!("{MIRROR}/{}", pool("fake-tools", "1.0-2")), junk);
    fetch.bodies = Arc::new(m);
    let err = build_with(&r, &f.dir.join("cache"), &mut fetch, &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RecipeError::Unpack { .. }), "{msg}");
    assert!(msg.starts_with("package fake-tools: dpkg-deb -x"), "{msg}");
    assert!(msg.contains("dpkg-deb"), "{msg}");
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn racing_builds_both_end_with_a_good_image() {
    let f = fixture("race", fake_image());
    let r = recipe(&f, &recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES));
    let cache = f.dir.join("cache");
    let images: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let mut fetch = fetcher(&f);
                let (r, cache) = (&r, &cache);
                s.spawn(move || build_with(r, cache, &mut fetch, &mut |_| {}).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cpio = std::fs::read(&images[0].initrd).unwrap();
    for img in &images {
        assert_eq!(img.initrd, images[0].initrd);
        assert_eq!(std::fs::read(&img.initrd).unwrap(), cpio);
        assert_eq!(std::fs::read(&img.kernel).unwrap(), fake_image());
    }
    assert!(leftovers(&cache).is_empty(), "{:?}", leftovers(&cache));
    let _ = std::fs::remove_dir_all(&f.dir);
}

/// A local server that accepts and then says nothing: the deadline message says what
/// was waited for.
#[test]
fn http_deadline_says_what_it_waited_for() {
    use std::net::TcpListener;
    use std::time::Duration;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        drop(conn);
    });
    let mut fetch = HttpFetch { connect_timeout: Duration::from_secs(1), deadline: Duration::from_secs(1) };
    let mut out = Vec::new();
    let err = fetch.fetch(&format!("http://{addr}/pool/x.deb"), &mut out).unwrap_err();
    assert!(matches!(err, FetchError::Deadline { secs: 1, .. }), "{err}");
    assert!(err.to_string().contains("overall deadline of 1s passed"), "{err}");
    server.join().unwrap();
}

#[test]
fn http_status_is_reported() {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    });
    let err = HttpFetch::default().fetch(&format!("http://{addr}/pool/x.deb"), &mut Vec::new()).unwrap_err();
    assert!(matches!(&err, FetchError::Status { code: 404, text } if text == "Not Found"), "{err}");
    assert!(err.to_string().contains("HTTP 404"), "{err}");
    server.join().unwrap();
}

/// Each width accepts the kernel files its QEMU's `-kernel` loads, and only those.
#[test]
fn kernel_formats_follow_the_width() {
    use testbench_recipe::{kernel_format, Arch};
    let mut bz = vec![0u8; 0x400];
    bz[0x202..0x206].copy_from_slice(b"HdrS");
    let mut arm = vec![0u8; 128];
    arm[..2].copy_from_slice(b"MZ");
    arm[56..60].copy_from_slice(b"ARM\x64");
    let elf = b"\x7fELF and more".to_vec();
    assert_eq!(kernel_format(Arch::Rv64, &fake_image()), Some("a RISC-V Image"));
    assert_eq!(kernel_format(Arch::X86_64, &bz), Some("a bzImage"));
    assert_eq!(kernel_format(Arch::Aarch64, &arm), Some("an arm64 Image with an EFI stub"));
    for arch in [Arch::Rv64, Arch::Rv32, Arch::X86_64, Arch::Aarch64] {
        assert_eq!(kernel_format(arch, &elf), Some("an ELF file"), "{arch}");
    }
    assert_eq!(kernel_format(Arch::X86_64, &fake_image()), None);
    assert_eq!(kernel_format(Arch::X86_64, &arm), None);
    assert_eq!(kernel_format(Arch::Aarch64, &bz), None);
    assert_eq!(kernel_format(Arch::Rv64, &arm), None);
    assert_eq!(kernel_format(Arch::Rv64, &bz), None);
}

/// A RISC-V Image in an x86_64 recipe is refused, naming what x86_64 accepts.
#[test]
fn a_kernel_of_another_width_is_refused() {
    let f = fixture("otherwidth", fake_image());
    let text = recipe_text(&f, &sha(&f.tools_deb), TOOLS_FILES).replacen("arch = \"rv64\"", "arch = \"x86_64\"", 1);
    let r = recipe(&f, &text);
    let err = build_with(&r, &f.dir.join("cache"), &mut fetcher(&f), &mut |_| {}).unwrap_err().to_string();
    assert_eq!(
        err,
        "package fake-kernel: kernel file boot/vmlinux-6.1: is not a bzImage or an ELF (after any gunzip), so qemu-system-x86_64's -kernel cannot load it"
    );
    let _ = std::fs::remove_dir_all(&f.dir);
}
