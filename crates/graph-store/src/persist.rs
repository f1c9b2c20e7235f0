//! Checksummed, versioned, atomically written files.
//!
//! Layout of every file this crate writes:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `KGRAGST\0` |
//! | 2 | length `n` of the kind tag, little endian |
//! | n | kind tag (UTF-8, e.g. `graph`, `exact-index`) |
//! | 4 | format version of that kind, little endian |
//! | 8 | payload length, little endian |
//! | … | payload (postcard) |
//! | 32 | SHA-256 of everything before it |
//!
//! Writes go to a temporary file in the same directory, are flushed and fsynced, then renamed over the
//! target (and the directory is fsynced), so a reader sees the old file or the new one, never a mix.
//! Reading checks the magic, the kind, the version, the length and the checksum, and names the file and the
//! problem in its error.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{Result, StoreError};

const MAGIC: &[u8; 8] = b"KGRAGST\0";
const DIGEST_LEN: usize = 32;

fn io(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Serialises `value` and writes it atomically to `path` as an object of `kind` at `version`.
pub fn save<T: Serialize>(path: &Path, kind: &str, version: u32, value: &T) -> Result<()> {
    if kind.len() > usize::from(u16::MAX) {
        return Err(crate::error::invalid(format!(
            "kind tag of {} bytes is too long",
            kind.len()
        )));
    }
    let encode = |e: postcard::Error| StoreError::Encode {
        what: kind.to_owned(),
        reason: e.to_string(),
    };
    // Streamed: a first pass only counts the payload's bytes (its length leads the frame), the second
    // writes them through the checksum into the file, so no copy of the payload is ever held in memory.
    let mut counter = Sink::counting();
    postcard::to_io(value, &mut counter).map_err(encode)?;
    let len = counter.written;
    write_atomic_with(path, |file| {
        let mut out = Sink::into(std::io::BufWriter::with_capacity(1 << 20, file));
        let header = header(kind, version, len);
        out.write_all(&header).map_err(|e| io(path, e))?;
        let result = postcard::to_io(value, &mut out).map(|_| ());
        if let Some(e) = out.error.take() {
            return Err(io(path, e));
        }
        result.map_err(encode)?;
        if out.written != header.len() as u64 + len {
            return Err(crate::error::invalid(format!(
                "{kind}: the payload encoded to {} bytes, then to {len}",
                out.written - header.len() as u64
            )));
        }
        let digest = out.hasher.finalize();
        let mut inner = out
            .inner
            .ok_or_else(|| crate::error::invalid("no writer"))?;
        inner.write_all(&digest).map_err(|e| io(path, e))?;
        inner.flush().map_err(|e| io(path, e))
    })
}

/// A writer that counts bytes, and when it has an inner writer, also hashes them and passes them on,
/// keeping the first I/O error (postcard reports a failed write only as a full buffer).
struct Sink<W: Write> {
    inner: Option<W>,
    hasher: Sha256,
    written: u64,
    error: Option<std::io::Error>,
}

impl Sink<std::io::Sink> {
    fn counting() -> Self {
        Self {
            inner: None,
            hasher: Sha256::new(),
            written: 0,
            error: None,
        }
    }
}

impl<W: Write> Sink<W> {
    fn into(inner: W) -> Self {
        Self {
            inner: Some(inner),
            hasher: Sha256::new(),
            written: 0,
            error: None,
        }
    }
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(inner) = self.inner.as_mut() {
            if let Err(e) = inner.write_all(buf) {
                let kind = e.kind();
                self.error.get_or_insert(e);
                return Err(kind.into());
            }
            self.hasher.update(buf);
        }
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.as_mut().map_or(Ok(()), Write::flush)
    }
}

/// Reads an object of `kind` at `version` from `path`, checking the frame first.
pub fn load<T: DeserializeOwned>(path: &Path, kind: &str, version: u32) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| io(path, e))?;
    let payload = unframe(path, &bytes, kind, version)?;
    postcard::from_bytes(payload)
        .map_err(|e| corrupt(path, format!("payload does not decode: {e}")))
}

/// Reads only the kind tag of a file written by [`save`] (checksum verified).
pub fn kind_of(path: &Path) -> Result<String> {
    let bytes = fs::read(path).map_err(|e| io(path, e))?;
    let (kind, _, _) = check(path, &bytes)?;
    Ok(kind.to_owned())
}

/// The frame's bytes before the payload.
fn header(kind: &str, version: u32, payload_len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(kind.len() + 22);
    out.extend_from_slice(MAGIC);
    // Kind tags are short (checked by `save`).
    out.extend_from_slice(&(kind.len() as u16).to_le_bytes());
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&payload_len.to_le_bytes());
    out
}

/// A whole frame in memory (what [`save`] streams to its file).
#[cfg(test)]
fn frame(kind: &str, version: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = header(kind, version, payload.len() as u64);
    out.extend_from_slice(payload);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

fn take<'a>(
    path: &Path,
    bytes: &'a [u8],
    at: &mut usize,
    n: usize,
    what: &str,
) -> Result<&'a [u8]> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            corrupt(
                path,
                format!(
                    "truncated: {} bytes, {what} needs {n} more at byte {}",
                    bytes.len(),
                    *at
                ),
            )
        })?;
    let out = &bytes[*at..end];
    *at = end;
    Ok(out)
}

fn le_u64(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Validates the frame; returns (kind, version, payload).
fn check<'a>(path: &Path, bytes: &'a [u8]) -> Result<(&'a str, u32, &'a [u8])> {
    let (kind, version, range) = check_range(path, bytes)?;
    Ok((kind, version, &bytes[range]))
}

/// [`check`], with the payload as a range of `bytes`.
fn check_range<'a>(path: &Path, bytes: &'a [u8]) -> Result<(&'a str, u32, std::ops::Range<usize>)> {
    let mut at = 0;
    let magic = take(path, bytes, &mut at, MAGIC.len(), "the magic number")?;
    if magic != MAGIC {
        return Err(corrupt(path, "not a kgrag store file (bad magic number)"));
    }
    let kind_len = le_u64(take(path, bytes, &mut at, 2, "the kind length")?) as usize;
    let kind = take(path, bytes, &mut at, kind_len, "the kind tag")?;
    let version = le_u64(take(path, bytes, &mut at, 4, "the format version")?) as u32;
    let len = le_u64(take(path, bytes, &mut at, 8, "the payload length")?);
    let len = usize::try_from(len).map_err(|_| corrupt(path, "payload length overflows"))?;
    let start = at;
    take(path, bytes, &mut at, len, "the payload")?;
    let payload = start..at;
    let digest = take(path, bytes, &mut at, DIGEST_LEN, "the checksum")?;
    if at != bytes.len() {
        return Err(corrupt(
            path,
            format!("{} unexpected bytes after the checksum", bytes.len() - at),
        ));
    }
    if Sha256::digest(&bytes[..at - DIGEST_LEN]).as_slice() != digest {
        return Err(corrupt(
            path,
            "checksum mismatch (the file was modified or damaged)",
        ));
    }
    let kind = std::str::from_utf8(kind).map_err(|_| corrupt(path, "kind tag is not UTF-8"))?;
    Ok((kind, version, payload))
}

fn unframe<'a>(path: &Path, bytes: &'a [u8], kind: &str, version: u32) -> Result<&'a [u8]> {
    let (found, found_version, payload) = check(path, bytes)?;
    accept(path, found, found_version, &[kind], &[version])?;
    Ok(payload)
}

/// An `Incompatible` error unless the kind is one of `kinds` and the version one of `versions`.
fn accept(path: &Path, found: &str, version: u32, kinds: &[&str], versions: &[u32]) -> Result<()> {
    if !kinds.contains(&found) {
        let expected: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
        return Err(StoreError::Incompatible {
            path: path.to_path_buf(),
            reason: format!("holds a {found:?}, expected a {}", expected.join(" or a ")),
        });
    }
    if !versions.contains(&version) {
        let readable: Vec<String> = versions.iter().map(u32::to_string).collect();
        return Err(StoreError::Incompatible {
            path: path.to_path_buf(),
            reason: format!(
                "{found} format version {version}, this build reads version {}; rebuild the index",
                readable.join(" or ")
            ),
        });
    }
    Ok(())
}

/// A file written by [`save`], read and checked once (magic, length, checksum): for readers of more than
/// one kind or format version, which look at [`kind`](Self::kind) and [`version`](Self::version) and then
/// [`decode`](Self::decode) the payload as the type that layout needs.
#[derive(Debug)]
pub struct Frame {
    path: PathBuf,
    bytes: Vec<u8>,
    kind: String,
    version: u32,
    payload: std::ops::Range<usize>,
}

/// Reads and checks the frame of a file written by [`save`].
pub fn read_frame(path: &Path) -> Result<Frame> {
    let bytes = fs::read(path).map_err(|e| io(path, e))?;
    let (kind, version, payload) = check_range(path, &bytes)?;
    let kind = kind.to_owned();
    Ok(Frame {
        path: path.to_path_buf(),
        bytes,
        kind,
        version,
        payload,
    })
}

impl Frame {
    /// The kind tag.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// An `Incompatible` error (naming the file, what it holds and what this build reads) unless the
    /// kind is one of `kinds` and the version one of `versions`.
    pub fn expect(&self, kinds: &[&str], versions: &[u32]) -> Result<()> {
        accept(&self.path, &self.kind, self.version, kinds, versions)
    }

    /// The payload decoded as `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        postcard::from_bytes(&self.bytes[self.payload.clone()])
            .map_err(|e| corrupt(&self.path, format!("payload does not decode: {e}")))
    }
}

/// Writes `bytes` to `path` atomically: temporary file in the same directory, fsync, rename, fsync of the
/// directory. Creates the parent directory if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes).map_err(|e| io(path, e)))
}

/// [`write_atomic`] with the content written by `fill` into the temporary file (an error leaves the target
/// as it was and removes the temporary file).
pub(crate) fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| crate::error::invalid(format!("{} has no file name", path.display())))?;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
    let result = (|| {
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        fill(&mut file)?;
        file.sync_all().map_err(|e| io(&tmp, e))?;
        drop(file);
        fs::rename(&tmp, path).map_err(|e| io(path, e))?;
        // Make the rename durable; not every platform can open a directory, so failure here is ignored.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A float32 matrix in NumPy's `.npy` format (version 1.0, little endian, C order), for exports that
/// Python tools read with `numpy.load`.
pub fn npy_f32(rows: usize, cols: usize, data: &[f32]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned() {
        let b = npy_f32(2, 3, &[1.0; 6]);
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(b.len(), 10 + hlen + 24);
        assert!(std::str::from_utf8(&b[10..10 + hlen])
            .unwrap()
            .contains("'shape': (2, 3)"));
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kgrag-persist-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn round_trip_and_damage() {
        let dir = tmpdir("rt");
        let path = dir.join("x.bin");
        let value = (vec![1u32, 2, 3], "hello".to_owned());
        save(&path, "test", 3, &value).unwrap();
        let back: (Vec<u32>, String) = load(&path, "test", 3).unwrap();
        assert_eq!(back, value);
        assert_eq!(kind_of(&path).unwrap(), "test");

        let err = load::<(Vec<u32>, String)>(&path, "other", 3).unwrap_err();
        assert!(err.to_string().contains("expected a \"other\""), "{err}");
        let err = load::<(Vec<u32>, String)>(&path, "test", 4).unwrap_err();
        assert!(err.to_string().contains("version 3"), "{err}");

        let good = fs::read(&path).unwrap();
        // The streamed file is byte for byte the frame built in memory.
        assert_eq!(
            good,
            frame("test", 3, &postcard::to_stdvec(&value).unwrap())
        );
        // A payload beyond the writer's buffer, streamed in many writes.
        let big: Vec<String> = (0..300_000).map(|i| format!("row {i}")).collect();
        let big_path = tmpdir("rt-big").join("big.bin");
        save(&big_path, "big", 1, &big).unwrap();
        assert_eq!(
            fs::read(&big_path).unwrap(),
            frame("big", 1, &postcard::to_stdvec(&big).unwrap())
        );
        assert_eq!(load::<Vec<String>>(&big_path, "big", 1).unwrap(), big);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            let err = load::<(Vec<u32>, String)>(&path, "test", 3).unwrap_err();
            assert!(err.to_string().contains("x.bin"), "byte {i}: {err}");
        }
        for cut in 0..good.len() {
            fs::write(&path, &good[..cut]).unwrap();
            let err = load::<(Vec<u32>, String)>(&path, "test", 3).unwrap_err();
            assert!(err.to_string().contains("corrupt"), "cut {cut}: {err}");
        }
        // No temporary files are left behind.
        save(&path, "test", 3, &value).unwrap();
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}
