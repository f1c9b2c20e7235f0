//! Web pages (`.html`, `.htm`) and the XHTML of EPUB chapters.
//!
//! A small tolerant parser builds a tree the way browsers close what authors leave open (`<p>` before a
//! block, `<li>` before the next item, cells and rows, void elements); script, style and other raw text is
//! skipped. Then the page's boilerplate goes:
//!
//! 1. elements that are never content — `nav`, `aside`, `footer`, `form`, `button`, `iframe`, `svg`, …, the
//!    page's own `header`, anything `hidden` or `aria-hidden` or with a landmark role other than `main`
//!    (`navigation`, `banner`, `contentinfo`, `complementary`, `search`, dialogs);
//! 2. elements whose class or id names boilerplate (`nav`, `menu`, `breadcrumb`, `footer`, `sidebar`,
//!    `cookie`, `consent`, `gdpr`, `banner`, `popup`, `modal`, `newsletter`, `share`, `social`, `related`,
//!    `comments`, `advert`, `promo`, …), unless they also name content (`article`, `content`, `post`,
//!    `entry`, `story`, `main`);
//! 3. the content root: `<main>` (or `role="main"`), else the `<article>` with the most text, else the
//!    element holding the most paragraph text (Readability's scoring: a paragraph's text counts for its
//!    parent, half for the grandparent), unless that drops most of the page's text;
//! 4. inside it, lists and blocks that are mostly links (link text over 60 % of at least three links).
//!
//! What is left is written as blocks: headings, paragraphs, list items, tables, preformatted text.

mod boilerplate;
mod dom;

use std::collections::HashMap;

use crate::builder::Builder;
use crate::{Deadline, Extracted, Format, Result};

use boilerplate::{content_root, prune, reachable, text_stats};
pub(crate) use dom::{decode, parse, Dom, Node};

struct Writer<'d> {
    dom: &'d Dom,
    kept: HashMap<usize, Vec<usize>>,
    out: Builder,
    inline: String,
    list_depth: usize,
    /// Drop lists and blocks that are mostly links.
    link_filter: bool,
}

impl Writer<'_> {
    fn children(&self, i: usize) -> Vec<usize> {
        self.kept.get(&i).cloned().unwrap_or_default()
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.inline);
        if !text.trim().is_empty() {
            self.out.paragraph(&text);
        }
    }

    /// The inline text of `i` (every descendant's text, line breaks as spaces).
    fn text_of(&self, i: usize) -> String {
        let mut s = String::new();
        let mut stack = vec![i];
        while let Some(n) = stack.pop() {
            match self.dom.nodes.get(n) {
                Some(Node::Text(t)) => s.push_str(t),
                Some(Node::Element { name, .. }) => {
                    if matches!(name.as_str(), "br" | "td" | "th" | "li" | "p" | "div") {
                        s.push(' ');
                    }
                    for &c in self
                        .kept
                        .get(&n)
                        .map_or(&[][..], Vec::as_slice)
                        .iter()
                        .rev()
                    {
                        stack.push(c);
                    }
                }
                None => {}
            }
        }
        s
    }

    fn mostly_links(&self, i: usize) -> bool {
        if !self.link_filter {
            return false;
        }
        let (all, linked, links) = text_stats(self.dom, &self.kept, i);
        links >= 3 && linked * 10 > all * 6
    }

    fn walk(&mut self, i: usize) -> Result<()> {
        self.out.check()?;
        match self.dom.nodes.get(i) {
            Some(Node::Text(t)) => {
                self.inline.push_str(t);
                return Ok(());
            }
            None => return Ok(()),
            Some(Node::Element { .. }) => {}
        }
        let name = self.dom.name(i).to_owned();
        match name.as_str() {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.flush();
                let level = name.as_bytes()[1] - b'0';
                let text = self.text_of(i);
                self.out.heading(level, &text);
            }
            "ul" | "ol" | "menu" | "dl" => {
                self.flush();
                if self.mostly_links(i) {
                    return Ok(());
                }
                self.list_depth += 1;
                for c in self.children(i) {
                    self.walk(c)?;
                }
                self.list_depth -= 1;
                self.flush();
            }
            "li" | "dt" | "dd" => {
                self.flush();
                // The item's own text; nested lists after it.
                let mut own = String::new();
                let mut nested = Vec::new();
                for c in self.children(i) {
                    if matches!(self.dom.name(c), "ul" | "ol" | "dl" | "table" | "pre") {
                        nested.push(c);
                    } else {
                        own.push_str(&self.text_of(c));
                        own.push(' ');
                    }
                }
                self.out.list_item(self.list_depth.saturating_sub(1), &own);
                for c in nested {
                    self.walk(c)?;
                }
            }
            "table" => {
                self.flush();
                let rows = self.table_rows(i);
                // A layout table (one row or one column of cells holding blocks) is read as blocks.
                let layout = rows.len() <= 1 || self.is_layout_table(i);
                if layout {
                    for c in self.children(i) {
                        self.walk(c)?;
                    }
                } else {
                    self.out.table(&rows);
                }
            }
            "pre" => {
                self.flush();
                let t = self.text_of(i);
                self.out.code(&t);
            }
            "br" => self.inline.push(' '),
            "img" => {}
            "p" | "div" | "section" | "article" | "main" | "blockquote" | "figure"
            | "figcaption" | "header" | "address" | "center" | "details" | "summary" | "body"
            | "html" | "td" | "th" | "tr" | "tbody" | "thead" | "tfoot" | "caption" | "hgroup"
            | "#document" | "fieldset" => {
                self.flush();
                if matches!(name.as_str(), "div" | "section") && self.mostly_links(i) {
                    return Ok(());
                }
                for c in self.children(i) {
                    self.walk(c)?;
                }
                self.flush();
            }
            _ => {
                // Inline: its text runs on.
                for c in self.children(i) {
                    self.walk(c)?;
                }
                if matches!(name.as_str(), "span" | "a" | "b" | "i" | "em" | "strong") {
                    // nothing: inline
                } else {
                    self.inline.push(' ');
                }
            }
        }
        Ok(())
    }

    fn table_rows(&self, table: usize) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut stack = vec![table];
        while let Some(n) = stack.pop() {
            for c in self.children(n).into_iter().rev() {
                match self.dom.name(c) {
                    "tr" => {
                        let cells: Vec<String> = self
                            .children(c)
                            .into_iter()
                            .filter(|&d| matches!(self.dom.name(d), "td" | "th"))
                            .map(|d| self.text_of(d))
                            .collect();
                        rows.push((c, cells));
                    }
                    "thead" | "tbody" | "tfoot" => stack.push(c),
                    _ => {}
                }
            }
        }
        rows.sort_by_key(|(c, _)| *c);
        rows.into_iter().map(|(_, r)| r).collect()
    }

    /// A table used for layout: a cell holds headings, paragraphs, lists or tables.
    fn is_layout_table(&self, table: usize) -> bool {
        reachable(&self.kept, table).into_iter().any(|n| {
            n != table
                && matches!(
                    self.dom.name(n),
                    "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "ul" | "ol" | "table" | "div"
                )
        })
    }
}

/// Writes the blocks of `root` (boilerplate removed with `boilerplate`) into `out`.
pub(crate) fn write(dom: &Dom, out: Builder, boilerplate: bool) -> Result<Builder> {
    let body = dom.find(0, "body").unwrap_or(0);
    let kept = prune(dom, body, !boilerplate);
    let root = if boilerplate {
        content_root(dom, &kept, body)
    } else {
        body
    };
    let mut w = Writer {
        dom,
        kept,
        out,
        inline: String::new(),
        list_depth: 0,
        link_filter: boilerplate,
    };
    w.walk(root)?;
    w.flush();
    Ok(w.out)
}

pub(crate) fn read(bytes: &[u8], deadline: Deadline) -> Result<Extracted> {
    let text = decode(bytes);
    let dom = parse(&text, deadline)?;
    let out = write(&dom, Builder::new(deadline), true)?;
    Ok(out.finish(Format::Html, dom.title.clone(), 0))
}

#[cfg(test)]
mod tests {
    use super::dom::entities;
    use super::*;
    use std::time::Duration;

    fn read_str(s: &str) -> Extracted {
        read(s.as_bytes(), Deadline::new(Duration::from_secs(5))).unwrap()
    }

    #[test]
    fn closes_what_authors_leave_open() {
        let doc = read_str("<body><p>One<p>Two &amp; three<ul><li>a<li>b</ul><table><tr><td>x<td>y<tr><td>1<td>2</table>");
        assert_eq!(
            doc.text,
            "One\n\nTwo & three\n\n- a\n- b\n\n| x | y |\n| --- | --- |\n| 1 | 2 |\n"
        );
    }

    #[test]
    fn drops_navigation_banners_and_footers() {
        let page = r#"<html><head><title>T</title><script>var x = "<p>no</p>";</script></head><body>
            <header><a href="/">Site</a></header>
            <div class="cookie-banner">We use cookies. <button>OK</button></div>
            <nav><ul><li><a href="/">Home</a><li><a href="/a">About</a></ul></nav>
            <main><h1>Title</h1><p>Body text that matters, long enough to count as content.</p>
            <div class="share-buttons">Share</div></main>
            <aside>Related</aside><footer>© 2026</footer></body></html>"#;
        let doc = read_str(page);
        assert_eq!(
            doc.text,
            "# Title\n\nBody text that matters, long enough to count as content.\n"
        );
        assert_eq!(doc.title.as_deref(), Some("T"));
    }

    #[test]
    fn entities_decode() {
        assert_eq!(
            entities("a&nbsp;b &eacute;&#233;&#xE9; &copy &bogus; &"),
            "a\u{a0}b ééé © &bogus; &"
        );
    }
}
