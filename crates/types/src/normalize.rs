//! Text normalisation for entity names and triple elements, and Python-compatible stripping.
//!
//! Two rules exist because HippoRAG's reference rule destroys every non-ASCII letter:
//!
//! * [`Normalisation::Ascii`] — the reference rule (`OSU-NLP-Group/HippoRAG`, `text_processing`): Unicode
//!   lower-casing, then **each** character outside `[A-Za-z0-9 ]` becomes one space, then spaces are trimmed at
//!   both ends. Inner runs of spaces are kept (`"james p. hogan"` → `"james p  hogan"`), and non-ASCII letters
//!   become spaces (`"Dröm"` → `"dr m"`). Ids computed with it equal the reference system's ids.
//! * [`Normalisation::Unicode`] — ours: NFKC, Unicode lower-casing, each character that is not a Unicode letter,
//!   digit or space becomes one space, then spaces are trimmed; inner runs are kept as in the ASCII rule.

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

/// Which normalisation rule an entity or triple element goes through before it is hashed into an id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalisation {
    /// HippoRAG's reference rule: keeps only `[a-z0-9 ]` (the default, for id compatibility).
    #[default]
    Ascii,
    /// NFKC + lower-casing, keeps Unicode letters and digits.
    Unicode,
}

impl Normalisation {
    /// Normalises `text` under this rule.
    pub fn apply(self, text: &str) -> String {
        let kept: String = match self {
            Normalisation::Ascii => text
                .to_lowercase()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == ' ' {
                        c
                    } else {
                        ' '
                    }
                })
                .collect(),
            Normalisation::Unicode => text
                .nfkc()
                .collect::<String>()
                .to_lowercase()
                .chars()
                .map(|c| {
                    if c.is_alphanumeric() || c == ' ' {
                        c
                    } else {
                        ' '
                    }
                })
                .collect(),
        };
        kept.trim_matches(' ').to_owned()
    }

    /// Number of alphanumeric characters in `text` as this rule counts them (ASCII only for
    /// [`Normalisation::Ascii`]); HippoRAG's synonymy guard needs more than two.
    pub fn alphanumeric_count(self, text: &str) -> usize {
        match self {
            Normalisation::Ascii => text.chars().filter(char::is_ascii_alphanumeric).count(),
            Normalisation::Unicode => text.chars().filter(|c| c.is_alphanumeric()).count(),
        }
    }
}

/// `s` without the leading and trailing white space that Python's `str.strip()` removes: Unicode
/// `White_Space` characters plus the information separators U+001C–U+001F.
pub fn python_strip(s: &str) -> &str {
    s.trim_matches(is_python_whitespace)
}

/// Whether Python's `str.isspace()` holds for `c`.
pub fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_rule_table() {
        let cases = [
            ("Radio City", "radio city"),
            ("  Radio City!  ", "radio city"),
            ("James P. Hogan", "james p  hogan"),
            ("U.S.A.", "u s a"),
            ("Route 97", "route 97"),
            ("1,000,000", "1 000 000"),
            ("Dröm", "dr m"),
            ("Ελλάδα", ""),
            ("東京 Tower", "tower"),
            ("\"quoted\" — dash", "quoted    dash"),
            ("tab\there", "tab here"),
            ("", ""),
            ("!!!", ""),
            // U+0130 lower-cases to `i` + U+0307; the combining dot becomes a space.
            ("İstanbul", "i stanbul"),
            // The Kelvin sign lower-cases to an ASCII `k`.
            ("\u{212a}elvin", "kelvin"),
        ];
        for (input, want) in cases {
            assert_eq!(Normalisation::Ascii.apply(input), want, "input {input:?}");
        }
    }

    #[test]
    fn unicode_rule_table() {
        let cases = [
            ("Radio City", "radio city"),
            ("James P. Hogan", "james p  hogan"),
            ("Dröm", "dröm"),
            // NFKC composes the decomposed umlaut before the letter test.
            ("Dro\u{308}m", "dröm"),
            ("Ελλάδα", "ελλάδα"),
            ("東京 Tower", "東京 tower"),
            ("ﬁle №5", "file no5"),
            ("Route 97!", "route 97"),
            ("１２３", "123"),
            ("!!!", ""),
        ];
        for (input, want) in cases {
            assert_eq!(Normalisation::Unicode.apply(input), want, "input {input:?}");
        }
    }

    #[test]
    fn alphanumeric_counts() {
        assert_eq!(Normalisation::Ascii.alphanumeric_count("dr m"), 3);
        assert_eq!(Normalisation::Unicode.alphanumeric_count("dröm"), 4);
        assert_eq!(Normalisation::Ascii.alphanumeric_count("dröm"), 3);
    }

    #[test]
    fn python_strip_matches_isspace() {
        assert_eq!(python_strip("\u{1c}\u{1f} a b \u{3000}\u{a0}\n"), "a b");
        assert_eq!(python_strip("\u{200b}x"), "\u{200b}x");
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&Normalisation::Unicode).unwrap(),
            "\"unicode\""
        );
    }
}
