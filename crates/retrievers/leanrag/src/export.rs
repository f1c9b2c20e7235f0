//! An export of a [`LeanragIndex`] in the reference's artefact formats (spec §3), so that an index can be
//! inspected and reused with the reference's tools:
//!
//! * `all_entities.json` — JSON Lines, one line per level: an array of `{entity_name, description,
//!   source_id, degree, parent, entity_type}` (`source_id` `|`-joined; `parent` the parent's name, `root` at
//!   the top); the last line holds the top node;
//! * `generate_relations.json` — JSON Lines `{src_tgt, tgt_src, description, weight, level}` of the
//!   inter-aggregate relations (level ≥ 1);
//! * `community.json` — JSON Lines `{entity_name, entity_description, findings, level, children, source_id}`
//!   per aggregate and the root;
//! * `relation.jsonl` — the base relations as the reference's retrieval reads them (`{src_tgt, tgt_src,
//!   description, weight}`);
//! * `kv_store_text_chunks.json` — `{chunk id: {content}}`;
//! * `entity_vectors.npy` + `entity_vectors.json` — every node's description embedding (float32; a seed
//!   node's as the seed index holds it, normalised) and, per row, `{entity_name, level, idx}`.
//!
//! Every file is written atomically.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kgrag_graph_store::VectorIndex;
use kgrag_hierarchy::{HNodeKind, NodeId, RelationKind};
use serde_json::{json, Map, Value};

use crate::index::LeanragIndex;
use crate::{LeanragError, Result};

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    kgrag_graph_store::persist::write_atomic(path, bytes).map_err(|e| LeanragError::Export {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn lines(values: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for v in values {
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

/// Writes the export into `dir` (created if missing); returns the paths written.
pub fn export_reference(index: &LeanragIndex, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| LeanragError::Export {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let h = index.hierarchy();
    let name = |id| h.node(id).map_or(String::new(), |n| n.name.clone());
    let mut out = Vec::new();

    let levels: Vec<Value> = h
        .layers
        .iter()
        .map(|layer| {
            Value::Array(
                layer
                    .iter()
                    .map(|n| {
                        json!({
                            "entity_name": n.name,
                            "description": n.description,
                            "source_id": index.node_sources(n.id).iter().map(|c| c.as_str()).collect::<Vec<_>>().join("|"),
                            "degree": n.degree,
                            "parent": n.parents.first().map_or_else(|| "root".to_owned(), |&p| name(p)),
                            "entity_type": n.entity_type,
                        })
                    })
                    .collect(),
            )
        })
        .collect();
    let p = dir.join("all_entities.json");
    write(&p, &lines(&levels))?;
    out.push(p);

    let pair = |r: &kgrag_hierarchy::HRelation| (name(r.a), name(r.b));
    let generated: Vec<Value> = h
        .relations
        .iter()
        .filter(|r| r.kind != RelationKind::Base)
        .map(|r| {
            let (a, b) = pair(r);
            json!({"src_tgt": a, "tgt_src": b, "description": r.description, "weight": r.weight, "level": r.level})
        })
        .collect();
    let p = dir.join("generate_relations.json");
    write(&p, &lines(&generated))?;
    out.push(p);

    let base: Vec<Value> = h
        .relations
        .iter()
        .filter(|r| r.kind == RelationKind::Base)
        .map(|r| {
            let (a, b) = pair(r);
            json!({"src_tgt": a, "tgt_src": b, "description": r.description, "weight": r.weight})
        })
        .collect();
    let p = dir.join("relation.jsonl");
    write(&p, &lines(&base))?;
    out.push(p);

    let communities: Vec<Value> = h
        .layers
        .iter()
        .flatten()
        .filter(|n| matches!(n.kind, HNodeKind::Aggregate | HNodeKind::Top))
        .map(|n| {
            json!({
                "entity_name": n.name,
                "entity_description": n.description,
                "findings": n.findings.iter().map(|f| json!({"summary": f.summary, "explanation": f.explanation})).collect::<Vec<_>>(),
                "level": n.id.layer,
                "children": n.children.iter().map(|&c| name(c)).collect::<Vec<_>>(),
                "source_id": index.node_sources(n.id).iter().map(|c| c.as_str()).collect::<Vec<_>>().join("|"),
            })
        })
        .collect();
    let p = dir.join("community.json");
    write(&p, &lines(&communities))?;
    out.push(p);

    let mut chunks = Map::new();
    for (id, text) in index.chunks() {
        chunks.insert(id.as_str().to_owned(), json!({ "content": text }));
    }
    let p = dir.join("kv_store_text_chunks.json");
    write(
        &p,
        &serde_json::to_vec_pretty(&Value::Object(chunks)).unwrap_or_default(),
    )?;
    out.push(p);

    // A node's vector: its own embedding, or (a seed node, which lets go of its own once indexed) its
    // row of the seed index, normalised as retrieval scores it.
    let (seeds, seed_rows) = index.seed_index();
    let seed_values = seeds.map(|s| s.values()).transpose()?;
    let seed_dim = seeds.map_or(0, |s| s.dim());
    let row_of: HashMap<NodeId, usize> = seed_rows
        .iter()
        .enumerate()
        .map(|(row, &id)| (id, row))
        .collect();
    let mut nodes: Vec<(&kgrag_hierarchy::HNode, &[f32])> = Vec::new();
    for n in h.layers.iter().flatten() {
        let own = (!n.embedding.is_empty()).then_some(n.embedding.as_slice());
        let seed = row_of.get(&n.id).and_then(|&row| {
            seed_values
                .as_deref()?
                .get(row * seed_dim..(row + 1) * seed_dim)
        });
        if let Some(v) = own.or(seed) {
            nodes.push((n, v));
        }
    }
    let dim = nodes.first().map_or(0, |(_, v)| v.len());
    let nodes: Vec<(&kgrag_hierarchy::HNode, &[f32])> =
        nodes.into_iter().filter(|(_, v)| v.len() == dim).collect();
    let mut flat = Vec::with_capacity(nodes.len() * dim);
    for (_, v) in &nodes {
        flat.extend_from_slice(v);
    }
    let names: Vec<Value> = nodes
        .iter()
        .map(|(n, _)| json!({"entity_name": n.name, "level": n.id.layer, "idx": n.id.idx}))
        .collect();
    let p = dir.join("entity_vectors.npy");
    write(
        &p,
        &kgrag_graph_store::persist::npy_f32(names.len(), dim, &flat),
    )?;
    out.push(p);
    let p = dir.join("entity_vectors.json");
    write(
        &p,
        &serde_json::to_vec_pretty(&Value::Array(names)).unwrap_or_default(),
    )?;
    out.push(p);
    Ok(out)
}
