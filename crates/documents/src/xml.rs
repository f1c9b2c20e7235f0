//! XML of the Office and OpenDocument packages through roxmltree: names compared without their namespace
//! prefix, a cap on nodes, no external entities (roxmltree never fetches any).

use roxmltree::{Document, Node, ParsingOptions};

use crate::{corrupt, Result};

/// The most nodes one XML part may have (a 2 GiB part of empty cells stops here, not in memory).
const MAX_NODES: u32 = 50_000_000;

/// Parses `text` (part `name` of a `format` file).
pub(crate) fn parse<'a>(text: &'a str, format: &'static str, name: &str) -> Result<Document<'a>> {
    let options = ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_NODES,
    };
    Document::parse_with_options(text, options)
        .map_err(|e| corrupt(format, format!("{name} is not well-formed XML ({e})")))
}

/// The element's name without its namespace.
pub(crate) fn local<'a>(node: &Node<'a, '_>) -> &'a str {
    node.tag_name().name()
}

/// Whether `node` is an element named `name` (any namespace).
pub(crate) fn is(node: &Node, name: &str) -> bool {
    node.is_element() && node.tag_name().name() == name
}

/// The value of the attribute `name` (any namespace).
pub(crate) fn attr<'a>(node: &Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.attributes()
        .find(|a| a.name() == name)
        .map(|a| a.value())
}

/// The first child element named `name`.
pub(crate) fn child<'a, 'i>(node: &Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| is(c, name))
}

/// The first descendant element named `name` (the node itself included).
pub(crate) fn descendant<'a, 'i>(node: &Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.descendants().find(|c| is(c, name))
}

/// A package's relationships part (`_rels/*.rels`): relationship id → (type, target).
pub(crate) fn relationships(
    text: &str,
    format: &'static str,
    name: &str,
) -> Result<Vec<(String, String, String)>> {
    let doc = parse(text, format, name)?;
    Ok(doc
        .root_element()
        .children()
        .filter(|n| is(n, "Relationship"))
        .filter_map(|n| {
            Some((
                attr(&n, "Id")?.to_owned(),
                attr(&n, "Type").unwrap_or("").to_owned(),
                attr(&n, "Target")?.to_owned(),
            ))
        })
        .collect())
}

/// The relationships part of the part at `path` (`word/document.xml` → `word/_rels/document.xml.rels`).
pub(crate) fn rels_path(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/_rels/{file}.rels"),
        None => format!("_rels/{path}.rels"),
    }
}
