//! HippoRAG 2 synonymy edges (spec hipporag2 §4.2, §4.6).
//!
//! For each source phrase `u` with more than two alphanumeric characters: take its `knn_k` nearest phrases
//! by cosine (the list includes `u` itself), in descending order with ties by row; walk it, stopping at the
//! first neighbour below `threshold` or once `max_per_node` neighbours were accepted; skip `u` itself and
//! the empty phrase; accept the rest with their cosine. The k-NN is exact (blocked matrix products over the
//! phrase matrix); only neighbours at or above the threshold are kept while scanning, which gives the same
//! list prefix as sorting all `knn_k` first.
//!
//! **Incremental insert.** Only the new phrases are scanned, against all phrases; for each accepted old
//! phrase `v` that passes the length guard and still has fewer than `max_per_node` accepted neighbours, the
//! reverse direction `v → u` is recorded as well. That equals a from-scratch build whenever no old phrase's
//! cap is reached, and never scans all against all again.

use kgrag_types::Normalisation;
use petgraph::stable_graph::NodeIndex;

use crate::error::invalid;
use crate::vector::{ExactIndex, VectorIndex};
use crate::{KnowledgeGraph, Result};

/// Synonymy settings (HippoRAG 2 defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynonymyConfig {
    /// Minimum cosine (0.8).
    pub threshold: f32,
    /// Length of the k-NN list, the phrase itself included (2047).
    pub knn_k: usize,
    /// Accepted neighbours per source phrase (101: the reference loop breaks once more than 100 are in).
    pub max_per_node: usize,
    /// A source phrase needs at least this many alphanumeric characters (3, i.e. "more than 2").
    pub min_alnum: usize,
    /// Which characters count as alphanumeric (ASCII in `ascii` mode).
    pub normalisation: Normalisation,
}

impl Default for SynonymyConfig {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            knn_k: 2047,
            max_per_node: 101,
            min_alnum: 3,
            normalisation: Normalisation::Ascii,
        }
    }
}

/// One accepted direction: the scan of `from` accepted `to`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynonymyPair {
    /// Row of the scanned phrase.
    pub from: usize,
    /// Row of the accepted neighbour.
    pub to: usize,
    /// Their cosine.
    pub cosine: f32,
}

impl SynonymyConfig {
    fn passes_guard(&self, phrase: &str) -> bool {
        self.normalisation.alphanumeric_count(phrase) >= self.min_alnum
    }
}

/// Scans the rows `sources` of the phrase matrix `index` (row `i` = embedding of `phrases[i]`) and returns
/// the accepted pairs, grouped by source in the order given, each group in scan order.
pub fn scan<S: AsRef<str>>(
    phrases: &[S],
    index: &ExactIndex,
    sources: &[usize],
    config: &SynonymyConfig,
) -> Result<Vec<SynonymyPair>> {
    if phrases.len() != index.len() {
        return Err(invalid(format!(
            "{} phrases but {} phrase vectors",
            phrases.len(),
            index.len()
        )));
    }
    let chosen: Vec<usize> = sources
        .iter()
        .copied()
        .filter(|&u| {
            phrases
                .get(u)
                .is_some_and(|p| config.passes_guard(p.as_ref()))
        })
        .collect();
    if let Some(&bad) = sources.iter().find(|&&u| u >= phrases.len()) {
        return Err(invalid(format!(
            "source row {bad} is outside the {} phrases",
            phrases.len()
        )));
    }
    // A scan of every row in order (a fresh index) is a self-join: half the multiply-adds, same lists.
    let every_row =
        sources.len() == phrases.len() && sources.iter().enumerate().all(|(i, &u)| i == u);
    let lists = if every_row {
        let mut all = index.self_join_min_score(config.knn_k, config.threshold)?;
        chosen
            .iter()
            .map(|&u| std::mem::take(&mut all[u]))
            .collect::<Vec<_>>()
    } else {
        let dim = index.dim();
        let mut queries = Vec::with_capacity(chosen.len() * dim);
        for &u in &chosen {
            if let Some(v) = index.vector(u) {
                queries.extend_from_slice(&v);
            }
        }
        index.search_batch_min_score(&queries, config.knn_k, config.threshold)?
    };
    let mut out = Vec::new();
    for (&u, hits) in chosen.iter().zip(lists) {
        let mut accepted = 0;
        for h in hits {
            if accepted >= config.max_per_node {
                break;
            }
            if h.id == u || phrases[h.id].as_ref().is_empty() {
                continue;
            }
            out.push(SynonymyPair {
                from: u,
                to: h.id,
                cosine: h.score,
            });
            accepted += 1;
        }
    }
    Ok(out)
}

/// What [`add_synonymy_edges`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynonymyStats {
    /// Phrases scanned.
    pub scanned: usize,
    /// Directions accepted by the scans.
    pub accepted: usize,
    /// Reverse directions added for old phrases (incremental inserts).
    pub reverse_added: usize,
}

/// Adds synonymy facets to `graph`. `phrase_nodes[i]` is the node of `phrases[i]` (= row `i` of `index`);
/// `new_rows` are the rows to scan — all rows for a fresh build, the new ones for an insert (then rows not
/// in `new_rows` are treated as old and get reverse directions, see the module docs).
pub fn add_synonymy_edges<S: AsRef<str>>(
    graph: &mut KnowledgeGraph,
    phrases: &[S],
    phrase_nodes: &[NodeIndex],
    index: &ExactIndex,
    new_rows: &[usize],
    config: &SynonymyConfig,
) -> Result<SynonymyStats> {
    if phrase_nodes.len() != phrases.len() {
        return Err(invalid(format!(
            "{} phrases but {} phrase nodes",
            phrases.len(),
            phrase_nodes.len()
        )));
    }
    // Validate before writing anything, so that a bad mapping leaves the graph untouched.
    let mut distinct = std::collections::HashSet::with_capacity(phrase_nodes.len());
    for (row, &n) in phrase_nodes.iter().enumerate() {
        match graph.node(n) {
            Some(node) if node.kind != crate::NodeKind::Passage => {}
            Some(node) => {
                return Err(invalid(format!(
                    "phrase row {row} maps to passage node {:?}",
                    node.key
                )))
            }
            None => {
                return Err(invalid(format!(
                    "phrase row {row} maps to node index {}, which the graph does not hold",
                    n.index()
                )))
            }
        }
        if !distinct.insert(n) {
            return Err(invalid(format!(
                "phrase row {row} maps to node index {} like an earlier row",
                n.index()
            )));
        }
    }
    let pairs = scan(phrases, index, new_rows, config)?;
    let mut is_new = vec![false; phrases.len()];
    for &u in new_rows {
        is_new[u] = true;
    }
    let mut stats = SynonymyStats {
        scanned: new_rows
            .iter()
            .filter(|&&u| config.passes_guard(phrases[u].as_ref()))
            .count(),
        ..SynonymyStats::default()
    };
    let mut old_accepted: std::collections::HashMap<usize, usize> = Default::default();
    for p in pairs {
        let (u, v) = (phrase_nodes[p.from], phrase_nodes[p.to]);
        graph.set_synonymy(u, v, p.cosine)?;
        stats.accepted += 1;
        if !is_new[p.to] && config.passes_guard(phrases[p.to].as_ref()) {
            let count = match old_accepted.entry(p.to) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(graph.synonymy_accepted(v))
                }
            };
            if *count < config.max_per_node {
                graph.set_synonymy(v, u, p.cosine)?;
                *count += 1;
                stats.reverse_added += 1;
            }
        }
    }
    Ok(stats)
}
