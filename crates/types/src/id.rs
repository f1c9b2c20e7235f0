//! Content-hash ids, compatible with HippoRAG's: a kind prefix followed by the md5 hex digest of the content.
//!
//! | type | prefix | content hashed |
//! | --- | --- | --- |
//! | [`DocId`] | `doc-` | the document text with surrounding white space stripped (HiRAG's rule) |
//! | [`ChunkId`] | `chunk-` | the chunk text, exactly (HippoRAG passages are `title + "\n" + text`) |
//! | [`EntityId`] | `entity-` | the **normalised** entity name; which [`Normalisation`] is the caller's choice, see below |
//! | [`FactId`] | `fact-` | the rendered normalised triple, [`Triple::render`] |
//!
//! Entity ids: HippoRAG 2 uses [`Normalisation::Ascii`] (its reference rule) by default, and
//! [`Normalisation::Unicode`] when configured so; HiRAG and LeanRAG key entities by their own upper-cased
//! names and hash them with [`EntityId::from_content`].

use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::model::Triple;
use crate::normalize::Normalisation;
use crate::{Error, Result};

/// Lowercase hex md5 digest of `bytes`.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(Md5::digest(bytes))
}

macro_rules! content_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $len:literal) => {
        $(#[$doc])*
        ///
        /// Held inline (the prefix and the 32 hex digits, no allocation): a corpus holds an id per chunk
        /// of every fact count, source set and record, and a clone is a copy of its bytes. Order and
        /// equality are those of the id strings; serialised as the id string.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name([u8; $len]);

        const _: () = assert!($len == $kind.len() + 1 + 32, "an id is its prefix and 32 hex digits");

        impl $name {
            /// The id kind, also the prefix without its dash.
            pub const KIND: &'static str = $kind;
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = concat!($kind, "-");

            /// The id of `content`: the prefix followed by the md5 hex digest of its UTF-8 bytes.
            pub fn from_content(content: &str) -> Self {
                let mut id = [0u8; $len];
                let (prefix, digest) = id.split_at_mut(Self::PREFIX.len());
                prefix.copy_from_slice(Self::PREFIX.as_bytes());
                for (pair, byte) in digest.chunks_exact_mut(2).zip(Md5::digest(content.as_bytes())) {
                    pair[0] = HEX[usize::from(byte >> 4)];
                    pair[1] = HEX[usize::from(byte & 15)];
                }
                Self(id)
            }

            /// Parses an id string, checking the prefix and the 32-digit lowercase hex digest.
            pub fn parse(value: &str) -> Result<Self> {
                let valid = value.strip_prefix(Self::PREFIX).is_some_and(|digest| {
                    digest.len() == 32
                        && digest
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
                match <[u8; $len]>::try_from(value.as_bytes()) {
                    Ok(bytes) if valid => Ok(Self(bytes)),
                    _ => Err(Error::InvalidId {
                        kind: Self::KIND,
                        value: value.to_owned(),
                    }),
                }
            }

            /// The whole id, prefix included.
            pub fn as_str(&self) -> &str {
                // Only ASCII is ever stored (`from_content`, `parse`).
                std::str::from_utf8(&self.0).unwrap_or_default()
            }

            /// The md5 hex digest without the prefix.
            pub fn digest(&self) -> &str {
                &self.as_str()[Self::PREFIX.len()..]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.as_str().to_owned()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }
    };
}

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

content_id!(
    /// Id of a [`Document`](crate::Document): `doc-` + md5 of the stripped text (HiRAG's rule).
    DocId,
    "doc",
    36
);
content_id!(
    /// Id of a [`Chunk`](crate::Chunk): `chunk-` + md5 of the chunk text (HippoRAG's and HiRAG's rule).
    ChunkId,
    "chunk",
    38
);
content_id!(
    /// Id of an entity (HippoRAG: phrase node): `entity-` + md5 of the normalised name.
    EntityId,
    "entity",
    39
);
content_id!(
    /// Id of a fact: `fact-` + md5 of the rendered normalised triple.
    FactId,
    "fact",
    37
);

impl DocId {
    /// The id of a document with this text: md5 of the text with surrounding white space stripped
    /// (Python's `str.strip()` rule, as HiRAG computes it).
    pub fn from_text(text: &str) -> Self {
        Self::from_content(crate::normalize::python_strip(text))
    }
}

impl EntityId {
    /// The id of a raw entity name under `normalisation`: `entity-` + md5 of the normalised name.
    pub fn from_name(raw_name: &str, normalisation: Normalisation) -> Self {
        Self::from_content(&normalisation.apply(raw_name))
    }
}

impl FactId {
    /// The id of a triple whose elements are already normalised: `fact-` + md5 of [`Triple::render`].
    pub fn from_triple(triple: &Triple) -> Self {
        Self::from_content(&triple.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_id_of_known_passage() {
        // The first passage of HippoRAG's MuSiQue sample; its id is quoted in the HippoRAG 2 spec.
        let text = "Journal of Mathematical Physics\nThe Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute of Physics devoted to the publication of papers in mathematical physics. The journal was first published bimonthly beginning in January 1960; it became a monthly publication in 1963. The current editor is Jan Philip Solovej from University of Copenhagen. Its 2018 Impact Factor is 1.355";
        assert_eq!(
            ChunkId::from_content(text).as_str(),
            "chunk-9f22cba213a2f4d5f0116adf5a6576d7"
        );
    }

    #[test]
    fn empty_entity_matches_reference() {
        assert_eq!(
            EntityId::from_name("!!!", Normalisation::Ascii).as_str(),
            "entity-d41d8cd98f00b204e9800998ecf8427e"
        );
    }

    #[test]
    fn fact_id_hashes_python_tuple_repr() {
        let t = Triple::new("radio city", "located in", "india");
        assert_eq!(t.render(), "('radio city', 'located in', 'india')");
        assert_eq!(
            FactId::from_triple(&t).digest(),
            md5_hex(b"('radio city', 'located in', 'india')")
        );
    }

    #[test]
    fn parse_rejects_bad_ids_and_round_trips() {
        let id = ChunkId::from_content("x");
        assert_eq!(ChunkId::parse(id.as_str()).ok(), Some(id.clone()));
        for bad in [
            "chunk-",
            "entity-9f22cba213a2f4d5f0116adf5a6576d7",
            "chunk-9F22CBA213A2F4D5F0116ADF5A6576D7",
            "chunk-9f22cba213a2f4d5f0116adf5a6576d",
            "chunk-9f22cba213a2f4d5f0116adf5a6576dz",
        ] {
            let err = ChunkId::parse(bad).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("invalid chunk id")),
                "{bad}: {err:?}"
            );
        }
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<ChunkId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ChunkId>("\"chunk-nothex\"").is_err());
    }

    #[test]
    fn an_id_is_held_inline_and_orders_and_serialises_as_its_string() {
        assert_eq!(std::mem::size_of::<ChunkId>(), 38);
        let ids: Vec<ChunkId> = (0..50)
            .map(|i| ChunkId::from_content(&i.to_string()))
            .collect();
        for (i, a) in ids.iter().enumerate() {
            assert_eq!(
                a.as_str(),
                format!("chunk-{}", md5_hex(i.to_string().as_bytes()))
            );
            let bytes = postcard::to_allocvec(a).unwrap();
            assert_eq!(
                bytes,
                postcard::to_allocvec(&a.as_str().to_owned()).unwrap()
            );
            assert_eq!(postcard::from_bytes::<ChunkId>(&bytes).unwrap(), *a);
            assert_eq!(serde_json::to_string(a).unwrap(), format!("\"{a}\""));
            for b in &ids {
                assert_eq!(a.cmp(b), a.as_str().cmp(b.as_str()));
            }
        }
        assert_eq!(
            EntityId::from_content("x").as_str(),
            format!("entity-{}", md5_hex(b"x"))
        );
        assert_eq!(DocId::from_content("x").digest(), md5_hex(b"x"));
        assert_eq!(FactId::from_content("x").digest(), md5_hex(b"x"));
    }

    #[test]
    fn doc_id_strips_like_python() {
        assert_eq!(
            DocId::from_text("  hello\n\x1c"),
            DocId::from_content("hello")
        );
    }
}
