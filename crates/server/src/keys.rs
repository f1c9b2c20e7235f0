//! Scoped API keys: which indexes a key may read, which it may change, and whether it may create and
//! drop indexes or read `/metrics`.
//!
//! A keys file is TOML, one `[[key]]` table per client:
//!
//! ```toml
//! [[key]]
//! name = "support-bot"          # shown in logs; unique
//! sha256 = "5e88…"              # the key's SHA-256 in hex (or `key = "…"`, the key itself)
//! read = ["wiki", "docs"]       # indexes it may query and list ("*": every index)
//! change = ["wiki"]             # indexes whose documents it may add and delete ("*": every index)
//! admin = false                 # create and drop indexes; read and change every index
//! metrics = false               # read /metrics (admin keys may)
//! ```
//!
//! A request's token is hashed once and compared with every key's digest in constant time, every key
//! each time: neither the token's bytes, its length nor which key matched leak through timing. A key
//! that may neither read nor change an index is told it does not exist (404), as if it did not.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// A set of index names: every index, or these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every index (`"*"`).
    All,
    /// These names.
    Names(BTreeSet<String>),
}

impl Scope {
    fn none() -> Self {
        Self::Names(BTreeSet::new())
    }

    fn has(&self, index: &str) -> bool {
        match self {
            Self::All => true,
            Self::Names(n) => n.contains(index),
        }
    }

    fn of(names: Vec<String>, what: &str, key: &str) -> Result<Self, String> {
        let mut set = BTreeSet::new();
        for n in names {
            let n = n.trim().to_owned();
            if n == "*" {
                return Ok(Self::All);
            }
            if n.is_empty() {
                return Err(format!("key {key:?}: an empty index name in `{what}`"));
            }
            set.insert(n);
        }
        Ok(Self::Names(set))
    }
}

/// What the client of one request may do (the key it sent, or everything on a server without keys).
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    /// The key's name (`""` on a server without keys).
    pub(crate) key: String,
    read: Scope,
    change: Scope,
    admin: bool,
    metrics: bool,
}

impl Grant {
    /// Everything: a server without keys, MCP over stdio, the single `--api-key-env` key.
    pub(crate) fn everything(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            read: Scope::All,
            change: Scope::All,
            admin: true,
            metrics: true,
        }
    }

    /// Nothing: a request to a public path without a key.
    pub(crate) fn nothing() -> Self {
        Self {
            key: String::new(),
            read: Scope::none(),
            change: Scope::none(),
            admin: false,
            metrics: false,
        }
    }

    /// May query `index` and read its documents, graph and communities.
    pub(crate) fn can_read(&self, index: &str) -> bool {
        self.admin || self.read.has(index)
    }

    /// May add and delete `index`'s documents.
    pub(crate) fn can_change(&self, index: &str) -> bool {
        self.admin || self.change.has(index)
    }

    /// May learn that `index` exists.
    pub(crate) fn can_see(&self, index: &str) -> bool {
        self.can_read(index) || self.can_change(index)
    }

    /// May create and drop indexes.
    pub(crate) fn is_admin(&self) -> bool {
        self.admin
    }

    /// May read `/metrics` (which names the indexes loaded).
    pub(crate) fn can_read_metrics(&self) -> bool {
        self.admin || self.metrics
    }
}

/// One `[[key]]` of a keys file, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFileEntry {
    name: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    change: Vec<String>,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    metrics: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    key: Vec<KeyFileEntry>,
}

struct KeyEntry {
    digest: [u8; 32],
    grant: Grant,
}

/// The keys a server accepts.
pub(crate) struct KeyTable {
    entries: Vec<KeyEntry>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equality of two digests in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

impl KeyTable {
    /// One key that may do everything (`--api-key-env`).
    pub(crate) fn single(key: &str) -> Self {
        Self {
            entries: vec![KeyEntry {
                digest: digest(key),
                grant: Grant::everything("api-key"),
            }],
        }
    }

    /// Parses a keys file's text; `origin` names it in errors.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let file: KeyFile =
            toml::from_str(text).map_err(|e| format!("{origin}: {}", e.message().trim()))?;
        let mut entries: Vec<KeyEntry> = Vec::with_capacity(file.key.len());
        let mut names = BTreeSet::new();
        for (i, k) in file.key.into_iter().enumerate() {
            let name = k.name.trim().to_owned();
            let at = format!("{origin}: key {} ({name:?})", i + 1);
            if name.is_empty() {
                return Err(format!("{origin}: key {} has an empty name", i + 1));
            }
            if !names.insert(name.clone()) {
                return Err(format!("{at}: the name is used twice"));
            }
            let digest = match (k.key, k.sha256) {
                (Some(key), None) => {
                    let key = key.trim();
                    if key.len() < 16 {
                        return Err(format!(
                            "{at}: the key is {} characters: give at least 16",
                            key.len()
                        ));
                    }
                    digest(key)
                }
                (None, Some(hex)) => {
                    let bytes = hex::decode(hex.trim()).ok().filter(|b| b.len() == 32);
                    let Some(bytes) = bytes else {
                        return Err(format!(
                            "{at}: `sha256` is not 64 hexadecimal digits (the key's SHA-256, as \
                             `printf %s KEY | sha256sum` prints it)"
                        ));
                    };
                    let mut d = [0u8; 32];
                    d.copy_from_slice(&bytes);
                    d
                }
                (Some(_), Some(_)) => {
                    return Err(format!("{at}: give `key` or `sha256`, not both"))
                }
                (None, None) => return Err(format!("{at}: give `key` or `sha256`")),
            };
            if entries.iter().any(|e| same(&e.digest, &digest)) {
                return Err(format!("{at}: the same key is given twice"));
            }
            let read = Scope::of(k.read, "read", &name)?;
            let change = Scope::of(k.change, "change", &name)?;
            if !k.admin && read == Scope::none() && change == Scope::none() && !k.metrics {
                return Err(format!(
                    "{at}: it may do nothing: give `read`, `change`, `admin` or `metrics`"
                ));
            }
            entries.push(KeyEntry {
                digest,
                grant: Grant {
                    key: name,
                    read,
                    change,
                    admin: k.admin,
                    metrics: k.metrics,
                },
            });
        }
        if entries.is_empty() {
            return Err(format!(
                "{origin}: no [[key]]: every request would be refused"
            ));
        }
        Ok(Self { entries })
    }

    /// Reads and parses the keys file at `path`.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the keys file {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The grant of `token`: compared with every key, each in constant time.
    pub(crate) fn grant_of(&self, token: &str) -> Option<Grant> {
        let d = digest(token);
        let mut found = None;
        for e in &self.entries {
            // Every key is compared; the match is only remembered.
            if same(&e.digest, &d) && found.is_none() {
                found = Some(&e.grant);
            }
        }
        found.cloned()
    }
}

/// The keys in force, swapped whole when the file is reloaded (requests in flight keep the grant
/// they were given).
pub(crate) struct Keys {
    table: RwLock<Arc<KeyTable>>,
    file: Option<PathBuf>,
}

impl Keys {
    /// `table`, reloaded from `file` when asked.
    pub(crate) fn new(table: KeyTable, file: Option<PathBuf>) -> Self {
        Self {
            table: RwLock::new(Arc::new(table)),
            file,
        }
    }

    /// The table in force.
    pub(crate) fn current(&self) -> Arc<KeyTable> {
        match self.table.read() {
            Ok(t) => t.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Reads the keys file again; on an error the keys in force stay. Returns the number of keys.
    pub(crate) fn reload(&self) -> Result<usize, String> {
        let Some(file) = &self.file else {
            return Err("this server has no keys file (--keys FILE)".into());
        };
        let table = KeyTable::load(file)?;
        let n = table.len();
        match self.table.write() {
            Ok(mut t) => *t = Arc::new(table),
            Err(p) => *p.into_inner() = Arc::new(table),
        }
        Ok(n)
    }
}

/// The bearer token of an `Authorization` header value (`Bearer` in any case).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[key]]
name = "reader"
key = "reader-key-0123456789"
read = ["wiki"]

[[key]]
name = "writer"
sha256 = "SHA"
read = ["wiki", "docs"]
change = ["docs"]

[[key]]
name = "ops"
key = "ops-key-0123456789ab"
admin = true
"#;

    fn table() -> KeyTable {
        let sha = hex::encode(Sha256::digest(b"writer-key-0123456789"));
        KeyTable::parse(&FILE.replace("SHA", &sha), "keys.toml").unwrap()
    }

    #[test]
    fn keys_grant_what_the_file_says() {
        let t = table();
        assert_eq!(t.len(), 3);
        let r = t.grant_of("reader-key-0123456789").unwrap();
        assert!(r.can_read("wiki") && !r.can_change("wiki") && !r.can_see("docs"));
        assert!(!r.is_admin() && !r.can_read_metrics());
        let w = t.grant_of("writer-key-0123456789").unwrap();
        assert_eq!(w.key, "writer");
        assert!(w.can_change("docs") && !w.can_change("wiki") && w.can_read("wiki"));
        let o = t.grant_of("ops-key-0123456789ab").unwrap();
        assert!(o.is_admin() && o.can_change("anything") && o.can_read_metrics());
        assert!(t.grant_of("reader-key-012345678").is_none());
        assert!(t.grant_of("").is_none());
    }

    #[test]
    fn bad_files_name_the_key_and_the_field() {
        let cases = [
            (
                "[[key]]\nname = \"a\"\nread = [\"x\"]\n",
                "give `key` or `sha256`",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"short\"\nread = [\"x\"]\n",
                "at least 16",
            ),
            (
                "[[key]]\nname = \"a\"\nsha256 = \"zz\"\nread = [\"x\"]\n",
                "64 hexadecimal digits",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"0123456789abcdefg\"\n",
                "it may do nothing",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"0123456789abcdefg\"\nread = [\"x\"]\n\
                 [[key]]\nname = \"a\"\nkey = \"0123456789abcdefh\"\nread = [\"x\"]\n",
                "used twice",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"0123456789abcdefg\"\nread = [\"x\"]\n\
                 [[key]]\nname = \"b\"\nkey = \"0123456789abcdefg\"\nread = [\"x\"]\n",
                "same key is given twice",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"0123456789abcdefg\"\nreads = [\"x\"]\n",
                "unknown field",
            ),
            ("", "no [[key]]"),
        ];
        for (text, want) in cases {
            let e = KeyTable::parse(text, "k.toml").err().unwrap();
            assert!(e.contains(want) && e.starts_with("k.toml"), "{e}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer   abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn a_reload_keeps_the_old_keys_when_the_file_is_bad() {
        let dir = std::env::temp_dir().join(format!("kgrag-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.toml");
        std::fs::write(
            &path,
            "[[key]]\nname = \"a\"\nkey = \"0123456789abcdefg\"\nread = [\"x\"]\n",
        )
        .unwrap();
        let keys = Keys::new(KeyTable::load(&path).unwrap(), Some(path.clone()));
        std::fs::write(&path, "[[key]]\nname = ").unwrap();
        assert!(keys.reload().is_err());
        assert!(keys.current().grant_of("0123456789abcdefg").is_some());
        std::fs::write(
            &path,
            "[[key]]\nname = \"b\"\nkey = \"0123456789abcdefh\"\nchange = [\"x\"]\n",
        )
        .unwrap();
        assert_eq!(keys.reload(), Ok(1));
        assert!(keys.current().grant_of("0123456789abcdefg").is_none());
        assert!(keys.current().grant_of("0123456789abcdefh").is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
