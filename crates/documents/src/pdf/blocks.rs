//! From a document's lines to its blocks: a line clearly larger than the body text (the size most text
//! has) is a heading, its level by size; a line starting with a bullet or an item number starts a list
//! item; other lines make paragraphs, broken by vertical gaps, indents and short last lines, and carried on
//! over column and page breaks when the last line ends mid-sentence. Words hyphenated across lines are
//! joined; a suspended hyphen (`up- or down-`) is kept.

use super::layout::{median, Line};
use crate::builder::{starts_with_item_number, Builder};

fn is_bullet(text: &str) -> Option<&str> {
    let mut chars = text.chars();
    let first = chars.next()?;
    if matches!(
        first,
        '•' | '◦'
            | '▪'
            | '‣'
            | '●'
            | '○'
            | '■'
            | '□'
            | '–'
            | '-'
            | '*'
            | '·'
            | '\u{F0B7}'
            | '➢'
            | '✓'
    ) {
        let rest = chars.as_str();
        if rest.starts_with(' ') || first != '-' && first != '*' {
            return Some(rest.trim_start());
        }
    }
    // `1.`, `12)`, `(a)`, `b.` followed by a space.
    starts_with_item_number(text).then_some(text)
}

fn ends_sentence(text: &str) -> bool {
    text.trim_end()
        .trim_end_matches(['"', '\'', '”', '’', ')', ']', '*'])
        .ends_with(['.', '!', '?', ':', '…'])
}

/// Joins `next` to a paragraph's text: a word hyphenated over the line break is joined.
fn join_line(text: &mut String, next: &str) {
    let trimmed = text.trim_end();
    let hyphen = trimmed.ends_with(['-', '\u{2010}', '\u{00AD}']);
    let before_hyphen = trimmed
        .trim_end_matches(['-', '\u{2010}', '\u{00AD}'])
        .chars()
        .last()
        .is_some_and(char::is_alphabetic);
    let next_lower = next.chars().next().is_some_and(char::is_lowercase);
    // `FOLL-` + `OWING`: a capitalised word split as well.
    let caps = || {
        let stem = trimmed.trim_end_matches(['-', '\u{2010}', '\u{00AD}']);
        let last = stem
            .rsplit(|c: char| !c.is_alphabetic())
            .next()
            .unwrap_or("");
        let first = next
            .split(|c: char| !c.is_alphabetic())
            .next()
            .unwrap_or("");
        last.chars().count() >= 2
            && first.chars().count() >= 2
            && last.chars().all(char::is_uppercase)
            && first.chars().all(char::is_uppercase)
    };
    // `up-` + `or downregulated`: a suspended hyphen, kept (a word is seldom cut before `or`, `and`, `nor`).
    let suspended = || {
        let first = next
            .split(|c: char| !c.is_alphabetic())
            .next()
            .unwrap_or("");
        matches!(first, "or" | "and" | "nor")
    };
    if hyphen && before_hyphen && (next_lower || caps()) && !trimmed.ends_with("--") && !suspended()
    {
        let cut = trimmed
            .trim_end_matches(['-', '\u{2010}', '\u{00AD}'])
            .len();
        text.truncate(cut);
        text.push_str(next);
    } else {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(next);
    }
}

/// Writes the document's lines as blocks.
pub(crate) fn write_blocks(lines: &[Line], out: &mut Builder) {
    // The body size: the size most characters have (half-point steps).
    let mut by_size: std::collections::HashMap<i32, usize> = std::collections::HashMap::new();
    for l in lines.iter().filter(|l| l.table.is_none()) {
        *by_size.entry((l.size * 2.0).round() as i32).or_default() += l.text.chars().count();
    }
    let body = by_size
        .iter()
        .max_by_key(|(s, n)| (**n, -**s))
        .map_or(10.0, |(s, _)| *s as f32 / 2.0);
    let is_heading = |l: &Line| {
        l.table.is_none()
            && l.text.chars().count() < 200
            && l.text.chars().any(char::is_alphabetic)
            && (l.size >= body * 1.15
                || l.bold
                    && l.size >= body * 0.98
                    && l.text.chars().count() < 90
                    && !ends_sentence(&l.text))
    };
    // Heading levels by size, largest first.
    let mut heading_sizes: Vec<i32> = lines
        .iter()
        .filter(|l| is_heading(l))
        .map(|l| (l.size * 2.0).round() as i32)
        .collect();
    heading_sizes.sort_unstable_by(|a, b| b.cmp(a));
    heading_sizes.dedup();
    let level_of = |l: &Line| -> u8 {
        let s = (l.size * 2.0).round() as i32;
        let rank = heading_sizes
            .iter()
            .position(|&h| h == s)
            .unwrap_or(heading_sizes.len());
        (rank as u8 + 1).min(6)
    };
    // Line pitch per region: the median distance between consecutive lines of body size.
    let mut pitches: std::collections::HashMap<u32, Vec<f32>> = std::collections::HashMap::new();
    for w in lines.windows(2) {
        if w[0].region == w[1].region && w[0].table.is_none() && w[1].table.is_none() {
            let d = w[0].y - w[1].y;
            if d > 0.0 && d < 3.0 * w[0].size.max(1.0) {
                pitches.entry(w[0].region).or_default().push(d);
            }
        }
    }
    let pitch: std::collections::HashMap<u32, f32> =
        pitches.into_iter().map(|(r, v)| (r, median(v))).collect();

    enum Open {
        None,
        Para(Vec<(String, u32)>),
        Item(String, u32),
        Heading(String, u8, u32),
    }
    let mut open = Open::None;
    let mut prev: Option<&Line> = None;
    let close = |open: &mut Open, out: &mut Builder| match std::mem::replace(open, Open::None) {
        Open::Para(pieces) => {
            let refs: Vec<(&str, u32)> = pieces.iter().map(|(t, p)| (t.as_str(), *p)).collect();
            out.paragraph_pieces(&refs);
        }
        Open::Item(text, page) => {
            out.set_page(page);
            out.list_item(0, &text);
        }
        Open::Heading(text, level, page) => {
            out.set_page(page);
            out.heading(level, &text);
        }
        Open::None => {}
    };
    for l in lines {
        if let Some(rows) = &l.table {
            close(&mut open, out);
            out.set_page(l.page);
            out.table(rows);
            prev = Some(l);
            continue;
        }
        if l.text.is_empty() {
            continue;
        }
        let heading = is_heading(l);
        let same_region = prev.is_some_and(|p| p.region == l.region);
        let p_pitch = pitch.get(&l.region).copied().unwrap_or(l.size * 1.25);
        let gap_break =
            prev.is_some_and(|p| same_region && (p.y - l.y) > p_pitch + 0.3 * l.size.min(p.size));
        let size_break = prev.is_some_and(|p| (p.size - l.size).abs() > 0.12 * p.size.max(l.size));
        if heading {
            match &mut open {
                // A heading over several lines: the same size, a line's height apart.
                Open::Heading(text, level, _)
                    if prev.is_some_and(|p| {
                        (p.size - l.size).abs() < 0.5 && same_region && p.y - l.y < 1.6 * l.size
                    }) && *level == level_of(l) =>
                {
                    join_line(text, &l.text);
                }
                _ => {
                    close(&mut open, out);
                    open = Open::Heading(l.text.clone(), level_of(l), l.page);
                }
            }
            prev = Some(l);
            continue;
        }
        if let Some(item) = is_bullet(&l.text) {
            close(&mut open, out);
            open = Open::Item(item.to_owned(), l.page);
            prev = Some(l);
            continue;
        }
        let continues = match (&open, prev) {
            (Open::Para(_) | Open::Item(..), Some(p)) if same_region => {
                let indent = l.x0 > p.x0 + 0.8 * l.size && !matches!(open, Open::Item(..));
                // A short line that ends a sentence ends its paragraph.
                let short_end =
                    ends_sentence(&p.text) && p.x1 < p.right - 0.15 * (p.right - p.left).max(1.0);
                // An item goes on under its text (a hanging indent), or flush left after a line that
                // was wrapped (it runs to the column's right edge).
                let wrapped = p.x1 >= p.right - 0.15 * (p.right - p.left).max(1.0);
                let item_continues =
                    matches!(open, Open::Item(..)) && (l.x0 > p.left + 0.3 * l.size || wrapped);
                !gap_break
                    && !size_break
                    && !short_end
                    && (!indent || item_continues)
                    && (!matches!(open, Open::Item(..)) || item_continues)
            }
            // Over a column or page break: on when the last line stopped mid-sentence.
            (Open::Para(_), Some(p)) => !ends_sentence(&p.text) && !size_break,
            _ => false,
        };
        if continues {
            match &mut open {
                Open::Para(pieces) => match pieces.last_mut() {
                    Some((text, page)) if *page == l.page => join_line(text, &l.text),
                    _ => {
                        // A new page: the word hyphenated over the break is joined in the last piece.
                        let last_hyphen = pieces.last().is_some_and(|(t, _)| {
                            t.trim_end().ends_with('-')
                                && l.text.chars().next().is_some_and(char::is_lowercase)
                        });
                        if last_hyphen {
                            let (first, rest) = l.text.split_once(' ').unwrap_or((&l.text, ""));
                            if let Some((t, _)) = pieces.last_mut() {
                                join_line(t, first);
                            }
                            pieces.push((rest.to_owned(), l.page));
                        } else {
                            pieces.push((l.text.clone(), l.page));
                        }
                    }
                },
                Open::Item(text, _) => join_line(text, &l.text),
                _ => {}
            }
        } else {
            close(&mut open, out);
            open = Open::Para(vec![(l.text.clone(), l.page)]);
        }
        prev = Some(l);
    }
    close(&mut open, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyphenated_words_join() {
        let mut t = "the exam-".to_owned();
        join_line(&mut t, "ple shows");
        assert_eq!(t, "the example shows");
        let mut t = "well-".to_owned();
        join_line(&mut t, "Known");
        assert_eq!(t, "well- Known");
        let mut t = "significantly up-".to_owned();
        join_line(&mut t, "or downregulated");
        assert_eq!(t, "significantly up- or downregulated");
        assert!(is_bullet("• item").is_some());
        assert!(is_bullet("1. first").is_some());
        assert!(is_bullet("-5 degrees").is_none());
    }
}
