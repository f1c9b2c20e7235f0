//! Exact (brute-force) search over a contiguous row-major matrix of f32 (or f16) values.

use std::borrow::Cow;
use std::path::Path;

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::join::{push_both, upper_block_pairs, JoinCodes};
use super::rows::{RowFile, RowValue};
use super::{check_rows, dot, normalise_rows, Hit, Metric, TopK, VectorIndex};
use crate::error::invalid;
use crate::{persist, Result};

pub(super) const KIND: &str = "exact-index";
/// The kind tag of an index saved with f16 values (its own layout, so an f32 file reads as before).
pub(super) const KIND_F16: &str = "exact-index-f16";
// 2: the matrix as one little-endian byte string (1 wrote one element at a time).
const FORMAT: u32 = 2;
const FORMAT_F16: u32 = 1;

/// Relative margin by which the blocked product may differ from [`dot`] (f32 rounding over ≤ 4096 terms).
const SCREEN_MARGIN: f32 = 1e-4;

/// Queries per block of a batch search.
const QUERY_BLOCK: usize = 64;
/// Stored rows per block (one block of scores is `QUERY_BLOCK × ROW_BLOCK` floats = 512 KiB).
const ROW_BLOCK: usize = 2048;

/// How an [`ExactIndex`] holds its values.
///
/// An f16 index behaves exactly as an f32 index holding the same rows rounded to f16 (round to nearest
/// even, after the cosine normalisation): every score is [`dot`] of the query with the row widened back
/// to f32, on every path. It halves the index's memory; whether rankings move is a question of near-ties
/// that each caller answers by measuring (HippoRAG 2's facts: `docs/perf.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Four bytes a value (the default).
    #[default]
    F32,
    /// Two bytes a value: IEEE half precision, 11 significant bits.
    F16,
}

/// The stored values, row-major.
#[derive(Debug, Clone)]
enum Values {
    F32(Vec<f32>),
    F16(Vec<f16>),
    /// f16 values in a file ([`ExactIndex::rows_on_disk`]).
    F16File(RowFile),
    /// f32 values in a file ([`ExactIndex::rows_on_disk`]).
    F32File(RowFile<f32>),
}

impl PartialEq for Values {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Values::F32(a), Values::F32(b)) => a == b,
            (Values::F16(a), Values::F16(b)) => a == b,
            (Values::F16File(a), Values::F16(b)) | (Values::F16(b), Values::F16File(a)) => {
                a.same_values(b)
            }
            (Values::F16File(a), Values::F16File(b)) => a.same_as(b),
            (Values::F32File(a), Values::F32(b)) | (Values::F32(b), Values::F32File(a)) => {
                a.same_values(b)
            }
            (Values::F32File(a), Values::F32File(b)) => a.same_as(b),
            _ => false,
        }
    }
}

/// An I/O error reading or writing a file of rows.
fn rows_io<T: RowValue>(rows: &RowFile<T>, source: std::io::Error) -> crate::StoreError {
    crate::StoreError::Io {
        path: rows.origin().to_path_buf(),
        source,
    }
}

impl Values {
    fn empty(precision: Precision) -> Self {
        match precision {
            Precision::F32 => Values::F32(Vec::new()),
            Precision::F16 => Values::F16(Vec::new()),
        }
    }

    /// Values already normalised, taken (f32) or rounded (f16).
    fn from_f32(precision: Precision, data: Vec<f32>) -> Self {
        match precision {
            Precision::F32 => Values::F32(data),
            Precision::F16 => Values::F16(to_f16(&data)),
        }
    }

    fn precision(&self) -> Precision {
        match self {
            Values::F32(_) | Values::F32File(_) => Precision::F32,
            Values::F16(_) | Values::F16File(_) => Precision::F16,
        }
    }

    /// Number of values (rows × dimension).
    fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F16(v) => v.len(),
            Values::F16File(v) => v.len(),
            Values::F32File(v) => v.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values `start..end` as f32: borrowed, or widened from f16 (read from the file first).
    fn range(&self, start: usize, end: usize) -> Result<Cow<'_, [f32]>> {
        Ok(match self {
            Values::F32(v) => Cow::Borrowed(&v[start..end]),
            Values::F16(v) => {
                let mut out = vec![0.0f32; end - start];
                v[start..end].convert_to_f32_slice(&mut out);
                Cow::Owned(out)
            }
            Values::F16File(v) => {
                let mut out = vec![0.0f32; end - start];
                v.read_f32(start, &mut out).map_err(|e| rows_io(v, e))?;
                Cow::Owned(out)
            }
            Values::F32File(v) => {
                let mut out = vec![0.0f32; end - start];
                v.read(start, &mut out).map_err(|e| rows_io(v, e))?;
                Cow::Owned(out)
            }
        })
    }

    /// Values `start..end` as f32, widened into `scratch` when they are f16.
    fn range_in<'a>(
        &'a self,
        start: usize,
        end: usize,
        scratch: &'a mut Vec<f32>,
    ) -> Result<&'a [f32]> {
        Ok(match self {
            Values::F32(v) => &v[start..end],
            Values::F16(v) => {
                scratch.resize(end - start, 0.0);
                v[start..end].convert_to_f32_slice(scratch);
                scratch
            }
            Values::F16File(v) => {
                scratch.resize(end - start, 0.0);
                v.read_f32(start, scratch).map_err(|e| rows_io(v, e))?;
                scratch
            }
            Values::F32File(v) => {
                scratch.resize(end - start, 0.0);
                v.read(start, scratch).map_err(|e| rows_io(v, e))?;
                scratch
            }
        })
    }

    /// Appends values already normalised.
    fn extend(&mut self, data: &[f32]) -> Result<()> {
        match self {
            Values::F32(v) => v.extend_from_slice(data),
            Values::F16(v) => v.extend(data.iter().map(|&x| f16::from_f32(x))),
            Values::F16File(v) => v.append(&to_f16(data))?,
            Values::F32File(v) => v.append(data)?,
        }
        Ok(())
    }

    /// The rows `rows` (of `dim` values), in that order, copied unchanged.
    fn select(&self, rows: &[usize], dim: usize) -> Result<Self> {
        fn pick<T: Copy>(v: &[T], rows: &[usize], dim: usize) -> Vec<T> {
            let mut out = Vec::with_capacity(rows.len() * dim);
            for &r in rows {
                out.extend_from_slice(&v[r * dim..(r + 1) * dim]);
            }
            out
        }
        Ok(match self {
            Values::F32(v) => Values::F32(pick(v, rows, dim)),
            Values::F16(v) => Values::F16(pick(v, rows, dim)),
            Values::F16File(v) => Values::F16File(v.select(rows, dim)?),
            Values::F32File(v) => Values::F32File(v.select(rows, dim)?),
        })
    }

    fn retain(&mut self, dim: usize, mut keep: impl FnMut(usize) -> bool) -> Result<()> {
        fn keep_rows<T: Copy>(v: &mut Vec<T>, dim: usize, keep: &mut impl FnMut(usize) -> bool) {
            let mut out = Vec::with_capacity(v.len());
            for (row, values) in v.chunks_exact(dim).enumerate() {
                if keep(row) {
                    out.extend_from_slice(values);
                }
            }
            *v = out;
        }
        match self {
            Values::F32(v) => keep_rows(v, dim, &mut keep),
            Values::F16(v) => keep_rows(v, dim, &mut keep),
            Values::F16File(v) => *v = v.retain(dim, keep)?,
            Values::F32File(v) => *v = v.retain(dim, keep)?,
        }
        Ok(())
    }
}

/// An error naming the row when a value of `data` is too large for f16 (it would round to infinity).
fn fits_f16(data: &[f32], dim: usize) -> Result<()> {
    let max = f16::MAX.to_f32();
    match data.iter().position(|v| v.abs() > max) {
        Some(i) => Err(invalid(format!(
            "vectors: row {} holds {}, beyond f16's range (±{max}); use an f32 index",
            i / dim.max(1),
            data[i]
        ))),
        None => Ok(()),
    }
}

/// Appends `vectors` (rows of `dim` values) to `file` in blocks of 4,096 rows, each normalised when
/// `normalise` and stored as the file's values, made visible together (an error adds none).
fn append_rows<T: RowValue>(
    file: &mut RowFile<T>,
    vectors: &[f32],
    dim: usize,
    normalise: bool,
) -> Result<()> {
    let mut app = file.begin_append()?;
    let mut block = Vec::new();
    for part in vectors.chunks(dim * 4096) {
        block.clear();
        block.extend_from_slice(part);
        if normalise {
            normalise_rows(&mut block, dim);
        }
        app.push(&T::narrow(&block))?;
    }
    app.finish();
    Ok(())
}

/// `data` rounded to f16 (to nearest, ties to even).
fn to_f16(data: &[f32]) -> Vec<f16> {
    let mut out = vec![f16::ZERO; data.len()];
    out.convert_from_f32_slice(data);
    out
}

/// Exact search: every query is scored against every row. Batches use a blocked matrix product
/// (ndarray's sgemm) over query and row blocks, in parallel over query blocks. Values are held as f32 or,
/// with [`Precision::F16`], as f16 widened block by block when scored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactIndex {
    dim: usize,
    metric: Metric,
    values: Values,
}

/// How an f32 index is saved, alone or inside an [`EmbeddingStore`](super::EmbeddingStore) (the layout of
/// every file written before f16 indexes).
#[derive(Deserialize)]
pub(super) struct F32Layout {
    dim: usize,
    metric: Metric,
    #[serde(with = "le_bytes")]
    data: Vec<f32>,
}

/// How an f16 index is saved: the values as little-endian half-precision bit patterns.
#[derive(Deserialize)]
pub(super) struct F16Layout {
    dim: usize,
    metric: Metric,
    #[serde(with = "le_bytes")]
    data: Vec<f16>,
}

/// [`F32Layout`] borrowed (or read from the file of an index whose rows are on disk), for writing.
#[derive(Serialize)]
pub(super) struct F32Ref<'a> {
    dim: usize,
    metric: Metric,
    #[serde(serialize_with = "le_bytes::serialize_cow")]
    data: Cow<'a, [f32]>,
}

/// [`F16Layout`] borrowed (or read from the file of an index whose rows are on disk), for writing.
#[derive(Serialize)]
pub(super) struct F16Ref<'a> {
    dim: usize,
    metric: Metric,
    #[serde(serialize_with = "le_bytes::serialize_cow")]
    data: Cow<'a, [f16]>,
}

/// An index's saved form, borrowed.
pub(super) enum LayoutRef<'a> {
    F32(F32Ref<'a>),
    F16(F16Ref<'a>),
}

impl ExactIndex {
    /// The saved form of the index, borrowing its values (reading them when they are in a file).
    pub(super) fn layout(&self) -> Result<LayoutRef<'_>> {
        let (dim, metric) = (self.dim, self.metric);
        Ok(match &self.values {
            Values::F32(data) => LayoutRef::F32(F32Ref {
                dim,
                metric,
                data: Cow::Borrowed(data),
            }),
            Values::F32File(rows) => LayoutRef::F32(F32Ref {
                dim,
                metric,
                data: Cow::Owned(rows.to_vec()?),
            }),
            Values::F16(data) => LayoutRef::F16(F16Ref {
                dim,
                metric,
                data: Cow::Borrowed(data),
            }),
            Values::F16File(rows) => LayoutRef::F16(F16Ref {
                dim,
                metric,
                data: Cow::Owned(rows.to_vec()?),
            }),
        })
    }

    /// The file holding the rows, when they are on disk.
    pub(super) fn row_file(&self) -> Option<&RowFile> {
        match &self.values {
            Values::F16File(rows) => Some(rows),
            _ => None,
        }
    }

    /// An f16 index over rows in a file (not checked: see [`check_layout`](Self::check_layout)).
    pub(super) fn from_row_file(dim: usize, metric: Metric, rows: RowFile) -> Self {
        Self {
            dim,
            metric,
            values: Values::F16File(rows),
        }
    }

    /// Moves the index's rows (f16 or f32) into an unnamed scratch file in `dir` (created if missing),
    /// read back per query as needed instead of held in memory; an index already on disk keeps its file
    /// and makes later copies in `dir`. Scores and rankings are unchanged: the file holds the same values.
    /// A full scan ([`scores`](Self::scores)) then reads every row from the file; a
    /// [`ScreenedIndex`](super::ScreenedIndex) finds the top rows reading a few.
    pub fn rows_on_disk(&mut self, dir: &Path) -> Result<()> {
        self.values = match &self.values {
            Values::F32(v) => Values::F32File(RowFile::with_values(dir, v)?),
            Values::F16(v) => Values::F16File(RowFile::with_values(dir, v)?),
            Values::F16File(rows) => Values::F16File(rows.with_dir(dir)),
            Values::F32File(rows) => Values::F32File(rows.with_dir(dir)),
        };
        Ok(())
    }

    /// Reads an index's rows back into memory (nothing to do when they are there).
    pub fn rows_in_memory(&mut self) -> Result<()> {
        match &self.values {
            Values::F16File(rows) => self.values = Values::F16(rows.to_vec()?),
            Values::F32File(rows) => self.values = Values::F32(rows.to_vec()?),
            Values::F32(_) | Values::F16(_) => {}
        }
        Ok(())
    }

    /// Whether the rows are in a file ([`rows_on_disk`](Self::rows_on_disk)).
    pub fn is_on_disk(&self) -> bool {
        matches!(self.values, Values::F16File(_) | Values::F32File(_))
    }

    /// Starts appending `rows` f16 rows (normalised for cosine, finite) written in any order with
    /// [`F16Rows::put`] and added by [`F16Rows::finish`]: an append of many rows that never holds them
    /// all in memory when the index is on disk. Dropped unfinished, the index is unchanged.
    pub(crate) fn append_f16(&mut self, rows: usize) -> Result<F16Rows<'_>> {
        let dim = self.dim;
        let first = self.len();
        let target = match &mut self.values {
            Values::F32(_) | Values::F32File(_) => {
                return Err(invalid(
                    "f16 rows given to an index that holds f32 values".to_owned(),
                ))
            }
            Values::F16(v) => {
                v.reserve_exact(rows * dim);
                v.resize(v.len() + rows * dim, f16::ZERO);
                AppendTarget::Memory(v)
            }
            Values::F16File(file) => AppendTarget::File(file.begin_append()?),
        };
        Ok(F16Rows {
            dim,
            first,
            rows,
            target: Some(target),
        })
    }

    /// The index a saved f32 layout describes (not checked: see [`check_layout`](Self::check_layout)).
    pub(super) fn from_f32_layout(l: F32Layout) -> Self {
        Self {
            dim: l.dim,
            metric: l.metric,
            values: Values::F32(l.data),
        }
    }

    /// The index a saved f16 layout describes (not checked: see [`check_layout`](Self::check_layout)).
    pub(super) fn from_f16_layout(l: F16Layout) -> Self {
        Self {
            dim: l.dim,
            metric: l.metric,
            values: Values::F16(l.data),
        }
    }

    /// Why a read-back index cannot be used, if it cannot: no dimension, or values that do not form rows.
    pub(super) fn check_layout(&self) -> Option<String> {
        (self.dim == 0 || !self.values.len().is_multiple_of(self.dim)).then(|| {
            format!(
                "{} values do not form rows of dimension {}",
                self.values.len(),
                self.dim
            )
        })
    }
}

/// Serialised with serde (inside another saved structure), an index is written in the f32 layout, the
/// layout of every file saved before f16 indexes: an f16 index is widened (exactly) and reads back as an
/// f32 index holding the same values. [`VectorIndex::save`] and an
/// [`EmbeddingStore`](super::EmbeddingStore) keep f16 values as f16.
impl Serialize for ExactIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error;
        match self.layout().map_err(S::Error::custom)? {
            LayoutRef::F32(l) => l.serialize(s),
            LayoutRef::F16(l) => {
                let data = self.values().map_err(S::Error::custom)?;
                F32Ref {
                    dim: l.dim,
                    metric: l.metric,
                    data,
                }
                .serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ExactIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let out = Self::from_f32_layout(F32Layout::deserialize(d)?);
        match out.check_layout() {
            Some(reason) => Err(serde::de::Error::custom(reason)),
            None => Ok(out),
        }
    }
}

/// A value stored as its little-endian bytes (f32 and f16).
trait LeValue: Copy {
    /// Bytes a value.
    const SIZE: usize;
    /// The type's name, for errors.
    const NAME: &'static str;
    fn put(self, out: &mut Vec<u8>);
    /// `b` holds exactly [`SIZE`](Self::SIZE) bytes.
    fn get(b: &[u8]) -> Self;
}

impl LeValue for f32 {
    const SIZE: usize = 4;
    const NAME: &'static str = "f32";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl LeValue for f16 {
    const SIZE: usize = 2;
    const NAME: &'static str = "f16";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f16::from_le_bytes([b[0], b[1]])
    }
}

/// A slice of f32 or f16 values as one little-endian byte string: read back with one copy instead of
/// one call per element.
mod le_bytes {
    use std::marker::PhantomData;

    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    use super::LeValue;

    pub(super) fn serialize<T: LeValue, S: Serializer>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::with_capacity(v.len() * T::SIZE);
        for &x in v {
            x.put(&mut bytes);
        }
        s.serialize_bytes(&bytes)
    }

    /// [`serialize`] of a `Cow` field (serde's `serialize_with` passes the field's own type).
    #[allow(clippy::ptr_arg)]
    pub(super) fn serialize_cow<T: LeValue, S: Serializer>(
        v: &std::borrow::Cow<'_, [T]>,
        s: S,
    ) -> Result<S::Ok, S::Error>
    where
        [T]: ToOwned,
    {
        serialize(v, s)
    }

    struct Values<T>(PhantomData<T>);

    impl<T: LeValue> Visitor<'_> for Values<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a byte string of little-endian {} values", T::NAME)
        }

        fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Vec<T>, E> {
            if !b.len().is_multiple_of(T::SIZE) {
                return Err(E::custom(format!(
                    "{} bytes are not a whole number of {} values",
                    b.len(),
                    T::NAME
                )));
            }
            Ok(b.chunks_exact(T::SIZE).map(T::get).collect())
        }

        fn visit_byte_buf<E: Error>(self, b: Vec<u8>) -> Result<Vec<T>, E> {
            self.visit_bytes(&b)
        }
    }

    pub(super) fn deserialize<'de, T: LeValue, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        d.deserialize_bytes(Values(PhantomData))
    }
}

impl ExactIndex {
    /// [`VectorIndex::add`] of rows given by value: an empty index takes the buffer instead of copying
    /// it (a large first batch is then held once, not twice). Returns the first new row's index.
    pub fn add_owned(&mut self, mut vectors: Vec<f32>) -> Result<usize> {
        if !self.values.is_empty() || self.values.precision() == Precision::F16 || self.is_on_disk()
        {
            return self.add(&vectors);
        }
        check_rows(&vectors, self.dim, "vectors")?;
        if self.metric == Metric::Cosine {
            normalise_rows(&mut vectors, self.dim);
        }
        self.values = Values::F32(vectors);
        Ok(0)
    }

    /// Appends rows already normalised (for cosine) and rounded to f16 to an f16 index; returns the first
    /// new row's index. What [`add`](VectorIndex::add) of the same rows in f32 stores, without holding
    /// them in f32.
    pub fn add_normalised_f16(&mut self, rows: Vec<f16>) -> Result<usize> {
        let first = self.len();
        if !rows.len().is_multiple_of(self.dim) {
            return Err(invalid(format!(
                "vectors: {} values are not a whole number of rows of dimension {}",
                rows.len(),
                self.dim
            )));
        }
        if let Some(i) = rows.iter().position(|v| !v.is_finite()) {
            return Err(invalid(format!(
                "vectors: row {} holds a non-finite value",
                i / self.dim
            )));
        }
        match &mut self.values {
            Values::F16(v) if v.is_empty() => *v = rows,
            Values::F16(v) => v.extend_from_slice(&rows),
            Values::F16File(v) => v.append(&rows)?,
            Values::F32(_) | Values::F32File(_) => {
                return Err(invalid(
                    "f16 rows given to an index that holds f32 values".to_owned(),
                ))
            }
        }
        Ok(first)
    }

    /// An empty index of f32 values.
    pub fn new(dim: usize, metric: Metric) -> Result<Self> {
        Self::with_precision(dim, metric, Precision::F32)
    }

    /// An empty index holding its values at `precision`.
    pub fn with_precision(dim: usize, metric: Metric, precision: Precision) -> Result<Self> {
        if dim == 0 {
            return Err(invalid("vector dimension must be positive"));
        }
        Ok(Self {
            dim,
            metric,
            values: Values::empty(precision),
        })
    }

    /// How the values are held.
    pub fn precision(&self) -> Precision {
        self.values.precision()
    }

    /// Bytes the values hold in memory (none when they are on disk).
    pub fn value_bytes(&self) -> usize {
        match &self.values {
            Values::F32(v) => v.len() * 4,
            Values::F16(v) => v.len() * 2,
            Values::F16File(_) | Values::F32File(_) => 0,
        }
    }

    /// An index holding `vectors` (row-major).
    pub fn from_rows(dim: usize, metric: Metric, vectors: &[f32]) -> Result<Self> {
        let mut out = Self::new(dim, metric)?;
        out.add(vectors)?;
        Ok(out)
    }

    /// An index holding rows exactly as [`values`](Self::values) gave them (already normalised for
    /// cosine: nothing is recomputed, so a store read back from a database equals the one written).
    pub fn from_stored(dim: usize, metric: Metric, data: Vec<f32>) -> Result<Self> {
        let mut out = Self::new(dim, metric)?;
        check_rows(&data, dim, "vectors")?;
        out.values = Values::F32(data);
        Ok(out)
    }

    /// The stored matrix, row-major (rows normalised for cosine): borrowed when the values are f32, widened
    /// to f32 (a copy) when they are f16. Fails only when the rows are on disk and cannot be read.
    pub fn values(&self) -> Result<Cow<'_, [f32]>> {
        self.values.range(0, self.values.len())
    }

    /// The stored matrix when its values are f32 (`None` for an f16 index: see [`values`](Self::values)).
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.values {
            Values::F32(v) => Some(v),
            Values::F16(_) | Values::F16File(_) | Values::F32File(_) => None,
        }
    }

    /// The same rows held at `precision` (rounded to f16, or widened to f32: exact). Fails when a value
    /// is too large for f16 (beyond ±65,504: possible for inner-product rows only).
    pub fn to_precision(&self, precision: Precision) -> Result<Self> {
        if precision == self.precision() {
            return Ok(self.clone());
        }
        let values = self.values()?;
        if precision == Precision::F16 {
            fits_f16(&values, self.dim)?;
        }
        Ok(Self {
            dim: self.dim,
            metric: self.metric,
            values: Values::from_f32(precision, values.into_owned()),
        })
    }

    /// [`dot`] of `query` with row `row`, widening an f16 row into `scratch`.
    pub(crate) fn row_dot(&self, query: &[f32], row: usize, scratch: &mut Vec<f32>) -> Result<f32> {
        let d = self.dim;
        Ok(dot(
            query,
            self.values.range_in(row * d, (row + 1) * d, scratch)?,
        ))
    }

    /// Rows `start..end` as f32 (borrowed, or widened from f16).
    pub(crate) fn rows(&self, start: usize, end: usize) -> Result<Cow<'_, [f32]>> {
        self.values.range(start * self.dim, end * self.dim)
    }

    pub(crate) fn prepare_queries(&self, queries: &[f32]) -> Result<Vec<f32>> {
        check_rows(queries, self.dim, "queries")?;
        let mut q = queries.to_vec();
        if self.metric == Metric::Cosine {
            normalise_rows(&mut q, self.dim);
        }
        Ok(q)
    }

    /// The similarity of `query` to every stored row, in id order.
    pub fn scores(&self, query: &[f32]) -> Result<Vec<f32>> {
        if query.len() != self.dim {
            return Err(invalid(format!(
                "query has dimension {}, the index {}",
                query.len(),
                self.dim
            )));
        }
        let q = self.prepare_queries(query)?;
        let n = self.len();
        let mut out = vec![0.0f32; n];
        out.par_chunks_mut(ROW_BLOCK)
            .enumerate()
            .try_for_each(|(b, o)| {
                let start = b * ROW_BLOCK;
                let rows = self.rows(start, start + o.len())?;
                for (s, row) in o.iter_mut().zip(rows.chunks_exact(self.dim)) {
                    *s = dot(&q, row);
                }
                Ok::<_, crate::StoreError>(())
            })?;
        Ok(out)
    }

    /// For each row of `queries`: the `k` most similar stored rows whose score is at least `min_score`.
    pub fn search_batch_min_score(
        &self,
        queries: &[f32],
        k: usize,
        min_score: f32,
    ) -> Result<Vec<Vec<Hit>>> {
        let q = self.prepare_queries(queries)?;
        let dim = self.dim;
        let n = self.len();
        let nq = q.len() / dim;
        let mut out: Vec<Vec<Hit>> = vec![Vec::new(); nq];
        out.par_chunks_mut(QUERY_BLOCK)
            .zip(q.par_chunks(QUERY_BLOCK * dim))
            .try_for_each(|(res, qb)| {
                let m = qb.len() / dim;
                let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
                let mut scores = vec![0.0f32; m * ROW_BLOCK];
                for start in (0..n).step_by(ROW_BLOCK) {
                    let nb = ROW_BLOCK.min(n - start);
                    let rows = self.rows(start, start + nb)?;
                    let rows = &rows[..];
                    gemm_abt(qb, rows, dim, m, nb, &mut scores[..m * nb]);
                    for (qi, top) in tops.iter_mut().enumerate() {
                        let row = &scores[qi * nb..(qi + 1) * nb];
                        let query = &qb[qi * dim..(qi + 1) * dim];
                        for (j, &s) in row.iter().enumerate() {
                            // The blocked product may differ from `dot` in the last bits (its kernel is
                            // chosen at run time): screen with a margin, then score with `dot` so that
                            // every path (single, batch, HNSW re-scoring) gives the same scores.
                            let margin = SCREEN_MARGIN * s.abs().max(1.0);
                            if s + margin < min_score
                                || top.full_and_worst().is_some_and(|w| s + margin < w)
                            {
                                continue;
                            }
                            let id = start + j;
                            let exact = dot(query, &rows[j * dim..(j + 1) * dim]);
                            if exact >= min_score {
                                top.push(Hit { id, score: exact });
                            }
                        }
                    }
                }
                for (r, t) in res.iter_mut().zip(tops) {
                    *r = t.into_sorted();
                }
                Ok::<_, crate::StoreError>(())
            })?;
        Ok(out)
    }

    /// Every row against every row: for each row, the `k` most similar rows (itself included) whose score is
    /// at least `min_score`, best first (score desc, id asc) — the same lists as
    /// [`search_batch_min_score`](Self::search_batch_min_score) with every row as a query, in half the
    /// multiply-adds: each pair of row blocks is multiplied once and screened for both directions, then
    /// every candidate is scored with [`dot`] per direction, as the batch search scores it.
    pub fn self_join_min_score(&self, k: usize, min_score: f32) -> Result<Vec<Vec<Hit>>> {
        let dim = self.dim;
        let n = self.len();
        let data = self.values()?;
        let q = self.prepare_queries(&data)?;
        // An 8-bit screen where the CPU has AVX2 (32 byte products per instruction against 8 f32
        // multiply-adds), else the blocked f32 product; both keep every pair whose exact score can reach
        // `min_score`, and every kept pair is scored with `dot`.
        let cands = match JoinCodes::new(&q, &data, dim) {
            Some(codes) => codes.candidates(min_score),
            None => gemm_join_candidates(&q, n, dim, min_score, norm_excess(&data, dim)),
        };
        Ok(join_lists(&q, &data, dim, cands, k, min_score))
    }

    /// An index of the rows `rows` (indices into this one), in that order, values copied unchanged.
    pub fn select_rows(&self, rows: &[usize]) -> Result<Self> {
        let n = self.len();
        if let Some(&r) = rows.iter().find(|&&r| r >= n) {
            return Err(invalid(format!("row {r} of an index of {n} rows")));
        }
        Ok(Self {
            dim: self.dim,
            metric: self.metric,
            values: self.values.select(rows, self.dim)?,
        })
    }

    /// Keeps only the rows whose `keep(row)` is true, in their order; the stored values are copied
    /// unchanged (no re-normalisation), so the result equals an index built from the kept rows alone.
    /// Fails only when the rows are on disk and cannot be copied (the index is then unchanged).
    pub fn retain_rows(&mut self, keep: impl FnMut(usize) -> bool) -> Result<()> {
        self.values.retain(self.dim, keep)
    }

    /// Loads an index saved by [`VectorIndex::save`] (f32 or f16).
    pub fn load(path: &Path) -> Result<Self> {
        let frame = persist::read_frame(path)?;
        let out = if frame.kind() == KIND_F16 {
            frame.expect(&[KIND_F16], &[FORMAT_F16])?;
            Self::from_f16_layout(frame.decode()?)
        } else {
            frame.expect(&[KIND], &[FORMAT])?;
            Self::from_f32_layout(frame.decode()?)
        };
        if let Some(reason) = out.check_layout() {
            return Err(crate::StoreError::Corrupt {
                path: path.to_path_buf(),
                reason,
            });
        }
        Ok(out)
    }
}

/// Where an append of f16 rows goes.
enum AppendTarget<'a> {
    /// The index's vector, already grown by the new rows (zeros until written).
    Memory(&'a mut Vec<f16>),
    File(super::rows::Append<'a>),
}

/// An append of f16 rows under way ([`ExactIndex::append_f16`]).
pub(crate) struct F16Rows<'a> {
    dim: usize,
    /// The first new row.
    first: usize,
    /// How many rows are appended.
    rows: usize,
    /// `None` once finished.
    target: Option<AppendTarget<'a>>,
}

impl F16Rows<'_> {
    /// Writes row `i` of the appended rows (`dim` values, normalised for cosine).
    pub(crate) fn put(&mut self, i: usize, row: &[f16]) -> Result<()> {
        if row.len() != self.dim {
            return Err(invalid(format!(
                "row {i} of {} appended rows given {} values, not {}",
                self.rows,
                row.len(),
                self.dim
            )));
        }
        self.put_rows(i, row)
    }

    /// Writes rows `i..` of the appended rows from `rows` (a whole number of rows): one write when the
    /// index is on disk.
    pub(crate) fn put_rows(&mut self, i: usize, rows: &[f16]) -> Result<()> {
        let n = rows.len() / self.dim.max(1);
        if !rows.len().is_multiple_of(self.dim) || i + n > self.rows {
            return Err(invalid(format!(
                "rows {i}..{} of {} appended rows given {} values of dimension {}",
                i + n,
                self.rows,
                rows.len(),
                self.dim
            )));
        }
        if let Some(j) = rows.iter().position(|v| !v.is_finite()) {
            return Err(invalid(format!(
                "vectors: row {} holds a non-finite value",
                self.first + i + j / self.dim
            )));
        }
        let at = (self.first + i) * self.dim;
        match &mut self.target {
            Some(AppendTarget::Memory(v)) => {
                v[at..at + rows.len()].copy_from_slice(rows);
                Ok(())
            }
            Some(AppendTarget::File(f)) => f.put(at, rows),
            None => Err(invalid("an append written after it finished".to_owned())),
        }
    }

    /// Adds the rows (each must have been written); returns the first new row.
    pub(crate) fn finish(mut self) -> usize {
        if let Some(AppendTarget::File(f)) = self.target.take() {
            f.finish();
        }
        self.first
    }
}

impl Drop for F16Rows<'_> {
    fn drop(&mut self) {
        // Unfinished: the rows added to memory are taken off again (a file's are never made visible).
        if let Some(AppendTarget::Memory(v)) = &mut self.target {
            v.truncate(self.first * self.dim);
        }
    }
}

/// Each row's list from the candidate pairs `(row, other)` over the rows `data` (as queries: `q`): scored
/// with [`dot`], filtered, sorted, cut to `k`.
fn join_lists(
    q: &[f32],
    data: &[f32],
    dim: usize,
    mut cands: Vec<(u32, u32)>,
    k: usize,
    min_score: f32,
) -> Vec<Vec<Hit>> {
    let n = data.len() / dim;
    cands.par_sort_unstable();
    let mut starts = Vec::with_capacity(n + 1);
    let mut at = 0;
    for row in 0..=n {
        while at < cands.len() && (cands[at].0 as usize) < row {
            at += 1;
        }
        starts.push(at);
    }
    (0..n)
        .into_par_iter()
        .map(|u| {
            let query = &q[u * dim..(u + 1) * dim];
            let mut hits: Vec<Hit> = cands[starts[u]..starts[u + 1]]
                .iter()
                .filter_map(|&(_, v)| {
                    let v = v as usize;
                    let score = dot(query, &data[v * dim..(v + 1) * dim]);
                    (score >= min_score).then_some(Hit { id: v, score })
                })
                .collect();
            hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
            hits.truncate(k);
            hits
        })
        .collect()
}

/// How far the longest of the rows `data` is above unit length (0 when none is): a row rounded to f16
/// after the normalisation may be up to ~2⁻¹¹ longer than its normalised copy among the queries.
fn norm_excess(data: &[f32], dim: usize) -> f32 {
    data.par_chunks(dim)
        .map(|r| r.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>())
        .reduce(|| 0.0, f64::max)
        .sqrt()
        .max(1.0) as f32
        - 1.0
}

/// The candidate pairs of [`ExactIndex::self_join_min_score`] from blocked f32 products of the
/// normalised rows `q`: `(u, v)` and `(v, u)` for every `u ≤ v` whose product, less its rounding margin
/// and `excess` of its size (the stored rows' length above one: the exact score is `q_u · row_v`), reaches
/// `min_score`.
fn gemm_join_candidates(
    q: &[f32],
    n: usize,
    dim: usize,
    min_score: f32,
    excess: f32,
) -> Vec<(u32, u32)> {
    const B: usize = 512;
    upper_block_pairs(n.div_ceil(B))
        .par_iter()
        .map(|&(i, j)| {
            let (a0, a1) = (i * B, ((i + 1) * B).min(n));
            let (b0, b1) = (j * B, ((j + 1) * B).min(n));
            let (ma, mb) = (a1 - a0, b1 - b0);
            let mut scores = vec![0.0f32; ma * mb];
            gemm_abt(
                &q[a0 * dim..a1 * dim],
                &q[b0 * dim..b1 * dim],
                dim,
                ma,
                mb,
                &mut scores,
            );
            let mut out = Vec::new();
            for (r, row) in scores.chunks_exact(mb).enumerate() {
                let c_start = if i == j { r } else { 0 };
                for (c, &s) in row.iter().enumerate().skip(c_start) {
                    if s + SCREEN_MARGIN * s.abs().max(1.0) + excess * s.abs() < min_score {
                        continue;
                    }
                    push_both(&mut out, a0 + r, b0 + c);
                }
            }
            out
        })
        .flatten()
        .collect()
}

/// `c (m × n) = a (m × k) · bᵀ` where `b` is `n × k`, all row-major.
fn gemm_abt(a: &[f32], b: &[f32], k: usize, m: usize, n: usize, c: &mut [f32]) {
    if m == 0 || n == 0 {
        return;
    }
    use ndarray::{linalg::general_mat_mul, ArrayView2, ArrayViewMut2};
    match (
        ArrayView2::from_shape((m, k), a),
        ArrayView2::from_shape((n, k), b),
        ArrayViewMut2::from_shape((m, n), c),
    ) {
        (Ok(a), Ok(b), Ok(mut c)) => general_mat_mul(1.0, &a, &b.t(), 0.0, &mut c),
        // Shapes are computed by the caller from the same lengths; fall back to plain dot products.
        _ => {
            for (i, crow) in c.chunks_exact_mut(n).enumerate() {
                let arow = &a[i * k..(i + 1) * k];
                for (j, cv) in crow.iter_mut().enumerate() {
                    *cv = dot(arow, &b[j * k..(j + 1) * k]);
                }
            }
        }
    }
}

impl VectorIndex for ExactIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.values.len() / self.dim
    }

    fn metric(&self) -> Metric {
        self.metric
    }

    fn add(&mut self, vectors: &[f32]) -> Result<usize> {
        check_rows(vectors, self.dim, "vectors")?;
        let first = self.len();
        match (&mut self.values, self.metric) {
            (Values::F32(data), metric) => {
                let start = data.len();
                data.extend_from_slice(vectors);
                if metric == Metric::Cosine {
                    normalise_rows(&mut data[start..], self.dim);
                }
            }
            (Values::F16File(file), Metric::Cosine) => append_rows(file, vectors, self.dim, true)?,
            (Values::F32File(file), metric) => {
                append_rows(file, vectors, self.dim, metric == Metric::Cosine)?
            }
            (values, Metric::Cosine) => {
                // Normalised in f32, then rounded: in blocks, so that a large batch is not copied whole.
                let mut block = Vec::new();
                for part in vectors.chunks(self.dim * 4096) {
                    block.clear();
                    block.extend_from_slice(part);
                    normalise_rows(&mut block, self.dim);
                    values.extend(&block)?;
                }
            }
            (values, Metric::InnerProduct) => {
                fits_f16(vectors, self.dim)?;
                values.extend(vectors)?
            }
        }
        Ok(first)
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let scores = self.scores(query)?;
        let tops: Vec<TopK> = scores
            .par_chunks(ROW_BLOCK)
            .enumerate()
            .map(|(b, s)| {
                let mut t = TopK::new(k);
                for (j, &v) in s.iter().enumerate() {
                    if t.full_and_worst().is_some_and(|w| v < w) {
                        continue;
                    }
                    t.push(Hit {
                        id: b * ROW_BLOCK + j,
                        score: v,
                    });
                }
                t
            })
            .collect();
        let mut all = TopK::new(k);
        for t in tops {
            all.merge(t);
        }
        Ok(all.into_sorted())
    }

    fn search_batch(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        self.search_batch_min_score(queries, k, f32::NEG_INFINITY)
    }

    fn vector(&self, id: usize) -> Option<Cow<'_, [f32]>> {
        // A row on disk that cannot be read is no row.
        (id < self.len())
            .then(|| self.rows(id, id + 1).ok())
            .flatten()
    }

    fn save(&self, path: &Path) -> Result<()> {
        match self.layout()? {
            LayoutRef::F32(l) => persist::save(path, KIND, FORMAT, &l),
            LayoutRef::F16(l) => persist::save(path, KIND_F16, FORMAT_F16, &l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_and_inner_product() {
        let rows = [1.0, 0.0, 0.0, 2.0, 3.0, 3.0, 0.0, 0.0];
        let ip = ExactIndex::from_rows(2, Metric::InnerProduct, &rows).unwrap();
        let hits = ip.search(&[1.0, 1.0], 4).unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![2, 1, 0, 3]);
        assert_eq!(hits[0].score, 6.0);
        let cos = ExactIndex::from_rows(2, Metric::Cosine, &rows).unwrap();
        let hits = cos.search(&[1.0, 1.0], 2).unwrap();
        assert_eq!(hits[0].id, 2);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        let batch = cos.search_batch(&[1.0, 1.0, 0.0, 1.0], 2).unwrap();
        assert_eq!(batch[0], hits);
        assert_eq!(batch[1][0].id, 1);
        let min = cos.search_batch_min_score(&[1.0, 0.0], 10, 0.5).unwrap();
        assert_eq!(min[0].iter().map(|h| h.id).collect::<Vec<_>>(), vec![0, 2]);
        assert!(cos.search(&[1.0], 1).is_err());
        let mut e = ExactIndex::new(2, Metric::Cosine).unwrap();
        assert!(e.add(&[1.0, f32::NAN]).is_err());
        assert!(e.add(&[1.0, 2.0, 3.0]).is_err());
    }

    #[test]
    fn self_join_equals_the_batch_search_of_every_row() {
        // 1,300 rows (three blocks, a ragged last one) in clusters of near-duplicates, so that many pairs
        // sit above the threshold, some exactly tied, and the k cap bites; at a dimension the integer
        // screen pads (24) and one it does not (96). Both candidate paths (integer screen where the CPU
        // has AVX2, f32 products) give the batch search's lists.
        for dim in [24, 96] {
            let n = 1300;
            let mut seed = 11u64;
            let mut next = || crate::vector::test_lcg(&mut seed);
            let centres: Vec<f32> = (0..40 * dim).map(|_| next()).collect();
            let mut rows = Vec::with_capacity(n * dim);
            for r in 0..n {
                let c = (r * 7) % 40;
                for d in 0..dim {
                    rows.push(centres[c * dim + d] + 0.08 * next());
                }
            }
            let dup: Vec<f32> = rows[..dim].to_vec();
            rows[5 * dim..6 * dim].copy_from_slice(&dup);
            // f16 rows are not of unit length: the f32 path's screen must allow for it.
            for precision in [Precision::F32, Precision::F16] {
                let mut index = ExactIndex::with_precision(dim, Metric::Cosine, precision).unwrap();
                index.add(&rows).unwrap();
                let data = index.values().unwrap();
                let q = index.prepare_queries(&data).unwrap();
                for (k, min) in [(2047, 0.8), (7, 0.8), (50, 0.95), (3, -1.0)] {
                    let want = index.search_batch_min_score(&data, k, min).unwrap();
                    let got = index.self_join_min_score(k, min).unwrap();
                    assert_eq!(got, want, "{precision:?}, dim {dim}, k {k}, min {min}");
                    let cands = gemm_join_candidates(&q, n, dim, min, norm_excess(&data, dim));
                    let by_gemm = join_lists(&q, &data, dim, cands, k, min);
                    assert_eq!(
                        by_gemm, want,
                        "f32 path: {precision:?}, dim {dim}, k {k}, min {min}"
                    );
                }
            }
        }
    }

    /// Rows in clusters of near-duplicates (near-ties for the rounding to move), `n × dim`.
    fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut seed = seed;
        let mut next = || crate::vector::test_lcg(&mut seed);
        let centres: Vec<f32> = (0..20 * dim).map(|_| next()).collect();
        let mut rows = Vec::with_capacity(n * dim);
        for r in 0..n {
            for d in 0..dim {
                rows.push(centres[((r * 7) % 20) * dim + d] + 0.05 * next());
            }
        }
        rows
    }

    #[test]
    fn an_f16_index_scores_as_an_f32_index_of_its_rounded_rows() {
        let (n, dim) = (2600, 40);
        let rows = clustered(n, dim, 5);
        for metric in [Metric::Cosine, Metric::InnerProduct] {
            let mut half = ExactIndex::with_precision(dim, metric, Precision::F16).unwrap();
            // Two inserts, so that appending to f16 rows is covered.
            half.add(&rows[..1000 * dim]).unwrap();
            assert_eq!(half.add(&rows[1000 * dim..]).unwrap(), 1000);
            assert_eq!((half.len(), half.precision()), (n, Precision::F16));
            assert_eq!(half.value_bytes(), n * dim * 2);
            // The f32 index of the same rows, rounded after the normalisation.
            let full = ExactIndex::from_rows(dim, metric, &rows).unwrap();
            let rounded: Vec<f32> = full
                .values()
                .unwrap()
                .iter()
                .map(|&v| f16::from_f32(v).to_f32())
                .collect();
            assert_eq!(&half.values().unwrap()[..], &rounded[..]);
            assert_eq!(full.to_precision(Precision::F16).unwrap(), half);
            let twin = ExactIndex::from_stored(dim, metric, rounded.clone()).unwrap();
            assert_eq!(half.to_precision(Precision::F32).unwrap(), twin);
            let queries = &rows[17 * dim..23 * dim];
            for q in queries.chunks(dim) {
                assert_eq!(half.scores(q).unwrap(), twin.scores(q).unwrap());
                assert_eq!(half.search(q, 9).unwrap(), twin.search(q, 9).unwrap());
            }
            assert_eq!(
                half.search_batch_min_score(queries, 30, 0.2).unwrap(),
                twin.search_batch_min_score(queries, 30, 0.2).unwrap()
            );
            assert_eq!(half.vector(5).unwrap(), twin.vector(5).unwrap());
            assert!(half.vector(n).is_none());
            if metric == Metric::Cosine {
                assert_eq!(
                    half.self_join_min_score(50, 0.9).unwrap(),
                    twin.self_join_min_score(50, 0.9).unwrap()
                );
                let (sh, st) = (
                    super::super::ScreenedIndex::new(&half).unwrap(),
                    super::super::ScreenedIndex::new(&twin).unwrap(),
                );
                for q in queries.chunks(dim) {
                    assert_eq!(
                        sh.top_k_range(&half, q, 5).unwrap(),
                        st.top_k_range(&twin, q, 5).unwrap()
                    );
                }
            }
            let picked = [7, 3, 2599, 0];
            assert_eq!(
                half.select_rows(&picked)
                    .unwrap()
                    .to_precision(Precision::F32)
                    .unwrap(),
                twin.select_rows(&picked).unwrap()
            );
            let (mut a, mut b) = (half.clone(), twin.clone());
            a.retain_rows(|r| r % 3 == 1).unwrap();
            b.retain_rows(|r| r % 3 == 1).unwrap();
            assert_eq!(a.precision(), Precision::F16);
            assert_eq!(a.to_precision(Precision::F32).unwrap(), b);
        }
    }

    #[test]
    fn values_beyond_f16_s_range_are_refused_not_made_infinite() {
        let mut ip = ExactIndex::with_precision(2, Metric::InnerProduct, Precision::F16).unwrap();
        let err = ip.add(&[1.0, 2.0, 70_000.0, 0.0]).unwrap_err().to_string();
        assert!(err.contains("row 1") && err.contains("f16"), "{err}");
        assert!(ip.is_empty());
        ip.add(&[65_504.0, -3.5]).unwrap();
        let big = ExactIndex::from_rows(2, Metric::InnerProduct, &[1e6, 0.0]).unwrap();
        assert!(big.to_precision(Precision::F16).is_err());
        // Cosine rows are normalised first: any finite row fits.
        let mut cos = ExactIndex::with_precision(2, Metric::Cosine, Precision::F16).unwrap();
        cos.add(&[1e30, 1e30]).unwrap();
        assert!(cos.values().unwrap().iter().all(|v| v.is_finite()));
    }

    #[test]
    fn f16_rows_are_appended_as_add_would_store_them() {
        let dim = 24;
        let rows = clustered(300, dim, 9);
        let by_add = {
            let mut i = ExactIndex::with_precision(dim, Metric::Cosine, Precision::F16).unwrap();
            i.add(&rows).unwrap();
            i
        };
        let mut normalised = rows.clone();
        normalise_rows(&mut normalised, dim);
        let mut given = ExactIndex::with_precision(dim, Metric::Cosine, Precision::F16).unwrap();
        given
            .add_normalised_f16(to_f16(&normalised[..100 * dim]))
            .unwrap();
        assert_eq!(
            given
                .add_normalised_f16(to_f16(&normalised[100 * dim..]))
                .unwrap(),
            100
        );
        assert_eq!(given, by_add);
        // Wrong lengths, non-finite values and an f32 index are refused.
        assert!(given.add_normalised_f16(vec![f16::ONE; dim + 1]).is_err());
        assert!(given.add_normalised_f16(vec![f16::NAN; dim]).is_err());
        let mut f32_index = ExactIndex::new(dim, Metric::Cosine).unwrap();
        assert!(f32_index.add_normalised_f16(vec![f16::ONE; dim]).is_err());
        assert!(given.add(&[f32::INFINITY; 24]).is_err());
    }

    #[test]
    fn an_index_on_disk_adds_selects_and_cuts_rows_as_one_in_memory() {
        let dim = 24;
        let rows = clustered(9_000, dim, 5);
        let dir = std::env::temp_dir().join(format!("kgrag-exact-disk-{}", std::process::id()));
        // f16 rows (HippoRAG 2's facts) and f32 rows (every method's entity vectors).
        for precision in [Precision::F16, Precision::F32] {
            let mut mem = ExactIndex::with_precision(dim, Metric::Cosine, precision).unwrap();
            let mut disk = mem.clone();
            disk.rows_on_disk(&dir).unwrap();
            assert!(disk.is_on_disk() && !mem.is_on_disk());
            // More than one block of 4,096 rows per add, and an add after the first.
            for part in [&rows[..100 * dim], &rows[100 * dim..]] {
                assert_eq!(mem.add(part).unwrap(), disk.add(part).unwrap());
            }
            assert_eq!(disk, mem);
            assert_eq!(disk.values().unwrap(), mem.values().unwrap());
            let q = &rows[17 * dim..18 * dim];
            assert_eq!(disk.search(q, 7).unwrap(), mem.search(q, 7).unwrap());
            assert_eq!(
                disk.search_batch_min_score(&rows[..5 * dim], 4, 0.2)
                    .unwrap(),
                mem.search_batch_min_score(&rows[..5 * dim], 4, 0.2)
                    .unwrap()
            );
            assert_eq!(disk.vector(8_999), mem.vector(8_999));
            let pick = [8_000, 3, 4_100];
            assert_eq!(
                disk.select_rows(&pick).unwrap(),
                mem.select_rows(&pick).unwrap()
            );
            let (mut dcut, mut mcut) = (disk.clone(), mem.clone());
            dcut.retain_rows(|r| r % 4 == 1).unwrap();
            mcut.retain_rows(|r| r % 4 == 1).unwrap();
            assert_eq!(dcut, mcut);
            assert_eq!(disk, mem, "the copy's cut left the original as it was");
            let mut back = disk.clone();
            back.rows_in_memory().unwrap();
            assert!(!back.is_on_disk());
            assert_eq!(back, mem);
            assert_eq!(back.precision(), precision);
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn f16_and_f32_indexes_save_and_load_as_they_are() {
        let dir = std::env::temp_dir().join(format!("kgrag-exact-f16-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = clustered(50, 16, 3);
        for precision in [Precision::F32, Precision::F16] {
            let mut index = ExactIndex::with_precision(16, Metric::Cosine, precision).unwrap();
            index.add(&rows).unwrap();
            let path = dir.join(format!("{precision:?}.idx"));
            index.save(&path).unwrap();
            assert_eq!(ExactIndex::load(&path).unwrap(), index);
            let any = super::super::load_index(&path).unwrap();
            assert_eq!(any.len(), 50);
            // Serialised inside another structure, an index is written in the f32 layout: an f16 index
            // reads back widened, with the same values.
            let bytes = postcard::to_allocvec(&index).unwrap();
            let back: ExactIndex = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, index.to_precision(Precision::F32).unwrap());
        }
        // The f32 file layout is the one written before f16 indexes: dimension, metric, the values' bytes.
        let index = ExactIndex::from_rows(2, Metric::Cosine, &[3.0, 4.0]).unwrap();
        let mut want = vec![2u8, 0, 8];
        for v in [0.6f32, 0.8] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(postcard::to_allocvec(&index).unwrap(), want);
        std::fs::remove_dir_all(&dir).ok();
    }
}
