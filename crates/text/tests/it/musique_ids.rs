//! Chunk ids of HippoRAG's MuSiQue sample: every passage's id is `chunk-` + md5 of `title + "\n" + text`, and
//! the passages stored in the reference OpenIE cache are exactly those strings.
//!
//! Needs `musique-hipporag/` under `KGRAG_DATA_DIR` (default: `datasets/` of the workspace); `cargo xtask test`
//! sets it (CI points it at its copy of the datasets).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::testing::data_file;
use kgrag_types::{json::replace_non_finite_literals, md5_hex, ChunkId, Document};
use serde::Deserialize;

#[derive(Deserialize)]
struct CorpusEntry {
    title: String,
    text: String,
}

#[derive(Deserialize)]
struct OpenieFile {
    docs: Vec<OpenieDoc>,
}

#[derive(Deserialize)]
struct OpenieDoc {
    passage: String,
}

#[test]
fn musique_passage_ids_match_reference_rule() {
    let (Some(corpus_file), Some(openie_file)) = (
        data_file("musique-hipporag/musique_train_corpus.json"),
        data_file("musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"),
    ) else {
        return;
    };
    let corpus: Vec<CorpusEntry> =
        serde_json::from_slice(&std::fs::read(corpus_file).unwrap()).unwrap();
    assert_eq!(corpus.len(), 1890);

    let chunker = Chunker::new(ChunkerConfig::hipporag()).unwrap();
    let mut ids = Vec::new();
    for entry in &corpus {
        let doc = Document::passage(entry.title.clone(), &entry.text);
        let chunks = chunker.chunk(&doc).unwrap();
        assert_eq!(chunks.len(), 1, "passage {:?}", entry.title);
        let chunk = &chunks[0];
        let joined = format!("{}\n{}", entry.title, entry.text);
        assert_eq!(chunk.text, joined);
        assert_eq!(
            chunk.id.as_str(),
            format!("chunk-{}", md5_hex(joined.as_bytes()))
        );
        ids.push(chunk.id.clone());
    }
    assert_eq!(ids[0].as_str(), "chunk-9f22cba213a2f4d5f0116adf5a6576d7");
    let unique: BTreeSet<&ChunkId> = ids.iter().collect();
    assert_eq!(unique.len(), 1890, "passage ids must be unique");

    let raw = std::fs::read_to_string(openie_file).unwrap();
    let openie: OpenieFile = serde_json::from_str(&replace_non_finite_literals(&raw)).unwrap();
    assert_eq!(openie.docs.len(), 1890);
    for (i, (doc, id)) in openie.docs.iter().zip(&ids).enumerate() {
        assert_eq!(&ChunkId::from_content(&doc.passage), id, "OpenIE doc {i}");
    }
}
