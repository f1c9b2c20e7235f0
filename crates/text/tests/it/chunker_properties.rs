//! Property tests of the token-window chunker: windows cover the text in order with the configured overlap,
//! token counts agree with tiktoken, and offsets point at the chunk text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_text::{Chunker, ChunkerConfig, Encoding};
use kgrag_types::{python_strip, ChunkId, Document};
use proptest::prelude::*;

/// Text built from pieces that stress tokenisers: words, numbers, punctuation, runs of white space,
/// accented and CJK letters, emoji (several tokens each, so windows cut them).
fn text_strategy() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z]{1,12}",
        "[0-9]{1,6}",
        Just(" ".to_owned()),
        Just("  ".to_owned()),
        Just("\n".to_owned()),
        Just("\n\n".to_owned()),
        Just("\t".to_owned()),
        Just(", ".to_owned()),
        Just(". ".to_owned()),
        Just("—".to_owned()),
        Just("naïve café".to_owned()),
        Just("東京都".to_owned()),
        Just("😀🎉".to_owned()),
        Just("Ελλάδα".to_owned()),
        Just("<|endoftext|>".to_owned()),
    ];
    prop::collection::vec(piece, 0..120).prop_map(|v| v.concat())
}

fn encoding_strategy() -> impl Strategy<Value = Encoding> {
    prop_oneof![Just(Encoding::Cl100kBase), Just(Encoding::O200kBase)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn windows_cover_text_in_order_with_overlap(
        text in text_strategy(),
        encoding in encoding_strategy(),
        size in 1usize..40,
        overlap_frac in 0.0f64..1.0,
    ) {
        let overlap = ((size as f64) * overlap_frac) as usize;
        let overlap = overlap.min(size - 1);
        let stride = size - overlap;
        let doc = Document::new(text.clone());
        let chunks = Chunker::new(ChunkerConfig::TokenWindow { encoding, size, overlap })
            .unwrap()
            .chunk(&doc)
            .unwrap();

        let stripped = python_strip(&text);
        let n = encoding.count(stripped).unwrap();
        let expected_starts: Vec<usize> = (0..n).step_by(stride).collect();

        // Windows are at the reference positions (white-space-only windows are dropped, so a subsequence).
        let mut expected = expected_starts.iter().peekable();
        for (i, c) in chunks.iter().enumerate() {
            prop_assert_eq!(c.order, i);
            while expected.peek().is_some_and(|s| **s < c.span.token_start) {
                expected.next();
            }
            prop_assert_eq!(expected.next().copied(), Some(c.span.token_start));
            prop_assert_eq!(c.span.token_end, (c.span.token_start + size).min(n));
            prop_assert_eq!(c.tokens, c.span.token_end - c.span.token_start);
            prop_assert_eq!(&c.id, &ChunkId::from_content(&c.text));
            prop_assert_eq!(&c.doc_id, &doc.id);
        }

        // Consecutive windows share exactly `overlap` tokens, fewer only where the text ends first.
        for pair in chunks.windows(2) {
            let (a, b) = (&pair[0].span, &pair[1].span);
            if b.token_start == a.token_start + stride {
                prop_assert_eq!(a.token_end - b.token_start, overlap.min(n - b.token_start));
            }
            prop_assert!(b.byte_start >= a.byte_start && b.byte_end >= a.byte_end);
            prop_assert!(b.char_start >= a.char_start);
        }

        // Coverage: the token ranges cover every token, unless a dropped window was white space only; in
        // every case, what lies outside all byte spans is white space.
        let mut covered = vec![false; text.len()];
        for c in &chunks {
            for flag in &mut covered[c.span.byte_start..c.span.byte_end] {
                *flag = true;
            }
        }
        for (i, ch) in text.char_indices() {
            if !covered[i] {
                prop_assert!(ch.is_whitespace(), "uncovered non-space {:?} at byte {}", ch, i);
            }
        }
        if n > 0 && !chunks.is_empty() {
            prop_assert_eq!(chunks[0].span.token_start, 0);
            prop_assert_eq!(chunks.last().unwrap().span.token_end, n);
        }

        // Offsets: byte and char offsets agree, and where no character was cut the text is the slice.
        for c in &chunks {
            let slice = &text[c.span.byte_start..c.span.byte_end];
            prop_assert_eq!(text[..c.span.byte_start].chars().count(), c.span.char_start);
            prop_assert_eq!(text[..c.span.byte_end].chars().count(), c.span.char_end);
            if !c.text.contains('\u{fffd}') {
                prop_assert_eq!(slice, c.text.as_str());
            }
        }
    }

    #[test]
    fn token_counts_equal_tiktoken(text in text_strategy(), encoding in encoding_strategy()) {
        let doc = Document::new(text.clone());
        let passage = Chunker::new(ChunkerConfig::Passage { encoding }).unwrap().chunk(&doc).unwrap();
        if python_strip(&text).is_empty() {
            prop_assert!(passage.is_empty());
        } else {
            prop_assert_eq!(passage.len(), 1);
            prop_assert_eq!(passage[0].tokens, encoding.encode(&text).unwrap().len());
        }
        // One window holding everything: its token count is the stripped text's tiktoken count.
        let whole = Chunker::new(ChunkerConfig::TokenWindow { encoding, size: 100_000, overlap: 0 })
            .unwrap()
            .chunk(&doc)
            .unwrap();
        let n = encoding.count(python_strip(&text)).unwrap();
        prop_assert_eq!(whole.iter().map(|c| c.tokens).sum::<usize>(), n);
        if n > 0 {
            prop_assert_eq!(whole[0].text.as_str(), python_strip(&text));
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>(), size in 1usize..8) {
        let doc = Document::new(text);
        let chunker = Chunker::new(ChunkerConfig::TokenWindow { encoding: Encoding::Cl100kBase, size, overlap: size / 2 }).unwrap();
        prop_assert!(chunker.chunk(&doc).is_ok());
    }
}
