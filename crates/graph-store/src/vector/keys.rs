//! [`KeyList`]: a store's keys one after another in one buffer.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Strings in one buffer with the end of each: what a `Vec<String>` holds without a 24-byte header
/// and an allocation per string (a fact store's keys, `fact-` + 32 hex digits, cost 72 bytes each
/// that way and 45 here). Serialised as a sequence of strings, the form a `Vec<String>` has.
#[derive(Clone, Default, PartialEq, Eq)]
pub(super) struct KeyList {
    text: String,
    ends: Vec<usize>,
}

impl KeyList {
    /// Number of strings.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// String `i`.
    pub(super) fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1],
        };
        self.text.get(start..end)
    }

    /// Appends `s`.
    pub(super) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    /// Room for `n` more strings of `bytes` bytes in all.
    pub(super) fn reserve(&mut self, n: usize, bytes: usize) {
        self.ends.reserve_exact(n);
        self.text.reserve_exact(bytes);
    }

    /// The strings in order.
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Keeps the strings `i` for which `keep(i)` holds, in order.
    pub(super) fn retain_rows(&mut self, keep: impl Fn(usize) -> bool) {
        let mut out = KeyList::default();
        let kept: Vec<usize> = (0..self.len()).filter(|&i| keep(i)).collect();
        let bytes = kept.iter().map(|&i| self.get(i).map_or(0, str::len)).sum();
        out.reserve(kept.len(), bytes);
        for i in kept {
            out.push(self.get(i).unwrap_or_default());
        }
        *self = out;
    }
}

impl fmt::Debug for KeyList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<S> for KeyList {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut out = KeyList::default();
        for s in iter {
            out.push(s.as_ref());
        }
        out.text.shrink_to_fit();
        out.ends.shrink_to_fit();
        out
    }
}

impl Serialize for KeyList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for k in self.iter() {
            seq.serialize_element(k)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for KeyList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = KeyList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyList, A::Error> {
                let mut out = KeyList::default();
                out.ends.reserve_exact(seq.size_hint().unwrap_or(0));
                while let Some(k) = seq.next_element::<std::borrow::Cow<'de, str>>()? {
                    out.push(&k);
                }
                out.text.shrink_to_fit();
                Ok(out)
            }
        }
        d.deserialize_seq(Keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_list_is_the_list_of_its_strings() {
        let strings = ["fact-a", "", "entity-β", "chunk-ccc", ""];
        let list: KeyList = strings.iter().collect();
        assert_eq!(list.len(), strings.len());
        assert!(!list.is_empty() && KeyList::default().is_empty());
        assert_eq!(list.iter().collect::<Vec<_>>(), strings);
        for (i, s) in strings.iter().enumerate() {
            assert_eq!(list.get(i), Some(*s));
        }
        assert_eq!(list.get(strings.len()), None);
        assert_eq!(format!("{list:?}"), format!("{strings:?}"));

        // Serialised as a `Vec<String>` is, and read back from one.
        let owned: Vec<String> = strings.iter().map(|s| s.to_string()).collect();
        let bytes = postcard::to_allocvec(&list).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&owned).unwrap());
        assert_eq!(postcard::from_bytes::<KeyList>(&bytes).unwrap(), list);
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(json, serde_json::to_string(&owned).unwrap());
        assert_eq!(serde_json::from_str::<KeyList>(&json).unwrap(), list);

        let mut kept = list.clone();
        kept.retain_rows(|i| i % 2 == 0);
        assert_eq!(kept.iter().collect::<Vec<_>>(), ["fact-a", "entity-β", ""]);
        let mut grown = KeyList::default();
        grown.reserve(2, 8);
        grown.push("x");
        grown.push("yz");
        assert_eq!(grown.iter().collect::<Vec<_>>(), ["x", "yz"]);
    }
}
