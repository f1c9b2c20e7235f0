//! Reading a user's documents: files of every format [`kgrag_documents`] reads (PDF, Word, PowerPoint,
//! spreadsheets, web pages, EPUB, text and Markdown) — one document each, with the file, its digest and its
//! source map kept so that every chunk knows its pages and section — and the corpus formats `.jsonl` (one
//! `{"id"?, "title"?, "text"}` object per line) and `.json` (a HippoRAG corpus: an array of
//! `{"title", "text", "idx"?}`).
//!
//! [`read_paths`] reads files and folders as a user keeps them ([`files`]): hidden files and what
//! `.gitignore` files exclude are skipped, `--include`/`--exclude` globs narrow a run, a file that cannot
//! be read is reported and skipped — never the end of the run — and the report says what was read, by
//! format, what was skipped and why, and which pages had no text. [`read_inputs`] is the strict form
//! (every file must read). Uploads ([`parse_upload`]) and documents given in code ([`from_new`]) become
//! the same [`SourceDoc`]s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag_types::Document;
use serde::{Deserialize, Serialize};

use crate::{KgragError, Result};

pub mod files;

pub use files::{read_inputs, read_paths, ReadOptions, ReadReport, Skipped};
pub use kgrag_documents::{Format, Limits, Location, SourceMap, Unit};

/// One input document with the id a user names it by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceDoc {
    /// The user's id: the path relative to the folder given (`notes/a.md`), the JSONL `id` (else
    /// `file:line`), the corpus `idx` (else its title, else `file#n`).
    pub id: String,
    /// Where it came from (`path` or `path:line`).
    pub source: String,
    /// The document (title kept; with a title the text is `title + "\n" + body`, as HippoRAG's passages).
    pub document: Document,
    /// The file it was read from, with its source map (`None`: given in code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

impl SourceDoc {
    /// A document given in code: `text` under the id `id` (also its source), no title.
    pub fn text(id: impl Into<String>, text: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            source: id.clone(),
            id,
            document: Document::new(text),
            origin: None,
        }
    }
}

/// The file a document was read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The file as citations name it: its path relative to the folder given, else its name.
    pub file: String,
    /// Its format (`pdf`, `docx`, …, `text`, `markdown`, `jsonl`, `json`).
    pub format: String,
    /// SHA-256 of its bytes (hex): the original's name in the index, and how a re-run knows it unchanged.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// What its units are (pages, slides, sheets, chapters), if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// How many units it has.
    #[serde(default)]
    pub units: u32,
    /// Where each part of the document's text came from (`None`: one piece, as a corpus entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<SourceMap>,
    /// Where the original's bytes are, for the index to keep a copy.
    #[serde(skip)]
    pub original: Option<Original>,
}

/// An original file's bytes: on disk, or in memory (an upload).
#[derive(Debug, Clone, PartialEq)]
pub enum Original {
    /// A file to copy.
    Path(PathBuf),
    /// Bytes received.
    Bytes(Arc<[u8]>),
}

impl Original {
    /// The bytes.
    pub fn read(&self) -> Result<Vec<u8>> {
        match self {
            Original::Path(p) => std::fs::read(p).map_err(|source| KgragError::Io {
                path: p.clone(),
                source,
            }),
            Original::Bytes(b) => Ok(b.to_vec()),
        }
    }
}

/// SHA-256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A document a program hands over (`kgrag serve`'s JSON, the Python package's `Index.add`): the id it is
/// known by, an optional title and its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewDocument {
    /// The user's id; unique among the documents given together.
    pub id: String,
    /// An optional title (kept, and put before the text as HippoRAG's passages have it).
    #[serde(default)]
    pub title: Option<String>,
    /// The text.
    pub text: String,
}

/// `docs` checked and made [`SourceDoc`]s whose source is `source:` and the id: every id not blank and
/// given once, every text not blank. An error names the position (`documents[3]`) and the id.
pub fn from_new(docs: Vec<NewDocument>, source: &str) -> Result<Vec<SourceDoc>> {
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(docs.len());
    for (i, d) in docs.into_iter().enumerate() {
        if d.id.trim().is_empty() {
            return Err(KgragError::Input(format!(
                "documents[{i}]: \"id\" is empty"
            )));
        }
        if d.text.trim().is_empty() {
            return Err(KgragError::Input(format!(
                "documents[{i}] ({:?}): \"text\" is empty",
                d.id
            )));
        }
        // The same document twice is one; one id with two texts is a conflict.
        match seen.get(&d.id) {
            Some(text) if *text == d.text => continue,
            Some(_) => {
                return Err(KgragError::Conflict(format!(
                    "documents[{i}]: id {:?} is given twice, with two texts",
                    d.id
                )))
            }
            None => {
                seen.insert(d.id.clone(), d.text.clone());
            }
        }
        out.push(SourceDoc {
            source: format!("{source}:{}", d.id),
            document: make_doc(d.title, &d.text),
            id: d.id,
            origin: None,
        });
    }
    Ok(out)
}

pub(crate) fn make_doc(title: Option<String>, text: &str) -> Document {
    match title.filter(|t| !t.trim().is_empty()) {
        Some(t) => Document::passage(t, text),
        None => Document::new(text),
    }
}

/// Documents of a file sent over the network (`kgrag serve`'s upload, the Python package's bytes): a PDF,
/// Office file, web page, EPUB, text or Markdown file is one document whose id is `file_name` (its format
/// by the extension, else by its first bytes); `.jsonl` one per line (`{"id"?, "title"?, "text"}`),
/// `.json` a HippoRAG corpus. The original is kept with the document. Errors name the upload.
pub fn parse_upload(file_name: &str, bytes: Vec<u8>) -> Result<Vec<SourceDoc>> {
    parse_upload_with(file_name, bytes, &Limits::default())
}

/// [`parse_upload`] within `limits`.
pub fn parse_upload_with(
    file_name: &str,
    bytes: Vec<u8>,
    limits: &Limits,
) -> Result<Vec<SourceDoc>> {
    let name = file_name.trim();
    if name.is_empty() {
        return Err(KgragError::Input(
            "an upload needs a file name (its extension says how to read it: .pdf, .docx, .pptx, .xlsx, \
             .html, .epub, .txt, .md, …)"
                .into(),
        ));
    }
    let label = format!("upload {name}");
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if bytes.is_empty() {
        return Err(KgragError::Input(format!(
            "{label}: the file is empty (0 bytes): give it text or remove it"
        )));
    }
    let bytes: Arc<[u8]> = bytes.into();
    files::parse_bytes(&label, name, &ext, bytes, limits).map(|(docs, _)| docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_of_every_kind() {
        let docs = parse_upload("notes/a.md", b"# Title\n\nBody.".to_vec()).unwrap();
        assert_eq!(docs[0].id, "notes/a.md");
        assert_eq!(docs[0].document.text, "# Title\n\nBody.");
        let origin = docs[0].origin.as_ref().unwrap();
        assert_eq!(origin.format, "markdown");
        assert_eq!(origin.digest, digest(b"# Title\n\nBody."));
        let html = b"<html><body><main><h1>Guild</h1><p>Founded in 1611.</p></main></body></html>";
        let docs = parse_upload("page.html", html.to_vec()).unwrap();
        assert_eq!(docs[0].document.text, "# Guild\n\nFounded in 1611.\n");
        assert!(matches!(
            docs[0].origin.as_ref().unwrap().original,
            Some(Original::Bytes(_))
        ));
        let err = parse_upload("x.pdf", b"not a pdf".to_vec())
            .unwrap_err()
            .to_string();
        assert!(err.contains("upload x.pdf") && err.contains("PDF"), "{err}");
        let err = parse_upload("x.txt", Vec::new()).unwrap_err().to_string();
        assert!(err.contains("0 bytes"), "{err}");
    }
}
