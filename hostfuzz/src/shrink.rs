//! Shrinking a finding's input to the smallest that fails the same way (the same finding
//! kind and `what`), under a time bound. Because every read past the end is zero and zero
//! is the ordinary choice, each step moves toward the most ordinary input: cut the end,
//! delete runs of bytes, zero runs of bytes, lower single bytes. A candidate is kept only
//! when it is smaller (shorter, or as long and lexicographically lower) and still fails
//! the same way.

use std::time::Instant;

/// The shrunk input and how many candidates were tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrunk {
    /// The smallest input found that fails the same way.
    pub input: Vec<u8>,
    /// Candidates run.
    pub tries: usize,
    /// Whether the time bound cut the search short.
    pub timed_out: bool,
}

/// Shrinks `input`, for which `fails` is true, trying candidates until none helps or
/// `deadline` passes. `fails` must be true for the same failure only.
pub fn shrink(input: &[u8], deadline: Instant, mut fails: impl FnMut(&[u8]) -> bool) -> Shrunk {
    let mut best = input.to_vec();
    let mut tries = 0;
    let mut try_one = |best: &mut Vec<u8>, candidate: Vec<u8>| -> Option<bool> {
        if Instant::now() >= deadline {
            return None;
        }
        if (candidate.len(), &candidate) >= (best.len(), best) {
            return Some(false);
        }
        tries += 1;
        let kept = fails(&candidate);
        if kept {
            *best = candidate;
        }
        Some(kept)
    };
    let timed_out = 'search: loop {
        let before = best.clone();
        // Cut the end: halves first, then single bytes.
        let mut cut = best.len() / 2;
        while cut > 0 {
            let candidate = best[..best.len() - cut].to_vec();
            match try_one(&mut best, candidate) {
                None => break 'search true,
                Some(true) => {}
                Some(false) => cut /= 2,
            }
        }
        // Delete, then zero, runs of bytes, from long runs to single bytes.
        for delete in [true, false] {
            let mut run = best.len().next_power_of_two() / 2;
            while run > 0 {
                let mut at = 0;
                while at < best.len() {
                    let end = (at + run).min(best.len());
                    let candidate = if delete {
                        [&best[..at], &best[end..]].concat()
                    } else {
                        let mut c = best.clone();
                        c[at..end].fill(0);
                        c
                    };
                    match try_one(&mut best, candidate) {
                        None => break 'search true,
                        Some(true) if delete => {}
                        _ => at += run,
                    }
                }
                run /= 2;
            }
        }
        // Lower each byte: halve it, then one less.
        for at in 0..best.len() {
            while best[at] > 0 {
                let mut halved = best.clone();
                halved[at] /= 2;
                let mut less = best.clone();
                less[at] -= 1;
                match try_one(&mut best, halved) {
                    None => break 'search true,
                    Some(true) => continue,
                    Some(false) => {}
                }
                match try_one(&mut best, less) {
                    None => break 'search true,
                    Some(true) => continue,
                    Some(false) => break,
                }
            }
        }
        if best == before {
            break false;
        }
    };
    Shrunk { input: best, tries, timed_out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::in_process;
    use crate::rng::Rng;
    use crate::targets::canary;
    use std::time::Duration;

    #[test]
    fn shrink_finds_the_smallest_canary_input() {
        // The first canary finding from seed 1.
        let (input, finding) = (0..1000)
            .find_map(|iter| {
                let input = Rng::for_input(1, iter).input();
                in_process(canary::run, &input).finding().cloned().map(|f| (input, f))
            })
            .expect("the canary finds within 1000 inputs");
        let deadline = Instant::now() + Duration::from_secs(10);
        let shrunk = shrink(&input, deadline, |c| {
            in_process(canary::run, c).finding().is_some_and(|f| f.signature() == finding.signature())
        });
        assert!(!shrunk.timed_out);
        // The smallest u16 whose top twelve bits are all set, little-endian, at read 0.
        assert_eq!(shrunk.input, [0xf0, 0xff]);
        assert!(shrunk.input.len() <= input.len());
    }

    #[test]
    fn shrink_respects_its_deadline() {
        let shrunk = shrink(&[9; 64], Instant::now(), |_| true);
        assert!(shrunk.timed_out);
        assert_eq!(shrunk.input, [9; 64]);
    }
}
