//! The context's CSV tables and their o200k token counts without tokenising each context.
//!
//! A table is `-----Name-----`, a csv fence, a header row and one row per item (`id,\t<cells>`; see
//! [`csv_table`]). Tokenisation never joins text across the end of a row: o200k's pre-tokeniser ends a piece
//! at a newline unless the next character is `\r`, `\n` or `/`, and the character after a row's newline is
//! always the next row's id digit or the closing fence. So a context's token count is the sum of its
//! tables' head lines, the row ids, each row's remainder `,\t<cells>\n` — a property of the item alone,
//! counted once when the index is built — and the closing fences. The tests compare this sum with a
//! full count of the rendered text for every mode.

use kgrag_text::table::{csv_table, Cell};

use crate::graph::HiGraph;
use crate::index::{ChunkRecord, CommunityRecord};

/// A float as Python's `str()` writes it (`9.0`, `0.5`), as the reference's CSV tables show weights.
pub(crate) fn py_float(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// Header of the entity tables.
pub(crate) const ENTITY_HEADER: &[&str] = &["id", "entity", "type", "description", "rank"];
/// Header of the relation tables.
pub(crate) const RELATION_HEADER: &[&str] =
    &["id", "source", "target", "description", "weight", "rank"];
/// Header of the report and source tables.
pub(crate) const CONTENT_HEADER: &[&str] = &["id", "content"];

/// An entity row's cells after the id.
pub(crate) fn entity_cells(g: &HiGraph, n: u32) -> Vec<Cell> {
    g.node(n).map_or_else(Vec::new, |node| {
        vec![
            Cell::Text(node.name.clone()),
            Cell::Text(node.entity_type.clone()),
            Cell::Text(node.description.clone()),
            Cell::num(g.degree(n)),
        ]
    })
}

/// A relation row's cells after the id.
pub(crate) fn edge_cells(g: &HiGraph, e: u32) -> Vec<Cell> {
    let Some(edge) = g.edge(e) else {
        return Vec::new();
    };
    let name = |n: u32| g.node(n).map_or_else(String::new, |x| x.name.clone());
    vec![
        Cell::Text(name(edge.a)),
        Cell::Text(name(edge.b)),
        Cell::Text(edge.description.clone()),
        Cell::Num(py_float(edge.weight)),
        Cell::num(g.degree(edge.a) + g.degree(edge.b)),
    ]
}

/// A report row's cell after the id: the rendered report, its newlines turned into spaces when `flatten`.
pub(crate) fn report_cells(c: &CommunityRecord, flatten: bool) -> Vec<Cell> {
    let content = if flatten {
        c.report_string.replace('\n', " ")
    } else {
        c.report_string.clone()
    };
    vec![Cell::Text(content)]
}

/// A source row's cell after the id.
pub(crate) fn chunk_cells(c: &ChunkRecord) -> Vec<Cell> {
    vec![Cell::Text(c.content.clone())]
}

/// o200k tokens of a row's remainder `,\t<cells>\n` exactly as [`csv_table`] writes it.
pub(crate) fn row_rest_tokens(cells: Vec<Cell>) -> u32 {
    let mut row = vec![Cell::num(0)];
    row.extend(cells);
    let table = csv_table("x", &["id"], &[row]);
    let head = table_head("x", &["id"]).len() + "0".len();
    let rest = table.get(head..table.len().saturating_sub(3)).unwrap_or("");
    crate::tokens(rest) as u32
}

/// One table of a context: its rows' cells (after the id) and their remainders' token counts.
pub(crate) struct Section {
    pub(crate) name: &'static str,
    pub(crate) header: &'static [&'static str],
    pub(crate) rows: Vec<(Vec<Cell>, u32)>,
}

/// A table's text up to its first row: the name line, the fence and the header row with its newline.
fn table_head(name: &str, header: &[&str]) -> String {
    let empty = csv_table(name, header, &[]);
    let head = empty.strip_suffix("```").unwrap_or(&empty);
    head.to_owned()
}

/// The rendered context and its o200k token count (see the module docs). As the reference's f-strings
/// write it: a newline, the tables joined by newlines, a newline after the last closing fence.
pub(crate) fn render(sections: Vec<Section>) -> (String, usize) {
    let mut texts = Vec::with_capacity(sections.len());
    // The leading newline is a piece of its own (a table starts with `-`); every closing fence is followed
    // by a newline and ends its piece there.
    let mut tokens = crate::tokens("\n");
    for section in sections {
        tokens += crate::tokens(&table_head(section.name, section.header));
        let mut rows = Vec::with_capacity(section.rows.len());
        for (i, (cells, rest)) in section.rows.into_iter().enumerate() {
            tokens += crate::tokens(&i.to_string()) + rest as usize;
            let mut row = vec![Cell::num(i)];
            row.extend(cells);
            rows.push(row);
        }
        tokens += crate::tokens("```\n");
        texts.push(csv_table(section.name, section.header, &rows));
    }
    (format!("\n{}\n", texts.join("\n")), tokens)
}
