//! What a build will ask of the chat model, before it asks anything: `kgrag index --estimate`.
//!
//! Per stage (the keys of the index's `llm_by_stage`: `extraction`, `hirag`, `leanrag`) and per part of a
//! stage (HippoRAG's two OpenIE calls, HiRAG's extraction, description summaries, cluster summaries and
//! community reports, LeanRAG's aggregates and inter-cluster relations): the expected calls, prompt tokens
//! and completion tokens, and the cost when `[chat]` gives prices.
//!
//! - **Counted** (`exact_calls`): the per-chunk calls. The chunks are the build's own (the same chunkers),
//!   chunks whose extraction is already in the cache folder's extraction store (or in a dataset's OpenIE
//!   file) are left out, and the prompt tokens are our prompts rendered and counted (o200k) plus the
//!   chunk's tokens. A gated gleaning's extra turns depend on the model's YES/NO and are modelled.
//! - **Modelled**: completions, and every call that depends on the extracted graph (entities, clusters,
//!   communities). The graph's size follows the corpus's tokens at densities measured on HippoRAG's
//!   GPT-3.5 OpenIE of MuSiQue (the dataset's OpenIE file: 9.3 entities and 9.2 triples per 108-token
//!   passage, ~0.45 and ~1.4 completion tokens per chunk token; 16,235 distinct phrases over 204,285
//!   tokens), and the structure follows the method settings and the index that graph gives: HiRAG's
//!   clusters per summary layer (the BIC scan: a handful, growing with the log of the size), one report
//!   per hierarchical-Leiden community (3,674 for 16,235 entities; fewer per entity on small graphs, which
//!   have fewer levels), LeanRAG's ⌊N / cluster_size⌋ aggregates per layer for `round(log20 N) + 1`
//!   layers plus a root, and its relation calls (529 for 909 aggregates, scaled by the square of the
//!   cluster size). On the fixture with a scripted model the total is within 10 % of the calls made
//!   (a test holds it within 20 %).
//!
//! After a real build, `kgrag stats` prints this estimate beside the counted usage of each stage.

use std::collections::BTreeMap;
use std::sync::Arc;

use kgrag_hirag::BaseSource;
use kgrag_leanrag::G0Source;
use kgrag_openie::ExtractionMode;
use kgrag_text::{ChunkerConfig, Encoding};
use kgrag_types::{ChatModel, ChatRequest, ChunkId, Extractor};
use serde::{Deserialize, Serialize};

use crate::config::OpenIeMode;
use crate::env::Env;
use crate::index_dir::UsageEntry;
use crate::Result;

/// A chunk of the facade's corpus: its id and text.
type Passage = (ChunkId, Arc<str>);

/// Completion tokens of HippoRAG's NER call per chunk token (its JSON list of entities).
const NER_COMPLETION_PER_TOKEN: f64 = 0.45;
/// Completion tokens of HippoRAG's triple call per chunk token (its JSON list of triples).
const TRIPLE_COMPLETION_PER_TOKEN: f64 = 1.4;
/// Distinct entities (phrases) per corpus token after HippoRAG's OpenIE.
const OPENIE_ENTITIES_PER_TOKEN: f64 = 0.08;
/// Entity records per chunk token of the GraphRAG-style extraction (HiRAG, LeanRAG native): fewer than
/// OpenIE's phrases per token, since its chunks are ten times longer.
const RECORDS_PER_TOKEN: f64 = 0.035;
/// Distinct entities per entity record (names repeat across chunks).
const DISTINCT_PER_RECORD: f64 = 0.7;
/// Completion tokens of one entity record (name, type, a description sentence or two).
const ENTITY_RECORD_TOKENS: f64 = 45.0;
/// Completion tokens of one relation record.
const RELATION_RECORD_TOKENS: f64 = 35.0;
/// Relation records per entity record.
const RELATIONS_PER_RECORD: f64 = 0.9;
/// A gleaning turn adds about this share of the first answer.
const GLEANING_SHARE: f64 = 0.3;
/// Entities whose merged description passes HiRAG's summary trigger (500 tokens), with extracted records.
const DESCRIPTION_SUMMARY_SHARE: f64 = 0.01;
/// Prompt tokens of a description summary (the merged description passes 500 tokens, plus the prompt).
const DESCRIPTION_PROMPT_TOKENS: f64 = 700.0;
/// Completion tokens of a description summary (capped at 500).
const DESCRIPTION_SUMMARY_TOKENS: f64 = 300.0;
/// Entities an LLM cluster summary writes.
const HIRAG_ENTITIES_PER_SUMMARY: f64 = 3.0;
/// HiRAG summary layers (spec hirag §5.3: one or two in practice).
const HIRAG_SUMMARY_LAYERS: usize = 2;
/// Tokens of one member row in a cluster-summary prompt (name and description).
const MEMBER_TOKENS: f64 = 60.0;
/// Completion tokens of one cluster summary (a few entities and relations).
const CLUSTER_SUMMARY_TOKENS: f64 = 450.0;
/// Hierarchical-Leiden communities per graph entity (every level; max cluster size 10) on a graph of
/// [`COMMUNITIES_AT`] entities; a smaller graph has fewer levels (see [`communities`]).
const COMMUNITIES_PER_ENTITY: f64 = 0.23;
/// The graph size [`COMMUNITIES_PER_ENTITY`] was measured at (MuSiQue's 16,235 phrases: 3,674 communities).
const COMMUNITIES_AT: f64 = 16_235.0;
/// Context tokens of a report prompt per community member (its row, its relations' rows).
const REPORT_TOKENS_PER_MEMBER: f64 = 110.0;
/// Members of an average community.
const COMMUNITY_MEMBERS: f64 = 12.0;
/// Completion tokens of one community report (title, summary, five to ten findings).
const REPORT_TOKENS: f64 = 700.0;
/// Completion tokens of one LeanRAG aggregate (name, description, findings).
const AGGREGATE_TOKENS: f64 = 450.0;
/// LeanRAG relation calls per aggregate of a layer (pairs with more than τ crossing relations) at the
/// default cluster size of 20 (MuSiQue: 529 for 909 aggregates); crossing relations between two clusters
/// grow with the product of their sizes, so the rate scales with `(cluster_size / 20)²`.
const RELATE_CALLS_PER_AGGREGATE: f64 = 0.58;
/// Prompt tokens of a relation call besides the template (both aggregates' findings, the lines).
const RELATE_INPUT_TOKENS: f64 = 500.0;
/// Completion tokens of one relation sentence.
const RELATE_TOKENS: f64 = 50.0;

/// One part of a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The stage its usage is counted under (`extraction`, `hirag`, `leanrag`).
    pub stage: String,
    /// What it is, e.g. `openie_ner` or `hirag_reports`.
    pub part: String,
    /// Expected calls.
    pub calls: u64,
    /// Expected prompt tokens.
    pub prompt_tokens: u64,
    /// Expected completion tokens.
    pub completion_tokens: u64,
    /// Whether the call count is counted from the chunks (else modelled).
    pub exact_calls: bool,
}

impl Part {
    /// A modelled part of `stage` (call count and tokens rounded from the model's real numbers).
    fn modelled(stage: &str, part: &str, calls: f64, prompt: f64, completion: f64) -> Self {
        Self {
            stage: stage.to_owned(),
            part: part.to_owned(),
            calls: round(calls),
            prompt_tokens: round(prompt),
            completion_tokens: round(completion),
            exact_calls: false,
        }
    }
}

/// The expected LLM use of a build. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Documents.
    pub documents: usize,
    /// Chunks of the index.
    pub chunks: usize,
    /// Their tokens (o200k).
    pub chunk_tokens: u64,
    /// Chunks the build would send to an LLM extractor (not in the extraction store or a dataset file).
    pub chunks_to_extract: usize,
    /// The parts, in build order.
    pub parts: Vec<Part>,
    /// Prices per million prompt and completion tokens (`[chat]`), when given.
    pub prices: Option<(f64, f64)>,
    /// What the estimate assumed, for the reader.
    pub notes: Vec<String>,
}

/// Calls and tokens of one stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTotals {
    /// Calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

impl StageTotals {
    fn add(&mut self, calls: u64, prompt: u64, completion: u64) {
        self.calls += calls;
        self.prompt_tokens += prompt;
        self.completion_tokens += completion;
    }
}

impl Estimate {
    /// Totals per stage (the keys of the index's `llm_by_stage`).
    pub fn stages(&self) -> BTreeMap<String, StageTotals> {
        let mut out: BTreeMap<String, StageTotals> = BTreeMap::new();
        for p in &self.parts {
            out.entry(p.stage.clone()).or_default().add(
                p.calls,
                p.prompt_tokens,
                p.completion_tokens,
            );
        }
        out
    }

    /// Totals over every stage.
    pub fn total(&self) -> StageTotals {
        let mut t = StageTotals::default();
        for p in &self.parts {
            t.add(p.calls, p.prompt_tokens, p.completion_tokens);
        }
        t
    }

    /// The expected cost in the prices' currency, when `[chat]` gives both prices.
    pub fn cost(&self) -> Option<f64> {
        let (input, output) = self.prices?;
        let t = self.total();
        Some((t.prompt_tokens as f64 * input + t.completion_tokens as f64 * output) / 1_000_000.0)
    }

    /// The estimate as a table: one row per part, then the totals and the cost.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} documents, {} chunks, {} tokens; {} chunks to extract with the model\n",
            self.documents, self.chunks, self.chunk_tokens, self.chunks_to_extract
        );
        out.push_str(&format!(
            "{:<12} {:<22} {:>10} {:>14} {:>14}  basis\n",
            "stage", "part", "calls", "prompt tok", "completion tok"
        ));
        for p in &self.parts {
            out.push_str(&format!(
                "{:<12} {:<22} {:>10} {:>14} {:>14}  {}\n",
                p.stage,
                p.part,
                p.calls,
                p.prompt_tokens,
                p.completion_tokens,
                if p.exact_calls {
                    "calls counted"
                } else {
                    "modelled"
                }
            ));
        }
        let t = self.total();
        out.push_str(&format!(
            "{:<12} {:<22} {:>10} {:>14} {:>14}\n",
            "total", "", t.calls, t.prompt_tokens, t.completion_tokens
        ));
        match self.cost() {
            Some(c) => out.push_str(&format!(
                "cost: {c:.2} at {} / {} per million prompt / completion tokens\n",
                self.prices.map_or(0.0, |p| p.0),
                self.prices.map_or(0.0, |p| p.1)
            )),
            None => out.push_str(
                "cost: give price_per_million_input and price_per_million_output in [chat] for a cost line\n",
            ),
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }

    /// This estimate beside the usage counted by a build, per stage: (stage, estimated, counted).
    pub fn against(
        &self,
        actual: &BTreeMap<String, UsageEntry>,
    ) -> Vec<(String, StageTotals, StageTotals)> {
        let mut stages = self.stages();
        for k in actual.keys() {
            if actual[k].calls > 0 {
                stages.entry(k.clone()).or_default();
            }
        }
        stages
            .into_iter()
            .map(|(k, e)| {
                let a = actual
                    .get(&k)
                    .map_or(StageTotals::default(), |u| StageTotals {
                        calls: u.calls,
                        prompt_tokens: u.prompt_tokens,
                        completion_tokens: u.completion_tokens,
                    });
                (k, e, a)
            })
            .collect()
    }
}

fn tokens(text: &str) -> u64 {
    Encoding::O200kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count()) as u64
}

/// Tokens of a conversation: each message's content plus a few for its role and framing.
fn messages_tokens(messages: &[kgrag_types::Message]) -> u64 {
    messages.iter().map(|m| tokens(&m.content) + 4).sum()
}

fn request_tokens(r: &ChatRequest) -> u64 {
    messages_tokens(&r.messages)
}

/// Expected hierarchical-Leiden communities (every level) of a graph of `entities`: the measured rate,
/// scaled down for small graphs, whose hierarchies have fewer levels (log of the size; 13 communities
/// for the fixture's 161 entities).
fn communities(entities: f64) -> f64 {
    let depth = (entities.max(1.0).log10() / COMMUNITIES_AT.log10()).clamp(0.0, 1.0);
    COMMUNITIES_PER_ENTITY * entities * depth
}

/// Expected non-singleton clusters of one HiRAG layer of `n` entities: the BIC scan over a 2-D
/// reduction picks a handful, growing with the log of the size (6 for MuSiQue's 16,235 entities, 1 for
/// the fixture's 161).
fn hirag_clusters(n: f64) -> f64 {
    (2.4 * n.max(1.0).log10() - 4.0).round().max(0.0)
}

fn round(x: f64) -> u64 {
    x.max(0.0).round() as u64
}

/// A chunk store lookup: whether the extractor with this fingerprint has finished this chunk.
type InStore<'a> = &'a dyn Fn(&str, &ChunkId) -> bool;

/// The per-chunk GraphRAG-style extraction of HiRAG (and LeanRAG's native G0) over `chunks` in `mode`:
/// with the LLM, its part (`None` with the rules, which call no model) and the chunks it would send;
/// either way the distinct entities it is expected to write.
fn graphrag_extraction(
    env: &Env,
    chat: &Arc<dyn ChatModel>,
    (stage, part): (&str, &str),
    chunks: &[kgrag_types::Chunk],
    mode: ExtractionMode,
    in_store: InStore<'_>,
) -> (Option<Part>, f64, usize) {
    let config = crate::graphs::graphrag_config(&env.config.hirag);
    let records: f64 = chunks
        .iter()
        .map(|c| RECORDS_PER_TOKEN * tokens(&c.text) as f64)
        .sum();
    let entities = records * DISTINCT_PER_RECORD;
    if mode != ExtractionMode::Llm {
        return (None, entities, 0);
    }
    let fingerprint =
        kgrag_openie::GraphRagExtractor::new(chat.clone(), config.clone()).fingerprint();
    let [entity_t, relation_t, glean_t, continue_t] =
        kgrag_openie::graphrag::prompt_templates(&config).map(|t| tokens(&t));
    let rounds = config.max_gleaning as u64;
    let gated = config.gleaning == kgrag_openie::Gleaning::Gated;
    let (mut calls, mut prompt, mut completion) = (0u64, 0f64, 0f64);
    let mut todo = 0usize;
    for c in chunks {
        if in_store(&fingerprint, &c.id) {
            continue;
        }
        let t = tokens(&c.text) as f64;
        todo += 1;
        let entities = RECORDS_PER_TOKEN * t;
        let a_out = entities * ENTITY_RECORD_TOKENS;
        let b_out = entities * RELATIONS_PER_RECORD * RELATION_RECORD_TOKENS;
        // Stage B names the entities of stage A (about 4 tokens each).
        for (template, input, out) in [
            (entity_t as f64, t, a_out),
            (relation_t as f64, t + 4.0 * entities, b_out),
        ] {
            let first = template + input;
            calls += 1;
            prompt += first;
            completion += out;
            if rounds == 0 {
                continue;
            }
            if gated {
                // One YES/NO turn, modelled as answered NO (the gleaning then stops).
                calls += 1;
                prompt += first + out + continue_t as f64;
                completion += 1.0;
            } else {
                // Each round re-sends the conversation so far.
                let mut so_far = first + out;
                for _ in 0..rounds {
                    calls += 1;
                    prompt += so_far + glean_t as f64;
                    completion += out * GLEANING_SHARE;
                    so_far += glean_t as f64 + out * GLEANING_SHARE;
                }
            }
        }
    }
    let part = Part {
        stage: stage.to_owned(),
        part: part.to_owned(),
        calls,
        prompt_tokens: round(prompt),
        completion_tokens: round(completion),
        exact_calls: !gated,
    };
    (Some(part), entities, todo)
}

/// The estimate for building `methods` over `chunks` (the facade's chunks) of `documents` documents;
/// `prefilled` chunks already have OpenIE triples (a dataset's file). No model is called.
pub(crate) fn estimate(
    env: &Env,
    methods: &[String],
    documents: usize,
    chunks: &[Passage],
    prefilled: &dyn Fn(&ChunkId) -> bool,
) -> Result<Estimate> {
    let config = &env.config;
    let has = |m: &str| methods.iter().any(|x| x == m);
    let chunk_tokens: u64 = chunks.iter().map(|(_, t)| tokens(t)).sum();
    let mut e = Estimate {
        documents,
        chunks: chunks.len(),
        chunk_tokens,
        prices: config.chat.as_ref().and_then(|c| c.prices()),
        ..Estimate::default()
    };
    let Some(chat) = env.chat.clone() else {
        e.notes.push(
            "no [chat] model: the build makes no LLM call (rule extraction, extractive summaries)"
                .into(),
        );
        return Ok(e);
    };
    // Read only when present: an estimate creates nothing.
    let store_path = env.cache_dir.join("extractions.redb");
    let store = store_path
        .exists()
        .then(|| kgrag_openie::ExtractionStore::open(&store_path).ok())
        .flatten();
    let in_store = |fingerprint: &str, id: &ChunkId| {
        store
            .as_ref()
            .and_then(|s| s.get(fingerprint, id).ok().flatten())
            .is_some()
    };

    // HippoRAG's OpenIE: two calls per chunk without triples.
    let needs_triples = crate::methods::registry()
        .iter()
        .any(|m| has(m.name()) && m.needs_triples(config));
    let openie_llm = matches!(config.openie, OpenIeMode::Llm | OpenIeMode::Auto);
    let openie_entities = OPENIE_ENTITIES_PER_TOKEN * chunk_tokens as f64;
    if needs_triples && openie_llm {
        let openie = kgrag_openie::HippoOpenIe::new(chat.clone());
        let fingerprint = openie.fingerprint();
        let ner_t = request_tokens(&openie.ner_request("")) as f64;
        let triple_t = request_tokens(&openie.triple_request("", &[])) as f64;
        let (mut n, mut ner_p, mut ner_c, mut tri_p, mut tri_c) = (0u64, 0f64, 0f64, 0f64, 0f64);
        // As the writer does: a passage with triples from a dataset file is not extracted; the others are
        // chunked for OpenIE (one chunk each) and looked up in the extraction store.
        let todo = crate::graphs::chunk_passages(
            chunks.iter().filter(|p| !prefilled(&p.0)),
            ChunkerConfig::hipporag(),
        )?;
        for c in &todo {
            if in_store(&fingerprint, &c.id) {
                continue;
            }
            let t = tokens(&c.text) as f64;
            let ner_out = NER_COMPLETION_PER_TOKEN * t + 8.0;
            n += 1;
            ner_p += ner_t + t;
            ner_c += ner_out;
            tri_p += triple_t + t + ner_out;
            tri_c += TRIPLE_COMPLETION_PER_TOKEN * t + 8.0;
        }
        e.chunks_to_extract = n as usize;
        e.parts.push(Part {
            stage: "extraction".into(),
            part: "openie_ner".into(),
            calls: n,
            prompt_tokens: round(ner_p),
            completion_tokens: round(ner_c),
            exact_calls: true,
        });
        e.parts.push(Part {
            stage: "extraction".into(),
            part: "openie_triples".into(),
            calls: n,
            prompt_tokens: round(tri_p),
            completion_tokens: round(tri_c),
            exact_calls: true,
        });
    } else if needs_triples {
        e.notes.push(format!(
            "openie = {:?}: triples without the model",
            config.openie
        ));
    }

    // HiRAG's base (also LeanRAG's G0 by default): extraction, then long descriptions summarised.
    let hirag_base = has("hirag") || (has("leanrag") && config.leanrag.g0 == G0Source::Hirag);
    let base_stage = if has("hirag") { "hirag" } else { "leanrag" };
    let mut base_entities = openie_entities;
    if hirag_base && config.hirag.base == BaseSource::Extract {
        let hchunks = crate::graphs::hirag_chunks(config, chunks)?;
        let (part, entities, todo) = graphrag_extraction(
            env,
            &chat,
            (base_stage, "hirag_extraction"),
            &hchunks,
            config.hirag.extraction,
            &in_store,
        );
        base_entities = entities;
        e.chunks_to_extract = e.chunks_to_extract.max(todo);
        if let Some(part) = part {
            e.parts.push(part);
            let n = base_entities * DESCRIPTION_SUMMARY_SHARE;
            e.parts.push(Part::modelled(
                base_stage,
                "hirag_descriptions",
                n,
                n * DESCRIPTION_PROMPT_TOKENS,
                n * DESCRIPTION_SUMMARY_TOKENS,
            ));
        }
    }

    // HiRAG's summary layers and community reports.
    if has("hirag") {
        let types: Vec<String> = config.hirag.entity_types.clone();
        let template = tokens(&kgrag_hierarchy::summarize::attribute_prompt(
            &kgrag_hierarchy::AttributeRequest {
                layer: 0,
                members: Vec::new(),
                entity_types: types,
            },
        )) as f64;
        let (mut calls, mut prompt, mut completion) = (0f64, 0f64, 0f64);
        let mut n = base_entities;
        for _ in 0..HIRAG_SUMMARY_LAYERS.min(config.hirag.max_layers) {
            let k = hirag_clusters(n).min(49.0);
            if n <= 2.0 || k < 1.0 {
                break;
            }
            let members = n / k;
            let cap = config.hirag.max_cluster_prompt_tokens as f64;
            calls += k;
            prompt += k * (template + (members * MEMBER_TOKENS).min(cap));
            completion += k * CLUSTER_SUMMARY_TOKENS;
            n = k * HIRAG_ENTITIES_PER_SUMMARY;
        }
        e.parts.push(Part::modelled(
            "hirag",
            "hirag_hierarchy",
            calls,
            prompt,
            completion,
        ));
        let template = messages_tokens(&kgrag_community::report::report_messages("")) as f64;
        let communities = communities(base_entities);
        let context = (COMMUNITY_MEMBERS * REPORT_TOKENS_PER_MEMBER)
            .min(config.hirag.report_context_tokens as f64);
        e.parts.push(Part::modelled(
            "hirag",
            "hirag_reports",
            communities,
            communities * (template + context),
            communities * REPORT_TOKENS,
        ));
    }

    // LeanRAG: its own G0 when native, then aggregates and relations layer by layer.
    if has("leanrag") {
        let lc = &config.leanrag;
        let mut n0 = base_entities;
        if lc.g0 == G0Source::Native {
            let lchunks = crate::graphs::rechunk_passages(chunks, ChunkerConfig::leanrag())?;
            let (part, entities, todo) = graphrag_extraction(
                env,
                &chat,
                ("leanrag", "leanrag_extraction"),
                &lchunks,
                lc.extraction,
                &in_store,
            );
            n0 = entities;
            e.chunks_to_extract = e.chunks_to_extract.max(todo);
            e.parts.extend(part);
        }
        let aggregate_t = messages_tokens(&kgrag_hierarchy::summarize::aggregate_messages(
            &kgrag_hierarchy::AggregateRequest {
                layer: 0,
                members: Vec::new(),
                relations: Vec::new(),
                prompt_tokens: None,
            },
        )) as f64;
        let relate_t = messages_tokens(&kgrag_hierarchy::summarize::relate_messages(
            &kgrag_hierarchy::RelateRequest {
                layer: 0,
                a: (String::new(), Vec::new()),
                b: (String::new(), Vec::new()),
                lines: String::new(),
                descriptions: Vec::new(),
                word_limit: 40,
            },
        )) as f64;
        let depth = lc
            .max_depth
            .unwrap_or_else(|| (n0.max(1.0).ln() / 20f64.ln()).round() as usize + 1);
        let cap = lc.aggregate_prompt_tokens as f64;
        let (mut aggregates, mut relations, mut agg_p) = (0f64, 0f64, 0f64);
        let mut n = n0;
        for _ in 0..depth {
            if n <= lc.min_layer_nodes.max(2) as f64 {
                break;
            }
            // k = max(⌊N / cluster_size⌋, k_BIC), modelled by its floor.
            let k = (n / lc.cluster_size.max(1) as f64).floor().max(1.0);
            if k <= lc.min_clusters as f64 {
                break;
            }
            let members = n / k;
            aggregates += k;
            agg_p += k * (aggregate_t + (members * MEMBER_TOKENS * 2.0).min(cap));
            relations += k * RELATE_CALLS_PER_AGGREGATE * (lc.cluster_size as f64 / 20.0).powi(2);
            n = k;
        }
        if n > 1.0 {
            // The root over the last layer.
            aggregates += 1.0;
            agg_p += aggregate_t + (n * MEMBER_TOKENS * 2.0).min(cap);
        }
        e.parts.push(Part::modelled(
            "leanrag",
            "leanrag_aggregates",
            aggregates,
            agg_p,
            aggregates * AGGREGATE_TOKENS,
        ));
        e.parts.push(Part::modelled(
            "leanrag",
            "leanrag_relations",
            relations,
            relations * (relate_t + RELATE_INPUT_TOKENS),
            relations * RELATE_TOKENS,
        ));
    }
    if e.parts.is_empty() {
        e.notes
            .push("the methods asked for make no LLM call while indexing".into());
    } else {
        e.notes.push(
            "per-chunk calls are counted from the chunks; completions and every call that depends on the \
             extracted graph are modelled (expect them within a factor of about two)"
                .into(),
        );
    }
    Ok(e)
}
