//! tiktoken encodings.

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

use crate::{Error, Result};

/// A tiktoken byte-pair encoding. Text is always encoded as ordinary text: special-token strings such as
/// `<|endoftext|>` in a document are tokenised like any other characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    /// `cl100k_base` (GPT-3.5/4; LeanRAG's budgets).
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
    /// `o200k_base` (GPT-4o; HiRAG's budgets and chunks).
    #[serde(rename = "o200k_base")]
    O200kBase,
}

impl Encoding {
    /// The encoding's tiktoken name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        }
    }

    /// Encodes `text` into token ids.
    pub fn encode(self, text: &str) -> Result<Vec<u32>> {
        self.encode_named(text, "text")
    }

    /// Encodes `text`; `what` names the text in the error, e.g. a document id.
    pub(crate) fn encode_named(self, text: &str, what: &str) -> Result<Vec<u32>> {
        let bpe = self.bpe();
        // tiktoken unwraps its pre-tokenising regex's result; a regex that gives up would panic. Turn that
        // into an error naming the text instead of taking the whole index down.
        catch_unwind(AssertUnwindSafe(|| bpe.encode_ordinary(text))).map_err(|payload| {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "tokenizer panicked".to_owned());
            Error::Tokenizer {
                encoding: self.name(),
                what: what.to_owned(),
                message,
            }
        })
    }

    /// Number of tokens in `text`.
    pub fn count(self, text: &str) -> Result<usize> {
        Ok(self.encode(text)?.len())
    }

    /// The bytes of each token, in order; their concatenation is the encoded text's UTF-8.
    pub fn token_bytes(self, tokens: &[u32]) -> Result<Vec<Vec<u8>>> {
        tokens.iter().map(|&t| self.one_token(t)).collect()
    }

    /// The byte length of each token, in order (their sum is the encoded text's UTF-8 length), lazily and
    /// without keeping the bytes: one small vector per token would cost ~50 bytes of heap each, 0.5 GB
    /// for the ten million tokens of a 50 MB document, and even a vector of lengths 80 MB.
    pub fn token_lengths(self, tokens: &[u32]) -> impl Iterator<Item = Result<usize>> + '_ {
        tokens.iter().map(move |&t| self.token_len(t))
    }

    /// The byte length of one token.
    pub(crate) fn token_len(self, token: u32) -> Result<usize> {
        self.one_token(token).map(|b| b.len())
    }

    /// The bytes of one token.
    fn one_token(self, token: u32) -> Result<Vec<u8>> {
        self.bpe()
            .decode_bytes(std::slice::from_ref(&token))
            .map_err(|e| Error::Tokenizer {
                encoding: self.name(),
                what: "token ids".to_owned(),
                message: e.to_string(),
            })
    }

    /// Decodes tokens, replacing each invalid UTF-8 sequence (a multi-byte character cut by a window edge)
    /// by U+FFFD, as tiktoken's `decode(errors="replace")` does.
    pub fn decode_lossy(self, tokens: &[u32]) -> Result<String> {
        let bytes = self
            .bpe()
            .decode_bytes(tokens)
            .map_err(|e| Error::Tokenizer {
                encoding: self.name(),
                what: "token ids".to_owned(),
                message: e.to_string(),
            })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The longest prefix of `text` that is at most `max_tokens` tokens when encoded on its own and ends on a
    /// character boundary. Used to fit a text into a budget.
    pub fn truncate(self, text: &str, max_tokens: usize) -> Result<&str> {
        let tokens = self.encode(text)?;
        if tokens.len() <= max_tokens {
            return Ok(text);
        }
        let lengths = self
            .token_lengths(&tokens)
            .collect::<Result<Vec<usize>>>()?;
        // Re-encoding a prefix can tokenise its last word differently, so check and step back when needed.
        let mut keep = max_tokens;
        loop {
            let mut end = lengths[..keep].iter().sum::<usize>().min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let prefix = &text[..end];
            if keep == 0 || self.encode(prefix)?.len() <= max_tokens {
                return Ok(prefix);
            }
            keep -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_token_ids() {
        // Ids as tiktoken gives them for these encodings.
        assert_eq!(
            Encoding::Cl100kBase.encode("hello world").unwrap(),
            vec![15339, 1917]
        );
        assert_eq!(
            Encoding::O200kBase.encode("hello world").unwrap(),
            vec![24912, 2375]
        );
        assert_eq!(Encoding::O200kBase.count("").unwrap(), 0);
    }

    #[test]
    fn special_token_text_is_ordinary() {
        let n = Encoding::Cl100kBase.count("a <|endoftext|> b").unwrap();
        assert!(
            n > 3,
            "special token text must not collapse to one token: {n}"
        );
    }

    #[test]
    fn token_bytes_concatenate_to_text() {
        let text = "Dröm 東京 — naïve café 🎉";
        for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let tokens = enc.encode(text).unwrap();
            let bytes: Vec<u8> = enc.token_bytes(&tokens).unwrap().concat();
            let lengths: Vec<usize> = enc.token_lengths(&tokens).collect::<Result<_>>().unwrap();
            assert_eq!(lengths.iter().sum::<usize>(), bytes.len());
            assert!(lengths.iter().all(|&l| l > 0));
            assert_eq!(bytes, text.as_bytes());
            assert_eq!(enc.decode_lossy(&tokens).unwrap(), text);
        }
    }

    #[test]
    fn truncate_respects_budget_and_char_boundaries() {
        let text = "東京 ".repeat(50);
        for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
            for max in [0, 1, 3, 7, 1000] {
                let t = enc.truncate(&text, max).unwrap();
                assert!(text.starts_with(t));
                assert!(enc.count(t).unwrap() <= max, "{} {max}", enc.name());
            }
        }
    }

    #[test]
    fn serde_uses_tiktoken_names() {
        assert_eq!(
            serde_json::to_string(&Encoding::O200kBase).unwrap(),
            "\"o200k_base\""
        );
        let e: Encoding = serde_json::from_str("\"cl100k_base\"").unwrap();
        assert_eq!(e, Encoding::Cl100kBase);
    }
}
