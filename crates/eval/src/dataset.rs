//! Datasets: manifests compiled into the crate, checksummed loading of reference data from
//! `KGRAG_DATA_DIR`, the bundled multi-hop fixture, and a loader for any data in HippoRAG's format.
//!
//! | name | format | read from |
//! | --- | --- | --- |
//! | `musique-100` | `hipporag` | `$KGRAG_DATA_DIR/musique-hipporag/` (sha256-checked) |
//! | `kgrag-fixture` | `kgrag-fixture` | bundled (`datasets/kgrag-fixture/fixture.json`) |
//! | `ultradomain-mix` | `ultradomain` | `$KGRAG_DATA_DIR/ultradomain-mix/` (sha256-checked) |
//!
//! [`load_dir`] reads a folder in HippoRAG's format without a manifest (the checksums it finds are recorded
//! in the returned manifest). UltraDomain's corpus is whole documents ([`Dataset::documents`]), to be cut
//! into chunks; its questions have no gold answers or passages (answer-quality metrics only).
//!
//! Passages are compared as exact strings `title + "\n" + text` (HippoRAG's rule), so gold passages of a
//! question are those strings, and a passage's [`ChunkId`] is the md5 of that string.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use kgrag_types::{ChunkId, Extraction, Triple};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{invalid, io, EvalError, Result};

/// The environment variable naming the folder that holds reference data.
pub const DATA_DIR_VAR: &str = "KGRAG_DATA_DIR";

/// The data folder used when [`DATA_DIR_VAR`] is unset or empty.
pub const DEFAULT_DATA_DIR: &str = "datasets";

const MUSIQUE_100_MANIFEST: &str = include_str!("../datasets/musique-100.toml");
const FIXTURE_MANIFEST: &str = include_str!("../datasets/kgrag-fixture/manifest.toml");
const FIXTURE_JSON: &str = include_str!("../datasets/kgrag-fixture/fixture.json");
const FIXTURE_JSON_PATH: &str = "datasets/kgrag-fixture/fixture.json (bundled)";
const ULTRADOMAIN_MIX_MANIFEST: &str = include_str!("../datasets/ultradomain-mix.toml");

/// The manifests compiled in: (name, path shown in errors, TOML text).
const MANIFESTS: [(&str, &str, &str); 3] = [
    (
        "musique-100",
        "datasets/musique-100.toml (bundled)",
        MUSIQUE_100_MANIFEST,
    ),
    (
        "kgrag-fixture",
        "datasets/kgrag-fixture/manifest.toml (bundled)",
        FIXTURE_MANIFEST,
    ),
    (
        "ultradomain-mix",
        "datasets/ultradomain-mix.toml (bundled)",
        ULTRADOMAIN_MIX_MANIFEST,
    ),
];

/// One passage of a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Passage {
    /// Title (not unique in MuSiQue).
    pub title: String,
    /// Body text.
    pub text: String,
}

impl Passage {
    /// The passage as HippoRAG indexes and compares it: `title + "\n" + text`.
    pub fn content(&self) -> String {
        format!("{}\n{}", self.title, self.text)
    }

    /// The passage's chunk id: `chunk-` + md5 of [`Passage::content`].
    pub fn chunk_id(&self) -> ChunkId {
        ChunkId::from_content(&self.content())
    }
}

/// One question with its gold answers and gold passages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Question id, unique within the dataset.
    pub id: String,
    /// The question text.
    pub question: String,
    /// Gold answers: the answer first, then its aliases, de-duplicated in order.
    pub answers: Vec<String>,
    /// Gold passage contents (`title + "\n" + text`), de-duplicated in order.
    pub gold: Vec<String>,
    /// Every paragraph the question lists, gold and distractors (HippoRAG format: its 20 `paragraphs`),
    /// de-duplicated in order; empty when the format lists none.
    #[serde(default)]
    pub paragraphs: Vec<String>,
}

/// Where the triples of a dataset's passages come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtractionSource {
    /// A HippoRAG OpenIE cache file (read by `kgrag-openie`).
    OpenIeFile(PathBuf),
    /// Triples shipped with the dataset: one extraction per passage, in passage order.
    Inline(Vec<Extraction>),
    /// None: extraction has to run.
    None,
}

/// A file of a dataset, as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestFile {
    /// Path relative to the dataset's folder.
    pub path: String,
    /// Lowercase hex sha256 of the file; empty means not checked.
    pub sha256: String,
    /// Where the file is published, when not [`Manifest::download`] + [`ManifestFile::path`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What a dataset is and which files it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Dataset name, as given to [`load`].
    pub name: String,
    /// File format: `hipporag` or `kgrag-fixture`.
    pub format: String,
    /// Folder under the data directory holding the files (empty for bundled data).
    pub dir: String,
    /// One-line description.
    pub description: String,
    /// Licence of the data.
    pub licence: String,
    /// Where the data is published.
    pub source: String,
    /// Base URL the files are downloaded from (`cargo xtask fetch-data`): a file's URL is this followed by
    /// its path, unless the file gives its own `url`. Empty: not downloadable.
    #[serde(default)]
    pub download: String,
    /// Files by role (`questions`, `corpus`, `openie`; `answers-*`: published answers of a method;
    /// `verdicts-*`: published judge verdicts).
    #[serde(default)]
    pub files: BTreeMap<String, ManifestFile>,
}

impl Manifest {
    /// The URL file `role` is published at, if the manifest says.
    pub fn url_of(&self, role: &str) -> Option<String> {
        let f = self.files.get(role)?;
        if let Some(u) = &f.url {
            return Some(u.clone());
        }
        if self.download.is_empty() {
            return None;
        }
        let base = self.download.trim_end_matches('/');
        Some(format!("{base}/{}", f.path))
    }
}

/// A loaded dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Dataset name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// The corpus, in file order.
    pub passages: Vec<Passage>,
    /// The questions, in file order.
    pub questions: Vec<Question>,
    /// Where the passages' triples come from.
    pub extraction: ExtractionSource,
    /// `true`: [`Dataset::passages`] are whole documents to be cut into chunks (UltraDomain), with empty
    /// titles; `false`: passages, one chunk each (HippoRAG's datasets, the fixture).
    pub documents: bool,
    /// Every file the dataset was read from, by manifest role, resolved.
    pub files: BTreeMap<String, PathBuf>,
    /// The manifest the dataset was loaded by (for [`load_hipporag`]: one describing the files given).
    pub manifest: Manifest,
}

impl Dataset {
    /// The dataset with only its first `n` questions; the passages are unchanged.
    pub fn limit(mut self, n: usize) -> Self {
        self.questions.truncate(n);
        self
    }

    /// The dataset with only its first `n` corpus entries (documents or passages); questions unchanged.
    pub fn limit_corpus(mut self, n: usize) -> Self {
        self.passages.truncate(n);
        self
    }

    /// Whether any question has gold passages (recall@k is measurable).
    pub fn has_gold_passages(&self) -> bool {
        self.questions.iter().any(|q| !q.gold.is_empty())
    }

    /// Whether any question has gold answers (EM/F1 are measurable).
    pub fn has_gold_answers(&self) -> bool {
        self.questions.iter().any(|q| !q.answers.is_empty())
    }

    /// Keeps only the passages the questions list (their paragraphs and gold passages), for CI-sized runs
    /// over a few questions: MuSiQue's 10 first questions list 200 of the 1,890 passages. Returns how many
    /// passages were dropped. Retrieval over the smaller corpus is easier: never compare such figures with
    /// full-corpus ones.
    pub fn restrict_corpus_to_questions(&mut self) -> usize {
        let listed: HashSet<&str> = self
            .questions
            .iter()
            .flat_map(|q| q.paragraphs.iter().chain(q.gold.iter()))
            .map(String::as_str)
            .collect();
        let before = self.passages.len();
        self.passages
            .retain(|p| listed.contains(p.content().as_str()));
        before - self.passages.len()
    }
}

/// The data folder: `$KGRAG_DATA_DIR` if set and non-empty, else `datasets`.
pub fn data_dir() -> PathBuf {
    data_dir_from(std::env::var_os(DATA_DIR_VAR))
}

fn data_dir_from(value: Option<OsString>) -> PathBuf {
    match value {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_DATA_DIR),
    }
}

/// The names of the datasets [`load`] knows.
pub fn available() -> Vec<&'static str> {
    MANIFESTS.iter().map(|(name, _, _)| *name).collect()
}

/// The compiled-in manifest of dataset `name`.
pub fn manifest(name: &str) -> Result<Manifest> {
    let Some((_, path, text)) = MANIFESTS.iter().find(|(n, _, _)| *n == name) else {
        return Err(EvalError::UnknownDataset {
            name: name.to_owned(),
            known: available().into_iter().map(str::to_owned).collect(),
        });
    };
    let manifest: Manifest = toml::from_str(text).map_err(|e| EvalError::Parse {
        path: PathBuf::from(path),
        message: e.to_string(),
    })?;
    if manifest.name != name {
        return Err(invalid(format!(
            "{path}: manifest names dataset {:?}, expected {name:?}",
            manifest.name
        )));
    }
    Ok(manifest)
}

/// Loads dataset `name`, reading reference data from `data_dir` (normally [`data_dir`]).
///
/// For `hipporag`-format datasets every file the manifest lists must be present under
/// `data_dir/<manifest dir>/` (one error lists all missing files and says where the data is published) and
/// match its sha256; every gold passage must be in the corpus.
pub fn load(name: &str, data_dir: &Path) -> Result<Dataset> {
    let manifest = manifest(name)?;
    match manifest.format.as_str() {
        "hipporag" => load_manifest_hipporag(manifest, data_dir),
        "kgrag-fixture" => load_fixture(manifest),
        "ultradomain" => load_ultradomain(manifest, data_dir),
        other => Err(invalid(format!(
            "dataset {name}: unknown format {other:?} (expected \"hipporag\", \"ultradomain\" or \"kgrag-fixture\")"
        ))),
    }
}

/// Checks that every file of `manifest` is under `base`: one error lists all missing files and says where
/// the data is published.
fn check_present(manifest: &Manifest, base: &Path) -> Result<()> {
    let missing: Vec<PathBuf> = manifest
        .files
        .values()
        .map(|f| base.join(&f.path))
        .filter(|p| !p.is_file())
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let fetch = if manifest.download.is_empty() {
        String::new()
    } else {
        format!(
            " `cargo xtask fetch-data {}` downloads them.",
            manifest.name
        )
    };
    Err(EvalError::MissingFiles {
        dataset: manifest.name.clone(),
        files: missing,
        hint: format!(
            "The data is published at {}.{fetch} Put the files in {}/ or set {DATA_DIR_VAR} to the folder that \
             holds {}/ (e.g. {DATA_DIR_VAR}=/path/to/datasets).",
            manifest.source,
            base.display(),
            manifest.dir
        ),
    })
}

/// UltraDomain as HiRAG ships it: `corpus` a JSON array of document texts (the de-duplicated `context`
/// fields), `questions` JSON lines whose `query` (HiRAG's result files), `input` (UltraDomain's own files) or
/// `question` is the question. No gold answers or passages. Every file is sha256-checked.
fn load_ultradomain(manifest: Manifest, data_dir: &Path) -> Result<Dataset> {
    let base = data_dir.join(&manifest.dir);
    check_present(&manifest, &base)?;
    let mut files = BTreeMap::new();
    let mut bytes_of = BTreeMap::new();
    for (role, f) in &manifest.files {
        let path = base.join(&f.path);
        let bytes = read_verified(&path, &f.sha256)?;
        files.insert(role.clone(), path);
        bytes_of.insert(role.clone(), bytes);
    }
    let role = |r: &str| -> Result<(&PathBuf, &Vec<u8>)> {
        match (files.get(r), bytes_of.get(r)) {
            (Some(p), Some(b)) => Ok((p, b)),
            _ => Err(invalid(format!(
                "dataset {}: the manifest lists no {r:?} file",
                manifest.name
            ))),
        }
    };
    let (corpus_path, corpus_bytes) = role("corpus")?;
    let texts: Vec<String> = parse_json(corpus_path, corpus_bytes)?;
    let mut seen = HashSet::new();
    let passages: Vec<Passage> = texts
        .into_iter()
        .filter(|t| !t.trim().is_empty() && seen.insert(t.clone()))
        .map(|text| Passage {
            title: String::new(),
            text,
        })
        .collect();
    let (questions_path, questions_bytes) = role("questions")?;
    let questions = parse_question_lines(questions_path, questions_bytes, &manifest.name)?;
    Ok(Dataset {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        passages,
        questions,
        extraction: ExtractionSource::None,
        documents: true,
        files,
        manifest,
    })
}

/// Questions from JSON lines (`query`, `input` or `question` of each object), ids `<prefix>-NNN` by line.
/// A bad line is an error naming the file and the line.
pub fn parse_question_lines(path: &Path, bytes: &[u8], prefix: &str) -> Result<Vec<Question>> {
    let text = std::str::from_utf8(bytes).map_err(|e| EvalError::Parse {
        path: path.to_path_buf(),
        message: format!("not UTF-8: {e}"),
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: serde_json::Value =
            serde_json::from_str(line).map_err(|e| EvalError::Parse {
                path: path.to_path_buf(),
                message: format!("line {}: {e}", i + 1),
            })?;
        let question = ["query", "input", "question"]
            .iter()
            .find_map(|k| record.get(*k).and_then(serde_json::Value::as_str))
            .ok_or_else(|| EvalError::Parse {
                path: path.to_path_buf(),
                message: format!(
                    "line {}: no \"query\", \"input\" or \"question\" string",
                    i + 1
                ),
            })?;
        out.push(Question {
            id: format!("{prefix}-{:03}", out.len()),
            question: question.to_owned(),
            answers: Vec::new(),
            gold: Vec::new(),
            paragraphs: Vec::new(),
        });
    }
    Ok(out)
}

/// Loads a folder in HippoRAG's format without a manifest: `<name>_corpus.json` (exactly one), the
/// questions `<name>.json` beside it, and an optional OpenIE cache (`openie*.json`, at most one). The
/// dataset is named after the folder; the files' sha256 sums are recorded in its manifest.
pub fn load_dir(dir: &Path) -> Result<Dataset> {
    let entries = fs::read_dir(dir).map_err(|e| io(dir, e))?;
    let mut corpora = Vec::new();
    let mut openie = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.path().is_file() {
            continue;
        }
        if let Some(stem) = name.strip_suffix("_corpus.json") {
            corpora.push(stem.to_owned());
        } else if name.starts_with("openie") && name.ends_with(".json") {
            openie.push(name);
        }
    }
    corpora.sort();
    openie.sort();
    let stem = match corpora.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(invalid(format!(
                "{}: no `<name>_corpus.json` file: a dataset folder holds HippoRAG's `<name>_corpus.json` \
                 (a JSON array of {{title, text}}), `<name>.json` (the questions) and optionally its OpenIE cache \
                 `openie*.json`",
                dir.display()
            )))
        }
        many => {
            return Err(invalid(format!(
                "{}: several corpora ({}): keep one `<name>_corpus.json` per folder",
                dir.display(),
                many.iter()
                    .map(|m| format!("{m}_corpus.json"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    };
    if openie.len() > 1 {
        return Err(invalid(format!(
            "{}: several OpenIE caches ({}): keep at most one `openie*.json` per folder",
            dir.display(),
            openie.join(", ")
        )));
    }
    let questions = dir.join(format!("{stem}.json"));
    let corpus = dir.join(format!("{stem}_corpus.json"));
    let openie = openie.first().map(|n| dir.join(n));
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| stem.clone());
    load_hipporag(&name, &questions, &corpus, openie.as_deref())
}

fn load_manifest_hipporag(manifest: Manifest, data_dir: &Path) -> Result<Dataset> {
    let base = data_dir.join(&manifest.dir);
    let file_for = |role: &str| {
        manifest.files.get(role).ok_or_else(|| {
            invalid(format!(
                "dataset {}: the manifest lists no {role:?} file",
                manifest.name
            ))
        })
    };
    let questions_file = file_for("questions")?;
    let corpus_file = file_for("corpus")?;
    let openie_file = manifest.files.get("openie");

    check_present(&manifest, &base)?;

    let questions_path = base.join(&questions_file.path);
    let corpus_path = base.join(&corpus_file.path);
    let questions_bytes = read_verified(&questions_path, &questions_file.sha256)?;
    let corpus_bytes = read_verified(&corpus_path, &corpus_file.sha256)?;
    let extraction = match openie_file {
        Some(f) => {
            let path = base.join(&f.path);
            read_verified(&path, &f.sha256)?;
            ExtractionSource::OpenIeFile(path)
        }
        None => ExtractionSource::None,
    };
    let files = manifest
        .files
        .iter()
        .map(|(role, f)| (role.clone(), base.join(&f.path)))
        .collect();
    let (passages, questions) = parse_hipporag(
        &questions_path,
        &questions_bytes,
        &corpus_path,
        &corpus_bytes,
    )?;
    Ok(Dataset {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        passages,
        questions,
        extraction,
        documents: false,
        files,
        manifest,
    })
}

/// Loads a dataset in HippoRAG's format from the given files, without checksums: `questions` is a JSON
/// array of `{id, question, answer (string or list), answer_aliases?, paragraphs: [{title, paragraph_text,
/// is_supporting}]}` (MuSiQue's shape), `corpus` a JSON array of `{title, text}`, `openie` an optional
/// HippoRAG OpenIE cache file (only its presence is checked here).
///
/// Gold passages are `title + "\n" + paragraph_text` of the supporting paragraphs; each must be in the
/// corpus. The returned manifest describes the files given, with the sha256 of each.
pub fn load_hipporag(
    name: &str,
    questions: &Path,
    corpus: &Path,
    openie: Option<&Path>,
) -> Result<Dataset> {
    let missing: Vec<PathBuf> = [Some(questions), Some(corpus), openie]
        .into_iter()
        .flatten()
        .filter(|p| !p.is_file())
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
        .collect();
    if !missing.is_empty() {
        return Err(EvalError::MissingFiles {
            dataset: name.to_owned(),
            files: missing,
            hint: "Check the paths given for the questions, corpus and OpenIE files.".to_owned(),
        });
    }
    let questions_bytes = fs::read(questions).map_err(|e| io(questions, e))?;
    let corpus_bytes = fs::read(corpus).map_err(|e| io(corpus, e))?;
    let mut files = BTreeMap::new();
    files.insert(
        "questions".to_owned(),
        ManifestFile {
            path: questions.display().to_string(),
            sha256: sha256_hex(&questions_bytes),
            url: None,
        },
    );
    files.insert(
        "corpus".to_owned(),
        ManifestFile {
            path: corpus.display().to_string(),
            sha256: sha256_hex(&corpus_bytes),
            url: None,
        },
    );
    let extraction = match openie {
        Some(path) => {
            let bytes = fs::read(path).map_err(|e| io(path, e))?;
            files.insert(
                "openie".to_owned(),
                ManifestFile {
                    path: path.display().to_string(),
                    sha256: sha256_hex(&bytes),
                    url: None,
                },
            );
            ExtractionSource::OpenIeFile(path.to_path_buf())
        }
        None => ExtractionSource::None,
    };
    let (passages, parsed_questions) =
        parse_hipporag(questions, &questions_bytes, corpus, &corpus_bytes)?;
    let description = format!(
        "{} questions over {} passages (HippoRAG format)",
        parsed_questions.len(),
        passages.len()
    );
    let manifest = Manifest {
        name: name.to_owned(),
        format: "hipporag".to_owned(),
        dir: String::new(),
        description: description.clone(),
        licence: String::new(),
        source: questions.display().to_string(),
        download: String::new(),
        files,
    };
    let files = manifest
        .files
        .iter()
        .map(|(role, f)| (role.clone(), PathBuf::from(&f.path)))
        .collect();
    Ok(Dataset {
        name: name.to_owned(),
        description,
        passages,
        questions: parsed_questions,
        extraction,
        documents: false,
        files,
        manifest,
    })
}

/// Lowercase hex sha256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads `path` and checks its sha256 against `expected` (skipped when `expected` is empty).
fn read_verified(path: &Path, expected: &str) -> Result<Vec<u8>> {
    let bytes = fs::read(path).map_err(|e| io(path, e))?;
    if !expected.is_empty() {
        let actual = sha256_hex(&bytes);
        if !actual.eq_ignore_ascii_case(expected) {
            return Err(EvalError::Checksum {
                path: path.to_path_buf(),
                expected: expected.to_owned(),
                actual,
            });
        }
    }
    Ok(bytes)
}

fn parse_json<'a, T: Deserialize<'a>>(path: &Path, bytes: &'a [u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| EvalError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A JSON array of records: a syntax error names the line and column, a record of the wrong shape its
/// index (and its `id`, when it has one).
fn parse_records<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<Vec<T>> {
    let values: Vec<serde_json::Value> = parse_json(path, bytes)?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let id = v
                .get("id")
                .and_then(serde_json::Value::as_str)
                .map(|id| format!(" (id {id:?})"))
                .unwrap_or_default();
            serde_json::from_value(v).map_err(|e| EvalError::Parse {
                path: path.to_path_buf(),
                message: format!("record {i}{id}: {e}"),
            })
        })
        .collect()
}

/// Appends the items of `items` not seen before, keeping their order.
fn dedup_in_order(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|item| seen.insert(item.clone()))
        .collect()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Deserialize)]
struct HippoQuestion {
    #[serde(alias = "_id")]
    id: String,
    question: String,
    answer: OneOrMany,
    #[serde(default)]
    answer_aliases: Option<Vec<String>>,
    #[serde(default)]
    paragraphs: Vec<HippoParagraph>,
}

#[derive(Deserialize)]
struct HippoParagraph {
    title: String,
    paragraph_text: String,
    #[serde(default)]
    is_supporting: bool,
}

fn parse_hipporag(
    questions_path: &Path,
    questions_bytes: &[u8],
    corpus_path: &Path,
    corpus_bytes: &[u8],
) -> Result<(Vec<Passage>, Vec<Question>)> {
    let raw_questions: Vec<HippoQuestion> = parse_records(questions_path, questions_bytes)?;
    let passages: Vec<Passage> = parse_records(corpus_path, corpus_bytes)?;
    let corpus: HashSet<String> = passages.iter().map(Passage::content).collect();

    let mut ids = HashSet::new();
    let mut questions = Vec::with_capacity(raw_questions.len());
    for q in raw_questions {
        if !ids.insert(q.id.clone()) {
            return Err(invalid(format!(
                "{}: question id {:?} occurs more than once",
                questions_path.display(),
                q.id
            )));
        }
        let answers = dedup_in_order(
            q.answer
                .into_vec()
                .into_iter()
                .chain(q.answer_aliases.unwrap_or_default()),
        );
        let gold = dedup_in_order(
            q.paragraphs
                .iter()
                .filter(|p| p.is_supporting)
                .map(|p| format!("{}\n{}", p.title, p.paragraph_text)),
        );
        let paragraphs = dedup_in_order(
            q.paragraphs
                .iter()
                .map(|p| format!("{}\n{}", p.title, p.paragraph_text)),
        );
        if let Some(missing) = gold.iter().find(|g| !corpus.contains(*g)) {
            let title = missing.split('\n').next().unwrap_or_default();
            return Err(invalid(format!(
                "question {:?}: gold passage {title:?} is not in the corpus {}",
                q.id,
                corpus_path.display()
            )));
        }
        questions.push(Question {
            id: q.id,
            question: q.question,
            answers,
            gold,
            paragraphs,
        });
    }
    Ok((passages, questions))
}

#[derive(Deserialize)]
struct FixtureFile {
    passages: Vec<FixturePassage>,
    questions: Vec<FixtureQuestion>,
}

#[derive(Deserialize)]
struct FixturePassage {
    title: String,
    text: String,
    #[serde(default)]
    triples: Vec<Vec<String>>,
}

#[derive(Deserialize)]
struct FixtureQuestion {
    id: String,
    question: String,
    answers: Vec<String>,
    supporting: Vec<String>,
}

fn load_fixture(manifest: Manifest) -> Result<Dataset> {
    let path = Path::new(FIXTURE_JSON_PATH);
    let file: FixtureFile = parse_json(path, FIXTURE_JSON.as_bytes())?;

    let mut passages = Vec::with_capacity(file.passages.len());
    let mut extractions = Vec::with_capacity(file.passages.len());
    // Title → content; `None` marks a title that several passages share.
    let mut by_title: HashMap<String, Option<String>> = HashMap::new();
    for p in file.passages {
        let passage = Passage {
            title: p.title,
            text: p.text,
        };
        let mut extraction = Extraction::empty(passage.chunk_id());
        for t in p.triples {
            let [subject, predicate, object] = <[String; 3]>::try_from(t).map_err(|t| {
                invalid(format!(
                    "{FIXTURE_JSON_PATH}: passage {:?}: triple {t:?} does not have 3 elements",
                    passage.title
                ))
            })?;
            extraction
                .triples
                .push(Triple::new(subject, predicate, object));
        }
        by_title
            .entry(passage.title.clone())
            .and_modify(|content| *content = None)
            .or_insert_with(|| Some(passage.content()));
        extractions.push(extraction);
        passages.push(passage);
    }

    let mut ids = HashSet::new();
    let mut questions = Vec::with_capacity(file.questions.len());
    for q in file.questions {
        if !ids.insert(q.id.clone()) {
            return Err(invalid(format!(
                "{FIXTURE_JSON_PATH}: question id {:?} occurs more than once",
                q.id
            )));
        }
        let mut gold = Vec::with_capacity(q.supporting.len());
        for title in &q.supporting {
            match by_title.get(title) {
                Some(Some(content)) => gold.push(content.clone()),
                Some(None) => {
                    return Err(invalid(format!(
                        "{FIXTURE_JSON_PATH}: question {:?}: supporting title {title:?} is shared by several passages",
                        q.id
                    )))
                }
                None => {
                    return Err(invalid(format!(
                        "{FIXTURE_JSON_PATH}: question {:?}: supporting title {title:?} is not a passage title",
                        q.id
                    )))
                }
            }
        }
        questions.push(Question {
            id: q.id,
            question: q.question,
            answers: dedup_in_order(q.answers),
            gold: dedup_in_order(gold),
            paragraphs: Vec::new(),
        });
    }

    Ok(Dataset {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        passages,
        questions,
        extraction: ExtractionSource::Inline(extractions),
        documents: false,
        files: BTreeMap::new(),
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "kgrag-eval-dataset-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// `$KGRAG_DATA_DIR`, resolved against the working directory or else the workspace root (tests run in
    /// the crate's folder, CI gives the path relative to the workspace root). `None` when unset.
    fn test_data_dir() -> Option<PathBuf> {
        let value = std::env::var_os(DATA_DIR_VAR).filter(|v| !v.is_empty())?;
        let dir = PathBuf::from(value);
        if dir.is_relative() && !dir.exists() {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            return Some(root.join(dir));
        }
        Some(dir)
    }

    #[test]
    fn manifests_parse_and_are_listed() {
        assert_eq!(
            available(),
            vec!["musique-100", "kgrag-fixture", "ultradomain-mix"]
        );
        for name in available() {
            let m = manifest(name).unwrap();
            assert_eq!(m.name, name);
            assert!(!m.description.is_empty() && !m.licence.is_empty() && !m.source.is_empty());
        }
        let m = manifest("musique-100").unwrap();
        assert_eq!(m.format, "hipporag");
        assert_eq!(m.dir, "musique-hipporag");
        assert_eq!(
            m.files.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["corpus", "openie", "questions"]
        );
        assert!(m.files.values().all(|f| f.sha256.len() == 64));
        assert_eq!(manifest("kgrag-fixture").unwrap().format, "kgrag-fixture");

        let err = load("nope", Path::new(".")).unwrap_err().to_string();
        assert!(
            err.contains("nope") && err.contains("musique-100") && err.contains("kgrag-fixture"),
            "{err}"
        );
    }

    #[test]
    fn manifest_rejects_unknown_fields() {
        let text = format!("{FIXTURE_MANIFEST}\nextra = 1\n");
        // `extra` lands in [files] as a non-table value, or at top level: either way it is refused.
        assert!(toml::from_str::<Manifest>(&text).is_err());
        let text = FIXTURE_MANIFEST.replace("[files]", "colour = \"red\"\n[files]");
        assert!(toml::from_str::<Manifest>(&text).is_err());
    }

    #[test]
    fn data_dir_rule() {
        assert_eq!(data_dir_from(None), PathBuf::from("datasets"));
        assert_eq!(
            data_dir_from(Some(OsString::new())),
            PathBuf::from("datasets")
        );
        assert_eq!(
            data_dir_from(Some(OsString::from("../shared/datasets"))),
            PathBuf::from("../shared/datasets")
        );
    }

    #[test]
    fn passage_content_and_id() {
        let p = Passage {
            title: "Journal of Mathematical Physics".to_owned(),
            text: "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute of Physics devoted to the publication of papers in mathematical physics. The journal was first published bimonthly beginning in January 1960; it became a monthly publication in 1963. The current editor is Jan Philip Solovej from University of Copenhagen. Its 2018 Impact Factor is 1.355".to_owned(),
        };
        assert!(p
            .content()
            .starts_with("Journal of Mathematical Physics\nThe Journal"));
        assert_eq!(
            p.chunk_id().as_str(),
            "chunk-9f22cba213a2f4d5f0116adf5a6576d7"
        );
    }

    #[test]
    fn musique_from_data_dir() {
        let Some(dir) = test_data_dir() else {
            eprintln!(
                "skipped: set {DATA_DIR_VAR} (e.g. /path/to/datasets) to test loading musique-100"
            );
            return;
        };
        let ds = load("musique-100", &dir).unwrap();
        assert_eq!(ds.name, "musique-100");
        assert_eq!(ds.questions.len(), 100);
        assert_eq!(ds.passages.len(), 1890);
        assert_eq!(
            ds.questions.iter().map(|q| q.gold.len()).sum::<usize>(),
            237
        );
        let first = &ds.questions[0];
        assert_eq!(first.id, "2hop__150763_14904");
        assert_eq!(
            first.answers,
            vec!["G. Stanley Hall".to_owned(), "Stanley Hall".to_owned()]
        );
        assert!(first
            .question
            .contains("Journal of Psychotherapy Integration"));
        assert_eq!(
            ds.passages[0].chunk_id().as_str(),
            "chunk-9f22cba213a2f4d5f0116adf5a6576d7"
        );
        match &ds.extraction {
            ExtractionSource::OpenIeFile(path) => assert!(path.is_file(), "{}", path.display()),
            other => panic!("expected an OpenIE file, got {other:?}"),
        }
        let limited = ds.limit(7);
        assert_eq!(limited.questions.len(), 7);
        assert_eq!(limited.passages.len(), 1890);
    }

    #[test]
    fn musique_missing_files_are_listed() {
        let dir = temp_dir("missing");
        let err = load("musique-100", &dir).unwrap_err();
        assert!(
            matches!(&err, EvalError::MissingFiles { files, .. } if files.len() == 3),
            "{err}"
        );
        let msg = err.to_string();
        for needle in [
            "musique_train.json",
            "musique_train_corpus.json",
            "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
            "musique-hipporag",
            "KGRAG_DATA_DIR",
            "https://github.com/OSU-NLP-Group/HippoRAG",
        ] {
            assert!(msg.contains(needle), "{needle:?} not in {msg}");
        }
        assert!(
            msg.contains(&dir.display().to_string()),
            "full paths: {msg}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn musique_checksum_mismatch_names_file_and_hashes() {
        let dir = temp_dir("checksum");
        let base = dir.join("musique-hipporag");
        fs::create_dir_all(&base).unwrap();
        let m = manifest("musique-100").unwrap();
        for f in m.files.values() {
            fs::write(base.join(&f.path), "[]").unwrap();
        }
        let err = load("musique-100", &dir).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, EvalError::Checksum { .. }), "{msg}");
        assert!(msg.contains("musique_train.json"), "{msg}");
        assert!(msg.contains(&m.files["questions"].sha256), "{msg}");
        assert!(msg.contains(&sha256_hex(b"[]")), "{msg}");
        let _ = fs::remove_dir_all(&dir);
    }

    const QUESTIONS: &str = r#"[
      {"id": "q1", "question": "Who?", "answer": "Ann", "answer_aliases": ["Annie", "Ann"],
       "paragraphs": [
         {"idx": 0, "title": "A", "paragraph_text": "Ann lives here.", "is_supporting": true},
         {"idx": 1, "title": "B", "paragraph_text": "Bob lives there.", "is_supporting": false},
         {"idx": 2, "title": "A", "paragraph_text": "Ann lives here.", "is_supporting": true},
         {"idx": 3, "title": "C", "paragraph_text": "Ann likes C.", "is_supporting": true}
       ]},
      {"id": "q2", "question": "What?", "answer": ["x", "y", "x"],
       "paragraphs": [{"title": "B", "paragraph_text": "Bob lives there.", "is_supporting": true}]}
    ]"#;
    const CORPUS: &str = r#"[
      {"title": "A", "text": "Ann lives here."},
      {"title": "B", "text": "Bob lives there."},
      {"title": "C", "text": "Ann likes C."}
    ]"#;

    #[test]
    fn hipporag_format_loads() {
        let dir = temp_dir("hippo");
        let (q, c, o) = (
            dir.join("q.json"),
            dir.join("c.json"),
            dir.join("openie.json"),
        );
        fs::write(&q, QUESTIONS).unwrap();
        fs::write(&c, CORPUS).unwrap();
        fs::write(&o, "{}").unwrap();
        let ds = load_hipporag("tiny", &q, &c, Some(&o)).unwrap();
        assert_eq!(ds.name, "tiny");
        assert_eq!(ds.passages.len(), 3);
        assert_eq!(
            ds.questions[0].answers,
            vec!["Ann".to_owned(), "Annie".to_owned()]
        );
        assert_eq!(
            ds.questions[0].gold,
            vec![
                "A\nAnn lives here.".to_owned(),
                "C\nAnn likes C.".to_owned()
            ]
        );
        assert_eq!(
            ds.questions[1].answers,
            vec!["x".to_owned(), "y".to_owned()]
        );
        assert_eq!(ds.questions[1].gold, vec!["B\nBob lives there.".to_owned()]);
        assert_eq!(ds.extraction, ExtractionSource::OpenIeFile(o.clone()));
        assert_eq!(
            ds.manifest.files["corpus"].sha256,
            sha256_hex(CORPUS.as_bytes())
        );
        assert_eq!(ds.manifest.files.len(), 3);

        let ds = load_hipporag("tiny", &q, &c, None).unwrap();
        assert_eq!(ds.extraction, ExtractionSource::None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn hipporag_format_errors() {
        let dir = temp_dir("hippo-bad");
        let (q, c) = (dir.join("q.json"), dir.join("c.json"));
        fs::write(&q, QUESTIONS).unwrap();
        // Gold passage C is missing from the corpus.
        fs::write(
            &c,
            r#"[{"title": "A", "text": "Ann lives here."}, {"title": "B", "text": "Bob lives there."}]"#,
        )
        .unwrap();
        let err = load_hipporag("tiny", &q, &c, None).unwrap_err().to_string();
        assert!(err.contains("\"q1\"") && err.contains("\"C\""), "{err}");

        // Bad JSON names the file and the position.
        fs::write(&c, "[\n  {\"title\": \"A\",, }\n]").unwrap();
        let err = load_hipporag("tiny", &q, &c, None).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, EvalError::Parse { .. }), "{msg}");
        assert!(
            msg.contains("c.json") && msg.contains("line 2 column"),
            "{msg}"
        );

        // Missing files are all listed.
        let err = load_hipporag("tiny", &dir.join("nq.json"), &dir.join("nc.json"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nq.json") && err.contains("nc.json"), "{err}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn dataset_folders_load_with_checksums_and_name_bad_records() {
        let dir = temp_dir("folder").join("mydata");
        fs::create_dir_all(&dir).unwrap();
        // No corpus: the error says what a folder holds.
        let err = load_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("_corpus.json"), "{err}");
        fs::write(dir.join("tiny.json"), QUESTIONS).unwrap();
        fs::write(dir.join("tiny_corpus.json"), CORPUS).unwrap();
        let ds = load_dir(&dir).unwrap();
        assert_eq!(ds.name, "mydata");
        assert_eq!(ds.passages.len(), 3);
        assert!(!ds.documents && ds.has_gold_passages() && ds.has_gold_answers());
        assert_eq!(ds.extraction, ExtractionSource::None);
        assert_eq!(
            ds.manifest.files["corpus"].sha256,
            sha256_hex(CORPUS.as_bytes())
        );
        assert_eq!(ds.files["questions"], dir.join("tiny.json"));
        // An OpenIE cache beside them is picked up; two are refused.
        fs::write(dir.join("openie_tiny.json"), "{}").unwrap();
        let ds = load_dir(&dir).unwrap();
        assert_eq!(
            ds.extraction,
            ExtractionSource::OpenIeFile(dir.join("openie_tiny.json"))
        );
        fs::write(dir.join("openie_other.json"), "{}").unwrap();
        let err = load_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("several OpenIE caches"), "{err}");
        fs::remove_file(dir.join("openie_other.json")).unwrap();
        // A record of the wrong shape: the file, the record and the field.
        fs::write(
            dir.join("tiny_corpus.json"),
            r#"[{"title": "A", "text": "Ann lives here."}, {"title": "B"}]"#,
        )
        .unwrap();
        let err = load_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("tiny_corpus.json") && err.contains("record 1") && err.contains("text"),
            "{err}"
        );
        fs::write(dir.join("tiny_corpus.json"), CORPUS).unwrap();
        fs::write(dir.join("tiny.json"), r#"[{"id": "q9", "question": 5}]"#).unwrap();
        let err = load_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("tiny.json") && err.contains("record 0 (id \"q9\")"),
            "{err}"
        );
        // Two corpora are refused.
        fs::write(dir.join("other_corpus.json"), CORPUS).unwrap();
        let err = load_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("several corpora"), "{err}");
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }

    #[test]
    fn question_lines_take_query_input_or_question_and_name_bad_lines() {
        let p = Path::new("q.jsonl");
        let qs = parse_question_lines(
            p,
            b"{\"query\": \"a?\"}\n\n{\"input\": \"b?\", \"answers\": []}\n{\"question\": \"c?\"}\n",
            "mix",
        )
        .unwrap();
        let texts: Vec<&str> = qs.iter().map(|q| q.question.as_str()).collect();
        assert_eq!(texts, ["a?", "b?", "c?"]);
        assert_eq!(qs[2].id, "mix-002");
        assert!(qs.iter().all(|q| q.answers.is_empty() && q.gold.is_empty()));
        let err = parse_question_lines(p, b"{\"query\": \"a\"}\n{\"q\": 1}\n", "mix")
            .unwrap_err()
            .to_string();
        assert!(err.contains("q.jsonl") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn ultradomain_mix_from_data_dir() {
        let Some(data) = test_data_dir() else {
            panic!("{DATA_DIR_VAR} is not set: this test reads ultradomain-mix/ (e.g. {DATA_DIR_VAR}=../shared/datasets)");
        };
        let m = manifest("ultradomain-mix").unwrap();
        assert_eq!(
            m.url_of("corpus").unwrap(),
            "https://raw.githubusercontent.com/hhy-huang/HiRAG/main/eval/datasets/mix/mix_unique_contexts.json"
        );
        assert!(m.url_of("licence").unwrap().ends_with("/LICENSE"));
        let ds = load("ultradomain-mix", &data).unwrap();
        assert!(ds.documents);
        assert_eq!(ds.passages.len(), 61);
        assert_eq!(ds.questions.len(), 130);
        assert!(!ds.has_gold_answers() && !ds.has_gold_passages());
        assert!(ds.passages.iter().all(|p| p.title.is_empty()));
        assert!(ds.files.contains_key("answers-naive-deepseek"));
        assert_eq!(ds.clone().limit_corpus(5).passages.len(), 5);
        // A damaged file is named.
        let dir = temp_dir("mix");
        let base = dir.join("ultradomain-mix");
        fs::create_dir_all(&base).unwrap();
        for f in m.files.values() {
            fs::copy(
                data.join("ultradomain-mix").join(&f.path),
                base.join(&f.path),
            )
            .unwrap();
        }
        fs::write(base.join("mix_unique_contexts.json"), "[\"x\"]").unwrap();
        let err = load("ultradomain-mix", &dir).unwrap_err();
        assert!(
            matches!(&err, EvalError::Checksum { path, .. } if path.ends_with("mix_unique_contexts.json")),
            "{err}"
        );
        fs::remove_file(base.join("LICENSE")).unwrap();
        let msg = load("ultradomain-mix", &dir).unwrap_err().to_string();
        assert!(
            msg.contains("LICENSE") && msg.contains("cargo xtask fetch-data ultradomain-mix"),
            "{msg}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn fixture_loads() {
        let ds = load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
        assert_eq!(ds.name, "kgrag-fixture");
        assert_eq!(ds.questions.len(), 10);
        let contents: HashSet<String> = ds.passages.iter().map(Passage::content).collect();
        for q in &ds.questions {
            assert!(!q.gold.is_empty(), "{}", q.id);
            assert!(!q.answers.is_empty(), "{}", q.id);
            for g in &q.gold {
                assert!(contents.contains(g), "{}: {g:?}", q.id);
            }
        }
        let ExtractionSource::Inline(extractions) = &ds.extraction else {
            panic!("expected inline triples, got {:?}", ds.extraction);
        };
        assert_eq!(extractions.len(), ds.passages.len());
        for (e, p) in extractions.iter().zip(&ds.passages) {
            assert_eq!(e.chunk_id, p.chunk_id());
            assert!(e.entities.is_empty());
        }
        assert!(extractions.iter().any(|e| !e.triples.is_empty()));
    }
}
