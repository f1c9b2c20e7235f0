//! From glyphs to the blocks of a document.
//!
//! 1. **Words**: glyphs on one baseline run into a word until a space glyph, a jump back, or a gap wider
//!    than 0.15 em (word spaces in TeX's PDFs are gaps, not characters); overprinted copies (fake bold)
//!    are dropped.
//! 2. **Tables** (ruled): filled or stroked cell rectangles that line up in rows of two or more become a
//!    table; the words inside are its cells.
//! 3. **Reading order**: the page is cut recursively (XY-cut): a vertical cut where a band of white space
//!    runs down the whole region (a column gutter, at least half an em wide, with lines on both sides); where a
//!    few rows cross an otherwise empty band (a title or a figure over two columns) a horizontal cut first
//!    sets them apart. Regions are read top to bottom, columns left to right.
//! 4. **Lines**: the words of a region grouped by baseline.
//! 5. **Running headers and footers**: lines in the top or bottom tenth of pages that repeat (digits
//!    aside) on at least two pages and 40 % of them, and page numbers there (`12`, `Page 3 of 9`, `- iv -`),
//!    are dropped.
//! 6. **Blocks**: see [`super::blocks`].

use super::content::{Glyph, PageContent};

/// A word on a page.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    x0: f32,
    x1: f32,
    y: f32,
    size: f32,
    bold: bool,
    /// Index of a table (this "word" stands for the whole table), if any.
    table: Option<usize>,
}

impl Word {
    fn top(&self) -> f32 {
        self.y + 0.75 * self.size
    }
    fn bottom(&self) -> f32 {
        self.y - 0.25 * self.size
    }
}

/// A line of text, in reading order.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) text: String,
    pub(crate) x0: f32,
    pub(crate) x1: f32,
    pub(crate) y: f32,
    pub(crate) size: f32,
    pub(crate) bold: bool,
    pub(crate) page: u32,
    /// The region (column block) of its page, counted over the document.
    pub(crate) region: u32,
    /// The region's left and right edges.
    pub(crate) left: f32,
    pub(crate) right: f32,
    /// A table's rows, when the line stands for a table.
    pub(crate) table: Option<Vec<Vec<String>>>,
}

/// The words of a page's glyphs.
fn words(content: &PageContent) -> Vec<Word> {
    let mut out: Vec<Word> = Vec::new();
    let mut cur: Option<(Word, usize, usize)> = None;
    let mut last: Option<&Glyph> = None;
    let finish = |w: Option<(Word, usize, usize)>, out: &mut Vec<Word>| {
        let Some((mut w, bold, n)) = w else {
            return;
        };
        if w.text.trim().is_empty() {
            return;
        }
        w.bold = bold * 2 > n;
        // Overprinted copies (fake bold, shadows): the same word at nearly the same place.
        let dup = out
            .iter()
            .rev()
            .take(4)
            .any(|o| o.text == w.text && (o.x0 - w.x0).abs() < 1.5 && (o.y - w.y).abs() < 1.5);
        if !dup {
            out.push(w);
        }
    };
    for g in &content.glyphs {
        if g.space {
            finish(cur.take(), &mut out);
            last = Some(g);
            continue;
        }
        let text = &content.text[g.start as usize..g.end as usize];
        let joins = match (&cur, last) {
            (Some((w, _, _)), Some(p)) => {
                let em = g.size.max(p.size);
                let gap = g.x0 - p.x1;
                !p.space
                    && !p.gap_after
                    && (g.y - p.y).abs() < 0.3 * em
                    && gap < 0.15 * em
                    && gap > -0.6 * em
                    && (g.size - w.size).abs() < 0.35 * w.size.max(1.0)
            }
            _ => false,
        };
        if !joins {
            finish(cur.take(), &mut out);
        }
        match &mut cur {
            Some((w, bold, n)) => {
                w.text.push_str(text);
                w.x1 = w.x1.max(g.x1);
                w.x0 = w.x0.min(g.x0);
                w.size = w.size.max(g.size);
                *bold += usize::from(g.bold);
                *n += 1;
            }
            None => {
                cur = Some((
                    Word {
                        text: text.to_owned(),
                        x0: g.x0,
                        x1: g.x1,
                        y: g.y,
                        size: g.size,
                        bold: g.bold,
                        table: None,
                    },
                    usize::from(g.bold),
                    1,
                ))
            }
        }
        last = Some(g);
    }
    finish(cur.take(), &mut out);
    out
}

/// A rectangle `[x0, y0, x1, y1]`.
type Rect = [f32; 4];

/// A ruled table: its box and its cell rectangles, row by row.
type RuledTable = (Rect, Vec<Vec<Rect>>);

/// Ruled tables: cell rectangles in rows. Returns each table's box and its cell rectangles by row.
fn tables(rules: &[Rect], page_area: f32) -> Vec<RuledTable> {
    let mut cells: Vec<[f32; 4]> = rules
        .iter()
        .copied()
        .filter(|r| {
            let (w, h) = (r[2] - r[0], r[3] - r[1]);
            w > 4.0 && h > 4.0 && w * h < page_area * 0.4
        })
        .collect();
    if cells.len() < 4 {
        return Vec::new();
    }
    // Rows: cells with the same top and bottom.
    cells.sort_by(|a, b| b[3].total_cmp(&a[3]).then(a[0].total_cmp(&b[0])));
    let mut rows: Vec<Vec<[f32; 4]>> = Vec::new();
    for c in cells {
        match rows.last_mut() {
            Some(r) if (r[0][3] - c[3]).abs() < 1.0 && (r[0][1] - c[1]).abs() < 1.0 => {
                // The same cell drawn twice (fill, then stroke) counts once.
                if !r
                    .iter()
                    .any(|o| (o[0] - c[0]).abs() < 1.0 && (o[2] - c[2]).abs() < 1.0)
                {
                    r.push(c);
                }
            }
            _ => rows.push(vec![c]),
        }
    }
    rows.retain(|r| r.len() >= 2);
    // Tables: runs of rows that touch (each row's top at the previous row's bottom).
    let mut out = Vec::new();
    let mut group: Vec<Vec<[f32; 4]>> = Vec::new();
    for row in rows {
        let touches = group
            .last()
            .is_some_and(|prev| (prev[0][1] - row[0][3]).abs() < 2.0);
        if !touches && group.len() >= 2 {
            out.push(std::mem::take(&mut group));
        } else if !touches {
            group.clear();
        }
        group.push(row);
    }
    if group.len() >= 2 {
        out.push(group);
    }
    out.into_iter()
        .map(|rows| {
            let x0 = rows.iter().flatten().map(|c| c[0]).fold(f32::MAX, f32::min);
            let y0 = rows.iter().flatten().map(|c| c[1]).fold(f32::MAX, f32::min);
            let x1 = rows.iter().flatten().map(|c| c[2]).fold(f32::MIN, f32::max);
            let y1 = rows.iter().flatten().map(|c| c[3]).fold(f32::MIN, f32::max);
            let mut rows = rows;
            for r in &mut rows {
                r.sort_by(|a, b| a[0].total_cmp(&b[0]));
            }
            ([x0, y0, x1, y1], rows)
        })
        .collect()
}

/// Moves the words inside ruled tables into the tables' cells; each table becomes one placeholder word.
fn lift_tables(
    words: &mut Vec<Word>,
    rules: &[[f32; 4]],
    page_area: f32,
    out: &mut Vec<Vec<Vec<String>>>,
) {
    for (bbox, rows) in tables(rules, page_area) {
        let mut cells: Vec<Vec<Vec<&Word>>> =
            rows.iter().map(|r| vec![Vec::new(); r.len()]).collect();
        let mut inside = vec![false; words.len()];
        for (k, w) in words.iter().enumerate() {
            let (cx, cy) = ((w.x0 + w.x1) / 2.0, w.y + 0.3 * w.size);
            if cx < bbox[0] || cx > bbox[2] || cy < bbox[1] || cy > bbox[3] {
                continue;
            }
            for (ri, r) in rows.iter().enumerate() {
                for (ci, c) in r.iter().enumerate() {
                    if cx >= c[0] && cx <= c[2] && cy >= c[1] && cy <= c[3] {
                        cells[ri][ci].push(w);
                        inside[k] = true;
                    }
                }
            }
        }
        let filled = cells.iter().flatten().filter(|c| !c.is_empty()).count();
        if filled < 2 {
            continue;
        }
        let table: Vec<Vec<String>> = cells
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| {
                        let mut ws: Vec<&Word> = c.clone();
                        ws.sort_by(|a, b| b.y.total_cmp(&a.y).then(a.x0.total_cmp(&b.x0)));
                        ws.iter()
                            .map(|w| w.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect()
            })
            .collect();
        let size = cells
            .iter()
            .flatten()
            .flatten()
            .map(|w| w.size)
            .fold(0.0f32, f32::max);
        let index = out.len();
        out.push(table);
        let mut k = 0;
        words.retain(|_| {
            let keep = !inside[k];
            k += 1;
            keep
        });
        // The placeholder sits where the table's first line is.
        words.push(Word {
            text: String::new(),
            x0: bbox[0],
            x1: bbox[2],
            y: bbox[3] - size.max(4.0),
            size: (bbox[3] - bbox[1]).max(1.0) / 1.0,
            bold: false,
            table: Some(index),
        });
    }
}

pub(crate) fn median(mut v: Vec<f32>) -> f32 {
    if v.is_empty() {
        return 10.0;
    }
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// Rows of words: groups of words whose vertical extents overlap, top to bottom.
fn rows_of(words: &[Word], ids: &[usize]) -> Vec<Vec<usize>> {
    let mut ids = ids.to_vec();
    ids.sort_by(|&a, &b| words[b].y.total_cmp(&words[a].y));
    let mut rows: Vec<(f32, f32, Vec<usize>)> = Vec::new();
    for i in ids {
        let w = &words[i];
        let (top, bottom) = (w.top(), w.bottom());
        match rows.last_mut() {
            // Same row when the baselines are close (a superscript stays on its line).
            Some((rtop, rbottom, r))
                if w.table.is_none()
                    && words[r[0]].table.is_none()
                    && (words[r[0]].y - w.y).abs() < 0.45 * w.size.max(words[r[0]].size)
                    && bottom < *rtop =>
            {
                *rtop = rtop.max(top);
                *rbottom = rbottom.min(bottom);
                r.push(i);
            }
            _ => rows.push((top, bottom, vec![i])),
        }
    }
    rows.into_iter()
        .map(|(_, _, mut r)| {
            r.sort_by(|&a, &b| words[a].x0.total_cmp(&words[b].x0));
            r
        })
        .collect()
}

/// A column gutter in `ids`: a vertical band at least half an em wide, away from the text's edges, that few
/// rows cross (a full-width title or running header may) while the text on each side is covered by four
/// times as many rows at least (two at least). Of several, the one with the sharpest contrast between its
/// sides and itself. Returns the band's edges.
fn gutter(words: &[Word], ids: &[usize], rows: &[Vec<usize>], em: f32) -> Option<(f32, f32)> {
    if rows.len() < 2 {
        return None;
    }
    let x0 = ids.iter().map(|&i| words[i].x0).fold(f32::MAX, f32::min);
    let x1 = ids.iter().map(|&i| words[i].x1).fold(f32::MIN, f32::max);
    let width = (x1 - x0).max(1.0);
    let bins = (width.ceil() as usize).clamp(1, 4096);
    let px = width / bins as f32;
    let bin = |x: f32| ((((x - x0) / width) * bins as f32).max(0.0) as usize).min(bins);
    // Rows covering each bin.
    let mut cover = vec![0u32; bins + 1];
    let mut marked = vec![false; bins + 1];
    for r in rows {
        marked.iter_mut().for_each(|m| *m = false);
        for &i in r {
            for m in &mut marked[bin(words[i].x0)..=bin(words[i].x1)] {
                *m = true;
            }
        }
        for (c, m) in cover.iter_mut().zip(&marked) {
            *c += u32::from(*m);
        }
    }
    let mut best: Option<(u32, f32, f32)> = None;
    for threshold in [0u32, 1, 2, 3, 5, 8] {
        let mut k = 1;
        while k < bins {
            if cover[k] > threshold {
                k += 1;
                continue;
            }
            let start = k;
            while k < bins && cover[k] <= threshold {
                k += 1;
            }
            let end = k;
            if ((end - start) as f32) * px < 0.5 * em || end >= bins {
                continue;
            }
            let band = cover[start..end].iter().copied().max().unwrap_or(0);
            let left = cover[..start].iter().copied().max().unwrap_or(0);
            let right = cover[end..].iter().copied().max().unwrap_or(0);
            let side = left.min(right);
            if side < 2 || band * 4 > side {
                continue;
            }
            let contrast = side - band;
            if best.is_none_or(|(c, _, _)| contrast > c) {
                best = Some((contrast, x0 + start as f32 * px, x0 + end as f32 * px));
            }
        }
    }
    best.map(|(_, a, b)| (a, b))
}

/// Cuts `ids` into regions in reading order: at a gutter, the columns left to right (recursively, so three
/// columns work); rows that cross the gutter (a title over both columns) are set apart first by a
/// horizontal cut, the part above them read before the part below.
fn segment(words: &[Word], ids: Vec<usize>, em: f32, depth: usize, out: &mut Vec<Vec<usize>>) {
    if ids.len() <= 1 || depth > 64 {
        out.push(ids);
        return;
    }
    let rows = rows_of(words, &ids);
    let Some((ga, gb)) = gutter(words, &ids, &rows, em) else {
        out.push(ids);
        return;
    };
    let crossing: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.iter().any(|&i| words[i].x0 < gb && words[i].x1 > ga))
        .map(|(k, _)| k)
        .collect();
    if let Some(&first) = crossing.first() {
        // Cut above the first crossing row, or below the crossing rows that start the region.
        let cut = if first == 0 {
            let mut end = 0;
            while crossing.get(end) == Some(&end) {
                end += 1;
            }
            end
        } else {
            first
        };
        if cut > 0 && cut < rows.len() {
            let top: Vec<usize> = rows[..cut].iter().flatten().copied().collect();
            let bottom: Vec<usize> = rows[cut..].iter().flatten().copied().collect();
            segment(words, top, em, depth + 1, out);
            segment(words, bottom, em, depth + 1, out);
        } else {
            out.push(ids);
        }
        return;
    }
    let mid = (ga + gb) / 2.0;
    let (left, right): (Vec<usize>, Vec<usize>) =
        ids.into_iter().partition(|&i| words[i].x1 <= mid);
    segment(words, left, em, depth + 1, out);
    segment(words, right, em, depth + 1, out);
}

/// The lines of one page in reading order.
pub(crate) fn page_lines(
    content: &PageContent,
    bbox: [f64; 4],
    page: u32,
    region_base: u32,
) -> (Vec<Line>, u32) {
    let mut ws = words(content);
    let area = ((bbox[2] - bbox[0]) * (bbox[3] - bbox[1])).abs() as f32;
    let mut tables_found = Vec::new();
    lift_tables(&mut ws, &content.rules, area, &mut tables_found);
    if ws.is_empty() {
        return (Vec::new(), 0);
    }
    let em = median(
        ws.iter()
            .filter(|w| w.table.is_none())
            .map(|w| w.size)
            .collect(),
    );
    let mut regions = Vec::new();
    segment(&ws, (0..ws.len()).collect(), em, 0, &mut regions);
    let mut lines = Vec::new();
    let mut count = 0;
    for ids in regions {
        if ids.is_empty() {
            continue;
        }
        let region = region_base + count;
        count += 1;
        let left = ids.iter().map(|&i| ws[i].x0).fold(f32::MAX, f32::min);
        let right = ids.iter().map(|&i| ws[i].x1).fold(f32::MIN, f32::max);
        for row in rows_of(&ws, &ids) {
            if let Some(t) = ws[row[0]].table {
                let w = &ws[row[0]];
                lines.push(Line {
                    text: String::new(),
                    x0: w.x0,
                    x1: w.x1,
                    y: w.y,
                    size: em,
                    bold: false,
                    page,
                    region,
                    left,
                    right,
                    table: tables_found.get(t).cloned(),
                });
                continue;
            }
            let mut text = String::new();
            let mut size = 0.0f32;
            let mut bold = 0usize;
            let mut chars = 0usize;
            let mut prev_x1: Option<f32> = None;
            for &i in &row {
                let w = &ws[i];
                if let Some(p) = prev_x1 {
                    // Words of a row: one space between, none where they touch (a split word).
                    if w.x0 - p > 0.1 * w.size || text.ends_with(|c: char| !c.is_alphanumeric()) {
                        text.push(' ');
                    }
                }
                text.push_str(&w.text);
                let n = w.text.chars().count();
                if w.size > size && n > 0 {
                    size = size.max(w.size);
                }
                bold += if w.bold { n } else { 0 };
                chars += n;
                prev_x1 = Some(w.x1);
            }
            // The row's size is its text's (the largest word's, unless that is a lone symbol).
            let sizes: Vec<f32> = row.iter().map(|&i| ws[i].size).collect();
            let size = median(sizes).max(size * 0.0);
            lines.push(Line {
                text: text.trim().to_owned(),
                x0: ws[row[0]].x0,
                x1: row.iter().map(|&i| ws[i].x1).fold(f32::MIN, f32::max),
                y: ws[row[0]].y,
                size,
                bold: chars > 0 && bold * 10 >= chars * 9,
                page,
                region,
                left,
                right,
                table: None,
            });
        }
    }
    (lines, count)
}

/// A key for running headers and footers: the text with digits made `#`, lower case, spaces squashed.
fn running_key(text: &str) -> String {
    let mut k = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !k.ends_with('#') {
                k.push('#');
            }
        } else if c.is_whitespace() {
            if !k.ends_with(' ') {
                k.push(' ');
            }
        } else {
            k.extend(c.to_lowercase());
        }
    }
    // A number at either end (a page number beside the running text) does not tell pages apart.
    k.trim()
        .trim_start_matches(['#', ' ', '-', '|', '·'])
        .trim_end_matches(['#', ' ', '-', '|', '·'])
        .to_owned()
}

/// Whether a line is only a page number (`12`, `Page 3`, `3 of 9`, `- 4 -`, `iv`).
fn is_page_number(text: &str) -> bool {
    let t = text
        .trim()
        .trim_matches(|c: char| c == '-' || c == '–' || c == '—' || c == '|' || c.is_whitespace())
        .to_ascii_lowercase();
    let t = t.strip_prefix("page").map_or(t.as_str(), str::trim);
    let t = t.strip_prefix("p.").map_or(t, str::trim);
    if t.is_empty() {
        return false;
    }
    let mut parts = t
        .split(|c: char| c == '/' || c.is_whitespace())
        .filter(|p| !p.is_empty() && *p != "of");
    let number = |p: &str| {
        p.chars().all(|c| c.is_ascii_digit()) && p.len() <= 5
            || p.len() <= 6 && p.chars().all(|c| matches!(c, 'i' | 'v' | 'x' | 'l' | 'c'))
    };
    let Some(first) = parts.next() else {
        return false;
    };
    number(first) && parts.all(number)
}

/// Drops running headers, footers and page numbers from the lines of `pages` pages (`heights`: each
/// page's box `[y0, y1]`). Returns how many lines were dropped.
pub(crate) fn drop_running(lines: &mut Vec<Line>, heights: &[[f32; 2]]) -> usize {
    let pages = heights.len();
    if pages < 2 {
        return 0;
    }
    let margin_of = |l: &Line| -> Option<bool> {
        let [y0, y1] = *heights.get(l.page.saturating_sub(1) as usize)?;
        let h = (y1 - y0).max(1.0);
        if l.y > y1 - 0.1 * h {
            Some(true)
        } else if l.y < y0 + 0.1 * h {
            Some(false)
        } else {
            None
        }
    };
    let mut counts: std::collections::HashMap<(bool, String), std::collections::BTreeSet<u32>> =
        std::collections::HashMap::new();
    for l in lines.iter() {
        if l.table.is_some() {
            continue;
        }
        if let Some(top) = margin_of(l) {
            let key = running_key(&l.text);
            if !key.is_empty() {
                counts.entry((top, key)).or_default().insert(l.page);
            }
        }
    }
    let needed = 2.max((pages as f32 * 0.4).ceil() as usize);
    let before = lines.len();
    lines.retain(|l| {
        if l.table.is_some() {
            return true;
        }
        let Some(top) = margin_of(l) else {
            return true;
        };
        if is_page_number(&l.text) {
            return false;
        }
        let n = counts
            .get(&(top, running_key(&l.text)))
            .map_or(0, |s| s.len());
        n < needed
    });
    before - lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers_and_running_keys() {
        for t in ["12", "Page 3", "3 of 9", "- 4 -", "iv", "Page 2 / 10"] {
            assert!(is_page_number(t), "{t}");
        }
        for t in ["1984 was a year", "Chapter 3", "vivid"] {
            assert!(!is_page_number(t), "{t}");
        }
        assert_eq!(
            running_key("Annual Report 2024 — page 7"),
            "annual report # — page"
        );
        assert_eq!(
            running_key("12 Generated for evaluation only"),
            "generated for evaluation only"
        );
    }
}
