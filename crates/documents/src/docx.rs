//! Word documents (`.docx`): the main part's paragraphs, headings (by the paragraph style's name — `Title`,
//! `heading N` — or outline level, through `basedOn`), list items (numbered paragraphs or `List …` styles),
//! tables and text boxes, in document order. Deleted text, field codes and fallback copies of drawings are
//! left out; headers, footers and comments are boilerplate for retrieval and are not read.
//!
//! Pages: Word writes `lastRenderedPageBreak` where its last layout broke pages; when the file has them they
//! are the page numbers, else explicit breaks (`w:br w:type="page"`, `pageBreakBefore`) count.

use std::collections::HashMap;

use roxmltree::Node;

use crate::builder::Builder;
use crate::xml::{self, attr, child, is, local};
use crate::zipfile::{self, Zip};
use crate::{Deadline, Extracted, Format, Limits, Result};

const FORMAT: &str = "DOCX";

/// What a paragraph style makes of a paragraph.
#[derive(Debug, Clone, Copy, Default)]
struct StyleInfo {
    heading: Option<u8>,
    list: bool,
}

pub(crate) fn read(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let mut zip = Zip::open(bytes, FORMAT, limits)?;
    let main = main_part(&mut zip)?;
    let styles = match zip.text("word/styles.xml")? {
        Some(t) => styles(&t)?,
        None => HashMap::new(),
    };
    let title = match zip.text("docProps/core.xml")? {
        Some(t) => core_title(&t),
        None => None,
    };
    let text = zip.need_text(&main)?;
    let dom = xml::parse(&text, FORMAT, &main)?;
    let body = xml::descendant(&dom.root_element(), "body")
        .ok_or_else(|| crate::corrupt(FORMAT, format!("{main} has no body")))?;
    let mut walker = Walker {
        out: Builder::new(deadline),
        styles,
        rendered: text.contains("lastRenderedPageBreak"),
        page: 1,
        max_pages: limits.max_pages,
    };
    walker.out.set_page(1);
    for node in body.children() {
        walker.block(node)?;
    }
    let pages = walker.page;
    Ok(walker.out.finish(Format::Docx, title, pages))
}

/// The main document part, as the package's relationships name it (else `word/document.xml`).
fn main_part(zip: &mut Zip) -> Result<String> {
    if let Some(rels) = zip.text("_rels/.rels")? {
        for (_, kind, target) in xml::relationships(&rels, FORMAT, "_rels/.rels")? {
            if kind.ends_with("/officeDocument") {
                let path = zipfile::join("", &target);
                if zip.has(&path) {
                    return Ok(path);
                }
            }
        }
    }
    Ok("word/document.xml".to_owned())
}

/// `dc:title` of the core properties.
pub(crate) fn core_title(text: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(text).ok()?;
    let t = xml::descendant(&doc.root_element(), "title")?;
    let s: String = t.text()?.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

/// Paragraph styles: heading levels (`Title` 1, `heading N` N, else the outline level + 1) and list styles,
/// inherited through `basedOn`.
fn styles(text: &str) -> Result<HashMap<String, StyleInfo>> {
    let doc = xml::parse(text, FORMAT, "word/styles.xml")?;
    let mut own: HashMap<String, (StyleInfo, Option<String>)> = HashMap::new();
    for s in doc.root_element().children().filter(|n| is(n, "style")) {
        let Some(id) = attr(&s, "styleId") else {
            continue;
        };
        let name = child(&s, "name")
            .and_then(|n| attr(&n, "val"))
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut info = StyleInfo::default();
        if name == "title" {
            info.heading = Some(1);
        } else if let Some(n) = name.strip_prefix("heading ") {
            info.heading = n.trim().parse::<u8>().ok().filter(|l| (1..=9).contains(l));
        }
        if info.heading.is_none() {
            info.heading = child(&s, "pPr")
                .and_then(|p| child(&p, "outlineLvl"))
                .and_then(|o| attr(&o, "val"))
                .and_then(|v| v.parse::<u8>().ok())
                .filter(|&l| l < 9)
                .map(|l| l + 1);
        }
        info.list = name.starts_with("list") && name != "list paragraph"
            || child(&s, "pPr").is_some_and(|p| child(&p, "numPr").is_some());
        let based = child(&s, "basedOn")
            .and_then(|b| attr(&b, "val"))
            .map(str::to_owned);
        own.insert(id.to_owned(), (info, based));
    }
    let mut resolved = HashMap::new();
    for id in own.keys() {
        let mut info = StyleInfo::default();
        let mut at = Some(id.clone());
        let mut depth = 0;
        while let Some(cur) = at {
            let Some((i, based)) = own.get(&cur) else {
                break;
            };
            info.heading = info.heading.or(i.heading);
            info.list |= i.list;
            at = based.clone();
            depth += 1;
            if depth > 32 {
                break;
            }
        }
        resolved.insert(id.clone(), info);
    }
    Ok(resolved)
}

struct Walker {
    out: Builder,
    styles: HashMap<String, StyleInfo>,
    /// The file has Word's rendered page breaks: they alone count.
    rendered: bool,
    page: u32,
    max_pages: u32,
}

/// A paragraph's text, split where its pages break.
#[derive(Default)]
struct Runs {
    pieces: Vec<(String, u32)>,
}

impl Walker {
    fn next_page(&mut self) -> Result<()> {
        self.page += 1;
        if self.page > self.max_pages {
            return Err(crate::DocumentError::Limit(format!(
                "more than {} pages ([documents] max_pages)",
                self.max_pages
            )));
        }
        Ok(())
    }

    fn block(&mut self, node: Node) -> Result<()> {
        if !node.is_element() {
            return Ok(());
        }
        self.out.check()?;
        match local(&node) {
            "p" => self.paragraph(node),
            "tbl" => self.table(node),
            "sdt" | "sdtContent" | "customXml" | "ins" | "moveTo" => {
                let inner: Vec<Node> = match child(&node, "sdtContent") {
                    Some(c) => c.children().collect(),
                    None => node.children().collect(),
                };
                for c in inner {
                    self.block(c)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn paragraph(&mut self, p: Node) -> Result<()> {
        let ppr = child(&p, "pPr");
        let style = ppr
            .and_then(|pr| child(&pr, "pStyle"))
            .and_then(|s| attr(&s, "val"))
            .and_then(|id| self.styles.get(id).copied())
            .unwrap_or_default();
        let outline = ppr
            .and_then(|pr| child(&pr, "outlineLvl"))
            .and_then(|o| attr(&o, "val"))
            .and_then(|v| v.parse::<u8>().ok())
            .filter(|&l| l < 9)
            .map(|l| l + 1);
        let numbered = ppr.and_then(|pr| child(&pr, "numPr"));
        let depth = numbered
            .and_then(|n| child(&n, "ilvl"))
            .and_then(|l| attr(&l, "val"))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        if !self.rendered && ppr.is_some_and(|pr| child(&pr, "pageBreakBefore").is_some()) {
            self.next_page()?;
        }
        let mut runs = Runs::default();
        let mut current = String::new();
        self.runs(p, &mut runs, &mut current)?;
        runs.pieces.push((current, self.page));
        let text: String = runs
            .pieces
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        if !text.trim().is_empty() {
            let first_page = runs
                .pieces
                .iter()
                .find(|(t, _)| !t.trim().is_empty())
                .map_or(self.page, |(_, pg)| *pg);
            if let Some(level) = style.heading.or(outline) {
                self.out.set_page(first_page);
                self.out.heading(level.min(6), &text);
            } else if numbered.is_some() || style.list {
                self.out.set_page(first_page);
                self.out.list_item(depth, &text);
            } else {
                let pieces: Vec<(&str, u32)> = runs
                    .pieces
                    .iter()
                    .map(|(t, pg)| (t.as_str(), *pg))
                    .collect();
                self.out.paragraph_pieces(&pieces);
            }
        }
        self.out.set_page(self.page);
        Ok(())
    }

    /// The text under `node` into `current`; a page break closes the current piece.
    fn runs(&mut self, node: Node, runs: &mut Runs, current: &mut String) -> Result<()> {
        for c in node.children() {
            if c.is_text() {
                continue;
            }
            if !c.is_element() {
                continue;
            }
            match local(&c) {
                "t" => {
                    if let Some(t) = c.text() {
                        current.push_str(t);
                    }
                }
                "tab" | "cr" => current.push(' '),
                "br" => {
                    if attr(&c, "type") == Some("page") && !self.rendered {
                        runs.pieces.push((std::mem::take(current), self.page));
                        self.next_page()?;
                    } else {
                        current.push(' ');
                    }
                }
                "lastRenderedPageBreak" => {
                    if self.rendered {
                        runs.pieces.push((std::mem::take(current), self.page));
                        self.next_page()?;
                    }
                }
                "noBreakHyphen" => current.push('-'),
                "pPr" | "rPr" | "del" | "moveFrom" | "delText" | "instrText" | "fldChar"
                | "commentReference" | "footnoteReference" | "endnoteReference" => {}
                "AlternateContent" => {
                    // The first choice only: the fallback repeats the same text for older readers.
                    if let Some(choice) = child(&c, "Choice").or_else(|| child(&c, "Fallback")) {
                        self.runs(choice, runs, current)?;
                    }
                }
                "txbxContent" => {
                    // A text box's paragraphs: a piece of their own after the text before it.
                    let mut inner = String::new();
                    let mut inner_runs = Runs::default();
                    for p in c.children().filter(|n| is(n, "p")) {
                        self.runs(p, &mut inner_runs, &mut inner)?;
                        inner.push(' ');
                    }
                    if !inner.trim().is_empty() {
                        runs.pieces.push((std::mem::take(current), self.page));
                        runs.pieces.push((inner, self.page));
                    }
                }
                _ => self.runs(c, runs, current)?,
            }
        }
        Ok(())
    }

    fn table(&mut self, tbl: Node) -> Result<()> {
        let mut rows = Vec::new();
        for tr in tbl.children().filter(|n| is(n, "tr")) {
            let mut row = Vec::new();
            for tc in tr.children().filter(|n| is(n, "tc") || is(n, "sdt")) {
                let tc = if is(&tc, "sdt") {
                    match xml::descendant(&tc, "tc") {
                        Some(t) => t,
                        None => continue,
                    }
                } else {
                    tc
                };
                let mut runs = Runs::default();
                let mut cell = String::new();
                for p in tc.descendants().filter(|n| is(n, "p")) {
                    self.runs(p, &mut runs, &mut cell)?;
                    cell.push(' ');
                }
                for (t, _) in runs.pieces {
                    cell.push(' ');
                    cell.push_str(&t);
                }
                row.push(cell);
            }
            rows.push(row);
            self.out.check()?;
        }
        self.out.set_page(self.page);
        self.out.table(&rows);
        Ok(())
    }
}
