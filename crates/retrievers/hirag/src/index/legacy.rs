//! Index files of versions 2 and 3, written before HiRAG's settings held `entity_text`: the saved
//! index stores its settings field by field in order (postcard), so they are read through a copy of the
//! settings of that time and given the entity text those builds embedded, the reference's
//! `"NAME"` + description.

use std::collections::HashMap;

use kgrag_graph_store::{EmbeddingStore, Packed};
use kgrag_hierarchy::Hierarchy;
use kgrag_openie::Gleaning;
use serde::Deserialize;

use super::{ChunkRecord, CommunityRecord, HiragIndex, IndexStats};
use crate::config::{
    BaseSource, BridgeEdges, ClusterConfig, ClusterDescription, DescriptionVectors, EntityText,
    ExtractionMode, HiragConfig,
};
use crate::graph::HiGraph;

/// [`HiragConfig`] as versions 2 and 3 stored it: every field but `entity_text`, in the same order.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct ConfigV3 {
    base: BaseSource,
    chunk_token_size: usize,
    chunk_overlap: usize,
    extraction: ExtractionMode,
    gleaning: Gleaning,
    max_gleaning: usize,
    entity_types: Vec<String>,
    summary_trigger_tokens: usize,
    cluster_description: ClusterDescription,
    description_vectors: DescriptionVectors,
    cluster: ClusterConfig,
    cluster_threshold: f64,
    sparsity_stop: f64,
    sparsity_change_stop: f64,
    initial_sparsity: f64,
    max_layers: usize,
    max_cluster_prompt_tokens: usize,
    subsample_ratio: f64,
    seed: u64,
    leiden_max_cluster_size: usize,
    leiden_seed: u64,
    leiden_max_iterations: usize,
    report_context_tokens: usize,
    top_k: usize,
    top_m: usize,
    level: u32,
    reports_budget: usize,
    bridge_budget: usize,
    local_relations_budget: usize,
    text_units_budget: usize,
    cosine_floor: f32,
    response_type: String,
    community_single_one: bool,
    bridge_edges: BridgeEdges,
    openie_description_tokens: usize,
    concurrency: usize,
    embed_batch: usize,
    log_layers: bool,
}

impl From<ConfigV3> for HiragConfig {
    fn from(c: ConfigV3) -> Self {
        HiragConfig {
            base: c.base,
            chunk_token_size: c.chunk_token_size,
            chunk_overlap: c.chunk_overlap,
            extraction: c.extraction,
            gleaning: c.gleaning,
            max_gleaning: c.max_gleaning,
            entity_types: c.entity_types,
            summary_trigger_tokens: c.summary_trigger_tokens,
            cluster_description: c.cluster_description,
            description_vectors: c.description_vectors,
            cluster: c.cluster,
            cluster_threshold: c.cluster_threshold,
            sparsity_stop: c.sparsity_stop,
            sparsity_change_stop: c.sparsity_change_stop,
            initial_sparsity: c.initial_sparsity,
            max_layers: c.max_layers,
            max_cluster_prompt_tokens: c.max_cluster_prompt_tokens,
            subsample_ratio: c.subsample_ratio,
            seed: c.seed,
            leiden_max_cluster_size: c.leiden_max_cluster_size,
            leiden_seed: c.leiden_seed,
            leiden_max_iterations: c.leiden_max_iterations,
            report_context_tokens: c.report_context_tokens,
            top_k: c.top_k,
            top_m: c.top_m,
            level: c.level,
            reports_budget: c.reports_budget,
            bridge_budget: c.bridge_budget,
            local_relations_budget: c.local_relations_budget,
            text_units_budget: c.text_units_budget,
            cosine_floor: c.cosine_floor,
            response_type: c.response_type,
            community_single_one: c.community_single_one,
            bridge_edges: c.bridge_edges,
            openie_description_tokens: c.openie_description_tokens,
            concurrency: c.concurrency,
            embed_batch: c.embed_batch,
            log_layers: c.log_layers,
            entity_text: EntityText::NameDescription,
        }
    }
}

/// [`HiragIndex`] as versions 2 and 3 stored it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct IndexV3 {
    config: ConfigV3,
    chunks: Vec<ChunkRecord>,
    graph: HiGraph,
    entity_vectors: EmbeddingStore,
    entity_rows: Vec<u32>,
    hierarchy: Packed<Hierarchy>,
    communities: Vec<CommunityRecord>,
    stats: IndexStats,
}

impl From<IndexV3> for HiragIndex {
    fn from(i: IndexV3) -> Self {
        HiragIndex {
            config: i.config.into(),
            chunks: i.chunks,
            graph: i.graph,
            entity_vectors: i.entity_vectors,
            entity_rows: i.entity_rows,
            hierarchy: i.hierarchy,
            communities: i.communities,
            community_pos: HashMap::new(),
            stats: i.stats,
            entity_screen: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kgrag_types::testing::HashingEmbedder;
    use kgrag_types::{Chunk, ChunkId, DocId, Entity, Extraction, Relation, Span, VecSet};

    use super::*;
    use crate::Models;

    /// An index file as version 3 (or 2) wrote it.
    fn old_layout(index: &HiragIndex) -> IndexV3 {
        // The same settings by name, `entity_text` left behind (`ConfigV3` has no such field).
        let config: ConfigV3 =
            serde_json::from_value(serde_json::to_value(&index.config).unwrap()).unwrap();
        IndexV3 {
            config,
            chunks: index.chunks.clone(),
            graph: index.graph.clone(),
            entity_vectors: index.entity_vectors.clone(),
            entity_rows: index.entity_rows.clone(),
            hierarchy: index.hierarchy.clone(),
            communities: index.communities.clone(),
            stats: index.stats.clone(),
        }
    }

    fn chunk(text: &str, order: usize) -> Chunk {
        Chunk {
            id: ChunkId::from_content(text),
            doc_id: DocId::from_text(text),
            text: text.to_owned(),
            tokens: text.split_whitespace().count(),
            order,
            span: Span::default(),
        }
    }

    async fn small_index() -> HiragIndex {
        let chunks = [
            chunk("Alpha founded Beta in Gamma.", 0),
            chunk("Beta hired Delta.", 1),
        ];
        let entity = |name: &str, c: &Chunk| Entity {
            name: name.into(),
            entity_type: "THING".into(),
            description: c.text.clone(),
            source_chunks: VecSet::from([c.id.clone()]),
        };
        let relation = |a: &str, b: &str, c: &Chunk| Relation {
            source: a.into(),
            target: b.into(),
            keywords: String::new(),
            description: c.text.clone(),
            weight: 1.0,
            source_chunks: VecSet::from([c.id.clone()]),
        };
        let extractions = [
            Extraction {
                chunk_id: chunks[0].id.clone(),
                entities: vec![
                    entity("ALPHA", &chunks[0]),
                    entity("BETA", &chunks[0]),
                    entity("GAMMA", &chunks[0]),
                ],
                relations: vec![
                    relation("ALPHA", "BETA", &chunks[0]),
                    relation("BETA", "GAMMA", &chunks[0]),
                ],
                triples: vec![],
                diagnostics: Default::default(),
            },
            Extraction {
                chunk_id: chunks[1].id.clone(),
                entities: vec![entity("BETA", &chunks[1]), entity("DELTA", &chunks[1])],
                relations: vec![relation("BETA", "DELTA", &chunks[1])],
                triples: vec![],
                diagnostics: Default::default(),
            },
        ];
        let models = Models {
            embedder: Arc::new(HashingEmbedder::new(16)),
            chat: None,
            cheap_chat: None,
            scratch_dir: None,
        };
        let config = HiragConfig {
            log_layers: false,
            ..HiragConfig::default()
        };
        HiragIndex::build(&chunks, &extractions, &models, &config, &HashMap::new())
            .await
            .unwrap()
    }

    /// Files of versions 3 and 2 (settings without `entity_text`) are read: the same index, its entity
    /// text the reference's, and a version-2 file's row token counts taken again; version 1 is refused.
    #[tokio::test]
    async fn files_of_versions_2_and_3_are_read_with_the_references_entity_text() {
        let mut index = small_index().await;
        index.config.entity_text = EntityText::NameDescription;
        let want = serde_json::to_value(&index).unwrap();
        let dir = std::env::temp_dir().join(format!("hirag-legacy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hirag.idx");
        for version in [3, 2] {
            let mut old = old_layout(&index);
            if version == 2 {
                // A version-2 file's counts are stale: load takes them again.
                for r in &mut old.chunks {
                    r.row_tokens = 0;
                }
            }
            kgrag_graph_store::persist::save(&path, "hirag-index", version, &old).unwrap();
            let loaded = HiragIndex::load(&path).unwrap();
            assert_eq!(loaded.config.entity_text, EntityText::NameDescription);
            assert_eq!(
                serde_json::to_value(&loaded).unwrap(),
                want,
                "version {version}"
            );
        }
        kgrag_graph_store::persist::save(&path, "hirag-index", 1, &old_layout(&index)).unwrap();
        let refused = HiragIndex::load(&path).unwrap_err().to_string();
        assert!(refused.contains("version"), "{refused}");
        // The current version round-trips with its own entity text.
        index.config.entity_text = EntityText::Description;
        index.save(&path).unwrap();
        assert_eq!(
            HiragIndex::load(&path).unwrap().config.entity_text,
            EntityText::Description
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
