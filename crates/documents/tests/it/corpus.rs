//! Every file of `tests/data` (made by `cargo xtask docs-corpus` from our hand-written fixture) read and
//! compared with its `.truth.json`: the text in reading order (token F1 by longest common subsequence),
//! the boilerplate gone, and every source sentence located on the page (slide, sheet, chapter) it was put
//! on.

use std::path::{Path, PathBuf};

use kgrag_documents::{read_path, Limits};
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Token F1 in order: matched tokens are a longest common subsequence.
fn ordered_f1(got: &str, want: &str) -> f64 {
    let (a, b) = (tokens(got), tokens(want));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut prev = vec![0u32; b.len() + 1];
    let mut cur = vec![0u32; b.len() + 1];
    for x in &a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                prev[j + 1].max(cur[j])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    let m = f64::from(prev[b.len()]);
    let (p, r) = (m / a.len() as f64, m / b.len() as f64);
    2.0 * p * r / (p + r)
}

/// Where `sentence` starts in `text` (its words in order, anything between them), from `from` on.
fn find_sentence(text: &str, sentence: &str, from: usize) -> Option<usize> {
    let words: Vec<&str> = sentence
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .take(12)
        .collect();
    let first = *words.first()?;
    let mut start = from;
    while let Some(at) = text[start..].find(first) {
        let pos = start + at;
        let mut cursor = pos + first.len();
        let all = words[1..].iter().all(|w| {
            let rest = &text[cursor..];
            let skip = rest.len()
                - rest
                    .trim_start_matches(|c: char| !c.is_alphanumeric())
                    .len();
            if rest[skip..].starts_with(w) {
                cursor += skip + w.len();
                true
            } else {
                false
            }
        });
        if all {
            return Some(pos);
        }
        start = pos + first.len();
    }
    None
}

#[test]
fn every_format_reads_its_text_boilerplate_and_pages() {
    let dir = data();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let files: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(files.len() >= 11, "{files:?}");
    let mut formats = std::collections::BTreeSet::new();
    for name in files {
        let truth: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).unwrap(),
        )
        .unwrap();
        let doc = read_path(&dir.join(name), &Limits::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        formats.insert(doc.format);
        let f1 = ordered_f1(&doc.text, truth["expected"].as_str().unwrap());
        assert!(f1 >= 0.99, "{name}: F1 {f1:.4}\n{}", doc.text);
        // Boilerplate: no running header, footer, page number, menu or banner as a line of the text.
        let lines: std::collections::HashSet<&str> = doc.text.lines().map(str::trim).collect();
        for b in truth["boilerplate"].as_array().unwrap() {
            let b = b.as_str().unwrap();
            assert!(!lines.contains(b), "{name}: boilerplate {b:?} kept");
        }
        // Pages: each sentence is found, and the source map puts it on its page.
        let mut cursor = 0;
        for s in truth["sentences"].as_array().unwrap() {
            let text = s["text"].as_str().unwrap();
            let at = find_sentence(&doc.text, text, cursor)
                .or_else(|| find_sentence(&doc.text, text, 0))
                .unwrap_or_else(|| panic!("{name}: sentence not found: {text}"));
            cursor = at;
            if let Some(page) = s["page"].as_u64() {
                let loc = doc.locate(at, at + 1);
                let (first, last) = (loc.page.unwrap_or(0), loc.page_end.unwrap_or(0));
                assert!(
                    u64::from(first) <= page && page <= u64::from(last),
                    "{name}: {text:?} is on page {page}, the source map says {first}–{last}"
                );
            }
        }
        if let Some(units) = truth["units"].as_u64().filter(|&u| u > 0) {
            assert_eq!(u64::from(doc.units), units, "{name}: units");
        }
    }
    assert_eq!(
        formats.len(),
        8,
        "every binary format is in the corpus: {formats:?}"
    );
}

#[test]
fn headings_make_sections_and_tables_stay_tables() {
    let dir = data();
    for name in [
        "guilds.pdf",
        "guilds-2col.pdf",
        "guilds.docx",
        "guilds.html",
        "guilds.epub",
    ] {
        let doc = read_path(&dir.join(name), &Limits::default()).unwrap();
        assert!(
            doc.text.contains("## Tesk Amberlow") || doc.text.contains("# Tesk Amberlow"),
            "{name}: the heading is a heading"
        );
        assert!(
            doc.text.contains("| Subject | Relation | Object |"),
            "{name}: the table\n{}",
            doc.text
        );
        let at = doc.text.find("Farrowmoor, a hill village").unwrap();
        assert_eq!(
            doc.locate(at, at + 10).section.as_deref(),
            Some("Tesk Amberlow"),
            "{name}: the section of a paragraph"
        );
    }
    // Words hyphenated over lines in the two-column PDF come back whole: no letter, hyphen, space.
    let two = read_path(&dir.join("guilds-2col.pdf"), &Limits::default()).unwrap();
    let broken = two
        .text
        .match_indices("- ")
        .filter(|(i, _)| {
            two.text[..*i]
                .chars()
                .last()
                .is_some_and(char::is_alphabetic)
        })
        .count();
    assert_eq!(broken, 0, "{}", two.text);
}
