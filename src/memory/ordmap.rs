//! An ordered map that is a sorted vector while it is small and a `BTreeMap`
//! beyond: the per-thread and per-namespace checkpoint indexes, which hold
//! one or a few entries in most threads. A `BTreeMap` of one entry allocates
//! a whole leaf (room for 11 entries: some 550–720 bytes for these keys); a
//! vector of one, one entry. Past [`SMALL`] entries the map becomes a
//! `BTreeMap` and stays one, so every operation keeps its O(log n).

use std::borrow::Borrow;
use std::collections::btree_map::{self, BTreeMap};
use std::ops::{Bound, RangeBounds};

/// Entries kept in the vector (an insert shifts at most this many).
const SMALL: usize = 8;

#[derive(Debug, Clone)]
pub(super) enum OrdMap<K, V> {
    /// Sorted by key, at most [`SMALL`] entries.
    Small(Vec<(K, V)>),
    Large(BTreeMap<K, V>),
}

impl<K, V> Default for OrdMap<K, V> {
    fn default() -> Self {
        OrdMap::Small(Vec::new())
    }
}

/// Entries in key order (either way round).
pub(super) enum Iter<'a, K, V> {
    Small(std::slice::Iter<'a, (K, V)>),
    Large(btree_map::Range<'a, K, V>),
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next(),
        }
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next_back().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next_back(),
        }
    }
}

impl<K: Ord, V> OrdMap<K, V> {
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn len(&self) -> usize {
        match self {
            OrdMap::Small(v) => v.len(),
            OrdMap::Large(m) => m.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn find<Q: ?Sized + Ord>(v: &[(K, V)], key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        v.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub(super) fn get<Q: ?Sized + Ord>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        match self {
            OrdMap::Small(v) => Self::find(v, key).ok().map(|i| &v[i].1),
            OrdMap::Large(m) => m.get(key),
        }
    }

    pub(super) fn get_mut<Q: ?Sized + Ord>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        match self {
            OrdMap::Small(v) => Self::find(v, key).ok().map(|i| &mut v[i].1),
            OrdMap::Large(m) => m.get_mut(key),
        }
    }

    /// Keeps the entries for which `keep` is true.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        match self {
            OrdMap::Small(v) => v.retain_mut(|(k, v)| keep(k, v)),
            OrdMap::Large(m) => m.retain(|k, v| keep(k, v)),
        }
    }

    pub(super) fn contains_key<Q: ?Sized + Ord>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the replaced value.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            OrdMap::Small(v) => match Self::find(v, &key) {
                Ok(i) => Some(std::mem::replace(&mut v[i].1, value)),
                Err(i) if v.len() < SMALL => {
                    // Exact growth: most of these maps hold one entry.
                    v.reserve_exact(1);
                    v.insert(i, (key, value));
                    None
                }
                Err(_) => {
                    let mut m: BTreeMap<K, V> = std::mem::take(v).into_iter().collect();
                    m.insert(key, value);
                    *self = OrdMap::Large(m);
                    None
                }
            },
            OrdMap::Large(m) => m.insert(key, value),
        }
    }

    pub(super) fn remove<Q: ?Sized + Ord>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        match self {
            OrdMap::Small(v) => Self::find(v, key).ok().map(|i| v.remove(i).1),
            OrdMap::Large(m) => m.remove(key),
        }
    }

    pub(super) fn iter(&self) -> Iter<'_, K, V> {
        match self {
            OrdMap::Small(v) => Iter::Small(v.iter()),
            OrdMap::Large(m) => Iter::Large(m.range::<K, _>(..)),
        }
    }

    pub(super) fn keys(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub(super) fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// The entries within `range`, as `BTreeMap::range` (an empty range
    /// where that one would panic: start after end).
    pub(super) fn range<Q: ?Sized + Ord, R: RangeBounds<Q>>(&self, range: R) -> Iter<'_, K, V>
    where
        K: Borrow<Q>,
    {
        match self {
            OrdMap::Small(v) => {
                let start = match range.start_bound() {
                    Bound::Included(q) => v.partition_point(|(k, _)| k.borrow() < q),
                    Bound::Excluded(q) => v.partition_point(|(k, _)| k.borrow() <= q),
                    Bound::Unbounded => 0,
                };
                let end = match range.end_bound() {
                    Bound::Included(q) => v.partition_point(|(k, _)| k.borrow() <= q),
                    Bound::Excluded(q) => v.partition_point(|(k, _)| k.borrow() < q),
                    Bound::Unbounded => v.len(),
                };
                Iter::Small(v[start..end.max(start)].iter())
            }
            OrdMap::Large(m) => Iter::Large(m.range(range)),
        }
    }
}

/// Entries in key order, by value.
pub(super) enum IntoIter<K, V> {
    Small(std::vec::IntoIter<(K, V)>),
    Large(btree_map::IntoIter<K, V>),
}

impl<K, V> Iterator for IntoIter<K, V> {
    type Item = (K, V);
    fn next(&mut self) -> Option<(K, V)> {
        match self {
            IntoIter::Small(it) => it.next(),
            IntoIter::Large(it) => it.next(),
        }
    }
}

impl<K, V> IntoIterator for OrdMap<K, V> {
    type Item = (K, V);
    type IntoIter = IntoIter<K, V>;
    fn into_iter(self) -> IntoIter<K, V> {
        match self {
            OrdMap::Small(v) => IntoIter::Small(v.into_iter()),
            OrdMap::Large(m) => IntoIter::Large(m.into_iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against `BTreeMap` across the switch, every operation and range.
    #[test]
    fn behaves_as_a_btreemap() {
        let mut ours: OrdMap<u32, u32> = OrdMap::new();
        let mut model = BTreeMap::new();
        let mut x = 7u32;
        for step in 0..400u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345) % 40;
            if step % 3 == 2 {
                assert_eq!(ours.remove(&x), model.remove(&x));
            } else {
                assert_eq!(ours.insert(x, step), model.insert(x, step));
            }
            assert_eq!(ours.len(), model.len());
            assert_eq!(ours.get(&x), model.get(&x));
            assert_eq!(ours.contains_key(&(x + 1)), model.contains_key(&(x + 1)));
            assert!(ours.iter().eq(model.iter()));
            assert!(ours.values().rev().eq(model.values().rev()));
            for (a, b) in [(0, 40), (x, x + 5), (x / 2, x), (5, 5)] {
                let bounds = [Bound::Included(a), Bound::Excluded(a), Bound::Unbounded];
                let ends = [Bound::Included(b), Bound::Excluded(b), Bound::Unbounded];
                for lo in bounds {
                    for hi in ends {
                        if matches!((lo, hi), (Bound::Excluded(p), Bound::Excluded(q)) if p == q) {
                            continue; // BTreeMap panics on this one
                        }
                        assert!(ours.range((lo, hi)).eq(model.range((lo, hi))), "{lo:?} {hi:?}");
                        assert!(ours.range((lo, hi)).rev().eq(model.range((lo, hi)).rev()));
                    }
                }
            }
        }
        assert!(matches!(ours, OrdMap::Large(_)) || model.len() <= SMALL);
    }
}
