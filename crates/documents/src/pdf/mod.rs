//! PDF (`.pdf`): the text layer, read with our own parser — no native library, no page rendering.
//!
//! [`document`] opens the file (cross-reference tables and streams, object streams, incremental updates,
//! and a rebuilt index when those are damaged), [`content`] runs each page's content stream to place every
//! glyph ([`font`] and [`cmap`] turn codes into Unicode and widths), and [`layout`] turns glyphs into words,
//! lines in reading order, and blocks. An encrypted file is refused; a file with no text on any page is a
//! scan, and says so.

mod blocks;
mod cmap;
mod content;
mod document;
mod filters;
mod font;
mod layout;
mod parse;
mod tables;

use crate::builder::Builder;
use crate::{corrupt, Deadline, DocumentError, Extracted, Format, Limits, Result};

use content::{Interpreter, Matrix};
use document::{OpenError, Page, Pdf};
use font::FontCache;
use parse::Obj;

const FORMAT: &str = "PDF";

/// The matrix that puts a page's box at the origin, upright as it is displayed (its `/Rotate`).
fn base_matrix(page: &Page) -> (Matrix, [f32; 2]) {
    let [x0, y0, x1, y1] = page.bbox;
    let (w, h) = (x1 - x0, y1 - y0);
    match page.rotate {
        90 => ([0.0, -1.0, 1.0, 0.0, -y0, x1], [0.0, w as f32]),
        180 => ([-1.0, 0.0, 0.0, -1.0, x1, y1], [0.0, h as f32]),
        270 => ([0.0, 1.0, -1.0, 0.0, y1, -x0], [0.0, w as f32]),
        _ => ([1.0, 0.0, 0.0, 1.0, -x0, -y0], [0.0, h as f32]),
    }
}

/// The page's content streams, decoded and joined.
fn page_data(pdf: &Pdf, page: &Page) -> Vec<u8> {
    let mut data = Vec::new();
    let contents = pdf.get(&page.dict, b"Contents");
    let streams: Vec<Obj> = match contents {
        Obj::Array(a) => a.iter().map(|o| pdf.resolve(o)).collect(),
        other => vec![other],
    };
    for s in streams {
        if let Obj::Stream(s) = s {
            if let Ok(d) = pdf.decode_stream(&s) {
                data.extend_from_slice(&d);
                data.push(b'\n');
            }
        }
    }
    data
}

pub(crate) fn read(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let pdf = Pdf::open(bytes, limits.max_unpacked_bytes).map_err(|e| match e {
        OpenError::NotPdf => corrupt(FORMAT, "no %PDF- header in its first kilobyte"),
        OpenError::NoCatalog => corrupt(
            FORMAT,
            "no document catalog (truncated or damaged beyond repair)",
        ),
    })?;
    if pdf.encrypted() {
        return Err(DocumentError::Encrypted);
    }
    let pages = document::pages(&pdf, limits.max_pages as usize + 1);
    if pages.len() > limits.max_pages as usize {
        return Err(DocumentError::Limit(format!(
            "more than {} pages ([documents] max_pages)",
            limits.max_pages
        )));
    }
    if pages.is_empty() {
        return Err(corrupt(FORMAT, "no pages"));
    }
    let mut fonts = FontCache::default();
    let mut lines = Vec::new();
    let mut heights = Vec::with_capacity(pages.len());
    let mut regions = 0u32;
    let mut glyphs = 0usize;
    let mut unmapped = 0usize;
    for (i, page) in pages.iter().enumerate() {
        deadline.check()?;
        let (base, height) = base_matrix(page);
        heights.push(height);
        let data = page_data(&pdf, page);
        let mut run = Interpreter::new(&pdf, &mut fonts, base);
        run.run(&data, page.resources.as_deref(), 0);
        let content = run.finish();
        glyphs += content.glyphs.len();
        unmapped += content.unmapped;
        let rotated = if page.rotate % 180 == 90 {
            let [x0, y0, x1, y1] = page.bbox;
            [0.0, 0.0, y1 - y0, x1 - x0]
        } else {
            let [x0, y0, x1, y1] = page.bbox;
            [0.0, 0.0, x1 - x0, y1 - y0]
        };
        let (page_lines, count) = layout::page_lines(&content, rotated, i as u32 + 1, regions);
        regions += count;
        lines.extend(page_lines);
    }
    if glyphs == 0 {
        return Err(if unmapped > 0 {
            corrupt(
                FORMAT,
                format!("{unmapped} glyphs, none with a Unicode mapping (fonts without ToUnicode): no text to read"),
            )
        } else {
            DocumentError::NoTextLayer {
                pages: pages.len() as u32,
            }
        });
    }
    layout::drop_running(&mut lines, &heights);
    let mut out = Builder::new(deadline);
    blocks::write_blocks(&lines, &mut out);
    if unmapped > 0 {
        out.note(format!(
            "{unmapped} glyphs had no Unicode mapping and were left out"
        ));
    }
    if pdf.repaired {
        out.note("the cross-reference table was damaged; objects were found by scanning the file");
    }
    Ok(out.finish(Format::Pdf, pdf.title(), pages.len() as u32))
}
