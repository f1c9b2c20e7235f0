//! The persistent response cache: chat replies and embeddings in one redb file.
//!
//! Keys are SHA-256 hex digests of canonical JSON (object keys sorted) of everything that changes the output:
//! provider, model, the full message list and every generation setting for chat; provider, model, embedding
//! kind (with its instruction) and the text for embeddings. Every insert is its own durable transaction, so a
//! killed run keeps every reply it had received.
//!
//! A redb file is opened once per process: a second [`ResponseCache::open`] of the same file (several indexes
//! of one server with one `cache_dir`) shares the first's database while it is open. Another process
//! holding the file is an error (the caller goes on without a cache).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use kgrag_types::{ChatRequest, ChatResponse, EmbedKind};
use redb::{Database, ReadableDatabase, TableDefinition};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{LlmError, Result};

const CHAT: TableDefinition<&str, &[u8]> = TableDefinition::new("chat_v1");
const EMBED: TableDefinition<&str, &[u8]> = TableDefinition::new("embedding_v1");

/// SHA-256 hex of the canonical JSON of `value` (object keys sorted, no white space).
pub fn cache_key<T: Serialize>(value: &T) -> String {
    // serde_json's `Value` keeps objects in a BTreeMap, so serialising through it sorts keys.
    let canonical = serde_json::to_value(value)
        .map(|v| v.to_string())
        .unwrap_or_default();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// The cache key of a chat request to `model` of `provider`.
pub fn chat_key(provider: &str, model: &str, request: &ChatRequest) -> String {
    cache_key(&serde_json::json!({
        "provider": provider,
        "model": model,
        "messages": request.messages,
        "settings": request.settings,
    }))
}

/// The file's own page cache. redb's default (1 GiB) kept every page a build writes in memory until it
/// was full — a cold build of a large corpus writes gigabytes of embeddings it reads back rarely, so that
/// was up to 1 GiB of resident memory for nothing. Pages it drops are read back through the operating
/// system's file cache.
const CACHE_BYTES: usize = 32 << 20;

/// The cache key of embedding `text` with `model` of `provider` as `kind`.
pub fn embedding_key(provider: &str, model: &str, kind: &EmbedKind, text: &str) -> String {
    cache_key(&serde_json::json!({
        "provider": provider,
        "model": model,
        "kind": kind,
        "text_sha256": hex::encode(Sha256::digest(text.as_bytes())),
    }))
}

/// The databases open in this process, by their file (weak: closed with their last cache).
static OPEN: Mutex<Vec<(PathBuf, Weak<Database>)>> = Mutex::new(Vec::new());

/// A response cache backed by one redb file. Cheap to clone; opened once per file and process.
#[derive(Clone)]
pub struct ResponseCache {
    db: Arc<Database>,
    path: PathBuf,
}

impl std::fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseCache")
            .field("path", &self.path)
            .finish()
    }
}

impl ResponseCache {
    /// Opens the cache file, creating it (and its folder) when missing.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let err = |message: String| LlmError::Cache {
            path: path.display().to_string(),
            message,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| err(e.to_string()))?;
        }
        // The same file by any spelling of its path: its folder, resolved.
        let key = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => {
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                parent
                    .canonicalize()
                    .map_or_else(|_| path.clone(), |p| p.join(name))
            }
            _ => path.clone(),
        };
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, db)| db.strong_count() > 0);
        if let Some(db) = open
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, db)| db.upgrade())
        {
            return Ok(Self { db, path });
        }
        // Its last cache in this process may have been dropped an instant ago, and the file still be
        // closing: a few tries (another process holding it stays an error).
        let mut tries = 0;
        let db = loop {
            match Database::builder()
                .set_cache_size(CACHE_BYTES)
                .create(&path)
            {
                Ok(db) => break db,
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(err(e.to_string())),
            }
        };
        let cache = Self {
            db: Arc::new(db),
            path,
        };
        // Both tables are made before anyone else may use the database: reads never meet a missing one.
        let txn = cache.db.begin_write().map_err(|e| cache.err(e))?;
        txn.open_table(CHAT).map_err(|e| cache.err(e))?;
        txn.open_table(EMBED).map_err(|e| cache.err(e))?;
        txn.commit().map_err(|e| cache.err(e))?;
        open.push((key, Arc::downgrade(&cache.db)));
        Ok(cache)
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl std::fmt::Display) -> LlmError {
        LlmError::Cache {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    fn get(&self, table: TableDefinition<&str, &[u8]>, key: &str) -> Result<Option<Vec<u8>>> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = txn.open_table(table).map_err(|e| self.err(e))?;
        let value = t.get(key).map_err(|e| self.err(e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    fn put_many<'a>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        entries: impl IntoIterator<Item = (&'a str, Vec<u8>)>,
    ) -> Result<()> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut t = txn.open_table(table).map_err(|e| self.err(e))?;
            for (key, value) in entries {
                t.insert(key, value.as_slice()).map_err(|e| self.err(e))?;
            }
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Entries stored: (chat replies, embeddings).
    pub fn entries(&self) -> Result<(u64, u64)> {
        use redb::ReadableTableMetadata;
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let count = |table: TableDefinition<&str, &[u8]>| -> Result<u64> {
            match txn.open_table(table) {
                Ok(t) => t.len().map_err(|e| self.err(e)),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
                Err(e) => Err(self.err(e)),
            }
        };
        Ok((count(CHAT)?, count(EMBED)?))
    }

    /// A cached chat reply. An entry that no longer parses counts as a miss.
    pub fn get_chat(&self, key: &str) -> Result<Option<ChatResponse>> {
        Ok(self
            .get(CHAT, key)?
            .and_then(|bytes| serde_json::from_slice(&bytes).ok()))
    }

    /// Stores a chat reply.
    pub fn put_chat(&self, key: &str, response: &ChatResponse) -> Result<()> {
        let bytes = serde_json::to_vec(response).map_err(|e| self.err(e))?;
        self.put_many(CHAT, [(key, bytes)])
    }

    /// A cached embedding.
    pub fn get_embedding(&self, key: &str) -> Result<Option<Vec<f32>>> {
        Ok(self.get(EMBED, key)?.map(|bytes| {
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        }))
    }

    /// Stores embeddings in one transaction.
    pub fn put_embeddings<'a>(
        &self,
        entries: impl IntoIterator<Item = (&'a str, &'a [f32])>,
    ) -> Result<()> {
        self.put_many(
            EMBED,
            entries
                .into_iter()
                .map(|(k, v)| (k, v.iter().flat_map(|x| x.to_le_bytes()).collect())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::{GenerationSettings, Message, ResponseFormat};

    #[test]
    fn keys_cover_every_setting() {
        let base = ChatRequest::user("hi");
        let k = chat_key("openai", "m", &base);
        let mut other = base.clone();
        other.settings.max_tokens = Some(5);
        assert_ne!(k, chat_key("openai", "m", &other));
        let mut other = base.clone();
        other.settings.response_format = ResponseFormat::JsonObject;
        assert_ne!(k, chat_key("openai", "m", &other));
        let mut other = base.clone();
        other.settings.stop = vec!["\n".into()];
        assert_ne!(k, chat_key("openai", "m", &other));
        let mut other = base.clone();
        other.messages.push(Message::assistant("x"));
        assert_ne!(k, chat_key("openai", "m", &other));
        assert_ne!(k, chat_key("openai", "m2", &base));
        assert_ne!(k, chat_key("ollama", "m", &base));
        assert_eq!(k, chat_key("openai", "m", &base.clone()));
        assert_eq!(
            GenerationSettings::default(),
            ChatRequest::user("x").settings
        );
        let q = EmbedKind::Query {
            instruction: Some("i".into()),
        };
        assert_ne!(
            embedding_key("p", "m", &EmbedKind::Document, "t"),
            embedding_key("p", "m", &q, "t")
        );
    }

    #[test]
    fn one_file_opened_twice_in_a_process_is_one_database() {
        let dir =
            std::env::temp_dir().join(format!("kgrag-llm-cache-twice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = ResponseCache::open(dir.join("c.redb")).unwrap();
        // Another spelling of the same file.
        let b = ResponseCache::open(dir.join("sub/../c.redb")).unwrap();
        assert!(Arc::ptr_eq(&a.db, &b.db));
        let r = ChatResponse {
            content: "shared".into(),
            ..ChatResponse::default()
        };
        a.put_chat("k", &r).unwrap();
        assert_eq!(
            b.get_chat("k").unwrap().map(|c| c.content),
            Some("shared".into())
        );
        // Closed with its last cache, the file opens again.
        drop((a, b));
        let c = ResponseCache::open(dir.join("c.redb")).unwrap();
        assert!(c.get_chat("k").unwrap().is_some());
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn round_trips_and_survives_reopen() {
        let dir = std::env::temp_dir().join(format!("kgrag-llm-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("nested/cache.redb");
        {
            let cache = ResponseCache::open(&path).unwrap();
            let r = ChatResponse {
                content: "hello".into(),
                ..ChatResponse::default()
            };
            cache.put_chat("k", &r).unwrap();
            cache.put_embeddings([("e", &[1.0f32, -2.5][..])]).unwrap();
            assert_eq!(cache.get_chat("missing").unwrap(), None);
        }
        let cache = ResponseCache::open(&path).unwrap();
        assert_eq!(
            cache.get_chat("k").unwrap().map(|r| r.content),
            Some("hello".into())
        );
        assert_eq!(cache.get_embedding("e").unwrap(), Some(vec![1.0, -2.5]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unreadable_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("kgrag-llm-badcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache.redb");
        std::fs::write(&path, b"this is not a redb file at all").unwrap();
        let err = ResponseCache::open(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("response cache {}", path.display())),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
