//! Zip containers (DOCX, PPTX, XLSX, ODS, EPUB) read within [`Limits`]: at most `max_entries` entries, and
//! at most `max_unpacked_bytes` unpacked over every entry read — counted on the bytes actually inflated, not
//! on the sizes the archive declares, so a zip bomb stops at the limit.

use std::cell::Cell;
use std::io::{Cursor, Read};

use crate::{corrupt, DocumentError, Format, Limits, Result};

/// An open zip container.
pub(crate) struct Zip<'a> {
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    format: &'static str,
    /// Bytes that may still be unpacked.
    budget: Cell<u64>,
    limit: u64,
}

impl<'a> Zip<'a> {
    /// Opens `bytes` as the container of `format`.
    pub(crate) fn open(bytes: &'a [u8], format: &'static str, limits: &Limits) -> Result<Self> {
        let archive = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| corrupt(format, format!("not a zip container ({e})")))?;
        if archive.len() > limits.max_entries {
            return Err(DocumentError::Limit(format!(
                "the {format} container has {} entries, over the limit of {} ([documents] max_entries)",
                archive.len(),
                limits.max_entries
            )));
        }
        Ok(Self {
            archive,
            format,
            budget: Cell::new(limits.max_unpacked_bytes),
            limit: limits.max_unpacked_bytes,
        })
    }

    /// The entries' names, in the archive's order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(|n| n.ok().map(|n| n.into_owned()))
            .collect()
    }

    /// Whether an entry `name` exists.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// The bytes of entry `name` (`None`: no such entry).
    pub(crate) fn bytes(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(index) = self.archive.index_for_name(name) else {
            return Ok(None);
        };
        let (format, limit) = (self.format, self.limit);
        let bomb = |name: &str| {
            DocumentError::Limit(format!(
                "the {format} container unpacks past {limit} bytes at {name} ([documents] max_unpacked_mib): a zip bomb?"
            ))
        };
        let mut entry = self
            .archive
            .by_index(index)
            .map_err(|e| corrupt(format, format!("entry {name}: {e}")))?;
        let budget = self.budget.get();
        let declared = entry.size();
        if declared > budget {
            return Err(bomb(name));
        }
        let mut out = Vec::with_capacity(declared.min(64 << 20) as usize);
        // One byte past the budget tells a lie about the size from a real fit.
        (&mut entry)
            .take(budget + 1)
            .read_to_end(&mut out)
            .map_err(|e| corrupt(format, format!("entry {name}: {e}")))?;
        if out.len() as u64 > budget {
            return Err(bomb(name));
        }
        self.budget.set(budget - out.len() as u64);
        Ok(Some(out))
    }

    /// Entry `name` as UTF-8 text (`None`: no such entry).
    pub(crate) fn text(&mut self, name: &str) -> Result<Option<String>> {
        let format = self.format;
        match self.bytes(name)? {
            None => Ok(None),
            Some(b) => {
                let b = b
                    .strip_prefix(b"\xEF\xBB\xBF".as_slice())
                    .unwrap_or(&b)
                    .to_vec();
                String::from_utf8(b)
                    .map(Some)
                    .map_err(|_| corrupt(format, format!("entry {name} is not UTF-8")))
            }
        }
    }

    /// Entry `name` as text, an error when it is missing.
    pub(crate) fn need_text(&mut self, name: &str) -> Result<String> {
        let format = self.format;
        self.text(name)?
            .ok_or_else(|| corrupt(format, format!("no {name} in the container")))
    }
}

/// Which Office Open XML format a zip is, by its parts.
pub(crate) fn office_kind(bytes: &[u8]) -> Option<Format> {
    let archive = zip::ZipArchive::new(Cursor::new(bytes)).ok()?;
    if archive.index_for_name("word/document.xml").is_some() {
        Some(Format::Docx)
    } else if archive.index_for_name("ppt/presentation.xml").is_some() {
        Some(Format::Pptx)
    } else if archive.index_for_name("xl/workbook.xml").is_some() {
        Some(Format::Xlsx)
    } else if archive.index_for_name("META-INF/container.xml").is_some() {
        Some(Format::Epub)
    } else {
        None
    }
}

/// Joins a relationship target to the folder of the part that names it (`word/` + `media/a.png`,
/// `ppt/slides/` + `../notesSlides/n1.xml`); a target starting with `/` is from the root.
pub(crate) fn join(base_dir: &str, target: &str) -> String {
    if let Some(abs) = target.strip_prefix('/') {
        return abs.to_owned();
    }
    let mut parts: Vec<&str> = base_dir.split('/').filter(|p| !p.is_empty()).collect();
    for piece in target.split('/') {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The folder of a part's path (`word/document.xml` → `word`).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_join_like_paths() {
        assert_eq!(join("word", "media/a.png"), "word/media/a.png");
        assert_eq!(
            join("ppt/slides", "../notesSlides/n1.xml"),
            "ppt/notesSlides/n1.xml"
        );
        assert_eq!(join("xl", "/xl/worksheets/s.xml"), "xl/worksheets/s.xml");
        assert_eq!(dir_of("word/document.xml"), "word");
    }
}
