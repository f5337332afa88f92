//! # testbench-symbols: a kernel's backtrace turned into functions and source lines
//!
//! [`Symbols::open`] reads a kernel's ELF: its DWARF (through `addr2line`, on `gimli`),
//! when it has some, and its symbol table. [`Symbols::lookup`] gives an address's
//! frames as GNU `addr2line -fi` prints them: the innermost inlined function first, the
//! function the address is in last, each with its file and line. An address DWARF does
//! not cover gets the symbol table's function, with no line.
//!
//! A kernel runs where its console says, not where it was linked: [`relocation`] takes
//! the offset from the console (`Kernel Offset: 0x… from 0x…`, printed on a panic by a
//! KASLR kernel), else from the report's frames that print both an address and
//! `function+0xoff/0xsize` (the address less the function's link address and the
//! offset; the offset most frames agree on). [`symbolize`] then looks each frame of a
//! report up: at its address less the offset, or at its function's link address plus
//! its offset when it printed no address.
//!
//! A loaded ELF is kept warm across the boots of a run: [`cached`] opens each file once
//! while its path, size and modification time stay the same ([`Cache`]).
//!
//! Only the sections the lookups need are read from the file (the DWARF that names
//! units, functions and lines, and the symbol table): a distribution's debug `vmlinux`
//! is several hundred MB, most of it location lists this crate never reads.

mod cache;
pub mod gnu;
mod relocate;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind, SymbolSection};

pub use cache::{cached, Cache};
pub use relocate::{kernel_offset, relocation, symbolize, OffsetFrom, Relocation, Symbolized};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Why an ELF cannot be symbolized against: each names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: cannot be read: {source}", path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{}: is not an ELF file: {source}", path.display())]
    NotElf { path: PathBuf, source: object::Error },
    #[error("{}: has no DWARF debug information (no .debug_info section): give the kernel's ELF built with debug info (Linux's CONFIG_DEBUG_INFO; Debian's linux-image-…-dbg package holds it as usr/lib/debug/boot/vmlinux-…)", path.display())]
    NoDwarf { path: PathBuf },
    #[error("{}: has neither DWARF nor a symbol table (a stripped file): give the kernel's ELF before it was stripped", path.display())]
    NoSymbols { path: PathBuf },
    #[error("{}: its {section} section cannot be read: {source}", path.display())]
    Section { path: PathBuf, section: &'static str, source: object::Error },
    #[error("{}: its {section} section ({size} bytes at {offset}) goes past the file's end ({len} bytes): a cut file", path.display())]
    PastEnd { path: PathBuf, section: &'static str, offset: u64, size: u64, len: u64 },
    #[error("{}: its DWARF cannot be read: {source}", path.display())]
    Dwarf { path: PathBuf, source: gimli::Error },
}

/// One function symbol of the ELF's symbol table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub address: u64,
    /// Its size (0 when the table does not say: an assembly label).
    pub size: u64,
    /// An `STT_FUNC` symbol (else a label in an executable section).
    pub function: bool,
    /// For a local symbol, the source file the table names before it (`STT_FILE`, a
    /// base name such as `core.c`): what GNU and LLVM `addr2line` say where DWARF says nothing.
    pub file: Option<String>,
}

/// One frame of an address, as `addr2line -fi` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The function (demangled for Rust and C++), or None when neither DWARF nor the
    /// symbol table names one.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Inlined into the frame that follows it (false for the last frame of an address).
    pub inlined: bool,
}

/// A kernel's ELF, read for lookups: its DWARF (when it has some) and its symbol table.
pub struct Symbols {
    path: PathBuf,
    /// `addr2line`'s context parses units lazily and is not `Sync`: one lookup at a time.
    dwarf: Option<Mutex<addr2line::Context<Reader>>>,
    /// Function symbols by address (then functions before labels, larger first).
    symbols: Vec<Symbol>,
    /// Each name's places in `symbols` (a static function's name can be there twice).
    by_name: HashMap<String, Vec<usize>>,
    /// The executable sections' link addresses, by address.
    text: Vec<(u64, u64)>,
}

/// One row of the DWARF line table: the instructions at `start..start + len` are
/// `file`'s `line` (the innermost inlined code's line, as a line-coverage tool counts it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRow {
    pub start: u64,
    pub len: u64,
    pub file: Arc<str>,
    pub line: u32,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("path", &self.path)
            .field("dwarf", &self.dwarf.is_some())
            .field("symbols", &self.symbols.len())
            .finish()
    }
}

/// The DWARF sections `addr2line` asks for and never uses for functions and lines:
/// not read (they are most of a kernel's debug info).
const UNREAD: [gimli::SectionId; 4] = [
    gimli::SectionId::DebugLoc,
    gimli::SectionId::DebugLocLists,
    gimli::SectionId::DebugMacinfo,
    gimli::SectionId::DebugMacro,
];

impl Symbols {
    /// Read `path`: an ELF with DWARF, a symbol table, or both (one with neither is
    /// refused; [`Symbols::require_dwarf`] refuses one without DWARF).
    pub fn open(path: &Path) -> Result<Symbols, Error> {
        let unreadable = |source| Error::Unreadable { path: path.to_owned(), source };
        let file = File::open(path).map_err(unreadable)?;
        let len = file.metadata().map_err(unreadable)?.len();
        // The headers and the symbol table through object's cache of what it read; the
        // DWARF sections read once, each straight into the buffer the lookups keep.
        let cache = object::ReadCache::new(file.try_clone().map_err(unreadable)?);
        let elf = object::File::parse(&cache).map_err(|source| Error::NotElf { path: path.to_owned(), source })?;
        let symbols = function_symbols(&elf);
        let dwarf = match elf.section_by_name(".debug_info") {
            None => None,
            Some(_) => Some(Mutex::new(context(path, &file, len, &elf)?)),
        };
        if dwarf.is_none() && symbols.is_empty() {
            return Err(Error::NoSymbols { path: path.to_owned() });
        }
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, symbol) in symbols.iter().enumerate() {
            by_name.entry(symbol.name.clone()).or_default().push(index);
        }
        let mut text: Vec<(u64, u64)> = elf
            .sections()
            .filter(|s| s.kind() == SectionKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        text.sort_unstable();
        Ok(Symbols { path: path.to_owned(), dwarf, symbols, by_name, text })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file has DWARF (else lookups give functions from the symbol table, no line).
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The file has DWARF, or the error that says it has none.
    pub fn require_dwarf(&self) -> Result<(), Error> {
        match self.dwarf {
            Some(_) => Ok(()),
            None => Err(Error::NoDwarf { path: self.path.clone() }),
        }
    }

    /// The function symbols, by address.
    pub fn functions(&self) -> &[Symbol] {
        &self.symbols
    }

    /// The executable sections' link addresses (`start..end`), by address.
    pub fn text_ranges(&self) -> &[(u64, u64)] {
        &self.text
    }

    /// Every row of the DWARF line table over the executable sections, by address: the
    /// lines that have code. Rows without a file or at line 0 (code no line owns) are
    /// left out. Refused, as [`Symbols::require_dwarf`] refuses, without DWARF.
    pub fn line_rows(&self) -> Result<Vec<LineRow>, Error> {
        self.require_dwarf()?;
        let Some(dwarf) = &self.dwarf else { return Ok(Vec::new()) };
        let context = dwarf.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let failed = |source| Error::Dwarf { path: self.path.clone(), source };
        let mut files: HashMap<&str, Arc<str>> = HashMap::new();
        let mut rows = Vec::new();
        for &(start, end) in &self.text {
            for (address, len, location) in context.find_location_range(start, end).map_err(failed)? {
                let (Some(file), Some(line)) = (location.file, location.line.filter(|&l| l > 0)) else { continue };
                let file = files.entry(file).or_insert_with(|| Arc::from(file)).clone();
                rows.push(LineRow { start: address, len, file, line });
            }
        }
        rows.sort_by_key(|row| row.start);
        Ok(rows)
    }

    /// The frames at `address` (a link-time address): innermost inlined function first,
    /// the function it is in last (as `addr2line -fi`); the symbol table's function
    /// alone, with no line (and a local symbol's file as the table names it), where DWARF
    /// says nothing; empty where neither knows it.
    pub fn lookup(&self, address: u64) -> Result<Vec<Located>, Error> {
        let mut out = Vec::new();
        if let Some(dwarf) = &self.dwarf {
            let context = dwarf.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let failed = |source| Error::Dwarf { path: self.path.clone(), source };
            let mut frames = context.find_frames(address).skip_all_loads().map_err(failed)?;
            while let Some(frame) = frames.next().map_err(failed)? {
                let function = match &frame.function {
                    Some(name) => Some(name.demangle().map_err(failed)?.into_owned()),
                    None => None,
                };
                let (file, line) = match &frame.location {
                    Some(location) => (location.file.map(str::to_string), location.line),
                    None => (None, None),
                };
                out.push(Located { function, file, line, inlined: true });
            }
        }
        let table = || self.symbol_at(address).map(|(symbol, _)| symbol);
        match out.last_mut() {
            // What DWARF did not name (an assembly file's lines), the symbol table does.
            Some(last) => {
                last.inlined = false;
                if last.function.is_none() {
                    last.function = table().map(|symbol| demangled(&symbol.name));
                }
            }
            None => {
                if let Some(symbol) = table() {
                    let (function, file) = (Some(demangled(&symbol.name)), symbol.file.clone());
                    out.push(Located { function, file, line: None, inlined: false });
                }
            }
        }
        Ok(out)
    }

    /// The function symbol `address` is in, and the offset into it: the nearest one at or
    /// before it that covers it (a symbol without a size covers up to the next one).
    pub fn symbol_at(&self, address: u64) -> Option<(&Symbol, u64)> {
        let after = self.symbols.partition_point(|s| s.address <= address);
        let candidates = self.symbols[..after].iter().rev();
        let mut same_place = None;
        for symbol in candidates {
            if same_place.is_some_and(|place| place != symbol.address) {
                break;
            }
            same_place = Some(symbol.address);
            let offset = address - symbol.address;
            if symbol.size == 0 || offset < symbol.size {
                return Some((symbol, offset));
            }
        }
        None
    }

    /// The link address of the function named `name` (exactly as the symbol table spells
    /// it, clone suffix and all): the one symbol of that name, or of that name and `size`
    /// when the name is there more than once. None when it is not there or stays ambiguous.
    pub fn link_address(&self, name: &str, size: Option<u64>) -> Option<u64> {
        let places = self.by_name.get(name)?;
        let mut found = places.iter().map(|&i| &self.symbols[i]);
        let first = found.next()?;
        let rest: Vec<&Symbol> = found.collect();
        if rest.iter().all(|s| s.address == first.address) {
            return Some(first.address);
        }
        let size = size?;
        let mut sized = std::iter::once(first).chain(rest).filter(|s| s.size == size);
        let one = sized.next()?;
        sized.all(|s| s.address == one.address).then_some(one.address)
    }
}

/// A symbol name demangled (Rust's, C++'s), or as it is.
fn demangled(name: &str) -> String {
    addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned()
}

/// The ELF's function symbols (`STT_FUNC`, and labels in executable sections), sorted by
/// address, functions before labels and larger before smaller at one address.
fn function_symbols<'data, R: object::ReadRef<'data>>(elf: &object::File<'data, R>) -> Vec<Symbol> {
    let mut file: Option<String> = None;
    let mut symbols: Vec<Symbol> = Vec::new();
    for symbol in elf.symbols() {
        let function = match symbol.kind() {
            SymbolKind::File => {
                file = symbol.name().ok().filter(|name| !name.is_empty()).map(str::to_string);
                continue;
            }
            SymbolKind::Text => true,
            SymbolKind::Unknown => {
                let SymbolSection::Section(index) = symbol.section() else { continue };
                if elf.section_by_index(index).map(|s| s.kind()) != Ok(SectionKind::Text) {
                    continue;
                }
                false
            }
            _ => continue,
        };
        let Ok(name) = symbol.name() else { continue };
        // Mapping symbols ($x, $d) and local labels name no function.
        if name.is_empty() || name.starts_with('$') || name.starts_with(".L") || symbol.is_undefined() {
            continue;
        }
        symbols.push(Symbol {
            name: name.to_string(),
            address: symbol.address(),
            size: symbol.size(),
            function,
            file: if symbol.is_local() { file.clone() } else { None },
        });
    }
    symbols.sort_by(|a, b| {
        (a.address, !a.function, std::cmp::Reverse(a.size), &a.name).cmp(&(
            b.address,
            !b.function,
            std::cmp::Reverse(b.size),
            &b.name,
        ))
    });
    symbols.dedup();
    symbols
}

/// The DWARF of `elf`, each section it needs read (and decompressed) into memory.
fn context<'data, R: object::ReadRef<'data>>(
    path: &Path,
    file: &File,
    len: u64,
    elf: &object::File<'data, R>,
) -> Result<addr2line::Context<Reader>, Error> {
    let endian = if elf.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<Reader, Error> {
        let bytes: Arc<[u8]> = match elf.section_by_name(id.name()) {
            Some(section) if !UNREAD.contains(&id) => section_bytes(path, file, len, &section, id.name())?,
            _ => Arc::from(&[][..]),
        };
        Ok(gimli::EndianArcSlice::new(bytes, endian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    addr2line::Context::from_dwarf(dwarf).map_err(|source| Error::Dwarf { path: path.to_owned(), source })
}

/// A section's bytes: read from the file into their one buffer, or decompressed.
fn section_bytes<'data, R: object::ReadRef<'data>>(
    path: &Path,
    file: &File,
    len: u64,
    section: &object::Section<'data, '_, R>,
    name: &'static str,
) -> Result<Arc<[u8]>, Error> {
    use std::os::unix::fs::FileExt;

    let failed = |source| Error::Section { path: path.to_owned(), section: name, source };
    let range = section.compressed_file_range().map_err(failed)?;
    if range.format != object::CompressionFormat::None {
        return Ok(Arc::from(section.uncompressed_data().map_err(failed)?.as_ref()));
    }
    let past = || Error::PastEnd {
        path: path.to_owned(),
        section: name,
        offset: range.offset,
        size: range.uncompressed_size,
        len,
    };
    if range.offset.checked_add(range.uncompressed_size).is_none_or(|end| end > len) {
        return Err(past());
    }
    let size = usize::try_from(range.uncompressed_size).map_err(|_| past())?;
    let mut bytes: Arc<[u8]> = std::iter::repeat_n(0u8, size).collect();
    let buffer = Arc::get_mut(&mut bytes).expect("a buffer no one else holds");
    file.read_exact_at(buffer, range.offset).map_err(|source| Error::Unreadable { path: path.to_owned(), source })?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
