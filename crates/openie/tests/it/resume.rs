//! The runner persists each chunk as it completes: a run that fails part-way and is started again redoes no
//! finished chunk, and ends with the same result as an uninterrupted run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_openie::{
    run_extraction, run_extraction_kept, ExtractionStore, RuleExtractor, RunnerConfig,
};
use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::testing::ScriptedExtractor;
use kgrag_types::{Chunk, Document, Extraction, Extractor};

fn corpus() -> Vec<Chunk> {
    let chunker = Chunker::new(ChunkerConfig::hipporag()).unwrap();
    (0..12)
        .flat_map(|i| {
            chunker
                .chunk(&Document::new(format!(
                    "Station {i} of the Northern Line opened in {}. It serves Town {i}.",
                    1900 + i
                )))
                .unwrap()
        })
        .collect()
}

fn scripted(chunks: &[Chunk]) -> Vec<Extraction> {
    chunks
        .iter()
        .map(|c| RuleExtractor.extract_text(c))
        .collect()
}

#[tokio::test]
async fn a_failed_run_resumes_without_redoing_finished_chunks() {
    let dir = std::env::temp_dir().join(format!("kgrag-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let chunks = corpus();
    let config = RunnerConfig { concurrency: 1 };

    // Uninterrupted reference run.
    let reference_store = ExtractionStore::open(dir.join("reference.redb")).unwrap();
    let full = ScriptedExtractor::new(scripted(&chunks));
    let (expected, summary) = run_extraction(&full, &chunks, &reference_store, &config)
        .await
        .unwrap();
    assert_eq!(summary.extracted, 12);

    // A model that dies after 5 chunks.
    let store = ExtractionStore::open(dir.join("run.redb")).unwrap();
    let dying = ScriptedExtractor::new(scripted(&chunks)).fail_after(5);
    let (partial, summary) = run_extraction(&dying, &chunks, &store, &config)
        .await
        .unwrap();
    assert_eq!(partial.len(), 5);
    assert_eq!(summary.failed.len(), 7);
    assert!(
        summary.failed[0].1.contains("told to fail"),
        "{:?}",
        summary.failed[0]
    );
    drop(store);

    // Start again, as a new process would: reopen the store.
    let store = ExtractionStore::open(dir.join("run.redb")).unwrap();
    let healthy = ScriptedExtractor::new(scripted(&chunks));
    assert_eq!(healthy.fingerprint(), dying.fingerprint());
    let (resumed, summary) = run_extraction(&healthy, &chunks, &store, &config)
        .await
        .unwrap();
    assert_eq!(
        (summary.reused, summary.extracted, summary.failed.len()),
        (5, 7, 0)
    );
    let finished: Vec<_> = partial.iter().map(|e| e.chunk_id.clone()).collect();
    assert!(
        healthy.seen().iter().all(|id| !finished.contains(id)),
        "a finished chunk was sent again"
    );
    assert_eq!(healthy.seen().len(), 7);
    assert_eq!(resumed, expected);
    assert_eq!(
        summary.triples,
        expected.iter().map(|e| e.triples.len()).sum::<usize>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kept run hands back each record cut by `keep` while the store and the summary see the whole
/// records, whether a chunk is extracted or read back from the store.
#[tokio::test]
async fn a_kept_run_stores_whole_records_and_returns_what_is_kept() {
    let dir = std::env::temp_dir().join(format!("kgrag-kept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let chunks = corpus();
    let config = RunnerConfig { concurrency: 3 };
    let whole_store = ExtractionStore::open(dir.join("whole.redb")).unwrap();
    let (whole, whole_summary) = run_extraction(&RuleExtractor, &chunks, &whole_store, &config)
        .await
        .unwrap();
    assert!(whole.iter().any(|e| !e.relations.is_empty()));
    let cut = |mut e: Extraction| {
        e.relations.clear();
        e
    };
    let store = ExtractionStore::open(dir.join("kept.redb")).unwrap();
    for pass in ["extracted", "from the store"] {
        let (kept, summary) =
            run_extraction_kept(&RuleExtractor, &chunks, &store, &config, &mut |_| {}, &cut)
                .await
                .unwrap();
        assert_eq!(
            kept,
            whole.iter().cloned().map(cut).collect::<Vec<_>>(),
            "{pass}"
        );
        assert_eq!(summary.relations, whole_summary.relations, "{pass}");
        assert_eq!(summary.triples, whole_summary.triples, "{pass}");
        assert_eq!(summary.entities, whole_summary.entities, "{pass}");
    }
    for (c, e) in chunks.iter().zip(&whole) {
        let stored = store.get(&RuleExtractor.fingerprint(), &c.id).unwrap();
        assert_eq!(stored.as_ref(), Some(e), "the store holds the whole record");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
