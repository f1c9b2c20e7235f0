//! Answers that cite their passages.
//!
//! With `cite = true` (the default; `kgrag bench` keeps each method's reference reader), the reader sees
//! numbered sources and is asked to cite them as `[n]`:
//!
//! - **HiRAG** (every mode): its context already numbers its sources — the `id` column of the Sources table
//!   (from 0). The reference system prompt, with the context as the method rendered it, gets one more
//!   paragraph asking the model to cite those ids.
//! - **dense, HippoRAG 2**: the top passages, numbered from 1, in a prompt of ours.
//! - **LeanRAG**: its reference prompt with its context unchanged, followed by the top passages numbered
//!   from 1 as "Sources".
//!
//! The reply's `[n]` (also `[1, 3]`, `[1][3]`) are resolved against those numbers: each becomes a
//! [`Citation`] with the chunk and where it came from (file, pages, section); a number that names no source
//! is removed from the text and counted ([`CitedAnswer::dropped_citations`]), never shown. Offline, the
//! extractive reader's answer cites, after each sentence, the source that sentence was taken from.
//!
//! The model's tokens can be streamed (`on_token`); citations are resolved once the reply has ended, and the
//! time to the first token is measured.

use std::sync::Mutex;
use std::time::Instant;

use kgrag_types::{ChatRequest, ChunkId, GenerationSettings, Message, TokenSink};
use serde::{Deserialize, Serialize};

use crate::citations::PassageSource;

/// One cited source of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The number the answer cites it by (`[n]`).
    pub number: u32,
    /// The chunk.
    pub chunk_id: ChunkId,
    /// Where it came from (document, file, pages, section, label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PassageSource>,
}

/// An answer with its citations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CitedAnswer {
    /// The answer's text (citation marks that name no source removed).
    pub text: String,
    /// The sources it cites, in the order first cited.
    pub citations: Vec<Citation>,
    /// Citation marks that named no source and were removed.
    pub dropped_citations: u32,
    /// Milliseconds from the start of reading to the model's first token (streamed model answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
}

/// An answer read from passages given by the caller ([`crate::Searcher::read_passages`]): its text and
/// the passages it cites, by their numbers (the first passage is 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumberedAnswer {
    /// The answer's text (citation marks that name no passage removed).
    pub text: String,
    /// The numbers of the passages it cites, in the order first cited.
    pub cited: Vec<u32>,
    /// Citation marks that named no passage and were removed.
    pub dropped_citations: u32,
    /// Milliseconds from the start of reading to the model's first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
}

/// A source the reader may cite: its number, chunk and text.
#[derive(Debug, Clone)]
pub(crate) struct Numbered {
    pub(crate) number: u32,
    pub(crate) chunk_id: ChunkId,
    pub(crate) text: String,
}

/// The system prompt of the passage readers (dense, HippoRAG 2) when they cite.
pub const CITING_SYSTEM_PROMPT: &str = "You answer questions from the numbered passages the user gives. Use \
     only what the passages say. After each sentence that uses a passage, cite it by its number in square \
     brackets, like [2], or [1][3] for several. Cite only numbers that appear in front of a passage. If the \
     passages do not answer the question, say that they do not. Answer directly and briefly: the answer \
     first, then a few sentences of support.";

/// What HiRAG's reference prompt gets when the answer cites.
pub const HIRAG_CITE_INSTRUCTION: &str = "Citations: after each sentence that relies on a row of the Sources \
     table, cite that row by its id in square brackets, like [0] or [2][5]. Cite only ids that appear in the \
     Sources table.";

/// What LeanRAG's reference prompt gets (before the numbered sources) when the answer cites.
pub const NUMBERED_CITE_INSTRUCTION: &str = "Citations: after each sentence that relies on one of the \
     numbered sources below, cite it by its number in square brackets, like [1] or [2][3]. Cite only \
     numbers that appear below.";

/// The user message of the citing passage reader: the passages, numbered, then the question.
pub fn passages_message(sources: &[(u32, &str)], question: &str) -> String {
    let mut out = String::new();
    for (n, text) in sources {
        out.push_str(&format!("[{n}] {}\n\n", text.trim()));
    }
    out.push_str("Question: ");
    out.push_str(question);
    out
}

/// The request of the citing passage reader.
pub(crate) fn passage_request(sources: &[Numbered], question: &str) -> ChatRequest {
    let list: Vec<(u32, &str)> = sources
        .iter()
        .map(|s| (s.number, s.text.as_str()))
        .collect();
    ChatRequest {
        messages: vec![
            Message::system(CITING_SYSTEM_PROMPT),
            Message::user(passages_message(&list, question)),
        ],
        settings: GenerationSettings {
            temperature: Some(0.0),
            ..GenerationSettings::default()
        },
    }
}

/// `request` (a method's reference answer request) with `extra` appended to its system message.
pub(crate) fn with_system_suffix(mut request: ChatRequest, extra: &str) -> ChatRequest {
    if let Some(m) = request
        .messages
        .iter_mut()
        .find(|m| m.role == kgrag_types::Role::System)
    {
        m.content.push_str("\n\n");
        m.content.push_str(extra);
    }
    request
}

/// The numbered sources block appended to a context: `[1] text` per source.
pub(crate) fn numbered_block(sources: &[Numbered]) -> String {
    let mut out = String::from("Sources:\n");
    for s in sources {
        out.push_str(&format!("[{}] {}\n", s.number, s.text.trim()));
    }
    out
}

/// Finds the citation marks of `text`: `[3]`, `[1, 2]`, `[1; 2]`, `[1][2]`. Marks naming a number in `known`
/// stay; the others are removed (a bracket left empty goes too) and counted. Returns the cleaned text, the
/// numbers cited in the order first cited, and how many were dropped.
pub fn resolve_marks(text: &str, known: &[u32]) -> (String, Vec<u32>, u32) {
    let mut out = String::with_capacity(text.len());
    let mut cited: Vec<u32> = Vec::new();
    let mut dropped = 0u32;
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        let parts: Vec<&str> = inner
            .split([',', ';'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let numbers: Option<Vec<u32>> = if parts.is_empty() || inner.len() > 40 {
            None
        } else {
            parts.iter().map(|p| p.parse::<u32>().ok()).collect()
        };
        match numbers {
            Some(ns) => {
                let keep: Vec<u32> = ns.iter().copied().filter(|n| known.contains(n)).collect();
                dropped += (ns.len() - keep.len()) as u32;
                if keep.is_empty() {
                    // The whole mark goes, with the space before it.
                    while out.ends_with(' ') {
                        out.pop();
                    }
                } else {
                    out.push('[');
                    out.push_str(
                        &keep
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                    );
                    out.push(']');
                    for n in keep {
                        if !cited.contains(&n) {
                            cited.push(n);
                        }
                    }
                }
            }
            // Not a citation (`[sic]`, a link's text): kept as it is.
            None => {
                out.push('[');
                out.push_str(inner);
                out.push(']');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    (out, cited, dropped)
}

/// Cites, after each sentence of an extractive answer, the source it was taken from: the first source that
/// holds the sentence (white space aside), else the one sharing most of its words (at least 60 %).
pub(crate) fn cite_sentences(answer: &str, sources: &[Numbered]) -> (String, Vec<u32>) {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let texts: Vec<String> = sources.iter().map(|s| norm(&s.text)).collect();
    let words = |s: &str| -> std::collections::HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let mut out = String::new();
    let mut cited = Vec::new();
    for sentence in kgrag_text::sentences(answer) {
        let s = sentence.trim();
        if s.is_empty() {
            continue;
        }
        let key = norm(s);
        let found = texts.iter().position(|t| t.contains(&key)).or_else(|| {
            let w = words(s);
            if w.is_empty() {
                return None;
            }
            let (best, share) = texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let tw = words(t);
                    (
                        i,
                        w.iter().filter(|x| tw.contains(*x)).count() as f64 / w.len() as f64,
                    )
                })
                .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
            (share >= 0.6).then_some(best)
        });
        if !out.is_empty() {
            out.push(' ');
        }
        match found {
            Some(i) => {
                let n = sources[i].number;
                // The mark before the sentence's closing punctuation.
                let body = s.trim_end_matches(['.', '!', '?', '…']);
                out.push_str(body);
                out.push_str(&format!(" [{n}]"));
                out.push_str(&s[body.len()..]);
                if !cited.contains(&n) {
                    cited.push(n);
                }
            }
            None => out.push_str(s),
        }
    }
    (out, cited)
}

/// A token sink that notes when the first token came.
pub(crate) struct Timed<'a> {
    started: Instant,
    first: Mutex<Option<f64>>,
    inner: Option<&'a TokenSink<'a>>,
}

impl<'a> Timed<'a> {
    pub(crate) fn new(inner: Option<&'a TokenSink<'a>>) -> Self {
        Self {
            started: Instant::now(),
            first: Mutex::new(None),
            inner,
        }
    }

    pub(crate) fn push(&self, piece: &str) {
        if let Ok(mut f) = self.first.lock() {
            if f.is_none() && !piece.is_empty() {
                *f = Some(self.started.elapsed().as_secs_f64() * 1e3);
            }
        }
        if let Some(sink) = self.inner {
            sink(piece);
        }
    }

    pub(crate) fn first_token_ms(&self) -> Option<f64> {
        self.first.lock().ok().and_then(|f| *f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_resolve_and_unknown_ones_drop() {
        let (t, cited, dropped) = resolve_marks(
            "Founded in 1611 [2]. Tesk led it [1, 9][3]. See [sic] [7].",
            &[1, 2, 3],
        );
        assert_eq!(t, "Founded in 1611 [2]. Tesk led it [1][3]. See [sic].");
        assert_eq!(cited, [2, 1, 3]);
        assert_eq!(dropped, 2);
        let (t, cited, dropped) = resolve_marks("No marks here.", &[1]);
        assert_eq!((t.as_str(), cited.len(), dropped), ("No marks here.", 0, 0));
    }

    #[test]
    fn extractive_sentences_cite_their_passage() {
        let sources = vec![
            Numbered {
                number: 1,
                chunk_id: ChunkId::from_content("a"),
                text: "The guild was founded in 1611. It sells lanterns.".into(),
            },
            Numbered {
                number: 2,
                chunk_id: ChunkId::from_content("b"),
                text: "Tesk Amberlow grew up in Farrowmoor.".into(),
            },
        ];
        let (t, cited) = cite_sentences(
            "Tesk Amberlow grew up in Farrowmoor. Unrelated words here.",
            &sources,
        );
        assert_eq!(
            t,
            "Tesk Amberlow grew up in Farrowmoor [2]. Unrelated words here."
        );
        assert_eq!(cited, [2]);
    }
}
