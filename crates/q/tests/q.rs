//! q on a daemon of each test's own (its own Q_DIR, the machine's first two cores, a
//! port pool of its own): leases, waits, the lock order, a killed client, adoption.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const Q: &str = env!("CARGO_BIN_EXE_q");

struct Daemon {
    dir: tempfile::TempDir,
    child: Child,
    ports: String,
}

impl Daemon {
    fn start(ports: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let child = spawn_daemon(dir.path(), ports);
        let daemon = Daemon { dir, child, ports: ports.into() };
        daemon.wait_up();
        daemon
    }

    fn q_dir(&self) -> PathBuf {
        self.dir.path().join("q")
    }

    fn wait_up(&self) {
        until("the daemon to answer `q ls`", || self.ls().status.success());
    }

    fn restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = spawn_daemon(self.dir.path(), &self.ports);
        self.wait_up();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(Q);
        cmd.args(args).env("Q_DIR", self.q_dir()).env_remove("Q_LOCK").env_remove("Q_SHARE");
        cmd
    }

    /// Start `q run ARGS`, its streams piped.
    fn run(&self, args: &[&str]) -> Child {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        self.cmd(&all).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    fn ls(&self) -> Output {
        self.cmd(&["ls"]).output().unwrap()
    }

    fn ls_text(&self) -> String {
        String::from_utf8_lossy(&self.ls().stdout).into_owned()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_daemon(top: &Path, ports: &str) -> Child {
    Command::new(Q)
        .args(["daemon", "--cores", "0-1", "--quiet", "", "--ports", ports])
        .env("Q_DIR", top.join("q"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A process the test started, killed if the test ends (a failed assertion included)
/// before it took the process back.
struct Owned(Option<Child>);

impl Owned {
    fn id(&self) -> u32 {
        self.0.as_ref().expect("not taken back yet").id()
    }

    fn take(mut self) -> Child {
        self.0.take().expect("not taken back yet")
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Poll `ready` every 20 ms for up to 20 s; past that, fail naming what was awaited.
fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(20), "no {what} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_lease_pins_its_command_and_a_later_job_waits_for_the_cores() {
    let d = Daemon::start("40100-40109");
    let a = d.run(&[
        "--cores",
        "2",
        "--name",
        "a",
        "--",
        "sh",
        "-c",
        "grep Cpus_allowed_list /proc/self/status; echo threads=$RUST_TEST_THREADS jobs=$CARGO_BUILD_JOBS; sleep 1",
    ]);
    until("job a running", || d.ls_text().contains("core 1   general  job 1 (a)"));
    let b =
        d.run(&["--cores", "1", "--name", "b", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; exit 7"]);
    let (code, out, _) = finish(a);
    assert_eq!(code, 0);
    assert!(out.contains("Cpus_allowed_list:\t0-1\n") && out.contains("threads=2 jobs=2"), "{out}");
    let (code, out, err) = finish(b);
    assert_eq!(code, 7, "q run exits with its command's status");
    assert!(err.contains("q: waiting for 1 general cores (0 free)"), "{err}");
    assert!(out.contains("Cpus_allowed_list:\t0\n"), "the lowest free core: {out}");
    // The daemon records a job's end once its connection closes, which may come just
    // after `q run` has exited: the log is read until it has both.
    let log = || String::from_utf8_lossy(&d.cmd(&["log"]).output().unwrap().stdout).into_owned();
    until("job 2's end in the log", || log().contains("exit 7  b"));
    let log = log();
    assert!(log.contains("job 1     cores 0-1") && log.contains("exit 0  a"), "{log}");
    assert!(log.contains("job 2     cores 0") && log.contains("exit 7  b"), "{log}");
    // Each line's time is labelled: when the job ended, in UTC.
    let first = log.lines().next().unwrap_or_default();
    let (label, rest) = first.split_at(first.find(" UTC  job 1 ").unwrap_or_else(|| panic!("{log}")));
    assert!(label.starts_with("ended ") && label.len() == "ended 12:34:56".len(), "{log}");
    assert!(rest.starts_with(" UTC  job 1 "), "{log}");
}

/// `q stop` ends the daemon whose pid it printed on start: the socket is gone and the
/// process ended when `q stop` returns, a waiting job is told the daemon went away, and a
/// running job goes on and is adopted by the next daemon. SIGTERM ends it the same way.
#[test]
fn q_stop_and_sigterm_end_the_daemon_whose_pid_it_printed_and_remove_its_socket() {
    let top = tempfile::tempdir().unwrap();
    let q_dir = top.path().join("q");
    let socket = q_dir.join("sock");
    let daemon = || {
        Owned(Some(
            Command::new(Q)
                .args(["daemon", "--cores", "0-1", "--quiet", "", "--ports", "40160-40169"])
                .env("Q_DIR", &q_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ))
    };
    let q = |args: &[&str]| {
        let mut cmd = Command::new(Q);
        cmd.args(args).env("Q_DIR", &q_dir).env_remove("Q_LOCK").env_remove("Q_SHARE");
        cmd
    };
    let ls = || String::from_utf8_lossy(&q(&["ls"]).output().unwrap().stdout).into_owned();
    let first = daemon();
    until("the daemon to answer `q ls`", || q(&["ls"]).output().unwrap().status.success());
    let flag = top.path().join("go");
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done", flag.display());
    let runner = Owned(Some(
        q(&["run", "--cores", "2", "--name", "r", "--", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    until("job r running", || ls().contains("job 1 (r"));
    let waiter = Owned(Some(
        q(&["run", "--cores", "1", "--name", "w", "--", "true"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    until("job w waiting", || ls().contains("waiting: 1"));

    let stopped = q(&["stop"]).output().unwrap();
    let said = String::from_utf8_lossy(&stopped.stdout).into_owned();
    assert_eq!(stopped.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&stopped.stderr));
    let pid = first.id();
    assert!(said.contains(&format!("q: daemon pid {pid} stopped (q stop): 1 running job(s) left in ")), "{said}");
    assert!(said.contains("1 waiting job(s) told it went away"), "{said}");
    assert!(!socket.exists(), "the socket is removed");
    let out = first.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.starts_with(&format!("q: daemon pid {pid} serving ")), "the pid is said on start: {err}");
    let (code, _, err) = finish(waiter.take());
    assert_eq!(code, 125);
    assert!(err.contains("the daemon went away before granting the lease"), "{err}");

    // The next daemon adopts the running job; SIGTERM ends it as `q stop` does.
    let second = daemon();
    until("the next daemon to adopt job r", || ls().contains("(adopted)"));
    std::fs::write(&flag, "").unwrap();
    let (code, _, _) = finish(runner.take());
    assert_eq!(code, 0, "the running job went on");
    until("the adopted job's end", || ls().contains("running: 0"));
    let pid = second.id();
    let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let out = second.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("q: daemon pid {pid} stopped (SIGTERM): 0 running job(s)")), "{err}");
    assert!(!socket.exists(), "the socket is removed on SIGTERM\n{err}");
    let gone = q(&["stop"]).output().unwrap();
    assert_eq!(gone.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no q daemon answers at"));
}

#[test]
fn a_killed_client_frees_its_cores_and_ports_and_its_command_dies_with_it() {
    let d = Daemon::start("40110-40119");
    let pidfile = d.dir.path().join("sleeper");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let mut a = d.run(&["--cores", "2", "--ports", "3", "--", "sh", "-c", &script]);
    until("the leased command to start", || std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n')));
    let sleeper: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(d.ls_text().contains("cores 0-1, ports 40110-40112"), "{}", d.ls_text());
    a.kill().unwrap();
    a.wait().unwrap();
    until("the killed client's command to die with it", || !Path::new(&format!("/proc/{sleeper}")).exists());
    let b = d.run(&["--cores", "2", "--ports", "3", "--", "sh", "-c", "echo $TESTBENCH_PORTS"]);
    let (code, out, _) = finish(b);
    assert_eq!((code, out.as_str()), (0, "40110-40112\n"), "the freed cores and ports are leased again");
}

#[test]
fn sharers_run_together_and_a_waiting_exclusive_taker_goes_before_later_sharers() {
    let d = Daemon::start("40120-40129");
    let trace = d.dir.path().join("trace");
    let step = |name: &str, secs: &str| {
        format!("echo start {name} >> {t}; sleep {secs}; echo end {name} >> {t}", t = trace.display())
    };
    let s1 = d.run(&["--cores", "0", "--share", "qemu", "--name", "s1", "--", "sh", "-c", &step("s1", "1")]);
    let s2 = d.run(&["--cores", "0", "--share", "qemu", "--name", "s2", "--", "sh", "-c", &step("s2", "1")]);
    until("both sharers running", || d.ls_text().contains("lock qemu: held shared by job 1, shared by job 2"));
    let x = d.run(&["--cores", "0", "--lock", "qemu", "--name", "x", "--", "sh", "-c", &step("x", "0.5")]);
    until("the exclusive taker waiting", || d.ls_text().contains("job 3 (x"));
    let s3 = d.run(&["--cores", "0", "--share", "qemu", "--name", "s3", "--", "sh", "-c", &step("s3", "0")]);
    let waits: Vec<(i32, String, String)> = [s1, s2, x, s3].into_iter().map(finish).collect();
    assert!(waits.iter().all(|w| w.0 == 0), "{waits:?}");
    assert!(waits[2].2.contains("q: waiting for the lock qemu, held shared by job"), "{}", waits[2].2);
    assert!(
        waits[3].2.contains("q: waiting for the lock qemu: job 3 waits ahead to take it exclusively"),
        "{}",
        waits[3].2
    );
    let order = std::fs::read_to_string(&trace).unwrap();
    let at = |line: &str| order.lines().position(|l| l == line).unwrap_or_else(|| panic!("no {line:?} in {order}"));
    assert!(at("start s2") < at("end s1"), "the sharers overlap: {order}");
    assert!(at("start x") > at("end s1") && at("start x") > at("end s2"), "{order}");
    assert!(at("start s3") > at("end x"), "the later sharer waited for the exclusive taker: {order}");
}

#[test]
fn a_restarted_daemon_adopts_the_running_jobs_and_frees_them_when_they_end() {
    let mut d = Daemon::start("40130-40139");
    let flag = d.dir.path().join("go");
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done", flag.display());
    let j = d.run(&["--cores", "1", "--ports", "2", "--lock", "disk", "--name", "j", "--", "sh", "-c", &script]);
    until("job j running", || d.ls_text().contains("job 1 (j"));
    d.restart();
    let ls = d.ls_text();
    assert!(ls.contains("core 0   general  job 1 (j)"), "{ls}");
    assert!(ls.contains("lock disk: held exclusively by job 1"), "{ls}");
    assert!(ls.contains("cores 0, ports 40130-40131") && ls.contains("(adopted)"), "{ls}");
    let k = d.run(&["--cores", "2", "--lock", "disk", "--name", "k", "--", "true"]);
    until("job k waiting behind the adopted job", || d.ls_text().contains("job 2 (k"));
    assert!(d.ls_text().contains("the lock disk, held exclusively by job 1 (j"), "{}", d.ls_text());
    std::fs::write(&flag, "").unwrap();
    let (code, _, _) = finish(j);
    assert_eq!(code, 0);
    let (code, _, err) = finish(k);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("q: waiting for the lock disk"), "{err}");
}

#[test]
fn an_ask_that_can_never_be_granted_or_a_missing_daemon_is_refused_in_words() {
    let d = Daemon::start("40140-40149");
    let (code, _, err) = finish(d.run(&["--cores", "3", "--", "true"]));
    assert_eq!(code, 125);
    assert!(err.contains("q: refused: asks 3 cores; the daemon's general set has 2 (0-1)"), "{err}");
    let nowhere = tempfile::tempdir().unwrap();
    let out = Command::new(Q).args(["run", "--", "true"]).env("Q_DIR", nowhere.path().join("q")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125));
    assert!(err.contains("no q daemon answers at") && err.contains("start one with `q daemon &`"), "{err}");
}

/// scripts/jobs, the job front, over a fake bench that lists three cases and records
/// the lease each of its runs was given.
#[test]
fn the_job_front_leases_each_case_by_its_class_and_a_whole_set_holds_the_qemu_lock() {
    let d = Daemon::start("40150-40159");
    let top = d.dir.path();
    let record = top.join("record");
    let fake = top.join("fake-testbench");
    std::fs::write(
        &fake,
        format!(
            r#"#!/bin/sh
if [ "$1" = --list ]; then
  echo '{{"event":"case","name":"b","kind":"boot","arch":["rv64"],"whole_run":true,"cores":2,"quiet":false,"ports":2}}'
  echo '{{"event":"case","name":"h","kind":"host-tests","arch":[],"whole_run":true,"cores":2,"quiet":false,"ports":0}}'
  echo '{{"event":"case","name":"s","kind":"boot","arch":["rv64"],"whole_run":true,"cores":1,"quiet":true,"ports":0}}'
  echo '{{"event":"case","name":"n","kind":"boot","arch":["rv64"],"whole_run":false,"cores":1,"quiet":false,"ports":0}}'
  exit 0
fi
echo "$2 cores=$Q_CORES ports=$TESTBENCH_PORTS lock=$Q_LOCK share=$Q_SHARE" >> {}
[ "$2" = h ] && exit 3
exit 0
"#,
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/jobs");
    // The front over the fake bench, with a prebuilt directory of the test's own (not
    // there at first): never the checkout's own target/prebuilt.
    let pre = top.join("prebuilt");
    let front = |args: &[&str]| {
        let out = Command::new(&jobs)
            .args(args)
            .env("Q", Q)
            .env("Q_DIR", d.q_dir())
            .env("JOBS_TESTBENCH", &fake)
            .env("JOBS_LOGS", top.join("logs"))
            .env("JOBS_PREBUILT", &pre)
            .env_remove("Q_LOCK")
            .env_remove("Q_SHARE")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (_, list) = front(&["list"]);
    assert!(list.contains("rv64/b") && list.contains("q run --cores 2 --name rv64/b --ports 2 --share qemu"), "{list}");
    assert!(list.contains("q run --cores 2 --name host/h\n"), "a case that boots nothing takes no lock: {list}");
    assert!(list.contains("q run --cores 1 --name rv64/s --quiet --share qemu"), "{list}");
    assert!(!list.contains("rv64/n"), "a case run only by name is no target of a set: {list}");

    // One target alone takes the lock shared.
    let (code, out) = front(&["rv64/b"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(std::fs::read_to_string(&record).unwrap(), "b cores=0-1 ports=40150-40151 lock= share=qemu\n");
    std::fs::remove_file(&record).unwrap();

    // The whole set holds it exclusively; its cases take it no more, and a failure is said.
    let (code, out) = front(&["all"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("PASS  rv64/b") && out.contains("FAIL  host/h  (exit 3;"), "{out}");
    assert!(out.contains("scripts/jobs: 2 passed, 1 failed"), "{out}");
    let mut seen: Vec<String> = std::fs::read_to_string(&record).unwrap().lines().map(String::from).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "b cores=0-1 ports=40150-40151 lock=qemu share=",
            "h cores=0-1 ports= lock=qemu share=",
            // No quiet set on this daemon: the quiet case has the machine to itself.
            "s cores=0-1 ports= lock=qemu share=",
        ]
    );
    let log = String::from_utf8_lossy(&d.cmd(&["log"]).output().unwrap().stdout).into_owned();
    assert!(log.lines().last().is_some_and(|l| l.contains("cores none") && l.ends_with("exit 1  all")), "{log}");

    // A prebuilt directory that holds a boot target's width and case: the target boots
    // from it; refused (exit 2), the target runs as usual, and its log says so.
    std::fs::create_dir_all(pre.join("rv64")).unwrap();
    std::fs::write(pre.join("index.json"), r#"{"widths": {"rv64": {"b": {}}}}"#).unwrap();
    let pre_bench = pre.join("testbench");
    let refuse = top.join("refuse");
    std::fs::write(
        &pre_bench,
        format!(
            "#!/bin/sh\necho \"prebuilt $*\" >> {}\n[ -e {} ] && exit 2\nexit 0\n",
            record.display(),
            refuse.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&pre_bench, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::remove_file(&record).unwrap();
    assert_eq!(front(&["rv64/b", "host/h"]).0, Some(1));
    let seen = std::fs::read_to_string(&record).unwrap();
    assert!(seen.contains(&format!("prebuilt --prebuilt {} --exact b --arch rv64\n", pre.display())), "{seen}");
    assert!(!seen.contains("b cores="), "the prebuilt run was the target's: {seen}");
    assert!(seen.contains("h cores="), "a case that boots nothing runs as usual: {seen}");
    std::fs::write(&refuse, "").unwrap();
    std::fs::remove_file(&record).unwrap();
    assert_eq!(front(&["rv64/b"]).0, Some(0));
    let seen = std::fs::read_to_string(&record).unwrap();
    assert!(seen.starts_with("prebuilt ") && seen.contains("\nb cores="), "{seen}");
    let log = std::fs::read_to_string(top.join("logs/rv64-b.log")).unwrap();
    assert!(log.contains("was refused (exit 2); running the case as usual"), "{log}");
}

/// What `q daemon` refuses before it serves anything is said once, after `q: `, and
/// exits 125: each refusal of its machine's flags.
#[test]
fn a_daemon_with_bad_flags_says_which_and_serves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str]| {
        let out = Command::new(Q).args(args).env("Q_DIR", dir.path().join("q")).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(
        refused(&["daemon", "--ports", "5-1"]),
        "q: --ports \"5-1\": it takes LO-HI, two ports from 1 to 65535 with LO <= HI\n"
    );
    assert_eq!(
        refused(&["daemon", "--cores", "x", "--ports", "40000-40009"]),
        "q: --cores: \"x\" is not a core or a range of cores (such as 0-3)\n"
    );
    assert_eq!(
        refused(&["daemon", "--cores", "0", "--quiet", "1-0", "--ports", "40000-40009"]),
        "q: --quiet: \"1-0\": 1 is above 0\n"
    );
    assert!(!dir.path().join("q").join("sock").exists());
}

/// Every job gets a scratch directory of its own as TMPDIR (and Q_SCRATCH), 0700, under
/// Q_SCRATCH_ROOT (default: the checkout's target/q-scratch), gone when the job ends,
/// kept with --keep-scratch.
#[test]
fn each_job_gets_its_own_scratch_directory_as_tmpdir_removed_at_its_end_unless_kept() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start("40200-40209");
    let root = tempfile::tempdir().unwrap();
    let script = "echo tmp=$TMPDIR; echo scratch=$Q_SCRATCH; stat -c %a \"$TMPDIR\"; echo data > \"$TMPDIR/file\"";
    let job = |extra: &[&str]| {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let out = d.cmd(&args).env("Q_SCRATCH_ROOT", root.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        let tmp = out.lines().find_map(|l| l.strip_prefix("tmp=")).unwrap_or_else(|| panic!("{out}")).to_string();
        assert!(out.contains(&format!("scratch={tmp}\n")) && out.contains("\n700\n"), "{out}");
        PathBuf::from(tmp)
    };
    let first = job(&[]);
    assert_eq!(first.parent(), Some(root.path()), "{}", first.display());
    assert!(!first.exists(), "removed at the job's end: {}", first.display());
    let kept = job(&["--keep-scratch"]);
    assert_ne!(kept, first, "each job its own");
    assert_eq!(std::fs::read_to_string(kept.join("file")).unwrap(), "data\n");
    assert_eq!(std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777, 0o700);
}
