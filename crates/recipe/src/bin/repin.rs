//! `scripts/repin RECIPE...`: re-pins each guest recipe to the current packages of its
//! suite on its mirror (`dists/<suite>/main/binary-<arch>/Packages.gz`), rewrites the
//! recipe's versions, sha256 and pool paths (comments and layout kept), and prints the
//! diff for review. Commits nothing. Exit 0 when every recipe was re-pinned or already
//! current, 1 when one could not be, 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use testbench_recipe::{repin::repin, HttpFetch};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help" || a.starts_with('-')) {
        eprintln!("usage: scripts/repin RECIPE.toml...\n\nRe-pins each recipe's [[package]] version, sha256 and pool to its suite's current index on its mirror, and prints the diff. Review it, then commit it yourself.");
        return if args.iter().any(|a| a == "-h" || a == "--help") { ExitCode::SUCCESS } else { ExitCode::from(2) };
    }
    let mut failed = false;
    for arg in args {
        let path = PathBuf::from(&arg);
        match repin(&mut HttpFetch::default(), &path) {
            Ok(r) if r.changes.is_empty() => println!("{}: every pin is current", path.display()),
            Ok(r) => {
                if let Err(e) = r.write() {
                    eprintln!("error: {e}");
                    failed = true;
                    continue;
                }
                for c in &r.changes {
                    if c.old_name == c.new_name {
                        println!("{}: {} {} -> {}", path.display(), c.old_name, c.old_version, c.new_version);
                    } else {
                        println!(
                            "{}: {} {} -> {} {}",
                            path.display(),
                            c.old_name,
                            c.old_version,
                            c.new_name,
                            c.new_version
                        );
                    }
                }
                print!("{}", r.diff());
            }
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
