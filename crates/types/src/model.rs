//! The data model shared by every kgrag crate: documents, chunks, extraction output and retrieval output.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::id::{ChunkId, DocId};
use crate::{Error, Result, VecSet};

/// A source document, as given by the user or a dataset loader.
///
/// `text` is everything that gets chunked. HippoRAG-style passages put the title into the text
/// (`title + "\n" + text`) and also keep it in `title`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Content hash of the stripped text, see [`DocId::from_text`].
    pub id: DocId,
    /// Optional title, kept as metadata.
    #[serde(default)]
    pub title: Option<String>,
    /// The full text.
    pub text: String,
}

impl Document {
    /// A document with this text and no title.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            id: DocId::from_text(&text),
            title: None,
            text,
        }
    }

    /// A HippoRAG-style passage: the text is `title + "\n" + body`, and the title is kept.
    pub fn passage(title: impl Into<String>, body: &str) -> Self {
        let title = title.into();
        let text = format!("{title}\n{body}");
        Self {
            id: DocId::from_text(&text),
            title: Some(title),
            text,
        }
    }

    /// A document from raw bytes that must be UTF-8; `source_name` (a path or a name) goes into the error.
    pub fn from_utf8(bytes: Vec<u8>, source_name: &str) -> Result<Self> {
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Self::new(text)),
            Err(err) => Err(Error::InvalidUtf8 {
                source_name: source_name.to_owned(),
                valid_up_to: err.utf8_error().valid_up_to(),
            }),
        }
    }

    /// A document from raw bytes, each invalid UTF-8 sequence replaced by U+FFFD (the defined alternative to
    /// [`Document::from_utf8`] for callers that prefer to keep going).
    pub fn from_utf8_lossy(bytes: &[u8]) -> Self {
        Self::new(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Where a chunk lies in its document: byte, character (Unicode scalar) and token offsets, end exclusive.
///
/// Byte offsets always fall on character boundaries of the document text, so `&doc.text[byte_start..byte_end]`
/// is valid. Token offsets index the tokens the chunker encoded (for token windows: the document text with
/// surrounding white space stripped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    /// First byte of the chunk in the document text.
    pub byte_start: usize,
    /// One past the last byte.
    pub byte_end: usize,
    /// First character (Unicode scalar value) of the chunk.
    pub char_start: usize,
    /// One past the last character.
    pub char_end: usize,
    /// First token of the chunk's window, indexing the tokens the chunker encoded.
    pub token_start: usize,
    /// One past the last token of the window.
    pub token_end: usize,
}

/// A unit of retrieval: a window of a document (or a whole passage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// `chunk-` + md5 of `text`.
    pub id: ChunkId,
    /// The document this chunk comes from.
    pub doc_id: DocId,
    /// The chunk text.
    pub text: String,
    /// Number of tokens in the chunk's window under the chunker's encoding.
    pub tokens: usize,
    /// Position of the chunk within its document, from 0.
    pub order: usize,
    /// Offsets of the chunk in its document.
    pub span: Span,
}

/// A (subject, predicate, object) triple, as extracted (raw) or after normalisation.
///
/// The three parts are held in one allocation (a corpus holds millions of triples, several times over
/// while an index is built: three `String`s each cost 72 bytes of headers and three allocations). Order,
/// equality and hashing are those of the tuple `(subject, predicate, object)`; serialised as a struct of
/// the three fields `subject`, `predicate`, `object`.
#[derive(Clone, PartialEq, Eq)]
pub struct Triple {
    /// Subject, predicate and object one after another.
    text: Box<str>,
    /// Byte ends of the subject and of the predicate in `text`.
    ends: [u32; 2],
}

impl Triple {
    /// A triple from its three parts. (A triple is held in at most 4 GiB: parts beyond that are cut at a
    /// character boundary, which no extracted phrase comes near.)
    pub fn new(
        subject: impl AsRef<str>,
        predicate: impl AsRef<str>,
        object: impl AsRef<str>,
    ) -> Self {
        let parts = [subject.as_ref(), predicate.as_ref(), object.as_ref()];
        let limit = u32::MAX as usize;
        let mut text =
            String::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>().min(limit));
        let mut ends = [0u32; 2];
        for (i, part) in parts.into_iter().enumerate() {
            let mut cut = part.len().min(limit - text.len());
            while !part.is_char_boundary(cut) {
                cut -= 1;
            }
            text.push_str(&part[..cut]);
            if let Some(end) = ends.get_mut(i) {
                // `text` never passes `limit`, a u32.
                *end = u32::try_from(text.len()).unwrap_or(u32::MAX);
            }
        }
        Self {
            text: text.into_boxed_str(),
            ends,
        }
    }

    /// The subject phrase.
    pub fn subject(&self) -> &str {
        self.parts().0
    }

    /// The predicate phrase.
    pub fn predicate(&self) -> &str {
        self.parts().1
    }

    /// The object phrase.
    pub fn object(&self) -> &str {
        self.parts().2
    }

    /// `(subject, predicate, object)`.
    pub fn parts(&self) -> (&str, &str, &str) {
        let (a, b) = (self.ends[0] as usize, self.ends[1] as usize);
        let (subject, rest) = self.text.split_at(a);
        let (predicate, object) = rest.split_at(b - a);
        (subject, predicate, object)
    }

    /// The triple rendered as Python's tuple repr, `('s', 'p', 'o')`: the text HippoRAG hashes into fact ids,
    /// embeds and shows to its filter. Meant for normalised triples, which contain no quotes.
    pub fn render(&self) -> String {
        let (s, p, o) = self.parts();
        format!("('{s}', '{p}', '{o}')")
    }

    /// The triple with each part normalised under `normalisation`.
    pub fn normalised(&self, normalisation: crate::Normalisation) -> Triple {
        let (s, p, o) = self.parts();
        Triple::new(
            normalisation.apply(s),
            normalisation.apply(p),
            normalisation.apply(o),
        )
    }
}

impl PartialOrd for Triple {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Triple {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl std::hash::Hash for Triple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl std::fmt::Debug for Triple {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (subject, predicate, object) = self.parts();
        f.debug_struct("Triple")
            .field("subject", &subject)
            .field("predicate", &predicate)
            .field("object", &object)
            .finish()
    }
}

/// A [`Triple`] as it is written: a struct of its three parts.
#[derive(Serialize)]
#[serde(rename = "Triple")]
struct TripleRef<'a> {
    subject: &'a str,
    predicate: &'a str,
    object: &'a str,
}

/// A [`Triple`] as it is read.
#[derive(Deserialize)]
#[serde(rename = "Triple")]
struct TripleOwned {
    subject: String,
    predicate: String,
    object: String,
}

impl Serialize for Triple {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let (subject, predicate, object) = self.parts();
        TripleRef {
            subject,
            predicate,
            object,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Triple {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let t = TripleOwned::deserialize(d)?;
        Ok(Triple::new(t.subject, t.predicate, t.object))
    }
}

/// An entity as an extractor produced it.
///
/// `name` is the surface form the extractor emitted; the id depends on the method's normalisation
/// (see [`EntityId`](crate::EntityId)). HippoRAG's NER yields names only (empty type and description).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Entity {
    /// Name as extracted.
    pub name: String,
    /// Entity type (e.g. `PERSON`), empty when the extractor gives none.
    #[serde(default)]
    pub entity_type: String,
    /// Description, empty when the extractor gives none.
    #[serde(default)]
    pub description: String,
    /// Chunks the entity was extracted from, sorted.
    #[serde(default)]
    pub source_chunks: VecSet<ChunkId>,
}

/// A described relation between two entities (the GraphRAG family's edge record).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Relation {
    /// Source entity name as extracted.
    pub source: String,
    /// Target entity name as extracted.
    pub target: String,
    /// Predicate or keywords, empty when the extractor gives none.
    #[serde(default)]
    pub keywords: String,
    /// Description of the relation.
    #[serde(default)]
    pub description: String,
    /// Strength; summed when relations are merged.
    pub weight: f64,
    /// Chunks the relation was extracted from, sorted.
    #[serde(default)]
    pub source_chunks: VecSet<ChunkId>,
}

/// How bad a problem met while parsing extractor output was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueSeverity {
    /// The output was repaired (e.g. truncated JSON closed) and used.
    Repaired,
    /// A record was skipped (e.g. a triple of the wrong arity); the rest was used.
    Skipped,
    /// Nothing usable came out of this stage.
    Failed,
}

/// One problem met while extracting a chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseIssue {
    /// The stage, e.g. `ner`, `triples`, `entities`, `relations`.
    pub stage: String,
    /// How bad it was.
    pub severity: IssueSeverity,
    /// What went wrong.
    pub message: String,
    /// A short excerpt of the offending output.
    #[serde(default)]
    pub excerpt: String,
}

/// What extracting one chunk cost and what went wrong on the way.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Problems met, in order.
    #[serde(default)]
    pub issues: Vec<ParseIssue>,
    /// Model calls made (cache hits included).
    #[serde(default)]
    pub llm_calls: u64,
    /// Prompt tokens sent.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens received.
    #[serde(default)]
    pub completion_tokens: u64,
}

impl Diagnostics {
    /// Number of issues of the given severity.
    pub fn count(&self, severity: IssueSeverity) -> usize {
        self.issues
            .iter()
            .filter(|i| i.severity == severity)
            .count()
    }
}

/// Everything extracted from one chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// The chunk the extraction belongs to.
    pub chunk_id: ChunkId,
    /// Entities (HippoRAG: named entities of the NER step).
    #[serde(default)]
    pub entities: Vec<Entity>,
    /// Described relations (HiRAG, LeanRAG).
    #[serde(default)]
    pub relations: Vec<Relation>,
    /// Open triples (HippoRAG), raw as extracted.
    #[serde(default)]
    pub triples: Vec<Triple>,
    /// Costs and problems.
    #[serde(default)]
    pub diagnostics: Diagnostics,
}

impl Extraction {
    /// An empty extraction for `chunk_id`.
    pub fn empty(chunk_id: ChunkId) -> Self {
        Self {
            chunk_id,
            entities: Vec::new(),
            relations: Vec::new(),
            triples: Vec::new(),
            diagnostics: Diagnostics::default(),
        }
    }
}

/// A retrieved passage with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredChunk {
    /// The passage.
    pub chunk_id: ChunkId,
    /// The method's score; higher is better.
    pub score: f64,
}

/// A retrieved fact (HippoRAG 2) with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredTriple {
    /// The normalised triple.
    pub triple: Triple,
    /// The method's score.
    pub score: f64,
}

/// An entity in a retrieval context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextEntity {
    /// Entity name.
    pub name: String,
    /// Type, possibly empty.
    #[serde(default)]
    pub entity_type: String,
    /// Description, possibly empty.
    #[serde(default)]
    pub description: String,
    /// Hierarchy layer: 0 for base entities, ≥ 1 for summary or aggregate entities.
    #[serde(default)]
    pub layer: u32,
    /// The method's score or rank value.
    pub score: f64,
}

/// A relation in a retrieval context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRelation {
    /// Source entity name.
    pub source: String,
    /// Target entity name.
    pub target: String,
    /// Description.
    #[serde(default)]
    pub description: String,
    /// The method's score or rank value.
    pub score: f64,
}

/// A community report in a retrieval context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextReport {
    /// Community id.
    pub community: String,
    /// Hierarchy level of the community.
    pub level: u32,
    /// Report title.
    pub title: String,
    /// Rendered report text.
    pub text: String,
    /// The method's score or rank value.
    pub score: f64,
}

/// What a retriever returns for one query: ranked passages, the method's structured context, and the rendered
/// context that would go into the reader's prompt.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RetrievedContext {
    /// Method name, e.g. `hipporag2`.
    pub method: String,
    /// Passages, best first. Every method fills this, so passage recall@k is comparable across methods.
    pub passages: Vec<ScoredChunk>,
    /// Facts used (HippoRAG 2), best first.
    #[serde(default)]
    pub facts: Vec<ScoredTriple>,
    /// Entities in the context, in the method's order.
    #[serde(default)]
    pub entities: Vec<ContextEntity>,
    /// Relations in the context.
    #[serde(default)]
    pub relations: Vec<ContextRelation>,
    /// Community reports (HiRAG global mode).
    #[serde(default)]
    pub reports: Vec<ContextReport>,
    /// Reasoning paths as entity-name sequences (HiRAG bridge, LeanRAG LCA paths).
    #[serde(default)]
    pub paths: Vec<Vec<String>>,
    /// The context as rendered for the reader prompt.
    #[serde(default)]
    pub rendered: String,
    /// Tokens of `rendered` under the method's budget tokenizer.
    #[serde(default)]
    pub context_tokens: usize,
    /// Named numbers the method wants reported, e.g. `{"dense_fallback": 1.0}`.
    #[serde(default)]
    pub stats: BTreeMap<String, f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_errors_name_source_and_offset() {
        let err = Document::from_utf8(b"ok \xff bad".to_vec(), "notes.txt")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("document notes.txt is not valid UTF-8: first invalid byte at offset 3")
        );
        let lossy = Document::from_utf8_lossy(b"ok \xff bad");
        assert_eq!(lossy.text, "ok \u{fffd} bad");
    }

    #[test]
    fn passage_joins_title_and_body() {
        let d = Document::passage("Title", "Body.");
        assert_eq!(d.text, "Title\nBody.");
        assert_eq!(d.title.as_deref(), Some("Title"));
    }

    /// The layout `Triple` had before its parts shared one allocation.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    struct ThreeStrings {
        subject: String,
        predicate: String,
        object: String,
    }

    #[test]
    fn a_triple_orders_hashes_and_serialises_as_three_strings() {
        use std::hash::{BuildHasher, RandomState};
        let parts = [
            ("a", "bc", "d"),
            ("ab", "c", "d"),
            ("a", "b", "cd"),
            ("", "", ""),
            ("", "x", ""),
            ("Ünïcode", "naïve", "façade"),
            ("a", "", "bcd"),
        ];
        let hasher = RandomState::new();
        for &(s, p, o) in &parts {
            let t = Triple::new(s, p, o);
            assert_eq!(t.parts(), (s, p, o));
            let old = ThreeStrings {
                subject: s.into(),
                predicate: p.into(),
                object: o.into(),
            };
            let bytes = postcard::to_allocvec(&t).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&old).unwrap());
            assert_eq!(postcard::from_bytes::<Triple>(&bytes).unwrap(), t);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, serde_json::to_string(&old).unwrap());
            assert_eq!(serde_json::from_str::<Triple>(&json).unwrap(), t);
            for &(s2, p2, o2) in &parts {
                let u = Triple::new(s2, p2, o2);
                let old2 = ThreeStrings {
                    subject: s2.into(),
                    predicate: p2.into(),
                    object: o2.into(),
                };
                assert_eq!(t.cmp(&u), old.cmp(&old2), "{t:?} against {u:?}");
                assert_eq!(t == u, old == old2);
                if t == u {
                    assert_eq!(hasher.hash_one(&t), hasher.hash_one(&u));
                }
            }
        }
        assert_eq!(
            Triple::new("tesk", "worked with", "amberlow").render(),
            "('tesk', 'worked with', 'amberlow')"
        );
    }

    #[test]
    fn serde_round_trip_of_extraction() {
        let chunk = ChunkId::from_content("c");
        let mut e = Extraction::empty(chunk.clone());
        e.triples.push(Triple::new("a", "b", "c"));
        e.entities.push(Entity {
            name: "A".into(),
            source_chunks: [chunk].into_iter().collect(),
            ..Entity::default()
        });
        e.diagnostics.issues.push(ParseIssue {
            stage: "triples".into(),
            severity: IssueSeverity::Skipped,
            message: "wrong arity".into(),
            excerpt: "[\"x\"]".into(),
        });
        let json = serde_json::to_string(&e).unwrap();
        let back: Extraction = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.diagnostics.count(IssueSeverity::Skipped), 1);
    }
}

/// How a model-written text (a summary, a community report) came about: the model's first reply, its
/// reply to one corrective retry, or the offline kit's extractive text — as a fallback after two failed
/// attempts, or because no model is configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The model's first reply.
    #[default]
    Llm,
    /// The model's reply to the corrective retry.
    Retried,
    /// The extractive text after two failed model attempts.
    Fallback,
    /// The extractive text (no model configured).
    Extractive,
}
