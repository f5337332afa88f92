//! The scheduler's rules, with no sockets and no clock of its own: which waiting job
//! starts, on which cores and ports, and what each of the others waits for.
//!
//! - **Cores.** The daemon's cores are two sets: the general set, and the quiet set for
//!   host-clock work. A job asks N general cores and gets the N lowest free ones; a
//!   quiet job holds the whole quiet set, one quiet job at a time, while the general set
//!   keeps working. With no quiet set (a small machine), a quiet job holds every general
//!   core instead: host-clock work runs with the machine to itself.
//! - **Ports.** N contiguous ports of the daemon's pool that no lease holds and that a
//!   probe finds free (a port a stranger holds is skipped).
//! - **Locks.** A named lock is taken exclusively or shared: sharers run beside each
//!   other, an exclusive taker alone among the jobs naming the lock.
//! - **Order.** Jobs are served in arrival order for each thing they wait for: once a
//!   job waits for cores (or ports), no later job takes cores (ports) of the same set
//!   ahead of it, and once a job waits to take a lock exclusively, no later sharer
//!   starts ahead of it, so a stream of small jobs or of sharers cannot starve it. A job
//!   that waits only for a lock holds nobody's cores back meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub type JobId = u64;

/// What a job asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub cores: usize,
    pub quiet: bool,
    pub ports: u16,
    /// Locks taken exclusively.
    pub locks: Vec<String>,
    /// Locks taken shared.
    pub shares: Vec<String>,
}

/// What a job was given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub cores: Vec<usize>,
    /// The leased ports, both ends included.
    pub ports: Option<(u16, u16)>,
}

/// The machine the daemon hands out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub general: Vec<usize>,
    pub quiet: Vec<usize>,
    /// The port pool, both ends included.
    pub ports: (u16, u16),
}

/// The process a lease belongs to: its pid and its start time (clock ticks after boot,
/// /proc's field 22), so a pid the kernel hands out again is never taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: i32,
    pub start: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub cwd: String,
    pub ask: Ask,
    pub owner: Owner,
    /// When it asked, in milliseconds since the Unix epoch.
    pub asked_ms: u64,
    /// Its grant and when it was given, once it runs.
    pub running: Option<(Grant, u64)>,
    /// The command the client started under the lease, once it has.
    pub child: Option<i32>,
    /// What it waits for, while it waits.
    pub waits_for: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sched {
    pub jobs: BTreeMap<JobId, Job>,
    pub next_id: JobId,
}

/// A lock name: 1 to 64 of `[A-Za-z0-9_.-]`.
pub fn valid_lock_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// An ask the daemon's machine can never grant ([`Machine::check`]), in the words the
/// refused client prints.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// More cores than the set (`quiet` or `general`) it would take them from.
    #[error("asks {asked} cores; the daemon's {which} set has {} ({})", set.len(), cores_text(set))]
    Cores { asked: usize, which: &'static str, set: Vec<usize> },
    #[error("asks {asked} ports; the daemon's pool {}-{} has {}", pool.0, pool.1, u32::from(pool.1) - u32::from(pool.0) + 1)]
    Ports { asked: u16, pool: (u16, u16) },
    #[error("lock name {0:?}: a lock is named by 1 to 64 of A-Z a-z 0-9 _ . -")]
    LockName(String),
    #[error("lock {0:?} is asked both exclusively (--lock) and shared (--share)")]
    LockBothWays(String),
}

/// What a job waits for besides locks, as `q ls` and the waiting client say it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Wait {
    /// An earlier job waits for cores of the same set (`quiet` or `general`).
    #[error("{set} cores: job {ahead} waits ahead for them")]
    CoresBehind { set: &'static str, ahead: JobId },
    #[error("ports: job {ahead} waits ahead for them")]
    PortsBehind { ahead: JobId },
    #[error("the {set} set, held by quiet job {job} ({name})")]
    QuietSetHeld { set: &'static str, job: JobId, name: String },
    #[error("the whole {set} set for a quiet job ({busy} of its {size} cores busy)")]
    QuietSetBusy { set: &'static str, busy: usize, size: usize },
    #[error("{asked} general cores ({free} free)")]
    GeneralCores { asked: usize, free: usize },
    #[error("{n} contiguous free ports of the pool {lo}-{hi}")]
    Ports { n: u32, lo: u16, hi: u16 },
}

/// Cores a person wrote ([`parse_cores`]) that are not cores of this machine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoresError {
    #[error("{0:?} is not a core or a range of cores (such as 0-3)")]
    NotCores(String),
    #[error("{part:?}: {lo} is above {hi}")]
    Reversed { part: String, lo: usize, hi: usize },
    #[error("{part:?}: core {hi} is not on this machine (it has {limit})")]
    Absent { part: String, hi: usize, limit: usize },
}

impl Machine {
    /// Whether `ask` can ever be granted here; if not, the words that say why.
    pub fn check(&self, ask: &Ask) -> Result<(), AskError> {
        let set = if ask.quiet && !self.quiet.is_empty() { &self.quiet } else { &self.general };
        if ask.cores > set.len() {
            let which = if ask.quiet && !self.quiet.is_empty() { "quiet" } else { "general" };
            return Err(AskError::Cores { asked: ask.cores, which, set: set.clone() });
        }
        let pool = u32::from(self.ports.1) - u32::from(self.ports.0) + 1;
        if u32::from(ask.ports) > pool {
            return Err(AskError::Ports { asked: ask.ports, pool: self.ports });
        }
        for name in ask.locks.iter().chain(&ask.shares) {
            if !valid_lock_name(name) {
                return Err(AskError::LockName(name.clone()));
            }
        }
        if let Some(both) = ask.locks.iter().find(|name| ask.shares.contains(name)) {
            return Err(AskError::LockBothWays(both.clone()));
        }
        Ok(())
    }
}

impl Sched {
    /// Queue a job; it waits until [`Sched::schedule`] grants it.
    pub fn submit(&mut self, mut job: Job) -> JobId {
        self.next_id += 1;
        job.id = self.next_id;
        job.running = None;
        let id = job.id;
        self.jobs.insert(id, job);
        id
    }

    /// End a job, waiting or running: what it held is free again.
    pub fn end(&mut self, id: JobId) -> Option<Job> {
        self.jobs.remove(&id)
    }

    fn running(&self) -> impl Iterator<Item = (&Job, &Grant)> {
        self.jobs.values().filter_map(|job| job.running.as_ref().map(|(grant, _)| (job, grant)))
    }

    /// Start every waiting job that may start now, in arrival order, and note for each
    /// of the others what it waits for. `port_free` probes a host port. Returns the jobs
    /// started.
    pub fn schedule(&mut self, machine: &Machine, now_ms: u64, port_free: &dyn Fn(u16) -> bool) -> Vec<JobId> {
        let mut started = Vec::new();
        let mut cores_blocked: BTreeMap<&'static str, JobId> = BTreeMap::new();
        let mut ports_blocked: Option<JobId> = None;
        let mut excl_waiting: BTreeMap<String, JobId> = BTreeMap::new();
        let mut any_waiting: BTreeMap<String, JobId> = BTreeMap::new();
        let waiting: Vec<JobId> = self.jobs.values().filter(|j| j.running.is_none()).map(|j| j.id).collect();
        for id in waiting {
            let ask = self.jobs[&id].ask.clone();
            // Locks first: a job that cannot have them waits for them alone.
            let lock_wait = ask
                .locks
                .iter()
                .find_map(|name| {
                    self.holder_of(name, false).or_else(|| {
                        any_waiting.get(name).map(|ahead| format!("the lock {name}: job {ahead} waits ahead for it"))
                    })
                })
                .or_else(|| {
                    ask.shares.iter().find_map(|name| {
                        self.holder_of(name, true).or_else(|| {
                            excl_waiting
                                .get(name)
                                .map(|ahead| format!("the lock {name}: job {ahead} waits ahead to take it exclusively"))
                        })
                    })
                });
            let pool = self.pool_of(machine, &ask);
            let cores = match (ask.cores, cores_blocked.get(pool.0)) {
                (0, _) if !ask.quiet => Ok(Vec::new()),
                (_, Some(ahead)) => Err(Wait::CoresBehind { set: pool.0, ahead: *ahead }),
                _ => self.free_cores(machine, &ask),
            };
            let ports = match (ask.ports, ports_blocked) {
                (0, _) => Ok(None),
                (_, Some(ahead)) => Err(Wait::PortsBehind { ahead }),
                (n, None) => self.free_ports(machine, n, port_free).map(Some),
            };
            match (lock_wait, cores, ports) {
                (None, Ok(cores), Ok(ports)) => {
                    let job = self.jobs.get_mut(&id).expect("a waiting job is in the table");
                    job.running = Some((Grant { cores, ports }, now_ms));
                    job.waits_for.clear();
                    started.push(id);
                }
                (lock_wait, cores, ports) => {
                    for name in &ask.locks {
                        excl_waiting.entry(name.clone()).or_insert(id);
                        any_waiting.entry(name.clone()).or_insert(id);
                    }
                    for name in &ask.shares {
                        any_waiting.entry(name.clone()).or_insert(id);
                    }
                    // Only a job that waits for nothing but cores (ports) holds them
                    // back from later jobs; one waiting for a lock holds nothing back.
                    let why = if let Some(why) = lock_wait {
                        why
                    } else {
                        let mut why = Vec::new();
                        if let Err(wait) = cores {
                            cores_blocked.entry(pool.0).or_insert(id);
                            why.push(wait.to_string());
                        }
                        if let Err(wait) = ports {
                            ports_blocked.get_or_insert(id);
                            why.push(wait.to_string());
                        }
                        why.join("; ")
                    };
                    self.jobs.get_mut(&id).expect("a waiting job is in the table").waits_for = why;
                }
            }
        }
        started
    }

    /// Which set a job's cores come from, and the set.
    fn pool_of<'m>(&self, machine: &'m Machine, ask: &Ask) -> (&'static str, &'m [usize]) {
        if ask.quiet && !machine.quiet.is_empty() {
            ("quiet", &machine.quiet)
        } else {
            ("general", &machine.general)
        }
    }

    /// Who keeps the lock from being taken (shared when `shared`), in words, if anyone.
    fn holder_of(&self, name: &str, shared: bool) -> Option<String> {
        self.running().find_map(|(job, _)| {
            let exclusive = job.ask.locks.iter().any(|l| l == name);
            let sharing = job.ask.shares.iter().any(|l| l == name);
            if exclusive || (sharing && !shared) {
                let how = if exclusive { "exclusively" } else { "shared" };
                Some(format!("the lock {name}, held {how} by job {} ({}, in {})", job.id, job.name, job.cwd))
            } else {
                None
            }
        })
    }

    fn free_cores(&self, machine: &Machine, ask: &Ask) -> Result<Vec<usize>, Wait> {
        let held: BTreeSet<usize> = self.running().flat_map(|(_, grant)| grant.cores.iter().copied()).collect();
        if ask.quiet {
            let (name, set) = self.pool_of(machine, ask);
            if let Some((job, _)) =
                self.running().find(|(job, g)| g.cores.iter().any(|c| set.contains(c)) && job.ask.quiet)
            {
                return Err(Wait::QuietSetHeld { set: name, job: job.id, name: job.name.clone() });
            }
            if set.iter().any(|c| held.contains(c)) {
                let busy = set.iter().filter(|c| held.contains(c)).count();
                return Err(Wait::QuietSetBusy { set: name, busy, size: set.len() });
            }
            return Ok(set.to_vec());
        }
        let free: Vec<usize> = machine.general.iter().copied().filter(|c| !held.contains(c)).collect();
        if free.len() < ask.cores {
            return Err(Wait::GeneralCores { asked: ask.cores, free: free.len() });
        }
        Ok(free[..ask.cores].to_vec())
    }

    fn free_ports(&self, machine: &Machine, n: u16, port_free: &dyn Fn(u16) -> bool) -> Result<(u16, u16), Wait> {
        let held: Vec<(u16, u16)> = self.running().filter_map(|(_, grant)| grant.ports).collect();
        let (lo, hi) = machine.ports;
        let mut start = u32::from(lo);
        let n = u32::from(n);
        'candidates: while start + n - 1 <= u32::from(hi) {
            let end = start + n - 1;
            if let Some(&(_, held_hi)) = held.iter().find(|(l, h)| u32::from(*l) <= end && u32::from(*h) >= start) {
                start = u32::from(held_hi) + 1;
                continue;
            }
            if let Some(taken) = (start..=end).find(|&port| !port_free(port as u16)) {
                start = taken + 1;
                continue 'candidates;
            }
            return Ok((start as u16, end as u16));
        }
        Err(Wait::Ports { n, lo, hi })
    }
}

/// Cores as a person writes them: `0-3,6`.
pub fn cores_text(cores: &[usize]) -> String {
    if cores.is_empty() {
        return "none".to_string();
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in cores {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == c => *hi = c,
            _ => runs.push((c, c)),
        }
    }
    runs.iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect::<Vec<_>>()
        .join(",")
}

/// Cores as a person writes them (`0-3,6`, or empty for none), each below `limit`.
pub fn parse_cores(text: &str, limit: usize) -> Result<Vec<usize>, CoresError> {
    let mut cores = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| CoresError::NotCores(part.to_string()));
        let (lo, hi) = (number(lo)?, number(hi)?);
        if lo > hi {
            return Err(CoresError::Reversed { part: part.to_string(), lo, hi });
        }
        if hi >= limit {
            return Err(CoresError::Absent { part: part.to_string(), hi, limit });
        }
        cores.extend(lo..=hi);
    }
    Ok(cores.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine { general: vec![0, 1, 2, 3], quiet: vec![4, 5], ports: (23000, 23009) }
    }

    fn ask(cores: usize) -> Ask {
        Ask { cores, ..Ask::default() }
    }

    fn job(name: &str, ask: Ask) -> Job {
        Job {
            id: 0,
            name: name.into(),
            cwd: "/w".into(),
            ask,
            owner: Owner { pid: 1, start: 1 },
            asked_ms: 0,
            running: None,
            child: None,
            waits_for: String::new(),
        }
    }

    fn run(s: &mut Sched, m: &Machine) -> Vec<JobId> {
        s.schedule(m, 0, &|_| true)
    }

    #[test]
    fn cores_are_the_lowest_free_and_a_waiter_holds_later_jobs_back() {
        let m = machine();
        let mut s = Sched::default();
        let a = s.submit(job("a", ask(3)));
        let b = s.submit(job("b", ask(2)));
        let c = s.submit(job("c", ask(1)));
        assert_eq!(run(&mut s, &m), [a]);
        assert_eq!(s.jobs[&a].running.as_ref().unwrap().0.cores, [0, 1, 2]);
        // c would fit on core 3, but b waits ahead of it for cores.
        assert_eq!(s.jobs[&b].waits_for, "2 general cores (1 free)");
        assert_eq!(s.jobs[&c].waits_for, "general cores: job 2 waits ahead for them");
        s.end(a);
        assert_eq!(run(&mut s, &m), [b, c]);
        assert_eq!(s.jobs[&b].running.as_ref().unwrap().0.cores, [0, 1]);
        assert_eq!(s.jobs[&c].running.as_ref().unwrap().0.cores, [2]);
    }

    #[test]
    fn quiet_jobs_hold_the_quiet_set_one_at_a_time_beside_the_general_set() {
        let m = machine();
        let mut s = Sched::default();
        let q1 = s.submit(job("q1", Ask { cores: 1, quiet: true, ..Ask::default() }));
        let q2 = s.submit(job("q2", Ask { cores: 1, quiet: true, ..Ask::default() }));
        let g = s.submit(job("g", ask(4)));
        assert_eq!(run(&mut s, &m), [q1, g]);
        assert_eq!(s.jobs[&q1].running.as_ref().unwrap().0.cores, [4, 5]);
        assert_eq!(s.jobs[&q2].waits_for, "the quiet set, held by quiet job 1 (q1)");
        s.end(q1);
        assert_eq!(run(&mut s, &m), [q2]);
    }

    #[test]
    fn with_no_quiet_set_a_quiet_job_has_the_machine_to_itself() {
        let m = Machine { quiet: vec![], ..machine() };
        let mut s = Sched::default();
        let g = s.submit(job("g", ask(1)));
        let q = s.submit(job("q", Ask { cores: 1, quiet: true, ..Ask::default() }));
        let later = s.submit(job("later", ask(1)));
        assert_eq!(run(&mut s, &m), [g]);
        assert_eq!(s.jobs[&q].waits_for, "the whole general set for a quiet job (1 of its 4 cores busy)");
        assert_eq!(s.jobs[&later].waits_for, "general cores: job 2 waits ahead for them");
        s.end(g);
        assert_eq!(run(&mut s, &m), [q]);
        assert_eq!(s.jobs[&q].running.as_ref().unwrap().0.cores, [0, 1, 2, 3]);
    }

    #[test]
    fn a_waiting_exclusive_taker_is_not_starved_by_a_stream_of_sharers() {
        let m = machine();
        let mut s = Sched::default();
        let share = |s: &mut Sched, n: &str| s.submit(job(n, Ask { shares: vec!["qemu".into()], ..Ask::default() }));
        let s1 = share(&mut s, "s1");
        let s2 = share(&mut s, "s2");
        assert_eq!(run(&mut s, &m), [s1, s2], "sharers run beside each other");
        let x = s.submit(job("x", Ask { locks: vec!["qemu".into()], ..Ask::default() }));
        let s3 = share(&mut s, "s3");
        assert_eq!(run(&mut s, &m), Vec::<JobId>::new());
        assert!(
            s.jobs[&x].waits_for.starts_with("the lock qemu, held shared by job 1 (s1, in /w)"),
            "{}",
            s.jobs[&x].waits_for
        );
        assert_eq!(s.jobs[&s3].waits_for, "the lock qemu: job 3 waits ahead to take it exclusively");
        s.end(s1);
        assert_eq!(run(&mut s, &m), Vec::<JobId>::new());
        s.end(s2);
        assert_eq!(run(&mut s, &m), [x]);
        assert!(s.jobs[&s3].waits_for.starts_with("the lock qemu, held exclusively by job 3"));
        s.end(x);
        assert_eq!(run(&mut s, &m), [s3]);
    }

    #[test]
    fn a_job_waiting_for_a_lock_holds_no_cores_back() {
        let m = machine();
        let mut s = Sched::default();
        let holder = s.submit(job("holder", Ask { cores: 1, locks: vec!["disk".into()], ..Ask::default() }));
        let waiter = s.submit(job("waiter", Ask { cores: 4, locks: vec!["disk".into()], ..Ask::default() }));
        let other = s.submit(job("other", ask(2)));
        assert_eq!(run(&mut s, &m), [holder, other]);
        assert!(s.jobs[&waiter].waits_for.starts_with("the lock disk, held exclusively by job 1"));
        // Once the lock is free the waiter waits for cores, and holds them back.
        s.end(holder);
        let late = s.submit(job("late", ask(1)));
        assert_eq!(run(&mut s, &m), Vec::<JobId>::new());
        assert_eq!(s.jobs[&waiter].waits_for, "4 general cores (2 free)");
        assert_eq!(s.jobs[&late].waits_for, "general cores: job 2 waits ahead for them");
    }

    #[test]
    fn ports_are_contiguous_never_shared_and_skip_a_strangers_port() {
        let m = machine();
        let mut s = Sched::default();
        let a = s.submit(job("a", Ask { ports: 3, ..Ask::default() }));
        let b = s.submit(job("b", Ask { ports: 4, ..Ask::default() }));
        // A stranger holds 23004.
        assert_eq!(s.schedule(&m, 0, &|p| p != 23004), [a, b]);
        assert_eq!(s.jobs[&a].running.as_ref().unwrap().0.ports, Some((23000, 23002)));
        assert_eq!(s.jobs[&b].running.as_ref().unwrap().0.ports, Some((23005, 23008)));
        let c = s.submit(job("c", Ask { ports: 2, ..Ask::default() }));
        assert_eq!(s.schedule(&m, 0, &|p| p != 23004), Vec::<JobId>::new());
        assert_eq!(s.jobs[&c].waits_for, "2 contiguous free ports of the pool 23000-23009");
        s.end(a);
        assert_eq!(s.schedule(&m, 0, &|p| p != 23004), [c]);
        assert_eq!(s.jobs[&c].running.as_ref().unwrap().0.ports, Some((23000, 23001)));
    }

    #[test]
    fn an_ask_the_machine_can_never_grant_is_refused_in_words() {
        let m = machine();
        let refused = |ask: Ask| m.check(&ask).unwrap_err();
        let cores = refused(ask(5));
        assert_eq!(cores, AskError::Cores { asked: 5, which: "general", set: vec![0, 1, 2, 3] });
        assert_eq!(cores.to_string(), "asks 5 cores; the daemon's general set has 4 (0-3)");
        let quiet = refused(Ask { cores: 3, quiet: true, ..Ask::default() });
        assert!(matches!(quiet, AskError::Cores { asked: 3, which: "quiet", .. }));
        assert_eq!(quiet.to_string(), "asks 3 cores; the daemon's quiet set has 2 (4-5)");
        let ports = refused(Ask { ports: 11, ..Ask::default() });
        assert_eq!(ports, AskError::Ports { asked: 11, pool: (23000, 23009) });
        assert_eq!(ports.to_string(), "asks 11 ports; the daemon's pool 23000-23009 has 10");
        let name = refused(Ask { locks: vec!["a b".into()], ..Ask::default() });
        assert_eq!(name, AskError::LockName("a b".into()));
        assert!(name.to_string().contains("1 to 64"));
        let both = refused(Ask { locks: vec!["x".into()], shares: vec!["x".into()], ..Ask::default() });
        assert_eq!(both, AskError::LockBothWays("x".into()));
        assert!(both.to_string().contains("both"));
        assert_eq!(m.check(&ask(4)), Ok(()));
    }

    #[test]
    fn cores_read_and_print_as_ranges() {
        assert_eq!(parse_cores("0-2,5", 8), Ok(vec![0, 1, 2, 5]));
        assert_eq!(parse_cores("", 8), Ok(vec![]));
        let absent = parse_cores("9", 8).unwrap_err();
        assert_eq!(absent, CoresError::Absent { part: "9".into(), hi: 9, limit: 8 });
        assert!(absent.to_string().contains("not on this machine"));
        let reversed = parse_cores("3-1", 8).unwrap_err();
        assert_eq!(reversed, CoresError::Reversed { part: "3-1".into(), lo: 3, hi: 1 });
        assert!(reversed.to_string().contains("above"));
        assert_eq!(parse_cores("x", 8), Err(CoresError::NotCores("x".into())));
        assert_eq!(cores_text(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }
}
