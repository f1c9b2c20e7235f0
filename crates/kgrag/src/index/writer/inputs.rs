//! The writer's inputs: documents cut into chunks (with each chunk's pages and section, and the files'
//! originals), the chunks' triples (a dataset's OpenIE cache, else the configured extractor) and their
//! passage vectors.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_graph_store::EmbeddingStore;
use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::{ChunkId, Extraction};

use super::{IndexWriter, Passage};
use crate::config::OpenIeMode;
use crate::documents::SourceDoc;
use crate::index_dir::{DocRecord, FileRecord};
use crate::methods::{self, Env};
use crate::originals;
use crate::progress::Stages;
use crate::{KgragError, Result};

impl IndexWriter {
    pub(super) fn needs_triples(&self, methods: &[String]) -> bool {
        methods::registry()
            .iter()
            .any(|m| methods.iter().any(|x| x == m.name()) && m.needs_triples(&self.env().config))
    }

    /// The triples of `chunks`: from `prefilled` (a dataset's OpenIE cache), else the configured
    /// extractor through the resumable extraction store. The extractions returned leave `prefilled`.
    pub(super) async fn triples_for(
        &self,
        chunks: &[Passage],
        prefilled: &mut HashMap<ChunkId, Extraction>,
    ) -> Result<Vec<Extraction>> {
        let env = self.env();
        let missing: Vec<&Passage> = chunks
            .iter()
            .filter(|(id, _)| !prefilled.contains_key(id))
            .collect();
        if !missing.is_empty() {
            if env.config.openie == OpenIeMode::CacheOnly {
                return Err(KgragError::Config(format!(
                    "{} of {} chunks have no cached OpenIE triples (first: {}); set openie = \"rules\" \
                     (offline), \"llm\" (with a [chat] model) or \"auto\"",
                    missing.len(),
                    chunks.len(),
                    missing[0].0
                )));
            }
            let role = crate::graphs::ExtractorRole::Triples;
            let extractor = crate::graphs::extractor_for(env, role, "hipporag2")?;
            let docs =
                crate::graphs::chunk_passages(missing.iter().copied(), ChunkerConfig::hipporag())?;
            // Each record is cut to what the corpus keeps as its chunk finishes, so the extractor's whole
            // records (descriptions, relations: a copy of each sentence) are never all held at once.
            let found = crate::graphs::extract_chunks(
                env,
                extractor.as_ref(),
                role,
                &docs,
                "triples",
                &corpus_triples,
            )
            .await?;
            for e in found {
                prefilled.entry(e.chunk_id.clone()).or_insert(e);
            }
        }
        // Moved out, not cloned: the caller's map would otherwise hold every extraction a second time
        // for the rest of the build (the corpus keeps these, as `corpus_triples` leaves them).
        Ok(chunks
            .iter()
            .filter_map(|(id, _)| prefilled.remove(id))
            .map(corpus_triples)
            .collect())
    }

    /// `base` with the passages of `fresh` embedded into it (a copy; `base` when nothing is new).
    pub(super) async fn embed_passages(
        &self,
        base: &Arc<EmbeddingStore>,
        fresh: &[Passage],
        stages: &mut Stages,
    ) -> Result<Arc<EmbeddingStore>> {
        if fresh.is_empty() {
            return Ok(base.clone());
        }
        let t = Instant::now();
        let mut store = base.as_ref().clone();
        let bar = stages.bar(fresh.len(), "embed_passages");
        store
            .insert(
                fresh,
                self.env().embedder.as_ref(),
                self.env().config.hipporag.embed_batch,
                |n| bar.inc(n as u64),
            )
            .await?;
        drop(bar);
        stages.record("embed_passages", t.elapsed().as_secs_f64());
        Ok(Arc::new(store))
    }
}

pub(super) fn chunking_name(c: &ChunkerConfig) -> String {
    match c {
        ChunkerConfig::Passage { .. } => "one chunk per document".into(),
        ChunkerConfig::TokenWindow {
            encoding,
            size,
            overlap,
        } => format!("{size}-token windows overlapping by {overlap}, {encoding:?}"),
    }
}

/// What [`chunk_docs`] makes: the documents' records, the chunks not known before (in order), and the
/// originals of their files to keep.
pub(crate) type Chunked = (Vec<DocRecord>, Vec<Passage>, Vec<originals::Pending>);

/// Chunks `docs` into records (with each chunk's pages and section, from the document's source map);
/// returns the records, the chunks not yet in `known`, in order, and the files' originals. Each document
/// is dropped once chunked and each chunk's text moved, so that the corpus is never held twice (as
/// documents and as chunks).
pub(crate) fn chunk_docs(
    env: &Env,
    docs: Vec<SourceDoc>,
    known: &HashSet<ChunkId>,
) -> Result<Chunked> {
    let chunker = Chunker::new(env.config.index.chunking)?;
    let mut records = Vec::with_capacity(docs.len());
    let mut fresh = Vec::new();
    let mut pending = Vec::new();
    let mut seen: HashSet<ChunkId> = known.clone();
    for d in docs {
        let chunks = chunker
            .chunk(&d.document)
            .map_err(|e| KgragError::Input(format!("{}: chunking failed: {e}", d.source)))?;
        let mut ids = Vec::with_capacity(chunks.len());
        let mut locations = Vec::new();
        let map = d.origin.as_ref().and_then(|o| o.map.as_ref());
        for c in chunks {
            if let Some(m) = map {
                let at = m.locate(c.span.byte_start, c.span.byte_end);
                locations.push(crate::index_dir::ChunkLocation {
                    page: at.page,
                    page_end: at.page_end,
                    section: at.section,
                });
            }
            if seen.insert(c.id.clone()) {
                fresh.push((c.id.clone(), Arc::from(c.text)));
            }
            ids.push(c.id);
        }
        // A document without any page or section says nothing per chunk.
        if locations.iter().all(|l| *l == Default::default()) {
            locations.clear();
        }
        let file = d.origin.map(|o| {
            if let Some(original) = o.original {
                pending.push(originals::Pending {
                    digest: o.digest.clone(),
                    ext: originals::extension(&o.format).to_owned(),
                    original,
                });
            }
            FileRecord {
                name: o.file,
                format: o.format,
                digest: o.digest,
                size: o.size,
                unit: o.unit,
                units: o.units,
                kept: false,
            }
        });
        records.push(DocRecord {
            id: d.id,
            doc_id: d.document.id,
            title: d.document.title,
            source: d.source,
            chunks: ids,
            file,
            locations,
        });
    }
    Ok((records, fresh, pending))
}

/// What the corpus keeps of an extraction: what its readers take from it, the triples (HippoRAG 2's
/// graph, HiRAG's `base = "openie_cache"`). The extractor's entities (names, types, descriptions,
/// sources) and described relations (a copy of the sentence each) stay in the extraction store, where
/// HiRAG and LeanRAG read them: the corpus, which every build holds and the index stores, no longer
/// carries them (about 140 MB at 579 windows of 1,200 tokens; the entity list ~1.3 MB per 1,000
/// synthetic passages). HippoRAG 2 makes its phrase nodes from the triples, not from the entity list.
pub(super) fn corpus_triples(mut e: Extraction) -> Extraction {
    e.relations = Vec::new();
    e.entities = Vec::new();
    // Held for the index's life: without the room the extractor's lists grew by.
    e.triples.shrink_to_fit();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_keeps_triples_only() {
        let text = "Ada Lovelace wrote the first program for the Analytical Engine in London. \
                    Charles Babbage designed the Analytical Engine.";
        let chunk = kgrag_types::Chunk {
            id: ChunkId::from_content(text),
            doc_id: kgrag_types::DocId::from_text(text),
            text: text.to_owned(),
            tokens: 20,
            order: 0,
            span: kgrag_types::Span::default(),
        };
        let full = kgrag_openie::RuleExtractor.extract_text(&chunk);
        assert!(
            !full.relations.is_empty() && !full.triples.is_empty() && !full.entities.is_empty()
        );
        let kept = corpus_triples(full.clone());
        assert_eq!(kept.chunk_id, full.chunk_id);
        assert_eq!(kept.triples, full.triples);
        assert_eq!(kept.triples.capacity(), kept.triples.len());
        assert!(kept.relations.is_empty() && kept.entities.is_empty());
        assert_eq!(kept.diagnostics, full.diagnostics);
    }
}
