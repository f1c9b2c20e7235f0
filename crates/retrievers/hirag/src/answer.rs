//! Answering from a HiRAG context (spec §7.3): the answer prompt through a chat model (our wording of a
//! GraphRAG local-search style system prompt), or — offline — the kit's extractive answer over the
//! assembled context.

use kgrag_text::{Budget, Encoding, ExtractiveSummarizer};
use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, RetrievedContext};

use crate::retrieve::{HiragRetriever, FAIL_RESPONSE};
use crate::{HiragError, Result};

/// o200k budget of the offline extractive answer (specs README, "Extractive answer").
pub const EXTRACTIVE_ANSWER_TOKENS: usize = 200;

/// The system prompt with `context` inserted: answer in `response_type` length and format from the data
/// tables (and general knowledge), say so when the answer is not known, never invent, markdown sections.
pub fn system_prompt(context: &str, response_type: &str) -> String {
    format!(
        "You answer questions about the data tables below, which were retrieved from a knowledge graph \
         for this question: background reports on communities of entities, a reasoning path of relations, \
         entity details and source documents.\n\n\
         Goal: write a response of the requested length and format that answers the question. Use what \
         the tables say, and general knowledge where it helps. If the tables do not contain the answer \
         and you do not know it, say that you do not know. Do not make anything up, and do not state \
         anything for which the tables give no support.\n\n\
         Response length and format: {response_type}\n\n\
         Style: organise the response in markdown sections as the length and format call for.\n\n\
         Data tables:\n{context}"
    )
}

/// The answer request for `query` over `ctx`: system prompt with the rendered context, the raw query as
/// the user message, temperature 0.
pub fn answer_request(ctx: &RetrievedContext, query: &str, response_type: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(system_prompt(&ctx.rendered, response_type)),
            Message::user(query),
        ],
        settings: GenerationSettings {
            temperature: Some(0.0),
            ..GenerationSettings::default()
        },
    }
}

/// Whether `ctx` is the fixed no-hit context.
pub fn is_no_hit(ctx: &RetrievedContext) -> bool {
    ctx.stats.get("no_entity_hit").copied().unwrap_or(0.0) > 0.0 || ctx.rendered == FAIL_RESPONSE
}

/// The model's answer to `query` over `ctx` ([`FAIL_RESPONSE`] without calling it when nothing matched).
pub async fn answer(
    chat: &dyn ChatModel,
    ctx: &RetrievedContext,
    query: &str,
    response_type: &str,
) -> Result<String> {
    if is_no_hit(ctx) {
        return Ok(FAIL_RESPONSE.to_owned());
    }
    let reply = chat
        .chat(&answer_request(ctx, query, response_type))
        .await
        .map_err(|e| HiragError::Model(format!("answering: {e}")))?;
    Ok(reply.content.trim().to_owned())
}

/// The offline answer (spec §10): the extractive summary of the context's texts — reports, relation and
/// entity descriptions, the rendered source documents — centred on the query, within 200 o200k tokens.
pub async fn extractive_answer(
    text: &ExtractiveSummarizer,
    retriever: &HiragRetriever,
    ctx: &RetrievedContext,
    query: &str,
) -> Result<String> {
    if is_no_hit(ctx) {
        return Ok(FAIL_RESPONSE.to_owned());
    }
    let mut texts: Vec<String> = Vec::new();
    for r in &ctx.reports {
        texts.push(r.text.clone());
    }
    for r in &ctx.relations {
        texts.extend(r.description.split("<SEP>").map(str::to_owned));
    }
    for e in &ctx.entities {
        texts.extend(e.description.split("<SEP>").map(str::to_owned));
    }
    for p in retriever.rendered_units(ctx) {
        if let Some(t) = retriever.chunk_text(&p.chunk_id) {
            texts.push(t.to_owned());
        }
    }
    Ok(text
        .summarize_texts(
            &texts,
            Some(query),
            Budget::Tokens {
                max: EXTRACTIVE_ANSWER_TOKENS,
                encoding: Encoding::O200kBase,
            },
        )
        .await?)
}
