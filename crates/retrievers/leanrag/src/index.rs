//! Building LeanRAG's index (spec §5): embed G0's descriptions, aggregate layer by layer, and index the
//! seed layers' vectors.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use kgrag_graph_store::{ExactIndex, Metric, ScreenedIndex};
use kgrag_hierarchy::{
    build_leanrag, embed_texts, BaseEntity, BaseRelation, ClusterSummarizer,
    ExtractiveClusterSummarizer, HNodeKind, Hierarchy, LlmClusterSummarizer, NodeId, RelationKind,
};
use kgrag_text::{Encoding, ExtractiveSummarizer, SentenceMean};
use kgrag_types::{ChatModel, ChunkId, CountingChat, Embedder, StageUsage};
use serde::{Deserialize, Serialize};

use crate::base::BaseGraph;
use crate::config::{LeanragConfig, SeedLayers};
use crate::{LeanragError, Result};

/// The models an index build uses.
#[derive(Clone)]
pub struct Models {
    /// Embeds descriptions (clustering, seeds) and the extractive summaries' sentences.
    pub embedder: Arc<dyn Embedder>,
    /// Writes aggregate entities and relation sentences (none: extractive, offline).
    pub chat: Option<Arc<dyn ChatModel>>,
    /// A folder for the build's scratch files: the description composer's sentence vectors
    /// ([`SentenceMean::with_scratch_dir`](kgrag_text::SentenceMean::with_scratch_dir)) go to an unnamed
    /// file there instead of memory (`None`: memory). The index is the same either way.
    pub scratch_dir: Option<std::path::PathBuf>,
}

/// One aggregation round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    /// The layer clustered.
    pub layer: u32,
    /// Its node count N.
    pub n: usize,
    /// Components fitted (max(⌊N/20⌋, k_BIC)).
    pub k: usize,
    /// BIC's choice.
    pub k_bic: usize,
    /// Non-empty clusters.
    pub clusters: usize,
    /// Sparsity of the clusters.
    pub sparsity: f64,
    /// Aggregates per outcome (`llm`, `retried`, `fallback`, `extractive`).
    pub outcomes: BTreeMap<String, usize>,
    /// How UMAP started its layout (spectral, or PCA when the neighbour graph was in pieces); absent for
    /// the other reductions.
    // Written even when `None`: the index files are postcard, whose fields are read by position.
    #[serde(default)]
    pub umap_init: Option<kgrag_hierarchy::umap::UmapInit>,
}

/// What a build made and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeanragStats {
    /// Base entities.
    pub entities: usize,
    /// Base relations (one per pair).
    pub base_relations: usize,
    /// Nodes per layer (promoted copies included; the last layer holds the root).
    pub nodes_per_layer: Vec<usize>,
    /// One entry per aggregation round.
    pub layers: Vec<LayerStats>,
    /// Relations by kind (`base`, `concat`, `llm`, `extractive`).
    pub relations_by_kind: BTreeMap<String, usize>,
    /// Rows in the seed vector index.
    pub seed_vectors: usize,
    /// Model usage of the aggregation.
    pub llm: StageUsage,
    /// Seconds per stage.
    #[serde(skip)]
    pub secs: BTreeMap<String, f64>,
}

/// The version of the saved index file: 2 since the settings it embeds hold the clustering as one
/// `cluster` table (files of version 1 are refused with a request to rebuild).
const FILE_VERSION: u32 = 2;

/// LeanRAG's index. See the crate docs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeanragIndex {
    config: LeanragConfig,
    hierarchy: Hierarchy,
    /// Chunk id → text.
    chunks: BTreeMap<ChunkId, String>,
    /// Seed vectors: one row per node of the seed layers.
    vectors: Option<ExactIndex>,
    /// Row → node.
    rows: Vec<NodeId>,
    /// Positions in `hierarchy.relations` sorted by their unordered origin pair, one per pair (the last
    /// relation of a pair, were there two): a lookup is a binary search. A map from pair to position
    /// held 40 bytes per relation (~1 MB per 1,000 passages); this holds 4.
    #[serde(skip)]
    relation_of: Vec<u32>,
    /// cl100k tokens of each context line with its newline (see [`LineTokens`]).
    #[serde(skip)]
    line_tokens: LineTokens,
    stats: LeanragStats,
    /// An int8 copy of the seed vectors while they are on disk
    /// ([`set_seed_vectors_dir`](LeanragIndex::set_seed_vectors_dir)).
    #[serde(skip)]
    seed_screen: Option<Arc<ScreenedIndex>>,
}

/// A relation's unordered origin pair, lower first.
fn pair_of(r: &kgrag_hierarchy::HRelation) -> (NodeId, NodeId) {
    (r.a.min(r.b), r.a.max(r.b))
}

/// cl100k tokens of every line a context can hold, each followed by its newline, counted once per index.
/// A context's count is their sum plus the fixed lines' (the last line counted without its newline):
/// cl100k's pre-tokeniser never joins text across a newline run, so lines add up exactly — unless a line
/// starts with a newline itself, in which case the context is counted whole (see `exact`).
#[derive(Debug, Clone, Default)]
pub(crate) struct LineTokens {
    /// Per layer and node: the seed line and the aggregate line.
    pub(crate) nodes: Vec<Vec<(u32, u32)>>,
    /// Per relation: its description line.
    pub(crate) relations: Vec<u32>,
    /// Per chunk: its text line.
    pub(crate) chunks: HashMap<ChunkId, u32>,
    /// Whether every line starts with something other than a line break (then sums are exact).
    pub(crate) exact: bool,
}

fn kind_name(k: RelationKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl LeanragIndex {
    /// Builds the index over `g0`.
    pub async fn build(g0: BaseGraph, models: &Models, config: &LeanragConfig) -> Result<Self> {
        config.validate()?;
        let mut stats = LeanragStats {
            entities: g0.entities.len(),
            base_relations: g0.relations.len(),
            ..LeanragStats::default()
        };
        // The aggregates' vectors and the summariser's sentences go through one embedder: the model's, or
        // its sentences composed (`description_vectors`, unless the aggregates are seeds); G0's (the seeds)
        // are embedded whole unless `all_sentences` composes them too.
        let composes = config.composes_descriptions(models.chat.is_some());
        let descriptions = SentenceMean::wrap_if(
            models.embedder.clone(),
            composes,
            g0.sentence_aliases.clone(),
            models.scratch_dir.as_deref(),
        );
        let started = Instant::now();
        let texts: Vec<String> = g0
            .entities
            .iter()
            .map(|e| {
                let d = Encoding::Cl100kBase
                    .truncate(&e.description, config.embed_max_tokens)
                    .unwrap_or(&e.description);
                kgrag_text::composed::description_or_name(&e.name, d).to_owned()
            })
            .collect();
        let vectors = embed_texts(
            if config.description_vectors.composes_entities() {
                descriptions.as_ref()
            } else {
                models.embedder.as_ref()
            },
            &texts,
            config.embed_batch,
            "G0 entity descriptions",
        )
        .await?;
        drop(texts);
        *stats.secs.entry("leanrag_embed".into()).or_default() += started.elapsed().as_secs_f64();

        // G0's records handed over to the hierarchy (nothing below reads them again).
        let started = Instant::now();
        let base: Vec<BaseEntity> = g0
            .entities
            .into_iter()
            .zip(vectors)
            .enumerate()
            .map(|(i, (e, v))| BaseEntity {
                key: format!("leanrag-g0:{i}"),
                name: e.name,
                entity_type: e.entity_type,
                description: e.description,
                sources: e.sources,
                embedding: v,
            })
            .collect();
        let relations: Vec<BaseRelation> = g0
            .relations
            .into_iter()
            .map(|(a, b, d)| BaseRelation {
                source: a,
                target: b,
                description: d,
            })
            .collect();
        let text = Arc::new(
            ExtractiveSummarizer::new(descriptions.clone(), Encoding::Cl100kBase)
                .with_memo(!composes),
        );
        let extractive = ExtractiveClusterSummarizer::new(text);
        let counted = models.chat.clone().map(|c| Arc::new(CountingChat::new(c)));
        let llm = counted.as_ref().map(|c| {
            LlmClusterSummarizer::new(c.clone() as Arc<dyn ChatModel>, extractive.clone())
        });
        let summarizer: &dyn ClusterSummarizer = match &llm {
            Some(l) => l,
            None => &extractive,
        };
        let hierarchy = build_leanrag(
            base,
            relations,
            descriptions.as_ref(),
            summarizer,
            &config.hierarchy(),
        )
        .await?;
        if let Some(c) = &counted {
            stats.llm = c.usage();
        }
        // The summarisers and their sentence vectors are done with: given back before the seeds' block.
        drop(llm);
        drop(extractive);
        drop(descriptions);
        drop(g0.sentence_aliases);
        *stats.secs.entry("leanrag_aggregate".into()).or_default() +=
            started.elapsed().as_secs_f64();
        stats.nodes_per_layer = hierarchy.layer_sizes();
        stats.layers = hierarchy
            .log
            .iter()
            .map(|l| LayerStats {
                layer: l.layer,
                n: l.n,
                k: l.k,
                k_bic: l.k_bic,
                clusters: l.clusters,
                sparsity: l.sparsity,
                outcomes: l.outcomes.clone(),
                umap_init: l.umap_init,
            })
            .collect();
        for r in &hierarchy.relations {
            *stats
                .relations_by_kind
                .entry(kind_name(r.kind))
                .or_default() += 1;
        }
        let chunks: BTreeMap<ChunkId, String> = g0.chunks.into_iter().collect();
        let mut index = Self {
            config: config.clone(),
            hierarchy,
            chunks,
            vectors: None,
            rows: Vec::new(),
            relation_of: Vec::new(),
            line_tokens: LineTokens::default(),
            stats,
            seed_screen: None,
        };
        index.index_seeds()?;
        index.rebuild_lookups();
        Ok(index)
    }

    fn index_seeds(&mut self) -> Result<()> {
        let nodes: Vec<&kgrag_hierarchy::HNode> = match self.config.seed_layers {
            SeedLayers::Base => self
                .hierarchy
                .layers
                .first()
                .into_iter()
                .flatten()
                .collect(),
            SeedLayers::Aggregate => self.hierarchy.layers.iter().skip(1).flatten().collect(),
        };
        let nodes: Vec<&kgrag_hierarchy::HNode> = nodes
            .into_iter()
            .filter(|n| !n.embedding.is_empty())
            .collect();
        self.rows = nodes.iter().map(|n| n.id).collect();
        self.stats.seed_vectors = self.rows.len();
        let Some(dim) = nodes.first().map(|n| n.embedding.len()) else {
            self.vectors = None;
            return Ok(());
        };
        let mut flat = Vec::with_capacity(nodes.len() * dim);
        for n in &nodes {
            if n.embedding.len() != dim {
                return Err(LeanragError::Input(format!(
                    "node {} has an embedding of dimension {}, expected {dim}",
                    n.id,
                    n.embedding.len()
                )));
            }
            flat.extend_from_slice(&n.embedding);
        }
        let mut vectors = ExactIndex::new(dim, Metric::Cosine)?;
        vectors.add_owned(flat)?;
        self.vectors = Some(vectors);
        self.drop_seed_embeddings();
        Ok(())
    }

    /// Lets go of the seed nodes' own embeddings once the seed index holds them: nothing reads them
    /// again (retrieval searches the index, [`export_reference`](crate::export::export_reference) reads
    /// its rows), and they were a second copy of every base entity's vector (at 30,000 synthetic passages
    /// 45,000 vectors, ~1.5 MB per 1,000 passages at 256 dimensions), in memory and in the saved index.
    fn drop_seed_embeddings(&mut self) {
        let seeds: std::collections::HashSet<NodeId> = self.rows.iter().copied().collect();
        for n in self.hierarchy.layers.iter_mut().flatten() {
            if seeds.contains(&n.id) {
                n.embedding = Vec::new();
            }
        }
    }

    /// Lets go of the sources held by the nodes above the base layer when no retrieval reads them (seeds
    /// on the base layer): each such node's sources are its children's, concatenated in order (an
    /// aggregate's members, a promoted copy's one node, the root's top layer), so
    /// [`node_sources`](Self::node_sources) makes them again where they are wanted (the reference export,
    /// PostgreSQL's projection). Held, they were every base node's sources once more per layer — at
    /// 30,000 synthetic passages ~60 MB, 2 MB per 1,000 passages.
    fn drop_derived_sources(&mut self) {
        if self.config.seed_layers != SeedLayers::Base {
            return;
        }
        for n in self.hierarchy.layers.iter_mut().skip(1).flatten() {
            n.sources = Vec::new();
        }
    }

    /// The source chunks of node `id`, repeats kept: a base node's own; above the base layer, those held
    /// or else its children's concatenated in order (as the build made them; see `drop_derived_sources`).
    pub fn node_sources(&self, id: NodeId) -> std::borrow::Cow<'_, [ChunkId]> {
        let h = &self.hierarchy;
        let Some(node) = h.node(id) else {
            return std::borrow::Cow::Borrowed(&[]);
        };
        if id.layer == 0 || !node.sources.is_empty() {
            return std::borrow::Cow::Borrowed(&node.sources);
        }
        let mut out = Vec::new();
        // Depth first, children in order: the concatenation of the children's concatenations.
        let mut stack: Vec<NodeId> = node.children.iter().rev().copied().collect();
        while let Some(c) = stack.pop() {
            let Some(n) = h.node(c) else { continue };
            if c.layer == 0 || !n.sources.is_empty() || c.layer >= id.layer {
                out.extend_from_slice(&n.sources);
            } else {
                stack.extend(n.children.iter().rev().copied());
            }
        }
        std::borrow::Cow::Owned(out)
    }

    fn rebuild_lookups(&mut self) {
        self.drop_derived_sources();
        let relations = &self.hierarchy.relations;
        let mut by_pair: Vec<u32> = (0..relations.len() as u32).collect();
        // By pair, the latest first, so that the pair's first entry is its last relation.
        by_pair.sort_unstable_by_key(|&i| (pair_of(&relations[i as usize]), std::cmp::Reverse(i)));
        by_pair.dedup_by_key(|i| pair_of(&relations[*i as usize]));
        by_pair.shrink_to_fit();
        self.relation_of = by_pair;
        self.count_lines();
    }

    /// The seed line of a node (`name\t\tparent\t\tdescription`).
    pub(crate) fn seed_line(&self, n: &kgrag_hierarchy::HNode) -> String {
        let parent = n
            .parents
            .first()
            .and_then(|&p| self.hierarchy.node(p))
            .map_or("root", |p| p.name.as_str());
        format!("{}\t\t{}\t\t{}", n.name, parent, n.description)
    }

    /// The aggregate line of a node (`name\t\tdescription`, findings appended when configured).
    pub(crate) fn aggregate_line(&self, n: &kgrag_hierarchy::HNode) -> String {
        if self.config.include_findings {
            let findings: Vec<String> = n
                .findings
                .iter()
                .map(|f| format!("{}: {}", f.summary, f.explanation))
                .collect();
            format!("{}\t\t{}\t\t{}", n.name, n.description, findings.join("; "))
        } else {
            format!("{}\t\t{}", n.name, n.description)
        }
    }

    fn count_lines(&mut self) {
        use rayon::prelude::*;
        let line = |text: String| crate::cl100k(&(text + "\n")) as u32;
        let starts_clean = |t: &str| !t.is_empty() && !t.starts_with(['\n', '\r']);
        let mut exact = true;
        let nodes: Vec<Vec<(u32, u32)>> = self
            .hierarchy
            .layers
            .iter()
            .map(|layer| {
                layer
                    .par_iter()
                    .map(|n| (line(self.seed_line(n)), line(self.aggregate_line(n))))
                    .collect()
            })
            .collect();
        let relations: Vec<u32> = self
            .hierarchy
            .relations
            .par_iter()
            .map(|r| line(r.description.clone()))
            .collect();
        exact &= self
            .hierarchy
            .relations
            .iter()
            .all(|r| starts_clean(&r.description));
        let chunks: Vec<(ChunkId, u32)> = self
            .chunks
            .par_iter()
            .map(|(id, text)| (id.clone(), line(text.clone())))
            .collect();
        exact &= self.chunks.values().all(|t| starts_clean(t));
        self.line_tokens = LineTokens {
            nodes,
            relations,
            chunks: chunks.into_iter().collect(),
            exact,
        };
    }

    pub(crate) fn line_tokens(&self) -> &LineTokens {
        &self.line_tokens
    }

    /// An index over a hierarchy built elsewhere (tests, or a hierarchy loaded from disk): the seed vectors
    /// are the nodes' stored embeddings.
    pub fn from_hierarchy(
        hierarchy: Hierarchy,
        chunks: Vec<(ChunkId, String)>,
        config: &LeanragConfig,
    ) -> Result<Self> {
        let mut index = Self {
            config: config.clone(),
            hierarchy,
            chunks: chunks.into_iter().collect(),
            vectors: None,
            rows: Vec::new(),
            relation_of: Vec::new(),
            line_tokens: LineTokens::default(),
            stats: LeanragStats::default(),
            seed_screen: None,
        };
        index.stats.nodes_per_layer = index.hierarchy.layer_sizes();
        index.index_seeds()?;
        index.rebuild_lookups();
        Ok(index)
    }

    /// Writes the index to `path` (checksummed, atomic).
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        kgrag_graph_store::persist::save(path, "leanrag-index", FILE_VERSION, self)?;
        Ok(())
    }

    /// Reads an index written by [`save`](Self::save).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let mut index: Self =
            kgrag_graph_store::persist::load(path, "leanrag-index", FILE_VERSION)?;
        // Files written before the seed nodes let go of their embeddings hold both copies.
        index.drop_seed_embeddings();
        index.rebuild_lookups();
        Ok(index)
    }

    /// The settings.
    pub fn config(&self) -> &LeanragConfig {
        &self.config
    }

    /// Sets the `concurrency` the index records: a build that ran with more requests in flight than its
    /// configuration says (a distributed build's coordinator) records the configured one, as concurrency
    /// never changes what is built.
    pub fn set_recorded_concurrency(&mut self, n: usize) {
        self.config.concurrency = n;
    }

    /// The aggregation tree.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The text of chunk `id`.
    pub fn chunk_text(&self, id: &ChunkId) -> Option<&str> {
        self.chunks.get(id).map(String::as_str)
    }

    /// The chunk store.
    pub fn chunks(&self) -> &BTreeMap<ChunkId, String> {
        &self.chunks
    }

    /// What the build made and cost.
    pub fn stats(&self) -> &LeanragStats {
        &self.stats
    }

    /// The seed vectors and their nodes.
    pub(crate) fn seed_index(&self) -> (Option<&ExactIndex>, &[NodeId]) {
        (self.vectors.as_ref(), &self.rows)
    }

    /// The seed vectors' int8 screen, while they are on disk.
    pub(crate) fn seed_screen(&self) -> Option<&ScreenedIndex> {
        self.seed_screen.as_deref()
    }

    /// Keeps the seed vectors (f32, one row per base node: ~1 KB each at 256 dimensions) in unnamed
    /// scratch files under `dir` (created if missing) instead of memory, with an int8 copy in memory that
    /// screens each query so that only the rows it cannot decide are read
    /// ([`ScreenedIndex::candidates`]); with `None`, in memory. Seeds, scores and contexts are unchanged.
    /// Only base seeds (`seed_layers = "base"`, the default) go to disk: aggregate seeds rank every
    /// row, so they stay in memory. The saved index holds the vectors inline either way. Returns whether
    /// the vectors are on disk now.
    pub fn set_seed_vectors_dir(&mut self, dir: Option<&std::path::Path>) -> Result<bool> {
        match (dir, &mut self.vectors) {
            (Some(dir), Some(vectors)) if self.config.seed_layers == SeedLayers::Base => {
                vectors.rows_on_disk(dir)?;
                self.seed_screen = Some(Arc::new(ScreenedIndex::new(vectors)?));
                Ok(true)
            }
            (_, vectors) => {
                if let Some(v) = vectors {
                    v.rows_in_memory()?;
                }
                self.seed_screen = None;
                Ok(false)
            }
        }
    }

    /// The relation between two origins, if any (any level).
    pub fn relation_between(&self, a: NodeId, b: NodeId) -> Option<&kgrag_hierarchy::HRelation> {
        self.relation_index(a, b)
            .and_then(|i| self.hierarchy.relations.get(i))
    }

    /// The position in [`Hierarchy::relations`] of the relation between two origins.
    pub fn relation_index(&self, a: NodeId, b: NodeId) -> Option<usize> {
        let key = (a.min(b), a.max(b));
        let relations = &self.hierarchy.relations;
        self.relation_of
            .binary_search_by(|&i| pair_of(&relations[i as usize]).cmp(&key))
            .ok()
            .map(|at| self.relation_of[at] as usize)
    }

    /// Whether `id` is an aggregate (or the root).
    pub(crate) fn is_aggregate(&self, id: NodeId) -> bool {
        self.hierarchy
            .node(id)
            .is_some_and(|n| matches!(n.kind, HNodeKind::Aggregate | HNodeKind::Top))
    }
}
