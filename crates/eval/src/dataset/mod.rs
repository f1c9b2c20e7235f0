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

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use kgrag_types::{ChunkId, Extraction};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{invalid, io, EvalError, Result};

mod fixture;
mod hipporag;
mod ultradomain;

use fixture::load_fixture;
use hipporag::load_manifest_hipporag;
pub use hipporag::{load_dir, load_hipporag};
use ultradomain::load_ultradomain;
pub use ultradomain::parse_question_lines;

/// The environment variable naming the folder that holds reference data.
pub const DATA_DIR_VAR: &str = "KGRAG_DATA_DIR";

/// The data folder used when [`DATA_DIR_VAR`] is unset or empty.
pub const DEFAULT_DATA_DIR: &str = "datasets";

const MUSIQUE_100_MANIFEST: &str = include_str!("../../datasets/musique-100.toml");
const FIXTURE_MANIFEST: &str = include_str!("../../datasets/kgrag-fixture/manifest.toml");
const FIXTURE_JSON: &str = include_str!("../../datasets/kgrag-fixture/fixture.json");
const FIXTURE_JSON_PATH: &str = "datasets/kgrag-fixture/fixture.json (bundled)";
const ULTRADOMAIN_MIX_MANIFEST: &str = include_str!("../../datasets/ultradomain-mix.toml");

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

    /// The data folder holding `relative` (a file of a dataset's folder), else `None` after one line saying
    /// what is missing (a failure under `KGRAG_REQUIRE_DATA`).
    fn test_data_dir(relative: &str) -> Option<PathBuf> {
        let file = kgrag_types::testing::data_file(relative)?;
        file.parent()?.parent().map(Path::to_path_buf)
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
        let Some(dir) = test_data_dir("musique-hipporag/musique_train_corpus.json") else {
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
        let Some(data) = test_data_dir("ultradomain-mix/mix_unique_contexts.json") else {
            return;
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
