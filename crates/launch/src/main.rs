//! What `cargo testbench` runs (the alias in `.cargo/config.toml`): the bench's release
//! binary, with the arguments given.
//!
//! `cargo run -p testbench` took 110 ms with nothing changed, checking the bench's
//! whole dependency graph, before the bench began. This launcher has two small
//! dependencies, so cargo starts it in about 45 ms; it execs `target/release/testbench`
//! when the stamp of that binary's last build still holds (`crates/fresh`: the
//! binary's dep-info, every manifest its sources belong to, the lock file, cargo's
//! configuration, the toolchains, the environment), and otherwise has cargo build it
//! first, exactly as `cargo run` would have, then stamps it. `CARGO_TARGET_DIR` moves the
//! target directory as it does for cargo.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// A first build of the bench takes minutes on a slow machine; an hour is far past it.
const BUILD_DEADLINE: Duration = Duration::from_secs(3600);

/// The bench's QEMU plugins, built beside it: the console's stamps (`boot/stamps.rs` in
/// the bench loads it) and `--coverage`'s (`coverage/`).
const PLUGINS: [&str; 2] = ["libtestbench_stamp_plugin.so", "libtestbench_cover_plugin.so"];

fn main() -> ExitCode {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.ancestors().nth(2).map(Path::to_path_buf).unwrap_or(manifest_dir);
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    let bench = target.join("release/testbench");
    let stamp = target.join("release/.testbench-launch.stamp");
    let key: Vec<String> = std::iter::once(format!("bench {}", bench.display()))
        .chain(testbench_fresh::build_env().into_iter().map(|(k, v)| format!("{k}={v}")))
        .collect();
    if !holds(&stamp, &key) {
        let _ = std::fs::remove_file(&stamp);
        let started = SystemTime::now();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let build = testbench_process::Cmd::new(&cargo, "cargo to build the bench", BUILD_DEADLINE)
            .cwd(&root)
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                "testbench",
                "-p",
                "testbench-stamp-plugin",
                "-p",
                "testbench-cover-plugin",
                "--manifest-path",
            ])
            .arg(root.join("Cargo.toml"));
        match build.status_inherit() {
            Ok(status) if status.success() => stamp_it(&stamp, &key, &root, &bench, started),
            Ok(status) => return ExitCode::from(status.code().unwrap_or(101).clamp(1, 255) as u8),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(101);
            }
        }
    }
    let error = std::process::Command::new(&bench).args(std::env::args_os().skip(1)).exec();
    eprintln!("error: cannot start {}: {error}", bench.display());
    ExitCode::from(101)
}

/// Whether the stamp is for this binary in this environment, and every input it lists
/// is as it saw it.
fn holds(stamp: &Path, key: &[String]) -> bool {
    let Some((kept, seen)) = std::fs::read_to_string(stamp).ok().and_then(|t| testbench_fresh::parse_stamp(&t)) else {
        return false;
    };
    kept == key && !seen.is_empty() && testbench_fresh::unchanged(seen.iter().map(|(p, s)| (p.as_path(), s)))
}

/// Stamp the binary cargo just built, unless something it read changed while it built.
fn stamp_it(stamp: &Path, key: &[String], root: &Path, bench: &Path, started: SystemTime) {
    let Some(paths) = testbench_fresh::build_inputs(bench, root, &[root]) else { return };
    // The QEMU plugins the bench loads beside it (crates/stamp-plugin, crates/cover-plugin)
    // are built with it: their sources are inputs too, and each is a file the build writes.
    let Some(mut seen) = testbench_fresh::snapshot(paths, started, Some(bench)) else { return };
    for plugin in PLUGINS.map(|name| bench.with_file_name(name)) {
        let Some(plugin_paths) = testbench_fresh::build_inputs(&plugin, root, &[root]) else { return };
        let Some(plugin_seen) = testbench_fresh::snapshot(plugin_paths, started, Some(&plugin)) else { return };
        seen.extend(plugin_seen);
    }
    testbench_fresh::write_atomically(stamp, &testbench_fresh::stamp_text(key, &seen));
}
