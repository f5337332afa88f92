//! A case's `[net]` as a QEMU device: a virtio-net card on slot 2 on QEMU's user-mode
//! network (`restrict=on`, `ipv6=off`), its forwards on host ports taken for each boot,
//! its peers as guestfwds to the bench's own binary, its capture (`filter-dump`), and
//! the part that runs beside the console: the `restrict=on` check asked of QEMU itself,
//! the dials, the poke, and after the boot the peers' counts and the capture's rules.
//!
//! Dials and pokes are host-clock waits: the case's result says so.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use testbench_case::NetSpec;
use testbench_judge::Pattern;
use testbench_net::{DialOutcome, ForwardPlan};

use super::sessions::{Sessions, SessionsError, SESSIONS_DIR};
use crate::boot::{
    AttachError, Attached, BootPlace, Broken, Ended, Evidence, Live, Part, PartEvent, PartSpec, Phase, Slot,
};
use crate::process::shell_quote;
use crate::qemu::qmp::QmpError;

/// The netdev's and the capture's ids on QEMU's command line.
const NETDEV: &str = "net0";
const CAPTURE: &str = "cap0";
/// The capture's file in the boot's directory.
pub const CAPTURE_FILE: &str = "capture.pcap";
/// The directory, in the boot's directory, where the peer helper records connections.
pub const PEERS_DIR: &str = "peers";
/// The bench's hidden subcommand QEMU runs for each connection to a peer.
pub const PEER_HELPER: &str = "--peer-helper";

/// Why a case's network could not be planned or attached to a boot.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// `TESTBENCH_PORTS` refused, or too small for the jobs (`testbench-net`'s words).
    #[error("{0}")]
    Lease(#[source] testbench_net::PortsError),
    #[error("no free host port for the forwards: {0}")]
    NoFreePort(#[source] std::io::Error),
    #[error("{}: {need} host ports needed and {free} free in the lease", testbench_net::ports::PORTS_VAR)]
    LeaseShort { need: usize, free: usize },
    #[error("the bench's own binary, for the peers: {0}")]
    OwnBinary(#[source] std::io::Error),
    /// The peers' records directory could not be made.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A peer's address the host cannot serve (`testbench-net`'s words).
    #[error("{0}")]
    Peers(#[source] testbench_net::PortsError),
    /// The capture's filter could not be given to QEMU (`testbench-net`'s words).
    #[error("{0}")]
    Capture(#[source] testbench_net::CaptureError),
    #[error("the sessions need the guest's port 22 forwarded")]
    NoPort22,
    #[error(transparent)]
    Sessions(#[from] SessionsError),
}

/// Why QEMU's own account of the card does not show it restricted.
#[derive(Debug, thiserror::Error)]
pub enum RestrictError {
    /// `info network` could not be asked.
    #[error(transparent)]
    Qmp(#[from] QmpError),
    /// QEMU's answer (quoted), which names no netdev of the card's.
    #[error("QEMU's `info network` names no netdev {NETDEV}: {0}")]
    NoNetdev(String),
    /// The card's line of QEMU's answer.
    #[error("QEMU says the guest's network is not restricted (restrict=on missing): {0}")]
    NotRestricted(String),
}

/// The host ports a run may use: the environment's lease (`TESTBENCH_PORTS=lo-hi`), out
/// of which each boot takes the ports it needs while it runs; or none, and each boot's
/// ports are chosen by the operating system.
#[derive(Clone)]
pub struct Ports {
    lease: Option<Arc<Mutex<Vec<u16>>>>,
}

impl Ports {
    /// From `TESTBENCH_PORTS`; `jobs` boots at once each needing at most `per_boot` ports
    /// must fit the lease, or the run is refused before anything builds.
    pub fn from_env(jobs: usize, per_boot: usize) -> Result<Ports, NetError> {
        let var = std::env::var(testbench_net::ports::PORTS_VAR).ok();
        Ports::from_source(
            testbench_net::PortSource::from_env(var.as_deref()).map_err(NetError::Lease)?,
            jobs,
            per_boot,
        )
    }

    /// As [`Ports::from_env`], from a source already read.
    pub fn from_source(source: testbench_net::PortSource, jobs: usize, per_boot: usize) -> Result<Ports, NetError> {
        match source {
            testbench_net::PortSource::Free => Ok(Ports { lease: None }),
            testbench_net::PortSource::Lease(lease) => {
                if per_boot > 0 {
                    lease.slices(jobs.max(1), per_boot).map_err(NetError::Lease)?;
                }
                let free: Vec<u16> = (lease.lo..=lease.hi).collect();
                Ok(Ports { lease: Some(Arc::new(Mutex::new(free))) })
            }
        }
    }

    /// The plan of one boot's forwards: from the lease (returned when the boot's part
    /// goes) or chosen by the operating system.
    fn plan(&self, tcp_guest: &[u16], udp_guest: Option<u16>) -> Result<(ForwardPlan, Option<Taken>), NetError> {
        let Some(lease) = &self.lease else {
            let plan = ForwardPlan::pick_free(tcp_guest, udp_guest).map_err(NetError::NoFreePort)?;
            return Ok((plan, None));
        };
        let need = tcp_guest.len() + usize::from(udp_guest.is_some());
        let mut free = lease.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < need {
            return Err(NetError::LeaseShort { need, free: free.len() });
        }
        let taken: Vec<u16> = free.drain(..need).collect();
        let tcp = tcp_guest.iter().copied().zip(taken.iter().copied()).collect();
        let udp = udp_guest.map(|guest| (guest, taken[tcp_guest.len()]));
        Ok((ForwardPlan { tcp, udp }, Some(Taken { ports: taken, lease: lease.clone() })))
    }
}

/// Ports taken from the lease, given back when the boot's part goes.
struct Taken {
    ports: Vec<u16>,
    lease: Arc<Mutex<Vec<u16>>>,
}

impl Drop for Taken {
    fn drop(&mut self) {
        let mut free = self.lease.lock().unwrap_or_else(|e| e.into_inner());
        free.append(&mut self.ports);
        free.sort_unstable();
    }
}

/// A case's network, planned once.
pub struct Net {
    spec: NetSpec,
    ports: Ports,
    /// The bench's own binary, which QEMU runs as each peer.
    exe: PathBuf,
    /// The case is a self-check that cuts its capture (`truncate_capture`).
    truncate: bool,
    /// The case's sessions, which reach the guest's port 22 through its forward.
    sessions: Option<Sessions>,
}

impl Net {
    pub fn new(spec: NetSpec, ports: Ports, sessions: Option<Sessions>) -> Result<Net, NetError> {
        let exe = std::env::current_exe().map_err(NetError::OwnBinary)?;
        let truncate = spec.truncate_capture;
        Ok(Net { spec, ports, exe, truncate, sessions })
    }
}

impl PartSpec for Net {
    fn name(&self) -> String {
        "[net]".into()
    }

    fn attach(&self, place: &BootPlace) -> Result<Attached, AttachError> {
        let udp = self.spec.poke.as_ref().map(|poke| poke.port);
        let (plan, taken) = self.ports.plan(&self.spec.forward, udp)?;
        let records = place.dir.join(PEERS_DIR);
        let mut peers = Vec::new();
        if !self.spec.peers.is_empty() {
            std::fs::create_dir_all(&records).map_err(|source| NetError::Io { path: records.clone(), source })?;
            let addrs: Vec<SocketAddrV4> = self.spec.peers.iter().map(|p| p.addr).collect();
            testbench_net::check_peers(&addrs).map_err(NetError::Peers)?;
        }
        for peer in &self.spec.peers {
            let command = [
                self.exe.display().to_string(),
                PEER_HELPER.to_string(),
                records.display().to_string(),
                testbench_net::peer::name_for(peer.addr),
            ]
            .iter()
            .map(|word| shell_quote(word))
            .collect::<Vec<_>>()
            .join(" ");
            peers.push((peer.addr, command));
        }
        let netdev = testbench_net::netdev_arg(NETDEV, &plan, &peers, !peers.is_empty());
        let capture = place.dir.join(CAPTURE_FILE);
        let mut files = vec![capture.clone()];
        let mut args = vec![
            "-netdev".to_string(),
            netdev,
            "-device".to_string(),
            Slot::Net.device(place.arch, "net", &format!("netdev={NETDEV},mac={}", card_mac())),
        ];
        let filter = testbench_net::capture::filter_dump_arg(CAPTURE, NETDEV, &capture).map_err(NetError::Capture)?;
        args.extend(["-object".to_string(), filter]);
        let mut log = vec![format!("{NETDEV} on {}", Slot::Net.described(place.arch))];
        for (guest, host) in &plan.tcp {
            log.push(format!("forward: host 127.0.0.1:{host} (TCP) to guest port {guest}"));
        }
        if let Some((guest, host)) = plan.udp {
            log.push(format!("poke: host 127.0.0.1:{host} (UDP) to guest port {guest}"));
        }
        for peer in &self.spec.peers {
            log.push(format!("peer {}: the bench's helper, records in {}", peer.addr, records.display()));
        }
        let mut parts: Vec<Box<dyn Part>> = Vec::new();
        if let Some(sessions) = &self.sessions {
            let port = plan.host_port(22).ok_or(NetError::NoPort22)?;
            let (part, lines) = sessions.attach(place.dir, port).map_err(NetError::from)?;
            log.extend(lines);
            parts.push(part);
            files.push(place.dir.join(SESSIONS_DIR));
        }
        let card = Card {
            spec: self.spec.clone(),
            plan,
            _taken: taken,
            capture: capture.clone(),
            records: records.clone(),
            truncate: self.truncate,
            dials: (0..self.spec.dials.len()).map(|_| None).collect(),
            poked: None,
            checked: None,
        };
        if !self.spec.peers.is_empty() {
            files.push(records);
        }
        parts.insert(0, Box::new(card));
        Ok(Attached { args, files, log, parts })
    }
}

/// The card's MAC as QEMU's `mac=` takes it: set, not left to QEMU's default, since the
/// capture's rules hold the guest's frames to it.
fn card_mac() -> String {
    let m = testbench_net::capture::GUEST_MAC;
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// One boot's network beside its console.
struct Card {
    spec: NetSpec,
    plan: ForwardPlan,
    _taken: Option<Taken>,
    capture: PathBuf,
    records: PathBuf,
    truncate: bool,
    /// Each dial's thread, once started.
    dials: Vec<Option<JoinHandle<DialOutcome>>>,
    /// When the poke went, or why it could not.
    poked: Option<Result<f64, PokeError>>,
    /// The `restrict=on` check's thread.
    checked: Option<JoinHandle<Result<(), RestrictError>>>,
}

impl Card {
    fn start_dial(&mut self, index: usize, at: &Live) {
        let dial = self.spec.dials[index].clone();
        let Some(host) = self.plan.host_port(dial.port) else { return };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, host));
        let (start, deadline, stop) = (at.start, at.deadline, at.stop.clone());
        self.dials[index] = Some(std::thread::spawn(move || {
            testbench_net::dial::run(
                addr,
                dial.send.as_bytes(),
                dial.expect.as_bytes(),
                dial.until_closed,
                start,
                deadline,
                &stop,
            )
        }));
    }
}

/// QEMU's own account of the card's network must say `restrict=on`: asked over QMP
/// (`info network`), not read from the command line the bench wrote.
fn restricted(info: &str) -> Result<(), RestrictError> {
    let line = info
        .lines()
        .find(|line| line.trim_start_matches([' ', '\\']).starts_with(&format!("{NETDEV}:")))
        .ok_or_else(|| RestrictError::NoNetdev(testbench_judge::quote(info).to_string()))?;
    if line.split(',').any(|field| field.trim() == "restrict=on") {
        Ok(())
    } else {
        Err(RestrictError::NotRestricted(line.trim().to_string()))
    }
}

/// What in a passing boot's traffic fails it: the peers' counts, the capture unread, a
/// capture_expect no frame matched, the capture's rules broken.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// A peer's connections not as the case says (`testbench-net`'s words).
    #[error("{0}")]
    Peers(#[source] testbench_net::peer::PeerCountError),
    #[error("net: {0}")]
    Capture(#[from] testbench_net::CaptureError),
    /// A `capture_expect` (its label and quoted pattern) that matched none of the frames.
    #[error("net: {label} '{pattern}' matched none of the capture's {frames} frames")]
    NoMatch { label: String, pattern: String, frames: usize },
    /// The capture's rules broken (`testbench-net`'s words).
    #[error("net: capture: {0}")]
    Rules(#[source] testbench_net::JudgeError),
}

/// The poke's datagram that could not be sent (to the host port, UDP).
#[derive(Debug, thiserror::Error)]
#[error("net.poke: the datagram to 127.0.0.1:{port} could not be sent: {source}")]
pub struct PokeError {
    port: u16,
    source: std::io::Error,
}

impl Part for Card {
    fn triggers(&self) -> Vec<Pattern> {
        let judged = |p: &testbench_case::Pattern| Pattern { label: p.label.clone(), regex: p.regex.clone() };
        let mut triggers: Vec<Pattern> = self.spec.dials.iter().filter_map(|d| d.after.as_ref().map(judged)).collect();
        triggers.extend(self.spec.poke.as_ref().map(|poke| judged(&poke.after)));
        triggers
    }

    fn on(&mut self, phase: Phase, at: &Live) {
        if phase != Phase::Started {
            return;
        }
        // Asked on a thread of its own: QMP's replies do not wait on the boot's loop.
        let (qmp, events) = (at.qmp.clone(), at.events.clone());
        self.checked = Some(std::thread::spawn(move || {
            let info = qmp.execute(
                "human-monitor-command",
                Some(serde_json::json!({ "command-line": "info network" })),
                std::time::Duration::from_secs(10),
            )?;
            let result = restricted(info.as_str().unwrap_or(""));
            let event = match &result {
                Ok(()) => PartEvent::Note("net: QEMU itself says restrict=on (info network)".into()),
                Err(error) => PartEvent::Failed(error.to_string()),
            };
            let _ = events.send(crate::boot::Event::Part(event));
            result
        }));
        for index in 0..self.spec.dials.len() {
            if self.spec.dials[index].after.is_none() {
                self.start_dial(index, at);
            }
        }
    }

    fn triggered(&mut self, which: usize, at: &Live) {
        let with_after: Vec<usize> =
            (0..self.spec.dials.len()).filter(|&i| self.spec.dials[i].after.is_some()).collect();
        if let Some(&index) = with_after.get(which) {
            self.start_dial(index, at);
            return;
        }
        let (Some(poke), Some((_, host))) = (&self.spec.poke, self.plan.udp) else { return };
        let when = Instant::now().saturating_duration_since(at.start).as_secs_f64();
        self.poked = Some(
            testbench_net::poke::send(host, poke.payload.as_bytes())
                .map(|()| when)
                .map_err(|source| PokeError { port: host, source }),
        );
    }

    fn finish(&mut self, ended: &Ended) -> Result<Evidence, Broken> {
        let passed = ended.passed;
        let mut notes = Vec::new();
        let mut failures = Vec::new();
        if let Some(check) = self.checked.take() {
            match check.join() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => failures.push(error.to_string()),
                Err(_) => failures.push("net: the restrict=on check panicked".into()),
            }
        }
        for (index, dial) in self.dials.iter_mut().enumerate() {
            let port = self.spec.dials[index].port;
            let Some(handle) = dial.take() else {
                failures.push(format!("net.dial[{index}] (port {port}): its after never matched a console line"));
                continue;
            };
            match handle.join() {
                Ok(DialOutcome::Pass { attempts, echoed_after, held }) => {
                    let held = held.map(|h| format!(", held {:.2}s until the guest closed it", h.as_secs_f64()));
                    notes.push(format!(
                        "net.dial[{index}] (port {port}): echoed {:.2}s after the guest started, attempt {attempts}{} (a host-clock wait)",
                        echoed_after.as_secs_f64(),
                        held.unwrap_or_default()
                    ));
                }
                Ok(DialOutcome::Fail { reason, .. }) => {
                    // A dial the boot's end cut short was not echoed by the deadline: the
                    // boot's end is the last moment an echo could come.
                    let reason = reason.replacen(": cancelled", ": no echo before the boot ended", 1);
                    failures.push(format!("net.dial[{index}] (port {port}): {reason}"))
                }
                Err(_) => failures.push(format!("net.dial[{index}]: its thread panicked")),
            }
        }
        match (&self.spec.poke, self.poked.take()) {
            (None, _) => {}
            (Some(_), None) => failures.push("net.poke: its after never matched a console line".into()),
            (Some(poke), Some(Ok(when))) => notes.push(format!(
                "net.poke: one datagram to guest UDP port {} at {when:.2}s (a host-clock wait)",
                poke.port
            )),
            (Some(_), Some(Err(error))) => failures.push(error.to_string()),
        }
        if passed && failures.is_empty() {
            match self.judge_traffic() {
                Ok(more) => notes.extend(more),
                Err(error) => failures.push(error.to_string()),
            }
        }
        if failures.is_empty() || !passed {
            // A boot that failed on its console keeps its verdict; the network's trouble
            // is noted beside it.
            notes.extend(failures);
            Ok(Evidence::notes(notes))
        } else {
            Err(Broken(failures.join("; ")))
        }
    }
}

impl Card {
    /// After a passing boot: each peer's connections, and the capture read fail-closed
    /// and judged (with peers, its rules; without, only its form).
    fn judge_traffic(&self) -> Result<Vec<String>, TrafficError> {
        let mut notes = Vec::new();
        let peers: Vec<(SocketAddrV4, u32)> = self.spec.peers.iter().map(|p| (p.addr, p.connections)).collect();
        if !peers.is_empty() {
            testbench_net::peer::check_counts(&self.records, &peers).map_err(TrafficError::Peers)?;
        }
        let frames = match testbench_net::capture::read(&self.capture, self.truncate) {
            Ok(frames) => frames,
            Err(testbench_net::CaptureError::NoFrames { .. })
                if peers.is_empty() && self.spec.capture_expect.is_empty() =>
            {
                notes.push("net: the capture holds no frame (the guest sent none)".into());
                return Ok(notes);
            }
            Err(error) => return Err(error.into()),
        };
        let lines: Vec<String> = frames.frames.iter().map(|f| testbench_net::capture::describe(&f.data)).collect();
        for pattern in &self.spec.capture_expect {
            match lines.iter().position(|line| pattern.regex.is_match(line)) {
                Some(k) => notes.push(format!(
                    "net: {} matched frame {}: {}",
                    pattern.label,
                    frames.frames[k].index,
                    testbench_judge::quote(&lines[k])
                )),
                None => {
                    return Err(TrafficError::NoMatch {
                        label: pattern.label.clone(),
                        pattern: testbench_judge::quote(pattern.regex.as_str()).to_string(),
                        frames: frames.frames.len(),
                    })
                }
            }
        }
        if peers.is_empty() {
            notes.push(format!("net: the capture holds {} frames, all well formed", frames.frames.len()));
            return Ok(notes);
        }
        let rules = testbench_net::Rules {
            gateway: NetSpec::HOST,
            guest: NetSpec::GUEST_ADDR,
            mac: testbench_net::capture::GUEST_MAC,
            self_forbidden: self.spec.self_forbidden.iter().map(|n| (n.network(), n.prefix)).collect(),
            peers,
        };
        let summary = testbench_net::capture::judge(&frames, &rules).map_err(TrafficError::Rules)?;
        let counts: Vec<String> = summary.peer_syns.iter().map(|(addr, n)| format!("{addr} {n}")).collect();
        notes.push(format!(
            "net: capture: {} frames ({} the guest's), {} SYNs; SYNs to each peer: {}",
            summary.frames,
            summary.guest_frames,
            summary.syns,
            counts.join(", ")
        ));
        Ok(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_must_say_restrict_on_for_the_cards_netdev() {
        let on = "virtio-net-device.0: index=0,type=nic,model=virtio-net-device,macaddr=52:54:00:12:34:56\r\n \\ net0: index=0,type=user,net=10.0.2.0,restrict=on\r\n";
        assert!(restricted(on).is_ok());
        let off = on.replace("restrict=on", "restrict=off");
        let error = restricted(&off).unwrap_err();
        assert!(matches!(&error, RestrictError::NotRestricted(line) if line.contains("restrict=off")), "{error:?}");
        assert!(error.to_string().starts_with("QEMU says the guest's network is not restricted"), "{error}");
        let none = "virtio-net-device.0: index=0,type=nic\r\n";
        let error = restricted(none).unwrap_err();
        assert!(matches!(error, RestrictError::NoNetdev(_)), "{error:?}");
        assert!(error.to_string().contains("names no netdev net0"), "{error}");
    }
}
