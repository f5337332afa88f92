//! The parser tested with data: every `tests/data/<name>.toml` beside `<name>.expected`,
//! which holds either the refusal or a summary of the validated case.
//! `UPDATE_EXPECT=1 cargo test -p testbench-case` rewrites the expected files.

use std::fmt::Write;
use std::path::Path;

use testbench_case::{parse, Case, Guest, GuestImage, Kind, Session, Step};

/// Each session, a line for its fields and one per step.
fn describe_sessions(out: &mut String, sessions: &[Session]) {
    for session in sessions {
        writeln!(
            out,
            "session {}: user {} key {} pty {} ssh_args {:?} command {:?}",
            session.name, session.user, session.key, session.pty, session.ssh_args, session.command
        )
        .unwrap();
        for p in &session.forbid {
            writeln!(out, "  {}: {}", p.label, p.source()).unwrap();
        }
        for step in &session.steps {
            match step {
                Step::Expect(p) => writeln!(out, "  {}: {}", p.label, p.source()).unwrap(),
                Step::Send(send) => writeln!(out, "  send {:?} {:?}", send.source, send.pieces).unwrap(),
                other => writeln!(out, "  {other:?}").unwrap(),
            }
        }
    }
}

fn describe(case: &Case) -> String {
    let mut out = String::new();
    writeln!(out, "name: {}", case.name).unwrap();
    writeln!(out, "description: {}", case.description).unwrap();
    writeln!(out, "whole_run: {}", case.whole_run).unwrap();
    if let Some(kind) = &case.must_fail_kind {
        writeln!(out, "must_fail kind: {kind}").unwrap();
    }
    if let Some(must_fail) = &case.must_fail {
        writeln!(out, "must_fail: {}", must_fail.source()).unwrap();
    }
    let boot = match &case.kind {
        Kind::Boot(boot) => boot,
        Kind::SshLoopback(loopback) => {
            writeln!(
                out,
                "ssh-loopback: server {} arch {:?} timeout {:?} authorized_keys {:?}",
                loopback.server.name(),
                loopback.arch,
                loopback.timeout,
                loopback.authorized_keys
            )
            .unwrap();
            for p in loopback.server_log.iter().chain(&loopback.server_log_forbid) {
                writeln!(out, "{}: {}", p.label, p.source()).unwrap();
            }
            describe_sessions(&mut out, &loopback.sessions);
            for path in case.paths() {
                writeln!(out, "path {}: {}", path.field, path.path.display()).unwrap();
            }
            return out;
        }
        other => {
            writeln!(out, "{other:#?}").unwrap();
            for path in case.paths() {
                writeln!(out, "path {}: {}", path.field, path.path.display()).unwrap();
            }
            return out;
        }
    };
    for (arch, counts) in &boot.smp {
        writeln!(out, "smp {arch}: {counts:?}").unwrap();
    }
    writeln!(out, "keep_smp: {} timeout_smp: {:?}", boot.keep_smp, boot.timeout_smp).unwrap();
    writeln!(out, "memory_mib: {} timeout: {:?}", boot.memory_mib, boot.timeout).unwrap();
    writeln!(out, "icount: {:?} qemu_seed: {:?} accel: {}", boot.icount, boot.qemu_seed, boot.accel.name()).unwrap();
    if let Some(host) = &boot.host_clock {
        writeln!(out, "host clock: {} note: {:?}", host.reason, host.note).unwrap();
    }
    if boot.rtc_base.is_some() || boot.repeat_exactly {
        writeln!(out, "rtc_base: {:?} repeat_exactly: {}", boot.rtc_base, boot.repeat_exactly).unwrap();
    }
    writeln!(out, "kernel_features: {:?} debug_assertions: {}", boot.kernel_features, boot.debug_assertions).unwrap();
    for p in boot.expect.iter().chain(&boot.forbid) {
        writeln!(out, "{}: {}", p.label, p.source()).unwrap();
    }
    writeln!(out, "poweroff: {} status: {}", boot.poweroff, boot.poweroff_status).unwrap();
    for input in &boot.inputs {
        writeln!(out, "{}: {} send {:?}", input.after.label, input.after.source(), input.send).unwrap();
    }
    match &boot.guest {
        Guest::Built { programs, firmware } => {
            writeln!(out, "built: firmware {firmware:?}").unwrap();
            for entry in programs {
                writeln!(
                    out,
                    "  program {:?} budgets {:?} entry {}",
                    entry.program,
                    entry.budgets,
                    entry.program.entry_name()
                )
                .unwrap();
            }
        }
        Guest::External(guest) => {
            match &guest.image {
                GuestImage::Files { kernel, initrd } => {
                    writeln!(out, "external: kernel {kernel:?} initrd {initrd:?}").unwrap()
                }
                GuestImage::Recipe(recipe) => writeln!(out, "external: recipe {recipe:?}").unwrap(),
                GuestImage::Media { image, cdrom, keep } => {
                    writeln!(out, "external: image {image:?} cdrom {cdrom:?} keep {keep}").unwrap()
                }
            }
            writeln!(
                out,
                "  append {:?} firmware {:?} machine {:?} qemu_args {:?}",
                guest.append, guest.firmware, guest.machine, guest.qemu_args
            )
            .unwrap();
            if let Some(symbols) = &guest.symbols {
                writeln!(out, "  symbols {symbols:?}").unwrap();
            }
        }
    }
    if boot.reporter.is_some() || boot.hostile != Default::default() || !boot.files.is_empty() {
        writeln!(out, "reporter {:?} hostile {:?}", boot.reporter, boot.hostile).unwrap();
        for file in &boot.files {
            writeln!(out, "file {} from {:?} servers {:?}", file.name, file.from, file.servers).unwrap();
        }
    }
    if boot.allow_panic
        || !boot.device_tree.is_empty()
        || !boot.distinct.is_empty()
        || !boot.distinct_across_boots.is_empty()
    {
        writeln!(out, "allow_panic {} device_tree {:?}", boot.allow_panic, boot.device_tree).unwrap();
        for p in boot.distinct.iter().chain(&boot.distinct_across_boots) {
            writeln!(out, "{}: {}", p.label, p.source()).unwrap();
        }
    }
    for (table, disk) in boot.disks.iter() {
        writeln!(out, "{table}: {disk:?}").unwrap();
    }
    if let Some(net) = &boot.net {
        let prefixes: Vec<String> = net.self_forbidden.iter().map(ToString::to_string).collect();
        writeln!(
            out,
            "net: forward {:?} self_forbidden {prefixes:?} truncate_capture {}",
            net.forward, net.truncate_capture
        )
        .unwrap();
        for peer in &net.peers {
            writeln!(out, "  peer {} connections {}", peer.addr, peer.connections).unwrap();
        }
        for dial in &net.dials {
            let after = dial.after.as_ref().map(|p| format!("{}: {}", p.label, p.source()));
            writeln!(
                out,
                "  dial port {} send {:?} expect {:?} after {after:?} until_closed {}",
                dial.port, dial.send, dial.expect, dial.until_closed
            )
            .unwrap();
        }
        if let Some(key) = &net.host_key {
            writeln!(out, "  host_key {}", key.line()).unwrap();
        }
        if let Some(poke) = &net.poke {
            writeln!(
                out,
                "  poke port {} payload {:?} {}: {}",
                poke.port,
                poke.payload,
                poke.after.label,
                poke.after.source()
            )
            .unwrap();
        }
    }
    for p in &boot.expect_after {
        writeln!(out, "{}: {}", p.label, p.source()).unwrap();
    }
    describe_sessions(&mut out, &boot.sessions);
    if let Some(memory) = &boot.memory {
        writeln!(out, "memory: heap_fits {}", memory.heap_fits).unwrap();
    }
    for path in case.paths() {
        writeln!(out, "path {}: {}", path.field, path.path.display()).unwrap();
    }
    out
}

#[test]
fn case_files_parse_or_are_refused_as_expected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 20, "the data set shrank: {} files", entries.len());
    let mut mismatches = Vec::new();
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = format!("tests/{}", path.file_name().unwrap().to_string_lossy());
        let actual = match parse(&shown, &text) {
            Ok(case) => describe(&case),
            Err(error) => format!("error: {error}\n"),
        };
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{} is missing; run with UPDATE_EXPECT=1", expected_path.display()));
        if expected != actual {
            mismatches.push(format!("{}:\n--- expected\n{expected}--- actual\n{actual}", path.display()));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
