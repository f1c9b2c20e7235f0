//! [`Packed`]: a value an index must keep (to save it, export it or project it into a database) but that
//! no query reads, held encoded and deflated in memory instead of as its structure. HiRAG's hierarchy
//! (every layer's nodes with their names, descriptions and source lists: ~1.5 MB per 1,000 passages as
//! structures) packs to a fraction of that.
//!
//! The bytes are the value's postcard encoding (the saved files' encoding), deflated at the fastest
//! level. Serialised, a `Packed<T>` is its value: files written with the plain value read as packed, and
//! the other way round.

use std::io::Read;
use std::marker::PhantomData;
use std::sync::Arc;

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Result, StoreError};

/// A value of `T` held packed (see the module's documentation). Clones share the bytes.
pub struct Packed<T> {
    bytes: Arc<[u8]>,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Packed<T> {
    fn clone(&self) -> Self {
        Self {
            bytes: Arc::clone(&self.bytes),
            kind: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Packed<{}>({} bytes)",
            std::any::type_name::<T>(),
            self.bytes.len()
        )
    }
}

fn encode_error<T>(reason: impl std::fmt::Display) -> StoreError {
    StoreError::Encode {
        what: format!("a packed {}", std::any::type_name::<T>()),
        reason: reason.to_string(),
    }
}

impl<T: Serialize + DeserializeOwned> Packed<T> {
    /// `value` packed.
    pub fn new(value: &T) -> Result<Self> {
        let mut out = DeflateEncoder::new(Vec::new(), Compression::fast());
        postcard::to_io(value, &mut out).map_err(encode_error::<T>)?;
        let bytes = out.finish().map_err(encode_error::<T>)?;
        Ok(Self {
            bytes: bytes.into(),
            kind: PhantomData,
        })
    }

    /// The value, unpacked (a new copy each call).
    pub fn get(&self) -> Result<T> {
        let mut raw = Vec::new();
        DeflateDecoder::new(&self.bytes[..])
            .read_to_end(&mut raw)
            .map_err(|e| StoreError::InvalidInput(format!("unpacking {self:?}: {e}")))?;
        postcard::from_bytes(&raw)
            .map_err(|e| StoreError::InvalidInput(format!("decoding {self:?}: {e}")))
    }

    /// Bytes held.
    pub fn packed_len(&self) -> usize {
        self.bytes.len()
    }
}

impl<T: Serialize + DeserializeOwned> Serialize for Packed<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error;
        self.get().map_err(S::Error::custom)?.serialize(s)
    }
}

impl<'de, T: Serialize + DeserializeOwned> Deserialize<'de> for Packed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error;
        let value = T::deserialize(d)?;
        Self::new(&value).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Node {
        name: String,
        sources: Vec<String>,
        weight: f64,
        parent: Option<u32>,
    }

    fn nodes(n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| Node {
                name: format!("ENTITY {i}"),
                sources: (0..i % 7)
                    .map(|j| format!("chunk-{:032x}", i * 31 + j))
                    .collect(),
                weight: i as f64 / 3.0,
                parent: (i % 3 != 0).then_some(i as u32 / 3),
            })
            .collect()
    }

    #[test]
    fn a_packed_value_unpacks_equal_and_saves_as_the_value() {
        let v = nodes(2000);
        let p = Packed::new(&v).unwrap();
        assert_eq!(p.get().unwrap(), v);
        let plain = postcard::to_allocvec(&v).unwrap();
        assert!(
            p.packed_len() * 3 < plain.len(),
            "{} packed, {} plain",
            p.packed_len(),
            plain.len()
        );
        // Serialised, it is its value: either form reads as the other.
        assert_eq!(postcard::to_allocvec(&p).unwrap(), plain);
        let back: Packed<Vec<Node>> = postcard::from_bytes(&plain).unwrap();
        assert_eq!(back.get().unwrap(), v);
        let json = serde_json::to_string(&p.clone()).unwrap();
        assert_eq!(json, serde_json::to_string(&v).unwrap());
        assert!(format!("{p:?}").contains("bytes"));
    }
}
