//! Plain text and Markdown: the text is kept exactly as it is (chunk ids of text files do not change); the
//! source map marks its paragraphs (blank-line apart), Markdown's ATX headings (`#` … `######`, not inside
//! fenced code), list items and fenced code, and counts form feeds as page breaks.

use crate::{corrupt, Block, BlockKind, Extracted, Format, Result, Section};

/// Reads UTF-8 text (a byte-order mark dropped).
pub(crate) fn read(bytes: &[u8], markdown: bool) -> Result<Extracted> {
    let bytes = bytes
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(bytes);
    let format = if markdown { "Markdown" } else { "text" };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        corrupt(
            format,
            format!(
                "not UTF-8 (invalid byte at offset {}); convert it to UTF-8",
                e.valid_up_to()
            ),
        )
    })?;
    Ok(map_text(text.to_owned(), markdown))
}

/// The source map of `text` (kept unchanged): paragraphs, and with `markdown` its headings, list items and
/// fenced code; form feeds start new pages.
pub fn map_text(text: String, markdown: bool) -> Extracted {
    let paged = text.contains('\u{c}');
    let mut page: u32 = if paged { 1 } else { 0 };
    let mut blocks: Vec<Block> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut open: Vec<(u8, u32)> = Vec::new();
    // The paragraph being gathered: (start, end, first page, kind).
    let mut current: Option<(usize, usize, u32, BlockKind)> = None;
    let mut fence: Option<usize> = None;
    let mut offset = 0;
    let flush = |current: &mut Option<(usize, usize, u32, BlockKind)>,
                 blocks: &mut Vec<Block>,
                 page: u32,
                 section: Option<u32>| {
        if let Some((start, end, first, kind)) = current.take() {
            blocks.push(Block {
                kind,
                start,
                end,
                page: first,
                page_end: page,
                section,
            });
        }
    };
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let end = start + body.len();
        let mut feeds = body.matches('\u{c}').count() as u32;
        let trimmed = body.trim_matches(|c: char| c.is_whitespace() || c == '\u{c}');
        let section = open.last().map(|&(_, i)| i);
        // Form feeds before the line's text start its page; the others end it.
        let lead = body
            .chars()
            .take_while(|c| c.is_whitespace() || *c == '\u{c}')
            .filter(|&c| c == '\u{c}')
            .count() as u32;
        if lead > 0 && !trimmed.is_empty() {
            flush(&mut current, &mut blocks, page, section);
            page += lead;
            feeds -= lead;
        }
        if markdown {
            if let Some(fence_start) = fence {
                if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                    blocks.push(Block {
                        kind: BlockKind::Code,
                        start: fence_start,
                        end,
                        page,
                        page_end: page,
                        section,
                    });
                    fence = None;
                }
                page += feeds;
                continue;
            }
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                flush(&mut current, &mut blocks, page, section);
                fence = Some(start);
                continue;
            }
            if let Some(level) = atx_level(trimmed) {
                flush(&mut current, &mut blocks, page, section);
                let heading = trimmed[level as usize..]
                    .trim()
                    .trim_end_matches('#')
                    .trim()
                    .to_owned();
                while open.last().is_some_and(|&(l, _)| l >= level) {
                    open.pop();
                }
                let parent = open.last().map(|&(_, i)| i);
                let index = sections.len() as u32;
                sections.push(Section {
                    heading,
                    level,
                    parent,
                });
                open.push((level, index));
                blocks.push(Block {
                    kind: BlockKind::Heading(level),
                    start,
                    end,
                    page,
                    page_end: page,
                    section: Some(index),
                });
                page += feeds;
                continue;
            }
        }
        if trimmed.is_empty() {
            flush(&mut current, &mut blocks, page, section);
            page += feeds;
            continue;
        }
        let item = markdown && is_list_item(trimmed);
        if item {
            flush(&mut current, &mut blocks, page, section);
        }
        match &mut current {
            Some((_, e, _, _)) => *e = end,
            None => {
                let kind = if item {
                    BlockKind::ListItem
                } else if markdown && trimmed.starts_with('|') {
                    BlockKind::Table
                } else {
                    BlockKind::Paragraph
                };
                current = Some((start, end, page, kind));
            }
        }
        if feeds > 0 {
            flush(&mut current, &mut blocks, page, section);
            page += feeds;
        }
    }
    if let Some(fence_start) = fence {
        blocks.push(Block {
            kind: BlockKind::Code,
            start: fence_start,
            end: text.len(),
            page,
            page_end: page,
            section: open.last().map(|&(_, i)| i),
        });
    }
    let section = open.last().map(|&(_, i)| i);
    flush(&mut current, &mut blocks, page, section);
    let format = if markdown {
        Format::Markdown
    } else {
        Format::Text
    };
    let units = if paged { page } else { 0 };
    let mut with_text = vec![false; units as usize + 1];
    for b in &blocks {
        for p in b.page..=b.page_end {
            if let Some(slot) = with_text.get_mut(p as usize) {
                *slot = true;
            }
        }
    }
    Extracted {
        format,
        title: None,
        text,
        map: crate::SourceMap { blocks, sections },
        unit: if paged { Some(crate::Unit::Page) } else { None },
        units,
        empty_units: (1..=units).filter(|&p| !with_text[p as usize]).collect(),
        notes: Vec::new(),
    }
}

fn atx_level(line: &str) -> Option<u8> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with([' ', '\t']) {
        return Some(hashes as u8);
    }
    None
}

fn is_list_item(line: &str) -> bool {
    if line.starts_with("- ") || line.starts_with("* ") || line.starts_with("+ ") {
        return true;
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && digits < 10
        && (line[digits..].starts_with(". ") || line[digits..].starts_with(") "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_the_text_and_maps_its_structure() {
        let text = "# Guilds\n\nIntro line one\nline two.\n\n## Glass\n\n- lanterns\n- bells\n\n```\n# not a heading\n```\n\nLast.\n";
        let doc = map_text(text.to_owned(), true);
        assert_eq!(doc.text, text);
        let kinds: Vec<BlockKind> = doc.map.blocks.iter().map(|b| b.kind).collect();
        assert_eq!(
            kinds,
            [
                BlockKind::Heading(1),
                BlockKind::Paragraph,
                BlockKind::Heading(2),
                BlockKind::ListItem,
                BlockKind::ListItem,
                BlockKind::Code,
                BlockKind::Paragraph
            ]
        );
        assert_eq!(
            &text[doc.map.blocks[1].start..doc.map.blocks[1].end],
            "Intro line one\nline two."
        );
        let last = doc.map.blocks.last().unwrap();
        assert_eq!(doc.section_path(last.section.unwrap()), ["Guilds", "Glass"]);
        assert_eq!(doc.unit, None);
    }

    #[test]
    fn form_feeds_are_pages() {
        let doc = map_text(
            "page one\n\u{c}page two\n\u{c}\u{c}page four".to_owned(),
            false,
        );
        let pages: Vec<u32> = doc.map.blocks.iter().map(|b| b.page).collect();
        assert_eq!(pages, [1, 2, 4]);
        assert_eq!(doc.units, 4);
        assert_eq!(doc.empty_units, [3]);
    }

    #[test]
    fn bad_utf8_names_the_offset() {
        let err = read(b"caf\xe9", false).unwrap_err().to_string();
        assert!(err.contains("offset 3"), "{err}");
    }
}
