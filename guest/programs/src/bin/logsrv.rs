//! The log server, the first program (init's place): the trusted tester. It owns the
//! console; every other program's text reaches the UART only through it, each line
//! prefixed with the sender's badge as the kernel delivered it: `[pid N]` for a badge
//! below 0x100, `[badge N]` for any other.
//!
//! It reads the `programs` data entry (one line per program: its entry name, then the
//! budgets it gets, of root, system and users), checks every line before it starts
//! anything, starts each program with its place (2 on) as badge and an equal share of
//! its pages, and then serves: lines, exit and fault notices, and done().
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

use abi::{msg, Message, FIRST_PLACE, LAST_PLACE, NAME_LEN, STATUS_REFUSED};
use rt::{log, Line};

rt::program!("server", main);

/// Programs the server can start: one per place.
const MAX_PROGRAMS: usize = (LAST_PLACE - FIRST_PLACE + 1) as usize;
/// The longest `programs` entry it reads.
const LISTING_MAX: usize = 2048;
/// Pages it keeps for itself out of its quota.
const OWN_PAGES: usize = 64;
const BUDGETS: [&[u8]; 3] = [b"root", b"system", b"users"];

#[derive(Clone, Copy)]
struct Program {
    name: [u8; NAME_LEN],
    len: usize,
    pid: u32,
}

impl Program {
    fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..self.len]).unwrap_or("?")
    }
}

fn refuse(line: usize, why: core::fmt::Arguments) -> ! {
    rt::log!("[server] refused programs line {line}: {why}");
    rt::power_off(STATUS_REFUSED)
}

/// Checks one line; returns the entry name.
fn check_line(number: usize, line: &[u8]) -> Program {
    if let Some(b) = line.iter().find(|b| !(0x20..0x7f).contains(*b)) {
        refuse(number, format_args!("byte {b:#04x} is not printable ASCII"));
    }
    // Printable ASCII is UTF-8.
    let text = core::str::from_utf8(line).unwrap_or("");
    let mut words = text.split(' ');
    let name = words.next().unwrap_or("");
    if name.is_empty() || name.len() > NAME_LEN {
        refuse(number, format_args!("no entry name"));
    }
    match rt::entry_info(name.as_bytes()) {
        Ok((_, abi::KIND_PROGRAM)) => {}
        _ => refuse(number, format_args!("the bundle has no program {name}")),
    }
    let mut seen = [false; BUDGETS.len()];
    for budget in words {
        let Some(k) = BUDGETS.iter().position(|b| *b == budget.as_bytes()) else {
            refuse(number, format_args!("unknown budget {budget:?}"));
        };
        if seen[k] {
            refuse(number, format_args!("budget {budget} named twice"));
        }
        seen[k] = true;
    }
    let mut program = Program { name: [0; NAME_LEN], len: name.len(), pid: 0 };
    program.name[..name.len()].copy_from_slice(name.as_bytes());
    program
}

fn main(_pid: u32, _badge: u32) {
    let mut listing = [0u8; LISTING_MAX];
    let len = match rt::entry_info(b"programs") {
        Ok((len, abi::KIND_DATA)) if len <= LISTING_MAX => len,
        Ok((len, abi::KIND_DATA)) => refuse(0, format_args!("the entry has {len} bytes, more than {LISTING_MAX}")),
        _ => 0,
    };
    if rt::entry_read(b"programs", 0, &mut listing[..len]) != Ok(len) {
        refuse(0, format_args!("the entry cannot be read"));
    }
    let mut programs = [Program { name: [0; NAME_LEN], len: 0, pid: 0 }; MAX_PROGRAMS];
    let mut count = 0;
    let text = listing[..len].strip_suffix(b"\n").unwrap_or(&listing[..len]);
    if !text.is_empty() {
        for (k, line) in text.split(|&b| b == b'\n').enumerate() {
            if count == MAX_PROGRAMS {
                refuse(k + 1, format_args!("more than {MAX_PROGRAMS} programs"));
            }
            programs[count] = check_line(k + 1, line);
            count += 1;
        }
    }
    if count == 0 {
        log(b"[server] all programs ended");
        rt::power_off(0);
    }
    let share = (abi::FIRST_QUOTA_PAGES - OWN_PAGES) / count;
    for (k, program) in programs[..count].iter_mut().enumerate() {
        let place = FIRST_PLACE + k as u32;
        match rt::spawn(&program.name[..program.len], place, share) {
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
