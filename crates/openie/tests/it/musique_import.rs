//! Import of HippoRAG's MuSiQue OpenIE cache (GPT-3.5, 1,890 passages): counts from the HippoRAG 2 spec,
//! chunk-id mapping onto the corpus, and an export/import round trip.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use kgrag_openie::{read_openie_file, write_openie_file};
use kgrag_types::testing::data_file;
use kgrag_types::{ChunkId, Normalisation};

#[test]
fn musique_openie_counts_match_the_spec() {
    let Some(path) =
        data_file("musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json")
    else {
        return;
    };
    let docs = read_openie_file(&path).unwrap();
    assert_eq!(docs.len(), 1890);

    let triples: usize = docs.iter().map(|d| d.extraction.triples.len()).sum();
    assert_eq!(
        triples, 17_234,
        "triples of length 3 (raw, duplicates kept)"
    );
    let skipped: usize = docs
        .iter()
        .map(|d| d.extraction.diagnostics.issues.len())
        .sum();
    assert_eq!(skipped, 185, "items not of length 3, recorded");
    let ner: usize = docs.iter().map(|d| d.extraction.entities.len()).sum();
    assert_eq!(ner, 17_658, "NER entities");

    let mut facts = BTreeSet::new();
    let mut phrases = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    for d in &docs {
        for t in &d.extraction.triples {
            let n = t.normalised(Normalisation::Ascii);
            phrases.insert(n.subject().to_owned());
            phrases.insert(n.object().to_owned());
            pairs.insert((d.extraction.chunk_id.clone(), n.subject().to_owned()));
            pairs.insert((d.extraction.chunk_id.clone(), n.object().to_owned()));
            facts.insert(n);
        }
    }
    assert_eq!(facts.len(), 17_036, "unique normalised facts");
    assert_eq!(
        phrases.len(),
        16_235,
        "unique phrases including the empty one"
    );
    assert_eq!(phrases.iter().filter(|p| !p.is_empty()).count(), 16_234);
    assert_eq!(pairs.len(), 19_755, "passage-phrase pairs");
    assert_eq!(
        docs.iter()
            .filter(|d| d.extraction.triples.is_empty())
            .count(),
        2
    );

    // Every doc is a corpus passage, in corpus order.
    #[derive(serde::Deserialize)]
    struct Entry {
        title: String,
        text: String,
    }
    let Some(corpus_file) = data_file("musique-hipporag/musique_train_corpus.json") else {
        return;
    };
    let corpus: Vec<Entry> = serde_json::from_slice(&std::fs::read(corpus_file).unwrap()).unwrap();
    for (d, e) in docs.iter().zip(&corpus) {
        assert_eq!(
            d.extraction.chunk_id,
            ChunkId::from_content(&format!("{}\n{}", e.title, e.text))
        );
    }
    assert_eq!(
        docs[0].extraction.chunk_id.as_str(),
        "chunk-9f22cba213a2f4d5f0116adf5a6576d7"
    );

    // Export, then import: the same extraction.
    let dir = std::env::temp_dir().join(format!("kgrag-musique-openie-{}", std::process::id()));
    let out = dir.join("openie_results_ner_gpt-3.5-turbo-1106.json");
    write_openie_file(&out, &docs).unwrap();
    let back = read_openie_file(&out).unwrap();
    assert_eq!(back.len(), docs.len());
    for (a, b) in docs.iter().zip(&back) {
        assert_eq!(a.passage, b.passage);
        assert_eq!(a.extraction.chunk_id, b.extraction.chunk_id);
        assert_eq!(a.extraction.triples, b.extraction.triples);
        assert_eq!(a.extraction.entities, b.extraction.entities);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
