//! The extraction runner: extracts a corpus with bounded concurrency and progress reports, persisting each
//! chunk's result the moment it completes, so a run killed at any point and started again redoes no finished
//! chunk and loses none.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use kgrag_types::{Chunk, ChunkId, Extraction, Extractor, IssueSeverity};
use redb::{Database, ReadableDatabase, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::{OpenIeError, Result};

const EXTRACTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("extractions_v1");

/// Finished extractions in a redb file, keyed by extractor fingerprint and chunk id.
#[derive(Clone)]
pub struct ExtractionStore {
    db: Arc<Database>,
    path: PathBuf,
}

impl std::fmt::Debug for ExtractionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtractionStore")
            .field("path", &self.path)
            .finish()
    }
}

/// The store's own page cache. redb's default (1 GiB) keeps every page a build writes in memory until it
/// is full — the extractions of a large corpus are written once and read once, so that was resident memory
/// for nothing; pages it drops are read back through the operating system's file cache.
const STORE_CACHE_BYTES: usize = 16 << 20;

fn key(fingerprint: &str, chunk: &ChunkId) -> String {
    format!("{fingerprint}\u{1f}{chunk}")
}

impl ExtractionStore {
    /// Opens (or creates) the store file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let err = |e: &dyn std::fmt::Display| OpenIeError::Store {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| err(&e))?;
        }
        let db = Database::builder()
            .set_cache_size(STORE_CACHE_BYTES)
            .create(&path)
            .map_err(|e| err(&e))?;
        let txn = db.begin_write().map_err(|e| err(&e))?;
        txn.open_table(EXTRACTIONS).map_err(|e| err(&e))?;
        txn.commit().map_err(|e| err(&e))?;
        Ok(Self {
            db: Arc::new(db),
            path,
        })
    }

    fn err(&self, e: impl std::fmt::Display) -> OpenIeError {
        OpenIeError::Store {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// A stored extraction; an entry that no longer parses counts as missing.
    pub fn get(&self, fingerprint: &str, chunk: &ChunkId) -> Result<Option<Extraction>> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(EXTRACTIONS).map_err(|e| self.err(e))?;
        let value = table
            .get(key(fingerprint, chunk).as_str())
            .map_err(|e| self.err(e))?;
        Ok(value.and_then(|v| serde_json::from_slice(v.value()).ok()))
    }

    /// Number of stored extractions (all extractors).
    pub fn len(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(EXTRACTIONS).map_err(|e| self.err(e))?;
        table.len().map_err(|e| self.err(e))
    }

    /// Whether the store holds no extraction.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Stores many extractions durably, in one transaction (a cache filled from elsewhere).
    pub fn put_many(&self, fingerprint: &str, extractions: &[Extraction]) -> Result<()> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut table = txn.open_table(EXTRACTIONS).map_err(|e| self.err(e))?;
            for extraction in extractions {
                let bytes = serde_json::to_vec(extraction).map_err(|e| self.err(e))?;
                table
                    .insert(
                        key(fingerprint, &extraction.chunk_id).as_str(),
                        bytes.as_slice(),
                    )
                    .map_err(|e| self.err(e))?;
            }
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Stores one extraction durably.
    pub fn put(&self, fingerprint: &str, extraction: &Extraction) -> Result<()> {
        self.put_many(fingerprint, std::slice::from_ref(extraction))
    }
}

/// What a run did and cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Chunks asked for.
    pub chunks: usize,
    /// Chunks whose extraction was already stored.
    pub reused: usize,
    /// Chunks extracted in this run.
    pub extracted: usize,
    /// Chunks that failed (not stored; a rerun retries them), with the error.
    pub failed: Vec<(ChunkId, String)>,
    /// Entities over all returned extractions.
    pub entities: usize,
    /// Relations over all returned extractions.
    pub relations: usize,
    /// Triples over all returned extractions.
    pub triples: usize,
    /// Parse problems (skipped, repaired or failed records) over all returned extractions.
    pub parse_issues: usize,
    /// Of which a stage produced nothing usable.
    pub parse_failures: usize,
    /// Model calls made in this run.
    pub llm_calls: u64,
    /// Prompt tokens of this run.
    pub prompt_tokens: u64,
    /// Completion tokens of this run.
    pub completion_tokens: u64,
}

/// Runner settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfig {
    /// Chunks extracted at once.
    pub concurrency: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self { concurrency: 8 }
    }
}

/// How far a run is, as [`run_extraction_with`] reports it after each chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunProgress {
    /// Chunks to extract in this run (those not in the store).
    pub total: usize,
    /// Chunks finished so far (extracted or failed).
    pub done: usize,
    /// Chunks failed so far.
    pub failed: usize,
    /// Model calls so far.
    pub llm_calls: u64,
}

/// Extracts `chunks`, reusing stored results; returns the extractions in chunk order (failed chunks left
/// out) and a summary. Failures of single chunks do not stop the run: they are counted and reported.
pub async fn run_extraction(
    extractor: &dyn Extractor,
    chunks: &[Chunk],
    store: &ExtractionStore,
    config: &RunnerConfig,
) -> Result<(Vec<Extraction>, RunSummary)> {
    run_extraction_with(extractor, chunks, store, config, &mut |_| {}).await
}

/// [`run_extraction`] that tells `progress` how far it is: once before the first chunk (`done` 0) and after
/// every chunk.
pub async fn run_extraction_with(
    extractor: &dyn Extractor,
    chunks: &[Chunk],
    store: &ExtractionStore,
    config: &RunnerConfig,
    progress: &mut (dyn FnMut(RunProgress) + Send),
) -> Result<(Vec<Extraction>, RunSummary)> {
    run_extraction_kept(extractor, chunks, store, config, progress, &|e| e).await
}

/// [`run_extraction_with`] that hands back `keep(extraction)` of each chunk instead of the whole record,
/// applied as each chunk is stored (or read from the store): a caller that keeps part of each record
/// (triples and names, say) never holds every whole record at once. The store and the summary's counts
/// see the whole records.
pub async fn run_extraction_kept(
    extractor: &dyn Extractor,
    chunks: &[Chunk],
    store: &ExtractionStore,
    config: &RunnerConfig,
    progress: &mut (dyn FnMut(RunProgress) + Send),
    keep: &(dyn Fn(Extraction) -> Extraction + Sync),
) -> Result<(Vec<Extraction>, RunSummary)> {
    let fingerprint = extractor.fingerprint();
    let mut results: Vec<Option<Extraction>> = vec![None; chunks.len()];
    let mut summary = RunSummary {
        chunks: chunks.len(),
        ..RunSummary::default()
    };
    let count = |summary: &mut RunSummary, e: &Extraction| {
        summary.entities += e.entities.len();
        summary.relations += e.relations.len();
        summary.triples += e.triples.len();
        summary.parse_issues += e.diagnostics.issues.len();
        summary.parse_failures += e.diagnostics.count(IssueSeverity::Failed);
    };
    let mut todo = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        match store.get(&fingerprint, &chunk.id)? {
            Some(done) => {
                count(&mut summary, &done);
                results[i] = Some(keep(done));
                summary.reused += 1;
            }
            None => todo.push(i),
        }
    }
    let mut state = RunProgress {
        total: todo.len(),
        ..RunProgress::default()
    };
    progress(state);
    let mut pending = stream::iter(todo.into_iter().map(|i| {
        let chunk = &chunks[i];
        async move { (i, extractor.extract(chunk).await) }
    }))
    .buffer_unordered(config.concurrency.max(1));
    while let Some((i, outcome)) = pending.next().await {
        match outcome {
            Ok(extraction) => {
                store.put(&fingerprint, &extraction)?;
                summary.extracted += 1;
                summary.llm_calls += extraction.diagnostics.llm_calls;
                summary.prompt_tokens += extraction.diagnostics.prompt_tokens;
                summary.completion_tokens += extraction.diagnostics.completion_tokens;
                count(&mut summary, &extraction);
                results[i] = Some(keep(extraction));
            }
            Err(e) => summary.failed.push((chunks[i].id.clone(), e.to_string())),
        }
        state.done += 1;
        state.failed = summary.failed.len();
        state.llm_calls = summary.llm_calls;
        progress(state);
    }
    let extractions: Vec<Extraction> = results.into_iter().flatten().collect();
    summary.failed.sort();
    Ok((extractions, summary))
}
