//! Recipe validation: one good recipe, and a table of edits that each must fail with a
//! message naming the file, the field and what is accepted.

use std::path::Path;

use testbench_recipe::{parse, Arch, RecipeError, Target};

const GOOD: &str = r##"
description = "test guest"
arch = "rv64"
append = "console=ttyS0 panic=-1"
[[package]]
name = "linux-image-6.12.117+deb13-riscv64"
version = "6.12.117-1"
arch = "riscv64"
sha256 = "f5d9424b6f6a4518197202effc7e8eeaa90f8d73466c2dba2470f6ea7fb4f55c"
pool = "pool/main/l/linux/linux-image-6.12.117+deb13-riscv64_6.12.117-1_riscv64.deb"
files = [{ from = "boot/vmlinux-6.12.117+deb13-riscv64", to = "kernel" }]
[[package]]
name = "busybox-static"
version = "1:1.37.0-6+b9"
arch = "riscv64"
sha256 = "4add476d2b185c5b487c285b38d790f0881a7e4a8e2ddde835f917e770eb8633"
pool = "pool/main/b/busybox/busybox-static_1.37.0-6+b9_riscv64.deb"
files = [{ from = "/usr/bin/busybox", to = "bin/busybox", mode = 0o755 }]
[init]
directories = ["proc", "/sys/"]
symlinks = [{ path = "bin/sh", target = "busybox" }]
script = """#!/bin/busybox sh
echo hi
"""
"##;

fn load(text: &str) -> Result<testbench_recipe::Recipe, RecipeError> {
    parse(Path::new("guests/t.toml"), text.as_bytes())
}

#[test]
fn good_recipe_validates() {
    let r = load(GOOD).unwrap();
    assert_eq!(r.arch, Arch::Rv64);
    assert_eq!(r.mirror, "http://deb.debian.org/debian");
    assert_eq!(r.packages.len(), 2);
    assert_eq!(r.packages[0].files[0].to, Target::Kernel);
    assert_eq!(r.packages[1].files[0].from, "usr/bin/busybox");
    assert_eq!(r.packages[1].files[0].to, Target::Initramfs("bin/busybox".into()));
    assert_eq!(r.packages[1].files[0].mode, Some(0o755));
    assert_eq!(r.init.directories, ["proc", "sys"]);
    assert_eq!(r.key.len(), 64);
    assert_eq!(
        r.packages[1].url(&r.mirror),
        "http://deb.debian.org/debian/pool/main/b/busybox/busybox-static_1.37.0-6+b9_riscv64.deb"
    );
}

#[test]
fn key_is_sha256_of_exact_bytes() {
    let a = load(GOOD).unwrap();
    let b = load(&format!("{GOOD}\n# a comment changes the key\n")).unwrap();
    assert_ne!(a.key, b.key);
    assert_eq!(a.key, load(GOOD).unwrap().key);
}

#[test]
fn shipped_recipe_validates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/debian-busybox.toml");
    let r = testbench_recipe::load(&path).unwrap();
    assert_eq!(r.arch, Arch::Rv64);
    assert!(r.init.script.contains("testbench-guest: init reached"));
}

/// The devices guest: it validates, and every module its /init loads (the `load_*`
/// helpers) is a file the recipe puts in `lib/modules/`, as Debian ships it (`.ko.xz`).
#[test]
fn devices_recipe_validates_and_ships_every_module_its_init_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/debian-devices.toml");
    let r = testbench_recipe::load(&path).unwrap();
    assert_eq!(r.arch, Arch::Rv64);
    let shipped: Vec<&str> = r
        .packages
        .iter()
        .flat_map(|p| &p.files)
        .filter_map(|f| match &f.to {
            Target::Initramfs(to) => Some(to.as_str()),
            Target::Kernel => None,
        })
        .collect();
    let mut loaded = 0;
    for line in r.init.script.lines() {
        let Some(rest) = line.trim().strip_prefix("load_").and_then(|l| l.split_once("{ load ")) else { continue };
        for module in rest.1.trim_end_matches("; }").split_whitespace() {
            let file = format!("lib/modules/{module}.ko.xz");
            assert!(shipped.contains(&file.as_str()), "/init loads {module} but the recipe has no {file}");
            loaded += 1;
        }
    }
    assert!(loaded >= 10, "found only {loaded} modules in the load_* helpers");
    // The case labels of the script's one top-level `case "$ACT" in` (lines starting
    // in column 0 and ending in `)`).
    let labels: Vec<&str> = r
        .init
        .script
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(')'))
        .flat_map(|l| l.trim_end_matches(')').split('|'))
        .collect();
    for action in [
        "disk-write",
        "disk-read",
        "disk-keep",
        "vault",
        "ro-write",
        "ext4-read",
        "fat-read",
        "flip-detect",
        "echo-server",
        "connect",
        "poke",
    ] {
        assert!(labels.contains(&action), "no action {action} in {labels:?}");
    }
}

#[test]
fn missing_file_is_a_read_error_naming_it() {
    let err = testbench_recipe::load(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(matches!(err, RecipeError::Read { .. }));
    assert!(err.to_string().contains("/nonexistent/x.toml"), "{err}");
}

/// (what to replace in GOOD, its replacement, the field the error must name (or "" for
/// a parse error), words the message must hold).
const BAD: &[(&str, &str, &str, &[&str])] = &[
    ("arch = \"rv64\"", "arch = \"x86\"", "arch", &["\"rv64\"", "\"rv32\""]),
    ("description = \"test guest\"", "description = \" \"", "description", &["empty"]),
    ("append = \"console=ttyS0 panic=-1\"", "append = \"a\\nb\"", "append", &["one line"]),
    (
        "append = \"console=ttyS0 panic=-1\"",
        "append = \"x\"\nmirror = \"https://deb.debian.org/debian\"",
        "mirror",
        &["http://"],
    ),
    ("name = \"busybox-static\"", "name = \"BusyBox\"", "package[1].name", &["a-z"]),
    ("version = \"1:1.37.0-6+b9\"", "version = \"latest\"", "package[1].version", &["starting with a digit"]),
    ("arch = \"riscv64\"\nsha256 = \"4add", "arch = \"RISC V\"\nsha256 = \"4add", "package[1].arch", &["riscv64"]),
    ("sha256 = \"4add476d", "sha256 = \"4ADD476d", "package[1].sha256", &["64 lower-case hex"]),
    ("b9_riscv64.deb\"", "b9_amd64.deb\"", "package[1].pool", &["busybox-static_1.37.0-6+b9_riscv64.deb"]),
    ("pool = \"pool/main/b/", "pool = \"dists/../pool/main/b/", "package[1].pool", &["\"pool/\""]),
    ("to = \"bin/busybox\"", "to = \"/bin/busybox\"", "package[1].files[0].to", &["absolute", "\"kernel\""]),
    ("to = \"bin/busybox\"", "to = \"bin/../busybox\"", "package[1].files[0].to", &["`..`"]),
    ("to = \"bin/busybox\"", "to = \"init\"", "package[1].files[0].to", &["[init].script"]),
    ("mode = 0o755", "mode = 0o100755", "package[1].files[0].mode", &["0o7777"]),
    ("to = \"kernel\" }", "to = \"kernel\", mode = 0o644 }", "package[0].files[0].mode", &["kernel"]),
    (
        "to = \"bin/busybox\", mode = 0o755",
        "to = \"kernel\"",
        "package[1].files[0].to",
        &["second kernel", "package[0].files[0].to"],
    ),
    ("to = \"kernel\" }", "to = \"boot/vmlinux\" }", "package[].files[].to", &["exactly one"]),
    (
        "path = \"bin/sh\"",
        "path = \"bin/busybox\"",
        "init.symlinks[0].path",
        &["already written by `package[1].files[0].to`"],
    ),
    ("path = \"bin/sh\"", "path = \"bin/busybox/sh\"", "package[1].files[0].to", &["puts something inside it"]),
    ("target = \"busybox\"", "target = \"\"", "init.symlinks[0].target", &["non-empty"]),
    ("[\"proc\", \"/sys/\"]", "[\"proc\", \"proc\"]", "init.directories[1]", &["already written"]),
    ("[\"proc\", \"/sys/\"]", "[\"\"]", "init.directories[0]", &["empty"]),
    ("#!/bin/busybox sh\n", "echo no shebang\n", "init.script", &["#!"]),
    (
        "files = [{ from = \"/usr/bin/busybox\", to = \"bin/busybox\", mode = 0o755 }]",
        "files = []",
        "package[1].files",
        &["at least one"],
    ),
    // Parse errors: unknown fields, missing fields, wrong types (toml names the key).
    ("arch = \"rv64\"", "arch = \"rv64\"\nkernel = \"x\"", "", &["unknown field `kernel`", "expected one of"]),
    ("to = \"bin/busybox\"", "to = \"bin/busybox\", owner = 0", "", &["unknown field `owner`"]),
    ("append = \"console=ttyS0 panic=-1\"\n", "", "", &["missing field `append`"]),
    (
        "sha256 = \"4add476d2b185c5b487c285b38d790f0881a7e4a8e2ddde835f917e770eb8633\"\n",
        "",
        "",
        &["missing field `sha256`"],
    ),
    ("mode = 0o755", "mode = \"755\"", "", &["mode", "u32"]),
];

#[test]
fn invalid_recipes_name_file_field_and_what_is_accepted() {
    for (from, to, field, words) in BAD {
        assert!(GOOD.contains(from), "case {from:?} does not match GOOD");
        let text = GOOD.replacen(from, to, 1);
        let err = match load(&text) {
            Ok(_) => panic!("{from:?} -> {to:?} was accepted"),
            Err(e) => e,
        };
        let msg = err.to_string();
        assert!(msg.starts_with("recipe guests/t.toml: "), "{msg}");
        if field.is_empty() {
            assert!(matches!(err, RecipeError::Parse { .. }), "{msg}");
        } else {
            match &err {
                RecipeError::Invalid { field: f, .. } => assert_eq!(f, field, "{msg}"),
                other => panic!("{from:?} -> {to:?}: expected Invalid, got {other:?}"),
            }
        }
        for w in *words {
            assert!(msg.contains(w), "{from:?} -> {to:?}: {msg:?} lacks {w:?}");
        }
    }
}

#[test]
fn no_packages_is_refused() {
    let text = r##"
description = "x"
arch = "rv32"
append = ""
[init]
script = "#!/bin/sh"
"##;
    let err = load(text).unwrap_err().to_string();
    assert!(err.contains("field `package`"), "{err}");
}
