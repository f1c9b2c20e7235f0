//! OpenAI-compatible endpoints: `GET /v1/models` lists the strategies as models, `POST
//! /v1/chat/completions` answers the last user message with the strategy named as the model (the answer
//! from the configured reader), as one JSON reply or, with `stream: true`, as server-sent events. The
//! ranked passages ride along in a `kgrag` field that OpenAI clients ignore.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State as Shared;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{check_question, check_strategy, committed, run_strategy, ApiJson};
use crate::error::{ApiError, ApiResult};
use crate::State;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `GET /v1/models`.
pub(crate) async fn models(Shared(state): Shared<Arc<State>>) -> Json<Value> {
    let searcher = state.reader.searcher();
    let data: Vec<Value> = searcher
        .strategies()
        .into_iter()
        .map(|s| json!({"id": s, "object": "model", "created": 0, "owned_by": "kgrag"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

#[derive(Deserialize)]
pub(crate) struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

/// The request's fields kgrag reads (others, such as `temperature`, are accepted and ignored).
#[derive(Deserialize)]
pub(crate) struct ChatCompletionRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
}

/// A message's text: a string, or the text parts of an array of content parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Splits `text` into pieces of a few words for streaming (white space kept, so the pieces join back
/// to `text`).
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut words = 0;
    for part in text.split_inclusive(char::is_whitespace) {
        current.push_str(part);
        words += 1;
        if words == 4 {
            out.push(std::mem::take(&mut current));
            words = 0;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    Shared(state): Shared<Arc<State>>,
    ApiJson(request): ApiJson<ChatCompletionRequest>,
) -> ApiResult<Response> {
    let searcher = committed(&state)?;
    check_strategy(&searcher, &request.model)?;
    let question = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_ref())
        .map(text_of)
        .unwrap_or_default();
    if question.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "the last user message has no text: it is the question",
        ));
    }
    check_question(&question)?;
    let top_k = searcher.config().retriever.top_k;
    let outcome = run_strategy(
        &state,
        &searcher,
        "/v1/chat/completions",
        &question,
        &request.model,
        top_k,
        true,
    )
    .await?;
    let Some(answer) = outcome.answer.clone() else {
        return Err(ApiError::bad_request(
            "this server has no reader (reader = \"none\"): use POST /v1/query for the ranked passages",
        ));
    };
    let id = format!(
        "chatcmpl-kgrag-{}",
        state.completions.fetch_add(1, Ordering::Relaxed) + 1
    );
    let created = now();
    // The reader's own counts with an LLM; offline, the context's tokens and the answer's words.
    let completion_tokens = match outcome.usage.completion_tokens {
        0 => answer.split_whitespace().count() as u64,
        n => n,
    };
    let prompt_tokens = match outcome.usage.prompt_tokens {
        0 => outcome.context.context_tokens as u64,
        n => n,
    };
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    });
    let extra = json!({
        "passages": outcome.passages,
        "generation": outcome.generation,
        "latency_ms": outcome.latency_ms,
        "llm_calls": outcome.usage.calls,
    });
    if request.stream != Some(true) {
        return Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": request.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }],
            "usage": usage,
            "kgrag": extra,
        }))
        .into_response());
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in pieces(&answer) {
        events.push(chunk(json!({"content": piece}), None));
    }
    let mut last = chunk(json!({}), Some("stop"));
    last["usage"] = usage;
    last["kgrag"] = extra;
    events.push(last);
    let stream = futures_util::stream::iter(
        events
            .into_iter()
            .map(|e| Event::default().data(e.to_string()))
            .chain(std::iter::once(Event::default().data("[DONE]")))
            .map(Ok::<_, Infallible>),
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_back_to_the_answer() {
        let text = "Warsaw is the capital of Poland,\nand the Vistula flows through it.";
        let p = pieces(text);
        assert!(p.len() > 2);
        assert_eq!(p.concat(), text);
        assert!(pieces("").is_empty());
    }

    #[test]
    fn content_parts_are_read_as_text() {
        let v = json!([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]);
        assert_eq!(text_of(&v), "a\nb");
        assert_eq!(text_of(&json!("q")), "q");
        assert_eq!(text_of(&Value::Null), "");
    }
}
