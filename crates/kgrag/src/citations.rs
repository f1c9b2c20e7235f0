//! Where passages come from and how answers cite them.
//!
//! A [`PassageSource`] is what every surface shows of a passage's origin — the document, its file, the
//! pages (slides, sheets, chapters) the chunk spans and the section it lies in — with a label for people:
//! `report.pdf p. 12–13 § 2.3 Methods`.

use serde::{Deserialize, Serialize};

use crate::index_dir::DocRecord;

/// Where a passage came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassageSource {
    /// The document's id (as `kgrag stats --documents` lists it).
    pub document: String,
    /// The file it was read from (its path relative to the folder indexed), if it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The file's format (`pdf`, `docx`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// What the pages are: `page`, `slide`, `sheet`, `chapter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<kgrag_documents::Unit>,
    /// The first page (slide, …) the passage spans, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// The last page it spans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_end: Option<u32>,
    /// The heading of the section it lies in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// Whether the index keeps the original file (`GET /v1/documents/{id}/file` serves it).
    #[serde(default)]
    pub original: bool,
    /// The citation as people read it: `report.pdf p. 12–13 § 2.3 Methods`.
    pub label: String,
}

impl PassageSource {
    /// The source of chunk number `k` of document `d`.
    pub fn of(d: &DocRecord, k: usize) -> Self {
        let at = d.locations.get(k);
        let file = d.file.as_ref();
        let mut s = PassageSource {
            document: d.id.clone(),
            file: file.map(|f| f.name.clone()),
            format: file.map(|f| f.format.clone()),
            unit: file.and_then(|f| f.unit),
            page: at.and_then(|l| l.page),
            page_end: at.and_then(|l| l.page_end),
            section: at.and_then(|l| l.section.clone()),
            original: file.is_some_and(|f| f.kept),
            label: String::new(),
        };
        s.label = s.render();
        s
    }

    /// `file p. 3`, `file p. 3–4`, `deck.pptx slide 2`, `… § Section`; the document id without a file.
    fn render(&self) -> String {
        let mut out = self.file.clone().unwrap_or_else(|| self.document.clone());
        if let Some(p) = self.page {
            let unit = self.unit.unwrap_or(kgrag_documents::Unit::Page);
            out.push(' ');
            out.push_str(unit.label());
            out.push(' ');
            out.push_str(&p.to_string());
            if let Some(e) = self.page_end.filter(|&e| e != p) {
                out.push('–');
                out.push_str(&e.to_string());
            }
        }
        if let Some(s) = &self.section {
            out.push_str(" § ");
            out.push_str(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_dir::{ChunkLocation, FileRecord};

    #[test]
    fn labels_name_file_pages_and_section() {
        let d = DocRecord {
            id: "reports/q3.pdf".into(),
            doc_id: kgrag_types::DocId::from_text("x"),
            title: None,
            source: "reports/q3.pdf".into(),
            chunks: vec![
                kgrag_types::ChunkId::from_content("a"),
                kgrag_types::ChunkId::from_content("b"),
            ],
            file: Some(FileRecord {
                name: "reports/q3.pdf".into(),
                format: "pdf".into(),
                digest: "0".repeat(64),
                size: 10,
                unit: Some(kgrag_documents::Unit::Page),
                units: 20,
                kept: true,
            }),
            locations: vec![
                ChunkLocation {
                    page: Some(12),
                    page_end: Some(13),
                    section: Some("2.3 Methods".into()),
                },
                ChunkLocation {
                    page: Some(14),
                    page_end: Some(14),
                    section: None,
                },
            ],
        };
        assert_eq!(
            PassageSource::of(&d, 0).label,
            "reports/q3.pdf p. 12–13 § 2.3 Methods"
        );
        assert_eq!(PassageSource::of(&d, 1).label, "reports/q3.pdf p. 14");
        let plain = DocRecord {
            file: None,
            locations: Vec::new(),
            ..d
        };
        assert_eq!(PassageSource::of(&plain, 0).label, "reports/q3.pdf");
    }
}
