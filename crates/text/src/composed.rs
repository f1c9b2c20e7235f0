//! Description vectors composed from sentence vectors: an [`Embedder`] that embeds each distinct sentence
//! once and gives a text the normalised mean of its sentences' vectors.
//!
//! HiRAG and LeanRAG embed every entity's description whole, several times over (HiRAG's clustering text,
//! HiRAG's `name + description`, LeanRAG's seed text), and the extractive summariser embeds the same
//! descriptions again sentence by sentence. When no model writes the descriptions — every one is a list of
//! fact sentences (`subject predicate object.`) or source sentences joined by `<SEP>` — those sentences are
//! the units: embedded once, shared by every description that holds them, and composed. A description's
//! cost then no longer grows with its length or with the number of methods that embed it.
//!
//! Composition: the text is split at `<SEP>` and each part into [`sentences`](crate::sentences) (the
//! summariser's units, so its vectors are the same ones); the sentences are taken in order while their
//! white-space words add up to at most [`MAX_WORDS`] (at least the first: like the encoder's own window, a
//! long text is read from its start); each distinct sentence is embedded once per composer, as a document;
//! the text's vector is the sum of its sentences' unit vectors, normalised. The sentence vectors are kept
//! in f16 (half the memory; a composed vector's cosine to the one from f32 sentence vectors stays within
//! 1e-6 of 1). A text of one sentence gets
//! that sentence's vector, normalised — the inner embedder's own vector when it already writes unit
//! vectors (MiniLM does). Queries pass through to the inner embedder unchanged.
//!
//! Aliases ([`SentenceMean::with_aliases`]): a sentence that is another text in other words may be
//! embedded as that text. HiRAG's `openie_cache` descriptions are made of fact sentences (`subject
//! predicate object.`) written from the triples whose rendering HippoRAG 2 embeds as its fact vectors
//! (`('subject', 'predicate', 'object')`); aliased to that rendering, each fact is embedded once for the
//! three methods (an embedding cache hands the vector from one build to the next) instead of once in each
//! form.
//!
//! This departs from the references, which embed the description text; it is what `description_vectors`
//! selects in HiRAG's and LeanRAG's configurations ([`DescriptionVectors`]): by default, offline, for what
//! the hierarchy clusters and summarises, while the entity vectors that retrieval searches stay embedded
//! whole (composing those too moved musique-100's recall@5 down by 3–5 points; composing the rest left
//! every recall figure unchanged).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use half::{f16, slice::HalfFloatSliceExt};
use kgrag_types::{EmbedKind, Embedder, Embeddings};
use serde::{Deserialize, Serialize};

use crate::sentences;

/// The separator of merged description parts (HiRAG's `<SEP>`).
pub const PART_SEPARATOR: &str = "<SEP>";

/// A composed text takes its sentences while their white-space words add up to at most this many.
pub const MAX_WORDS: usize = 256;

/// How HiRAG and LeanRAG embed entity descriptions at index time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DescriptionVectors {
    /// `sentences` when no chat model writes descriptions (offline: every description is made of fact or
    /// source sentences), `text` otherwise.
    #[default]
    Auto,
    /// The description text embedded whole, as the references do.
    Text,
    /// The normalised mean of the description's sentence vectors ([`SentenceMean`]) for what the
    /// hierarchy clusters and summarises; the entity vectors that retrieval searches stay embedded whole.
    Sentences,
    /// The normalised mean of the sentence vectors for every description vector, the entity vectors that
    /// retrieval searches included: the fastest, but it moves retrieval (musique-100 recall@5: HiRAG
    /// 53.6 → 48.6, LeanRAG 58.0 → 54.6, with recall@1 up).
    AllSentences,
}

impl DescriptionVectors {
    /// Whether descriptions are composed from sentences, given whether a chat model writes them.
    pub fn composes(self, model_writes_descriptions: bool) -> bool {
        match self {
            DescriptionVectors::Auto => !model_writes_descriptions,
            DescriptionVectors::Text => false,
            DescriptionVectors::Sentences | DescriptionVectors::AllSentences => true,
        }
    }

    /// Whether the entity vectors retrieval searches are composed too (only `all_sentences`).
    pub fn composes_entities(self) -> bool {
        self == DescriptionVectors::AllSentences
    }
}

/// The text an entity's description vector embeds when it is not composed: the description, or the name
/// when the description is blank. LeanRAG's seeds embed it (after their `embed_max_tokens` cut), and
/// HiRAG's entity vectors under `entity_text = "description"`: one definition, so that an embedding cache
/// gives both methods one embedding of each entity.
pub fn description_or_name<'a>(name: &'a str, description: &'a str) -> &'a str {
    if description.trim().is_empty() {
        name
    } else {
        description
    }
}

/// The units of `text` a composed vector is made of: its `<SEP>` parts split into sentences, trimmed, in
/// order, within [`MAX_WORDS`] (at least one); the whole text trimmed when it has no sentence.
pub fn units(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut words = 0usize;
    for part in text.split(PART_SEPARATOR) {
        for s in sentences(part) {
            let s = s.trim();
            if s.is_empty() {
                continue;
            }
            let w = s.split_whitespace().count();
            if !out.is_empty() && words + w > MAX_WORDS {
                return out;
            }
            words += w;
            out.push(s);
        }
    }
    if out.is_empty() {
        out.push(text.trim());
    }
    out
}

/// Sentence vectors in f16, one block per embedding call (exactly sized: no growth slack), with an index
/// by text. A composed vector sums unit vectors, so half precision (a relative error under 2⁻¹¹ per
/// component) is far below what moves a mean; it halves the largest thing a hierarchy build holds — one
/// vector per fact under `openie_cache`.
///
/// The memo indexes a sentence by a 128-bit hash of it instead of a copy of its text (a copy was ~60 bytes
/// and an allocation per sentence, an eighth of the memo): two SipHash-1-3 digests of the sentence behind
/// different prefixes. The memo lives in memory only, so the digest need not be stable across builds of
/// the program; two of a build's sentences sharing one is a 2⁻¹²⁸-scale event.
#[derive(Default)]
struct Memo {
    rows: HashMap<u128, (u32, u32), std::hash::BuildHasherDefault<KeyHasher>>,
    blocks: Vec<Vec<f16>>,
    dim: usize,
}

/// Hashes a memo key (already a digest) to its low 64 bits.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

/// The memo's key of `sentence`.
fn memo_key(sentence: &str) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |prefix: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        prefix.hash(&mut h);
        sentence.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

impl Memo {
    /// The vector of the sentence whose [`memo_key`] is `key`.
    fn get(&self, key: u128) -> Option<&[f16]> {
        let &(block, row) = self.rows.get(&key)?;
        let (block, row) = (block as usize, row as usize);
        self.blocks
            .get(block)?
            .get(row * self.dim..(row + 1) * self.dim)
    }
}

/// An [`Embedder`] whose document vectors are the normalised mean of the text's sentence vectors (see the
/// module docs); each distinct sentence is embedded once by the inner embedder and kept for the composer's
/// life.
pub struct SentenceMean {
    inner: Arc<dyn Embedder>,
    name: String,
    memo: Mutex<Memo>,
    aliases: Arc<SentenceAliases>,
}

/// Sentences embedded as another text: sentence → the text whose vector stands for it.
///
/// Held in one text buffer and a table sorted by sentence (no allocation per pair: a build holds one
/// pair per fact, as many as it has relations). Built with [`FromIterator`]; when a sentence comes twice
/// the last alias stands, as in a map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentenceAliases {
    text: String,
    /// Per pair: where its sentence starts, where the alias starts (the sentence's end), where it ends;
    /// sorted by sentence, one pair per sentence.
    spans: Vec<[usize; 3]>,
}

impl SentenceAliases {
    /// No aliases.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of sentences with an alias.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn sentence(&self, span: &[usize; 3]) -> &str {
        self.text.get(span[0]..span[1]).unwrap_or_default()
    }

    fn alias(&self, span: &[usize; 3]) -> &str {
        self.text.get(span[1]..span[2]).unwrap_or_default()
    }

    /// The alias of `sentence`.
    pub fn get(&self, sentence: &str) -> Option<&str> {
        let i = self
            .spans
            .binary_search_by(|span| self.sentence(span).cmp(sentence))
            .ok()?;
        Some(self.alias(&self.spans[i]))
    }

    /// Whether `sentence` has an alias.
    pub fn contains_key(&self, sentence: &str) -> bool {
        self.get(sentence).is_some()
    }

    /// The pairs (sentence, alias), by sentence.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|span| (self.sentence(span), self.alias(span)))
    }

    /// The sentences, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.spans.iter().map(|span| self.sentence(span))
    }

    /// The aliases, in their sentences' order.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.spans.iter().map(|span| self.alias(span))
    }
}

impl<S: AsRef<str>, A: AsRef<str>> FromIterator<(S, A)> for SentenceAliases {
    fn from_iter<I: IntoIterator<Item = (S, A)>>(pairs: I) -> Self {
        let mut out = Self::default();
        for (sentence, alias) in pairs {
            let start = out.text.len();
            out.text.push_str(sentence.as_ref());
            let mid = out.text.len();
            out.text.push_str(alias.as_ref());
            out.spans.push([start, mid, out.text.len()]);
        }
        // By sentence, the last pair of a sentence first among its equals (a stable sort keeps their
        // order; reversed, `dedup` keeps the first, i.e. the last given).
        let mut spans = std::mem::take(&mut out.spans);
        spans.reverse();
        spans.sort_by(|a, b| out.sentence(a).cmp(out.sentence(b)));
        spans.dedup_by(|b, a| out.sentence(a) == out.sentence(b));
        // The buffer again without the pairs dropped, in sentence order, exactly sized.
        let mut text = String::with_capacity(spans.iter().map(|s| s[2] - s[0]).sum());
        for span in &mut spans {
            let start = text.len();
            text.push_str(out.text.get(span[0]..span[2]).unwrap_or_default());
            *span = [start, start + (span[1] - span[0]), text.len()];
        }
        spans.shrink_to_fit();
        Self { text, spans }
    }
}

impl std::fmt::Debug for SentenceMean {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceMean")
            .field("inner", &self.inner.model_name())
            .field("sentences", &self.sentences())
            .finish()
    }
}

impl SentenceMean {
    /// A composer over `inner`.
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            name: format!("{}+sentence-mean", inner.model_name()),
            inner,
            memo: Mutex::new(Memo::default()),
            aliases: Arc::default(),
        }
    }

    /// This composer, embedding each sentence that is a key of `aliases` as its value instead (see the
    /// module docs). A sentence's vector is then the alias's, whatever text holds the sentence.
    pub fn with_aliases(mut self, aliases: Arc<SentenceAliases>) -> Self {
        self.aliases = aliases;
        self
    }

    /// The embedder a build uses for descriptions: a composer over `inner` with `aliases` when `compose`,
    /// else `inner`.
    pub fn wrap_if(
        inner: Arc<dyn Embedder>,
        compose: bool,
        aliases: Arc<SentenceAliases>,
    ) -> Arc<dyn Embedder> {
        if compose {
            Arc::new(Self::new(inner).with_aliases(aliases))
        } else {
            inner
        }
    }

    /// Number of distinct sentences embedded so far.
    pub fn sentences(&self) -> usize {
        self.memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rows
            .len()
    }

    async fn compose(&self, texts: &[String]) -> kgrag_types::Result<Embeddings> {
        let units: Vec<Vec<&str>> = texts.iter().map(|t| units(t)).collect();
        // Each unit's memo key, computed once for the look-ups below.
        let keys: Vec<Vec<u128>> = units
            .iter()
            .map(|u| u.iter().map(|s| memo_key(s)).collect())
            .collect();
        let missing: Vec<(&str, u128)> = {
            let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            let mut seen = std::collections::HashSet::new();
            units
                .iter()
                .flatten()
                .copied()
                .zip(keys.iter().flatten().copied())
                .filter(|&(_, k)| !memo.rows.contains_key(&k) && seen.insert(k))
                .collect()
        };
        if !missing.is_empty() {
            // What the inner embedder reads: each sentence, or its alias.
            let embedded: Vec<String> = missing
                .iter()
                .map(|&(s, _)| self.aliases.get(s).unwrap_or(s).to_owned())
                .collect();
            let rows = self.inner.embed(&embedded, &EmbedKind::Document).await?;
            if rows.len() != missing.len() {
                return Err(kgrag_types::Error::InvalidInput(format!(
                    "the embedder {} returned {} vectors for {} sentences",
                    self.inner.model_name(),
                    rows.len(),
                    missing.len()
                )));
            }
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            if memo.blocks.is_empty() {
                memo.dim = rows.dim();
            } else if rows.dim() != memo.dim {
                return Err(kgrag_types::Error::InvalidInput(format!(
                    "the embedder {} returned vectors of dimension {}, earlier {}",
                    self.inner.model_name(),
                    rows.dim(),
                    memo.dim
                )));
            }
            // Another call may have embedded some of these meanwhile (the lock is not held across the
            // embedding): keep the first vector, store only the new rows.
            let block = memo.blocks.len() as u32;
            let mut data: Vec<f16> = Vec::with_capacity(rows.len() * rows.dim());
            for (&(_, key), v) in missing.iter().zip(rows.rows()) {
                let row = (data.len() / rows.dim()) as u32;
                if let std::collections::hash_map::Entry::Vacant(e) = memo.rows.entry(key) {
                    e.insert((block, row));
                    let start = data.len();
                    data.resize(start + v.len(), f16::ZERO);
                    data[start..].convert_from_f32_slice(v);
                }
            }
            if !data.is_empty() {
                data.shrink_to_fit();
                memo.blocks.push(data);
            }
        }
        if texts.is_empty() {
            return Ok(Embeddings::default());
        }
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let dim = memo.dim;
        let mut out = vec![0.0f32; texts.len() * dim];
        let mut sum = vec![0.0f64; dim];
        let mut v = vec![0.0f32; dim];
        for ((text_units, text_keys), row) in units
            .iter()
            .zip(&keys)
            .zip(out.chunks_exact_mut(dim.max(1)))
        {
            sum.iter_mut().for_each(|x| *x = 0.0);
            for (s, &key) in text_units.iter().zip(text_keys) {
                let half = memo.get(key).ok_or_else(|| {
                    kgrag_types::Error::InvalidInput(format!("no vector for sentence {s:?}"))
                })?;
                half.convert_to_f32_slice(&mut v);
                let norm = v
                    .iter()
                    .map(|x| f64::from(*x) * f64::from(*x))
                    .sum::<f64>()
                    .sqrt();
                if norm > 0.0 && norm.is_finite() {
                    for (a, x) in sum.iter_mut().zip(&v) {
                        *a += f64::from(*x) / norm;
                    }
                }
            }
            let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                for (o, a) in row.iter_mut().zip(&sum) {
                    *o = (*a / norm) as f32;
                }
            }
        }
        Embeddings::new(dim, out)
    }
}

#[async_trait]
impl Embedder for SentenceMean {
    fn model_name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String], kind: &EmbedKind) -> kgrag_types::Result<Embeddings> {
        match kind {
            EmbedKind::Document => self.compose(texts).await,
            EmbedKind::Query { .. } => self.inner.embed(texts, kind).await,
        }
    }

    fn calls_in_flight(&self) -> usize {
        self.inner.calls_in_flight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::HashingEmbedder;

    /// Aliases behave as a map built from the same pairs: every sentence finds its last alias, none
    /// other is found, and the pairs come back by sentence.
    #[test]
    fn aliases_answer_as_the_map_of_their_pairs() {
        let pairs = [
            ("b c.", "('b', 'c')"),
            ("a b.", "('a', 'b')"),
            ("", "empty"),
            ("b c.", "('b', 'c', 2)"),
            ("a b", "no stop"),
        ];
        let aliases: SentenceAliases = pairs.iter().copied().collect();
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        assert_eq!(aliases.len(), map.len());
        for (sentence, alias) in &map {
            assert_eq!(aliases.get(sentence), Some(*alias), "{sentence:?}");
        }
        assert_eq!(aliases.get("b c"), None);
        assert!(!aliases.contains_key("c."));
        let mut want: Vec<(&str, &str)> = map.into_iter().collect();
        want.sort();
        assert_eq!(aliases.iter().collect::<Vec<_>>(), want);
        assert!(SentenceAliases::new().is_empty());
        assert_eq!(SentenceAliases::new().get(""), None);
    }

    fn unit(v: &[f32]) -> Vec<f64> {
        let n = v
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        v.iter().map(|x| f64::from(*x) / n).collect()
    }

    /// The inner embedder's unit vectors of two texts.
    async fn units_of(inner: &HashingEmbedder, texts: [&str; 2]) -> [Vec<f64>; 2] {
        let texts = texts.map(str::to_owned);
        let direct = inner.embed(&texts, &EmbedKind::Document).await;
        let direct = direct.map_err(|e| e.to_string());
        let Ok(direct) = direct else {
            panic!("{direct:?}")
        };
        [0, 1].map(|i| unit(direct.row(i).unwrap_or_default()))
    }

    /// The normalised sum of two unit vectors.
    fn mean_of(a: &[f64], b: &[f64]) -> Vec<f64> {
        let sum: Vec<f32> = a.iter().zip(b).map(|(x, y)| (x + y) as f32).collect();
        unit(&sum)
    }

    /// Every component of `got` within 1e-3 of `want`'s (the sentence vectors are kept in f16: a relative
    /// error under 2⁻¹¹ each), and the two unit vectors' cosine within 1e-6 of 1.
    fn assert_near(got: Option<&[f32]>, want: &[f64]) {
        let got = got.unwrap_or_default();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-3, "{g} against {w}");
        }
        let cosine: f64 = unit(got).iter().zip(want).map(|(g, w)| g * w).sum();
        assert!(cosine > 1.0 - 1e-6, "cosine {cosine}");
    }

    #[test]
    fn units_split_parts_and_sentences_within_the_word_cap() {
        assert_eq!(
            units("Paris is a city. It is old.<SEP>Paris lies on the Seine."),
            vec!["Paris is a city.", "It is old.", "Paris lies on the Seine."]
        );
        assert_eq!(units("  no full stop  "), vec!["no full stop"]);
        assert_eq!(units(""), vec![""]);
        // The cap: 300 one-word sentences give MAX_WORDS of them; one long sentence is still taken.
        let many = "word. ".repeat(300);
        assert_eq!(units(&many).len(), MAX_WORDS);
        let long = format!("{}.", "w ".repeat(400));
        assert_eq!(units(&long).len(), 1);
    }

    #[tokio::test]
    async fn composes_the_normalised_mean_and_embeds_each_sentence_once() {
        let inner = Arc::new(HashingEmbedder::new(64));
        let c = SentenceMean::new(inner.clone());
        let texts = vec![
            "Alpha founded Beta.<SEP>Alpha lives in Gamma.".to_owned(),
            "Alpha founded Beta.".to_owned(),
        ];
        let got = c.embed(&texts, &EmbedKind::Document).await;
        let got = got.map_err(|e| e.to_string());
        let Ok(got) = got else { panic!("{got:?}") };
        assert_eq!(c.sentences(), 2, "the repeated sentence is embedded once");
        let [a, b] = units_of(&inner, ["Alpha founded Beta.", "Alpha lives in Gamma."]).await;
        assert_near(got.row(0), &mean_of(&a, &b));
        // One sentence: its own vector, normalised.
        assert_near(got.row(1), &a);
        // A second call finds every sentence memoised; queries go to the inner embedder.
        let calls = inner.calls();
        let again = c.embed(&texts, &EmbedKind::Document).await;
        assert!(again.is_ok());
        assert_eq!(inner.calls(), calls);
        let question = ["Alpha founded Beta. Alpha lives in Gamma.".to_owned()];
        let query = EmbedKind::Query { instruction: None };
        let q = c.embed(&question, &query).await.map_err(|e| e.to_string());
        let qi = inner
            .embed(&question, &query)
            .await
            .map_err(|e| e.to_string());
        assert_eq!(q, qi);
        assert!(c.model_name().ends_with("+sentence-mean"));
        let none = c.embed(&[], &EmbedKind::Document).await;
        assert!(none.is_ok_and(|e| e.is_empty()));
    }

    /// An aliased sentence is embedded as its alias (the inner embedder never sees the sentence), in
    /// every text that holds it; other sentences are embedded as they are.
    #[tokio::test]
    async fn an_aliased_sentence_takes_its_alias_s_vector() {
        let inner = Arc::new(HashingEmbedder::new(64));
        let aliases: SentenceAliases = [(
            "Alpha founded Beta.".to_owned(),
            "('alpha', 'founded', 'beta')".to_owned(),
        )]
        .into_iter()
        .collect();
        let c = SentenceMean::new(inner.clone()).with_aliases(Arc::new(aliases));
        let texts = vec![
            "Alpha founded Beta.".to_owned(),
            "Alpha founded Beta.<SEP>Alpha lives in Gamma.".to_owned(),
        ];
        let got = c.embed(&texts, &EmbedKind::Document).await;
        let got = got.map_err(|e| e.to_string());
        let Ok(got) = got else { panic!("{got:?}") };
        let seen = inner.texts();
        assert!(seen.contains(&"('alpha', 'founded', 'beta')".to_owned()));
        assert!(seen.contains(&"Alpha lives in Gamma.".to_owned()));
        assert!(!seen.contains(&"Alpha founded Beta.".to_owned()));
        let [a, b] = units_of(
            &inner,
            ["('alpha', 'founded', 'beta')", "Alpha lives in Gamma."],
        )
        .await;
        assert_near(got.row(0), &a);
        assert_near(got.row(1), &mean_of(&a, &b));
    }

    /// The hashing embedder, yielding to the scheduler before it answers (so two calls overlap).
    struct Yielding(HashingEmbedder);

    #[async_trait]
    impl Embedder for Yielding {
        fn model_name(&self) -> &str {
            self.0.model_name()
        }
        fn dimension(&self) -> usize {
            self.0.dimension()
        }
        async fn embed(
            &self,
            texts: &[String],
            kind: &EmbedKind,
        ) -> kgrag_types::Result<Embeddings> {
            tokio::task::yield_now().await;
            self.0.embed(texts, kind).await
        }
    }

    #[tokio::test]
    async fn overlapping_calls_keep_one_vector_per_sentence() {
        let c = SentenceMean::new(Arc::new(Yielding(HashingEmbedder::new(16))));
        let a = vec!["One. Two.".to_owned()];
        let b = vec!["Two. Three.".to_owned(), "One.".to_owned()];
        let (ra, rb) = tokio::join!(
            c.embed(&a, &EmbedKind::Document),
            c.embed(&b, &EmbedKind::Document)
        );
        assert!(ra.is_ok() && rb.is_ok());
        assert_eq!(c.sentences(), 3);
        let rows: usize = c
            .memo
            .lock()
            .map(|m| m.blocks.iter().map(|b| b.len() / 16).sum())
            .unwrap_or(0);
        assert_eq!(rows, 3, "a sentence embedded by both calls is stored once");
        let again = c.embed(&b, &EmbedKind::Document).await;
        assert_eq!(
            again.map_err(|e| e.to_string()),
            rb.map_err(|e| e.to_string())
        );
    }

    #[test]
    fn auto_composes_only_without_a_model_writing_descriptions() {
        assert!(DescriptionVectors::Auto.composes(false));
        assert!(!DescriptionVectors::Auto.composes(true));
        assert!(DescriptionVectors::Sentences.composes(true));
        assert!(!DescriptionVectors::Text.composes(false));
        assert!(DescriptionVectors::AllSentences.composes(true));
        assert!(DescriptionVectors::AllSentences.composes_entities());
        assert!(!DescriptionVectors::Sentences.composes_entities());
        assert!(!DescriptionVectors::Auto.composes_entities());
    }
}
