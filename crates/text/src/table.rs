//! Tables for prompts in the CSV form HiRAG and LeanRAG give their models (their `list_of_list_to_csv`,
//! specs hirag §6.3 and leanrag §5): a `-----Name-----` header, then a csv fence holding a header row of
//! bare names and one line per row, cells joined by `",\t"`, text cells wrapped in `"` after their own
//! surrounding quotes are stripped, numbers bare.

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
/// assert_eq!(t, "-----Entities-----\n```csv\nid,\tentity\n0,\t\"ADA\"\n```");
/// ```
pub fn csv_table(name: &str, header: &[&str], rows: &[Vec<Cell>]) -> String {
    let mut out = format!("-----{name}-----\n```csv\n{}", header.join(",\t"));
    for row in rows {
        out.push('\n');
        let cells: Vec<String> = row
            .iter()
            .map(|c| match c {
                Cell::Num(n) => n.clone(),
                Cell::Text(t) => format!("\"{}\"", t.trim_matches('"')),
            })
            .collect();
        out.push_str(&cells.join(",\t"));
    }
    out.push_str("\n```");
    out
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
            "-----Entities-----\n```csv\nid,\tentity,\trating\n0,\t\"ADA\",\t7.5\n1,\t\"Bob\",\t7.0\n```"
        );
        assert_eq!(
            csv_table("Empty", &["id"], &[]),
            "-----Empty-----\n```csv\nid\n```"
        );
    }
}
