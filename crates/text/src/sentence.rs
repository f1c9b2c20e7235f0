//! Sentence splitting of the offline kit (specs README): split at blank lines and after `.`, `!`, `?`, `。`,
//! `！`, `？` followed by white space, except after a single capital letter or a listed abbreviation.

/// Abbreviations after which a full stop does not end a sentence (compared lower-cased).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "dr", "st", "jr", "no", "vs", "etc", "e.g", "i.e",
];

/// Splits text into sentences (byte ranges into `text`).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for block in split_blank_lines(text) {
        let chars: Vec<(usize, char)> = block.char_indices().collect();
        let mut start = 0;
        for (i, &(pos, c)) in chars.iter().enumerate() {
            if !matches!(c, '.' | '!' | '?' | '。' | '！' | '？') {
                continue;
            }
            let next_is_space = chars.get(i + 1).is_some_and(|(_, n)| n.is_whitespace());
            if !next_is_space {
                continue;
            }
            if c == '.' {
                let word: String = block[start..pos]
                    .rsplit(char::is_whitespace)
                    .next()
                    .unwrap_or("")
                    .to_string();
                let single_capital =
                    word.chars().count() == 1 && word.chars().all(char::is_uppercase);
                if single_capital || ABBREVIATIONS.contains(&word.to_lowercase().as_str()) {
                    continue;
                }
            }
            let end = pos + c.len_utf8();
            let s = block[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
        let s = block[start..].trim();
        if !s.is_empty() {
            out.push(s);
        }
    }
    out
}

fn split_blank_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    let mut previous_blank = false;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        if blank && !previous_blank && offset > start {
            out.push(&text[start..offset]);
        }
        if blank {
            start = offset + line.len();
        }
        previous_blank = blank;
        offset += line.len();
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}
#[cfg(test)]
mod tests {
    use super::sentences;

    #[test]
    fn splits_at_terminators_blank_lines_and_keeps_abbreviations() {
        let text =
            "Dr. Ada Lovelace met Mr. C. Babbage. They talked!\n\nA new paragraph? Yes etc. done";
        assert_eq!(
            sentences(text),
            vec![
                "Dr. Ada Lovelace met Mr. C. Babbage.",
                "They talked!",
                "A new paragraph?",
                "Yes etc. done"
            ]
        );
        assert_eq!(sentences("东京。大阪。"), vec!["东京。大阪。"]);
        assert_eq!(sentences("东京。 大阪。"), vec!["东京。", "大阪。"]);
        assert!(sentences("  \n\n ").is_empty());
    }
}
