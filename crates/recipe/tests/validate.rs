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
    assert_eq!(r.suite, "trixie", "the default suite");
    let sid = load(&GOOD.replacen("arch = \"rv64\"", "arch = \"rv64\"\nsuite = \"trixie-updates\"", 1)).unwrap();
    assert_eq!(sid.suite, "trixie-updates");
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
fn every_width_is_accepted_and_names_its_qemu() {
    for (name, arch, qemu) in [
        ("rv64", Arch::Rv64, "qemu-system-riscv64"),
        ("rv32", Arch::Rv32, "qemu-system-riscv32"),
        ("x86_64", Arch::X86_64, "qemu-system-x86_64"),
        ("aarch64", Arch::Aarch64, "qemu-system-aarch64"),
    ] {
        let r = load(&GOOD.replacen("arch = \"rv64\"", &format!("arch = \"{name}\""), 1)).unwrap();
        assert_eq!(r.arch, arch);
        assert_eq!(r.arch.to_string(), name);
        assert_eq!(r.arch.qemu(), qemu);
    }
}

/// A fresh folder holding `t.toml` (GOOD with its inline script replaced by
/// `script_file = "t.sh"`) and, when given, `t.sh`.
fn script_file_recipe(name: &str, script: Option<&[u8]>) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("testbench-recipe-script-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = GOOD.replacen("script = \"\"\"#!/bin/busybox sh\necho hi\n\"\"\"", "script_file = \"t.sh\"", 1);
    assert!(text.contains("script_file"));
    std::fs::write(dir.join("t.toml"), &text).unwrap();
    if let Some(script) = script {
        std::fs::write(dir.join("t.sh"), script).unwrap();
    }
    (dir, text)
}

#[test]
fn script_file_is_read_beside_the_recipe() {
    let (dir, _) = script_file_recipe("valid", Some(b"#!/bin/busybox sh\necho from a file\n"));
    let r = testbench_recipe::load(&dir.join("t.toml")).unwrap();
    assert_eq!(r.init.script, "#!/bin/busybox sh\necho from a file\n");
    assert_eq!(r.init.script_file.as_deref(), Some(dir.join("t.sh").as_path()));
    // An inline script has no file.
    assert_eq!(load(GOOD).unwrap().init.script_file, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn script_file_missing_or_unusable_names_file_field_and_what_is_accepted() {
    let (dir, _) = script_file_recipe("missing", None);
    let path = dir.join("t.toml");
    let check = |err: RecipeError, words: &[&str]| {
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("recipe {}: field `init.script_file`: ", path.display())), "{msg}");
        for w in words {
            assert!(msg.contains(w), "{msg:?} lacks {w:?}");
        }
    };
    let accepted = "accepted: a relative path, from the recipe's folder, of a regular file starting with \"#!\"";
    let sh = dir.join("t.sh").display().to_string();
    check(testbench_recipe::load(&path).unwrap_err(), &["\"t.sh\"", &sh, "cannot read it", accepted]);
    std::fs::create_dir(dir.join("t.sh")).unwrap();
    check(testbench_recipe::load(&path).unwrap_err(), &["is a directory or special file", accepted]);
    std::fs::remove_dir(dir.join("t.sh")).unwrap();
    std::fs::write(dir.join("t.sh"), "echo no shebang\n").unwrap();
    check(testbench_recipe::load(&path).unwrap_err(), &["must start with \"#!\""]);
    std::fs::write(dir.join("real.sh"), "#!/bin/sh\n").unwrap();
    std::fs::remove_file(dir.join("t.sh")).unwrap();
    std::os::unix::fs::symlink("real.sh", dir.join("t.sh")).unwrap();
    check(testbench_recipe::load(&path).unwrap_err(), &["is a symlink", accepted]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The cache key covers the script file: editing it (and only it) makes a new key; the
/// same two files give the same key; and it is not the key of the recipe bytes alone.
#[test]
fn script_file_edit_changes_the_key() {
    use sha2::Digest;
    let (dir, text) = script_file_recipe("key", Some(b"#!/bin/sh\necho one\n"));
    let path = dir.join("t.toml");
    let one = testbench_recipe::load(&path).unwrap().key;
    assert_eq!(one, testbench_recipe::load(&path).unwrap().key);
    assert_ne!(one, testbench_recipe::hex(&sha2::Sha256::digest(text.as_bytes())));
    std::fs::write(dir.join("t.sh"), "#!/bin/sh\necho two\n").unwrap();
    let two = testbench_recipe::load(&path).unwrap().key;
    assert_ne!(one, two);
    std::fs::write(&path, format!("{text}# a comment\n")).unwrap();
    let three = testbench_recipe::load(&path).unwrap().key;
    assert_ne!(two, three);
    assert_ne!(one, three);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shipped_recipe_validates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/debian-busybox.toml");
    let r = testbench_recipe::load(&path).unwrap();
    assert_eq!(r.arch, Arch::Rv64);
    assert!(r.init.script.contains("testbench-guest: init reached"));
}

/// The devices guests (riscv64, x86_64, aarch64; one /init, debian-devices.sh): each
/// validates, and every module its /init loads on that width (the `load_*` helpers,
/// with `$TRANSPORT` as the script's `uname -m` branch sets it) is a file the recipe
/// puts in `lib/modules/`, as Debian ships it (`.ko.xz`); no recipe ships a module its
/// width never loads.
#[test]
fn devices_recipes_validate_and_ship_every_module_their_init_loads() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests");
    let mut scripts = Vec::new();
    for (file, arch, machine, transport, loader) in [
        ("debian-devices.toml", Arch::Rv64, "riscv64", "virtio_mmio", "lib/ld-linux-riscv64-lp64d.so.1"),
        ("debian-devices-x86_64.toml", Arch::X86_64, "x86_64", "", "lib64/ld-linux-x86-64.so.2"),
        ("debian-devices-aarch64.toml", Arch::Aarch64, "aarch64", "virtio_mmio", "lib/ld-linux-aarch64.so.1"),
    ] {
        let r = testbench_recipe::load(&guests.join(file)).unwrap();
        assert_eq!(r.arch, arch, "{file}");
        assert_eq!(r.init.script_file.as_deref(), Some(guests.join("debian-devices.sh").as_path()), "{file}");
        assert!(r.init.symlinks.iter().any(|s| s.path == loader), "{file}: no {loader} symlink");
        let script = &r.init.script;
        // The TRANSPORT= of the script's `machine)` branch.
        let mut branch = "";
        let mut set = None;
        for line in script.lines() {
            if !line.starts_with(' ') && line.ends_with(')') {
                branch = line.trim_end_matches(')');
            } else if branch == machine {
                if let Some(rest) = line.trim().strip_prefix("BUS=") {
                    set = rest.split_once("TRANSPORT=").map(|(_, t)| t.trim());
                }
            }
        }
        assert_eq!(set, Some(transport), "{file}: the {machine} branch sets TRANSPORT={set:?}");
        let shipped: Vec<&str> = r
            .packages
            .iter()
            .flat_map(|p| &p.files)
            .filter_map(|f| match &f.to {
                Target::Initramfs(to) if to.starts_with("lib/modules/") => Some(to.as_str()),
                _ => None,
            })
            .collect();
        let mut loaded = Vec::new();
        for line in script.lines() {
            let Some(rest) = line.trim().strip_prefix("load_").and_then(|l| l.split_once("{ load ")) else { continue };
            for module in rest.1.trim_end_matches("; }").split_whitespace() {
                let module = if module == "$TRANSPORT" { transport } else { module };
                if module.is_empty() {
                    continue;
                }
                let file = format!("lib/modules/{module}.ko.xz");
                assert!(shipped.contains(&file.as_str()), "{file}: /init loads {module} but the recipe has no {file}");
                loaded.push(file);
            }
        }
        assert!(loaded.len() >= 10, "found only {} modules in the load_* helpers", loaded.len());
        for s in &shipped {
            assert!(loaded.iter().any(|l| l == s), "{file} ships {s}, which /init never loads on {machine}");
        }
        scripts.push(r.init.script.clone());
    }
    let script = &scripts[0];
    // The case labels of the script's top-level `case` statements (lines starting in
    // column 0 and ending in `)`).
    let labels: Vec<&str> = script
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
        "input",
        "split-word",
        "reset",
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
    ("arch = \"rv64\"", "arch = \"x86\"", "arch", &["\"rv64\"", "\"rv32\"", "\"x86_64\"", "\"aarch64\""]),
    ("description = \"test guest\"", "description = \" \"", "description", &["empty"]),
    ("append = \"console=ttyS0 panic=-1\"", "append = \"a\\nb\"", "append", &["one line"]),
    (
        "append = \"console=ttyS0 panic=-1\"",
        "append = \"x\"\nmirror = \"https://deb.debian.org/debian\"",
        "mirror",
        &["http://"],
    ),
    ("arch = \"rv64\"", "arch = \"rv64\"\nsuite = \"Trixie\"", "suite", &["\"Trixie\"", "a-z 0-9", "\"trixie\""]),
    ("arch = \"rv64\"", "arch = \"rv64\"\nsuite = \"../x\"", "suite", &["dists/"]),
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
        "script = \"\"\"#!/bin/busybox sh\necho hi\n\"\"\"",
        "script = \"#!/bin/sh\"\nscript_file = \"t.sh\"",
        "init",
        &["both `script` and `script_file`", "exactly one"],
    ),
    (
        "script = \"\"\"#!/bin/busybox sh\necho hi\n\"\"\"",
        "",
        "init",
        &["neither `script` nor `script_file`", "exactly one"],
    ),
    (
        "script = \"\"\"#!/bin/busybox sh\necho hi\n\"\"\"",
        "script_file = \"/etc/init.sh\"",
        "init.script_file",
        &["absolute", "relative path, from the recipe's folder"],
    ),
    (
        "script = \"\"\"#!/bin/busybox sh\necho hi\n\"\"\"",
        "script_file = \"../init.sh\"",
        "init.script_file",
        &["`..`", "relative path, from the recipe's folder"],
    ),
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
    ("[init]\n", "[init]\nscript_files = \"x.sh\"\n", "", &["unknown field `script_files`", "script_file"]),
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

/// The OpenSSH guests (riscv64, x86_64, aarch64; one /init, debian-openssh.sh): each
/// validates, boots its width's console, names its loader, ships every module its /init
/// loads on that width (`load` lines, with `$TRANSPORT` as the script's `uname -m`
/// branch sets it) and no other, and takes the same packages at the same versions and
/// the same library files (the DT_NEEDED closure is the same on the three widths).
#[test]
fn openssh_recipes_validate_and_agree_across_widths() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests");
    let mut packages = Vec::new();
    for (file, arch, machine, console, transport, multiarch, loader) in [
        (
            "debian-openssh.toml",
            Arch::Rv64,
            "riscv64",
            "ttyS0",
            "virtio_mmio",
            "riscv64-linux-gnu",
            "lib/ld-linux-riscv64-lp64d.so.1",
        ),
        (
            "debian-openssh-x86_64.toml",
            Arch::X86_64,
            "x86_64",
            "ttyS0",
            "",
            "x86_64-linux-gnu",
            "lib64/ld-linux-x86-64.so.2",
        ),
        (
            "debian-openssh-aarch64.toml",
            Arch::Aarch64,
            "aarch64",
            "ttyAMA0",
            "virtio_mmio",
            "aarch64-linux-gnu",
            "lib/ld-linux-aarch64.so.1",
        ),
    ] {
        let r = testbench_recipe::load(&guests.join(file)).unwrap();
        assert_eq!(r.arch, arch, "{file}");
        assert!(r.append.starts_with(&format!("console={console} ")), "{file}: append {:?}", r.append);
        assert!(r.append.contains("tb.sshd=net"), "{file}: append {:?}", r.append);
        assert_eq!(r.init.script_file.as_deref(), Some(guests.join("debian-openssh.sh").as_path()), "{file}");
        assert!(r.init.symlinks.iter().any(|s| s.path == loader), "{file}: no {loader} symlink");
        let script = &r.init.script;
        let mut branch = "";
        let mut set = None;
        for line in script.lines() {
            if !line.starts_with(' ') && line.ends_with(')') {
                branch = line.trim_end_matches(')');
            } else if branch == machine {
                if let Some(rest) = line.trim().strip_prefix("BUS=") {
                    set = rest.split_once("TRANSPORT=").map(|(_, t)| t.trim());
                }
            }
        }
        assert_eq!(set, Some(transport), "{file}: the {machine} branch sets TRANSPORT={set:?}");
        let initramfs: Vec<&str> = r
            .packages
            .iter()
            .flat_map(|p| &p.files)
            .filter_map(|f| match &f.to {
                Target::Initramfs(to) => Some(to.as_str()),
                Target::Kernel => None,
            })
            .collect();
        let shipped: Vec<&str> = initramfs.iter().copied().filter(|to| to.starts_with("lib/modules/")).collect();
        let mut loaded = Vec::new();
        for line in script.lines() {
            let Some(rest) = line.trim().strip_prefix("load ") else { continue };
            for module in rest.split_whitespace() {
                let module = if module == "$TRANSPORT" { transport } else { module };
                if module.is_empty() {
                    continue;
                }
                let file = format!("lib/modules/{module}.ko.xz");
                assert!(shipped.contains(&file.as_str()), "{file}: /init loads {module} but the recipe has no {file}");
                loaded.push(file);
            }
        }
        assert!(loaded.len() >= 3, "found only {} modules in the load lines", loaded.len());
        for s in &shipped {
            assert!(loaded.iter().any(|l| l == s), "{file} ships {s}, which /init never loads on {machine}");
        }
        // The libraries, by name under the multiarch folder (the loader's name is the
        // width's own, checked above through its symlink).
        let prefix = format!("usr/lib/{multiarch}/");
        let mut libraries: Vec<&str> = initramfs
            .iter()
            .filter_map(|to| to.strip_prefix(prefix.as_str()))
            .filter(|name| !name.starts_with("ld-linux-"))
            .collect();
        libraries.sort_unstable();
        let mut pins: Vec<(String, String)> = r
            .packages
            .iter()
            .filter(|p| !p.name.starts_with("linux-image-"))
            .map(|p| (p.name.clone(), p.version.clone()))
            .collect();
        pins.sort();
        packages.push((file, pins, libraries.iter().map(|l| l.to_string()).collect::<Vec<_>>()));
    }
    let (first, pins, libraries) = &packages[0];
    assert!(libraries.len() >= 20, "{first}: only {} libraries", libraries.len());
    for (file, other_pins, other_libraries) in &packages[1..] {
        assert_eq!(other_pins, pins, "{file} and {first} pin different packages or versions");
        assert_eq!(other_libraries, libraries, "{file} and {first} take different library files");
    }
}
