//! HippoRAG's OpenIE cache files (`openie_results_ner_<model>.json`): read and write (spec `hipporag2.md` §4.5).
//!
//! Layout: `{"docs": [{"idx", "passage", "extracted_entities", "extracted_triples"}], "avg_ent_chars",
//! "avg_ent_words"}`. On reading, the chunk id is recomputed as `chunk-` + md5 of `passage` (any `idx` is
//! ignored), the bare `NaN`/`Infinity` tokens Python writes are accepted, and triples stored as strings (a
//! Python or JSON list literal) are parsed. Triples are kept raw (not normalised); items that are not lists of
//! exactly three elements are dropped and recorded in the extraction's diagnostics, as are exact duplicates.

use std::io::Write;
use std::path::Path;

use kgrag_types::{
    json::replace_non_finite_literals, ChunkId, Entity, Extraction, IssueSeverity, ParseIssue,
    Triple,
};
use serde_json::{json, Value};

use crate::lenient::parse_value;
use crate::{OpenIeError, Result};

/// One document of an OpenIE file: the passage and what was extracted from it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenIeDoc {
    /// The passage text (`title + "\n" + text` for the benchmarks).
    pub passage: String,
    /// The extraction, keyed by `chunk-` + md5 of the passage.
    pub extraction: Extraction,
}

fn bad(path: &Path, message: impl Into<String>) -> OpenIeError {
    OpenIeError::BadFile {
        path: path.display().to_string(),
        message: message.into(),
    }
}

fn as_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".to_owned(),
        other => other.to_string(),
    }
}

/// Reads an OpenIE file.
pub fn read_openie_file(path: &Path) -> Result<Vec<OpenIeDoc>> {
    let raw = std::fs::read_to_string(path).map_err(|e| bad(path, e.to_string()))?;
    // Editors on Windows start UTF-8 files with a byte-order mark; JSON has none.
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(&raw);
    let value: Value = serde_json::from_str(&replace_non_finite_literals(raw))
        .map_err(|e| bad(path, format!("not JSON: {e}")))?;
    let docs = value
        .get("docs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(path, "no \"docs\" list"))?;
    docs.iter()
        .enumerate()
        .map(|(i, doc)| read_doc(doc).map_err(|m| bad(path, format!("docs[{i}]: {m}"))))
        .collect()
}

fn read_doc(doc: &Value) -> std::result::Result<OpenIeDoc, String> {
    let passage = doc
        .get("passage")
        .and_then(Value::as_str)
        .ok_or("no \"passage\" string")?
        .to_owned();
    let chunk_id = ChunkId::from_content(&passage);
    let mut extraction = Extraction::empty(chunk_id.clone());
    let sources = || [chunk_id.clone()].into_iter().collect();
    if let Some(entities) = doc.get("extracted_entities").and_then(Value::as_array) {
        extraction.entities = entities
            .iter()
            .map(|e| Entity {
                name: as_string(e),
                source_chunks: sources(),
                ..Entity::default()
            })
            .collect();
    }
    let triples_value = match doc.get("extracted_triples") {
        Some(Value::String(s)) => {
            parse_value(s).ok_or("\"extracted_triples\" is a string that is not a list")?
        }
        Some(v) => v.clone(),
        None => Value::Array(Vec::new()),
    };
    let items = triples_value
        .as_array()
        .ok_or("\"extracted_triples\" is not a list")?;
    for item in items {
        let parsed = match item {
            Value::String(s) => parse_value(s).unwrap_or(Value::Null),
            other => other.clone(),
        };
        match parsed.as_array() {
            Some(parts) if parts.len() == 3 => extraction.triples.push(Triple::new(
                as_string(&parts[0]),
                as_string(&parts[1]),
                as_string(&parts[2]),
            )),
            _ => extraction.diagnostics.issues.push(ParseIssue {
                stage: "triples".into(),
                severity: IssueSeverity::Skipped,
                message: "not a list of exactly three elements".into(),
                excerpt: item.to_string(),
            }),
        }
    }
    Ok(OpenIeDoc {
        passage,
        extraction,
    })
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Writes an OpenIE file in the reference layout, atomically (temporary file, fsync, rename).
pub fn write_openie_file(path: &Path, docs: &[OpenIeDoc]) -> Result<()> {
    let names: Vec<&str> = docs
        .iter()
        .flat_map(|d| d.extraction.entities.iter().map(|e| e.name.as_str()))
        .collect();
    let (chars, words) = if names.is_empty() {
        (0.0, 0.0)
    } else {
        let n = names.len() as f64;
        (
            names.iter().map(|s| s.chars().count()).sum::<usize>() as f64 / n,
            names
                .iter()
                .map(|s| s.split_whitespace().count())
                .sum::<usize>() as f64
                / n,
        )
    };
    let docs_json: Vec<Value> = docs
        .iter()
        .map(|d| {
            json!({
                "idx": d.extraction.chunk_id.as_str(),
                "passage": d.passage,
                "extracted_entities": d.extraction.entities.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
                "extracted_triples": d.extraction.triples.iter()
                    .map(|t| [t.subject(), t.predicate(), t.object()])
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let body =
        json!({"docs": docs_json, "avg_ent_chars": round4(chars), "avg_ent_words": round4(words)});
    let bytes = serde_json::to_vec(&body).map_err(|e| bad(path, e.to_string()))?;
    write_atomic(path, &bytes)
}

/// Writes `bytes` to `path` through a temporary file in the same folder, fsynced, then renamed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| bad(path, e.to_string()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "openie.json".to_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| bad(path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_layouts_and_python_tokens() {
        let dir = std::env::temp_dir().join(format!("kgrag-openie-interop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("openie.json");
        std::fs::write(
            &path,
            r#"{"docs": [
                {"idx": "stale", "passage": "P1", "extracted_entities": ["A", "B"],
                 "extracted_triples": [["A", "r", "B"], ["A", "r"], ["A", "r", "B"], [1962, "x", null]]},
                {"passage": "P2", "extracted_entities": [], "extracted_triples": "[('C', 'r', 'D')]"}
            ], "avg_ent_chars": NaN, "avg_ent_words": NaN}"#,
        )
        .unwrap();
        let docs = read_openie_file(&path).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].extraction.chunk_id, ChunkId::from_content("P1"));
        assert_eq!(
            docs[0].extraction.triples,
            vec![
                Triple::new("A", "r", "B"),
                Triple::new("A", "r", "B"),
                Triple::new("1962", "x", "None")
            ]
        );
        assert_eq!(
            docs[0].extraction.diagnostics.count(IssueSeverity::Skipped),
            1
        );
        assert_eq!(docs[1].extraction.triples, vec![Triple::new("C", "r", "D")]);

        let out = dir.join("out/again.json");
        write_openie_file(&out, &docs).unwrap();
        let back = read_openie_file(&out).unwrap();
        for (a, b) in docs.iter().zip(&back) {
            assert_eq!(a.passage, b.passage);
            assert_eq!(a.extraction.triples, b.extraction.triples);
            assert_eq!(a.extraction.entities, b.extraction.entities);
        }
        let written: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(written["avg_ent_chars"], 1.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn broken_files_name_the_file_and_place() {
        let dir = std::env::temp_dir().join(format!("kgrag-openie-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.json");
        std::fs::write(&path, r#"{"docs": [{"passage": "ok"}, {"nope": 1}]}"#).unwrap();
        let err = read_openie_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("bad.json") && err.contains("docs[1]: no \"passage\" string"),
            "{err}"
        );
        std::fs::write(&path, "{truncated").unwrap();
        assert!(read_openie_file(&path)
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
