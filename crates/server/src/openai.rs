//! OpenAI-compatible endpoints: `GET /v1/models` lists the strategies as models, `POST
//! /v1/chat/completions` answers the last user message with the strategy named as the model (the answer
//! from the configured reader, citing its passages as `[n]`), as one JSON reply or, with `stream: true`,
//! as server-sent events carrying the reader's tokens as it generates them. The ranked passages (with
//! their sources) and the answer's citations ride along in a `kgrag` field that OpenAI clients ignore.

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

use crate::api::{check_question, check_strategy, committed, ApiJson};
use crate::error::{ApiError, ApiResult};
use crate::indexes::{lease_to_read, Client};
use crate::query::{run_strategy, Outcome, Progress};
use crate::State;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `GET /v1/models`: every strategy of every index the key may read, as `index/strategy`, and the
/// default index's strategies by their bare names too (nothing is loaded for the listing).
pub(crate) async fn models(
    Shared(state): Shared<Arc<State>>,
    Client(grant): Client,
) -> Json<Value> {
    let model = |id: String, index: &str| json!({"id": id, "object": "model", "created": 0, "owned_by": "kgrag", "index": index});
    let mut data = Vec::new();
    if let Some(default) = state.catalog.default_name().filter(|d| grant.can_read(d)) {
        for s in state.catalog.strategies(default) {
            data.push(model(s, default));
        }
    }
    for listed in state.catalog.list() {
        if !grant.can_read(&listed.name) {
            continue;
        }
        for s in state.catalog.strategies(&listed.name) {
            data.push(model(format!("{}/{s}", listed.name), &listed.name));
        }
    }
    Json(json!({"object": "list", "data": data}))
}

/// The index and strategy a model names: `index/strategy`, or a strategy of the default index (when the
/// client may see it).
fn split_model(
    state: &State,
    grant: &crate::keys::Grant,
    model: &str,
) -> ApiResult<(String, String)> {
    if let Some((index, strategy)) = model.split_once('/') {
        return Ok((index.to_owned(), strategy.to_owned()));
    }
    let default = crate::indexes::default_for(state, grant).map_err(|_| {
        ApiError::not_found(format!(
            "model {model:?}: this server has no default index; name the model index/strategy (GET \
             /v1/models lists them)"
        ))
    })?;
    Ok((default, model.to_owned()))
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

/// A message's content as OpenAI's API has it: a string, null, or content parts — objects with a
/// `type`, a `text` string in those of type `text`.
fn check_content(content: &Value) -> Result<(), String> {
    match content {
        Value::String(_) | Value::Null => Ok(()),
        Value::Array(parts) => {
            for (k, p) in parts.iter().enumerate() {
                let kind = p.get("type").and_then(Value::as_str);
                match kind {
                    None => return Err(format!("part {k} has no \"type\"")),
                    Some("text") if !p.get("text").is_some_and(Value::is_string) => {
                        return Err(format!(
                            "part {k} is of type text without a \"text\" string"
                        ))
                    }
                    Some(_) => {}
                }
            }
            Ok(())
        }
        _ => Err("give a string or an array of content parts".into()),
    }
}

/// The roles of OpenAI's chat messages.
const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

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

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    Shared(state): Shared<Arc<State>>,
    Client(grant): Client,
    ApiJson(request): ApiJson<ChatCompletionRequest>,
) -> ApiResult<Response> {
    // The request is checked before its index is leased (a load for a request refused anyway would be
    // wasted, and could evict another index).
    if let Some(m) = request
        .messages
        .iter()
        .find(|m| !ROLES.contains(&m.role.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "a message's role is {:?}: give one of {}",
            m.role,
            ROLES.join(", ")
        )));
    }
    for (i, m) in request.messages.iter().enumerate() {
        if let Some(content) = &m.content {
            check_content(content)
                .map_err(|e| ApiError::unprocessable(format!("messages[{i}].content: {e}")))?;
        }
    }
    // The question: the text of the last user message that has any.
    let question = request
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == "user")
        .filter_map(|m| m.content.as_ref().map(text_of))
        .find(|t| !t.trim().is_empty())
        .unwrap_or_default();
    if question.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "no user message has text: the last one that has is the question",
        ));
    }
    check_question(&question)?;
    let (index, strategy) = split_model(&state, &grant, &request.model)?;
    let lease = lease_to_read(&state, &grant, &index).await?;
    let searcher = committed(&lease)?;
    check_strategy(&searcher, &strategy)?;
    if lease.reader_name == "none" {
        return Err(ApiError::bad_request(
            "this server has no reader (reader = \"none\"): use POST /v1/query for the ranked passages",
        ));
    }
    let top_k = searcher.config().retriever.top_k;
    let id = format!(
        "chatcmpl-kgrag-{}",
        state.completions.fetch_add(1, Ordering::Relaxed) + 1
    );
    let created = now();
    if request.stream != Some(true) {
        let outcome = run_strategy(
            &state,
            &searcher,
            "/v1/chat/completions",
            &question,
            &strategy,
            top_k,
            true,
            (&None, 0),
        )
        .await?;
        drop(lease);
        let answer = outcome.answer().unwrap_or_default().to_owned();
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
            "usage": usage(&outcome),
            "kgrag": extra(&outcome),
        }))
        .into_response());
    }
    // Streamed: the reader's tokens as they are generated, then the usage and kgrag's passages and
    // citations in the last chunk.
    let model = request.model.clone();
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Progress)>();
    let (events, out) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let data = |v: Value| Event::default().data(v.to_string());
    let _ = events.send(data(chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    )));
    let task = tokio::spawn(async move {
        let progress = Some(tx);
        let outcome = run_strategy(
            &state,
            &searcher,
            "/v1/chat/completions",
            &question,
            &strategy,
            top_k,
            true,
            (&progress, 0),
        )
        .await;
        // The index stays loaded until the answer has been read.
        drop(lease);
        outcome
    });
    tokio::spawn(async move {
        while let Some((_, p)) = rx.recv().await {
            if let Progress::Token(piece) = p {
                if events
                    .send(data(chunk(json!({"content": piece}), None)))
                    .is_err()
                {
                    return;
                }
            }
        }
        let last = match task.await {
            Ok(Ok(outcome)) => {
                let mut last = chunk(json!({}), Some("stop"));
                last["usage"] = usage(&outcome);
                last["kgrag"] = extra(&outcome);
                last
            }
            Ok(Err(e)) => json!({"error": {"code": e.code, "message": e.message}}),
            Err(_) => {
                json!({"error": {"code": "internal", "message": "the answer failed inside the server"}})
            }
        };
        let _ = events.send(data(last));
        let _ = events.send(Event::default().data("[DONE]"));
    });
    let mut out = out;
    let body = futures_util::stream::poll_fn(move |cx| {
        out.poll_recv(cx).map(|e| e.map(Ok::<_, Infallible>))
    });
    Ok(Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The usage of an answer: the reader's own counts with an LLM; offline, the context's tokens and the
/// answer's words.
fn usage(outcome: &Outcome) -> Value {
    let answer = outcome.answer().unwrap_or_default();
    let completion_tokens = match outcome.usage.completion_tokens {
        0 => answer.split_whitespace().count() as u64,
        n => n,
    };
    let prompt_tokens = match outcome.usage.prompt_tokens {
        0 => outcome.context.context_tokens as u64,
        n => n,
    };
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    })
}

/// What rides along in the `kgrag` field: the passages (with their sources) and the answer's citations.
fn extra(outcome: &Outcome) -> Value {
    json!({
        "passages": outcome.passages,
        "citations": outcome.citations(),
        "generation": outcome.generation,
        "latency_ms": outcome.latency_ms,
        "first_token_ms": outcome.cited.as_ref().and_then(|c| c.first_token_ms),
        "llm_calls": outcome.usage.calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_parts_are_checked() {
        assert!(check_content(&json!("q")).is_ok() && check_content(&Value::Null).is_ok());
        assert!(
            check_content(&json!([{"type": "text", "text": "a"}, {"type": "image_url"}])).is_ok()
        );
        assert!(check_content(&json!([{"type": "text"}])).is_err());
        assert!(check_content(&json!([{"text": "a"}])).is_err());
        assert!(check_content(&json!(5)).is_err());
    }

    #[test]
    fn content_parts_are_read_as_text() {
        let v = json!([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]);
        assert_eq!(text_of(&v), "a\nb");
        assert_eq!(text_of(&json!("q")), "q");
        assert_eq!(text_of(&Value::Null), "");
    }
}
