//! Answering from a LeanRAG context (spec §6.4): the `rag_response` system prompt (our wording) with the
//! context inserted and cut to `system_prompt_max_tokens` (cl100k), the raw query as the user message; or
//! the offline kit's extractive answer.

use kgrag_text::{Budget, Encoding, ExtractiveSummarizer};
use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, RetrievedContext};

use crate::config::LeanragConfig;
use crate::{LeanragError, Result};

/// o200k budget of the offline extractive answer (specs README, "Extractive answer").
pub const EXTRACTIVE_ANSWER_TOKENS: usize = 200;

/// The system message for `context`, cut to `max_tokens` cl100k tokens.
pub fn system_prompt(context: &str, response_type: &str, max_tokens: usize) -> String {
    let full = format!(
        "You answer questions using the data below, retrieved from a knowledge graph: the entities that \
         matched the question with their parent aggregates, higher-level aggregate entities, relations \
         along the paths that connect the entities, and source texts.\n\n\
         Goal: answer the question in the requested length and format, summarising the relevant \
         information. If the data does not hold the answer, say that you do not know. Do not make \
         anything up.\n\n\
         Response length and format: {response_type}\n\n\
         Style: markdown, with sections as the length and format call for.\n\n\
         Data:\n{context}"
    );
    Encoding::Cl100kBase
        .truncate(&full, max_tokens)
        .map_or(full.clone(), str::to_owned)
}

/// The answer request for `query` over `ctx`.
pub fn answer_request(ctx: &RetrievedContext, query: &str, config: &LeanragConfig) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(system_prompt(
                &ctx.rendered,
                &config.response_type,
                config.system_prompt_max_tokens,
            )),
            Message::user(query),
        ],
        settings: GenerationSettings {
            temperature: Some(config.temperature),
            ..GenerationSettings::default()
        },
    }
}

/// The model's answer to `query` over `ctx`.
pub async fn answer(
    chat: &dyn ChatModel,
    ctx: &RetrievedContext,
    query: &str,
    config: &LeanragConfig,
) -> Result<String> {
    let reply = chat
        .chat(&answer_request(ctx, query, config))
        .await
        .map_err(|e| LeanragError::Model(format!("answering: {e}")))?;
    Ok(reply.content.trim().to_owned())
}

/// The offline answer (spec §10): the extractive summary of the context's lines (seed and aggregate
/// descriptions, relation descriptions, chunk texts) centred on the query, within 200 o200k tokens.
pub async fn extractive_answer(
    text: &ExtractiveSummarizer,
    ctx: &RetrievedContext,
    query: &str,
) -> Result<String> {
    let parts: Vec<String> = ctx
        .rendered
        .lines()
        .filter(|l| !l.ends_with(':') && !l.starts_with("entity_name\t\t"))
        .map(|l| l.rsplit("\t\t").next().unwrap_or(l).to_owned())
        .collect();
    Ok(text
        .summarize_texts(
            &parts,
            Some(query),
            Budget::Tokens {
                max: EXTRACTIVE_ANSWER_TOKENS,
                encoding: Encoding::O200kBase,
            },
        )
        .await?)
}
