//! The graph methods' indexes, built once and shared: HiRAG's (its five modes share one) and LeanRAG's,
//! whose base graph G0 is HiRAG's base layer (`[leanrag] g0 = "hirag"`: HiRAG's chunks, extraction, merge
//! and description summaries are made once for both) or LeanRAG's own (`g0 = "native"`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use kgrag_hirag::{BaseSource, ExtractionMode, HiragIndex};
use kgrag_leanrag::{BaseGraph, G0Source, LeanragIndex};
use kgrag_text::{Chunker, ChunkerConfig, Encoding, ExtractiveSummarizer};
use kgrag_types::{
    ChatModel, Chunk, ChunkId, Document, Embedder, Entity, Extraction, Extractor, Relation,
};

use crate::bench::extract_chunks;
use crate::config::Config;
use crate::{KgragError, Result};

/// What the graph indexes are built from.
pub struct GraphInputs<'a> {
    /// The passages (chunk id of the whole passage, text), de-duplicated.
    pub passages: &'a [(ChunkId, String)],
    /// The passages' OpenIE triples (for `[hirag] base = "openie_cache"`).
    pub extractions: &'a [Extraction],
    /// The configuration.
    pub config: &'a Config,
    /// The shared embedder.
    pub embedder: Arc<dyn Embedder>,
    /// The chat model, if any.
    pub chat: Option<Arc<dyn ChatModel>>,
    /// An extractor to use instead of the configured one (tests count its calls).
    pub extractor: Option<Arc<dyn Extractor>>,
    /// Draw progress bars.
    pub progress: bool,
}

/// The built indexes, with stage times and notes for the report.
#[derive(Default)]
pub struct GraphIndexes {
    /// HiRAG's index, when a HiRAG mode was asked for.
    pub hirag: Option<HiragIndex>,
    /// LeanRAG's index, when `leanrag` was asked for.
    pub leanrag: Option<LeanragIndex>,
    /// Seconds per stage.
    pub stages: Vec<(String, f64)>,
    /// Notes for the report.
    pub notes: Vec<String>,
}

/// The chunks of every passage (each passage a document), in passage order.
pub(crate) fn chunk_passages<'a>(
    passages: impl IntoIterator<Item = &'a (ChunkId, String)>,
    config: ChunkerConfig,
) -> Result<Vec<Chunk>> {
    let chunker = Chunker::new(config)?;
    let mut chunks = Vec::new();
    for (_, text) in passages {
        chunks.extend(chunker.chunk(&Document::new(text.clone()))?);
    }
    Ok(chunks)
}

/// Extracts `chunks` in the entity–relation form: with the test's extractor if one is given, else the LLM
/// extractor (HiRAG's entity types and gleaning) with a chat model, else the rule extractor (with a note when
/// the LLM was asked for).
async fn extract(
    inputs: &GraphInputs<'_>,
    chunks: &[Chunk],
    mode: ExtractionMode,
    method: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<Extraction>> {
    let hc = &inputs.config.hirag;
    let extractor: Arc<dyn Extractor> = match (&inputs.extractor, mode, &inputs.chat) {
        (Some(e), _, _) => e.clone(),
        (None, ExtractionMode::Llm, Some(chat)) => Arc::new(kgrag_openie::GraphRagExtractor::new(
            chat.clone(),
            kgrag_openie::GraphRagConfig {
                entity_types: hc.entity_types.clone(),
                max_gleaning: hc.max_gleaning,
                gleaning: hc.gleaning,
                ..kgrag_openie::GraphRagConfig::default()
            },
        )),
        (None, ExtractionMode::Llm, None) => {
            notes.push(format!(
                "{method}: no [chat] model configured, so extraction = \"rules\" (the offline kit)"
            ));
            Arc::new(kgrag_openie::RuleExtractor)
        }
        (None, ExtractionMode::Rules, _) => Arc::new(kgrag_openie::RuleExtractor),
    };
    extract_chunks(
        extractor.as_ref(),
        chunks,
        inputs.config,
        inputs.progress,
        notes,
        "entities",
    )
    .await
}

/// G0 from HiRAG's index: its base-layer nodes and the edges among them (spec leanrag §4.1).
fn g0_from_hirag(index: &HiragIndex) -> Result<BaseGraph> {
    let g = index.graph();
    let chunk_id = |c: u32| index.chunks().get(c as usize).map(|r| r.id.clone());
    let entities: Vec<Entity> = g
        .nodes()
        .iter()
        .filter(|n| n.layer == 0)
        .map(|n| Entity {
            name: n.name.clone(),
            entity_type: n.entity_type.clone(),
            description: n.description.clone(),
            source_chunks: n.sources.iter().filter_map(|&c| chunk_id(c)).collect(),
        })
        .collect();
    let relations: Vec<Relation> = g
        .edges()
        .iter()
        .filter_map(|e| {
            let (a, b) = (g.node(e.a)?, g.node(e.b)?);
            (a.layer == 0 && b.layer == 0).then(|| Relation {
                source: a.name.clone(),
                target: b.name.clone(),
                keywords: String::new(),
                description: e.description.clone(),
                weight: 1.0,
                source_chunks: e.sources.iter().filter_map(|&c| chunk_id(c)).collect(),
            })
        })
        .collect();
    let chunks = index
        .chunks()
        .iter()
        .map(|c| (c.id.clone(), c.content.clone()))
        .collect();
    Ok(BaseGraph::from_records(&entities, &relations, chunks)?)
}

/// Builds the indexes asked for. See the module docs.
pub async fn build_graph_indexes(
    inputs: GraphInputs<'_>,
    want_hirag: bool,
    want_leanrag: bool,
) -> Result<GraphIndexes> {
    let mut out = GraphIndexes::default();
    let config = inputs.config;
    let hc = &config.hirag;
    let lc = &config.leanrag;
    let needs_hirag_inputs = want_hirag || (want_leanrag && lc.g0 == G0Source::Hirag);
    let hirag_models = kgrag_hirag::Models {
        embedder: inputs.embedder.clone(),
        chat: inputs.chat.clone(),
        cheap_chat: None,
    };
    let mut hirag_inputs = None;
    if needs_hirag_inputs {
        let t = Instant::now();
        let pair = match hc.base {
            BaseSource::OpenieCache => {
                let chunks = chunk_passages(inputs.passages, ChunkerConfig::hipporag())?;
                let triples: Vec<(ChunkId, Vec<kgrag_types::Triple>)> = inputs
                    .extractions
                    .iter()
                    .map(|e| (e.chunk_id.clone(), e.triples.clone()))
                    .collect();
                (chunks, kgrag_hirag::openie_extractions(&triples))
            }
            BaseSource::Extract => {
                let chunks = chunk_passages(
                    inputs.passages,
                    ChunkerConfig::TokenWindow {
                        encoding: Encoding::O200kBase,
                        size: hc.chunk_token_size,
                        overlap: hc.chunk_overlap,
                    },
                )?;
                let found =
                    extract(&inputs, &chunks, hc.extraction, "hirag", &mut out.notes).await?;
                (chunks, found)
            }
        };
        out.stages
            .push(("hirag_extraction".into(), t.elapsed().as_secs_f64()));
        hirag_inputs = Some(pair);
    }

    if want_hirag {
        if let Some((chunks, extractions)) = &hirag_inputs {
            let reports_file = config.cache_dir.join("hirag-reports.json");
            let previous: HashMap<String, kgrag_hirag::CommunityReport> =
                match std::fs::read(&reports_file) {
                    Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                        out.notes.push(format!(
                            "hirag: {} could not be read ({e}); every community report is written again",
                            reports_file.display()
                        ));
                        HashMap::new()
                    }),
                    Err(_) => HashMap::new(),
                };
            let index =
                HiragIndex::build(chunks, extractions, &hirag_models, hc, &previous).await?;
            out.stages
                .extend(index.stats().secs.iter().map(|(k, v)| (k.clone(), *v)));
            // Reports are keyed by their input's hash: keep the earlier ones too (another dataset or
            // corpus cut in the same cache folder reuses its own).
            let mut keep = previous;
            keep.extend(index.reports_by_hash());
            let keep: std::collections::BTreeMap<_, _> = keep.into_iter().collect();
            let bytes = serde_json::to_vec(&keep)
                .map_err(|e| KgragError::Config(format!("serialising HiRAG reports: {e}")))?;
            kgrag_graph_store::persist::write_atomic(&reports_file, &bytes)?;
            let s = index.stats();
            eprintln!(
                "kgrag: hirag graph: {} chunks, nodes per layer {:?}, {} relations, {} embedded entities, \
                 communities per level {:?}, reports {} written / {} reused {:?}",
                s.chunks,
                s.entities_per_layer,
                s.relations,
                s.embedded_entities,
                s.communities_per_level,
                s.reports_written,
                s.reports_reused,
                s.report_outcomes
            );
            out.hirag = Some(index);
        }
    }

    if want_leanrag {
        let t = Instant::now();
        let g0 = match lc.g0 {
            G0Source::Hirag => match (&out.hirag, &hirag_inputs) {
                (Some(index), _) => g0_from_hirag(index)?,
                (None, Some((chunks, extractions))) => {
                    let merged =
                        kgrag_hirag::base_records(chunks, extractions, &hirag_models, hc).await?;
                    let texts = chunks
                        .iter()
                        .map(|c| (c.id.clone(), c.text.clone()))
                        .collect();
                    BaseGraph::from_records(&merged.entities, &merged.relations, texts)?
                }
                (None, None) => return Err(KgragError::Config("LeanRAG's G0 has no input".into())),
            },
            G0Source::Native => {
                // Windows of 1024 cl100k tokens overlapping by 128; each newline run becomes one space.
                let mut chunks = chunk_passages(inputs.passages, ChunkerConfig::leanrag())?;
                for c in &mut chunks {
                    c.text = c
                        .text
                        .split(['\n', '\r'])
                        .filter(|p| !p.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ");
                }
                let found =
                    extract(&inputs, &chunks, lc.extraction, "leanrag", &mut out.notes).await?;
                let text = Arc::new(ExtractiveSummarizer::new(
                    inputs.embedder.clone(),
                    Encoding::Cl100kBase,
                ));
                let llm = inputs
                    .chat
                    .clone()
                    .map(|c| kgrag_hirag::LlmDescriptionSummarizer::new(c, text.clone()));
                let summarizer: &dyn kgrag_types::Summarizer = match &llm {
                    Some(l) => l,
                    None => text.as_ref(),
                };
                let texts = chunks
                    .iter()
                    .map(|c| (c.id.clone(), c.text.clone()))
                    .collect();
                kgrag_leanrag::native_base_graph(texts, &found, summarizer)
                    .await?
                    .0
            }
        };
        out.stages
            .push(("leanrag_g0".into(), t.elapsed().as_secs_f64()));
        let models = kgrag_leanrag::Models {
            embedder: inputs.embedder.clone(),
            chat: inputs.chat.clone(),
        };
        let index = LeanragIndex::build(g0, &models, lc).await?;
        out.stages
            .extend(index.stats().secs.iter().map(|(k, v)| (k.clone(), *v)));
        let s = index.stats();
        eprintln!(
            "kgrag: leanrag tree: {} base entities, {} base relations, nodes per layer {:?}, relations by kind \
             {:?}, {} seed vectors",
            s.entities, s.base_relations, s.nodes_per_layer, s.relations_by_kind, s.seed_vectors
        );
        out.leanrag = Some(index);
    }
    Ok(out)
}
