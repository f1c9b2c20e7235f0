//! PowerPoint (`.pptx`): the slides in the presentation's order, each one unit: its title as a heading, the
//! text of its shapes (groups entered; a text box of several paragraphs as list items, by their level), its
//! tables, then its speaker notes (`Notes: …`). Slide-number fields are left out.

use roxmltree::Node;

use crate::builder::Builder;
use crate::xml::{self, attr, child, is, local};
use crate::zipfile::{self, Zip};
use crate::{Deadline, DocumentError, Extracted, Format, Limits, Result};

const FORMAT: &str = "PPTX";

pub(crate) fn read(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let mut zip = Zip::open(bytes, FORMAT, limits)?;
    let pres_path = "ppt/presentation.xml";
    let pres = zip.need_text(pres_path)?;
    let rels_path = xml::rels_path(pres_path);
    let rels = match zip.text(&rels_path)? {
        Some(t) => xml::relationships(&t, FORMAT, &rels_path)?,
        None => Vec::new(),
    };
    let dom = xml::parse(&pres, FORMAT, pres_path)?;
    let mut slides = Vec::new();
    if let Some(list) = xml::descendant(&dom.root_element(), "sldIdLst") {
        for id in list.children().filter(|n| is(n, "sldId")) {
            // `r:id`, beside the unprefixed `id`.
            let Some(rid) = id
                .attributes()
                .find(|a| a.name() == "id" && a.namespace().is_some())
                .map(|a| a.value())
            else {
                continue;
            };
            if let Some((_, _, target)) = rels.iter().find(|(r, _, _)| r == rid) {
                slides.push(zipfile::join("ppt", target));
            }
        }
    }
    if slides.is_empty() {
        // No list: the slide parts by number.
        let mut names: Vec<(u32, String)> = zip
            .names()
            .into_iter()
            .filter_map(|n| {
                let num = n
                    .strip_prefix("ppt/slides/slide")?
                    .strip_suffix(".xml")?
                    .parse()
                    .ok()?;
                Some((num, n))
            })
            .collect();
        names.sort();
        slides = names.into_iter().map(|(_, n)| n).collect();
    }
    if slides.len() > limits.max_pages as usize {
        return Err(DocumentError::Limit(format!(
            "{} slides, over the limit of {} ([documents] max_pages)",
            slides.len(),
            limits.max_pages
        )));
    }
    let title = match zip.text("docProps/core.xml")? {
        Some(t) => crate::docx::core_title(&t),
        None => None,
    };
    let mut out = Builder::new(deadline);
    for (i, path) in slides.iter().enumerate() {
        out.set_page(i as u32 + 1);
        out.end_sections();
        let Some(text) = zip.text(path)? else {
            continue;
        };
        let slide = xml::parse(&text, FORMAT, path)?;
        read_slide(&slide.root_element(), &mut out)?;
        // Speaker notes, through the slide's relationships.
        let rels_path = xml::rels_path(path);
        if let Some(r) = zip.text(&rels_path)? {
            for (_, kind, target) in xml::relationships(&r, FORMAT, &rels_path)? {
                if kind.ends_with("/notesSlide") {
                    let notes_path = zipfile::join(zipfile::dir_of(path), &target);
                    if let Some(n) = zip.text(&notes_path)? {
                        let notes = xml::parse(&n, FORMAT, &notes_path)?;
                        read_notes(&notes.root_element(), &mut out);
                    }
                }
            }
        }
        out.check()?;
    }
    Ok(out.finish(Format::Pptx, title, slides.len() as u32))
}

/// A shape's placeholder type (`title`, `body`, …), if it is a placeholder.
fn placeholder<'a>(shape: &Node<'a, '_>) -> Option<&'a str> {
    let nv = shape.children().find(|c| local(c).starts_with("nv"))?;
    let ph = xml::descendant(&nv, "ph")?;
    Some(attr(&ph, "type").unwrap_or("body"))
}

fn read_slide(root: &Node, out: &mut Builder) -> Result<()> {
    let Some(tree) = xml::descendant(root, "spTree") else {
        return Ok(());
    };
    // The title first, whatever its place in the shape tree.
    let mut titled = false;
    for sp in tree.descendants().filter(|n| is(n, "sp")) {
        if matches!(placeholder(&sp), Some("title" | "ctrTitle")) {
            let text = paragraphs(&sp).join(" ");
            if !text.trim().is_empty() && !titled {
                out.heading(2, &text);
                titled = true;
            }
        }
    }
    shapes(&tree, out);
    Ok(())
}

fn shapes(tree: &Node, out: &mut Builder) {
    for shape in tree.children().filter(|n| n.is_element()) {
        match local(&shape) {
            "sp" => {
                if matches!(placeholder(&shape), Some("title" | "ctrTitle" | "sldNum")) {
                    continue;
                }
                let paras = paragraph_levels(&shape);
                if paras.len() == 1 {
                    out.paragraph(&paras[0].1);
                } else {
                    for (level, text) in &paras {
                        out.list_item(*level, text);
                    }
                }
            }
            "grpSp" => shapes(&shape, out),
            "graphicFrame" => {
                if let Some(tbl) = xml::descendant(&shape, "tbl") {
                    let rows: Vec<Vec<String>> = tbl
                        .children()
                        .filter(|n| is(n, "tr"))
                        .map(|tr| {
                            tr.children()
                                .filter(|n| is(n, "tc"))
                                .map(|tc| paragraphs(&tc).join(" "))
                                .collect()
                        })
                        .collect();
                    out.table(&rows);
                }
            }
            "AlternateContent" => {
                if let Some(choice) = child(&shape, "Choice") {
                    shapes(&choice, out);
                }
            }
            _ => {}
        }
    }
}

fn read_notes(root: &Node, out: &mut Builder) {
    for sp in root.descendants().filter(|n| is(n, "sp")) {
        if placeholder(&sp) == Some("body") {
            let text = paragraphs(&sp).join(" ");
            if !text.trim().is_empty() {
                out.paragraph(&format!("Notes: {text}"));
            }
        }
    }
}

/// The non-empty paragraphs of a shape's text body, each with its list level.
fn paragraph_levels(shape: &Node) -> Vec<(usize, String)> {
    let Some(body) = xml::descendant(shape, "txBody") else {
        return Vec::new();
    };
    body.children()
        .filter(|n| is(n, "p"))
        .filter_map(|p| {
            let level = child(&p, "pPr")
                .and_then(|pr| attr(&pr, "lvl"))
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let text = paragraph_text(&p);
            (!text.trim().is_empty()).then_some((level, text))
        })
        .collect()
}

/// The non-empty paragraphs' texts under `node`.
fn paragraphs(node: &Node) -> Vec<String> {
    node.descendants()
        .filter(|n| is(n, "p"))
        .map(|p| paragraph_text(&p))
        .filter(|t| !t.trim().is_empty())
        .collect()
}

fn paragraph_text(p: &Node) -> String {
    let mut s = String::new();
    for c in p.children().filter(|n| n.is_element()) {
        match local(&c) {
            "r" => {
                if let Some(t) = child(&c, "t").and_then(|t| t.text()) {
                    s.push_str(t);
                }
            }
            "fld" if attr(&c, "type") != Some("slidenum") => {
                if let Some(t) = child(&c, "t").and_then(|t| t.text()) {
                    s.push_str(t);
                }
            }
            "br" => s.push(' '),
            _ => {}
        }
    }
    s
}
