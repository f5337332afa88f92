//! `q`: see docs/q.md.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use testbench_q::sched::{cores_text, parse_cores, Ask, CoresError, Machine};
use testbench_q::{client, daemon, place, Request};

#[derive(Parser)]
#[command(name = "q", about = "The one-machine scheduler: leases of cores, ports and locks for the commands it runs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground (its directory: $Q_DIR, else
    /// $XDG_RUNTIME_DIR/testbench-q, else /tmp/testbench-q-<uid>).
    Daemon {
        /// The cores it hands out (such as 0-7); default: every core this process may use.
        #[arg(long)]
        cores: Option<String>,
        /// The quiet set, for host-clock work, out of --cores ("" for none); default: the
        /// last four cores on a machine of eight or more, none below.
        #[arg(long)]
        quiet: Option<String>,
        /// The host port pool, LO-HI.
        #[arg(long, default_value = "23000-23999")]
        ports: String,
    },
    /// Wait for a lease, run COMMAND pinned to its cores, exit with its status.
    Run {
        /// Cores to lease (0: a lease of locks or ports alone).
        #[arg(long, default_value_t = 1)]
        cores: usize,
        /// Run on the quiet set, one quiet job at a time.
        #[arg(long)]
        quiet: bool,
        /// Host ports to lease, handed over as TESTBENCH_PORTS=lo-hi.
        #[arg(long, default_value_t = 0)]
        ports: u16,
        /// Take the named lock exclusively.
        #[arg(long = "lock", value_name = "NAME")]
        locks: Vec<String>,
        /// Take the named lock shared.
        #[arg(long = "share", value_name = "NAME")]
        shares: Vec<String>,
        /// The job's name in `q ls` and `q log` (default: the command line).
        #[arg(long)]
        name: Option<String>,
        /// Seconds to wait for the lease.
        #[arg(long, default_value_t = 86_400)]
        wait: u64,
        /// Seconds the command may run; past them it is killed with its process group.
        #[arg(long, default_value_t = 86_400)]
        timeout: u64,
        /// Keep the job's scratch directory (its TMPDIR) after it ends.
        #[arg(long)]
        keep_scratch: bool,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The core map, the locks, the running jobs and the queue.
    Ls,
    /// The jobs that ended recently, with their waits and run times.
    Log,
    /// End the daemon: its state saved, its socket removed. Running jobs go on, their
    /// leases kept for a daemon started again to adopt; waiting jobs are told it went away.
    Stop,
}

/// Why `q` did not do what it was asked: what `main` prints after `q: `.
#[derive(Debug, thiserror::Error)]
enum QError {
    #[error("cannot read this process's cores: {0}")]
    OwnCores(#[source] rustix::io::Errno),
    #[error("--cores: {0}")]
    Cores(#[source] CoresError),
    #[error("--cores: core {core} is not one this process may run on ({})", cores_text(mine))]
    NotMine { core: usize, mine: Vec<usize> },
    #[error("--quiet: {0}")]
    Quiet(#[source] CoresError),
    #[error("--quiet: core {0} is not one of --cores")]
    QuietOutside(usize),
    #[error("--ports {0:?}: it takes LO-HI, two ports from 1 to 65535 with LO <= HI")]
    Ports(String),
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
    #[error(transparent)]
    Client(#[from] client::ClientError),
}

fn machine(cores: Option<String>, quiet: Option<String>, ports: &str) -> Result<Machine, QError> {
    let online = rustix::thread::sched_getaffinity(None).map_err(QError::OwnCores)?;
    let limit = rustix::thread::CpuSet::MAX_CPU;
    let mine: Vec<usize> = (0..limit).filter(|&c| online.is_set(c)).collect();
    let all = match cores {
        Some(text) => parse_cores(&text, limit).map_err(QError::Cores)?,
        None => mine.clone(),
    };
    if let Some(&core) = all.iter().find(|c| !mine.contains(c)) {
        return Err(QError::NotMine { core, mine });
    }
    let quiet = match quiet {
        Some(text) => parse_cores(&text, limit).map_err(QError::Quiet)?,
        None if all.len() >= 8 => all[all.len() - 4..].to_vec(),
        None => Vec::new(),
    };
    if let Some(&c) = quiet.iter().find(|c| !all.contains(c)) {
        return Err(QError::QuietOutside(c));
    }
    let general: Vec<usize> = all.iter().copied().filter(|c| !quiet.contains(c)).collect();
    let bad = || QError::Ports(ports.to_string());
    let (lo, hi) = ports.split_once('-').ok_or_else(bad)?;
    let (lo, hi): (u16, u16) = (lo.parse().map_err(|_| bad())?, hi.parse().map_err(|_| bad())?);
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok(Machine { general, quiet, ports: (lo, hi) })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = place::dir();
    let result = match cli.command {
        Command::Daemon { cores, quiet, ports } => {
            machine(cores, quiet, &ports).and_then(|m| Ok(daemon::serve(&dir, m)?)).map(|()| 0)
        }
        Command::Run { cores, quiet, ports, locks, shares, name, wait, timeout, keep_scratch, command } => {
            let name = name.unwrap_or_else(|| command.join(" "));
            let ask = Ask { cores, quiet, ports, locks, shares };
            let args = client::RunArgs {
                name,
                ask,
                command,
                wait: Duration::from_secs(wait),
                timeout: Duration::from_secs(timeout),
                keep_scratch,
            };
            client::run(&dir, args).map_err(QError::from)
        }
        Command::Ls => client::ask_text(&dir, Request::Ls).map_err(QError::from).map(|t| {
            print!("{t}");
            0
        }),
        Command::Log => client::ask_text(&dir, Request::Log).map_err(QError::from).map(|t| {
            print!("{t}");
            0
        }),
        Command::Stop => client::stop(&dir).map_err(QError::from).map(|t| {
            print!("{t}");
            0
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(why) => {
            eprintln!("q: {why}");
            ExitCode::from(125)
        }
    }
}
