//! Queries: one strategy (`POST /v1/query`) or several on the same question (`POST /v1/compare`), as
//! one JSON reply or, with `"stream": true`, as server-sent events — the passages as soon as they are
//! retrieved, the reader's tokens as they are generated, the whole result (with its citations) at the end.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State as Shared;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use kgrag::types::RetrievedContext;
use kgrag::Searcher;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{check_question, check_range, check_strategy, committed, ApiJson};
use crate::catalog::Lease;
use crate::error::{ApiError, ApiResult};
use crate::indexes::{lease_to_read, Client, Named};
use crate::State;

type AppState = Arc<State>;

/// The most passages a request may ask for.
pub(crate) const MAX_TOP_K: usize = 1000;

/// An optional count given as a JSON integer or as a number with no fraction (`5.0`, which JSON Schema
/// counts as an integer).
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return usize::try_from(u)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{n} is too large")));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 1e15 => Ok(Some(f as usize)),
        _ => Err(serde::de::Error::custom(format!(
            "{n} is not a whole number of 0 or more"
        ))),
    }
}

fn check_top_k(top_k: Option<usize>, default: usize) -> ApiResult<usize> {
    match top_k {
        None => Ok(default),
        Some(k) => check_range("top_k", k, 1, MAX_TOP_K),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryRequest {
    question: String,
    #[serde(default)]
    strategy: Option<String>,
    #[serde(default, deserialize_with = "whole_number")]
    top_k: Option<usize>,
    #[serde(default)]
    context: bool,
    #[serde(default)]
    answer: Option<bool>,
    #[serde(default)]
    stream: bool,
    /// Asks the question of these indexes (`POST /v1/query` only) and merges their passages.
    #[serde(default)]
    indexes: Option<Vec<String>>,
    /// The fusion constant of a question asked of several indexes (default 60).
    #[serde(default, deserialize_with = "whole_number")]
    rrf_k: Option<usize>,
}

/// What one strategy returned for one question, as the API shows it.
pub(crate) struct Outcome {
    pub(crate) strategy: String,
    pub(crate) cited: Option<kgrag::answer::CitedAnswer>,
    pub(crate) passages: Vec<kgrag::PassageHit>,
    pub(crate) context: RetrievedContext,
    pub(crate) retrieve_ms: f64,
    pub(crate) answer_ms: f64,
    pub(crate) latency_ms: f64,
    pub(crate) usage: kgrag::types::StageUsage,
    pub(crate) generation: u64,
}

impl Outcome {
    /// The answer's text (`None` without a reader).
    pub(crate) fn answer(&self) -> Option<&str> {
        self.cited.as_ref().map(|c| c.text.as_str())
    }

    /// The answer's citations (empty without a reader).
    pub(crate) fn citations(&self) -> &[kgrag::answer::Citation] {
        self.cited.as_ref().map_or(&[], |c| c.citations.as_slice())
    }

    /// The JSON of the API (`Result` in the OpenAPI document).
    pub(crate) fn to_json(&self, question: &str, with_context: bool) -> Value {
        let mut v = json!({
            "strategy": self.strategy,
            "question": question,
            "answer": self.answer(),
            "citations": self.citations(),
            "passages": self.passages,
            "entities": entities(&self.context),
            "stats": {
                "latency_ms": self.latency_ms,
                "retrieve_ms": self.retrieve_ms,
                "answer_ms": self.answer_ms,
                "first_token_ms": self.cited.as_ref().and_then(|c| c.first_token_ms),
                "dropped_citations": self.cited.as_ref().map_or(0, |c| c.dropped_citations),
                "context_tokens": self.context.context_tokens,
                "llm_calls": self.usage.calls,
                "llm_cache_hits": self.usage.cache_hits,
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "generation": self.generation,
                "method": self.context.stats,
            },
        });
        if with_context {
            v["context"] = Value::String(self.context.rendered.clone());
        }
        v
    }
}

/// The entity names a method used: HiRAG's and LeanRAG's entities, HippoRAG 2's facts' subjects and
/// objects; first seen first, at most 24.
fn entities(ctx: &RetrievedContext) -> Vec<String> {
    let mut seen = HashSet::new();
    let names = ctx.entities.iter().map(|e| e.name.as_str()).chain(
        ctx.facts
            .iter()
            .flat_map(|f| [f.triple.subject(), f.triple.object()]),
    );
    names
        .filter(|n| !n.trim().is_empty() && seen.insert(n.to_owned()))
        .take(24)
        .map(str::to_owned)
        .collect()
}

/// What a running query tells a stream before it ends.
pub(crate) enum Progress {
    /// The ranked passages, once retrieved.
    Passages(Vec<kgrag::PassageHit>),
    /// A piece of the reader's answer.
    Token(String),
}

/// Where a query's progress goes (`None`: nobody listens).
pub(crate) type ProgressTx = Option<tokio::sync::mpsc::UnboundedSender<(usize, Progress)>>;

/// Retrieves (and reads, with `answer`) `question` with `strategy` on `searcher`, timing it and counting
/// its model calls; the latency goes into the metrics under `endpoint`. With `progress`, the passages and
/// the reader's tokens are sent there as they come, tagged with `slot`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_strategy(
    state: &State,
    searcher: &Searcher,
    endpoint: &str,
    question: &str,
    strategy: &str,
    top_k: usize,
    answer: bool,
    progress: (&ProgressTx, usize),
) -> ApiResult<Outcome> {
    let started = Instant::now();
    let (tx, slot) = progress;
    let (result, usage) = kgrag::usage::counting(async {
        let t = Instant::now();
        let ctx = searcher.context(question, strategy, top_k).await?;
        let retrieve_ms = t.elapsed().as_secs_f64() * 1e3;
        if let Some(tx) = tx {
            let _ = tx.send((slot, Progress::Passages(searcher.passages(&ctx, top_k))));
        }
        let t = Instant::now();
        let sink = |piece: &str| {
            if let Some(tx) = tx {
                let _ = tx.send((slot, Progress::Token(piece.to_owned())));
            }
        };
        let cited = if answer {
            searcher
                .read_cited(strategy, question, &ctx, Some(&sink))
                .await?
        } else {
            None
        };
        Ok::<_, kgrag::KgragError>((ctx, cited, retrieve_ms, t.elapsed().as_secs_f64() * 1e3))
    })
    .await;
    let (context, cited, retrieve_ms, answer_ms) = result?;
    let secs = started.elapsed().as_secs_f64();
    state.metrics.latency(endpoint, strategy, secs);
    Ok(Outcome {
        strategy: strategy.to_owned(),
        cited,
        passages: searcher.passages(&context, top_k),
        context,
        retrieve_ms,
        answer_ms,
        latency_ms: secs * 1e3,
        usage,
        generation: searcher.generation(),
    })
}

/// `POST /v1/query` (and `POST /v1/indexes/{name}/query`).
pub(crate) async fn query(
    Shared(state): Shared<AppState>,
    Client(grant): Client,
    named: Result<Named, ApiError>,
    ApiJson(q): ApiJson<QueryRequest>,
) -> ApiResult<Response> {
    if let Some(indexes) = q.indexes {
        if matches!(named, Ok(Named(_, true))) {
            return Err(ApiError::unprocessable(
                "\"indexes\" asks several indexes: send it to POST /v1/query, not to one index's route",
            ));
        }
        if q.context {
            return Err(ApiError::unprocessable(
                "a question asked of several indexes has no one context: its merged passages are in \
                 the reply; leave out \"context\"",
            ));
        }
        let prepared = crate::federated::prepare(
            &state,
            &grant,
            crate::federated::Federated {
                question: q.question,
                indexes,
                strategy: q.strategy,
                top_k: q.top_k,
                answer: q.answer.unwrap_or(true),
                rrf_k: q.rrf_k,
            },
        )
        .await?;
        if q.stream {
            return Ok(crate::federated::stream(state, prepared));
        }
        let v = crate::federated::execute(&state, prepared, &None).await?;
        return Ok(Json(v).into_response());
    }
    if q.rrf_k.is_some() {
        return Err(ApiError::unprocessable(
            "\"rrf_k\" is for a question asked of several indexes (\"indexes\")",
        ));
    }
    check_question(&q.question)?;
    let Named(name, _) = named?;
    let lease = lease_to_read(&state, &grant, &name).await?;
    let searcher = committed(&lease)?;
    let strategy = q
        .strategy
        .or_else(|| crate::api::default_strategy(&searcher).map(str::to_owned))
        .unwrap_or_else(|| searcher.config().retriever.strategy.clone());
    check_strategy(&searcher, &strategy)?;
    let top_k = check_top_k(q.top_k, searcher.config().retriever.top_k)?;
    let answer = q.answer.unwrap_or(true);
    if q.stream {
        return Ok(stream(
            state,
            lease,
            searcher,
            q.question,
            vec![strategy],
            top_k,
            answer,
            q.context,
        ));
    }
    let outcome = run_strategy(
        &state,
        &searcher,
        "/v1/query",
        &q.question,
        &strategy,
        top_k,
        answer,
        (&None, 0),
    )
    .await?;
    drop(lease);
    Ok(Json(outcome.to_json(&q.question, q.context)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareRequest {
    question: String,
    strategies: Vec<String>,
    #[serde(default, deserialize_with = "whole_number")]
    top_k: Option<usize>,
    #[serde(default)]
    context: bool,
    #[serde(default)]
    answer: Option<bool>,
    #[serde(default)]
    stream: bool,
}

/// Starts one task per strategy (on every core), each aborted if the request is dropped.
#[allow(clippy::too_many_arguments)]
fn spawn_all(
    state: &AppState,
    lease: &Lease,
    searcher: &Searcher,
    question: &str,
    strategies: &[String],
    top_k: usize,
    answer: bool,
    endpoint: &'static str,
    progress: &ProgressTx,
) -> Vec<AbortOnDrop> {
    strategies
        .iter()
        .enumerate()
        .map(|(slot, s)| {
            let (state, lease, searcher, question, strategy, tx) = (
                state.clone(),
                lease.clone(),
                searcher.clone(),
                question.to_owned(),
                s.clone(),
                progress.clone(),
            );
            AbortOnDrop(tokio::spawn(async move {
                let outcome = run_strategy(
                    &state,
                    &searcher,
                    endpoint,
                    &question,
                    &strategy,
                    top_k,
                    answer,
                    (&tx, slot),
                )
                .await;
                // The index stays loaded while the strategy runs.
                drop(lease);
                outcome
            }))
        })
        .collect()
}

/// A strategy's result, or its error in its place.
fn result_json(
    outcome: ApiResult<Outcome>,
    strategy: &str,
    question: &str,
    context: bool,
) -> Value {
    match outcome {
        Ok(o) => o.to_json(question, context),
        Err(e) => json!({
            "strategy": strategy,
            "question": question,
            "error": {"code": e.code, "message": e.message},
        }),
    }
}

/// `POST /v1/compare`.
pub(crate) async fn compare(
    Shared(state): Shared<AppState>,
    Client(grant): Client,
    named: Result<Named, ApiError>,
    ApiJson(q): ApiJson<CompareRequest>,
) -> ApiResult<Response> {
    // The question is checked before the index is leased (and perhaps loaded).
    check_question(&q.question)?;
    let Named(name, _) = named?;
    let lease = lease_to_read(&state, &grant, &name).await?;
    let searcher = committed(&lease)?;
    if q.strategies.is_empty() {
        return Err(ApiError::unprocessable(format!(
            "\"strategies\" is empty: name one or more of {}",
            searcher.strategies().join(", ")
        )));
    }
    let mut seen = HashSet::new();
    for s in &q.strategies {
        check_strategy(&searcher, s)?;
        if !seen.insert(s.as_str()) {
            return Err(ApiError::unprocessable(format!(
                "strategy {s:?} is named twice"
            )));
        }
    }
    let top_k = check_top_k(q.top_k, searcher.config().retriever.top_k)?;
    let answer = q.answer.unwrap_or(true);
    if q.stream {
        return Ok(stream(
            state,
            lease,
            searcher,
            q.question,
            q.strategies,
            top_k,
            answer,
            q.context,
        ));
    }
    // One searcher for all: every strategy answers from the same generation. One that fails is reported in
    // its place, the others still answer.
    let tasks = spawn_all(
        &state,
        &lease,
        &searcher,
        &q.question,
        &q.strategies,
        top_k,
        answer,
        "/v1/compare",
        &None,
    );
    let mut results = Vec::with_capacity(tasks.len());
    for (strategy, mut task) in q.strategies.iter().zip(tasks) {
        results.push(result_json(
            task.join().await,
            strategy,
            &q.question,
            q.context,
        ));
    }
    Ok(Json(json!({
        "question": q.question,
        "generation": searcher.generation(),
        "results": results,
    }))
    .into_response())
}

/// The server-sent events of a streamed query: `passages` (`{"strategy", "passages"}`) once a strategy has
/// retrieved, `token` (`{"strategy", "text"}`) for each piece of its answer, `result` (the strategy's
/// whole result, as `POST /v1/query` returns it, with its citations) when it ends, and `done` after the
/// last strategy.
#[allow(clippy::too_many_arguments)]
fn stream(
    state: AppState,
    lease: Lease,
    searcher: Searcher,
    question: String,
    strategies: Vec<String>,
    top_k: usize,
    answer: bool,
    context: bool,
) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Progress)>();
    let endpoint = if strategies.len() == 1 {
        "/v1/query"
    } else {
        "/v1/compare"
    };
    let mut tasks = spawn_all(
        &state,
        &lease,
        &searcher,
        &question,
        &strategies,
        top_k,
        answer,
        endpoint,
        &Some(tx),
    );
    drop(lease);
    let (events, out) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let names = strategies.clone();
    let generation = searcher.generation();
    // The request's permit and timeout cover the handler; the stream goes on while its tasks run.
    tokio::spawn(async move {
        let event = |name: &str, data: Value| Event::default().event(name).data(data.to_string());
        let forward = |(slot, p): (usize, Progress)| {
            let strategy = names.get(slot).cloned().unwrap_or_default();
            match p {
                Progress::Passages(passages) => event(
                    "passages",
                    json!({"strategy": strategy, "passages": passages}),
                ),
                Progress::Token(text) => {
                    event("token", json!({"strategy": strategy, "text": text}))
                }
            }
        };
        let mut pending: Vec<Option<&mut AbortOnDrop>> = tasks.iter_mut().map(Some).collect();
        let mut left = pending.len();
        while left > 0 {
            // Progress first; a finished task's result once its progress is out.
            tokio::select! {
                biased;
                Some(p) = rx.recv() => {
                    if events.send(forward(p)).is_err() {
                        return;
                    }
                }
                (slot, outcome) = next_done(&mut pending) => {
                    while let Ok(p) = rx.try_recv() {
                        let _ = events.send(forward(p));
                    }
                    left -= 1;
                    let strategy = names.get(slot).cloned().unwrap_or_default();
                    let data = result_json(outcome, &strategy, &question, context);
                    if events.send(event("result", data)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = events.send(event(
            "done",
            json!({"question": question, "generation": generation}),
        ));
    });
    let body = tokio_stream_of(out);
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The first of the pending tasks to finish: its slot and outcome (the slot is then emptied).
async fn next_done(pending: &mut [Option<&mut AbortOnDrop>]) -> (usize, ApiResult<Outcome>) {
    let futures: Vec<_> = pending
        .iter_mut()
        .enumerate()
        .filter_map(|(i, t)| {
            t.as_mut()
                .map(|t| Box::pin(async move { (i, t.join().await) }))
        })
        .collect();
    if futures.is_empty() {
        return std::future::pending().await;
    }
    let ((i, outcome), _, _) = futures_util::future::select_all(futures).await;
    pending[i] = None;
    (i, outcome)
}

/// The events of `rx` as a stream for [`Sse`].
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok)))
}

/// A strategy's task in `compare`, aborted when the request is dropped (a timeout, a client gone): it
/// must not run on past the request's permit.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<ApiResult<Outcome>>);

impl AbortOnDrop {
    async fn join(&mut self) -> ApiResult<Outcome> {
        match (&mut self.0).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => {
                tracing::error!("a query panicked: {e}");
                Err(ApiError::internal("the query failed inside the server"))
            }
            Err(_) => Err(ApiError::unavailable("the query was cancelled")),
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
