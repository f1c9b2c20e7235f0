//! HippoRAG 2 retrieval (spec §5).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kgrag_graph_store::hippo::phrase_key;
use kgrag_graph_store::ppr::PprSolver;
use kgrag_graph_store::vector::{min_max, min_max_scale, top_k_desc};
use kgrag_graph_store::{EmbeddingStore, ScreenedIndex};
use kgrag_text::ReaderTokens;
use kgrag_types::{
    ChatModel, ChunkId, EmbedKind, Embedder, RetrievalRequest, RetrievedContext, Retriever,
    ScoredChunk, ScoredTriple, Triple,
};

use crate::filter::recognise;
use crate::held::{ppr_config, Walk};
use crate::{FilterMode, HippoConfig, HippoError, HippoIndex, Result, SeedWeighting};

/// A phrase of a kept fact as the seed computation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedPhrase {
    /// Its vertex (position in the PPR vector; ties between equal weights go to the lower vertex).
    pub vertex: usize,
    /// `n(p)`: the number of chunks whose triples contain it.
    pub chunks: usize,
}

/// Phrase seed weights of spec §5.4 from the kept facts with their normalised scores, in the filter's order.
/// `lookup` gives a phrase's vertex and chunk count (`None`: not a vertex, ignored). Returns at most `top_k`
/// `(vertex, weight)` pairs, best first (weight descending, then vertex ascending for `averaged`; for
/// `overwrite` the order of selection by mean raw score).
pub fn seed_weights(
    kept: &[(Triple, f64)],
    lookup: impl Fn(&str) -> Option<SeedPhrase>,
    mode: SeedWeighting,
    top_k: usize,
) -> Vec<(usize, f64)> {
    // vertex -> (sum of weights, occurrences, last weight, sum of raw scores)
    let mut acc: BTreeMap<usize, (f64, usize, f64, f64)> = BTreeMap::new();
    for (fact, score) in kept {
        for phrase in [&fact.subject(), &fact.object()] {
            let Some(p) = lookup(phrase) else { continue };
            let weighted = score / p.chunks.max(1) as f64;
            let e = acc.entry(p.vertex).or_insert((0.0, 0, 0.0, 0.0));
            e.0 += weighted;
            e.1 += 1;
            e.2 = weighted;
            e.3 += score;
        }
    }
    let mut ranked: Vec<(usize, f64, f64)> = acc
        .into_iter()
        .map(|(v, (sum, n, last, raw))| {
            let n = n.max(1) as f64;
            match mode {
                SeedWeighting::Averaged => (v, sum / n, sum / n),
                SeedWeighting::Overwrite => (v, last, raw / n),
            }
        })
        .collect();
    ranked.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    ranked.truncate(top_k);
    ranked.into_iter().map(|(v, w, _)| (v, w)).collect()
}

/// What happened inside one query, for reports and debugging.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryTrace {
    /// Candidate facts with their normalised scores, best first.
    pub candidates: Vec<(Triple, f64)>,
    /// Facts kept by the filter, in its order.
    pub kept: Vec<(Triple, f64)>,
    /// Phrase seeds `(phrase, weight before normalisation)`.
    pub seeds: Vec<(String, f64)>,
    /// Whether the ranking fell back to dense retrieval.
    pub dense_fallback: bool,
    /// Why the filter kept nothing, when it failed (LLM error or unparsable reply).
    pub filter_error: Option<String>,
    /// PPR iterations (0 on fallback).
    pub ppr_iterations: usize,
    /// Whether PPR stopped on its tolerance (false when it hit `ppr_max_iter`; true on fallback).
    pub ppr_converged: bool,
}

/// HippoRAG 2 retrieval over a built [`HippoIndex`]: it walks the PPR arcs the index made under its own
/// edge weights and solver settings, or, when the retriever's differ, arcs of its own made from the graph
/// unpacked once. Build a new retriever after the index changes.
pub struct HippoRetriever {
    index: Arc<HippoIndex>,
    embedder: Arc<dyn Embedder>,
    chat: Option<Arc<dyn ChatModel>>,
    config: HippoConfig,
    /// The arcs and the solver every query's is forked from.
    walk: Arc<Walk>,
    phrase_vertex: Vec<Option<usize>>,
    passage_vertex: Vec<Option<usize>>,
    /// An int8 copy of the fact vectors: the candidate facts and the score range without a full scan.
    fact_screen: Option<ScreenedIndex>,
    /// Reader-context token counts per passage row.
    reader_tokens: ReaderTokens,
    /// Idle PPR solvers (one per concurrent query at most), so a query allocates no buffers.
    solvers: Mutex<Vec<PprSolver>>,
}

impl HippoRetriever {
    /// A retriever over `index` with the query-time keys of `config`; `embedder` must be the index's
    /// embedder; `chat` is required when `config.filter` is [`FilterMode::Llm`].
    pub fn new(
        index: Arc<HippoIndex>,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
        config: HippoConfig,
    ) -> Result<Self> {
        if config.filter == FilterMode::Llm && chat.is_none() {
            return Err(HippoError::Invalid(
                "filter = \"llm\" needs a chat model; configure one or set filter = \"none\""
                    .into(),
            ));
        }
        if !(0.0..1.0).contains(&config.damping) {
            return Err(HippoError::Invalid(format!(
                "damping must be in [0, 1), got {}",
                config.damping
            )));
        }
        if config.ppr_max_iter == 0 {
            return Err(HippoError::Invalid(
                "ppr_max_iter must be at least 1 (0 would return the seed vector as the ranking)"
                    .into(),
            ));
        }
        let weighting = config.graph_weights.weighting();
        let ppr = ppr_config(&config);
        let held = index.held_graph();
        // The fact screen (an int8 copy of the fact vectors) is built beside the arcs when the retriever
        // makes its own.
        let (walk, fact_screen) = rayon::join(
            || -> Result<Arc<Walk>> {
                match held.walk(weighting, &ppr) {
                    Some(walk) => Ok(walk),
                    // Solver settings are checked once here rather than failing every query.
                    None => Ok(Arc::new(Walk::new(&index.graph()?, weighting, ppr)?)),
                }
            },
            || index.facts().index().map(ScreenedIndex::new),
        );
        let walk = walk?;
        let fact_screen = fact_screen.transpose()?;
        let phrase_vertex = (0..index.phrases().len())
            .map(|row| index.phrase_node(row).and_then(|n| walk.vertex(n)))
            .collect();
        let passages = index.passages();
        let passage_vertex: Vec<Option<usize>> = passages
            .keys()
            .map(|k| held.passage_node(k).and_then(|n| walk.vertex(n)))
            .collect();
        let reader_tokens = ReaderTokens::new(index.passages().len());
        let first = walk.solver();
        Ok(Self {
            index,
            embedder,
            chat,
            config,
            walk,
            phrase_vertex,
            passage_vertex,
            fact_screen,
            reader_tokens,
            solvers: Mutex::new(vec![first]),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &HippoConfig {
        &self.config
    }

    /// The `linking_top_k` best facts for `q_f` with their min-max normalised scores (spec §5.2), best
    /// first, ties by row: from the int8 screen (exact scores of the candidates and of the range), or a
    /// full scan when the screen cannot be used (non-finite values).
    fn candidate_facts(&self, facts: &EmbeddingStore, q_f: &[f32]) -> Result<Vec<(usize, f64)>> {
        let k = self.config.linking_top_k;
        if let (Some(screen), Some(index)) = (&self.fact_screen, facts.index()) {
            let r = screen.top_k_range(index, q_f, k)?;
            if r.min.is_finite() && r.max.is_finite() && r.top.iter().all(|h| h.score.is_finite()) {
                let (lo, hi) = (f64::from(r.min), f64::from(r.max));
                return Ok(r
                    .top
                    .iter()
                    .map(|h| (h.id, min_max_scale(f64::from(h.score), lo, hi)))
                    .collect());
            }
        }
        let s = min_max(&facts.scores(q_f)?);
        Ok(top_k_desc(&s, k)
            .into_iter()
            .map(|row| (row, s[row]))
            .collect())
    }

    async fn embed_query(&self, query: &str, instruction: &str) -> Result<Vec<f32>> {
        let kind = EmbedKind::Query {
            instruction: Some(instruction.to_owned()),
        };
        let e = self
            .embedder
            .embed(&[query.to_owned()], &kind)
            .await
            .map_err(HippoError::Embed)?;
        e.row(0).map(<[f32]>::to_vec).ok_or_else(|| {
            HippoError::Embed(kgrag_types::Error::InvalidInput(
                "the embedder returned no vector for the query".into(),
            ))
        })
    }

    /// Retrieves the top `top_k` passages for `query` (spec §5), with a trace of the steps.
    pub async fn query(&self, query: &str, top_k: usize) -> Result<(RetrievedContext, QueryTrace)> {
        let mut trace = QueryTrace::default();
        let passages = self.index.passages();
        let q_p = self
            .embed_query(query, &self.config.query_instruction_passage)
            .await?;
        let dpr = min_max(&passages.scores(&q_p)?);

        let facts = self.index.facts();
        if !facts.is_empty() {
            // An embedder that ignores instructions gives the fact instruction's vector already.
            let q_f = if self.embedder.reads_instructions() {
                self.embed_query(query, &self.config.query_instruction_fact)
                    .await?
            } else {
                q_p.clone()
            };
            for (row, score) in self.candidate_facts(facts, &q_f)? {
                if let Some(t) = self.index.fact(row) {
                    trace.candidates.push((t.clone(), score));
                }
            }
        }
        trace.kept = match (self.config.filter, &self.chat) {
            (FilterMode::None, _) | (_, None) => trace.candidates.clone(),
            (FilterMode::Llm, Some(chat)) => {
                let triples: Vec<Triple> = trace.candidates.iter().map(|c| c.0.clone()).collect();
                let outcome = recognise(chat.as_ref(), query, &triples, &self.config).await;
                trace.filter_error = outcome.error;
                outcome
                    .kept
                    .into_iter()
                    .take(self.config.linking_top_k)
                    .filter_map(|i| trace.candidates.get(i).cloned())
                    .collect()
            }
        };

        let mut ctx = RetrievedContext {
            method: "hipporag2".to_owned(),
            ..RetrievedContext::default()
        };
        // A seed's name is its phrase: the phrase node's name.
        let mut seed_names: HashMap<usize, &str> = HashMap::new();
        let seeds = if trace.kept.is_empty() {
            Vec::new()
        } else {
            let lookup = |p: &str| {
                let row = self.index.phrases().row(&phrase_key(p))?;
                let vertex = (*self.phrase_vertex.get(row)?)?;
                let chunks = self.index.held_graph().phrase_chunks(row);
                Some(SeedPhrase { vertex, chunks })
            };
            for (t, _) in &trace.kept {
                for p in [t.subject(), t.object()] {
                    if let Some(s) = lookup(p) {
                        seed_names.entry(s.vertex).or_insert(p);
                    }
                }
            }
            seed_weights(
                &trace.kept,
                lookup,
                self.config.seed_weighting,
                self.config.linking_top_k,
            )
        };
        let mut reset = vec![0.0f64; self.walk.vertex_count()];
        for &(v, w) in &seeds {
            reset[v] += w;
        }
        for (row, v) in self.passage_vertex.iter().enumerate() {
            if let (Some(v), Some(d)) = (v, dpr.get(row)) {
                reset[*v] += self.config.passage_node_weight * d;
            }
        }
        reset
            .iter_mut()
            .filter(|x| !x.is_finite() || **x < 0.0)
            .for_each(|x| *x = 0.0);
        let total: f64 = reset.iter().sum();
        if trace.kept.is_empty() || total <= 0.0 {
            // Spec §5.6: nothing survived the filter (or nothing to walk from) -> dense ranking.
            trace.dense_fallback = true;
            trace.ppr_converged = true;
            for row in top_k_desc(&dpr, top_k) {
                push_passage(&mut ctx, passages, row, dpr[row])?;
            }
        } else {
            trace.seeds = seeds
                .iter()
                .filter_map(|&(v, w)| Some(((*seed_names.get(&v)?).to_owned(), w)))
                .collect();
            reset.iter_mut().for_each(|x| *x /= total);
            let idle = self.solvers.lock().ok().and_then(|mut pool| pool.pop());
            let mut solver: PprSolver = match idle {
                Some(s) => s,
                None => self.walk.solver(),
            };
            let run = solver.run(&reset)?;
            trace.ppr_iterations = run.iterations;
            trace.ppr_converged = run.converged;
            let scores = solver.scores();
            let mut ranked: Vec<(usize, usize, f64)> = self
                .passage_vertex
                .iter()
                .enumerate()
                .filter_map(|(row, v)| v.map(|v| (v, row, scores[v])))
                .collect();
            if let Ok(mut pool) = self.solvers.lock() {
                pool.push(solver);
            }
            let order = |a: &(usize, usize, f64), b: &(usize, usize, f64)| {
                b.2.total_cmp(&a.2).then(a.0.cmp(&b.0))
            };
            if top_k < ranked.len() {
                ranked.select_nth_unstable_by(top_k, order);
                ranked.truncate(top_k);
            }
            ranked.sort_by(order);
            for &(_, row, score) in &ranked {
                push_passage(&mut ctx, passages, row, score)?;
            }
        }
        ctx.facts = trace
            .kept
            .iter()
            .map(|(t, s)| ScoredTriple {
                triple: t.clone(),
                score: *s,
            })
            .collect();
        let keys = ctx
            .passages
            .iter()
            .take(self.config.qa_top_k)
            .map(|p| p.chunk_id.as_str());
        (ctx.rendered, ctx.context_tokens) = self
            .reader_tokens
            .reader_context(passages.rows_and_texts(keys));
        ctx.stats.insert(
            "dense_fallback".into(),
            f64::from(u8::from(trace.dense_fallback)),
        );
        ctx.stats
            .insert("candidate_facts".into(), trace.candidates.len() as f64);
        ctx.stats
            .insert("kept_facts".into(), trace.kept.len() as f64);
        ctx.stats
            .insert("ppr_iterations".into(), trace.ppr_iterations as f64);
        // 1 when the walk stopped at `ppr_max_iter` before reaching `ppr_tol`: its scores are approximate.
        ctx.stats.insert(
            "ppr_not_converged".into(),
            f64::from(u8::from(!trace.ppr_converged)),
        );
        ctx.stats.insert(
            "filter_error".into(),
            f64::from(u8::from(trace.filter_error.is_some())),
        );
        Ok((ctx, trace))
    }
}

fn push_passage(
    ctx: &mut RetrievedContext,
    passages: &EmbeddingStore,
    row: usize,
    score: f64,
) -> Result<()> {
    let key = passages.key(row).unwrap_or_default();
    let chunk_id = ChunkId::parse(key)
        .map_err(|_| HippoError::Invalid(format!("passage key {key:?} is not a chunk id")))?;
    ctx.passages.push(ScoredChunk { chunk_id, score });
    Ok(())
}

/// The reader's passage block of the first `qa_top_k` passages and its o200k tokens.
#[async_trait]
impl Retriever for HippoRetriever {
    fn name(&self) -> &str {
        "hipporag2"
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> kgrag_types::Result<RetrievedContext> {
        self.query(&request.query, request.top_k)
            .await
            .map(|(ctx, _)| ctx)
            .map_err(|e| kgrag_types::Error::backend("hipporag2 retrieval", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, o: &str) -> Triple {
        Triple::new(s, "rel", o)
    }

    /// Hand-built example: three kept facts over phrases a (vertex 0, in 2 chunks), b (vertex 1, 1 chunk),
    /// c (vertex 2, 4 chunks), d (vertex 3, 1 chunk) and "x" that is not a vertex.
    fn lookup(p: &str) -> Option<SeedPhrase> {
        match p {
            "a" => Some(SeedPhrase {
                vertex: 0,
                chunks: 2,
            }),
            "b" => Some(SeedPhrase {
                vertex: 1,
                chunks: 1,
            }),
            "c" => Some(SeedPhrase {
                vertex: 2,
                chunks: 4,
            }),
            "d" => Some(SeedPhrase {
                vertex: 3,
                chunks: 1,
            }),
            _ => None,
        }
    }

    fn kept() -> Vec<(Triple, f64)> {
        vec![
            (t("a", "b"), 1.0),
            (t("c", "a"), 0.6),
            (t("b", "x"), 0.2),
            (t("d", "c"), 0.0),
        ]
    }

    #[test]
    fn averaged_seed_weights() {
        // a: (1.0/2 + 0.6/2) / 2 = 0.4;  b: (1.0/1 + 0.2/1) / 2 = 0.6;  c: (0.6/4 + 0.0/4) / 2 = 0.075;
        // d: 0.0/1 = 0.0; "x" is not a vertex. Ranked by weight: b, a, c, d.
        let w = seed_weights(&kept(), lookup, SeedWeighting::Averaged, 5);
        let expect = [(1, 0.6), (0, 0.4), (2, 0.075), (3, 0.0)];
        assert_eq!(w.len(), expect.len());
        for ((v, x), (ev, ex)) in w.iter().zip(expect) {
            assert_eq!(*v, ev);
            assert!((x - ex).abs() < 1e-12, "{v}: {x} vs {ex}");
        }
        // top_k = 2 keeps b and a.
        let w2 = seed_weights(&kept(), lookup, SeedWeighting::Averaged, 2);
        assert_eq!(w2.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 0]);
    }

    #[test]
    fn overwrite_seed_weights() {
        // Weight = s_f / n(p) of the LAST fact holding p: a: 0.6/2 = 0.3 (fact 2); b: 0.2/1 = 0.2 (fact 3);
        // c: 0.0/4 = 0.0 (fact 4); d: 0.0.  Selection by the mean RAW score: a (1.0+0.6)/2 = 0.8,
        // b (1.0+0.2)/2 = 0.6, c (0.6+0.0)/2 = 0.3, d 0.0.
        let w = seed_weights(&kept(), lookup, SeedWeighting::Overwrite, 3);
        let expect = [(0, 0.3), (1, 0.2), (2, 0.0)];
        assert_eq!(w.len(), 3);
        for ((v, x), (ev, ex)) in w.iter().zip(expect) {
            assert_eq!(*v, ev);
            assert!((x - ex).abs() < 1e-12, "{v}: {x} vs {ex}");
        }
    }

    #[test]
    fn ties_go_to_the_lower_vertex_and_unknown_chunk_counts_divide_by_one() {
        let look = |p: &str| match p {
            "p" => Some(SeedPhrase {
                vertex: 7,
                chunks: 0,
            }),
            "q" => Some(SeedPhrase {
                vertex: 3,
                chunks: 1,
            }),
            _ => None,
        };
        let w = seed_weights(&[(t("p", "q"), 0.5)], look, SeedWeighting::Averaged, 5);
        assert_eq!(w, vec![(3, 0.5), (7, 0.5)]);
    }
}
