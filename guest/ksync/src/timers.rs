//! The kernel's timer queue: who sleeps until which tick, earliest first.

/// The queue has no room for another sleeper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// Up to `N` sleepers, each an id (a process slot, a task) with the tick it wakes at,
/// kept in wake order; sleepers with the same tick wake in the order they were added.
/// An id is in the queue at most once.
pub struct TimerQueue<const N: usize> {
    /// `(tick, id)`, sorted by tick, the first `len` in use.
    entries: [(u64, usize); N],
    len: usize,
}

impl<const N: usize> Default for TimerQueue<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> TimerQueue<N> {
    /// An empty queue.
    pub const fn new() -> Self {
        TimerQueue { entries: [(0, 0); N], len: 0 }
    }

    /// How many sleep.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none sleeps.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sleepers, earliest first, as `(tick, id)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.entries[..self.len].iter().copied()
    }

    /// `id` sleeps until `tick`; an id already asleep moves to the new tick.
    pub fn add(&mut self, id: usize, tick: u64) -> Result<(), Full> {
        self.cancel(id);
        if self.len == N {
            return Err(Full);
        }
        // After every sleeper due at or before `tick`: equal ticks keep their order.
        let at = self.entries[..self.len].iter().position(|&(t, _)| t > tick).unwrap_or(self.len);
        self.entries.copy_within(at..self.len, at + 1);
        self.entries[at] = (tick, id);
        self.len += 1;
        Ok(())
    }

    /// Takes `id` out of the queue; whether it was in it.
    pub fn cancel(&mut self, id: usize) -> bool {
        let Some(at) = self.entries[..self.len].iter().position(|&(_, i)| i == id) else {
            return false;
        };
        self.entries.copy_within(at + 1..self.len, at);
        self.len -= 1;
        true
    }

    /// The earliest tick anyone wakes at.
    pub fn next(&self) -> Option<u64> {
        self.entries[..self.len].first().map(|&(t, _)| t)
    }

    /// Wakes every sleeper due at `now` (tick <= now), earliest first, handing each id
    /// to `wake`; returns the earliest tick left.
    pub fn expire(&mut self, now: u64, mut wake: impl FnMut(usize)) -> Option<u64> {
        let due = self.entries[..self.len].iter().take_while(|&&(t, _)| t <= now).count();
        for &(_, id) in &self.entries[..due] {
            wake(id);
        }
        self.entries.copy_within(due..self.len, 0);
        self.len -= due;
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken<const N: usize>(q: &mut TimerQueue<N>, now: u64) -> ([usize; N], usize, Option<u64>) {
        let (mut ids, mut n) = ([0; N], 0);
        let next = q.expire(now, |id| {
            ids[n] = id;
            n += 1;
        });
        (ids, n, next)
    }

    #[test]
    fn wakes_in_tick_order_and_equal_ticks_in_order_added() {
        let mut q = TimerQueue::<4>::new();
        q.add(1, 30).unwrap();
        q.add(2, 10).unwrap();
        q.add(3, 30).unwrap();
        q.add(4, 20).unwrap();
        assert_eq!(q.add(5, 1), Err(Full));
        let (ids, n, next) = woken(&mut q, 19);
        assert_eq!((&ids[..n], next), (&[2][..], Some(20)));
        let (ids, n, next) = woken(&mut q, 30);
        assert_eq!((&ids[..n], next), (&[4, 1, 3][..], None));
        assert!(q.is_empty());
    }

    #[test]
    fn a_sleeper_is_queued_once_and_can_be_cancelled() {
        let mut q = TimerQueue::<2>::new();
        q.add(7, 50).unwrap();
        q.add(7, 5).unwrap();
        assert_eq!(q.len(), 1);
        assert_eq!(q.next(), Some(5));
        assert!(q.cancel(7));
        assert!(!q.cancel(7));
        assert_eq!(q.next(), None);
    }

    #[test]
    fn nothing_due_wakes_nobody() {
        let mut q = TimerQueue::<2>::new();
        q.add(1, 100).unwrap();
        let (_, n, next) = woken(&mut q, 99);
        assert_eq!((n, next), (0, Some(100)));
    }
}
