//! One CPU for a run: the runner, its zygote and their children on the same core.
//!
//! A fork server hands the core back and forth between three processes at every input
//! (the runner wakes the zygote, the zygote forks the child and waits for it, the child
//! answers). Left to the scheduler, they spread over the cores, and each hand-over wakes
//! a process on another core: on this two-core virtual machine fdt runs at ~5,600 inputs
//! a second that way against ~10,900 on one core (docs/host-fuzzing.md, "One CPU a
//! run"). So, as AFL does, a campaign or gate run pins itself, before its first fork, to
//! a CPU it may run on where no other process is pinned and no other run holds a claim
//! (a lock file, see [`claim`]); its zygote and children inherit that. A process already
//! limited to one CPU (`taskset`, a Slurm task bound to its CPU) keeps it. With every CPU
//! taken it runs unpinned, and says so. `HOSTFUZZ_CPU=N` chooses the CPU,
//! `HOSTFUZZ_CPU=none` leaves the run unpinned.

use std::sync::OnceLock;

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cpu {
    /// Pinned here to this CPU (chosen, or named by `HOSTFUZZ_CPU`).
    Pinned(usize),
    /// Already limited to this one CPU when it started.
    Given(usize),
    /// Not pinned, and why.
    Unpinned(String),
}

static CHOSEN: OnceLock<Cpu> = OnceLock::new();

/// Pins this process as the module says, once; `HOSTFUZZ_CPU` naming no CPU this process
/// may use is an error that says which it may.
pub fn pin() -> Result<&'static Cpu, String> {
    if let Some(cpu) = CHOSEN.get() {
        return Ok(cpu);
    }
    let allowed = allowed()?;
    let wanted = std::env::var("HOSTFUZZ_CPU").ok().filter(|v| !v.is_empty());
    let cpu = match wanted.as_deref() {
        Some("none") => Cpu::Unpinned("HOSTFUZZ_CPU=none".into()),
        Some(n) => {
            let cpu: usize = n.parse().map_err(|_| format!("HOSTFUZZ_CPU={n}: a CPU number, or none"))?;
            if !allowed.contains(&cpu) {
                return Err(format!("HOSTFUZZ_CPU={n}: this process may run on CPUs {} only", list(&allowed)));
            }
            set(cpu)?;
            Cpu::Pinned(cpu)
        }
        None if allowed.len() == 1 => Cpu::Given(allowed[0]),
        None => {
            let taken = pinned_elsewhere();
            let claims = claims_dir();
            let free = allowed.iter().copied().filter(|c| !taken.contains(c)).find(|&c| claim(claims.as_deref(), c));
            match free {
                Some(cpu) => {
                    set(cpu)?;
                    Cpu::Pinned(cpu)
                }
                None => Cpu::Unpinned(format!(
                    "CPUs {} are each taken (a pinned process, or another run's claim)",
                    list(&allowed)
                )),
            }
        }
    };
    Ok(CHOSEN.get_or_init(|| cpu))
}

/// How the rate line names it: ", on CPU 1", or ", unpinned: why"; empty before [`pin`].
pub fn describe() -> String {
    match CHOSEN.get() {
        Some(Cpu::Pinned(c) | Cpu::Given(c)) => format!(", on CPU {c}"),
        Some(Cpu::Unpinned(why)) => format!(", unpinned: {why}"),
        None => String::new(),
    }
}

/// The directory of the runs' claims on CPUs: `$XDG_RUNTIME_DIR/hostfuzz-cpus`, else
/// `/tmp/hostfuzz-cpus-<uid>`, made 0700; `None` (no claims: the scan alone decides) if it
/// cannot be made or is not a directory of this user's that nobody else may enter.
fn claims_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => std::path::Path::new(&runtime).join("hostfuzz-cpus"),
        None => std::path::PathBuf::from(format!("/tmp/hostfuzz-cpus-{me}")),
    };
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == me && meta.mode() & 0o077 == 0).then_some(dir)
}

/// Claims `cpu` for this run: an exclusive `flock` on `<claims>/<cpu>`, held until the
/// run and its children have all ended, so that two runs starting at once (a Slurm
/// array's tasks on one node, a shell loop) do not both take a CPU the scan saw free.
/// Without a claims directory, true: the scan alone decides.
fn claim(claims: Option<&std::path::Path>, cpu: usize) -> bool {
    static HELD: OnceLock<std::fs::File> = OnceLock::new();
    let Some(claims) = claims else {
        return true;
    };
    lock(&claims.join(cpu.to_string())).is_some_and(|file| HELD.set(file).is_ok())
}

/// `path` (made if missing), open and under an exclusive `flock` of its own; `None` if
/// another open of it holds one.
fn lock(path: &std::path::Path) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).ok()?;
    // SAFETY: flock on a descriptor of ours.
    (unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(file)
}

/// The CPUs this process may run on.
fn allowed() -> Result<Vec<usize>, String> {
    let set = mask().map_err(|e| format!("sched_getaffinity: {e}"))?;
    // SAFETY: CPU_ISSET reads the set within its size.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Limits this process (its one thread: the runner has no other when it pins) to `cpu`.
fn set(cpu: usize) -> Result<(), String> {
    set_mask(&only(cpu)).map_err(|e| format!("sched_setaffinity to CPU {cpu}: {e}"))
}

/// The calling thread's CPU mask.
pub(crate) fn mask() -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is a plain bit array: all zeros is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the kernel fills `set`, of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(set)
}

/// Sets the calling thread's CPU mask (threads it starts later inherit it).
pub(crate) fn set_mask(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: pid 0 is the calling thread; the kernel reads `set`, of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The mask of `cpu` alone (a CPU number below `CPU_SETSIZE`, as the kernel gives).
pub(crate) fn only(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: all zeros is a valid, empty set; CPU_SET writes a bit within it (and
    // panics, not writes, past its end).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set
}

/// The CPUs to which some other user process is pinned (limited to that one CPU), from
/// `/proc/*/status`; kernel threads (no `VmSize`) are not counted.
fn pinned_elsewhere() -> Vec<usize> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|p| p.bytes().all(|b| b.is_ascii_digit()) && *p != me) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        if let Some(cpu) = single_cpu(&status) {
            if !taken.contains(&cpu) {
                taken.push(cpu);
            }
        }
    }
    taken
}

/// The one CPU a user process's `/proc/PID/status` limits it to, if it is one.
fn single_cpu(status: &str) -> Option<usize> {
    if !status.lines().any(|l| l.starts_with("VmSize:")) {
        return None;
    }
    let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(parse_list)?;
    match cpus.as_deref() {
        Some([one]) => Some(*one),
        _ => None,
    }
}

/// A CPU list as the kernel writes it (`0-3,6,8-9`); `None` if it is not one.
fn parse_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        let (lo, hi): (usize, usize) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse().ok()?, hi.parse().ok()?),
            None => {
                let one = part.parse().ok()?;
                (one, one)
            }
        };
        if lo > hi || hi - lo > 1 << 16 {
            return None;
        }
        out.extend(lo..=hi);
    }
    Some(out)
}

/// `cpus` as a list the way the kernel writes one.
fn list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_and_write_as_the_kernel_does() {
        assert_eq!(parse_list("0-3,6,8-9\n"), Some(vec![0, 1, 2, 3, 6, 8, 9]));
        assert_eq!(parse_list("5"), Some(vec![5]));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("x"), None);
        assert_eq!(list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(list(&[4]), "4");
    }

    #[test]
    fn a_claim_is_held_until_its_file_closes() {
        let dir = std::env::temp_dir().join(format!("hostfuzz-claims-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("1");
        let first = lock(&path).expect("a free claim");
        assert!(lock(&path).is_none(), "a held claim taken twice");
        drop(first);
        assert!(lock(&path).is_some(), "a released claim refused");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_a_user_process_limited_to_one_cpu_takes_it() {
        let user = |cpus: &str| format!("Name:\tx\nVmSize:\t  1000 kB\nCpus_allowed_list:\t{cpus}\n");
        assert_eq!(single_cpu(&user("3")), Some(3));
        assert_eq!(single_cpu(&user("0-1")), None);
        assert_eq!(single_cpu(&user("2,4")), None);
        // A kernel thread (no VmSize), pinned to its CPU, takes nothing.
        assert_eq!(single_cpu("Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n"), None);
    }
}
