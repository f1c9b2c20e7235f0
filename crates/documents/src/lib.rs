//! # kgrag-documents
//!
//! Reads the documents people keep into text a chunker and an extractor can use, and remembers where every
//! piece of that text came from.
//!
//! | format | extension | what is read | unit |
//! | --- | --- | --- | --- |
//! | PDF | `.pdf` | the text layer, in reading order (columns found by the page's white space), headings by size, ruled tables as tables; running headers, footers and page numbers dropped, words hyphenated across lines joined | page |
//! | Word | `.docx` | paragraphs, headings (by style or outline level), list items, tables; page breaks (Word's rendered ones, else the explicit ones) | page |
//! | PowerPoint | `.pptx` | each slide's title, text and tables, its notes | slide |
//! | spreadsheets | `.xlsx`, `.xls`, `.ods` | every sheet as a table, dates as dates | sheet |
//! | web pages | `.html`, `.htm` | the main content without navigation, headers, footers, cookie banners, share buttons and sidebars | — |
//! | EPUB | `.epub` | the spine's chapters as web pages | chapter |
//! | text | `.txt`, `.md` | the file unchanged; Markdown headings as sections, form feeds as page breaks | page |
//!
//! A document becomes an [`Extracted`]: its text — headings as Markdown `#` lines, list items as `- ` lines,
//! tables as Markdown tables, blocks apart by a blank line — and its source map, [`Block`]s with their byte
//! range in the text, their unit number (page, slide, sheet, chapter) and their section (the heading path).
//! [`Extracted::locate`] says where any byte range (a chunk) came from.
//!
//! ```
//! use kgrag_documents::{read, Format, Limits};
//!
//! let html = b"<html><body><nav>Home | About</nav><main><h1>Guilds</h1>\
//!              <p>The Quillmarsh guild was founded in 1611.</p></main></body></html>";
//! let doc = read(html, Format::Html, &Limits::default())?;
//! assert_eq!(doc.text, "# Guilds\n\nThe Quillmarsh guild was founded in 1611.\n");
//! let at = doc.locate(10, 40);
//! assert_eq!(at.section.as_deref(), Some("Guilds"));
//! # Ok::<(), kgrag_documents::DocumentError>(())
//! ```
//!
//! Hostile files get an error, never a hang or a crash: sizes, zip entries, unpacked bytes, cells and pages
//! have [`Limits`], every reader checks a deadline, and a panic inside a reader becomes
//! [`DocumentError::Panic`]. Everything is pure Rust (zip, flate2 and roxmltree beneath).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod builder;
mod docx;
mod epub;
mod html;
mod pdf;
mod pptx;
mod sheets;
mod text;
mod xls;
mod xml;
mod zipfile;

pub use text::map_text;

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Errors of reading one document. Messages say what is wrong with the file; the caller adds its name.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The extension names no format this crate reads.
    #[error("unsupported file type {extension:?} (kgrag reads {known})")]
    Unsupported {
        /// The extension (lower case, no dot).
        extension: String,
        /// The extensions read.
        known: String,
    },
    /// The file is larger than [`Limits::max_file_bytes`].
    #[error("the file is {bytes} bytes, over the limit of {limit} ([documents] max_file_mib)")]
    TooLarge {
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is encrypted and opens only with a password.
    #[error(
        "the file is encrypted (password-protected): save a copy without the password to index it"
    )]
    Encrypted,
    /// A PDF without any text to read (a scan).
    #[error("no text layer on any of its {pages} page(s) — a scanned PDF? OCR is not built in: run it through an OCR tool (e.g. ocrmypdf) first")]
    NoTextLayer {
        /// Its pages.
        pages: u32,
    },
    /// The file is damaged or is not what its extension says.
    #[error("not a readable {format} file: {detail}")]
    Corrupt {
        /// The format it was read as.
        format: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A limit was passed (a zip bomb, a sheet of millions of cells, too many pages).
    #[error("{0}")]
    Limit(String),
    /// Reading took longer than [`Limits::deadline`].
    #[error("reading took longer than {secs} s ([documents] deadline_secs); the file may be pathological")]
    Timeout {
        /// The deadline in seconds.
        secs: u64,
    },
    /// A reader panicked (a bug, reported instead of stopping the caller).
    #[error("the {format} reader failed unexpectedly ({detail}); please report this file")]
    Panic {
        /// The format.
        format: &'static str,
        /// The panic's message.
        detail: String,
    },
    /// The file holds no text at all.
    #[error("no text in the file")]
    Empty,
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, DocumentError>;

/// A format this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Plain text.
    Text,
    /// Markdown.
    Markdown,
    /// PDF (its text layer).
    Pdf,
    /// Word (Office Open XML).
    Docx,
    /// PowerPoint (Office Open XML).
    Pptx,
    /// Excel (Office Open XML).
    Xlsx,
    /// Excel 97–2003 (BIFF8; BIFF5 read too).
    Xls,
    /// OpenDocument spreadsheet.
    Ods,
    /// A web page.
    Html,
    /// An EPUB book.
    Epub,
}

/// Every format, in the order messages list them.
pub const FORMATS: &[Format] = &[
    Format::Pdf,
    Format::Docx,
    Format::Pptx,
    Format::Xlsx,
    Format::Xls,
    Format::Ods,
    Format::Html,
    Format::Epub,
    Format::Text,
    Format::Markdown,
];

impl Format {
    /// The format of a file extension (any case, no dot): `pdf`, `docx`, `pptx`, `xlsx`, `xls`, `ods`,
    /// `html`/`htm`/`xhtml`, `epub`, `txt`/`text`, `md`/`markdown`.
    pub fn from_extension(extension: &str) -> Option<Format> {
        Some(match extension.to_ascii_lowercase().as_str() {
            "pdf" => Format::Pdf,
            "docx" => Format::Docx,
            "pptx" => Format::Pptx,
            "xlsx" | "xlsm" => Format::Xlsx,
            "xls" => Format::Xls,
            "ods" => Format::Ods,
            "html" | "htm" | "xhtml" => Format::Html,
            "epub" => Format::Epub,
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            _ => return None,
        })
    }

    /// The format of a path, by its extension.
    pub fn of_path(path: &Path) -> Option<Format> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_extension)
    }

    /// The format a file's first bytes say, for the binary formats (`None`: not recognised).
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        let head = &bytes[..bytes.len().min(1024)];
        if find(head, b"%PDF-").is_some() {
            return Some(Format::Pdf);
        }
        if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) {
            return Some(Format::Xls);
        }
        if bytes.starts_with(b"PK\x03\x04") {
            // The first entry of an EPUB or ODS is its uncompressed `mimetype`.
            if find(head, b"application/epub+zip").is_some() {
                return Some(Format::Epub);
            }
            if find(head, b"application/vnd.oasis.opendocument.spreadsheet").is_some() {
                return Some(Format::Ods);
            }
            return zipfile::office_kind(bytes);
        }
        None
    }

    /// The short name (`pdf`, `docx`, …), as in the index's records.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Pptx => "pptx",
            Format::Xlsx => "xlsx",
            Format::Xls => "xls",
            Format::Ods => "ods",
            Format::Html => "html",
            Format::Epub => "epub",
        }
    }

    /// The extensions of the format.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Text => &["txt", "text"],
            Format::Markdown => &["md", "markdown"],
            Format::Pdf => &["pdf"],
            Format::Docx => &["docx"],
            Format::Pptx => &["pptx"],
            Format::Xlsx => &["xlsx", "xlsm"],
            Format::Xls => &["xls"],
            Format::Ods => &["ods"],
            Format::Html => &["html", "htm", "xhtml"],
            Format::Epub => &["epub"],
        }
    }

    /// The MIME type a server sends the original file with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; charset=utf-8",
            Format::Markdown => "text/markdown; charset=utf-8",
            Format::Pdf => "application/pdf",
            Format::Docx => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            Format::Pptx => {
                "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            }
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Format::Xls => "application/vnd.ms-excel",
            Format::Ods => "application/vnd.oasis.opendocument.spreadsheet",
            Format::Html => "text/html; charset=utf-8",
            Format::Epub => "application/epub+zip",
        }
    }

    /// What the format's numbered units are (`None`: it has none, as a web page).
    pub fn unit(self) -> Option<Unit> {
        match self {
            Format::Pdf | Format::Docx | Format::Text | Format::Markdown => Some(Unit::Page),
            Format::Pptx => Some(Unit::Slide),
            Format::Xlsx | Format::Xls | Format::Ods => Some(Unit::Sheet),
            Format::Epub => Some(Unit::Chapter),
            Format::Html => None,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The extensions of every format, as `.pdf, .docx, …`.
pub fn known_extensions() -> String {
    FORMATS
        .iter()
        .flat_map(|f| f.extensions().iter())
        .map(|e| format!(".{e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a document's numbered units are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Pages (PDF; Word's page breaks; form feeds in text).
    Page,
    /// Slides.
    Slide,
    /// Sheets.
    Sheet,
    /// Chapters (an EPUB's spine documents).
    Chapter,
}

impl Unit {
    /// How a citation names one unit: `p.`, `slide`, `sheet`, `ch.`.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Page => "p.",
            Unit::Slide => "slide",
            Unit::Sheet => "sheet",
            Unit::Chapter => "ch.",
        }
    }

    /// How a citation names a range of units: `pp.`, `slides`, `sheets`, `chs.`.
    pub fn label_plural(self) -> &'static str {
        match self {
            Unit::Page => "pp.",
            Unit::Slide => "slides",
            Unit::Sheet => "sheets",
            Unit::Chapter => "chs.",
        }
    }
}

/// Bounds on what one file may cost. The defaults suit a desktop: 512 MiB files, 10,000 zip entries,
/// 2 GiB unpacked, 5 million non-empty cells, 20,000 pages, 300 s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// The largest file read, in bytes.
    pub max_file_bytes: u64,
    /// The most entries a zip container (DOCX, PPTX, XLSX, ODS, EPUB) may have.
    pub max_entries: usize,
    /// The most bytes a container's entries, or a PDF's streams, may unpack to, in all.
    pub max_unpacked_bytes: u64,
    /// The most non-empty cells read from a spreadsheet, over its sheets.
    pub max_cells: u64,
    /// The most pages (slides, chapters) read.
    pub max_pages: u32,
    /// How long one file may take.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: 512 << 20,
            max_entries: 10_000,
            max_unpacked_bytes: 2 << 30,
            max_cells: 5_000_000,
            max_pages: 20_000,
            deadline: Duration::from_secs(300),
        }
    }
}

/// A deadline readers check in their loops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    secs: u64,
}

impl Deadline {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            at: Instant::now() + limit,
            secs: limit.as_secs(),
        }
    }

    /// An error once the deadline has passed.
    pub(crate) fn check(&self) -> Result<()> {
        if Instant::now() > self.at {
            return Err(DocumentError::Timeout { secs: self.secs });
        }
        Ok(())
    }
}

/// What a block of a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "level")]
pub enum BlockKind {
    /// A heading of this level (1 is the highest).
    Heading(u8),
    /// A paragraph.
    Paragraph,
    /// One item of a list.
    ListItem,
    /// A table (Markdown).
    Table,
    /// Preformatted text.
    Code,
}

/// One block of the source map: a byte range of [`Extracted::text`] and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// What it is.
    #[serde(flatten)]
    pub kind: BlockKind,
    /// First byte in the text.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// The unit (page, slide, sheet, chapter) it starts on, from 1; 0 where the format has none.
    pub page: u32,
    /// The unit it ends on.
    pub page_end: u32,
    /// Its section: an index into [`Extracted::sections`] (`None`: before the first heading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<u32>,
}

/// A heading and the section it opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// The heading's text.
    pub heading: String,
    /// Its level (1 is the highest).
    pub level: u8,
    /// The enclosing section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
}

/// Where the pieces of a document's text came from: its blocks (byte ranges, units, sections) and the
/// sections they name. Kept beside a document while it is chunked, so that every chunk knows its pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceMap {
    /// The blocks, in text order.
    pub blocks: Vec<Block>,
    /// The sections the blocks name.
    pub sections: Vec<Section>,
}

impl SourceMap {
    /// The heading path of section `index`, outermost first.
    pub fn section_path(&self, index: u32) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = Some(index);
        while let Some(i) = at {
            let Some(s) = self.sections.get(i as usize) else {
                break;
            };
            path.push(s.heading.clone());
            at = s.parent.filter(|&p| p < i);
        }
        path.reverse();
        path
    }

    /// Where the byte range `start..end` of the text came from: the units its blocks span and the section
    /// of the block it overlaps most.
    pub fn locate(&self, start: usize, end: usize) -> Location {
        let first = self.blocks.partition_point(|b| b.end <= start);
        let mut page: Option<u32> = None;
        let mut page_end: Option<u32> = None;
        let mut best: Option<(usize, Option<u32>)> = None;
        for b in self.blocks[first..].iter().take_while(|b| b.start < end) {
            let overlap = b.end.min(end).saturating_sub(b.start.max(start));
            if overlap == 0 {
                continue;
            }
            if b.page > 0 {
                page = Some(page.map_or(b.page, |p| p.min(b.page)));
                page_end = Some(page_end.map_or(b.page_end, |p| p.max(b.page_end)));
            }
            // A heading counts for the section it opens only as much as one byte of text does.
            let weight = match b.kind {
                BlockKind::Heading(_) => 1,
                _ => overlap,
            };
            if best.is_none_or(|(w, _)| weight > w) {
                best = Some((weight, b.section));
            }
        }
        let section = best.and_then(|(_, s)| s);
        let section_path = section.map(|s| self.section_path(s)).unwrap_or_default();
        Location {
            page,
            page_end,
            section: section_path.last().cloned(),
            section_path,
        }
    }
}

/// A document read: its text and its source map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    /// The format read.
    pub format: Format,
    /// The document's title, where the file names one (PDF and Office metadata, HTML `<title>`, EPUB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The text: blocks apart by a blank line, headings as `#` lines, list items as `- ` lines, tables in
    /// Markdown. For `.txt` and `.md` the file's text unchanged.
    pub text: String,
    /// The source map.
    #[serde(flatten)]
    pub map: SourceMap,
    /// What the units are (`None`: the format has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// How many units the document has.
    pub units: u32,
    /// Units with no text (a PDF's scanned or blank pages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub empty_units: Vec<u32>,
    /// What the reader noticed and worked around (glyphs without Unicode, skipped parts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Where a range of a document's text came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The first unit (page, slide, …) the range touches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// The last unit it touches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_end: Option<u32>,
    /// The innermost heading of the section holding most of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// The section's heading path, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub section_path: Vec<String>,
}

impl Extracted {
    /// The heading path of section `index`, outermost first.
    pub fn section_path(&self, index: u32) -> Vec<String> {
        self.map.section_path(index)
    }

    /// Where the byte range `start..end` of the text came from (see [`SourceMap::locate`]).
    pub fn locate(&self, start: usize, end: usize) -> Location {
        self.map.locate(start, end)
    }
}

/// Reads `bytes` as `format` within `limits`. A panic inside a reader is caught and becomes
/// [`DocumentError::Panic`].
pub fn read(bytes: &[u8], format: Format, limits: &Limits) -> Result<Extracted> {
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(DocumentError::TooLarge {
            bytes: bytes.len() as u64,
            limit: limits.max_file_bytes,
        });
    }
    let deadline = Deadline::new(limits.deadline);
    let run = || -> Result<Extracted> {
        let doc = match format {
            Format::Text => text::read(bytes, false)?,
            Format::Markdown => text::read(bytes, true)?,
            Format::Pdf => pdf::read(bytes, limits, deadline)?,
            Format::Docx => docx::read(bytes, limits, deadline)?,
            Format::Pptx => pptx::read(bytes, limits, deadline)?,
            Format::Xlsx => sheets::read_xlsx(bytes, limits, deadline)?,
            Format::Ods => sheets::read_ods(bytes, limits, deadline)?,
            Format::Xls => xls::read(bytes, limits, deadline)?,
            Format::Html => html::read(bytes, deadline)?,
            Format::Epub => epub::read(bytes, limits, deadline)?,
        };
        if doc.text.trim().is_empty() {
            return Err(DocumentError::Empty);
        }
        Ok(doc)
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            Err(DocumentError::Panic {
                format: format.name(),
                detail,
            })
        }
    }
}

/// Reads the file at `path` (its format from its extension) within `limits`; a file over
/// [`Limits::max_file_bytes`] is refused before it is read.
pub fn read_path(path: &Path, limits: &Limits) -> Result<Extracted> {
    let format = Format::of_path(path).ok_or_else(|| DocumentError::Unsupported {
        extension: path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default(),
        known: known_extensions(),
    })?;
    let size = std::fs::metadata(path)?.len();
    if size > limits.max_file_bytes {
        return Err(DocumentError::TooLarge {
            bytes: size,
            limit: limits.max_file_bytes,
        });
    }
    let bytes = std::fs::read(path)?;
    read(&bytes, format, limits)
}

/// The first position of `needle` in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A [`DocumentError::Corrupt`] for `format`.
pub(crate) fn corrupt(format: &'static str, detail: impl Into<String>) -> DocumentError {
    DocumentError::Corrupt {
        format,
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension_and_bytes() {
        assert_eq!(Format::from_extension("PDF"), Some(Format::Pdf));
        assert_eq!(Format::from_extension("htm"), Some(Format::Html));
        assert_eq!(Format::from_extension("csv"), None);
        assert_eq!(Format::sniff(b"%PDF-1.7\n"), Some(Format::Pdf));
        assert!(known_extensions().contains(".epub"));
    }

    #[test]
    fn locate_spans_pages_and_picks_the_main_section() {
        let mut b = builder::Builder::new(Deadline::new(Duration::from_secs(5)));
        b.set_page(1);
        b.heading(1, "Intro");
        b.paragraph("First page text.");
        b.set_page(2);
        b.heading(2, "Details");
        b.paragraph("Second page, a longer paragraph than the first one.");
        let doc = b.finish(Format::Pdf, None, 2);
        let at = doc.locate(0, doc.text.len());
        assert_eq!((at.page, at.page_end), (Some(1), Some(2)));
        assert_eq!(at.section.as_deref(), Some("Details"));
        assert_eq!(at.section_path, ["Intro", "Details"]);
        let first = doc.text.find("First").unwrap();
        let at = doc.locate(first, first + 5);
        assert_eq!((at.page, at.page_end), (Some(1), Some(1)));
        assert_eq!(at.section.as_deref(), Some("Intro"));
    }
}
