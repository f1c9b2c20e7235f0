//! Shared helpers: a keyword embedder whose cosines can be worked out by hand, index building.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_hirag::{HiragConfig, HiragIndex, Models};
use kgrag_types::{
    Chunk, ChunkId, DocId, EmbedKind, Embedder, Embeddings, Entity, Extraction, Relation, Span,
};

/// Vectors of keyword counts: dimension 0 is a constant 0.01 (no zero vectors), dimension i + 1 counts the
/// case-insensitive occurrences of `words[i]` as a substring.
pub struct Keywords {
    pub words: Vec<&'static str>,
}

impl Keywords {
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let lower = text.to_lowercase();
        let mut v = vec![0.01f32];
        v.extend(self.words.iter().map(|w| lower.matches(w).count() as f32));
        v
    }
}

#[async_trait]
impl Embedder for Keywords {
    fn model_name(&self) -> &str {
        "keywords-test"
    }
    fn dimension(&self) -> usize {
        self.words.len() + 1
    }
    async fn embed(&self, texts: &[String], _: &EmbedKind) -> kgrag_types::Result<Embeddings> {
        Embeddings::from_rows(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// A chunk of its own document.
pub fn chunk(text: &str) -> Chunk {
    Chunk {
        id: ChunkId::from_content(text),
        doc_id: DocId::from_text(text),
        text: text.to_owned(),
        tokens: text.split_whitespace().count(),
        order: 0,
        span: Span::default(),
    }
}

/// The extraction of one chunk: its entity and relation records, no triples.
pub fn extraction(c: &Chunk, entities: Vec<Entity>, relations: Vec<Relation>) -> Extraction {
    Extraction {
        chunk_id: c.id.clone(),
        entities,
        relations,
        triples: vec![],
        diagnostics: Default::default(),
    }
}

pub fn entity(name: &str, description: &str, c: &Chunk) -> Entity {
    Entity {
        name: name.into(),
        entity_type: "THING".into(),
        description: description.into(),
        source_chunks: kgrag_types::VecSet::from([c.id.clone()]),
    }
}

pub fn relation(a: &str, b: &str, description: &str, weight: f64, c: &Chunk) -> Relation {
    Relation {
        source: a.into(),
        target: b.into(),
        keywords: String::new(),
        description: description.into(),
        weight,
        source_chunks: kgrag_types::VecSet::from([c.id.clone()]),
    }
}

pub async fn build(
    chunks: &[Chunk],
    extractions: &[Extraction],
    embedder: Arc<dyn Embedder>,
    config: &HiragConfig,
) -> HiragIndex {
    let models = Models {
        embedder,
        chat: None,
        cheap_chat: None,
        scratch_dir: None,
    };
    HiragIndex::build(chunks, extractions, &models, config, &HashMap::new())
        .await
        .unwrap()
}
