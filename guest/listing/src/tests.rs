//! Host tests: every refusal, with its line and text, and what is accepted.

extern crate std;

use super::*;
use std::string::{String, ToString};
use std::vec::Vec;

const PROGRAMS: [&str; 3] = ["checker", "rng", "a-name-of-exactly-32-bytes-long!"];

fn has(name: &str) -> bool {
    PROGRAMS.contains(&name)
}

fn names(listing: &Listing) -> Vec<&str> {
    listing.names().iter().map(Name::as_str).collect()
}

fn accepted(bytes: &[u8]) -> Vec<String> {
    match parse(bytes, has) {
        Ok(listing) => names(&listing).into_iter().map(String::from).collect(),
        Err(r) => panic!("{:?} refused at line {}: {}", String::from_utf8_lossy(bytes), r.line, r.why),
    }
}

/// The refusal's line and the log server's text.
fn refused(bytes: &[u8]) -> (usize, String) {
    match parse(bytes, has) {
        Ok(listing) => panic!("{:?} accepted: {:?}", String::from_utf8_lossy(bytes), names(&listing)),
        Err(r) => (r.line, r.why.to_string()),
    }
}

#[test]
fn empty_listings_have_no_programs() {
    assert!(accepted(b"").is_empty());
    assert!(accepted(b"\n").is_empty());
}

#[test]
fn accepts_names_and_budgets_in_any_order() {
    assert_eq!(accepted(b"checker"), ["checker"]);
    assert_eq!(accepted(b"checker\n"), ["checker"]);
    assert_eq!(accepted(b"checker root system users\nrng users root\nchecker system\n"), ["checker", "rng", "checker"]);
    assert_eq!(accepted(b"a-name-of-exactly-32-bytes-long! root"), ["a-name-of-exactly-32-bytes-long!"]);
}

#[test]
fn at_most_fifteen_programs() {
    assert_eq!(MAX_PROGRAMS, 15);
    let fifteen = "rng\n".repeat(15);
    assert_eq!(accepted(fifteen.as_bytes()).len(), 15);
    let sixteen = "rng\n".repeat(16);
    assert_eq!(refused(sixteen.as_bytes()), (16, "more than 15 programs".to_string()));
    // The count comes first: a sixteenth line is refused whatever it holds.
    let bad = std::format!("{}\x01", fifteen);
    assert_eq!(refused(bad.as_bytes()), (16, "more than 15 programs".to_string()));
}

#[test]
fn refuses_bytes_that_are_not_printable() {
    assert_eq!(refused(b"checker\nrng\x01"), (2, "byte 0x01 is not printable ASCII".to_string()));
    assert_eq!(refused(b"checker\trng"), (1, "byte 0x09 is not printable ASCII".to_string()));
    assert_eq!(refused(b"checker\r\n"), (1, "byte 0x0d is not printable ASCII".to_string()));
    assert_eq!(refused(b"\x7fchecker"), (1, "byte 0x7f is not printable ASCII".to_string()));
    assert_eq!(refused(b"chec\xc3\xa9 bogus"), (1, "byte 0xc3 is not printable ASCII".to_string()));
    // Printable first: the name and the budgets are not looked at.
    assert_eq!(refused(b"nothing bogus\x00"), (1, "byte 0x00 is not printable ASCII".to_string()));
}

#[test]
fn refuses_a_missing_or_overlong_name() {
    assert_eq!(refused(b"checker\n\nrng"), (2, "no entry name".to_string()));
    assert_eq!(refused(b"\n\n"), (1, "no entry name".to_string()));
    assert_eq!(refused(b"checker\n\n"), (2, "no entry name".to_string()));
    assert_eq!(refused(b" checker"), (1, "no entry name".to_string()));
    assert_eq!(refused(b"a-name-of-exactly-33-bytes-long!! root"), (1, "no entry name".to_string()));
}

#[test]
fn refuses_a_program_the_bundle_lacks() {
    assert_eq!(refused(b"checker\nforger root"), (2, "the bundle has no program forger".to_string()));
    // The program before the budgets.
    assert_eq!(refused(b"forger bogus"), (1, "the bundle has no program forger".to_string()));
    assert_eq!(refused(b"Checker"), (1, "the bundle has no program Checker".to_string()));
}

#[test]
fn refuses_unknown_budgets() {
    assert_eq!(refused(b"checker admin"), (1, "unknown budget \"admin\"".to_string()));
    assert_eq!(refused(b"checker root "), (1, "unknown budget \"\"".to_string()));
    assert_eq!(refused(b"checker  root"), (1, "unknown budget \"\"".to_string()));
    assert_eq!(refused(b"checker ROOT"), (1, "unknown budget \"ROOT\"".to_string()));
    assert_eq!(refused(b"rng \"q\\"), (1, "unknown budget \"\\\"q\\\\\"".to_string()));
}

#[test]
fn refuses_a_budget_named_twice() {
    assert_eq!(refused(b"rng\nchecker root users root"), (2, "budget root named twice".to_string()));
    // The first failure of the line wins.
    assert_eq!(refused(b"checker users users bogus"), (1, "budget users named twice".to_string()));
    assert_eq!(refused(b"checker bogus users users"), (1, "unknown budget \"bogus\"".to_string()));
}

#[test]
fn refuses_an_entry_too_long_at_line_zero() {
    let long = "rng\n".repeat(MAX_LEN / 4) + "x";
    assert_eq!(refused(long.as_bytes()), (0, "the entry has 2049 bytes, more than 2048".to_string()));
    let exact = " ".repeat(MAX_LEN);
    assert_eq!(refused(exact.as_bytes()), (1, "no entry name".to_string()));
}

#[test]
fn asks_for_each_line_once_in_order_and_not_after_a_refusal() {
    let mut asked = Vec::new();
    let result = parse(b"rng\nchecker root\n\nrng", |name| {
        asked.push(name.to_string());
        true
    });
    assert_eq!(result.map(|_| ()), Err(Refusal { line: 3, why: Why::NoEntryName }));
    assert_eq!(asked, ["rng", "checker"]);
}
