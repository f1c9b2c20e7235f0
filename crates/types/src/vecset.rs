//! [`VecSet`]: a sorted set kept in one array, exactly sized while small, and its growth rule
//! ([`reserve_one`]).
//!
//! The sets of source chunks that every extracted entity, relation and graph element carries hold one
//! to a few ids. A `BTreeSet` allocates a whole node for them (~300 bytes for one id); a `VecSet` holds
//! (nearly) exactly its elements. Lookups are binary searches, insertions shift — fine for the small sets it is
//! made for; build a large one with `collect` (one sort) rather than element by element. Up to
//! eight elements the array is exactly sized; past that it grows by doubling, so that a set
//! that does gain many elements one at a time is not reallocated at each.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Up to this many elements a [`VecSet`] keeps its array exactly sized; a larger one grows by doubling.
pub const EXACT_UP_TO: usize = 8;

/// Room in `v` for one more element, by [`VecSet`]'s rule: exactly while `v` is small (most sets of
/// source chunks hold one), amortised past [`EXACT_UP_TO`] (a set that many chunks share is not
/// reallocated at each). For other small sorted arrays that should grow the same way.
pub fn reserve_one<T>(v: &mut Vec<T>) {
    if v.len() < EXACT_UP_TO {
        v.reserve_exact(1);
    } else {
        v.reserve(1);
    }
}

/// A sorted set of distinct elements in one array (exactly sized while small): iteration in ascending order, the
/// `BTreeSet` methods its users need, and the same serialised form as a `BTreeSet` (a sequence in
/// ascending order).
///
/// ```
/// use kgrag_types::VecSet;
///
/// let mut s: VecSet<u32> = [3, 1, 3].into_iter().collect();
/// assert!(s.insert(2));
/// assert!(!s.insert(1));
/// assert_eq!(s.iter().copied().collect::<Vec<_>>(), [1, 2, 3]);
/// assert!(s.contains(&2) && s.remove(&2) && !s.contains(&2));
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VecSet<T>(Vec<T>);

impl<T> Default for VecSet<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: fmt::Debug> fmt::Debug for VecSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.iter()).finish()
    }
}

impl<T> VecSet<T> {
    /// An empty set (no allocation).
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The elements in ascending order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }

    /// The elements in ascending order, as a slice.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// The smallest element.
    pub fn first(&self) -> Option<&T> {
        self.0.first()
    }

    /// The largest element.
    pub fn last(&self) -> Option<&T> {
        self.0.last()
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// Keeps the elements for which `keep` is true.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.0.retain(keep);
        self.0.shrink_to_fit();
    }
}

impl<T: Ord> VecSet<T> {
    fn find<Q: Ord + ?Sized>(&self, value: &Q) -> Result<usize, usize>
    where
        T: Borrow<Q>,
    {
        self.0.binary_search_by(|x| x.borrow().cmp(value))
    }

    /// Adds `value`; false when it was already there.
    pub fn insert(&mut self, value: T) -> bool {
        match self.find(&value) {
            Ok(_) => false,
            Err(i) => {
                reserve_one(&mut self.0);
                self.0.insert(i, value);
                true
            }
        }
    }

    /// Whether `value` is in the set.
    pub fn contains<Q: Ord + ?Sized>(&self, value: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.find(value).is_ok()
    }

    /// The element equal to `value`.
    pub fn get<Q: Ord + ?Sized>(&self, value: &Q) -> Option<&T>
    where
        T: Borrow<Q>,
    {
        self.find(value).ok().map(|i| &self.0[i])
    }

    /// Removes `value`; false when it was not there.
    pub fn remove<Q: Ord + ?Sized>(&mut self, value: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        match self.find(value) {
            Ok(i) => {
                self.0.remove(i);
                self.0.shrink_to_fit();
                true
            }
            Err(_) => false,
        }
    }

    /// Moves every element of `other` into the set, leaving `other` empty.
    pub fn append(&mut self, other: &mut Self) {
        let other = std::mem::take(&mut other.0);
        self.extend(other);
    }

    fn from_unsorted(mut v: Vec<T>) -> Self {
        v.sort_unstable();
        v.dedup();
        v.shrink_to_fit();
        Self(v)
    }
}

impl<T: Ord> FromIterator<T> for VecSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::from_unsorted(iter.into_iter().collect())
    }
}

impl<T: Ord> Extend<T> for VecSet<T> {
    /// Linear in the two sizes (after sorting what is added): the added elements are sorted, then the
    /// two ascending runs merged into one exactly sized array.
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let mut added: Vec<T> = iter.into_iter().collect();
        match added.len() {
            0 => return,
            1 => {
                if let Some(v) = added.pop() {
                    self.insert(v);
                }
                return;
            }
            _ => {}
        }
        if self.0.is_empty() {
            *self = Self::from_unsorted(added);
            return;
        }
        added.sort_unstable();
        added.dedup();
        let old = std::mem::take(&mut self.0);
        let mut out = Vec::with_capacity(old.len() + added.len());
        let (mut a, mut b) = (old.into_iter().peekable(), added.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match x.cmp(y) {
                    std::cmp::Ordering::Less => a.next(),
                    std::cmp::Ordering::Greater => b.next(),
                    std::cmp::Ordering::Equal => {
                        b.next();
                        a.next()
                    }
                },
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.extend(next);
        }
        out.shrink_to_fit();
        self.0 = out;
    }
}

impl<'a, T: Ord + Clone + 'a> Extend<&'a T> for VecSet<T> {
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, iter: I) {
        self.extend(iter.into_iter().cloned());
    }
}

impl<T: Ord, const N: usize> From<[T; N]> for VecSet<T> {
    fn from(values: [T; N]) -> Self {
        values.into_iter().collect()
    }
}

impl<T> IntoIterator for VecSet<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a VecSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T: Serialize> Serialize for VecSet<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter())
    }
}

impl<'de, T: Deserialize<'de> + Ord> Deserialize<'de> for VecSet<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::from_unsorted(Vec::<T>::deserialize(d)?))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn behaves_as_a_btreeset() {
        // A deterministic mix of inserts, removes, extends and appends, against BTreeSet.
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32 % 50
        };
        let mut ours: VecSet<u32> = VecSet::new();
        let mut theirs: BTreeSet<u32> = BTreeSet::new();
        for step in 0..2_000 {
            let v = next();
            match step % 5 {
                0 | 1 => assert_eq!(ours.insert(v), theirs.insert(v)),
                2 => assert_eq!(ours.remove(&v), theirs.remove(&v)),
                3 => {
                    let more = [v, next(), v, next(), next()];
                    ours.extend(more.iter());
                    theirs.extend(more);
                }
                _ => {
                    let mut other: VecSet<u32> = [next(), next()].into();
                    let mut other_b: BTreeSet<u32> = other.iter().copied().collect();
                    ours.append(&mut other);
                    theirs.append(&mut other_b);
                    assert!(other.is_empty());
                }
            }
            assert_eq!(
                ours.iter().copied().collect::<Vec<_>>(),
                theirs.iter().copied().collect::<Vec<_>>()
            );
            assert_eq!(ours.len(), theirs.len());
            assert_eq!(ours.contains(&v), theirs.contains(&v));
            assert_eq!(ours.first(), theirs.first());
            let cap = ours.0.capacity();
            if ours.len() <= EXACT_UP_TO {
                assert_eq!(cap, ours.len(), "exactly sized while small");
            } else {
                assert!(cap < 2 * ours.len() + 2, "{cap} for {}", ours.len());
            }
        }
    }

    #[test]
    fn serialises_as_a_btreeset() {
        let ours: VecSet<String> = ["b", "a", "b"].into_iter().map(String::from).collect();
        let theirs: BTreeSet<String> = ours.iter().cloned().collect();
        let json = serde_json::to_string(&ours).unwrap();
        assert_eq!(json, serde_json::to_string(&theirs).unwrap());
        // Out-of-order or repeated input (not written by a BTreeSet) still gives a set.
        let back: VecSet<String> = serde_json::from_str("[\"c\",\"a\",\"c\"]").unwrap();
        assert_eq!(
            back.iter().map(String::as_str).collect::<Vec<_>>(),
            ["a", "c"]
        );
        let lookup: VecSet<String> = serde_json::from_str(&json).unwrap();
        assert!(lookup.contains("a") && lookup.get("b").is_some() && !lookup.contains("z"));
    }
}
