//! The embedded backend: generations of files in the index directory (see [`crate::index_dir`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag_graph_store::EmbeddingStore;
use kgrag_types::Extraction;
use serde::{Deserialize, Serialize};

use super::{IndexStore, NewGeneration, SharedExtractions, WriterLock};
use crate::index_dir::{self, Manifest};
use crate::methods::{Corpus, Env, Method, MethodIndex};
use crate::{KgragError, Result};

/// The passage store's file in a generation folder.
pub const PASSAGES_FILE: &str = "passages.store";
/// The triples' file in a generation folder.
pub const CORPUS_FILE: &str = "corpus.kg";

/// The parts of the corpus besides the passage store: the triples of every chunk.
#[derive(Serialize, Deserialize)]
struct CorpusFile {
    triples: Vec<Extraction>,
}

/// [`CorpusFile`] borrowed for writing (the same bytes: a slice and a vector encode alike).
#[derive(Serialize)]
struct CorpusFileRef<'a> {
    triples: &'a [Extraction],
}

/// Files in an index directory. See the module docs.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// The store of the index directory `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KgragError + '_ {
    move |source| KgragError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl SharedExtractions for LocalStore {
    fn location(&self) -> String {
        self.root.display().to_string()
    }
}

impl IndexStore for LocalStore {
    fn info(&self) -> serde_json::Value {
        serde_json::json!({ "backend": "local", "dir": self.root })
    }

    fn committed(&self) -> Result<Option<Manifest>> {
        index_dir::read_manifest(&self.root)
    }

    fn lock(&self) -> Result<WriterLock> {
        Ok(Box::new(index_dir::WriteLock::acquire(&self.root)?))
    }

    fn passages(&self, manifest: &Manifest) -> Result<EmbeddingStore> {
        index_dir::check_files(&self.root, manifest)?;
        let gdir = self.root.join(manifest.generation_dir());
        Ok(EmbeddingStore::load(&gdir.join(PASSAGES_FILE))?)
    }

    fn triples(&self, manifest: &Manifest) -> Result<Vec<Extraction>> {
        let path = self.root.join(manifest.generation_dir()).join(CORPUS_FILE);
        let file: CorpusFile = kgrag_graph_store::persist::load(&path, "kgrag-corpus", 1)?;
        Ok(file.triples)
    }

    fn method(
        &self,
        manifest: &Manifest,
        method: &dyn Method,
        env: &Env,
        corpus: &Corpus,
    ) -> Result<Arc<dyn MethodIndex>> {
        let dir = self
            .root
            .join(manifest.generation_dir())
            .join(method.name());
        method.load(&dir, env, corpus)
    }

    fn commit(&self, new: NewGeneration<'_>) -> Result<Manifest> {
        let root = &self.root;
        std::fs::create_dir_all(root).map_err(io(root))?;
        // The generation on disk must still be the one this pipeline opened (or none, or a damaged one
        // a forced rebuild replaces): another writer's commit is never overwritten.
        let on_disk = index_dir::read_manifest(root).ok().flatten();
        if let (Some(disk), Some(mine)) = (on_disk.as_ref().map(|m| m.generation), new.opened) {
            if disk != mine {
                return Err(KgragError::Index(format!(
                    "{} changed while this change was being built (generation {mine} was opened, {disk} is \
                     committed now); nothing was written — run the command again",
                    root.display()
                )));
            }
        }
        let generation = on_disk
            .map_or(0, |m| m.generation)
            .max(new.opened.unwrap_or(0))
            + 1;
        let gdir = index_dir::fresh_generation(root, generation)?;
        let gname = index_dir::generation_dir(generation);
        new.passages.save(&gdir.join(PASSAGES_FILE))?;
        kgrag_graph_store::persist::save(
            &gdir.join(CORPUS_FILE),
            "kgrag-corpus",
            1,
            &CorpusFileRef {
                triples: new.triples,
            },
        )?;
        let new_keep = new.keep;
        let mut manifest = new.manifest;
        manifest.generation = generation;
        manifest.files = vec![
            index_dir::file_entry(root, &format!("{gname}/{PASSAGES_FILE}"))?,
            index_dir::file_entry(root, &format!("{gname}/{CORPUS_FILE}"))?,
        ];
        for (name, index) in new.methods {
            let mdir = gdir.join(name);
            std::fs::create_dir_all(&mdir).map_err(io(&mdir))?;
            let mut files = Vec::new();
            for f in index.save(&mdir)? {
                files.push(index_dir::file_entry(root, &format!("{gname}/{name}/{f}"))?);
            }
            if let Some(entry) = manifest.methods.get_mut(name) {
                entry.files = files;
            }
        }
        index_dir::sync_dirs(&gdir)?;
        index_dir::commit(root, &manifest)?;
        if let Err(e) = index_dir::remove_old_generations(root, generation, &new_keep) {
            // The new generation is committed; a leftover folder only costs space.
            crate::progress::say(&format!("note: could not remove an old generation ({e})"));
        }
        Ok(manifest)
    }

    fn sizes(&self, manifest: &Manifest) -> Result<BTreeMap<String, u64>> {
        let mut parts: BTreeMap<String, u64> = BTreeMap::new();
        for f in &manifest.files {
            let part = f.path.rsplit('/').next().unwrap_or(&f.path).to_owned();
            *parts.entry(part).or_default() += f.bytes;
        }
        for (name, e) in &manifest.methods {
            parts.insert(name.clone(), e.files.iter().map(|f| f.bytes).sum());
        }
        Ok(parts)
    }
}
