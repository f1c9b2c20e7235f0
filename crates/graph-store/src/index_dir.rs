//! An index directory: the graph and named vector indexes of one index, each in its own checksummed file
//! written atomically.
//!
//! Layout: `graph.kg` (the [`KnowledgeGraph`]), `vectors/<name>.idx` (one [`VectorIndex`] per name, e.g.
//! `passages`, `phrases`, `facts`), and on request `graph.graphml`. Each file is replaced atomically on
//! save, so a crash leaves every file either old or new; a file that fails its checksum is reported by
//! name on load.

use std::path::{Path, PathBuf};

use crate::error::invalid;
use crate::vector::{load_index, VectorIndex};
use crate::{graphml, EdgeWeighting, KnowledgeGraph, Result};

/// An index directory. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDir {
    root: PathBuf,
}

impl IndexDir {
    /// The directory at `root` (created on the first save).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the graph file.
    pub fn graph_path(&self) -> PathBuf {
        self.root.join("graph.kg")
    }

    /// Path of the vector index `name` (letters, digits, `-`, `_`).
    pub fn vectors_path(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(format!(
                "vector index name {name:?} must be non-empty letters, digits, '-' or '_'"
            )));
        }
        Ok(self.root.join("vectors").join(format!("{name}.idx")))
    }

    /// Saves the graph.
    pub fn save_graph(&self, graph: &KnowledgeGraph) -> Result<()> {
        graph.save(&self.graph_path())
    }

    /// Loads the graph.
    pub fn load_graph(&self) -> Result<KnowledgeGraph> {
        KnowledgeGraph::load(&self.graph_path())
    }

    /// Saves the vector index `name`.
    pub fn save_vectors(&self, name: &str, index: &dyn VectorIndex) -> Result<()> {
        index.save(&self.vectors_path(name)?)
    }

    /// Loads the vector index `name`, whichever kind it is.
    pub fn load_vectors(&self, name: &str) -> Result<Box<dyn VectorIndex>> {
        load_index(&self.vectors_path(name)?)
    }

    /// Whether the vector index `name` exists.
    pub fn has_vectors(&self, name: &str) -> bool {
        self.vectors_path(name).is_ok_and(|p| p.is_file())
    }

    /// Writes `graph.graphml` with edge weights under `weighting`; returns its path.
    pub fn export_graphml(
        &self,
        graph: &KnowledgeGraph,
        weighting: EdgeWeighting,
    ) -> Result<PathBuf> {
        let path = self.root.join("graph.graphml");
        graphml::write_graphml(graph, weighting, &path)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExactIndex, Metric};

    #[test]
    fn saves_and_loads_each_part() {
        let root = std::env::temp_dir().join(format!("kgrag-index-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = IndexDir::new(&root);
        let mut g = KnowledgeGraph::new();
        let a = g.add_entity("entity-a", "a");
        let b = g.add_entity("entity-b", "b");
        g.add_fact(a, b, &kgrag_types::ChunkId::from_content("x"))
            .unwrap();
        dir.save_graph(&g).unwrap();
        assert!(dir.load_graph().unwrap() == g);
        let idx = ExactIndex::from_rows(2, Metric::Cosine, &[1.0, 0.0, 0.0, 1.0]).unwrap();
        dir.save_vectors("phrases", &idx).unwrap();
        assert!(dir.has_vectors("phrases"));
        assert_eq!(dir.load_vectors("phrases").unwrap().len(), 2);
        assert!(dir.save_vectors("../evil", &idx).is_err());
        assert!(dir
            .load_vectors("missing")
            .unwrap_err()
            .to_string()
            .contains("missing.idx"));
        let p = dir
            .export_graphml(&g, EdgeWeighting::HippoReference)
            .unwrap();
        assert!(p.is_file());
        let _ = std::fs::remove_dir_all(&root);
    }
}
