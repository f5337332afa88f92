//! Packs the fixtures under tests/data/ and reads them back through other readers than
//! the ones that wrote them: the `gpt` crate and `sfdisk` for the table,
//! `debugfs` for ext4, `fatfs` for FAT; then flips, the kept-disk check and refusals.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use testbench_disk::{
    check_kept, flip_file_bit, flip_header_bit, make_partitioned, make_zeroed, pack, DiskError, DiskRecipe, DiskSpec,
    Fs, Layout,
};
use testbench_process::Cmd;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("disk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tool(name: &str) -> PathBuf {
    testbench_process::on_path(name)
        .or_else(|| ["/usr/sbin", "/sbin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("{name} is missing: scripts/setup installs e2fsprogs"))
}

fn packed(name: &str, recipe: &str) -> (DiskRecipe, PathBuf, Layout, PathBuf) {
    let dir = scratch(name);
    let recipe = DiskRecipe::load(root(), Path::new(recipe)).unwrap();
    let image = dir.join("disk.img");
    std::fs::create_dir_all(dir.join("scratch")).unwrap();
    let layout = pack(&recipe, root(), &image, &dir.join("scratch")).unwrap();
    (recipe, image, layout, dir)
}

/// The stage's files, as (path from the stage's root, bytes), sorted.
fn stage_files(stage: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{name}/"), out);
            } else {
                out.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(stage, "", &mut out);
    out.sort();
    out
}

fn debugfs(image: &Path, offset: u64, request: &str) -> (bool, Vec<u8>, String) {
    let out = Cmd::new(tool("debugfs"), "debugfs in a test", Duration::from_secs(60))
        .env("DEBUGFS_PAGER", "__none__")
        .args(["-R", request])
        .arg(format!("{}?offset={offset}", image.display()))
        .output()
        .unwrap();
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn ext4_file(image: &Path, layout: &Layout, partition: &str, path: &str) -> Vec<u8> {
    let place = layout.partition(partition).unwrap();
    let (ok, stdout, stderr) = debugfs(image, place.offset, &format!("cat \"/{path}\""));
    assert!(ok && !stderr.contains("not found"), "debugfs cat /{path}: {stderr}");
    stdout
}

fn fat_fs(image: &File, offset: u64, length: u64) -> fatfs::FileSystem<Slice> {
    let mut bytes = vec![0u8; length as usize];
    image.read_exact_at(&mut bytes, offset).unwrap();
    fatfs::FileSystem::new(std::io::Cursor::new(bytes), fatfs::FsOptions::new()).unwrap()
}

type Slice = std::io::Cursor<Vec<u8>>;

fn fat_file(image: &Path, layout: &Layout, partition: &str, path: &str) -> Vec<u8> {
    let place = layout.partition(partition).unwrap();
    let fs = fat_fs(&File::open(image).unwrap(), place.offset, place.length);
    let mut bytes = Vec::new();
    fs.root_dir().open_file(path).unwrap().read_to_end(&mut bytes).unwrap();
    bytes
}

#[test]
fn the_table_is_the_layout_and_the_one_sfdisk_or_the_gpt_crate_reads() {
    let (_, image, layout, _) = packed("table", "tests/data/disk.toml");
    assert_eq!(layout.size_bytes, 8 << 20);
    let names: Vec<(&str, Fs, u64, u64)> =
        layout.partitions.iter().map(|p| (p.name.as_str(), p.fs, p.offset, p.length)).collect();
    // 8 MiB less the first MiB and the backup table, in three, rounded down to MiB.
    assert_eq!(
        names,
        [
            ("data", Fs::Ext4, 1 << 20, 2 << 20),
            ("boot", Fs::Fat, 3 << 20, 2 << 20),
            ("blob", Fs::Raw, 5 << 20, 2 << 20)
        ]
    );
    let disk = gpt::GptConfig::new().only_valid_headers(true).open(&image).unwrap();
    let read: Vec<(String, String, u64, u64)> = disk
        .partitions()
        .values()
        .map(|p| {
            (
                p.name.clone(),
                p.part_type_guid.guid.to_string().to_uppercase(),
                p.first_lba * 512,
                p.sectors_len().unwrap() * 512,
            )
        })
        .collect();
    let linux = "0FC63DAF-8483-4772-8E79-3D69D8477DE4".to_string();
    let basic = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7".to_string();
    assert_eq!(
        read,
        [
            ("data".to_string(), linux.clone(), 1 << 20, 2 << 20),
            ("boot".to_string(), basic, 3 << 20, 2 << 20),
            ("blob".to_string(), linux, 5 << 20, 2 << 20)
        ]
    );
    assert_eq!(disk.guid(), &testbench_disk::DISK_GUID);
    // sfdisk (util-linux) reads the same table and finds nothing wrong. A host without it
    // fails here: scripts/setup installs it (its "cpio and fdisk" step).
    let sfdisk = testbench_process::on_path("sfdisk")
        .or_else(|| ["/usr/sbin/sfdisk", "/sbin/sfdisk"].iter().map(PathBuf::from).find(|p| p.is_file()))
        .expect("sfdisk is not installed: scripts/setup installs it (its \"cpio and fdisk\" step, package fdisk)");
    let run = |flag: &str| {
        let out = Cmd::new(&sfdisk, "sfdisk", Duration::from_secs(30)).arg(flag).arg(&image).output().unwrap();
        assert!(out.status.success(), "sfdisk {flag}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dump = run("--dump");
    let entries: Vec<&str> = dump.lines().filter_map(|l| l.split_once(" : ").map(|(_, e)| e)).collect();
    assert_eq!(
        entries,
        [
            "start=        2048, size=        4096, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=7E57BE0C-0A27-4000-8000-000000000001, name=\"data\"",
            "start=        6144, size=        4096, type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7, uuid=7E57BE0C-0A27-4000-8000-000000000002, name=\"boot\"",
            "start=       10240, size=        4096, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=7E57BE0C-0A27-4000-8000-000000000003, name=\"blob\"",
        ],
        "{dump}"
    );
    assert!(dump.contains("label-id: 7E57BE0C-D15C-4000-8000-000000000000"), "{dump}");
    assert!(run("--verify").contains("No errors detected."));
}

#[test]
fn each_partition_reads_back_as_its_stage() {
    let (_, image, layout, _) = packed("read-back", "tests/data/disk.toml");
    for (path, bytes) in stage_files(&root().join("tests/data/stage-ext4")) {
        assert_eq!(ext4_file(&image, &layout, "data", &path), bytes, "ext4 /{path}");
    }
    for (path, bytes) in stage_files(&root().join("tests/data/stage-fat")) {
        assert_eq!(fat_file(&image, &layout, "boot", &path), bytes, "fat /{path}");
    }
    let fat = layout.partition("boot").unwrap();
    let fs = fat_fs(&File::open(&image).unwrap(), fat.offset, fat.length);
    assert_eq!(fs.volume_id(), 0x7e57_be0c);
    let blob = std::fs::read(root().join("tests/data/blob.bin")).unwrap();
    let raw = layout.partition("blob").unwrap();
    let mut bytes = vec![0u8; raw.length as usize];
    File::open(&image).unwrap().read_exact_at(&mut bytes, raw.offset).unwrap();
    assert_eq!(&bytes[..blob.len()], &blob[..]);
    assert!(bytes[blob.len()..].iter().all(|&b| b == 0));
    // Every inode's times are the pack's one time stamp, 2000-01-01 (0x386d4380).
    let data = layout.partition("data").unwrap();
    for path in ["/", "/lost+found", "/sub", "/sub/deeper", "/sub/deeper/deep.txt", "/hello.txt", "/twin-b.txt"] {
        let (_, stat, _) = debugfs(&image, data.offset, &format!("stat \"{path}\""));
        let stat = String::from_utf8_lossy(&stat);
        for time in ["ctime", "atime", "mtime", "crtime"] {
            let line = stat.lines().find(|l| l.trim_start().starts_with(&format!("{time}:"))).unwrap();
            assert!(line.contains("0x386d4380:00000000"), "{path}: {line}");
        }
    }
    // e2fsck finds nothing to fix in what mke2fs made and debugfs touched.
    let part = image.with_extension("ext4");
    let mut ext4 = vec![0u8; data.length as usize];
    File::open(&image).unwrap().read_exact_at(&mut ext4, data.offset).unwrap();
    std::fs::write(&part, ext4).unwrap();
    let out = Cmd::new(tool("e2fsck"), "e2fsck -fn", Duration::from_secs(60)).arg("-fn").arg(&part).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn two_packs_from_two_scratch_directories_are_the_same_bytes() {
    let (_, first, _, _) = packed("same-1", "tests/data/disk.toml");
    std::thread::sleep(Duration::from_millis(1100));
    let (_, second, _, _) = packed("same-2", "tests/data/disk.toml");
    let (a, b) = (std::fs::read(&first).unwrap(), std::fs::read(&second).unwrap());
    let differ: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).take(8).collect();
    assert!(differ.is_empty(), "the packs differ at bytes {differ:?}");
}

/// Copy `from` to `to` with every file 0600 and every directory 0700.
fn copy_private(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_private(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_checkout_with_another_umask_and_other_times_packs_the_same_bytes() {
    let (_, first, layout, _) = packed("checkout-1", "tests/data/disk.toml");
    let dir = scratch("checkout-2");
    let other_root = dir.join("checkout");
    copy_private(&root().join("tests/data"), &other_root.join("tests/data"));
    let recipe = DiskRecipe::load(&other_root, Path::new("tests/data/disk.toml")).unwrap();
    std::fs::create_dir_all(dir.join("scratch")).unwrap();
    pack(&recipe, &other_root, &dir.join("disk.img"), &dir.join("scratch")).unwrap();
    assert!(std::fs::read(&first).unwrap() == std::fs::read(dir.join("disk.img")).unwrap(), "the packs differ");
    let data = layout.partition("data").unwrap();
    for (path, mode) in [("/hello.txt", "0644"), ("/sub", "0755")] {
        let (_, stat, _) = debugfs(&first, data.offset, &format!("stat \"{path}\""));
        let stat = String::from_utf8_lossy(&stat);
        assert!(
            stat.contains(&format!("Mode:  {mode}")) && stat.contains("User:     0   Group:     0"),
            "{path}: {stat}"
        );
    }
}

fn one_bit_differs(before: &[u8], after: &[u8]) -> (u64, u8) {
    let differ: Vec<usize> = (0..before.len()).filter(|&i| before[i] != after[i]).collect();
    assert_eq!(differ.len(), 1, "bytes that differ: {differ:?}");
    let x = before[differ[0]] ^ after[differ[0]];
    assert!(x.is_power_of_two(), "more than one bit of byte {} differs", differ[0]);
    (differ[0] as u64, x.trailing_zeros() as u8)
}

#[test]
fn a_flipped_file_bit_is_one_bit_of_the_disk_and_of_that_file_alone() {
    let (_, image, layout, _) = packed("flip-file", "tests/data/disk.toml");
    let before = std::fs::read(&image).unwrap();
    let note = flip_file_bit(&image, &layout, "data", "twin-b.txt").unwrap();
    let after = std::fs::read(&image).unwrap();
    assert_eq!(one_bit_differs(&before, &after), (note.offset, note.bit));
    assert_eq!(ext4_file(&image, &layout, "data", "twin-b.txt"), b"uwin\n");
    assert_eq!(ext4_file(&image, &layout, "data", "twin-a.txt"), b"twin\n");
    assert_eq!(
        note.to_string().split(':').next().unwrap(),
        format!("flipped bit 0 of disk byte {} (0x74 -> 0x75) in partition `data`", note.offset)
    );

    let note = flip_file_bit(&image, &layout, "data", "/sub/deeper/deep.txt").unwrap();
    assert_eq!(one_bit_differs(&after, &std::fs::read(&image).unwrap()), (note.offset, 0));
    assert_eq!(ext4_file(&image, &layout, "data", "sub/deeper/deep.txt"), b"eeep in ext4\n");

    // FAT: the second of two files with the same bytes, and a long mixed-case name.
    let before = std::fs::read(&image).unwrap();
    let note = flip_file_bit(&image, &layout, "boot", "twin-b.txt").unwrap();
    assert_eq!(one_bit_differs(&before, &std::fs::read(&image).unwrap()), (note.offset, 0));
    assert_eq!(fat_file(&image, &layout, "boot", "twin-b.txt"), b"uwin\n");
    assert_eq!(fat_file(&image, &layout, "boot", "twin-a.txt"), b"twin\n");
    flip_file_bit(&image, &layout, "boot", "Docs/A Long Name.txt").unwrap();
    assert_eq!(fat_file(&image, &layout, "boot", "Docs/A Long Name.txt"), b"` long name, mixed case\n");
    flip_file_bit(&image, &layout, "boot", "docs/readme").unwrap();
    assert_eq!(fat_file(&image, &layout, "boot", "Docs/README"), b"RHORT\n");
}

fn refusal(result: Result<testbench_disk::FlipNote, DiskError>) -> String {
    let error = result.expect_err("refused");
    let text = error.to_string();
    text.split_once(": ").map(|(_, rest)| rest.to_string()).unwrap_or(text)
}

#[test]
fn flips_that_cannot_be_are_refused() {
    let (_, image, layout, _) = packed("flip-refused", "tests/data/disk.toml");
    let before = std::fs::read(&image).unwrap();
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "blob", "x")),
        "partition `blob` is raw: it holds no files, so no `x`"
    );
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "dat", "hello.txt")),
        "no partition `dat`; the disk has `data`, `boot`, `blob`"
    );
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "boot", "empty.txt")),
        "partition `boot` (fat): `empty.txt` is empty: it has no data byte to flip"
    );
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "boot", "Docs/missing")),
        "partition `boot` (fat): no `Docs/missing` in the FAT"
    );
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "data", "empty.txt")),
        "partition `data` (ext4): `empty.txt` is empty: it has no data byte to flip"
    );
    assert_eq!(
        refusal(flip_file_bit(&image, &layout, "data", "sub")),
        "partition `data` (ext4): `sub` is not a regular file"
    );
    let missing = flip_file_bit(&image, &layout, "data", "nothing-here").expect_err("no such file");
    assert!(
        matches!(&missing, DiskError::Tool { message, .. } if message.contains("/nothing-here: File not found by ext2_lookup")),
        "{missing:?}"
    );
    assert_eq!(std::fs::read(&image).unwrap(), before, "a refused flip wrote nothing");
}

#[test]
fn a_flipped_header_makes_the_tools_refuse_the_partition() {
    let (_, image, layout, _) = packed("flip-header", "tests/data/disk.toml");
    let data = layout.partition("data").unwrap();
    assert!(debugfs(&image, data.offset, "stats").0);
    let before = std::fs::read(&image).unwrap();
    let note = flip_header_bit(&image, &layout, "data").unwrap();
    assert_eq!(note.offset, data.offset + 1024 + 56);
    assert_eq!((note.before, note.after), (0x53, 0x52));
    let after = std::fs::read(&image).unwrap();
    assert_eq!(one_bit_differs(&before, &after), (note.offset, 0));
    let (_, _, stderr) = debugfs(&image, data.offset, "stats");
    assert!(stderr.contains("Bad magic number in super-block"), "{stderr}");
    let part = image.with_extension("ext4");
    std::fs::write(&part, &after[data.offset as usize..(data.offset + data.length) as usize]).unwrap();
    let out = Cmd::new(tool("e2fsck"), "e2fsck -n", Duration::from_secs(60)).arg("-n").arg(&part).output().unwrap();
    assert!(!out.status.success(), "e2fsck -n took a partition with a flipped magic");

    let boot = layout.partition("boot").unwrap();
    let note = flip_header_bit(&image, &layout, "boot").unwrap();
    assert_eq!((note.offset, note.before, note.after), (boot.offset + 12, 0x02, 0x03));
    let mut bytes = vec![0u8; boot.length as usize];
    File::open(&image).unwrap().read_exact_at(&mut bytes, boot.offset).unwrap();
    let refused = fatfs::FileSystem::new(std::io::Cursor::new(bytes), fatfs::FsOptions::new()).err();
    assert_eq!(
        refused.map(|error| error.to_string()).as_deref(),
        Some("invalid bytes_per_sector value in BPB (not power of two)")
    );

    let blob = layout.partition("blob").unwrap();
    let note = flip_header_bit(&image, &layout, "blob").unwrap();
    assert_eq!((note.offset, note.before, note.after), (blob.offset, b'R', b'S'));
    assert_eq!(
        refusal(flip_header_bit(&image, &layout, "data")),
        "partition `data` has no ext4 superblock magic to flip"
    );
}

#[test]
fn a_kept_disk_must_be_the_size_and_table_of_a_fresh_one() {
    let (recipe, image, _, dir) = packed("kept", "tests/data/disk.toml");
    let spec = DiskSpec::Recipe(recipe.clone());
    check_kept(&image, &spec).unwrap();
    // What a guest writes inside its partitions is its own.
    flip_file_bit(&image, &pack(&recipe, root(), &image, &dir.join("scratch")).unwrap(), "boot", "hello.txt").unwrap();
    check_kept(&image, &spec).unwrap();

    let grown = dir.join("grown.img");
    std::fs::copy(&image, &grown).unwrap();
    File::options().write(true).open(&grown).unwrap().set_len((8 << 20) + 1024).unwrap();
    let error = check_kept(&grown, &spec).unwrap_err().to_string();
    assert!(error.ends_with(": kept disk refused (never reformatted): its size is 8389632 bytes, a fresh disk's 8388608; its partition table: no valid GPT (both headers checked): GPT Header Error: Invalid GPT Signature, the header does not exist or is invalid"), "{error}");

    let other = dir.join("other.img");
    make_partitioned(&other, 8192, 2).unwrap();
    let error = check_kept(&other, &spec).unwrap_err().to_string();
    assert_eq!(
        error.split_once(": ").unwrap().1,
        "kept disk refused (never reformatted): it has 2 partitions, a fresh disk 3; \
         partition 1 name is `part1`, a fresh disk's `data`; \
         partition 1 last sector is 8191, a fresh disk's 6143; \
         partition 2 name is `part2`, a fresh disk's `boot`; \
         partition 2 type GUID is 0fc63daf-8483-4772-8e79-3d69d8477de4, a fresh disk's ebd0a0a2-b9e5-4433-87c0-68b6b72699c7; \
         partition 2 first sector is 8192, a fresh disk's 6144; \
         partition 2 last sector is 14335, a fresh disk's 10239"
    );
    check_kept(&other, &DiskSpec::Partitioned { size_kib: 8192, count: 2 }).unwrap();
    let error = check_kept(&other, &DiskSpec::Partitioned { size_kib: 8192, count: 3 }).unwrap_err().to_string();
    assert!(error.contains("it has 2 partitions, a fresh disk 3"), "{error}");

    // A zeroed disk: only its size is the bench's.
    let zeroed = dir.join("zeroed.img");
    make_zeroed(&zeroed, 1024).unwrap();
    check_kept(&zeroed, &DiskSpec::Zeroed { size_kib: 1024 }).unwrap();
    check_kept(&other, &DiskSpec::Zeroed { size_kib: 8192 }).unwrap();
    let error = check_kept(&zeroed, &DiskSpec::Zeroed { size_kib: 2048 }).unwrap_err().to_string();
    assert!(error.ends_with("its size is 1048576 bytes, a fresh disk's 2097152"), "{error}");
}

#[test]
fn a_small_disk_aligns_its_partitions_to_4_kib() {
    let (_, image, layout, _) = packed("small", "tests/data/small.toml");
    let places: Vec<(u64, u64)> = layout.partitions.iter().map(|p| (p.offset, p.length)).collect();
    // 2 MiB: sectors 40 to 4062 usable, 2008 sectors each (4 KiB multiples).
    assert_eq!(places, [(40 * 512, 2008 * 512), (2048 * 512, 2008 * 512)]);
    assert_eq!(ext4_file(&image, &layout, "data", "hello.txt"), b"hello from ext4\n");
    let layout = make_partitioned(&image, 64, 3).unwrap();
    assert!(layout.partitions.iter().all(|p| p.offset % 4096 == 0 && p.length % 4096 == 0 && p.length > 0));
    let error = make_partitioned(&image, 32, 3).unwrap_err().to_string();
    assert!(error.ends_with(": 32 KiB is too small for 3 partitions: the smallest disk is 49 KiB"), "{error}");
}

#[test]
fn bad_recipes_are_refused_in_words() {
    let cases = [
        ("unknown-key", "partition[0].stag: unknown field; accepted: name, fs, stage, file; did you mean `stage`?"),
        ("unknown-top", "sise_kib: unknown field; accepted: size_kib, partition; did you mean `size_kib`?"),
        ("unknown-fs", "partition[1].fs: unknown file system `ext5`; accepted: raw, ext4, fat; did you mean `ext4`?"),
        ("duplicate-name", "partition[1].name: `data` is also partition[0]'s name; names are unique"),
        (
            "long-name",
            "partition[0].name: `a-name-of-thirty-seven-characters-xxx` is 37 UTF-16 units long; a GPT name takes 1 to 36",
        ),
        ("stage-not-dir", "partition[0].stage: `tests/data/blob.bin` is not a directory (relative to the workspace root)"),
        ("file-not-raw", "partition[0].file: only a raw partition takes `file`; ext4 takes `stage`, a directory"),
        ("stage-raw", "partition[0].stage: a raw partition holds no tree; it takes `file`, the bytes at its start"),
        (
            "too-small",
            "size_kib: 512 is too small: each of 2 partitions would get 241664 bytes, and partition[0] (`data`) needs 262144 for ext4; the smallest size_kib that fits is 549",
        ),
        ("no-stage", "partition[0].stage: missing: ext4 needs `stage`, a directory whose tree it holds"),
        ("size-type", "size_kib: takes a whole number of KiB, not string"),
        ("syntax", "line 2: invalid table header\nexpected `.`, `]]`"),
        ("missing", "file: cannot read: No such file or directory (os error 2)"),
    ];
    for (name, message) in cases {
        let path = format!("tests/data/bad/{name}.toml");
        let error = DiskRecipe::load(root(), Path::new(&path)).expect_err(name).to_string();
        assert_eq!(error, format!("{path}: {message}"));
    }
}
