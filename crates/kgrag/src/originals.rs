//! The original files an index keeps (`[index] keep_originals`, default on): one copy per content,
//! `<index>/originals/<sha256>.<ext>`, written atomically before the generation that names it is committed
//! and removed once no committed document names it. A citation opens its file from here
//! (`GET /v1/documents/{id}/file`, at the cited page).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::documents::Original;
use crate::index_dir::FileRecord;
use crate::{KgragError, Result};

/// The folder of the originals in an index directory.
pub const DIR: &str = "originals";

/// An original waiting to be stored: its digest, extension and bytes.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) digest: String,
    pub(crate) ext: String,
    pub(crate) original: Original,
}

/// The file extension originals of `format` are stored with.
pub fn extension(format: &str) -> &'static str {
    match format {
        "text" => "txt",
        "markdown" => "md",
        "jsonl" => "jsonl",
        "json" => "json",
        other => kgrag_documents::Format::from_extension(other)
            .and_then(|f| f.extensions().first().copied())
            .unwrap_or("bin"),
    }
}

/// Where the original of `file` is (or would be) kept in the index directory `root`.
pub fn path_of(root: &Path, file: &FileRecord) -> PathBuf {
    root.join(DIR)
        .join(format!("{}.{}", file.digest, extension(&file.format)))
}

/// Stores the pending originals not stored yet; returns the digests stored now or before.
pub(crate) fn store(root: &Path, pending: &[Pending]) -> Result<HashSet<String>> {
    let dir = root.join(DIR);
    if !pending.is_empty() {
        std::fs::create_dir_all(&dir).map_err(|source| KgragError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    for p in pending {
        let path = dir.join(format!("{}.{}", p.digest, p.ext));
        if path.is_file() {
            continue;
        }
        let bytes = p.original.read()?;
        // The file may have changed since it was read: keep only the bytes the index read.
        if crate::documents::digest(&bytes) != p.digest {
            continue;
        }
        kgrag_graph_store::persist::write_atomic(&path, &bytes)?;
    }
    Ok(present(root))
}

/// The digests of the originals stored in `root`.
pub(crate) fn present(root: &Path) -> HashSet<String> {
    let Ok(entries) = std::fs::read_dir(root.join(DIR)) else {
        return HashSet::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (digest, _) = name.split_once('.')?;
            (digest.len() == 64).then(|| digest.to_owned())
        })
        .collect()
}

/// Removes the originals whose digest is not in `keep` (failures are left for the next commit).
pub(crate) fn retain(root: &Path, keep: &HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(root.join(DIR)) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let digest = name.split_once('.').map_or(name.as_str(), |(d, _)| d);
        if !keep.contains(digest) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
