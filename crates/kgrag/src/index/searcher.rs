//! [`IndexReader`] and [`Searcher`]: queries against one committed generation, from any number of threads.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use kgrag_openie::ExtractionStore;
use kgrag_types::{ChunkId, RetrievalRequest, RetrievedContext, Retriever, TokenSink};
use serde::{Deserialize, Serialize};

use super::{Generation, Shared};
use crate::answer::{self, Citation, CitedAnswer, Numbered, Timed};
use crate::config::{Config, ReaderMode};
use crate::index_dir::{DocRecord, Manifest, UsageEntry};
use crate::methods::{self, Corpus, MethodIndex};
use crate::{KgragError, Result};

/// When an [`IndexReader`] moves to a newer generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReloadPolicy {
    /// [`IndexReader::searcher`] returns the newest generation committed through this index (any clone,
    /// any thread); [`IndexReader::reload`] also picks up other processes' commits.
    #[default]
    OnCommit,
    /// The reader stays on its generation until [`IndexReader::reload`].
    Manual,
}

/// Hands out [`Searcher`]s. Cheap to clone; clones share the generation they are on.
#[derive(Clone)]
pub struct IndexReader {
    shared: Arc<Shared>,
    policy: ReloadPolicy,
    pinned: Arc<RwLock<Arc<Generation>>>,
}

impl IndexReader {
    pub(crate) fn new(shared: Arc<Shared>, policy: ReloadPolicy, at: Arc<Generation>) -> Self {
        Self {
            shared,
            policy,
            pinned: Arc::new(RwLock::new(at)),
        }
    }

    /// A searcher on the reader's generation (with [`ReloadPolicy::OnCommit`], the newest committed
    /// through this index). Never blocks on a writer or a query.
    pub fn searcher(&self) -> Searcher {
        let mut generation = self
            .pinned
            .read()
            .map(|g| g.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        if self.policy == ReloadPolicy::OnCommit {
            if let Some(newest) = self.shared.latest_known() {
                if newest.number > generation.number {
                    if let Ok(mut pinned) = self.pinned.write() {
                        if newest.number > pinned.number {
                            *pinned = newest.clone();
                        }
                    }
                    generation = newest;
                }
            }
        }
        Searcher {
            shared: self.shared.clone(),
            generation,
        }
    }

    /// Moves to the generation committed in the backend now (another process may have committed);
    /// returns its number.
    pub fn reload(&self) -> Result<u64> {
        let newest = self.shared.refresh()?;
        let number = newest.number;
        if let Ok(mut pinned) = self.pinned.write() {
            *pinned = newest;
        }
        Ok(number)
    }

    /// The reload policy.
    pub fn policy(&self) -> ReloadPolicy {
        self.policy
    }
}

/// One ranked passage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassageHit {
    /// Rank, from 1.
    pub rank: usize,
    /// The chunk.
    pub chunk_id: ChunkId,
    /// The method's score.
    pub score: f64,
    /// Ids of the documents holding the chunk.
    pub documents: Vec<String>,
    /// The chunk's text.
    pub text: String,
    /// Where it came from: the document's file, the pages the chunk spans, its section (`None` in
    /// documents given without a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::citations::PassageSource>,
}

/// What [`Searcher::answer`] returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryAnswer {
    /// The strategy used.
    pub strategy: String,
    /// The question.
    pub question: String,
    /// The reader's answer (`None` with `reader = "none"`).
    pub answer: Option<String>,
    /// The sources the answer cites (`cite = true`): number, chunk, file, pages, section.
    #[serde(default)]
    pub citations: Vec<crate::answer::Citation>,
    /// Citation marks the reader wrote that named no source (removed from the answer).
    #[serde(default)]
    pub dropped_citations: u32,
    /// Milliseconds to the model's first token (an LLM reader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
    /// The ranked passages.
    pub passages: Vec<PassageHit>,
    /// The full retrieval output (rendered context, entities, paths, stats).
    pub context: RetrievedContext,
    /// Milliseconds in `retrieve` (query embedding included).
    pub retrieve_ms: f64,
    /// Milliseconds in the reader.
    pub answer_ms: f64,
    /// The generation that answered.
    pub generation: u64,
}

/// An immutable snapshot of one generation: every query method takes `&self`, and clones (cheap: two
/// `Arc`s) can be sent to other threads. A method's index is loaded the first time a query needs it and
/// then shared by every searcher of the generation.
#[derive(Clone)]
pub struct Searcher {
    shared: Arc<Shared>,
    generation: Arc<Generation>,
}

impl Searcher {
    /// The generation's number (0: nothing committed).
    pub fn generation(&self) -> u64 {
        self.generation.number
    }

    /// The generation's manifest (`None` in memory or with nothing committed).
    pub fn manifest(&self) -> Option<&Manifest> {
        self.generation.manifest.as_ref()
    }

    /// The documents of the generation.
    pub fn documents(&self) -> &[DocRecord] {
        &self.generation.documents
    }

    /// The corpus: chunks and passage vectors (the triples only in memory).
    pub fn corpus(&self) -> &Corpus {
        &self.generation.corpus
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.shared.env.config
    }

    /// The methods indexed in this generation, in registry order.
    pub fn methods(&self) -> Vec<String> {
        self.generation.method_names()
    }

    /// The strategies this generation answers, in report order.
    pub fn strategies(&self) -> Vec<&'static str> {
        self.generation.strategies()
    }

    /// Checks that this generation answers `strategy`. The error ([`KgragError::Config`]) says whether
    /// kgrag does not know the strategy or this index did not build its method, and names the strategies
    /// the index answers.
    pub fn check_strategy(&self, strategy: &str) -> Result<()> {
        let have = self.strategies();
        if have.contains(&strategy) {
            return Ok(());
        }
        let known = methods::strategies().contains(&strategy);
        Err(KgragError::Config(format!(
            "{} strategy {strategy:?}: this index answers {}",
            if known { "unindexed" } else { "unknown" },
            if have.is_empty() {
                "none yet (nothing is committed)".to_owned()
            } else {
                have.join(", ")
            }
        )))
    }

    /// Seconds per stage of the build that made this generation.
    pub fn stages(&self) -> &[(String, f64)] {
        &self.generation.stages
    }

    /// Model usage per stage, over every build of the index.
    pub fn llm_usage(&self) -> &BTreeMap<String, UsageEntry> {
        &self.generation.llm
    }

    /// `method`'s index (loaded on first use).
    pub fn method_index(&self, method: &str) -> Result<Arc<dyn MethodIndex>> {
        self.generation.method(method)
    }

    /// The retriever of `strategy` (built once per generation and shared).
    pub fn retriever(&self, strategy: &str) -> Result<Arc<dyn Retriever>> {
        self.generation.retriever(strategy)
    }

    /// The full retrieval output of `strategy` for `query`: the ranked passages (at most `top_k`), the
    /// rendered context the reader sees, the method's entities, paths and statistics.
    pub async fn context(
        &self,
        query: &str,
        strategy: &str,
        top_k: usize,
    ) -> Result<RetrievedContext> {
        let retriever = self.retriever(strategy)?;
        retriever
            .retrieve(&RetrievalRequest {
                query: query.to_owned(),
                top_k,
            })
            .await
            .map_err(|e| KgragError::Model(format!("{strategy}: retrieval failed: {e}")))
    }

    /// The `top_k` passages `strategy` ranks highest for `query`, with their documents and texts.
    pub async fn search(
        &self,
        query: &str,
        strategy: &str,
        top_k: usize,
    ) -> Result<Vec<PassageHit>> {
        let ctx = self.context(query, strategy, top_k).await?;
        Ok(self.hits(&ctx, top_k))
    }

    /// The reader's answer to `question` from `ctx` (retrieved with `strategy`); `None` with
    /// `reader = "none"`.
    pub async fn read(
        &self,
        strategy: &str,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        let method = methods::method_of(strategy)
            .ok_or_else(|| KgragError::Config(format!("unknown strategy {strategy:?}")))?;
        let index = self.generation.method(method.name())?;
        index
            .answer(
                strategy,
                &self.shared.env,
                &self.generation.corpus,
                question,
                ctx,
            )
            .await
    }

    /// The reader's answer to `question` from `ctx` (retrieved with `strategy`), citing its sources as
    /// [`crate::answer`] says (with `cite = false`, the method's reference reader and no citations); the
    /// model's tokens go to `on_token` as they come. `None` with `reader = "none"`.
    pub async fn read_cited(
        &self,
        strategy: &str,
        question: &str,
        ctx: &RetrievedContext,
        on_token: Option<&TokenSink<'_>>,
    ) -> Result<Option<CitedAnswer>> {
        let env = &self.shared.env;
        if env.reader == ReaderMode::None {
            return Ok(None);
        }
        let timed = Timed::new(on_token);
        if !env.config.cite {
            let text = self.read(strategy, question, ctx).await?;
            if let Some(t) = &text {
                timed.push(t);
            }
            return Ok(text.map(|text| CitedAnswer {
                text,
                first_token_ms: timed.first_token_ms(),
                ..CitedAnswer::default()
            }));
        }
        let method = methods::method_of(strategy)
            .ok_or_else(|| KgragError::Config(format!("unknown strategy {strategy:?}")))?
            .name();
        let sources = self.numbered_sources(method, ctx);
        let (text, cited, dropped) = match (env.reader, &env.chat) {
            (ReaderMode::Llm, Some(chat)) => {
                let request = match method {
                    "hirag" => {
                        if kgrag_hirag::answer::is_no_hit(ctx) {
                            let fail = kgrag_hirag::FAIL_RESPONSE.to_owned();
                            timed.push(&fail);
                            return Ok(Some(CitedAnswer {
                                text: fail,
                                first_token_ms: timed.first_token_ms(),
                                ..CitedAnswer::default()
                            }));
                        }
                        answer::with_system_suffix(
                            kgrag_hirag::answer::answer_request(
                                ctx,
                                question,
                                &env.config.hirag.response_type,
                            ),
                            answer::HIRAG_CITE_INSTRUCTION,
                        )
                    }
                    "leanrag" => answer::with_system_suffix(
                        kgrag_leanrag::answer::answer_request(ctx, question, &env.config.leanrag),
                        &format!(
                            "{}\n\n{}",
                            answer::NUMBERED_CITE_INSTRUCTION,
                            answer::numbered_block(&sources)
                        ),
                    ),
                    _ => {
                        let k = match method {
                            "dense" => env.config.dense.qa_top_k,
                            _ => env.config.hipporag.qa_top_k,
                        };
                        answer::passage_request(&sources[..k.min(sources.len())], question)
                    }
                };
                let reply = chat
                    .chat_stream(&request, &|piece: &str| timed.push(piece))
                    .await
                    .map_err(|e| KgragError::Model(format!("{strategy}: answering failed: {e}")))?;
                let known: Vec<u32> = sources.iter().map(|s| s.number).collect();
                answer::resolve_marks(reply.content.trim(), &known)
            }
            _ => {
                let Some(text) = self.read(strategy, question, ctx).await? else {
                    return Ok(None);
                };
                let (text, cited) = answer::cite_sentences(&text, &sources);
                timed.push(&text);
                (text, cited, 0)
            }
        };
        let citations = cited
            .into_iter()
            .filter_map(|n| {
                let s = sources.iter().find(|s| s.number == n)?;
                Some(Citation {
                    number: n,
                    chunk_id: s.chunk_id.clone(),
                    source: self.generation.source_of(&s.chunk_id),
                })
            })
            .collect();
        Ok(Some(CitedAnswer {
            text,
            citations,
            dropped_citations: dropped,
            first_token_ms: timed.first_token_ms(),
        }))
    }

    /// The reader's answer to `question` from `passages` — texts in rank order, from this index or any
    /// other (a question asked of several indexes) — numbered from 1 and cited as `[n]`: with an LLM
    /// reader, the citing passage reader over the first `qa_top_k` (HippoRAG 2's setting); offline, the
    /// extractive answer over them, each sentence citing the passage it was taken from. The model's
    /// tokens go to `on_token`. `None` with `reader = "none"`.
    pub async fn read_passages(
        &self,
        question: &str,
        passages: &[String],
        on_token: Option<&TokenSink<'_>>,
    ) -> Result<Option<answer::NumberedAnswer>> {
        let env = &self.shared.env;
        if env.reader == ReaderMode::None {
            return Ok(None);
        }
        let timed = Timed::new(on_token);
        let k = env.config.hipporag.qa_top_k.min(passages.len());
        let sources: Vec<Numbered> = passages[..k]
            .iter()
            .enumerate()
            .map(|(i, text)| Numbered {
                number: i as u32 + 1,
                chunk_id: ChunkId::from_content(text),
                text: text.clone(),
            })
            .collect();
        let (text, cited, dropped) = match (env.reader, &env.chat) {
            (ReaderMode::Llm, Some(chat)) => {
                let request = answer::passage_request(&sources, question);
                let reply = chat
                    .chat_stream(&request, &|piece: &str| timed.push(piece))
                    .await
                    .map_err(|e| KgragError::Model(format!("answering failed: {e}")))?;
                let known: Vec<u32> = sources.iter().map(|s| s.number).collect();
                answer::resolve_marks(reply.content.trim(), &known)
            }
            _ => {
                let top: Vec<String> = sources.iter().map(|s| s.text.clone()).collect();
                let text = methods::extractive_answer(
                    env.embedder.as_ref(),
                    question,
                    &top,
                    &env.config.hipporag,
                )
                .await?;
                let (text, cited) = answer::cite_sentences(&text, &sources);
                timed.push(&text);
                (text, cited, 0)
            }
        };
        Ok(Some(answer::NumberedAnswer {
            text,
            cited,
            dropped_citations: dropped,
            first_token_ms: timed.first_token_ms(),
        }))
    }

    /// The sources an answer of `method` may cite: HiRAG's Sources table rows (its rendered text units,
    /// numbered from 0 as the table numbers them), else the retrieved passages numbered from 1.
    fn numbered_sources(&self, method: &str, ctx: &RetrievedContext) -> Vec<Numbered> {
        let passages = &self.generation.corpus.passages;
        let text = |id: &ChunkId| passages.text_of(id.as_str()).unwrap_or_default().to_owned();
        if method == "hirag" {
            let shown = ctx.stats.get("text_units").copied().unwrap_or(0.0) as usize;
            return ctx.passages[..shown.min(ctx.passages.len())]
                .iter()
                .enumerate()
                .map(|(i, p)| Numbered {
                    number: i as u32,
                    chunk_id: p.chunk_id.clone(),
                    text: text(&p.chunk_id),
                })
                .collect();
        }
        ctx.passages
            .iter()
            .enumerate()
            .map(|(i, p)| Numbered {
                number: i as u32 + 1,
                chunk_id: p.chunk_id.clone(),
                text: text(&p.chunk_id),
            })
            .collect()
    }

    /// Retrieves `top_k` passages for `question` with `strategy` and reads the answer, citing its sources
    /// (see [`crate::answer`]).
    pub async fn answer(
        &self,
        question: &str,
        strategy: &str,
        top_k: usize,
    ) -> Result<QueryAnswer> {
        self.answer_streaming(question, strategy, top_k, None).await
    }

    /// [`answer`](Self::answer), handing the model's tokens to `on_token` as they are generated.
    pub async fn answer_streaming(
        &self,
        question: &str,
        strategy: &str,
        top_k: usize,
        on_token: Option<&TokenSink<'_>>,
    ) -> Result<QueryAnswer> {
        let t = Instant::now();
        let ctx = self.context(question, strategy, top_k).await?;
        let retrieve_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let cited = self.read_cited(strategy, question, &ctx, on_token).await?;
        let answer_ms = t.elapsed().as_secs_f64() * 1e3;
        let passages = self.hits(&ctx, top_k);
        let (answer, citations, dropped_citations, first_token_ms) = match cited {
            Some(c) => (
                Some(c.text),
                c.citations,
                c.dropped_citations,
                c.first_token_ms,
            ),
            None => (None, Vec::new(), 0, None),
        };
        Ok(QueryAnswer {
            strategy: strategy.to_owned(),
            question: question.to_owned(),
            answer,
            citations,
            dropped_citations,
            first_token_ms,
            passages,
            context: ctx,
            retrieve_ms,
            answer_ms,
            generation: self.generation.number,
        })
    }

    /// The first `top_k` passages of `ctx` (retrieved from this searcher) with their documents and texts.
    pub fn passages(&self, ctx: &RetrievedContext, top_k: usize) -> Vec<PassageHit> {
        self.hits(ctx, top_k)
    }

    fn hits(&self, ctx: &RetrievedContext, top_k: usize) -> Vec<PassageHit> {
        ctx.passages
            .iter()
            .take(top_k)
            .enumerate()
            .map(|(i, p)| PassageHit {
                rank: i + 1,
                chunk_id: p.chunk_id.clone(),
                score: p.score,
                documents: self.generation.documents_of(&p.chunk_id),
                text: self
                    .generation
                    .corpus
                    .passages
                    .text_of(p.chunk_id.as_str())
                    .unwrap_or_default()
                    .to_owned(),
                source: self.generation.source_of(&p.chunk_id),
            })
            .collect()
    }

    /// Where chunk `chunk` came from (its first document's file, pages and section).
    pub fn source_of(&self, chunk: &ChunkId) -> Option<crate::citations::PassageSource> {
        self.generation.source_of(chunk)
    }

    /// The original file of document `id` as the index keeps it: its record and bytes (`None`: no such
    /// document, or no original kept for it — a document given as text, or `keep_originals = false`).
    pub fn original(&self, id: &str) -> Result<Option<(crate::index_dir::FileRecord, Vec<u8>)>> {
        let Some(file) = self.generation.document(id).and_then(|d| d.file.clone()) else {
            return Ok(None);
        };
        let Some(root) = &self.shared.root else {
            return Ok(None);
        };
        if !file.kept {
            return Ok(None);
        }
        let path = crate::originals::path_of(root, &file);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some((file, bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(KgragError::Io { path, source }),
        }
    }

    /// The graph of `method` (default: `hipporag2`, else `hirag`) as GraphML, with the method's name.
    pub fn graphml(&self, method: Option<&str>) -> Result<(String, String)> {
        let candidates: Vec<String> = match method {
            Some(m) => vec![m.to_owned()],
            None => {
                let have = self.generation.method_names();
                ["hipporag2", "hirag"]
                    .iter()
                    .filter(|m| have.iter().any(|h| h == *m))
                    .map(|m| (*m).to_owned())
                    .collect()
            }
        };
        for m in &candidates {
            let index = self.generation.method(m)?;
            if let Some(g) = index.graphml()? {
                return Ok((m.clone(), g));
            }
        }
        Err(KgragError::Config(format!(
            "no graph to export{}: GraphML comes from hipporag2 or hirag",
            method.map(|m| format!(" from {m}")).unwrap_or_default()
        )))
    }

    /// Everything `kgrag stats` prints: documents, chunks, per-method statistics, bytes by part, caches,
    /// model usage per stage.
    pub fn stats(&self) -> Result<serde_json::Value> {
        let Some(m) = &self.generation.manifest else {
            return Err(KgragError::Index("the index is not committed".into()));
        };
        let (parts, storage) = match &self.shared.store {
            Some(store) => (store.sizes(m)?, store.info()),
            None => (BTreeMap::new(), serde_json::Value::Null),
        };
        let (chat_entries, embedding_entries, cache_error) =
            match self.shared.cache.as_ref().map(|c| c.entries()) {
                Some(Ok((a, b))) => (a, b, None),
                Some(Err(e)) => (0, 0, Some(e.to_string())),
                None => (0, 0, Some("the response cache is not open".to_owned())),
            };
        let cache_dir = &self.shared.env.cache_dir;
        let extraction_entries = ExtractionStore::open(cache_dir.join("extractions.redb"))
            .ok()
            .and_then(|s| s.len().ok())
            .unwrap_or(0);
        Ok(serde_json::json!({
            "generation": m.generation,
            "kgrag_version": m.kgrag_version,
            "config_hash": m.config_hash,
            "embedder": m.embedder,
            "documents": m.documents.len(),
            "chunks": m.chunks,
            "methods": m.methods.iter().map(|(k, v)| (k.clone(), v.stats.clone())).collect::<BTreeMap<_, _>>(),
            "bytes_by_part": parts,
            "bytes_total": parts.values().sum::<u64>(),
            "storage": storage,
            "cache": {
                "dir": cache_dir,
                "chat_replies": chat_entries,
                "embeddings": embedding_entries,
                "extractions": extraction_entries,
                "error": cache_error,
            },
            "llm_by_stage": m.llm,
            "last_build_stages": m.stages,
            "last_build_extraction": m.extraction,
            "notes": m.notes,
            "llm_estimate": m.estimate.as_ref().map(|e| serde_json::json!({
                "estimate": e,
                "cost": e.cost(),
                "by_stage": e.against(&m.llm).into_iter().map(|(stage, est, actual)| serde_json::json!({
                    "stage": stage,
                    "estimated": est,
                    "actual": actual,
                })).collect::<Vec<_>>(),
            })),
        }))
    }
}
