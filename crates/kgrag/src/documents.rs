//! Reading a user's documents: a folder (recursively, in path order) or files of `.txt` / `.md` (one
//! document each), `.jsonl` (one `{"id"?, "title"?, "text"}` object per line) or `.json` (a HippoRAG
//! corpus: an array of `{"title", "text", "idx"?}`).
//!
//! Every problem is an error naming the file (and the line for JSONL): a file that is not UTF-8 (with the
//! byte offset), an empty file, a malformed line, a missing `text`, two documents with the same id, a
//! folder without any document. Nothing is read half: the whole input is checked before indexing starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kgrag_types::Document;
use serde::{Deserialize, Serialize};

use crate::{KgragError, Result};

/// File extensions read from folders.
pub const EXTENSIONS: &[&str] = &["txt", "md", "jsonl", "json"];

/// One input document with the id a user names it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceDoc {
    /// The user's id: the path relative to the folder given (`notes/a.md`), the JSONL `id` (else
    /// `file:line`), the corpus `idx` (else its title, else `file#n`).
    pub id: String,
    /// Where it came from (`path` or `path:line`).
    pub source: String,
    /// The document (title kept; with a title the text is `title + "\n" + body`, as HippoRAG's passages).
    pub document: Document,
}

impl SourceDoc {
    /// A document given in code: `text` under the id `id` (also its source), no title.
    pub fn text(id: impl Into<String>, text: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            source: id.clone(),
            id,
            document: Document::new(text),
        }
    }
}

fn bad(path: &Path, what: impl std::fmt::Display) -> KgragError {
    KgragError::Input(format!("{}: {what}", path.display()))
}

fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| KgragError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(&path.display().to_string(), bytes)
}

/// UTF-8 text of a file's bytes (a byte-order mark dropped); errors start with `label`.
fn decode(label: &str, bytes: Vec<u8>) -> Result<String> {
    let bad = |what: String| KgragError::Input(format!("{label}: {what}"));
    if bytes.is_empty() {
        return Err(bad(
            "the file is empty (0 bytes): give it text or remove it".into(),
        ));
    }
    let bytes = bytes
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .map(<[u8]>::to_vec)
        .unwrap_or(bytes);
    String::from_utf8(bytes).map_err(|e| {
        bad(format!(
            "not UTF-8 text (invalid byte at offset {}); convert it to UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[derive(Deserialize)]
struct JsonlDoc {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    title: Option<String>,
    text: String,
}

#[derive(Deserialize)]
struct CorpusDoc {
    #[serde(default)]
    title: Option<String>,
    text: String,
    #[serde(default)]
    idx: Option<serde_json::Value>,
}

fn id_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
    let mut seen = std::collections::HashSet::new();
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
        if !seen.insert(d.id.clone()) {
            return Err(KgragError::Input(format!(
                "documents[{i}]: id {:?} is given twice",
                d.id
            )));
        }
        out.push(SourceDoc {
            source: format!("{source}:{}", d.id),
            document: make_doc(d.title, &d.text),
            id: d.id,
        });
    }
    Ok(out)
}

fn make_doc(title: Option<String>, text: &str) -> Document {
    match title.filter(|t| !t.trim().is_empty()) {
        Some(t) => Document::passage(t, text),
        None => Document::new(text),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Reads one file; `name` is its id prefix (its path relative to the folder given).
fn read_file(path: &Path, name: &str, out: &mut Vec<SourceDoc>) -> Result<()> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let text = read_text(path)?;
    parse(&path.display().to_string(), &ext, name, &text, out)
}

/// Documents of a file sent over the network (`kgrag serve`'s upload): `.jsonl` one per line (`{"id"?,
/// "title"?, "text"}`), `.json` a HippoRAG corpus, anything else (`.txt`, `.md`) one document whose id is
/// `file_name`. Errors name the upload (and the line).
pub fn parse_upload(file_name: &str, bytes: Vec<u8>) -> Result<Vec<SourceDoc>> {
    let name = file_name.trim();
    if name.is_empty() {
        return Err(KgragError::Input(
            "an upload needs a file name (its extension says how to read it; .txt and .md are one \
             document named by it)"
                .into(),
        ));
    }
    let label = format!("upload {name}");
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let text = decode(&label, bytes)?;
    let mut out = Vec::new();
    parse(&label, &ext, name, &text, &mut out)?;
    Ok(out)
}

/// Documents of one file's text: `label` names the file in errors and sources, `name` is the id prefix.
fn parse(label: &str, ext: &str, name: &str, text: &str, out: &mut Vec<SourceDoc>) -> Result<()> {
    let bad = |what: String| KgragError::Input(format!("{label}: {what}"));
    match ext {
        "jsonl" => {
            let mut n = 0;
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let doc: JsonlDoc = serde_json::from_str(line).map_err(|e| {
                    bad(format!(
                        "line {}: not a JSON object with a string \"text\" ({e})",
                        i + 1
                    ))
                })?;
                if doc.text.trim().is_empty() {
                    return Err(bad(format!("line {}: \"text\" is empty", i + 1)));
                }
                let id = doc
                    .id
                    .as_ref()
                    .map(id_string)
                    .unwrap_or_else(|| format!("{name}:{}", i + 1));
                out.push(SourceDoc {
                    id,
                    source: format!("{label}:{}", i + 1),
                    document: make_doc(doc.title, &doc.text),
                });
                n += 1;
            }
            if n == 0 {
                return Err(bad("no JSON lines with a \"text\"".into()));
            }
        }
        "json" => {
            let docs: Vec<CorpusDoc> = serde_json::from_str(text).map_err(|e| {
                bad(format!(
                    "not a HippoRAG corpus (a JSON array of {{\"title\", \"text\"}} objects): {e}"
                ))
            })?;
            if docs.is_empty() {
                return Err(bad("the corpus array is empty".into()));
            }
            for (i, d) in docs.into_iter().enumerate() {
                if d.text.trim().is_empty()
                    && d.title.as_deref().is_none_or(|t| t.trim().is_empty())
                {
                    return Err(bad(format!("entry {i}: \"text\" and \"title\" are empty")));
                }
                let id = d
                    .idx
                    .as_ref()
                    .map(id_string)
                    .unwrap_or_else(|| format!("{name}#{i}"));
                out.push(SourceDoc {
                    id,
                    source: format!("{label}#{i}"),
                    document: make_doc(d.title, &d.text),
                });
            }
        }
        _ => {
            if text.trim().is_empty() {
                return Err(bad("the file holds only white space".into()));
            }
            out.push(SourceDoc {
                id: name.to_owned(),
                source: label.to_owned(),
                document: Document::new(text),
            });
        }
    }
    Ok(())
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| KgragError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for e in entries {
        let e = e.map_err(|source| KgragError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        paths.push(e.path());
    }
    paths.sort();
    for p in paths {
        let hidden = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        // Symbolic links to folders are not followed (a link to a parent would never end).
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if p.is_dir() {
            if !is_link {
                walk(&p, files)?;
            }
        } else if p.extension().is_some_and(|e| {
            EXTENSIONS.contains(&e.to_string_lossy().to_ascii_lowercase().as_str())
        }) {
            files.push(p);
        }
    }
    Ok(())
}

/// Reads every document under `paths` (folders recursively). Ids must be unique.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<SourceDoc>> {
    if paths.is_empty() {
        return Err(KgragError::Input(
            "no input given: name files or folders of .txt, .md, .jsonl or .json documents".into(),
        ));
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files = Vec::new();
            walk(p, &mut files)?;
            if files.is_empty() {
                return Err(bad(
                    p,
                    format!(
                        "no documents in this folder (looked for {} files)",
                        EXTENSIONS
                            .iter()
                            .map(|e| format!(".{e}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            for f in files {
                let rel = f
                    .strip_prefix(p)
                    .map(|r| r.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_else(|_| file_name(&f));
                read_file(&f, &rel, &mut out)?;
            }
        } else if p.is_file() {
            read_file(p, &file_name(p), &mut out)?;
        } else {
            return Err(bad(p, "no such file or folder"));
        }
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for d in &out {
        if let Some(first) = seen.insert(&d.id, &d.source) {
            return Err(KgragError::Input(format!(
                "two documents have the id {:?}: {first} and {}; ids must be unique",
                d.id, d.source
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kgrag-docs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_each_format_and_names_problems() {
        let d = tmp("formats");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.txt"), "Alpha text.").unwrap();
        std::fs::write(d.join("sub/b.md"), "\u{feff}# Beta\nBody.").unwrap();
        std::fs::write(
            d.join("c.jsonl"),
            "{\"id\": \"c1\", \"title\": \"Gamma\", \"text\": \"Gamma body.\"}\n\n{\"text\": \"Delta.\"}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("corpus.json"),
            "[{\"title\": \"Eps\", \"text\": \"Eps body.\", \"idx\": 7}]",
        )
        .unwrap();
        std::fs::write(d.join("ignored.csv"), "x").unwrap();
        let docs = read_inputs(std::slice::from_ref(&d)).unwrap();
        let ids: Vec<&str> = docs.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["a.txt", "c1", "c.jsonl:3", "7", "sub/b.md"]);
        assert_eq!(docs[1].document.text, "Gamma\nGamma body.");
        assert_eq!(docs[4].document.text, "# Beta\nBody.", "BOM stripped");

        let e = tmp("errors");
        std::fs::write(e.join("bad.jsonl"), "{\"text\": \"ok\"}\n{\"txt\": 1}\n").unwrap();
        let err = read_inputs(&[e.join("bad.jsonl")]).unwrap_err().to_string();
        assert!(err.contains("bad.jsonl") && err.contains("line 2"), "{err}");
        std::fs::write(e.join("latin1.txt"), b"caf\xe9 au lait").unwrap();
        let err = read_inputs(&[e.join("latin1.txt")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("latin1.txt") && err.contains("offset 3"),
            "{err}"
        );
        std::fs::write(e.join("empty.md"), b"").unwrap();
        let err = read_inputs(&[e.join("empty.md")]).unwrap_err().to_string();
        assert!(err.contains("empty.md") && err.contains("0 bytes"), "{err}");
        let empty = tmp("emptydir");
        let err = read_inputs(&[empty]).unwrap_err().to_string();
        assert!(err.contains("no documents"), "{err}");
        std::fs::write(
            e.join("dup.jsonl"),
            "{\"id\": 1, \"text\": \"a\"}\n{\"id\": \"1\", \"text\": \"b\"}\n",
        )
        .unwrap();
        let err = read_inputs(&[e.join("dup.jsonl")]).unwrap_err().to_string();
        assert!(
            err.contains("same id") || err.contains("the id \"1\""),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&e);
    }
}
