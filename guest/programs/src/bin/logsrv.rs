//! The log server, the first program (init's place): the trusted tester. It owns the
//! console; every other program's text reaches the UART only through it, each line
//! prefixed with the sender's badge as the kernel delivered it: `[pid N]` for a badge
//! below 0x100, `[badge N]` for any other.
//!
//! It reads the `programs` data entry (one line per program: its entry name, then the
//! budgets it gets, of root, system and users), checks every line before it starts
//! anything (the portable `listing` crate, whose doc has the rules), starts each program
//! with its place (2 on) as badge and an equal share of its pages, and then serves:
//! lines, exit and fault notices, and done().
//!
//! Its own lines:
//!
//! ```text
//! [server] refused programs line N: <why>        then power-off 255
//! [server] started <name> place N pid P
//! [server] <name> place N pid P exited with status S
//! [server] <name> place N pid P faulted: scause C stval V sepc E
//! [server] done: <badge>                         then power-off 0
//! [server] all programs ended                    then power-off 0 (no done came)
//! ```

#![no_std]
#![no_main]

use abi::{msg, Message, FIRST_PLACE, STATUS_REFUSED};
use listing::{Name, Refusal, Why};
use rt::{log, Line};

rt::program!("server", main);

/// Pages it keeps for itself out of its quota.
const OWN_PAGES: usize = 64;

#[derive(Clone, Copy)]
struct Program {
    name: Name,
    pid: u32,
}

impl Program {
    fn name(&self) -> &str {
        self.name.as_str()
    }
}

fn refuse(line: usize, why: core::fmt::Arguments) -> ! {
    rt::log!("[server] refused programs line {line}: {why}");
    rt::power_off(STATUS_REFUSED)
}

fn main(_pid: u32, _badge: u32) {
    let mut bytes = [0u8; listing::MAX_LEN];
    let len = match rt::entry_info(b"programs") {
        Ok((len, abi::KIND_DATA)) if len <= listing::MAX_LEN => len,
        Ok((len, abi::KIND_DATA)) => refuse(0, format_args!("{}", Why::TooLong(len))),
        _ => 0,
    };
    if rt::entry_read(b"programs", 0, &mut bytes[..len]) != Ok(len) {
        refuse(0, format_args!("the entry cannot be read"));
    }
    let is_program = |name: &str| matches!(rt::entry_info(name.as_bytes()), Ok((_, abi::KIND_PROGRAM)));
    let accepted = match listing::parse(&bytes[..len], is_program) {
        Ok(accepted) => accepted,
        Err(Refusal { line, why }) => refuse(line, format_args!("{why}")),
    };
    let mut programs = [Program { name: Name::EMPTY, pid: 0 }; listing::MAX_PROGRAMS];
    let count = accepted.names().len();
    for (program, name) in programs.iter_mut().zip(accepted.names()) {
        program.name = *name;
    }
    if count == 0 {
        log(b"[server] all programs ended");
        rt::power_off(0);
    }
    let share = (abi::FIRST_QUOTA_PAGES - OWN_PAGES) / count;
    for (k, program) in programs[..count].iter_mut().enumerate() {
        let place = FIRST_PLACE + k as u32;
        match rt::spawn(program.name.as_bytes(), place, share) {
            Ok(pid) => {
                program.pid = pid;
                rt::log!("[server] started {} place {place} pid {pid}", program.name());
            }
            Err(e) => refuse(k + 1, format_args!("cannot start {}: {}", program.name(), e.name())),
        }
    }
    serve(&programs[..count]);
}

fn serve(programs: &[Program]) -> ! {
    let mut alive = programs.len();
    let mut m = Message::EMPTY;
    loop {
        if rt::recv(&mut m).is_err() {
            continue;
        }
        let place = m.badge;
        let name = place
            .checked_sub(FIRST_PLACE)
            .and_then(|k| programs.get(k as usize))
            .filter(|p| p.pid == m.pid)
            .map_or("?", |p| p.name());
        match m.kind {
            msg::LOG => relay(m.badge, &m.data[..(m.len as usize).min(m.data.len())]),
            msg::DONE => {
                rt::log!("[server] done: {}", m.badge);
                rt::power_off(0);
            }
            msg::EXIT | msg::FAULT => {
                if m.kind == msg::EXIT {
                    rt::log!("[server] {name} place {place} pid {} exited with status {}", m.pid, m.status as i32);
                } else {
                    rt::log!(
                        "[server] {name} place {place} pid {} faulted: scause {:#x} stval {:#x} sepc {:#x}",
                        m.pid,
                        m.status,
                        m.addr,
                        m.pc
                    );
                }
                alive -= 1;
                if alive == 0 {
                    log(b"[server] all programs ended");
                    rt::power_off(0);
                }
            }
            _ => {}
        }
    }
}

/// Prints a client's text: every piece between line breaks (LF or CR) is a line of its
/// own, and every line starts with the sender's badge.
fn relay(badge: u32, text: &[u8]) {
    use core::fmt::Write;
    let mut prefix = Line::new();
    if abi::is_place(badge) {
        let _ = write!(prefix, "[pid {badge}] ");
    } else {
        let _ = write!(prefix, "[badge {badge}] ");
    }
    let mut printed = false;
    for piece in text.split(|&b| b == b'\n' || b == b'\r') {
        if piece.is_empty() && printed {
            continue;
        }
        let mut line = Line::new();
        line.push(prefix.as_bytes());
        line.push(piece);
        log(line.as_bytes());
        printed = true;
    }
}
