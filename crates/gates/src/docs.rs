//! The docs checker: holds the book under `docs/` to its own rules.
//!
//! The book is mdBook-shaped: `docs/SUMMARY.md` is the table of contents, every other
//! `*.md` under `docs/` is a page. A page describes one feature, or one feature per `## `
//! section, and each feature carries exactly one status line saying whether it is built
//! and which tests prove it. [`check`] reads the pages and returns one [`Finding`] per
//! broken rule, displayed `path:line: C<n>: message`.
//!
//! # Feature sections
//!
//! - A page whose text before its first `## ` heading (its preface) holds a status line,
//!   or that has no `## ` heading at all, is one feature: it holds exactly one status line
//!   in all (its `## ` sections are parts of that feature, not features of their own).
//! - Otherwise each `## ` section, down to the next `## ` heading, is one feature, and
//!   holds exactly one status line; deeper headings (`### `) belong to their `## `.
//! - A page that SUMMARY.md lists outside its numbered list (mdBook's prefix and suffix
//!   chapters, such as the introduction) describes no feature: it needs no status line,
//!   though one it does hold is checked like any other.
//!
//! Fenced code blocks (```` ``` ```` or `~~~`) are skipped whole: a `# ` or `Status:` in
//! a code block is not a heading or a status line, and a link there is not checked.
//! Setext headings (underlined with `===` or `---`) are not read as headings.
//!
//! # Rules
//!
//! - **C1** — status lines. A feature with no status line; a second status line in one
//!   feature (`a second status line in "Profiles" (the first is on line 22)`); a line that
//!   begins with `Status` but is not one of
//!   - `Status: planned`
//!   - `Status: built · tested: <ref>, <ref>, ...`
//!   - `Status: built · partly tested: <what is not> · tested: <ref>, ...`
//!
//!   where each `<ref>` is `bench:<case>` or `host:<package>::<test>`. Anything else in
//!   the list (`./test`, `scripts/bench`, a bare test name) is refused: the checker could
//!   not hold it to anything. Example: `docs/setup.md:3: C1: "./test" is not a test
//!   reference: write bench:<case> or host:<package>::<test>`.
//! - **C2** — every test a status line names exists. `bench:<case>` needs
//!   `tests/<case>.toml` in the tree. `host:<package>::<test>` needs `<test>` in the lists
//!   of the package's test binaries (a [`TestIndex`]): either its full path as libtest
//!   prints it (`runner::tests::foo`; an integration test binary's tests have no module
//!   prefix) or, when that names exactly one test of the package, its last segment
//!   (`foo`). `<package>` is the Cargo package name (`testbench-judge`). Example:
//!   `docs/running.md:5: C2: host:testbench::foo: no test foo in testbench's test binaries`.
//! - **C3** — every relative link (`[text](path)`, `[text](path#anchor)`, `![alt](path)`,
//!   and reference definitions `[label]: path`) resolves to an existing file or directory,
//!   relative to the page. An anchor into a Markdown page (or `#anchor` alone, into the
//!   page itself) must be the id mdBook gives one of that page's headings (lowercased,
//!   spaces to `-`, punctuation dropped, `-1`, `-2`... on repeats; `{#id}` when given);
//!   anchors into other files are not checked. Links with a scheme (`https:`, `mailto:`)
//!   are not checked; an absolute path is refused. SUMMARY.md's links are C4's. Example:
//!   `docs/cases.md:50: C3: guest.md: no such file (docs/guest.md)`.
//! - **C4** — the table of contents: every page is an entry of SUMMARY.md, and every
//!   entry of SUMMARY.md is a page that exists (an entry with an empty target, mdBook's
//!   draft chapter, names no file). Example: `docs/SUMMARY.md:13: C4: performance.md is
//!   in the table of contents but docs/performance.md does not exist`.
//! - **C5** — no binary file under `docs/`: a file with a NUL byte or that is not UTF-8,
//!   or whose extension is an image, font, archive or PDF format whatever it holds
//!   (`.png`, `.jpg`, `.gif`, `.woff`, `.pdf`, `.zip`...). SVG is text and allowed.
//!   `docs/book/`, mdBook's build output, is not read. Example: `docs/logo.png: C5: a
//!   binary file (.png) under docs/`.
//!
//! The test index comes from cargo ([`TestIndex::from_cargo`]: `cargo test --workspace
//! --no-run`, then each test binary's `--list --format terse`); [`packages_named`] says
//! which packages the book names. The checker itself only reads files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use testbench_process::{Cmd, CmdError};

use crate::Finding;

/// The separator between the parts of a status line (a middle dot between spaces).
const SEP: &str = " · ";

/// Extensions that are binary formats whatever the bytes of the file.
const BINARY_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "bmp", "ico", "tif", "tiff", "avif", "pdf", "woff", "woff2", "ttf", "otf",
    "eot", "zip", "gz", "tgz", "xz", "zst", "bz2", "7z", "tar", "wasm", "svgz",
];

/// The tests each package's test binaries list, by package name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestIndex {
    packages: BTreeMap<String, BTreeSet<String>>,
}

/// Why cargo could not list the tests.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Not started, not waited for, or killed at the deadline (which the error names).
    #[error(transparent)]
    Run(#[from] CmdError),
    #[error("{program}: {status}:\n{stderr}")]
    Failed { program: String, status: String, stderr: String },
    #[error("{program}: {message}")]
    Output { program: String, message: String },
}

impl TestIndex {
    /// An index of no packages.
    pub fn new() -> Self {
        Self::default()
    }

    /// An index from lists already at hand: `(package, test names)`.
    pub fn from_lists<P, T, N>(lists: impl IntoIterator<Item = (P, T)>) -> Self
    where
        P: Into<String>,
        T: IntoIterator<Item = N>,
        N: Into<String>,
    {
        let mut index = Self::new();
        for (package, names) in lists {
            index.insert(package, names);
        }
        index
    }

    /// Adds tests to a package's list (creating the package when it is new).
    pub fn insert<N: Into<String>>(&mut self, package: impl Into<String>, names: impl IntoIterator<Item = N>) {
        self.packages.entry(package.into()).or_default().extend(names.into_iter().map(Into::into));
    }

    /// Builds the workspace's tests in `tree` as `./test` does (`cargo test --workspace
    /// --no-run`, so after `./test`'s own build nothing is rebuilt: building one package
    /// alone could select other features of its dependencies and rebuild them), then runs
    /// each test binary of the named packages with `--list --format terse`. Doc tests are
    /// not listed (a status line cannot name one). A package that is not in the workspace
    /// is left out of the index, so a reference to it is a finding; a build that fails, or
    /// `timeout` passing, is an error. No packages: cargo is not run. Cargo is `$CARGO` when set (as it is under `cargo
    /// run` and `cargo test`), else `cargo` on the PATH.
    pub fn from_cargo<S: AsRef<str>>(
        tree: &Path,
        packages: impl IntoIterator<Item = S>,
        timeout: Duration,
    ) -> Result<Self, IndexError> {
        let deadline = Instant::now() + timeout;
        let wanted: BTreeSet<String> = packages.into_iter().map(|p| p.as_ref().to_owned()).collect();
        if wanted.is_empty() {
            return Ok(Self::new());
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let build = Cmd::new(&cargo, "", timeout).cwd(tree).args([
            "test",
            "--workspace",
            "--no-run",
            "--color",
            "never",
            "--message-format",
            "json-render-diagnostics",
        ]);
        let program = "cargo test --workspace --no-run";
        let messages = run(build, program, "to build the tests the book names", deadline)?;
        let mut index = Self::new();
        for line in messages.lines().filter(|line| line.starts_with('{')) {
            let message: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| IndexError::Output { program: program.to_owned(), message: format!("{e}: {line}") })?;
            let executable = message["executable"].as_str();
            let manifest = message["manifest_path"].as_str();
            let (Some(executable), Some(manifest)) = (executable, manifest) else { continue };
            if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
                continue;
            }
            let manifest = Path::new(manifest);
            let package = package_name(manifest).ok_or_else(|| IndexError::Output {
                program: program.to_owned(),
                message: format!("no package name in {}", manifest.display()),
            })?;
            if !wanted.contains(&package) {
                continue;
            }
            let list = Cmd::new(executable, "", timeout)
                .cwd(manifest.parent().unwrap_or(tree))
                .args(["--list", "--format", "terse"]);
            let output =
                run(list, &format!("{executable} --list"), &format!("to list the tests of {package}"), deadline)?;
            index.insert(package, Self::parse_terse(&output));
        }
        Ok(index)
    }

    /// The test names in libtest's terse list (`name: test` lines; benchmarks and every
    /// other line are left out).
    pub fn parse_terse(output: &str) -> Vec<String> {
        output.lines().filter_map(|line| line.strip_suffix(": test")).map(str::to_owned).collect()
    }

    /// The packages in the index.
    pub fn packages(&self) -> impl Iterator<Item = &str> {
        self.packages.keys().map(String::as_str)
    }

    /// The tests a reference `name` names in `package`: the full path, or else every test
    /// whose last segment it is (a name with `::` is only ever a full path).
    fn resolve(&self, package: &str, name: &str) -> Option<Vec<&str>> {
        let tests = self.packages.get(package)?;
        if let Some(full) = tests.get(name) {
            return Some(vec![full.as_str()]);
        }
        if name.contains("::") {
            return Some(Vec::new());
        }
        Some(tests.iter().map(String::as_str).filter(|t| t.rsplit("::").next() == Some(name)).collect())
    }
}

/// The `[package] name` of a manifest.
fn package_name(manifest: &Path) -> Option<String> {
    let text = fs::read_to_string(manifest).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    value.get("package")?.get("name")?.as_str().map(str::to_owned)
}

/// Runs a command to its end, or kills it when `deadline` (shared by every command of
/// one index) passes, naming `program` and `purpose` as what it waited for; its stdout.
fn run(command: Cmd, program: &str, purpose: &str, deadline: Instant) -> Result<String, IndexError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let output = command.deadline(left, format!("{program} {purpose}")).output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        return Ok(stdout);
    }
    let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
    let stderr = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    Err(IndexError::Failed { program: program.to_owned(), status: output.status.to_string(), stderr })
}

/// A test a status line names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TestRef {
    Bench(String),
    Host { package: String, test: String },
}

impl fmt::Display for TestRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestRef::Bench(case) => write!(f, "bench:{case}"),
            TestRef::Host { package, test } => write!(f, "host:{package}::{test}"),
        }
    }
}

/// The forms a status line may take, as its errors say them.
const FORMS: &str =
    "expected \"Status: planned\", \"Status: built · tested: <ref>, ...\" or \"Status: built · partly tested: <what is not> · tested: <ref>, ...\"";

/// What is wrong with a status line (the finding's message is its text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum StatusError {
    /// Not one of the [`FORMS`].
    #[error("malformed status line: {FORMS}")]
    Malformed,
    /// `partly tested:` with nothing after it.
    #[error("malformed status line: \"partly tested:\" says what is not tested; {FORMS}")]
    PartlyUnsaid,
    /// A reference that is neither `bench:<case>` nor `host:<package>::<test>`.
    #[error("{0:?} is not a test reference: write bench:<case> or host:<package>::<test>")]
    NotAReference(String),
}

/// Reads a status line (without its line end): the references it names, or what is wrong.
fn parse_status(line: &str) -> Result<Vec<TestRef>, StatusError> {
    let line = line.trim_end();
    let Some(rest) = line.strip_prefix("Status: ") else {
        return Err(StatusError::Malformed);
    };
    if rest == "planned" {
        return Ok(Vec::new());
    }
    let Some(rest) = rest.strip_prefix("built") else {
        return Err(StatusError::Malformed);
    };
    let parts: Vec<&str> = rest.split(SEP).collect();
    let list = match parts.as_slice() {
        ["", tested] => tested.strip_prefix("tested: "),
        ["", partly, tested] => match partly.strip_prefix("partly tested: ") {
            Some(why) if !why.trim().is_empty() => tested.strip_prefix("tested: "),
            _ => return Err(StatusError::PartlyUnsaid),
        },
        _ => None,
    };
    let Some(list) = list else {
        return Err(StatusError::Malformed);
    };
    list.split(", ").map(parse_ref).collect()
}

fn parse_ref(text: &str) -> Result<TestRef, StatusError> {
    let refused = || StatusError::NotAReference(text.to_owned());
    let is_name = |s: &str, extra: &[char]| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c))
    };
    if let Some(case) = text.strip_prefix("bench:") {
        return if is_name(case, &['-']) { Ok(TestRef::Bench(case.to_owned())) } else { Err(refused()) };
    }
    if let Some(rest) = text.strip_prefix("host:") {
        if let Some((package, test)) = rest.split_once("::") {
            if is_name(package, &['-']) && test.split("::").all(|segment| is_name(segment, &[])) {
                return Ok(TestRef::Host { package: package.to_owned(), test: test.to_owned() });
            }
        }
    }
    Err(refused())
}

/// Is this line an attempt at a status line (so a misspelt one is caught, not skipped)?
fn looks_like_status(line: &str) -> bool {
    let line = line.trim_start().trim_start_matches(['*', '_']);
    line.get(..6).is_some_and(|word| word.eq_ignore_ascii_case("status"))
        && line[6..].trim_start().trim_start_matches(['*', '_']).starts_with(':')
}

/// A page read into what the rules need: headings, status lines and links, each with
/// its line number (1-based), fenced code left out.
#[derive(Default)]
struct Page {
    /// `(level, text, line)`.
    headings: Vec<(usize, String, usize)>,
    /// `(text, line)`.
    statuses: Vec<(String, usize)>,
    /// `(target, line)`.
    links: Vec<(String, usize)>,
    /// `(line, whether it is a list item)` of each line that holds a link, for SUMMARY.md.
    list_items: BTreeMap<usize, bool>,
}

fn read_page(text: &str) -> Page {
    let mut page = Page::default();
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = line.trim_start();
        if let Some((ch, len)) = fence {
            let run = body.chars().take_while(|&c| c == ch).count();
            if indent < 4 && run >= len && body[run..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if indent < 4 {
            for ch in ['`', '~'] {
                let run = body.chars().take_while(|&c| c == ch).count();
                if run >= 3 {
                    fence = Some((ch, run));
                }
            }
            if fence.is_some() {
                continue;
            }
            let hashes = body.chars().take_while(|&c| c == '#').count();
            if (1..=6).contains(&hashes) && (body.len() == hashes || body[hashes..].starts_with([' ', '\t'])) {
                let title = body[hashes..].trim().trim_end_matches('#').trim_end();
                page.headings.push((hashes, title.to_owned(), number));
                continue;
            }
        }
        if looks_like_status(line) {
            page.statuses.push((line.to_owned(), number));
        }
        let found = links_in(line);
        if !found.is_empty() {
            let item = body.starts_with("- ")
                || body.starts_with("* ")
                || body.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            page.list_items.insert(number, item);
        }
        page.links.extend(found.into_iter().map(|target| (target, number)));
    }
    page
}

/// The link targets on one line: inline links and images, and a reference definition.
/// Code spans are left out.
fn links_in(line: &str) -> Vec<String> {
    let text = without_code_spans(line);
    let mut targets = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        if let Some(close) = trimmed.find("]:") {
            let label = &trimmed[1..close];
            if !label.is_empty() && !label.contains(']') {
                if let Some(target) = trimmed[close + 2..].split_whitespace().next() {
                    targets.push(target.trim_start_matches('<').trim_end_matches('>').to_owned());
                }
                return targets;
            }
        }
    }
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let inside = after[..end].trim();
        let target = if let Some(angled) = inside.strip_prefix('<') {
            angled.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        targets.push(target.to_owned());
        rest = &after[end.min(after.len())..];
    }
    targets
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let fence = &rest[start..start + run];
        match rest[start + run..].find(fence) {
            Some(close) => rest = &rest[start + run + close + run..],
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The ids mdBook gives a page's headings.
fn heading_ids(page: &Page) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (_, text, _) in &page.headings {
        let custom = text.rfind("{#").filter(|_| text.ends_with('}')).map(|at| (at, &text[at + 2..text.len() - 1]));
        let id = match custom {
            Some((_, attrs)) => attrs.split_whitespace().next().unwrap_or("").to_owned(),
            None => normalize_id(&plain_text(text)),
        };
        let count = seen.entry(id.clone()).or_insert(0);
        ids.insert(if *count == 0 { id.clone() } else { format!("{id}-{count}") });
        *count += 1;
    }
    ids
}

/// A heading's text without its inline markup: code ticks, emphasis stars, link targets.
fn plain_text(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..at]);
        rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out.chars().filter(|c| !matches!(c, '`' | '*' | '[' | ']')).collect()
}

/// mdBook's heading id: alphanumerics, `_` and `-` kept and lowercased, whitespace to `-`.
fn normalize_id(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// Every file under `dir` (not following symlinks), relative to it, sorted; `book/` at
/// the top (mdBook's build output) is left out.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(root.join(rel)) else { return };
        for entry in entries.flatten() {
            let rel = rel.join(entry.file_name());
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if rel != Path::new("book") {
                    walk(root, &rel, out);
                }
            } else if kind.is_file() {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, Path::new(""), &mut out);
    out.sort();
    out
}

/// `base` joined with a relative `path`, `.` and `..` folded; `None` when `..` climbs out
/// of the root.
fn join_normal(base: &Path, path: &str) -> Option<PathBuf> {
    let mut out: Vec<Component> = base.components().collect();
    for part in Path::new(path).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            other => out.push(other),
        }
    }
    Some(out.iter().collect())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// The packages the status lines of the book in `docs` (relative to `tree`, or absolute)
/// name in `host:` references, sorted, for [`TestIndex::from_cargo`].
pub fn packages_named(tree: &Path, docs: &Path) -> Vec<String> {
    let docs = tree.join(docs);
    let mut packages = BTreeSet::new();
    for rel in files_under(&docs) {
        if rel.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        let Ok(text) = fs::read_to_string(docs.join(&rel)) else { continue };
        for (line, _) in read_page(&text).statuses {
            for reference in parse_status(&line).unwrap_or_default() {
                if let TestRef::Host { package, .. } = reference {
                    packages.insert(package);
                }
            }
        }
    }
    packages.into_iter().collect()
}

/// Checks the book in `docs` (a path relative to `tree`, or absolute inside it) against
/// rules C1 to C5 (the module documentation), with `bench:` references read against
/// `tree/tests/` and `host:` references against `tests`. Finding paths are relative to
/// `tree`. An empty list is a pass.
pub fn check(tree: &Path, docs: &Path, tests: &TestIndex) -> Vec<Finding> {
    let docs_dir = tree.join(docs);
    let docs_rel = docs_dir.strip_prefix(tree).map(Path::to_path_buf).unwrap_or_else(|_| docs.to_path_buf());
    let finding = |path: PathBuf, line: Option<usize>, code: &str, message: String| Finding {
        path,
        line,
        code: code.to_owned(),
        message,
    };
    let mut findings = Vec::new();

    // C5 first: it decides which pages can be read at all.
    let files = files_under(&docs_dir);
    let mut pages: BTreeMap<PathBuf, Page> = BTreeMap::new();
    for rel in &files {
        let path = docs_rel.join(rel);
        let extension = rel.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if let Some(ext) = extension.as_deref().filter(|ext| BINARY_EXTENSIONS.contains(ext)) {
            findings.push(finding(path, None, "C5", format!("a binary file (.{ext}) under {}/", docs_rel.display())));
            continue;
        }
        let bytes = match fs::read(docs_dir.join(rel)) {
            Ok(bytes) => bytes,
            Err(error) => {
                findings.push(finding(path, None, "C5", format!("cannot be read: {error}")));
                continue;
            }
        };
        let text = match (bytes.iter().position(|&b| b == 0), std::str::from_utf8(&bytes)) {
            (Some(at), _) => {
                let message = format!("a binary file under {}/: a NUL byte at offset {at}", docs_rel.display());
                findings.push(finding(path, None, "C5", message));
                continue;
            }
            (None, Err(error)) => {
                let at = error.valid_up_to();
                let message = format!("a binary file under {}/: not UTF-8 at offset {at}", docs_rel.display());
                findings.push(finding(path, None, "C5", message));
                continue;
            }
            (None, Ok(text)) => text,
        };
        if extension.as_deref() == Some("md") {
            pages.insert(rel.clone(), read_page(text));
        }
    }

    // C4: the table of contents.
    let summary_rel = PathBuf::from("SUMMARY.md");
    let summary_path = docs_rel.join(&summary_rel);
    let mut listed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut unnumbered: BTreeSet<PathBuf> = BTreeSet::new();
    match pages.get(&summary_rel) {
        None => {
            let message = format!("no table of contents: {} does not exist", summary_path.display());
            findings.push(finding(summary_path.clone(), None, "C4", message));
        }
        Some(summary) => {
            for (target, line) in &summary.links {
                if target.is_empty() || has_scheme(target) {
                    continue;
                }
                let file = percent_decode(target.split('#').next().unwrap_or(""));
                let Some(rel) = join_normal(Path::new(""), &file).filter(|_| !file.starts_with('/')) else {
                    let message = format!("{target} is not a page of the book");
                    findings.push(finding(summary_path.clone(), Some(*line), "C4", message));
                    continue;
                };
                if !docs_dir.join(&rel).is_file() {
                    let message = format!(
                        "{target} is in the table of contents but {} does not exist",
                        docs_rel.join(&rel).display()
                    );
                    findings.push(finding(summary_path.clone(), Some(*line), "C4", message));
                }
                if summary.list_items.get(line) != Some(&true) {
                    unnumbered.insert(rel.clone());
                }
                listed.insert(rel);
            }
        }
    }
    for rel in pages.keys() {
        if *rel != summary_rel && !listed.contains(rel) && pages.contains_key(&summary_rel) {
            let message = format!("a page that is not in the table of contents ({})", summary_path.display());
            findings.push(finding(docs_rel.join(rel), None, "C4", message));
        }
    }

    for (rel, page) in &pages {
        if *rel == summary_rel {
            continue;
        }
        let path = docs_rel.join(rel);
        findings.extend(check_statuses(tree, &path, page, unnumbered.contains(rel), tests));
        findings.extend(check_links(tree, &docs_dir, &docs_rel, rel, page, &pages));
    }
    findings.sort_by(|a, b| (&a.path, a.line, &a.code).cmp(&(&b.path, b.line, &b.code)));
    findings
}

/// C1 and C2 on one page.
fn check_statuses(tree: &Path, path: &Path, page: &Page, exempt: bool, tests: &TestIndex) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut push = |line: usize, code: &str, message: String| {
        findings.push(Finding { path: path.to_path_buf(), line: Some(line), code: code.to_owned(), message });
    };
    // The features: (name, first line, last line) of each.
    let sections: Vec<(usize, &str)> =
        page.headings.iter().filter(|(level, ..)| *level == 2).map(|(_, text, line)| (*line, text.as_str())).collect();
    let first_section = sections.first().map_or(usize::MAX, |(line, _)| *line);
    let title = page.headings.iter().find(|(level, ..)| *level == 1);
    let page_name = title.map_or_else(|| path.display().to_string(), |(_, text, _)| text.clone());
    let page_line = title.map_or(1, |(.., line)| *line);
    let whole_page = sections.is_empty() || page.statuses.iter().any(|(_, line)| *line < first_section);
    let features: Vec<(usize, usize, &str)> = if whole_page {
        vec![(page_line, usize::MAX, page_name.as_str())]
    } else {
        let mut features = Vec::new();
        for (i, (line, name)) in sections.iter().enumerate() {
            let end = sections.get(i + 1).map_or(usize::MAX, |(next, _)| next - 1);
            features.push((*line, end, *name));
        }
        features
    };
    for (start, end, name) in &features {
        let within: Vec<&(String, usize)> =
            page.statuses.iter().filter(|(_, line)| (*start..=*end).contains(line)).collect();
        if within.is_empty() && !exempt {
            push(
                *start,
                "C1",
                format!("{name:?} has no status line (Status: built · tested: <ref>, ... or Status: planned)"),
            );
        }
        if let Some((_, first)) = within.first() {
            for (_, line) in within.iter().skip(1) {
                push(*line, "C1", format!("a second status line in {name:?} (the first is on line {first})"));
            }
        }
    }
    for (text, line) in &page.statuses {
        let references = match parse_status(text) {
            Ok(references) => references,
            Err(error) => {
                push(*line, "C1", error.to_string());
                continue;
            }
        };
        for reference in references {
            if let Some(message) = missing_test(tree, &reference, tests) {
                push(*line, "C2", format!("{reference}: {message}"));
            }
        }
    }
    findings
}

/// What is wrong with a reference, if anything (C2).
fn missing_test(tree: &Path, reference: &TestRef, tests: &TestIndex) -> Option<String> {
    match reference {
        TestRef::Bench(case) => {
            let file = Path::new("tests").join(format!("{case}.toml"));
            (!tree.join(&file).is_file()).then(|| format!("no such case: {} does not exist", file.display()))
        }
        TestRef::Host { package, test } => match tests.resolve(package, test) {
            None => {
                let known: Vec<&str> = tests.packages().collect();
                Some(format!("no package {package} in the test index (it holds: {})", known.join(", ")))
            }
            Some(found) if found.is_empty() => Some(format!("no test {test} in {package}'s test binaries")),
            Some(found) if found.len() > 1 => {
                Some(format!("{test} names {} tests ({}); write the full path", found.len(), found.join(", ")))
            }
            Some(_) => None,
        },
    }
}

/// C3 on one page.
fn check_links(
    tree: &Path,
    docs_dir: &Path,
    docs_rel: &Path,
    rel: &Path,
    page: &Page,
    pages: &BTreeMap<PathBuf, Page>,
) -> Vec<Finding> {
    let path = docs_rel.join(rel);
    let page_dir = rel.parent().unwrap_or(Path::new(""));
    let mut findings = Vec::new();
    for (target, line) in &page.links {
        let mut push = |message: String| {
            findings.push(Finding { path: path.clone(), line: Some(*line), code: "C3".to_owned(), message });
        };
        if target.is_empty() {
            push("a link with an empty target".to_owned());
            continue;
        }
        if has_scheme(target) || target.starts_with("//") {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
        let file = percent_decode(file);
        if file.starts_with('/') {
            push(format!("{target}: an absolute path; a link is relative to its page"));
            continue;
        }
        // Resolved against the book's directory; `..` may climb into the rest of the tree.
        let docs_in_tree = Path::new("").join(docs_rel).join(page_dir);
        let Some(in_tree) = join_normal(&docs_in_tree, &file) else {
            push(format!("{target}: leaves the tree"));
            continue;
        };
        if !file.is_empty() && !tree.join(&in_tree).exists() {
            push(format!("{target}: no such file ({})", in_tree.display()));
            continue;
        }
        if anchor.is_empty() {
            continue;
        }
        let linked = if file.is_empty() {
            Some(page)
        } else if file.ends_with(".md") {
            let docs_rel_page = tree.join(&in_tree).strip_prefix(docs_dir).ok().map(Path::to_path_buf);
            docs_rel_page.and_then(|p| pages.get(&p))
        } else {
            None
        };
        if let Some(linked) = linked {
            if !heading_ids(linked).contains(anchor) {
                let shown = if file.is_empty() { path.display() } else { in_tree.display() };
                push(format!("{target}: no heading with the id {anchor:?} in {shown}"));
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse_or_say_what_is_wrong() {
        assert_eq!(parse_status("Status: planned"), Ok(vec![]));
        assert_eq!(
            parse_status("Status: built · tested: bench:a-b, host:testbench-judge::x::y"),
            Ok(vec![
                TestRef::Bench("a-b".into()),
                TestRef::Host { package: "testbench-judge".into(), test: "x::y".into() }
            ])
        );
        assert_eq!(
            parse_status("Status: built · partly tested: the fallback · tested: bench:a"),
            Ok(vec![TestRef::Bench("a".into())])
        );
        use StatusError::{Malformed, NotAReference, PartlyUnsaid};
        let refused = |text: &str| NotAReference(text.to_owned());
        for (bad, expected) in [
            ("Status: built", Malformed),
            ("Status: built · tested:", Malformed),
            ("Status: built · tested: ", Malformed),
            ("Status: built - tested: bench:a", Malformed),
            ("Status: built · partly tested:  · tested: bench:a", PartlyUnsaid),
            ("Status: done", Malformed),
            ("Status:planned", Malformed),
            ("status: planned", Malformed),
            ("Status: built · tested: bench:a,bench:b", refused("bench:a,bench:b")),
            ("Status: built · tested: ./test", refused("./test")),
            ("Status: built · tested: host:testbench", refused("host:testbench")),
            ("Status: built · tested: host:testbench::", refused("host:testbench::")),
            ("Status: built · tested: bench:a b", refused("bench:a b")),
        ] {
            assert_eq!(parse_status(bad), Err(expected), "{bad:?}");
        }
        assert_eq!(
            parse_status("Status: built · tested: ./test (always)").unwrap_err().to_string(),
            "\"./test (always)\" is not a test reference: write bench:<case> or host:<package>::<test>"
        );
        assert!(Malformed.to_string().starts_with("malformed status line: expected \"Status: planned\""));
    }

    #[test]
    fn status_like_lines_are_caught() {
        for line in ["Status: planned", "status: x", "**Status:** built", "  STATUS : x"] {
            assert!(looks_like_status(line), "{line:?}");
        }
        for line in ["Statuses are kept", "The status: x", "State: x"] {
            assert!(!looks_like_status(line), "{line:?}");
        }
    }

    #[test]
    fn links_are_found_outside_code() {
        assert_eq!(links_in("see [a](b.md) and ![i](img/x.svg \"title\")"), vec!["b.md", "img/x.svg"]);
        assert_eq!(links_in("`[a](not.md)` but [b](yes.md#x)"), vec!["yes.md#x"]);
        assert_eq!(links_in("[a](<with space.md>)"), vec!["with space.md"]);
        assert_eq!(links_in("[a](f(x).md)"), vec!["f(x).md"]);
        assert_eq!(links_in("[label]: ../README.md \"t\""), vec!["../README.md"]);
        assert!(links_in("no links [here] (really)").is_empty());
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        let page = read_page("# The `[guest]` table\n## Sweeps\n## Sweeps\n## Replay {#again}\n## A [link](x.md) 2!\n");
        let ids: Vec<String> = heading_ids(&page).into_iter().collect();
        assert_eq!(ids, vec!["a-link-2", "again", "sweeps", "sweeps-1", "the-guest-table"]);
    }

    #[test]
    fn fenced_code_is_not_read() {
        let page = read_page("# T\n```toml\n# not a heading\nStatus: no\n[a](b)\n```\n~~~\n```\n~~~\n## S\n");
        assert_eq!(page.headings.len(), 2);
        assert!(page.statuses.is_empty() && page.links.is_empty());
    }

    #[test]
    fn a_short_name_resolves_only_when_unique() {
        let index = TestIndex::from_lists([("p", ["a::tests::one", "b::tests::two", "c::two", "three"])]);
        assert_eq!(index.resolve("p", "one"), Some(vec!["a::tests::one"]));
        assert_eq!(index.resolve("p", "a::tests::one"), Some(vec!["a::tests::one"]));
        assert_eq!(index.resolve("p", "tests::one"), Some(vec![]));
        assert_eq!(index.resolve("p", "two").map(|v| v.len()), Some(2));
        assert_eq!(index.resolve("p", "three"), Some(vec!["three"]));
        assert_eq!(index.resolve("q", "three"), None);
    }

    #[test]
    fn the_terse_list_is_read() {
        let out = "a::tests::one: test\nb: test\nbench_x: benchmark\nsrc/lib.rs - f (line 3): test\n\nnoise\n";
        assert_eq!(TestIndex::parse_terse(out), vec!["a::tests::one", "b", "src/lib.rs - f (line 3)"]);
    }

    #[test]
    fn percent_escapes_decode() {
        assert_eq!(percent_decode("a%20b.md"), "a b.md");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
