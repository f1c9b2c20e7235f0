//! One question asked of several indexes (`POST /v1/query` with `"indexes": [...]`): the strategy runs on
//! each index at once, their ranked passages are merged by reciprocal-rank fusion, and the answer is read
//! from the merged passages, citing them — each passage naming its index and source.
//!
//! Fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a passage at rank `r` (from 1) of an index's list
//! scores `1 / (k + r)`, summed over the lists it appears in (`k` = 60 unless the request says
//! otherwise). The same passage text found in two indexes is one passage, listed under both. Ties go to
//! the better single rank, then to the index named first, then to the chunk id.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use kgrag::{PassageHit, Searcher};
use serde::Serialize;
use serde_json::{json, Value};

use crate::api::{check_question, check_range, check_strategy};
use crate::catalog::Lease;
use crate::error::{ApiError, ApiResult};
use crate::indexes::lease_to_read;
use crate::keys::Grant;
use crate::State;

/// The most indexes one question may be asked of.
pub(crate) const MAX_INDEXES: usize = 16;

/// The fusion constant when the request gives none.
pub(crate) const DEFAULT_RRF_K: usize = 60;

/// One index's ranked list, as fusion reads it.
pub(crate) struct Ranked<'a> {
    /// The index's name.
    pub(crate) index: &'a str,
    /// Its passages, best first (their `rank` is their place in the list).
    pub(crate) hits: &'a [PassageHit],
}

/// A merged passage.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Fused {
    /// Rank after fusion, from 1.
    pub(crate) rank: usize,
    /// The index its representative came from (where it ranked best).
    pub(crate) index: String,
    /// Its fused score: the sum of `1 / (k + rank)` over the lists it is in.
    pub(crate) score: f64,
    /// Its rank in each index's list that holds it, by index.
    pub(crate) ranks: Vec<IndexRank>,
    /// The chunk, in `index`.
    pub(crate) chunk_id: String,
    /// The documents holding it, in `index`.
    pub(crate) documents: Vec<String>,
    /// The text.
    pub(crate) text: String,
    /// Where it came from, in `index`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<kgrag::citations::PassageSource>,
    /// The strategy's own score in `index`.
    pub(crate) method_score: f64,
}

/// A passage's rank in one index's list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct IndexRank {
    pub(crate) index: String,
    pub(crate) rank: usize,
}

/// Reciprocal-rank fusion of `lists` (in the order the indexes were named), the first `top_k` kept. A
/// text repeated within one list counts once, at its first place, and the places after it close up.
pub(crate) fn fuse(lists: &[Ranked<'_>], k: usize, top_k: usize) -> Vec<Fused> {
    struct Acc {
        best: (usize, usize),
        ranks: Vec<IndexRank>,
        hit: PassageHit,
        index: String,
    }
    let mut by_text: HashMap<String, usize> = HashMap::new();
    let mut merged: Vec<Acc> = Vec::new();
    for (li, list) in lists.iter().enumerate() {
        let mut seen_here = HashSet::new();
        let mut rank = 0;
        for hit in list.hits {
            let key = normalised(&hit.text);
            if !seen_here.insert(key.clone()) {
                continue;
            }
            rank += 1;
            let entry = IndexRank {
                index: list.index.to_owned(),
                rank,
            };
            match by_text.get(&key) {
                Some(&i) => {
                    let acc = &mut merged[i];
                    acc.ranks.push(entry);
                    if (rank, li) < acc.best {
                        acc.best = (rank, li);
                        acc.hit = hit.clone();
                        acc.index = list.index.to_owned();
                    }
                }
                None => {
                    by_text.insert(key, merged.len());
                    merged.push(Acc {
                        best: (rank, li),
                        ranks: vec![entry],
                        hit: hit.clone(),
                        index: list.index.to_owned(),
                    });
                }
            }
        }
    }
    // Each score summed over its ranks in increasing order: the same ranks give the same bits, so ties
    // are ties and go by the rules.
    let score = |ranks: &[IndexRank]| {
        let mut r: Vec<usize> = ranks.iter().map(|x| x.rank).collect();
        r.sort_unstable();
        r.iter().map(|&r| 1.0 / (k + r) as f64).sum::<f64>()
    };
    let mut scored: Vec<(f64, Acc)> = merged.into_iter().map(|a| (score(&a.ranks), a)).collect();
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.total_cmp(sa)
            .then(a.best.cmp(&b.best))
            .then_with(|| a.hit.chunk_id.as_str().cmp(b.hit.chunk_id.as_str()))
    });
    scored
        .into_iter()
        .take(top_k)
        .enumerate()
        .map(|(i, (score, a))| Fused {
            rank: i + 1,
            index: a.index,
            score,
            ranks: a.ranks,
            chunk_id: a.hit.chunk_id.as_str().to_owned(),
            documents: a.hit.documents,
            text: a.hit.text,
            source: a.hit.source,
            method_score: a.hit.score,
        })
        .collect()
}

/// Text compared for sameness: its words, lower case.
fn normalised(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// What one index returned for the question.
struct Part {
    hits: ApiResult<Vec<PassageHit>>,
    generation: u64,
    retrieve_ms: f64,
}

/// `POST /v1/query` with `indexes`: the checked request's fields.
pub(crate) struct Federated {
    pub(crate) question: String,
    pub(crate) indexes: Vec<String>,
    pub(crate) strategy: Option<String>,
    pub(crate) top_k: Option<usize>,
    pub(crate) answer: bool,
    pub(crate) rrf_k: Option<usize>,
}

/// A question over several indexes, checked, its indexes leased (each stays loaded until it is
/// answered): ready to run.
pub(crate) struct Prepared {
    question: String,
    indexes: Vec<String>,
    answer: bool,
    rrf_k: usize,
    top_k: usize,
    strategy: String,
    leases: Vec<Lease>,
    searchers: Vec<Searcher>,
    started: Instant,
}

/// Where a streamed question's events go (`None`: not streamed): the event's name and its data.
pub(crate) type Events = Option<tokio::sync::mpsc::UnboundedSender<(&'static str, Value)>>;

/// Checks a question asked of several indexes and leases them: every error here comes before any answer
/// (and before a stream starts).
pub(crate) async fn prepare(state: &State, grant: &Grant, q: Federated) -> ApiResult<Prepared> {
    let started = Instant::now();
    check_question(&q.question)?;
    if q.indexes.is_empty() {
        return Err(ApiError::unprocessable(
            "\"indexes\" is empty: name one or more indexes (GET /v1/indexes lists them)",
        ));
    }
    if q.indexes.len() > MAX_INDEXES {
        return Err(ApiError::unprocessable(format!(
            "\"indexes\" names {} indexes: give at most {MAX_INDEXES}",
            q.indexes.len()
        )));
    }
    let mut seen = HashSet::new();
    for name in &q.indexes {
        if !seen.insert(name.as_str()) {
            return Err(ApiError::unprocessable(format!(
                "index {name:?} is named twice in \"indexes\""
            )));
        }
    }
    let rrf_k = check_range("rrf_k", q.rrf_k.unwrap_or(DEFAULT_RRF_K), 1, 1000)?;
    let mut leases: Vec<Lease> = Vec::with_capacity(q.indexes.len());
    for name in &q.indexes {
        leases.push(lease_to_read(state, grant, name).await?);
    }
    let first = leases[0].reader.searcher();
    // Default: the first index's default strategy (its configured one when it answers it).
    let strategy = match &q.strategy {
        Some(s) => s.clone(),
        None => crate::api::default_strategy(&first)
            .map(str::to_owned)
            .unwrap_or_else(|| first.config().retriever.strategy.clone()),
    };
    let top_k = match q.top_k {
        Some(k) => check_range("top_k", k, 1, crate::query::MAX_TOP_K)?,
        None => first.config().retriever.top_k,
    };
    let mut searchers = Vec::with_capacity(leases.len());
    for lease in &leases {
        let searcher = lease.reader.searcher();
        if searcher.generation() == 0 {
            return Err(crate::api::nothing_committed(&lease.name));
        }
        check_strategy(&searcher, &strategy).map_err(|e| {
            ApiError::new(
                e.status,
                e.code,
                format!("index {:?}: {}", lease.name, e.message),
            )
        })?;
        searchers.push(searcher);
    }
    Ok(Prepared {
        question: q.question,
        indexes: q.indexes,
        answer: q.answer,
        rrf_k,
        top_k,
        strategy,
        leases,
        searchers,
        started,
    })
}

/// Answers a prepared question: every index at once, their passages fused, the answer read from them.
/// Streamed, `events` gets each index's passages as it has them (`passages`: `{index, passages}`), the
/// merged passages (`fused`: `{passages}`) and the reader's tokens (`token`: `{text}`).
pub(crate) async fn execute(state: &State, p: Prepared, events: &Events) -> ApiResult<Value> {
    let Prepared {
        question,
        indexes,
        answer,
        rrf_k,
        top_k,
        strategy,
        leases,
        searchers,
        started,
    } = p;
    let send = |name: &'static str, data: Value| {
        if let Some(tx) = events {
            let _ = tx.send((name, data));
        }
    };
    // Every index at once; each task holds its index's lease until it ends.
    let tasks: Vec<_> = leases
        .iter()
        .zip(&searchers)
        .map(|(lease, searcher)| {
            let (lease, searcher) = (lease.clone(), searcher.clone());
            let (question, strategy, tx) = (question.clone(), strategy.clone(), events.clone());
            AbortOnDrop(tokio::spawn(async move {
                let t = Instant::now();
                let hits = searcher
                    .context(&question, &strategy, top_k)
                    .await
                    .map(|ctx| searcher.passages(&ctx, top_k))
                    .map_err(ApiError::from);
                if let (Some(tx), Ok(h)) = (&tx, &hits) {
                    let _ = tx.send(("passages", json!({"index": lease.name, "passages": h})));
                }
                drop(lease);
                Part {
                    hits,
                    generation: searcher.generation(),
                    retrieve_ms: t.elapsed().as_secs_f64() * 1e3,
                }
            }))
        })
        .collect();
    let mut parts = Vec::with_capacity(tasks.len());
    for mut task in tasks {
        parts.push(task.join().await);
    }
    let retrieve_ms = started.elapsed().as_secs_f64() * 1e3;
    let empty = Vec::new();
    let lists: Vec<Ranked<'_>> = indexes
        .iter()
        .zip(&parts)
        .map(|(index, p)| Ranked {
            index,
            hits: p.hits.as_ref().unwrap_or(&empty),
        })
        .collect();
    if parts.iter().all(|p| p.hits.is_err()) {
        let first_error = parts
            .into_iter()
            .find_map(|p| p.hits.err())
            .unwrap_or_else(|| ApiError::internal("no index answered"));
        return Err(first_error);
    }
    let fused = fuse(&lists, rrf_k, top_k);
    send("fused", json!({"passages": fused}));
    let per_index: Vec<Value> = indexes
        .iter()
        .zip(&parts)
        .map(|(index, p)| match &p.hits {
            Ok(h) => json!({"index": index, "generation": p.generation, "passages": h.len(),
                            "retrieve_ms": p.retrieve_ms}),
            Err(e) => json!({"index": index, "generation": p.generation,
                             "error": {"code": e.code, "message": e.message}}),
        })
        .collect();
    let t = Instant::now();
    let sink = |piece: &str| send("token", json!({"text": piece}));
    let (answered, usage) = kgrag::usage::counting(async {
        if !answer {
            return Ok(None);
        }
        let texts: Vec<String> = fused.iter().map(|f| f.text.clone()).collect();
        let reader = &searchers[0];
        reader.read_passages(&question, &texts, Some(&sink)).await
    })
    .await;
    let answered = answered?;
    let answer_ms = t.elapsed().as_secs_f64() * 1e3;
    let citations: Vec<Value> = answered
        .as_ref()
        .map(|a| {
            a.cited
                .iter()
                .filter_map(|n| {
                    let f = fused.get((*n as usize).checked_sub(1)?)?;
                    Some(
                        json!({"number": n, "index": f.index, "chunk_id": f.chunk_id,
                                "source": f.source}),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let latency = started.elapsed().as_secs_f64();
    state.metrics.latency("/v1/query", &strategy, latency);
    Ok(json!({
        "question": question,
        "strategy": strategy,
        "indexes": indexes,
        "answer": answered.as_ref().map(|a| a.text.clone()),
        "citations": citations,
        "passages": fused,
        "per_index": per_index,
        "fusion": {"method": "rrf", "k": rrf_k},
        "stats": {
            "latency_ms": latency * 1e3,
            "retrieve_ms": retrieve_ms,
            "answer_ms": answer_ms,
            "first_token_ms": answered.as_ref().and_then(|a| a.first_token_ms),
            "dropped_citations": answered.as_ref().map_or(0, |a| a.dropped_citations),
            "llm_calls": usage.calls,
            "llm_cache_hits": usage.cache_hits,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        },
    }))
}

/// A prepared question answered as server-sent events: `passages` per index, `fused`, `token`s, then
/// `result` (what the JSON reply holds, or `{error}`) and `done`. The work stops when the client goes.
pub(crate) fn stream(state: Arc<State>, p: Prepared) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(&'static str, Value)>();
    let question = p.question.clone();
    let work = tokio::spawn(async move {
        let events = Some(tx);
        let outcome = execute(&state, p, &events).await;
        if let Some(tx) = &events {
            let result = match outcome {
                Ok(v) => v,
                Err(e) => json!({"error": {"code": e.code, "message": e.message}}),
            };
            let _ = tx.send(("result", result));
            let _ = tx.send(("done", json!({"question": question})));
        }
    });
    // Held by the response's body: dropped (the work aborted) when the client goes away.
    let guard = AbortWork(work);
    let body = futures_util::stream::poll_fn(move |cx| {
        let _held = &guard;
        rx.poll_recv(cx).map(|e| {
            e.map(|(name, data)| {
                Ok::<_, Infallible>(Event::default().event(name).data(data.to_string()))
            })
        })
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The streamed question's task, aborted when its response is dropped.
struct AbortWork(tokio::task::JoinHandle<()>);

impl Drop for AbortWork {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A task aborted when the request is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<Part>);

impl AbortOnDrop {
    async fn join(&mut self) -> Part {
        match (&mut self.0).await {
            Ok(p) => p,
            Err(e) => Part {
                hits: Err(if e.is_panic() {
                    ApiError::internal("the query failed inside the server")
                } else {
                    ApiError::unavailable("the query was cancelled")
                }),
                generation: 0,
                retrieve_ms: 0.0,
            },
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag::types::ChunkId;

    fn hit(text: &str, score: f64) -> PassageHit {
        PassageHit {
            rank: 0,
            chunk_id: ChunkId::from_content(text),
            score,
            documents: vec![format!("{text}.md")],
            text: text.to_owned(),
            source: None,
        }
    }

    #[test]
    fn fusion_matches_a_hand_computed_merge() {
        // wiki: a b c; docs: d b e; hr: f
        let wiki = [hit("a", 0.9), hit("b", 0.8), hit("c", 0.7)];
        let docs = [hit("d", 5.0), hit("B ", 4.0), hit("e", 3.0)];
        let hr = [hit("f", 0.1)];
        let lists = [
            Ranked {
                index: "wiki",
                hits: &wiki,
            },
            Ranked {
                index: "docs",
                hits: &docs,
            },
            Ranked {
                index: "hr",
                hits: &hr,
            },
        ];
        let out = fuse(&lists, 60, 10);
        // b: 1/62 + 1/62; a, d, f: 1/61 (ties by index order: wiki, docs, hr); c, e: 1/63.
        let names: Vec<(&str, &str)> = out
            .iter()
            .map(|f| (f.text.as_str(), f.index.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("b", "wiki"),
                ("a", "wiki"),
                ("d", "docs"),
                ("f", "hr"),
                ("c", "wiki"),
                ("e", "docs"),
            ]
        );
        assert!((out[0].score - 2.0 / 62.0).abs() < 1e-12);
        assert!((out[1].score - 1.0 / 61.0).abs() < 1e-12);
        assert_eq!(
            out[0].ranks,
            [
                IndexRank {
                    index: "wiki".into(),
                    rank: 2
                },
                IndexRank {
                    index: "docs".into(),
                    rank: 2
                },
            ]
        );
        assert_eq!(
            out.iter().map(|f| f.rank).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(out[2].method_score, 5.0);
        // top_k cuts after fusion; with k = 1, b scores 1/3 + 1/3 against a's 1/2.
        let top = fuse(&lists, 1, 3);
        let texts: Vec<&str> = top.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["b", "a", "d"]);
        assert!((top[0].score - 2.0 / 3.0).abs() < 1e-12);
        // A text twice in one list counts once; the places after it close up.
        let twice = [hit("x", 3.0), hit("X", 2.0), hit("y", 1.0)];
        let out = fuse(
            &[Ranked {
                index: "one",
                hits: &twice,
            }],
            60,
            10,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[1].ranks,
            [IndexRank {
                index: "one".into(),
                rank: 2
            }]
        );
        assert!((out[1].score - 1.0 / 62.0).abs() < 1e-12);
        // Three lists: the same ranks in another order are the same score, to the bit: a tie.
        let (a, b, c) = (
            [hit("p", 1.0), hit("q", 1.0)],
            [hit("q", 1.0), hit("r", 1.0)],
            [hit("r", 1.0), hit("p", 1.0)],
        );
        let out = fuse(
            &[
                Ranked {
                    index: "a",
                    hits: &a,
                },
                Ranked {
                    index: "b",
                    hits: &b,
                },
                Ranked {
                    index: "c",
                    hits: &c,
                },
            ],
            60,
            3,
        );
        assert_eq!(out[0].score.to_bits(), out[1].score.to_bits());
        assert_eq!(out[1].score.to_bits(), out[2].score.to_bits());
        let order: Vec<&str> = out.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(order, ["p", "q", "r"]);
    }
}
