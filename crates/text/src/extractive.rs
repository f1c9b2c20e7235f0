//! The offline kit's extractive summary (specs README, "Extractive summary"): it stands in for every
//! LLM-written entity, cluster, community and relation summary when a run has no LLM.
//!
//! The inputs are split into [`sentences`](crate::sentences), exact duplicates dropped, every sentence
//! embedded and scored by cosine to the centroid of all sentence vectors — or to the query vector when a
//! query is given. Sentences are taken by score (ties: earlier first) while the budget allows, and written in
//! their original order joined by one space.
//!
//! Budget rule (ours, the kit is silent on it): a sentence that does not fit is skipped and the next one
//! tried, so one long sentence does not end the summary; if the joined text still exceeds the budget (the
//! joining spaces can cost tokens), the weakest chosen sentences are dropped until it fits. When not even the best sentence fits, the summary is that sentence cut to the budget, so a
//! non-empty input always gives a non-empty summary under a positive budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kgrag_types::{EmbedKind, Embedder, Embeddings, Summarizer, SummaryRequest};

use crate::{sentences, Encoding, Error, Result};

/// How long a summary may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most `max` tokens of `encoding`.
    Tokens {
        /// The cap.
        max: usize,
        /// The tokenizer that counts.
        encoding: Encoding,
    },
    /// At most this many white-space separated words.
    Words(usize),
}

impl Budget {
    fn cost(&self, text: &str) -> usize {
        match self {
            Budget::Tokens { encoding, .. } => encoding
                .count(text)
                .unwrap_or_else(|_| text.split_whitespace().count()),
            Budget::Words(_) => text.split_whitespace().count(),
        }
    }

    fn max(&self) -> usize {
        match self {
            Budget::Tokens { max, .. } | Budget::Words(max) => *max,
        }
    }

    fn cut<'a>(&self, text: &'a str) -> &'a str {
        match self {
            Budget::Tokens { max, encoding } => encoding.truncate(text, *max).unwrap_or(""),
            Budget::Words(max) => {
                let mut end = 0;
                for (i, w) in text.split_whitespace().enumerate() {
                    if i == *max {
                        break;
                    }
                    let offset = w.as_ptr() as usize - text.as_ptr() as usize;
                    end = offset + w.len();
                }
                &text[..end]
            }
        }
    }
}

/// The distinct sentences of `texts`, in first-seen order.
pub fn distinct_sentences<S: AsRef<str>>(texts: &[S]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for t in texts {
        for s in sentences(t.as_ref()) {
            if seen.insert(s) {
                out.push(s.to_owned());
            }
        }
    }
    out
}

/// The cosine of `a` and `b`; 0 when either is zero, −∞ when it is not a finite number (a vector with NaN
/// or ∞ ranks after every other sentence instead of before them).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    let c = if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    };
    if c.is_finite() {
        c
    } else {
        f64::NEG_INFINITY
    }
}

/// Chooses sentences by cosine of `vectors[i]` to `target` (the centroid of `vectors` when `None`) under
/// `budget`, and writes them in original order joined by one space. `sentences` and `vectors` pair up by
/// position; the pure core of [`ExtractiveSummarizer`].
pub fn select<S: AsRef<str>, V: AsRef<[f32]>>(
    sentences: &[S],
    vectors: &[V],
    target: Option<&[f32]>,
    budget: Budget,
) -> String {
    let n = sentences.len().min(vectors.len());
    if n == 0 || budget.max() == 0 {
        return String::new();
    }
    let centroid: Vec<f32>;
    let target = match target {
        Some(t) => t,
        None => {
            // Over the finite vectors only (one NaN would make every cosine NaN).
            let dim = vectors[0].as_ref().len();
            let mut sum = vec![0.0f64; dim];
            let mut count = 0usize;
            for v in vectors[..n]
                .iter()
                .filter(|v| v.as_ref().iter().all(|x| x.is_finite()))
            {
                count += 1;
                for (s, x) in sum.iter_mut().zip(v.as_ref()) {
                    *s += f64::from(*x);
                }
            }
            centroid = sum
                .iter()
                .map(|s| (*s / count.max(1) as f64) as f32)
                .collect();
            &centroid
        }
    };
    let scores: Vec<f64> = vectors[..n]
        .iter()
        .map(|v| cosine(v.as_ref(), target))
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut used = 0usize;
    let mut taken = vec![false; n];
    for &i in &order {
        let cost = budget.cost(sentences[i].as_ref());
        if used + cost <= budget.max() {
            used += cost;
            taken[i] = true;
        }
    }
    if !taken.iter().any(|t| *t) {
        return budget.cut(sentences[order[0]].as_ref()).trim().to_owned();
    }
    // The joining spaces can cost tokens of their own (e.g. between CJK sentences): drop the weakest chosen
    // sentences until the joined text fits.
    loop {
        let joined = (0..n)
            .filter(|i| taken[*i])
            .map(|i| sentences[i].as_ref())
            .collect::<Vec<&str>>()
            .join(" ");
        let count = taken.iter().filter(|t| **t).count();
        if count <= 1 || budget.cost(&joined) <= budget.max() {
            return if count == 1 && budget.cost(&joined) > budget.max() {
                budget.cut(&joined).trim().to_owned()
            } else {
                joined
            };
        }
        if let Some(&weakest) = order.iter().rev().find(|&&i| taken[i]) {
            taken[weakest] = false;
        }
    }
}

/// The extractive summariser over any [`Embedder`], with an in-memory memo of sentence vectors so that a
/// sentence is embedded once per summariser (a hierarchy build hands it the description vectors it already
/// has through [`remember`](Self::remember)). The memo is unbounded unless
/// [`with_memo_limit`](Self::with_memo_limit) bounds it, as a long-lived reader's must be.
pub struct ExtractiveSummarizer {
    embedder: Arc<dyn Embedder>,
    encoding: Encoding,
    memo: Mutex<Memo>,
    memoise: bool,
}

/// Sentence vectors by text. Bounded, it keeps two generations of at most half the bound each: a new
/// vector goes into the recent one, a hit in the older one moves back into the recent one, and a full
/// recent generation replaces the older (whose vectors are let go) — the sentences used lately stay.
#[derive(Default)]
struct Memo {
    recent: HashMap<String, Arc<[f32]>>,
    older: HashMap<String, Arc<[f32]>>,
    /// The most entries of one generation (`None`: one generation without bound).
    generation: Option<usize>,
}

impl Memo {
    fn len(&self) -> usize {
        self.recent.len() + self.older.len()
    }

    fn get(&mut self, text: &str) -> Option<Arc<[f32]>> {
        if let Some(v) = self.recent.get(text) {
            return Some(v.clone());
        }
        let (text, v) = self.older.remove_entry(text)?;
        self.insert(text, v.clone());
        Some(v)
    }

    fn insert(&mut self, text: String, vector: Arc<[f32]>) {
        if let Some(cap) = self.generation {
            if self.recent.len() >= cap && !self.recent.contains_key(&text) {
                self.older = std::mem::take(&mut self.recent);
            }
        }
        self.recent.insert(text, vector);
    }
}

impl std::fmt::Debug for ExtractiveSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtractiveSummarizer")
            .field("embedder", &self.embedder.model_name())
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

impl ExtractiveSummarizer {
    /// A summariser embedding with `embedder`; [`Summarizer::summarize`] budgets in `encoding` tokens.
    pub fn new(embedder: Arc<dyn Embedder>, encoding: Encoding) -> Self {
        Self {
            embedder,
            encoding,
            memo: Mutex::new(Memo::default()),
            memoise: true,
        }
    }

    /// Keeps at most `sentences` vectors in the memo (at least 2): those used most lately, in two
    /// generations of half as many each. A reader that summarises every question's context needs a bound,
    /// or its memo grows with every new sentence it is shown. Summaries are the same either way; a
    /// sentence let go is embedded again when it comes back.
    pub fn with_memo_limit(self, sentences: usize) -> Self {
        if let Ok(mut memo) = self.memo.lock() {
            memo.generation = Some((sentences / 2).max(1));
        }
        self
    }

    /// Whether to keep sentence vectors in the summariser's memo (the default); off when the embedder keeps
    /// them itself (a [`SentenceMean`](crate::SentenceMean)), so that no vector is held twice; then
    /// [`remember`](Self::remember) has no effect.
    pub fn with_memo(mut self, memoise: bool) -> Self {
        self.memoise = memoise;
        self
    }

    /// The tokenizer that [`Summarizer::summarize`] budgets with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Records vectors of texts embedded elsewhere with the same embedder (document kind); rows pair with
    /// `texts` by position. Fails when the counts differ.
    pub fn remember(&self, texts: &[String], vectors: &Embeddings) -> Result<()> {
        if texts.len() != vectors.len() {
            return Err(Error::Embedding(format!(
                "{} texts but {} vectors to remember",
                texts.len(),
                vectors.len()
            )));
        }
        if !self.memoise {
            return Ok(());
        }
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        for (t, v) in texts.iter().zip(vectors.rows()) {
            if memo.get(t).is_none() {
                memo.insert(t.clone(), Arc::from(v));
            }
        }
        Ok(())
    }

    /// Number of memoised sentence vectors.
    pub fn memo_len(&self) -> usize {
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `texts` embedded as documents, one vector each (a count mismatch is an error).
    async fn embed_sentences(&self, texts: &[String]) -> Result<Embeddings> {
        let rows = self
            .embedder
            .embed(texts, &EmbedKind::Document)
            .await
            .map_err(|e| Error::Embedding(format!("embedding summary sentences: {e}")))?;
        if rows.len() != texts.len() {
            return Err(Error::Embedding(format!(
                "the embedder returned {} vectors for {} sentences",
                rows.len(),
                texts.len()
            )));
        }
        Ok(rows)
    }

    async fn vectors(&self, texts: &[String]) -> Result<Vec<Arc<[f32]>>> {
        if !self.memoise {
            // `texts` are distinct (see `summarize_texts`).
            let rows = self.embed_sentences(texts).await?;
            return Ok(rows.rows().map(Arc::from).collect());
        }
        // What the memo holds is taken now: a bounded memo may let it go while the rest is embedded.
        let mut found: Vec<Option<Arc<[f32]>>> = {
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            texts.iter().map(|t| memo.get(t)).collect()
        };
        // `texts` are distinct (see `summarize_texts`).
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| found[i].is_none()).collect();
        if !missing.is_empty() {
            let asked: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
            let rows = self.embed_sentences(&asked).await?;
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            for ((i, text), row) in missing.into_iter().zip(asked).zip(rows.rows()) {
                let v: Arc<[f32]> = Arc::from(row);
                memo.insert(text, v.clone());
                found[i] = Some(v);
            }
        }
        texts
            .iter()
            .zip(found)
            .map(|(t, v)| {
                v.ok_or_else(|| Error::Embedding(format!("no vector for sentence {t:?}")))
            })
            .collect()
    }

    /// The extractive summary of `texts` within `budget`, centred on `query` when given (embedded as a
    /// query without instruction), else on the centroid of the sentences.
    pub async fn summarize_texts<S: AsRef<str>>(
        &self,
        texts: &[S],
        query: Option<&str>,
        budget: Budget,
    ) -> Result<String> {
        let sents = distinct_sentences(texts);
        if sents.is_empty() {
            return Ok(String::new());
        }
        let vectors = self.vectors(&sents).await?;
        let target = match query {
            Some(q) => {
                let v = self
                    .embedder
                    .embed(&[q.to_owned()], &EmbedKind::Query { instruction: None })
                    .await
                    .map_err(|e| Error::Embedding(format!("embedding the summary query: {e}")))?;
                Some(
                    v.row(0)
                        .ok_or_else(|| {
                            Error::Embedding("the embedder returned no query vector".into())
                        })?
                        .to_vec(),
                )
            }
            None => None,
        };
        Ok(select(&sents, &vectors, target.as_deref(), budget))
    }
}

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    fn fingerprint(&self) -> String {
        format!(
            "extractive/v1/{}/{}",
            self.embedder.model_name(),
            self.encoding.name()
        )
    }

    async fn summarize(&self, request: &SummaryRequest) -> kgrag_types::Result<String> {
        let budget = Budget::Tokens {
            max: request.max_tokens,
            encoding: self.encoding,
        };
        self.summarize_texts(&request.descriptions, request.query.as_deref(), budget)
            .await
            .map_err(|e| kgrag_types::Error::backend("extractive summariser", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::HashingEmbedder;

    #[test]
    fn select_takes_the_most_central_sentences_in_original_order() {
        // Vectors: three sentences near the x axis, one outlier on y. Centroid ≈ (0.75, 0.25).
        let sents = ["alpha one.", "beta two.", "outlier three.", "gamma four."];
        let vecs = [
            vec![1.0f32, 0.0],
            vec![1.0, 0.1],
            vec![0.0, 1.0],
            vec![1.0, 0.0],
        ];
        // Two words per sentence, budget 4 words → the two best: sentence 1 (cos to centroid highest,
        // it leans towards y) and sentence 0 (tie with 3, earlier wins); written in original order.
        assert_eq!(
            select(&sents, &vecs, None, Budget::Words(4)),
            "alpha one. beta two."
        );
        // A query on the y axis picks the outlier first.
        assert_eq!(
            select(&sents, &vecs, Some(&[0.0, 1.0]), Budget::Words(2)),
            "outlier three."
        );
        // A sentence too long for the budget is skipped, a shorter one later still fits.
        let long = ["one two three four five.", "six seven."];
        let v2 = [vec![1.0f32], vec![1.0]];
        assert_eq!(select(&long, &v2, None, Budget::Words(3)), "six seven.");
        // Nothing fits: the best sentence cut to the budget.
        assert_eq!(
            select(&long[..1], &v2[..1], None, Budget::Words(2)),
            "one two"
        );
        assert_eq!(select(&long, &v2, None, Budget::Words(0)), "");
        let none: [&str; 0] = [];
        let nv: [Vec<f32>; 0] = [];
        assert_eq!(select(&none, &nv, None, Budget::Words(10)), "");
    }

    #[test]
    fn non_finite_vectors_rank_last_and_do_not_spoil_the_centroid() {
        // Sentence 1's vector holds NaN (or ∞): it is chosen only when nothing else fits, and the
        // centroid of the others still ranks them (0 and 3 on the x axis before the outlier 2).
        let sents = ["alpha one.", "poison two.", "outlier three.", "gamma four."];
        for bad in [f32::NAN, -f32::NAN, f32::INFINITY] {
            let vecs = [
                vec![1.0f32, 0.0],
                vec![bad, 1.0],
                vec![0.2, 1.0],
                vec![1.0, 0.05],
            ];
            assert_eq!(
                select(&sents, &vecs, None, Budget::Words(4)),
                "alpha one. gamma four."
            );
            assert_eq!(
                select(&sents, &vecs, Some(&[0.0, 1.0]), Budget::Words(2)),
                "outlier three."
            );
            assert_eq!(
                select(&sents[1..2], &vecs[1..2], None, Budget::Words(2)),
                "poison two."
            );
        }
    }

    #[tokio::test]
    async fn without_the_memo_the_same_summary_asks_the_embedder_again() {
        let embedder = Arc::new(HashingEmbedder::new(64));
        let texts = ["The river floods in spring. Farmers plant rice. The river floods in spring."];
        let memo = ExtractiveSummarizer::new(embedder.clone(), Encoding::Cl100kBase);
        let plain =
            ExtractiveSummarizer::new(embedder.clone(), Encoding::Cl100kBase).with_memo(false);
        let a = memo.summarize_texts(&texts, None, Budget::Words(4)).await;
        let before = embedder.calls();
        let b = plain.summarize_texts(&texts, None, Budget::Words(4)).await;
        let c = plain.summarize_texts(&texts, None, Budget::Words(4)).await;
        assert_eq!(a.map_err(|e| e.to_string()), b.map_err(|e| e.to_string()));
        assert!(c.is_ok());
        assert_eq!(plain.memo_len(), 0);
        assert_eq!(
            embedder.calls(),
            before + 2,
            "one call per summary, nothing kept"
        );
    }

    #[tokio::test]
    async fn a_bounded_memo_keeps_the_latest_sentences_and_summarises_alike() {
        let embedder = Arc::new(HashingEmbedder::new(64));
        let bounded =
            ExtractiveSummarizer::new(embedder.clone(), Encoding::Cl100kBase).with_memo_limit(8);
        let unbounded = ExtractiveSummarizer::new(embedder.clone(), Encoding::Cl100kBase);
        let question = |i: usize| {
            format!(
                "Boat {i} sails north. Harbour {i} opens at dawn. Rice {i} goes to market. \
                 The old mill turns."
            )
        };
        for i in 0..20 {
            let text = [question(i)];
            let a = bounded
                .summarize_texts(&text, Some("where does the rice go"), Budget::Words(9))
                .await
                .map_err(|e| e.to_string());
            let b = unbounded
                .summarize_texts(&text, Some("where does the rice go"), Budget::Words(9))
                .await
                .map_err(|e| e.to_string());
            assert!(a.as_ref().is_ok_and(|s| !s.is_empty()));
            assert_eq!(a, b, "question {i}");
            assert!(bounded.memo_len() <= 8, "{} kept", bounded.memo_len());
        }
        assert_eq!(
            unbounded.memo_len(),
            61,
            "60 sentences of their own and one shared"
        );
        // The sentence every question shares was used lately: it is still kept, the oldest are not.
        let calls = embedder.calls();
        let shared = ["The old mill turns."];
        bounded
            .summarize_texts(&shared, None, Budget::Words(9))
            .await
            .map_err(|e| e.to_string())
            .map(|_| ())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            embedder.calls(),
            calls,
            "the shared sentence came from the memo"
        );
        let first = [question(0)];
        let _ = bounded
            .summarize_texts(&first, None, Budget::Words(9))
            .await;
        assert_eq!(
            embedder.calls(),
            calls + 1,
            "the first question's sentences were let go"
        );
    }

    #[tokio::test]
    async fn summariser_dedups_memoises_and_budgets_tokens() {
        let embedder = Arc::new(HashingEmbedder::new(64));
        let s = ExtractiveSummarizer::new(embedder.clone(), Encoding::Cl100kBase);
        let texts = [
            "The river floods in spring. Farmers plant rice.",
            "The river floods in spring. Boats carry rice to market.",
        ];
        let out = s
            .summarize_texts(&texts, None, Budget::Words(100))
            .await
            .map_err(|e| e.to_string());
        assert_eq!(
            out.as_deref(),
            Ok("The river floods in spring. Farmers plant rice. Boats carry rice to market.")
        );
        assert_eq!(s.memo_len(), 3, "the repeated sentence is embedded once");
        let calls = embedder.calls();
        let again = Summarizer::summarize(
            &s,
            &SummaryRequest {
                subject: "river".into(),
                descriptions: texts.iter().map(|t| t.to_string()).collect(),
                max_tokens: 7,
                query: None,
            },
        )
        .await
        .map_err(|e| e.to_string());
        assert_eq!(embedder.calls(), calls, "every sentence came from the memo");
        let again = again.unwrap_or_default();
        assert!(!again.is_empty());
        assert!(Encoding::Cl100kBase.count(&again).unwrap_or(usize::MAX) <= 7);
    }
}
