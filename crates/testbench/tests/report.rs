//! `report.html` as a person sees it: a run with failures (a sweep of three seeds of a
//! case whose console has a forbidden line, QEMU played by `scripts/fake-qemu-console`),
//! its page loaded in Debian's headless chromium, driven over the DevTools protocol on
//! a pipe (`--remote-debugging-pipe`: commands on the browser's descriptor 3, replies
//! and events on 4, each a JSON message ended by a NUL), and what is rendered checked:
//! the failed boot's verdict, the failing line at the top of its block and visible,
//! its mark in the console, the replay line, the sweep's grid and the histogram's bars,
//! each result's strip of its last results from the history,
//! and not one request for anything but the page itself. Every wait has a deadline; the
//! browser (a process group) is killed at the test's end whatever happened.
//!
//! Chromium comes from `scripts/setup chromium`, which installs it when it is missing
//! and otherwise says the exact apt command a person must run.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testbench_process::Cmd;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

/// The whole browser session's deadline, from its start.
const BROWSER_DEADLINE: Duration = Duration::from_secs(60);

/// A run with failures: three seeds of one case, each failing on a forbidden line.
fn failing_run(cases: &Path, kernel: &Path) -> Value {
    let case = format!(
        "description = \"x\"\narch = [\"rv64\"]\nkind = \"boot\"\ntimeout_secs = 60\n\
         expect = ['^hello from']\nforbid = ['^fake-qemu-console: done$']\npoweroff = true\n\
         [[input]]\nafter = '^hello'\nsend = \"x\\n\"\n\
         [guest]\nkernel = \"{}\"\nfirmware = \"none\"\n",
        kernel.display()
    );
    std::fs::write(cases.join("forbidden-line.toml"), case).unwrap();
    let fake = root().join("scripts/fake-qemu-console");
    let history = cases.with_file_name("history.sqlite");
    let history = history.to_str().unwrap();
    let args =
        ["--cases", cases.to_str().unwrap(), "--sweep", "1..3", "--message-format", "json", "--history", history];
    let mut child = Command::new(env!("CARGO_BIN_EXE_testbench"))
        .args(args)
        .current_dir(root())
        .env("TESTBENCH_NO_SETUP", "1")
        .env("TESTBENCH_QEMU_RV64", &fake)
        .env_remove("TESTBENCH_QEMU_SEED")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the testbench binary starts");
    // Both streams read on threads of their own, so the deadline below holds whatever
    // the bench does with them.
    let read = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stream.read_to_string(&mut text);
            text
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let status = testbench_process::wait_deadline(&mut child, Duration::from_secs(300)).unwrap();
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.and_then(|s| s.code()), Some(1), "testbench {args:?}\n{out}\n{err}");
    let finished = out
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["event"] == "run-finished")
        .unwrap_or_else(|| panic!("no run-finished event\n{out}\n{err}"));
    assert_eq!(finished["failed"], 3, "{out}");
    finished
}

/// The browser's side of the DevTools pipe: commands out, replies and events in.
struct DevTools {
    to: std::io::PipeWriter,
    from: mpsc::Receiver<Value>,
    next_id: u64,
    deadline: Instant,
    events: Vec<Value>,
}

impl DevTools {
    /// Send a command (to the page's session when given) and wait for its reply.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap_or_else(|e| panic!("{method}: the browser's pipe: {e}"));
        loop {
            let message = self.receive(&format!("the reply to {method}"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    fn receive(&mut self, what: &str) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.from.recv_timeout(left).unwrap_or_else(|e| panic!("{what}: none within the browser's deadline ({e})"))
    }

    /// Wait for an event named `method` (kept with the others).
    fn wait_event(&mut self, method: &str) {
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        loop {
            let message = self.receive(&format!("the event {method}"));
            let found = message["method"] == method;
            self.events.push(message);
            if found {
                return;
            }
        }
    }
}

/// What a person sees on the page: the rendered text and the places of what matters.
const SEEN: &str = r#"(() => {
  const box = e => { const b = e.getBoundingClientRect(); return { top: b.top + scrollY, height: b.height, width: b.width }; };
  const shown = e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden' && box(e).height > 0;
  const failed = document.querySelector('section.boot.FAIL');
  const at = failed.querySelector('.failure .at');
  const line = failed.querySelector('.failure .failing-line');
  const consoleBox = failed.querySelector('.console');
  const anchor = at.querySelector('a').getAttribute('href').slice(1);
  const marked = document.getElementById(anchor);
  return {
    text: document.body.innerText,
    verdict: failed.querySelector('h2 .verdict').innerText,
    at: at.innerText, atShown: shown(at), line: line.innerText, lineShown: shown(line),
    blockTop: box(failed).top, lineTop: box(line).top, consoleTop: box(consoleBox).top,
    firstChildOfBlock: failed.querySelector('.failure') === failed.querySelector('dl').nextElementSibling,
    marked: marked.className, markedShown: shown(marked), markedText: marked.innerText,
    markedBackground: getComputedStyle(marked).backgroundColor,
    replay: failed.querySelector('pre.replay').innerText, replayShown: shown(failed.querySelector('pre.replay')),
    bars: [...document.querySelectorAll('svg.histogram rect.bar')].map(b => [Number(b.dataset.count), b.getBBox().height]),
    cells: [...document.querySelectorAll('#sweep .cell')].map(c => [c.innerText, c.classList.contains('FAIL'), shown(c)]),
    strips: [...document.querySelectorAll('table.results .strip')].map(s => [...s.querySelectorAll('.s')].map(c => [c.className, box(c).width > 0 && box(c).height > 0, getComputedStyle(c).backgroundColor])),
    resources: performance.getEntriesByType('resource').map(e => e.name),
    scripts: [...document.scripts].filter(s => s.src).length,
  };
})()"#;

#[test]
fn a_person_sees_the_failure_in_a_headless_browser() {
    let started = Instant::now();
    let setup = Cmd::new(root().join("scripts/setup"), "scripts/setup chromium", Duration::from_secs(1200))
        .arg("chromium")
        .cwd(root())
        .output()
        .expect("scripts/setup chromium runs");
    assert!(setup.status.success(), "scripts/setup chromium failed:\n{}", String::from_utf8_lossy(&setup.stderr));

    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    let kernel = tmp.path().join("kernel");
    std::fs::write(&kernel, "not a kernel: the fake QEMU never reads it\n").unwrap();
    let finished = failing_run(&cases, &kernel);
    let report = PathBuf::from(finished["report"].as_str().expect("the run names its report.html"));
    assert!(report.is_file(), "{}", report.display());
    let bench_took = started.elapsed();

    // The browser, its DevTools on the pipe, no name it may resolve, a profile of its own.
    let (to_browser_read, to_browser) = std::io::pipe().unwrap();
    let (from_browser, from_browser_write) = std::io::pipe().unwrap();
    let profile = tmp.path().join("profile");
    let browser = Cmd::new("chromium", "headless chromium", BROWSER_DEADLINE)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-pipe",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
            &format!("--user-data-dir={}", profile.display()),
            "about:blank",
        ])
        .cwd(tmp.path())
        .process_group()
        .pass_fd(to_browser_read.as_fd(), 3)
        .pass_fd(from_browser_write.as_fd(), 4);
    let mut child = browser.spawn_piped().expect("chromium starts");
    drop((to_browser_read, from_browser_write));
    let group = rustix::process::Pid::from_child(&child);
    // Whatever happens below, the browser and its children go at the test's end.
    struct Kill(rustix::process::Pid);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = rustix::process::kill_process_group(self.0, rustix::process::Signal::KILL);
        }
    }
    let _kill = Kill(group);
    // What the browser prints is not read, only drained, so it never waits on a pipe.
    let drain = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        })
    };
    drain(Box::new(child.stdout.take().unwrap()));
    drain(Box::new(child.stderr.take().unwrap()));
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(from_browser);
        let mut message = Vec::new();
        while std::io::BufRead::read_until(&mut reader, 0, &mut message).is_ok_and(|n| n > 0) {
            if message.last() == Some(&0) {
                message.pop();
            }
            if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                if sender.send(value).is_err() {
                    break;
                }
            }
            message.clear();
        }
    });
    let mut devtools = DevTools {
        to: to_browser,
        from: receiver,
        next_id: 0,
        deadline: Instant::now() + BROWSER_DEADLINE,
        events: vec![],
    };

    let target = devtools.call(None, "Target.createTarget", json!({ "url": "about:blank" }));
    let attached =
        devtools.call(None, "Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }));
    let session = attached["sessionId"].as_str().expect("a session").to_string();
    let page = Some(session.as_str());
    devtools.call(page, "Network.enable", json!({}));
    devtools.call(page, "Page.enable", json!({}));
    let url = format!("file://{}", report.canonicalize().unwrap().display());
    devtools.call(page, "Page.navigate", json!({ "url": url }));
    devtools.wait_event("Page.loadEventFired");
    let result = devtools.call(page, "Runtime.evaluate", json!({ "expression": SEEN, "returnByValue": true }));
    let seen = &result["result"]["value"];
    assert!(seen.is_object(), "the page's script did not run: {result}");
    let _ = devtools.call(None, "Browser.close", json!({}));
    let closed = testbench_process::wait_deadline(&mut child, Duration::from_secs(10)).unwrap();
    let browser_took = started.elapsed() - bench_took;
    eprintln!("the bench's run: {bench_took:?}; the browser: {browser_took:?}; browser exit: {closed:?}");

    let text = seen["text"].as_str().unwrap();
    let explain = format!("what the page shows:\n{text}\n\nmeasured: {seen:#}");
    // The summary and the failed boot's block, as rendered.
    assert!(text.contains("0 passed, 3 failed, 0 skipped in "), "{explain}");
    assert!(text.contains("FAILED forbidden-line rv64 smp1"), "{explain}");
    assert_eq!(seen["verdict"], "FAILED", "{explain}");
    assert_eq!(seen["at"], "failed at line 2: forbid[0] '^fake-qemu-console: done$'", "{explain}");
    assert_eq!(seen["line"], "fake-qemu-console: done", "{explain}");
    assert!(seen["atShown"] == true && seen["lineShown"] == true, "{explain}");
    // The failing line is at the top of its block: right under the boot's facts, above
    // its console, on the first screen of the block.
    assert!(seen["firstChildOfBlock"] == true, "{explain}");
    let (block, line, console) =
        (seen["blockTop"].as_f64().unwrap(), seen["lineTop"].as_f64().unwrap(), seen["consoleTop"].as_f64().unwrap());
    assert!(block < line && line < console && line - block < 400.0, "{explain}");
    // Its place in the console is marked, and coloured as a forbidden line.
    assert!(seen["marked"].as_str().unwrap().contains("m-forbid") && seen["markedShown"] == true, "{explain}");
    assert!(seen["markedText"].as_str().unwrap().contains("fake-qemu-console: done"), "{explain}");
    assert_ne!(seen["markedBackground"], "rgba(0, 0, 0, 0)", "{explain}");
    assert!(text.contains("expect[0] '^hello from'") && text.contains("input[0].after '^hello'"), "{explain}");
    // The replay line, there to be copied.
    let replay = seen["replay"].as_str().unwrap();
    assert!(
        replay.contains("--exact forbidden-line") && text.contains(replay) && seen["replayShown"] == true,
        "{explain}"
    );
    // The sweep: three failed seeds, and a histogram whose bars hold the three boots.
    let cells: Vec<(String, bool, bool)> = serde_json::from_value(seen["cells"].clone()).unwrap();
    assert_eq!(cells, [("1".into(), true, true), ("2".into(), true, true), ("3".into(), true, true)], "{explain}");
    let bars: Vec<(u64, f64)> = serde_json::from_value(seen["bars"].clone()).unwrap();
    assert_eq!(bars.iter().map(|b| b.0).sum::<u64>(), 3, "{explain}");
    assert!(bars.iter().any(|b| b.1 > 0.0), "{explain}");
    // Each result's strip from the history (a fresh one: this run's three failures, the
    // sweep's boots sharing one label), each mark drawn in the failure's colour.
    let strips: Vec<Vec<(String, bool, String)>> = serde_json::from_value(seen["strips"].clone()).unwrap();
    assert_eq!(strips.len(), 3, "{explain}");
    for strip in &strips {
        assert_eq!(strip.len(), 3, "{explain}");
        assert!(
            strip.iter().all(|(class, drawn, colour)| class == "s fail" && *drawn && colour == "rgb(207, 34, 46)"),
            "{explain}"
        );
    }
    // Nothing was fetched: no resource, no script from elsewhere, and the only request
    // the browser saw was for the page itself.
    assert_eq!(seen["resources"], json!([]), "{explain}");
    assert_eq!(seen["scripts"], 0, "{explain}");
    let requests: Vec<&str> = devtools
        .events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .filter_map(|e| e["params"]["request"]["url"].as_str())
        .collect();
    assert_eq!(requests, [url.as_str()], "the page asked for more than itself");
}
