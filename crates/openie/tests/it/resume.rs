//! The runner persists each chunk as it completes: a run that fails part-way and is started again redoes no
//! finished chunk, and ends with the same result as an uninterrupted run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_openie::{run_extraction, ExtractionStore, RuleExtractor, RunnerConfig};
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
