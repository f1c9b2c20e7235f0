//! UltraDomain as HiRAG ships it: whole documents and questions as JSON lines, without gold answers or
//! passages.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use super::{
    check_present, parse_json, read_verified, Dataset, ExtractionSource, Manifest, Passage,
    Question,
};
use crate::error::{invalid, EvalError, Result};

/// UltraDomain as HiRAG ships it: `corpus` a JSON array of document texts (the de-duplicated `context`
/// fields), `questions` JSON lines whose `query` (HiRAG's result files), `input` (UltraDomain's own files) or
/// `question` is the question. No gold answers or passages. Every file is sha256-checked.
pub(super) fn load_ultradomain(manifest: Manifest, data_dir: &Path) -> Result<Dataset> {
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
