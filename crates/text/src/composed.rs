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
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use half::{f16, slice::HalfFloatSliceExt};
use kgrag_types::fileio::{read_exact_at as read_at, write_all_at as write_at};
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
///
/// With a scratch folder ([`SentenceMean::with_scratch_dir`]) the rows go to an unnamed file there
/// instead of memory blocks, and each composition reads the rows it needs (sorted, neighbours in one read):
/// the memo is then a key and a row number per sentence, ~30 bytes instead of ~800 at 384 dimensions.
#[derive(Default)]
struct Memo {
    /// Where each sentence's vector is: (block, row) in memory, ([`IN_FILE`], row) in the scratch file.
    rows: HashMap<u128, (u32, u32), std::hash::BuildHasherDefault<KeyHasher>>,
    blocks: Vec<Vec<f16>>,
    dim: usize,
    scratch: Scratch,
}

/// The block number of a row kept in the scratch file.
const IN_FILE: u32 = u32::MAX;

/// Sentence occurrences composed per read window of the scratch file (bounds the rows held at once: 12 MiB
/// at 384 dimensions).
const WINDOW: usize = 1 << 14;

/// Rows closer than this in the file are read in one piece (the rows between are cheaper to read than a
/// second read call).
const GAP: u32 = 8;

/// The most rows one read spans (a run of close rows is cut there, so that the rows between never make
/// a read buffer larger than this many rows: 768 KiB at 384 dimensions).
const MAX_SPAN: u32 = 1 << 10;

/// Bytes written per write call when rows are appended to the scratch file.
const WRITE_BYTES: usize = 1 << 20;

/// The memo's scratch file.
#[derive(Default)]
enum Scratch {
    /// Rows in memory.
    #[default]
    Off,
    /// Rows in a file in this folder, created with the first row.
    Dir(PathBuf),
    /// The file and the number of rows written to it.
    File { file: RowFile, rows: u32 },
}

/// The memo's scratch file (rows are only appended, and reads and writes name their offsets).
struct RowFile {
    file: File,
    /// What errors name (an unnamed file's folder).
    dir: PathBuf,
}

fn scratch_err(dir: &Path, e: std::io::Error) -> kgrag_types::Error {
    kgrag_types::Error::backend(
        format!("the sentence vectors' scratch file in {}", dir.display()),
        e,
    )
}

impl Scratch {
    /// Appends `data` (whole rows of `dim` values) and returns the row number of its first row.
    fn append(&mut self, data: &[f16], dim: usize) -> kgrag_types::Result<u32> {
        if let Scratch::Dir(dir) = self {
            // The folder stays named until the file is made: a failed attempt can be tried again there.
            let file = std::fs::create_dir_all(&*dir)
                .and_then(|()| tempfile::tempfile_in(&*dir))
                .map_err(|e| scratch_err(dir, e))?;
            let dir = std::mem::take(dir);
            *self = Scratch::File {
                file: RowFile { file, dir },
                rows: 0,
            };
        }
        let Scratch::File { file, rows } = self else {
            return Err(kgrag_types::Error::InvalidInput(
                "the sentence memo has no scratch file".into(),
            ));
        };
        let first = *rows;
        let n = data.len() / dim.max(1);
        let end = u32::try_from(n)
            .ok()
            .and_then(|n| first.checked_add(n))
            .filter(|&end| end < IN_FILE)
            .ok_or_else(|| {
                kgrag_types::Error::InvalidInput(format!(
                    "more than {IN_FILE} sentences in one memo"
                ))
            })?;
        // A piece at a time: no second copy of a large batch.
        let mut bytes = Vec::with_capacity(WRITE_BYTES.min(data.len() * 2));
        let mut offset = u64::from(first) * dim as u64 * 2;
        for piece in data.chunks(WRITE_BYTES / 2) {
            bytes.clear();
            for v in piece {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            write_at(&file.file, &bytes, offset).map_err(|e| scratch_err(&file.dir, e))?;
            offset += bytes.len() as u64;
        }
        *rows = end;
        Ok(first)
    }

    /// The file, when the rows are in one.
    fn file(&self) -> Option<&RowFile> {
        match self {
            Scratch::File { file, .. } => Some(file),
            _ => None,
        }
    }
}

impl RowFile {
    /// The rows `wanted` (sorted, distinct), one after the other.
    fn read(&self, wanted: &[u32], dim: usize) -> kgrag_types::Result<Vec<f16>> {
        let mut out = Vec::with_capacity(wanted.len() * dim);
        let mut bytes = Vec::new();
        let row_bytes = dim * 2;
        let mut i = 0;
        while i < wanted.len() {
            // A run of rows whose gaps are at most GAP, spanning at most MAX_SPAN rows, read at once.
            let mut j = i + 1;
            while j < wanted.len()
                && wanted[j] - wanted[j - 1] <= GAP
                && wanted[j] - wanted[i] < MAX_SPAN
            {
                j += 1;
            }
            let (first, last) = (wanted[i], wanted[j - 1]);
            bytes.resize((last - first + 1) as usize * row_bytes, 0);
            read_at(&self.file, &mut bytes, u64::from(first) * row_bytes as u64)
                .map_err(|e| scratch_err(&self.dir, e))?;
            for &row in &wanted[i..j] {
                let at = (row - first) as usize * row_bytes;
                out.extend(
                    bytes[at..at + row_bytes]
                        .chunks_exact(2)
                        .map(|b| f16::from_le_bytes([b[0], b[1]])),
                );
            }
            i = j;
        }
        Ok(out)
    }
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

    /// This composer, keeping its sentence vectors in an unnamed scratch file in `dir` (created, with the
    /// folder, when the first sentence is embedded; gone when the composer is dropped) instead of memory;
    /// `None` keeps them in memory. The vectors, and so every composed vector, are the same either way.
    /// Call it before the first embedding (a composer that holds vectors keeps them where they are).
    pub fn with_scratch_dir(self, dir: Option<&Path>) -> Self {
        {
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            if memo.rows.is_empty() {
                memo.scratch = dir.map_or(Scratch::Off, |d| Scratch::Dir(d.to_path_buf()));
            }
        }
        self
    }

    /// The embedder a build uses for descriptions: a composer over `inner` with `aliases` (its sentence
    /// vectors in a scratch file in `scratch_dir` when given: [`with_scratch_dir`](Self::with_scratch_dir))
    /// when `compose`, else `inner`.
    pub fn wrap_if(
        inner: Arc<dyn Embedder>,
        compose: bool,
        aliases: Arc<SentenceAliases>,
        scratch_dir: Option<&Path>,
    ) -> Arc<dyn Embedder> {
        if compose {
            Arc::new(
                Self::new(inner)
                    .with_aliases(aliases)
                    .with_scratch_dir(scratch_dir),
            )
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
            if memo.rows.is_empty() {
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
            let mut data: Vec<f16> = Vec::with_capacity(rows.len() * rows.dim());
            let mut new_keys = Vec::new();
            for (&(_, key), v) in missing.iter().zip(rows.rows()) {
                if !memo.rows.contains_key(&key) {
                    new_keys.push(key);
                    let start = data.len();
                    data.resize(start + v.len(), f16::ZERO);
                    data[start..].convert_from_f32_slice(v);
                }
            }
            if !new_keys.is_empty() {
                let (block, first) = if matches!(memo.scratch, Scratch::Off) {
                    data.shrink_to_fit();
                    memo.blocks.push(data);
                    (memo.blocks.len() as u32 - 1, 0)
                } else {
                    let dim = memo.dim;
                    (IN_FILE, memo.scratch.append(&data, dim)?)
                };
                for (row, key) in (first..).zip(new_keys) {
                    memo.rows.insert(key, (block, row));
                }
            }
        }
        if texts.is_empty() {
            return Ok(Embeddings::default());
        }
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let dim = memo.dim;
        let mut out = vec![0.0f32; texts.len() * dim];
        let mut sum = Sum::new(dim);
        let no_vector =
            |s: &str| kgrag_types::Error::InvalidInput(format!("no vector for sentence {s:?}"));
        if matches!(memo.scratch, Scratch::Off) {
            for ((text_units, text_keys), row) in units
                .iter()
                .zip(&keys)
                .zip(out.chunks_exact_mut(dim.max(1)))
            {
                sum.clear();
                for (s, &key) in text_units.iter().zip(text_keys) {
                    sum.add(memo.get(key).ok_or_else(|| no_vector(s))?);
                }
                sum.write(row);
            }
            return Embeddings::new(dim, out);
        }
        // Rows in the scratch file: each text's row numbers looked up, then a window of texts at a time
        // composed from its rows, read in file order.
        // Every text's rows one after the other; text i's are `rows[ends[i - 1]..ends[i]]`.
        let mut rows: Vec<u32> = Vec::with_capacity(keys.iter().map(Vec::len).sum());
        let mut ends: Vec<usize> = Vec::with_capacity(units.len());
        for (text_units, text_keys) in units.iter().zip(&keys) {
            for (s, key) in text_units.iter().zip(text_keys) {
                match memo.rows.get(key) {
                    Some(&(IN_FILE, row)) => rows.push(row),
                    _ => return Err(no_vector(s)),
                }
            }
            ends.push(rows.len());
        }
        // Read under the lock: measured, compositions reading side by side made HiRAG's reports slower
        // (35–37 s against 33 s at 30,000 synthetic passages), not faster.
        let Some(file) = memo.scratch.file() else {
            return Err(kgrag_types::Error::InvalidInput(
                "the sentence memo has no scratch file".into(),
            ));
        };
        let mut wanted: Vec<u32> = Vec::new();
        let mut start = 0;
        while start < ends.len() {
            // Texts start..end: at most WINDOW rows (at least one text).
            let from = start.checked_sub(1).map_or(0, |i| ends[i]);
            let mut end = start + 1;
            while end < ends.len() && ends[end] - from <= WINDOW {
                end += 1;
            }
            wanted.clear();
            wanted.extend_from_slice(&rows[from..ends[end - 1]]);
            wanted.sort_unstable();
            wanted.dedup();
            let values = file.read(&wanted, dim)?;
            let mut at = from;
            for (&to, out_row) in ends[start..end]
                .iter()
                .zip(out[start * dim..end * dim].chunks_exact_mut(dim.max(1)))
            {
                sum.clear();
                for r in &rows[at..to] {
                    let i = wanted.binary_search(r).unwrap_or_default();
                    sum.add(values.get(i * dim..(i + 1) * dim).unwrap_or_default());
                }
                sum.write(out_row);
                at = to;
            }
            start = end;
        }
        drop(memo);
        Embeddings::new(dim, out)
    }
}

/// The running sum of a text's unit sentence vectors.
struct Sum {
    sum: Vec<f64>,
    v: Vec<f32>,
}

impl Sum {
    fn new(dim: usize) -> Self {
        Self {
            sum: vec![0.0; dim],
            v: vec![0.0; dim],
        }
    }

    fn clear(&mut self) {
        self.sum.iter_mut().for_each(|x| *x = 0.0);
    }

    /// Adds `half`'s unit vector (nothing for a zero vector or one of another length).
    fn add(&mut self, half: &[f16]) {
        if half.len() != self.v.len() {
            return;
        }
        half.convert_to_f32_slice(&mut self.v);
        let norm = self
            .v
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        if norm > 0.0 && norm.is_finite() {
            for (a, x) in self.sum.iter_mut().zip(&self.v) {
                *a += f64::from(*x) / norm;
            }
        }
    }

    /// Writes the normalised sum to `row` (left as is when the sum is zero).
    fn write(&self, row: &mut [f32]) {
        let norm = self.sum.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm > 0.0 {
            for (o, a) in row.iter_mut().zip(&self.sum) {
                *o = (*a / norm) as f32;
            }
        }
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

    fn reads_instructions(&self) -> bool {
        self.inner.reads_instructions()
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

    /// A composer whose sentence vectors are in a scratch file composes every text as one holding them in
    /// memory — across calls, aliases, repeated sentences and texts spanning more than one read window —
    /// keeps none of them in memory, and leaves no file behind.
    #[tokio::test]
    async fn sentence_vectors_in_a_scratch_file_compose_as_in_memory() {
        let dir =
            std::env::temp_dir().join(format!("kgrag-composed-scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let aliases: Arc<SentenceAliases> = Arc::new(
            (0..500)
                .map(|i| {
                    (
                        format!("fact {i} holds."),
                        format!("('fact', 'holds', '{i}')"),
                    )
                })
                .collect(),
        );
        let make = |scratch: Option<&Path>| {
            SentenceMean::new(Arc::new(HashingEmbedder::new(16)))
                .with_aliases(aliases.clone())
                .with_scratch_dir(scratch)
        };
        let (mem, disk) = (make(None), make(Some(&dir)));
        // 6,000 texts of three sentences (18,000 occurrences: more than one window), drawn from 4,000
        // sentences in a scattered order so that the rows a window needs are not neighbours in the file.
        let text = |i: usize| {
            let s = |k: usize| format!("fact {} holds.", (k * 7919) % 4000);
            format!("{} {}<SEP>{}", s(i), s(i + 1), s(3 * i + 2))
        };
        let calls: [Vec<String>; 3] = [
            (0..6000).map(text).collect(),
            (3000..9000).map(text).collect(),
            vec![
                "fact 1 holds.".into(),
                "A sentence of its own.".into(),
                String::new(),
            ],
        ];
        for texts in &calls {
            let want = mem.embed(texts, &EmbedKind::Document).await.unwrap();
            let got = disk.embed(texts, &EmbedKind::Document).await.unwrap();
            assert_eq!(got, want);
        }
        assert_eq!(disk.sentences(), mem.sentences());
        assert!(disk
            .memo
            .lock()
            .map(|m| m.blocks.is_empty())
            .unwrap_or(false));
        assert!(dir.is_dir(), "the folder is made with the first sentence");
        drop(disk);
        // The file never has a name there (on Linux it is made without one; elsewhere it is unlinked).
        assert_eq!(std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(1), 0);
        let _ = std::fs::remove_dir_all(&dir);

        // A folder that cannot be made: an error naming it, not a panic.
        let file = std::env::temp_dir().join(format!("kgrag-composed-file-{}", std::process::id()));
        std::fs::write(&file, b"not a folder").unwrap();
        let bad = file.join("vectors");
        let composer = make(Some(&bad));
        // Tried again, the composer still names (and writes to) that folder, never another.
        for _ in 0..2 {
            let err = composer
                .embed(&calls[2], &EmbedKind::Document)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(&bad.display().to_string()), "{err}");
        }
        let _ = std::fs::remove_file(&file);
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
