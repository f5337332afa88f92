//! The scheduler oracle: the reference kernel's trace (`sched-trace`, the lines
//! `kernel: sched: ...` of guest/kernel/src/sched_trace.rs) replayed against the rule the
//! kernel documents (docs/reference-guest.md), from the events alone.
//!
//! The oracle keeps its own account of every slot (runnable, running on a hart, or
//! neither) and its own cursor. Each `picked` must take the first runnable slot at or
//! after the cursor, cyclically, and moves the cursor to the slot after it; each `idle`
//! must find no slot runnable; `woke`, `requeued` and `left` must change a slot from what
//! the account says it was. The first event that breaks the rule or the account fails
//! the log, naming its line. The picks' costs (ticks at the trace's timebase) are held
//! to the limits: `pick_p99_us`, `pick_max_us`; `min_picks` (10 unless given) keeps a
//! log with next to nothing in it from passing.

/// The limits an oracle run is held to.
#[derive(Debug, Default, PartialEq)]
pub struct Limits {
    pub pick_p99_us: Option<f64>,
    pub pick_max_us: Option<f64>,
    pub min_picks: Option<f64>,
}

impl Limits {
    /// `NAME=NUMBER` words.
    pub fn parse(words: &[String]) -> Result<Limits, String> {
        let mut limits = Limits::default();
        for word in words {
            let (name, value) = word.split_once('=').ok_or_else(|| format!("{word:?}: a limit is NAME=NUMBER"))?;
            let value: f64 = value.parse().map_err(|_| format!("{word:?}: {value:?} is not a number"))?;
            let slot = match name {
                "pick_p99_us" => &mut limits.pick_p99_us,
                "pick_max_us" => &mut limits.pick_max_us,
                "min_picks" => &mut limits.min_picks,
                other => return Err(format!("{other:?}: the limits are pick_p99_us, pick_max_us and min_picks")),
            };
            *slot = Some(value);
        }
        Ok(limits)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Out,
    Runnable,
    Running(usize),
}

const MIN_PICKS: usize = 10;

/// Replay the trace in `log`: the summary when every event keeps the rule and the costs
/// keep their limits, or the first line that does not.
pub fn check(log: &str, limits: &Limits) -> Result<String, String> {
    let mut trace = Trace::default();
    for (index, raw) in log.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let Some(event) = line.strip_prefix("kernel: sched: ") else { continue };
        let at = |why: String| format!("sched oracle: line {} ({event:?}): {why}", index + 1);
        trace.take(event).map_err(at)?;
    }
    trace.judge(limits)
}

/// The trace as replayed so far: each slot's state, the rule's cursor, the picks' costs.
#[derive(Default)]
struct Trace {
    slots: Vec<Slot>,
    timebase: u64,
    cursor: usize,
    costs: Vec<u64>,
    idles: usize,
    harts: std::collections::BTreeSet<usize>,
}

/// A word of a trace line as a number.
fn number(word: Option<&&str>) -> Result<u64, String> {
    word.and_then(|w| w.parse().ok()).ok_or_else(|| "not a trace line the oracle reads".to_string())
}

impl Trace {
    /// One trace line (past `kernel: sched: `) replayed, or why it breaks the rule.
    fn take(&mut self, event: &str) -> Result<(), String> {
        let words: Vec<&str> = event.split_whitespace().collect();
        if words.first() == Some(&"slots") {
            // sched: slots N timebase T
            let n = number(words.get(1))? as usize;
            self.timebase = number(words.get(3))?;
            if n == 0 || n > 4096 || self.timebase == 0 || !self.slots.is_empty() {
                return Err("a second header, or one with no slots or no timebase".into());
            }
            self.slots = vec![Slot::Out; n];
            return Ok(());
        }
        if self.slots.is_empty() {
            return Err("an event before the trace's header (sched: slots N timebase T)".into());
        }
        let hart = number(words.first())? as usize;
        self.harts.insert(hart);
        let n = self.slots.len();
        let slot_of = |word: Option<&&str>| -> Result<usize, String> {
            let s = number(word)? as usize;
            if s < n {
                Ok(s)
            } else {
                Err(format!("slot {s}, but there are {n}"))
            }
        };
        let slots = &mut self.slots;
        match words.get(1).copied() {
            Some("woke") => {
                let s = slot_of(words.get(2))?;
                if slots[s] != Slot::Out {
                    return Err(format!("slot {s} woke, but it was already {:?}", slots[s]));
                }
                slots[s] = Slot::Runnable;
            }
            Some("requeued") => {
                let s = slot_of(words.get(2))?;
                if !matches!(slots[s], Slot::Running(_)) {
                    return Err(format!("slot {s} was requeued, but it was not running ({:?})", slots[s]));
                }
                slots[s] = Slot::Runnable;
            }
            Some("left") => {
                let s = slot_of(words.get(2))?;
                if slots[s] == Slot::Out {
                    return Err(format!("slot {s} left, but it was neither runnable nor running"));
                }
                slots[s] = Slot::Out;
            }
            Some("picked") => {
                let s = slot_of(words.get(2))?;
                let cost = number(words.get(4))?;
                self.picked(hart, s, cost)?;
            }
            Some("idle") => {
                let waiting = self.runnable();
                if !waiting.is_empty() {
                    return Err(format!("hart {hart} idled with slots {waiting:?} runnable"));
                }
                self.idles += 1;
            }
            _ => return Err("not a trace line the oracle reads".into()),
        }
        Ok(())
    }

    /// The slots runnable now.
    fn runnable(&self) -> Vec<usize> {
        (0..self.slots.len()).filter(|&i| self.slots[i] == Slot::Runnable).collect()
    }

    /// Hart `hart` picked slot `s`: the rule's pick (the first runnable at or after the
    /// cursor), on a hart that runs nothing else.
    fn picked(&mut self, hart: usize, s: usize, cost: u64) -> Result<(), String> {
        let n = self.slots.len();
        if let Some(busy) = (0..n).find(|&i| self.slots[i] == Slot::Running(hart)) {
            return Err(format!("hart {hart} picked, but slot {busy} still ran on it"));
        }
        let cursor = self.cursor;
        let expected = (0..n).map(|k| (cursor + k) % n).find(|&j| self.slots[j] == Slot::Runnable);
        match expected {
            None => return Err(format!("hart {hart} picked slot {s} with no slot runnable")),
            Some(e) if e != s => {
                return Err(format!(
                    "hart {hart} picked slot {s}, but the rule picks slot {e}: the first runnable at or after the cursor {cursor} (runnable: {:?})",
                    self.runnable()
                ))
            }
            Some(_) => {}
        }
        self.slots[s] = Slot::Running(hart);
        self.cursor = (s + 1) % n;
        self.costs.push(cost);
        Ok(())
    }

    /// The whole trace judged: enough picks, and their costs within the limits.
    fn judge(&self, limits: &Limits) -> Result<String, String> {
        if self.slots.is_empty() {
            return Err("sched oracle: no trace in the log (no line `kernel: sched: slots N timebase T`): was the kernel built with sched-trace?".into());
        }
        let costs = &self.costs;
        let min = limits.min_picks.map_or(MIN_PICKS, |m| m as usize);
        if costs.len() < min {
            return Err(format!(
                "sched oracle: {} picks, fewer than min_picks {min}: too little to judge",
                costs.len()
            ));
        }
        let timebase = self.timebase;
        let us = |ticks: u64| ticks as f64 * 1e6 / timebase as f64;
        let mut sorted = costs.clone();
        sorted.sort_unstable();
        let quantile = |q: f64| us(sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]);
        let (p50, p99, max) = (quantile(0.5), quantile(0.99), us(*sorted.last().expect("at least min_picks")));
        let summary = format!(
            "sched oracle: {} picks and {} idles on {} hart(s), every one by the rule; pick cost p50 {p50:.1} us, p99 {p99:.1} us, max {max:.1} us (timebase {timebase}/s)",
            costs.len(),
            self.idles,
            self.harts.len()
        );
        for (name, limit, value) in [("pick_p99_us", limits.pick_p99_us, p99), ("pick_max_us", limits.pick_max_us, max)]
        {
            if let Some(limit) = limit {
                if value > limit {
                    return Err(format!("sched oracle: {name} {value:.1} is over its limit {limit} ({summary})"));
                }
            }
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(events: &[&str]) -> String {
        let mut text = String::from("kernel: harts 2\nkernel: sched: slots 4 timebase 10000000\n");
        for event in events {
            text.push_str(&format!("kernel: sched: {event}\r\n"));
        }
        text
    }

    fn many(mut events: Vec<&'static str>) -> Vec<&'static str> {
        // Ten more picks of slot 0 on hart 1, each requeued: enough to judge.
        for _ in 0..10 {
            events.extend(["1 picked 0 cost 20", "1 requeued 0"]);
        }
        events
    }

    #[test]
    fn picks_that_keep_the_rule_pass_with_their_costs() {
        let log = trace(&many(vec![
            "0 woke 0",
            "0 woke 2",
            "0 picked 0 cost 30",
            "1 picked 2 cost 50",
            "1 left 2",
            // Slot 0 runs on hart 0: nothing is runnable.
            "1 idle cost 5",
            "0 requeued 0",
            "1 picked 0 cost 10",
            "1 requeued 0",
        ]));
        let summary = check(&log, &Limits::default()).unwrap();
        assert!(summary.starts_with("sched oracle: 13 picks and 1 idles on 2 hart(s), every one by the rule; pick cost p50 2.0 us, p99 5.0 us, max 5.0 us"), "{summary}");
        let error = check(&log, &Limits { pick_p99_us: Some(4.0), ..Limits::default() }).unwrap_err();
        assert!(error.starts_with("sched oracle: pick_p99_us 5.0 is over its limit 4"), "{error}");
    }

    #[test]
    fn a_pick_against_the_rule_fails_naming_the_slot_the_rule_picks() {
        // The cursor is 1 after slot 0's pick: slot 2 comes before slot 0 again.
        let log = trace(&["0 woke 0", "0 woke 2", "0 picked 0 cost 1", "0 requeued 0", "0 picked 0 cost 1"]);
        let error = check(&log, &Limits::default()).unwrap_err();
        assert_eq!(
            error,
            "sched oracle: line 7 (\"0 picked 0 cost 1\"): hart 0 picked slot 0, but the rule picks slot 2: the first runnable at or after the cursor 1 (runnable: [0, 2])"
        );
    }

    #[test]
    fn the_account_of_each_slot_is_kept() {
        let idle = check(&trace(&["0 woke 1", "1 idle cost 3"]), &Limits::default()).unwrap_err();
        assert!(idle.ends_with("hart 1 idled with slots [1] runnable"), "{idle}");
        let twice = check(&trace(&["0 woke 1", "0 woke 1"]), &Limits::default()).unwrap_err();
        assert!(twice.ends_with("slot 1 woke, but it was already Runnable"), "{twice}");
        let busy =
            check(&trace(&["0 woke 1", "0 woke 2", "0 picked 1 cost 1", "0 picked 2 cost 1"]), &Limits::default())
                .unwrap_err();
        assert!(busy.ends_with("hart 0 picked, but slot 1 still ran on it"), "{busy}");
        let requeue = check(&trace(&["0 requeued 3"]), &Limits::default()).unwrap_err();
        assert!(requeue.contains("slot 3 was requeued, but it was not running"), "{requeue}");
        let out = check(&trace(&["0 woke 9"]), &Limits::default()).unwrap_err();
        assert!(out.ends_with("slot 9, but there are 4"), "{out}");
    }

    #[test]
    fn a_log_with_nothing_to_judge_fails() {
        let none = check("kernel: harts 1\n", &Limits::default()).unwrap_err();
        assert!(none.contains("no trace in the log"), "{none}");
        let few = check(&trace(&["0 woke 0", "0 picked 0 cost 1"]), &Limits::default()).unwrap_err();
        assert!(few.contains("1 picks, fewer than min_picks 10"), "{few}");
        assert!(check(
            &trace(&["0 woke 0", "0 picked 0 cost 1"]),
            &Limits { min_picks: Some(1.0), ..Limits::default() }
        )
        .is_ok());
        assert!(Limits::parse(&["pick_p50_us=3".into()]).unwrap_err().contains("the limits are"));
    }
}
