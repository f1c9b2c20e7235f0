//! A report's human-readable files beside `report.json`: `report.md`, a self-contained `report.html` (the
//! Markdown's tables and notes as HTML, the charts inline as SVG) and, with feature `plots`,
//! `plots/<chart>.svg` and `plots/<chart>.png`. Every file is written atomically.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::compare::Comparison;
use crate::error::{io, Result};
use crate::report::{write_atomic, Report};

/// The Markdown file [`write_report_files`] writes.
pub const MARKDOWN_FILE: &str = "report.md";
/// The HTML file [`write_report_files`] writes.
pub const HTML_FILE: &str = "report.html";
/// The folder of the plots.
pub const PLOTS_DIR: &str = "plots";

/// Writes `report.md`, `report.html` and the plots of `report` into `dir` (with `comparison`: its table
/// and chart too). Returns the files written.
pub fn write_report_files(
    report: &Report,
    dir: &Path,
    comparison: Option<&Comparison>,
) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut markdown = report.to_markdown();
    if let Some(c) = comparison {
        markdown.push('\n');
        markdown.push_str(&c.to_markdown());
    }
    let mut written = Vec::new();
    let md = dir.join(MARKDOWN_FILE);
    write_atomic(&md, markdown.as_bytes())?;
    written.push(md);

    let charts = charts(report, comparison)?;
    if !charts.is_empty() {
        let plots = dir.join(PLOTS_DIR);
        fs::create_dir_all(&plots).map_err(|e| io(&plots, e))?;
        for (name, svg, png) in &charts {
            let path = plots.join(format!("{name}.svg"));
            write_atomic(&path, svg.as_bytes())?;
            written.push(path);
            let path = plots.join(format!("{name}.png"));
            write_atomic(&path, png)?;
            written.push(path);
        }
    }
    let title = format!("kgrag bench · {}", report.dataset);
    let svgs: Vec<&str> = charts.iter().map(|(_, svg, _)| svg.as_str()).collect();
    let html = dir.join(HTML_FILE);
    write_atomic(&html, html_page(&title, &markdown, &svgs).as_bytes())?;
    written.push(html);
    Ok(written)
}

#[cfg(feature = "plots")]
fn charts(
    report: &Report,
    comparison: Option<&Comparison>,
) -> Result<Vec<(String, String, Vec<u8>)>> {
    Ok(crate::plots::charts(report, comparison)?
        .into_iter()
        .map(|c| (c.name.to_owned(), c.svg, c.png))
        .collect())
}

#[cfg(not(feature = "plots"))]
fn charts(
    _report: &Report,
    _comparison: Option<&Comparison>,
) -> Result<Vec<(String, String, Vec<u8>)>> {
    Ok(Vec::new())
}

/// A self-contained HTML page: `markdown` rendered (headings, tables, lists, paragraphs, inline code) and
/// the SVG documents inline after it.
pub fn html_page(title: &str, markdown: &str, svgs: &[&str]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\n\
         body{{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}}\n\
         table{{border-collapse:collapse;margin:0.8rem 0}}th,td{{border:1px solid #ccc;padding:0.25rem 0.55rem}}\n\
         th{{background:#f3f3f3}}td.n{{text-align:right;font-variant-numeric:tabular-nums}}\n\
         code{{background:#f3f3f3;padding:0 0.2rem}}figure{{margin:1.5rem 0}}svg{{max-width:100%;height:auto}}\n\
         </style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
    out.push_str(&markdown_to_html(markdown));
    if !svgs.is_empty() {
        out.push_str("<h2>Plots</h2>\n");
        for svg in svgs {
            out.push_str("<figure>\n");
            // The SVG document without its XML declaration, inline.
            let body = match svg.find("<svg") {
                Some(i) => &svg[i..],
                None => svg,
            };
            out.push_str(body);
            out.push_str("\n</figure>\n");
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// The Markdown subset the reports use, as HTML: `#`-headings, pipe tables (a `---:` column is
/// right-aligned), `- ` lists, paragraphs, `` `code` ``.
pub fn markdown_to_html(markdown: &str) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.trim().is_empty() {
            i += 1;
        } else if line.starts_with('|') {
            let mut rows = Vec::new();
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                rows.push(cells(lines[i]));
                i += 1;
            }
            table(&mut out, &rows);
        } else if line.starts_with("- ") {
            out.push_str("<ul>\n");
            while i < lines.len() && lines[i].starts_with("- ") {
                let _ = writeln!(out, "<li>{}</li>", inline(&lines[i][2..]));
                i += 1;
            }
            out.push_str("</ul>\n");
        } else if let Some(level) = heading_level(line) {
            let text = line[level..].trim();
            let _ = writeln!(out, "<h{l}>{}</h{l}>", inline(text), l = level.min(5) + 1);
            i += 1;
        } else {
            let mut para = Vec::new();
            while i < lines.len() {
                let l = lines[i].trim_end();
                if l.trim().is_empty()
                    || l.starts_with('|')
                    || l.starts_with("- ")
                    || heading_level(l).is_some()
                {
                    break;
                }
                para.push(inline(l));
                i += 1;
            }
            let _ = writeln!(out, "<p>{}</p>", para.join("<br>\n"));
        }
    }
    out
}

fn heading_level(line: &str) -> Option<usize> {
    let n = line.chars().take_while(|c| *c == '#').count();
    (n > 0 && line[n..].starts_with(' ')).then_some(n)
}

/// The cells of a table row, `\|` kept as a literal bar.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cur).trim().to_owned()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_owned());
    out
}

fn table(out: &mut String, rows: &[Vec<String>]) {
    let is_rule = |r: &Vec<String>| {
        r.iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')))
    };
    let (header, align, body): (Option<&Vec<String>>, Vec<bool>, &[Vec<String>]) =
        if rows.len() >= 2 && is_rule(&rows[1]) {
            (
                Some(&rows[0]),
                rows[1].iter().map(|c| c.ends_with(':')).collect(),
                &rows[2..],
            )
        } else {
            (None, Vec::new(), rows)
        };
    out.push_str("<table>\n");
    if let Some(h) = header {
        out.push_str("<thead><tr>");
        for c in h {
            let _ = write!(out, "<th>{}</th>", inline(c));
        }
        out.push_str("</tr></thead>\n");
    }
    out.push_str("<tbody>\n");
    for r in body {
        out.push_str("<tr>");
        for (j, c) in r.iter().enumerate() {
            if align.get(j).copied().unwrap_or(false) {
                let _ = write!(out, "<td class=\"n\">{}</td>", inline(c));
            } else {
                let _ = write!(out, "<td>{}</td>", inline(c));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// Escapes text and turns `` `code` `` spans into `<code>`.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", escape(part));
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_tables_lists_and_headings_become_html() {
        let md = "## title `x`\n\n| a | b |\n| --- | ---: |\n| m\\|n | 1.5 |\n\n- one <b>\n- two\n\nplain & text\nnext\n";
        let html = markdown_to_html(md);
        assert!(html.contains("<h3>title <code>x</code></h3>"), "{html}");
        assert!(html.contains("<th>a</th><th>b</th>"), "{html}");
        assert!(
            html.contains("<td>m|n</td><td class=\"n\">1.5</td>"),
            "{html}"
        );
        assert!(html.contains("<li>one &lt;b&gt;</li>"), "{html}");
        assert!(html.contains("<p>plain &amp; text<br>\nnext</p>"), "{html}");
    }
}
