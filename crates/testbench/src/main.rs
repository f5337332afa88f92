//! `cargo testbench`: build, boot under QEMU and judge the cases in tests/.
//!
//! The binary wires the crates together: the case model (testbench-case), the console
//! judge (testbench-judge), guest recipes (testbench-recipe), and the modules here that
//! do the I/O: cargo builds, QEMU boots, run directories and reports. See ARCHITECTURE.md.

// The one process wrapper (crates/process), under the name the bench's modules use.
use testbench_process as process;

mod bisect;
mod boot;
mod build;
mod case_result;
mod cli;
mod config;
mod coverage;
mod crash;
mod deadlines;
mod error;
mod events;
mod fdt_edit;
mod fresh;
mod gates;
mod guest_names;
mod history;
mod host;
mod loopback;
mod oracles;
mod pack;
mod prebuilt;
mod qemu;
mod quarantine;
mod report;
mod report_html;
mod rundir;
mod runner;
mod ssh;
mod verdict;
mod workspace;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use error::BenchError;

/// The setup script both front doors call; quick when everything is installed.
const SETUP: &str = "scripts/setup";
const SETUP_DEADLINE: Duration = Duration::from_secs(1800);

/// The workspace root: `TESTBENCH_ROOT`, or the checkout this binary was built from.
fn workspace_root() -> PathBuf {
    if let Some(root) = std::env::var_os("TESTBENCH_ROOT").filter(|r| !r.is_empty()) {
        return PathBuf::from(root);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).map(PathBuf::from).unwrap_or(manifest)
}

/// Whether everything `scripts/setup` installs is still there, judged without starting a
/// process: the script's stamp is newer than the script and than every width's QEMU binary
/// on the path, and the toolchain cargo runs us from has both guest targets. Otherwise the
/// script runs (it is idempotent, and says what it could not do).
fn setup_is_current(root: &std::path::Path, script: &std::path::Path) -> bool {
    let modified = |path: &std::path::Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let Some(stamp) = modified(&root.join("target/.setup-stamp")) else { return false };
    if modified(script).is_none_or(|script| script > stamp) {
        return false;
    }
    for qemu in testbench_case::Arch::ALL.map(testbench_case::Arch::default_qemu) {
        match process::on_path(qemu).and_then(|path| modified(&path)) {
            Some(installed) if installed <= stamp => {}
            _ => return false,
        }
    }
    // cargo runs the bench with CARGO set to the toolchain's own cargo, whose sysroot holds
    // the installed targets; run directly, any rustup toolchain holding both will do.
    let has_targets = |sysroot: &std::path::Path| {
        testbench_case::Arch::REFERENCE
            .iter()
            .filter_map(|arch| arch.target_triple())
            .all(|triple| sysroot.join("lib/rustlib").join(triple).is_dir())
    };
    match std::env::var_os("CARGO").map(PathBuf::from).and_then(|c| c.ancestors().nth(2).map(PathBuf::from)) {
        Some(sysroot) => has_targets(&sysroot),
        None => {
            let rustup = std::env::var_os("RUSTUP_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".rustup")));
            let toolchains = rustup.and_then(|r| std::fs::read_dir(r.join("toolchains")).ok());
            toolchains.is_some_and(|dir| dir.flatten().any(|entry| has_targets(&entry.path())))
        }
    }
}

fn setup(root: &std::path::Path) -> Result<(), BenchError> {
    if std::env::var_os("TESTBENCH_NO_SETUP").is_some() {
        return Ok(());
    }
    let script = root.join(SETUP);
    if !script.exists() || setup_is_current(root, &script) {
        return Ok(());
    }
    let status = process::Cmd::new(&script, "scripts/setup to install what is missing", SETUP_DEADLINE)
        .cwd(root)
        .status_inherit()?;
    if status.success() {
        Ok(())
    } else {
        Err(BenchError::Tool { tool: SETUP.into(), status })
    }
}

/// QEMU runs the bench's own binary as a peer, once per connection the guest makes
/// (`--peer-helper RECORDS NAME`): the connection is its stdin, stdout and stderr, so it
/// prints nothing; it records the connection, then echoes (boot/parts/net.rs).
fn peer_helper(args: &[std::ffi::OsString]) -> ! {
    use std::os::fd::AsFd;
    let (Some(records), Some(name)) = (args.first(), args.get(1)) else { std::process::exit(2) };
    let dup = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().map(std::fs::File::from);
    let (Ok(input), Ok(output)) = (dup(std::io::stdin().as_fd()), dup(std::io::stdout().as_fd())) else {
        std::process::exit(3)
    };
    let name = name.to_string_lossy();
    match testbench_net::peer::serve(std::path::Path::new(records), &name, input, output) {
        Ok(()) => std::process::exit(0),
        Err(_) => std::process::exit(1),
    }
}

/// ssh runs the bench's own binary as an ssh-loopback session's `ProxyCommand`
/// (`--loopback-proxy QEMU ARGS...`, loopback.rs): it becomes QEMU with its parent-death
/// signal set, so that the guest dies with the ssh that started it.
fn loopback_proxy(args: &[std::ffi::OsString]) -> ! {
    let Some((qemu, rest)) = args.split_first() else { std::process::exit(2) };
    let error = testbench_process::exec_bound_to_parent(qemu, rest);
    eprintln!("testbench {}: {}: {error}", loopback::PROXY_HELPER, qemu.to_string_lossy());
    std::process::exit(127)
}

/// `--oracle NAME LOG [LIMIT=VALUE ...]`: a built-in oracle over a kept console log, as a
/// post_check runs it (docs/oracles.md). Prints its verdict; exit 0 when the log keeps
/// the rule, 1 when it does not, 2 for a command line it cannot take.
fn oracle_by_hand(args: &[std::ffi::OsString]) -> ! {
    let words: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let [name, log, limits @ ..] = words.as_slice() else {
        eprintln!("usage: cargo testbench {} NAME CONSOLE_LOG [LIMIT=VALUE ...]", oracles::ORACLE_FLAG);
        std::process::exit(2)
    };
    let text = match std::fs::read(log) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            eprintln!("error: {log}: {e}");
            std::process::exit(2)
        }
    };
    match oracles::run(name, &text, limits) {
        Ok(summary) => {
            println!("{summary}");
            std::process::exit(0)
        }
        Err(why) => {
            println!("{why}");
            std::process::exit(1)
        }
    }
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == boot::parts::net::PEER_HELPER) {
        peer_helper(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == loopback::PROXY_HELPER) {
        loopback_proxy(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == oracles::ORACLE_FLAG) {
        oracle_by_hand(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == deadlines::FLAG) {
        deadlines::measure(&workspace_root(), &args[2..]);
    }
    if args.get(1).is_some_and(|a| a == bisect::WORD) {
        bisect::main(&workspace_root(), &args[2..]);
    }
    if args.get(1).is_some_and(|a| a == history::show::WORD) {
        history::show::main(&workspace_root(), &args[2..]);
    }
    if args.get(1).is_some_and(|a| a == coverage::which::WORD) {
        coverage::which::main(&workspace_root(), &args[2..]);
    }
    let flags = cli::Flags::parse();
    // Kept for a refusal of the command line itself: its JSON and JUnit still say why.
    let junit = flags.junit.clone();
    let format = if flags.message_format == "json" { cli::MessageFormat::Json } else { cli::MessageFormat::Human };
    let options = match flags.validate() {
        Ok(options) => options,
        Err(error) => {
            let mut reporter = report::Reporter::new(format, false);
            if let Some(path) = junit {
                reporter.add(Box::new(report::Junit::new(path)));
            }
            let refused = BenchError::Refused(vec![error.to_string()]);
            std::process::exit(runner::report_error(&mut reporter, refused));
        }
    };
    let color = report::use_color(
        options.color,
        std::io::IsTerminal::is_terminal(&std::io::stdout()),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let mut reporter = report::Reporter::new(options.format, color);
    if let Some(path) = &options.junit {
        reporter.add(Box::new(report::Junit::new(path.clone())));
    }
    let status = match bench(&options, &mut reporter) {
        Ok(finished) => finished.exit_status(),
        Err(error) => runner::report_error(&mut reporter, error),
    };
    std::process::exit(status);
}

/// The workspace, its configuration and the setup, then the run.
fn bench(options: &cli::Options, reporter: &mut report::Reporter) -> Result<error::Finished, BenchError> {
    let root = workspace_root();
    let config = config::load(&root).map_err(|error| BenchError::Refused(vec![error.to_string()]))?;
    if !options.list {
        setup(&root)?;
    }
    // A relative --cases is made absolute here, so the replay line works from anywhere.
    let cases_flag = options.cases.as_ref().map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.clone()));
    let cases_dir = match &cases_flag {
        Some(dir) => dir.clone(),
        None => root.join("tests"),
    };
    let workspace = workspace::Workspace { root, cases_dir, cases_flag, config };
    runner::run(&workspace, options, reporter)
}
