//! Chunking: token windows with overlap (HiRAG, LeanRAG) or one chunk per passage (HippoRAG).

use kgrag_types::{python_strip, Chunk, ChunkId, Document, Span};
use serde::{Deserialize, Serialize};

use crate::{Encoding, Error, Result};

/// How documents are cut into chunks.
///
/// In TOML: `strategy = "token_window"`, `encoding = "o200k_base"`, `size = 1200`, `overlap = 100`; or
/// `strategy = "passage"`, `encoding = "o200k_base"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "snake_case")]
pub enum ChunkerConfig {
    /// One chunk per document with the document's text unchanged (HippoRAG: a passage is a chunk, its id is
    /// the md5 of the whole text). `encoding` only counts the chunk's tokens.
    Passage {
        /// Encoding used to count tokens.
        encoding: Encoding,
    },
    /// Windows of `size` tokens starting every `size - overlap` tokens (HiRAG's `chunking_by_token_size`).
    TokenWindow {
        /// Encoding the windows are measured in.
        encoding: Encoding,
        /// Tokens per window.
        size: usize,
        /// Tokens shared by consecutive windows; less than `size`.
        overlap: usize,
    },
}

impl ChunkerConfig {
    /// HiRAG's setting: 1200-token windows overlapping by 100, `o200k_base`.
    pub fn hirag() -> Self {
        ChunkerConfig::TokenWindow {
            encoding: Encoding::O200kBase,
            size: 1200,
            overlap: 100,
        }
    }

    /// LeanRAG's native setting: 1024-token windows overlapping by 128, `cl100k_base`.
    pub fn leanrag() -> Self {
        ChunkerConfig::TokenWindow {
            encoding: Encoding::Cl100kBase,
            size: 1024,
            overlap: 128,
        }
    }

    /// HippoRAG's setting: one chunk per passage, tokens counted with `o200k_base`.
    pub fn hipporag() -> Self {
        ChunkerConfig::Passage {
            encoding: Encoding::O200kBase,
        }
    }

    /// The encoding chunks are measured in.
    pub fn encoding(&self) -> Encoding {
        match *self {
            ChunkerConfig::Passage { encoding } | ChunkerConfig::TokenWindow { encoding, .. } => {
                encoding
            }
        }
    }
}

/// Cuts documents into [`Chunk`]s.
///
/// Token windows follow HiRAG's reference rule, so chunk ids match the reference system's:
///
/// 1. the document text is stripped of surrounding white space (Python's `str.strip()`) and encoded as
///    ordinary text;
/// 2. windows start at token `0, s, 2s, …` with stride `s = size - overlap` while the start is before the
///    end, and hold `min(size, n - start)` tokens — the last window may be short and mostly overlap;
/// 3. a window's text is its bytes decoded with each cut multi-byte character replaced by U+FFFD (tiktoken's
///    `errors="replace"`), then stripped; the chunk id is `chunk-` + md5 of that text.
///
/// Together the windows cover every token of the stripped text, in order. Defined results for awkward input:
/// an empty or white-space-only document gives no chunks (in both strategies); a window that is only white
/// space is dropped (the reference keeps an empty chunk); documents of any length, one huge line included,
/// are chunked in time linear in their length. Invalid UTF-8 never reaches the chunker: [`Document`] holds a
/// `String`, and [`Document::from_utf8`] reports bad bytes with their offset.
///
/// Offsets ([`Span`]): byte and character offsets are into the original document text and are widened to
/// character boundaries when a window edge cuts a character; token offsets index the tokens of the stripped
/// text. Where no character is cut, `chunk.text == doc.text[span.byte_start..span.byte_end]`.
#[derive(Debug, Clone)]
pub struct Chunker {
    config: ChunkerConfig,
}

impl Chunker {
    /// A chunker for `config`; fails on a zero window or an overlap not smaller than the window.
    pub fn new(config: ChunkerConfig) -> Result<Self> {
        if let ChunkerConfig::TokenWindow { size, overlap, .. } = config {
            if size == 0 {
                return Err(Error::InvalidConfig(
                    "token window size must be at least 1".to_owned(),
                ));
            }
            if overlap >= size {
                return Err(Error::InvalidConfig(format!(
                    "overlap ({overlap}) must be smaller than the window size ({size})"
                )));
            }
        }
        Ok(Self { config })
    }

    /// The configuration.
    pub fn config(&self) -> &ChunkerConfig {
        &self.config
    }

    /// Chunks one document.
    pub fn chunk(&self, doc: &Document) -> Result<Vec<Chunk>> {
        match self.config {
            ChunkerConfig::Passage { encoding } => passage_chunk(doc, encoding),
            ChunkerConfig::TokenWindow {
                encoding,
                size,
                overlap,
            } => window_chunks(doc, encoding, size, size - overlap),
        }
    }
}

fn passage_chunk(doc: &Document, encoding: Encoding) -> Result<Vec<Chunk>> {
    if python_strip(&doc.text).is_empty() {
        return Ok(Vec::new());
    }
    let tokens = encoding
        .encode_named(&doc.text, &format!("document {}", doc.id))?
        .len();
    Ok(vec![Chunk {
        id: ChunkId::from_content(&doc.text),
        doc_id: doc.id.clone(),
        text: doc.text.clone(),
        tokens,
        order: 0,
        span: Span {
            byte_start: 0,
            byte_end: doc.text.len(),
            char_start: 0,
            char_end: doc.text.chars().count(),
            token_start: 0,
            token_end: tokens,
        },
    }])
}

/// Counts characters up to increasing byte offsets without rescanning from the start.
struct CharCursor<'a> {
    text: &'a str,
    byte: usize,
    chars: usize,
}

impl<'a> CharCursor<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            byte: 0,
            chars: 0,
        }
    }

    /// Characters before byte offset `to`, which must be a character boundary.
    fn chars_before(&mut self, to: usize) -> usize {
        if to < self.byte {
            self.byte = 0;
            self.chars = 0;
        }
        self.chars += self.text[self.byte..to].chars().count();
        self.byte = to;
        self.chars
    }
}

fn window_chunks(
    doc: &Document,
    encoding: Encoding,
    size: usize,
    stride: usize,
) -> Result<Vec<Chunk>> {
    let stripped = python_strip(&doc.text);
    if stripped.is_empty() {
        return Ok(Vec::new());
    }
    // `stripped` is a sub-slice of `doc.text`; this is where it starts.
    let base = stripped.as_ptr() as usize - doc.text.as_ptr() as usize;
    let what = || format!("document {}", doc.id);
    if u32::try_from(stripped.len()).is_err() {
        return Err(Error::TooLarge {
            what: what(),
            bytes: stripped.len(),
        });
    }
    // The token ids, then, in place, each token's end offset in `stripped` (32-bit: a 200 MB document has
    // ~40 million tokens, and one array of them is all the chunker holds besides the text).
    let mut ends = encoding.encode_named(stripped, &what())?;
    let mut total = 0u32;
    for t in ends.iter_mut() {
        // The lengths add up to the text's, which fits (checked above).
        total = total.saturating_add(encoding.token_len(*t)? as u32);
        *t = total;
    }
    let n = ends.len();
    let offset = |i: usize| if i == 0 { 0 } else { ends[i - 1] as usize };
    let raw = stripped.as_bytes();
    let mut starts = CharCursor::new(&doc.text);
    let mut ends = CharCursor::new(&doc.text);
    let mut chunks = Vec::with_capacity(n.div_ceil(stride));
    for start in (0..n).step_by(stride) {
        let end = (start + size).min(n);
        let (w0, w1) = (offset(start).min(raw.len()), offset(end).min(raw.len()));
        let decoded = String::from_utf8_lossy(&raw[w0..w1]);
        let content = python_strip(&decoded);
        if content.is_empty() {
            continue;
        }
        // Stripped white space is made of whole, valid characters, so its byte length is the same in the
        // decoded string and in the document.
        let lead = content.as_ptr() as usize - decoded.as_ptr() as usize;
        let trail = decoded.len() - lead - content.len();
        let mut byte_start = base + w0 + lead;
        let mut byte_end = base + w1 - trail;
        while !doc.text.is_char_boundary(byte_start) {
            byte_start -= 1;
        }
        while !doc.text.is_char_boundary(byte_end) {
            byte_end += 1;
        }
        chunks.push(Chunk {
            id: ChunkId::from_content(content),
            doc_id: doc.id.clone(),
            text: content.to_owned(),
            tokens: end - start,
            order: chunks.len(),
            span: Span {
                byte_start,
                byte_end,
                char_start: starts.chars_before(byte_start),
                char_end: ends.chars_before(byte_end),
                token_start: start,
                token_end: end,
            },
        });
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(size: usize, overlap: usize) -> Chunker {
        Chunker::new(ChunkerConfig::TokenWindow {
            encoding: Encoding::O200kBase,
            size,
            overlap,
        })
        .unwrap()
    }

    #[test]
    fn hirag_windows_of_1250_tokens() {
        // " a" is one o200k token; 1250 of them (the first without its space after stripping).
        let text = " a".repeat(1250);
        let doc = Document::new(text.clone());
        assert_eq!(Encoding::O200kBase.count(text.trim()).unwrap(), 1250);
        let chunks = Chunker::new(ChunkerConfig::hirag())
            .unwrap()
            .chunk(&doc)
            .unwrap();
        let ranges: Vec<_> = chunks
            .iter()
            .map(|c| (c.span.token_start, c.span.token_end, c.tokens))
            .collect();
        assert_eq!(ranges, vec![(0, 1200, 1200), (1100, 1250, 150)]);
        // Offsets are into the original text, which starts with a space that stripping removed.
        assert_eq!(chunks[0].span.byte_start, 1);
        assert_eq!(chunks[1].span.byte_end, text.len());
        for c in &chunks {
            assert_eq!(&text[c.span.byte_start..c.span.byte_end], c.text);
            assert_eq!(c.id, ChunkId::from_content(&c.text));
        }
    }

    #[test]
    fn bad_configs_are_refused() {
        let err = Chunker::new(ChunkerConfig::TokenWindow {
            encoding: Encoding::Cl100kBase,
            size: 10,
            overlap: 10,
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid chunker configuration: overlap (10) must be smaller than the window size (10)"
        );
        assert!(Chunker::new(ChunkerConfig::TokenWindow {
            encoding: Encoding::Cl100kBase,
            size: 0,
            overlap: 0,
        })
        .is_err());
    }

    #[test]
    fn empty_and_blank_documents_give_no_chunks() {
        for text in ["", "   \n\t  "] {
            let doc = Document::new(text);
            assert!(window(5, 1).chunk(&doc).unwrap().is_empty());
            assert!(Chunker::new(ChunkerConfig::hipporag())
                .unwrap()
                .chunk(&doc)
                .unwrap()
                .is_empty());
        }
    }

    #[test]
    fn passage_keeps_text_verbatim() {
        let doc = Document::passage("Title", "Body text.  ");
        let chunks = Chunker::new(ChunkerConfig::hipporag())
            .unwrap()
            .chunk(&doc)
            .unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].text, "Title\nBody text.  ");
        assert_eq!(chunks[0].id, ChunkId::from_content("Title\nBody text.  "));
        assert_eq!(
            chunks[0].tokens,
            Encoding::O200kBase.count(&doc.text).unwrap()
        );
        assert_eq!(chunks[0].span.char_end, doc.text.chars().count());
    }

    #[test]
    fn cut_characters_become_replacement_chars_and_spans_widen() {
        // Emoji are several tokens each in cl100k, so 1-token windows cut them.
        let text = "😀😀";
        let doc = Document::new(text);
        let chunker = Chunker::new(ChunkerConfig::TokenWindow {
            encoding: Encoding::Cl100kBase,
            size: 1,
            overlap: 0,
        })
        .unwrap();
        let chunks = chunker.chunk(&doc).unwrap();
        let n = Encoding::Cl100kBase.count(text).unwrap();
        assert!(n > 2);
        assert_eq!(chunks.len(), n);
        assert!(chunks.iter().all(|c| c.text.contains('\u{fffd}')));
        for c in &chunks {
            assert!(
                text.is_char_boundary(c.span.byte_start) && text.is_char_boundary(c.span.byte_end)
            );
            assert!(c.span.char_end - c.span.char_start >= 1);
        }
    }

    #[test]
    fn one_huge_line_is_chunked() {
        // Words, then one 100k-letter "word", then a 100k run of spaces, then digits: no newline anywhere.
        let line = "word ".repeat(200_000)
            + &"x".repeat(100_000)
            + &" ".repeat(100_000)
            + &"7".repeat(50_000);
        let doc = Document::new(line);
        let chunks = Chunker::new(ChunkerConfig::leanrag())
            .unwrap()
            .chunk(&doc)
            .unwrap();
        assert!(chunks.len() > 200);
        assert_eq!(chunks.last().map(|c| c.span.byte_end), Some(doc.text.len()));
    }

    #[test]
    fn config_serde() {
        let json = serde_json::to_string(&ChunkerConfig::hirag()).unwrap();
        assert_eq!(
            json,
            r#"{"strategy":"token_window","encoding":"o200k_base","size":1200,"overlap":100}"#
        );
        let back: ChunkerConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ChunkerConfig::hirag());
    }
}
