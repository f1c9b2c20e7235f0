//! The LLM-free extractor (the offline kit of the specs' README): deterministic rules, no model.
//!
//! * **Sentences**: split at blank lines and after `.`, `!`, `?`, `。`, `！`, `？` followed by white space, except
//!   after a single capital letter or a listed abbreviation.
//! * **Spans**, in this order, later spans overlapping earlier ones dropped: (1) named-entity runs — maximal
//!   runs of capitalised tokens (initial capital, all caps, or a number right after a capitalised token, as in
//!   "Route 97"), with `of, the, de, la, von, van, and, for, &` allowed strictly inside, a lone sentence-initial
//!   stop word dropped; (2) dates and numbers — 3–4 digit years, `D Month YYYY`, `Month YYYY`; (3) noun-phrase
//!   runs — maximal runs of at most 4 tokens outside the stop lexicon, kept with ≥ 2 tokens or a hyphen. A
//!   token longer than 30 characters, or with characters other than letters, digits, `-`, `'`, `.`, `&`,
//!   disqualifies its span. Punctuation after a token ends a run.
//! * **Relations**: every unordered pair of distinct spans in a sentence (the first 10 spans), in order of
//!   first appearance; the predicate is the words between the two spans (`co-occurs with` when none), the
//!   description is the sentence, the strength the number of sentences where the pair occurs together.
//!
//! What it cannot do: resolve pronouns or aliases ("he", "the company"), see relations across sentences, type
//! entities beyond DATE / NUMBER / ENTITY, find lower-case names, or handle scripts without spaces between
//! words (Chinese, Japanese) beyond splitting sentences. Its graphs are dense co-occurrence graphs, useful for
//! offline runs and plumbing, not comparable with LLM extraction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use kgrag_text::Encoding;
use kgrag_types::{Chunk, Entity, Extraction, Extractor, Relation, Triple};

const CONNECTORS: &[&str] = &["of", "the", "de", "la", "von", "van", "and", "for", "&"];
const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Closed-class words and common verbs and adverbs: never part of a noun phrase.
const STOP: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "although",
    "always",
    "am",
    "among",
    "an",
    "and",
    "any",
    "are",
    "around",
    "as",
    "at",
    "be",
    "became",
    "because",
    "become",
    "becomes",
    "been",
    "before",
    "began",
    "begin",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "called",
    "came",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "either",
    "even",
    "ever",
    "every",
    "few",
    "first",
    "for",
    "from",
    "further",
    "gave",
    "get",
    "gets",
    "give",
    "given",
    "gives",
    "go",
    "goes",
    "got",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "including",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "known",
    "later",
    "least",
    "less",
    "made",
    "make",
    "makes",
    "many",
    "may",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "my",
    "near",
    "never",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "often",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "others",
    "our",
    "ours",
    "out",
    "over",
    "own",
    "per",
    "same",
    "saw",
    "see",
    "seen",
    "several",
    "she",
    "should",
    "since",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "though",
    "through",
    "thus",
    "to",
    "too",
    "took",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "used",
    "very",
    "via",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "also",
    "based",
    "born",
    "died",
    "including",
    "said",
    "says",
    "served",
    "serves",
    "located",
    "released",
    "published",
    "founded",
    "named",
    "won",
    "led",
    "known",
    "held",
    "took",
    "set",
    "best",
    "well",
    "currently",
    "mostly",
    "mainly",
    "usually",
    "later",
    "formerly",
    "previously",
    "then",
    "there",
    "both",
    "another",
    "two",
    "three",
    "four",
    "five",
];

fn is_stop(word: &str) -> bool {
    STOP.contains(&word.to_lowercase().as_str())
}

pub use kgrag_text::sentences;

#[derive(Debug, Clone)]
struct Token<'a> {
    text: &'a str,
    /// Byte range of the token (without surrounding punctuation) in the sentence.
    start: usize,
    end: usize,
    /// Punctuation right after the token (a comma, a colon…) ends any run.
    breaks_after: bool,
}

fn tokens(sentence: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut offset = 0;
    for raw in sentence.split_inclusive(char::is_whitespace) {
        let word = raw.trim_end();
        let lead = word.len()
            - word
                .trim_start_matches(|c: char| !c.is_alphanumeric() && c != '&')
                .len();
        let core = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '&');
        if !core.is_empty() {
            let start = offset + lead;
            let end = start + core.len();
            let trailing = &word[lead + core.len()..];
            out.push(Token {
                text: core,
                start,
                end,
                breaks_after: !trailing.is_empty(),
            });
        }
        offset += raw.len();
    }
    out
}

/// Starts with a capital letter and is not a month name (months belong to dates, rule 2).
fn capitalised(t: &str) -> bool {
    t.chars().next().is_some_and(char::is_uppercase) && !MONTHS.contains(&t.to_lowercase().as_str())
}

fn is_number(t: &str) -> bool {
    t.chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        && t.chars().any(|c| c.is_ascii_digit())
}

fn valid_token(t: &str) -> bool {
    t.chars().count() <= 30
        && t.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '\'' | '.' | '&'))
}

/// A span found in a sentence: token range and kind.
#[derive(Debug, Clone, PartialEq)]
struct Span {
    first: usize,
    last: usize,
    kind: SpanKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SpanKind {
    Named,
    Date,
    Number,
    NounPhrase,
}

fn overlaps(spans: &[Span], first: usize, last: usize) -> bool {
    spans.iter().any(|s| first <= s.last && s.first <= last)
}

fn spans_of(toks: &[Token<'_>]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let valid = |range: std::ops::RangeInclusive<usize>| {
        range.into_iter().all(|i| valid_token(toks[i].text))
    };
    // (1) Named-entity runs.
    let mut i = 0;
    while i < toks.len() {
        if !capitalised(toks[i].text) {
            i += 1;
            continue;
        }
        let start = i;
        let mut last = i;
        let mut j = i;
        while !toks[j].breaks_after && j + 1 < toks.len() {
            let next = toks[j + 1].text;
            if capitalised(next) || (is_number(next) && capitalised(toks[j].text)) {
                j += 1;
                last = j;
            } else if CONNECTORS.contains(&next) {
                // A connector counts only if a capitalised token follows it.
                let mut k = j + 1;
                while k < toks.len() && CONNECTORS.contains(&toks[k].text) && !toks[k].breaks_after
                {
                    k += 1;
                }
                if k < toks.len()
                    && k > j + 1
                    && capitalised(toks[k].text)
                    && !toks[k - 1].breaks_after
                {
                    j = k;
                    last = k;
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        let lone_initial_stop = start == 0 && last == start && is_stop(toks[start].text);
        if !lone_initial_stop && valid(start..=last) {
            spans.push(Span {
                first: start,
                last,
                kind: SpanKind::Named,
            });
        }
        i = last + 1;
    }
    // (2) Dates and numbers.
    for i in 0..toks.len() {
        let t = toks[i].text;
        let is_year = (3..=4).contains(&t.len()) && t.chars().all(|c| c.is_ascii_digit());
        let month = |k: usize| {
            toks.get(k)
                .is_some_and(|t| MONTHS.contains(&t.text.to_lowercase().as_str()))
        };
        let year = |k: usize| {
            toks.get(k).is_some_and(|t| {
                (3..=4).contains(&t.text.len()) && t.text.chars().all(|c| c.is_ascii_digit())
            })
        };
        let day = t.len() <= 2 && t.chars().all(|c| c.is_ascii_digit());
        let candidate = if day && month(i + 1) && year(i + 2) {
            Some((i, i + 2, SpanKind::Date))
        } else if month(i) && year(i + 1) {
            Some((i, i + 1, SpanKind::Date))
        } else if is_year {
            Some((i, i, SpanKind::Date))
        } else if is_number(t) {
            Some((i, i, SpanKind::Number))
        } else {
            None
        };
        if let Some((first, last, kind)) = candidate {
            if !overlaps(&spans, first, last) {
                spans.push(Span { first, last, kind });
            }
        }
    }
    // (3) Noun-phrase runs.
    let mut i = 0;
    while i < toks.len() {
        if is_stop(toks[i].text) || overlaps(&spans, i, i) {
            i += 1;
            continue;
        }
        let start = i;
        let mut j = i;
        while !toks[j].breaks_after
            && j + 1 < toks.len()
            && !is_stop(toks[j + 1].text)
            && !overlaps(&spans, j + 1, j + 1)
        {
            j += 1;
        }
        let len = j - start + 1;
        let hyphen = (start..=j).any(|k| toks[k].text.contains('-'));
        if len <= 4 && (len >= 2 || hyphen) && valid(start..=j) {
            spans.push(Span {
                first: start,
                last: j,
                kind: SpanKind::NounPhrase,
            });
        }
        i = j + 1;
    }
    spans.sort_by_key(|s| s.first);
    spans
}

/// A span as text with its kind's entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpan {
    /// Surface form.
    pub text: String,
    /// `DATE`, `NUMBER` or `ENTITY`.
    pub entity_type: &'static str,
}

/// The spans of one sentence, in order of appearance.
pub fn sentence_spans(sentence: &str) -> Vec<RuleSpan> {
    let toks = tokens(sentence);
    spans_of(&toks)
        .into_iter()
        .map(|s| RuleSpan {
            text: sentence[toks[s.first].start..toks[s.last].end].to_owned(),
            entity_type: match s.kind {
                SpanKind::Date => "DATE",
                SpanKind::Number => "NUMBER",
                _ => "ENTITY",
            },
        })
        .collect()
}

/// The LLM-free extractor. It fills both forms: triples `(a, words between, b)` for HippoRAG, and described
/// entities and relations for HiRAG and LeanRAG.
#[derive(Debug, Clone, Default)]
pub struct RuleExtractor;

const MAX_SPANS_PER_SENTENCE: usize = 10;
const DESCRIPTION_TOKENS: usize = 60;

impl RuleExtractor {
    /// Extracts one text synchronously.
    pub fn extract_text(&self, chunk: &Chunk) -> Extraction {
        let mut extraction = Extraction::empty(chunk.id.clone());
        let sources = || [chunk.id.clone()].into_iter().collect();
        let mut entity_index: BTreeMap<String, usize> = BTreeMap::new();
        let mut relation_index: BTreeMap<(String, String), usize> = BTreeMap::new();
        for sentence in sentences(&chunk.text) {
            let description = Encoding::O200kBase
                .truncate(sentence, DESCRIPTION_TOKENS)
                .unwrap_or(sentence)
                .to_owned();
            let mut seen: Vec<RuleSpan> = Vec::new();
            for span in sentence_spans(sentence) {
                if !seen.iter().any(|s| s.text == span.text) {
                    seen.push(span);
                }
            }
            seen.truncate(MAX_SPANS_PER_SENTENCE);
            for span in &seen {
                if !entity_index.contains_key(&span.text) {
                    entity_index.insert(span.text.clone(), extraction.entities.len());
                    extraction.entities.push(Entity {
                        name: span.text.clone(),
                        entity_type: span.entity_type.to_owned(),
                        description: description.clone(),
                        source_chunks: sources(),
                    });
                }
            }
            for a in 0..seen.len() {
                for b in a + 1..seen.len() {
                    let (x, y) = (&seen[a].text, &seen[b].text);
                    let predicate =
                        between(sentence, x, y).unwrap_or_else(|| "co-occurs with".to_owned());
                    let triple = Triple::new(x.clone(), predicate.clone(), y.clone());
                    if !extraction.triples.contains(&triple) {
                        extraction.triples.push(triple);
                    }
                    let key = (x.clone(), y.clone());
                    match relation_index.get(&key) {
                        Some(&i) => extraction.relations[i].weight += 1.0,
                        None => {
                            relation_index.insert(key, extraction.relations.len());
                            extraction.relations.push(Relation {
                                source: x.clone(),
                                target: y.clone(),
                                keywords: predicate,
                                description: description.clone(),
                                weight: 1.0,
                                source_chunks: sources(),
                            });
                        }
                    }
                }
            }
        }
        extraction
    }
}

/// The words between the first occurrences of `a` and `b` in `sentence`, lower-cased; none when adjacent.
fn between(sentence: &str, a: &str, b: &str) -> Option<String> {
    let ia = sentence.find(a)?;
    let ib = sentence.find(b)?;
    let (first_end, second_start) = if ia <= ib {
        (ia + a.len(), ib)
    } else {
        (ib + b.len(), ia)
    };
    if second_start <= first_end {
        return None;
    }
    let words: Vec<String> = sentence[first_end..second_start]
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    (!words.is_empty() && words.len() <= 8).then(|| words.join(" "))
}

#[async_trait]
impl Extractor for RuleExtractor {
    fn fingerprint(&self) -> String {
        "rules-v1".to_owned()
    }

    async fn extract(&self, chunk: &Chunk) -> kgrag_types::Result<Extraction> {
        Ok(self.extract_text(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentence_splitting_rules() {
        let text = "Dr. Watson met Mr. Holmes in 1881. J. R. R. Tolkien wrote it! Did he?\n\nNew block here. \
                    Values e.g. this stay";
        assert_eq!(
            sentences(text),
            vec![
                "Dr. Watson met Mr. Holmes in 1881.",
                "J. R. R. Tolkien wrote it!",
                "Did he?",
                "New block here.",
                "Values e.g. this stay"
            ]
        );
    }

    #[test]
    fn spans_follow_the_rule_order() {
        let spans: Vec<String> = sentence_spans(
            "The Journal of Mathematical Physics moved to Route 97 on 3 March 1960 with peer-reviewed papers.",
        )
        .into_iter()
        .map(|s| format!("{}:{}", s.entity_type, s.text))
        .collect();
        assert_eq!(
            spans,
            vec![
                "ENTITY:The Journal of Mathematical Physics",
                "ENTITY:Route 97",
                "DATE:3 March 1960",
                "ENTITY:peer-reviewed papers"
            ]
        );
        // A lone sentence-initial stop word is not an entity; commas end runs.
        let spans: Vec<String> = sentence_spans("However, Paris, France hosts UNESCO.")
            .into_iter()
            .map(|s| s.text)
            .collect();
        assert_eq!(spans, vec!["Paris", "France", "UNESCO"]);
    }
}
