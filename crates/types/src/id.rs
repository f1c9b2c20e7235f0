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
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The id kind, also the prefix without its dash.
            pub const KIND: &'static str = $kind;
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = concat!($kind, "-");

            /// The id of `content`: the prefix followed by the md5 hex digest of its UTF-8 bytes.
            pub fn from_content(content: &str) -> Self {
                Self(format!("{}{}", Self::PREFIX, md5_hex(content.as_bytes())))
            }

            /// Parses an id string, checking the prefix and the 32-digit lowercase hex digest.
            pub fn parse(value: &str) -> Result<Self> {
                let valid = value.strip_prefix(Self::PREFIX).is_some_and(|digest| {
                    digest.len() == 32
                        && digest
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
                if valid {
                    Ok(Self(value.to_owned()))
                } else {
                    Err(Error::InvalidId {
                        kind: Self::KIND,
                        value: value.to_owned(),
                    })
                }
            }

            /// The whole id, prefix included.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The md5 hex digest without the prefix.
            pub fn digest(&self) -> &str {
                &self.0[Self::PREFIX.len()..]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
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
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

content_id!(
    /// Id of a [`Document`](crate::Document): `doc-` + md5 of the stripped text (HiRAG's rule).
    DocId,
    "doc"
);
content_id!(
    /// Id of a [`Chunk`](crate::Chunk): `chunk-` + md5 of the chunk text (HippoRAG's and HiRAG's rule).
    ChunkId,
    "chunk"
);
content_id!(
    /// Id of an entity (HippoRAG: phrase node): `entity-` + md5 of the normalised name.
    EntityId,
    "entity"
);
content_id!(
    /// Id of a fact: `fact-` + md5 of the rendered normalised triple.
    FactId,
    "fact"
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
    fn doc_id_strips_like_python() {
        assert_eq!(
            DocId::from_text("  hello\n\x1c"),
            DocId::from_content("hello")
        );
    }
}
