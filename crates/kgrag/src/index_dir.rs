//! The index directory: generations of files committed by a manifest written last.
//!
//! ```text
//! DIR/manifest.json        the committed generation: what is in it, its files and their checksums
//! DIR/gen-000007/…         that generation's files (passages.store, corpus.kg, <method>/…)
//! DIR/cache/               response, embedding and extraction caches (a killed build resumes from them)
//! ```
//!
//! A build writes generation N + 1 into a fresh `gen-…` folder (every file checksummed and replaced
//! atomically), then replaces `manifest.json` atomically. A crash before that leaves generation N intact
//! and readable; a crash after it leaves N + 1. Uncommitted folders are removed by the next write; the
//! generation before the committed one is kept, so a reader that opened it just before a commit finishes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kgrag_types::{ChunkId, DocId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::MOVED_CLUSTER_KEYS;
use crate::{KgragError, Result};

/// The manifest's format version.
pub const FORMAT: u32 = 1;

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";

/// One document of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRecord {
    /// The user's id (see [`crate::documents::SourceDoc::id`]).
    pub id: String,
    /// Content hash of the document text.
    pub doc_id: DocId,
    /// Title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where it was read from.
    pub source: String,
    /// Its chunks, in document order.
    pub chunks: Vec<ChunkId>,
    /// The file it was read from (`None`: given in code, or an index from before files were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileRecord>,
    /// Where each chunk lies in the file (pages, section), in the order of `chunks`; empty when the file
    /// has no source map (a corpus entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ChunkLocation>,
}

/// The file a document was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The file as citations name it (its path relative to the folder indexed, else its name).
    pub name: String,
    /// Its format (`pdf`, `docx`, …).
    pub format: String,
    /// SHA-256 of its bytes (hex): the original's name under `originals/`, and how a re-run of `kgrag
    /// index` knows the file unchanged.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its units (`page`, `slide`, `sheet`, `chapter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<kgrag_documents::Unit>,
    /// How many units it has.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub units: u32,
    /// Whether the index keeps a copy of the original.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a chunk lies in its file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkLocation {
    /// The first unit (page, slide, sheet, chapter) it touches.
    #[serde(default, rename = "p", skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// The last unit it touches.
    #[serde(default, rename = "pe", skip_serializing_if = "Option::is_none")]
    pub page_end: Option<u32>,
    /// The heading of the section it mostly lies in.
    #[serde(default, rename = "s", skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

/// A file of a generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the index directory.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 (hex).
    pub sha256: String,
}

/// One method's part of a generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodEntry {
    /// Its files.
    pub files: Vec<FileEntry>,
    /// What its build made (for `kgrag stats`).
    pub stats: serde_json::Value,
}

/// Model usage of one stage, summed over the builds of the index: the bench report's usage totals (same
/// fields, same JSON).
pub type UsageEntry = kgrag_eval::LlmReport;

/// The embedder an index was built with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedderInfo {
    /// Model name.
    pub name: String,
    /// Vector dimension.
    pub dimension: usize,
}

/// The committed state of an index directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The kgrag version that wrote it.
    pub kgrag_version: String,
    /// Generation number, from 1.
    pub generation: u64,
    /// SHA-256 of [`Manifest::settings`]: changes whenever a setting the index depends on does.
    pub config_hash: String,
    /// The settings the index depends on, by section (`embedder`, `chunking`, `openie`, one per method).
    pub settings: BTreeMap<String, serde_json::Value>,
    /// The whole configuration it was built with (the default of `kgrag query`).
    pub config: serde_json::Value,
    /// The embedder.
    pub embedder: EmbedderInfo,
    /// The documents.
    pub documents: Vec<DocRecord>,
    /// Number of distinct chunks.
    pub chunks: usize,
    /// Shared files (passages, corpus).
    pub files: Vec<FileEntry>,
    /// The methods indexed.
    pub methods: BTreeMap<String, MethodEntry>,
    /// Model usage per stage since the index was last built from nothing (inserts and deletes add).
    pub llm: BTreeMap<String, UsageEntry>,
    /// Seconds per stage of the last build.
    pub stages: Vec<(String, f64)>,
    /// Extraction counts of the last build (`reused`, `extracted`, `failed`).
    pub extraction: BTreeMap<String, u64>,
    /// Notes of the last build.
    pub notes: Vec<String>,
    /// What the last build from nothing was expected to ask of the chat model (made with a chat model
    /// only; cleared by inserts and deletes, whose usage adds to `llm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::estimate::Estimate>,
}

impl Manifest {
    /// Every file the manifest names: the shared ones, then each method's.
    pub fn all_files(&self) -> impl Iterator<Item = &FileEntry> {
        self.files
            .iter()
            .chain(self.methods.values().flat_map(|m| m.files.iter()))
    }

    /// The folder of this generation.
    pub fn generation_dir(&self) -> String {
        generation_dir(self.generation)
    }
}

impl Manifest {
    /// Brings a manifest an older kgrag wrote to today's layout: HiRAG's and LeanRAG's clustering keys, once
    /// flat in their sections (`gmm_n_init`, …), are their `cluster` table now, and the configuration has
    /// the shared `[cluster]` section. Values are moved, not changed, so the settings compare equal.
    pub(crate) fn upgrade(&mut self) {
        nest_cluster_keys(self.settings.get_mut("hirag"));
        if let Some(lean) = self.settings.get_mut("leanrag") {
            nest_cluster_keys(lean.get_mut("leanrag"));
            nest_cluster_keys(lean.get_mut("hirag"));
        }
        let hirag = nest_cluster_keys(self.config.get_mut("hirag"));
        let leanrag = nest_cluster_keys(self.config.get_mut("leanrag"));
        if let (Some(cluster), Some(config)) = (hirag.or(leanrag), self.config.as_object_mut()) {
            config.entry("cluster").or_insert(cluster);
        }
    }
}

/// Moves the flat clustering keys of a `[hirag]` or `[leanrag]` section (JSON) into its `cluster` table,
/// filling the keys it lacks with their defaults; returns that table (`None`: nothing to move).
fn nest_cluster_keys(section: Option<&mut serde_json::Value>) -> Option<serde_json::Value> {
    let map = section?.as_object_mut()?;
    if !MOVED_CLUSTER_KEYS
        .iter()
        .any(|(old, _)| map.contains_key(*old))
    {
        return None;
    }
    let mut cluster = match serde_json::to_value(kgrag_hirag::config::ClusterConfig::default()) {
        Ok(serde_json::Value::Object(c)) => c,
        _ => return None,
    };
    for (old, new) in MOVED_CLUSTER_KEYS {
        let Some(value) = map.remove(old) else {
            continue;
        };
        match new.split_once('.') {
            Some((outer, inner)) => {
                if let Some(table) = cluster.get_mut(outer).and_then(|t| t.as_object_mut()) {
                    table.insert(inner.to_owned(), value);
                }
            }
            None => {
                cluster.insert(new.to_owned(), value);
            }
        }
    }
    let cluster = serde_json::Value::Object(cluster);
    map.insert("cluster".to_owned(), cluster.clone());
    Some(cluster)
}

/// `gen-000042`.
pub fn generation_dir(generation: u64) -> String {
    format!("gen-{generation:06}")
}

/// Reads `DIR/manifest.json`; `Ok(None)` when there is none (no index yet).
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(KgragError::Io { path, source }),
    };
    let mut manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        KgragError::Index(format!(
            "{} is damaged ({e}); the index cannot be opened — rebuild it with `kgrag index --force`",
            path.display()
        ))
    })?;
    // Every file must lie inside the index folder: a hand-edited or hostile manifest cannot make kgrag
    // read (or check) files elsewhere.
    for f in manifest.all_files() {
        let inside = !f.path.is_empty()
            && Path::new(&f.path)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return Err(KgragError::Index(format!(
                "{} names the file {:?}, outside the index folder; rebuild it with `kgrag index --force`",
                path.display(),
                f.path
            )));
        }
    }
    if manifest.format != FORMAT {
        return Err(KgragError::Index(format!(
            "{} has format {}, this kgrag reads format {FORMAT}; rebuild it with `kgrag index --force`",
            path.display(),
            manifest.format
        )));
    }
    manifest.upgrade();
    Ok(Some(manifest))
}

/// The entry of a file just written (size and checksum read back, streamed: index files can be large).
pub fn file_entry(root: &Path, rel: &str) -> Result<FileEntry> {
    let path = root.join(rel);
    let fail = |source| KgragError::Io {
        path: path.clone(),
        source,
    };
    let mut file = std::fs::File::open(&path).map_err(fail)?;
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut file, &mut hasher).map_err(fail)?;
    Ok(FileEntry {
        path: rel.to_owned(),
        bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Checks that every file of the manifest exists with its recorded size (the files' own frames verify
/// their checksums when they are read).
pub fn check_files(root: &Path, manifest: &Manifest) -> Result<()> {
    for f in manifest.all_files() {
        let path = root.join(&f.path);
        let len = std::fs::metadata(&path).map(|m| m.len()).map_err(|e| {
            KgragError::Index(format!(
                "{} of generation {} is missing ({e}); rebuild with `kgrag index --force`",
                path.display(),
                manifest.generation
            ))
        })?;
        if len != f.bytes {
            return Err(KgragError::Index(format!(
                "{} has {len} bytes, the manifest records {}; rebuild with `kgrag index --force`",
                path.display(),
                f.bytes
            )));
        }
    }
    Ok(())
}

/// Commits `manifest` (its files are written and synced): replaces `manifest.json` atomically.
pub fn commit(root: &Path, manifest: &Manifest) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(manifest)
        .map_err(|e| KgragError::Index(format!("serialising the manifest: {e}")))?;
    kgrag_graph_store::persist::write_atomic(&root.join(MANIFEST), &bytes)?;
    Ok(())
}

/// After `generation` is committed: removes every generation folder except it, the one before (kept for
/// readers that opened it just before the commit) and those in `also` (held by readers of this process).
pub fn remove_old_generations(root: &Path, generation: u64, also: &[u64]) -> Result<()> {
    let mut keep = vec![
        generation_dir(generation),
        generation_dir(generation.saturating_sub(1)),
    ];
    keep.extend(also.iter().map(|g| generation_dir(*g)));
    remove_generations(root, &keep)
}

/// Flushes the directory entries of `dir` and of every folder below it to disk (the files inside are
/// synced when written), so that a manifest written afterwards never names a folder a power loss lost.
pub fn sync_dirs(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| KgragError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            sync_dirs(&e.path())?;
        }
    }
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|source| KgragError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    if let Some(parent) = dir.parent() {
        // The generation folder's own entry in the index directory.
        let _ = std::fs::File::open(parent).and_then(|f| f.sync_all());
    }
    Ok(())
}

/// Removes the `gen-…` folders of `root` not named in `keep`.
pub fn remove_generations(root: &Path, keep: &[String]) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("gen-") && !keep.contains(&name) && e.path().is_dir() {
            std::fs::remove_dir_all(e.path()).map_err(|source| KgragError::Io {
                path: e.path(),
                source,
            })?;
        }
    }
    Ok(())
}

/// A fresh folder for `generation` (an uncommitted leftover of a killed build is removed first).
pub fn fresh_generation(root: &Path, generation: u64) -> Result<PathBuf> {
    let dir = root.join(generation_dir(generation));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|source| KgragError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    std::fs::create_dir_all(&dir).map_err(|source| KgragError::Io {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// The lock file of a writer.
pub const LOCK: &str = "write.lock";

/// One writer per index directory: an advisory lock (`flock`) on `write.lock`, which holds the writer's
/// process id while it changes the index. A second writer — another process, or another handle in the same
/// one — fails at once with a message naming the holder. The operating system releases the lock when its
/// holder exits, however it ends, so a lock left by a killed process is simply taken over (a file whose
/// pid is gone or reused means nothing). Readers never take it. The file is removed when the lock is
/// dropped, while it is still held; a writer that opened the file just before that finds, once it holds
/// the lock, that the path no longer names its file and tries again.
#[derive(Debug)]
pub struct WriteLock {
    path: PathBuf,
    file: std::fs::File,
}

impl WriteLock {
    /// Takes the lock of `root` (created if missing).
    pub fn acquire(root: &Path) -> Result<Self> {
        use std::io::{Read, Seek, Write};
        std::fs::create_dir_all(root).map_err(|source| KgragError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let path = root.join(LOCK);
        let io = |source| KgragError::Io {
            path: path.clone(),
            source,
        };
        for _ in 0..8 {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let pid = holder.trim().parse::<u32>().ok();
                    return Err(KgragError::Index(format!(
                        "{} is being changed by another kgrag process ({}); wait for it to finish",
                        root.display(),
                        pid.map_or_else(
                            || "pid not yet written".to_owned(),
                            |p| format!("pid {p}")
                        ),
                    )));
                }
                Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
            }
            if !same_file(&file, &path) {
                // Removed (and perhaps re-created) by the previous holder after this handle opened it.
                continue;
            }
            file.set_len(0).map_err(io)?;
            file.rewind().map_err(io)?;
            writeln!(file, "{}", std::process::id()).map_err(io)?;
            file.sync_all().map_err(io)?;
            return Ok(Self { path, file });
        }
        Err(KgragError::Index(format!(
            "could not take {}: other writers keep taking it",
            path.display()
        )))
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        // Removed while still held (the lock goes with the handle, after this).
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Whether `path` still names the open `file` (the same inode on Unix; assumed elsewhere).
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// The differences between the settings an index was built with and the current ones, as
/// `section.key: index X, configuration Y` lines (nested keys flattened with dots).
pub fn diff_settings(
    built: &BTreeMap<String, serde_json::Value>,
    now: &BTreeMap<String, serde_json::Value>,
) -> Vec<String> {
    let mut a = BTreeMap::new();
    let mut b = BTreeMap::new();
    for (k, v) in built {
        flatten(k, v, &mut a);
    }
    for (k, v) in now {
        if built.contains_key(k) {
            flatten(k, v, &mut b);
        }
    }
    let mut out = Vec::new();
    for (k, va) in &a {
        match b.get(k) {
            Some(vb) if vb == va => {}
            Some(vb) => out.push(format!("{k}: index {va}, configuration {vb}")),
            None => out.push(format!("{k}: index {va}, configuration (absent)")),
        }
    }
    for (k, vb) in &b {
        if !a.contains_key(k) {
            out.push(format!("{k}: index (absent), configuration {vb}"));
        }
    }
    out
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, x) in map {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// SHA-256 (hex) of the settings as canonical JSON.
pub fn settings_hash(settings: &BTreeMap<String, serde_json::Value>) -> String {
    let text = serde_json::to_string(settings).unwrap_or_default();
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `value` with its `cluster` table written back as the flat keys of before `[cluster]`.
    fn flatten_cluster(value: &mut serde_json::Value) {
        let Some(map) = value.as_object_mut() else {
            return;
        };
        let cluster = map.remove("cluster").unwrap();
        for (old, new) in MOVED_CLUSTER_KEYS {
            let v = match new.split_once('.') {
                Some((outer, inner)) => cluster[outer][inner].clone(),
                None => cluster[new].clone(),
            };
            map.insert(old.to_owned(), v);
        }
    }

    #[test]
    fn manifests_of_before_the_shared_cluster_section_are_upgraded() {
        let mut config = crate::config::Config::default();
        config.cluster.gmm.seed = 7;
        config.cluster.max_clusters = 12;
        config.share_cluster();
        let settings = crate::methods::settings(&config, &["dense", "hirag", "leanrag"]);
        let mut old_settings = settings.clone();
        flatten_cluster(old_settings.get_mut("hirag").unwrap());
        let lean = old_settings.get_mut("leanrag").unwrap();
        flatten_cluster(lean.get_mut("leanrag").unwrap());
        flatten_cluster(lean.get_mut("hirag").unwrap());
        let mut old_config = serde_json::to_value(&config).unwrap();
        old_config.as_object_mut().unwrap().remove("cluster");
        flatten_cluster(old_config.get_mut("hirag").unwrap());
        flatten_cluster(old_config.get_mut("leanrag").unwrap());
        assert!(old_settings["hirag"].get("gmm_seed").is_some());
        assert!(!diff_settings(&old_settings, &settings).is_empty());

        let mut manifest = Manifest {
            format: FORMAT,
            kgrag_version: "0.1.0".into(),
            generation: 1,
            config_hash: String::new(),
            settings: old_settings,
            config: old_config,
            embedder: EmbedderInfo {
                name: "m".into(),
                dimension: 3,
            },
            documents: Vec::new(),
            chunks: 0,
            files: Vec::new(),
            methods: BTreeMap::new(),
            llm: BTreeMap::new(),
            stages: Vec::new(),
            extraction: BTreeMap::new(),
            notes: Vec::new(),
            estimate: None,
        };
        manifest.upgrade();
        assert_eq!(
            diff_settings(&manifest.settings, &settings),
            Vec::<String>::new()
        );
        let back: crate::config::Config = serde_json::from_value(manifest.config.clone()).unwrap();
        assert_eq!(back, config);
        back.validate().unwrap();
        // A manifest of today's layout is left as it is.
        let again = manifest.clone();
        manifest.upgrade();
        assert_eq!(manifest, again);
    }

    #[test]
    fn one_writer_and_stale_locks_taken_over() {
        let root = std::env::temp_dir().join(format!("kgrag-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lock = WriteLock::acquire(&root).unwrap();
        let err = WriteLock::acquire(&root).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(lock);
        assert!(!root.join(LOCK).exists());
        // A file left by a process that is gone (its lock went with it), or whose pid was reused: taken.
        for pid in ["4194303", &std::process::id().to_string(), "", "garbage"] {
            std::fs::write(root.join(LOCK), format!("{pid}\n")).unwrap();
            let lock = WriteLock::acquire(&root).unwrap();
            assert_eq!(
                std::fs::read_to_string(root.join(LOCK)).unwrap().trim(),
                std::process::id().to_string()
            );
            drop(lock);
        }
        // Many threads racing for it: exactly one holds it at any time.
        let holders = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        if let Ok(lock) = WriteLock::acquire(&root) {
                            let now = holders.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                            most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                            std::thread::yield_now();
                            holders.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            drop(lock);
                        }
                    }
                });
            }
        });
        assert_eq!(most.into_inner(), 1);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn diff_names_keys() {
        let mut a = BTreeMap::new();
        a.insert(
            "hipporag2".to_owned(),
            serde_json::json!({"synonymy_threshold": 0.8, "x": {"y": 1}}),
        );
        let mut b = a.clone();
        b.insert(
            "hipporag2".to_owned(),
            serde_json::json!({"synonymy_threshold": 0.9, "x": {"y": 1}}),
        );
        b.insert("hirag".to_owned(), serde_json::json!({"a": 1}));
        let d = diff_settings(&a, &b);
        assert_eq!(
            d,
            ["hipporag2.synonymy_threshold: index 0.8, configuration 0.9"]
        );
        assert!(diff_settings(&a, &a).is_empty());
    }
}
