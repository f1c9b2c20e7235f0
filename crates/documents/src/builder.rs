//! [`Builder`]: the text of a document and its source map, made block by block.

use crate::{Block, BlockKind, Deadline, Extracted, Format, Section};

/// Makes an [`Extracted`] from blocks given in reading order: each block is normalised (runs of white space
/// become one space, ends trimmed), rendered (headings as `#` lines, list items as `- ` lines, tables in
/// Markdown) and put after the previous one with a blank line between them; its byte range, unit and section
/// go into the source map. Every reader of this crate writes through it, so every format renders alike.
#[derive(Debug)]
pub(crate) struct Builder {
    text: String,
    blocks: Vec<Block>,
    sections: Vec<Section>,
    /// Open sections: (level, index).
    open: Vec<(u8, u32)>,
    page: u32,
    pages_with_text: Vec<bool>,
    notes: Vec<String>,
    deadline: Deadline,
    /// Blocks since the deadline was last checked.
    since_check: u32,
}

impl Builder {
    pub(crate) fn new(deadline: Deadline) -> Self {
        Self {
            text: String::new(),
            blocks: Vec::new(),
            sections: Vec::new(),
            open: Vec::new(),
            page: 0,
            pages_with_text: Vec::new(),
            notes: Vec::new(),
            deadline,
            since_check: 0,
        }
    }

    /// Blocks from now on are on unit `page` (from 1).
    pub fn set_page(&mut self, page: u32) {
        self.page = page;
    }

    /// Closes every open section: what follows belongs to none until the next heading (a new slide).
    pub fn end_sections(&mut self) {
        self.open.clear();
    }

    /// Notes something the reader worked around (said once per text).
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// Whether the deadline has passed (checked every 64 blocks).
    pub(crate) fn check(&mut self) -> crate::Result<()> {
        self.since_check += 1;
        if self.since_check >= 64 {
            self.since_check = 0;
            self.deadline.check()?;
        }
        Ok(())
    }

    fn section(&self) -> Option<u32> {
        self.open.last().map(|&(_, i)| i)
    }

    fn start_block(&mut self) -> usize {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.len()
    }

    fn push(&mut self, kind: BlockKind, start: usize, page: u32, page_end: u32) {
        let section = self.section();
        self.blocks.push(Block {
            kind,
            start,
            end: self.text.len(),
            page,
            page_end,
            section,
        });
        for p in [page, page_end] {
            if p > 0 {
                let i = p as usize;
                if self.pages_with_text.len() <= i {
                    self.pages_with_text.resize(i + 1, false);
                }
                self.pages_with_text[i] = true;
            }
        }
    }

    /// A heading of `level` (1–6): opens a section inside the open ones of a higher level.
    pub fn heading(&mut self, level: u8, text: &str) {
        let text = squash(text);
        if text.is_empty() {
            return;
        }
        let level = level.clamp(1, 6);
        while self.open.last().is_some_and(|&(l, _)| l >= level) {
            self.open.pop();
        }
        let parent = self.section();
        let index = self.sections.len() as u32;
        self.sections.push(Section {
            heading: text.clone(),
            level,
            parent,
        });
        self.open.push((level, index));
        let start = self.start_block();
        for _ in 0..level {
            self.text.push('#');
        }
        self.text.push(' ');
        self.text.push_str(&text);
        self.push(BlockKind::Heading(level), start, self.page, self.page);
    }

    /// A paragraph.
    pub fn paragraph(&mut self, text: &str) {
        let page = self.page;
        self.paragraph_pieces(&[(text, page)]);
    }

    /// One paragraph made of pieces on different units (a PDF paragraph that goes on over a page break):
    /// joined by a space, with one source-map block per unit.
    pub fn paragraph_pieces(&mut self, pieces: &[(&str, u32)]) {
        let mut started = false;
        let mut block_start = 0;
        let mut block_page = 0;
        for &(piece, page) in pieces {
            let piece = squash(piece);
            if piece.is_empty() {
                continue;
            }
            if !started {
                block_start = self.start_block();
                block_page = page;
                started = true;
            } else if page != block_page {
                self.push(BlockKind::Paragraph, block_start, block_page, block_page);
                self.text.push(' ');
                block_start = self.text.len();
                block_page = page;
            } else {
                self.text.push(' ');
            }
            self.text.push_str(&piece);
        }
        if started {
            self.push(BlockKind::Paragraph, block_start, block_page, block_page);
        }
    }

    /// A list item at `depth` (0: top level), rendered `- text` (indented two spaces a level); an item
    /// that starts with its number or letter (`1. `, `2) `, `(a) `) keeps it as its marker.
    pub fn list_item(&mut self, depth: usize, text: &str) {
        let text = squash(text);
        if text.is_empty() {
            return;
        }
        // Items of one list are one line apart, not a blank line.
        let continues = self
            .blocks
            .last()
            .is_some_and(|b| b.kind == BlockKind::ListItem);
        let start = if continues {
            self.text.push('\n');
            self.text.len()
        } else {
            self.start_block()
        };
        for _ in 0..depth.min(8) {
            self.text.push_str("  ");
        }
        if !starts_with_item_number(&text) {
            self.text.push_str("- ");
        }
        self.text.push_str(&text);
        self.push(BlockKind::ListItem, start, self.page, self.page);
    }

    /// A table in Markdown: the first row is its header. Cells are normalised (`|` escaped); empty rows
    /// and trailing empty columns are left out.
    pub fn table(&mut self, rows: &[Vec<String>]) {
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| squash(c).replace('|', "\\|"))
                    .collect::<Vec<_>>()
            })
            .filter(|r: &Vec<String>| r.iter().any(|c| !c.is_empty()))
            .collect();
        let width = rows
            .iter()
            .map(|r| r.iter().rposition(|c| !c.is_empty()).map_or(0, |i| i + 1))
            .max()
            .unwrap_or(0);
        if rows.is_empty() || width == 0 {
            return;
        }
        if width == 1 {
            // One column is a list of values, not a table.
            for r in &rows {
                if let Some(c) = r.first() {
                    self.paragraph(c);
                }
            }
            return;
        }
        let start = self.start_block();
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                self.text.push('\n');
            }
            self.text.push('|');
            for c in 0..width {
                self.text.push(' ');
                self.text.push_str(row.get(c).map_or("", String::as_str));
                self.text.push_str(" |");
            }
            if i == 0 {
                self.text.push_str("\n|");
                for _ in 0..width {
                    self.text.push_str(" --- |");
                }
            }
        }
        self.push(BlockKind::Table, start, self.page, self.page);
    }

    /// Preformatted text, kept as it is (a fenced block).
    pub fn code(&mut self, text: &str) {
        let body = text.trim_matches('\n');
        if body.trim().is_empty() {
            return;
        }
        let start = self.start_block();
        self.text.push_str("```\n");
        self.text.push_str(body);
        self.text.push_str("\n```");
        self.push(BlockKind::Code, start, self.page, self.page);
    }

    /// The document, with `units` units (the blocks' highest unit when larger).
    pub fn finish(mut self, format: Format, title: Option<String>, units: u32) -> Extracted {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        let units = units.max(self.blocks.iter().map(|b| b.page_end).max().unwrap_or(0));
        let unit = format.unit();
        let empty_units = if unit.is_some() && units > 0 {
            (1..=units)
                .filter(|&p| {
                    !self
                        .pages_with_text
                        .get(p as usize)
                        .copied()
                        .unwrap_or(false)
                })
                .collect()
        } else {
            Vec::new()
        };
        Extracted {
            format,
            title: title.map(|t| squash(&t)).filter(|t| !t.is_empty()),
            text: self.text,
            map: crate::SourceMap {
                blocks: self.blocks,
                sections: self.sections,
            },
            unit,
            units,
            empty_units,
            notes: self.notes,
        }
    }
}

/// Whether a line or an item's text starts with an item number followed by a space and more: `1. `,
/// `12) `, `(a) `, `b. ` (up to three digits or one lower-case letter).
pub(crate) fn starts_with_item_number(text: &str) -> bool {
    let t = text.trim_start_matches('(');
    let n = t.bytes().take_while(u8::is_ascii_digit).count();
    let letter = n == 0 && t.chars().next().is_some_and(|c| c.is_ascii_lowercase()) && t.len() > 2;
    let m = if n > 0 && n <= 3 {
        n
    } else if letter {
        1
    } else {
        return false;
    };
    let rest = &t[m..];
    (rest.starts_with(". ") || rest.starts_with(") ")) && rest.len() > 2
}

/// `text` with every run of white space (and control characters) made one space, ends trimmed, soft
/// hyphens and zero-width characters dropped.
pub(crate) fn squash(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if matches!(
            c,
            '\u{00AD}' | '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}'
        ) {
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn builder() -> Builder {
        Builder::new(Deadline::new(Duration::from_secs(5)))
    }

    #[test]
    fn renders_markdown_and_maps_every_block() {
        let mut b = builder();
        b.set_page(3);
        b.heading(1, "  Title \n");
        b.paragraph("One\t two   three.");
        b.list_item(0, "first");
        b.list_item(1, "second");
        b.table(&[
            vec!["a".into(), "b|c".into(), String::new()],
            vec!["1".into(), "2".into(), String::new()],
        ]);
        b.code("x = 1\n  y = 2\n");
        let doc = b.finish(Format::Docx, Some(" T ".into()), 0);
        assert_eq!(
            doc.text,
            "# Title\n\nOne two three.\n\n- first\n  - second\n\n| a | b\\|c |\n| --- | --- |\n| 1 | 2 |\n\n```\nx = 1\n  y = 2\n```\n"
        );
        for b in &doc.map.blocks {
            assert!(b.end <= doc.text.len() && b.start < b.end);
            assert_eq!(b.page, 3);
        }
        assert_eq!(doc.title.as_deref(), Some("T"));
        assert_eq!(doc.units, 3);
        assert_eq!(doc.empty_units, [1, 2]);
    }

    #[test]
    fn numbered_items_keep_their_numbers_as_markers() {
        let mut b = builder();
        b.list_item(0, "1. first");
        b.list_item(0, "(b) second");
        b.list_item(0, "plain");
        b.list_item(0, "2024 was a year");
        let doc = b.finish(Format::Pdf, None, 1);
        assert_eq!(
            doc.text,
            "1. first\n(b) second\n- plain\n- 2024 was a year\n"
        );
    }

    #[test]
    fn paragraph_pieces_keep_one_block_per_unit() {
        let mut b = builder();
        b.paragraph_pieces(&[("end of page", 4), ("one and", 5), ("more", 5)]);
        let doc = b.finish(Format::Pdf, None, 5);
        assert_eq!(doc.text, "end of page one and more\n");
        assert_eq!(doc.map.blocks.len(), 2);
        assert_eq!(
            &doc.text[doc.map.blocks[0].start..doc.map.blocks[0].end],
            "end of page"
        );
        assert_eq!((doc.map.blocks[1].page, doc.map.blocks[1].page_end), (5, 5));
        assert_eq!(
            &doc.text[doc.map.blocks[1].start..doc.map.blocks[1].end],
            "one and more"
        );
    }

    #[test]
    fn sections_nest_by_level() {
        let mut b = builder();
        b.heading(1, "A");
        b.heading(2, "A.1");
        b.heading(3, "A.1.a");
        b.heading(2, "A.2");
        b.paragraph("text");
        let doc = b.finish(Format::Markdown, None, 0);
        let last = doc.map.blocks.last().unwrap().section.unwrap();
        assert_eq!(doc.section_path(last), ["A", "A.2"]);
    }
}
