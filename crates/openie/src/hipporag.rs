//! HippoRAG's OpenIE: a named-entity call, then a triple call conditioned on those entities (spec
//! `hipporag2.md` §4.3). Prompt wording and the one-shot example are ours; the message structure and the JSON
//! output formats are the reference's, so its cache files stay interchangeable.
//!
//! ```
//! use kgrag_openie::HippoOpenIe;
//! use kgrag_types::testing::ScriptedChatModel;
//! use kgrag_types::{Chunk, ChunkId, DocId, Extractor, Span, Triple};
//!
//! let model = ScriptedChatModel::new([
//!     r#"{"named_entities": ["Radio City", "India"]}"#,
//!     r#"{"triples": [["Radio City", "located in", "India"]]}"#,
//! ]);
//! let text = "Radio City\nRadio City is India's first private FM radio station.";
//! let chunk = Chunk { id: ChunkId::from_content(text), doc_id: DocId::from_text(text), text: text.into(),
//!                     tokens: 14, order: 0, span: Span::default() };
//! let extraction = tokio_test_block_on(HippoOpenIe::new(&model).extract(&chunk))?;
//! assert_eq!(extraction.triples, [Triple::new("Radio City", "located in", "India")]);
//! assert_eq!(extraction.diagnostics.llm_calls, 2);
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! # Ok::<(), kgrag_types::Error>(())
//! ```

use async_trait::async_trait;
use kgrag_types::{
    ChatModel, ChatRequest, Chunk, Diagnostics, Entity, Extraction, Extractor, FinishReason,
    GenerationSettings, IssueSeverity, Message, ParseIssue, Triple,
};
use serde_json::Value;

use crate::lenient::{extract_key, Recovery};

const NER_SYSTEM: &str = "You find the named entities in a passage. Answer with one JSON object of the form \
{\"named_entities\": [\"...\"]}, listing every named entity (people, places, organisations, works, dates, \
numbers with units, languages, websites) once, written exactly as in the passage.";

const TRIPLE_SYSTEM: &str = "You turn a passage into RDF-style triples (subject, predicate, object) for a \
knowledge graph, using the passage's named entities. Rules: each triple should contain at least one of the \
listed named entities, and preferably two; replace pronouns with the names they refer to. Answer with one JSON \
object of the form {\"triples\": [[\"subject\", \"predicate\", \"object\"], ...]}.";

const TRIPLE_REQUEST: &str =
    "Turn the paragraph below into a JSON dict that holds its named entities and a list of triples.";

/// Our one-shot example: an invented observatory, not taken from any evaluation set.
const DEMO_PASSAGE: &str = "Marlow Observatory\nMarlow Observatory is an astronomical research station built \
in 1962 on Mount Kessel in Chile. It is run by the Andean Space Institute, whose working language is Spanish. \
Its website, marlowobs.cl, publishes a nightly sky report.";

const DEMO_ENTITIES: &[&str] = &[
    "Marlow Observatory",
    "1962",
    "Mount Kessel",
    "Chile",
    "Andean Space Institute",
    "Spanish",
    "marlowobs.cl",
];

const DEMO_TRIPLES: &[[&str; 3]] = &[
    ["Marlow Observatory", "is", "astronomical research station"],
    ["Marlow Observatory", "built in", "1962"],
    ["Marlow Observatory", "located on", "Mount Kessel"],
    ["Mount Kessel", "located in", "Chile"],
    ["Marlow Observatory", "located in", "Chile"],
    ["Marlow Observatory", "run by", "Andean Space Institute"],
    ["Andean Space Institute", "working language", "Spanish"],
    ["Marlow Observatory", "website", "marlowobs.cl"],
    ["marlowobs.cl", "publishes", "nightly sky report"],
    ["Andean Space Institute", "runs", "Marlow Observatory"],
];

/// A JSON string literal.
fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `{"named_entities": ["A", "B"]}` with Python's `json.dumps` separators.
fn ner_json(entities: &[String]) -> String {
    let items: Vec<String> = entities.iter().map(|e| json_str(e)).collect();
    format!("{{\"named_entities\": [{}]}}", items.join(", "))
}

fn triples_json(triples: &[[&str; 3]]) -> String {
    let items: Vec<String> = triples
        .iter()
        .map(|t| {
            format!(
                "[{}, {}, {}]",
                json_str(t[0]),
                json_str(t[1]),
                json_str(t[2])
            )
        })
        .collect();
    format!("{{\"triples\": [{}]}}", items.join(", "))
}

fn triple_user(passage: &str, entities: &[String]) -> String {
    format!(
        "{TRIPLE_REQUEST}\nParagraph:\n```\n{passage}\n```\n\n{}\n",
        ner_json(entities)
    )
}

/// Python's `str()` of a JSON value, as the reference casts triple elements.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn excerpt(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The list under `key` in a model's reply. A missing object or a non-list is recorded as `Failed`, a
/// closed truncation as `Repaired`.
fn list_for_key(
    reply: &str,
    key: &str,
    stage: &str,
    issues: &mut Vec<ParseIssue>,
) -> Option<Vec<Value>> {
    let mut note = |severity, message: String, text: &str| {
        issues.push(ParseIssue {
            stage: stage.into(),
            severity,
            message,
            excerpt: excerpt(text),
        })
    };
    let Some((value, recovery)) = extract_key(reply, key) else {
        note(
            IssueSeverity::Failed,
            format!("no JSON object with \"{key}\" in the reply"),
            reply,
        );
        return None;
    };
    if recovery == Recovery::ClosedTruncation {
        note(
            IssueSeverity::Repaired,
            "truncated JSON was closed".into(),
            reply,
        );
    }
    match value {
        Value::Array(items) => Some(items),
        other => {
            note(
                IssueSeverity::Failed,
                format!("\"{key}\" is not a list"),
                &other.to_string(),
            );
            None
        }
    }
}

/// Entities from a NER reply: strings, de-duplicated in order. Problems go to `issues`.
pub fn parse_ner(reply: &str, issues: &mut Vec<ParseIssue>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for item in list_for_key(reply, "named_entities", "ner", issues).unwrap_or_default() {
        let name = py_str(&item);
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    out
}

/// Triples from a triple reply: lists of exactly three elements, each cast to a string, exact duplicates
/// removed in order (the reference's validity filter). Problems go to `issues`.
pub fn parse_triples(reply: &str, issues: &mut Vec<ParseIssue>) -> Vec<Triple> {
    let mut out: Vec<Triple> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for item in list_for_key(reply, "triples", "triples", issues).unwrap_or_default() {
        match &item {
            Value::Array(parts) if parts.len() == 3 => {
                let t = Triple::new(py_str(&parts[0]), py_str(&parts[1]), py_str(&parts[2]));
                if seen.insert(t.clone()) {
                    out.push(t);
                }
            }
            other => issues.push(ParseIssue {
                stage: "triples".into(),
                severity: IssueSeverity::Skipped,
                message: "not a list of exactly three elements".into(),
                excerpt: excerpt(&other.to_string()),
            }),
        }
    }
    out
}

/// HippoRAG's two-call OpenIE over any [`ChatModel`].
pub struct HippoOpenIe<M> {
    model: M,
    settings: GenerationSettings,
}

impl<M: ChatModel> HippoOpenIe<M> {
    /// OpenIE with the reference settings: temperature 0, 2048 new tokens.
    pub fn new(model: M) -> Self {
        Self {
            model,
            settings: GenerationSettings {
                temperature: Some(0.0),
                max_tokens: Some(2048),
                ..GenerationSettings::default()
            },
        }
    }

    /// Replaces the generation settings.
    pub fn with_settings(mut self, settings: GenerationSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The NER conversation for a passage.
    pub fn ner_request(&self, passage: &str) -> ChatRequest {
        let demo: Vec<String> = DEMO_ENTITIES.iter().map(|s| s.to_string()).collect();
        ChatRequest {
            messages: vec![
                Message::system(NER_SYSTEM),
                Message::user(DEMO_PASSAGE),
                Message::assistant(ner_json(&demo)),
                Message::user(passage),
            ],
            settings: self.settings.clone(),
        }
    }

    /// The triple conversation for a passage and its entities.
    pub fn triple_request(&self, passage: &str, entities: &[String]) -> ChatRequest {
        let demo: Vec<String> = DEMO_ENTITIES.iter().map(|s| s.to_string()).collect();
        ChatRequest {
            messages: vec![
                Message::system(TRIPLE_SYSTEM),
                Message::user(triple_user(DEMO_PASSAGE, &demo)),
                Message::assistant(triples_json(DEMO_TRIPLES)),
                Message::user(triple_user(passage, entities)),
            ],
            settings: self.settings.clone(),
        }
    }
}

fn note_call(diagnostics: &mut Diagnostics, response: &kgrag_types::ChatResponse, stage: &str) {
    diagnostics.llm_calls += 1;
    diagnostics.prompt_tokens += response.usage.prompt_tokens;
    diagnostics.completion_tokens += response.usage.completion_tokens;
    if response.finish_reason == FinishReason::Length {
        diagnostics.issues.push(ParseIssue {
            stage: stage.to_owned(),
            severity: IssueSeverity::Repaired,
            message: "the reply hit the token limit".into(),
            excerpt: String::new(),
        });
    }
}

#[async_trait]
impl<M: ChatModel> Extractor for HippoOpenIe<M> {
    fn fingerprint(&self) -> String {
        let probe = self.triple_request("", &[]);
        let prompt = serde_json::to_string(&(self.ner_request(""), probe)).unwrap_or_default();
        format!(
            "hippo-openie-v1:{}:{}",
            self.model.model_name(),
            kgrag_types::md5_hex(prompt.as_bytes())
        )
    }

    async fn extract(&self, chunk: &Chunk) -> kgrag_types::Result<Extraction> {
        let mut extraction = Extraction::empty(chunk.id.clone());
        let ner_reply = self.model.chat(&self.ner_request(&chunk.text)).await?;
        note_call(&mut extraction.diagnostics, &ner_reply, "ner");
        let entities = parse_ner(&ner_reply.content, &mut extraction.diagnostics.issues);
        let triple_reply = self
            .model
            .chat(&self.triple_request(&chunk.text, &entities))
            .await?;
        note_call(&mut extraction.diagnostics, &triple_reply, "triples");
        extraction.triples =
            parse_triples(&triple_reply.content, &mut extraction.diagnostics.issues);
        extraction.entities = entities
            .into_iter()
            .map(|name| Entity {
                name,
                source_chunks: [chunk.id.clone()].into_iter().collect(),
                ..Entity::default()
            })
            .collect();
        Ok(extraction)
    }
}
