//! The shared, copy-on-write storage of lists and maps.
//!
//! One allocation per list: a header (reference count, memo, length,
//! capacity) followed by the elements, behind a thin pointer. `Arc<Vec<T>>`
//! (the former layout) costs two allocations per list, the `Arc`'s and the
//! `Vec`'s, and decoding a checkpoint is mostly allocation (see
//! `docs/performance.md`, *Zero-copy decode*); `Arc<[T]>` would be one, but
//! keeps no room for the memo the size walk shares between the holders of a
//! list, and std offers no safe way to build an `Arc` of a header and a slice
//! of run-time length. This is the crate's one use of `unsafe` for memory
//! layout, kept to this module: every `unsafe` block says why it holds, and
//! the tests below run under Miri (`cargo +nightly miri test --lib shared_vec`).
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{self, AtomicU64, AtomicUsize, Ordering};

use super::deep::drop_bounded;
use super::Value;

/// A shared, copy-on-write vector: the storage of [`Value::Array`](super::Value::Array) and
/// [`Value::Map`](super::Value::Map).
///
/// Cloning is a reference-count increment, so a value held by a saver, a
/// checkpoint and a caller is one allocation, and a list is one allocation
/// in all (its header and elements together). Reading goes through `Deref` to
/// the slice `[T]`; mutable access (`DerefMut` to `[T]`, [`push`](Self::push),
/// [`insert`](Self::insert), [`remove`](Self::remove), …) first copies the
/// elements if anyone else holds them, so no holder ever sees another's
/// change. `push` on a list nobody else holds grows it in place, as
/// `Vec::push` does. For other `Vec` operations, take the elements out with
/// [`into_vec`](Self::into_vec) (no copy when not shared) and convert back
/// with `into()`.
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
pub struct SharedVec<T: 'static> {
    ptr: NonNull<Header>,
    /// Owns `T`s (for drop check and auto traits, which are implemented by
    /// hand below as `Arc`'s are).
    _owns: PhantomData<T>,
}

/// What precedes the elements in the allocation.
#[repr(C)]
struct Header {
    /// How many `SharedVec`s point here.
    count: AtomicUsize,
    /// Facts derived from the elements (0 = not known); any mutable access
    /// clears it. Only `Value`'s size walk writes it.
    memo: AtomicU64,
    /// Initialised elements (changed only by the one holder of a unique list).
    len: usize,
    /// Elements the allocation has room for.
    cap: usize,
}

// SAFETY: a `SharedVec<T>` is a shared handle to `T`s, like `Arc<[T]>`: sending
// one to another thread lets that thread reach the `T`s by reference (`Sync`)
// and drop them (`Send`); the header is only changed through atomics or by the
// one holder of a unique list.
unsafe impl<T: 'static + Send + Sync> Send for SharedVec<T> {}
// SAFETY: as for `Send`: `&SharedVec<T>` only hands out `&T` and clones.
unsafe impl<T: 'static + Send + Sync> Sync for SharedVec<T> {}

/// The most references a list may have before the process aborts (as `Arc`'s
/// limit: a reference count that could wrap would free a list still in use).
const MAX_COUNT: usize = isize::MAX as usize;

impl<T: 'static> SharedVec<T> {
    /// Where the elements start, from the start of the allocation.
    const OFFSET: usize = {
        let align = std::mem::align_of::<T>();
        let size = std::mem::size_of::<Header>();
        size.div_ceil(align) * align
    };

    /// The layout of an allocation with room for `cap` elements.
    fn layout(cap: usize) -> Layout {
        let elements = Layout::array::<T>(cap).expect("SharedVec capacity overflow");
        let (layout, offset) = Layout::new::<Header>()
            .extend(elements)
            .expect("SharedVec capacity overflow");
        debug_assert_eq!(offset, Self::OFFSET);
        layout
    }

    /// An empty vector.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty vector with room for `cap` elements: pushing that many
    /// allocates nothing more.
    pub fn with_capacity(cap: usize) -> Self {
        let layout = Self::layout(cap);
        // SAFETY: the layout is never zero-sized (it holds the header).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh allocation, aligned for `Header` and large
        // enough for it (the layout starts with one).
        unsafe {
            ptr.as_ptr().write(Header {
                count: AtomicUsize::new(1),
                memo: AtomicU64::new(0),
                len: 0,
                cap,
            });
        }
        SharedVec {
            ptr,
            _owns: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: `ptr` points to a live header for as long as `self` holds
        // its reference.
        unsafe { self.ptr.as_ref() }
    }

    /// The header, for the one holder of a unique list.
    fn header_mut(&mut self) -> &mut Header {
        debug_assert!(self.is_unique());
        // SAFETY: callers hold the only reference (`is_unique`), so nothing
        // else reads or writes the header meanwhile.
        unsafe { self.ptr.as_mut() }
    }

    /// The first element's address (valid for `cap` elements).
    fn data(&self) -> *mut T {
        // SAFETY: `OFFSET` is inside the allocation (the layout extends the
        // header by the elements at that offset).
        unsafe { self.ptr.as_ptr().cast::<u8>().add(Self::OFFSET).cast::<T>() }
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.header().len
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many elements fit without reallocating.
    pub fn capacity(&self) -> usize {
        self.header().cap
    }

    /// The elements.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` elements are initialised, and no holder
        // changes them while others hold the list.
        unsafe { std::slice::from_raw_parts(self.data(), self.len()) }
    }

    /// Whether both share one allocation (cloned from each other).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    /// The elements for changing in place, if this is their only holder
    /// (never a copy; the memo is left as it is, for a list being dropped).
    pub(super) fn unique_mut(&mut self) -> Option<&mut [T]> {
        // SAFETY: the list is unique, and its first `len` elements are
        // initialised.
        self.is_unique()
            .then(|| unsafe { std::slice::from_raw_parts_mut(self.data(), self.len()) })
    }

    /// Whether this is the only holder. `Acquire` pairs with the `Release`
    /// of other holders' drops, so their reads of the elements happen before
    /// this holder's writes.
    fn is_unique(&self) -> bool {
        self.header().count.load(Ordering::Acquire) == 1
    }

    /// The memo (0 = unknown). Only `Value`'s size walk writes it.
    pub(crate) fn memo(&self) -> u64 {
        self.header().memo.load(Ordering::Relaxed)
    }

    pub(crate) fn set_memo(&self, memo: u64) {
        self.header().memo.store(memo, Ordering::Relaxed);
    }

    /// Grows a unique list so that it holds at least `needed` elements.
    fn grow_unique(&mut self, needed: usize) {
        let cap = self.capacity();
        let new_cap = needed.max(cap.saturating_mul(2)).max(4);
        let old = Self::layout(cap);
        let new = Self::layout(new_cap);
        // SAFETY: the list is unique (callers check), so nobody else holds
        // `ptr`, which `alloc` returned with layout `old`; `new` has the same
        // alignment and a non-zero size. Moving `T`s bytewise is a valid move.
        let raw = unsafe { alloc::realloc(self.ptr.as_ptr().cast::<u8>(), old, new.size()) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else {
            alloc::handle_alloc_error(new)
        };
        self.ptr = ptr;
        self.header_mut().cap = new_cap;
    }

    /// Appends `value` to a list made by [`with_capacity`](Self::with_capacity)
    /// and not yet full nor cloned (the decoder's fast path: no `T: Clone`,
    /// no growth).
    ///
    /// # Panics
    /// When the list is full or shared.
    #[inline]
    pub(crate) fn push_reserved(&mut self, value: T) {
        assert!(
            self.len() < self.capacity() && self.is_unique(),
            "SharedVec::push_reserved: no reserved room"
        );
        self.push_unique(value);
    }

    /// Appends `value` to a unique list with room for it.
    #[inline]
    fn push_unique(&mut self, value: T) {
        let len = self.len();
        assert!(len < self.capacity());
        // SAFETY: `len < cap`, so the slot is inside the allocation and not
        // initialised; the list is unique.
        unsafe { self.data().add(len).write(value) };
        self.header_mut().len = len + 1;
    }
}

impl<T: 'static + Clone> SharedVec<T> {
    /// Makes this the only holder (copying the elements, with room for
    /// `extra` more, if others hold them) and clears the memo.
    fn unique(&mut self, extra: usize) {
        if !self.is_unique() {
            let mut copy = SharedVec::with_capacity(self.len() + extra);
            for item in self.as_slice() {
                // A panicking clone leaves `copy` with what it holds so far.
                copy.push_unique(item.clone());
            }
            *self = copy;
        }
        *self.header_mut().memo.get_mut() = 0;
    }

    /// The elements, for changing in place (copied first if shared).
    pub fn make_mut(&mut self) -> &mut [T] {
        self.unique(0);
        // SAFETY: the list is unique, and its first `len` elements are
        // initialised.
        unsafe { std::slice::from_raw_parts_mut(self.data(), self.len()) }
    }

    /// Appends an element.
    pub fn push(&mut self, value: T) {
        self.reserve(1);
        self.push_unique(value);
    }

    /// Makes room for `additional` more elements (and makes the list unique).
    pub fn reserve(&mut self, additional: usize) {
        self.unique(additional);
        let needed = self.len().checked_add(additional).expect("SharedVec capacity overflow");
        if needed > self.capacity() {
            self.grow_unique(needed);
        }
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        self.unique(0);
        let len = self.len() - 1;
        self.header_mut().len = len;
        // SAFETY: the element at `len` was initialised and is no longer
        // counted, so it is read out exactly once.
        Some(unsafe { self.data().add(len).read() })
    }

    /// Inserts an element at `index`, shifting the later ones.
    ///
    /// # Panics
    /// When `index > len`.
    pub fn insert(&mut self, index: usize, value: T) {
        let len = self.len();
        assert!(index <= len, "insertion index {index} is out of bounds (len {len})");
        self.reserve(1);
        // SAFETY: `len < cap` after `reserve`; moving `len - index` elements
        // one slot up stays inside the allocation, then the freed slot is
        // written. Nothing in between can panic.
        unsafe {
            let at = self.data().add(index);
            ptr::copy(at, at.add(1), len - index);
            at.write(value);
        }
        self.header_mut().len = len + 1;
    }

    /// Removes and returns the element at `index`, shifting the later ones.
    ///
    /// # Panics
    /// When `index >= len`.
    pub fn remove(&mut self, index: usize) -> T {
        let len = self.len();
        assert!(index < len, "removal index {index} is out of bounds (len {len})");
        self.unique(0);
        // SAFETY: `index < len`: the element is read out once, and the later
        // ones move one slot down over it; the length then stops counting
        // the last slot.
        let value = unsafe {
            let at = self.data().add(index);
            let value = at.read();
            ptr::copy(at.add(1), at, len - index - 1);
            value
        };
        self.header_mut().len = len - 1;
        value
    }

    /// Keeps the first `len` elements and drops the rest.
    pub fn truncate(&mut self, len: usize) {
        let old = self.len();
        if len >= old {
            return;
        }
        self.unique(0);
        self.header_mut().len = len;
        // SAFETY: the elements `len..old` were initialised and are no longer
        // counted (set first, so a panicking drop cannot drop them twice).
        unsafe { drop_elements(ptr::slice_from_raw_parts_mut(self.data().add(len), old - len)) };
    }

    /// Drops every element.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the elements for which `keep` is true, in order.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        let mut items = std::mem::take(self).into_vec();
        items.retain(keep);
        *self = items.into();
    }

    /// The elements as an owned vector, copied only if shared.
    pub fn into_vec(mut self) -> Vec<T> {
        if !self.is_unique() {
            return self.as_slice().to_vec();
        }
        let len = self.len();
        let mut items = Vec::with_capacity(len);
        // SAFETY: the list is unique; its `len` elements move into `items`'
        // fresh buffer and stop being counted here, so each is dropped once.
        unsafe {
            ptr::copy_nonoverlapping(self.data(), items.as_mut_ptr(), len);
            self.header_mut().len = 0;
            items.set_len(len);
        }
        items
    }
}

impl<T: 'static> Drop for SharedVec<T> {
    fn drop(&mut self) {
        // The last holder (nearly always, for a decoded value being dropped)
        // skips the atomic decrement: with the only handle in hand, no other
        // can appear meanwhile. `Acquire` pairs with the `Release` of every
        // other holder's drop, as `Arc`'s fence does.
        if self.header().count.load(Ordering::Acquire) != 1 {
            if self.header().count.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            atomic::fence(Ordering::Acquire);
        }
        let (len, cap) = (self.len(), self.capacity());
        // SAFETY: this was the last holder: the `len` elements are dropped
        // once, then the allocation is freed with the layout it was made with.
        unsafe {
            drop_elements(ptr::slice_from_raw_parts_mut(self.data(), len));
            alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), Self::layout(cap));
        }
    }
}

/// Drops `items` in place. The elements of a list or map of [`Value`]s go
/// through [`drop_bounded`], so that a value nested a million levels deep
/// drops without recursing a million times (see `deep`); others are dropped
/// as a slice is. (Why `T: 'static`: the type test, which the compiler
/// resolves per `T`, leaving one of the three branches.)
///
/// # Safety
/// `items` points to initialised elements that nothing uses or drops again.
unsafe fn drop_elements<T: 'static>(items: *mut [T]) {
    if TypeId::of::<T>() == TypeId::of::<Value>() {
        // SAFETY: `T` is `Value` (the same type id): the cast changes no
        // layout; the caller's guarantee passes on.
        let values = unsafe { &mut *(items as *mut [Value]) };
        drop_bounded(values, |values| unsafe { ptr::drop_in_place(values as *mut [Value]) });
    } else if TypeId::of::<T>() == TypeId::of::<(Value, Value)>() {
        // SAFETY: as above, for the entries of a map.
        let entries = unsafe { &mut *(items as *mut [(Value, Value)]) };
        drop_bounded(entries, |entries| unsafe {
            ptr::drop_in_place(entries as *mut [(Value, Value)])
        });
    } else {
        // SAFETY: the caller's guarantee.
        unsafe { ptr::drop_in_place(items) }
    }
}

impl<T: 'static> Clone for SharedVec<T> {
    #[inline]
    fn clone(&self) -> Self {
        if self.header().count.fetch_add(1, Ordering::Relaxed) > MAX_COUNT {
            std::process::abort();
        }
        SharedVec {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T: 'static> Default for SharedVec<T> {
    fn default() -> Self {
        SharedVec::new()
    }
}

impl<T: 'static + fmt::Debug> fmt::Debug for SharedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// Element by element, as `Vec`'s: a shared list holding a NaN is not equal
/// to itself (no pointer shortcut).
impl<T: 'static + PartialEq> PartialEq for SharedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: 'static> Deref for SharedVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: 'static + Clone> DerefMut for SharedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.make_mut()
    }
}

impl<T: 'static> AsRef<[T]> for SharedVec<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: 'static> From<Vec<T>> for SharedVec<T> {
    fn from(mut items: Vec<T>) -> Self {
        let len = items.len();
        let mut list = SharedVec::with_capacity(len);
        // SAFETY: `list` is fresh with room for `len`; the elements move out
        // of `items`, which then counts none, so each is dropped once.
        unsafe {
            ptr::copy_nonoverlapping(items.as_ptr(), list.data(), len);
            items.set_len(0);
        }
        list.header_mut().len = len;
        list
    }
}

impl<T: 'static + Clone> From<&[T]> for SharedVec<T> {
    fn from(items: &[T]) -> Self {
        items.iter().cloned().collect()
    }
}

impl<T: 'static + Clone> Extend<T> for SharedVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for item in iter {
            self.push(item);
        }
    }
}

impl<T: 'static> FromIterator<T> for SharedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<T>>().into()
    }
}

impl<T: 'static + Clone> IntoIterator for SharedVec<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a, T: 'static> IntoIterator for &'a SharedVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<'a, T: 'static + Clone> IntoIterator for &'a mut SharedVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.make_mut().iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Counts its drops, to check each element is dropped exactly once.
    #[derive(Clone, Debug, PartialEq)]
    struct Tracked(u32, Arc<()>);

    fn tracked(n: u32, token: &Arc<()>) -> Vec<Tracked> {
        (0..n).map(|i| Tracked(i, Arc::clone(token))).collect()
    }

    fn ids(v: &SharedVec<Tracked>) -> Vec<u32> {
        v.iter().map(|t| t.0).collect()
    }

    #[test]
    fn one_allocation_shared_and_copied_on_write() {
        let token = Arc::new(());
        let a: SharedVec<Tracked> = tracked(3, &token).into();
        assert_eq!(Arc::strong_count(&token), 4);
        let mut b = a.clone();
        assert!(a.ptr_eq(&b));
        a.set_memo(7);
        assert_eq!(b.memo(), 7, "the memo is shared");
        b.push(Tracked(3, Arc::clone(&token)));
        assert!(!a.ptr_eq(&b));
        assert_eq!(b.memo(), 0, "a change clears the memo");
        assert_eq!(a.memo(), 7);
        assert_eq!(ids(&a), [0, 1, 2]);
        assert_eq!(ids(&b), [0, 1, 2, 3]);
        b[0].0 = 9;
        assert_eq!(ids(&b), [9, 1, 2, 3]);
        drop((a, b));
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn mutations_in_place_and_when_shared() {
        let token = Arc::new(());
        for shared in [false, true] {
            let mut v = SharedVec::with_capacity(1);
            let keep = shared.then(|| v.clone());
            for t in tracked(10, &token) {
                v.push(t);
            }
            assert_eq!(v.len(), 10);
            assert!(v.capacity() >= 10);
            assert_eq!(v.pop().map(|t| t.0), Some(9));
            v.insert(0, Tracked(100, Arc::clone(&token)));
            v.insert(v.len(), Tracked(101, Arc::clone(&token)));
            assert_eq!(v.remove(1).0, 0);
            assert_eq!(ids(&v), [100, 1, 2, 3, 4, 5, 6, 7, 8, 101]);
            let other = v.clone();
            v.truncate(4);
            assert_eq!(ids(&v), [100, 1, 2, 3]);
            assert_eq!(other.len(), 10);
            v.retain(|t| t.0 % 2 == 1);
            assert_eq!(ids(&v), [1, 3]);
            v.extend(tracked(2, &token));
            assert_eq!(ids(&v), [1, 3, 0, 1]);
            assert_eq!(v.clone().into_vec().len(), 4);
            assert_eq!(v.clone().into_iter().map(|t| t.0).collect::<Vec<_>>(), [1, 3, 0, 1]);
            for t in &mut v {
                t.0 += 1;
            }
            assert_eq!(ids(&v), [2, 4, 1, 2]);
            v.clear();
            assert!(v.is_empty());
            assert_eq!(keep.map(|k| k.len()), shared.then_some(0));
            drop((v, other));
            assert_eq!(Arc::strong_count(&token), 1);
        }
    }

    #[test]
    fn threads_share_and_drop() {
        let token = Arc::new(());
        let v: SharedVec<Tracked> = tracked(50, &token).into();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let v = v.clone();
                std::thread::spawn(move || {
                    let mut mine = v.clone();
                    mine.push(mine[0].clone());
                    (v.len(), mine.len())
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), (50, 51));
        }
        drop(v);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn zero_sized_and_over_aligned_elements() {
        let mut units: SharedVec<()> = SharedVec::new();
        units.push(());
        units.extend([(), ()]);
        assert_eq!(units.len(), 3);
        #[derive(Clone, Copy, PartialEq, Debug)]
        #[repr(align(64))]
        struct Wide(u8);
        let mut wide: SharedVec<Wide> = vec![Wide(1), Wide(2)].into();
        wide.push(Wide(3));
        assert_eq!(wide.as_ptr() as usize % 64, 0);
        assert_eq!(&*wide, &[Wide(1), Wide(2), Wide(3)]);
        assert_eq!(SharedVec::<Wide>::default().len(), 0);
        assert_eq!(format!("{:?}", SharedVec::from(&[1, 2][..])), "[1, 2]");
    }
}
