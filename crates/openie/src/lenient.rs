//! Tolerant reading of JSON that language models write: code fences, prose around the object, truncation at
//! the token limit, and Python literals (single quotes, `True`/`None`, tuples, trailing commas).
//!
//! Model output is never evaluated as code: strict JSON is tried first, then our own parser for the Python
//! literal subset.

use serde_json::{Map, Number, Value};

/// Removes Markdown code fences (```` ```json ```` … ```` ``` ````), keeping what is inside.
pub fn strip_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Tracks whether characters are inside a quoted string (`"…"` or `'…'`, backslash escapes), so brackets and
/// commas in strings are not mistaken for structure.
#[derive(Default)]
struct Scanner {
    in_string: Option<char>,
    escaped: bool,
}

impl Scanner {
    /// Feeds one character; returns it when it is structural (outside strings and not a quote).
    fn structural(&mut self, c: char) -> Option<char> {
        if let Some(q) = self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == q {
                self.in_string = None;
            }
            return None;
        }
        if c == '"' || c == '\'' {
            self.in_string = Some(c);
            return None;
        }
        Some(c)
    }
}

/// Closes JSON cut off by a token limit, as HippoRAG does: if `text` parses, it is returned as is; otherwise
/// everything after the last comma outside strings is dropped and every still-open `[`/`{` is closed in reverse
/// order (brackets inside strings are ignored).
pub fn close_truncated(text: &str) -> String {
    if serde_json::from_str::<Value>(text).is_ok() {
        return text.to_owned();
    }
    let mut scanner = Scanner::default();
    let last_comma = text
        .char_indices()
        .filter(|&(_, c)| scanner.structural(c) == Some(','))
        .last()
        .map(|(i, _)| i);
    let kept = match last_comma {
        Some(i) => &text[..i],
        None => text,
    };
    let mut stack = Vec::new();
    let mut scanner = Scanner::default();
    for c in kept.chars() {
        match scanner.structural(c) {
            Some(open @ ('[' | '{')) => stack.push(open),
            Some(']' | '}') => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut out = kept.to_owned();
    if let Some(q) = scanner.in_string {
        out.push(q);
    }
    for open in stack.iter().rev() {
        out.push(if *open == '[' { ']' } else { '}' });
    }
    out
}

/// The first balanced `{…}` in `text` whose text contains `"key"` or `'key'`, ignoring braces inside strings.
///
/// Candidates are tried by start position, each scanned with its own string state from its `{`. A scan
/// settles every `{` it meets outside strings as well (a scan from there would see the same characters in
/// the same state), whether a span holds the key is a binary search over the key's positions, and no
/// start after the last key is tried, so the work stays linear in practice. A budget of scanned characters
/// (2²⁴, plus 32 per byte of `text`) bounds it whatever the input: past it the reply counts as holding no
/// such object. Below it — any reply under ~0.5 MB, and every realistic one — the result is exactly that
/// of scanning every candidate to its end.
pub fn find_object_with_key<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let quoted = key.len() + 2;
    // Start of every (possibly overlapping) `"key"` or `'key'`, ascending.
    let mut keys = Vec::new();
    for pattern in [format!("\"{key}\""), format!("'{key}'")] {
        let mut from = 0;
        while let Some(i) = text.get(from..).and_then(|t| t.find(&pattern)) {
            keys.push(from + i);
            from += i + 1;
        }
    }
    keys.sort_unstable();
    let &last_key = keys.last()?;
    let holds_key = |start: usize, end: usize| {
        let first = keys.partition_point(|&k| k < start);
        keys.get(first).is_some_and(|&k| k + quoted <= end)
    };
    let mut settled: std::collections::HashMap<usize, Option<usize>> = Default::default();
    let mut budget = text.len().saturating_mul(32).saturating_add(1 << 24);
    let mut search_from = 0;
    while let Some(offset) = text.get(search_from..).and_then(|t| t.find('{')) {
        let start = search_from + offset;
        if start > last_key {
            // A span from here cannot hold a key that starts before it.
            return None;
        }
        let end = match settled.get(&start) {
            Some(&end) => end,
            None => scan_object(text, start, &mut settled, &mut budget)?,
        };
        if let Some(end) = end {
            if holds_key(start, end) {
                return text.get(start..end);
            }
        }
        search_from = start + 1;
    }
    None
}

/// Scans the object opening at `text[start] == '{'`: its end (exclusive) if it closes, `None` if not,
/// recording the same for every `{` met outside strings on the way in `settled`. `None` from the outer
/// `Option`: the budget of scanned characters ran out.
fn scan_object(
    text: &str,
    start: usize,
    settled: &mut std::collections::HashMap<usize, Option<usize>>,
    budget: &mut usize,
) -> Option<Option<usize>> {
    // Open brackets outside strings: position and whether it is a `{`.
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut scanner = Scanner::default();
    for (i, c) in text.get(start..)?.char_indices() {
        *budget = budget.checked_sub(1)?;
        match scanner.structural(c) {
            Some(b @ ('{' | '[')) => open.push((start + i, b == '{')),
            Some('}' | ']') => {
                let (at, brace) = open.pop()?;
                let end = start + i + c.len_utf8();
                if brace {
                    settled.insert(at, Some(end));
                }
                if open.is_empty() {
                    return Some(Some(end));
                }
            }
            _ => {}
        }
    }
    for (at, brace) in open {
        if brace {
            settled.insert(at, None);
        }
    }
    Some(None)
}

/// Parses strict JSON, else the Python literal subset.
pub fn parse_value(text: &str) -> Option<Value> {
    serde_json::from_str(text)
        .ok()
        .or_else(|| PyParser::new(text).parse_document())
}

/// How an object for `key` was recovered from model output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The output parsed as it was (after fences and surrounding prose were removed).
    Clean,
    /// Truncated output was closed before parsing.
    ClosedTruncation,
}

/// Finds and parses the object holding `key` in a model's reply (fenced, wrapped in prose, truncated, or in
/// Python-literal form). Returns the value of `key` and how it was recovered.
pub fn extract_key(reply: &str, key: &str) -> Option<(Value, Recovery)> {
    let unfenced = strip_fences(reply);
    let attempt = |text: &str| -> Option<Value> {
        let object = find_object_with_key(text, key)?;
        let mut value = parse_value(object)?;
        value.as_object_mut()?.remove(key)
    };
    if let Some(v) = attempt(&unfenced) {
        return Some((v, Recovery::Clean));
    }
    // Cut-off output (or output that simply never closed): close it and try again.
    let start = unfenced.find('{')?;
    let closed = close_truncated(unfenced[start..].trim_end());
    attempt(&closed).map(|v| (v, Recovery::ClosedTruncation))
}

/// A recursive-descent parser for Python literals: dicts, lists, tuples, strings in either quote, numbers,
/// `True`/`False`/`None`, trailing commas. Nothing is evaluated.
struct PyParser {
    chars: Vec<char>,
    pos: usize,
}

impl PyParser {
    fn new(src: &str) -> Self {
        Self {
            chars: src.chars().collect(),
            pos: 0,
        }
    }

    fn parse_document(mut self) -> Option<Value> {
        let v = self.value(0)?;
        self.ws();
        (self.pos == self.chars.len()).then_some(v)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > 64 {
            return None;
        }
        self.ws();
        match self.peek()? {
            '{' => self.dict(depth),
            '[' => self.seq(']', depth),
            '(' => self.seq(')', depth),
            '"' | '\'' => self.string().map(Value::String),
            c if c == '-' || c == '+' || c.is_ascii_digit() || c == '.' => self.number(),
            _ => self.word(),
        }
    }

    fn dict(&mut self, depth: usize) -> Option<Value> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            if self.eat('}') {
                return Some(Value::Object(map));
            }
            let key = match self.value(depth + 1)? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(':') {
                return None;
            }
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            if !self.eat(',') {
                return self.eat('}').then_some(Value::Object(map));
            }
        }
    }

    fn seq(&mut self, close: char, depth: usize) -> Option<Value> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            if !self.eat(',') {
                return self.eat(close).then_some(Value::Array(items));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            self.pos += 1;
            match c {
                '\\' => {
                    let e = self.peek()?;
                    self.pos += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        'u' => {
                            let hex: String =
                                self.chars.get(self.pos..self.pos + 4)?.iter().collect();
                            self.pos += 4;
                            out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        }
                        other => out.push(other),
                    }
                }
                c if c == quote => return Some(out),
                c => out.push(c),
            }
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E' | '_'))
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos]
            .iter()
            .filter(|c| **c != '_')
            .collect();
        if let Ok(i) = text.parse::<i64>() {
            return Some(Value::Number(i.into()));
        }
        let f: f64 = text.parse().ok()?;
        Number::from_f64(f).map(Value::Number).or(Some(Value::Null))
    }

    fn word(&mut self) -> Option<Value> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        match word.as_str() {
            "True" | "true" => Some(Value::Bool(true)),
            "False" | "false" => Some(Value::Bool(false)),
            "None" | "null" | "NaN" | "nan" => Some(Value::Null),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_literals() {
        assert_eq!(
            parse_value("{'a': [('x', \"y\", 3), True, None, 1.5,],}"),
            Some(json!({"a": [["x", "y", 3], true, null, 1.5]}))
        );
        assert_eq!(
            parse_value("{'it\\'s': 'fine'}"),
            Some(json!({"it's": "fine"}))
        );
        assert_eq!(parse_value("{'a': exec('x')}"), None);
        assert_eq!(parse_value("{'a': 1} trailing"), None);
    }

    #[test]
    fn truncation_is_closed_like_the_reference() {
        // Cut after the last comma, then close: the partial item stays (the arity filter drops it later).
        let cut = r#"{"triples": [["a", "b", "c"], ["d", "e", "f"#;
        assert_eq!(
            close_truncated(cut),
            r#"{"triples": [["a", "b", "c"], ["d", "e"]]}"#
        );
        let ok = r#"{"a": 1}"#;
        assert_eq!(close_truncated(ok), ok);
        let bracket_in_string = r#"{"triples": [["a [x", "b", "c"], ["#;
        assert_eq!(
            close_truncated(bracket_in_string),
            r#"{"triples": [["a [x", "b", "c"]]}"#
        );
    }

    #[test]
    fn finds_the_object_with_the_key() {
        let text = "Sure! {\"other\": 1} then {\"named_entities\": [\"A\", \"B\"]} done";
        assert_eq!(
            find_object_with_key(text, "named_entities"),
            Some("{\"named_entities\": [\"A\", \"B\"]}")
        );
        assert_eq!(
            find_object_with_key("{\"x\": \"}\"}", "named_entities"),
            None
        );
    }

    #[test]
    fn extract_key_handles_fences_prose_and_truncation() {
        let fenced = "```json\n{\"named_entities\": [\"Radio City\"]}\n```";
        assert_eq!(
            extract_key(fenced, "named_entities"),
            Some((json!(["Radio City"]), Recovery::Clean))
        );
        let cut = "Here you go: {\"triples\": [[\"a\", \"b\", \"c\"], [\"d\"";
        assert_eq!(
            extract_key(cut, "triples"),
            Some((json!([["a", "b", "c"]]), Recovery::ClosedTruncation))
        );
        assert_eq!(extract_key("no json at all", "triples"), None);
        assert_eq!(extract_key("", "triples"), None);
    }
}
