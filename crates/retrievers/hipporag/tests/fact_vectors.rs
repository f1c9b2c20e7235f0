//! The fact store's precision (`fact_vectors`): an f16 store holds the f32 store's rows rounded, is saved
//! and read back as f16, an index saved before the key existed (meta format 1) reads back with its
//! f32 facts and ranks as before, and one saved with each chunk's triples (format 2) reads back with
//! the same fact rows. Fact vectors kept on disk rank exactly as those in memory, through a save, a
//! reload, an insert and a delete.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use kgrag_graph_store::{persist, EmbeddingStore};
use kgrag_hipporag::{FilterMode, HippoConfig, HippoIndex, NoProgress, Precision, INDEX_FILES};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::{ChunkId, Triple};

async fn fixture_index(fact_vectors: Precision) -> (HippoIndex, HippoConfig) {
    let config = HippoConfig {
        filter: FilterMode::None,
        fact_vectors,
        ..HippoConfig::default()
    };
    (common::fixture_index(&config).await, config)
}

/// Every question's ranked chunk ids and scores.
async fn rankings(index: HippoIndex, config: &HippoConfig) -> Vec<Vec<(ChunkId, f64)>> {
    common::answers(Arc::new(index), config)
        .await
        .into_iter()
        .map(|(ranking, _)| ranking)
        .collect()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-hippo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn f16_facts_are_the_f32_facts_rounded_and_survive_a_reload() {
    let (full, _) = fixture_index(Precision::F32).await;
    let (half, config) = fixture_index(Precision::F16).await;
    assert_eq!(HippoConfig::default().fact_vectors, Precision::F16);
    assert_eq!(full.facts().precision(), Precision::F32);
    assert_eq!(half.facts().precision(), Precision::F16);
    // Only the fact store differs: the same keys, and the f32 rows rounded.
    assert!(full.facts().keys().eq(half.facts().keys()));
    assert_eq!(
        &full
            .facts()
            .index()
            .unwrap()
            .to_precision(Precision::F16)
            .unwrap(),
        half.facts().index().unwrap()
    );
    assert_eq!(full.phrases(), half.phrases());
    let dir = temp_dir("f16");
    half.save(&dir).unwrap();
    let back = HippoIndex::load(&dir, half.passages().clone()).unwrap();
    assert_eq!(back.facts(), half.facts());
    assert_eq!(back.config().fact_vectors, Precision::F16);
    let before = rankings(half, &config).await;
    assert_eq!(rankings(back, &config).await, before);
    std::fs::remove_dir_all(&dir).ok();
}

/// A value postcard writes as exactly these bytes (a tuple of `u8` has no length prefix).
struct Raw(Vec<u8>);

impl serde::Serialize for Raw {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(self.0.len())?;
        for b in &self.0 {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

/// Meta format 2's parts: the configuration, phrase nodes, fact triples and each chunk's triples.
type MetaTriples = (
    HippoConfig,
    Vec<u32>,
    Vec<Triple>,
    BTreeMap<ChunkId, Vec<Triple>>,
);

/// The meta file of `index` saved in `dir`, with each chunk's triples written out (formats 1 and 2
/// held them; format 3 holds fact rows).
fn saved_meta_with_triples(index: &HippoIndex, dir: &std::path::Path) -> MetaTriples {
    let (config, nodes, facts, rows): (
        HippoConfig,
        Vec<u32>,
        Vec<Triple>,
        BTreeMap<ChunkId, Vec<u32>>,
    ) = persist::load(&dir.join(INDEX_FILES[3]), "hipporag2-index", 3).unwrap();
    let chunks: BTreeMap<ChunkId, Vec<Triple>> = rows
        .into_iter()
        .map(|(c, rows)| {
            let triples = rows
                .iter()
                .map(|&r| facts[r as usize].clone())
                .collect::<Vec<_>>();
            assert_eq!(
                index
                    .chunk_triples(&c)
                    .unwrap()
                    .cloned()
                    .collect::<Vec<_>>(),
                triples
            );
            (c, triples)
        })
        .collect();
    assert_eq!(chunks.len(), index.chunk_facts().len());
    (config, nodes, facts, chunks)
}

#[tokio::test]
async fn an_index_saved_before_fact_vectors_reads_back_with_f32_facts() {
    let (index, config) = fixture_index(Precision::F32).await;
    let dir = temp_dir("legacy");
    index.save(&dir).unwrap();
    let passages = index.passages().clone();
    let meta_path = dir.join(INDEX_FILES[3]);
    // Format 1: the configuration without its last field (`fact_vectors`, one byte: variant 0).
    let (saved_config, nodes, facts, chunks) = saved_meta_with_triples(&index, &dir);
    assert_eq!(saved_config, config);
    let mut bytes = postcard::to_allocvec(&saved_config).unwrap();
    assert_eq!(bytes.pop(), Some(0));
    bytes.extend(postcard::to_allocvec(&(nodes, facts, chunks)).unwrap());
    persist::save(&meta_path, "hipporag2-index", 1, &Raw(bytes)).unwrap();
    assert_eq!(persist::read_frame(&meta_path).unwrap().version(), 1);

    let back = HippoIndex::load(&dir, passages).unwrap();
    assert_eq!(back.config(), &config);
    assert_eq!(back.config().fact_vectors, Precision::F32);
    assert_eq!(back.facts(), index.facts());
    assert_eq!(back.chunk_facts(), index.chunk_facts());
    let before = rankings(index, &config).await;
    assert_eq!(rankings(back, &config).await, before);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn an_index_saved_with_each_chunks_triples_reads_back_with_fact_rows() {
    let (index, config) = fixture_index(Precision::F16).await;
    let dir = temp_dir("triples");
    index.save(&dir).unwrap();
    let passages = index.passages().clone();
    let meta_path = dir.join(INDEX_FILES[3]);
    let meta = saved_meta_with_triples(&index, &dir);
    persist::save(&meta_path, "hipporag2-index", 2, &meta).unwrap();
    let back = HippoIndex::load(&dir, passages.clone()).unwrap();
    assert_eq!(back.chunk_facts(), index.chunk_facts());
    assert_eq!(back.facts(), index.facts());
    let before = rankings(index, &config).await;
    assert_eq!(rankings(back, &config).await, before);

    // A chunk's triple that is no fact of the store: the file is corrupt, and the error names it.
    let (c, mut nodes_facts) = (meta.0, (meta.1, meta.2, meta.3));
    let first = nodes_facts.2.keys().next().cloned().unwrap();
    nodes_facts
        .2
        .get_mut(&first)
        .unwrap()
        .push(Triple::new("no such", "fact", "anywhere"));
    persist::save(
        &meta_path,
        "hipporag2-index",
        2,
        &(c, nodes_facts.0, nodes_facts.1, nodes_facts.2),
    )
    .unwrap();
    let err = HippoIndex::load(&dir, passages.clone())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no such") && err.contains(first.as_str()),
        "{err}"
    );

    // Format 3 naming a fact row past the store.
    let (config, nodes, facts, mut rows): (
        HippoConfig,
        Vec<u32>,
        Vec<Triple>,
        BTreeMap<ChunkId, Vec<u32>>,
    ) = {
        let fresh = fixture_index(Precision::F16).await.0;
        fresh.save(&dir).unwrap();
        persist::load(&meta_path, "hipporag2-index", 3).unwrap()
    };
    rows.get_mut(&first).unwrap().push(facts.len() as u32);
    persist::save(
        &meta_path,
        "hipporag2-index",
        3,
        &(config, nodes, facts, rows),
    )
    .unwrap();
    let err = HippoIndex::load(&dir, passages).unwrap_err().to_string();
    assert!(
        err.contains("fact row") && err.contains(first.as_str()),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn facts_on_disk_rank_as_facts_in_memory_through_save_insert_and_delete() {
    let (_, passages, extractions) = common::fixture();
    let (mem, config) = fixture_index(Precision::F16).await;
    let dir = temp_dir("disk");
    let scratch = dir.join("scratch");
    // Built with its fact vectors on disk from the start: the same index.
    let mut disk = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
    assert!(disk.set_fact_vectors_dir(Some(&scratch)).unwrap());
    let chunks = disk.chunks_from_extractions(&passages, &extractions);
    disk.insert(&chunks, &HashingEmbedder::new(256), &mut NoProgress)
        .await
        .unwrap();
    assert!(disk.facts().rows_are_on_disk());
    assert_eq!(disk.facts(), mem.facts());
    assert_eq!(disk.facts().index().unwrap().value_bytes(), 0);
    let want = rankings(mem.clone(), &config).await;
    assert_eq!(rankings(disk.clone(), &config).await, want);

    // Saved: the rows file is one of the index's files; read back, the rows stay in it.
    let saved = dir.join("index");
    disk.save(&saved).unwrap();
    assert_eq!(disk.files().len(), INDEX_FILES.len() + 1);
    for f in disk.files() {
        assert!(saved.join(&f).is_file(), "{f}");
    }
    assert_eq!(mem.files().len(), INDEX_FILES.len());
    let back = HippoIndex::load(&saved, disk.passages().clone()).unwrap();
    assert!(back.facts().rows_are_on_disk());
    assert_eq!(rankings(back.clone(), &config).await, want);

    // Delete then re-insert a passage's chunk, on disk and in memory: the same index and rankings.
    let gone = vec![passages[3].0.clone()];
    let (mut d2, mut m2) = (back.clone(), mem.clone());
    d2.set_fact_vectors_dir(Some(&scratch)).unwrap();
    d2.delete(&gone).unwrap();
    m2.delete(&gone).unwrap();
    assert_eq!(d2.facts(), m2.facts());
    assert_eq!(d2.chunk_facts(), m2.chunk_facts());
    let again = d2.chunks_from_extractions(&passages[3..4], &extractions);
    let e = HashingEmbedder::new(256);
    d2.insert(&again, &e, &mut NoProgress).await.unwrap();
    m2.insert(&again, &e, &mut NoProgress).await.unwrap();
    assert!(d2.facts().rows_are_on_disk());
    assert_eq!(d2.facts(), m2.facts());
    assert_eq!(rankings(d2, &config).await, rankings(m2, &config).await);
    // The saved index was not touched by the changes of its copy.
    let reread = HippoIndex::load(&saved, disk.passages().clone()).unwrap();
    assert_eq!(reread.facts(), mem.facts());

    // Back into memory: the same facts, saved without a rows file.
    let mut held = back;
    assert!(!held.set_fact_vectors_dir(None).unwrap());
    assert!(!held.facts().rows_are_on_disk());
    assert_eq!(held.facts(), mem.facts());
    // An f32 fact store stays in memory.
    let (mut full, _) = fixture_index(Precision::F32).await;
    assert!(!full.set_fact_vectors_dir(Some(&scratch)).unwrap());
    assert!(!full.facts().rows_are_on_disk());
    std::fs::remove_dir_all(&dir).ok();
}
