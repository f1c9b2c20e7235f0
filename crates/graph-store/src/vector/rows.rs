//! f16 or f32 rows held in a file instead of memory ([`ExactIndex::rows_on_disk`](super::ExactIndex::rows_on_disk)):
//! what lets HippoRAG 2's fact vectors, the largest part of its index, stay out of memory while their int8
//! screen ([`ScreenedIndex`](super::ScreenedIndex)) answers each query and only the rows it cannot decide
//! are read (a few hundred per query).
//!
//! A [`RowFile`] is either a scratch file (unnamed, in a folder the owner chooses, gone when the last
//! holder drops it) or a saved rows file opened read-only. Holders share the file: a clone costs nothing.
//! Rows are only ever appended past every holder's end, so what one holder reads is never overwritten by
//! another; an append by a holder that does not own the file's tail (or to a read-only file) first copies
//! its rows into a scratch file of its own.
//!
//! A saved rows file (f16 rows only: an f32 store saves its rows inline): `KGRAGRW\0`, a version (u32 LE), the number of values (u64 LE), the values (f16
//! LE), and the SHA-256 of everything before it.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use half::f16;
use half::slice::HalfFloatSliceExt;
use kgrag_types::fileio::{read_exact_at as read_at, write_all_at as write_at};
use sha2::{Digest, Sha256};

use crate::{persist, Result, StoreError};

const MAGIC: &[u8; 8] = b"KGRAGRW\0";
const VERSION: u32 = 1;
/// Bytes before the first value of a saved rows file.
const HEADER: u64 = 8 + 4 + 8;
const DIGEST: u64 = 32;
/// Values moved per read or write when rows are copied (2 MiB).
const BLOCK_VALUES: usize = 1 << 20;

/// A value a [`RowFile`] holds: f16 or f32, little-endian in the file.
pub(crate) trait RowValue: Copy + PartialEq + Send + Sync + 'static {
    /// Bytes a value.
    const BYTES: usize;
    /// Zero, to fill buffers with.
    const ZERO: Self;
    /// Appends the value's little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
    /// The value of `BYTES` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// `values` as f32, into `out` (as long).
    fn widen(values: &[Self], out: &mut [f32]);
    /// f32 `values` as this type: borrowed (f32) or rounded to nearest, ties to even (f16).
    fn narrow(values: &[f32]) -> Cow<'_, [Self]>;
}

impl RowValue for f16 {
    const BYTES: usize = 2;
    const ZERO: Self = f16::ZERO;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(b: &[u8]) -> Self {
        f16::from_le_bytes([b[0], b[1]])
    }
    fn widen(values: &[Self], out: &mut [f32]) {
        values.convert_to_f32_slice(out);
    }
    fn narrow(values: &[f32]) -> Cow<'_, [Self]> {
        let mut out = vec![f16::ZERO; values.len()];
        out.convert_from_f32_slice(values);
        Cow::Owned(out)
    }
}

impl RowValue for f32 {
    const BYTES: usize = 4;
    const ZERO: Self = 0.0;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(b: &[u8]) -> Self {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    fn widen(values: &[Self], out: &mut [f32]) {
        out.copy_from_slice(values);
    }
    fn narrow(values: &[f32]) -> Cow<'_, [Self]> {
        Cow::Borrowed(values)
    }
}

/// f16 (or f32) values in a file (see the module's documentation).
pub(crate) struct RowFile<T = f16> {
    shared: Arc<Shared>,
    /// The values this holder sees: the file's first `values` values.
    values: usize,
    kind: PhantomData<T>,
}

impl<T> Clone for RowFile<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            values: self.values,
            kind: PhantomData,
        }
    }
}

struct Shared {
    file: File,
    /// What errors name: the saved file, or the folder of a scratch file (which has no name).
    origin: PathBuf,
    /// Bytes before the first value.
    start: u64,
    /// Where this holder's scratch files go.
    dir: PathBuf,
    /// The number of values written to the file, when a holder whose end it is may append in place;
    /// `None` for a read-only file or while an append is under way.
    tail: Mutex<Option<usize>>,
}

impl<T> std::fmt::Debug for RowFile<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RowFile({} values in {})",
            self.values,
            self.shared.origin.display()
        )
    }
}

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The little-endian bytes of `values`.
fn to_bytes<T: RowValue>(values: &[T], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(values.len() * T::BYTES);
    for v in values {
        v.put_le(out);
    }
}

impl<T: RowValue> RowFile<T> {
    /// An empty scratch file in `dir` (created if missing).
    pub(crate) fn scratch(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let file = tempfile::tempfile_in(dir).map_err(|e| io_err(dir, e))?;
        Ok(Self {
            shared: Arc::new(Shared {
                file,
                origin: dir.to_path_buf(),
                start: 0,
                dir: dir.to_path_buf(),
                tail: Mutex::new(Some(0)),
            }),
            values: 0,
            kind: PhantomData,
        })
    }

    /// A scratch file in `dir` holding `values`.
    pub(crate) fn with_values(dir: &Path, values: &[T]) -> Result<Self> {
        let mut out = Self::scratch(dir)?;
        out.append(values)?;
        Ok(out)
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.values
    }

    /// What errors about this file name: the saved file, or the folder of a scratch file.
    pub(crate) fn origin(&self) -> &Path {
        &self.shared.origin
    }

    /// The same values, with later scratch files in `dir`.
    pub(crate) fn with_dir(&self, dir: &Path) -> Self {
        if dir == self.shared.dir {
            return self.clone();
        }
        // A new `Shared` over the same open file: not an owner of its tail, so an append copies first.
        let file = self.shared.file.try_clone();
        match file {
            Ok(file) => Self {
                shared: Arc::new(Shared {
                    file,
                    origin: self.shared.origin.clone(),
                    start: self.shared.start,
                    dir: dir.to_path_buf(),
                    tail: Mutex::new(None),
                }),
                values: self.values,
                kind: PhantomData,
            },
            // Keep the old folder rather than fail: only where copies go differs.
            Err(_) => self.clone(),
        }
    }

    /// Values `start..start + out.len()` into `out`.
    pub(crate) fn read(&self, start: usize, out: &mut [T]) -> std::io::Result<()> {
        let end = start + out.len();
        if end > self.values {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("values {start}..{end} of a file of {}", self.values),
            ));
        }
        let mut bytes = vec![0u8; out.len() * T::BYTES];
        read_at(
            &self.shared.file,
            &mut bytes,
            self.shared.start + (start * T::BYTES) as u64,
        )?;
        for (v, b) in out.iter_mut().zip(bytes.chunks_exact(T::BYTES)) {
            *v = T::from_le(b);
        }
        Ok(())
    }

    /// Values `start..start + out.len()` widened into `out`.
    pub(crate) fn read_f32(&self, start: usize, out: &mut [f32]) -> std::io::Result<()> {
        let mut values = vec![T::ZERO; out.len()];
        self.read(start, &mut values)?;
        T::widen(&values, out);
        Ok(())
    }

    /// Makes this holder the owner of a file whose end is its end (copying its values into a scratch
    /// file when it is not), and claims the tail until [`release`](Self::release).
    fn claim_tail(&mut self) -> Result<()> {
        {
            let mut tail = self
                .shared
                .tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if *tail == Some(self.values) {
                *tail = None;
                return Ok(());
            }
        }
        let mut copy = Self::scratch(&self.shared.dir)?;
        let mut app = copy.begin_append()?;
        self.for_each_block(BLOCK_VALUES, |_, block| app.push(block))?;
        app.finish();
        *self = copy;
        // Nobody else holds the copy: its tail is this holder's.
        self.claim_tail()
    }

    /// Gives the tail back after an append (or an abandoned one).
    fn release(&self) {
        *self
            .shared
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(self.values);
    }

    /// Appends `values` (written a block at a time: no byte copy of them all is made).
    pub(crate) fn append(&mut self, values: &[T]) -> Result<()> {
        let mut app = self.begin_append()?;
        for part in values.chunks(BLOCK_VALUES) {
            app.push(part)?;
        }
        app.finish();
        Ok(())
    }

    /// Starts an append: values are placed at any position past the current end with
    /// [`Append::put`] (or after the last written with [`Append::push`]), then made visible with
    /// [`Append::finish`]; dropped unfinished, nothing changes.
    pub(crate) fn begin_append(&mut self) -> Result<Append<'_, T>> {
        self.claim_tail()?;
        let end = self.values;
        Ok(Append { rows: self, end })
    }

    /// Every value, in order, `step` values at a time (a whole number of rows where rows matter).
    fn for_each_block(
        &self,
        step: usize,
        mut f: impl FnMut(usize, &[T]) -> Result<()>,
    ) -> Result<()> {
        let step = step.max(1);
        let mut block = vec![T::ZERO; step.min(self.values)];
        let mut at = 0;
        while at < self.values {
            let n = step.min(self.values - at);
            self.read(at, &mut block[..n])
                .map_err(|e| io_err(&self.shared.origin, e))?;
            f(at, &block[..n])?;
            at += n;
        }
        Ok(())
    }

    /// A scratch file (in the same folder) of the rows of `dim` values for which `keep` is true, in order.
    pub(crate) fn retain(&self, dim: usize, mut keep: impl FnMut(usize) -> bool) -> Result<Self> {
        let mut out = Self::scratch(&self.shared.dir)?;
        let mut kept = Vec::new();
        let dim = dim.max(1);
        // Blocks of whole rows: a block of 2^20 values is not one at 384 dimensions.
        let step = (BLOCK_VALUES / dim).max(1) * dim;
        let mut app = out.begin_append()?;
        self.for_each_block(step, |at, block| {
            let first_row = at / dim;
            kept.clear();
            for (i, row) in block.chunks_exact(dim).enumerate() {
                if keep(first_row + i) {
                    kept.extend_from_slice(row);
                }
            }
            app.push(&kept)
        })?;
        app.finish();
        Ok(out)
    }

    /// A scratch file (in the same folder) of the rows `rows` of `dim` values, in that order.
    pub(crate) fn select(&self, rows: &[usize], dim: usize) -> Result<Self> {
        let mut out = Self::scratch(&self.shared.dir)?;
        let per = (BLOCK_VALUES / dim.max(1)).max(1);
        let mut picked = Vec::with_capacity(per.min(rows.len()) * dim);
        let mut row = vec![T::ZERO; dim];
        let mut app = out.begin_append()?;
        for part in rows.chunks(per) {
            picked.clear();
            for &r in part {
                self.read(r * dim, &mut row)
                    .map_err(|e| io_err(&self.shared.origin, e))?;
                picked.extend_from_slice(&row);
            }
            app.push(&picked)?;
        }
        app.finish();
        Ok(out)
    }

    /// Every value, in memory.
    pub(crate) fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::ZERO; self.values];
        self.read(0, &mut out)
            .map_err(|e| io_err(&self.shared.origin, e))?;
        Ok(out)
    }

    /// Whether both hold the same values (read a block at a time).
    pub(crate) fn same_values(&self, other: &[T]) -> bool {
        if other.len() != self.values {
            return false;
        }
        self.for_each_block(BLOCK_VALUES, |at, block| {
            if block == &other[at..at + block.len()] {
                Ok(())
            } else {
                Err(crate::error::invalid("differ"))
            }
        })
        .is_ok()
    }

    /// Whether both hold the same values.
    pub(crate) fn same_as(&self, other: &RowFile<T>) -> bool {
        if other.values != self.values {
            return false;
        }
        let mut theirs = vec![T::ZERO; BLOCK_VALUES.min(self.values)];
        self.for_each_block(BLOCK_VALUES, |at, block| {
            let theirs = &mut theirs[..block.len()];
            other
                .read(at, theirs)
                .map_err(|e| io_err(&other.shared.origin, e))?;
            if block == &theirs[..] {
                Ok(())
            } else {
                Err(crate::error::invalid("differ"))
            }
        })
        .is_ok()
    }
}

impl RowFile<f16> {
    /// Writes the values to `path` as a saved rows file, atomically; returns the file's digest.
    pub(crate) fn save(&self, path: &Path) -> Result<[u8; 32]> {
        let mut digest = [0u8; 32];
        persist::write_atomic_with(path, |file| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let mut hasher = Sha256::new();
            let mut header = Vec::with_capacity(HEADER as usize);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&VERSION.to_le_bytes());
            header.extend_from_slice(&(self.values as u64).to_le_bytes());
            hasher.update(&header);
            out.write_all(&header).map_err(|e| io_err(path, e))?;
            let mut bytes = Vec::new();
            self.for_each_block(BLOCK_VALUES, |_, block| {
                to_bytes(block, &mut bytes);
                hasher.update(&bytes);
                out.write_all(&bytes).map_err(|e| io_err(path, e))
            })?;
            digest = hasher.finalize().into();
            out.write_all(&digest).map_err(|e| io_err(path, e))?;
            out.flush().map_err(|e| io_err(path, e))
        })?;
        Ok(digest)
    }

    /// Opens a rows file written by [`save`](Self::save), read-only, checking its layout, its digest,
    /// and that it is the file whose digest is `expected`; later scratch files go to `dir`.
    pub(crate) fn open_saved(path: &Path, expected: &[u8; 32], dir: &Path) -> Result<Self> {
        let corrupt = |reason: String| StoreError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        let size = file.metadata().map_err(|e| io_err(path, e))?.len();
        if size < HEADER + DIGEST {
            return Err(corrupt(format!("{size} bytes: too short for a rows file")));
        }
        let mut header = [0u8; HEADER as usize];
        read_at(&file, &mut header, 0).map_err(|e| io_err(path, e))?;
        if &header[..8] != MAGIC {
            return Err(corrupt("not a kgrag rows file".to_owned()));
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if version != VERSION {
            return Err(corrupt(format!(
                "rows file version {version}; this build reads {VERSION}"
            )));
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&header[12..20]);
        let values = u64::from_le_bytes(n);
        if values
            .checked_mul(2)
            .and_then(|b| b.checked_add(HEADER + DIGEST))
            != Some(size)
        {
            return Err(corrupt(format!(
                "{size} bytes for {values} values (truncated or grown)"
            )));
        }
        let values = usize::try_from(values)
            .map_err(|_| corrupt(format!("{values} values do not fit this machine")))?;
        // The digest over the whole file, streamed.
        let mut hasher = Sha256::new();
        // From the start: where the header's read left the cursor differs between platforms.
        (&file)
            .seek(SeekFrom::Start(0))
            .map_err(|e| io_err(path, e))?;
        let mut reader = BufReader::with_capacity(1 << 20, &file);
        let mut left = size - DIGEST;
        let mut buf = vec![0u8; 1 << 20];
        while left > 0 {
            let n = (buf.len() as u64).min(left) as usize;
            reader
                .read_exact(&mut buf[..n])
                .map_err(|e| io_err(path, e))?;
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        let mut stored = [0u8; 32];
        reader
            .read_exact(&mut stored)
            .map_err(|e| io_err(path, e))?;
        let actual: [u8; 32] = hasher.finalize().into();
        if actual != stored {
            return Err(corrupt("checksum mismatch".to_owned()));
        }
        if &actual != expected {
            return Err(corrupt(
                "not the rows file its store was saved with (another generation's?)".to_owned(),
            ));
        }
        drop(reader);
        Ok(Self {
            shared: Arc::new(Shared {
                file,
                origin: path.to_path_buf(),
                start: HEADER,
                dir: dir.to_path_buf(),
                tail: Mutex::new(None),
            }),
            values,
            kind: PhantomData,
        })
    }
}

/// An append under way ([`RowFile::begin_append`]).
pub(crate) struct Append<'a, T: RowValue = f16> {
    rows: &'a mut RowFile<T>,
    /// Past the last value written.
    end: usize,
}

impl<T: RowValue> Append<'_, T> {
    /// Writes `values` at value position `at` (at or past [`first`](Self::first)).
    pub(crate) fn put(&mut self, at: usize, values: &[T]) -> Result<()> {
        if at < self.rows.values {
            return Err(crate::error::invalid(format!(
                "an append wrote at value {at}, before the end {}",
                self.rows.values
            )));
        }
        let mut bytes = Vec::new();
        to_bytes(values, &mut bytes);
        write_at(
            &self.rows.shared.file,
            &bytes,
            self.rows.shared.start + (at * T::BYTES) as u64,
        )
        .map_err(|e| io_err(&self.rows.shared.origin, e))?;
        self.end = self.end.max(at + values.len());
        Ok(())
    }

    /// Writes `values` after the last value written.
    pub(crate) fn push(&mut self, values: &[T]) -> Result<()> {
        self.put(self.end, values)
    }

    /// Makes the values up to the last one written visible (each before it must have been written).
    pub(crate) fn finish(self) {
        self.rows.values = self.end;
        // `Drop` gives the tail back at the new end.
    }
}

impl<T: RowValue> Drop for Append<'_, T> {
    fn drop(&mut self) {
        self.rows.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halves(n: usize, seed: u32) -> Vec<f16> {
        (0..n)
            .map(|i| {
                f16::from_f32(
                    ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5,
                )
            })
            .collect()
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kgrag-rows-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn all(r: &RowFile) -> Vec<f16> {
        r.to_vec().unwrap()
    }

    #[test]
    fn holders_of_one_file_never_see_each_others_appends() {
        let d = dir("share");
        let a = halves(1000, 1);
        let mut first = RowFile::with_values(&d, &a).unwrap();
        assert_eq!(all(&first), a);
        // A clone shares the file: its append goes past the first holder's end, in place.
        let mut second = first.clone();
        let b = halves(300, 2);
        second.append(&b).unwrap();
        assert!(
            Arc::ptr_eq(&first.shared, &second.shared),
            "appended in place"
        );
        assert_eq!(all(&first), a, "the first holder still sees its own rows");
        assert_eq!(all(&second), [a.clone(), b.clone()].concat());
        // The first holder no longer owns the tail: its append copies first, and overwrites nothing.
        let c = halves(200, 3);
        first.append(&c).unwrap();
        assert!(!Arc::ptr_eq(&first.shared, &second.shared), "copied");
        assert_eq!(all(&first), [a.clone(), c].concat());
        assert_eq!(all(&second), [a.clone(), b].concat());
        // An append dropped unfinished shows nothing, and the next one takes its place.
        let before = all(&second);
        {
            let at = second.len();
            let mut app = second.begin_append().unwrap();
            app.push(&halves(50, 4)).unwrap();
            assert!(app.put(at - 1, &halves(1, 4)).is_err(), "before the end");
        }
        assert_eq!(all(&second), before);
        let e = halves(10, 5);
        second.append(&e).unwrap();
        assert_eq!(all(&second), [before, e].concat());
        // Reads past the end are refused.
        let mut out = vec![f16::ZERO; 2];
        assert!(second.read(second.len() - 1, &mut out).is_err());
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn f32_rows_keep_every_bit() {
        let d = dir("f32");
        let dim = 3;
        let v: Vec<f32> = (0..90)
            .map(|i| f32::from_bits(0x3f00_0000 ^ (i as u32).wrapping_mul(2_654_435_761) >> 9))
            .collect();
        let mut rows = RowFile::<f32>::with_values(&d, &v).unwrap();
        assert_eq!(rows.to_vec().unwrap(), v);
        let mut out = vec![0.0f32; dim];
        rows.read_f32(dim * 7, &mut out).unwrap();
        assert_eq!(out, v[dim * 7..dim * 8]);
        let more = [1.5f32, -0.25, f32::MIN_POSITIVE];
        rows.append(&more).unwrap();
        assert_eq!(rows.to_vec().unwrap(), [v.clone(), more.to_vec()].concat());
        let kept = rows.retain(dim, |r| r == 30 || r < 2).unwrap();
        assert_eq!(
            kept.to_vec().unwrap(),
            [v[..2 * dim].to_vec(), more.to_vec()].concat()
        );
        let picked = rows.select(&[30, 0], dim).unwrap();
        assert!(picked.same_values(&[more.to_vec(), v[..dim].to_vec()].concat()));
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn retain_and_select_copy_the_rows_asked_for() {
        let d = dir("pick");
        let dim = 4;
        let v = halves(40 * dim, 9);
        let rows = RowFile::with_values(&d, &v).unwrap();
        let kept = rows.retain(dim, |r| r % 3 == 0).unwrap();
        let want: Vec<f16> = v
            .chunks(dim)
            .enumerate()
            .filter(|(r, _)| r % 3 == 0)
            .flat_map(|(_, x)| x.to_vec())
            .collect();
        assert_eq!(all(&kept), want);
        let picked = rows.select(&[7, 0, 39], dim).unwrap();
        let want: Vec<f16> = [7, 0, 39]
            .iter()
            .flat_map(|&r| v[r * dim..(r + 1) * dim].to_vec())
            .collect();
        assert_eq!(all(&picked), want);
        assert!(picked.same_values(&want) && !picked.same_values(&want[4..]));
        assert!(rows.same_as(&rows.clone()) && !rows.same_as(&picked));
        // Rows across the copy's blocks (2^20 values: not a whole number of 384-value rows).
        let dim = 384;
        let n = BLOCK_VALUES / dim * 2 + 7;
        let v = halves(n * dim, 11);
        let rows = RowFile::with_values(&d, &v).unwrap();
        let kept = rows.retain(dim, |r| r % 5 != 2).unwrap();
        let want: Vec<f16> = v
            .chunks(dim)
            .enumerate()
            .filter(|(r, _)| r % 5 != 2)
            .flat_map(|(_, x)| x.to_vec())
            .collect();
        assert!(kept.same_values(&want));
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_saved_rows_file_reads_back_and_damage_is_named() {
        let d = dir("save");
        let v = halves(5000, 7);
        let rows = RowFile::with_values(&d, &v).unwrap();
        let path = d.join("facts.store.rows");
        let digest = rows.save(&path).unwrap();
        let back = RowFile::open_saved(&path, &digest, &d).unwrap();
        assert_eq!(all(&back), v);
        // Read-only: an append copies the rows into a scratch file and leaves the saved file as it was.
        let mut grown = back.clone();
        grown.append(&halves(8, 1)).unwrap();
        assert_eq!(grown.len(), v.len() + 8);
        assert_eq!(all(&RowFile::open_saved(&path, &digest, &d).unwrap()), v);

        let err = |path: &Path, digest: &[u8; 32]| {
            RowFile::open_saved(path, digest, &d)
                .unwrap_err()
                .to_string()
        };
        let other = [0u8; 32];
        assert!(
            err(&path, &other).contains("another generation"),
            "{}",
            err(&path, &other)
        );
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(err(&path, &digest).contains("checksum"));
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).unwrap();
        assert!(err(&path, &digest).contains("truncated"));
        std::fs::write(
            &path,
            b"not rows at all, but long enough to have a header and digest",
        )
        .unwrap();
        assert!(err(&path, &digest).contains("not a kgrag rows file"));
        assert!(err(&d.join("missing.rows"), &digest).contains("missing.rows"));
        std::fs::remove_dir_all(&d).ok();
    }
}
