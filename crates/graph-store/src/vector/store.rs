//! [`EmbeddingStore`]: texts embedded once and kept with their keys, the row ↔ key mapping the retrievers
//! need (HippoRAG 2's passage, phrase and fact stores; the dense retriever's passages).

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use half::f16;
use hashbrown::hash_table::{Entry, HashTable};
use kgrag_types::{EmbedKind, Embedder};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::exact::{F16Layout, F32Layout, LayoutRef};
use super::keys::KeyList;
use super::rows::RowFile;
use super::{normalise, ExactIndex, Metric, Precision, VectorIndex};
use crate::error::invalid;
use crate::{persist, Result, StoreError};

const KIND: &str = "embedding-store";
// 2: the vectors as one byte string (see `ExactIndex`). 3: a store of f16 vectors (the `index` field's
// variants 2 and 3), so that a build that reads only 2 says so instead of failing to decode; an f32 store
// is still written as 2.
const FORMAT: u32 = 2;
const FORMAT_F16: u32 = 3;
// 4: a store that keeps no texts ([`EmbeddingStore::without_texts`]; its vectors f32 or f16 as the
// `index` field's variant says), so that a build that reads only 2 and 3 says so.
const FORMAT_NO_TEXTS: u32 = 4;
// 5: a store whose f16 rows are saved in a file of their own beside it ([`EmbeddingStore::rows_path`];
// the `index` field's variant 4 names their count and the file's digest), texts kept or not as
// `keeps_texts` (a flag after the index).
const FORMAT_ROWS: u32 = 5;

/// Rows embedded and written together when a store keeps its rows on disk (16 MiB of f16 rows at 256
/// dimensions, 48 MiB at 384). An insert of no more rows is embedded in the same batches as in memory.
const DISK_WINDOW_ROWS: usize = 32_768;

/// Texts embedded without instruction, one row per distinct key, rows in first-insertion order, cosine
/// similarity (rows L2-normalised). Inserting a key that is already present embeds nothing: rerunning an
/// index build only embeds what is new. The vectors are held at the store's [`Precision`] (f32 unless
/// made [`with_precision`](Self::with_precision)).
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "StoreRepr")]
pub struct EmbeddingStore {
    name: String,
    keys: KeyList,
    /// Shared, so that a caller holding the same texts (the facade's chunk list) does not hold them twice;
    /// serialised as strings.
    texts: Vec<Arc<str>>,
    index: Option<ExactIndex>,
    /// The precision of the vectors (of the index once there is one).
    precision: Precision,
    rows: KeyRows,
    /// Whether `texts` holds a text per row (else it is empty: see [`EmbeddingStore::without_texts`]).
    keeps_texts: bool,
    /// Where the vectors are kept when they are on disk ([`EmbeddingStore::rows_on_disk`]).
    rows_dir: Option<PathBuf>,
}

/// The row of each key: row numbers in a table found by the key's hash and checked against the store's
/// `keys`, so that each key is held once (a `HashMap<String, usize>` held every key a second time, ~80
/// bytes a row).
#[derive(Clone, Default)]
struct KeyRows {
    table: HashTable<u32>,
    hasher: RandomState,
}

impl fmt::Debug for KeyRows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyRows({} keys)", self.table.len())
    }
}

impl KeyRows {
    /// The table of `keys` (row = position); `None` when a key is there twice.
    fn of(keys: &KeyList) -> Option<Self> {
        let mut rows = Self::default();
        rows.table
            .reserve(keys.len(), |&x| rows.hasher.hash_one(key_at(keys, x)));
        (0..keys.len())
            .all(|row| rows.insert(keys, row))
            .then_some(rows)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.len()
    }

    /// The row of `key`.
    fn get(&self, keys: &KeyList, key: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&r| key_at(keys, r) == key)
            .map(|&r| r as usize)
    }

    /// Adds `row` under `keys[row]`; false when that key already has a row (or `row` is out of range).
    fn insert(&mut self, keys: &KeyList, row: usize) -> bool {
        let (Some(key), Ok(r)) = (keys.get(row), u32::try_from(row)) else {
            return false;
        };
        let hasher = &self.hasher;
        match self.table.entry(
            hasher.hash_one(key),
            |&x| key_at(keys, x) == key,
            |&x| hasher.hash_one(key_at(keys, x)),
        ) {
            Entry::Occupied(_) => false,
            Entry::Vacant(slot) => {
                slot.insert(r);
                true
            }
        }
    }
}

/// `keys[row]` (`""` past the end, which the table's rows never are).
fn key_at(keys: &KeyList, row: u32) -> &str {
    keys.get(row as usize).unwrap_or_default()
}

/// How a store's vectors are saved. The first two variants are encoded exactly as the `Option` of an f32
/// index was before f16 stores (postcard writes an `Option` as a variant tag 0 or 1), so every store saved
/// before reads back unchanged.
#[derive(Deserialize)]
enum StoredIndex {
    /// No vectors yet (an f32 store).
    None,
    /// f32 vectors.
    F32(F32Layout),
    /// f16 vectors.
    F16(F16Layout),
    /// No vectors yet, in a store that holds them as f16.
    NoneF16,
    /// f16 vectors in the store's rows file (format 5).
    F16Rows(RowsLayout),
}

/// What a store saved with its rows in a file of their own records of them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct RowsLayout {
    dim: usize,
    metric: Metric,
    /// Number of values (rows × dimension).
    values: u64,
    /// The rows file's digest: the file saved with this store, no other.
    digest: [u8; 32],
}

/// [`StoredIndex`] borrowed, for writing.
#[derive(Serialize)]
enum StoredIndexRef<'a> {
    None,
    F32(super::exact::F32Ref<'a>),
    F16(super::exact::F16Ref<'a>),
    NoneF16,
    F16Rows(RowsLayout),
}

/// What a store's file holds (its key map is rebuilt on reading).
#[derive(Deserialize)]
struct StoreRepr {
    name: String,
    keys: KeyList,
    texts: Vec<Arc<str>>,
    index: StoredIndex,
}

/// A format-5 file: the fields of [`StoreRepr`], then whether the store keeps its texts.
#[derive(Deserialize)]
struct StoreRowsRepr {
    name: String,
    keys: KeyList,
    texts: Vec<Arc<str>>,
    index: StoredIndex,
    keeps_texts: bool,
}

impl TryFrom<StoreRepr> for EmbeddingStore {
    type Error = String;

    fn try_from(r: StoreRepr) -> std::result::Result<Self, String> {
        let (index, precision) = match r.index {
            StoredIndex::None => (None, Precision::F32),
            StoredIndex::NoneF16 => (None, Precision::F16),
            StoredIndex::F32(l) => (Some(ExactIndex::from_f32_layout(l)), Precision::F32),
            StoredIndex::F16(l) => (Some(ExactIndex::from_f16_layout(l)), Precision::F16),
            StoredIndex::F16Rows(_) => {
                return Err(format!(
                    "the {} store keeps its rows in a file: read it with EmbeddingStore::load",
                    r.name
                ))
            }
        };
        // The key map is built by `load`, which also checks the parts against each other.
        Ok(Self {
            name: r.name,
            keys: r.keys,
            texts: r.texts,
            index,
            precision,
            rows: KeyRows::default(),
            keeps_texts: true,
            rows_dir: None,
        })
    }
}

/// Serialised (e.g. inside another structure), a store holds its vectors inline, read from their file
/// when they are on disk; [`EmbeddingStore::save`] writes such a store's rows to a file of their own.
impl Serialize for EmbeddingStore {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let index = match (&self.index, self.precision) {
            (None, Precision::F32) => StoredIndexRef::None,
            (None, Precision::F16) => StoredIndexRef::NoneF16,
            (Some(index), _) => match index.layout().map_err(S::Error::custom)? {
                LayoutRef::F32(l) => StoredIndexRef::F32(l),
                LayoutRef::F16(l) => StoredIndexRef::F16(l),
            },
        };
        self.serialize_with(s, &index, None)
    }
}

/// A store whose rows were saved to their own file, as [`EmbeddingStore::save`] writes it (format 5).
struct SavedWithRows<'a> {
    store: &'a EmbeddingStore,
    rows: RowsLayout,
}

impl Serialize for SavedWithRows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.store.serialize_with(
            s,
            &StoredIndexRef::F16Rows(self.rows),
            Some(self.store.keeps_texts),
        )
    }
}

impl EmbeddingStore {
    /// The store's fields with `index` for its vectors (and, in format 5, the texts flag).
    fn serialize_with<S: Serializer>(
        &self,
        s: S,
        index: &StoredIndexRef<'_>,
        keeps_texts: Option<bool>,
    ) -> std::result::Result<S::Ok, S::Error> {
        let mut st =
            s.serialize_struct("EmbeddingStore", 4 + usize::from(keeps_texts.is_some()))?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("keys", &self.keys)?;
        st.serialize_field("texts", &self.texts)?;
        st.serialize_field("index", index)?;
        if let Some(k) = keeps_texts {
            st.serialize_field("keeps_texts", &k)?;
        }
        st.end()
    }
}

impl PartialEq for EmbeddingStore {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.keys == other.keys
            && self.texts == other.texts
            && self.index == other.index
            && self.precision == other.precision
            && self.keeps_texts == other.keeps_texts
    }
}

impl EmbeddingStore {
    /// An empty store; `name` (e.g. `passages`) appears in errors and progress.
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_precision(name, Precision::F32)
    }

    /// An empty store whose vectors will be held at `precision` (see [`Precision`]: an f16 store scores
    /// as an f32 store holding its rows rounded to f16, in half the memory).
    pub fn with_precision(name: impl Into<String>, precision: Precision) -> Self {
        Self {
            name: name.into(),
            keys: KeyList::default(),
            texts: Vec::new(),
            index: None,
            precision,
            rows: KeyRows::default(),
            keeps_texts: true,
            rows_dir: None,
        }
    }

    /// Keeps this store's vectors in unnamed scratch files under `dir` (created if missing) instead of
    /// memory: rows already held are moved there, later inserts write theirs there as they are embedded,
    /// and a query reads only the rows it needs ([`ScreenedIndex`](super::ScreenedIndex) screens in
    /// memory). Scores are unchanged. [`save`](Self::save) writes an f16 store's rows to a file of their
    /// own beside the store ([`rows_path`](Self::rows_path)), and [`load`](Self::load) reads such a
    /// store with its rows left in that file; an f32 store's rows are saved inline, as in memory, and
    /// load into memory.
    pub fn rows_on_disk(&mut self, dir: &Path) -> Result<()> {
        if let Some(index) = &mut self.index {
            index.rows_on_disk(dir)?;
        }
        self.rows_dir = Some(dir.to_path_buf());
        Ok(())
    }

    /// Whether new rows go to disk (the store keeps its rows there, or holds rows in a file).
    fn on_disk(&self) -> bool {
        self.rows_dir.is_some() || self.rows_are_on_disk()
    }

    /// Reads the vectors back into memory and keeps later ones there (undoes
    /// [`rows_on_disk`](Self::rows_on_disk)).
    pub fn rows_in_memory(&mut self) -> Result<()> {
        if let Some(index) = &mut self.index {
            index.rows_in_memory()?;
        }
        self.rows_dir = None;
        Ok(())
    }

    /// Whether the vectors are in a file ([`rows_on_disk`](Self::rows_on_disk), or a store loaded with
    /// its rows in one): [`save`](Self::save) of an f16 store then also writes
    /// [`rows_path`](Self::rows_path). False while the store holds no vectors.
    pub fn rows_are_on_disk(&self) -> bool {
        self.index.as_ref().is_some_and(ExactIndex::is_on_disk)
    }

    /// The file [`save`](Self::save) writes a store's on-disk rows to, beside the store's `path`:
    /// `<path>.rows`.
    pub fn rows_path(path: &Path) -> PathBuf {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".rows");
        path.with_file_name(name)
    }

    /// This store keeping keys and vectors only: texts are embedded on insert but not held, and
    /// [`text`](Self::text) is `None` — for rows whose text the owner can make again (HippoRAG 2's facts
    /// are their triples rendered: holding both cost ~1 MB per 1,000 passages). Texts already held are
    /// dropped.
    pub fn without_texts(mut self) -> Self {
        self.drop_texts();
        self
    }

    /// Drops the texts held (see [`without_texts`](Self::without_texts)); later inserts hold none.
    pub fn drop_texts(&mut self) {
        self.texts = Vec::new();
        self.keeps_texts = false;
    }

    /// Whether the store holds the text of each row.
    pub fn keeps_texts(&self) -> bool {
        self.keeps_texts
    }

    /// How the vectors are held.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// A store of `keys` and `texts` with their vectors as [`index`](Self::index) holds them (`dim`
    /// values per row, normalised): what a database backend reads back. Keys must be distinct.
    pub fn from_stored(
        name: impl Into<String>,
        keys: Vec<String>,
        texts: Vec<Arc<str>>,
        dim: usize,
        vectors: Vec<f32>,
    ) -> Result<Self> {
        let name = name.into();
        if keys.len() != texts.len() || keys.len() * dim != vectors.len() {
            return Err(invalid(format!(
                "the {name} store was given {} keys, {} texts and {} values of {dim}-d vectors",
                keys.len(),
                texts.len(),
                vectors.len()
            )));
        }
        let index = if keys.is_empty() {
            None
        } else {
            Some(ExactIndex::from_stored(dim, Metric::Cosine, vectors)?)
        };
        let keys: KeyList = keys.into_iter().collect();
        let Some(rows) = KeyRows::of(&keys) else {
            return Err(invalid(format!("the {name} store was given a key twice")));
        };
        Ok(Self {
            name,
            keys,
            texts,
            index,
            precision: Precision::F32,
            rows,
            keeps_texts: true,
            rows_dir: None,
        })
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Vector dimension (`None` before the first insert).
    pub fn dim(&self) -> Option<usize> {
        self.index.as_ref().map(ExactIndex::dim)
    }

    /// The keys, in row order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.keys.iter()
    }

    /// The texts, in row order (empty for a store [`without_texts`](Self::without_texts)).
    pub fn texts(&self) -> &[Arc<str>] {
        &self.texts
    }

    /// The key of row `row`.
    pub fn key(&self, row: usize) -> Option<&str> {
        self.keys.get(row)
    }

    /// The text of row `row` (`None` in a store [`without_texts`](Self::without_texts)).
    pub fn text(&self, row: usize) -> Option<&str> {
        self.texts.get(row).map(|t| &**t)
    }

    /// The text stored under `key`.
    pub fn text_of(&self, key: &str) -> Option<&str> {
        self.row(key).and_then(|r| self.text(r))
    }

    /// `(row, text)` of each of `keys` that the store holds, in the order given (unknown keys skipped):
    /// the passages of a context, for caches kept per row (`kgrag_text::ReaderTokens`).
    pub fn rows_and_texts<'a>(
        &'a self,
        keys: impl IntoIterator<Item = &'a str> + 'a,
    ) -> impl Iterator<Item = (usize, &'a str)> + 'a {
        keys.into_iter().filter_map(move |key| {
            let row = self.row(key)?;
            Some((row, self.text(row)?))
        })
    }

    /// The row holding `key`.
    pub fn row(&self, key: &str) -> Option<usize> {
        self.rows.get(&self.keys, key)
    }

    /// The vectors (`None` before the first insert).
    pub fn index(&self) -> Option<&ExactIndex> {
        self.index.as_ref()
    }

    /// The cosine of `query` to every row, in row order (empty for an empty store).
    pub fn scores(&self, query: &[f32]) -> Result<Vec<f32>> {
        match &self.index {
            Some(index) => index.scores(query),
            None => Ok(Vec::new()),
        }
    }

    /// Adds `(key, text)` items whose key is not stored yet, embedding their texts with `embedder` in
    /// batches of `batch` (documents, no instruction; texts grouped by length to limit padding); `progress` is called with the number of texts done
    /// after each batch. Returns the row of every item, in input order. Duplicate keys within `items` are
    /// embedded once. Nothing is added when the embedder fails.
    ///
    /// Texts given as `Arc<str>` are stored shared, not copied.
    pub async fn insert<K, T, F>(
        &mut self,
        items: &[(K, T)],
        embedder: &dyn Embedder,
        batch: usize,
        mut progress: F,
    ) -> Result<Vec<usize>>
    where
        K: AsRef<str>,
        T: AsRef<str> + Clone + Into<Arc<str>>,
        F: FnMut(usize),
    {
        let mut missing: Vec<(&str, &T)> = Vec::new();
        let mut pending: HashMap<&str, usize> = HashMap::new();
        for (key, text) in items {
            let key = key.as_ref();
            if self.row(key).is_none() && !pending.contains_key(key) {
                pending.insert(key, self.keys.len() + missing.len());
                missing.push((key, text));
            }
        }
        if self.keys.len() + missing.len() > u32::MAX as usize {
            return Err(invalid(format!(
                "the {} store would pass {} rows",
                self.name,
                u32::MAX
            )));
        }
        // Embed in order of text length, so that each batch pads to similar lengths (transformer cost grows
        // with the longest text of a batch); rows are stored in input order. Rows kept on disk are
        // embedded a window of rows at a time (each window's texts by length), so that each window is
        // written to the file at once, in order: rows written one by one at scattered places made the
        // kernel read back and rewrite pages of a file larger than the page cache (a million passages).
        let window = self.on_disk().then_some(DISK_WINDOW_ROWS);
        let mut order: Vec<usize> = (0..missing.len()).collect();
        order.sort_by_key(|&i| (window.map_or(0, |w| i / w), missing[i].1.as_ref().len(), i));
        let had = self.dim();
        // An f16 append borrows the index across the embedder's calls; dropped unfinished (an error,
        // or the insert cancelled), it takes its rows back, so the index is as it was.
        let embedded = Self::embed_rows(
            &self.name,
            self.precision,
            self.rows_dir.as_deref(),
            &missing,
            &order,
            window,
            embedder,
            batch,
            &mut progress,
            &mut self.index,
        )
        .await;
        if embedded.is_err() && had.is_none() {
            self.index = None;
        }
        if let (Some(vectors), Some(index)) = (embedded?, &mut self.index) {
            index.add_owned(vectors)?;
        }
        self.keys
            .reserve(missing.len(), missing.iter().map(|(k, _)| k.len()).sum());
        if self.keeps_texts {
            self.texts.reserve(missing.len());
        }
        for (key, text) in missing {
            self.keys.push(key);
            if self.keeps_texts {
                self.texts.push(text.clone().into());
            }
            self.rows.insert(&self.keys, self.keys.len() - 1);
        }
        Ok(items
            .iter()
            .filter_map(|(key, _)| self.row(key.as_ref()))
            .collect())
    }

    /// Embeds the texts of `missing` in the batches of `order` into `index` (made at the first batch
    /// when there is none, on disk when the store keeps its rows there): an f16 store's rows are
    /// written as each batch comes (normalised, rounded), an f32 store's are returned in item order for
    /// the caller to add. With `window`, `order` runs through the rows a window of that many rows at a
    /// time, and an f16 store's rows are written a window at a time.
    #[allow(clippy::too_many_arguments)]
    async fn embed_rows<T: AsRef<str>>(
        name: &str,
        precision: Precision,
        rows_dir: Option<&Path>,
        missing: &[(&str, &T)],
        order: &[usize],
        window: Option<usize>,
        embedder: &dyn Embedder,
        batch: usize,
        progress: &mut impl FnMut(usize),
        index: &mut Option<ExactIndex>,
    ) -> Result<Option<Vec<f32>>> {
        // Up to `calls_in_flight` calls at once (a provider over the network), taken back in order.
        let calls: Vec<_> = order
            .chunks(batch.max(1))
            .map(|part| async move {
                // The texts are copied when the call goes out, not all at once.
                let texts: Vec<String> = part
                    .iter()
                    .map(|&i| missing[i].1.as_ref().to_owned())
                    .collect();
                let e = embedder.embed(&texts, &EmbedKind::Document).await;
                (part, texts, e)
            })
            .collect();
        let mut done =
            futures_util::stream::iter(calls).buffered(embedder.calls_in_flight().max(1));
        let dim = index.as_ref().map(ExactIndex::dim);
        // Each batch checked: as many vectors as texts, the store's dimension, finite values.
        let check = |texts: &[String],
                     e: std::result::Result<kgrag_types::Embeddings, kgrag_types::Error>,
                     dim: Option<usize>| {
            let e = e.map_err(|source| StoreError::Embedding {
                what: format!("{} texts of the {} store", texts.len(), name),
                source,
            })?;
            if e.len() != texts.len() {
                return Err(invalid(format!(
                    "the embedder returned {} vectors for {} {} texts",
                    e.len(),
                    texts.len(),
                    name
                )));
            }
            match dim {
                Some(d) if d != e.dim() => {
                    return Err(invalid(format!(
                        "the embedder returned {}-d vectors, the {} store holds {d}-d vectors",
                        e.dim(),
                        name
                    )))
                }
                _ if e.dim() == 0 => {
                    return Err(invalid(format!(
                        "the embedder returned 0-dimensional vectors for the {} store",
                        name
                    )))
                }
                _ => {}
            }
            if let Some(i) = e.as_slice().iter().position(|v| !v.is_finite()) {
                return Err(invalid(format!(
                    "the embedder returned a non-finite value for the {} text {:?}",
                    name,
                    texts
                        .get(i / e.dim())
                        .map(String::as_str)
                        .unwrap_or_default()
                )));
            }
            Ok(e)
        };
        let Some((part, texts, e)) = done.next().await else {
            return Ok(None);
        };
        let e = check(&texts, e, dim)?;
        let d = e.dim();
        let index = match index {
            Some(index) => index,
            slot => {
                let mut made = ExactIndex::with_precision(d, Metric::Cosine, precision)?;
                if let Some(dir) = rows_dir {
                    made.rows_on_disk(dir)?;
                }
                slot.insert(made)
            }
        };
        match precision {
            Precision::F32 => {
                // As they come; normalised with the index's rows when added.
                let mut vectors = vec![0.0f32; missing.len() * d];
                let mut put = |part: &[usize], e: &kgrag_types::Embeddings| {
                    for (&i, row) in part.iter().zip(e.rows()) {
                        vectors[i * d..(i + 1) * d].copy_from_slice(row);
                    }
                };
                put(part, &e);
                progress(part.len());
                while let Some((part, texts, e)) = done.next().await {
                    let e = check(&texts, e, Some(d))?;
                    put(part, &e);
                    progress(part.len());
                }
                Ok(Some(vectors))
            }
            Precision::F16 => {
                // Normalised and rounded at once, written where they belong: no f32 copy of the insert
                // is held, nor an f16 one when the rows are on disk.
                let n = missing.len();
                let mut rows = index.append_f16(n)?;
                let mut row_buf: Vec<f32> = Vec::with_capacity(d);
                let mut half: Vec<f16> = vec![f16::ZERO; d];
                // The window being filled (its first row) and its rows; each window's rows all come
                // before the next window's (`order`).
                let mut staged: Vec<f16> = Vec::new();
                let mut current = 0usize;
                let mut put = |part: &[usize],
                               e: &kgrag_types::Embeddings,
                               rows: &mut super::exact::F16Rows<'_>|
                 -> Result<()> {
                    for (&i, row) in part.iter().zip(e.rows()) {
                        row_buf.clear();
                        row_buf.extend_from_slice(row);
                        normalise(&mut row_buf);
                        for (h, &v) in half.iter_mut().zip(&row_buf) {
                            *h = f16::from_f32(v);
                        }
                        let Some(w) = window else {
                            rows.put(i, &half)?;
                            continue;
                        };
                        let start = i / w * w;
                        if start != current || staged.is_empty() {
                            if !staged.is_empty() {
                                rows.put_rows(current, &staged)?;
                            }
                            current = start;
                            staged.clear();
                            staged.resize(w.min(n - start) * d, f16::ZERO);
                        }
                        staged[(i - start) * d..(i - start + 1) * d].copy_from_slice(&half);
                    }
                    Ok(())
                };
                put(part, &e, &mut rows)?;
                progress(part.len());
                while let Some((part, texts, e)) = done.next().await {
                    let e = check(&texts, e, Some(d))?;
                    put(part, &e, &mut rows)?;
                    progress(part.len());
                }
                if !staged.is_empty() {
                    rows.put_rows(current, &staged)?;
                }
                rows.finish();
                Ok(None)
            }
        }
    }

    /// A store of the rows `rows` (indices into this one, each at most once), in that order.
    pub fn select_rows(&self, rows: &[usize]) -> Result<Self> {
        let mut keys = KeyList::default();
        keys.reserve(
            rows.len(),
            rows.iter()
                .filter_map(|&r| self.keys.get(r))
                .map(str::len)
                .sum(),
        );
        let mut texts = Vec::with_capacity(if self.keeps_texts { rows.len() } else { 0 });
        for &r in rows {
            match (self.keys.get(r), self.texts.get(r)) {
                (Some(k), Some(t)) if self.keeps_texts => {
                    keys.push(k);
                    texts.push(t.clone());
                }
                (Some(k), _) if !self.keeps_texts => keys.push(k),
                _ => {
                    return Err(invalid(format!(
                        "row {r} of the {} store of {} rows",
                        self.name,
                        self.keys.len()
                    )))
                }
            }
        }
        let index = match &self.index {
            Some(index) if !rows.is_empty() => Some(index.select_rows(rows)?),
            _ => None,
        };
        let Some(rows_of) = KeyRows::of(&keys) else {
            return Err(invalid(format!(
                "a row is selected twice from the {} store",
                self.name
            )));
        };
        Ok(Self {
            name: self.name.clone(),
            keys,
            texts,
            index,
            precision: self.precision,
            rows: rows_of,
            keeps_texts: self.keeps_texts,
            rows_dir: self.rows_dir.clone(),
        })
    }

    /// Removes the rows whose key `remove` returns true for; the other rows keep their order and values
    /// (so the store equals one into which the removed keys were never inserted). Returns, for every old
    /// row, its new row (`None` when removed). Fails only when the rows are on disk and cannot be copied
    /// (the store is then unchanged).
    pub fn remove_where(
        &mut self,
        mut remove: impl FnMut(&str) -> bool,
    ) -> Result<Vec<Option<usize>>> {
        let mut map = Vec::with_capacity(self.keys.len());
        let mut next = 0usize;
        for k in self.keys.iter() {
            if remove(k) {
                map.push(None);
            } else {
                map.push(Some(next));
                next += 1;
            }
        }
        if next == self.keys.len() {
            return Ok(map);
        }
        if let Some(index) = &mut self.index {
            index.retain_rows(|row| map[row].is_some())?;
        }
        self.keys.retain_rows(|row| map[row].is_some());
        let mut row = 0usize;
        self.texts.retain(|_| {
            row += 1;
            map[row - 1].is_some()
        });
        if self.keys.is_empty() {
            self.index = None;
        }
        // The kept keys were distinct before.
        self.rows = KeyRows::of(&self.keys).unwrap_or_default();
        Ok(map)
    }

    /// Saves the store atomically to `path`; a store whose rows are on disk writes them first to
    /// [`rows_path`](Self::rows_path)`(path)` (streamed, never all in memory), and `path` names that
    /// file's digest.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(index) = &self.index {
            if let Some(rows) = index.row_file() {
                let digest = rows.save(&Self::rows_path(path))?;
                let rows = RowsLayout {
                    dim: index.dim(),
                    metric: index.metric(),
                    values: rows.len() as u64,
                    digest,
                };
                return persist::save(
                    path,
                    KIND,
                    FORMAT_ROWS,
                    &SavedWithRows { store: self, rows },
                );
            }
        }
        let format = match (self.keeps_texts, self.precision) {
            (false, _) => FORMAT_NO_TEXTS,
            (true, Precision::F32) => FORMAT,
            (true, Precision::F16) => FORMAT_F16,
        };
        persist::save(path, KIND, format, self)
    }

    /// Loads a store saved by [`save`](Self::save). A store saved with its rows on disk keeps them in
    /// their file, opened read-only and checked (its digest, and that it is the file saved with this
    /// store); rows added later go to scratch files in the system's temporary folder unless
    /// [`rows_on_disk`](Self::rows_on_disk) names another.
    pub fn load(path: &Path) -> Result<Self> {
        let frame = persist::read_frame(path)?;
        frame.expect(&[KIND], &[FORMAT, FORMAT_F16, FORMAT_NO_TEXTS, FORMAT_ROWS])?;
        let mut out: Self = if frame.version() == FORMAT_ROWS {
            let r: StoreRowsRepr = frame.decode()?;
            let StoredIndex::F16Rows(layout) = r.index else {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    reason: "a format-5 store without a rows file".to_owned(),
                });
            };
            let dir = std::env::temp_dir();
            let rows = RowFile::open_saved(&Self::rows_path(path), &layout.digest, &dir)?;
            if rows.len() as u64 != layout.values {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    reason: format!(
                        "its rows file holds {} values, the store names {}",
                        rows.len(),
                        layout.values
                    ),
                });
            }
            let index = ExactIndex::from_row_file(layout.dim, layout.metric, rows);
            Self {
                name: r.name,
                keys: r.keys,
                texts: r.texts,
                index: Some(index),
                precision: Precision::F16,
                rows: KeyRows::default(),
                keeps_texts: r.keeps_texts,
                rows_dir: None,
            }
        } else {
            let mut out: Self = frame.decode()?;
            out.keeps_texts = frame.version() != FORMAT_NO_TEXTS;
            out
        };
        if let Some(reason) = out.index.as_ref().and_then(ExactIndex::check_layout) {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                reason,
            });
        }
        let rows = out.index.as_ref().map_or(0, ExactIndex::len);
        let texts = if out.keeps_texts { out.keys.len() } else { 0 };
        if out.texts.len() != texts || out.keys.len() != rows {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "{} keys, {} texts and {rows} vectors",
                    out.keys.len(),
                    out.texts.len()
                ),
            });
        }
        out.rows = KeyRows::of(&out.keys).ok_or_else(|| StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: "duplicate keys".to_owned(),
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::HashingEmbedder;

    #[test]
    fn key_rows_find_every_key_and_refuse_a_second_copy() {
        let names: Vec<String> = (0..2_000).map(|i| format!("key-{i}")).collect();
        let mut keys: KeyList = names.iter().collect();
        let mut rows = KeyRows::of(&keys).unwrap();
        assert_eq!(rows.len(), keys.len());
        for (i, k) in names.iter().enumerate() {
            assert_eq!(rows.get(&keys, k), Some(i));
        }
        assert_eq!(rows.get(&keys, "key-2000"), None);
        assert_eq!(rows.get(&keys, ""), None);
        let mut twice = keys.clone();
        twice.push("key-7");
        assert!(!rows.insert(&twice, twice.len() - 1), "a key has one row");
        assert!(!rows.insert(&twice, twice.len()), "past the end");
        assert!(KeyRows::of(&twice).is_none());
        keys.push("new");
        assert!(rows.insert(&keys, keys.len() - 1));
        assert_eq!(rows.get(&keys, "new"), Some(2_000));
    }

    fn items(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, t)| ((*k).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn shared_texts_are_stored_shared_and_saved_as_strings() {
        let e = HashingEmbedder::new(8);
        let text: Arc<str> = Arc::from("a passage");
        let mut shared = EmbeddingStore::new("passages");
        shared
            .insert(&[("p1", text.clone())], &e, 4, |_| {})
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&shared.texts()[0], &text), "not copied");
        let mut owned = EmbeddingStore::new("passages");
        owned
            .insert(&items(&[("p1", "a passage")]), &e, 4, |_| {})
            .await
            .unwrap();
        // The same bytes on disk either way (a shared text encodes as a string).
        assert_eq!(
            postcard::to_stdvec(&shared).unwrap(),
            postcard::to_stdvec(&owned).unwrap()
        );
    }

    #[tokio::test]
    async fn a_store_without_texts_is_the_store_with_them_less_its_texts() {
        let e = HashingEmbedder::new(32);
        let items: Vec<(String, String)> = (0..30)
            .map(|i| (format!("fact-{i}"), format!("('s{i}', 'p', 'o{}')", i % 5)))
            .collect();
        let mut with = EmbeddingStore::with_precision("facts", Precision::F16);
        let mut without = EmbeddingStore::with_precision("facts", Precision::F16).without_texts();
        for part in [&items[..12], &items[12..]] {
            with.insert(part, &e, 4, |_| {}).await.unwrap();
            without.insert(part, &e, 4, |_| {}).await.unwrap();
        }
        assert!(with.keeps_texts() && !without.keeps_texts());
        assert_eq!(without.text(3), None);
        assert!(without.texts().is_empty());
        assert!(with.keys().eq(without.keys()));
        assert_eq!(with.index(), without.index());
        assert_eq!(without.row("fact-17"), Some(17));
        let mut dropped = with.clone();
        dropped.drop_texts();
        assert_eq!(dropped, without);
        assert_ne!(with, without);

        // Selecting and removing rows: the same rows as the store with texts, still without texts.
        let picked = without.select_rows(&[7, 2, 29]).unwrap();
        assert!(picked.keys().eq(["fact-7", "fact-2", "fact-29"]));
        assert_eq!(
            picked,
            with.select_rows(&[7, 2, 29]).unwrap().without_texts()
        );
        assert!(without.select_rows(&[30]).is_err());
        let mut cut = without.clone();
        let map = cut.remove_where(|k| k.ends_with('1')).unwrap();
        let mut cut_with = with.clone();
        assert_eq!(cut_with.remove_where(|k| k.ends_with('1')).unwrap(), map);
        assert_eq!(cut, cut_with.without_texts());

        // Saved as format 4 and read back without texts; a format-4 file holding texts is corrupt.
        let dir = std::env::temp_dir().join(format!("kgrag-store-notexts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("facts.store");
        without.save(&path).unwrap();
        assert_eq!(
            persist::read_frame(&path).unwrap().version(),
            FORMAT_NO_TEXTS
        );
        let back = EmbeddingStore::load(&path).unwrap();
        assert_eq!(back, without);
        let with_len = {
            with.save(&path).unwrap();
            std::fs::metadata(&path).unwrap().len()
        };
        without.save(&path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < with_len);
        persist::save(&path, KIND, FORMAT_NO_TEXTS, &with).unwrap();
        let err = EmbeddingStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("30 texts"), "{err}");
        // Texts inserted later are not held either.
        let mut grown = back;
        grown
            .insert(
                &[("fact-new".to_owned(), "('a', 'b', 'c')".to_owned())],
                &e,
                4,
                |_| {},
            )
            .await
            .unwrap();
        assert_eq!((grown.len(), grown.texts().len()), (31, 0));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn an_f16_store_holds_the_f32_store_s_rows_rounded_and_saves_them_as_f16() {
        let e = HashingEmbedder::new(32);
        let texts: Vec<(String, String)> = (0..40)
            .map(|i| (format!("k{i}"), format!("fact number {i} about {}", i % 7)))
            .collect();
        let mut full = EmbeddingStore::new("facts");
        let mut half = EmbeddingStore::with_precision("facts", Precision::F16);
        // In two inserts, batches of 3: rows written batch by batch, the second insert appended.
        for part in [&texts[..25], &texts[25..]] {
            full.insert(part, &e, 3, |_| {}).await.unwrap();
            half.insert(part, &e, 3, |_| {}).await.unwrap();
        }
        assert_eq!(half.precision(), Precision::F16);
        let (fi, hi) = (full.index().unwrap(), half.index().unwrap());
        assert_eq!(hi.precision(), Precision::F16);
        assert_eq!(&fi.to_precision(Precision::F16).unwrap(), hi);
        assert_eq!(hi.value_bytes() * 2, fi.value_bytes());
        let q = e.vector("fact number 3 about 3");
        let twin = hi.to_precision(Precision::F32).unwrap();
        assert_eq!(half.scores(&q).unwrap(), twin.scores(&q).unwrap());
        // Saved and read back as f16; so is an empty f16 store (its next insert stays f16).
        let dir = std::env::temp_dir().join(format!("kgrag-store-f16-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("facts.store");
        half.save(&path).unwrap();
        // Format 3, so that a build reading only format 2 names the version instead of failing to decode.
        assert_eq!(persist::read_frame(&path).unwrap().version(), FORMAT_F16);
        let back = EmbeddingStore::load(&path).unwrap();
        assert_eq!(back, half);
        assert_eq!(back.row("k30"), Some(30));
        let f32_len = {
            full.save(&path).unwrap();
            assert_eq!(persist::read_frame(&path).unwrap().version(), FORMAT);
            std::fs::metadata(&path).unwrap().len()
        };
        half.save(&path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < f32_len * 6 / 10);
        EmbeddingStore::with_precision("facts", Precision::F16)
            .save(&path)
            .unwrap();
        let mut empty = EmbeddingStore::load(&path).unwrap();
        assert_eq!((empty.len(), empty.precision()), (0, Precision::F16));
        empty.insert(&texts[..2], &e, 8, |_| {}).await.unwrap();
        assert_eq!(empty.index().unwrap().precision(), Precision::F16);
        // Removing and selecting rows keep the precision.
        let mut cut = half.clone();
        cut.remove_where(|k| k.ends_with('1')).unwrap();
        assert_eq!(cut.index().unwrap().precision(), Precision::F16);
        assert_eq!(
            half.select_rows(&[3, 1]).unwrap().precision(),
            Precision::F16
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A store as it was saved before f16 stores (the derived layout of `name, keys, texts,
    /// Option<index>`) reads back unchanged, and an f32 store is still written in that layout.
    #[tokio::test]
    async fn a_store_saved_before_f16_stores_reads_back() {
        #[derive(Serialize)]
        struct OldIndex {
            dim: usize,
            metric: Metric,
            #[serde(with = "serde_bytes_f32")]
            data: Vec<f32>,
        }
        mod serde_bytes_f32 {
            pub fn serialize<S: serde::Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
                let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                s.serialize_bytes(&b)
            }
        }
        #[derive(Serialize)]
        struct OldStore {
            name: String,
            keys: Vec<String>,
            texts: Vec<String>,
            index: Option<OldIndex>,
        }
        let e = HashingEmbedder::new(8);
        let mut now = EmbeddingStore::new("passages");
        now.insert(&items(&[("a", "alpha"), ("b", "beta")]), &e, 4, |_| {})
            .await
            .unwrap();
        let old = OldStore {
            name: "passages".into(),
            keys: vec!["a".into(), "b".into()],
            texts: vec!["alpha".into(), "beta".into()],
            index: Some(OldIndex {
                dim: 8,
                metric: Metric::Cosine,
                data: now.index().unwrap().values().unwrap().into_owned(),
            }),
        };
        let bytes = postcard::to_allocvec(&old).unwrap();
        assert_eq!(postcard::to_allocvec(&now).unwrap(), bytes);
        let back: EmbeddingStore = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.index(), now.index());
        assert_eq!(back.precision(), Precision::F32);
        let empty = OldStore {
            name: "x".into(),
            keys: vec![],
            texts: vec![],
            index: None,
        };
        let bytes = postcard::to_allocvec(&empty).unwrap();
        assert_eq!(
            postcard::to_allocvec(&EmbeddingStore::new("x")).unwrap(),
            bytes
        );
        let back: EmbeddingStore = postcard::from_bytes(&bytes).unwrap();
        assert_eq!((back.len(), back.precision()), (0, Precision::F32));
    }

    #[tokio::test]
    async fn embeds_only_new_keys_and_keeps_rows() {
        let e = HashingEmbedder::new(16);
        let mut s = EmbeddingStore::new("phrases");
        let rows = s
            .insert(
                &items(&[("a", "alpha"), ("b", "beta"), ("a", "alpha")]),
                &e,
                1,
                |_| {},
            )
            .await
            .unwrap();
        assert_eq!(rows, vec![0, 1, 0]);
        // Embedded shortest first, stored in input order.
        assert_eq!(e.texts(), vec!["beta", "alpha"]);
        assert_eq!(s.text(0), Some("alpha"));
        assert!((s.scores(&e.vector("alpha")).unwrap()[0] - 1.0).abs() < 1e-5);
        let rows = s
            .insert(&items(&[("c", "gamma"), ("b", "beta")]), &e, 8, |_| {})
            .await
            .unwrap();
        assert_eq!(rows, vec![2, 1]);
        assert_eq!(e.texts(), vec!["beta", "alpha", "gamma"]);
        assert_eq!(s.row("c"), Some(2));
        assert_eq!(s.text(2), Some("gamma"));
        let scores = s.scores(&e.vector("beta")).unwrap();
        assert!((scores[1] - 1.0).abs() < 1e-5);

        let path = std::env::temp_dir().join(format!("kgrag-store-{}.bin", std::process::id()));
        s.save(&path).unwrap();
        let back = EmbeddingStore::load(&path).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.row("b"), Some(1));
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn failed_embedding_adds_nothing() {
        let e = HashingEmbedder::new(8).fail_after(1);
        let mut s = EmbeddingStore::new("facts");
        let err = s
            .insert(&items(&[("a", "x"), ("b", "y")]), &e, 1, |_| {})
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap();
        assert!(err.contains("facts store"), "{err}");
        assert!(s.is_empty());
    }

    #[tokio::test]
    async fn an_f32_store_on_disk_scores_as_in_memory_and_saves_its_rows_inline() {
        let e = HashingEmbedder::new(32);
        let items: Vec<(String, String)> = (0..300)
            .map(|i| (format!("ent-{i}"), format!("entity {i} of kind {}", i % 11)))
            .collect();
        let dir = std::env::temp_dir().join(format!("kgrag-store-f32-{}", std::process::id()));
        let mut mem = EmbeddingStore::new("entities");
        let mut disk = EmbeddingStore::new("entities");
        mem.insert(&items[..200], &e, 16, |_| {}).await.unwrap();
        disk.insert(&items[..200], &e, 16, |_| {}).await.unwrap();
        // Moved after the first insert; the second appends to the file.
        disk.rows_on_disk(&dir.join("scratch")).unwrap();
        mem.insert(&items[200..], &e, 16, |_| {}).await.unwrap();
        disk.insert(&items[200..], &e, 16, |_| {}).await.unwrap();
        assert!(disk.rows_are_on_disk() && disk.index().unwrap().value_bytes() == 0);
        assert_eq!(disk, mem);
        let q = e
            .embed(&["entity 7 of kind 3".to_owned()], &EmbedKind::Document)
            .await
            .unwrap();
        let q = q.rows().next().unwrap().to_vec();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(disk.scores(&q).unwrap()),
            bits(mem.scores(&q).unwrap())
        );
        // Saved inline (no rows file), read back into memory: the store in memory.
        let path = dir.join("entities.store");
        disk.save(&path).unwrap();
        assert!(!EmbeddingStore::rows_path(&path).exists());
        let back = EmbeddingStore::load(&path).unwrap();
        assert!(!back.rows_are_on_disk());
        assert_eq!(back, mem);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_store_with_its_rows_on_disk_is_the_store_in_memory() {
        let e = HashingEmbedder::new(48);
        let items: Vec<(String, String)> = (0..700)
            .map(|i| {
                (
                    format!("fact-{i}"),
                    format!("('s{i}', 'p{}', 'o{}')", i % 7, i % 13),
                )
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("kgrag-store-disk-{}", std::process::id()));
        let scratch = dir.join("scratch");
        let mut mem = EmbeddingStore::with_precision("facts", Precision::F16).without_texts();
        let mut disk = EmbeddingStore::with_precision("facts", Precision::F16).without_texts();
        disk.rows_on_disk(&scratch).unwrap();
        assert!(!disk.rows_are_on_disk(), "no vectors yet");
        // Two inserts (the second appends), batches out of row order (texts sorted by length).
        for part in [&items[..400], &items[400..]] {
            mem.insert(part, &e, 32, |_| {}).await.unwrap();
            disk.insert(part, &e, 32, |_| {}).await.unwrap();
        }
        assert!(disk.rows_are_on_disk() && !mem.rows_are_on_disk());
        assert_eq!(disk.index().unwrap().value_bytes(), 0, "nothing in memory");
        assert_eq!(disk, mem);
        // Scores, a full scan and the screened top k with its range: the same numbers.
        let q = e
            .embed(&["('s3', 'p3', 'o3')".to_owned()], &EmbedKind::Document)
            .await
            .unwrap();
        let q = q.rows().next().unwrap().to_vec();
        assert_eq!(disk.scores(&q).unwrap(), mem.scores(&q).unwrap());
        let (di, mi) = (disk.index().unwrap(), mem.index().unwrap());
        use super::super::ScreenedIndex;
        let (ds, ms) = (
            ScreenedIndex::new(di).unwrap(),
            ScreenedIndex::new(mi).unwrap(),
        );
        assert_eq!(
            ds.top_k_range(di, &q, 10).unwrap(),
            ms.top_k_range(mi, &q, 10).unwrap()
        );
        assert_eq!(di.search(&q, 5).unwrap(), mi.search(&q, 5).unwrap());
        // Selecting and removing rows.
        let rows = [5, 699, 0, 321];
        assert_eq!(
            disk.select_rows(&rows).unwrap(),
            mem.select_rows(&rows).unwrap()
        );
        assert!(disk.select_rows(&rows).unwrap().rows_are_on_disk());
        let (mut dcut, mut mcut) = (disk.clone(), mem.clone());
        let gone = |k: &str| k.ends_with('3');
        assert_eq!(
            dcut.remove_where(gone).unwrap(),
            mcut.remove_where(gone).unwrap()
        );
        assert_eq!(dcut, mcut);
        assert_eq!(disk, mem, "the clone's cut left the original as it was");

        // Saved as format 5 with a rows file; read back with the rows left in that file.
        let path = dir.join("facts.store");
        disk.save(&path).unwrap();
        assert_eq!(persist::read_frame(&path).unwrap().version(), FORMAT_ROWS);
        let rows_file = EmbeddingStore::rows_path(&path);
        assert_eq!(rows_file, dir.join("facts.store.rows"));
        let saved = std::fs::read(&rows_file).unwrap();
        let back = EmbeddingStore::load(&path).unwrap();
        assert!(back.rows_are_on_disk() && !back.keeps_texts());
        assert_eq!(back, mem);
        // Growing the loaded store leaves the saved files as they were.
        let mut grown = back.clone();
        grown.rows_on_disk(&scratch).unwrap();
        let more = [("fact-new".to_owned(), "('x', 'y', 'z')".to_owned())];
        grown.insert(&more, &e, 8, |_| {}).await.unwrap();
        mem.insert(&more, &e, 8, |_| {}).await.unwrap();
        assert_eq!(grown, mem);
        assert_eq!(std::fs::read(&rows_file).unwrap(), saved);
        assert_eq!(EmbeddingStore::load(&path).unwrap(), back);
        // Into memory again: the same store, saved as before (format 4).
        let mut held = grown.clone();
        held.rows_in_memory().unwrap();
        assert!(!held.rows_are_on_disk());
        assert_eq!(held, mem);
        held.save(&dir.join("held.store")).unwrap();
        assert_eq!(
            persist::read_frame(&dir.join("held.store"))
                .unwrap()
                .version(),
            FORMAT_NO_TEXTS
        );
        // Serialised inside another structure, the rows are written inline, as an in-memory store's.
        assert_eq!(
            postcard::to_stdvec(&grown).unwrap(),
            postcard::to_stdvec(&mem).unwrap()
        );

        // A rows file that is not the one saved with the store is refused.
        disk.select_rows(&[1, 2])
            .unwrap()
            .save(&dir.join("other.store"))
            .unwrap();
        std::fs::copy(
            EmbeddingStore::rows_path(&dir.join("other.store")),
            &rows_file,
        )
        .unwrap();
        let err = EmbeddingStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("another generation"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_large_insert_on_disk_is_written_a_window_at_a_time_in_place() {
        // Over two windows, with texts whose lengths run against the row order.
        let n = DISK_WINDOW_ROWS * 2 + 1_000;
        let items: Vec<(String, String)> = (0..n)
            .map(|i| {
                (
                    format!("k{i}"),
                    "w ".repeat(1 + (n - i) % 17) + &i.to_string(),
                )
            })
            .collect();
        let e = HashingEmbedder::new(8);
        let dir = std::env::temp_dir().join(format!("kgrag-store-window-{}", std::process::id()));
        let mut disk = EmbeddingStore::with_precision("facts", Precision::F16);
        disk.rows_on_disk(&dir).unwrap();
        let mut mem = EmbeddingStore::with_precision("facts", Precision::F16);
        // A first insert within one window, then one that crosses two (windows count from its first row).
        for part in [&items[..5_000], &items[5_000..]] {
            disk.insert(part, &e, 64, |_| {}).await.unwrap();
            mem.insert(part, &e, 64, |_| {}).await.unwrap();
        }
        assert!(disk.rows_are_on_disk());
        assert_eq!(disk.len(), n);
        assert_eq!(disk, mem);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_failed_insert_into_a_store_on_disk_adds_nothing() {
        let dir =
            std::env::temp_dir().join(format!("kgrag-store-disk-fail-{}", std::process::id()));
        let ok = HashingEmbedder::new(8);
        let mut s = EmbeddingStore::with_precision("facts", Precision::F16);
        s.rows_on_disk(&dir).unwrap();
        s.insert(&items(&[("a", "x")]), &ok, 1, |_| {})
            .await
            .unwrap();
        let before = s.clone();
        let failing = HashingEmbedder::new(8).fail_after(1);
        let err = s
            .insert(&items(&[("b", "yy"), ("c", "zzz")]), &failing, 1, |_| {})
            .await
            .unwrap_err();
        assert!(err.to_string().contains("facts store"), "{err}");
        assert_eq!(s, before);
        assert_eq!(s.len(), 1);
        // The next insert writes where the failed one had begun.
        s.insert(&items(&[("b", "yy")]), &ok, 1, |_| {})
            .await
            .unwrap();
        let mut mem = EmbeddingStore::with_precision("facts", Precision::F16);
        mem.insert(&items(&[("a", "x"), ("b", "yy")]), &ok, 1, |_| {})
            .await
            .unwrap();
        assert_eq!(s.index(), mem.index());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// An embedder over the network: it takes several calls at once, each answered after a pause.
    struct Remote {
        inner: HashingEmbedder,
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Embedder for Remote {
        fn model_name(&self) -> &str {
            self.inner.model_name()
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        async fn embed(
            &self,
            texts: &[String],
            kind: &EmbedKind,
        ) -> kgrag_types::Result<kgrag_types::Embeddings> {
            use std::sync::atomic::Ordering;
            let held = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(held, Ordering::SeqCst);
            // Later calls answer sooner, so the results come back out of order.
            let pause = 40u64.saturating_sub(texts[0].len() as u64);
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            self.inner.embed(texts, kind).await
        }
        fn calls_in_flight(&self) -> usize {
            3
        }
    }

    /// Calls go out `calls_in_flight` at a time and every row lands where it belongs: the store equals
    /// the one built one call at a time.
    #[tokio::test]
    async fn calls_in_flight_together_give_the_same_store() {
        let texts: Vec<(String, String)> = (0..20)
            .map(|i| (format!("k{i}"), format!("text {}", "w".repeat(i))))
            .collect();
        let remote = Remote {
            inner: HashingEmbedder::new(8),
            now: Default::default(),
            most: Default::default(),
        };
        let mut together = EmbeddingStore::new("facts");
        let mut advanced = 0;
        together
            .insert(&texts, &remote, 2, |n| advanced += n)
            .await
            .unwrap();
        let most = remote.most.load(std::sync::atomic::Ordering::SeqCst);
        assert!((2..=3).contains(&most), "{most} calls at once");
        assert_eq!(advanced, 20);
        let mut alone = EmbeddingStore::new("facts");
        alone
            .insert(&texts, &HashingEmbedder::new(8), 2, |_| {})
            .await
            .unwrap();
        assert_eq!(together, alone);
    }
}
