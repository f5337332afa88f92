//! The nearest accepted name to a misspelt one, and the words a refusal offers it in.
//!
//! One rule for every refusal of a name the person wrote: the case files
//! (`testbench-case`), the disk recipes (`testbench-disk`) and, through the case crate,
//! the bench's own refusals of names. A crate of its own so that neither of those two
//! depends on the other for it: the case model stays free of the disk crate's I/O, and
//! the disk crate of the case model. The distance is `strsim`'s Damerau-Levenshtein.

/// The names in `candidates` nearest to `word` by edit distance (transpositions count
/// one), if any is near enough to be a typo of it: at most a third of its length, and at
/// most 3 edits, and never all of it. Several as near are all given, in order (at most
/// three, each once).
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    let mut best: Vec<(usize, &str)> = Vec::new();
    for candidate in candidates {
        let distance = strsim::damerau_levenshtein(word, candidate);
        if distance == 0 || distance > limit || distance >= candidate.chars().count() {
            continue;
        }
        match best.first() {
            Some((d, _)) if distance > *d => {}
            Some((d, _)) if distance < *d => best = vec![(distance, candidate)],
            _ => {
                if !best.iter().any(|(_, c)| *c == candidate) {
                    best.push((distance, candidate))
                }
            }
        }
    }
    best.into_iter().map(|(_, c)| c).take(3).collect()
}

/// "did you mean `a`?" (or "`a` or `b`"), or nothing.
pub fn did_you_mean(near: &[&str]) -> String {
    match near {
        [] => String::new(),
        names => {
            let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("did you mean {}?", quoted.join(" or "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_names_are_typos_not_strangers() {
        assert_eq!(nearest("expext", ["expect", "forbid", "arch"]), ["expect"]);
        assert_eq!(nearest("bench-bot", ["bench-boot", "bench-host-tests", "bench-reset"]), ["bench-boot"]);
        assert_eq!(nearest("tiemout_secs", ["timeout_secs", "timeout_secs_smp"]), ["timeout_secs"]);
        assert!(nearest("zzz", ["arch", "smp"]).is_empty());
        // The word itself is no suggestion; a one-letter name is never "near" a stranger.
        assert!(nearest("arch", ["arch"]).is_empty());
        assert!(nearest("x", ["y"]).is_empty());
    }

    #[test]
    fn as_near_names_come_all_in_order_at_most_three_each_once() {
        assert_eq!(nearest("ext5", ["ext4", "ext3", "ext4", "fat", "ext2", "ext6"]), ["ext4", "ext3", "ext2"]);
        assert_eq!(nearest("fta", ["raw", "ext4", "fat"]), ["fat"]);
    }

    #[test]
    fn the_question_names_each_suggestion_quoted() {
        assert_eq!(did_you_mean(&["a", "b"]), "did you mean `a` or `b`?");
        assert_eq!(did_you_mean(&["a"]), "did you mean `a`?");
        assert_eq!(did_you_mean(&[]), "");
    }
}
