//! [`SharedMap`]: the shared, copy-on-write ordered map of the data model.

use std::fmt;
use std::hash::Hash;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use indexmap::IndexMap;

/// An ordered map shared between its holders: the maps of a [`Checkpoint`](crate::Checkpoint)
/// (`channel_values`, `channel_versions`, `versions_seen`) and of
/// [`CheckpointMetadata`](crate::CheckpointMetadata).
///
/// Cloning is a reference-count increment, so a saver stores what `put` was
/// given and hands it back from `get_tuple` and `list` without copying the
/// maps, and a caller building the next checkpoint from the previous one
/// copies nothing until it changes a map. Reading goes through `Deref` to
/// [`IndexMap`]; any mutable access (`DerefMut`: `insert`, `get_mut`,
/// `shift_remove`, …) first copies the map if another holder shares it
/// ([`Arc::make_mut`]), so no holder ever sees another's change. Entries keep
/// their insertion order; equality compares entries as maps (order aside), as
/// [`IndexMap`]'s does.
///
/// ```
/// use checkpointer::{ChannelValues, Value};
/// let mut a = ChannelValues::new();
/// a.insert("messages".to_owned(), Value::from(vec!["hi"]));
/// let mut b = a.clone(); // shares a's entries
/// assert!(a.ptr_eq(&b));
/// b.insert("step".to_owned(), Value::from(1)); // copies first: a is unchanged
/// assert!(!a.ptr_eq(&b));
/// assert_eq!((a.len(), b.len()), (1, 2));
/// for (channel, value) in &b {
///     assert!(!channel.is_empty() && !value.is_nil());
/// }
/// ```
pub struct SharedMap<K, V>(Arc<IndexMap<K, V>>);

impl<K, V> SharedMap<K, V> {
    /// An empty map (one small allocation for the shared header).
    pub fn new() -> Self {
        SharedMap(Arc::new(IndexMap::new()))
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        SharedMap(Arc::new(IndexMap::with_capacity(n)))
    }

    /// Whether both share one allocation (one was cloned from the other and
    /// neither changed since).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<K: Clone, V: Clone> SharedMap<K, V> {
    /// The map itself, copied only if shared.
    pub fn into_inner(self) -> IndexMap<K, V> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl<K, V> Clone for SharedMap<K, V> {
    fn clone(&self) -> Self {
        SharedMap(Arc::clone(&self.0))
    }
}

impl<K, V> Default for SharedMap<K, V> {
    fn default() -> Self {
        SharedMap::new()
    }
}

impl<K, V> Deref for SharedMap<K, V> {
    type Target = IndexMap<K, V>;
    fn deref(&self) -> &IndexMap<K, V> {
        &self.0
    }
}

impl<K: Clone, V: Clone> DerefMut for SharedMap<K, V> {
    fn deref_mut(&mut self) -> &mut IndexMap<K, V> {
        Arc::make_mut(&mut self.0)
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for SharedMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl<K: Hash + Eq, V: PartialEq> PartialEq for SharedMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || *self.0 == *other.0
    }
}

impl<K: Hash + Eq, V: Eq> Eq for SharedMap<K, V> {}

impl<K, V> From<IndexMap<K, V>> for SharedMap<K, V> {
    fn from(map: IndexMap<K, V>) -> Self {
        SharedMap(Arc::new(map))
    }
}

impl<K: Hash + Eq, V, const N: usize> From<[(K, V); N]> for SharedMap<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        SharedMap(Arc::new(IndexMap::from_iter(entries)))
    }
}

impl<K: Hash + Eq, V> FromIterator<(K, V)> for SharedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        SharedMap(Arc::new(IndexMap::from_iter(iter)))
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Extend<(K, V)> for SharedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        Arc::make_mut(&mut self.0).extend(iter);
    }
}

impl<'a, K, V> IntoIterator for &'a SharedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = indexmap::map::Iter<'a, K, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a, K: Clone, V: Clone> IntoIterator for &'a mut SharedMap<K, V> {
    type Item = (&'a K, &'a mut V);
    type IntoIter = indexmap::map::IterMut<'a, K, V>;
    fn into_iter(self) -> Self::IntoIter {
        Arc::make_mut(&mut self.0).iter_mut()
    }
}

impl<K: Clone, V: Clone> IntoIterator for SharedMap<K, V> {
    type Item = (K, V);
    type IntoIter = indexmap::map::IntoIter<K, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_inner().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_copies_only_when_shared() {
        let mut a: SharedMap<String, i64> = [("x".to_owned(), 1)].into();
        let before = Arc::as_ptr(&a.0);
        a.insert("y".to_owned(), 2); // sole holder: changed in place
        assert_eq!(Arc::as_ptr(&a.0), before);
        let b = a.clone();
        a.insert("z".to_owned(), 3);
        assert!(!a.ptr_eq(&b));
        assert_eq!(b.keys().collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(a.keys().collect::<Vec<_>>(), ["x", "y", "z"]);
    }

    #[test]
    fn equality_is_by_content_and_ignores_order() {
        let a: SharedMap<&str, i64> = [("x", 1), ("y", 2)].into();
        let b: SharedMap<&str, i64> = [("y", 2), ("x", 1)].into();
        assert_eq!(a, b);
        assert_ne!(a, SharedMap::from([("x", 1)]));
        assert_eq!(a.clone().into_inner().len(), 2);
    }
}
