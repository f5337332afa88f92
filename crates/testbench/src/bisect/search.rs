//! The search itself, without I/O: the commits from the good end to the bad end in order,
//! what each step found, and which commit to try next. A skipped commit (its build
//! failed, the host lacked something, another failure hid this one) is stepped around as
//! `git bisect skip` does: the untried commit nearest the middle is tried instead.

/// What one commit's step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Good,
    Bad,
    /// Neither: the commit tells nothing of this bug.
    Skip,
}

/// Where the search stands: `marks[i]` is what commit `i` found (`commits[0]` the good
/// end, the last the bad end).
#[derive(Debug)]
pub struct Search {
    marks: Vec<Option<Mark>>,
}

/// How the search ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// The first bad commit's index; the one before it is good.
    Culprit(usize),
    /// Every commit between the last good one and the first bad one was skipped: the
    /// culprit is one of `first..=last` (indices).
    Range { first: usize, last: usize },
}

impl Search {
    /// A search over `count` commits, the first good and the last bad (both still to be
    /// tried by the caller, who marks them).
    pub fn new(count: usize) -> Search {
        assert!(count >= 2, "a search needs its two ends");
        Search { marks: vec![None; count] }
    }

    pub fn mark(&mut self, index: usize, mark: Mark) {
        self.marks[index] = Some(mark);
    }

    /// The last good commit and the first bad one after it.
    fn bounds(&self) -> (usize, usize) {
        let good = (0..self.marks.len()).rev().find(|&i| self.marks[i] == Some(Mark::Good)).unwrap_or(0);
        let bad =
            (good + 1..self.marks.len()).find(|&i| self.marks[i] == Some(Mark::Bad)).unwrap_or(self.marks.len() - 1);
        (good, bad)
    }

    /// The next commit to try, or how the search ended.
    pub fn next(&self) -> Result<usize, Found> {
        let (good, bad) = self.bounds();
        if bad == good + 1 {
            return Err(Found::Culprit(bad));
        }
        let middle = good + (bad - good) / 2;
        // The untried commit nearest the middle, below it first at equal distance.
        for distance in 0..(bad - good) {
            for index in [middle.checked_sub(distance), Some(middle + distance)].into_iter().flatten() {
                if index > good && index < bad && self.marks[index].is_none() {
                    return Ok(index);
                }
            }
        }
        Err(Found::Range { first: good + 1, last: bad })
    }
}

/// The bound on a search's boots over `count` commits (the good end excluded, the bad end
/// included): ceil(log2 count) + 2, the two ends among them.
pub fn step_bound(count: usize) -> usize {
    let count = count.max(1);
    (usize::BITS - (count - 1).leading_zeros()) as usize + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run a search over `n` commits (plus the good end) whose first bad one is `culprit`,
    /// with `skipped` never deciding: how it ended, and how many commits it tried (the
    /// ends included).
    fn run(n: usize, culprit: usize, skipped: &[usize]) -> (Found, usize) {
        let mut search = Search::new(n + 1);
        search.mark(0, Mark::Good);
        search.mark(n, Mark::Bad);
        let mut tried = 2;
        loop {
            match search.next() {
                Ok(i) => {
                    let mark = match (skipped.contains(&i), i >= culprit) {
                        (true, _) => Mark::Skip,
                        (false, true) => Mark::Bad,
                        (false, false) => Mark::Good,
                    };
                    if mark != Mark::Skip {
                        tried += 1;
                    }
                    search.mark(i, mark);
                }
                Err(found) => return (found, tried),
            }
        }
    }

    #[test]
    fn every_culprit_is_found_within_the_bound() {
        for n in [1, 2, 3, 7, 8, 9, 31, 60, 100, 129] {
            for culprit in 1..=n {
                let (found, tried) = run(n, culprit, &[]);
                assert_eq!(found, Found::Culprit(culprit), "n {n}");
                assert!(tried <= step_bound(n), "n {n} culprit {culprit}: {tried} > {}", step_bound(n));
            }
        }
        assert_eq!((step_bound(1), step_bound(2), step_bound(8), step_bound(9), step_bound(100)), (2, 3, 5, 6, 9));
    }

    #[test]
    fn skipped_commits_are_stepped_around_and_a_skipped_culprit_gives_a_range() {
        // The build broke for 20, 21 and 24 to 26, around the culprit 23: 22 builds, so
        // the culprit is found exactly.
        assert_eq!(run(40, 23, &[20, 21, 24, 25, 26]).0, Found::Culprit(23));
        // The build broke for 19 to 22, just before the culprit 23 or around the culprit
        // 21: the last good commit is 18 either way, and the first bad one 23, so the
        // culprit is one of 19 to 23.
        assert_eq!(run(40, 23, &[19, 20, 21, 22]).0, Found::Range { first: 19, last: 23 });
        assert_eq!(run(40, 21, &[19, 20, 21, 22]).0, Found::Range { first: 19, last: 23 });
    }
}
