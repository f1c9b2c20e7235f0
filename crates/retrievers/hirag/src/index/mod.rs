//! Building HiRAG's index (spec §4–§6): merge the extracted records, summarise long descriptions, build the
//! HiIndex layers, write everything into one graph, embed the entities, run hierarchical Leiden and write
//! the community reports.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_community::report::{
    generate_reports_on_demand, CommunityInput, Report, ReportEntity, ReportRelation,
};
use kgrag_community::{community_schema, hierarchical_leiden, Graph};
use kgrag_graph_store::{
    EmbeddingStore, EntityRecord, KnowledgeGraph, NodeKind, Packed, RelationFacet, ScreenedIndex,
};
use kgrag_hierarchy::{
    build_hirag, embed_texts, BaseEntity, BaseRelation, ClusterSummarizer,
    ExtractiveClusterSummarizer, HNodeKind, Hierarchy, LlmClusterSummarizer,
};
use kgrag_text::{Encoding, ExtractiveSummarizer, SentenceAliases, SentenceMean};
use kgrag_types::{
    ChatModel, Chunk, ChunkId, CountingChat, DocId, Embedder, Entity, EntityId, Extraction,
    Outcome, StageUsage,
};
use serde::{Deserialize, Serialize};

use crate::config::{BaseSource, ClusterDescription, HiragConfig};
use crate::graph::HiGraph;
use crate::{HiragError, Result};

mod legacy;
mod merge;

pub use merge::{base_records, merge_records, MergedRecords};

/// The models an index build uses.
#[derive(Clone)]
pub struct Models {
    /// Embeds entity descriptions (clustering), the entity vectors' texts (`entity_text`) and the
    /// extractive summaries' sentences.
    pub embedder: Arc<dyn Embedder>,
    /// The "best" model: cluster summaries and community reports (none: extractive, offline).
    pub chat: Option<Arc<dyn ChatModel>>,
    /// The "cheap" model for long-description summaries (none: `chat`, else extractive).
    pub cheap_chat: Option<Arc<dyn ChatModel>>,
    /// A folder for the build's scratch files: the description composer's sentence vectors
    /// ([`SentenceMean::with_scratch_dir`](kgrag_text::SentenceMean::with_scratch_dir)) go to an unnamed
    /// file there instead of memory (`None`: memory). The index is the same either way.
    pub scratch_dir: Option<std::path::PathBuf>,
}

/// A chunk as the index keeps it (the reference's `kv_store_text_chunks` record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// Chunk id.
    pub id: ChunkId,
    /// The document it was cut from.
    pub doc: DocId,
    /// Position in its document.
    pub order: usize,
    /// Tokens of the chunk's window.
    pub tokens: usize,
    /// The text.
    pub content: String,
    /// o200k tokens of `content` (the text-unit budget walks on these).
    pub content_tokens: u32,
    /// o200k tokens of the chunk's source-table row after its id.
    #[serde(default)]
    pub row_tokens: u32,
}

/// A community with its report (spec §3 "Community", §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommunityRecord {
    /// Id (unique across levels).
    pub id: u32,
    /// Level (0 = coarsest).
    pub level: u32,
    /// `Cluster <id>`.
    pub title: String,
    /// Member nodes (graph indices), ascending.
    pub nodes: Vec<u32>,
    /// Every edge incident to a member, as node pairs, ascending — while the build writes the reports;
    /// an index lets go of them (empty here) and [`HiragIndex::community_edges`] lists them again from
    /// the graph. Held, they were ~0.8 MB per 1,000 passages that no query reads.
    pub edges: Vec<(u32, u32)>,
    /// Union of the members' source chunks (positions in the chunk list), ascending.
    pub chunk_ids: Vec<u32>,
    /// |chunk_ids| / the largest |chunk_ids| of any community.
    pub occurrence: f64,
    /// The community it was split from.
    pub parent: Option<u32>,
    /// Communities one level deeper split from it.
    pub sub_communities: Vec<u32>,
    /// The report.
    pub report: Report,
    /// The rendered report (`# title …`).
    pub report_string: String,
    /// o200k tokens of `report_string`.
    pub report_tokens: u32,
    /// o200k tokens of the report's table row after its id: newlines flattened (`hi`), kept (the others).
    #[serde(default)]
    pub row_tokens: (u32, u32),
}

/// One clustering round of the HiIndex.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HierarchyRound {
    /// The layer clustered.
    pub layer: u32,
    /// Its node count N.
    pub n: usize,
    /// Mixture components fitted (BIC's choice).
    pub k: usize,
    /// Non-empty clusters.
    pub clusters: usize,
    /// Sparsity of the clusters (HiRAG's stop measure).
    pub sparsity: f64,
    /// Relative change of sparsity from the previous round.
    pub change: Option<f64>,
    /// How UMAP started its layout (spectral, or PCA when the neighbour graph was in pieces); absent for
    /// the other reductions.
    // Written even when `None`: the index files are postcard, whose fields are read by position.
    #[serde(default)]
    pub umap_init: Option<kgrag_hierarchy::umap::UmapInit>,
}

/// What a build made and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Chunks indexed.
    pub chunks: usize,
    /// Entity records and relation records read from the extractions.
    pub records: (usize, usize),
    /// Records skipped (empty names after normalisation, self-relations).
    pub skipped_records: usize,
    /// Relation endpoints no entity record named (`UNKNOWN` nodes), from extraction.
    pub unknown_endpoints: usize,
    /// Long descriptions summarised (§4.5) or, for `openie_cache`, shortened to the budget.
    pub descriptions_summarised: usize,
    /// Description summaries that fell back to the extractive summary.
    pub description_fallbacks: u64,
    /// Graph nodes per layer (0 = base entities, including `UNKNOWN` endpoints).
    pub entities_per_layer: Vec<usize>,
    /// Nodes per HiIndex layer as the hierarchy built them (layer 0 = clustered base entities).
    pub hierarchy_layers: Vec<usize>,
    /// The clustering rounds (the last one is the round the stop rule ended on).
    #[serde(default)]
    pub hierarchy_rounds: Vec<HierarchyRound>,
    /// Summaries per outcome (`llm`, `retried`, `fallback`, `extractive`) over all layers.
    pub summary_outcomes: BTreeMap<String, usize>,
    /// Graph edges (relations, member relations included).
    pub relations: usize,
    /// Nodes in the entity vectors.
    pub embedded_entities: usize,
    /// Communities per level.
    pub communities_per_level: Vec<usize>,
    /// Reports written (not reused).
    pub reports_written: usize,
    /// Reports reused from the previous build.
    pub reports_reused: usize,
    /// Reports per outcome.
    pub report_outcomes: BTreeMap<String, usize>,
    /// Model usage per stage (`extraction`, `descriptions`, `hierarchy`, `reports`).
    pub llm: BTreeMap<String, StageUsage>,
    /// Seconds per stage.
    #[serde(skip)]
    pub secs: BTreeMap<String, f64>,
}

/// The version of the saved index file: 4 since the settings it embeds hold `entity_text` (files of
/// versions 2 and 3 are read through [`legacy`], their entity text the reference's); 3 since the context
/// tables are rendered as the reference renders them (quoted header names, cells stripped as Python strips
/// them), which changes the rows' stored token counts; 2 since the settings it embeds hold the clustering as one `cluster` table. Files of version 2
/// are read and their row counts taken again ([`HiragIndex::load`]); version 1 is refused with a request
/// to rebuild.
const FILE_VERSION: u32 = 4;

/// The last file version before `entity_text` ([`legacy`]).
const LEGACY_FILE_VERSION: u32 = 3;

/// The oldest file version [`HiragIndex::load`] still reads (its rows' token counts are taken again).
const RECOUNTED_FILE_VERSION: u32 = 2;

/// HiRAG's index. See the crate docs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HiragIndex {
    config: HiragConfig,
    chunks: Vec<ChunkRecord>,
    graph: HiGraph,
    entity_vectors: EmbeddingStore,
    /// Row of the entity store → node index.
    entity_rows: Vec<u32>,
    /// Packed: no query reads it (the graph holds its nodes); saved, exported and projected as it was.
    hierarchy: Packed<Hierarchy>,
    communities: Vec<CommunityRecord>,
    #[serde(skip)]
    community_pos: HashMap<u32, usize>,
    stats: IndexStats,
    /// An int8 copy of the entity vectors while they are on disk
    /// ([`set_entity_vectors_dir`](HiragIndex::set_entity_vectors_dir)).
    #[serde(skip)]
    entity_screen: Option<Arc<ScreenedIndex>>,
}

/// Every edge of `graph` incident to one of `nodes` that the clustering's graph holds (a positive finite
/// weight), as pairs `(a, b)` with `a < b`, ascending: a community's edges (`community_schema`).
fn edges_at(graph: &HiGraph, nodes: &[u32]) -> Vec<(u32, u32)> {
    let mut edges = BTreeSet::new();
    for &v in nodes {
        for &(u, e) in graph.neighbours(v) {
            let w = graph.edge(e).map_or(0.0, |e| e.weight);
            if w.is_finite() && w > 0.0 {
                edges.insert((v.min(u), v.max(u)));
            }
        }
    }
    edges.into_iter().collect()
}

fn outcome_name(o: Outcome) -> String {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn record_stage(stats: &mut IndexStats, stage: &str, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    *stats.secs.entry(stage.to_owned()).or_default() += secs;
}

/// HiRAG's base layer (spec §4.1–§4.5): the chunk records, the extracted records merged with their long
/// descriptions summarised, and the graph of base entities and relations — everything the HiIndex is built
/// on, and what LeanRAG's `g0 = "hirag"` reads ([`HiragBase::graph`]). [`HiragBase::finish`] builds the rest
/// of the index (§5–§6); [`HiragIndex::build`] is the two in one.
pub struct HiragBase {
    config: HiragConfig,
    records: Vec<ChunkRecord>,
    chunk_pos: HashMap<String, u32>,
    entities: Vec<Entity>,
    relations: Vec<kgrag_types::Relation>,
    record_names: HashSet<String>,
    last_first: HashMap<String, String>,
    kg: KnowledgeGraph,
    stats: IndexStats,
    sentence_aliases: Arc<SentenceAliases>,
}

impl HiragBase {
    /// The base layer of `chunks` and their extractions (any order; a chunk without an extraction
    /// contributes its text only). Entity names go through HiRAG's normalisation for `base = "extract"`;
    /// `openie_cache` records (from [`openie_extractions`](crate::openie_extractions)) keep HippoRAG's
    /// phrases. Long descriptions are summarised with `models` (spec §4.5). Neither input is kept: the
    /// caller may drop them once this returns, and extractions given by value (a `Vec`) move into the merge
    /// a chunk at a time ([`merge_records`]), so they are never held beside the merged records.
    pub async fn new<'e, E: Into<std::borrow::Cow<'e, [Extraction]>>>(
        chunks: &[Chunk],
        extractions: E,
        models: &Models,
        config: &HiragConfig,
    ) -> Result<Self> {
        config.validate()?;
        let extractions = extractions.into();
        let mut stats = IndexStats::default();
        let sentence_aliases = Arc::new(match config.base {
            BaseSource::OpenieCache => crate::openie::fact_sentence_aliases(&extractions),
            BaseSource::Extract => SentenceAliases::new(),
        });

        // Chunks, sorted by id (so sorted source sets are ascending positions).
        let mut records: Vec<ChunkRecord> = Vec::new();
        let mut seen = HashSet::new();
        for c in chunks {
            if seen.insert(c.id.clone()) {
                records.push(ChunkRecord {
                    id: c.id.clone(),
                    doc: c.doc_id.clone(),
                    order: c.order,
                    tokens: c.tokens,
                    content: c.text.clone(),
                    content_tokens: crate::tokens(&c.text) as u32,
                    row_tokens: 0,
                });
            }
        }
        records.sort_by(|a, b| a.id.cmp(&b.id));
        let chunk_pos: HashMap<String, u32> = records
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str().to_owned(), i as u32))
            .collect();
        stats.chunks = records.len();

        // §4.3–4.5: records merged, long descriptions summarised.
        let merged = base_records(chunks, extractions, models, config).await?;
        let MergedRecords {
            entities,
            mut relations,
            record_names,
            last_first,
            records: record_counts,
            skipped_records,
            unknown_endpoints,
            extraction_usage,
            descriptions_summarised,
            description_fallbacks,
            description_usage,
            secs,
        } = merged;
        let record_names: HashSet<String> = record_names.into_iter().collect();
        stats.records = record_counts;
        stats.skipped_records = skipped_records;
        stats.unknown_endpoints = unknown_endpoints;
        stats.llm.insert("extraction".into(), extraction_usage);
        stats.descriptions_summarised = descriptions_summarised;
        stats.description_fallbacks = description_fallbacks;
        if let Some(u) = description_usage {
            stats.llm.insert("descriptions".into(), u);
        }
        for (k, v) in secs {
            *stats.secs.entry(k).or_default() += v;
        }

        // The base graph.
        let mut kg = KnowledgeGraph::new();
        for e in &entities {
            kg.upsert_entity(EntityRecord {
                key: EntityId::from_content(&e.name).as_str().to_owned(),
                name: e.name.clone(),
                entity_type: e.entity_type.clone(),
                description: e.description.clone(),
                sources: e.source_chunks.clone(),
                layer: 0,
                kind: Some(NodeKind::Entity),
            })?;
        }
        // The relations' keywords and sources move to the graph (the HiIndex reads their endpoints and
        // descriptions only).
        for r in &mut relations {
            let key = |n: &str| EntityId::from_content(n).as_str().to_owned();
            let (Some(a), Some(b)) = (kg.find(&key(&r.source)), kg.find(&key(&r.target))) else {
                return Err(HiragError::Input(format!(
                    "relation {:?} – {:?} has an endpoint that is not in the graph",
                    r.source, r.target
                )));
            };
            kg.upsert_relation(
                a,
                b,
                RelationFacet {
                    description: r.description.clone(),
                    keywords: std::mem::take(&mut r.keywords),
                    weight: if r.weight.is_finite() { r.weight } else { 1.0 },
                    sources: std::mem::take(&mut r.source_chunks),
                    order: 1,
                },
            )?;
        }
        Ok(Self {
            config: config.clone(),
            records,
            chunk_pos,
            entities,
            relations,
            record_names,
            last_first,
            kg,
            stats,
            sentence_aliases,
        })
    }

    /// The sentences of the base's descriptions that composed description vectors embed as another text
    /// (`description_vectors`; see [`SentenceMean::with_aliases`]): under `base = "openie_cache"`, each fact
    /// sentence as the rendering HippoRAG 2 embeds for its triple; none under `extract`. LeanRAG's G0
    /// taken from this base composes with the same aliases.
    pub fn sentence_aliases(&self) -> Arc<SentenceAliases> {
        self.sentence_aliases.clone()
    }

    /// The chunks, sorted by id (the positions [`HiNode::sources`](crate::HiNode) and
    /// [`HiEdge::sources`](crate::HiEdge) of [`graph`](Self::graph) refer to).
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.records
    }

    /// The base layer as a graph in the finished index's order: every base entity (`UNKNOWN` endpoints
    /// included) by name, every relation by endpoints. It equals the layer-0 nodes of
    /// [`HiragIndex::graph`] and the edges among them, except where the HiIndex later merges a summary
    /// entity into a base entity of the same name (spec §5.5): the finished graph then carries the summary's
    /// description and member relations on that node, the base layer does not.
    pub fn graph(&self) -> Result<HiGraph> {
        HiGraph::from_knowledge_graph(&self.kg, &self.chunk_pos, |name| {
            self.record_names.contains(name)
        })
    }

    /// [`graph`](Self::graph), [`chunks`](Self::chunks) and [`sentence_aliases`](Self::sentence_aliases)
    /// taken from the base, which is consumed: its merged records are given back before the graph is
    /// made (what LeanRAG's G0 needs when no HiRAG index is built on the base).
    pub fn into_graph(mut self) -> Result<(HiGraph, Vec<ChunkRecord>, Arc<SentenceAliases>)> {
        self.entities = Vec::new();
        self.relations = Vec::new();
        self.last_first = HashMap::new();
        let graph = self.graph()?;
        Ok((graph, self.records, self.sentence_aliases))
    }

    /// Builds the rest of the index on this base (spec §5–§6): the HiIndex layers, the entity vectors,
    /// hierarchical Leiden and the community reports. `previous_reports` (keyed by input hash, e.g.
    /// [`HiragIndex::reports_by_hash`] of an earlier build) are reused where a community's input is
    /// unchanged.
    pub async fn finish(
        self,
        models: &Models,
        previous_reports: &HashMap<String, Report>,
    ) -> Result<HiragIndex> {
        let Self {
            config,
            records,
            chunk_pos,
            entities,
            relations,
            record_names,
            last_first,
            mut kg,
            mut stats,
            sentence_aliases,
        } = self;
        let config = &config;
        // What the hierarchy clusters and summarises (clustering texts, summary entities, the summariser's
        // sentences) goes through one embedder: the model's, or its sentences composed
        // (`description_vectors`); the entity vectors retrieval searches only under `all_sentences`.
        let model_writes = models.chat.is_some() || models.cheap_chat.is_some();
        let composes = config.description_vectors.composes(model_writes);
        let with_name = config.entity_text.with_name(model_writes);
        let composed_entities = config.description_vectors.composes_entities();
        let descriptions = SentenceMean::wrap_if(
            models.embedder.clone(),
            composes,
            sentence_aliases,
            models.scratch_dir.as_deref(),
        );
        let text = Arc::new(
            ExtractiveSummarizer::new(descriptions.clone(), Encoding::O200kBase)
                .with_memo(!composes),
        );

        // §5: HiIndex over the entity records (not the UNKNOWN endpoints). The base list and relations
        // take the merged records' strings over (nothing below reads them again).
        let started = Instant::now();
        let is_base: Vec<bool> = entities
            .iter()
            .map(|e| record_names.contains(&e.name))
            .collect();
        let mut base_relations: Vec<BaseRelation> = {
            let base_pos: HashMap<&str, usize> = entities
                .iter()
                .zip(&is_base)
                .filter(|(_, &b)| b)
                .enumerate()
                .map(|(i, (e, _))| (e.name.as_str(), i))
                .collect();
            relations
                .into_iter()
                .filter_map(|r| {
                    Some(BaseRelation {
                        source: *base_pos.get(r.source.as_str())?,
                        target: *base_pos.get(r.target.as_str())?,
                        description: r.description,
                    })
                })
                .collect()
        };
        // Collected in place, the list would keep the capacity of the relation records it was made from
        // (three times its size).
        base_relations.shrink_to_fit();
        let cluster_texts: Vec<String> = entities
            .iter()
            .zip(&is_base)
            .filter(|(_, &b)| b)
            .map(|(e, _)| {
                let t = match config.cluster_description {
                    ClusterDescription::LastChunkFirstRecord => last_first
                        .get(&e.name)
                        .cloned()
                        .unwrap_or_else(|| e.description.clone()),
                    ClusterDescription::Merged => e.description.clone(),
                };
                if t.trim().is_empty() {
                    e.name.clone()
                } else {
                    t
                }
            })
            .collect();
        drop(last_first);
        let vectors = embed_texts(
            descriptions.as_ref(),
            &cluster_texts,
            config.embed_batch,
            "entity descriptions",
        )
        .await?;
        drop(cluster_texts);
        let base: Vec<BaseEntity> = entities
            .into_iter()
            .zip(is_base)
            .filter(|(_, b)| *b)
            .zip(vectors)
            .map(|((e, _), v)| BaseEntity {
                key: EntityId::from_content(&e.name).as_str().to_owned(),
                name: e.name,
                entity_type: e.entity_type,
                description: e.description,
                sources: e.source_chunks.into_iter().collect(),
                embedding: v,
            })
            .collect();
        let cluster_chat = models.chat.clone().map(|c| Arc::new(CountingChat::new(c)));
        let extractive = ExtractiveClusterSummarizer::new(text.clone());
        let llm_clusters = cluster_chat.as_ref().map(|c| {
            LlmClusterSummarizer::new(c.clone() as Arc<dyn ChatModel>, extractive.clone())
        });
        let summarizer: &dyn ClusterSummarizer = match &llm_clusters {
            Some(l) => l,
            None => &extractive,
        };
        let mut hierarchy = build_hirag(
            base,
            &base_relations,
            descriptions.as_ref(),
            summarizer,
            &config.hierarchy(),
        )
        .await?;
        drop(base_relations);
        if let Some(c) = &cluster_chat {
            stats.llm.insert("hierarchy".into(), c.usage());
        }
        for log in &hierarchy.log {
            for (k, v) in &log.outcomes {
                *stats.summary_outcomes.entry(k.clone()).or_default() += v;
            }
        }
        stats.hierarchy_layers = hierarchy.layer_sizes();
        stats.hierarchy_rounds = hierarchy
            .log
            .iter()
            .map(|l| HierarchyRound {
                layer: l.layer,
                n: l.n,
                k: l.k,
                clusters: l.clusters,
                sparsity: l.sparsity,
                change: l.change,
                umap_init: l.umap_init,
            })
            .collect();
        hierarchy.insert_into(&mut kg)?;
        // The clustering vectors served the rounds; retrieval searches the entity vectors below, so the
        // index does not keep them (a vector per node, the largest part of the hierarchy).
        for node in hierarchy.layers.iter_mut().flatten() {
            node.embedding = Vec::new();
        }
        record_stage(&mut stats, "hirag_hierarchy", started);

        // The retrieval graph: entity records and summary entities are embedded, UNKNOWN endpoints not.
        let summary_names: HashSet<&str> = hierarchy
            .layers
            .iter()
            .skip(1)
            .flatten()
            .filter(|n| n.kind == HNodeKind::Attribute)
            .map(|n| n.name.as_str())
            .collect();
        let mut graph = HiGraph::from_knowledge_graph(&kg, &chunk_pos, |name| {
            record_names.contains(name) || summary_names.contains(name)
        })?;
        drop(kg);
        drop(summary_names);
        drop(record_names);
        let max_layer = graph.nodes().iter().map(|n| n.layer).max().unwrap_or(0);
        stats.entities_per_layer = vec![0; max_layer as usize + 1];
        for n in graph.nodes() {
            stats.entities_per_layer[n.layer as usize] += 1;
        }
        stats.relations = graph.edges().len();

        // Entity vectors: `"NAME"` + description (see `entity_vector_text`), or the description alone
        // (`entity_text`), every embedded node, in name order; embedded whole unless `all_sentences`
        // composes them too (the name then a unit of its own, when `entity_text` embeds it).
        let started = Instant::now();
        let entity_embedder = if composed_entities {
            descriptions.as_ref()
        } else {
            models.embedder.as_ref()
        };
        // Keys and vectors only: retrieval scores the vectors and renders the graph's nodes, so a copy of
        // every entity's embedded text (~0.5 MB per 1,000 passages) would be held for nothing.
        let mut entity_vectors = EmbeddingStore::new("hirag-entities").without_texts();
        let items: Vec<(String, String)> = graph
            .nodes()
            .iter()
            .filter(|n| n.embedded)
            .map(|n| {
                (
                    format!("ent-{}", kgrag_types::md5_hex(n.name.as_bytes())),
                    if !with_name {
                        // LeanRAG's seed text (its `embed_max_tokens` cut, 4,096 cl100k tokens by
                        // default, lies far past what the encoder reads).
                        kgrag_text::composed::description_or_name(&n.name, &n.description)
                            .to_owned()
                    } else if composed_entities {
                        format!(
                            "{}{}{}",
                            n.name,
                            kgrag_text::composed::PART_SEPARATOR,
                            n.description
                        )
                    } else {
                        entity_vector_text(&n.name, &n.description)
                    },
                )
            })
            .collect();
        entity_vectors
            .insert(&items, entity_embedder, config.embed_batch, |_| {})
            .await?;
        let mut entity_rows = vec![u32::MAX; entity_vectors.len()];
        for (i, n) in graph.nodes().iter().enumerate() {
            if !n.embedded {
                continue;
            }
            let key = format!("ent-{}", kgrag_types::md5_hex(n.name.as_bytes()));
            if let Some(row) = entity_vectors.row(&key) {
                entity_rows[row] = i as u32;
            }
        }
        stats.embedded_entities = entity_vectors.len();
        record_stage(&mut stats, "hirag_entity_vectors", started);

        // §6.1–6.2: hierarchical Leiden over the whole graph (its largest component) and the schema.
        let started = Instant::now();
        let edges: Vec<(usize, usize, f64)> = graph
            .edges()
            .iter()
            .map(|e| {
                let w = if e.weight.is_finite() && e.weight > 0.0 {
                    e.weight
                } else {
                    0.0
                };
                (e.a as usize, e.b as usize, w)
            })
            .collect();
        let cgraph = Graph::from_edges(graph.node_count(), &edges)?;
        drop(edges);
        let hier = hierarchical_leiden(&cgraph, &config.leiden())?;
        let schema = {
            let sources: Vec<Vec<String>> = graph
                .nodes()
                .iter()
                .map(|n| {
                    n.sources
                        .iter()
                        .map(|&s| records[s as usize].id.as_str().to_owned())
                        .collect()
                })
                .collect();
            community_schema(&cgraph, &hier, &sources)
        };
        drop(cgraph);
        let mut clusters: Vec<Vec<(u32, u32)>> = vec![Vec::new(); graph.node_count()];
        for r in &hier.records {
            clusters[r.node].push((r.level as u32, r.cluster as u32));
        }
        drop(hier);
        for (i, c) in clusters.into_iter().enumerate() {
            if let Some(n) = graph.node_mut(i) {
                n.clusters = c;
            }
        }
        // The schema in the index's form (node and chunk positions), its report still to come.
        let mut communities: Vec<CommunityRecord> = schema
            .into_iter()
            .map(|c| {
                let chunk_ids: BTreeSet<u32> = c
                    .chunk_ids
                    .iter()
                    .filter_map(|id| chunk_pos.get(id).copied())
                    .collect();
                CommunityRecord {
                    id: c.id as u32,
                    level: c.level as u32,
                    title: c.title,
                    nodes: c.nodes.iter().map(|&v| v as u32).collect(),
                    edges: c.edges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
                    chunk_ids: chunk_ids.into_iter().collect(),
                    occurrence: c.occurrence,
                    parent: c.parent.map(|p| p as u32),
                    sub_communities: c.sub_communities.iter().map(|&s| s as u32).collect(),
                    report: Report::default(),
                    report_string: String::new(),
                    report_tokens: 0,
                    row_tokens: (0, 0),
                }
            })
            .collect();
        record_stage(&mut stats, "hirag_communities", started);

        // §6.3–6.4: reports, deepest level first, reused when unchanged. A community's input is made when
        // its report is due (it lists the members' descriptions and relations again, borrowed from the
        // graph but one row each) and dropped once the report is written.
        let started = Instant::now();
        // The schema comes in id order, and so do the records.
        let input = |id: usize| -> Option<CommunityInput<'_>> {
            let id = u32::try_from(id).ok()?;
            let c = &communities[communities.binary_search_by_key(&id, |c| c.id).ok()?];
            Some(CommunityInput {
                id: c.id as usize,
                level: c.level as usize,
                entities: c
                    .nodes
                    .iter()
                    .filter_map(|&v| {
                        let n = graph.node(v)?;
                        Some(ReportEntity {
                            name: n.name.as_str().into(),
                            entity_type: n.entity_type.as_str().into(),
                            description: n.description.as_str().into(),
                            degree: graph.degree(v),
                        })
                    })
                    .collect(),
                relations: c
                    .edges
                    .iter()
                    .filter_map(|&(a, b)| {
                        let e = graph.edge(graph.edge_between(a, b)?)?;
                        Some(ReportRelation {
                            source: graph.node(a)?.name.as_str().into(),
                            target: graph.node(b)?.name.as_str().into(),
                            description: e.description.as_str().into(),
                            rank: graph.degree(a) + graph.degree(b),
                        })
                    })
                    .collect(),
                sub_communities: c.sub_communities.iter().map(|&s| s as usize).collect(),
                occurrence: c.occurrence,
            })
        };
        let ids: Vec<(usize, usize)> = communities
            .iter()
            .map(|c| (c.id as usize, c.level as usize))
            .collect();
        let report_chat = models.chat.clone().map(|c| Arc::new(CountingChat::new(c)));
        let mut reports = generate_reports_on_demand(
            &ids,
            input,
            report_chat.as_deref().map(|c| c as &dyn ChatModel),
            &text,
            previous_reports,
            config.report_context_tokens,
            config.concurrency,
        )
        .await?;
        if let Some(c) = &report_chat {
            stats.llm.insert("reports".into(), c.usage());
        }
        let mut per_level: BTreeMap<u32, usize> = BTreeMap::new();
        for c in &mut communities {
            let Some(report) = reports.remove(&(c.id as usize)) else {
                return Err(HiragError::Input(format!(
                    "community {} got no report",
                    c.id
                )));
            };
            if report.reused {
                stats.reports_reused += 1;
            } else {
                stats.reports_written += 1;
            }
            *stats
                .report_outcomes
                .entry(outcome_name(report.outcome))
                .or_default() += 1;
            *per_level.entry(c.level).or_default() += 1;
            c.report_string = report.render();
            c.report_tokens = crate::tokens(&c.report_string) as u32;
            c.report = report;
        }
        stats.communities_per_level = per_level.values().copied().collect();
        for c in &communities {
            // What `community_edges` lists again (the index lets go of the lists in `rebuild_lookups`)
            // is what the reports were given.
            debug_assert_eq!(c.edges, edges_at(&graph, &c.nodes), "community {}", c.id);
        }
        record_stage(&mut stats, "hirag_reports", started);

        let packed = Packed::new(&hierarchy)?;
        debug_assert!(
            packed.get().ok().as_ref() == Some(&hierarchy),
            "the hierarchy unpacks as it was"
        );
        drop(hierarchy);
        let mut index = HiragIndex {
            config: config.clone(),
            chunks: records,
            graph,
            entity_vectors,
            entity_rows,
            hierarchy: packed,
            communities,
            community_pos: HashMap::new(),
            stats,
            entity_screen: None,
        };
        index.rebuild_lookups();
        index.count_row_tokens();
        Ok(index)
    }
}

impl HiragIndex {
    /// Builds the index from `chunks` and their extractions: [`HiragBase::new`], then
    /// [`HiragBase::finish`].
    pub async fn build(
        chunks: &[Chunk],
        extractions: &[Extraction],
        models: &Models,
        config: &HiragConfig,
        previous_reports: &HashMap<String, Report>,
    ) -> Result<Self> {
        HiragBase::new(chunks, extractions, models, config)
            .await?
            .finish(models, previous_reports)
            .await
    }

    fn rebuild_lookups(&mut self) {
        // Files written while the entity store held its texts, or the communities their edges, still
        // have them; nothing reads them (`community_edges` lists the edges again).
        self.entity_vectors.drop_texts();
        for c in &mut self.communities {
            c.edges = Vec::new();
        }
        self.graph.rebuild();
        self.community_pos = self
            .communities
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
    }

    /// Writes the index to `path` (checksummed, atomic).
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        kgrag_graph_store::persist::save(path, "hirag-index", FILE_VERSION, self)?;
        Ok(())
    }

    /// Reads an index written by [`save`](Self::save).
    ///
    /// Files of the two previous versions are read too: version 3 (settings without `entity_text`: its
    /// entity vectors embedded the reference's `"NAME"` + description) and version 2 (the same, rendered
    /// before the context tables followed the reference byte for byte: the token counts of its rows are
    /// taken again).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        use kgrag_graph_store::{persist, StoreError};
        let (mut index, recount) = match persist::load::<Self>(path, "hirag-index", FILE_VERSION) {
            Ok(index) => (index, false),
            Err(first @ StoreError::Incompatible { .. }) => {
                let legacy = |version| {
                    persist::load::<legacy::IndexV3>(path, "hirag-index", version).map(Self::from)
                };
                match legacy(LEGACY_FILE_VERSION) {
                    Ok(index) => (index, false),
                    Err(StoreError::Incompatible { .. }) => match legacy(RECOUNTED_FILE_VERSION) {
                        Ok(index) => (index, true),
                        Err(_) => return Err(first.into()),
                    },
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        index.rebuild_lookups();
        if recount {
            index.count_row_tokens();
        }
        Ok(index)
    }

    /// The o200k token counts of every context row (chunks, entities, relations, reports), as the
    /// tables render them now: at the end of a build, and when a file of the previous version is read.
    fn count_row_tokens(&mut self) {
        for r in &mut self.chunks {
            r.row_tokens = crate::table::row_rest_tokens(crate::table::chunk_cells(r));
        }
        self.graph.count_row_tokens();
        for c in &mut self.communities {
            c.row_tokens = (
                crate::table::row_rest_tokens(crate::table::report_cells(c, true)),
                crate::table::row_rest_tokens(crate::table::report_cells(c, false)),
            );
        }
    }

    /// The settings the index was built with (retrieval reads its budgets from here).
    pub fn config(&self) -> &HiragConfig {
        &self.config
    }

    /// Sets the `concurrency` the index records: a build that ran with more requests in flight than its
    /// configuration says (a distributed build's coordinator) records the configured one, as concurrency
    /// never changes what is built.
    pub fn set_recorded_concurrency(&mut self, n: usize) {
        self.config.concurrency = n;
    }

    /// The chunks, sorted by id.
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// The graph.
    pub fn graph(&self) -> &HiGraph {
        &self.graph
    }

    /// The entity vectors (`"NAME"` + description, or the description alone: `entity_text`; keys
    /// `ent-<md5(name)>`).
    pub fn entity_vectors(&self) -> &EmbeddingStore {
        &self.entity_vectors
    }

    /// Keeps the entity vectors (f32, one row per entity: ~1 KB each at 256 dimensions) in unnamed
    /// scratch files under `dir` (created if missing) instead of memory, with an int8 copy in memory that
    /// screens each query so that only the rows it cannot decide are read
    /// ([`ScreenedIndex::candidates`]); with `None`, in memory. Rankings, scores and contexts are
    /// unchanged: the file holds the same values, scored by the same dot product. The saved index holds
    /// the vectors inline either way.
    pub fn set_entity_vectors_dir(&mut self, dir: Option<&std::path::Path>) -> Result<()> {
        match dir {
            Some(dir) => {
                self.entity_vectors.rows_on_disk(dir)?;
                self.entity_screen = self
                    .entity_vectors
                    .index()
                    .map(ScreenedIndex::new)
                    .transpose()?
                    .map(Arc::new);
            }
            None => {
                self.entity_vectors.rows_in_memory()?;
                self.entity_screen = None;
            }
        }
        Ok(())
    }

    /// The entity vectors' int8 screen, while they are on disk.
    pub(crate) fn entity_screen(&self) -> Option<&ScreenedIndex> {
        self.entity_screen.as_deref()
    }

    /// The graph node of entity-vector row `row`.
    pub fn entity_of_row(&self, row: usize) -> Option<u32> {
        self.entity_rows
            .get(row)
            .copied()
            .filter(|&n| n != u32::MAX)
    }

    /// The HiIndex layers, unpacked: the index holds them packed (no query reads them; ~1.5 MB per
    /// 1,000 passages as structures, a fraction of it packed), so each call makes a copy.
    pub fn hierarchy(&self) -> Result<Hierarchy> {
        Ok(self.hierarchy.get()?)
    }

    /// The communities, by id.
    pub fn communities(&self) -> &[CommunityRecord] {
        &self.communities
    }

    /// Every edge incident to a member of `community`, as node pairs `(a, b)` with `a < b`, ascending:
    /// the community's edges as its report's input listed them (the clustering's graph, which leaves out
    /// edges without a positive finite weight).
    pub fn community_edges(&self, community: &CommunityRecord) -> Vec<(u32, u32)> {
        edges_at(&self.graph, &community.nodes)
    }

    /// The community with id `id`.
    pub fn community(&self, id: u32) -> Option<&CommunityRecord> {
        self.community_pos
            .get(&id)
            .and_then(|&i| self.communities.get(i))
    }

    /// What the build made and cost.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The reports keyed by input hash, for reuse by the next build.
    pub fn reports_by_hash(&self) -> HashMap<String, Report> {
        self.communities
            .iter()
            .map(|c| (c.report.input_hash.clone(), c.report.clone()))
            .collect()
    }
}

/// The text HiRAG embeds for an entity's vector: its name in double quotes, then its description, with
/// no separator. The reference embeds `entity_name + description`, and its names keep the quotes the
/// model wrote around them (`"ALEX"`, the spec's §4.3); ours are stored without them, so the quotes are
/// put back here — without them the name runs into the description's first word (`ALEXAlex is…`) and
/// the encoder reads another word.
pub(crate) fn entity_vector_text(name: &str, description: &str) -> String {
    format!("\"{name}\"{description}")
}
