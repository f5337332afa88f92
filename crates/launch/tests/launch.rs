//! The launcher over a fake cargo (it "builds" the bench: a script that prints its
//! arguments, and a dep-info naming one source; and the stamp plugin beside it, with its
//! own dep-info) in a target directory of the test's own.

use std::path::Path;
use std::process::Command;

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn the_bench_is_built_only_when_its_stamp_no_longer_holds_and_gets_the_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let source = tmp.path().join("main.rs");
    std::fs::write(&source, "fn main() {}").unwrap();
    let calls = tmp.path().join("calls");
    let cargo = tmp.path().join("cargo");
    let (t, src) = (target.display(), source.display());
    write_exec(
        &cargo,
        &format!(
            "#!/bin/sh\n\
             echo \"$*\" >> {calls}\n\
             [ -n \"$EDIT_DURING_BUILD\" ] && echo '// edited' >> {src}\n\
             mkdir -p {t}/release\n\
             printf '#!/bin/sh\\necho bench: \"$@\"\\n' > {t}/release/testbench\n\
             chmod +x {t}/release/testbench\n\
             echo '{t}/release/testbench: {src}' > {t}/release/testbench.d\n\
             touch {t}/release/libtestbench_stamp_plugin.so\n\
             echo '{t}/release/libtestbench_stamp_plugin.so: {src}' > {t}/release/libtestbench_stamp_plugin.d\n\
             touch {t}/release/libtestbench_cover_plugin.so\n\
             echo '{t}/release/libtestbench_cover_plugin.so: {src}' > {t}/release/libtestbench_cover_plugin.d\n",
            calls = calls.display(),
        ),
    );
    let launch = |edit: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_testbench-launch"));
        cmd.args(["--exact", "a b"]).env("CARGO", &cargo).env("CARGO_TARGET_DIR", &target);
        if edit {
            cmd.env("EDIT_DURING_BUILD", "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let builds = || std::fs::read_to_string(&calls).map(|t| t.lines().count()).unwrap_or(0);
    // A file's time is the kernel's coarse clock, and the stamp counts a change up to two
    // seconds before a build's start as during it: the test dates its own edits back.
    let date_back = |secs: u64| {
        let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        std::fs::File::options().write(true).open(&source).unwrap().set_modified(then).unwrap();
    };
    date_back(60);
    // A source edited while cargo built: no stamp, so the next start builds again.
    assert_eq!(launch(true), "bench: --exact a b\n");
    assert_eq!(builds(), 1);
    assert!(std::fs::read_to_string(&calls).unwrap().starts_with(
        "build --quiet --release -p testbench -p testbench-stamp-plugin -p testbench-cover-plugin --manifest-path "
    ));
    date_back(50);
    launch(false);
    assert_eq!(builds(), 2, "a stamp was made of a build a source changed during");
    assert_eq!(launch(false), "bench: --exact a b\n");
    assert_eq!(builds(), 2, "the stamp holds: no build");
    std::fs::write(&source, "fn main() { changed(); }").unwrap();
    date_back(40);
    launch(false);
    assert_eq!(builds(), 3, "a changed source builds again");
    launch(false);
    assert_eq!(builds(), 3);
}
