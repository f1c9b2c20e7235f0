//! LeanRAG's retrieval (spec §6): seeds, pairwise lowest common ancestors, context assembly.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_graph_store::ScreenedIndex;
use kgrag_hierarchy::{Hierarchy, NodeId};
use kgrag_types::{
    ChunkId, ContextEntity, ContextRelation, EmbedKind, Embedder, RetrievalRequest,
    RetrievedContext, Retriever, ScoredChunk,
};

use crate::config::SeedLayers;
use crate::index::LeanragIndex;
use crate::{LeanragError, Result};

/// The path between two nodes through their lowest common ancestor, walking both ancestor chains in
/// lockstep (spec §6.2): `a → … → LCA → … → b`; where the chains cross at different depths the walk stops
/// there. `a == b` gives `[a]`.
pub fn lca_path(h: &Hierarchy, a: NodeId, b: NodeId) -> Vec<NodeId> {
    let chain = |x: NodeId| {
        let mut c = vec![x];
        c.extend(h.ancestors(x));
        c
    };
    let (ca, cb) = (chain(a), chain(b));
    let mut pa: Vec<NodeId> = Vec::new();
    let mut pb: Vec<NodeId> = Vec::new();
    for (&x, &y) in ca.iter().zip(&cb) {
        if x == y {
            pa.push(x);
            break;
        }
        if pb.contains(&x) || pa.contains(&y) {
            break;
        }
        pa.push(x);
        pb.push(y);
    }
    pa.extend(pb.into_iter().rev());
    pa
}

/// LeanRAG's retriever over a built index.
pub struct LeanragRetriever {
    index: Arc<LeanragIndex>,
    embedder: Arc<dyn Embedder>,
}

impl LeanragRetriever {
    /// A retriever over `index`, embedding queries (raw, no instruction) with `embedder`.
    pub fn new(index: Arc<LeanragIndex>, embedder: Arc<dyn Embedder>) -> Self {
        Self { index, embedder }
    }

    /// The index.
    pub fn index(&self) -> &Arc<LeanragIndex> {
        &self.index
    }

    /// Embeds the raw query.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        kgrag_types::embed_one(
            self.embedder.as_ref(),
            query,
            &EmbedKind::Query { instruction: None },
        )
        .await
        .map_err(|e| LeanragError::Model(format!("embedding the query: {e}")))
    }

    /// Seeds (spec §6.1): the `top_n` most similar nodes of the seed layers, best first; among equal
    /// scores the later node first (greater NodeId), as the reference's vector store returns, of rows with
    /// equal scores, the one inserted later (it inserts the nodes level by level in their order). With
    /// aggregate seeds, the best node per origin.
    pub fn seeds(&self, query_vector: &[f32]) -> Result<Vec<(NodeId, f32)>> {
        let (vectors, rows) = self.index.seed_index();
        let Some(vectors) = vectors else {
            return Ok(Vec::new());
        };
        let top_n = self.index.config().top_n;
        // With the vectors on disk (base seeds only), the rows their screen cannot rule out: every row
        // tied with the `top_n`-th among them, each scored exactly as a full scan scores it.
        let mut order: Vec<(usize, f32)> =
            ScreenedIndex::candidates_of(self.index.seed_screen(), vectors, query_vector, top_n)?
                .into_iter()
                .map(|h| (h.id, h.score))
                .collect();
        let cmp = |x: &(usize, f32), y: &(usize, f32)| {
            y.1.total_cmp(&x.1).then(rows[y.0].cmp(&rows[x.0]))
        };
        // Base seeds have one node per origin, so the best `top_n` are all that is needed; aggregate seeds
        // may skip copies and rank everything.
        if self.index.config().seed_layers == SeedLayers::Base && order.len() > top_n {
            order.select_nth_unstable_by(top_n - 1, cmp);
            order.truncate(top_n);
        }
        order.sort_unstable_by(cmp);
        let h = self.index.hierarchy();
        let mut seen_origin = HashSet::new();
        let mut out = Vec::new();
        for (r, score) in order {
            if out.len() == self.index.config().top_n {
                break;
            }
            let id = rows[r];
            if self.index.config().seed_layers == SeedLayers::Aggregate {
                let origin = h.node(id).map_or(id, |n| n.origin);
                if !seen_origin.insert(origin) {
                    continue;
                }
            }
            out.push((id, score));
        }
        Ok(out)
    }

    /// The context for an embedded query (everything after the embedding); `top_k` caps the passages.
    pub fn context_for(&self, query_vector: &[f32], top_k: usize) -> Result<RetrievedContext> {
        let seeds = self.seeds(query_vector)?;
        Ok(self.context_for_seeds(&seeds, top_k))
    }

    /// The context for given seeds (spec §6.2–§6.4).
    pub fn context_for_seeds(&self, seeds: &[(NodeId, f32)], top_k: usize) -> RetrievedContext {
        let index = &self.index;
        let h = index.hierarchy();
        let cfg = index.config();
        let node = |id: NodeId| h.node(id);
        let origin = |id: NodeId| node(id).map_or(id, |n| n.origin);
        let mut relations: Vec<usize> = Vec::new();
        let mut seen_rel: HashSet<usize> = HashSet::new();
        let mut aggregates: Vec<NodeId> = Vec::new();
        let mut paths = Vec::new();
        for i in 0..seeds.len() {
            for j in i + 1..seeds.len() {
                let path = lca_path(h, seeds[i].0, seeds[j].0);
                for (p, &u) in path.iter().enumerate() {
                    for &v in &path[p + 1..] {
                        let (ou, ov) = (origin(u), origin(v));
                        if ou == ov {
                            continue;
                        }
                        if let Some(r) = index.relation_index(ou, ov) {
                            if seen_rel.insert(r) {
                                relations.push(r);
                            }
                        }
                    }
                }
                for &n in &path {
                    if index.is_aggregate(n) && !aggregates.contains(&n) {
                        aggregates.push(n);
                    }
                }
                paths.push(
                    path.iter()
                        .filter_map(|&n| node(n).map(|x| x.name.clone()))
                        .collect::<Vec<_>>(),
                );
            }
        }

        // Chunks: the seeds' sources (multisets) counted; counts > 1 first (count desc, ties first seen),
        // then the rest in first-seen order.
        let mut counts: Vec<(ChunkId, usize)> = Vec::new();
        let mut pos: HashMap<ChunkId, usize> = HashMap::new();
        for &(s, _) in seeds {
            for c in index.node_sources(s).iter() {
                match pos.get(c) {
                    Some(&p) => counts[p].1 += 1,
                    None => {
                        pos.insert(c.clone(), counts.len());
                        counts.push((c.clone(), 1));
                    }
                }
            }
        }
        let mut ranked: Vec<(usize, &(ChunkId, usize))> = counts.iter().enumerate().collect();
        ranked.sort_by(|(ia, a), (ib, b)| {
            let (ma, mb) = (a.1 > 1, b.1 > 1);
            mb.cmp(&ma)
                .then(if ma && mb {
                    b.1.cmp(&a.1)
                } else {
                    std::cmp::Ordering::Equal
                })
                .then(ia.cmp(ib))
        });
        let chunks: Vec<&ChunkId> = ranked
            .into_iter()
            .map(|(_, c)| &c.0)
            .filter(|c| index.chunk_text(c).is_some())
            .collect();

        // §6.4 layout, as the reference's `describe` f-string writes it; its cl100k count summed from the
        // index's per-line counts where that is exact.
        let shown: Vec<&str> = chunks
            .iter()
            .take(cfg.top_c)
            .filter_map(|c| index.chunk_text(c))
            .collect();
        let aggregate_header = if cfg.include_findings {
            "entity_name\t\tentity_description\t\tfindings"
        } else {
            "entity_name\t\tentity_description"
        };
        let seed_nodes: Vec<_> = seeds.iter().filter_map(|&(s, _)| node(s)).collect();
        let aggregate_nodes: Vec<_> = aggregates.iter().filter_map(|&a| node(a)).collect();
        let relation_texts: Vec<(usize, &str)> = relations
            .iter()
            .filter_map(|&r| Some((r, h.relations.get(r)?.description.as_str())))
            .collect();
        let seed_lines: Vec<String> = seed_nodes.iter().map(|n| index.seed_line(n)).collect();
        let aggregate_lines: Vec<String> = aggregate_nodes
            .iter()
            .map(|n| index.aggregate_line(n))
            .collect();
        let rendered = describe(
            &seed_lines,
            aggregate_header,
            &aggregate_lines,
            &relation_texts.iter().map(|(_, t)| *t).collect::<Vec<_>>(),
            &shown,
        );
        let lt = index.line_tokens();
        let context_tokens = if lt.exact
            && !seed_lines.is_empty()
            && !aggregate_lines.is_empty()
            && !relation_texts.is_empty()
            && !shown.is_empty()
        {
            // Every line ends its last pre-token at its newline, so the context is the sum of: the fixed
            // lines; the seed and aggregate lines (each followed by a newline); the first relation and the
            // first text unit after their four-space indent, counted here; the later ones from the index;
            // the last text unit with the blank line after it; the closing indent.
            let mut tokens = crate::cl100k("\n    entity_information:\n")
                + crate::cl100k("    entity_name\t\tparent\t\tdescription\n")
                + crate::cl100k("    aggregation_entity_information:\n")
                + crate::cl100k(&format!("    {aggregate_header}\n"))
                + crate::cl100k("    reasoning_path_information:\n")
                + crate::cl100k("    text_units:\n")
                + crate::cl100k("    ");
            tokens += seed_nodes
                .iter()
                .map(|n| lt.nodes[n.id.layer as usize][n.id.idx as usize].0 as usize)
                .sum::<usize>();
            tokens += aggregate_nodes
                .iter()
                .map(|n| lt.nodes[n.id.layer as usize][n.id.idx as usize].1 as usize)
                .sum::<usize>();
            for (i, &(r, text)) in relation_texts.iter().enumerate() {
                tokens += if i == 0 {
                    crate::cl100k(&format!("    {text}\n"))
                } else {
                    lt.relations[r] as usize
                };
            }
            let last = shown.len() - 1;
            for (i, text) in shown.iter().enumerate() {
                let indent = if i == 0 { "    " } else { "" };
                let end = if i == last { "\n\n" } else { "\n" };
                tokens += if i == 0 || i == last {
                    crate::cl100k(&format!("{indent}{text}{end}"))
                } else {
                    chunks
                        .get(i)
                        .and_then(|c| lt.chunks.get(*c))
                        .copied()
                        .map_or_else(|| crate::cl100k(&format!("{text}\n")), |t| t as usize)
                };
            }
            tokens
        } else {
            crate::cl100k(&rendered)
        };

        let mut ctx = RetrievedContext {
            method: "leanrag".into(),
            context_tokens,
            ..RetrievedContext::default()
        };
        ctx.rendered = rendered;
        ctx.entities = seeds
            .iter()
            .filter_map(|&(s, score)| {
                let n = node(s)?;
                Some(ContextEntity {
                    name: n.name.clone(),
                    entity_type: n.entity_type.clone(),
                    description: n.description.clone(),
                    layer: n.id.layer,
                    score: f64::from(score),
                })
            })
            .chain(aggregates.iter().filter_map(|&a| {
                let n = node(a)?;
                Some(ContextEntity {
                    name: n.name.clone(),
                    entity_type: n.entity_type.clone(),
                    description: n.description.clone(),
                    layer: n.id.layer,
                    score: 0.0,
                })
            }))
            .collect();
        ctx.relations = relations
            .iter()
            .filter_map(|&r| {
                let rel = h.relations.get(r)?;
                Some(ContextRelation {
                    source: node(rel.a)?.name.clone(),
                    target: node(rel.b)?.name.clone(),
                    description: rel.description.clone(),
                    score: f64::from(rel.level),
                })
            })
            .collect();
        ctx.paths = paths;
        let n = chunks.len().max(1) as f64;
        ctx.passages = chunks
            .iter()
            .take(top_k)
            .enumerate()
            .map(|(i, c)| ScoredChunk {
                chunk_id: (*c).clone(),
                score: 1.0 - i as f64 / n,
            })
            .collect();
        ctx.stats.insert("seeds".into(), seeds.len() as f64);
        ctx.stats
            .insert("aggregates".into(), aggregates.len() as f64);
        ctx.stats.insert("relations".into(), relations.len() as f64);
        ctx.stats.insert("text_units".into(), shown.len() as f64);
        ctx
    }
}

/// The context as the reference's `describe` f-string (`query_graph.py`) lays it out: a newline; four
/// headers, each indented by four spaces, and so is the line after each (the column names, the first
/// relation, the first text unit); the seed and aggregate lines joined by newlines; every text unit
/// followed by a newline; four spaces at the end.
pub fn describe(
    seed_lines: &[String],
    aggregate_header: &str,
    aggregate_lines: &[String],
    relations: &[&str],
    text_units: &[&str],
) -> String {
    let mut units = String::new();
    for t in text_units {
        units.push_str(t);
        units.push('\n');
    }
    format!(
        "\n    entity_information:\n    entity_name\t\tparent\t\tdescription\n{}\n    \
         aggregation_entity_information:\n    {aggregate_header}\n{}\n    \
         reasoning_path_information:\n    {}\n    text_units:\n    {units}\n    ",
        seed_lines.join("\n"),
        aggregate_lines.join("\n"),
        relations.join("\n"),
    )
}

#[async_trait]
impl Retriever for LeanragRetriever {
    fn name(&self) -> &str {
        "leanrag"
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> kgrag_types::Result<RetrievedContext> {
        kgrag_types::retrieve_by_vector("leanrag", self.embed_query(&request.query), |v| {
            self.context_for(v, request.top_k)
        })
        .await
    }
}
