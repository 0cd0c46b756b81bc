//! The shared, copy-on-write storage of lists and maps.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared, copy-on-write vector: the storage of [`Value::Array`](super::Value::Array) and
/// [`Value::Map`](super::Value::Map).
///
/// Cloning is a reference-count increment, so a value held by a saver, a
/// checkpoint and a caller is one allocation. Reading goes through `Deref` to
/// `Vec<T>`; mutable access (`DerefMut`, `iter_mut`, `push`…) first copies the
/// vector if anyone else holds it ([`Arc::make_mut`]), so no holder ever sees
/// another's change.
///
/// ```
/// use checkpointer::Value;
/// let a = Value::from(vec![1_i64, 2]);
/// let mut b = a.clone();
/// if let Value::Array(items) = &mut b {
///     items.push(Value::from(3_i64)); // copies: `a` still holds [1, 2]
/// }
/// assert_eq!(a.as_array().unwrap().len(), 2);
/// assert_eq!(b.as_array().unwrap().len(), 3);
/// ```
pub struct SharedVec<T>(Arc<Shared<T>>);

/// The shared part of a [`SharedVec`]: the elements and a memo of facts
/// derived from them (0 = not known), which any mutable access clears.
struct Shared<T> {
    items: Vec<T>,
    memo: AtomicU64,
}

impl<T: Clone> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            items: self.items.clone(),
            memo: AtomicU64::new(self.memo.load(Ordering::Relaxed)),
        }
    }
}

impl<T> SharedVec<T> {
    /// An empty vector.
    pub fn new() -> Self {
        Vec::new().into()
    }

    /// Whether both share one allocation (cloned from each other).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The memo (0 = unknown). Only `Value`'s size walk writes it.
    pub(crate) fn memo(&self) -> u64 {
        self.0.memo.load(Ordering::Relaxed)
    }

    pub(crate) fn set_memo(&self, memo: u64) {
        self.0.memo.store(memo, Ordering::Relaxed);
    }
}

impl<T: Clone> SharedVec<T> {
    /// The elements as an owned vector, copied only if shared.
    pub fn into_vec(self) -> Vec<T> {
        match Arc::try_unwrap(self.0) {
            Ok(shared) => shared.items,
            Err(arc) => arc.items.clone(),
        }
    }
}

impl<T> Clone for SharedVec<T> {
    fn clone(&self) -> Self {
        SharedVec(Arc::clone(&self.0))
    }
}

impl<T> Default for SharedVec<T> {
    fn default() -> Self {
        SharedVec::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.items.iter()).finish()
    }
}

/// Element by element, as `Vec`'s: a shared list holding a NaN is not equal
/// to itself (no pointer shortcut).
impl<T: PartialEq> PartialEq for SharedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.items == other.0.items
    }
}

impl<T> Deref for SharedVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0.items
    }
}

impl<T: Clone> DerefMut for SharedVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        let shared = Arc::make_mut(&mut self.0);
        *shared.memo.get_mut() = 0;
        &mut shared.items
    }
}

impl<T> From<Vec<T>> for SharedVec<T> {
    fn from(items: Vec<T>) -> Self {
        SharedVec(Arc::new(Shared {
            items,
            memo: AtomicU64::new(0),
        }))
    }
}

impl<T> FromIterator<T> for SharedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<T>>().into()
    }
}

impl<T: Clone> IntoIterator for SharedVec<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a, T> IntoIterator for &'a SharedVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.items.iter()
    }
}

impl<'a, T: Clone> IntoIterator for &'a mut SharedVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref_mut().iter_mut()
    }
}
