//! The case crate does no I/O and asks nothing of the host it runs on (ARCHITECTURE.md):
//! a case file means the same on every machine. Its sources name none of the ways to
//! read a file, the environment or another process; the bench asks those
//! (`crates/testbench/src/runner/intake.rs`).

use std::path::Path;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_case_crate_reads_no_file_and_probes_no_host() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 10, "{files:?}");
    let forbidden = [
        "std::fs",
        "File::",
        "OpenOptions",
        "read_dir",
        "env::var",
        "std::process",
        "Command::new",
        "TcpStream",
        "TcpListener",
        "UdpSocket",
    ];
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            for word in forbidden {
                if line.contains(word) {
                    found.push(format!("{}:{}: {word}", file.display(), number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "the case crate does I/O or asks the host:\n{}", found.join("\n"));
}
