//! Reading JSON written by Python's `json` module, which emits the bare tokens `NaN`, `Infinity` and
//! `-Infinity` that strict JSON parsers (serde_json among them) reject. HippoRAG's OpenIE cache files
//! contain them.

use std::borrow::Cow;

/// Replaces every bare `NaN`, `Infinity` and `-Infinity` token outside strings by `null`, so that a strict
/// parser accepts the text. Strings (escapes included) are left untouched. Returns the input unchanged
/// (borrowed) when there is nothing to replace.
pub fn replace_non_finite_literals(json: &str) -> Cow<'_, str> {
    const TOKENS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied_up_to = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if let Some(token) = TOKENS.iter().find(|t| bytes[i..].starts_with(t.as_bytes())) {
            let buf = out.get_or_insert_with(|| String::with_capacity(json.len()));
            buf.push_str(&json[copied_up_to..i]);
            buf.push_str("null");
            i += token.len();
            copied_up_to = i;
            continue;
        }
        i += 1;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut buf) => {
            buf.push_str(&json[copied_up_to..]);
            Cow::Owned(buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multibyte_characters_outside_strings_do_not_split() {
        // Curly quotes and a BOM outside strings: scanning must step over them whole (it used to slice
        // the text at a byte inside a character and panic).
        let src = "\u{feff}{\u{201c}a\u{201d}: NaN, \u{2014} Infinity\u{2019}s}";
        let fixed = replace_non_finite_literals(src);
        assert_eq!(
            fixed,
            "\u{feff}{\u{201c}a\u{201d}: null, \u{2014} null\u{2019}s}"
        );
        assert_eq!(replace_non_finite_literals("\u{e9}NaN"), "\u{e9}null");
    }

    #[test]
    fn replaces_only_outside_strings() {
        let src = r#"{"a": NaN, "b": [Infinity, -Infinity], "s": "NaN \" Infinity", "n": 1.5}"#;
        let fixed = replace_non_finite_literals(src);
        assert_eq!(
            fixed,
            r#"{"a": null, "b": [null, null], "s": "NaN \" Infinity", "n": 1.5}"#
        );
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert!(v["a"].is_null());
        assert!(matches!(
            replace_non_finite_literals("[1, \"NaN\"]"),
            Cow::Borrowed(_)
        ));
    }
}
