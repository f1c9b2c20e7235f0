//! GraphML export (for Gephi, Cytoscape, networkx, igraph).
//!
//! Node attributes: `key`, `kind`, `name`, `entity_type`, `description`, `layer`, `sources` (chunk ids
//! joined by `,`). Edge attributes: `kinds` (facet kinds joined by `,`), `weight` (under the weighting
//! given to the export), `fact_count`, `synonymy` (cosine, when present), `description` (relation or
//! aggregate), `relation_weight`. Node ids are `n<index>`, in index order; edges in edge index order, lower
//! endpoint as source.

use std::io::Write;
use std::path::Path;

use crate::{persist, EdgeWeighting, KnowledgeGraph, Result, StoreError};

/// Appends `s` to `out` escaped for XML text and attribute values (characters XML 1.0 cannot carry become
/// U+FFFD).
pub fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot carry at all are replaced.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            '\u{FFFE}' | '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

fn data(out: &mut String, key: &str, value: &str) {
    out.push_str("      <data key=\"");
    out.push_str(key);
    out.push_str("\">");
    escape(value, out);
    out.push_str("</data>\n");
}

/// Renders the graph as a GraphML document.
pub fn to_graphml(graph: &KnowledgeGraph, weighting: EdgeWeighting) -> String {
    let mut s = String::with_capacity(256 + graph.node_count() * 200 + graph.edge_count() * 120);
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str("<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n");
    for (id, domain, ty) in [
        ("key", "node", "string"),
        ("kind", "node", "string"),
        ("name", "node", "string"),
        ("entity_type", "node", "string"),
        ("description", "node", "string"),
        ("layer", "node", "int"),
        ("sources", "node", "string"),
        ("kinds", "edge", "string"),
        ("weight", "edge", "double"),
        ("fact_count", "edge", "int"),
        ("synonymy", "edge", "double"),
        ("edge_description", "edge", "string"),
        ("relation_weight", "edge", "double"),
    ] {
        let name = if id == "edge_description" {
            "description"
        } else {
            id
        };
        s.push_str(&format!(
            "  <key id=\"{id}\" for=\"{domain}\" attr.name=\"{name}\" attr.type=\"{ty}\"/>\n"
        ));
    }
    s.push_str("  <graph id=\"kgrag\" edgedefault=\"undirected\">\n");
    for idx in graph.node_indices() {
        let Some(n) = graph.node(idx) else { continue };
        s.push_str(&format!("    <node id=\"n{}\">\n", idx.index()));
        data(&mut s, "key", &n.key);
        data(&mut s, "kind", n.kind.as_str());
        data(&mut s, "name", &n.name);
        data(&mut s, "entity_type", &n.entity_type);
        data(&mut s, "description", &n.description);
        data(&mut s, "layer", &n.layer.to_string());
        let sources: Vec<&str> = n.sources.iter().map(|c| c.as_str()).collect();
        data(&mut s, "sources", &sources.join(","));
        s.push_str("    </node>\n");
    }
    for (e, lo, hi, edge) in graph.edges() {
        s.push_str(&format!(
            "    <edge id=\"e{}\" source=\"n{}\" target=\"n{}\">\n",
            e.index(),
            lo.index(),
            hi.index()
        ));
        let kinds: Vec<&str> = edge.kinds().map(|k| k.as_str()).collect();
        data(&mut s, "kinds", &kinds.join(","));
        data(&mut s, "weight", &edge.weight(weighting).to_string());
        data(&mut s, "fact_count", &edge.fact_count().to_string());
        if let Some(c) = edge.synonymy.and_then(|x| x.cosine()) {
            data(&mut s, "synonymy", &c.to_string());
        }
        let rel = edge.relation.as_ref().or(edge.aggregate.as_ref());
        if let Some(r) = rel {
            data(&mut s, "edge_description", &r.description);
            data(&mut s, "relation_weight", &r.weight.to_string());
        }
        s.push_str("    </edge>\n");
    }
    s.push_str("  </graph>\n</graphml>\n");
    s
}

/// Writes [`to_graphml`] to `path` atomically.
pub fn write_graphml(graph: &KnowledgeGraph, weighting: EdgeWeighting, path: &Path) -> Result<()> {
    let text = to_graphml(graph, weighting);
    let mut buf = Vec::with_capacity(text.len());
    buf.write_all(text.as_bytes()).map_err(|e| StoreError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    persist::write_atomic(path, &buf)
}
