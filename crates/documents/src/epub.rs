//! EPUB books (`.epub`): `META-INF/container.xml` names the package document, whose spine orders the
//! chapters; each linear spine document (the navigation document left out) is one unit, read as a web page
//! without the boilerplate step (a book's chapter is all content; `nav` and `aside` still go).

use crate::builder::Builder;
use crate::xml::{self, attr, is};
use crate::zipfile::{self, Zip};
use crate::{corrupt, html, Deadline, DocumentError, Extracted, Format, Limits, Result};

const FORMAT: &str = "EPUB";

pub(crate) fn read(bytes: &[u8], limits: &Limits, deadline: Deadline) -> Result<Extracted> {
    let mut zip = Zip::open(bytes, FORMAT, limits)?;
    if zip.has("META-INF/encryption.xml") {
        // Fonts are often obfuscated (harmless); encrypted chapters are DRM.
        let enc = zip.text("META-INF/encryption.xml")?.unwrap_or_default();
        if enc.contains(".xhtml") || enc.contains(".html") {
            return Err(DocumentError::Encrypted);
        }
    }
    let container = zip.need_text("META-INF/container.xml")?;
    let dom = xml::parse(&container, FORMAT, "META-INF/container.xml")?;
    let opf_path = dom
        .descendants()
        .find(|n| is(n, "rootfile"))
        .and_then(|n| attr(&n, "full-path"))
        .ok_or_else(|| corrupt(FORMAT, "META-INF/container.xml names no package document"))?
        .to_owned();
    let opf = zip.need_text(&opf_path)?;
    let pkg = xml::parse(&opf, FORMAT, &opf_path)?;
    let root = pkg.root_element();
    let title = xml::descendant(&root, "title")
        .and_then(|t| t.text())
        .map(|t| t.trim().to_owned());
    let base = zipfile::dir_of(&opf_path).to_owned();
    // The manifest: id → (path, media type, properties).
    let manifest: Vec<(String, String, String, String)> = xml::descendant(&root, "manifest")
        .map(|m| {
            m.children()
                .filter(|n| is(n, "item"))
                .filter_map(|n| {
                    Some((
                        attr(&n, "id")?.to_owned(),
                        zipfile::join(&base, &percent_decode(attr(&n, "href")?)),
                        attr(&n, "media-type").unwrap_or("").to_owned(),
                        attr(&n, "properties").unwrap_or("").to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut chapters = Vec::new();
    if let Some(spine) = xml::descendant(&root, "spine") {
        for r in spine.children().filter(|n| is(n, "itemref")) {
            if attr(&r, "linear") == Some("no") {
                continue;
            }
            let Some(idref) = attr(&r, "idref") else {
                continue;
            };
            if let Some((_, path, media, props)) = manifest.iter().find(|(id, _, _, _)| id == idref)
            {
                let is_doc =
                    media.contains("html") || path.ends_with(".xhtml") || path.ends_with(".html");
                if is_doc && !props.split_whitespace().any(|p| p == "nav") {
                    chapters.push(path.clone());
                }
            }
        }
    }
    if chapters.len() > limits.max_pages as usize {
        return Err(DocumentError::Limit(format!(
            "{} chapters, over the limit of {} ([documents] max_pages)",
            chapters.len(),
            limits.max_pages
        )));
    }
    let mut out = Builder::new(deadline);
    let mut unit = 0u32;
    for path in &chapters {
        let Some(bytes) = zip.bytes(path)? else {
            continue;
        };
        unit += 1;
        out.set_page(unit);
        let text = html::decode(&bytes);
        let dom = html::parse(&text, deadline)?;
        out = html::write(&dom, out, false)?;
        deadline.check()?;
    }
    Ok(out.finish(Format::Epub, title, unit))
}

/// `%20` and other percent escapes of a manifest `href`.
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_owned();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_are_percent_decoded() {
        assert_eq!(percent_decode("Text/ch%201.xhtml"), "Text/ch 1.xhtml");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
