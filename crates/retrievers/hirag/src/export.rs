//! An export of a [`HiragIndex`] in the reference's working-directory formats (`hhy-huang/HiRAG`'s
//! `_storage/`), so that an index can be inspected and reused with the reference's own tools:
//!
//! * `graph_chunk_entity_relation.graphml` — node id = entity name; node data `entity_type`,
//!   `description`, `source_id` (`<SEP>`-joined sorted chunk ids) and `clusters` (a JSON list of
//!   `{"level": L, "cluster": "<id>"}` as the reference stores it); edge data `weight` (declared double),
//!   `description`, `source_id`, `order`;
//! * `kv_store_text_chunks.json` — `{chunk id: {tokens, content, chunk_order_index, full_doc_id}}`;
//! * `kv_store_community_reports.json` — `{community id: {level, title, edges, nodes, chunk_ids,
//!   occurrence, sub_communities, report_string, report_json}}` with names and chunk ids;
//! * `vdb_entities.npy` + `vdb_entities.json` — the entity vectors (float32, rows in the JSON list's order)
//!   and, per row, `{"__id__": "ent-<md5(name)>", "entity_name": name}`.
//!
//! Every file is written atomically.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::index::HiragIndex;
use crate::{HiragError, Result};

/// The files an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFiles {
    /// The GraphML graph.
    pub graphml: PathBuf,
    /// The text chunks.
    pub text_chunks: PathBuf,
    /// The community reports.
    pub community_reports: PathBuf,
    /// The entity vectors.
    pub vectors: PathBuf,
    /// The entity vectors' names.
    pub vector_names: PathBuf,
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    kgrag_graph_store::persist::write_atomic(path, bytes).map_err(|e| HiragError::Export {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    kgrag_graph_store::graphml::escape(s, &mut out);
    out
}

fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

/// The GraphML document of the index's graph.
pub fn graphml(index: &HiragIndex) -> String {
    let g = index.graph();
    let chunk_id = |c: u32| index.chunks().get(c as usize).map_or("", |r| r.id.as_str());
    let join = |s: &[u32]| {
        s.iter()
            .map(|&c| chunk_id(c))
            .collect::<Vec<_>>()
            .join("<SEP>")
    };
    let mut out = String::from(
        "<?xml version='1.0' encoding='utf-8'?>\n\
         <graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
         xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n\
         <key id=\"d7\" for=\"edge\" attr.name=\"order\" attr.type=\"long\" />\n\
         <key id=\"d6\" for=\"edge\" attr.name=\"source_id\" attr.type=\"string\" />\n\
         <key id=\"d5\" for=\"edge\" attr.name=\"description\" attr.type=\"string\" />\n\
         <key id=\"d4\" for=\"edge\" attr.name=\"weight\" attr.type=\"double\" />\n\
         <key id=\"d3\" for=\"node\" attr.name=\"clusters\" attr.type=\"string\" />\n\
         <key id=\"d2\" for=\"node\" attr.name=\"source_id\" attr.type=\"string\" />\n\
         <key id=\"d1\" for=\"node\" attr.name=\"description\" attr.type=\"string\" />\n\
         <key id=\"d0\" for=\"node\" attr.name=\"entity_type\" attr.type=\"string\" />\n\
         <graph edgedefault=\"undirected\">\n",
    );
    for n in g.nodes() {
        let clusters: Vec<Value> = n
            .clusters
            .iter()
            .map(|&(level, id)| json!({"level": level, "cluster": id.to_string()}))
            .collect();
        out.push_str(&format!(
            "<node id=\"{}\">\n<data key=\"d0\">{}</data>\n<data key=\"d1\">{}</data>\n<data key=\"d2\">{}</data>\n",
            xml_escape(&n.name),
            xml_escape(&n.entity_type),
            xml_escape(&n.description),
            xml_escape(&join(&n.sources)),
        ));
        if !clusters.is_empty() {
            out.push_str(&format!(
                "<data key=\"d3\">{}</data>\n",
                xml_escape(&Value::Array(clusters).to_string())
            ));
        }
        out.push_str("</node>\n");
    }
    for e in g.edges() {
        let (Some(a), Some(b)) = (g.node(e.a), g.node(e.b)) else {
            continue;
        };
        out.push_str(&format!(
            "<edge source=\"{}\" target=\"{}\">\n<data key=\"d4\">{:?}</data>\n<data key=\"d5\">{}</data>\n<data key=\"d6\">{}</data>\n<data key=\"d7\">{}</data>\n</edge>\n",
            xml_escape(&a.name),
            xml_escape(&b.name),
            e.weight,
            xml_escape(&e.description),
            xml_escape(&join(&e.sources)),
            e.order
        ));
    }
    out.push_str("</graph></graphml>\n");
    out
}

/// Writes the export into `dir` (created if missing).
pub fn export_reference(index: &HiragIndex, dir: &Path) -> Result<ExportFiles> {
    std::fs::create_dir_all(dir).map_err(|e| HiragError::Export {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let files = ExportFiles {
        graphml: dir.join("graph_chunk_entity_relation.graphml"),
        text_chunks: dir.join("kv_store_text_chunks.json"),
        community_reports: dir.join("kv_store_community_reports.json"),
        vectors: dir.join("vdb_entities.npy"),
        vector_names: dir.join("vdb_entities.json"),
    };
    write(&files.graphml, graphml(index).as_bytes())?;

    let mut chunks = Map::new();
    for c in index.chunks() {
        chunks.insert(
            c.id.as_str().to_owned(),
            json!({
                "tokens": c.tokens,
                "content": c.content,
                "chunk_order_index": c.order,
                "full_doc_id": c.doc.as_str(),
            }),
        );
    }
    write(&files.text_chunks, &to_json(&Value::Object(chunks)))?;

    let g = index.graph();
    let name = |n: u32| g.node(n).map_or(String::new(), |n| n.name.clone());
    let mut reports = Map::new();
    for c in index.communities() {
        let report_json = json!({
            "title": c.report.title,
            "summary": c.report.summary,
            "rating": c.report.rating,
            "rating_explanation": c.report.rating_explanation,
            "findings": c.report.findings.iter().map(|f| json!({"summary": f.summary, "explanation": f.explanation})).collect::<Vec<_>>(),
        });
        reports.insert(
            c.id.to_string(),
            json!({
                "level": c.level,
                "title": c.title,
                "edges": index.community_edges(c).iter().map(|&(a, b)| json!([name(a), name(b)])).collect::<Vec<_>>(),
                "nodes": c.nodes.iter().map(|&n| name(n)).collect::<Vec<_>>(),
                "chunk_ids": c.chunk_ids.iter().filter_map(|&x| index.chunks().get(x as usize).map(|r| r.id.as_str().to_owned())).collect::<Vec<_>>(),
                "occurrence": c.occurrence,
                "sub_communities": c.sub_communities.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "report_string": c.report_string,
                "report_json": report_json,
            }),
        );
    }
    write(&files.community_reports, &to_json(&Value::Object(reports)))?;

    let store = index.entity_vectors();
    let dim = store.dim().unwrap_or(0);
    let data = match store.index() {
        Some(i) => i.values()?,
        None => std::borrow::Cow::Borrowed(&[][..]),
    };
    write(
        &files.vectors,
        &kgrag_graph_store::persist::npy_f32(store.len(), dim, &data),
    )?;
    let names: Vec<Value> = (0..store.len())
        .map(|row| {
            json!({
                "__id__": store.key(row).unwrap_or(""),
                "entity_name": index.entity_of_row(row).map(name).unwrap_or_default(),
            })
        })
        .collect();
    write(&files.vector_names, &to_json(&Value::Array(names)))?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_is_escaped() {
        assert_eq!(xml_escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
