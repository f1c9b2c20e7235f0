//! The bundled multi-hop fixture: passages with their triples, and questions naming their supporting
//! passages by title.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use kgrag_types::{Extraction, Triple};
use serde::Deserialize;

use super::{
    dedup_in_order, parse_json, Dataset, ExtractionSource, Manifest, Passage, Question,
    FIXTURE_JSON, FIXTURE_JSON_PATH,
};
use crate::error::{invalid, Result};

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

pub(super) fn load_fixture(manifest: Manifest) -> Result<Dataset> {
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
