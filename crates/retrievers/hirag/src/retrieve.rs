//! HiRetrieval (spec §7): entity search, communities, text units and relations from entities, the bridge
//! path, and the five modes' context layouts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_graph_store::ScreenedIndex;
use kgrag_types::{
    ChunkId, ContextEntity, ContextRelation, ContextReport, EmbedKind, Embedder, RetrievalRequest,
    RetrievedContext, Retriever, ScoredChunk,
};

use crate::config::Mode;
use crate::index::HiragIndex;
use crate::table::{
    chunk_cells, edge_cells, entity_cells, render, report_cells, Section, CONTENT_HEADER,
    ENTITY_HEADER, RELATION_HEADER,
};
use crate::{HiragError, Result};

/// The fixed context (and answer) when no entity matches the query (spec §7.3; our wording).
pub const FAIL_RESPONSE: &str =
    "Sorry, I cannot answer this question: nothing in the index matches it.";

/// One of HiRAG's retrieval modes over a built index.
pub struct HiragRetriever {
    index: Arc<HiragIndex>,
    embedder: Arc<dyn Embedder>,
    mode: Mode,
}

/// The prefix of `items` whose costs sum to at most `budget` (spec §7.1 `truncate`).
fn truncate<T>(items: &[T], budget: usize, cost: impl Fn(&T) -> usize) -> usize {
    let mut used = 0usize;
    for (i, item) in items.iter().enumerate() {
        used += cost(item);
        if used > budget {
            return i;
        }
    }
    items.len()
}

impl HiragRetriever {
    /// Mode `mode` over `index`, embedding queries with `embedder` (the index's embedder).
    pub fn new(index: Arc<HiragIndex>, embedder: Arc<dyn Embedder>, mode: Mode) -> Self {
        Self {
            index,
            embedder,
            mode,
        }
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The index.
    pub fn index(&self) -> &Arc<HiragIndex> {
        &self.index
    }

    /// Embeds the raw query (no instruction, as the reference does).
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        kgrag_types::embed_one(
            self.embedder.as_ref(),
            query,
            &EmbedKind::Query { instruction: None },
        )
        .await
        .map_err(|e| HiragError::Model(format!("embedding the query: {e}")))
    }

    /// The context for an embedded query: everything after the embedding (spec §7.1–§7.3); `top_k`
    /// caps the ranked passages returned.
    pub fn context_for(&self, query_vector: &[f32], top_k: usize) -> Result<RetrievedContext> {
        let q = Query::new(&self.index);
        let cfg = self.index.config();
        let search_k = match self.mode {
            Mode::Hi | Mode::HiBridge => cfg.top_k.saturating_mul(10),
            _ => cfg.top_k,
        };
        let overall = q.entities(query_vector, search_k)?;
        let mut ctx = RetrievedContext {
            method: self.mode.method_name().to_owned(),
            ..RetrievedContext::default()
        };
        if overall.is_empty() {
            ctx.rendered = FAIL_RESPONSE.to_owned();
            ctx.context_tokens = crate::tokens(FAIL_RESPONSE);
            ctx.stats.insert("no_entity_hit".into(), 1.0);
            return Ok(ctx);
        }
        ctx.stats.insert("no_entity_hit".into(), 0.0);
        let local: Vec<u32> = overall.iter().take(cfg.top_k).map(|h| h.0).collect();
        let units = q.text_units(&local);
        let shown_units = truncate(&units, cfg.text_units_budget, |&c| {
            q.index.chunks()[c as usize].content_tokens as usize
        });
        let wants_communities = !matches!(self.mode, Mode::HiLocal);
        let communities = if wants_communities {
            q.communities(&local)
        } else {
            Vec::new()
        };
        let mut sections = Vec::new();
        let mut path_edges: Vec<u32> = Vec::new();
        if matches!(self.mode, Mode::Hi | Mode::HiBridge) {
            let keys = q.key_entities(&communities, &overall);
            let bridge = q.index.graph().bridge_path(&keys);
            path_edges = q.truncate_edges(
                q.index.graph().bridge_edges(&bridge, cfg.bridge_edges),
                cfg.bridge_budget,
            );
            let path = bridge.nodes;
            ctx.stats.insert("key_entities".into(), keys.len() as f64);
            ctx.stats.insert("path_nodes".into(), path.len() as f64);
            ctx.stats
                .insert("bridge_edges".into(), path_edges.len() as f64);
            ctx.paths.push(
                path.iter()
                    .filter_map(|&n| q.index.graph().node(n).map(|n| n.name.clone()))
                    .collect(),
            );
        }
        let local_relations = if matches!(self.mode, Mode::HiLocal | Mode::HiNobridge) {
            q.relations(&local)
        } else {
            Vec::new()
        };
        match self.mode {
            Mode::Hi => {
                sections.push(q.reports_section("Backgrounds", &communities, true));
                sections.push(q.relations_section("Reasoning Path", &path_edges));
                sections.push(q.entities_section("Detail Entity Information", &local));
                sections.push(q.sources_section("Source Documents", &units[..shown_units]));
            }
            Mode::HiBridge => {
                sections.push(q.relations_section("Reasoning Path", &path_edges));
                sections.push(q.sources_section("Source Documents", &units[..shown_units]));
            }
            Mode::HiGlobal => {
                sections.push(q.reports_section("Backgrounds", &communities, false));
                sections.push(q.sources_section("Source Documents", &units[..shown_units]));
            }
            Mode::HiLocal => {
                sections.push(q.entities_section("Entities", &local));
                sections.push(q.relations_section("Relations", &local_relations));
                sections.push(q.sources_section("Sources", &units[..shown_units]));
            }
            Mode::HiNobridge => {
                sections.push(q.reports_section("Reports", &communities, false));
                sections.push(q.entities_section("Entities", &local));
                sections.push(q.relations_section("Relationships", &local_relations));
                sections.push(q.sources_section("Sources", &units[..shown_units]));
            }
        }
        let (rendered, context_tokens) = render(sections);
        ctx.rendered = rendered;
        ctx.context_tokens = context_tokens;
        let g = q.index.graph();
        ctx.entities = overall
            .iter()
            .take(cfg.top_k)
            .filter_map(|&(n, score)| {
                let node = g.node(n)?;
                Some(ContextEntity {
                    name: node.name.clone(),
                    entity_type: node.entity_type.clone(),
                    description: node.description.clone(),
                    layer: node.layer,
                    score: f64::from(score),
                })
            })
            .collect();
        let shown_relations: &[u32] = if path_edges.is_empty() {
            &local_relations
        } else {
            &path_edges
        };
        ctx.relations = shown_relations
            .iter()
            .filter_map(|&e| {
                let edge = g.edge(e)?;
                Some(ContextRelation {
                    source: g.node(edge.a)?.name.clone(),
                    target: g.node(edge.b)?.name.clone(),
                    description: edge.description.clone(),
                    score: (g.degree(edge.a) + g.degree(edge.b)) as f64,
                })
            })
            .collect();
        if self.mode != Mode::HiBridge {
            ctx.reports = communities
                .iter()
                .filter_map(|&c| {
                    let c = q.index.community(c)?;
                    Some(ContextReport {
                        community: c.id.to_string(),
                        level: c.level,
                        title: c.report.title.clone(),
                        text: c.report_string.clone(),
                        score: c.report.rating,
                    })
                })
                .collect();
        }
        let n = units.len().max(1) as f64;
        ctx.passages = units
            .iter()
            .take(top_k)
            .enumerate()
            .map(|(i, &c)| ScoredChunk {
                chunk_id: q.index.chunks()[c as usize].id.clone(),
                score: 1.0 - i as f64 / n,
            })
            .collect();
        ctx.stats.insert("entities".into(), local.len() as f64);
        ctx.stats
            .insert("communities".into(), communities.len() as f64);
        ctx.stats.insert("text_units".into(), shown_units as f64);
        Ok(ctx)
    }

    /// The chunk ids of the text units `ctx` rendered, in order.
    pub fn rendered_units<'a>(&self, ctx: &'a RetrievedContext) -> &'a [ScoredChunk] {
        let shown = ctx.stats.get("text_units").copied().unwrap_or(0.0) as usize;
        &ctx.passages[..shown.min(ctx.passages.len())]
    }

    /// The text of chunk `id`.
    pub fn chunk_text(&self, id: &ChunkId) -> Option<&str> {
        let chunks = self.index.chunks();
        chunks
            .binary_search_by(|c| c.id.cmp(id))
            .ok()
            .map(|i| chunks[i].content.as_str())
    }
}

#[async_trait]
impl Retriever for HiragRetriever {
    fn name(&self) -> &str {
        self.mode.method_name()
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> kgrag_types::Result<RetrievedContext> {
        kgrag_types::retrieve_by_vector("hirag", self.embed_query(&request.query), |v| {
            self.context_for(v, request.top_k)
        })
        .await
    }
}

/// The per-query computations over one index.
struct Query<'a> {
    index: &'a HiragIndex,
}

impl<'a> Query<'a> {
    fn new(index: &'a HiragIndex) -> Self {
        Self { index }
    }

    /// Cosine top-`k` entities, hits below the floor dropped; ties by entity-vector row.
    /// With the vectors on disk, only the rows their screen cannot rule out are scored (exactly as a full
    /// scan scores them, every row tied with the `k`-th among them).
    fn entities(&self, v: &[f32], k: usize) -> Result<Vec<(u32, f32)>> {
        let mut hits: Vec<(u32, f32)> = match self.index.entity_vectors().index() {
            Some(vectors) => {
                ScreenedIndex::candidates_of(self.index.entity_screen(), vectors, v, k)?
                    .into_iter()
                    .map(|h| (h.id as u32, h.score))
                    .collect()
            }
            None => Vec::new(),
        };
        let floor = self.index.config().cosine_floor;
        hits.retain(|&(_, s)| s >= floor);
        let cmp = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if hits.len() > k && k > 0 {
            hits.select_nth_unstable_by(k - 1, cmp);
            hits.truncate(k);
        }
        hits.sort_unstable_by(cmp);
        hits.truncate(k);
        Ok(hits
            .into_iter()
            .filter_map(|(r, s)| Some((self.index.entity_of_row(r as usize)?, s)))
            .collect())
    }

    /// Communities of `local` at level ≤ `level`: by (count desc, rating desc), ties in first-appearance
    /// order, within the reports budget.
    fn communities(&self, local: &[u32]) -> Vec<u32> {
        let cfg = self.index.config();
        let g = self.index.graph();
        let mut found: Vec<(u32, usize)> = Vec::new();
        let mut pos: HashMap<u32, usize> = HashMap::new();
        for &e in local {
            let Some(node) = g.node(e) else { continue };
            for &(level, id) in &node.clusters {
                if level > cfg.level {
                    continue;
                }
                match pos.get(&id) {
                    Some(&p) => found[p].1 += 1,
                    None => {
                        pos.insert(id, found.len());
                        found.push((id, 1));
                    }
                }
            }
        }
        let rating = |id: u32| {
            self.index
                .community(id)
                .map(|c| c.report.rating)
                .filter(|r| r.is_finite())
                .unwrap_or(0.0)
        };
        // Stable: equal keys keep first-appearance order.
        found.sort_by(|a, b| b.1.cmp(&a.1).then(rating(b.0).total_cmp(&rating(a.0))));
        let ids: Vec<u32> = found
            .into_iter()
            .map(|(id, _)| id)
            .filter(|&id| self.index.community(id).is_some())
            .collect();
        let keep = truncate(&ids, cfg.reports_budget, |&id| {
            self.index
                .community(id)
                .map_or(0, |c| c.report_tokens as usize)
        });
        let mut ids = ids;
        ids.truncate(keep);
        if cfg.community_single_one {
            ids.truncate(1);
        }
        ids
    }

    /// Text units of `local` (chunk positions): first occurrence wins with order = the entity's rank;
    /// then by relation count desc (neighbours of the entity whose sources hold the chunk) and chunk id.
    fn text_units(&self, local: &[u32]) -> Vec<u32> {
        let g = self.index.graph();
        let mut units: Vec<(usize, usize, u32)> = Vec::new();
        let mut seen: HashSet<u32> = HashSet::new();
        for (i, &e) in local.iter().enumerate() {
            let Some(node) = g.node(e) else { continue };
            for &c in &node.sources {
                if !seen.insert(c) {
                    continue;
                }
                let relation_counts = g
                    .neighbours(e)
                    .iter()
                    .filter(|&&(n, _)| {
                        g.node(n)
                            .is_some_and(|n| n.sources.binary_search(&c).is_ok())
                    })
                    .count();
                units.push((i, relation_counts, c));
            }
        }
        units.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        units.into_iter().map(|u| u.2).collect()
    }

    fn truncate_edges(&self, mut edges: Vec<u32>, budget: usize) -> Vec<u32> {
        let g = self.index.graph();
        g.rank_edges(&mut edges);
        let keep = truncate(&edges, budget, |&e| {
            g.edge(e).map_or(0, |x| x.description_tokens as usize)
        });
        edges.truncate(keep);
        edges
    }

    /// Every edge incident to `local`, ranked, within the local-relations budget.
    fn relations(&self, local: &[u32]) -> Vec<u32> {
        let g = self.index.graph();
        let edges: Vec<u32> = local
            .iter()
            .flat_map(|&e| g.neighbours(e).iter().map(|&(_, edge)| edge))
            .collect();
        self.truncate_edges(edges, self.index.config().local_relations_budget)
    }

    /// Key entities (spec §7.2 steps 3–4): per selected community in rank order the first `top_m` hits of
    /// `overall` inside it (no community: the first `top_m` hits), de-duplicated, by retrieval rank.
    fn key_entities(&self, communities: &[u32], overall: &[(u32, f32)]) -> Vec<u32> {
        let top_m = self.index.config().top_m;
        let g = self.index.graph();
        let mut ranks: Vec<usize> = Vec::new();
        if communities.is_empty() {
            ranks.extend(0..overall.len().min(top_m));
        } else {
            for &c in communities {
                ranks.extend(
                    overall
                        .iter()
                        .enumerate()
                        .filter(|(_, &(n, _))| {
                            g.node(n)
                                .is_some_and(|n| n.clusters.iter().any(|&(_, id)| id == c))
                        })
                        .map(|(i, _)| i)
                        .take(top_m),
                );
            }
        }
        ranks.sort_unstable();
        ranks.dedup();
        ranks.into_iter().map(|i| overall[i].0).collect()
    }

    fn reports_section(&self, name: &'static str, communities: &[u32], flatten: bool) -> Section {
        let rows = communities
            .iter()
            .filter_map(|&c| self.index.community(c))
            .map(|c| {
                let rest = if flatten {
                    c.row_tokens.0
                } else {
                    c.row_tokens.1
                };
                (report_cells(c, flatten), rest)
            })
            .collect();
        Section {
            name,
            header: CONTENT_HEADER,
            rows,
        }
    }

    fn relations_section(&self, name: &'static str, edges: &[u32]) -> Section {
        let g = self.index.graph();
        let rows = edges
            .iter()
            .filter_map(|&e| Some((edge_cells(g, e), g.edge(e)?.row_tokens)))
            .collect();
        Section {
            name,
            header: RELATION_HEADER,
            rows,
        }
    }

    fn entities_section(&self, name: &'static str, nodes: &[u32]) -> Section {
        let g = self.index.graph();
        let rows = nodes
            .iter()
            .filter_map(|&n| Some((entity_cells(g, n), g.node(n)?.row_tokens)))
            .collect();
        Section {
            name,
            header: ENTITY_HEADER,
            rows,
        }
    }

    fn sources_section(&self, name: &'static str, units: &[u32]) -> Section {
        let rows = units
            .iter()
            .filter_map(|&c| self.index.chunks().get(c as usize))
            .map(|c| (chunk_cells(c), c.row_tokens))
            .collect();
        Section {
            name,
            header: CONTENT_HEADER,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_and_float_form() {
        assert_eq!(truncate(&[3, 4, 5], 7, |&x| x), 2);
        assert_eq!(truncate(&[3, 4, 5], 2, |&x| x), 0);
        assert_eq!(truncate(&[3, 4, 5], 12, |&x| x), 3);
        assert_eq!(truncate::<usize>(&[], 0, |&x| x), 0);
        assert_eq!(crate::table::py_float(9.0), "9.0");
        assert_eq!(crate::table::py_float(0.25), "0.25");
        assert_eq!(crate::table::py_float(17.0), "17.0");
    }
}
