//! Datasets in HippoRAG's format: a folder without a manifest, a manifest's checksummed files, or files
//! given one by one, and the parsing of its questions and corpus.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    check_present, dedup_in_order, parse_records, read_verified, sha256_hex, Dataset,
    ExtractionSource, Manifest, ManifestFile, Passage, Question,
};
use crate::error::{invalid, io, EvalError, Result};

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

pub(super) fn load_manifest_hipporag(manifest: Manifest, data_dir: &Path) -> Result<Dataset> {
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
