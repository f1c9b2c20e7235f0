//! Files and folders as people keep them: a folder is walked as ripgrep walks one (the `ignore` crate:
//! hidden files and folders, and what `.gitignore`, `.ignore` or `.kgragignore` files exclude, are
//! skipped; symbolic links are not followed), `--include`/`--exclude` globs narrow it, files are read on
//! every core, and each file that cannot be read is reported with its reason instead of stopping the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag_documents::{Format, Limits};
use serde::{Deserialize, Serialize};

use super::{digest, make_doc, Origin, Original, SourceDoc};
use crate::{KgragError, Result};

/// Corpus formats read besides [`kgrag_documents`]'s: one document per line or per entry.
const CORPUS_EXTENSIONS: &[&str] = &["jsonl", "json"];

/// How files are read.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Bounds on each file (size, zip entries, unpacked bytes, cells, pages, time).
    pub limits: Limits,
    /// Globs a folder's files must match (relative to the folder; none: every file).
    pub include: Vec<String>,
    /// Globs of a folder's files to leave out.
    pub exclude: Vec<String>,
}

/// A file that was not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The file.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What [`read_paths`] read.
#[derive(Debug, Clone, Default)]
pub struct ReadReport {
    /// The documents, in path order.
    pub docs: Vec<SourceDoc>,
    /// Files read, by format.
    pub by_format: BTreeMap<String, usize>,
    /// Units (pages, slides, sheets, chapters) read, by format.
    pub units: BTreeMap<String, u64>,
    /// Files that could not be read.
    pub skipped: Vec<Skipped>,
    /// Files of a type kgrag does not read, by extension (folders only; listed, not an error).
    pub unsupported: BTreeMap<String, Vec<String>>,
    /// Files with pages (slides, …) that held no text, and those pages.
    pub empty_pages: Vec<(String, Vec<u32>)>,
    /// What readers noticed and worked around, by file.
    pub notes: Vec<(String, String)>,
}

impl ReadReport {
    /// The report as lines for a person: files read by format, files skipped with the reason, unsupported
    /// files, pages without text.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let files: usize = self.by_format.values().sum();
        let formats: Vec<String> = self
            .by_format
            .iter()
            .map(|(f, n)| match self.units.get(f) {
                Some(u) if *u > 0 => format!("{n} {f} ({u} {})", unit_word(f, *u)),
                _ => format!("{n} {f}"),
            })
            .collect();
        out.push_str(&format!(
            "read {files} file{} ({} documents): {}\n",
            if files == 1 { "" } else { "s" },
            self.docs.len(),
            if formats.is_empty() {
                "none".to_owned()
            } else {
                formats.join(", ")
            }
        ));
        if !self.skipped.is_empty() {
            out.push_str(&format!(
                "skipped {} file(s) that could not be read:\n",
                self.skipped.len()
            ));
            for s in &self.skipped {
                out.push_str(&format!("  {}: {}\n", s.path, s.reason));
            }
        }
        if !self.unsupported.is_empty() {
            let n: usize = self.unsupported.values().map(Vec::len).sum();
            let kinds: Vec<String> = self
                .unsupported
                .iter()
                .map(|(e, v)| {
                    format!(
                        "{} {}",
                        v.len(),
                        if e.is_empty() {
                            "without extension".to_owned()
                        } else {
                            format!(".{e}")
                        }
                    )
                })
                .collect();
            out.push_str(&format!(
                "left out {n} file(s) of types kgrag does not read: {}\n",
                kinds.join(", ")
            ));
            for paths in self.unsupported.values() {
                for p in paths.iter().take(5) {
                    out.push_str(&format!("  {p}\n"));
                }
                if paths.len() > 5 {
                    out.push_str(&format!("  … and {} more\n", paths.len() - 5));
                }
            }
        }
        for (file, pages) in &self.empty_pages {
            let list: Vec<String> = pages.iter().take(12).map(u32::to_string).collect();
            out.push_str(&format!(
                "  {file}: no text on page{} {}{} (scanned? OCR is not built in)\n",
                if pages.len() == 1 { "" } else { "s" },
                list.join(", "),
                if pages.len() > 12 { ", …" } else { "" }
            ));
        }
        for (file, note) in &self.notes {
            out.push_str(&format!("  {file}: {note}\n"));
        }
        out
    }
}

fn unit_word(format: &str, n: u64) -> &'static str {
    let unit = Format::from_extension(match format {
        "text" => "txt",
        "markdown" => "md",
        other => other,
    })
    .and_then(Format::unit);
    match (unit, n == 1) {
        (Some(kgrag_documents::Unit::Slide), true) => "slide",
        (Some(kgrag_documents::Unit::Slide), false) => "slides",
        (Some(kgrag_documents::Unit::Sheet), true) => "sheet",
        (Some(kgrag_documents::Unit::Sheet), false) => "sheets",
        (Some(kgrag_documents::Unit::Chapter), true) => "chapter",
        (Some(kgrag_documents::Unit::Chapter), false) => "chapters",
        (_, true) => "page",
        (_, false) => "pages",
    }
}

/// Whether kgrag reads files with this extension.
pub fn supported(extension: &str) -> bool {
    let e = extension.to_ascii_lowercase();
    CORPUS_EXTENSIONS.contains(&e.as_str()) || Format::from_extension(&e).is_some()
}

/// Every extension kgrag reads, as `.pdf, .docx, …`.
pub fn extensions() -> String {
    format!("{}, .jsonl, .json", kgrag_documents::known_extensions())
}

/// A file to read: its path and the id its documents take.
struct Job {
    path: PathBuf,
    name: String,
}

/// A glob set of `globs` (the option named `what` in errors); `None` when there are none.
fn globs(globs: &[String], what: &str) -> Result<Option<globset::GlobSet>> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut set = globset::GlobSetBuilder::new();
    for g in globs {
        let glob =
            globset::Glob::new(g).map_err(|e| KgragError::Config(format!("{what} {g:?}: {e}")))?;
        set.add(glob);
    }
    set.build()
        .map(Some)
        .map_err(|e| KgragError::Config(format!("{what}: {e}")))
}

/// The files of `dir` as the walk finds them (sorted), and the unsupported ones by extension. The
/// `--include`/`--exclude` globs narrow what the walk keeps (they never bring back a hidden or ignored
/// file); a glob matches the path relative to `dir` (`*.pdf` at any depth, `reports/**` below a folder).
fn walk(
    dir: &Path,
    options: &ReadOptions,
    unsupported: &mut BTreeMap<String, Vec<String>>,
) -> Result<Vec<Job>> {
    let include = globs(&options.include, "--include")?;
    let exclude = globs(&options.exclude, "--exclude")?;
    let walker = ignore::WalkBuilder::new(dir)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .ignore(true)
        .add_custom_ignore_filename(".kgragignore")
        .follow_links(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    let mut jobs = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|e| KgragError::Input(format!("{}: {e}", dir.display())))?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.into_path();
        let rel = path
            .strip_prefix(dir)
            .map(|r| r.to_string_lossy().replace('\\', "/"))
            .unwrap_or_else(|_| file_name(&path));
        if include.as_ref().is_some_and(|g| !g.is_match(&rel))
            || exclude.as_ref().is_some_and(|g| g.is_match(&rel))
        {
            continue;
        }
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if supported(&ext) {
            jobs.push(Job { path, name: rel });
        } else {
            unsupported.entry(ext).or_default().push(rel);
        }
    }
    Ok(jobs)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Reads every document under `paths` (folders recursively, as the module docs say). A file that cannot
/// be read is listed in the report's `skipped`; it is an error only when nothing at all could be read, a
/// path does not exist, or two documents have the same id.
pub fn read_paths(paths: &[PathBuf], options: &ReadOptions) -> Result<ReadReport> {
    if paths.is_empty() {
        return Err(KgragError::Input(format!(
            "no input given: name files or folders of {}",
            extensions()
        )));
    }
    let mut report = ReadReport::default();
    let mut jobs = Vec::new();
    for p in paths {
        if p.is_dir() {
            jobs.extend(walk(p, options, &mut report.unsupported)?);
        } else if p.is_file() {
            jobs.push(Job {
                path: p.clone(),
                name: file_name(p),
            });
        } else {
            return Err(KgragError::Input(format!(
                "{}: no such file or folder",
                p.display()
            )));
        }
    }
    let results = read_all(&jobs, &options.limits);
    for (job, result) in jobs.iter().zip(results) {
        match result {
            Ok((docs, notes)) => {
                if let Some(o) = docs.first().and_then(|d| d.origin.as_ref()) {
                    *report.by_format.entry(o.format.clone()).or_default() += 1;
                    *report.units.entry(o.format.clone()).or_default() += u64::from(o.units);
                }
                if !notes.empty_units.is_empty() {
                    report
                        .empty_pages
                        .push((job.name.clone(), notes.empty_units));
                }
                for n in notes.notes {
                    report.notes.push((job.name.clone(), n));
                }
                report.docs.extend(docs);
            }
            Err(reason) => report.skipped.push(Skipped {
                path: job.path.display().to_string(),
                reason,
            }),
        }
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for d in &report.docs {
        if let Some(first) = seen.insert(&d.id, &d.source) {
            return Err(KgragError::Input(format!(
                "two documents have the id {:?}: {first} and {}; ids must be unique",
                d.id, d.source
            )));
        }
    }
    if report.docs.is_empty() {
        let mut why = String::new();
        for s in &report.skipped {
            why.push_str(&format!("\n  {}: {}", s.path, s.reason));
        }
        return Err(KgragError::Input(
            match (report.skipped.is_empty(), paths) {
                (false, _) => format!("no document could be read:{why}"),
                (true, [one]) => format!(
                    "{}: no documents in this folder (looked for {} files)",
                    one.display(),
                    extensions()
                ),
                (true, _) => format!(
                    "no documents under the paths given (looked for {} files)",
                    extensions()
                ),
            },
        ));
    }
    Ok(report)
}

/// Reads every document under `paths`; every file must read (the first that does not is the error) —
/// for programs that want all or nothing. [`read_paths`] reports and goes on.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<SourceDoc>> {
    let report = read_paths(paths, &ReadOptions::default())?;
    if let Some(s) = report.skipped.first() {
        return Err(KgragError::Input(format!("{}: {}", s.path, s.reason)));
    }
    Ok(report.docs)
}

/// Reads `jobs` on every core, in order.
fn read_all(jobs: &[Job], limits: &Limits) -> Vec<FileResult> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    if threads <= 1 {
        return jobs.iter().map(|j| read_file(j, limits)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<FileResult>> = Vec::new();
    out.resize_with(jobs.len(), || None);
    let slots = std::sync::Mutex::new(out);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    break;
                };
                let r = read_file(job, limits);
                if let Ok(mut s) = slots.lock() {
                    s[i] = Some(r);
                }
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not read (a reader thread stopped)".to_owned())))
        .collect()
}

/// One file's documents and what its reader said, or why it could not be read.
type FileResult = std::result::Result<(Vec<SourceDoc>, ReadNotes), String>;

fn read_file(job: &Job, limits: &Limits) -> FileResult {
    let meta = std::fs::metadata(&job.path).map_err(|e| e.to_string())?;
    if meta.len() > limits.max_file_bytes {
        return Err(kgrag_documents::DocumentError::TooLarge {
            bytes: meta.len(),
            limit: limits.max_file_bytes,
        }
        .to_string());
    }
    let bytes = std::fs::read(&job.path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes): give it text or remove it".to_owned());
    }
    let ext = job
        .path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let label = job.path.display().to_string();
    let (mut docs, notes) =
        parse_bytes(&label, &job.name, &ext, bytes.into(), limits).map_err(|e| match e {
            // The label is the report's own: strip it from the reason.
            KgragError::Input(m) => m
                .strip_prefix(&format!("{label}: "))
                .map(str::to_owned)
                .unwrap_or(m),
            other => other.to_string(),
        })?;
    for d in &mut docs {
        if let Some(o) = &mut d.origin {
            if o.original.is_some() {
                o.original = Some(Original::Path(job.path.clone()));
            }
        }
    }
    Ok((docs, notes))
}

/// Documents of one file's bytes: `label` names the file in errors and sources, `name` is the id (and the
/// file citations name).
pub(crate) fn parse_bytes(
    label: &str,
    name: &str,
    ext: &str,
    bytes: Arc<[u8]>,
    limits: &Limits,
) -> Result<(Vec<SourceDoc>, ReadNotes)> {
    let bad = |what: String| KgragError::Input(format!("{label}: {what}"));
    let origin = |format: &str| Origin {
        file: name.to_owned(),
        format: format.to_owned(),
        digest: digest(&bytes),
        size: bytes.len() as u64,
        unit: None,
        units: 0,
        map: None,
        original: None,
    };
    if CORPUS_EXTENSIONS.contains(&ext) {
        let text = decode(&bytes).map_err(bad)?;
        let mut out = Vec::new();
        parse_corpus(label, ext, name, &text, &mut out)?;
        let o = origin(ext);
        for d in &mut out {
            d.origin = Some(o.clone());
        }
        return Ok((out, ReadNotes::default()));
    }
    let format = Format::from_extension(ext)
        .or_else(|| Format::sniff(&bytes))
        .ok_or_else(|| {
            bad(format!(
                "unsupported file type (kgrag reads {})",
                extensions()
            ))
        })?;
    let mut o = origin(format.name());
    let extracted = match format {
        Format::Text | Format::Markdown => {
            let text = decode(&bytes).map_err(bad)?;
            if text.trim().is_empty() {
                return Err(bad("the file holds only white space".into()));
            }
            kgrag_documents::map_text(text, format == Format::Markdown)
        }
        _ => kgrag_documents::read(&bytes, format, limits).map_err(|e| bad(e.to_string()))?,
    };
    // Text files have no title (`map_text` gives none).
    let (text, title) = (extracted.text, extracted.title);
    o.unit = extracted.unit;
    o.units = extracted.units;
    o.map = Some(extracted.map);
    o.original = Some(Original::Bytes(bytes.clone()));
    let notes = ReadNotes {
        empty_units: extracted.empty_units,
        notes: extracted.notes,
    };
    let mut document = kgrag_types::Document::new(text);
    document.title = title;
    let doc = SourceDoc {
        id: name.to_owned(),
        source: label.to_owned(),
        document,
        origin: Some(o),
    };
    Ok((vec![doc], notes))
}

/// What a reader said of a file, carried to the report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadNotes {
    /// Units without text.
    pub empty_units: Vec<u32>,
    /// Notes.
    pub notes: Vec<String>,
}

/// UTF-8 text of a file's bytes (a byte-order mark dropped).
fn decode(bytes: &[u8]) -> std::result::Result<String, String> {
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes): give it text or remove it".into());
    }
    let bytes = bytes
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(bytes);
    std::str::from_utf8(bytes).map(str::to_owned).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {}); convert it to UTF-8",
            e.valid_up_to()
        )
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

/// Documents of a corpus file's text: `label` names the file in errors and sources, `name` is the id prefix.
fn parse_corpus(
    label: &str,
    ext: &str,
    name: &str,
    text: &str,
    out: &mut Vec<SourceDoc>,
) -> Result<()> {
    let first = out.len();
    parse_entries(label, ext, name, text, out)?;
    // Two entries of one file with the same id: the file's problem.
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for d in &out[first..] {
        if let Some(prev) = seen.insert(&d.id, &d.source) {
            return Err(KgragError::Input(format!(
                "{label}: two documents have the id {:?} ({prev} and {}); ids must be unique",
                d.id, d.source
            )));
        }
    }
    Ok(())
}

fn parse_entries(
    label: &str,
    ext: &str,
    name: &str,
    text: &str,
    out: &mut Vec<SourceDoc>,
) -> Result<()> {
    let bad = |what: String| KgragError::Input(format!("{label}: {what}"));
    if ext == "jsonl" {
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
                origin: None,
            });
            n += 1;
        }
        if n == 0 {
            return Err(bad("no JSON lines with a \"text\"".into()));
        }
        return Ok(());
    }
    let docs: Vec<CorpusDoc> = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "not a HippoRAG corpus (a JSON array of {{\"title\", \"text\"}} objects): {e}"
        ))
    })?;
    if docs.is_empty() {
        return Err(bad("the corpus array is empty".into()));
    }
    for (i, d) in docs.into_iter().enumerate() {
        if d.text.trim().is_empty() && d.title.as_deref().is_none_or(|t| t.trim().is_empty()) {
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
            origin: None,
        });
    }
    Ok(())
}

/// The set of file digests of `docs` (for a re-run to tell changed files).
pub fn digests(docs: &[SourceDoc]) -> BTreeSet<String> {
    docs.iter()
        .filter_map(|d| d.origin.as_ref().map(|o| o.digest.clone()))
        .collect()
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
        let report = read_paths(std::slice::from_ref(&d), &ReadOptions::default()).unwrap();
        let docs = &report.docs;
        let ids: Vec<&str> = docs.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["a.txt", "c1", "c.jsonl:3", "7", "sub/b.md"]);
        assert_eq!(docs[1].document.text, "Gamma\nGamma body.");
        assert_eq!(docs[4].document.text, "# Beta\nBody.", "BOM stripped");
        assert_eq!(report.unsupported["csv"], ["ignored.csv"]);
        assert!(report.summary().contains("1 .csv"), "{}", report.summary());

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
        // A folder with a bad file still reads the rest, and says why it skipped one.
        std::fs::write(e.join("good.md"), "Fine text.").unwrap();
        let report = read_paths(std::slice::from_ref(&e), &ReadOptions::default()).unwrap();
        assert_eq!(
            report
                .docs
                .iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>(),
            ["good.md"]
        );
        assert_eq!(report.skipped.len(), 4, "{:?}", report.skipped);
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&e);
    }

    #[test]
    fn folders_skip_hidden_ignored_and_filtered_files() {
        let d = tmp("walk");
        std::fs::create_dir_all(d.join(".git")).unwrap();
        std::fs::create_dir_all(d.join("drafts")).unwrap();
        std::fs::create_dir_all(d.join("notes")).unwrap();
        std::fs::write(d.join(".git/x.md"), "hidden").unwrap();
        std::fs::write(d.join(".hidden.md"), "hidden").unwrap();
        std::fs::write(d.join(".gitignore"), "drafts/\n*.tmp.md\n").unwrap();
        std::fs::write(d.join("drafts/a.md"), "ignored").unwrap();
        std::fs::write(d.join("notes/b.md"), "kept").unwrap();
        std::fs::write(d.join("notes/c.tmp.md"), "ignored").unwrap();
        std::fs::write(d.join("notes/d.txt"), "kept too").unwrap();
        let ids = |o: &ReadOptions| -> Vec<String> {
            read_paths(std::slice::from_ref(&d), o)
                .unwrap()
                .docs
                .into_iter()
                .map(|x| x.id)
                .collect()
        };
        assert_eq!(ids(&ReadOptions::default()), ["notes/b.md", "notes/d.txt"]);
        let only_md = ReadOptions {
            include: vec!["*.md".into()],
            ..ReadOptions::default()
        };
        assert_eq!(ids(&only_md), ["notes/b.md"]);
        let no_txt = ReadOptions {
            exclude: vec!["**/*.txt".into()],
            ..ReadOptions::default()
        };
        assert_eq!(ids(&no_txt), ["notes/b.md"]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
