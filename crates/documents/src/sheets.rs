//! Spreadsheets in zip containers: Excel (`.xlsx`) and OpenDocument (`.ods`). Every sheet is one unit: its
//! name as a heading, its rows as a Markdown table (the first row the header), columns that hold nothing
//! left out. Cells are read sparsely — an empty cell, or a run of repeated empty cells, costs nothing — and
//! at most [`Limits::max_cells`] non-empty cells are read over the workbook. Dates are written as dates
//! (`2024-03-01`, `2024-03-01 14:30`), numbers as their shortest decimal form.

use std::collections::{BTreeSet, HashMap};

use roxmltree::Node;

use crate::builder::Builder;
use crate::xml::{self, attr, child, is, local};
use crate::zipfile::{self, Zip};
use crate::{Deadline, DocumentError, Extracted, Format, Limits, Result};

/// One sheet's non-empty cells: rows of (column, text).
#[derive(Default)]
pub(crate) struct Sheet {
    pub(crate) name: String,
    pub(crate) rows: Vec<Vec<(u32, String)>>,
}

/// Counts non-empty cells against the limit.
pub(crate) struct CellBudget {
    left: u64,
    limit: u64,
}

impl CellBudget {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            left: limits.max_cells,
            limit: limits.max_cells,
        }
    }

    pub(crate) fn take(&mut self, n: u64) -> Result<()> {
        if n > self.left {
            return Err(DocumentError::Limit(format!(
                "more than {} non-empty cells ([documents] max_cells)",
                self.limit
            )));
        }
        self.left -= n;
        Ok(())
    }
}

/// Writes the sheets, one unit each.
pub(crate) fn emit(
    sheets: Vec<Sheet>,
    format: Format,
    title: Option<String>,
    deadline: Deadline,
) -> Extracted {
    let mut out = Builder::new(deadline);
    let count = sheets.len() as u32;
    for (i, sheet) in sheets.into_iter().enumerate() {
        out.set_page(i as u32 + 1);
        out.end_sections();
        out.heading(2, &sheet.name);
        let used: BTreeSet<u32> = sheet
            .rows
            .iter()
            .flat_map(|r| {
                r.iter()
                    .filter(|(_, t)| !t.trim().is_empty())
                    .map(|(c, _)| *c)
            })
            .collect();
        let index: HashMap<u32, usize> = used.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let rows: Vec<Vec<String>> = sheet
            .rows
            .into_iter()
            .map(|r| {
                let mut dense = vec![String::new(); used.len()];
                for (c, t) in r {
                    if let Some(&i) = index.get(&c) {
                        dense[i] = t;
                    }
                }
                dense
            })
            .collect();
        out.table(&rows);
    }
    out.finish(format, title, count)
}

// ------------------------------------------------------------------------------------------------ XLSX

const XLSX: &str = "XLSX";

pub(crate) fn read_xlsx(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let mut zip = Zip::open(bytes, XLSX, limits)?;
    let book_path = "xl/workbook.xml";
    let book = zip.need_text(book_path)?;
    let rels_path = xml::rels_path(book_path);
    let rels = match zip.text(&rels_path)? {
        Some(t) => xml::relationships(&t, XLSX, &rels_path)?,
        None => Vec::new(),
    };
    let book_dom = xml::parse(&book, XLSX, book_path)?;
    let date1904 = xml::descendant(&book_dom.root_element(), "workbookPr")
        .and_then(|p| attr(&p, "date1904"))
        .is_some_and(|v| v == "1" || v == "true");
    let mut sheet_parts = Vec::new();
    if let Some(sheets) = xml::descendant(&book_dom.root_element(), "sheets") {
        for s in sheets.children().filter(|n| is(n, "sheet")) {
            let name = attr(&s, "name").unwrap_or("Sheet").to_owned();
            let rid = s
                .attributes()
                .find(|a| a.name() == "id" && a.namespace().is_some())
                .map(|a| a.value());
            let target = rid.and_then(|rid| rels.iter().find(|(r, _, _)| r == rid));
            if let Some((_, _, target)) = target {
                sheet_parts.push((name, zipfile::join("xl", target)));
            }
        }
    }
    if sheet_parts.len() > limits.max_pages as usize {
        return Err(DocumentError::Limit(format!(
            "{} sheets, over the limit of {} ([documents] max_pages)",
            sheet_parts.len(),
            limits.max_pages
        )));
    }
    let shared = match zip.text("xl/sharedStrings.xml")? {
        Some(t) => shared_strings(&t)?,
        None => Vec::new(),
    };
    let date_styles = match zip.text("xl/styles.xml")? {
        Some(t) => date_styles(&t)?,
        None => Vec::new(),
    };
    let title = match zip.text("docProps/core.xml")? {
        Some(t) => crate::docx::core_title(&t),
        None => None,
    };
    let mut budget = CellBudget::new(limits);
    let mut sheets = Vec::new();
    for (name, path) in sheet_parts {
        deadline.check()?;
        let Some(text) = zip.text(&path)? else {
            continue;
        };
        let dom = xml::parse(&text, XLSX, &path)?;
        let mut sheet = Sheet {
            name,
            rows: Vec::new(),
        };
        let Some(data) = xml::descendant(&dom.root_element(), "sheetData") else {
            sheets.push(sheet);
            continue;
        };
        for (n, row) in data.children().filter(|n| is(n, "row")).enumerate() {
            if n.is_multiple_of(4096) {
                deadline.check()?;
            }
            let mut cells = Vec::new();
            let mut next_col = 0u32;
            for c in row.children().filter(|n| is(n, "c")) {
                let col = attr(&c, "r").and_then(column_of).unwrap_or(next_col);
                next_col = col + 1;
                let value = cell_value(&c, &shared, &date_styles, date1904);
                if value.trim().is_empty() {
                    continue;
                }
                budget.take(1)?;
                cells.push((col, value));
            }
            if !cells.is_empty() {
                sheet.rows.push(cells);
            }
        }
        sheets.push(sheet);
    }
    Ok(emit(sheets, Format::Xlsx, title, deadline))
}

/// The 0-based column of a cell reference (`C5` → 2).
fn column_of(reference: &str) -> Option<u32> {
    let mut col: u32 = 0;
    let mut any = false;
    for b in reference.bytes() {
        if b.is_ascii_alphabetic() {
            col = col
                .checked_mul(26)?
                .checked_add(u32::from(b.to_ascii_uppercase() - b'A') + 1)?;
            any = true;
        } else {
            break;
        }
    }
    (any && col > 0).then(|| col - 1)
}

fn shared_strings(text: &str) -> Result<Vec<String>> {
    let dom = xml::parse(text, XLSX, "xl/sharedStrings.xml")?;
    Ok(dom
        .root_element()
        .children()
        .filter(|n| is(n, "si"))
        .map(|si| rich_text(&si))
        .collect())
}

/// The text of an `si` or `is` element: its `t`, or its runs' `t`s (phonetic runs left out).
fn rich_text(node: &Node) -> String {
    let mut s = String::new();
    for c in node.children().filter(|n| n.is_element()) {
        match local(&c) {
            "t" => s.push_str(c.text().unwrap_or("")),
            "r" => {
                if let Some(t) = child(&c, "t") {
                    s.push_str(t.text().unwrap_or(""));
                }
            }
            _ => {}
        }
    }
    s
}

/// For each cell format (`cellXfs` index), whether it shows a date.
fn date_styles(text: &str) -> Result<Vec<bool>> {
    let dom = xml::parse(text, XLSX, "xl/styles.xml")?;
    let root = dom.root_element();
    let mut custom: HashMap<u32, bool> = HashMap::new();
    if let Some(fmts) = child(&root, "numFmts") {
        for f in fmts.children().filter(|n| is(n, "numFmt")) {
            if let (Some(id), Some(code)) = (
                attr(&f, "numFmtId").and_then(|v| v.parse().ok()),
                attr(&f, "formatCode"),
            ) {
                custom.insert(id, is_date_code(code));
            }
        }
    }
    let Some(xfs) = child(&root, "cellXfs") else {
        return Ok(Vec::new());
    };
    Ok(xfs
        .children()
        .filter(|n| is(n, "xf"))
        .map(|xf| {
            let id: u32 = attr(&xf, "numFmtId")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            custom
                .get(&id)
                .copied()
                .unwrap_or(matches!(id, 14..=22 | 45..=47))
        })
        .collect())
}

/// Whether a number format code shows a date or time (`yyyy-mm-dd`, `h:mm`), ignoring quoted and
/// bracketed parts (`[Red]`, `"days"`).
pub(crate) fn is_date_code(code: &str) -> bool {
    let mut quoted = false;
    let mut bracket = false;
    for c in code.chars() {
        match c {
            '"' => quoted = !quoted,
            '[' if !quoted => bracket = true,
            ']' if !quoted => bracket = false,
            'y' | 'd' | 'h' | 's' | 'Y' | 'D' | 'H' | 'S' if !quoted && !bracket => return true,
            _ => {}
        }
    }
    false
}

fn cell_value(c: &Node, shared: &[String], date_styles: &[bool], date1904: bool) -> String {
    let kind = attr(c, "t").unwrap_or("n");
    let v = child(c, "v").and_then(|v| v.text()).unwrap_or("");
    match kind {
        "s" => v
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|i| shared.get(i).cloned())
            .unwrap_or_default(),
        "inlineStr" => child(c, "is").map(|i| rich_text(&i)).unwrap_or_default(),
        "b" => if v.trim() == "1" { "TRUE" } else { "FALSE" }.to_owned(),
        "str" | "e" | "d" => v.to_owned(),
        _ => {
            let is_date = attr(c, "s")
                .and_then(|s| s.parse::<usize>().ok())
                .and_then(|s| date_styles.get(s).copied())
                .unwrap_or(false);
            match v.trim().parse::<f64>() {
                Ok(x) if is_date => serial_date(x, date1904).unwrap_or_else(|| number(x)),
                Ok(x) => number(x),
                Err(_) => v.to_owned(),
            }
        }
    }
}

/// A number in its shortest decimal form (`3`, `3.14`).
pub(crate) fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// An Excel date serial as `YYYY-MM-DD` (with ` HH:MM` or ` HH:MM:SS` when it has a time).
pub(crate) fn serial_date(serial: f64, date1904: bool) -> Option<String> {
    if !serial.is_finite() || !(0.0..2_958_466.0).contains(&serial) {
        return None;
    }
    let mut days = serial.floor() as i64;
    let secs = ((serial - serial.floor()) * 86_400.0).round() as i64;
    if date1904 {
        days += 1462;
    }
    // Serial 60 is Lotus's 29 February 1900, which never was.
    if days >= 60 {
        days -= 1;
    }
    // Days since 1899-12-31 → civil date (days from 1970-01-01 is days - 25568).
    let (y, m, d) = civil(days - 25_568);
    let date = format!("{y:04}-{m:02}-{d:02}");
    Some(match secs {
        0 => date,
        s if s % 60 == 0 => format!("{date} {:02}:{:02}", s / 3600, s / 60 % 60),
        s => format!("{date} {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
    })
}

/// The civil date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

// ------------------------------------------------------------------------------------------------ ODS

const ODS: &str = "ODS";

/// Repeats of one non-empty cell or row that are read (a file may repeat a value a million times).
const MAX_REPEAT: u64 = 1_000;

pub(crate) fn read_ods(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let mut zip = Zip::open(bytes, ODS, limits)?;
    let content = zip.need_text("content.xml")?;
    let title = match zip.text("meta.xml")? {
        Some(t) => crate::docx::core_title(&t),
        None => None,
    };
    let dom = xml::parse(&content, ODS, "content.xml")?;
    let mut budget = CellBudget::new(limits);
    let mut sheets = Vec::new();
    for table in dom.root_element().descendants().filter(|n| is(n, "table")) {
        // Only the spreadsheet's own tables (not tables nested in cells' text).
        if table
            .parent_element()
            .is_none_or(|p| local(&p) != "spreadsheet")
        {
            continue;
        }
        if sheets.len() >= limits.max_pages as usize {
            return Err(DocumentError::Limit(format!(
                "more than {} sheets ([documents] max_pages)",
                limits.max_pages
            )));
        }
        let mut sheet = Sheet {
            name: attr(&table, "name").unwrap_or("Sheet").to_owned(),
            rows: Vec::new(),
        };
        ods_rows(&table, &mut sheet, &mut budget, deadline)?;
        sheets.push(sheet);
    }
    Ok(emit(sheets, Format::Ods, title, deadline))
}

fn ods_rows(
    node: &Node,
    sheet: &mut Sheet,
    budget: &mut CellBudget,
    deadline: Deadline,
) -> Result<()> {
    for row in node.children().filter(|n| n.is_element()) {
        match local(&row) {
            "table-row" => {
                if sheet.rows.len().is_multiple_of(4096) {
                    deadline.check()?;
                }
                let mut cells = Vec::new();
                let mut col: u64 = 0;
                for cell in row
                    .children()
                    .filter(|n| is(n, "table-cell") || is(n, "covered-table-cell"))
                {
                    let repeat = attr(&cell, "number-columns-repeated")
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(1)
                        .max(1);
                    let text = ods_cell_text(&cell);
                    if !text.trim().is_empty() {
                        let n = repeat.min(MAX_REPEAT);
                        budget.take(n)?;
                        for k in 0..n {
                            if let Ok(c) = u32::try_from(col + k) {
                                cells.push((c, text.clone()));
                            }
                        }
                    }
                    col = col.saturating_add(repeat);
                }
                if !cells.is_empty() {
                    let repeat = attr(&row, "number-rows-repeated")
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(1)
                        .clamp(1, MAX_REPEAT);
                    budget.take((repeat - 1) * cells.len() as u64)?;
                    for _ in 1..repeat {
                        sheet.rows.push(cells.clone());
                    }
                    sheet.rows.push(cells);
                }
            }
            "table-header-rows" | "table-row-group" | "table-rows" => {
                ods_rows(&row, sheet, budget, deadline)?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn ods_cell_text(cell: &Node) -> String {
    let paras: Vec<String> = cell
        .children()
        .filter(|n| is(n, "p"))
        .map(|p| {
            let mut s = String::new();
            odf_text(&p, &mut s);
            s
        })
        .collect();
    if paras.iter().any(|p| !p.trim().is_empty()) {
        return paras.join(" ");
    }
    attr(cell, "value")
        .or_else(|| attr(cell, "date-value"))
        .or_else(|| attr(cell, "boolean-value"))
        .unwrap_or("")
        .to_owned()
}

/// The text of an OpenDocument text element: spans, links, `text:s` (spaces), tabs and line breaks.
pub(crate) fn odf_text(node: &Node, out: &mut String) {
    for c in node.children() {
        if c.is_text() {
            out.push_str(c.text().unwrap_or(""));
        } else if c.is_element() {
            match local(&c) {
                "s" => {
                    let n = attr(&c, "c")
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(1);
                    out.extend(std::iter::repeat_n(' ', n.min(64)));
                }
                "tab" | "line-break" => out.push(' '),
                "note" | "annotation" => {}
                _ => odf_text(&c, out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_columns_and_numbers() {
        assert_eq!(column_of("A1"), Some(0));
        assert_eq!(column_of("AB12"), Some(27));
        assert_eq!(column_of("12"), None);
        assert_eq!(serial_date(45352.0, false).as_deref(), Some("2024-03-01"));
        assert_eq!(
            serial_date(45352.5, false).as_deref(),
            Some("2024-03-01 12:00")
        );
        assert_eq!(serial_date(1.0, false).as_deref(), Some("1900-01-01"));
        assert_eq!(serial_date(61.0, false).as_deref(), Some("1900-03-01"));
        assert_eq!(number(3.0), "3");
        assert_eq!(number(2.5), "2.5");
        assert!(is_date_code("yyyy-mm-dd"));
        assert!(!is_date_code("0.00\"d\""));
        assert!(!is_date_code("[Red]0.00"));
    }
}
