//! The run's intake: every case file read and parsed, the cases the filter takes, what
//! they name checked, and every refusal of the run gathered, before anything builds.

use std::path::{Path, PathBuf};

use testbench_case::{Arch, Case, Firmware, Guest, GuestImage, PathKind};

use crate::cli::{Filter, Options};
use crate::error::BenchError;
use crate::workspace::Workspace;

/// The most bytes of one case file: a case is a page of TOML, never a data set.
pub const CASE_FILE_MAX: u64 = 1 << 20;

/// What the cases directory gave: the cases that parsed, and a refusal for each file
/// that did not.
#[derive(Debug, Default)]
pub struct Loaded {
    pub cases: Vec<Case>,
    pub refusals: Vec<String>,
    /// The stems of the files refused, so `--exact` does not also say no case has that name.
    pub refused_names: Vec<String>,
    /// How many `*.toml` entries the directory holds, refused ones included.
    pub files: usize,
}

/// What a file type is, in words, for a refusal.
pub fn file_type_words(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// One case file's text. Only a regular file (or a symbolic link to one) is read: its
/// type is asked first, without opening it, so a FIFO, a socket or a device named
/// `x.toml` is refused and never blocks the bench. It is then opened without blocking
/// and asked again (it could have been replaced in between), and read to a bound.
fn read_case_file(file: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let accepted = "a case is a regular file <name>.toml (or a symbolic link to one)";
    let metadata = std::fs::metadata(file).map_err(|error| {
        if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            format!("a symbolic link that never reaches a file (a loop of links, or one over 40 links long) is not accepted: {accepted}")
        } else {
            format!("cannot be read: {error}")
        }
    })?;
    if !metadata.is_file() {
        return Err(format!("{} is not accepted: {accepted}", file_type_words(metadata.file_type())));
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(file)
        .map_err(|error| format!("cannot be read: {error}"))?;
    let metadata = opened.metadata().map_err(|error| format!("cannot be read: {error}"))?;
    if !metadata.is_file() {
        return Err(format!("{} is not accepted: {accepted}", file_type_words(metadata.file_type())));
    }
    let mut bytes = Vec::new();
    opened.take(CASE_FILE_MAX + 1).read_to_end(&mut bytes).map_err(|error| format!("cannot be read: {error}"))?;
    if bytes.len() as u64 > CASE_FILE_MAX {
        return Err(format!("more than {CASE_FILE_MAX} bytes is not accepted: a case file is at most 1 MiB"));
    }
    String::from_utf8(bytes).map_err(|error| format!("not UTF-8 text ({error}): a case file is TOML"))
}

/// The bytes of one `guest.overlay` file, read at most
/// [`testbench_case::OVERLAY_FILE_BYTES_MAX`] (the case crate states the bound and reads
/// no file).
pub fn read_overlay_file(path: &Path) -> Result<Vec<u8>, OverlayError> {
    use std::io::Read;
    use testbench_case::OVERLAY_FILE_BYTES_MAX;
    let io = |source| OverlayError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut data = Vec::new();
    file.take(OVERLAY_FILE_BYTES_MAX + 1).read_to_end(&mut data).map_err(io)?;
    if data.len() as u64 > OVERLAY_FILE_BYTES_MAX {
        return Err(OverlayError::TooBig(path.to_path_buf()));
    }
    Ok(data)
}

/// A `guest.overlay` that cannot be read or packed.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: more than {} bytes (1 MiB), the most an overlay file may hold", .0.display(), testbench_case::OVERLAY_FILE_BYTES_MAX)]
    TooBig(std::path::PathBuf),
    /// A field of the overlay (`guest.overlay[0].from`), and what went wrong there.
    #[error("{field}: {error}")]
    At { field: String, error: Box<OverlayError> },
    #[error("guest.overlay: reading {}: {source}", path.display())]
    Initrd {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("guest.overlay: {0}")]
    Pack(#[from] testbench_recipe::newc::NewcError),
}

/// `accel = "kvm"` on a width that is not the host's: KVM runs only guests of the host's
/// width. The case crate takes what the case asks; the host is asked here, before
/// anything builds, with the field's own words.
fn kvm_on_the_host(case: &Case) -> Option<String> {
    let boot = case.as_boot()?;
    if boot.accel != testbench_case::Accel::Kvm {
        return None;
    }
    let host = Arch::host();
    let other = boot.arch.iter().find(|a| Some(**a) != host)?;
    let host = host.map_or(std::env::consts::ARCH, Arch::name);
    Some(format!(
        "{}: accel: \"kvm\" runs only guests of the host's width ({host}), and arch names {other}: use \"tcg\" or \"auto\"",
        case.file.display()
    ))
}

/// Whether a file in the cases directory is almost a case: its extension is `toml` in
/// another case (`A.TOML`) or one edit from it (`b.tml`, `c.tmol`, `d.tomll`). A run
/// refuses it rather than leaving out what its author meant to run; an editor's backup
/// (`a.toml~`) and a hidden file (`.a.tml.swp`) are not cases and pass in silence.
fn almost_a_case(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else { return false };
    if name.starts_with('.') || name.ends_with('~') {
        return false;
    }
    let Some(extension) = path.extension().map(|e| e.to_string_lossy()) else { return false };
    let lower = extension.to_ascii_lowercase();
    extension != "toml" && (lower == "toml" || strsim::damerau_levenshtein(&lower, "toml") == 1)
}

/// Read every `*.toml` in the cases directory; every refusal is collected, one per file.
pub fn load_cases(dir: &Path) -> Loaded {
    load_cases_named(dir, None)
}

/// The case files of `dir`, or only `<only>.toml` when given: a run from a prebuilt
/// directory with `--exact` reads one file, since its prebuild refused any bad one and
/// the fingerprint refuses a tree changed since (about 25 ms of parsing saved here).
pub fn load_cases_named(dir: &Path, only: Option<&str>) -> Loaded {
    let mut loaded = Loaded::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            loaded.refusals.push(format!("{}: cannot read the cases directory: {error}", dir.display()));
            return loaded;
        }
    };
    let paths: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    let mut files: Vec<PathBuf> = paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        // Not a case: the directory's quarantine (quarantine.rs).
        .filter(|p| p.file_name().is_none_or(|name| name != crate::quarantine::FILE))
        .filter(|p| only.is_none_or(|name| p.file_stem().is_some_and(|stem| stem == name)))
        .cloned()
        .collect();
    files.sort();
    if only.is_none() {
        let mut almost: Vec<&PathBuf> = paths.iter().filter(|p| almost_a_case(p)).collect();
        almost.sort();
        loaded.refusals.extend(almost.into_iter().map(|p| {
            let stem = p.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
            format!(
                "{}: not read as a case, and not accepted beside them: its name is almost a case's; a case file is named <name>.toml (rename it {stem}.toml, or move it out of the cases directory)",
                p.display()
            )
        }));
    }
    loaded.files = files.len();
    // Parsed on every core (a case's regexes are most of its cost: about 35 ms for the
    // bench's own 190 files on one), then taken in file order.
    let parse = |file: &PathBuf| {
        let shown = file.display().to_string();
        // Every refusal of a file on its own, in the file's order.
        read_case_file(file)
            .map_err(|error| vec![format!("{shown}: {error}")])
            .and_then(|text| testbench_case::parse(&shown, &text).map_err(|error| error.each()))
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let chunk = files.len().div_ceil(threads).max(1);
    let parsed: Vec<_> = std::thread::scope(|scope| {
        let parts: Vec<_> =
            files.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(parse).collect::<Vec<_>>())).collect();
        parts.into_iter().flat_map(|part| part.join().expect("parsing a case file does not panic")).collect()
    });
    for (file, parsed) in files.into_iter().zip(parsed) {
        match parsed {
            Ok(case) => loaded.cases.push(case),
            Err(errors) => {
                loaded.refusals.extend(errors);
                if let Some(stem) = file.file_stem() {
                    loaded.refused_names.push(stem.to_string_lossy().into_owned());
                }
            }
        }
    }
    loaded.cases.sort_by(|a, b| a.name.cmp(&b.name));
    loaded
}

/// The cases a filter takes, in name order. `dir` is where they were read, for a
/// refusal to say where it looked.
pub fn select<'a>(cases: &'a [Case], filter: &Filter, dir: &Path) -> Result<Vec<&'a Case>, String> {
    match filter {
        Filter::All => Ok(cases.iter().filter(|c| c.whole_run).collect()),
        Filter::Contains(text) => {
            Ok(cases.iter().filter(|c| c.name == *text || (c.whole_run && c.name.contains(text.as_str()))).collect())
        }
        Filter::Exact(name) => match cases.iter().find(|c| c.name == *name) {
            Some(case) => Ok(vec![case]),
            None => {
                // One answer: the names that hold it (or it holds) and the nearest by
                // edit distance, in one list when there are any of the first; a
                // suggestion alone only when no name holds it.
                let names = || cases.iter().map(|c| c.name.as_str());
                let near = testbench_case::nearest(name, names());
                let mut like: Vec<&str> = names().filter(|n| n.contains(name.as_str()) || name.contains(n)).collect();
                like.truncate(5);
                let mut message =
                    format!("--exact {name:?}: none of the {} cases in {} has that name", cases.len(), dir.display());
                if like.is_empty() {
                    let near = testbench_case::did_you_mean(&near);
                    if !near.is_empty() {
                        message.push_str(&format!("; {near}"));
                    }
                } else {
                    like.extend(near.iter().filter(|n| !like.contains(n)).collect::<Vec<_>>());
                    message.push_str(&format!(" (names like it: {})", like.join(", ")));
                }
                Err(message)
            }
        },
    }
}

/// Whether a case runs at all under `--arch` (a case of the host runs on every width).
fn runs_on(case: &Case, only: Option<Arch>) -> bool {
    case.arch().is_empty() || only.is_none_or(|only| case.arch().contains(&only))
}

/// Why a run would run nothing, if it would: which filter or width left every case out.
pub fn why_empty(loaded: &Loaded, selected: &[&Case], options: &Options, dir: &Path) -> Option<String> {
    if selected.iter().any(|case| runs_on(case, options.arch)) {
        return None;
    }
    let dir = dir.display();
    if loaded.files == 0 {
        return Some(format!("{dir} holds no case (no *.toml file)"));
    }
    if !selected.is_empty() {
        let arch = options.arch.map(|a| a.name()).unwrap_or("");
        let mut shown: Vec<String> = selected
            .iter()
            .map(|c| format!("{} ({})", c.name, c.arch().iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")))
            .collect();
        let more = shown.len().saturating_sub(5);
        shown.truncate(5);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        return Some(format!("--arch {arch}: no case taken boots {arch}: {}{more}", shown.join(", ")));
    }
    let by_name_only: Vec<&str> = loaded.cases.iter().filter(|c| !c.whole_run).map(|c| c.name.as_str()).collect();
    Some(match &options.filter {
        Filter::All => {
            format!("every case in {dir} runs only by its whole name (whole_run = false): {}", by_name_only.join(", "))
        }
        Filter::Contains(text) => {
            let mut message = format!("the filter {text:?} takes none of the {} cases in {dir}", loaded.cases.len());
            let partial: Vec<&str> = by_name_only.iter().copied().filter(|n| n.contains(text.as_str())).collect();
            if !partial.is_empty() {
                message.push_str(&format!(
                    "; the cases whose names hold it run only by their whole name (whole_run = false): {}",
                    partial.join(", ")
                ));
            }
            let near = testbench_case::did_you_mean(&testbench_case::nearest(
                text,
                loaded.cases.iter().map(|c| c.name.as_str()),
            ));
            if !near.is_empty() {
                message.push_str(&format!("; {near}"));
            }
            message
        }
        Filter::Exact(name) => format!("--exact {name:?} takes nothing"),
    })
}

/// Why a path a case names is not there, in words: where a relative path was looked for,
/// and the nearest name in the directory that holds it, when one is near.
fn missing(path: &Path, root: &Path) -> String {
    let shown = path.display();
    let full = root.join(path);
    let mut message = if path.is_absolute() {
        format!("{shown} does not exist")
    } else {
        format!("{shown} does not exist (paths are relative to the workspace root {})", root.display())
    };
    if let (Some(parent), Some(name)) = (full.parent(), path.file_name().map(|n| n.to_string_lossy())) {
        // A directory's first 4096 names: enough for a typo, bounded for a huge one.
        let names: Vec<String> = std::fs::read_dir(parent)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .take(4096)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let near = testbench_case::nearest(&name, names.iter().map(String::as_str));
        let near: Vec<String> = near.iter().map(|n| path.with_file_name(n).display().to_string()).collect();
        let near = testbench_case::did_you_mean(&near.iter().map(String::as_str).collect::<Vec<_>>());
        if !near.is_empty() {
            message.push_str(&format!("; {near}"));
        }
    }
    message
}

/// The files `qemu_args` name in a `file=` value (`-drive file=fs.img,if=none`), each
/// checked there before anything builds: QEMU runs in the workspace root, so a relative
/// one is from there. A value with a protocol (`nbd://`, `json:`) names no file here.
fn qemu_arg_files(args: &[String], root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    for (index, arg) in args.iter().enumerate() {
        if arg.starts_with('-') {
            continue;
        }
        for value in crate::qemu::option_parts(arg).iter().filter_map(|part| part.strip_prefix("file=")) {
            let protocol = value.split_once(':').is_some_and(|(head, _)| {
                !head.is_empty() && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '+')
            });
            if value.is_empty() || protocol {
                continue;
            }
            let path = Path::new(value);
            match std::fs::metadata(root.join(path)) {
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    errors.push(format!("guest.qemu_args[{index}]: file={value}: {}", missing(path, root)))
                }
                Err(error) => {
                    errors.push(format!("guest.qemu_args[{index}]: file={value}: {value} cannot be read: {error}"))
                }
            }
        }
    }
    errors
}

/// Check what a case names is there, is what it must be, and agrees with itself, before
/// anything builds. A kernel, an initrd, a program or a firmware image must be a regular
/// file: a directory, a FIFO or a device is refused here, not at boot.
pub fn check_inputs(case: &Case, root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let file = case.file.display();
    errors.extend(kvm_on_the_host(case));
    for named in case.paths() {
        let path = named.path.display();
        let full = root.join(&named.path);
        match std::fs::metadata(&full) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                errors.push(format!("{file}: {}: {}", named.field, missing(&named.path, root)))
            }
            Err(error) => errors.push(format!("{file}: {}: {path} cannot be read: {error}", named.field)),
            Ok(metadata) => {
                let (fits, must) = match named.kind {
                    PathKind::File => (metadata.is_file(), "a regular file"),
                    PathKind::Dir => (metadata.is_dir(), "a directory"),
                };
                if !fits {
                    errors.push(format!(
                        "{file}: {}: {path} is {}: {} must be {must}",
                        named.field,
                        file_type_words(metadata.file_type()),
                        named.what
                    ));
                }
            }
        }
    }
    // A firmware image that is missing is the host's lack (checked at boot time), but one
    // that is there and is not a regular file is the case's mistake.
    if let Some((Firmware::Path(path), field)) = case.firmware() {
        if let Ok(metadata) = std::fs::metadata(root.join(path)) {
            if !metadata.is_file() {
                errors.push(format!(
                    "{file}: {field}: {} is {}: a firmware image must be a regular file",
                    path.display(),
                    file_type_words(metadata.file_type())
                ));
            }
        }
    }
    let Some(boot) = case.as_boot() else { return errors };
    errors.extend(media_formats(case, boot, root));
    errors.extend(recipe_widths(case, boot, root));
    if let Guest::External(guest) = &boot.guest {
        errors.extend(qemu_arg_files(&guest.qemu_args, root).into_iter().map(|e| format!("{file}: {e}")));
    }
    errors.extend(crate::boot::parts::check(case, root));
    if let Some(program) = case.as_boot().and_then(|b| b.post_check.as_ref()).and_then(|p| p.command.first()) {
        if !program.contains('/') && crate::process::on_path(program).is_none() {
            errors.push(format!(
                "{file}: post_check.command[0]: no program {program:?} on the path (a name on the path, or a path relative to the workspace root)"
            ));
        }
    }
    errors
}

/// The disk image and the CD a guest boots from, read for their formats before anything
/// boots: a raw or qcow2 image, an ISO 9660 CD (only when the path checks above passed:
/// a regular file that is there).
fn media_formats(case: &Case, boot: &testbench_case::BootCase, root: &Path) -> Vec<String> {
    let file = case.file.display();
    let Guest::External(guest) = &boot.guest else { return Vec::new() };
    let GuestImage::Media { image, cdrom, .. } = &guest.image else { return Vec::new() };
    let mut errors = Vec::new();
    if let Some(image) = image.as_ref().map(|i| root.join(i)).filter(|i| i.is_file()) {
        if let Err(e) = crate::boot::media::image_format(&image) {
            errors.push(format!("{file}: guest.image: {e}"));
        }
    }
    if let Some(cdrom) = cdrom.as_ref().map(|c| root.join(c)).filter(|c| c.is_file()) {
        if let Err(e) = crate::boot::media::check_iso(&cdrom) {
            errors.push(format!("{file}: guest.cdrom: {e}"));
        }
    }
    errors
}

/// A recipe the case boots, read (only a regular file: anything else is refused with the
/// paths), and each width the case asks for checked against the one the recipe boots.
fn recipe_widths(case: &Case, boot: &testbench_case::BootCase, root: &Path) -> Vec<String> {
    let file = case.file.display();
    // Entry names of a built guest are checked by the case parser (one entry per name).
    let Guest::External(guest) = &boot.guest else { return Vec::new() };
    let GuestImage::Recipe(recipe) = &guest.image else { return Vec::new() };
    let full = root.join(recipe);
    if !full.is_file() {
        return Vec::new();
    }
    match testbench_recipe::load(&full) {
        Err(error) => vec![format!("{file}: guest.recipe: {error}")],
        Ok(recipe) => boot
            .arch
            .iter()
            .filter(|arch| arch.name() != recipe.arch.to_string())
            .map(|arch| format!("{file}: arch: the recipe {} boots {} only, not {arch}", full.display(), recipe.arch))
            .collect(),
    }
}

/// `TESTBENCH_QEMU_SEED`: a seed that replaces every pinned one, when set.
fn parse_env_seed() -> Result<Option<u64>, String> {
    match std::env::var("TESTBENCH_QEMU_SEED") {
        Err(_) => Ok(None),
        Ok(text) if text.is_empty() => Ok(None),
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("TESTBENCH_QEMU_SEED={text:?} is not accepted: a number from 0")),
    }
}

/// What the intake took: the cases to run, in name order, and the environment's seed.
pub struct Selection<'a> {
    pub selected: Vec<&'a Case>,
    pub env_seed: Option<u64>,
}

/// Select the cases to run and check them; every refusal of the run is gathered here,
/// together: every file that does not parse, and what the cases that parsed name.
pub fn take<'a>(loaded: &'a Loaded, ws: &Workspace, options: &Options) -> Result<Selection<'a>, BenchError> {
    let mut refusals: Vec<String> = loaded.refusals.clone();
    let selected = match select(&loaded.cases, &options.filter, &ws.cases_dir) {
        Ok(selected) => selected,
        Err(error) => {
            // A name whose file was refused already has its refusal.
            let refused = matches!(&options.filter, Filter::Exact(name) if loaded.refused_names.contains(name));
            if !refused {
                refusals.push(error);
            }
            Vec::new()
        }
    };
    refusals.extend(selected.iter().flat_map(|c| check_inputs(c, &ws.root)));
    // The guest workspace's names, once, only when a case names some of them; not from a
    // prebuilt directory, which runs no cargo (its prebuild checked them, and a tree or
    // case file changed since refuses it).
    if options.prebuilt.is_none() && selected.iter().any(|c| crate::guest_names::needed(c)) {
        match crate::guest_names::read(&ws.root) {
            Ok(names) => refusals.extend(selected.iter().flat_map(|c| names.check(c))),
            Err(error) => refusals.push(error.to_string()),
        }
    }
    if options.sweep.is_some() && selected.len() > 1 {
        let names: Vec<&str> = selected.iter().map(|c| c.name.as_str()).collect();
        refusals.push(format!(
            "--sweep runs one case; the filter took {}: {} (name one with --exact)",
            names.len(),
            names.join(", ")
        ));
    }
    let env_seed = parse_env_seed().unwrap_or_else(|error| {
        refusals.push(error);
        None
    });
    if let Some(path) = &options.junit {
        refusals.extend(crate::cli::check_junit(path).err());
    }
    if refusals.is_empty() {
        if let Some(keep) = &options.keep_failed {
            refusals.extend(keep.check().err());
        }
    }
    if refusals.is_empty() {
        Ok(Selection { selected, env_seed })
    } else {
        Err(BenchError::Refused(refusals))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, whole_run: bool) -> Case {
        let text = format!(
            "description = \"d\"\narch = [\"rv64\"]\nkind = \"boot\"\nprograms = [\"logsrv\"]\nexpect = ['x']\nwhole_run = {whole_run}\n"
        );
        testbench_case::parse(&format!("tests/{name}.toml"), &text).unwrap()
    }

    #[test]
    fn a_case_out_of_the_whole_run_runs_only_by_name() {
        let cases = vec![case("timer", true), case("timer-long", false), case("other", true)];
        let names = |filter: Filter| {
            select(&cases, &filter, Path::new("tests")).unwrap().iter().map(|c| c.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(Filter::All), ["timer", "other"]);
        assert_eq!(names(Filter::Contains("timer".into())), ["timer"]);
        assert_eq!(names(Filter::Contains("timer-long".into())), ["timer-long"]);
        assert_eq!(names(Filter::Exact("timer-long".into())), ["timer-long"]);
        assert_eq!(names(Filter::Exact("timer".into())), ["timer"]);
        let refused = select(&cases, &Filter::Exact("time".into()), Path::new("tests")).unwrap_err();
        assert!(
            refused.contains("none of the 3 cases in tests has that name") && refused.contains("timer"),
            "{refused}"
        );
    }

    #[test]
    fn files_named_in_qemu_args_are_checked_and_a_missing_one_gets_the_nearest_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("fs.img"), b"").unwrap();
        std::fs::write(root.join("a,b.img"), b"").unwrap();
        let args: Vec<String> = [
            "-drive",
            "file=fs.img,if=none,format=raw,id=x0",
            "-drive",
            "file=a,,b.img,if=none",
            "-drive",
            "if=none,file=fs.imgg",
            "-drive",
            "file=nbd://localhost:10809,if=none",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let refused = qemu_arg_files(&args, root);
        assert_eq!(
            refused,
            [format!(
                "guest.qemu_args[5]: file=fs.imgg: fs.imgg does not exist (paths are relative to the workspace root {}); did you mean `fs.img`?",
                root.display()
            )]
        );
        let absolute = root.join("kernel").display().to_string();
        std::fs::write(root.join("kernal"), b"").unwrap();
        assert_eq!(
            missing(Path::new(&absolute), Path::new("/elsewhere")),
            format!("{absolute} does not exist; did you mean `{}`?", root.join("kernal").display())
        );
    }

    /// A case that asks a recipe for a width it does not boot is refused naming both; a
    /// width the recipe boots is not.
    #[test]
    fn a_width_the_recipe_does_not_boot_is_refused_naming_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = |arch: &str| {
            format!("description = \"x\"\nkind = \"boot\"\narch = [{arch}]\nexpect = ['x']\n[guest]\nrecipe = \"guests/debian-busybox.toml\"\n")
        };
        let both = testbench_case::parse("tests/r.toml", &text("\"rv64\", \"rv32\"")).unwrap();
        let refused = recipe_widths(&both, both.as_boot().unwrap(), &root);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("tests/r.toml: arch: the recipe ")
                && refused[0].ends_with(" boots rv64 only, not rv32"),
            "{refused:?}"
        );
        let one = testbench_case::parse("tests/r.toml", &text("\"rv64\"")).unwrap();
        assert!(recipe_widths(&one, one.as_boot().unwrap(), &root).is_empty());
    }

    /// The names like it and the suggestion are one list: never a suggestion of one name
    /// beside a list that names another.
    #[test]
    fn exact_names_where_it_looked_and_one_list_of_names_like_it() {
        let cases = vec![case("xv6-ls", true), case("xv6-shell", true), case("other", true)];
        let refused = select(&cases, &Filter::Exact("xv6-sh".into()), Path::new("/my/cases")).unwrap_err();
        assert_eq!(
            refused,
            "--exact \"xv6-sh\": none of the 3 cases in /my/cases has that name (names like it: xv6-shell, xv6-ls)"
        );
        let refused = select(&cases, &Filter::Exact("othr".into()), Path::new("/my/cases")).unwrap_err();
        assert_eq!(refused, "--exact \"othr\": none of the 3 cases in /my/cases has that name; did you mean `other`?");
    }
}
