//! Tables for prompts in the CSV form HiRAG and LeanRAG give their models (their `list_of_list_to_csv`,
//! specs hirag §6.3 and leanrag §5): a `-----Name-----` header, then a csv fence holding a header row and
//! one line per row, cells joined by `",\t"`. Every text cell, the header's names included, is stripped as
//! the reference's `s.strip().strip("'").strip('"')` does — Python's whitespace, then every leading and
//! trailing `'`, then every leading and trailing `"` — and wrapped in `"`; numbers are bare.

use std::fmt::Display;

/// One cell of a [`csv_table`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// A number, written as given (format it the way the table needs).
    Num(String),
    /// Text, written in double quotes.
    Text(String),
}

impl Cell {
    /// A number cell from anything displayable.
    pub fn num(value: impl Display) -> Self {
        Self::Num(value.to_string())
    }
}

/// The table `name` with `header` and `rows` in the specs' CSV form.
///
/// ```
/// use kgrag_text::table::{csv_table, Cell};
///
/// let t = csv_table("Entities", &["id", "entity"], &[vec![Cell::num(0), Cell::Text("\"ADA\"".into())]]);
/// assert_eq!(t, "-----Entities-----\n```csv\n\"id\",\t\"entity\"\n0,\t\"ADA\"\n```");
/// ```
pub fn csv_table(name: &str, header: &[&str], rows: &[Vec<Cell>]) -> String {
    let header: Vec<String> = header.iter().map(|h| quoted(h)).collect();
    let mut out = format!("-----{name}-----\n```csv\n{}", header.join(",\t"));
    for row in rows {
        out.push('\n');
        let cells: Vec<String> = row
            .iter()
            .map(|c| match c {
                Cell::Num(n) => n.clone(),
                Cell::Text(t) => quoted(t),
            })
            .collect();
        out.push_str(&cells.join(",\t"));
    }
    out.push_str("\n```");
    out
}

/// A text cell as the reference writes it: `"` + `s.strip().strip("'").strip('"')` + `"`.
fn quoted(text: &str) -> String {
    let inner = text
        .trim_matches(py_isspace)
        .trim_matches('\'')
        .trim_matches('"');
    format!("\"{inner}\"")
}

/// Python's `str.isspace`: Unicode White_Space plus the four ASCII separators `\x1c`–`\x1f`, which
/// Python's `str.strip()` also removes.
fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_follow_the_reference_format() {
        let table = csv_table(
            "Entities",
            &["id", "entity", "rating"],
            &[
                vec![Cell::num(0), Cell::Text("\"ADA\"".into()), Cell::num(7.5)],
                vec![
                    Cell::num(1),
                    Cell::Text("Bob".into()),
                    Cell::Num("7.0".into()),
                ],
            ],
        );
        assert_eq!(
            table,
            "-----Entities-----\n```csv\n\"id\",\t\"entity\",\t\"rating\"\n0,\t\"ADA\",\t7.5\n1,\t\"Bob\",\t7.0\n```"
        );
        assert_eq!(
            csv_table("Empty", &["id"], &[]),
            "-----Empty-----\n```csv\n\"id\"\n```"
        );
    }

    #[test]
    fn cells_are_stripped_as_python_strips_them() {
        // s.strip().strip("'").strip('"'): whitespace first (Python's, with \x1c–\x1f), then every
        // single quote at the ends, then every double quote; what is left inside stays.
        let cases = [
            ("  plain  ", "\"plain\""),
            ("treats of the Soul.''", "\"treats of the Soul.\""),
            ("treats of the Soul.''\"", "\"treats of the Soul.''\""),
            ("'Jefferson Smith' fights", "\"Jefferson Smith' fights\""),
            ("\"'both'\"", "\"'both'\""),
            ("'\"inner\"'", "\"inner\""),
            ("\u{1f}\u{a0}x\u{3000}\u{1c}", "\"x\""),
            ("' spaced '", "\" spaced \""),
            ("", "\"\""),
        ];
        for (cell, want) in cases {
            assert_eq!(quoted(cell), want, "{cell:?}");
        }
    }
}
