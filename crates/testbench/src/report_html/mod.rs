//! `report.html`: the run as a page a person looks at, written into the run directory
//! at the end of every run that made one (docs/report.md).
//!
//! One file, self-contained: inline CSS, inline SVG, a few lines of inline script (the
//! replay line's copy button), and no address of anything outside it: the only links
//! are anchors in the page and relative ones to the run directory's files. Everything
//! a boot or a host case printed is hostile text: escaped (`term::escape`), each line cut
//! to `term::LINE_BYTES`, a console shown as a window of its lines (`console::window`)
//! with what was left out said, and where the whole log is.
//!
//! The page: the summary (counts, the command, every result with its verdict); for a
//! sweep, a grid of its seeds by verdict and a histogram of boot times; then each boot,
//! failures first shown open: verdict, duration, seed, the replay line, the reason, the
//! failing line at the top ("failed at line N", a link to it), and the console as a
//! terminal shows it with the lines each expect, input, trigger and forbid took marked;
//! then each host case with its failure block.

mod console;
mod term;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::report::{seed_text, BootReport, Summary};
use crate::verdict::Verdict;
use console::{Log, Mark};
use term::escaped;

/// The report's file name in the run directory.
pub const REPORT_FILE: &str = "report.html";

/// How much of a console a boot's block shows: the first and last lines, and the lines
/// around each marked one. A failed boot shows more than a passed one.
const HEAD_LINES: usize = 60;
const TAIL_LINES: usize = 120;
const PASSED_HEAD_LINES: usize = 20;
const PASSED_TAIL_LINES: usize = 20;
const CONTEXT: usize = 3;
/// The most marked lines a window opens context around (marks are bounded by the
/// case's patterns; this bounds a case with thousands of them).
const MARKS_WITH_CONTEXT: usize = 200;
/// The most reason bytes quoted (the reasons are clipped already; this is a backstop).
const REASON_BYTES: usize = 16 * 1024;

/// What the page says of the run beyond its results.
pub struct RunInfo<'a> {
    pub run_dir: &'a Path,
    pub took: Duration,
    pub summary: Summary,
    /// A sweep's case and seeds.
    pub sweep: Option<(&'a str, &'a [u64])>,
    /// Why the run stopped before its end (a refusal after the run directory was made).
    pub stopped: Option<String>,
    /// Each result's last results in the history (its strip), by the result's label,
    /// when the run keeps a history.
    pub strips: Option<&'a std::collections::HashMap<String, Vec<testbench_history::Cell>>>,
    /// `--coverage`'s summary: the kernel lines reached, per file.
    pub coverage: Option<&'a crate::coverage::Summary>,
}

/// Writes `report.html` into the run directory (through a temporary file renamed into
/// place); returns its path.
pub fn write(info: &RunInfo, reports: &[BootReport]) -> std::io::Result<PathBuf> {
    let page = page(info, reports);
    let path = info.run_dir.join(REPORT_FILE);
    let tmp = info.run_dir.join(format!(".{REPORT_FILE}.tmp"));
    std::fs::write(&tmp, page)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

const STYLE: &str = "
:root{--fg:#d0d0d0;--bg:#1c1c1c;--pass:#1a7f37;--fail:#cf222e;--skip:#9a6700}
body{font:15px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#1f2328}
h1{font-size:1.5em}h2{font-size:1.15em;margin:0}
code,pre,.console{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:13px}
.counts span{font-weight:bold;margin-right:1em}
.counts .PASS{color:var(--pass)}.counts .FAIL{color:var(--fail)}.counts .SKIP{color:var(--skip)}
.verdict{display:inline-block;font-weight:bold;color:#fff;border-radius:3px;padding:0 .4em;margin-right:.5em}
.verdict.PASS{background:var(--pass)}.verdict.FAIL{background:var(--fail)}.verdict.SKIP{background:var(--skip)}.verdict.TROUBLE{background:var(--fail)}
table{border-collapse:collapse}table.results td:nth-child(-n+4){white-space:nowrap}td,th{padding:.15em .6em;text-align:left;vertical-align:top;border-bottom:1px solid #ddd}
section.boot{border:1px solid #ccc;border-radius:6px;padding:.8em 1em;margin:1em 0}
section.boot.FAIL,section.boot.TROUBLE{border-color:var(--fail);border-width:2px}
.strip{display:inline-flex;gap:1px;vertical-align:middle}.strip .s{display:inline-block;width:.45em;height:1em;background:#8c959f}
.strip .s.pass{background:var(--pass)}.strip .s.fail{background:var(--fail)}.strip .s.flaky{background:#e8a33d}.strip .s.quarantined{outline:1px dashed #57606a;outline-offset:-1px}
dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em;margin:.6em 0}dt{color:#57606a}dd{margin:0}
pre.replay{display:inline-block;margin:0;padding:.2em .5em;background:#f6f8fa;border:1px solid #ddd;white-space:pre-wrap;word-break:break-all}
pre.reason{white-space:pre-wrap;word-break:break-word;background:#fff8f8;border-left:3px solid var(--fail);padding:.4em .6em;margin:.4em 0}
.failure{background:#ffebe9;border:1px solid var(--fail);border-radius:4px;padding:.5em .8em;margin:.5em 0}
.failure .at{font-weight:bold}
.console{background:var(--bg);color:var(--fg);padding:.4em 0;border-radius:4px;overflow-x:auto;white-space:pre}
.l{padding:0 .6em;min-height:1.3em}.l .n{display:inline-block;min-width:5em;color:#777;text-decoration:none;user-select:none}
.l:target{outline:2px solid #e3b341}
.mark{border-left:4px solid}.m-expect,.m-expect-after{background:#12361f;border-color:#3fb950}
.m-input,.m-trigger{background:#0c2d4f;border-color:#58a6ff}.m-forbid,.m-fail{background:#4a1016;border-color:#ff7b72}
.tag{margin-left:1.5em;padding:0 .4em;border-radius:3px;font-size:12px;background:#444;color:#fff;white-space:pre}
.m-expect .tag,.m-expect-after .tag{background:#238636}.m-input .tag,.m-trigger .tag{background:#1f6feb}
.m-forbid .tag,.m-fail .tag{background:#da3633}
.m-crash{background:#3d1f00;border-color:#f0883e}.m-crash .tag{background:#bd561d}
.gap{color:#9da7b3;font-style:italic;padding:.2em .6em;border-top:1px dashed #555;border-bottom:1px dashed #555}
.cut{color:#9da7b3;font-style:italic}.ctl{color:#e3b341}
.failure .l{background:var(--bg);color:var(--fg);white-space:pre;overflow-x:auto;padding:.2em .6em;border-radius:3px}
.bo{font-weight:bold}.di{opacity:.7}.it{font-style:italic}.un{text-decoration:underline}.inv{color:var(--bg);background:var(--fg)}
.f0{color:#555}.f1{color:#e06c75}.f2{color:#98c379}.f3{color:#e5c07b}.f4{color:#61afef}.f5{color:#c678dd}.f6{color:#56b6c2}.f7{color:#d0d0d0}
.f8{color:#808080}.f9{color:#ff7b72}.f10{color:#7ee787}.f11{color:#f2cc60}.f12{color:#79c0ff}.f13{color:#d2a8ff}.f14{color:#76e3ea}.f15{color:#fff}
.b0{background:#000}.b1{background:#8b1a1a}.b2{background:#1a6b1a}.b3{background:#8b7a1a}.b4{background:#1a3f8b}.b5{background:#6b1a8b}.b6{background:#1a6b7a}.b7{background:#aaa}
.b8{background:#555}.b9{background:#c33}.b10{background:#3a3}.b11{background:#cc3}.b12{background:#36c}.b13{background:#c3c}.b14{background:#3cc}.b15{background:#eee}
.grid{display:flex;flex-wrap:wrap;gap:3px;margin:.3em 0 .8em}
.cell{display:inline-block;min-width:3.2em;text-align:center;color:#fff;text-decoration:none;border-radius:3px;font:12px/1.8 ui-monospace,monospace}
.cell.PASS{background:var(--pass)}.cell.FAIL{background:var(--fail)}.cell.SKIP{background:var(--skip)}
svg.histogram .bar{fill:#4f7fbf}svg.histogram text{font:11px sans-serif;fill:#333}svg.histogram line{stroke:#333}
button.copy{font-size:12px;margin-left:.5em}
details>summary{cursor:pointer;color:#57606a}
";

/// The copy button's few lines: the replay line to the clipboard.
const SCRIPT: &str = "document.addEventListener('click',function(e){var b=e.target.closest('button.copy');\
if(b&&navigator.clipboard){navigator.clipboard.writeText(b.dataset.copy);b.textContent='copied';}});";

fn verdict_of(verdict: &Verdict) -> (&'static str, &'static str) {
    match verdict {
        Verdict::Pass => ("PASS", "PASSED"),
        Verdict::ExpectedFailure(_) => ("PASS", "PASSED (failed as it must)"),
        Verdict::Fail(_) | Verdict::Unfailed(_) => ("FAIL", "FAILED"),
        Verdict::Skip(_) => ("SKIP", "SKIPPED"),
        Verdict::Trouble(_) => ("TROUBLE", "NOT RUN (the bench's trouble)"),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// A path of the run directory as a relative link: each byte not safe in a URL's path
/// percent-encoded. None for a path outside the run directory.
fn href(run_dir: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(run_dir).ok()?;
    let mut out = String::new();
    for &b in rel.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    Some(if out.is_empty() { ".".into() } else { out })
}

/// The text of a reason, cut to a bound.
fn bounded(text: &str) -> String {
    testbench_judge::quote_with(text, REASON_BYTES).into_owned()
}

/// The run's command line, from its `invocation.json`.
fn command_of(run_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(run_dir.join("invocation.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let words: Vec<String> =
        value["command"].as_array()?.iter().filter_map(|w| w.as_str()).map(crate::process::shell_quote).collect();
    Some(words.join(" "))
}

/// The whole page.
pub fn page(info: &RunInfo, reports: &[BootReport]) -> String {
    let mut out = String::new();
    let name = info.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let s = info.summary;
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>testbench: {} failed, {} passed: {}</title><style>{STYLE}</style></head><body>\n",
        s.failed,
        s.passed,
        escaped(&name)
    );
    let _ = write!(
        out,
        "<header id=\"summary\"><h1>testbench run {}</h1><p class=\"counts\"><span class=\"PASS\">{} passed,</span> \
         <span class=\"FAIL\">{} failed,</span> <span class=\"SKIP\">{} skipped</span>{} in {}</p>",
        escaped(&name),
        s.passed,
        s.failed,
        s.skipped,
        if s.trouble > 0 {
            format!(", <span class=\"FAIL\">{} bench trouble</span>", s.trouble)
        } else {
            String::new()
        },
        secs(info.took)
    );
    if let Some(command) = command_of(info.run_dir) {
        let _ = write!(out, "<p>command: <code class=\"command\">{}</code></p>", escaped(&command));
    }
    let _ = write!(
        out,
        "<p>run directory: <code>{}</code> (this page's links are relative to it)</p>",
        escaped(&info.run_dir.display().to_string())
    );
    if let Some(why) = &info.stopped {
        let _ = write!(
            out,
            "<div class=\"failure\"><p class=\"at\">the run stopped early</p><pre class=\"reason\">{}</pre></div>",
            escaped(&bounded(why))
        );
    }
    results_table(&mut out, reports, info.strips);
    out.push_str("</header>\n");
    sweep(&mut out, info, reports);
    crashes(&mut out, reports);
    if let Some(summary) = info.coverage {
        coverage(&mut out, info.run_dir, summary);
    }
    // Failures first, each open; then the rest, closed.
    let order: Vec<usize> = (0..reports.len())
        .filter(|&i| reports[i].verdict.is_failure())
        .chain((0..reports.len()).filter(|&i| !reports[i].verdict.is_failure()))
        .collect();
    let boots: Vec<usize> = order.iter().copied().filter(|&i| reports[i].kind == "boot").collect();
    let hosts: Vec<usize> = order.iter().copied().filter(|&i| reports[i].kind != "boot").collect();
    if !boots.is_empty() {
        out.push_str("<h2 class=\"part\">boots</h2>\n");
        for i in boots {
            boot_block(&mut out, info.run_dir, i, &reports[i]);
        }
    }
    if !hosts.is_empty() {
        out.push_str("<h2 class=\"part\">host cases</h2>\n");
        for i in hosts {
            host_block(&mut out, info.run_dir, i, &reports[i]);
        }
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}

/// `--coverage`'s section: the run's line, its lcov file, and each kernel source file's
/// lines reached.
fn coverage(out: &mut String, run_dir: &Path, summary: &crate::coverage::Summary) {
    out.push_str("<h2 class=\"part\" id=\"coverage\">coverage</h2>\n");
    let _ = write!(out, "<p class=\"coverage-line\">{}</p>", escaped(&summary.line()));
    if let Some(link) = href(run_dir, &summary.lcov) {
        let _ = write!(out, "<p>lcov: <a href=\"{link}\">{}</a> (genhtml reads it)</p>", escaped(&link));
    }
    out.push_str("<table class=\"coverage\"><tr><th>file</th><th>lines</th><th>reached</th><th>%</th></tr>\n");
    for file in &summary.files {
        let percent = if file.lines == 0 { 0.0 } else { 100.0 * file.reached as f64 / file.lines as f64 };
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{percent:.1}</td></tr>",
            escaped(&file.file),
            file.lines,
            file.reached
        );
    }
    out.push_str("</table>\n");
}

/// A result's strip: its last results in the history, oldest first, one mark each (pass,
/// fail, a flake's, a quarantined one's outline), each titled with its run and time.
fn strip(cells: &[testbench_history::Cell]) -> String {
    let mut text = format!("<span class=\"strip\" title=\"the last {} results, oldest first\">", cells.len());
    for cell in cells {
        let flaky = if cell.flaky { " flaky" } else { "" };
        let quarantined = if cell.quarantined { " quarantined" } else { "" };
        let _ = write!(
            text,
            "<span class=\"s {}{flaky}{quarantined}\" title=\"{} at {} UTC: {}{flaky}{quarantined}\"></span>",
            cell.outcome,
            escaped(&cell.run),
            escaped(&cell.when),
            cell.outcome
        );
    }
    text.push_str("</span>");
    text
}

fn results_table(
    out: &mut String,
    reports: &[BootReport],
    strips: Option<&std::collections::HashMap<String, Vec<testbench_history::Cell>>>,
) {
    if reports.is_empty() {
        out.push_str("<p>no results</p>");
        return;
    }
    out.push_str("<table class=\"results\"><tr><th>verdict</th><th>case</th><th>seed</th><th>time</th><th>reason</th>");
    if strips.is_some() {
        out.push_str("<th>last results</th>");
    }
    out.push_str("</tr>");
    for (i, r) in reports.iter().enumerate() {
        let (class, _) = verdict_of(&r.verdict);
        let reason = r.verdict.reason();
        let first = reason.as_deref().and_then(|r| r.lines().next()).unwrap_or("");
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td><span class=\"verdict {class}\">{class}</span></td><td><a href=\"#b{i}\">{}</a></td>\
             <td>{}</td><td>{}</td><td>{}</td>",
            escaped(&r.label()),
            escaped(&seed_text(r.seed, r.smp.is_some())),
            secs(r.duration),
            escaped(&testbench_judge::quote(first))
        );
        if let Some(strips) = strips {
            let cells = strips.get(&r.label()).map(|cells| strip(cells)).unwrap_or_default();
            let _ = write!(out, "<td>{cells}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// The run's failures grouped by their crash's title (`report::crash_groups`): each
/// group's boots link to their blocks.
fn crashes(out: &mut String, reports: &[BootReport]) {
    let groups = crate::report::crash_groups(reports);
    if groups.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section id=\"crashes\"><h2>{}</h2><table class=\"results\">",
        escaped(&crate::report::crash_groups_heading(&groups))
    );
    out.push_str("<tr><th>crash</th><th>kind</th><th>boots</th><th>first replay</th></tr>");
    for group in &groups {
        let links: Vec<String> = reports
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.verdict.failed().and_then(|f| f.crash.as_deref()).is_some_and(|c| c.title == group.title)
            })
            .filter(|(_, r)| r.verdict.is_failure())
            .map(|(i, r)| {
                format!(
                    "<a href=\"#b{i}\">{}</a>",
                    escaped(format!("{} {}", r.label(), seed_text(r.seed, r.smp.is_some())).trim_end())
                )
            })
            .collect();
        let _ = write!(
            out,
            "<tr class=\"FAIL\"><td>{}</td><td>{}</td><td>{} ({})</td><td><code class=\"command\">{}</code></td></tr>",
            escaped(&group.title),
            escaped(&group.kind),
            group.boots.len(),
            links.join(", "),
            escaped(&group.first_replay)
        );
    }
    out.push_str("</table></section>\n");
}

/// A sweep's grid (a row per label, a cell per seed, coloured by verdict, each a link
/// to its boot) and the histogram of its boot times; without a sweep, the histogram of
/// a run's boot times when it booted more than once.
fn sweep(out: &mut String, info: &RunInfo, reports: &[BootReport]) {
    let swept: Vec<usize> = (0..reports.len()).filter(|&i| reports[i].sweep).collect();
    if let Some((case, seeds)) = info.sweep {
        let _ = write!(out, "<section id=\"sweep\"><h2>sweep of {}: {} seeds</h2>", escaped(case), seeds.len());
        let mut labels: Vec<String> = swept.iter().map(|&i| reports[i].label()).collect();
        labels.dedup();
        labels.sort();
        labels.dedup();
        for label in &labels {
            let _ = write!(out, "<h3>{}</h3><div class=\"grid\">", escaped(label));
            for &i in swept.iter().filter(|&&i| &reports[i].label() == label) {
                let r = &reports[i];
                let (class, word) = verdict_of(&r.verdict);
                let seed = r.seed.map(|s| s.to_string()).unwrap_or_default();
                let _ = write!(
                    out,
                    "<a class=\"cell {class}\" href=\"#b{i}\" title=\"seed {seed}: {word} in {}\">{seed}</a>",
                    secs(r.duration)
                );
            }
            out.push_str("</div>");
        }
    }
    let timed: Vec<Duration> = if info.sweep.is_some() {
        swept.iter().map(|&i| reports[i].duration).collect()
    } else {
        reports.iter().filter(|r| r.kind == "boot").map(|r| r.duration).collect()
    };
    if timed.len() >= 2 {
        if info.sweep.is_none() {
            out.push_str("<section id=\"times\">");
        }
        histogram(out, &timed);
        out.push_str("</section>\n");
    } else if info.sweep.is_some() {
        out.push_str("</section>\n");
    }
}

/// Boot times as an SVG histogram: equal bins from the fastest to the slowest.
fn histogram(out: &mut String, times: &[Duration]) {
    let secs: Vec<f64> = times.iter().map(|d| d.as_secs_f64()).collect();
    let (lo, hi) = secs.iter().fold((f64::MAX, 0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    let bins = ((secs.len() as f64).sqrt().ceil() as usize).clamp(1, 20);
    let width = if hi > lo { (hi - lo) / bins as f64 } else { 1.0 };
    let mut counts = vec![0usize; bins];
    for s in &secs {
        let bin = if hi > lo { (((s - lo) / width) as usize).min(bins - 1) } else { 0 };
        counts[bin] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    let (w, h, left, bottom) = (560.0, 160.0, 40.0, 30.0);
    let bar_w = (w - left - 10.0) / bins as f64;
    let _ = write!(
        out,
        "<h3>boot times ({} boots)</h3><svg class=\"histogram\" role=\"img\" width=\"{w}\" height=\"{}\" \
         viewBox=\"0 0 {w} {}\"><title>boot times: {} boots from {lo:.2}s to {hi:.2}s</title>",
        secs.len(),
        h + bottom,
        h + bottom,
        secs.len()
    );
    for (i, &count) in counts.iter().enumerate() {
        let bar_h = (h - 10.0) * count as f64 / most as f64;
        let x = left + i as f64 * bar_w;
        let from = lo + i as f64 * width;
        let _ = write!(
            out,
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bar_h:.1}\" data-count=\"{count}\">\
             <title>{count} boots from {from:.2}s to {:.2}s</title></rect>",
            h - bar_h,
            (bar_w - 2.0).max(1.0),
            from + width
        );
    }
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\"/><text x=\"{left}\" y=\"{}\">{lo:.2}s</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{hi:.2}s</text><text x=\"{}\" y=\"12\" text-anchor=\"end\">{most}</text></svg>",
        w - 10.0,
        h + 16.0,
        w - 10.0,
        h + 16.0,
        left - 4.0
    );
}

/// The head every result's block shares: verdict, label, seed, duration, replay line.
fn block_head(out: &mut String, run_dir: &Path, i: usize, r: &BootReport) {
    let (class, word) = verdict_of(&r.verdict);
    let _ = write!(
        out,
        "<section class=\"boot {class}\" id=\"b{i}\"><h2><span class=\"verdict {class}\">{word}</span> \
         <span class=\"label\">{}</span></h2><dl>",
        escaped(&r.label())
    );
    let seed = seed_text(r.seed, r.smp.is_some());
    if !seed.is_empty() {
        let _ = write!(out, "<dt>seed</dt><dd class=\"seed\">{}</dd>", escaped(&seed));
    }
    let _ = write!(out, "<dt>duration</dt><dd>{}</dd>", secs(r.duration));
    if let Some(class) = r.class {
        let _ = write!(out, "<dt>class</dt><dd class=\"failure-class\">{}</dd>", class.name());
    }
    if let Some(quarantined) = &r.quarantined {
        let _ = write!(
            out,
            "<dt>quarantined</dt><dd class=\"quarantined\">until {}: {}</dd>",
            escaped(&quarantined.until),
            escaped(&quarantined.reason)
        );
    }
    let _ = write!(
        out,
        "<dt>replay</dt><dd><pre class=\"replay\">{}</pre><button type=\"button\" class=\"copy\" data-copy=\"{}\">copy</button>",
        escaped(&r.replay),
        escaped(&r.replay)
    );
    if let Some(note) = &r.replay_note {
        let _ = write!(out, "<br><small>{}</small>", escaped(note));
    }
    out.push_str("</dd>");
    if let Some(link) = href(run_dir, &r.dir) {
        let _ = write!(out, "<dt>logs</dt><dd><a href=\"{link}/\">{}</a></dd>", escaped(&link));
    }
    for note in &r.notes {
        let _ = write!(out, "<dt>note</dt><dd>{}</dd>", escaped(&bounded(note)));
    }
    out.push_str("</dl>");
}

fn host_block(out: &mut String, run_dir: &Path, i: usize, r: &BootReport) {
    block_head(out, run_dir, i, r);
    if let Some(reason) = r.verdict.reason() {
        let what = match r.verdict {
            Verdict::Fail(_) | Verdict::Unfailed(_) => "failure",
            Verdict::Skip(_) => "skipped",
            Verdict::Trouble(_) => "the bench could not run it",
            _ => "failed as it must",
        };
        let _ = write!(out, "<p>{what}:</p><pre class=\"reason\">{}</pre>", escaped(&bounded(&reason)));
    }
    out.push_str("</section>\n");
}

fn boot_block(out: &mut String, run_dir: &Path, i: usize, r: &BootReport) {
    block_head(out, run_dir, i, r);
    let failed = r.verdict.is_failure();
    let reason = r.verdict.reason();
    let second = r.dir.join("second-boot");
    // A case booted twice failed in its second boot when its reason says so.
    let second_failed = failed && reason.as_deref().is_some_and(|r| r.starts_with("second boot: "));
    let consoles: Vec<(PathBuf, String, &str)> = if second.join("console.log").is_file() {
        vec![(r.dir.clone(), format!("b{i}"), "first boot"), (second, format!("b{i}s"), "second boot")]
    } else {
        vec![(r.dir.clone(), format!("b{i}"), "")]
    };
    let crash = r.verdict.failed().and_then(|f| f.crash.as_deref());
    for (n, (dir, id, which)) in consoles.iter().enumerate() {
        let failing = failed && (consoles.len() == 1 || (n == 1) == second_failed);
        let failure = failing.then_some(reason.as_deref()).flatten().map(|reason| (reason, crash));
        console_block(out, run_dir, dir, id, which, failure, !failed);
    }
    if let (Some(reason), false) = (reason.as_deref(), failed) {
        let _ = write!(out, "<p>reason:</p><pre class=\"reason\">{}</pre>", escaped(&bounded(reason)));
    }
    out.push_str("</section>\n");
}

/// One console: the failing line at the top when this console failed the boot, then
/// its window of lines with the marks. `quiet` (a boot that did not fail) shows fewer
/// lines, in a closed `details`.
fn console_block(
    out: &mut String,
    run_dir: &Path,
    dir: &Path,
    id: &str,
    which: &str,
    failure: Option<(&str, Option<&crate::verdict::Crash>)>,
    quiet: bool,
) {
    let path = dir.join("console.log");
    let link = href(run_dir, &path);
    let log = Log::read(&path);
    let mut marks = console::read_marks(dir);
    if let Some((reason, crash)) = failure {
        failure_block(out, log.as_ref(), &marks, id, which, reason);
        if let Some(crash) = crash {
            marks.extend(crash_marks(crash));
            marks.sort_by_key(|m| m.line);
        }
    }
    let Some(log) = log else {
        let _ =
            write!(out, "<p>{}no console log</p>", if which.is_empty() { String::new() } else { format!("{which}: ") });
        return;
    };
    let (head, tail) = if quiet { (PASSED_HEAD_LINES, PASSED_TAIL_LINES) } else { (HEAD_LINES, TAIL_LINES) };
    let mut marked: Vec<(usize, &Mark)> = marks.iter().filter_map(|m| Some((log.index_of(m.line)?, m))).collect();
    marked.sort_by_key(|m| m.0);
    let context_at: Vec<usize> = marked.iter().map(|m| m.0).take(MARKS_WITH_CONTEXT).collect();
    let mut shown: Vec<usize> = context_at.clone();
    shown.extend(marked.iter().skip(MARKS_WITH_CONTEXT).map(|m| m.0));
    let ranges = console::window(log.lines(), &context_at, head, tail, CONTEXT);
    let ranges = with_lone_marks(ranges, &shown);
    let count: usize = ranges.iter().map(|r| r.len()).sum();
    let left_out = log.lines() - count;
    let title = format!(
        "{}console: {} lines{}, {} marked",
        if which.is_empty() { String::new() } else { format!("{which}: ") },
        log.lines(),
        if left_out > 0 { format!(", {count} shown") } else { String::new() },
        marked.len()
    );
    if quiet {
        let _ = write!(out, "<details class=\"console-block\"><summary>{}</summary>", escaped(&title));
    } else {
        let _ = write!(out, "<p class=\"console-title\">{}</p>", escaped(&title));
    }
    let whole = match &link {
        Some(link) => format!("<a href=\"{link}\">{}</a>", escaped(link)),
        None => escaped(&path.display().to_string()),
    };
    if let Some(note) = log.cut_note() {
        let _ = write!(out, "<p class=\"cut\">{}</p>", escaped(&note));
    }
    if marked.len() < marks.len() {
        let _ =
            write!(out, "<p class=\"cut\">{} marked lines are in what the log dropped</p>", marks.len() - marked.len());
    }
    if !log.whole() {
        let _ = write!(
            out,
            "<p class=\"cut\">the log has {} bytes; only its first {} were read</p>",
            log.size,
            log.bytes_read()
        );
    }
    let _ = write!(out, "<div class=\"console\" id=\"{id}-console\">");
    lines_shown(out, &log, &ranges, &marked, id, &whole);
    let _ = write!(out, "</div><p class=\"whole\">the whole log: {whole}</p>");
    if quiet {
        out.push_str("</details>");
    }
}

/// The most lines of a crash report marked in the console view.
const CRASH_MARKS: u64 = 200;

/// A failing boot's crash report, its lines marked: its first with its title.
fn crash_marks(crash: &crate::verdict::Crash) -> Vec<Mark> {
    (crash.line..crash.line + crash.lines.clamp(1, CRASH_MARKS))
        .map(|line| Mark {
            line,
            rule: "crash".into(),
            label: if line == crash.line { format!("crash: {}", crash.title) } else { String::new() },
            pattern: String::new(),
        })
        .collect()
}

/// A failing boot's head: the line that failed it (the forbidden one, else a program's
/// FAIL line, else the console's last), then its reason.
fn failure_block(out: &mut String, log: Option<&Log>, marks: &[Mark], id: &str, which: &str, reason: &str) {
    out.push_str("<div class=\"failure\">");
    // The line that failed the boot: the forbidden one, else a program's FAIL line.
    let failing = marks.iter().find(|m| m.rule == "forbid").or_else(|| marks.iter().find(|m| m.rule == "fail"));
    match (failing, &log) {
        (Some(mark), Some(log)) => {
            let at = log.index_of(mark.line);
            let _ = write!(
                out,
                "<p class=\"at\">{}failed at line <a href=\"#{id}-L{n}\">{n}</a>: {} '{}'</p>",
                if which.is_empty() { String::new() } else { format!("{which}: ") },
                escaped(&mark.label),
                escaped(&testbench_judge::quote(&mark.pattern)),
                n = mark.line
            );
            match at {
                Some(index) => {
                    let _ = write!(out, "<div class=\"l failing-line\">");
                    term::render_line(log.line(index), out);
                    out.push_str("</div>");
                }
                None => out.push_str("<p class=\"cut\">(a line the log itself dropped)</p>"),
            }
        }
        (None, Some(log)) if log.lines() > 0 => {
            let last = (0..log.lines()).rev().find_map(|i| log.number(i)).unwrap_or(0);
            let _ = write!(
                out,
                "<p class=\"at\">{}failed; the console's last line is <a href=\"#{id}-L{last}\">line {last}</a></p>",
                if which.is_empty() { String::new() } else { format!("{which}: ") }
            );
        }
        _ => {
            let _ = write!(out, "<p class=\"at\">failed; the boot left no console</p>");
        }
    }
    let _ = write!(out, "<pre class=\"reason\">{}</pre></div>", escaped(&bounded(reason)));
}

/// The console's lines in `ranges`, each with its marks, a gap row for what is left out.
fn lines_shown(
    out: &mut String,
    log: &Log,
    ranges: &[std::ops::Range<usize>],
    marked: &[(usize, &Mark)],
    id: &str,
    whole: &str,
) {
    let mut next = 0;
    let mut m = 0;
    for range in ranges {
        if range.start > next {
            gap(out, log, next..range.start, whole);
        }
        for index in range.clone() {
            while m < marked.len() && marked[m].0 < index {
                m += 1;
            }
            let here: Vec<&Mark> = marked[m..].iter().take_while(|x| x.0 == index).map(|x| x.1).collect();
            line_row(out, log, index, id, &here);
        }
        next = range.end;
    }
    if next < log.lines() {
        gap(out, log, next..log.lines(), whole);
    }
}

/// Ranges with a one-line range added for each marked line they leave out.
fn with_lone_marks(mut ranges: Vec<std::ops::Range<usize>>, marked: &[usize]) -> Vec<std::ops::Range<usize>> {
    for &m in marked {
        if !ranges.iter().any(|r| r.contains(&m)) {
            ranges.push(m..m + 1);
        }
    }
    ranges.sort_by_key(|r| r.start);
    ranges
}

fn gap(out: &mut String, log: &Log, range: std::ops::Range<usize>, whole: &str) {
    let first = (range.clone()).find_map(|i| log.number(i));
    let last = range.clone().rev().find_map(|i| log.number(i));
    let lines = match (first, last) {
        (Some(a), Some(b)) => format!(" (lines {a}–{b})"),
        _ => String::new(),
    };
    let _ =
        write!(out, "<div class=\"gap\">… {} lines left out here{lines}; the whole log: {whole}</div>", range.len());
}

fn line_row(out: &mut String, log: &Log, index: usize, id: &str, marks: &[&Mark]) {
    let Some(number) = log.number(index) else {
        // The bench's note of the log's own cut.
        out.push_str("<div class=\"l cut\">");
        term::render_line(log.line(index), out);
        out.push_str("</div>");
        return;
    };
    let mut class = String::from("l");
    if let Some(first) = marks.first() {
        let _ = write!(class, " mark m-{}", escaped(&first.rule));
    }
    let _ = write!(
        out,
        "<div class=\"{class}\" id=\"{id}-L{number}\"><a class=\"n\" href=\"#{id}-L{number}\">{number}</a>"
    );
    term::render_line(log.line(index), out);
    for mark in marks.iter().filter(|m| !m.label.is_empty()) {
        match mark.pattern.is_empty() {
            true => {
                let _ = write!(out, " <span class=\"tag\">{}</span>", escaped(&mark.label));
            }
            false => {
                let _ = write!(
                    out,
                    " <span class=\"tag\">{} '{}'</span>",
                    escaped(&mark.label),
                    escaped(&testbench_judge::quote(&mark.pattern))
                );
            }
        }
    }
    out.push_str("</div>");
}

#[cfg(test)]
mod tests;
